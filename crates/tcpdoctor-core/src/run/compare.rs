//! Before/after tables: the figures of two scenarios (or of a baseline and today) side by side,
//! with the ratio a reviewer looks at first, and a better/worse mark only where the change is
//! beyond the noise of the measurements (see `noise.rs` for the method).

use serde::Serialize;

use super::noise::{
    beyond_floor, counts_apart, intervals_apart, runs_apart, Interval, Noise, RunPoint,
    EXCHANGES_FLOOR, MIN_RUNS, RUNS_FLOOR, TAIL_FLOOR, UNMEASURED_FLOOR,
};
use super::Figures;

/// How a row's noise was measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The spread of each side's runs (`--repeat` ≥ 3 on both sides).
    Runs,
    /// Each side's exchanges (confidence intervals of one pooled sample).
    Exchanges,
    /// The resolution of the measurement (server CPU: its clock's ticks).
    Resolution,
    /// No noise recorded for this figure: only a change beyond ×2 is marked.
    Unmeasured,
    /// A count (stalls, chunks, errors): counted exactly, with no timing noise and no floor;
    /// marked when the two rates per exchange differ beyond the chance variation of the
    /// counts themselves (see [`counts_apart`]).
    Counts,
}

/// One metric, before and after.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ComparisonRow {
    pub metric: String,
    /// The figure as `--check` and `--fail-on-worse` name it (`p50`, `stalls`, `chunks`,
    /// `cpu`, …; a step's p50 is `STEP.p50`).
    pub figure: String,
    /// The unit the values are in (`ms`, `req/s`, `µs`, ``).
    pub unit: String,
    /// A count (exchanges, errors) is written as a JSON integer.
    #[serde(serialize_with = "crate::numfmt::whole_as_int")]
    pub before: Option<f64>,
    #[serde(serialize_with = "crate::numfmt::whole_as_int")]
    pub after: Option<f64>,
    /// after / before, when both exist and before is not 0.
    pub ratio: Option<f64>,
    /// Whether the change is an improvement; None when it is within the noise ("no change")
    /// or the figure is missing on a side.
    pub better: Option<bool>,
    /// How the noise the change had to exceed was measured.
    pub basis: Basis,
}

/// A before/after table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub title: String,
    /// The scenario compared with the same scenario of a baseline (`run --baseline`); empty
    /// for the demo's pairs of scenarios.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub scenario: String,
    pub before: String,
    pub after: String,
    pub rows: Vec<ComparisonRow>,
    /// How a change was told from noise, in a sentence.
    pub method: String,
    /// What makes the two sides less comparable (another target, other settings).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// One side's value of a metric and its noise.
struct Side {
    value: Option<f64>,
    /// A 99 % interval from the exchanges.
    interval: Option<Interval>,
    /// Each run's own value.
    runs: Vec<f64>,
    /// A count and the exchanges it was counted over: compared as counts ([`Basis::Counts`]).
    count: Option<(u64, u64)>,
}

fn side(
    f: &Figures,
    value: f64,
    interval: impl Fn(&Noise) -> Interval,
    run: impl Fn(&RunPoint) -> f64,
) -> Side {
    Side {
        value: Some(value),
        interval: f.noise.as_ref().map(&interval),
        runs: f
            .noise
            .as_ref()
            .map(|n| n.runs.iter().map(&run).collect())
            .unwrap_or_default(),
        count: None,
    }
}

/// A count (stalls, errors, timeouts) over `of` exchanges, shown as the count.
fn counted(count: Option<u64>, of: u64) -> Side {
    Side {
        value: count.map(|c| c as f64),
        interval: None,
        runs: Vec::new(),
        count: count.map(|c| (c, of)),
    }
}

