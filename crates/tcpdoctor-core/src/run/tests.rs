//! Checks, gates and the sample report the renderers' tests share.

use std::time::Duration;

use super::*;
use crate::bench::{LatencyHistogram, RunMeasurements};

/// A scenario whose exchanges took `latencies`, over one second.
pub(crate) fn scenario(name: &str, latencies: &[Duration]) -> ScenarioResult {
    let mut m = RunMeasurements {
        measured: Duration::from_secs(1),
        elapsed: Duration::from_secs(1),
        per_step: vec![LatencyHistogram::default()],
        port: Some(7000),
        ..Default::default()
    };
    for l in latencies {
        m.overall.record(*l);
        m.per_step[0].record(*l);
    }
    let bench = RunResult::new(1, &["GET".to_string()], &m);
    ScenarioResult {
        name: name.to_string(),
        definition: name.to_string(),
        path: "driver → server".to_string(),
        figures: Figures::of(&bench, &m.overall),
        latency_histogram: log_buckets(&m.overall),
        bench,
        repeat: None,
        capture: None,
        capture_note: Some("no capture in this test".into()),
        server_end: None,
        chunks: None,
        server_cpu: None,
        server_sockets: None,
        syscalls: None,
        findings: Vec::new(),
    }
}

/// `run` settings for a test: `scenarios` as named, `requests` exchanges, `repeat` runs each.
pub(crate) fn settings(scenarios: &[&str], requests: u64, repeat: u64) -> RunSettings {
    RunSettings {
        command: "run".into(),
        target: "127.0.0.1:7000".into(),
        script: "echo".into(),
        script_digest: None,
        server: None,
        scenarios: scenarios.iter().map(|s| s.to_string()).collect(),
        requests,
        repeat,
        connections: 1,
        pipeline: 1,
        output_dir: "out".into(),
    }
}

/// A `busy_poll` finding at `server`: 9 ms of spinning per request.
fn busy(server: &str) -> Finding {
    let mut f = crate::run::busy_poll(&BusyPollInput {
        held_for_ack: true,
        server,
        file: "x",
        cpu: ServerCpu::new(0.3, 0.6, 1.0, 100, 1),
        samples: &crate::run::cpu_samples::spinning(100, 9),
        exchanges: 100,
        floor_us: 20.0,
        floor_of: "the driver's own",
        cpu_counters: "utime + stime of the test's process",
        floor_counters: "getrusage of the test",
        trace: None,
        mean_ms: 1.0,
    })
    .expect("a busy_poll finding");
    f.file = "x".into();
    f
}

/// 50 exchanges, each held 41 ms by a delayed ACK (as its capture's analysis says).
fn stalled() -> ScenarioResult {
    let mut s = scenario("proxy-nagle", &[Duration::from_millis(41); 50]);
    s.figures.stalls = Some(50);
    s
}

fn healthy() -> ScenarioResult {
    let mut s = scenario("direct", &[Duration::from_micros(120); 50]);
    s.figures.stalls = Some(0);
    s
}

fn results(checks: &[&str], scenarios: &[ScenarioResult]) -> Vec<CheckResult> {
    checks
        .iter()
        .flat_map(|c| Check::parse(c).unwrap().evaluate(scenarios))
        .collect()
}

#[test]
fn checks_pass_and_fail_as_written() {
    let both = [healthy(), stalled()];
    let r = results(&["p99<5ms"], &both);
    assert_eq!(r.len(), 2);
    assert!(r[0].passed, "{:?}", r[0]);
    assert!(!r[1].passed);
    assert!(r[1].message.contains("limit < 5 ms"), "{}", r[1].message);
    let r = results(
        &[
            "stalls==0@direct",
            "throughput >= 40",
            "p50 <= 1ms @ direct",
        ],
        &both,
    );
    assert!(r.iter().all(|c| c.passed), "{r:?}");
    let r = results(&["stalls==0@proxy-nagle"], &both);
    assert_eq!((r.len(), r[0].passed, r[0].actual), (1, false, Some(50.0)));
}

