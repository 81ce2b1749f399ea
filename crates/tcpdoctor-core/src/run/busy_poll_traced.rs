//! `busy_poll` rule 7's finding: the trace of the server's system calls names the loop.

use super::{pct, severity, BusyPollInput, Measured, FIX};
use crate::flow::Direction;
use crate::report::{Evidence, Finding, FindingKind, FlowRef};
use crate::stats::round3;
use crate::syscalls::PollingMechanism;

pub(super) fn finding(i: &BusyPollInput, m: &Measured, poll: &PollingMechanism) -> Finding {
    let cpu_s = i.cpu.user_s + i.cpu.system_s;
    let mut facts = vec![format!(
        "the server's system calls, traced: {}",
        poll.sentence
    )];
    facts.extend(poll.others.iter().map(|o| format!("and {o}")));
    facts.push(format!(
        "each of those calls asked the kernel whether anything had changed and heard no; a \
         server that waits for its socket asks a few times per request (an event loop's \
         zero-timeout wait, the EAGAIN that ends a drain), this one {} times",
        crate::numfmt::num(poll.polls_per_request)
    ));
    facts.push(format!(
        "{:.3} s of CPU ({:.3} s user, {:.3} s system) in {:.3} s of wall time: {} of one \
         core, {:.0} µs per request, for {} exchanges of {:.3} ms mean; {} was {:.0} µs per \
         request",
        cpu_s,
        i.cpu.user_s,
        i.cpu.system_s,
        i.cpu.wall_s,
        pct(i.cpu.busy_share),
        i.cpu.per_request_us,
        i.exchanges,
        i.mean_ms,
        i.floor_of,
        i.floor_us
    ));
    facts.push(
        "the trace stops the server at each of these calls, so its CPU and context switches \
         read lower than untraced (a stopped thread is not awake, and each stop is a switch): \
         the finding rests on the calls, the CPU is quoted for scale"
            .to_string(),
    );
    let mut evidence = Evidence {
        facts,
        rests_on: vec![
            "system calls of the server's processes, traced over the scenario: the calls that \
             found nothing changed (ioctl(SIOCOUTQ) with the send queue non-empty, \
             zero-timeout waits that returned 0, EAGAIN), counted"
                .to_string(),
            format!("server CPU over the scenario: {}", i.cpu_counters),
            "exchanges: the driver's count of completed exchanges in the scenario".to_string(),
        ],
        ..Evidence::default()
    };
    evidence.counts.insert("exchanges".into(), i.exchanges);
    evidence.counts.insert("polls".into(), poll.polls);
    evidence.counts.insert("mechanism_calls".into(), poll.calls);
    let v = &mut evidence.values;
    v.insert("polls_per_request".into(), poll.polls_per_request);
    v.insert("mechanism_per_request".into(), poll.per_request);
    v.insert("cpu_per_request_us".into(), round3(i.cpu.per_request_us));
    v.insert("busy_share".into(), i.cpu.busy_share);
    v.insert("user_s".into(), i.cpu.user_s);
    v.insert("system_s".into(), i.cpu.system_s);
    v.insert("floor_per_request_us".into(), round3(i.floor_us));
    let p = &m.phases;
    Finding {
        kind: FindingKind::BusyPoll,
        severity: severity(&i.cpu),
        file: i.file.to_string(),
        server: i.server.to_string(),
        direction: Direction::ServerToClient,
        flows_affected: 0,
        flows_total: 0,
        example_flow: FlowRef {
            id: 0,
            client: String::new(),
            server: i.server.to_string(),
        },
        verdict: format!(
            "the server polls its socket instead of waiting for it: {}",
            poll.sentence
        ),
        time_lost_ms: round3(p.waiting.cpu_ns.min(p.waiting.wall_ns) as f64 / 1e6),
        evidence,
        fix: FIX.to_string(),
    }
}
