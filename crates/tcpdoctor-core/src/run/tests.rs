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
        path: "driver → server".to_string(),
        figures: Figures::of(&bench, &m.overall),
        latency_histogram: log_buckets(&m.overall),
        bench,
        repeat: None,
        capture: None,
        capture_note: Some("no capture in this test".into()),
        chunks: None,
        server_cpu: None,
        findings: Vec::new(),
    }
}

/// `run` settings for a test: `scenarios` as named, `requests` exchanges, `repeat` runs each.
pub(crate) fn settings(scenarios: &[&str], requests: u64, repeat: u64) -> RunSettings {
    RunSettings {
        command: "run".into(),
        target: "127.0.0.1:7000".into(),
        script: "echo".into(),
        server: None,
        scenarios: scenarios.iter().map(|s| s.to_string()).collect(),
        requests,
        repeat,
        connections: 1,
        output_dir: "out".into(),
    }
}

/// A `busy_poll` finding at `server`: 9 ms of CPU per request against a 20 µs floor.
fn busy(server: &str) -> Finding {
    let mut f = crate::run::busy_poll(&BusyPollInput {
        server,
        file: "x",
        cpu: ServerCpu::new(0.3, 0.6, 1.0, 100, 1),
        exchanges: 100,
        floor_us: 20.0,
        floor_of: "the driver's own",
        mean_ms: 1.0,
    })
    .expect("a busy_poll finding");
    f.file = "x".into();
    f
}

fn stalled() -> ScenarioResult {
    scenario("proxy-nagle", &[Duration::from_millis(41); 50])
}

fn healthy() -> ScenarioResult {
    scenario("direct", &[Duration::from_micros(120); 50])
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