#[test]
fn a_check_on_a_scenario_that_did_not_run_fails() {
    let r = results(&["p99<5ms@wan:15ms"], &[healthy()]);
    assert!(!r[0].passed);
    assert!(r[0].message.contains("no scenario named `wan:15ms`"));
    let r = results(&["cpu<100us"], &[healthy()]);
    assert!(!r[0].passed, "unmeasured CPU must not pass");
}

#[test]
fn bad_checks_are_named() {
    for (text, needle) in [
        ("p99", "no comparison"),
        ("p98<5ms", "unknown figure `p98`"),
        ("p99<5", "p99<5"),
        ("stalls<many", "not a number"),
        ("p99<5ms@", "no scenario after"),
    ] {
        let e = Check::parse(text).unwrap_err();
        assert!(e.contains(needle), "{text}: {e}");
    }
}

#[test]
fn the_gate_fails_on_checks_and_kinds() {
    let mut s = stalled();
    s.findings.push(busy("127.0.0.1:7000"));
    let settings = settings(&["direct", "proxy-nagle"], 50, 1);
    let mut r = RunReport::new(settings, vec![healthy(), s]);
    r.gate(&[], &[FindingKind::NagleDelayedAck], false);
    assert!(!r.failed);
    r.gate(&[], &[FindingKind::BusyPoll], false);
    assert!(r.failed);
    assert_eq!(r.failed_on, vec!["busy_poll in proxy-nagle".to_string()]);
    r.gate(&[], &[], true);
    assert!(r.failed);
    r.gate(&[Check::parse("p99<100ms").unwrap()], &[], false);
    assert!(!r.failed, "{:?}", r.checks);
    r.gate(&[Check::parse("p99<10ms").unwrap()], &[], false);
    assert!(r.failed);
}

/// `--fail-on` a kind that a scenario could not show (no capture analysed for the packets'
/// kinds, no server CPU for busy_poll) fails there instead of passing: a non-root run with no
/// live capture of `direct` read "passed" over a 44 ms Nagle stall on every exchange.
#[test]
fn fail_on_a_kind_the_scenario_could_not_show_does_not_pass() {
    let mut blind = healthy();
    blind.figures.stalls = None;
    blind.capture_note = Some("no capture of the direct path: live capture needs root".into());
    let mut r = RunReport::new(settings(&["direct"], 50, 1), vec![blind]);
    r.gate(&[], &[FindingKind::NagleDelayedAck], false);
    assert!(r.failed);
    assert_eq!(r.reasons.len(), 1, "{:?}", r.reasons);
    assert!(
        r.reasons[0].starts_with("--fail-on nagle_delayed_ack in direct: not evaluated")
            && r.reasons[0].contains("live capture needs root"),
        "{:?}",
        r.reasons
    );
    r.gate(&[], &[], true);
    assert!(r.failed, "--fail-on any");
    // busy_poll needs the server's CPU, not a capture.
    r.gate(&[], &[FindingKind::BusyPoll], false);
    assert!(r.failed);
    assert!(r.reasons[0].contains("server's CPU was not measured"));
    r.scenarios[0].figures.server_cpu_per_request_us = Some(50.0);
    r.gate(&[], &[FindingKind::BusyPoll], false);
    assert!(!r.failed, "{:?}", r.reasons);
    // With the capture analysed, nothing found passes.
    let mut r = RunReport::new(settings(&["direct"], 50, 1), vec![healthy()]);
    r.gate(&[], &[FindingKind::NagleDelayedAck], false);
    assert!(!r.failed, "{:?}", r.reasons);
}

