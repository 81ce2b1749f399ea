//! The numbers of one scenario that the side-by-side table, `--baseline` and `--check` compare.

use serde::{Deserialize, Serialize};

use super::noise::Noise;
use crate::bench::{LatencyHistogram, RunResult};
use crate::report::{Finding, FindingKind};
use crate::stats::round3;

/// One scenario's row. Read back from a saved report by `--baseline`, so every field a later
/// version adds must be optional there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Figures {
    pub exchanges: u64,
    pub throughput_rps: f64,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    #[serde(default)]
    pub steps: Vec<StepFigures>,
    /// Exchanges that took 30 ms or more, by the driver's clock: a wall-clock count (on a
    /// 30 ms round trip every exchange is here), not a diagnosis; [`Figures::stalls`] is that.
    pub stalls_30ms: u64,
    /// Requests and responses a TCP timer held, as the analysis of the scenario's capture
    /// attributes them ([`timer_stalls`]); `None` when no capture was analysed (a Unix socket
    /// directly, no permission to capture), so `--check stalls…` cannot be evaluated there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalls: Option<u64>,
    /// Failed exchanges: connect, unframed response, assertion, closed (timeouts apart).
    #[serde(default)]
    pub errors: u64,
    /// Exchanges not answered within `--timeout`. Like errors, not in the latency figures.
    #[serde(default)]
    pub timeouts: u64,
    /// Server→client chunks (writes, as the hop read them) per exchange.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s2c_chunks_per_exchange: Option<f64>,
    /// The chunks themselves, counted: what `--baseline` compares (the rate above is rounded
    /// for people: one chunk in thousands of exchanges would round away).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s2c_chunks: Option<u64>,
    /// Server CPU time per exchange, microseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_per_request_us: Option<f64>,
    /// Open loop: the driver's own send lateness, p50 and p99, microseconds (bench's
    /// `send_lateness`): beside the latency, it shows the driver is not the bottleneck.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_late_p50_us: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_late_p99_us: Option<f64>,
    /// Connections the server closed after complete responses, reopened without an error.
    #[serde(default)]
    pub reconnects: u64,
    /// How much these figures move between measurements: what `--baseline` must see a change
    /// exceed before it calls it better or worse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<Noise>,
}

/// One script step's latency.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepFigures {
    pub name: String,
    pub mean_ms: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// Exchanges at or above this are a scenario's stalls (`stalls_30ms`; the histograms draw the
/// line): well above any healthy round trip on a LAN, well below the 40 ms delayed-ACK timer.
pub const STALL_MS: u64 = 30;

/// The turns a TCP timer held, by the analyzer's attribution:
/// 1. `nagle_delayed_ack`: each request or response whose rest waited for the peer's delayed
///    ACK (`stalled_turns`);
/// 2. `retransmission_stall`: each loss recovered only by the retransmission timeout (`stalls`).
///
/// 3. Counted per server (one leg of the path), and the scenario's figure is the largest leg:
///    through a hop both legs are captured, and a stall the upstream leg made reaches the
///    driver's leg as the same exchange held once more (counting both legs doubled it), while
///    a stall only one leg shows must still count.
///
/// Latency alone names no timer: a 30 ms exchange on a 30 ms round trip is healthy. A
/// finding the evidence audit withdrew is not in `findings`, so it counts for nothing here.
pub fn timer_stalls(findings: &[Finding]) -> u64 {
    let mut per_leg: Vec<(&str, u64)> = Vec::new();
    for f in findings {
        let key = match f.kind {
            FindingKind::NagleDelayedAck => "stalled_turns",
            FindingKind::RetransmissionStall => "stalls",
            _ => continue,
        };
        let n = f.evidence.counts.get(key).copied().unwrap_or(0);
        match per_leg.iter_mut().find(|(s, _)| *s == f.server) {
            Some((_, total)) => *total += n,
            None => per_leg.push((&f.server, n)),
        }
    }
    per_leg.iter().map(|(_, n)| *n).max().unwrap_or(0)
}

/// Exchanges in `overall` that took [`STALL_MS`] or more.
fn count_stalls(overall: &LatencyHistogram) -> u64 {
    overall.count_in(
        std::time::Duration::from_millis(STALL_MS),
        std::time::Duration::from_secs(3600),
    )
}

