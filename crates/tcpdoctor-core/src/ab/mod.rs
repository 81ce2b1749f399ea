//! `tcpdoctor ab`: two implementations measured in alternation, the ratio B/A of each figure
//! with its confidence interval and a verdict, hangs counted as results, and what the two
//! sides' traffic shows differently.
//!
//! The core takes what the shell measured (one [`RunRecord`] per run, in the order run) and
//! says what they show; it runs nothing and reads no clock.

mod order;
mod stats;
pub mod stream_why;
mod text;
mod why;

#[cfg(test)]
mod tests;

pub use order::{describe as describe_order, order, Slot};
pub use stats::{compare_figure, student_t_quantile};
pub use stream_why::{StreamSide, StreamWhy};
pub use text::render_text;
pub use why::{differences, Brief, SideFindings, Why};

use serde::{Deserialize, Serialize};

/// The version of `ab`'s JSON report (`schemas/ab-report.schema.json`).
pub const AB_SCHEMA_VERSION: u32 = 1;

/// Which of the two implementations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    A,
    B,
}

impl Side {
    pub fn letter(self) -> &'static str {
        match self {
            Side::A => "A",
            Side::B => "B",
        }
    }
}

/// Which way a figure improves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Times, latencies, CPU: B/A above 1 is B slower.
    Lower,
    /// Rates (requests or messages per second, bytes per second): B/A below 1 is B slower.
    Higher,
}

/// A figure each run yields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FigureSpec {
    pub name: String,
    pub better: Better,
    /// `s`, `ms`, `1/s`, … when known; a figure read from a command's output has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
}

/// How one run ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state")]
pub enum Outcome {
    /// Ran to its end and gave its figures.
    Ok,
    /// No progress (no byte moved on its sockets or pipes, no output line) for the hang
    /// threshold: stopped, with what its sockets looked like then.
    Hang {
        after_s: f64,
        sockets: Vec<HungSocket>,
    },
    /// Ended with a failure (a non-zero exit, a figure its output did not give).
    Failed { reason: String },
}

/// One socket of a hung run, as `inspect` would show it at the moment the run was stopped.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HungSocket {
    pub pid: u32,
    pub process: String,
    /// `tcp` or `unix`.
    pub kind: String,
    /// `local → remote` for TCP; the path (or `(unnamed)`) for a Unix socket.
    pub endpoints: String,
    /// Bytes the program has not read yet (its receive queue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unread_bytes: Option<u64>,
    /// Bytes written and not yet taken by the peer (TCP: sent and unacknowledged plus not
    /// sent; Unix: the send queue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unsent_bytes: Option<u64>,
    /// TCP: segments sent and unacknowledged.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unacked: Option<u32>,
    /// TCP: bytes written and not yet sent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub notsent_bytes: Option<u32>,
    /// TCP: the peer's advertised window was zero (it stopped reading).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer_zero_window: Option<bool>,
}

/// One run of one side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// 1-based; warm-up runs count from 1 too and are marked.
    pub round: u32,
    pub side: Side,
    pub warmup: bool,
    pub outcome: Outcome,
    /// Wall time of the run, seconds.
    pub wall_s: f64,
    /// Figure name → value, for the figures this run gave.
    pub figures: std::collections::BTreeMap<String, f64>,
}

/// The verdict on one figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// B is better beyond the noise.
    Faster,
    /// B is worse beyond the noise.
    Slower,
    /// The interval covers 1: no difference the noise can show.
    NoDifference,
    /// Fewer than [`stats::MIN_PAIRS`] rounds gave the figure on both sides.
    NotCompared,
}

/// One figure compared: B/A with its interval and the verdict.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FigureResult {
    pub name: String,
    pub better: Better,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Median of A's measured runs that gave it (None: none did).
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// Geometric mean of the rounds' B/A.
    pub ratio: Option<f64>,
    /// The confidence interval of `ratio`, `[low, high]`.
    pub ci: Option<[f64; 2]>,
    pub verdict: Verdict,
    /// Rounds that gave the figure on both sides (the pairs the interval is from).
    pub pairs: u32,
    /// When the spread is too wide to show a difference of the resolution asked for with
    /// the rounds run: about how many rounds would.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rounds_needed: Option<u32>,
    /// Said beside the verdict (why not compared, how wide the noise is).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub notes: Vec<String>,
}

