//! The text report of `tcpdoctor bench`: settings, then each run's figures, then the spread.

use std::fmt::Write;

use crate::bench::{BenchReport, LatencySummary, RepeatSummary, RunResult, Spread};
use crate::numfmt::{count, num};

/// Renders a bench report for a terminal.
pub fn render_bench_text(report: &BenchReport) -> String {
    let mut out = String::new();
    let s = &report.settings;
    let bound = match (s.requests, s.duration_s) {
        (Some(n), _) => count(n, "request"),
        (None, Some(d)) => format!("{} s", num(d)),
        (None, None) => "until the script ends".into(),
    };
    let mode = match s.rate_per_s {
        Some(r) => format!("open loop at {} req/s", num(r)),
        None => "closed loop".into(),
    };
    let _ = writeln!(
        out,
        "bench {} with script {}: {}, {mode}, pipeline {}, {bound}",
        s.target,
        s.script,
        count(s.connections, "connection"),
        s.pipeline
    );
    let mut how = vec![
        if s.nagle {
            "nagle ON (TCP_NODELAY cleared)".to_string()
        } else {
            "nagle off (TCP_NODELAY set)".to_string()
        },
        format!("requests written {}", s.split_writes),
    ];
    if s.warmup_s > 0.0 {
        how.push(format!("warmup {} s not measured", num(s.warmup_s)));
    }
    how.push(format!("timeout {} s", num(s.timeout_s)));
    let _ = writeln!(out, "  {}", how.join(", "));
    for r in &report.runs {
        run(&mut out, r, report.runs.len() > 1);
    }
    if let Some(sum) = &report.summary {
        summary(&mut out, sum);
    }
    out
}

fn run(out: &mut String, r: &RunResult, numbered: bool) {
    out.push('\n');
    if numbered {
        let _ = write!(out, "run {} ({}): ", r.run, r.outcome.as_str());
    } else if r.outcome != crate::bench::Outcome::Completed {
        let _ = write!(out, "run {}: ", r.outcome.as_str().to_uppercase());
    }
    let _ = writeln!(
        out,
        "{} in {} s: {} req/s; {}, {}",
        count(r.exchanges, "exchange"),
        num(r.measured_s),
        num(r.throughput_rps),
        count(r.errors.total(), "error"),
        count(r.errors.timeouts, "timeout")
    );
    if let Some(n) = &r.note {
        let _ = writeln!(out, "  {n}");
    }
    if r.exchanges > 0 {
        let _ = writeln!(
            out,
            "  {:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
            "latency (ms)", "p50", "p90", "p99", "p99.9", "max", "mean"
        );
        latency_row(out, "all", &r.latency_ms);
        if let Some(l) = &r.send_lateness {
            let _ = writeln!(
                out,
                "  send lateness (the driver's own, µs): p50 {:.1}, p99 {:.1}, max {:.1}",
                l.p50_us, l.p99_us, l.max_us
            );
        }
        if r.steps.len() > 1
            || r.steps
                .first()
                .is_some_and(|s| s.latency_ms != r.latency_ms)
        {
            for s in &r.steps {
                latency_row(out, &s.name, &s.latency_ms);
            }
        }
    }
    let e = &r.errors;
    if e.total() + e.timeouts > 0 {
        let mut parts = Vec::new();
        for (n, what) in [
            (e.connect, "connect"),
            (e.response, "bad response"),
            (e.assertion, "failed assertion"),
            (e.closed, "closed by peer"),
            (e.timeouts, "timeout"),
        ] {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        }
        let _ = writeln!(out, "  errors: {}", parts.join(", "));
        for c in &e.connect_reasons {
            let _ = writeln!(out, "    connect: {} ({}x)", c.reason, c.count);
        }
        for x in &e.examples {
            let _ = writeln!(out, "    e.g. {x}");
        }
    }
    let _ = writeln!(out, "  stall view: {}", r.stall.verdict);
    if let Some(n) = &r.stall.next_step {
        let _ = writeln!(out, "    {n}");
    }
    let mut apart = Vec::new();
    if r.cpu.spin_s > 0.0 {
        // Open loop stays awake for its slots and answers; a one-connection closed loop polls
        // for the answers instead of sleeping.
        let why = if r.send_lateness.is_some() {
            "spinning to stay awake for slots and answers"
        } else {
            "polling for answers"
        };
        apart.push(format!("{} s {why}", num(r.cpu.spin_s)));
    }
    if r.cpu.helpers_s > 0.0 {
        apart.push(format!(
            "{} s in tcpdoctor's other threads (captures, delay line)",
            num(r.cpu.helpers_s)
        ));
    }
    let spin = if apart.is_empty() {
        String::new()
    } else {
        format!(" (of which {}; not counted per request)", apart.join("; "))
    };
    let _ = writeln!(
        out,
        "  driver CPU: {} s user + {} s system{spin}, {} µs per request; {} opened",
        num(r.cpu.user_s),
        num(r.cpu.system_s),
        num(r.cpu.per_request_us),
        count(r.connections_opened, "connection")
    );
    if r.reconnects > 0 {
        let _ = writeln!(
            out,
            "  reconnects: {} (the server closed the connection after a complete response, \
             e.g. `Connection: close`; reopened without an error, the connect time charged to \
             the exchange that waited for it)",
            r.reconnects
        );
    }
}