#[test]
fn a_repeated_scenario_shows_its_spread_in_text_and_html() {
    let run = |us: u64| {
        let mut m = RunMeasurements {
            measured: Duration::from_millis(100),
            ..Default::default()
        };
        for _ in 0..100 {
            m.overall.record(Duration::from_micros(us));
        }
        m
    };
    let pooled = Pooled::of(&[], &[run(400), run(500)]);
    let mut s = healthy();
    s.figures = Figures::of(&pooled.bench, &pooled.overall);
    s.repeat = pooled.repeat;
    let settings = settings(&["direct"], 100, 2);
    let r = RunReport::new(settings, vec![s]);
    let text = render_run_text(&r);
    assert!(
        text.contains("100 exchanges per run, 2 runs per scenario"),
        "{text}"
    );
    assert!(
        text.contains("spread in direct: 2 runs, p50 0.4–0.5 ms, 1000–1000 req/s"),
        "{text}"
    );
    assert_eq!(r.scenarios[0].figures.exchanges, 200);
    let html = render_html(&r);
    assert!(html.contains("2 runs, p50 0.4–0.5 ms"));
}

/// A kind found twice (two servers, or both directions) is listed once per scenario, in the
/// text and in the HTML table alike.
#[test]
fn a_kind_found_twice_is_listed_once() {
    let mut s = stalled();
    s.findings = vec![busy("127.0.0.1:7000"), busy("127.0.0.1:7001")];
    assert_eq!(s.findings_by_kind().len(), 1);
    let r = RunReport::new(settings(&["proxy-nagle"], 50, 1), vec![s]);
    let text = render_run_text(&r);
    assert!(
        text.contains("findings in proxy-nagle: busy_poll\n"),
        "{text}"
    );
    let page = render_html(&r);
    assert_eq!(page.matches(">busy_poll</span>").count(), 1, "{page}");
}

/// Failed exchanges are not in the latency figures, so the details say how many and why.
#[test]
fn a_scenario_with_errors_says_why() {
    let mut s = healthy();
    s.bench.errors.response = 3;
    s.bench
        .errors
        .examples
        .push("step `GET`: 9 byte(s) unframed".into());
    let clean = healthy();
    let r = RunReport::new(settings(&["direct", "direct"], 50, 1), vec![s, clean]);
    let text = render_run_text(&r);
    assert_eq!(text.matches("   errors: ").count(), 1, "{text}");
    assert!(
        text.contains("errors: 3 (0 connect, 3 unframed response, 0 assertion, 0 closed) and 0 timeouts, none in the latency figures; e.g. step `GET`: 9 byte(s) unframed"),
        "{text}"
    );
}

/// A server that accepts and never answers, or closes at once: no exchange measured. Nothing
/// computed over nothing passes, and every renderer says why.
#[test]
fn a_scenario_that_measured_nothing_never_passes() {
    let mut empty = scenario("direct", &[]);
    empty.bench.errors.closed = 10;
    empty
        .bench
        .errors
        .examples
        .push("connection reset by peer".into());
    empty.figures.errors = 10;
    empty.bench.outcome = crate::bench::Outcome::Failed;
    let mut r = RunReport::new(settings(&["direct"], 200, 1), vec![empty]);
    r.gate(
        &[
            Check::parse("p99<5ms").unwrap(),
            Check::parse("errors<=10").unwrap(),
        ],
        &[],
        true,
    );
    assert!(r.failed);
    assert_eq!(r.result, GateResult::Failed);
    assert_eq!(r.incomplete.len(), 1);
    assert!(
        r.incomplete[0].message.starts_with(
            "nothing measured in scenario direct: 0 of 200 exchanges measured, 10 errors"
        ),
        "{}",
        r.incomplete[0].message
    );
    for c in &r.checks {
        assert_eq!(c.status, CheckStatus::CannotEvaluate, "{c:?}");
        assert!(!c.passed);
        assert!(
            c.message.contains("no exchange was measured"),
            "{}",
            c.message
        );
    }
    let text = render_run_text(&r);
    assert!(
        text.contains("Result: FAILED (exit 1)\n  - nothing measured in scenario direct"),
        "{text}"
    );
    assert!(!text.contains("p99 = 0"), "{text}");
    assert!(
        text.contains("errors: 10 (0 connect, 0 unframed response, 0 assertion, 10 closed)"),
        "{text}"
    );
    let html = render_html(&r);
    assert!(!html.contains("PASSED"), "no green badge over nothing");
    assert!(html.contains(">GATE FAILED</span>"));
    assert!(html.contains("nothing measured in scenario direct"));
    assert!(
        html.contains("connection reset by peer"),
        "the HTML shows the errors"
    );
    assert!(html.contains("cannot evaluate"));
}

