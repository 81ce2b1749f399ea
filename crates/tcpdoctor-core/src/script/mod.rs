//! Conversation scripts: what `tcpdoctor bench` says to a server and how it knows an answer is
//! complete.
//!
//! A benchmark of a request/response service is only as good as its idea of the protocol: to
//! measure latency per exchange, the client must know where each response ends, and to pipeline
//! it must know which requests it can send before earlier answers arrive. A script says both,
//! in TOML that is validated before any byte is sent (every error names the line and column).
//! `docs/scripts.md` documents the format; [`Script::preset`] builds the common cases (echo,
//! RESP, HTTP/1.1, memcache, any line protocol) without a file.
//!
//! This module is sans-IO: [`Conversation`] is one connection's run of a script. The driver
//! asks it for the next request, writes it, and feeds it the bytes it reads; the conversation
//! frames responses, checks assertions, takes captures, walks loops, and reports each completed
//! exchange with the times the driver gave it. It never reads a clock or touches a socket.
//!
//! # Layout
//! - [`parse`](self): TOML → validated [`Script`]; errors with line and column.
//! - `template`: request templates (`{var}`, `{conn}`, `{i}`, `{random:N}`, `{body}`, escapes).
//! - `expr`, `functions`: computed placeholders (`{hex(sha1(concat(challenge, " ", secret)))}`),
//!   compiled at load into a tree; the functions over byte strings.
//! - `framing`: one file per response framing, all incremental and bounded.
//! - `conversation`: [`Conversation`], requests out, bytes in, exchanges completed.
//! - `cursor`: which step makes the next request (setup, steps, iterations, `for_each`).
//! - `presets`: the built-in scripts, written as TOML and parsed like any other.
//! - `secrets`: values tcpdoctor's own text masks (`secret = true` vars, `{env:…}`, `exec`).
//! - `exec`: a `[[setup]]` value from an outside command, modelled here, run by the shell.
//! - `dry_run`: the first conversation's requests as they would be sent, without a server.
//!
//! # Additions to the contract (`bench-api.md`)
//! - [`Conversation::connected`] sets when the greeting's wait began; without it the `intended`
//!   of the first [`Conversation::next_request`] call (which returns `None` while a greeting is
//!   awaited) is used, or else the time of the first bytes.
//! - [`Conversation::outstanding`] counts an awaited greeting too, so "no request available and
//!   not finished" always means "something is outstanding: read".
//! - [`ScriptError::line`] and [`ScriptError::column`] are `Option<usize>`: an error in a
//!   preset's `--param` has no line.
//! - [`Script::preset_source`] returns a preset's TOML text (for `--print-script`-like uses);
//!   [`Script::with_max_response`] overrides every step's limit (for a `--max-response` flag);
//!   [`Script::greeting`], [`Script::repeats`], [`Conversation::iteration`].
//! - [`Conversation::next_request_into`] and [`Conversation::on_bytes_into`]: the same calls
//!   writing into the driver's buffers (a request appended to the batch being built, an
//!   [`Issued`] saying where it is), so an exchange allocates nothing.

mod conversation;
mod cursor;
mod dry_run;
mod exec;
mod expr;
mod framing;
mod functions;
mod model;
mod parse;
mod parse_step;
mod presets;
mod secrets;
mod template;

use std::fmt;

pub use conversation::Conversation;
pub use dry_run::{DryRequest, DryRun, Unknown};
pub use exec::ExecStep;
pub use framing::DEFAULT_MAX_RESPONSE;
pub use presets::preset_names;
pub use secrets::MASK;

use crate::Timestamp;

/// A validated, immutable conversation script. Share it between connections with an `Arc`.
#[derive(Clone)]
pub struct Script {
    name: String,
    steps: Vec<model::Step>,
    step_names: Vec<String>,
    greeting: Option<usize>,
    setup: Vec<model::Item>,
    body: Vec<model::Item>,
    iterations: Option<u64>,
    vars: Vec<(String, model::Value)>,
    /// `[vars]` entries marked `secret = true`.
    secret_vars: Vec<String>,
    secrets: secrets::Secrets,
    execs: Vec<ExecStep>,
    /// The environment variables the script read (`{env:NAME}`), in the order first read.
    env_read: Vec<String>,
}

