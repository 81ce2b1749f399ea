//! How much a scenario's figures move between two measurements of the same thing, so that
//! `--baseline` calls a change better or worse only beyond it.
//!
//! A figure changed when both hold:
//! 1. **Beyond the statistical noise**, measured one of two ways (each row of the table says
//!    which):
//!    - *runs* — both sides have ≥ 3 completed runs (`--repeat`) and the figure is one of each
//!      run's own (p50, p99, throughput): Welch's 99 % confidence interval of the difference
//!      of the runs' mean log values excludes 0. The runs' spread is the run-to-run noise.
//!    - *exchanges* — otherwise: each side's 99 % confidence interval from its own exchanges,
//!      and the two intervals do not overlap. Quantiles (p50, p99, each step's p50):
//!      distribution-free intervals from the order statistics of the exchange latencies.
//!      Mean: ± 2.576 standard errors; throughput: the mean's relative interval (one closed-loop
//!      connection does 1 / mean exchanges per second).
//!    - *counts* — stalls, errors, timeouts, chunks per exchange: counted exactly, so no
//!      timing noise and no floor (rule 2) apply; the rates per exchange must differ beyond the
//!      chance variation of the counts themselves ([`counts_apart`]).
//! 2. **Beyond a floor** (timings only) for the noise the method cannot see: [`RUNS_FLOOR`] (runs: the drift
//!    between two sessions, which the runs of one session do not measure) or
//!    [`EXCHANGES_FLOOR`] (exchanges: one run measures no run-to-run noise at all;
//!    [`TAIL_FLOOR`] for p99, the mean and throughput, which a burst of load decides: the
//!    slowest exchanges make p99 and weigh most in a mean). Timings
//!    with no recorded noise (a baseline saved before noise was recorded) need
//!    [`UNMEASURED_FLOOR`].
//! 3. Server CPU per request is read from the processes' CPU clocks: its interval is ± what
//!    the accounting cannot resolve over the scenario's exchanges (*resolution*: the CPU the
//!    server could have used while its clocks were read, or two 10 ms ticks per process where
//!    only /proc's ticks could be read), and a change must put the intervals apart and be
//!    beyond [`UNMEASURED_FLOOR`]: one reading per side measures nothing of how the CPU per
//!    request moves from run to run.

use serde::{Deserialize, Serialize};

use crate::bench::{LatencyHistogram, Outcome, RunResult};
use crate::stats::round3;

/// z of a two-sided 99 % interval.
const Z99: f64 = 2.576;

/// Runs per side before the runs' spread is taken as the noise.
pub const MIN_RUNS: usize = 3;
/// With runs, a change must also be beyond ×1.10 (or below 1/1.10).
pub const RUNS_FLOOR: f64 = 1.10;
/// With exchanges only, beyond ×1.5.
pub const EXCHANGES_FLOOR: f64 = 1.5;
/// A tail quantile (p99) with exchanges only, beyond ×3: the slowest 1 % of one run is a
/// handful of exchanges that one burst of load on the machine decides, together (the
/// intervals assume independent exchanges; a burst slows consecutive ones).
pub const TAIL_FLOOR: f64 = 3.0;
/// With no noise recorded, beyond ×2.
pub const UNMEASURED_FLOOR: f64 = 2.0;

/// A confidence interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub lo: f64,
    pub hi: f64,
}

impl Interval {
    fn apart(&self, other: &Interval) -> bool {
        self.hi < other.lo || other.hi < self.lo
    }
}

/// One completed run's own figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RunPoint {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub throughput_rps: f64,
}

/// One step's p50 interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StepNoise {
    pub name: String,
    pub p50_ms: Interval,
}

/// The noise of a scenario's figures: 99 % intervals from its exchanges, and each completed
/// run's own figures (when it ran more than once). Saved with the figures, read back by
/// `--baseline`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Noise {
    /// The exchanges the intervals come from (all runs pooled).
    pub exchanges: u64,
    pub p50_ms: Interval,
    pub p99_ms: Interval,
    pub mean_ms: Interval,
    pub throughput_rps: Interval,
    #[serde(default)]
    pub steps: Vec<StepNoise>,
    /// Each completed run's figures; empty after a single run.
    #[serde(default)]
    pub runs: Vec<RunPoint>,
    /// Server CPU per request ± what the CPU accounting cannot resolve (two of its ticks
    /// over the scenario: one at each reading).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_cpu_per_request_us: Option<Interval>,
}

