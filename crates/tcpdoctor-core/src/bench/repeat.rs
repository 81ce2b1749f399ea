//! `--repeat K`: the spread of each figure over K runs, and the runs that failed or hung.
//!
//! One run of a benchmark on a shared machine is an anecdote. Transport benchmarks report the
//! mean and standard deviation over several runs, and how many runs succeeded at all; a run
//! that hung or failed is counted, never averaged in.

use serde::Serialize;

use super::report::{Outcome, RunMeasurements, RunResult};
use crate::stats::round3;

/// Mean, sample standard deviation, min and max of one figure over the completed runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    pub mean: f64,
    pub stdev: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(values: &[f64]) -> Spread {
        if values.is_empty() {
            return Spread::default();
        }
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = if values.len() > 1 {
            values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)
        } else {
            0.0
        };
        Spread {
            mean: round3(mean),
            stdev: round3(var.sqrt()),
            min: round3(values.iter().copied().fold(f64::INFINITY, f64::min)),
            max: round3(values.iter().copied().fold(f64::NEG_INFINITY, f64::max)),
        }
    }
}

/// The figures of every completed run, summarised.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RepeatFigures {
    pub throughput_rps: Spread,
    pub p50_ms: Spread,
    pub p90_ms: Spread,
    pub p99_ms: Spread,
    pub p999_ms: Spread,
    pub max_ms: Spread,
    pub errors: Spread,
    pub timeouts: Spread,
    pub cpu_per_request_us: Spread,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RepeatSummary {
    pub runs: u64,
    pub completed: u64,
    pub failed: u64,
    pub hung: u64,
    /// Stopped by Ctrl-C (the last run, when there is one).
    pub interrupted: u64,
    /// completed / runs.
    pub success_rate: f64,
    pub figures: RepeatFigures,
}

impl RepeatSummary {
    pub fn of(runs: &[RunResult]) -> RepeatSummary {
        let done: Vec<&RunResult> = runs
            .iter()
            .filter(|r| r.outcome == Outcome::Completed)
            .collect();
        let count = |o: Outcome| runs.iter().filter(|r| r.outcome == o).count() as u64;
        let spread = |f: &dyn Fn(&RunResult) -> f64| {
            Spread::of(&done.iter().map(|r| f(r)).collect::<Vec<f64>>())
        };
        RepeatSummary {
            runs: runs.len() as u64,
            completed: done.len() as u64,
            failed: count(Outcome::Failed),
            hung: count(Outcome::Hung),
            interrupted: count(Outcome::Interrupted),
            success_rate: if runs.is_empty() {
                0.0
            } else {
                round3(done.len() as f64 / runs.len() as f64)
            },
            figures: RepeatFigures {
                throughput_rps: spread(&|r| r.throughput_rps),
                p50_ms: spread(&|r| r.latency_ms.p50),
                p90_ms: spread(&|r| r.latency_ms.p90),
                p99_ms: spread(&|r| r.latency_ms.p99),
                p999_ms: spread(&|r| r.latency_ms.p999),
                max_ms: spread(&|r| r.latency_ms.max),
                errors: spread(&|r| r.errors.total() as f64),
                timeouts: spread(&|r| r.errors.timeouts as f64),
                cpu_per_request_us: spread(&|r| r.cpu.per_request_us),
            },
        }
    }
}

