//! How a one-way stream is cut into messages: a length prefix, a line terminator, or a fixed
//! size. [`Counter`] counts the whole messages in bytes fed in any pieces (no copy, constant
//! memory); [`Framing::message`] builds the message a sender writes.
//!
//! Rules:
//! 1. A length prefix (`u8`, `u16be`, `u16le`, `u32be`, `u32le`) gives the length of the body
//!    that follows it, not counting itself. A body longer than [`MAX_MESSAGE`] is an error
//!    naming the stream byte where its prefix starts: the stream is not in this framing.
//! 2. A line ends at its terminator (`line`: `\n`; `crlf`: `\r\n`), which may arrive split
//!    across two pieces.
//! 3. `fixed`: every message is the same number of bytes.
//! 4. A message a sender writes is `size` bytes on the stream, its framing included: a
//!    prefix and `size − width` bytes of body, or `size − terminator` letters and the
//!    terminator, or `size` letters. The body is lower-case letters, never the terminator.

use serde::Serialize;

/// Largest message body a length prefix may announce.
pub const MAX_MESSAGE: u64 = 64 << 20;

/// A stream's framing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Framing {
    /// A `width`-byte length prefix, big- or little-endian, then the body (rule 1).
    Prefix { width: u8, big_endian: bool },
    /// A line ending in `\n` (`crlf`: `\r\n`) (rule 2).
    Line { crlf: bool },
    /// Every message `size` bytes (rule 3).
    Fixed { size: u32 },
}

/// The names `--framing` accepts.
pub const FRAMINGS: &[&str] = &[
    "u8", "u16be", "u16le", "u32be", "u32le", "line", "crlf", "fixed",
];

impl Framing {
    /// `name` as `--framing` spells it; `size` is the message size `fixed` needs.
    pub fn parse(name: &str, size: Option<u64>) -> Result<Framing, String> {
        let prefix = |width, big_endian| Ok(Framing::Prefix { width, big_endian });
        match name {
            "u8" => prefix(1, true),
            "u16be" => prefix(2, true),
            "u16le" => prefix(2, false),
            "u32be" => prefix(4, true),
            "u32le" => prefix(4, false),
            "line" => Ok(Framing::Line { crlf: false }),
            "crlf" => Ok(Framing::Line { crlf: true }),
            "fixed" => match size {
                Some(s) if (1..=MAX_MESSAGE).contains(&s) => Ok(Framing::Fixed { size: s as u32 }),
                Some(s) => Err(format!("--size must be from 1 byte to 64MiB, not {s}")),
                None => Err("needs --size (the bytes of every message)".into()),
            },
            other => Err(format!(
                "unknown framing `{other}` (one of: {})",
                FRAMINGS.join(", ")
            )),
        }
    }

    /// Its name, as `--framing` spells it.
    pub fn name(&self) -> &'static str {
        match *self {
            Framing::Prefix { width: 1, .. } => "u8",
            Framing::Prefix {
                width: 2,
                big_endian: true,
            } => "u16be",
            Framing::Prefix { width: 2, .. } => "u16le",
            Framing::Prefix {
                big_endian: true, ..
            } => "u32be",
            Framing::Prefix { .. } => "u32le",
            Framing::Line { crlf: false } => "line",
            Framing::Line { crlf: true } => "crlf",
            Framing::Fixed { .. } => "fixed",
        }
    }

    /// Bytes of framing in each message (prefix or terminator).
    fn overhead(&self) -> u64 {
        match *self {
            Framing::Prefix { width, .. } => u64::from(width),
            Framing::Line { crlf } => 1 + u64::from(crlf),
            Framing::Fixed { .. } => 0,
        }
    }

    /// One message of `size` bytes on the stream, framing included (rule 4).
    pub fn message(&self, size: u64) -> Result<Vec<u8>, String> {
        if let Framing::Fixed { size: fixed } = *self {
            if size != u64::from(fixed) {
                return Err(format!("`fixed` framing is {fixed} bytes, not {size}"));
            }
        }
        let overhead = self.overhead();
        if size < overhead.max(1) || size > MAX_MESSAGE {
            return Err(format!(
                "--size must be from {} bytes to 64MiB with `{}` framing (its framing takes \
                 {overhead}), not {size}",
                overhead.max(1),
                self.name()
            ));
        }
        let body = size - overhead;
        if let Framing::Prefix { width, .. } = *self {
            let max = if width >= 4 {
                u64::MAX
            } else {
                (1u64 << (8 * width)) - 1
            };
            if body > max {
                return Err(format!(
                    "a {width}-byte prefix counts at most {max} bytes, and --size {size} leaves \
                     {body} of body"
                ));
            }
        }
        let mut out = Vec::with_capacity(size as usize);
        if let Framing::Prefix { width, big_endian } = *self {
            let be = body.to_be_bytes();
            let mut p = be[8 - width as usize..].to_vec();
            if !big_endian {
                p.reverse();
            }
            out.extend_from_slice(&p);
        }
        out.extend((0..body).map(|i| b'a' + (i % 26) as u8));
        if let Framing::Line { crlf } = *self {
            if crlf {
                out.push(b'\r');
            }
            out.push(b'\n');
        }
        Ok(out)
    }
}