impl Noise {
    /// From the pooled exchanges (`overall`, `per_step` named by `step_names`), the pooled
    /// throughput, and each run's result (`runs`, empty or one for a single run).
    pub fn of(
        overall: &LatencyHistogram,
        step_names: &[String],
        per_step: &[LatencyHistogram],
        throughput_rps: f64,
        runs: &[RunResult],
    ) -> Noise {
        let n = overall.count();
        let mean = overall.mean_ns();
        // The mean's relative half-width; throughput inherits it.
        let rel = if n > 0 && mean > 0.0 {
            Z99 * overall.stdev_ns() / (mean * (n as f64).sqrt())
        } else {
            0.0
        };
        Noise {
            exchanges: n,
            p50_ms: quantile_interval(overall, 0.5),
            p99_ms: quantile_interval(overall, 0.99),
            mean_ms: Interval {
                lo: round6(mean * (1.0 - rel) / 1e6),
                hi: round6(mean * (1.0 + rel) / 1e6),
            },
            throughput_rps: Interval {
                lo: round3(throughput_rps / (1.0 + rel)),
                // Unbounded above when the mean's interval reaches 0 (a handful of exchanges).
                hi: if rel < 1.0 {
                    round3(throughput_rps / (1.0 - rel))
                } else {
                    f64::MAX
                },
            },
            steps: step_names
                .iter()
                .zip(per_step)
                .map(|(name, h)| StepNoise {
                    name: name.clone(),
                    p50_ms: quantile_interval(h, 0.5),
                })
                .collect(),
            runs: if runs.len() > 1 {
                runs.iter()
                    .filter(|r| r.outcome == Outcome::Completed)
                    .map(|r| RunPoint {
                        p50_ms: r.latency_ms.p50,
                        p99_ms: r.latency_ms.p99,
                        throughput_rps: r.throughput_rps,
                    })
                    .collect()
            } else {
                Vec::new()
            },
            server_cpu_per_request_us: None,
        }
    }
}

impl Noise {
    /// Records the resolution of the server's CPU figure: `per_request_us` measured over
    /// `exchanges`, its total known to ± `uncertainty_s`.
    pub fn set_cpu(&mut self, per_request_us: f64, uncertainty_s: f64, exchanges: u64) {
        if exchanges == 0 {
            return;
        }
        let half = uncertainty_s * 1e6 / exchanges as f64;
        self.server_cpu_per_request_us = Some(Interval {
            lo: round3((per_request_us - half).max(0.0)),
            hi: round3(per_request_us + half),
        });
    }
}

fn round6(ms: f64) -> f64 {
    (ms * 1e6).round() / 1e6
}

/// The distribution-free 99 % interval of quantile `q`: the order statistics at ranks
/// nq ∓ z·√(nq(1−q)) (normal approximation of the binomial), in milliseconds.
pub fn quantile_interval(h: &LatencyHistogram, q: f64) -> Interval {
    let n = h.count();
    if n == 0 {
        return Interval::default();
    }
    let nf = n as f64;
    let half = Z99 * (nf * q * (1.0 - q)).sqrt();
    let lo_rank = ((nf * q - half).floor()).max(1.0);
    let hi_rank = ((nf * q + half).ceil() + 1.0).min(nf);
    let at = |rank: f64| {
        if rank >= nf {
            h.max_ns()
        } else {
            h.quantile_ns(rank / nf)
        }
    };
    Interval {
        lo: round6(at(lo_rank) as f64 / 1e6),
        hi: round6(at(hi_rank) as f64 / 1e6),
    }
}