impl fmt::Debug for Script {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Values may be secrets: show only the variables' names.
        let vars: Vec<&str> = self.vars.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Script")
            .field("name", &self.name)
            .field("steps", &self.step_names)
            .field("vars", &vars)
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl Script {
    /// Parses and validates a TOML conversation script. Every error names the line (and column).
    pub fn parse(src: &str) -> Result<Script, ScriptError> {
        parse::parse(src, &Inputs::default())
    }

    /// [`Script::parse`] with what the shell passes in: `--param` values for `[vars]` and the
    /// environment for `{env:NAME}`.
    pub fn parse_with(src: &str, inputs: &Inputs<'_>) -> Result<Script, ScriptError> {
        parse::parse(src, inputs)
    }

    /// A built-in preset (see [`preset_names`]); `params` are `key=value` pairs from `--param`.
    /// Unknown keys are an error naming the key and listing the valid ones.
    pub fn preset(name: &str, params: &[(String, String)]) -> Result<Script, ScriptError> {
        let src = presets::source(name, params)?;
        parse::parse(&src, &Inputs::default())
            .map_err(|e| ScriptError::new(None, None, format!("preset `{name}`: {}", e.message)))
    }

    /// The TOML text a preset stands for, with its parameters applied.
    pub fn preset_source(name: &str, params: &[(String, String)]) -> Result<String, ScriptError> {
        presets::source(name, params)
    }

    /// Names of the steps, in script order; `StepId(i)` indexes this. The greeting, if the
    /// script has one, is a step too (named "greeting").
    pub fn step_names(&self) -> &[String] {
        &self.step_names
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The step of the greeting, when the server speaks first.
    pub fn greeting(&self) -> Option<StepId> {
        self.greeting.map(StepId)
    }

    /// Whether `step` is part of a connection's setup (the greeting or a `[[setup]]` step): a
    /// failed assertion there (a refused login) leaves the conversation nothing to do.
    pub fn is_setup(&self, step: StepId) -> bool {
        self.greeting == Some(step.0)
            || self.setup.iter().any(|item| match item {
                model::Item::Step(s) => *s == step.0,
                model::Item::ForEach { steps, .. } => steps.contains(&step.0),
            })
    }

    /// Sets every step's largest response (a `--max-response` flag overriding the script).
    /// Zero is taken as one byte.
    pub fn with_max_response(mut self, bytes: usize) -> Script {
        for step in &mut self.steps {
            step.max_response = bytes.max(1);
        }
        self
    }

    /// True when the script has a repeated part (`[[steps]]`): it makes requests until the
    /// driver stops asking, or `iterations` times.
    pub fn repeats(&self) -> bool {
        !self.body.is_empty()
    }

    /// `text` with every secret of the script (a `secret = true` var, an `{env:…}` value, an
    /// `exec` output) replaced by `***`, raw or escaped. For the shell's own messages; the
    /// conversation masks the texts it makes itself.
    pub fn mask(&self, text: &str) -> String {
        self.secrets.mask_text(text)
    }

    /// Whether `[vars]` entry `name` is marked `secret = true`.
    pub fn is_secret(&self, name: &str) -> bool {
        self.secret_vars.iter().any(|n| n == name)
    }

    /// The environment variables the script reads (`{env:NAME}`), each allowed by
    /// [`Inputs::allow_env`], in the order first read. Their values are secrets.
    pub fn env_read(&self) -> &[String] {
        &self.env_read
    }

    /// The `exec` entries of `[[setup]]`, in script order: the shell runs them (with
    /// `--allow-exec`) before the first connection and passes each output to
    /// [`Script::set_exec_value`].
    pub fn execs(&self) -> &[ExecStep] {
        &self.execs
    }

    /// The program and arguments of exec `index`, rendered over the variables as they stand
    /// (the outputs of earlier execs included).
    pub fn exec_command(&self, index: usize) -> Vec<Vec<u8>> {
        let lookup = |name: &str| -> Option<&[u8]> {
            match self.vars.iter().find(|(n, _)| n == name) {
                Some((_, model::Value::Text(t))) => Some(t),
                _ => None,
            }
        };
        self.execs
            .get(index)
            .map_or_else(Vec::new, |e| e.render(&lookup))
    }

    /// The output of exec `index` (trimmed by the shell): the value of its variable from now
    /// on; a secret unless the exec says `secret = false`.
    pub fn set_exec_value(&mut self, index: usize, value: Vec<u8>) {
        let Some(exec) = self.execs.get_mut(index) else {
            return;
        };
        exec.done = true;
        if exec.secret {
            self.secrets.add(&value);
        }
        if let Some((_, v)) = self.vars.iter_mut().find(|(n, _)| *n == exec.name) {
            *v = model::Value::Text(value);
        }
    }
}

/// Reads one environment variable (the shell's `std::env::var`, or a test's table).
pub type EnvFn = dyn Fn(&str) -> Option<String>;

/// What a script reads from outside its text, passed in by the shell (the core reads no
/// environment).
#[derive(Clone, Copy, Default)]
pub struct Inputs<'a> {
    /// `--param KEY=VALUE`: each KEY must be a `[vars]` entry; VALUE replaces its value.
    pub vars: &'a [(String, String)],
    /// Answers `{env:NAME}`; None: no variable is set.
    pub env: Option<&'a EnvFn>,
    /// The environment variables the script may read (`--allow-env`). A script is text from
    /// anywhere and it sends what it reads to a host it names, so `{env:NAME}` of a variable
    /// not listed here is refused (the error names every such variable), set or not.
    pub allow_env: &'a [String],
}

impl fmt::Debug for Inputs<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Values may be secrets: show only the names.
        let keys: Vec<&str> = self.vars.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Inputs")
            .field("vars", &keys)
            .field("env", &self.env.is_some())
            .field("allow_env", &self.allow_env)
            .finish()
    }
}

