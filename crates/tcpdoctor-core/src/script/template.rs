//! Request templates: the bytes of a request with holes for variables.
//!
//! A template is text (or hex digits) with placeholders in braces:
//! 1. `{name}`: a variable from `[vars]`, a capture, or a `for_each` loop variable;
//! 2. `{conn}`: the connection number; `{i}`: the iteration of the repeated part (from 0);
//! 3. `{random:N}`: N random letters and digits, drawn from the connection's seeded generator
//!    (so a run repeats exactly with the same `--seed`);
//! 4. `{body}`: writes nothing; marks where the request's header ends (`--split-writes header`);
//! 5. `{{` and `}}`: literal braces;
//! 6. `{f(x, …)}`: a computed value (`{hex(sha1(concat(challenge, " ", secret)))}`), compiled
//!    here into an expression tree (`expr`, `functions`); `{env:NAME}`: the environment, as the
//!    shell read it at load.
//!
//! Text templates read the escapes `\r \n \t \0 \\ \xNN` themselves, so a TOML literal string
//! (`'GET\r\n'`) means the same as a basic one (`"GET\r\n"`) and `\xNN` is one raw byte.

use super::expr::{self, EnvLookup, Expr, Scope};
use super::functions::push_decimal;
use crate::impair::SplitMix64;

/// Variables a template may not be named after, because templates give them a meaning.
pub(crate) const RESERVED: &[&str] = &["conn", "i", "random", "body"];

/// The most random bytes one placeholder may ask for.
pub(crate) const MAX_RANDOM: u64 = 64 * 1024 * 1024;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    Bytes(Vec<u8>),
    Var(String),
    Conn,
    Iteration,
    Random(usize),
    Body,
    /// A computed value; constant calls were folded into `Bytes` at parse.
    Expr(Box<Expr>),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Template {
    pub(crate) pieces: Vec<Piece>,
    /// Every variable read, also inside expressions, with its byte offset in the template
    /// text (for errors that point at it).
    pub(crate) refs: Vec<(String, usize)>,
    /// The template's text and, per piece, where it was written in it (a `--dry-run` shows
    /// a piece it cannot compute as written).
    pub(crate) source: String,
    pub(crate) spans: Vec<std::ops::Range<usize>>,
}

/// A template error: the byte offset inside the template text, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TemplateError {
    pub(crate) offset: usize,
    pub(crate) message: String,
}

pub(crate) fn err(offset: usize, message: impl Into<String>) -> TemplateError {
    TemplateError {
        offset,
        message: message.into(),
    }
}

impl Template {
    /// Parses a text template (escapes and placeholders); `env` answers `{env:NAME}`.
    pub(crate) fn parse_text(text: &str, env: EnvLookup<'_>) -> Result<Template, TemplateError> {
        parse(text, false, env)
    }

    /// Parses a hex template: pairs of hex digits, whitespace ignored, placeholders allowed.
    pub(crate) fn parse_hex(text: &str, env: EnvLookup<'_>) -> Result<Template, TemplateError> {
        parse(text, true, env)
    }

    /// Names of the variables the template reads, in order (with repeats), also those inside
    /// computed values.
    pub(crate) fn vars(&self) -> impl Iterator<Item = &str> {
        self.refs.iter().map(|(name, _)| name.as_str())
    }

    /// True when every request renders the same bytes: no variable, `{conn}`, `{i}` or
    /// `{random:N}` (so the request can be rendered once, not once per exchange).
    pub(crate) fn is_fixed(&self) -> bool {
        self.pieces
            .iter()
            .all(|p| matches!(p, Piece::Bytes(_) | Piece::Body))
    }

