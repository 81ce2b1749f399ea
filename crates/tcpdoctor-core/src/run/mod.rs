//! The model of a `tcpdoctor run` (and of `tcpdoctor demo`): one target driven through several
//! scenarios, each with its bench figures, its capture, the server's CPU and its findings; the
//! side-by-side comparisons; the checks that gate CI.
//!
//! The shell (binary crate) starts servers, proxies and captures and hands the measurements
//! here; everything a renderer shows (text, JSON, HTML) is computed in this module, once.
//!
//! # Layout
//! - `mod.rs`: the report and one scenario's result.
//! - `scenario.rs`: the scenario names users type (`direct`, `proxy`, `proxy-nagle`, `wan:15ms`).
//! - `figures.rs`: the numbers of one scenario that tables, baselines and checks compare.
//! - `compare.rs`: before/after tables with ratios, marked better/worse beyond the noise.
//! - `noise.rs`: how much a figure moves between measurements (intervals, runs' spread).
//! - `check.rs`: `--check 'p99<5ms'` parsed and evaluated.
//! - `worse.rs`: `--fail-on-worse`: the baseline comparison as a gate.
//! - `repeat.rs`: `--repeat K`: a scenario's K runs pooled, and their spread.
//! - `busy_poll.rs`: the `busy_poll` finding, from the server's CPU sampled along the driver's
//!   timeline (`cpu_samples.rs`), or from the trace of its system calls (`busy_poll_traced.rs`).
//! - `text.rs`: the report for a terminal ([`render_run_text`]).
//! - `html/`: the report as one self-contained HTML page ([`render_html`]).

mod busy_poll;
mod check;
mod compare;
mod cpu_samples;
mod figures;
mod html;
mod noise;
mod repeat;
mod scenario;
#[cfg(test)]
mod tests;
mod text;
#[cfg(test)]
mod text_tests;
pub mod worse;

use serde::Serialize;

use crate::bench::{Outcome, RunResult};
use crate::numfmt::{count, num};
use crate::report::{Bucket, CaptureSummary, Finding, FindingKind, ToolInfo};
use crate::stats::round3;

pub use busy_poll::{busy_poll, withheld_by_trace, BusyPollInput};
pub use check::{Check, CheckResult, CheckStatus, Metric, Op};
pub use compare::{Basis, Comparison, ComparisonRow};
pub use cpu_samples::{CpuInterval, CpuSamples, Phase, Phases};
pub use figures::{log_buckets, timer_stalls, Figures, LogBucket, StepFigures, STALL_MS};
pub use html::render_html;
pub use noise::{Interval, Noise, RunPoint, StepNoise};
pub use repeat::{Pooled, RepeatRun, ScenarioRepeat};
pub use scenario::{Scenario, ScenarioKind, SCENARIO_NAMES};
pub use text::render_run_text;
pub use worse::WorseFigure;

/// Bumped when a field changes meaning or disappears (adding fields does not bump it).
pub const RUN_SCHEMA_VERSION: u32 = 1;

/// What the run was asked to do.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSettings {
    /// `run` or `demo`.
    pub command: String,
    pub target: String,
    pub script: String,
    /// FNV-1a 64 of the script's source (a file's text, or a preset's with its parameters),
    /// so `--baseline` can tell a baseline of another script that has the same name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script_digest: Option<String>,
    /// The server command line, when `run` started it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    pub scenarios: Vec<String>,
    /// Requests per scenario and run.
    pub requests: u64,
    /// Runs per scenario (`--repeat`); the figures pool them all.
    pub repeat: u64,
    pub connections: u64,
    /// Requests in flight per connection (`--pipeline`; 1: each waits for the previous
    /// response).
    pub pipeline: u64,
    /// Where captures, logs and the server's output were written.
    pub output_dir: String,
}

/// The server process tree's CPU time during one scenario (from /proc).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct ServerCpu {
    pub user_s: f64,
    pub system_s: f64,
    /// Wall time of the scenario.
    pub wall_s: f64,
    /// (user + system) / exchanges, microseconds.
    pub per_request_us: f64,
    /// (user + system) / wall: near 0 a server that mostly sleeps, near 1 one busy core.
    pub busy_share: f64,
    /// Processes in the tree when it was last sampled.
    pub processes: u64,
}

impl ServerCpu {
    pub fn new(user_s: f64, system_s: f64, wall_s: f64, exchanges: u64, processes: u64) -> Self {
        let cpu = user_s + system_s;
        ServerCpu {
            user_s: round3(user_s),
            system_s: round3(system_s),
            wall_s: round3(wall_s),
            per_request_us: if exchanges > 0 {
                round3(cpu * 1e6 / exchanges as f64)
            } else {
                0.0
            },
            busy_share: if wall_s > 0.0 {
                round3(cpu / wall_s)
            } else {
                0.0
            },
            processes,
        }
    }