/// Hangs per side, over the measured runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hangs {
    pub a: u32,
    pub b: u32,
}

/// How the comparison was made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AbSettings {
    /// `command` or `server`.
    pub mode: String,
    /// The two sides as given (commands, or server command lines).
    pub a: String,
    pub b: String,
    pub rounds: u32,
    pub warmup: u32,
    /// The run order, e.g. `A B B A A B …` (warm-up runs first).
    pub order: String,
    /// Two-sided confidence of the intervals, e.g. 0.99.
    pub confidence: f64,
    /// The smallest difference the rounds are asked to show, e.g. 0.05.
    pub resolution: f64,
    pub hang_after_s: f64,
    /// How the interval is computed (said in the report).
    pub method: String,
}

/// The gate's result (`--fail-if-slower`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateResult {
    Passed,
    Failed,
    NotGated,
}

/// `tcpdoctor ab --format json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AbReport {
    pub schema_version: u32,
    pub tool: crate::report::ToolInfo,
    pub command: String,
    pub settings: AbSettings,
    pub figures: Vec<FigureResult>,
    pub hangs: Hangs,
    pub runs: Vec<RunRecord>,
    /// Per scenario (server mode) or for the commands' traffic; empty when nothing was
    /// captured (a Unix socket, no capture possible, `--why-runs 0`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub why: Vec<Why>,
    /// `--stream`: each side's traced run, per message, side by side.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub stream: Option<StreamWhy>,
    pub result: GateResult,
    /// Why the gate failed (each names the figure or the hangs).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub reasons: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub warnings: Vec<String>,
}

/// Hangs per side over the measured (not warm-up) runs.
pub fn count_hangs(runs: &[RunRecord]) -> Hangs {
    let mut h = Hangs::default();
    for r in runs.iter().filter(|r| !r.warmup) {
        if matches!(r.outcome, Outcome::Hang { .. }) {
            match r.side {
                Side::A => h.a += 1,
                Side::B => h.b += 1,
            }
        }
    }
    h
}

/// The gate: `--fail-if-slower=RATIO` fails when a figure's interval puts B slower than
/// `ratio` × A (beyond the noise), when a figure could not be compared, and when any
/// measured run of either side hung or failed: a gate never passes what it did not measure,
/// and rounds that only completed where they happened to succeed are not the comparison asked
/// for.
pub fn gate(
    figures: &[FigureResult],
    runs: &[RunRecord],
    ratio: Option<f64>,
    confidence: f64,
) -> (GateResult, Vec<String>) {
    let Some(limit) = ratio else {
        return (GateResult::NotGated, Vec::new());
    };
    let mut reasons = Vec::new();
    for f in figures {
        match (f.verdict, f.ci) {
            (Verdict::NotCompared, _) | (_, None) => reasons.push(format!(
                "{}: not compared ({} complete rounds): the gate cannot pass what it did not measure",
                f.name, f.pairs
            )),
            (_, Some([lo, hi])) => {
                // "Slower" in the figure's own direction, as a factor ≥ 1.
                let slower_by = match f.better {
                    Better::Lower => lo,
                    Better::Higher => 1.0 / hi,
                };
                if f.verdict == Verdict::Slower && slower_by > limit {
                    reasons.push(format!(
                        "{}: B is slower than A by ×{:.3} at least ({} % confidence interval \
                         of B/A [{:.3}, {:.3}]), beyond the ×{limit} allowed",
                        f.name,
                        slower_by,
                        crate::numfmt::num(100.0 * confidence),
                        lo,
                        hi
                    ));
                }
            }
        }
    }
    for side in [Side::B, Side::A] {
        let measured = runs.iter().filter(|r| !r.warmup && r.side == side);
        let (mut hung, mut failed, mut all) = (0, 0, 0);
        for r in measured {
            all += 1;
            match r.outcome {
                Outcome::Hang { .. } => hung += 1,
                Outcome::Failed { .. } => failed += 1,
                Outcome::Ok => {}
            }
        }
        if hung > 0 {
            reasons.push(format!(
                "{} hung in {hung} of {all} measured run(s)",
                side.letter()
            ));
        }
        if failed > 0 {
            reasons.push(format!(
                "{} failed in {failed} of {all} measured run(s)",
                side.letter()
            ));
        }
    }
    if reasons.is_empty() {
        (GateResult::Passed, reasons)
    } else {
        (GateResult::Failed, reasons)
    }
}
