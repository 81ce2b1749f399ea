//! The bench report model: what one `tcpdoctor bench` invocation measured, for every renderer.
//!
//! The driver hands over raw measurements ([`RunMeasurements`]: histograms, counters, CPU
//! time); everything a person or a machine reads — percentiles, throughput, CPU per request,
//! the stall view, the repeat aggregates — is computed here, once.

use std::time::Duration;

use serde::Serialize;

use super::histogram::LatencyHistogram;
use super::repeat::RepeatSummary;
use super::stall::StallView;
use crate::report::ToolInfo;
use crate::stats::round3;

/// Bumped when a field changes meaning or disappears (adding fields does not bump it).
pub const BENCH_SCHEMA_VERSION: u32 = 1;

/// Kept in the report: at most this many error messages, as examples.
pub const MAX_ERROR_EXAMPLES: usize = 5;

/// How the run was set up, as the user asked for it (after validation).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchSettings {
    pub target: String,
    /// The script's name (a preset's name, or the script file).
    pub script: String,
    pub steps: Vec<String>,
    pub connections: u64,
    /// Requests in flight per connection.
    pub pipeline: u64,
    /// `closed_loop` (each connection sends when an answer frees a slot) or `open_loop`.
    pub mode: String,
    /// Open loop: requests per second over all connections.
    pub rate_per_s: Option<f64>,
    /// Open loop: how long before each slot the driver stayed awake, in µs (`--spin`).
    pub spin_us: Option<f64>,
    /// Exchanges to measure, over all connections (or `duration_s`).
    pub requests: Option<u64>,
    pub duration_s: Option<f64>,
    pub warmup_s: f64,
    pub timeout_s: f64,
    pub hang_after_s: f64,
    /// Nagle's algorithm on the driver's sockets (false: TCP_NODELAY set).
    pub nagle: bool,
    /// How each request is written: `whole`, `N pieces`, `header`, `header:B`.
    pub split_writes: String,
    pub threads: u64,
    pub repeat: u64,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Reached its request count or duration.
    Completed,
    /// Made no progress for `--hang-after` and was abandoned.
    Hung,
    /// Ended without measuring a single exchange (every connection failed).
    Failed,
    /// Stopped by the user (Ctrl-C); the figures cover what was measured until then.
    Interrupted,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Completed => "completed",
            Outcome::Hung => "hung",
            Outcome::Failed => "failed",
            Outcome::Interrupted => "interrupted",
        }
    }
}

/// A reason, and how often it happened.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReasonCount {
    pub reason: String,
    pub count: u64,
}

/// What went wrong during a run. Timeouts and errors are not in the latency figures.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ErrorCounts {
    /// Connection attempts that failed.
    pub connect: u64,
    /// Why they failed, most frequent first.
    pub connect_reasons: Vec<ReasonCount>,
    /// Responses that could not be framed (the connection was closed and reopened).
    pub response: u64,
    /// Responses that failed an assertion of the script.
    pub assertion: u64,
    /// Exchanges lost because the peer closed or reset the connection.
    pub closed: u64,
    /// Exchanges not answered within `--timeout` (the connection was reopened).
    pub timeouts: u64,
    /// A few messages, as examples.
    pub examples: Vec<String>,
}

impl ErrorCounts {
    /// Everything but timeouts.
    pub fn total(&self) -> u64 {
        self.connect + self.response + self.assertion + self.closed
    }

    pub fn add_connect_reason(&mut self, reason: &str, count: u64) {
        self.connect += count;
        match self.connect_reasons.iter_mut().find(|r| r.reason == reason) {
            Some(r) => r.count += count,
            None => self.connect_reasons.push(ReasonCount {
                reason: reason.to_string(),
                count,
            }),
        }
        self.connect_reasons
            .sort_by(|a, b| b.count.cmp(&a.count).then(a.reason.cmp(&b.reason)));
    }