    /// The "mostly sleeping" sentence: the first clue when latency is high and nobody is busy.
    pub fn describe(&self) -> String {
        let pct = self.busy_share * 100.0;
        format!(
            "{}: {} s CPU in {} s wall ({pct:.0}% of one core)",
            if self.busy_share < 0.2 {
                "server mostly sleeping"
            } else {
                "server busy"
            },
            num(self.user_s + self.system_s),
            num(self.wall_s)
        )
    }
}

/// The capture a scenario was diagnosed from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CaptureInfo {
    /// The file written (open it in Wireshark), relative to where the run was started.
    pub file: String,
    /// How it was taken: `proxy recording (client end)`, `AF_PACKET on lo`, …
    pub source: String,
    pub summary: CaptureSummary,
}

/// How each side wrote, as the proxy read it (one chunk per read).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ChunkView {
    pub c2s_chunks: u64,
    pub s2c_chunks: u64,
    /// Server→client chunk sizes, most frequent first (bytes → count).
    pub s2c_sizes: Vec<Bucket>,
    /// Client→server chunk sizes, most frequent first.
    pub c2s_sizes: Vec<Bucket>,
}

/// One scenario: a named path between driver and target, and what was measured on it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScenarioResult {
    pub name: String,
    /// The path exactly (`Scenario::definition`: a `wan:` path in its canonical form): what
    /// `--baseline` requires to be equal before comparing two scenarios of the same name.
    pub definition: String,
    /// The path in words ("driver → proxy (Nagle on towards the driver) → server").
    pub path: String,
    /// All runs pooled (`--repeat`): what tables, checks and baselines compare.
    pub figures: Figures,
    /// All runs pooled, as one bench run.
    pub bench: RunResult,
    /// Each run's own figures and their spread, when the scenario ran more than once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub repeat: Option<ScenarioRepeat>,
    /// Exchange latencies on a log scale, for histograms.
    pub latency_histogram: Vec<LogBucket>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureInfo>,
    /// Why there is no capture, when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture_note: Option<String>,
    /// Over a real path (`wan:`), the server's end: its capture and what it shows. The
    /// scenario's own findings (and the gate) are the client's end's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_end: Option<ServerEnd>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunks: Option<ChunkView>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu: Option<ServerCpu>,
    /// The server's accepted sockets on its port as read from the live process during the
    /// scenario (`inspect`'s reading), when `run` started the server and could read them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_sockets: Option<crate::inspect::server_sockets::ServerSockets>,
    /// The server's system calls over the scenario, when `run` started it (traced, or why
    /// not): counts per socket, writes per response, TCP_NODELAY, polling.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub syscalls: Option<crate::syscalls::SyscallsReport>,
    pub findings: Vec<Finding>,
}

impl ScenarioResult {
    pub fn has(&self, kind: FindingKind) -> bool {
        self.findings.iter().any(|f| f.kind == kind)
    }

    /// At least one exchange was measured: latency and throughput figures mean something.
    pub fn measured(&self) -> bool {
        self.figures.exchanges > 0
    }

    /// Why this scenario cannot pass whatever the checks say: it measured no exchange, or a
    /// run of it hung, failed or was interrupted. `planned` is the exchanges it was asked for,
    /// when all scenarios were asked for the same.
    pub fn incomplete(&self, planned: Option<u64>) -> Option<Incomplete> {
        let f = &self.figures;
        let outcome = self.bench.outcome;
        let what = match (outcome, f.exchanges) {
            (Outcome::Interrupted, _) => "interrupted",
            (_, 0) => "nothing measured",
            (Outcome::Completed, _) => return None,
            (Outcome::Hung, _) => "hung",
            (Outcome::Failed, _) => "failed",
        };
        let of = match planned {
            Some(n) => format!(
                "{} of {n} exchange{}",
                f.exchanges,
                if n == 1 { "" } else { "s" }
            ),
            None => format!(
                "{} exchange{}",
                f.exchanges,
                if f.exchanges == 1 { "" } else { "s" }
            ),
        };
        let mut message = format!(
            "{what} in scenario {}: {of} measured, {}, {}",
            self.name,
            count(f.errors, "error"),
            count(f.timeouts, "timeout"),
        );
        // The bench's note, less what the sentence already says.
        let note = self.bench.note.as_deref().map(|n| {
            n.strip_prefix("no exchange was measured")
                .map_or(n, |rest| rest.trim_start_matches("; "))
        });
        if let Some(n) = note.filter(|n| !n.is_empty()) {
            message.push_str(&format!(" ({n})"));
        }
        if let Some(e) = self.bench.errors.examples.first() {
            message.push_str(&format!("; e.g. {e}"));
        }
        Some(Incomplete {
            scenario: self.name.clone(),
            outcome,
            exchanges: f.exchanges,
            message,
        })
    }

