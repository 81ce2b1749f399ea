//! What a newcomer reads: counts as counts, nouns that agree, the demo's header and cases,
//! and a change within the noise shown as no change, in text and HTML alike.

use std::time::Duration;

use super::tests::{scenario, settings};
use super::*;

fn demo_report() -> RunReport {
    let mut before = scenario("busy-poll", &[Duration::from_micros(900); 40]);
    let mut f = super::busy_poll(&BusyPollInput {
        held_for_ack: true,
        server: "127.0.0.1:7000",
        file: "x",
        cpu: ServerCpu::new(0.3, 0.6, 1.0, 40, 1),
        samples: &crate::run::cpu_samples::spinning(40, 9),
        exchanges: 40,
        floor_us: 20.0,
        floor_of: "the driver's own",
        mean_ms: 0.9,
        cpu_counters: "utime + stime of the test's process",
        floor_counters: "getrusage of the test",
        trace: None,
    })
    .expect("9 ms of spinning per request is busy_poll");
    before.findings.push(f.clone());
    f.kind = crate::report::FindingKind::FragmentedWrites;
    f.verdict = "a second finding of the same scenario".into();
    before.findings.push(f);
    let after = scenario("no-spin", &[Duration::from_micros(800); 40]);
    let mut s = settings(&["busy-poll", "no-spin"], 200, 1);
    s.command = "demo".into();
    s.target = "built-in specimens on 127.0.0.1".into();
    let mut r = RunReport::new(s, vec![before, after]);
    r.cases.push(DemoCase {
        title: "5. A server that spins".into(),
        setup: "the server spins".into(),
        expected: crate::report::FindingKind::BusyPoll,
        before: "busy-poll".into(),
        after: "no-spin".into(),
        requests: 40,
        reproduced: true,
        fixed: true,
        diagnosis: "the server stays awake while it waits for nothing".into(),
        fix: "wait for EPOLLOUT".into(),
    });
    r.comparisons.push(Comparison::of(
        "5. A server that spins",
        ("busy-poll", &r.scenarios[0].figures),
        ("no-spin", &r.scenarios[1].figures),
    ));
    r.elapsed_s = Some(9.184);
    r
}

#[test]
fn the_demo_header_tells_cases_exchanges_and_time() {
    let text = render_run_text(&demo_report());
    let head: Vec<&str> = text.lines().take(2).collect();
    assert_eq!(
        head,
        [
            "tcpdoctor demo: 1 case, each a scenario and its fixed twin, on built-in specimens \
             on 127.0.0.1",
            "exchanges per scenario, case by case: 40; over 1 connection; 9.18 s in all"
        ],
        "{text}"
    );
    assert!(
        !text.contains("200 exchanges"),
        "not the largest case's count: {text}"
    );
}

#[test]
fn a_demo_case_names_its_kind_and_lists_every_finding() {
    let text = render_run_text(&demo_report());
    assert!(
        text.contains("   diagnosis (busy_poll): the server stays awake while it waits"),
        "{text}"
    );
    assert!(text.contains("   also found in busy-poll:\n"), "{text}");
    assert!(
        text.contains("     fragmented_writes (critical, server_to_client): a second finding"),
        "{text}"
    );
    assert!(text.contains("   found in no-spin: nothing"), "{text}");
    let html = render_html(&demo_report());
    assert!(
        html.contains(">busy_poll</code> <code class=\"sev"),
        "{html}"
    );
    assert!(html.contains(">fragmented_writes</code>"));
}

#[test]
fn counts_print_as_counts_in_text_html_and_json() {
    let r = demo_report();
    let text = render_run_text(&r);
    let errors = text
        .lines()
        .find(|l| l.trim_start().starts_with("errors"))
        .expect("an errors row");
    assert!(
        errors.split_whitespace().nth(1) == Some("0") && !errors.contains("0.0"),
        "{errors}"
    );
    assert!(!text.contains(".000"), "{text}");
    let html = render_html(&r);
    assert!(!html.contains(">0.000<") && !html.contains(">40.0<"));
    let json = serde_json::to_value(&r).expect("json");
    for row in json["comparisons"][0]["rows"].as_array().expect("rows") {
        if ["errors", "exchanges ≥ 30 ms"].contains(&row["metric"].as_str().unwrap_or("")) {
            assert!(row["before"].is_u64() && row["after"].is_u64(), "{row}");
        }
    }
}

#[test]
fn a_change_within_the_noise_is_no_change_never_worse() {
    let mut r = demo_report();
    for row in &mut r.comparisons[0].rows {
        row.better = None;
    }
    let text = render_run_text(&r);
    assert!(!text.contains("WORSE"), "{text}");
    let p50 = text
        .lines()
        .find(|l| l.trim_start().starts_with("p50"))
        .expect("p50 row");
    assert!(p50.ends_with("no change"), "{p50}");
    let html = render_html(&r);
    assert!(html.contains("<span class=\"change same\">no change</span>"));
    assert!(!html.contains("class=\"worse\""));
}