fn latency_row(out: &mut String, name: &str, l: &LatencySummary) {
    let name: String = name.chars().take(16).collect();
    let _ = writeln!(
        out,
        "  {name:<16} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}",
        num(l.p50),
        num(l.p90),
        num(l.p99),
        num(l.p999),
        num(l.max),
        num(l.mean)
    );
}

fn summary(out: &mut String, s: &RepeatSummary) {
    let interrupted = if s.interrupted > 0 {
        format!(", {} interrupted", s.interrupted)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "\n{}: {} completed, {} failed, {} hung{interrupted} (success rate {:.0}%)",
        count(s.runs, "run"),
        s.completed,
        s.failed,
        s.hung,
        s.success_rate * 100.0
    );
    if s.completed == 0 {
        return;
    }
    let _ = writeln!(
        out,
        "  {:<22} {:>12} {:>12} {:>12} {:>12}",
        "over completed runs", "mean", "stdev", "min", "max"
    );
    let f = &s.figures;
    for (name, sp) in [
        ("req/s", &f.throughput_rps),
        ("p50 ms", &f.p50_ms),
        ("p90 ms", &f.p90_ms),
        ("p99 ms", &f.p99_ms),
        ("p99.9 ms", &f.p999_ms),
        ("max ms", &f.max_ms),
        ("errors", &f.errors),
        ("timeouts", &f.timeouts),
        ("CPU µs per request", &f.cpu_per_request_us),
    ] {
        spread_row(out, name, sp);
    }
}

fn spread_row(out: &mut String, name: &str, s: &Spread) {
    let _ = writeln!(
        out,
        "  {name:<22} {:>12} {:>12} {:>12} {:>12}",
        num(s.mean),
        num(s.stdev),
        num(s.min),
        num(s.max)
    );
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::bench::{BenchSettings, RunMeasurements};

    fn settings() -> BenchSettings {
        BenchSettings {
            target: "127.0.0.1:6379".into(),
            script: "resp".into(),
            steps: vec!["PING".into()],
            connections: 2,
            pipeline: 1,
            mode: "closed_loop".into(),
            rate_per_s: None,
            spin_us: None,
            requests: Some(100),
            duration_s: None,
            warmup_s: 0.0,
            timeout_s: 5.0,
            hang_after_s: 10.0,
            nagle: false,
            split_writes: "whole".into(),
            threads: 1,
            repeat: 2,
        }
    }

    #[test]
    fn renders_runs_stall_and_spread() {
        let mut m = RunMeasurements {
            measured: Duration::from_secs(1),
            per_step: vec![Default::default()],
            ..Default::default()
        };
        for _ in 0..100 {
            m.overall.record(Duration::from_micros(41_000));
            m.per_step[0].record(Duration::from_micros(41_000));
        }
        m.errors.timeouts = 1;
        let steps = vec!["PING".to_string()];
        let runs = vec![RunResult::new(1, &steps, &m), RunResult::new(2, &steps, &m)];
        let text = render_bench_text(&BenchReport::new(settings(), runs));
        assert!(
            text.starts_with("bench 127.0.0.1:6379 with script resp"),
            "{text}"
        );
        assert!(text.contains("run 1 (completed): 100 exchanges"), "{text}");
        assert!(text.contains("nagle_delayed_ack"), "{text}");
        assert!(text.contains("tcpdoctor analyze"), "{text}");
        assert!(text.contains("1 timeout"), "{text}");
        assert!(
            text.contains("2 runs: 2 completed, 0 failed, 0 hung"),
            "{text}"
        );
        assert!(text.contains("req/s"), "{text}");
    }

    #[test]
    fn cpu_kept_out_of_the_per_request_figure_is_named() {
        let mut m = RunMeasurements {
            measured: Duration::from_secs(1),
            per_step: vec![Default::default()],
            cpu_user: Duration::from_millis(40),
            cpu_system: Duration::from_millis(20),
            ..Default::default()
        };
        for _ in 0..100 {
            m.overall.record(Duration::from_micros(400));
        }
        let steps = vec!["PING".to_string()];
        let plain = render_bench_text(&BenchReport::new(
            settings(),
            vec![RunResult::new(1, &steps, &m)],
        ));
        assert!(plain.contains("600 µs per request"), "{plain}");
        assert!(!plain.contains("of which"), "{plain}");
        m.cpu_spin = Duration::from_millis(20);
        m.cpu_helpers = Duration::from_millis(10);
        let text = render_bench_text(&BenchReport::new(
            settings(),
            vec![RunResult::new(1, &steps, &m)],
        ));
        assert!(
            text.contains(
                "(of which 0.02 s polling for answers; 0.01 s in tcpdoctor's other \
                 threads (captures, delay line); not counted per request), 300 µs per request"
            ),
            "{text}"
        );
    }
}