    /// The failed exchanges in a sentence, when there were any: they are not in the latency
    /// figures, but they crossed the wire, so the capture and its findings do include them.
    pub fn failures(&self) -> Option<String> {
        let e = &self.bench.errors;
        if e.total() + e.timeouts == 0 {
            return None;
        }
        let mut s = format!(
            "{} ({} connect, {} unframed response, {} assertion, {} closed) and {}, none in \
             the latency figures",
            e.total(),
            e.connect,
            e.response,
            e.assertion,
            e.closed,
            count(e.timeouts, "timeout"),
        );
        if self.capture.is_some() {
            s.push_str(" (the capture, and the findings from it, include them)");
        }
        if let Some(x) = e.examples.first() {
            s.push_str(&format!("; e.g. {x}"));
        }
        Some(s)
    }

    /// The first (most costly) finding of each kind, in cost order: one entry per kind even
    /// when a kind was found in both directions or at several servers.
    pub fn findings_by_kind(&self) -> Vec<&Finding> {
        let mut seen: Vec<&Finding> = Vec::new();
        for f in &self.findings {
            if !seen.iter().any(|s| s.kind == f.kind) {
                seen.push(f);
            }
        }
        seen
    }
}

/// One pathology of the demo: a scenario that must show it and its fixed twin that must not.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DemoCase {
    pub title: String,
    /// What the demo sets up, in a sentence.
    pub setup: String,
    pub expected: FindingKind,
    pub before: String,
    pub after: String,
    /// Exchanges driven in each of the two scenarios.
    pub requests: u64,
    /// The expected finding was named in `before`.
    pub reproduced: bool,
    /// …and not in `after`.
    pub fixed: bool,
    /// The finding's verdict in `before`, or why it was not reproduced.
    pub diagnosis: String,
    /// The fix the finding gives, and what the twin changed.
    pub fix: String,
}

/// A scenario that fails the gate whatever its checks say.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Incomplete {
    pub scenario: String,
    /// How its (pooled) bench run ended.
    pub outcome: Outcome,
    pub exchanges: u64,
    /// `nothing measured in scenario direct: 0 of 200 exchanges measured, 10 errors, …`.
    pub message: String,
}

/// What the gate concluded; the exit code follows it (0, 0, 1, 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GateResult {
    /// A gate was asked for and held: every scenario measured what it was asked to, every
    /// check held, no `--fail-on` kind was found, no `--fail-on-worse` figure got worse.
    Passed,
    /// Every scenario measured what it was asked to, but nothing was asked to pass or fail
    /// (no `--check`, `--fail-on` or `--fail-on-worse`): not "passed", whatever it found.
    NotGated,
    Failed,
    /// Stopped by Ctrl-C (or SIGTERM): the figures cover only what was measured until then.
    Interrupted,
}

impl GateResult {
    pub fn as_str(self) -> &'static str {
        match self {
            GateResult::Passed => "passed",
            GateResult::NotGated => "not_gated",
            GateResult::Failed => "failed",
            GateResult::Interrupted => "interrupted",
        }
    }
}

/// The gate a run was asked to pass: `--check` expressions, `--fail-on` kinds and
/// `--fail-on-worse` figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GateSpec {
    pub checks: Vec<String>,
    /// Finding kinds, or `any`.
    pub fail_on: Vec<String>,
    /// Figures that fail the run when the baseline comparison marks them WORSE (`all`: every
    /// figure of the table); empty when `--fail-on-worse` was not given.
    pub fail_on_worse: Vec<String>,
}

impl GateSpec {
    pub fn is_empty(&self) -> bool {
        self.checks.is_empty() && self.fail_on.is_empty() && self.fail_on_worse.is_empty()
    }

    /// `2 checks, --fail-on any, --fail-on-worse p50,stalls`; empty when nothing was asked.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if !self.checks.is_empty() {
            parts.push(count(self.checks.len() as u64, "check"));
        }
        if !self.fail_on.is_empty() {
            parts.push(format!("--fail-on {}", self.fail_on.join(",")));
        }
        match self.fail_on_worse.as_slice() {
            [] => {}
            [all] if all == worse::ALL => {
                parts.push("--fail-on-worse (every figure of the baseline comparison)".into())
            }
            figures => parts.push(format!("--fail-on-worse {}", figures.join(","))),
        }
        parts.join(", ")
    }
}

