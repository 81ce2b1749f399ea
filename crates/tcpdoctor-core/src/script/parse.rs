//! TOML → validated [`Script`]. Everything a run could trip over is checked here, before any
//! I/O, and every error names the line and column of the offending key or value:
//! 1. TOML syntax; unknown keys (named, with the keys allowed there); wrong types.
//! 2. Framings (`read`), sizes (no zero, nothing above 1 GiB), durations, regexes, templates
//!    (escapes, hex, placeholders).
//! 3. Variables: every `{name}` in a template is a `[vars]` entry, a loop variable, or a capture
//!    made by an earlier step; `for_each` walks a list (an array in `[vars]` or a list capture).
//! 4. Inputs from the shell: each `--param KEY=VALUE` names a `[vars]` entry (and replaces its
//!    value); each `{env:NAME}` is a variable the command line allowed (`--allow-env`, every
//!    refused one named in one error) and is set in the environment the shell passed.
//! 5. Secrets: a `[vars]` entry `{ value = "…", secret = true }`, every `{env:NAME}` read and
//!    every `exec` output are noted (see `secrets`); `exec` only in `[[setup]]` (see `exec`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;

use regex::bytes::{Regex, RegexBuilder};
use toml::de::{DeTable, DeValue};
use toml::Spanned;

use super::exec::ExecStep;
use super::expr::EnvLookup;
use super::framing::DEFAULT_MAX_RESPONSE;
use super::model::{Item, Step, Value};
use super::secrets::Secrets;
use super::template::{is_identifier, RESERVED};
use super::{Inputs, Script, ScriptError};

pub(crate) type Span = Range<usize>;
pub(crate) type Val<'i> = Spanned<DeValue<'i>>;

/// The largest `max_response` or size a script may ask for.
pub(crate) const MAX_SIZE: u64 = 1 << 30;

/// What a variable name stands for at a point of the script.
#[derive(Clone, Debug)]
pub(crate) struct Def {
    pub(crate) list: bool,
    /// Where it was defined, for messages: "[vars] at line 3" / "captured at line 9".
    pub(crate) origin: String,
}

pub(crate) struct Parser<'s> {
    pub(crate) src: &'s str,
    pub(crate) steps: Vec<Step>,
    pub(crate) max_response: usize,
    /// Variables defined so far, in script order.
    pub(crate) defined: HashMap<String, Def>,
    /// Every capture anywhere in the script: name → line of its first capture.
    pub(crate) captured_anywhere: HashMap<String, usize>,
    /// `{env:NAME}`, as the shell read it.
    pub(crate) env: EnvLookup<'s>,
    /// `--param KEY=VALUE` for `[vars]`.
    overrides: &'s [(String, String)],
    /// `[vars]` marked `secret = true`.
    secret_vars: Vec<String>,
    /// `[vars]` and `exec` names: what an `exec` argument may read.
    outside: Vec<String>,
    execs: Vec<ExecStep>,
}

fn no_env(_: &str) -> Option<String> {
    None
}

pub(crate) fn parse(src: &str, inputs: &Inputs<'_>) -> Result<Script, ScriptError> {
    let doc = DeTable::parse(src).map_err(|e| {
        let (line, column) = e.span().map_or((None, None), |s| {
            let (l, c) = line_col(src, s.start);
            (Some(l), Some(c))
        });
        let message = e.message().trim().replace('\n', "; ");
        ScriptError::new(line, column, format!("TOML syntax: {message}"))
    })?;
    // Every value read from the environment is a secret (rule 5); only the variables the
    // command line allowed are read (rule 4). A refused one reads as empty so the parse goes
    // on and the error can name every refused variable at once.
    let read_env: RefCell<Vec<String>> = RefCell::new(Vec::new());
    let names_read: RefCell<Vec<String>> = RefCell::new(Vec::new());
    let refused: RefCell<Vec<String>> = RefCell::new(Vec::new());
    let env = inputs.env.unwrap_or(&no_env);
    let recording = |name: &str| {
        if !inputs.allow_env.iter().any(|a| a == name) {
            let mut r = refused.borrow_mut();
            if !r.iter().any(|n| n == name) {
                r.push(name.to_string());
            }
            return Some(String::new());
        }
        let value = env(name);
        if let Some(v) = &value {
            read_env.borrow_mut().push(v.clone());
            let mut n = names_read.borrow_mut();
            if !n.iter().any(|x| x == name) {
                n.push(name.to_string());
            }
        }
        value
    };
    let mut p = Parser {
        src,
        steps: Vec::new(),
        max_response: DEFAULT_MAX_RESPONSE,
        defined: HashMap::new(),
        captured_anywhere: HashMap::new(),
        env: &recording,
        overrides: inputs.vars,
        secret_vars: Vec::new(),
        outside: Vec::new(),
        execs: Vec::new(),
    };
    let parsed = p.document(doc.get_ref());
    let refused = refused.into_inner();
    if !refused.is_empty() {
        return Err(env_refused(src, &refused));
    }
    let mut script = parsed?;
    for v in read_env.borrow().iter() {
        script.secrets.add(v.as_bytes());
    }
    script.env_read = names_read.into_inner();
    mask_step_names(&mut script);
    Ok(script)
}