/// Several runs' measurements as one: histograms merged, counters, times and CPU summed, so
/// throughput is all exchanges over all measured time. A run that did not complete makes the
/// whole not complete (the first such outcome wins), so pooling never hides a failure.
pub fn pool(runs: &[RunMeasurements]) -> RunMeasurements {
    let mut all = RunMeasurements::default();
    let mut notes: Vec<String> = Vec::new();
    for (i, m) in runs.iter().enumerate() {
        if all.outcome.is_none() && m.outcome() != Outcome::Completed {
            all.outcome = Some(m.outcome());
        }
        all.elapsed += m.elapsed;
        all.measured += m.measured;
        all.overall.merge(&m.overall);
        if all.per_step.len() < m.per_step.len() {
            all.per_step.resize_with(m.per_step.len(), Default::default);
        }
        for (into, h) in all.per_step.iter_mut().zip(&m.per_step) {
            into.merge(h);
        }
        all.errors.add(&m.errors);
        all.bytes_sent += m.bytes_sent;
        all.bytes_received += m.bytes_received;
        all.connections_opened += m.connections_opened;
        all.cpu_user += m.cpu_user;
        all.cpu_system += m.cpu_system;
        all.cpu_spin += m.cpu_spin;
        all.cpu_helpers += m.cpu_helpers;
        all.send_lateness.merge(&m.send_lateness);
        all.reconnects += m.reconnects;
        if let Some(n) = &m.note {
            notes.push(if runs.len() > 1 {
                format!("run {}: {n}", i + 1)
            } else {
                n.clone()
            });
        }
        all.port = all.port.or(m.port);
    }
    if !notes.is_empty() {
        all.note = Some(notes.join("; "));
    }
    all
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::bench::LatencyHistogram;

    #[test]
    fn spread_is_sample_stdev() {
        let s = Spread::of(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]);
        assert_eq!(s.mean, 5.0);
        assert!((s.stdev - 2.138).abs() < 1e-3, "{s:?}");
        assert_eq!((s.min, s.max), (2.0, 9.0));
        assert_eq!(Spread::of(&[3.0]).stdev, 0.0);
        assert_eq!(Spread::of(&[]), Spread::default());
    }

    #[test]
    fn hung_and_failed_runs_are_counted_not_averaged() {
        let run = |n: u64, us: u64, outcome: Option<Outcome>| {
            let mut m = RunMeasurements {
                measured: Duration::from_secs(1),
                outcome,
                ..Default::default()
            };
            for _ in 0..n {
                m.overall.record(Duration::from_micros(us));
            }
            RunResult::new(1, &[], &m)
        };
        let runs = vec![
            run(1000, 100, None),
            run(3000, 100, None),
            run(5, 100, Some(Outcome::Hung)),
            run(0, 0, None),
        ];
        let s = RepeatSummary::of(&runs);
        assert_eq!((s.runs, s.completed, s.hung, s.failed), (4, 2, 1, 1));
        assert_eq!(s.success_rate, 0.5);
        assert_eq!(s.figures.throughput_rps.mean, 2000.0);
        assert_eq!(s.figures.throughput_rps.min, 1000.0);
    }

    fn measured(n: u64, us: u64, secs: u64) -> RunMeasurements {
        let mut m = RunMeasurements {
            measured: Duration::from_secs(secs),
            elapsed: Duration::from_secs(secs),
            per_step: vec![LatencyHistogram::default()],
            cpu_user: Duration::from_millis(10),
            ..Default::default()
        };
        for _ in 0..n {
            m.overall.record(Duration::from_micros(us));
            m.per_step[0].record(Duration::from_micros(us));
        }
        m
    }

    #[test]
    fn pooling_merges_histograms_and_divides_all_exchanges_by_all_time() {
        let mut a = measured(1000, 100, 1);
        a.errors.add_connect_reason("connection refused", 2);
        a.errors.timeouts = 1;
        let mut b = measured(3000, 300, 2);
        b.errors.add_connect_reason("connection refused", 1);
        b.errors.closed = 4;
        let p = pool(&[a, b]);
        let r = RunResult::new(1, &["GET".into()], &p);
        assert_eq!(r.exchanges, 4000);
        // 4000 exchanges in 3 s, not the mean of 1000/s and 1500/s.
        assert_eq!(r.throughput_rps, 1333.333);
        // Three of four exchanges took 300 µs (HDR: three significant digits).
        assert!((r.latency_ms.p50 - 0.3).abs() < 0.001, "{:?}", r.latency_ms);
        assert!((r.latency_ms.min - 0.1).abs() < 0.001, "{:?}", r.latency_ms);
        assert_eq!(r.steps[0].latency_ms.count, 4000);
        assert_eq!(
            (r.errors.connect, r.errors.closed, r.errors.timeouts),
            (3, 4, 1)
        );
        assert_eq!(r.errors.connect_reasons[0].count, 3);
        assert_eq!(r.cpu.per_request_us, 5.0);
        assert_eq!(r.outcome, Outcome::Completed);
    }

    #[test]
    fn a_failed_or_hung_run_is_not_pooled_away() {
        let mut hung = measured(5, 100, 1);
        hung.outcome = Some(Outcome::Hung);
        hung.note = Some("no progress for 5 s".into());
        let p = pool(&[measured(100, 100, 1), hung, measured(0, 0, 1)]);
        assert_eq!(p.outcome(), Outcome::Hung);
        assert_eq!(p.note.as_deref(), Some("run 2: no progress for 5 s"));
        let p = pool(&[measured(100, 100, 1), measured(0, 0, 1)]);
        assert_eq!(p.outcome(), Outcome::Failed);
        assert_eq!(pool(&[measured(9, 100, 1)]).outcome(), Outcome::Completed);
    }
}