/// The server's end of a real path: what the server's kernel saw.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerEnd {
    /// Its capture (`DIR/<scenario>.far.pcapng`).
    pub file: String,
    /// The findings its packets show (PHYSICS §3: at the sender's end a Nagle hold is released
    /// at once by the ACK; at the receiver's end one round trip after it).
    pub findings: Vec<Finding>,
    /// The two ends' captures read together: what each way of the path did (losses, one-way
    /// delays, which retransmissions were needed), as `analyze --ends` says it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<crate::ends::EndsReport>,
}

/// The whole report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunReport {
    pub schema_version: u32,
    pub tool: ToolInfo,
    pub settings: RunSettings,
    pub scenarios: Vec<ScenarioResult>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cases: Vec<DemoCase>,
    /// Before/after tables: each scenario against the baseline, or each demo case's pair.
    pub comparisons: Vec<Comparison>,
    pub checks: Vec<CheckResult>,
    /// Finding kinds `--fail-on` asked about that were found.
    pub failed_on: Vec<String>,
    /// Figures `--fail-on-worse` covers that the baseline comparison marked WORSE.
    pub worse: Vec<WorseFigure>,
    /// True when the result is not `passed` (exit 1): a check failed or could not be
    /// evaluated, a `--fail-on` kind was found, a scenario measured nothing, hung or was
    /// interrupted (or, for `demo`, a case was not reproduced or not fixed).
    pub failed: bool,
    pub result: GateResult,
    /// Stopped by Ctrl-C (or SIGTERM, SIGHUP).
    pub interrupted: bool,
    /// What was asked for and did not run, after an interruption (scenarios; demo cases).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<String>,
    /// Scenarios that measured nothing, hung or were interrupted: never passed.
    pub incomplete: Vec<Incomplete>,
    /// Every reason the result is not `passed`, in words: what text and HTML show with it.
    pub reasons: Vec<String>,
    /// What the gate was made of: the checks and the `--fail-on` kinds asked for.
    pub gate: GateSpec,
    /// Wall time of the whole command, seconds (servers, scenarios, captures, analysis).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub elapsed_s: Option<f64>,
}

impl RunReport {
    pub fn new(settings: RunSettings, scenarios: Vec<ScenarioResult>) -> RunReport {
        RunReport {
            schema_version: RUN_SCHEMA_VERSION,
            tool: ToolInfo::current(),
            settings,
            scenarios,
            cases: Vec::new(),
            comparisons: Vec::new(),
            checks: Vec::new(),
            failed_on: Vec::new(),
            worse: Vec::new(),
            failed: false,
            result: GateResult::NotGated,
            interrupted: false,
            not_run: Vec::new(),
            incomplete: Vec::new(),
            reasons: Vec::new(),
            gate: GateSpec::default(),
            elapsed_s: None,
        }
    }

    /// Evaluates `checks` on every scenario they apply to and `fail_on` on every finding, and
    /// sets [`RunReport::failed`].
    pub fn gate(&mut self, checks: &[Check], fail_on: &[FindingKind], fail_on_any: bool) {
        self.gate_with_worse(checks, fail_on, fail_on_any, None);
    }