/// The error for `{env:NAME}` reads the command line did not allow (rule 4), at the first.
fn env_refused(src: &str, names: &[String]) -> ScriptError {
    let at = names.first().and_then(|first| {
        let needle = format!("env:{first}");
        src.match_indices(&needle)
            .find(|(i, _)| {
                src[i + needle.len()..]
                    .bytes()
                    .next()
                    .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == b'_' || c == b'-'))
            })
            .map(|(i, _)| line_col(src, i))
    });
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    let (what, were) = if names.len() == 1 {
        ("variable", "it was")
    } else {
        ("variables", "they were")
    };
    ScriptError::new(
        at.map(|a| a.0),
        at.map(|a| a.1),
        format!(
            "the script reads the environment {what} {} and {were} not allowed: a script \
             sends what it reads to its target, so name each one it may read with --allow-env {}",
            quoted.join(", "),
            names.join(",")
        ),
    )
}

/// A step named after its request's first word (`send = "{env:TOKEN} GET"`) would show a
/// secret in every report: masked, and kept unique.
fn mask_step_names(script: &mut Script) {
    if script.secrets.is_empty() {
        return;
    }
    for i in 0..script.steps.len() {
        let masked = script.secrets.mask_text(&script.steps[i].name);
        if masked == script.steps[i].name {
            continue;
        }
        let mut name = masked.clone();
        let mut n = 2;
        while script.steps.iter().any(|s| s.name == name) {
            name = format!("{masked}#{n}");
            n += 1;
        }
        script.steps[i].name = name.clone();
        script.step_names[i] = name;
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(src: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(src.len());
    let before = src.get(..offset).unwrap_or(src);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

pub(crate) fn kind(v: &DeValue<'_>) -> &'static str {
    match v {
        DeValue::String(_) => "a string",
        DeValue::Integer(_) => "an integer",
        DeValue::Float(_) => "a float",
        DeValue::Boolean(_) => "a boolean",
        DeValue::Datetime(_) => "a date",
        DeValue::Array(_) => "an array",
        DeValue::Table(_) => "a table",
    }
}

/// Where decoded byte `offset` of a one-line TOML string lies in its source text `raw`.
fn raw_offset(raw: &str, offset: usize) -> Option<usize> {
    if raw.starts_with("'''") || raw.starts_with("\"\"\"") {
        return None;
    }
    if raw.starts_with('\'') {
        return Some(1 + offset);
    }
    let bytes = raw.as_bytes();
    let (mut r, mut decoded) = (1, 0);
    while decoded < offset && r < bytes.len() {
        if bytes[r] == b'\\' {
            let (raw_len, out_len) = match bytes.get(r + 1) {
                Some(b'u') => (6, char_len(raw.get(r + 2..r + 6)?)),
                Some(b'U') => (10, char_len(raw.get(r + 2..r + 10)?)),
                Some(b'x') => (4, char_len(raw.get(r + 2..r + 4)?)),
                _ => (2, 1),
            };
            r += raw_len;
            decoded += out_len;
        } else {
            let len = raw[r..].chars().next()?.len_utf8();
            r += len;
            decoded += len;
        }
    }
    Some(r)
}

fn char_len(hex: &str) -> usize {
    u32::from_str_radix(hex, 16)
        .ok()
        .and_then(char::from_u32)
        .map_or(1, char::len_utf8)
}

/// A byte count as people write it: `1GiB`, `64MiB`, `300 bytes`.
pub(crate) fn bytes_text(n: u64) -> String {
    match n {
        n if n >= 1 << 30 && n % (1 << 30) == 0 => format!("{}GiB", n >> 30),
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{}MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{}KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// The first line of a regex error that says what is wrong.
fn regex_reason(e: &regex::Error) -> String {
    let text = e.to_string();
    text.lines()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .map_or_else(
            || text.lines().last().unwrap_or("").trim().to_string(),
            str::to_string,
        )
}

impl<'s> Parser<'s> {
    pub(crate) fn err(&self, span: &Span, message: impl Into<String>) -> ScriptError {
        let (line, column) = line_col(self.src, span.start);
        ScriptError::new(Some(line), Some(column), message.into())
    }

    pub(crate) fn line(&self, span: &Span) -> usize {
        line_col(self.src, span.start).0
    }

    /// Rejects keys other than `allowed`, naming the key and listing the allowed ones.
    pub(crate) fn check_keys(
        &self,
        table: &DeTable<'_>,
        allowed: &[&str],
        place: &str,
    ) -> Result<(), ScriptError> {
        for (key, _) in table.iter() {
            if !allowed.contains(&key.get_ref().as_ref()) {
                return Err(self.err(
                    &key.span(),
                    format!(
                        "unknown key `{}` in {place} (expected one of: {})",
                        key.get_ref(),
                        allowed.join(", ")
                    ),
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn string<'v>(&self, v: &'v Val<'_>, key: &str) -> Result<&'v str, ScriptError> {
        v.get_ref().as_str().ok_or_else(|| {
            self.err(
                &v.span(),
                format!("`{key}` must be a string, not {}", kind(v.get_ref())),
            )
        })
    }

    pub(crate) fn boolean(&self, v: &Val<'_>, key: &str) -> Result<bool, ScriptError> {
        v.get_ref().as_bool().ok_or_else(|| {
            self.err(
                &v.span(),
                format!("`{key}` must be true or false, not {}", kind(v.get_ref())),
            )
        })
    }

    pub(crate) fn table<'v, 'i>(
        &self,
        v: &'v Val<'i>,
        key: &str,
    ) -> Result<&'v DeTable<'i>, ScriptError> {
        v.get_ref().as_table().ok_or_else(|| {
            self.err(
                &v.span(),
                format!("`{key}` must be a table, not {}", kind(v.get_ref())),
            )
        })
    }

    pub(crate) fn integer(&self, v: &Val<'_>, key: &str) -> Result<i64, ScriptError> {
        let i = v.get_ref().as_integer().ok_or_else(|| {
            self.err(
                &v.span(),
                format!("`{key}` must be an integer, not {}", kind(v.get_ref())),
            )
        })?;
        i64::from_str_radix(i.as_str(), i.radix())
            .map_err(|_| self.err(&v.span(), format!("`{key}` is out of range")))
    }

    /// A size: an integer (bytes) or a string with a unit (`64KiB`), in `min..=max`.
    pub(crate) fn size(
        &self,
        v: &Val<'_>,
        key: &str,
        min: u64,
        max: u64,
    ) -> Result<u64, ScriptError> {
        let n = match v.get_ref() {
            DeValue::Integer(_) => {
                let i = self.integer(v, key)?;
                u64::try_from(i)
                    .map_err(|_| self.err(&v.span(), format!("`{key}` must not be negative")))?
            }
            DeValue::String(s) => crate::units::parse_size(s)
                .map_err(|e| self.err(&v.span(), format!("`{key}`: {e}")))?,
            other => {
                return Err(self.err(
                    &v.span(),
                    format!(
                        "`{key}` must be a size (64 or \"64KiB\"), not {}",
                        kind(other)
                    ),
                ))
            }
        };
        if n < min {
            return Err(self.err(
                &v.span(),
                format!("`{key}` must be at least {min} byte(s), not {n}"),
            ));
        }
        if n > max {
            let given = match v.get_ref() {
                DeValue::String(s) => s.to_string(),
                _ => n.to_string(),
            };
            return Err(self.err(
                &v.span(),
                format!(
                    "`{key}` = {given} is above the limit of {}",
                    bytes_text(max)
                ),
            ));
        }
        Ok(n)
    }

    pub(crate) fn regex(&self, v: &Val<'_>, key: &str) -> Result<Regex, ScriptError> {
        let text = self.string(v, key)?;
        RegexBuilder::new(text)
            .size_limit(1 << 20)
            .build()
            .map_err(|e| {
                self.err(
                    &v.span(),
                    format!("bad regex in `{key}`: {}", regex_reason(&e)),
                )
            })
    }

    /// The source position of byte `offset` of a string value's content. Literal strings
    /// (`'…'`) and one-line basic strings (`"…"`, escapes undone) map exactly; multi-line
    /// strings point at their start.
    pub(crate) fn inside(&self, v: &Val<'_>, offset: usize) -> Span {
        let span = v.span();
        let raw = self.src.get(span.clone()).unwrap_or("");
        let at = raw_offset(raw, offset).map_or(span.start, |o| span.start + o);
        at..at
    }

    fn document(&mut self, doc: &DeTable<'_>) -> Result<Script, ScriptError> {
        self.check_keys(
            doc,
            &[
                "name",
                "max_response",
                "iterations",
                "vars",
                "greeting",
                "setup",
                "steps",
            ],
            "the script",
        )?;
        let get = |k: &str| {
            doc.iter()
                .find(|(key, _)| key.get_ref() == k)
                .map(|(_, v)| v)
        };
        let name = match get("name") {
            Some(v) => self.string(v, "name")?.to_string(),
            None => "script".to_string(),
        };
        if let Some(v) = get("max_response") {
            self.max_response = self.size(v, "max_response", 1, MAX_SIZE)? as usize;
        }
        let iterations = match get("iterations") {
            Some(v) => {
                let n = self.integer(v, "iterations")?;
                if n < 1 {
                    return Err(self.err(
                        &v.span(),
                        format!("`iterations` must be at least 1, not {n}"),
                    ));
                }
                Some(n as u64)
            }
            None => None,
        };
        let mut vars = match get("vars") {
            Some(v) => self.vars(v)?,
            None => Vec::new(),
        };
        self.apply_overrides(&mut vars)?;
        for section in ["greeting", "setup", "steps"] {
            if let Some(v) = get(section) {
                self.collect_captures(v);
            }
        }
        let greeting = match get("greeting") {
            Some(v) => {
                let t = self.table(v, "greeting")?;
                Some(self.step(t, &v.span(), "[greeting]", None, true)?)
            }
            None => None,
        };
        let setup = match get("setup") {
            Some(v) => self.items(v, "setup")?,
            None => Vec::new(),
        };
        let body = match get("steps") {
            Some(v) => self.items(v, "steps")?,
            None => Vec::new(),
        };
        if self.steps.iter().all(|s| s.send.is_none()) {
            let span = doc.iter().next().map_or(0..0, |(k, _)| k.span());
            return Err(self.err(
                &span,
                "the script sends nothing: add [[setup]] or [[steps]] with `send`",
            ));
        }
        let step_names = self.steps.iter().map(|s| s.name.clone()).collect();
        let mut secrets = Secrets::default();
        for (name, value) in &vars {
            if let (true, Value::Text(t)) = (self.secret_vars.contains(name), value) {
                secrets.add(t);
            }
        }
        let execs = std::mem::take(&mut self.execs);
        for e in &execs {
            // A placeholder until the shell passes the output in.
            vars.push((e.name.clone(), Value::Text(Vec::new())));
        }
        Ok(Script {
            name,
            steps: std::mem::take(&mut self.steps),
            step_names,
            greeting,
            setup,
            body,
            iterations,
            vars,
            secret_vars: std::mem::take(&mut self.secret_vars),
            secrets,
            execs,
            env_read: Vec::new(),
        })
    }

    pub(crate) fn var_name(&self, name: &str, span: &Span, what: &str) -> Result<(), ScriptError> {
        if !is_identifier(name) {
            return Err(self.err(
                span,
                format!("`{name}` is not a valid {what} name (letters, digits, `_`, `-`)"),
            ));
        }
        if RESERVED.contains(&name) {
            return Err(self.err(span, format!("`{name}` is reserved ({{{name}}} has a meaning in templates); pick another {what} name")));
        }
        Ok(())
    }

    fn vars(&mut self, v: &Val<'_>) -> Result<Vec<(String, Value)>, ScriptError> {
        let table = self.table(v, "vars")?;
        let mut out = Vec::new();
        for (key, value) in table.iter() {
            let name = key.get_ref().to_string();
            self.var_name(&name, &key.span(), "variable")?;
            let scalar = |p: &Self, v: &Val<'_>| -> Result<Vec<u8>, ScriptError> {
                match v.get_ref() {
                    DeValue::String(s) => Ok(s.as_bytes().to_vec()),
                    DeValue::Integer(_) => Ok(p.integer(v, &name)?.to_string().into_bytes()),
                    other => Err(p.err(&v.span(), format!("variable `{name}` must be a string, an integer or an array of them, not {}", kind(other)))),
                }
            };
            let (value, secret) = match value.get_ref() {
                DeValue::Table(t) => self.var_table(&name, value, t)?,
                _ => (value, false),
            };
            if secret {
                self.secret_vars.push(name.clone());
            }
            let val = match value.get_ref() {
                DeValue::Array(items) => Value::List(
                    items
                        .iter()
                        .map(|i| scalar(self, i))
                        .collect::<Result<_, _>>()?,
                ),
                _ => Value::Text(scalar(self, value)?),
            };
            let origin = format!("[vars] at line {}", self.line(&key.span()));
            self.defined.insert(
                name.clone(),
                Def {
                    list: matches!(val, Value::List(_)),
                    origin,
                },
            );
            self.outside.push(name.clone());
            out.push((name, val));
        }
        Ok(out)
    }

    /// `name = { value = "…", secret = true }`: the value, and whether it is a secret.
    fn var_table<'v, 'i>(
        &self,
        name: &str,
        v: &'v Val<'i>,
        t: &'v DeTable<'i>,
    ) -> Result<(&'v Val<'i>, bool), ScriptError> {
        self.check_keys(t, &["value", "secret"], &format!("variable `{name}`"))?;
        let Some((_, value)) = t.iter().find(|(k, _)| k.get_ref() == "value") else {
            return Err(self.err(
                &v.span(),
                format!(
                    "variable `{name}` needs `value` (e.g. {{ value = \"…\", secret = true }})"
                ),
            ));
        };
        if matches!(value.get_ref(), DeValue::Table(_)) {
            return Err(self.err(&value.span(), format!("the `value` of `{name}` must be a string, an integer or an array of them, not a table")));
        }
        let secret = match t.iter().find(|(k, _)| k.get_ref() == "secret") {
            Some((_, s)) => self.boolean(s, "secret")?,
            None => false,
        };
        Ok((value, secret))
    }

    /// `--param KEY=VALUE`: KEY must be a single-value `[vars]` entry; VALUE replaces it.
    fn apply_overrides(&self, vars: &mut [(String, Value)]) -> Result<(), ScriptError> {
        for (key, value) in self.overrides {
            match vars.iter_mut().find(|(name, _)| name == key) {
                Some((_, Value::List(_))) => {
                    return Err(ScriptError::new(
                        None,
                        None,
                        format!("--param {key}: `{key}` is a list in [vars]; a parameter sets a single value"),
                    ))
                }
                Some((_, v)) => *v = Value::Text(value.as_bytes().to_vec()),
                None => {
                    let known: Vec<&str> = vars.iter().map(|(n, _)| n.as_str()).collect();
                    let known = if known.is_empty() {
                        "it has no [vars]".to_string()
                    } else {
                        format!("its variables: {}", known.join(", "))
                    };
                    return Err(ScriptError::new(
                        None,
                        None,
                        format!("--param {key}: the script has no variable `{key}` ({known})"),
                    ));
                }
            }
        }
        Ok(())
    }

    /// Notes every capture name in a section, so "used before it is captured" can say where.
    fn collect_captures(&mut self, v: &Val<'_>) {
        let mut tables: Vec<&Val<'_>> = match v.get_ref() {
            DeValue::Array(a) => a.iter().collect(),
            _ => vec![v],
        };
        while let Some(t) = tables.pop() {
            let Some(table) = t.get_ref().as_table() else {
                continue;
            };
            for (key, value) in table.iter() {
                match key.get_ref().as_ref() {
                    "capture" => {
                        for (name, _) in value
                            .get_ref()
                            .as_table()
                            .into_iter()
                            .flat_map(|t| t.iter())
                        {
                            let line = self.line(&name.span());
                            let entry = self
                                .captured_anywhere
                                .entry(name.get_ref().to_string())
                                .or_insert(line);
                            *entry = (*entry).min(line);
                        }
                    }
                    "do" => {
                        if let Some(a) = value.get_ref().as_array() {
                            tables.extend(a.iter());
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    fn items(&mut self, v: &Val<'_>, section: &str) -> Result<Vec<Item>, ScriptError> {
        let Some(array) = v.get_ref().as_array() else {
            return Err(self.err(
                &v.span(),
                format!(
                    "`{section}` must be an array of tables ([[{section}]]), not {}",
                    kind(v.get_ref())
                ),
            ));
        };
        let mut items = Vec::new();
        for entry in array.iter() {
            let place = format!("[[{section}]]");
            let table = self.table(entry, section)?;
            if let Some((k, _)) = table.iter().find(|(k, _)| k.get_ref() == "exec") {
                if section != "setup" {
                    return Err(self.exec_refused(&k.span(), &place));
                }
                let outside = self.outside.clone();
                let exec = self.exec(table, &entry.span(), &outside)?;
                self.outside.push(exec.name.clone());
                self.execs.push(exec);
                continue;
            }
            let for_each = table.iter().find(|(k, _)| k.get_ref() == "for_each");
            match for_each {
                None => items.push(Item::Step(self.step(
                    table,
                    &entry.span(),
                    &place,
                    None,
                    false,
                )?)),
                Some((_, fe)) => items.push(self.for_each(table, fe, &entry.span(), section)?),
            }
        }
        Ok(items)
    }

    fn for_each(
        &mut self,
        table: &DeTable<'_>,
        fe: &Val<'_>,
        span: &Span,
        section: &str,
    ) -> Result<Item, ScriptError> {
        self.check_keys(
            table,
            &["for_each", "do"],
            &format!("a [[{section}]] for_each"),
        )?;
        let text = self.string(fe, "for_each")?;
        let words: Vec<&str> = text.split_whitespace().collect();
        let [var, "in", list] = words[..] else {
            return Err(self.err(
                &fe.span(),
                format!("`for_each` must read `<name> in <list>`, e.g. `id in ids`, not `{text}`"),
            ));
        };
        self.var_name(var, &fe.span(), "loop variable")?;
        if let Some(def) = self.defined.get(var) {
            return Err(self.err(
                &fe.span(),
                format!(
                    "loop variable `{var}` hides the variable of the same name ({})",
                    def.origin
                ),
            ));
        }
        match self.defined.get(list) {
            Some(def) if def.list => {}
            Some(def) => {
                return Err(self.err(&fe.span(), format!("for_each over `{list}`, which is a single value, not a list ({}); capture a list with {{ each_line = '…' }}", def.origin)));
            }
            None => return Err(self.undefined(list, &fe.span())),
        }
        let Some((_, steps)) = table.iter().find(|(k, _)| k.get_ref() == "do") else {
            return Err(self.err(
                span,
                format!("this for_each has no steps: add [[{section}.do]] tables after it"),
            ));
        };
        let Some(array) = steps.get_ref().as_array().filter(|a| !a.is_empty()) else {
            return Err(self.err(
                &steps.span(),
                "`do` must be a non-empty array of tables ([[….do]])",
            ));
        };
        let place = format!("[[{section}.do]]");
        let mut ids = Vec::new();
        for entry in array.iter() {
            let t = self.table(entry, "do")?;
            if let Some((k, _)) = t.iter().find(|(k, _)| k.get_ref() == "exec") {
                return Err(self.exec_refused(&k.span(), &format!("[[{section}.do]]")));
            }
            if t.iter().any(|(k, _)| k.get_ref() == "for_each") {
                return Err(self.err(
                    &entry.span(),
                    "a for_each inside a for_each is not supported",
                ));
            }
            ids.push(self.step(t, &entry.span(), &place, Some(var), false)?);
        }
        Ok(Item::ForEach {
            var: var.to_string(),
            list: list.to_string(),
            steps: ids,
        })
    }

    /// `exec` where requests repeat: refused (`exec` rule 1).
    fn exec_refused(&self, span: &Span, place: &str) -> ScriptError {
        self.err(
            span,
            format!("`exec` is not allowed in {place}: an outside command per exchange would measure the command, not the server; put it in [[setup]] (it runs once, before the first connection)"),
        )
    }

    /// The error for a name that is not defined at this point of the script.
    pub(crate) fn undefined(&self, name: &str, span: &Span) -> ScriptError {
        match self.captured_anywhere.get(name) {
            Some(line) => self.err(span, format!("`{name}` is used before it is captured (by the step at line {line})")),
            None => self.err(span, format!("undefined variable `{name}` (define it in [vars] or capture it in an earlier step)")),
        }
    }
}
