//! `--dry-run`: the first conversation's requests as they would be sent, without a server.
//!
//! The rules:
//! 1. The order is a connection's: the greeting awaited (if the server speaks first), each
//!    `[[setup]]` step once, then one pass of `[[steps]]` (`{conn}` and `{i}` are 0, random
//!    payloads come from the seed as in a run).
//! 2. A value only a response can give (a capture, the loop variable of a `for_each` over a
//!    captured list) is unknown: the placeholder that needs it is shown as written
//!    (`{hex(sha1(concat(challenge, " ", secret)))}`), and the unknown names say where their
//!    value will come from. Everything else is computed, so what is shown is what is sent.
//! 3. A `for_each` over a list written in `[vars]` shows its first element; over a captured
//!    list, one pass with the loop variable unknown.
//! 4. An `exec` is not run: its variable is unknown ("the output of …").
//! 5. Requests are escaped as the error excerpts are (`\r\n`, `\xNN`) and every secret is
//!    masked (`***`), after the request is built: what a secret became by a function is shown.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::expr::{Expr, Scope};
use super::functions::{push_decimal, Sources, WallClock};
use super::model::{Item, Step, Value};
use super::template::{random_text, Piece};
use super::Script;
use crate::impair::SplitMix64;
use crate::Timestamp;

/// The widest a step's name is shown, in characters; a longer one is cut (`…`).
const STEP_COLUMN: usize = 48;

/// The longest request a dry run shows before cutting it (`…`).
const SHOW_LIMIT: usize = 4096;

/// What a dry run shows: the requests of a connection's first conversation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DryRun {
    pub script: String,
    /// The server speaks first: the names the greeting captures (perhaps none).
    pub greeting: Option<Vec<String>>,
    pub requests: Vec<DryRequest>,
    /// Names a shown placeholder needs and a dry run cannot know, each with where its value
    /// comes from, in the order they are first needed.
    pub unknowns: Vec<Unknown>,
    /// The environment variables the script reads (each allowed by `--allow-env`; their
    /// values are masked like every secret).
    pub env: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DryRequest {
    /// "setup" or "steps".
    pub part: &'static str,
    pub step: String,
    /// The request, escaped, secrets masked; placeholders that need an unknown as written.
    pub shown: String,
    /// True when `shown` is exactly what would be sent (nothing unknown, nothing failed).
    pub exact: bool,
    /// How a `for_each` around it was shown, or why a computed value could not be.
    pub note: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unknown {
    pub name: String,
    /// "from the greeting", "captured by step `CASEIDS`", "each element of `ids`", …
    pub from: String,
}

impl Script {
    /// The requests of the first conversation (connection 0), as far as they can be known
    /// without a server; `unix_secs` is the wall clock for `now_unix()` (None: unknown).
    pub fn dry_run(&self, seed: u64, unix_secs: Option<u64>) -> DryRun {
        let mut walk = Walk {
            script: self,
            known: HashMap::new(),
            origin: HashMap::new(),
            rng: SplitMix64::new(seed),
            clock: unix_secs.map(|unix_secs| WallClock {
                unix_secs,
                at: Timestamp::ZERO,
                now: Timestamp::ZERO,
            }),
            out: DryRun {
                script: self.name.clone(),
                greeting: None,
                requests: Vec::new(),
                unknowns: Vec::new(),
                env: self.env_read.clone(),
            },
        };
        for (name, value) in &self.vars {
            if let Value::Text(t) = value {
                walk.known.insert(name.as_str(), t.as_slice());
            }
        }
        for e in self.execs.iter().filter(|e| !e.done) {
            walk.known.remove(e.name.as_str());
            walk.origin.insert(
                e.name.clone(),
                format!(
                    "the output of `{}` (exec at line {}; run with --allow-exec)",
                    e.written().join(" "),
                    e.line
                ),
            );
        }
        if let Some(g) = self.greeting {
            let step = &self.steps[g];
            walk.out.greeting = Some(step.captures.iter().map(|c| c.name.clone()).collect());
            walk.captured(step, "from the greeting".into());
        }
        for item in &self.setup {
            walk.item(item, "setup");
        }
        for item in &self.body {
            walk.item(item, "steps");
        }
        walk.out
    }
}

struct Walk<'s> {
    script: &'s Script,
    known: HashMap<&'s str, &'s [u8]>,
    /// Names that are unknown here, and where their value comes from.
    origin: HashMap<String, String>,
    rng: SplitMix64,
    clock: Option<WallClock>,
    out: DryRun,
}

