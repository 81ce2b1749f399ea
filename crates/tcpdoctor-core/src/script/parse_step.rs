//! One step of a script: `send`, `read`, `expect`, `capture`.

use std::time::Duration;

use toml::de::{DeTable, DeValue};

use super::framing::{Framing, LengthPrefix, TypedMessages};
use super::functions::Func;
use super::model::{Capture, CaptureKind, Step};
use super::parse::{kind, Def, Parser, Span, Val, MAX_SIZE};
use super::template::{is_identifier, Piece, Template, RESERVED};
use super::ScriptError;

const STEP_KEYS: &[&str] = &[
    "name",
    "send",
    "send_hex",
    "send_prefix",
    "send_prefix_counts_itself",
    "send_type",
    "read",
    "max_response",
    "expect",
    "capture",
];
const GREETING_KEYS: &[&str] = &["read", "max_response", "expect", "capture"];
const READ_KEYS: &[&str] = &[
    "until",
    "until_line",
    "length",
    "length_prefix",
    "idle",
    "counts_itself",
    "type_byte",
    "until_type",
    "single_line_if",
];
const FRAMING_KEYS: &[&str] = &["until", "until_line", "length", "length_prefix", "idle"];

/// The longest `idle` a script may wait for.
const MAX_IDLE: Duration = Duration::from_secs(60);

/// The value of `key` in `table`, if present.
pub(super) fn get<'t, 'i>(table: &'t DeTable<'i>, key: &str) -> Option<&'t Val<'i>> {
    table
        .iter()
        .find(|(k, _)| k.get_ref() == key)
        .map(|(_, v)| v)
}

