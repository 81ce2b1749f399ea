//! One RESP value (the Redis protocol): RESP2 and RESP3.
//!
//! 1. A value starts with a type byte and a line ending `\r\n`: `+` simple string, `-` error,
//!    `:` integer, `_` null, `#` boolean, `,` double, `(` big number.
//! 2. `$` bulk string, `!` bulk error, `=` verbatim string: a length line, that many bytes,
//!    `\r\n`. `$-1` is the RESP2 null.
//! 3. `*` array, `~` set, `>` push: a count, then that many values (`*-1` is the null array);
//!    `%` map: a count of pairs; `|` attribute: a map of pairs and then the value it annotates.
//! 4. Anything else is an error (no inline commands, no streamed strings), as is nesting deeper
//!    than 128 or a declared length above `max_response`.

use memchr::memchr;

use super::{too_large, Poll};

const MAX_DEPTH: usize = 128;

#[derive(Debug, Default)]
pub(crate) struct RespState {
    /// Start of the next value's type byte.
    pos: usize,
    /// Values still to read in each open aggregate, innermost last.
    open: Vec<u64>,
    /// How far the search for the current line's end has got.
    scanned: usize,
}

fn show(b: u8) -> String {
    if b.is_ascii_graphic() {
        format!("`{}`", b as char)
    } else {
        format!("byte 0x{b:02x}")
    }
}

fn is_int_text(line: &[u8]) -> bool {
    let digits = line
        .strip_prefix(b"-")
        .or_else(|| line.strip_prefix(b"+"))
        .unwrap_or(line);
    !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
}

fn parse_int(line: &[u8]) -> Option<i64> {
    if !is_int_text(line) {
        return None;
    }
    std::str::from_utf8(line).ok()?.parse().ok()
}

impl RespState {
    pub(crate) fn poll(&mut self, buf: &[u8], max: usize) -> Result<Poll, String> {
        loop {
            let pos = self.pos;
            let Some(&kind) = buf.get(pos) else {
                return Ok(Poll::Need);
            };
            let from = self.scanned.max(pos + 1).min(buf.len());
            let Some(lf) = memchr(b'\n', &buf[from..]).map(|i| from + i) else {
                self.scanned = buf.len();
                return Ok(Poll::Need);
            };
            self.scanned = lf;
            if lf - 1 < pos + 1 || buf[lf - 1] != b'\r' {
                return Err(format!("RESP line at byte {pos} ends with a bare `\\n`"));
            }
            let line = &buf[pos + 1..lf - 1];
            let next = lf + 1;
            let bad = |what: &str| {
                Err(format!(
                    "RESP {what} at byte {pos}: `{}`",
                    String::from_utf8_lossy(&line[..line.len().min(40)])
                ))
            };
            let end = match kind {
                b'+' | b'-' => next,
                b':' if parse_int(line).is_some() => next,
                b'(' if is_int_text(line) => next,
                b':' | b'(' => return bad("bad integer"),
                b'_' if line.is_empty() => next,
                b'_' => return bad("null with a payload"),
                b'#' if line == b"t" || line == b"f" => next,
                b'#' => return bad("bad boolean"),
                b',' if !line.is_empty()
                    && line.iter().all(|c| b"0123456789+-.eEinfa".contains(c)) =>
                {
                    next
                }
                b',' => return bad("bad double"),
                b'$' | b'!' | b'=' => {
                    let len = match parse_int(line) {
                        Some(-1) if kind == b'$' => -1,
                        Some(n) if n >= 0 => n,
                        _ => return bad("bad length"),
                    };
                    if len < 0 {
                        next
                    } else {
                        let total = (next as u64).saturating_add(len as u64 + 2);
                        if total > max as u64 {
                            return Err(too_large(total.min(usize::MAX as u64) as usize, max));
                        }
                        let total = total as usize;
                        if buf.len() < total {
                            return Ok(Poll::Need);
                        }
                        if &buf[total - 2..total] != b"\r\n" {
                            return bad("bulk string not followed by \\r\\n");
                        }
                        total
                    }
                }
                b'*' | b'~' | b'>' | b'%' | b'|' => {
                    let count = match parse_int(line) {
                        Some(-1) if kind == b'*' => 0,
                        Some(n) if n >= 0 => n as u64,
                        _ => return bad("bad count"),
                    };
                    let items = match kind {
                        b'%' => count.saturating_mul(2),
                        b'|' => count.saturating_mul(2).saturating_add(1),
                        _ => count,
                    };
                    if items > max as u64 {
                        return Err(too_large(items.min(usize::MAX as u64) as usize, max));
                    }
                    if items > 0 {
                        if self.open.len() >= MAX_DEPTH {
                            return Err(format!(
                                "RESP nested deeper than {MAX_DEPTH} at byte {pos}"
                            ));
                        }
                        self.open.push(items);
                        self.pos = next;
                        continue;
                    }
                    next
                }
                other => {
                    return Err(format!("{} at byte {pos} is not a RESP type", show(other)));
                }
            };
            self.pos = end;
            loop {
                match self.open.last_mut() {
                    None => return Ok(Poll::Complete(end)),
                    Some(left) => {
                        *left -= 1;
                        if *left > 0 {
                            break;
                        }
                        self.open.pop();
                    }
                }
            }
        }
    }
}