    /// [`RunReport::gate`], and `fail_on_worse` (the figures `--fail-on-worse` names, or
    /// [`worse::ALL`]) on the baseline comparisons already in [`RunReport::comparisons`].
    pub fn gate_with_worse(
        &mut self,
        checks: &[Check],
        fail_on: &[FindingKind],
        fail_on_any: bool,
        fail_on_worse: Option<&[String]>,
    ) {
        self.checks = checks
            .iter()
            .flat_map(|c| c.evaluate(&self.scenarios))
            .collect();
        let mut found: Vec<String> = Vec::new();
        for s in &self.scenarios {
            for f in &s.findings {
                if (fail_on_any || fail_on.contains(&f.kind)) && !found.contains(&label(s, f)) {
                    found.push(label(s, f));
                }
            }
        }
        self.failed_on = found;
        // A kind that could not have been found in a scenario (no capture analysed for the
        // packets' kinds; no server CPU sampled for busy_poll) was not gated there: it fails,
        // as a `stalls` check there does, rather than pass what was not measured.
        let mut unmeasured: Vec<String> = Vec::new();
        for s in &self.scenarios {
            let kinds: Vec<FindingKind> = if fail_on_any {
                FindingKind::ALL.to_vec()
            } else {
                fail_on.to_vec()
            };
            let packets = kinds.iter().any(|k| *k != FindingKind::BusyPoll);
            if packets && s.figures.stalls.is_none() {
                unmeasured.push(format!(
                    "--fail-on {} in {}: not evaluated, the packets' findings come from the \
                     capture's analysis and this scenario has none ({})",
                    if fail_on_any {
                        "any".to_string()
                    } else {
                        kinds
                            .iter()
                            .filter(|k| **k != FindingKind::BusyPoll)
                            .map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(",")
                    },
                    s.name,
                    s.capture_note
                        .as_deref()
                        .unwrap_or("its capture could not be analysed")
                ));
            }
            if kinds.contains(&FindingKind::BusyPoll)
                && !fail_on_any
                && s.figures.server_cpu_per_request_us.is_none()
            {
                unmeasured.push(format!(
                    "--fail-on busy_poll in {}: not evaluated, the server's CPU was not \
                     measured (run starts no server without --server)",
                    s.name
                ));
            }
        }
        self.gate = GateSpec {
            checks: checks.iter().map(|c| c.text.clone()).collect(),
            fail_on: if fail_on_any {
                vec!["any".to_string()]
            } else {
                fail_on.iter().map(|k| k.as_str().to_string()).collect()
            },
            fail_on_worse: fail_on_worse.map(<[String]>::to_vec).unwrap_or_default(),
        };
        let mut reasons: Vec<String> = self
            .checks
            .iter()
            .filter(|c| !c.passed)
            .map(|c| format!("check {} in {}: {}", c.check, c.scenario, c.message))
            .collect();
        reasons.extend(
            self.failed_on
                .iter()
                .map(|f| format!("found {f} (--fail-on)")),
        );
        reasons.extend(unmeasured);
        if let Some(figures) = fail_on_worse {
            let ran: Vec<String> = self.scenarios.iter().map(|s| s.name.clone()).collect();
            let verdict = worse::evaluate(&self.comparisons, figures, &ran);
            reasons.extend(verdict.reasons);
            self.worse = verdict.worse;
        }
        let planned = self.settings.requests * self.settings.repeat.max(1);
        let gated = !self.gate.is_empty();
        self.conclude(Some(planned), reasons, gated);
    }

    /// The demo's gate: every case reproduced and fixed, every scenario measured.
    pub fn gate_demo(&mut self) {
        let reasons = self
            .cases
            .iter()
            .filter(|c| !(c.reproduced && c.fixed))
            .map(|c| {
                format!(
                    "{}: {}",
                    c.title,
                    if c.reproduced {
                        "NOT fixed by the twin"
                    } else {
                        "NOT reproduced"
                    }
                )
            })
            .collect::<Vec<String>>();
        // A case this machine could not run (said with its reason) is not passed either.
        let mut reasons = reasons;
        if !self.interrupted {
            reasons.extend(self.not_run.iter().map(|n| format!("{n}: NOT run")));
        }
        self.conclude(None, reasons, true);
    }

    /// The result, from `gate_reasons` (failed checks, kinds found, demo cases), the
    /// scenarios that measured nothing, and an interruption (set by the shell beforehand, or
    /// seen in a scenario's outcome): never `passed` when any of these holds, and never
    /// `passed` when nothing was `gated` either (then `not_gated`).
    fn conclude(&mut self, planned: Option<u64>, gate_reasons: Vec<String>, gated: bool) {
        self.incomplete = self
            .scenarios
            .iter()
            .filter_map(|s| s.incomplete(planned))
            .collect();
        self.interrupted |= self
            .incomplete
            .iter()
            .any(|i| i.outcome == Outcome::Interrupted);
        let mut reasons = Vec::new();
        if self.interrupted {
            let mut r = "interrupted (Ctrl-C): the figures cover only what was measured until \
                         then"
                .to_string();
            if !self.not_run.is_empty() {
                r.push_str(&format!("; not run: {}", self.not_run.join(", ")));
            }
            reasons.push(r);
        }
        reasons.extend(self.incomplete.iter().map(|i| i.message.clone()));
        reasons.extend(gate_reasons);
        self.result = if self.interrupted {
            GateResult::Interrupted
        } else if !reasons.is_empty() {
            GateResult::Failed
        } else if gated {
            GateResult::Passed
        } else {
            GateResult::NotGated
        };
        self.failed = matches!(self.result, GateResult::Failed | GateResult::Interrupted);
        self.reasons = reasons;
    }
}

fn label(s: &ScenarioResult, f: &Finding) -> String {
    format!("{} in {}", f.kind, s.name)
}