impl<'s> Walk<'s> {
    fn captured(&mut self, step: &Step, from: String) {
        for c in &step.captures {
            self.known.remove(c.name.as_str());
            self.origin.insert(c.name.clone(), from.clone());
        }
    }

    fn item(&mut self, item: &'s Item, part: &'static str) {
        match item {
            Item::Step(s) => self.step(*s, part, None, None),
            Item::ForEach { var, list, steps } => {
                let written = self.script.vars.iter().find_map(|(n, v)| match v {
                    Value::List(l) if n == list && !self.origin.contains_key(list) => Some(l),
                    _ => None,
                });
                let (binding, note) = match written {
                    Some(l) if l.is_empty() => {
                        let note =
                            format!("for_each {var} in {list}: the list is empty, nothing is sent");
                        if let Some(&first) = steps.first() {
                            let name = self.script.steps[first].name.clone();
                            self.out.requests.push(DryRequest {
                                part,
                                step: name,
                                shown: String::new(),
                                exact: true,
                                note: Some(note),
                            });
                        }
                        return;
                    }
                    Some(l) => (
                        Some((var.as_str(), l[0].as_slice())),
                        format!(
                            "for_each {var} in {list}: the first of {} element(s) shown",
                            l.len()
                        ),
                    ),
                    None => {
                        self.origin
                            .insert(var.clone(), format!("each element of `{list}`"));
                        (
                            None,
                            format!("for_each {var} in {list}: one pass shown, {{{var}}} stands for each element"),
                        )
                    }
                };
                for (k, &s) in steps.iter().enumerate() {
                    let note = (k == 0).then(|| note.clone());
                    self.step(s, part, binding, note);
                }
            }
        }
    }