    /// Appends the request to `out`; returns where `{body}` was (counted from the request's
    /// first byte), if the template has it. A computed value that fails (`unhex` of something
    /// that is not hex) writes nothing, and the first such failure is left in `failed`.
    pub(crate) fn render<'s, 'v: 's>(
        &'s self,
        scope: &mut Scope<'_, 'v>,
        out: &mut Vec<u8>,
        failed: &mut Option<String>,
    ) -> Option<usize> {
        let start = out.len();
        let mut body = None;
        for piece in &self.pieces {
            match piece {
                Piece::Bytes(b) => out.extend_from_slice(b),
                Piece::Var(name) => {
                    if let Some(v) = (scope.lookup)(name) {
                        out.extend_from_slice(v);
                    }
                }
                Piece::Conn => push_decimal(scope.conn, out),
                Piece::Iteration => push_decimal(scope.iteration, out),
                Piece::Random(n) => random_text(scope.sources.rng, *n, out),
                Piece::Body => body = Some(out.len() - start),
                Piece::Expr(e) => {
                    let at = out.len();
                    if let Err(message) = e.eval_into(scope, out) {
                        out.truncate(at);
                        failed.get_or_insert(message);
                    }
                }
            }
        }
        body
    }
}

/// Letters and digits only, so random payloads never contain a protocol's terminator.
pub(crate) fn random_text(rng: &mut SplitMix64, n: usize, out: &mut Vec<u8>) {
    const ALPHABET: &[u8; 62] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let start = out.len();
    out.resize(start + n, 0);
    for chunk in out[start..].chunks_mut(10) {
        let mut word = rng.next_u64();
        for b in chunk {
            *b = ALPHABET[(word % 62) as usize];
            word /= 62;
        }
    }
}

fn push_byte(pieces: &mut Vec<Piece>, b: u8) {
    if let Some(Piece::Bytes(bytes)) = pieces.last_mut() {
        bytes.push(b);
    } else {
        pieces.push(Piece::Bytes(vec![b]));
    }
}

fn push_bytes(pieces: &mut Vec<Piece>, bs: &[u8]) {
    for &b in bs {
        push_byte(pieces, b);
    }
}

/// Gives every piece pushed since the last call the span `span`.
fn mark(spans: &mut Vec<std::ops::Range<usize>>, pieces: &[Piece], span: std::ops::Range<usize>) {
    while spans.len() < pieces.len() {
        spans.push(span.clone());
    }
}