/// Ctrl-C: what was measured is reported, and the result says INTERRUPTED, not passed.
#[test]
fn an_interrupted_run_is_never_passed() {
    let mut s = healthy();
    s.bench.outcome = crate::bench::Outcome::Interrupted;
    let mut r = RunReport::new(settings(&["direct", "proxy"], 1000, 1), vec![s]);
    r.not_run = vec!["proxy".into()];
    r.gate(&[Check::parse("p99<1s@direct").unwrap()], &[], false);
    assert!(r.checks[0].passed, "what was measured is still checked");
    assert!(r.interrupted && r.failed);
    assert_eq!(r.result, GateResult::Interrupted);
    let text = render_run_text(&r);
    assert!(text.contains("Result: INTERRUPTED (exit 1)"), "{text}");
    assert!(text.contains("not run: proxy"), "{text}");
    assert!(
        text.contains("interrupted in scenario direct: 50 of 1000 exchanges"),
        "{text}"
    );
    let html = render_html(&r);
    assert!(html.contains(">INTERRUPTED</span>") && !html.contains("PASSED"));
    // A signal between two scenarios: no scenario says so, the shell does.
    let mut r = RunReport::new(settings(&["direct", "proxy"], 50, 1), vec![healthy()]);
    r.interrupted = true;
    r.gate(&[], &[], false);
    assert_eq!(r.result, GateResult::Interrupted);
}

/// `stalls` is the analyzer's count of timer-held turns, not a clock threshold: a healthy
/// server 30 ms of round trip away has every exchange ≥ 30 ms and no stall. Without a capture
/// the check cannot be evaluated, and says why.
#[test]
fn stalls_are_what_a_timer_held_and_need_a_capture() {
    let mut wan = scenario("wan:15ms", &[Duration::from_millis(31); 50]);
    wan.figures.stalls = Some(0);
    let r = results(&["stalls==0", "over30ms==0"], &[wan.clone()]);
    assert!(r[0].passed, "{:?}", r[0]);
    assert!(!r[1].passed && r[1].actual == Some(50.0), "{:?}", r[1]);

    wan.figures.stalls = None;
    wan.capture_note = Some("Unix socket: no packets".into());
    let r = results(&["stalls==0"], &[wan]);
    assert_eq!(r[0].status, CheckStatus::CannotEvaluate);
    assert!(
        r[0].message.contains("Unix socket: no packets"),
        "{}",
        r[0].message
    );

    // Counted from the findings: delayed-ACK stalled turns and timeout stalls, nothing else.
    let mut nagle = busy("127.0.0.1:7000");
    nagle.kind = FindingKind::NagleDelayedAck;
    nagle.evidence.counts.insert("stalled_turns".into(), 7);
    let mut rto = nagle.clone();
    rto.kind = FindingKind::RetransmissionStall;
    rto.evidence.counts.insert("stalls".into(), 2);
    let other = busy("127.0.0.1:7000");
    // The hop's upstream leg (another server) holding the same exchanges: not counted twice.
    let mut upstream = nagle.clone();
    upstream.server = "127.0.0.1:7001".into();
    upstream.evidence.counts.insert("stalled_turns".into(), 8);
    assert_eq!(
        timer_stalls(&[nagle.clone(), rto.clone(), other.clone()]),
        9
    );
    assert_eq!(timer_stalls(&[nagle, rto, other, upstream.clone()]), 9);
    // A stall only one leg shows still counts.
    assert_eq!(timer_stalls(&[upstream]), 8);
    assert_eq!(timer_stalls(&[]), 0);
}

