//! `exec`: a value from an outside command, for what no built-in function covers (a token
//! from a vault, a signature made by a company tool).
//!
//! ```toml
//! [[setup]]
//! exec = { name = "token", command = ["./get-token.sh", "{user}"], timeout = "5s" }
//! ```
//!
//! The rules:
//! 1. Only in `[[setup]]`, never in `[[steps]]` or a `for_each`: a command per exchange would
//!    measure the command, not the server. Refused when the script is loaded.
//! 2. It runs once, before the first connection, in script order; its arguments are
//!    templates over `[vars]` and earlier `exec` values (not captures: no response exists
//!    yet). Its standard output, trimmed of surrounding whitespace, becomes the variable
//!    `name` for every later step.
//! 3. The core only models it: the shell runs the command (with `--allow-exec` only), under
//!    `timeout` (default 10s, at most 10min), kills it when that passes, and passes the output
//!    in with [`Script::set_exec_value`](super::Script::set_exec_value).
//! 4. Its output is a secret (see `secrets`) unless the script says `secret = false`.

use std::time::Duration;

use toml::de::{DeTable, DeValue};

use super::expr::Scope;
use super::functions::Sources;
use super::parse::{kind, Def, Parser, Span};
use super::parse_step::get;
use super::template::Template;
use super::ScriptError;
use crate::impair::SplitMix64;

/// The default and the longest `timeout` of an `exec`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// An `exec` of `[[setup]]`: a command whose output becomes a variable.
#[derive(Clone, Debug)]
pub struct ExecStep {
    pub(crate) name: String,
    pub(crate) command: Vec<Template>,
    pub(crate) timeout: Duration,
    pub(crate) line: usize,
    pub(crate) secret: bool,
    /// The shell has passed its output in.
    pub(crate) done: bool,
}

impl ExecStep {
    /// The variable it sets.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The script line of its `exec`.
    pub fn line(&self) -> usize {
        self.line
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The command as written (templates unrendered), for messages.
    pub fn written(&self) -> Vec<&str> {
        self.command.iter().map(|t| t.source.as_str()).collect()
    }

    /// The program and its arguments, rendered over `lookup` (variables as they stand).
    pub(crate) fn render<'v>(&self, lookup: &dyn Fn(&str) -> Option<&'v [u8]>) -> Vec<Vec<u8>> {
        let mut rng = SplitMix64::new(0);
        let mut scope = Scope {
            lookup,
            conn: 0,
            iteration: 0,
            sources: Sources {
                rng: &mut rng,
                clock: None,
            },
        };
        self.command
            .iter()
            .map(|t| {
                let mut out = Vec::new();
                t.render(&mut scope, &mut out, &mut None);
                out
            })
            .collect()
    }
}

impl Parser<'_> {
    /// A `[[setup]]` entry with `exec` (rule 1 is checked by the caller).
    pub(crate) fn exec(
        &mut self,
        entry: &DeTable<'_>,
        span: &Span,
        outside: &[String],
    ) -> Result<ExecStep, ScriptError> {
        self.check_keys(entry, &["exec"], "a [[setup]] with `exec`")?;
        let Some(v) = get(entry, "exec") else {
            return Err(self.err(span, "`exec` is missing"));
        };
        let table = self.table(v, "exec")?;
        self.check_keys(table, &["name", "command", "timeout", "secret"], "`exec`")?;
        let Some(name_v) = get(table, "name") else {
            return Err(self.err(
                &v.span(),
                "`exec` needs `name`: the variable its output becomes",
            ));
        };
        let name = self.string(name_v, "name")?.to_string();
        self.var_name(&name, &name_v.span(), "variable")?;
        if let Some(def) = self.defined.get(&name) {
            return Err(self.err(
                &name_v.span(),
                format!("`{name}` is already defined ({})", def.origin),
            ));
        }
        let Some(cmd_v) = get(table, "command") else {
            return Err(self.err(
                &v.span(),
                "`exec` needs `command`: the program and its arguments, e.g. [\"./token.sh\", \"{user}\"]",
            ));
        };
        let items = match cmd_v.get_ref() {
            DeValue::Array(items) if !items.is_empty() => items,
            DeValue::Array(_) => {
                return Err(self.err(&cmd_v.span(), "`command` must not be empty"));
            }
            other => {
                return Err(self.err(
                    &cmd_v.span(),
                    format!(
                        "`command` must be an array of strings (program, arguments…), not {}",
                        kind(other)
                    ),
                ))
            }
        };
        let mut command = Vec::new();
        for item in items.iter() {
            let text = self.string(item, "command")?;
            let t = Template::parse_text(text, self.env).map_err(|e| {
                self.err(
                    &self.inside(item, e.offset),
                    format!("in `command`: {}", e.message),
                )
            })?;
            for (var, offset) in &t.refs {
                let at = self.inside(item, *offset);
                if !self.defined.contains_key(var) {
                    return Err(self.undefined(var, &at));
                }
                if !outside.contains(var) {
                    return Err(self.err(&at, format!("`exec` runs before any connection: it cannot use the capture `{var}` (only [vars] and earlier exec values)")));
                }
                if self.defined.get(var).is_some_and(|d| d.list) {
                    return Err(self.err(
                        &at,
                        format!("`{var}` is a list; an argument is a single value"),
                    ));
                }
            }
            command.push(t);
        }
        if command[0].source.trim().is_empty() {
            return Err(self.err(&cmd_v.span(), "the program name in `command` is empty"));
        }
        let timeout = match get(table, "timeout") {
            Some(t) => {
                let text = self.string(t, "timeout")?;
                let d = crate::units::parse_duration(text)
                    .map_err(|e| self.err(&t.span(), format!("`timeout`: {e}")))?;
                if d.is_zero() || d > MAX_TIMEOUT {
                    return Err(
                        self.err(&t.span(), "`timeout` must be more than 0 and at most 10min")
                    );
                }
                d
            }
            None => DEFAULT_TIMEOUT,
        };
        let secret = match get(table, "secret") {
            Some(s) => self.boolean(s, "secret")?,
            None => true,
        };
        let line = self.line(&v.span());
        self.defined.insert(
            name.clone(),
            Def {
                list: false,
                origin: format!("the output of the exec at line {line}"),
            },
        );
        Ok(ExecStep {
            name,
            command,
            timeout,
            line,
            secret,
            done: false,
        })
    }
}