/// Two-sided 99 % Student t quantiles by degrees of freedom (1–30, then 40, 60, 120).
const T99: [(f64, f64); 33] = [
    (1.0, 63.657),
    (2.0, 9.925),
    (3.0, 5.841),
    (4.0, 4.604),
    (5.0, 4.032),
    (6.0, 3.707),
    (7.0, 3.499),
    (8.0, 3.355),
    (9.0, 3.250),
    (10.0, 3.169),
    (11.0, 3.106),
    (12.0, 3.055),
    (13.0, 3.012),
    (14.0, 2.977),
    (15.0, 2.947),
    (16.0, 2.921),
    (17.0, 2.898),
    (18.0, 2.878),
    (19.0, 2.861),
    (20.0, 2.845),
    (21.0, 2.831),
    (22.0, 2.819),
    (23.0, 2.807),
    (24.0, 2.797),
    (25.0, 2.787),
    (26.0, 2.779),
    (27.0, 2.771),
    (28.0, 2.763),
    (29.0, 2.756),
    (30.0, 2.750),
    (40.0, 2.704),
    (60.0, 2.660),
    (120.0, 2.617),
];

/// The t quantile for `df` degrees of freedom, rounded down to a tabled df (conservative).
fn t99(df: f64) -> f64 {
    T99.iter()
        .rev()
        .find(|(d, _)| *d <= df)
        .map_or(T99[0].1, |(_, t)| *t)
}

/// Whether the runs `a` and `b` differ beyond their spread: Welch's 99 % interval of the
/// difference of mean log values excludes 0. None when either side has fewer than
/// [`MIN_RUNS`] values or a value ≤ 0 (no log).
pub fn runs_apart(a: &[f64], b: &[f64]) -> Option<bool> {
    if a.len() < MIN_RUNS || b.len() < MIN_RUNS || a.iter().chain(b).any(|v| *v <= 0.0) {
        return None;
    }
    let stats = |v: &[f64]| {
        let logs: Vec<f64> = v.iter().map(|x| x.ln()).collect();
        let n = logs.len() as f64;
        let mean = logs.iter().sum::<f64>() / n;
        let var = logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var / n, n)
    };
    let (ma, va, na) = stats(a);
    let (mb, vb, nb) = stats(b);
    let se2 = va + vb;
    if se2 == 0.0 {
        return Some(ma != mb);
    }
    let df = se2 * se2 / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    Some((ma - mb).abs() > t99(df) * se2.sqrt())
}

/// Whether two sides' intervals are apart (the *exchanges* method).
pub fn intervals_apart(a: &Interval, b: &Interval) -> bool {
    a.apart(b)
}

/// Whether two counts, `ca` events over `na` exchanges and `cb` over `nb`, have rates that
/// differ beyond the counts' own chance variation: the difference of the rates is more than
/// z₉₉ of its standard error, each count taken as Poisson (variance = the count; for a share
/// near 1 this overstates the variance, so it errs towards "no change"). A count has no
/// measurement noise — a stall or a chunk is there or not — but which exchanges stall is
/// chance: 3 stalls in one run and 4 in the next of the same build are not a regression,
/// 0 and 40 of 200 are.
pub fn counts_apart(ca: u64, na: u64, cb: u64, nb: u64) -> bool {
    if na == 0 || nb == 0 {
        return false;
    }
    let (ra, rb) = (ca as f64 / na as f64, cb as f64 / nb as f64);
    if ra == rb {
        return false;
    }
    let var = ca as f64 / (na as f64).powi(2) + cb as f64 / (nb as f64).powi(2);
    (ra - rb).abs() > Z99 * var.sqrt()
}