/// Timeouts are counted apart from errors, shown in every table, and `errors` checks both.
#[test]
fn timeouts_are_shown_and_checked() {
    let mut s = healthy();
    s.bench.errors.timeouts = 2;
    s.figures.timeouts = 2;
    let r = results(&["errors==0", "timeouts<=2"], &[s.clone()]);
    assert!(!r[0].passed, "{:?}", r[0]);
    assert_eq!(r[0].actual, Some(2.0));
    assert!(r[1].passed);
    let report = RunReport::new(settings(&["direct"], 50, 1), vec![s]);
    let text = render_run_text(&report);
    assert!(text.contains("  timeouts  "), "{text}");
    assert!(
        text.contains("and 2 timeouts, none in the latency figures"),
        "{text}"
    );
    let html = render_html(&report);
    assert!(
        html.contains("<tr><th>timeouts</th><td class=\"num bad\">2</td>"),
        "{html}"
    );
}

/// Issue 12: an open-loop scenario shows the driver's own send lateness beside its latency,
/// and a server's closes show as reconnects, in the text and the HTML alike (both read the
/// figures the JSON carries); a closed-loop scenario shows neither.
#[test]
fn send_lateness_and_reconnects_are_shown_wherever_the_figures_are() {
    let mut m = RunMeasurements {
        measured: Duration::from_secs(1),
        reconnects: 7,
        ..Default::default()
    };
    for _ in 0..100 {
        m.overall.record(Duration::from_micros(120));
        m.send_lateness.record(Duration::from_micros(4));
    }
    m.send_lateness.record(Duration::from_micros(900));
    let bench = RunResult::new(1, &[], &m);
    let mut open = healthy();
    open.name = "direct".into();
    open.figures = Figures::of(&bench, &m.overall);
    open.bench = bench;
    assert_eq!(open.figures.send_late_p50_us, Some(4.0));
    assert_eq!(open.figures.reconnects, 7);
    let r = RunReport::new(settings(&["direct"], 100, 1), vec![open]);
    let text = render_run_text(&r);
    assert!(text.contains("driver send late µs p50/p99"), "{text}");
    assert!(text.contains("reconnects"), "{text}");
    let html = render_html(&r);
    assert!(html.contains("driver's send lateness"), "{html}");
    assert!(html.contains("4 / "), "{html}");

    let closed = RunReport::new(settings(&["direct"], 100, 1), vec![healthy()]);
    assert!(!render_run_text(&closed).contains("send late"));
    assert!(!render_html(&closed).contains("send lateness"));
}

/// No gate asked: `not_gated`, exit 0 and never "passed"; a gate asked and held: `passed`;
/// --fail-on-worse over a WORSE p50: `failed`, with the figure named.
#[test]
fn not_gated_passed_and_worse() {
    let fast = scenario("direct", &[Duration::from_micros(200); 200]);
    let slow = scenario("direct", &[Duration::from_millis(40); 200]);
    let mut r = RunReport::new(settings(&["direct"], 200, 1), vec![slow.clone()]);
    r.gate(&[], &[], false);
    assert_eq!((r.result, r.failed), (GateResult::NotGated, false));
    let mut c = Comparison::of("direct", ("b", &fast.figures), ("now", &slow.figures));
    c.scenario = "direct".into();
    r.comparisons.push(c);
    r.gate_with_worse(&[], &[], false, Some(&["all".to_string()]));
    assert_eq!((r.result, r.failed), (GateResult::Failed, true));
    assert!(r.worse.iter().any(|w| w.figure == "p50"), "{:?}", r.worse);
    assert!(r.reasons.iter().any(|x| x.contains("--fail-on-worse")));
    // The same build against itself passes.
    let mut r = RunReport::new(settings(&["direct"], 200, 1), vec![fast.clone()]);
    let mut c = Comparison::of("direct", ("b", &fast.figures), ("now", &fast.figures));
    c.scenario = "direct".into();
    r.comparisons.push(c);
    r.gate_with_worse(&[], &[], false, Some(&["all".to_string()]));
    assert_eq!(
        (r.result, r.failed),
        (GateResult::Passed, false),
        "{:?}",
        r.reasons
    );
}