#[test]
fn the_gate_is_named() {
    let mut r = RunReport::new(
        settings(&["direct"], 10, 1),
        vec![scenario("direct", &[Duration::from_micros(90); 10])],
    );
    r.gate(
        &[Check::parse("errors==0").expect("check")],
        &[crate::report::FindingKind::NagleDelayedAck],
        false,
    );
    assert_eq!(r.gate.describe(), "1 check, --fail-on nagle_delayed_ack");
    r.gate(&[], &[], true);
    assert_eq!(r.gate.describe(), "--fail-on any");
    r.gate(&[], &[], false);
    assert!(r.gate.is_empty());
    assert!(render_html(&r).contains("NO GATE"));
    assert_eq!(r.result, GateResult::NotGated);
    assert!(!r.failed);
    let text = render_run_text(&r);
    assert!(text.contains("\nGate: none asked (no --check, no --fail-on, no --fail-on-worse)\n"));
    assert!(text.contains("Result: not gated"), "{text}");
    assert!(!text.contains("Result: passed"), "{text}");
    r.gate(&[], &[], true);
    assert!(render_run_text(&r).contains("\nGate: --fail-on any\n"));
}

#[test]
fn a_scenario_named_with_65536_characters_is_cut_in_the_table_not_a_panic() {
    let huge = "w".repeat(65_536);
    let a = scenario(&huge, &[Duration::from_micros(900); 10]);
    let b = scenario("direct", &[Duration::from_micros(800); 10]);
    let r = RunReport::new(settings(&[huge.as_str(), "direct"], 10, 1), vec![a, b]);
    let text = render_run_text(&r);
    let header = text
        .lines()
        .find(|l| l.contains("direct") && l.contains('…'))
        .unwrap_or_else(|| panic!("a header with the cut name:\n{}", &text[..2000]));
    assert!(header.chars().count() < 120, "{header}");
    assert!(header.contains(&format!("{}…", "w".repeat(31))), "{header}");
}

/// The scenario's traced system calls: a few indented lines under its details; a trace that
/// could not happen says why in one line.
#[test]
fn a_traced_scenario_shows_its_system_calls_in_a_few_lines() {
    use crate::syscalls::{fixtures::asyncio_per_line, summarize, Trace, TraceStatus};
    let mut s = scenario("direct", &[Duration::from_micros(900); 40]);
    s.syscalls = Some(summarize(&asyncio_per_line(40, 14), Some(40)));
    let mut plain = scenario("proxy", &[Duration::from_micros(900); 40]);
    plain.syscalls = Some(summarize(
        &Trace::not_traced(TraceStatus::Unavailable {
            reason: "ptrace refused (kernel.yama.ptrace_scope = 3)".into(),
        }),
        Some(40),
    ));
    let text = render_run_text(&RunReport::new(
        settings(&["direct", "proxy"], 40, 1),
        vec![s, plain],
    ));
    assert!(
        text.contains(
            "\n   syscalls: traced from its start, 647 trapped calls in 15 ms (1 process, "
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "     127.0.0.1:8000 ↔ 127.0.0.1:51000 (pid 4242 fd 7): sendto 560, recvfrom 41, \
             close 1, setsockopt(TCP_NODELAY) 1; writes per response: p50 14, p90 14, max 14 \
             over 40 responses; TCP_NODELAY set to 1 10 µs into the traced window"
        ),
        "{text}"
    );
    assert!(
        text.contains("   syscalls: not traced — ptrace refused (kernel.yama.ptrace_scope = 3)\n"),
        "{text}"
    );
    let direct = text.split("-- direct").nth(1).expect("details");
    let block = direct.split("-- proxy").next().expect("details");
    let shown = block
        .lines()
        .filter(|l| l.starts_with("   syscalls") || l.starts_with("     "))
        .count();
    assert_eq!(shown, 5, "a few lines, not a dump: {text}");
}

#[test]
fn the_tracing_cost_is_said_only_when_it_is_a_tenth_of_an_exchange_or_more() {
    use crate::syscalls::{summarize, Trace, TraceStatus};
    let mut t = summarize(&Trace::not_traced(TraceStatus::Traced), Some(100));
    t.requests = Some(100);
    // 30 ms of tracer time over 100 requests: 300 µs each.
    t.overhead.tracer_ms = 30.0;
    let said = crate::run::text::tracing_cost(&t, 0.9).expect("a third of a 0.9 ms exchange");
    assert!(said.contains("300 µs"), "{said}");
    assert!(said.contains("--no-trace"), "{said}");
    // The same cost against 40 ms exchanges (a Nagle stall) changes nothing worth saying.
    assert!(crate::run::text::tracing_cost(&t, 40.0).is_none());
    t.requests = None;
    assert!(crate::run::text::tracing_cost(&t, 0.9).is_none());
}