/// Chunks per exchange, shown as the rate; compared as the count of chunks beyond one per
/// exchange (a whole reply is one chunk: the extra ones are the pieces): from the chunks
/// counted, or, in a baseline saved before they were, from the rounded rate.
fn extra_per_exchange(f: &Figures) -> Side {
    let rate = f.s2c_chunks_per_exchange;
    let of = f.exchanges;
    let extra = match f.s2c_chunks {
        Some(n) => Some(n.saturating_sub(of)),
        None => rate.map(|r| ((r - 1.0).max(0.0) * of as f64).round() as u64),
    };
    Side {
        value: rate,
        interval: None,
        runs: Vec::new(),
        count: extra.map(|e| (e, of)),
    }
}

impl Comparison {
    /// Compares `after` with `before`, metric by metric; steps are matched by name.
    pub fn of(title: &str, before: (&str, &Figures), after: (&str, &Figures)) -> Comparison {
        let (b, a) = (before.1, after.1);
        let mut rows = vec![
            row(
                "throughput",
                "req/s",
                side(
                    b,
                    b.throughput_rps,
                    |n| n.throughput_rps,
                    |r| r.throughput_rps,
                ),
                side(
                    a,
                    a.throughput_rps,
                    |n| n.throughput_rps,
                    |r| r.throughput_rps,
                ),
                true,
            ),
            row(
                "mean",
                "ms",
                side(b, b.mean_ms, |n| n.mean_ms, |_| 0.0).exchanges_only(),
                side(a, a.mean_ms, |n| n.mean_ms, |_| 0.0).exchanges_only(),
                false,
            ),
            row(
                "p50",
                "ms",
                side(b, b.p50_ms, |n| n.p50_ms, |r| r.p50_ms),
                side(a, a.p50_ms, |n| n.p50_ms, |r| r.p50_ms),
                false,
            ),
            row(
                "p99",
                "ms",
                side(b, b.p99_ms, |n| n.p99_ms, |r| r.p99_ms),
                side(a, a.p99_ms, |n| n.p99_ms, |r| r.p99_ms),
                false,
            ),
        ];
        if b.stalls.is_some() || a.stalls.is_some() {
            rows.push(row(
                "stalls",
                "",
                counted(b.stalls, b.exchanges),
                counted(a.stalls, a.exchanges),
                false,
            ));
        }
        for step in &a.steps {
            if let Some(bs) = b.steps.iter().find(|s| s.name == step.name) {
                if a.steps.len() > 1 {
                    let name = format!("{} p50", step.name);
                    let of = |f: &Figures, v: f64| Side {
                        value: Some(v),
                        interval: f.noise.as_ref().and_then(|n| {
                            n.steps
                                .iter()
                                .find(|s| s.name == step.name)
                                .map(|s| s.p50_ms)
                        }),
                        runs: Vec::new(),
                        count: None,
                    };
                    rows.push(row(
                        &name,
                        "ms",
                        of(b, bs.p50_ms),
                        of(a, step.p50_ms),
                        false,
                    ));
                }
            }
        }
        if b.s2c_chunks_per_exchange.is_some() || a.s2c_chunks_per_exchange.is_some() {
            rows.push(row(
                "server→client chunks per exchange",
                "",
                extra_per_exchange(b),
                extra_per_exchange(a),
                false,
            ));
        }
        if b.server_cpu_per_request_us.is_some() || a.server_cpu_per_request_us.is_some() {
            let cpu = |f: &Figures| Side {
                value: f.server_cpu_per_request_us,
                interval: f.noise.as_ref().and_then(|n| n.server_cpu_per_request_us),
                runs: Vec::new(),
                count: None,
            };
            let mut r = row(CPU_ROW, "µs", cpu(b), cpu(a), false);
            if r.basis == Basis::Exchanges {
                r.basis = Basis::Resolution;
            }
            rows.push(r);
        }
        rows.push(row(
            "errors",
            "",
            counted(Some(b.errors), attempts(b)),
            counted(Some(a.errors), attempts(a)),
            false,
        ));
        rows.push(row(
            "timeouts",
            "",
            counted(Some(b.timeouts), attempts(b)),
            counted(Some(a.timeouts), attempts(a)),
            false,
        ));
        let runs = |f: &Figures| f.noise.as_ref().map_or(0, |n| n.runs.len());
        let method = method(&rows, runs(b), runs(a));
        Comparison {
            title: title.to_string(),
            scenario: String::new(),
            before: before.0.to_string(),
            after: after.0.to_string(),
            rows,
            method,
            warnings: Vec::new(),
        }
    }