/// Whether `after / before` is beyond `floor` either way (a change from or to 0 is).
pub fn beyond_floor(before: f64, after: f64, floor: f64) -> bool {
    if before == after {
        return false;
    }
    if before <= 0.0 || after <= 0.0 {
        return true;
    }
    let r = after / before;
    r >= floor || r <= 1.0 / floor
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn hist(us: impl IntoIterator<Item = u64>) -> LatencyHistogram {
        let mut h = LatencyHistogram::default();
        for u in us {
            h.record(Duration::from_micros(u));
        }
        h
    }

    #[test]
    fn a_median_interval_brackets_the_median_by_order_statistics() {
        // 1..=200 µs: n q = 100, half-width 2.576 · √50 ≈ 18.2 ranks: ranks 81 and 120.
        // (The histogram reads values to 0.1 %.)
        let close = |i: Interval, lo: f64, hi: f64| {
            assert!(
                (i.lo - lo).abs() < lo * 1e-3 && (i.hi - hi).abs() < hi * 1e-3,
                "{i:?}"
            );
        };
        close(quantile_interval(&hist(1..=200), 0.5), 0.081, 0.12);
        // p99 of 200: ranks 194 to the maximum.
        close(quantile_interval(&hist(1..=200), 0.99), 0.194, 0.2);
        assert_eq!(quantile_interval(&hist([]), 0.5), Interval::default());
    }

    #[test]
    fn counts_apart_by_their_own_chance() {
        // 0 of 200 and 15 of 200 stalls are apart; 0 and 3 are not; 296 → 0 of 300 is.
        assert!(counts_apart(0, 200, 15, 200));
        assert!(!counts_apart(0, 200, 3, 200));
        assert!(counts_apart(296, 300, 0, 300));
        // The same build twice: 150 and 170 stalls of 200 are chance.
        assert!(!counts_apart(150, 200, 170, 200));
        // Chunks per exchange 2 → 1 over 200 exchanges each.
        assert!(counts_apart(400, 200, 200, 200));
        // Rates, not counts: 20 of 200 and 40 of 400 are the same rate.
        assert!(!counts_apart(20, 200, 40, 400));
        assert!(!counts_apart(0, 0, 5, 10));
    }

    /// Welch on five runs a side: a 1.3× shift with 3 % spread is apart; the same values
    /// reshuffled, or a shift inside a 20 % spread, are not.
    #[test]
    fn welch_on_runs() {
        let base = [1.00, 1.03, 0.97, 1.02, 0.98];
        let slow: Vec<f64> = base.iter().map(|v| v * 1.3).collect();
        assert_eq!(runs_apart(&base, &slow), Some(true));
        assert_eq!(
            runs_apart(&base, &[0.98, 1.02, 1.00, 0.97, 1.03]),
            Some(false)
        );
        let wide = [1.0, 1.3, 0.8, 1.2, 0.9];
        let wide_slow: Vec<f64> = wide.iter().map(|v| v * 1.15).collect();
        assert_eq!(runs_apart(&wide, &wide_slow), Some(false));
        // Too few runs, or a value with no log: no verdict from runs.
        assert_eq!(runs_apart(&base[..2], &slow), None);
        assert_eq!(runs_apart(&[0.0, 1.0, 1.0], &slow), None);
        // No spread at all: any difference is beyond it.
        assert_eq!(runs_apart(&[2.0; 3], &[2.0; 3]), Some(false));
        assert_eq!(runs_apart(&[2.0; 3], &[2.2; 3]), Some(true));
    }

    #[test]
    fn t_quantiles_round_down() {
        assert_eq!(t99(8.0), 3.355);
        assert_eq!(t99(8.9), 3.355);
        assert_eq!(t99(0.5), 63.657);
        assert_eq!(t99(45.0), 2.704);
        assert_eq!(t99(1e9), 2.617);
    }

    #[test]
    fn floors() {
        assert!(!beyond_floor(1.0, 1.09, RUNS_FLOOR));
        assert!(beyond_floor(1.0, 1.1, RUNS_FLOOR));
        assert!(beyond_floor(1.0, 0.9, RUNS_FLOOR));
        assert!(!beyond_floor(1.0, 0.95, RUNS_FLOOR));
        assert!(beyond_floor(0.0, 3.0, EXCHANGES_FLOOR));
        assert!(!beyond_floor(0.0, 0.0, EXCHANGES_FLOOR));
    }

    #[test]
    fn noise_of_three_runs_keeps_each_run() {
        let h = hist((0..300).map(|i| 100 + i % 10));
        let n = Noise::of(&h, &[], &[], 1000.0, &[]);
        assert_eq!(n.exchanges, 300);
        assert!(n.p50_ms.lo <= 0.105 && n.p50_ms.hi >= 0.104, "{n:?}");
        assert!(n.mean_ms.lo < n.mean_ms.hi);
        assert!(n.throughput_rps.lo < 1000.0 && n.throughput_rps.hi > 1000.0);
        assert!(n.runs.is_empty());
    }
}