    fn step(
        &mut self,
        index: usize,
        part: &'static str,
        binding: Option<(&'s str, &'s [u8])>,
        note: Option<String>,
    ) {
        let script = self.script;
        let step = &script.steps[index];
        let Some(send) = &step.send else {
            return;
        };
        let known = &self.known;
        let lookup = |name: &str| -> Option<&'s [u8]> {
            match binding {
                Some((var, value)) if var == name => Some(value),
                _ => known.get(name).copied(),
            }
        };
        let is_known =
            |name: &str| binding.is_some_and(|(v, _)| v == name) || known.contains_key(name);
        let mut scope = Scope {
            lookup: &lookup,
            conn: 0,
            iteration: 0,
            sources: Sources {
                rng: &mut self.rng,
                clock: self.clock,
            },
        };
        let mut bytes = Vec::new();
        let mut failed = None;
        let mut needed: Vec<String> = Vec::new();
        if send.vars().all(is_known) {
            step.render(&mut scope, &mut bytes, &mut failed);
        } else {
            if let Some(prefix) = step.send_prefix {
                bytes.extend_from_slice(format!("{{{} length}}", prefix.name()).as_bytes());
            }
            for (piece, span) in send.pieces.iter().zip(&send.spans) {
                let written = send.source.get(span.clone()).unwrap_or("{…}").as_bytes();
                match piece {
                    Piece::Bytes(b) => bytes.extend_from_slice(b),
                    Piece::Var(name) if !is_known(name) => {
                        needed.push(name.clone());
                        bytes.extend_from_slice(written);
                    }
                    Piece::Var(name) => bytes.extend_from_slice(lookup(name).unwrap_or(&[])),
                    Piece::Conn => push_decimal(scope.conn, &mut bytes),
                    Piece::Iteration => push_decimal(scope.iteration, &mut bytes),
                    Piece::Random(n) => random_text(scope.sources.rng, *n, &mut bytes),
                    Piece::Body => {}
                    Piece::Expr(e) => {
                        let mut vars = Vec::new();
                        e.vars(&[], &mut vars);
                        let missing: Vec<String> = vars
                            .into_iter()
                            .map(|(n, _)| n)
                            .filter(|n| !is_known(n))
                            .collect();
                        if missing.is_empty() {
                            eval(e, &mut scope, &mut bytes, &mut failed);
                        } else {
                            needed.extend(missing);
                            bytes.extend_from_slice(written);
                        }
                    }
                }
            }
        }
        for name in &needed {
            if !self.out.unknowns.iter().any(|u| &u.name == name) {
                let from = self
                    .origin
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| "a response".to_string());
                self.out.unknowns.push(Unknown {
                    name: name.clone(),
                    from,
                });
            }
        }
        let note = match (&failed, note) {
            (Some(f), Some(n)) => Some(format!("{n}; {}", script.secrets.mask_text(f))),
            (Some(f), None) => Some(format!(
                "a computed value failed: {}",
                script.secrets.mask_text(f)
            )),
            (None, n) => n,
        };
        self.out.requests.push(DryRequest {
            part,
            step: step.name.clone(),
            shown: script.secrets.excerpt(&bytes, SHOW_LIMIT),
            exact: needed.is_empty() && failed.is_none(),
            note,
        });
        self.captured(step, format!("captured by step `{}`", step.name));
    }
}

fn eval<'s, 'v: 's>(
    e: &'s Expr,
    scope: &mut Scope<'_, 'v>,
    out: &mut Vec<u8>,
    failed: &mut Option<String>,
) {
    let at = out.len();
    if let Err(m) = e.eval_into(scope, out) {
        out.truncate(at);
        failed.get_or_insert(m);
    }
}

impl DryRun {
    /// The dry run as text for people.
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "dry run of `{}`: the first conversation's requests as they would be sent (nothing was connected; secrets show as ***)",
            self.script
        );
        if let Some(caps) = &self.greeting {
            let what = if caps.is_empty() {
                String::new()
            } else {
                format!("; it captures {}", caps.join(", "))
            };
            let _ = writeln!(s, "  greeting: the server speaks first{what}");
        }
        if !self.env.is_empty() {
            let _ = writeln!(
                s,
                "  reads the environment (allowed by --allow-env): {} (values shown as ***)",
                self.env.join(", ")
            );
        }
        let width = self
            .requests
            .iter()
            .map(|r| r.step.chars().count())
            .max()
            .unwrap_or(0)
            .min(STEP_COLUMN);
        let mut part = "";
        for r in &self.requests {
            if r.part != part {
                part = r.part;
                let title = if part == "setup" {
                    "[[setup]], once per connection:"
                } else {
                    "[[steps]], one pass (repeated for the run):"
                };
                let _ = writeln!(s, "  {title}");
            }
            if let Some(n) = &r.note {
                let _ = writeln!(s, "    ({n})");
            }
            if r.shown.is_empty() && r.note.is_some() && r.exact {
                continue;
            }
            let mark = if r.exact {
                ""
            } else {
                "   (not exact: see below)"
            };
            let step = crate::numfmt::ellipsize(&r.step, STEP_COLUMN);
            let _ = writeln!(s, "    {step:<width$}  \"{}\"{mark}", r.shown);
        }
        if !self.unknowns.is_empty() {
            let _ = writeln!(
                s,
                "  a dry run cannot know these values; their placeholders are shown as written:"
            );
            for u in &self.unknowns {
                let _ = writeln!(s, "    {} = <{}>", u.name, u.from);
            }
        }
        s
    }
}
