//! `run --repeat K`: one scenario run K times in a row, its figures from all K pooled, and the
//! spread between the runs kept in sight.
//!
//! 1. The figures tables, `--check`, baselines and JSON read are the pooled ones: latency
//!    histograms merged, exchanges and errors summed, throughput = all exchanges / all
//!    measured time (not the mean of K rates), CPU summed over the runs and divided by all
//!    exchanges.
//! 2. The spread is each run's own p50, p99 and throughput: listed run by run, and their mean,
//!    sample stdev, min and max over the completed runs (as `bench --repeat` reports them).
//! 3. A run that failed, hung or was interrupted is counted and makes the pooled outcome that
//!    outcome: pooling never hides a bad run.

use serde::Serialize;

use super::noise::Noise;
use super::text::num;
use crate::bench::{
    pool, LatencyHistogram, Outcome, RepeatSummary, RunMeasurements, RunResult, Spread,
};

/// One run of a repeated scenario, as measured on its own.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RepeatRun {
    /// 1-based.
    pub run: u64,
    pub outcome: Outcome,
    pub exchanges: u64,
    pub measured_s: f64,
    pub throughput_rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Errors (timeouts not included).
    pub errors: u64,
}

/// The spread of a scenario's K runs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScenarioRepeat {
    pub runs: u64,
    pub completed: u64,
    pub failed: u64,
    pub hung: u64,
    pub interrupted: u64,
    pub per_run: Vec<RepeatRun>,
    /// Over the completed runs.
    pub p50_ms: Spread,
    pub p99_ms: Spread,
    pub throughput_rps: Spread,
}

impl ScenarioRepeat {
    pub fn of(runs: &[RunResult]) -> ScenarioRepeat {
        // The counts and spreads `bench --repeat` reports, and each run's own figures.
        let summary = RepeatSummary::of(runs);
        ScenarioRepeat {
            runs: summary.runs,
            completed: summary.completed,
            failed: summary.failed,
            hung: summary.hung,
            interrupted: summary.interrupted,
            per_run: runs
                .iter()
                .map(|r| RepeatRun {
                    run: r.run,
                    outcome: r.outcome,
                    exchanges: r.exchanges,
                    measured_s: r.measured_s,
                    throughput_rps: r.throughput_rps,
                    p50_ms: r.latency_ms.p50,
                    p99_ms: r.latency_ms.p99,
                    errors: r.errors.total(),
                })
                .collect(),
            p50_ms: summary.figures.p50_ms,
            p99_ms: summary.figures.p99_ms,
            throughput_rps: summary.figures.throughput_rps,
        }
    }

    /// "3 runs, p50 0.041–0.052 ms, 2300–2650 req/s" (and the runs that did not complete).
    pub fn describe(&self) -> String {
        let mut s = format!(
            "{} runs, p50 {}–{} ms, {}–{} req/s",
            self.runs,
            num(self.p50_ms.min),
            num(self.p50_ms.max),
            num(self.throughput_rps.min),
            num(self.throughput_rps.max)
        );
        for (n, what) in [
            (self.failed, "failed"),
            (self.hung, "hung"),
            (self.interrupted, "interrupted"),
        ] {
            if n > 0 {
                s.push_str(&format!(", {n} {what}"));
            }
        }
        s
    }
}

/// A scenario's K runs, pooled.
#[derive(Clone, Debug)]
pub struct Pooled {
    /// All runs as one (numbered 1).
    pub bench: RunResult,
    /// All runs' exchange latencies.
    pub overall: LatencyHistogram,
    /// The spread, when there was more than one run.
    pub repeat: Option<ScenarioRepeat>,
    /// The noise of the pooled figures (for [`super::Figures::noise`]).
    pub noise: Noise,
}

impl Pooled {
    pub fn of(step_names: &[String], runs: &[RunMeasurements]) -> Pooled {
        let all = pool(runs);
        let each: Vec<RunResult> = if runs.len() > 1 {
            runs.iter()
                .enumerate()
                .map(|(i, m)| RunResult::new(i as u64 + 1, step_names, m))
                .collect()
        } else {
            Vec::new()
        };
        let repeat = (runs.len() > 1).then(|| ScenarioRepeat::of(&each));
        let bench = RunResult::new(1, step_names, &all);
        let noise = Noise::of(
            &all.overall,
            step_names,
            &all.per_step,
            bench.throughput_rps,
            &each,
        );
        Pooled {
            bench,
            overall: all.overall,
            repeat,
            noise,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn run(n: u64, us: u64, ms: u64) -> RunMeasurements {
        let mut m = RunMeasurements {
            measured: Duration::from_millis(ms),
            ..Default::default()
        };
        for _ in 0..n {
            m.overall.record(Duration::from_micros(us));
        }
        m
    }

    #[test]
    fn pooled_figures_and_the_spread_of_three_runs() {
        let p = Pooled::of(
            &[],
            &[run(100, 400, 50), run(100, 500, 50), run(100, 450, 100)],
        );
        assert_eq!(p.bench.exchanges, 300);
        assert_eq!(p.overall.count(), 300);
        assert_eq!(p.bench.throughput_rps, 1500.0);
        let r = p.repeat.expect("three runs");
        assert_eq!((r.runs, r.completed, r.failed), (3, 3, 0));
        let p50s: Vec<f64> = r.per_run.iter().map(|x| x.p50_ms).collect();
        for (got, want) in p50s.iter().zip([0.4, 0.5, 0.45]) {
            assert!((got - want).abs() < 0.001, "{p50s:?}");
        }
        // The pooled median is the middle run's, inside the per-run range.
        assert_eq!(p.bench.latency_ms.p50, p50s[2]);
        assert_eq!(
            (r.throughput_rps.min, r.throughput_rps.max),
            (1000.0, 2000.0)
        );
        assert_eq!(r.describe(), "3 runs, p50 0.4–0.5 ms, 1000–2000 req/s");
    }

    #[test]
    fn one_run_has_no_spread_and_a_failed_run_is_named() {
        assert!(Pooled::of(&[], &[run(10, 100, 10)]).repeat.is_none());
        let p = Pooled::of(&[], &[run(10, 100, 10), run(0, 0, 10)]);
        assert_eq!(p.bench.outcome, Outcome::Failed);
        let r = p.repeat.expect("two runs");
        assert_eq!((r.completed, r.failed), (1, 1));
        assert_eq!(r.per_run[1].outcome, Outcome::Failed);
        assert!(r.describe().ends_with(", 1 failed"), "{}", r.describe());
        // The spread is over the completed run only.
        assert_eq!(r.throughput_rps.min, 1000.0);
    }
}
