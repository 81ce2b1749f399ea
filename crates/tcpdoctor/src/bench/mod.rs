//! The bench driver's I/O shell: connections, clocks, sockets and the run loop.
//!
//! What to send and how a response is framed is the pure script core's business
//! (`tcpdoctor_core::script::Conversation`); what the measurements mean is the report model's
//! (`tcpdoctor_core::bench`). This module moves bytes, sleeps, reads the monotonic clock and
//! counts. Latency is `finished − intended`: closed loop intends "now", open loop intends each
//! slot of a fixed schedule, even when the connection is late — so a stall cannot hide the
//! requests queued behind it (coordinated omission).
//!
//! # Layout
//! - `mod.rs`: the validated configuration and [`run`] (a first connect, then `--repeat` runs).
//! - `run.rs`: one run — spawn the connections, watch for the end, a hang or a stop, collect.
//! - `conn.rs`: one connection — connect, write (whole, pipelined or split), read, frame via
//!   the conversation, time out, reconnect.
//! - `recorder.rs`: what connections share — the request budget, histograms, counters.
//! - `progress.rs`: the progress line on a terminal; `cpu.rs`: the driver's own CPU time.
//! - `timeline.rs`: whether the server owes an answer at this moment (`run`'s CPU sampler).

pub(crate) mod conn;
pub(crate) mod cpu;
pub(crate) mod exec;
mod progress;
mod recorder;
mod run;
pub(crate) mod timeline;

use std::sync::Arc;
use std::time::Duration;

use tcpdoctor_core::bench::{BenchReport, BenchSettings, Outcome, RunMeasurements, RunResult};
use tcpdoctor_core::script::Script;
use tcpdoctor_core::units::fmt_duration;

use crate::proxy::Addr;

/// How each request is written to the socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SplitWrites {
    /// One write per batch of requests (the healthy client).
    Whole,
    /// Each request in N writes of near-equal size.
    Pieces(usize),
    /// Two writes: up to the header end the script's step defines, then the rest.
    Header,
    /// Two writes: the first B bytes, then the rest.
    HeaderBytes(usize),
}

impl SplitWrites {
    pub fn describe(self) -> String {
        match self {
            SplitWrites::Whole => "whole".into(),
            SplitWrites::Pieces(n) => format!("in {n} pieces"),
            SplitWrites::Header => "as header, then body".into(),
            SplitWrites::HeaderBytes(b) => format!("as {b} bytes, then the rest"),
        }
    }
}

/// When a run stops issuing requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    Requests(u64),
    Duration(Duration),
}

/// How long before each open-loop slot the driver stays awake by default (`bench --spin`): as
/// long as the reference client of `scripts/bench-driver.sh` (docs/bench.md, "open loop").
pub const DEFAULT_SPIN: Duration = Duration::from_micros(60);

/// Everything a run needs, validated.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    pub target: Addr,
    pub script: Arc<Script>,
    pub connections: u64,
    pub pipeline: usize,
    /// Open loop: requests per second over all connections.
    pub rate: Option<f64>,
    /// Open loop: how long before each slot the driver stays awake (yielding instead of
    /// sleeping), and whether it looks for quick answers without sleeping (not when zero).
    pub spin: Duration,
    pub bound: Bound,
    pub warmup: Duration,
    pub timeout: Duration,
    pub hang_after: Duration,
    pub nagle: bool,
    pub split: SplitWrites,
    pub repeat: u64,
    pub threads: usize,
    pub seed: u64,
    pub progress: bool,
    /// Abandon the run as soon as this process has exited (`run`'s server): the target is
    /// gone, and waiting `hang_after` for it is time lost.
    pub watch_pid: Option<i32>,
    /// Where the connections say whether the server owes them an answer (`run`'s sampler).
    pub timeline: Option<Arc<timeline::Timeline>>,
    /// Where the first connections record the stream offsets at which each request they wrote
    /// and each response their framing read ended (`run`: evidence for the analysis).
    pub message_ends: Option<Arc<tcpdoctor_core::message_ends::EndsLog>>,
}

impl BenchConfig {
    pub fn settings(&self) -> BenchSettings {
        BenchSettings {
            target: self.target.to_string(),
            script: self.script.name().to_string(),
            steps: self.script.step_names().to_vec(),
            connections: self.connections,
            pipeline: self.pipeline as u64,
            mode: if self.rate.is_some() {
                "open_loop".into()
            } else {
                "closed_loop".into()
            },
            rate_per_s: self.rate,
            spin_us: self.rate.map(|_| self.spin.as_nanos() as f64 / 1e3),
            requests: match self.bound {
                Bound::Requests(n) => Some(n),
                Bound::Duration(_) => None,
            },
            duration_s: match self.bound {
                Bound::Requests(_) => None,
                Bound::Duration(d) => Some(d.as_secs_f64()),
            },
            warmup_s: self.warmup.as_secs_f64(),
            timeout_s: self.timeout.as_secs_f64(),
            hang_after_s: self.hang_after.as_secs_f64(),
            nagle: self.nagle,
            split_writes: self.split.describe(),
            threads: self.threads as u64,
            repeat: self.repeat,
        }
    }
}

/// A target that cannot be reached at all, or that refuses the script's setup (a login) every
/// time: the command exits 2 with this message.
#[derive(Debug)]
pub struct Unreachable(pub String);

impl std::fmt::Display for Unreachable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Unreachable {}

/// Runs the benchmark `--repeat` times. Fails only when the target cannot be connected to
/// before the first run, or when the script's setup keeps failing; later trouble is measured
/// and reported.
pub async fn run(cfg: Arc<BenchConfig>) -> Result<BenchReport, Unreachable> {
    run_keeping_measurements(cfg).await.map(|(r, _)| r)
}

/// [`run`], also returning each run's raw measurements (for `run`, which pools its repeated
/// runs and draws their histograms).
pub async fn run_keeping_measurements(
    cfg: Arc<BenchConfig>,
) -> Result<(BenchReport, Vec<RunMeasurements>), Unreachable> {
    // The first connection doubles as the probe: a target that refuses it is a usage error,
    // and a server that serves a single connection still gets its one.
    let mut first = match conn::connect(&cfg).await {
        Ok(s) => Some(s),
        Err(e) => {
            return Err(Unreachable(format!(
                "cannot connect to {}: {} (is the server running? waited {} at most)",
                cfg.target,
                conn::reason(&e),
                fmt_duration(cfg.timeout)
            )))
        }
    };
    let mut runs: Vec<RunResult> = Vec::new();
    let mut measurements = Vec::new();
    let steps = cfg.script.step_names().to_vec();
    for i in 1..=cfg.repeat {
        let m = run::one(cfg.clone(), i, first.take()).await?;
        let interrupted = m.outcome == Some(Outcome::Interrupted);
        runs.push(RunResult::new(i, &steps, &m));
        measurements.push(m);
        if interrupted || cfg.watch_pid.is_some_and(crate::procfs::process_gone) {
            break;
        }
    }
    Ok((BenchReport::new(cfg.settings(), runs), measurements))
}