    pub fn row(&self, metric: &str) -> Option<&ComparisonRow> {
        self.rows.iter().find(|r| r.metric == metric)
    }
}

/// The exchanges attempted: measured, failed and timed out (what errors are counted over).
fn attempts(f: &Figures) -> u64 {
    f.exchanges + f.errors + f.timeouts
}

/// The server CPU row's metric.
const CPU_ROW: &str = "server CPU per request";

/// The name `--check` and `--fail-on-worse` use for a row's figure.
fn figure_of(metric: &str) -> String {
    match metric {
        "server→client chunks per exchange" => "chunks".into(),
        "server CPU per request" => "cpu".into(),
        m => match m.strip_suffix(" p50") {
            Some(step) => format!("{step}.p50"),
            None => m.to_string(),
        },
    }
}

impl Side {
    fn exchanges_only(mut self) -> Side {
        self.runs.clear();
        self
    }
}

/// Two non-zero stall counts are a change only when their rates are this far apart: beyond
/// what a race's catch moved between reruns of one build (×6.7: 12 and 80 of 300).
pub const STALL_RACE_SPREAD: f64 = 10.0;

/// Whether a count changed ([`Basis::Counts`]): the rates differ beyond the counts' own chance
/// ([`counts_apart`]), and for the counts a race decides, more:
/// - stalls: one side zero (the stall appeared or went away), or rates at least
///   [`STALL_RACE_SPREAD`] apart. How many exchanges a race catches (an ACK against the
///   sender's next write) moves from run to run with the machine's load, which one run cannot
///   see: measured 12 to 80 stalls of 300 on reruns of one build through a Nagle hop. 1 → 296
///   of 300 is beyond that, and marked;
/// - chunks per exchange (the pieces beyond one per exchange, as a hop's reads caught them):
///   one side zero only — a hop's read against the server's next write caught 1.02 to 1.46
///   chunks per exchange (4 to 138 pieces of 300) on reruns of one build;
/// - errors and timeouts are no race's catch: any change beyond chance (1 → 150 errors of 300
///   is a regression, whatever the timings of the exchanges that succeeded say).
fn counts_change(metric: &str, cb: u64, nb: u64, ca: u64, na: u64) -> bool {
    let (rb, ra) = (cb as f64 / nb.max(1) as f64, ca as f64 / na.max(1) as f64);
    let beyond_race = match metric {
        "stalls" => cb == 0 || ca == 0 || rb.max(ra) >= STALL_RACE_SPREAD * rb.min(ra),
        "server→client chunks per exchange" => cb == 0 || ca == 0,
        _ => true,
    };
    beyond_race && counts_apart(cb, nb, ca, na)
}