/// Index into [`Script::step_names`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StepId(pub usize);

/// A request ready to be written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub step: StepId,
    pub bytes: Vec<u8>,
    /// Where a "header" ends inside `bytes`, when the step defines one (a `{body}` mark or a
    /// `send_prefix`), for `--split-writes header`; None otherwise.
    pub header_len: Option<usize>,
}

/// A request [`Conversation::next_request_into`] appended to the caller's buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Issued {
    pub step: StepId,
    /// Its length: the last `len` bytes of the buffer.
    pub len: usize,
    /// As [`Request::header_len`], counted from the request's first byte.
    pub header_len: Option<usize>,
}

/// A response that arrived whole: one exchange (or the greeting).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completed {
    pub step: StepId,
    /// From `next_request` (for the greeting: see [`Conversation::connected`]).
    pub intended: Timestamp,
    /// The `now` of the call that completed it.
    pub finished: Timestamp,
    /// 0 for the greeting.
    pub request_bytes: usize,
    pub response_bytes: usize,
    /// An assertion on the response failed (`expect`, or a capture that found nothing): an
    /// error to count; the conversation goes on.
    pub failed_assertion: Option<String>,
}

/// Bytes that cannot be a response under the step's framing, or bytes nobody asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseError {
    pub step: String,
    pub message: String,
    /// The first bytes of the offending data, escaped.
    pub excerpt: String,
}

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "step `{}`: {}", self.step, self.message)?;
        if !self.excerpt.is_empty() {
            write!(f, " (received \"{}\")", self.excerpt)?;
        }
        Ok(())
    }
}

impl std::error::Error for ResponseError {}

/// An invalid script or preset parameter: where, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptError {
    line: Option<usize>,
    column: Option<usize>,
    message: String,
}

impl ScriptError {
    pub(crate) fn new(line: Option<usize>, column: Option<usize>, message: String) -> Self {
        ScriptError {
            line,
            column,
            message,
        }
    }

    /// 1-based line in the script; None for preset parameters.
    pub fn line(&self) -> Option<usize> {
        self.line
    }

    /// 1-based column (in characters) on that line.
    pub fn column(&self) -> Option<usize> {
        self.column
    }

    /// The message without its position.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ScriptError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.line, self.column) {
            (Some(l), Some(c)) => write!(f, "line {l}, column {c}: {}", self.message),
            (Some(l), None) => write!(f, "line {l}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for ScriptError {}

/// Bytes as a short, readable string: printable ASCII as is, `\r \n \t`, others `\xNN`.
pub(crate) fn escape_bytes(bytes: &[u8], limit: usize) -> String {
    let mut out = String::new();
    for &b in bytes.iter().take(limit) {
        match b {
            b'\r' => out.push_str("\\r"),
            b'\n' => out.push_str("\\n"),
            b'\t' => out.push_str("\\t"),
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            0x20..=0x7e => out.push(b as char),
            _ => out.push_str(&format!("\\x{b:02x}")),
        }
    }
    if bytes.len() > limit {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod functions_tests;
#[cfg(test)]
mod postgres_tests;
#[cfg(test)]
mod reuse_tests;
#[cfg(test)]
mod secrets_tests;
#[cfg(test)]
mod tests;