fn hex_value(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

fn parse(text: &str, hex: bool, env: EnvLookup<'_>) -> Result<Template, TemplateError> {
    let bytes = text.as_bytes();
    let mut pieces = Vec::new();
    let mut refs = Vec::new();
    let mut pos = 0;
    let mut half: Option<(usize, u8)> = None;
    let mut spans = Vec::new();
    while pos < bytes.len() {
        let from = pos;
        mark(&mut spans, &pieces, from..from);
        let c = bytes[pos];
        if c == b'{' && bytes.get(pos + 1) == Some(&b'{') {
            push_byte(&mut pieces, b'{');
            pos += 2;
        } else if c == b'}' && bytes.get(pos + 1) == Some(&b'}') {
            push_byte(&mut pieces, b'}');
            pos += 2;
        } else if c == b'{' {
            if let Some((at, _)) = half {
                return Err(err(at, "odd number of hex digits before a placeholder"));
            }
            let Some(len) = text[pos..].find('}') else {
                return Err(err(
                    pos,
                    "`{` without a closing `}` (write `{{` for a literal brace)",
                ));
            };
            let inner = &text[pos + 1..pos + len];
            if is_computed(inner) {
                let parsed = expr::parse(text, pos + 1, env)?;
                parsed.expr.vars(&parsed.var_offsets, &mut refs);
                match parsed.expr {
                    Expr::Lit(b) => push_bytes(&mut pieces, &b),
                    Expr::Var(name) => pieces.push(Piece::Var(name)),
                    Expr::Conn => pieces.push(Piece::Conn),
                    Expr::Iteration => pieces.push(Piece::Iteration),
                    call => pieces.push(Piece::Expr(Box::new(call))),
                }
                pos = parsed.end;
                mark(&mut spans, &pieces, from..pos);
                continue;
            }
            let piece = placeholder(inner, pos)?;
            if let Piece::Var(name) = &piece {
                refs.push((
                    name.clone(),
                    pos + 1 + (inner.len() - inner.trim_start().len()),
                ));
            }
            pieces.push(piece);
            pos += len + 1;
            mark(&mut spans, &pieces, from..pos);
        } else if c == b'}' {
            return Err(err(
                pos,
                "`}` without an opening `{` (write `}}` for a literal brace)",
            ));
        } else if hex {
            if c.is_ascii_whitespace() {
                pos += 1;
                continue;
            }
            let Some(v) = hex_value(c) else {
                let ch = text[pos..].chars().next().unwrap_or('?');
                return Err(err(pos, format!("`{ch}` is not a hex digit")));
            };
            match half.take() {
                None => half = Some((pos, v)),
                Some((_, hi)) => push_byte(&mut pieces, hi << 4 | v),
            }
            pos += 1;
        } else if c == b'\\' {
            let (b, used) = escape(bytes, pos)?;
            push_byte(&mut pieces, b);
            pos += used;
        } else {
            let ch_len = text[pos..].chars().next().map_or(1, char::len_utf8);
            push_bytes(&mut pieces, &bytes[pos..pos + ch_len]);
            pos += ch_len;
        }
    }
    if let Some((at, _)) = half {
        return Err(err(at, "odd number of hex digits"));
    }
    mark(&mut spans, &pieces, pos..pos);
    Ok(Template {
        pieces,
        refs,
        source: text.to_string(),
        spans,
    })
}

/// A placeholder that is more than a name, `random:N` or `body`: a call, a quoted string, an
/// `env:` read.
fn is_computed(inner: &str) -> bool {
    inner.contains(['(', '"', '\'']) || inner.trim_start().starts_with("env:")
}

pub(crate) fn escape(bytes: &[u8], pos: usize) -> Result<(u8, usize), TemplateError> {
    let Some(&e) = bytes.get(pos + 1) else {
        return Err(err(pos, "`\\` at the end of the template"));
    };
    Ok(match e {
        b'r' => (b'\r', 2),
        b'n' => (b'\n', 2),
        b't' => (b'\t', 2),
        b'0' => (0, 2),
        b'\\' => (b'\\', 2),
        b'x' => {
            let hi = bytes.get(pos + 2).copied().and_then(hex_value);
            let lo = bytes.get(pos + 3).copied().and_then(hex_value);
            match (hi, lo) {
                (Some(hi), Some(lo)) => (hi << 4 | lo, 4),
                _ => return Err(err(pos, "`\\x` must be followed by two hex digits")),
            }
        }
        other => {
            let shown = if other.is_ascii_graphic() {
                format!("\\{}", other as char)
            } else {
                format!("\\ followed by byte 0x{other:02x}")
            };
            return Err(err(
                pos,
                format!("unknown escape `{shown}` (known: \\r \\n \\t \\0 \\\\ \\xNN)"),
            ));
        }
    })
}

fn placeholder(inner: &str, pos: usize) -> Result<Piece, TemplateError> {
    let name = inner.trim();
    if let Some(size) = name.strip_prefix("random:") {
        let n = crate::units::parse_size(size.trim())
            .map_err(|e| err(pos, format!("`{{{inner}}}`: {e}")))?;
        if n == 0 {
            return Err(err(
                pos,
                "`{random:0}` writes nothing; give a size of at least 1",
            ));
        }
        if n > MAX_RANDOM {
            return Err(err(
                pos,
                format!("`{{{inner}}}` is larger than the 64MiB limit"),
            ));
        }
        return Ok(Piece::Random(n as usize));
    }
    match name {
        "conn" => Ok(Piece::Conn),
        "i" => Ok(Piece::Iteration),
        "body" => Ok(Piece::Body),
        "random" => Err(err(pos, "`{random}` needs a size, e.g. `{random:64}`")),
        _ if is_identifier(name) => Ok(Piece::Var(name.to_string())),
        _ => Err(err(
            pos,
            format!("`{{{inner}}}` is not a variable name (letters, digits, `_`, `-`)"),
        )),
    }
}

pub(crate) fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::script::functions::Sources;

    pub(crate) fn no_env(_: &str) -> Option<String> {
        None
    }

    fn parse_text(text: &str) -> Result<Template, TemplateError> {
        Template::parse_text(text, &no_env)
    }

    fn parse_hex(text: &str) -> Result<Template, TemplateError> {
        Template::parse_hex(text, &no_env)
    }

    fn render(t: &Template, seed: u64) -> (Vec<u8>, Option<usize>) {
        let mut out = Vec::new();
        let lookup = |name: &str| (name == "id").then_some(&b"42"[..]);
        let mut rng = SplitMix64::new(seed);
        let mut scope = Scope {
            lookup: &lookup,
            conn: 3,
            iteration: 7,
            sources: Sources {
                rng: &mut rng,
                clock: None,
            },
        };
        let mut failed = None;
        let body = t.render(&mut scope, &mut out, &mut failed);
        assert_eq!(failed, None);
        (out, body)
    }

    #[test]
    fn text_templates() {
        let cases: &[(&str, &[u8], Option<usize>)] = &[
            ("GETATTRS {id}\r\n", b"GETATTRS 42\r\n", None),
            (r"GETATTRS {id}\r\n", b"GETATTRS 42\r\n", None),
            (r"\x00\xff\t\\\0", b"\x00\xff\t\\\x00", None),
            ("c{conn} i{i}", b"c3 i7", None),
            ("{{x}} }}", b"{x} }", None),
            ("HEAD\r\n\r\n{body}payload", b"HEAD\r\n\r\npayload", Some(8)),
            ("héllo", "héllo".as_bytes(), None),
        ];
        for (text, want, body) in cases {
            let t = parse_text(text).unwrap();
            assert_eq!(render(&t, 1), (want.to_vec(), *body), "{text}");
        }
    }

    #[test]
    fn decimals_and_fixed_templates() {
        for n in [0, 7, 10, 1234, u64::MAX] {
            let mut out = b"x".to_vec();
            push_decimal(n, &mut out);
            assert_eq!(out, format!("x{n}").as_bytes());
        }
        let fixed = |text: &str| parse_text(text).unwrap().is_fixed();
        assert!(fixed("PING\r\n{body}x{{y}}"));
        assert!(!fixed("GET {id}"));
        assert!(!fixed("c{conn}"));
        assert!(!fixed("i{i}"));
        assert!(!fixed("{random:3}"));
    }

    #[test]
    fn hex_templates() {
        let t = parse_hex("00 00 00 02 {id} 0d0A").unwrap();
        assert_eq!(render(&t, 1).0, b"\x00\x00\x00\x0242\r\n");
    }

    #[test]
    fn bad_templates() {
        let cases: &[(&str, bool, usize, &str)] = &[
            ("ab\\q", false, 2, "unknown escape `\\q`"),
            ("ab\\x4", false, 2, "two hex digits"),
            ("x\\", false, 1, "at the end"),
            ("a{id", false, 1, "without a closing"),
            ("a}b", false, 1, "without an opening"),
            ("{random:0}", false, 0, "at least 1"),
            ("{random:1GiB}", false, 0, "64MiB"),
            ("{random}", false, 0, "needs a size"),
            ("{random:lots}", false, 0, "not a number"),
            ("{a b}", false, 0, "not a variable name"),
            ("0g", true, 1, "`g` is not a hex digit"),
            ("0 1 2", true, 4, "odd number"),
            ("0{id}", true, 0, "odd number"),
        ];
        for (text, hex, offset, needle) in cases {
            let e = if *hex {
                parse_hex(text)
            } else {
                parse_text(text)
            }
            .unwrap_err();
            assert_eq!(e.offset, *offset, "{text}: {}", e.message);
            assert!(e.message.contains(needle), "{text}: {}", e.message);
        }
    }

    #[test]
    fn random_is_seeded_and_printable() {
        let t = parse_text("{random:100}").unwrap();
        let (a, _) = render(&t, 9);
        assert_eq!(a.len(), 100);
        assert!(a.iter().all(u8::is_ascii_alphanumeric));
        assert_eq!(a, render(&t, 9).0);
        assert_ne!(a, render(&t, 10).0);
    }
}