impl Parser<'_> {
    /// Validates one step and adds it to the script; returns its index.
    pub(crate) fn step(
        &mut self,
        table: &DeTable<'_>,
        span: &Span,
        place: &str,
        loop_var: Option<&str>,
        greeting: bool,
    ) -> Result<usize, ScriptError> {
        self.check_keys(
            table,
            if greeting { GREETING_KEYS } else { STEP_KEYS },
            place,
        )?;
        let max_response = match get(table, "max_response") {
            Some(v) => self.size(v, "max_response", 1, MAX_SIZE)? as usize,
            None => self.max_response,
        };
        let send = if greeting {
            None
        } else {
            Some(self.send(table, span, loop_var)?)
        };
        let send_prefix = match get(table, "send_prefix") {
            Some(v) => {
                let counts = match get(table, "send_prefix_counts_itself") {
                    Some(c) => self.boolean(c, "send_prefix_counts_itself")?,
                    None => false,
                };
                let prefix = self.prefix(v, "send_prefix", counts)?;
                let fixed = send.as_ref().map_or(0, min_len);
                if fixed > prefix.max_body() {
                    return Err(self.err(
                        &v.span(),
                        format!(
                            "a request of at least {fixed} bytes does not fit a {} length (at most {})",
                            prefix.name(),
                            prefix.max_body()
                        ),
                    ));
                }
                Some(prefix)
            }
            None => {
                if let Some(c) = get(table, "send_prefix_counts_itself") {
                    return Err(
                        self.err(&c.span(), "`send_prefix_counts_itself` needs `send_prefix`")
                    );
                }
                None
            }
        };
        let send_type =
            match get(table, "send_type") {
                Some(v) if send_prefix.is_some() => Some(self.type_byte(v, "send_type")?),
                Some(v) => return Err(self.err(
                    &v.span(),
                    "`send_type` needs `send_prefix` (the type byte goes before the length field)",
                )),
                None => None,
            };
        let Some(read) = get(table, "read") else {
            return Err(self.err(span, format!("{place} needs `read`: how its response ends (e.g. read = {{ until = \"\\r\\n\" }})")));
        };
        let read = self.read(read, max_response)?;
        let expect = match get(table, "expect") {
            Some(v) => Some(self.regex(v, "expect")?),
            None => None,
        };
        let captures = match get(table, "capture") {
            Some(v) => self.captures(v, loop_var)?,
            None => Vec::new(),
        };
        let name = self.step_name(table, send.as_ref(), greeting)?;
        let mut step = Step {
            name,
            send,
            send_prefix,
            send_type,
            read,
            max_response,
            expect,
            captures,
            fixed: None,
        };
        step.fixed = step.fixed_request();
        self.steps.push(step);
        Ok(self.steps.len() - 1)
    }

    fn step_name(
        &self,
        table: &DeTable<'_>,
        send: Option<&Template>,
        greeting: bool,
    ) -> Result<String, ScriptError> {
        let taken = |n: &str| self.steps.iter().any(|s| s.name == n);
        if greeting {
            return Ok("greeting".to_string());
        }
        if let Some(v) = get(table, "name") {
            let name = self.string(v, "name")?;
            if name.trim().is_empty() {
                return Err(self.err(&v.span(), "`name` must not be empty"));
            }
            if taken(name) {
                return Err(self.err(
                    &v.span(),
                    format!("two steps are named `{name}`; names must be unique"),
                ));
            }
            return Ok(name.to_string());
        }
        let word: String = match send.and_then(|t| t.pieces.first()) {
            Some(Piece::Bytes(b)) => b
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == b'_' || **c == b'-')
                .map(|&c| c as char)
                .collect(),
            _ => String::new(),
        };
        let base = if word.is_empty() {
            format!("step{}", self.steps.len() + 1)
        } else {
            word
        };
        let mut name = base.clone();
        let mut n = 2;
        while taken(&name) {
            name = format!("{base}#{n}");
            n += 1;
        }
        Ok(name)
    }

    fn send(
        &self,
        table: &DeTable<'_>,
        span: &Span,
        loop_var: Option<&str>,
    ) -> Result<Template, ScriptError> {
        let (v, hex) = match (get(table, "send"), get(table, "send_hex")) {
            (Some(_), Some(h)) => {
                return Err(self.err(&h.span(), "a step has `send` or `send_hex`, not both"));
            }
            (Some(v), None) => (v, false),
            (None, Some(v)) => (v, true),
            (None, None) => {
                return Err(self.err(span, "this step needs `send` (a template) or `send_hex`"));
            }
        };
        let key = if hex { "send_hex" } else { "send" };
        let text = self.string(v, key)?;
        let parsed = if hex {
            Template::parse_hex(text, self.env)
        } else {
            Template::parse_text(text, self.env)
        };
        let template = parsed.map_err(|e| {
            self.err(
                &self.inside(v, e.offset),
                format!("in `{key}`: {}", e.message),
            )
        })?;
        if template.pieces.is_empty() {
            return Err(self.err(
                &v.span(),
                format!("`{key}` is empty: a request must have at least one byte"),
            ));
        }
        for (var, offset) in &template.refs {
            if Some(var.as_str()) == loop_var {
                continue;
            }
            let at = self.inside(v, *offset);
            match self.defined.get(var) {
                Some(Def { list: true, origin }) => {
                    return Err(self.err(&at, format!("`{var}` is a list ({origin}); walk it with for_each = \"x in {var}\" and use {{x}}")));
                }
                Some(_) => {}
                None if Func::from_name(var).is_some() => {
                    let undefined = self.undefined(var, &at);
                    return Err(ScriptError::new(
                        undefined.line(),
                        undefined.column(),
                        format!(
                            "{}; to call the function write `{var}(…)`",
                            undefined.message()
                        ),
                    ));
                }
                None => return Err(self.undefined(var, &at)),
            }
        }
        Ok(template)
    }

    fn prefix(
        &self,
        v: &Val<'_>,
        key: &str,
        counts_itself: bool,
    ) -> Result<LengthPrefix, ScriptError> {
        let name = self.string(v, key)?;
        LengthPrefix::from_name(name, counts_itself).ok_or_else(|| {
            self.err(
                &v.span(),
                format!(
                    "unknown length prefix `{name}` in `{key}` (expected one of: {})",
                    LengthPrefix::NAMES
                ),
            )
        })
    }

    /// One message type byte: a one-character ASCII string (`"Q"`).
    fn type_byte(&self, v: &Val<'_>, key: &str) -> Result<u8, ScriptError> {
        match self.string(v, key)?.as_bytes() {
            [b] if b.is_ascii() => Ok(*b),
            _ => Err(self.err(
                &v.span(),
                format!("`{key}` is one ASCII character, the message type (like \"Q\")"),
            )),
        }
    }

    /// The message types that end a response: ASCII characters, at least one (`"ZE"`).
    fn type_bytes(&self, v: &Val<'_>) -> Result<Vec<u8>, ScriptError> {
        let s = self.string(v, "until_type")?;
        if s.is_empty() || !s.is_ascii() {
            return Err(self.err(
                &v.span(),
                "`until_type` is one or more ASCII characters, the message types that end a response (like \"Z\")",
            ));
        }
        Ok(s.as_bytes().to_vec())
    }

    fn read(&self, v: &Val<'_>, max_response: usize) -> Result<Framing, ScriptError> {
        let table = match v.get_ref() {
            DeValue::String(s) => {
                return match s.as_ref() {
                    "resp" => Ok(Framing::Resp),
                    "http" => Ok(Framing::Http),
                    "close" => Ok(Framing::Close),
                    other => Err(self.err(&v.span(), format!(
                        "unknown framing `{other}` (expected \"resp\", \"http\", \"close\", or a table with one of: {})",
                        FRAMING_KEYS.join(", ")
                    ))),
                };
            }
            DeValue::Table(t) => t,
            other => {
                return Err(self.err(&v.span(), format!("`read` must be a string (\"resp\", \"http\", \"close\") or a table, not {}", kind(other))));
            }
        };
        self.check_keys(table, READ_KEYS, "`read`")?;
        let framings: Vec<_> = table
            .iter()
            .filter(|(k, _)| FRAMING_KEYS.contains(&k.get_ref().as_ref()))
            .collect();
        let (key, value) = match framings[..] {
            [(k, v)] => (k.get_ref().as_ref(), v),
            [] => {
                return Err(self.err(
                    &v.span(),
                    format!("`read` needs one of: {}", FRAMING_KEYS.join(", ")),
                ))
            }
            [_, (k, _), ..] => {
                return Err(self.err(
                    &k.span(),
                    format!(
                        "`read` has two framings; keep one of: {}",
                        FRAMING_KEYS.join(", ")
                    ),
                ));
            }
        };
        let single_line_if = match get(table, "single_line_if") {
            Some(s) if key == "until" || key == "until_line" => {
                Some(self.regex(s, "single_line_if")?)
            }
            Some(s) => {
                return Err(self.err(
                    &s.span(),
                    "`single_line_if` goes with `until` or `until_line`",
                ))
            }
            None => None,
        };
        let counts_itself = match get(table, "counts_itself") {
            Some(c) if key == "length_prefix" => self.boolean(c, "counts_itself")?,
            Some(c) => return Err(self.err(&c.span(), "`counts_itself` goes with `length_prefix`")),
            None => false,
        };
        let type_byte = match get(table, "type_byte") {
            Some(c) if key == "length_prefix" => self.boolean(c, "type_byte")?,
            Some(c) => return Err(self.err(&c.span(), "`type_byte` goes with `length_prefix`")),
            None => false,
        };
        let until_type = match get(table, "until_type") {
            Some(c) if type_byte => Some(self.type_bytes(c)?),
            Some(c) => {
                return Err(self.err(
                    &c.span(),
                    "`until_type` needs `length_prefix` with `type_byte = true`",
                ))
            }
            None => None,
        };
        Ok(match key {
            "until" => {
                let text = self.string(value, "until")?;
                let t = Template::parse_text(text, self.env).map_err(|e| {
                    self.err(
                        &self.inside(value, e.offset),
                        format!("in `until`: {}", e.message),
                    )
                })?;
                let mut terminator = Vec::new();
                for piece in t.pieces {
                    match piece {
                        Piece::Bytes(b) => terminator.extend(b),
                        _ => {
                            return Err(self.err(
                                &value.span(),
                                "`until` is fixed bytes: placeholders like {…} are not allowed",
                            ))
                        }
                    }
                }
                if terminator.is_empty() {
                    return Err(self.err(&value.span(), "`until` must not be empty"));
                }
                Framing::Until {
                    terminator,
                    single_line_if,
                }
            }
            "until_line" => Framing::UntilLine {
                pattern: self.regex(value, "until_line")?,
                single_line_if,
            },
            "length" => {
                Framing::Length(self.size(value, "length", 1, max_response as u64)? as usize)
            }
            "length_prefix" if type_byte => Framing::Typed(TypedMessages {
                prefix: self.prefix(value, "length_prefix", counts_itself)?,
                until_type: until_type.unwrap_or_default(),
            }),
            "length_prefix" => {
                Framing::LengthPrefix(self.prefix(value, "length_prefix", counts_itself)?)
            }
            _ => {
                let d = match value.get_ref() {
                    DeValue::String(s) => crate::units::parse_duration(s)
                        .map_err(|e| self.err(&value.span(), format!("`idle`: {e}")))?,
                    other => {
                        return Err(self.err(
                            &value.span(),
                            format!(
                                "`idle` must be a duration like \"50ms\", not {}",
                                kind(other)
                            ),
                        ))
                    }
                };
                if d.is_zero() || d > MAX_IDLE {
                    return Err(
                        self.err(&value.span(), "`idle` must be more than 0 and at most 60s")
                    );
                }
                Framing::Idle(d)
            }
        })
    }

    fn captures(
        &mut self,
        v: &Val<'_>,
        loop_var: Option<&str>,
    ) -> Result<Vec<Capture>, ScriptError> {
        let table = self.table(v, "capture")?;
        let mut out = Vec::new();
        for (key, value) in table.iter() {
            let name = key.get_ref().to_string();
            let span = key.span();
            if !is_identifier(&name) || RESERVED.contains(&name.as_str()) {
                return Err(self.err(
                    &span,
                    format!(
                        "`{name}` cannot be a capture name (letters, digits, `_`, `-`; not {})",
                        RESERVED.join(", ")
                    ),
                ));
            }
            if Some(name.as_str()) == loop_var {
                return Err(self.err(
                    &span,
                    format!("`{name}` is the loop variable; capture into another name"),
                ));
            }
            let (pattern, kind) = match value.get_ref() {
                DeValue::String(_) => (self.regex(value, &name)?, CaptureKind::First),
                DeValue::Table(t) => {
                    self.check_keys(t, &["each_line", "each"], &format!("capture `{name}`"))?;
                    match (get(t, "each_line"), get(t, "each")) {
                        (Some(re), None) => (self.regex(re, "each_line")?, CaptureKind::EachLine),
                        (None, Some(re)) => (self.regex(re, "each")?, CaptureKind::Each),
                        _ => {
                            return Err(self.err(
                                &value.span(),
                                format!(
                                    "capture `{name}` needs exactly one of `each_line` or `each`"
                                ),
                            ))
                        }
                    }
                }
                other => {
                    return Err(self.err(&value.span(), format!("capture `{name}` must be a regex string or {{ each_line = '…' }}, not {}", super::parse::kind(other))));
                }
            };
            let list = kind.is_list();
            if let Some(def) = self.defined.get(&name) {
                if def.list != list {
                    let (was, now) = if def.list {
                        ("a list", "a single value")
                    } else {
                        ("a single value", "a list")
                    };
                    return Err(self.err(
                        &span,
                        format!("`{name}` is {was} ({}) and cannot become {now}", def.origin),
                    ));
                }
            }
            let origin = format!("captured at line {}", self.line(&span));
            self.defined.insert(name.clone(), Def { list, origin });
            out.push(Capture {
                name,
                pattern,
                kind,
            });
        }
        Ok(out)
    }
}

/// The fewest bytes a template can render to.
fn min_len(t: &Template) -> u64 {
    t.pieces
        .iter()
        .map(|p| match p {
            Piece::Bytes(b) => b.len() as u64,
            Piece::Random(n) => *n as u64,
            _ => 0,
        })
        .sum()
}