    /// Adds another run's counts (examples kept up to [`MAX_ERROR_EXAMPLES`]).
    pub fn add(&mut self, other: &ErrorCounts) {
        for r in &other.connect_reasons {
            self.add_connect_reason(&r.reason, r.count);
        }
        let reasons: u64 = other.connect_reasons.iter().map(|r| r.count).sum();
        self.connect += other.connect.saturating_sub(reasons);
        self.response += other.response;
        self.assertion += other.assertion;
        self.closed += other.closed;
        self.timeouts += other.timeouts;
        for e in &other.examples {
            self.add_example(e.clone());
        }
    }

    pub fn add_example(&mut self, message: String) {
        if self.examples.len() < MAX_ERROR_EXAMPLES && !self.examples.contains(&message) {
            self.examples.push(message);
        }
    }
}

/// Latency percentiles of a set of exchanges, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LatencySummary {
    pub count: u64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
    pub stdev: f64,
}

impl LatencySummary {
    pub fn of(h: &LatencyHistogram) -> LatencySummary {
        let ms = |ns: f64| round_sig(ns / 1e6);
        LatencySummary {
            count: h.count(),
            min: ms(h.min_ns() as f64),
            p50: ms(h.quantile_ns(0.5) as f64),
            p90: ms(h.quantile_ns(0.9) as f64),
            p99: ms(h.quantile_ns(0.99) as f64),
            p999: ms(h.quantile_ns(0.999) as f64),
            max: ms(h.max_ns() as f64),
            mean: ms(if h.is_empty() { 0.0 } else { h.mean_ns() }),
            stdev: ms(if h.is_empty() { 0.0 } else { h.stdev_ns() }),
        }
    }
}

/// Milliseconds to the nanosecond: enough digits for a loopback exchange, stable JSON.
fn round_sig(ms: f64) -> f64 {
    (ms * 1e6).round() / 1e6
}

/// One step of the script and its latencies.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepResult {
    pub name: String,
    pub latency_ms: LatencySummary,
}

/// The driver's own CPU time during the run (user + system, all threads).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CpuUse {
    pub user_s: f64,
    pub system_s: f64,
    /// Of user + system, the time spent spinning: an open loop awake before its slots and
    /// looking for quick answers (`--spin`), a one-connection closed loop polling for its
    /// answers. The price of sends on time and of a driver whose wake-ups are not in the
    /// latency, not work.
    pub spin_s: f64,
    /// Of user + system, tcpdoctor's own threads that are not the driver (the WAN delay line,
    /// the capture and socket readers): in the process, not the driver's work.
    pub helpers_s: f64,
    /// (user + system − spin − helpers) / measured exchanges, in microseconds: the driver's
    /// work per request, the floor `busy_poll` compares a server with; 0 when nothing was
    /// measured.
    pub per_request_us: f64,
}

/// Open loop: how late the driver itself sent requests, in microseconds — from the later of
/// the slot's intended time and the moment the connection could send (a free pipeline slot,
/// an open connection) to the `write`. A server that stalls makes requests late too, but
/// that wait is in the latency, not here: this is the driver's own delay, so a p99 of tens of
/// microseconds says the driver is not the bottleneck.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SendLateness {
    pub count: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
}

impl SendLateness {
    /// None for an empty histogram (closed loop: a request is sent when it is intended).
    pub fn of(h: &LatencyHistogram) -> Option<SendLateness> {
        let us = |ns: u64| (ns as f64 / 10.0).round() / 100.0;
        (!h.is_empty()).then(|| SendLateness {
            count: h.count(),
            p50_us: us(h.quantile_ns(0.5)),
            p99_us: us(h.quantile_ns(0.99)),
            max_us: us(h.max_ns()),
        })
    }
}

