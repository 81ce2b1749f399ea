use super::builder::*;
use crate::inspect::{diagnose, ProcessObservation};
use crate::report::{Finding, FindingKind, Severity};

/// A server answering one request every 10 ms for 3 s (300 data segments each way).
fn served(cpu_ms: u64, voluntary: u64) -> ProcessObservation {
    let mut p = process(vec![
        listener(3),
        SocketBuilder::accepted(5, 40000)
            .options(|o| o.nodelay = Some(true))
            .traffic(301, 10, 1, 14, 1, |_, _| {})
            .build(),
    ]);
    p.last = Some(counters(3000, cpu_ms, voluntary));
    p
}

fn busy(p: ProcessObservation) -> Vec<Finding> {
    diagnose(observation(vec![p]))
        .findings
        .into_iter()
        .filter(|f| f.kind == FindingKind::BusyPoll)
        .collect()
}

#[test]
fn a_process_spinning_between_requests_is_named() {
    // 97% of a core for 600 data segments (budget 60 ms), sleeping once per request.
    let f = busy(served(2900, 300));
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.server, "127.0.0.1:7000");
    assert_eq!(f.example_flow.id, 3, "the listener");
    assert_eq!(f.evidence.counts["data_segments"], 600);
    assert_eq!(f.evidence.values["budget_ms"], 60.0);
    assert!(
        f.evidence.facts[0].contains("97% of one core"),
        "{}",
        f.evidence.facts[0]
    );
    assert!(f.evidence.rests_on[0].contains("CPU clock"));
    assert_eq!(f.evidence.values["kernel_share"], 0.8);
    assert!(f
        .evidence
        .facts
        .iter()
        .any(|x| x.contains("ioctl and epoll")));
    assert_eq!(f.time_lost_ms, 2840.0);
}

#[test]
fn a_third_of_a_core_is_a_warning() {
    let f = busy(served(1000, 300));
    assert_eq!(f[0].severity, Severity::Warning);
}

#[test]
fn an_idle_process_with_little_cpu_is_not_busy() {
    assert!(busy(served(30, 300)).is_empty());
    // Idle sockets, some CPU, but less than a quarter of a core.
    assert!(busy(served(600, 10)).is_empty());
}

#[test]
fn a_busy_process_with_traffic_to_match_is_not_busy_polling() {
    // A whole core, for 30,000 data segments each way: 48 µs per segment, under the budget.
    let mut p = process(vec![SocketBuilder::accepted(5, 40000)
        .traffic(301, 10, 100, 14, 100, |_, _| {})
        .build()]);
    p.last = Some(counters(3000, 2900, 300));
    assert!(busy(p).is_empty());
}

#[test]
fn a_process_that_sleeps_often_is_not_spinning() {
    // High CPU for its traffic, but it waits for work 100,000 times: 29 µs per wake-up.
    assert!(busy(served(2900, 100_000)).is_empty());
}

#[test]
fn without_counters_at_both_ends_nothing_is_claimed() {
    let mut p = served(2900, 300);
    p.last = None;
    let r = diagnose(observation(vec![p]));
    assert!(r.findings.iter().all(|f| f.kind != FindingKind::BusyPoll));
    assert!(r.processes[0].cpu.is_none());
    assert!(r.processes[0]
        .notes
        .iter()
        .any(|n| n.contains("CPU and context switches unknown")));
}

/// The same CPU spent in user space — a process computing between requests (rendering,
/// compressing) — is not a poll loop: nothing names it. Nor can anything be said without the
/// user/system split, or over too few ticks to split.
#[test]
fn computation_in_user_space_or_no_split_is_not_busy_polling() {
    let mut p = served(2900, 300);
    if let Some(c) = p.last.as_mut() {
        c.user_ticks = Some(280);
        c.system_ticks = Some(10);
    }
    assert!(busy(p).is_empty(), "3% in the kernel: computation");
    let mut p = served(2900, 300);
    if let Some(c) = p.last.as_mut() {
        c.system_ticks = None;
    }
    assert!(busy(p).is_empty(), "no split, no claim");
    let mut p = served(2900, 300);
    if let Some(c) = p.last.as_mut() {
        c.user_ticks = Some(1);
        c.system_ticks = Some(8);
    }
    assert!(busy(p).is_empty(), "9 ticks are too few to split");
}

#[test]
fn threads_that_exited_leave_the_sleeps_unknown_and_no_finding() {
    // The spinner's figures, but threads exited during sampling: their sleeps were lost
    // with them (a thread-per-connection server), so CPU per sleep says nothing.
    let mut p = served(2900, 300);
    assert_eq!(busy(p.clone()).len(), 1, "named when the count is complete");
    p.ctxt_switches_incomplete = Some("threads exited during sampling: 4 of 6 seen".into());
    assert!(busy(p.clone()).is_empty());
    let r = diagnose(observation(vec![p]));
    assert!(
        r.processes[0]
            .notes
            .iter()
            .any(|n| n.contains("undercounted") && n.contains("4 of 6")),
        "{:?}",
        r.processes[0].notes
    );
}

#[test]
fn connections_that_came_and_went_leave_the_traffic_a_lower_bound_and_no_finding() {
    // Connect-per-request: a connection opened and closed during sampling, others never seen.
    let mut p = served(2900, 300);
    let gone = |at_ms: u64| {
        let mut s = SocketBuilder::accepted(6, 40001)
            .options(|o| o.nodelay = Some(true))
            .traffic(3, 10, 1, 14, 1, |_, s| s.at_ns += at_ms * MS)
            .build();
        s.closed = true;
        s
    };
    // Open from the first sample and closed: not churn, the spinner is still named.
    let mut seen_whole = p.clone();
    seen_whole.sockets.push(gone(0));
    assert_eq!(busy(seen_whole).len(), 1);
    p.sockets.push(gone(1000));
    assert!(busy(p.clone()).is_empty());
    let r = diagnose(observation(vec![p]));
    assert!(
        r.processes[0]
            .notes
            .iter()
            .any(|n| n.contains("lower bound")),
        "{:?}",
        r.processes[0].notes
    );
}