/// Whole messages in a stream fed in pieces.
#[derive(Clone, Debug)]
pub struct Counter {
    framing: Framing,
    /// Stream bytes fed so far.
    offset: u64,
    /// Prefix bytes of the message in progress read so far, and their value (rule 1).
    header_read: u8,
    header: u64,
    /// Stream offset where the message in progress started.
    started: u64,
    /// Body bytes still to come of the message in progress (rule 1), or bytes of the fixed
    /// message in progress (rule 3).
    remaining: u64,
    /// The last byte fed was `\r` (rule 2).
    after_cr: bool,
    /// Whole messages so far.
    pub messages: u64,
}

impl Counter {
    pub fn new(framing: Framing) -> Counter {
        Counter {
            framing,
            offset: 0,
            header_read: 0,
            header: 0,
            started: 0,
            remaining: 0,
            after_cr: false,
            messages: 0,
        }
    }

    /// Stream bytes fed so far.
    pub fn bytes(&self) -> u64 {
        self.offset
    }

    /// Feeds the next bytes of the stream; counts the messages they complete.
    pub fn feed(&mut self, mut bytes: &[u8]) -> Result<(), String> {
        match self.framing {
            Framing::Fixed { size } => {
                let total = self.offset + bytes.len() as u64;
                self.messages = total / u64::from(size);
                self.offset = total;
            }
            Framing::Line { crlf } => {
                for &b in bytes {
                    if b == b'\n' && (!crlf || self.after_cr) {
                        self.messages += 1;
                    }
                    self.after_cr = b == b'\r';
                }
                self.offset += bytes.len() as u64;
            }
            Framing::Prefix { width, big_endian } => {
                while !bytes.is_empty() {
                    if self.header_read < width {
                        if self.header_read == 0 {
                            self.started = self.offset;
                        }
                        let b = u64::from(bytes[0]);
                        self.header = if big_endian {
                            (self.header << 8) | b
                        } else {
                            self.header | (b << (8 * self.header_read))
                        };
                        self.header_read += 1;
                        bytes = &bytes[1..];
                        self.offset += 1;
                        if self.header_read == width {
                            if self.header > MAX_MESSAGE {
                                return Err(format!(
                                    "the {} prefix at stream byte {} announces {} bytes, over \
                                     the 64MiB limit: the stream is not in this framing",
                                    self.framing.name(),
                                    self.started,
                                    self.header
                                ));
                            }
                            self.remaining = self.header;
                            self.header = 0;
                            if self.remaining == 0 {
                                self.header_read = 0;
                                self.messages += 1;
                            }
                        }
                        continue;
                    }
                    let take = self.remaining.min(bytes.len() as u64);
                    bytes = &bytes[take as usize..];
                    self.offset += take;
                    self.remaining -= take;
                    if self.remaining == 0 {
                        self.header_read = 0;
                        self.messages += 1;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Bytes written as text with C escapes: `\r`, `\n`, `\t`, `\0`, `\\`, `\xNN`. An unknown or
/// cut escape is an error naming its character position.
pub fn unescape(text: &str) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(text.len());
    let mut chars = text.char_indices();
    while let Some((at, c)) = chars.next() {
        if c != '\\' {
            let mut b = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
            continue;
        }
        let byte = match chars.next().map(|(_, e)| e) {
            Some('r') => b'\r',
            Some('n') => b'\n',
            Some('t') => b'\t',
            Some('0') => 0,
            Some('\\') => b'\\',
            Some('x') => {
                let hex: String = chars.by_ref().take(2).map(|(_, h)| h).collect();
                u8::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 2)
                    .ok_or_else(|| {
                        format!(
                            "character {}: `\\x` needs two hex digits, not `{hex}`",
                            at + 1
                        )
                    })?
            }
            Some(e) => {
                return Err(format!(
                    "character {}: unknown escape `\\{e}` (known: \\r \\n \\t \\0 \\\\ \\xNN)",
                    at + 1
                ))
            }
            None => return Err(format!("character {}: a lone `\\` at the end", at + 1)),
        };
        out.push(byte);
    }
    Ok(out)
}