/// Raw measurements of one run, as the driver collected them.
#[derive(Clone, Debug, Default)]
pub struct RunMeasurements {
    pub outcome: Option<Outcome>,
    /// From the first connect to the end of the run.
    pub elapsed: Duration,
    /// The measured window (after warmup), which throughput divides by.
    pub measured: Duration,
    pub overall: LatencyHistogram,
    /// One histogram per script step, in script order (`steps[i]` names `per_step[i]`).
    pub per_step: Vec<LatencyHistogram>,
    pub errors: ErrorCounts,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub connections_opened: u64,
    pub cpu_user: Duration,
    pub cpu_system: Duration,
    /// Of the CPU time, the spinning (see [`CpuUse::spin_s`]).
    pub cpu_spin: Duration,
    /// Of the CPU time, tcpdoctor's threads that are not the driver (see [`CpuUse::helpers_s`]).
    pub cpu_helpers: Duration,
    /// Open loop: each measured request's send lateness (see [`SendLateness`]).
    pub send_lateness: LatencyHistogram,
    /// Connections the server closed after complete responses (HTTP `Connection: close`, a
    /// keep-alive limit) that the driver reopened, re-sending what was unanswered: no error.
    pub reconnects: u64,
    /// A sentence on why the run ended early, if it did.
    pub note: Option<String>,
    /// The target's TCP port (None for a Unix socket), for the stall view's capture command.
    pub port: Option<u16>,
}

/// What one run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunResult {
    /// 1-based.
    pub run: u64,
    pub outcome: Outcome,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    pub elapsed_s: f64,
    pub measured_s: f64,
    /// Measured exchanges (warmup, errors and timeouts excluded).
    pub exchanges: u64,
    pub throughput_rps: f64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub connections_opened: u64,
    /// Connections the server closed after complete responses, reopened without an error;
    /// the exchange that waited for the new connection carries its connect time.
    pub reconnects: u64,
    pub errors: ErrorCounts,
    pub latency_ms: LatencySummary,
    /// Open loop only (null in closed loop).
    pub send_lateness: Option<SendLateness>,
    pub steps: Vec<StepResult>,
    pub stall: StallView,
    pub cpu: CpuUse,
}

impl RunMeasurements {
    /// How the run ended: as the driver said, else failed when nothing was measured.
    pub fn outcome(&self) -> Outcome {
        match self.outcome {
            Some(o) => o,
            None if self.overall.is_empty() => Outcome::Failed,
            None => Outcome::Completed,
        }
    }
}

impl RunResult {
    pub fn new(run: u64, step_names: &[String], m: &RunMeasurements) -> RunResult {
        let exchanges = m.overall.count();
        let measured_s = m.measured.as_secs_f64();
        let outcome = m.outcome();
        let cpu_s = (m.cpu_user + m.cpu_system)
            .saturating_sub(m.cpu_spin)
            .saturating_sub(m.cpu_helpers)
            .as_secs_f64();
        RunResult {
            run,
            outcome,
            note: m.note.clone(),
            elapsed_s: round3(m.elapsed.as_secs_f64()),
            measured_s: round3(measured_s),
            exchanges,
            throughput_rps: if measured_s > 0.0 {
                round3(exchanges as f64 / measured_s)
            } else {
                0.0
            },
            bytes_sent: m.bytes_sent,
            bytes_received: m.bytes_received,
            connections_opened: m.connections_opened,
            reconnects: m.reconnects,
            errors: m.errors.clone(),
            latency_ms: LatencySummary::of(&m.overall),
            send_lateness: SendLateness::of(&m.send_lateness),
            steps: step_names
                .iter()
                .zip(&m.per_step)
                .filter(|(_, h)| !h.is_empty())
                .map(|(name, h)| StepResult {
                    name: name.clone(),
                    latency_ms: LatencySummary::of(h),
                })
                .collect(),
            stall: StallView::of(&m.overall, m.port),
            cpu: CpuUse {
                user_s: round3(m.cpu_user.as_secs_f64()),
                system_s: round3(m.cpu_system.as_secs_f64()),
                spin_s: round3(m.cpu_spin.as_secs_f64()),
                helpers_s: round3(m.cpu_helpers.as_secs_f64()),
                per_request_us: if exchanges > 0 {
                    round3(cpu_s * 1e6 / exchanges as f64)
                } else {
                    0.0
                },
            },
        }
    }
}