impl Figures {
    /// The row of a bench run whose exchanges are `overall`.
    pub fn of(bench: &RunResult, overall: &LatencyHistogram) -> Figures {
        let stalls_30ms = count_stalls(overall);
        let l = &bench.latency_ms;
        Figures {
            exchanges: bench.exchanges,
            throughput_rps: bench.throughput_rps,
            mean_ms: l.mean,
            p50_ms: l.p50,
            p99_ms: l.p99,
            max_ms: l.max,
            steps: bench
                .steps
                .iter()
                .map(|s| StepFigures {
                    name: s.name.clone(),
                    mean_ms: s.latency_ms.mean,
                    p50_ms: s.latency_ms.p50,
                    p99_ms: s.latency_ms.p99,
                })
                .collect(),
            stalls_30ms,
            stalls: None,
            errors: bench.errors.total(),
            timeouts: bench.errors.timeouts,
            s2c_chunks_per_exchange: None,
            s2c_chunks: None,
            server_cpu_per_request_us: None,
            send_late_p50_us: bench.send_lateness.map(|l| l.p50_us),
            send_late_p99_us: bench.send_lateness.map(|l| l.p99_us),
            reconnects: bench.reconnects,
            noise: None,
        }
    }

    /// [`Figures::stalls`] from the findings of an analysed capture.
    pub fn set_timer_stalls(&mut self, findings: &[Finding]) {
        self.stalls = Some(timer_stalls(findings));
    }

    /// Chunks per exchange, rounded for people.
    pub fn set_chunks(&mut self, s2c_chunks: u64) {
        if self.exchanges > 0 {
            self.s2c_chunks_per_exchange = Some(round3(s2c_chunks as f64 / self.exchanges as f64));
            self.s2c_chunks = Some(s2c_chunks);
        }
    }
}

/// One bar of a latency histogram on a log scale: `count` exchanges took at least `ge_ms` and
/// less than `le_ms` (`ge_ms` is the previous bar's `le_ms`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LogBucket {
    pub ge_ms: f64,
    pub le_ms: f64,
    pub count: u64,
}

/// Bounds of the log-scale bars: 1, 2, 5 per decade from 10 µs to 100 s, and a last bar up to
/// an hour (the longest exchange a histogram holds), so no exchange falls off the chart.
fn bounds_ms() -> Vec<f64> {
    let mut v = Vec::new();
    let mut decade = 0.01;
    while decade < 100_000.0 {
        for m in [1.0, 2.0, 5.0] {
            v.push(round3(decade * m * 1000.0) / 1000.0);
        }
        decade *= 10.0;
    }
    v.push(100_000.0);
    v.push(3_600_000.0);
    v
}

/// The histogram on a log scale, from the first non-empty bar to the last.
pub fn log_buckets(h: &LatencyHistogram) -> Vec<LogBucket> {
    let mut out = Vec::new();
    let mut lower = std::time::Duration::ZERO;
    for le in bounds_ms() {
        let upper = std::time::Duration::from_nanos((le * 1e6) as u64);
        out.push(LogBucket {
            ge_ms: lower.as_nanos() as f64 / 1e6,
            le_ms: le,
            count: h.count_in(lower, upper),
        });
        lower = upper;
    }
    let first = out.iter().position(|b| b.count > 0);
    let last = out.iter().rposition(|b| b.count > 0);
    match (first, last) {
        (Some(a), Some(b)) => out[a..=b].to_vec(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn log_buckets_cover_every_exchange_once() {
        let mut h = LatencyHistogram::default();
        for _ in 0..90 {
            h.record(Duration::from_micros(150));
        }
        for _ in 0..10 {
            h.record(Duration::from_millis(41));
        }
        let b = log_buckets(&h);
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), 100);
        let at = |le: f64| b.iter().find(|x| x.le_ms == le).map(|x| x.count);
        assert_eq!(at(0.2), Some(90));
        assert_eq!(at(50.0), Some(10));
        assert_eq!(b.first().unwrap().le_ms, 0.2);
        assert_eq!(b.last().unwrap().le_ms, 50.0);
        assert_eq!(
            (b[0].ge_ms, b[1].ge_ms),
            (0.1, 0.2),
            "each bar starts where the last ended"
        );
    }

    /// An exchange past the 100 s bar (a hung request answered late) still has a bar.
    #[test]
    fn an_exchange_over_100_s_is_drawn() {
        let mut h = LatencyHistogram::default();
        h.record(Duration::from_millis(2));
        h.record(Duration::from_secs(200));
        let b = log_buckets(&h);
        assert_eq!(b.iter().map(|b| b.count).sum::<u64>(), 2);
        assert_eq!(b.last().map(|x| (x.le_ms, x.count)), Some((3_600_000.0, 1)));
    }

    #[test]
    fn an_empty_histogram_has_no_bars() {
        assert!(log_buckets(&LatencyHistogram::default()).is_empty());
    }
}