/// The sentence that says how this table told a change from noise.
fn method(rows: &[ComparisonRow], runs_before: usize, runs_after: usize) -> String {
    let names = |basis: Basis| {
        rows.iter()
            .filter(|r| r.basis == basis)
            .map(|r| r.metric.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut parts = Vec::new();
    let by_runs = names(Basis::Runs);
    if !by_runs.is_empty() {
        parts.push(format!(
            "{by_runs}: beyond the spread of {runs_before} and {runs_after} runs (Welch 99 % \
             interval of the log ratio) and beyond ×{RUNS_FLOOR}"
        ));
    }
    let by_exchanges = names(Basis::Exchanges);
    if !by_exchanges.is_empty() {
        parts.push(format!(
            "{by_exchanges}: 99 % intervals from each side's exchanges apart, and beyond \
             ×{EXCHANGES_FLOOR} (p99, mean, throughput: ×{TAIL_FLOOR}; run-to-run noise is measured only with \
             --repeat {MIN_RUNS} or more on both sides)"
        ));
    }
    let by_resolution = names(Basis::Resolution);
    if !by_resolution.is_empty() {
        parts.push(format!(
            "{by_resolution}: beyond what the CPU accounting resolves and beyond ×{UNMEASURED_FLOOR} \
             (one reading per side: its run-to-run variation is not measured)"
        ));
    }
    let by_counts = names(Basis::Counts);
    if !by_counts.is_empty() {
        parts.push(format!(
            "{by_counts}: counted exactly (no timing noise, no floor), a change when the \
             rates per exchange differ beyond the counts' own chance variation (99 %) and, \
             for stalls and chunks, the event appeared or went away (one side zero): between \
             two non-zero counts of those, which exchanges a race catches varies run to run, \
             and the timings say what it cost"
        ));
    }
    let unmeasured = names(Basis::Unmeasured);
    if !unmeasured.is_empty() {
        parts.push(format!(
            "{unmeasured}: no noise recorded, beyond ×{UNMEASURED_FLOOR}"
        ));
    }
    format!("changes marked only beyond the noise. {}", parts.join("; "))
}

/// Timings that the slowest exchanges decide: p99, and the mean and throughput (a sum over
/// every exchange, which a burst of load on the machine inflates by its few slow ones). On
/// the *exchanges* basis they need [`TAIL_FLOOR`]: measured on the 2-core machine, two
/// identical single runs of a loopback server moved the mean ×2.03 and throughput ×0.48
/// while p50 moved ×1.35 (redis PING: throughput 0.52–1.09).
const TAIL_DECIDED: [&str; 3] = ["p99", "mean", "throughput"];

fn row(
    metric: &str,
    unit: &str,
    before: Side,
    after: Side,
    higher_is_better: bool,
) -> ComparisonRow {
    let ratio = match (before.value, after.value) {
        (Some(b), Some(a)) if b != 0.0 => Some(crate::numfmt::sig3(a / b)),
        _ => None,
    };
    let (basis, apart, floor) = match (
        runs_apart(&before.runs, &after.runs),
        before.interval,
        after.interval,
    ) {
        _ if before.count.is_some() || after.count.is_some() => {
            let apart = match (before.count, after.count) {
                (Some((cb, nb)), Some((ca, na))) => counts_change(metric, cb, nb, ca, na),
                _ => false,
            };
            (Basis::Counts, apart, 1.0)
        }
        (Some(apart), _, _) => (Basis::Runs, apart, RUNS_FLOOR),
        (None, Some(ib), Some(ia)) => {
            let floor = if TAIL_DECIDED.contains(&metric) {
                TAIL_FLOOR
            } else if metric == CPU_ROW {
                // One CPU reading per side: its interval is the accounting's resolution, not
                // how a server's CPU per request moves from run to run (wake-ups from idle,
                // caches, the clock frequency, a neighbour's load) — identical reruns of one
                // build measured 1.9× apart on a shared 2-core machine. Unmeasured noise.
                UNMEASURED_FLOOR
            } else {
                EXCHANGES_FLOOR
            };
            (Basis::Exchanges, intervals_apart(&ib, &ia), floor)
        }
        _ => (Basis::Unmeasured, true, UNMEASURED_FLOOR),
    };
    let better = match (before.value, after.value) {
        (Some(b), Some(a)) if apart && beyond_floor(b, a, floor) => {
            Some((a > b) == higher_is_better)
        }
        _ => None,
    };
    ComparisonRow {
        metric: metric.to_string(),
        figure: figure_of(metric),
        unit: unit.to_string(),
        before: before.value,
        after: after.value,
        ratio,
        better,
        basis,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::noise::{Interval, Noise, RunPoint};

    fn figures(rps: f64, p50: f64, stalls: u64) -> Figures {
        Figures {
            exchanges: 100,
            throughput_rps: rps,
            mean_ms: p50,
            p50_ms: p50,
            p99_ms: p50 * 2.0,
            max_ms: p50 * 3.0,
            stalls_30ms: stalls,
            stalls: Some(stalls),
            ..Figures::default()
        }
    }

    #[test]
    fn ratios_and_directions() {
        let c = Comparison::of(
            "fix",
            ("before", &figures(25.0, 40.0, 100)),
            ("after", &figures(5000.0, 0.2, 0)),
        );
        let t = c.row("throughput").unwrap();
        assert_eq!(t.ratio, Some(200.0));
        assert_eq!(t.better, Some(true));
        let p = c.row("p50").unwrap();
        assert_eq!(p.ratio, Some(0.005));
        assert_eq!(p.better, Some(true));
        let s = c.row("stalls").unwrap();
        assert_eq!((s.ratio, s.better), (Some(0.0), Some(true)));
        assert_eq!((s.basis, s.figure.as_str()), (Basis::Counts, "stalls"));
        let e = c.row("errors").unwrap();
        assert_eq!((e.ratio, e.better), (None, None));
        assert!(c.row("server CPU per request").is_none());
    }

    #[test]
    fn a_regression_is_marked_worse() {
        let c = Comparison::of(
            "x",
            ("before", &figures(5000.0, 0.2, 0)),
            ("after", &figures(25.0, 40.0, 100)),
        );
        assert_eq!(c.row("throughput").unwrap().better, Some(false));
        assert_eq!(c.row("p99").unwrap().better, Some(false));
    }

    /// Figures with noise: p50 `p50` ms, its interval ±`spread` (relative), and each run's p50
    /// (`runs`, with the same throughput shape: 1000 / p50).
    fn noisy(p50: f64, spread: f64, runs: &[f64]) -> Figures {
        let at = |v: f64| Interval {
            lo: v * (1.0 - spread),
            hi: v * (1.0 + spread),
        };
        Figures {
            exchanges: 200,
            throughput_rps: 1000.0 / p50,
            mean_ms: p50,
            p50_ms: p50,
            p99_ms: p50 * 2.0,
            max_ms: p50 * 3.0,
            noise: Some(Noise {
                exchanges: 200,
                p50_ms: at(p50),
                p99_ms: at(p50 * 2.0),
                mean_ms: at(p50),
                throughput_rps: at(1000.0 / p50),
                steps: Vec::new(),
                runs: runs
                    .iter()
                    .map(|r| RunPoint {
                        p50_ms: *r,
                        p99_ms: r * 2.0,
                        throughput_rps: 1000.0 / r,
                    })
                    .collect(),
                server_cpu_per_request_us: None,
            }),
            ..Figures::default()
        }
    }

    fn marks(c: &Comparison) -> Vec<(&str, Option<bool>)> {
        c.rows
            .iter()
            .map(|r| (r.metric.as_str(), r.better))
            .collect()
    }

    /// The two identical runs: p99 36.9× and throughput 0.980× were marked WORSE. With
    /// the noise recorded, a p99 whose intervals overlap and a 2 % throughput dip are no change.
    #[test]
    fn identical_runs_are_no_change() {
        let mut before = noisy(0.04, 0.1, &[]);
        let mut after = noisy(0.04, 0.1, &[]);
        after.throughput_rps = before.throughput_rps * 0.98;
        // One slow exchange among 200 makes a p99 36.9× the other's, inside its wide interval.
        before.p99_ms = 0.08;
        after.p99_ms = 2.952;
        before.noise.as_mut().unwrap().p99_ms = Interval { lo: 0.07, hi: 0.5 };
        after.noise.as_mut().unwrap().p99_ms = Interval { lo: 0.07, hi: 3.1 };
        let c = Comparison::of("x", ("before", &before), ("after", &after));
        for (metric, better) in marks(&c) {
            assert_eq!(better, None, "{metric}");
        }
        assert_eq!(c.row("p99").unwrap().ratio, Some(36.9));
        assert_eq!(c.row("p50").unwrap().basis, Basis::Exchanges);
    }

    /// Five runs a side, 3 % apart from each other: a 1.3× slower p50 is beyond their spread
    /// and beyond ×1.10, so it is WORSE; the same five runs again are no change.
    #[test]
    fn a_30_percent_slowdown_over_five_runs_is_worse() {
        let runs = [1.00, 1.03, 0.97, 1.02, 0.98];
        let slow: Vec<f64> = runs.iter().map(|r| r * 1.3).collect();
        let c = Comparison::of(
            "x",
            ("before", &noisy(1.0, 0.05, &runs)),
            ("after", &noisy(1.3, 0.05, &slow)),
        );
        let p50 = c.row("p50").unwrap();
        assert_eq!((p50.basis, p50.better), (Basis::Runs, Some(false)));
        assert_eq!(c.row("throughput").unwrap().better, Some(false));
        // The mean has no per-run values: its own exchanges' intervals, and the ×1.5 floor.
        let mean = c.row("mean").unwrap();
        assert_eq!((mean.basis, mean.better), (Basis::Exchanges, None));
        assert!(c.method.contains("5 and 5 runs"), "{}", c.method);

        let same = Comparison::of(
            "x",
            ("before", &noisy(1.0, 0.05, &runs)),
            ("after", &noisy(1.0, 0.05, &[0.99, 1.02, 1.0, 0.97, 1.03])),
        );
        for (metric, better) in marks(&same) {
            assert_eq!(better, None, "{metric}");
        }
    }

    /// One run a side: the same 1.3× is below the single-run floor, even with intervals apart;
    /// a 2× change with intervals apart is marked; so is one of 0 → 40 stalls.
    #[test]
    fn a_single_run_needs_a_bigger_change() {
        let c = Comparison::of(
            "x",
            ("before", &noisy(1.0, 0.02, &[])),
            ("after", &noisy(1.3, 0.02, &[])),
        );
        assert_eq!(c.row("p50").unwrap().better, None);
        let mut after = noisy(2.0, 0.02, &[]);
        after.stalls = Some(40);
        let c = Comparison::of("x", ("before", &noisy(1.0, 0.02, &[])), ("after", &after));
        assert_eq!(c.row("p50").unwrap().better, Some(false));
        assert_eq!(
            c.row("stalls").unwrap().better,
            None,
            "no stall count before"
        );
        let mut before = noisy(1.0, 0.02, &[]);
        before.stalls = Some(0);
        let c = Comparison::of("x", ("before", &before), ("after", &after));
        assert_eq!(c.row("stalls").unwrap().better, Some(false));
        // 2× but inside wide intervals: no change.
        let c = Comparison::of(
            "x",
            ("before", &noisy(1.0, 0.5, &[])),
            ("after", &noisy(2.0, 0.5, &[])),
        );
        assert_eq!(c.row("p50").unwrap().better, None);
    }

    /// A rerun on a loaded machine: a burst of slow exchanges doubles the mean and halves the
    /// throughput while p50 moves ×1.35, all with intervals apart. Only p50 is a typical
    /// exchange's figure; the mean and throughput need ×3 on one run a side, as p99 does.
    #[test]
    fn a_burst_that_doubles_the_mean_of_one_run_is_no_change() {
        let before = noisy(0.31, 0.05, &[]);
        let mut after = noisy(0.418, 0.05, &[]);
        after.mean_ms = before.mean_ms * 2.03;
        after.throughput_rps = before.throughput_rps * 0.483;
        let n = after.noise.as_mut().unwrap();
        n.mean_ms = Interval {
            lo: after.mean_ms * 0.9,
            hi: after.mean_ms * 1.1,
        };
        n.throughput_rps = Interval {
            lo: after.throughput_rps * 0.9,
            hi: after.throughput_rps * 1.1,
        };
        let c = Comparison::of("x", ("before", &before), ("after", &after));
        for metric in ["mean", "throughput", "p50"] {
            let r = c.row(metric).unwrap();
            assert_eq!((r.basis, r.better), (Basis::Exchanges, None), "{metric}");
        }
        assert!(
            c.method.contains("p99, mean, throughput: ×3"),
            "{}",
            c.method
        );
        // Beyond ×3 they are marked.
        let slow = noisy(0.31 * 3.5, 0.05, &[]);
        let c = Comparison::of("x", ("before", &before), ("after", &slow));
        assert_eq!(c.row("mean").unwrap().better, Some(false));
        assert_eq!(c.row("throughput").unwrap().better, Some(false));
    }

    /// Counts mark an event that appeared or went away, beyond chance; between two non-zero
    /// counts (a race's catch, which load moves) nothing. Chunks count the pieces beyond one
    /// per exchange.
    #[test]
    fn counts_mark_appearing_and_vanishing_events() {
        let with = |stalls: u64, chunks: f64| Figures {
            exchanges: 300,
            stalls: Some(stalls),
            s2c_chunks_per_exchange: Some(chunks),
            ..figures(1000.0, 1.0, stalls)
        };
        let c = Comparison::of("x", ("b", &with(12, 1.02)), ("a", &with(80, 1.46)));
        assert_eq!(
            c.row("stalls").unwrap().better,
            None,
            "both stall: a race's catch"
        );
        let chunks = c.row("server→client chunks per exchange").unwrap();
        assert_eq!((chunks.basis, chunks.better), (Basis::Counts, None));
        // 1 → 296 stalls of 300: both non-zero, but far beyond what a race moves between reruns.
        let c = Comparison::of("x", ("b", &with(1, 1.0)), ("a", &with(296, 1.0)));
        assert_eq!(c.row("stalls").unwrap().better, Some(false));
        let c = Comparison::of("x", ("b", &with(296, 1.97)), ("a", &with(0, 1.0)));
        assert_eq!(c.row("stalls").unwrap().better, Some(true));
        assert_eq!(
            c.row("server→client chunks per exchange").unwrap().better,
            Some(true),
            "the fix itself: pieces to whole replies"
        );
        let c = Comparison::of("x", ("b", &with(0, 1.0)), ("a", &with(15, 2.0)));
        assert_eq!(c.row("stalls").unwrap().better, Some(false));
        assert_eq!(
            c.row("server→client chunks per exchange").unwrap().better,
            Some(false)
        );
        // A stall or two where there were none is chance, not a regression.
        let c = Comparison::of("x", ("b", &with(0, 1.0)), ("a", &with(2, 1.0)));
        assert_eq!(c.row("stalls").unwrap().better, None);
        // Errors and timeouts are no race's catch: a rise between two non-zero counts is
        // marked, chance is not.
        let failing = |errors: u64, timeouts: u64| Figures {
            errors,
            timeouts,
            ..with(0, 1.0)
        };
        let c = Comparison::of("x", ("b", &failing(1, 2)), ("a", &failing(150, 90)));
        assert_eq!(c.row("errors").unwrap().better, Some(false));
        assert_eq!(c.row("timeouts").unwrap().better, Some(false));
        let c = Comparison::of("x", ("b", &failing(3, 2)), ("a", &failing(4, 3)));
        assert_eq!(c.row("errors").unwrap().better, None);
        assert_eq!(c.row("timeouts").unwrap().better, None);
        // Neither side captured: no stalls row at all.
        let mut none = figures(1000.0, 1.0, 0);
        none.stalls = None;
        let c = Comparison::of("x", ("b", &none), ("a", &none));
        assert!(c.row("stalls").is_none());
    }

    /// Rows of figures without noise (CPU, chunks, an old baseline) need ×2.
    #[test]
    fn unmeasured_figures_need_a_doubling() {
        let mut before = figures(1000.0, 1.0, 0);
        let mut after = figures(1000.0, 1.0, 0);
        before.server_cpu_per_request_us = Some(40.0);
        after.server_cpu_per_request_us = Some(50.0);
        let c = Comparison::of("x", ("before", &before), ("after", &after));
        let cpu = c.row("server CPU per request").unwrap();
        assert_eq!((cpu.basis, cpu.better), (Basis::Unmeasured, None));
        after.server_cpu_per_request_us = Some(90.0);
        let c = Comparison::of("x", ("before", &before), ("after", &after));
        assert_eq!(c.row("server CPU per request").unwrap().better, Some(false));
    }
}