/// The whole report of one `bench` invocation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchReport {
    pub schema_version: u32,
    pub tool: ToolInfo,
    pub settings: BenchSettings,
    pub runs: Vec<RunResult>,
    /// Mean, stdev, min and max of each figure over the runs (present with `--repeat` > 1).
    pub summary: Option<RepeatSummary>,
}

impl BenchReport {
    pub fn new(settings: BenchSettings, runs: Vec<RunResult>) -> BenchReport {
        let summary = (runs.len() > 1).then(|| RepeatSummary::of(&runs));
        BenchReport {
            schema_version: BENCH_SCHEMA_VERSION,
            tool: ToolInfo::current(),
            settings,
            runs,
            summary,
        }
    }

    /// True when every run completed.
    pub fn all_completed(&self) -> bool {
        self.runs.iter().all(|r| r.outcome == Outcome::Completed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_result_from_measurements() {
        let mut m = RunMeasurements {
            measured: Duration::from_secs(2),
            elapsed: Duration::from_millis(2500),
            cpu_user: Duration::from_millis(30),
            cpu_system: Duration::from_millis(10),
            per_step: vec![LatencyHistogram::default(), LatencyHistogram::default()],
            ..Default::default()
        };
        for i in 0..1000u64 {
            let d = Duration::from_micros(100 + i % 10);
            m.overall.record(d);
            m.per_step[1].record(d);
        }
        m.errors.add_connect_reason("connection refused", 2);
        m.errors.add_connect_reason("timed out", 3);
        m.errors.add_connect_reason("connection refused", 2);
        let r = RunResult::new(1, &["greeting".into(), "PING".into()], &m);
        assert_eq!(r.outcome, Outcome::Completed);
        assert_eq!(r.exchanges, 1000);
        assert_eq!(r.throughput_rps, 500.0);
        assert_eq!(r.steps.len(), 1, "a step that saw nothing is left out");
        assert_eq!(r.steps[0].name, "PING");
        assert!(
            (r.latency_ms.p50 - 0.104).abs() < 0.001,
            "{:?}",
            r.latency_ms
        );
        assert!((r.cpu.per_request_us - 40.0).abs() < 1e-9);
        assert_eq!(r.send_lateness, None, "closed loop: no send lateness");
        m.cpu_spin = Duration::from_millis(20);
        for us in [5u64, 10, 10, 400] {
            m.send_lateness.record(Duration::from_micros(us));
        }
        let open = RunResult::new(1, &["greeting".into(), "PING".into()], &m);
        assert!(
            (open.cpu.per_request_us - 20.0).abs() < 1e-9,
            "the spin is not the driver's work per request"
        );
        assert_eq!(open.cpu.spin_s, 0.02);
        m.cpu_helpers = Duration::from_millis(10);
        let lined = RunResult::new(1, &["greeting".into(), "PING".into()], &m);
        assert!(
            (lined.cpu.per_request_us - 10.0).abs() < 1e-9,
            "the delay line's CPU is not the driver's work per request"
        );
        assert_eq!(lined.cpu.helpers_s, 0.01);
        let late = open.send_lateness.expect("open loop");
        assert_eq!(late.count, 4);
        assert!((late.p50_us - 10.0).abs() < 0.05, "{late:?}");
        assert!((late.max_us - 400.0).abs() < 0.5, "{late:?}");
        assert_eq!(r.errors.connect, 7);
        assert_eq!(r.errors.connect_reasons[0].reason, "connection refused");
        assert_eq!(r.stall.likely_cause, None);

        let empty = RunResult::new(2, &[], &RunMeasurements::default());
        assert_eq!(empty.outcome, Outcome::Failed);
        assert_eq!(empty.cpu.per_request_us, 0.0);
    }
}
