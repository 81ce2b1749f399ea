//! `busy_poll`: the server burns CPU per request far above what the exchange needs, while the
//! packets look normal — a send loop spinning on the socket queue, or a poll loop without a
//! timeout (PHYSICS §6). Packets cannot show it; process accounting can, so this finding
//! exists only for live runs.
//!
//! Rule, per scenario:
//! 1. At least [`MIN_EXCHANGES`] exchanges and [`MIN_CPU`] of server CPU time (below that the
//!    tick-based accounting of /proc is too coarse to say anything).
//! 2. Server CPU per request is at least [`FACTOR`] × the floor and at least
//!    [`MIN_PER_REQUEST_US`]. The floor is the same exchange's cost on a healthy peer: the
//!    fixed twin's server when there is one, else the driver's own CPU per request (it does
//!    the same syscalls per exchange as a server that sleeps until data arrives).
//! 3. Critical when the server kept a core at least [`CRITICAL_BUSY`] busy.

use std::time::Duration;

use super::ServerCpu;
use crate::flow::Direction;
use crate::report::{Evidence, Finding, FindingKind, FlowRef, Severity};
use crate::stats::round3;

pub const MIN_EXCHANGES: u64 = 20;
pub const MIN_CPU: Duration = Duration::from_millis(50);
pub const FACTOR: f64 = 10.0;
pub const MIN_PER_REQUEST_US: f64 = 200.0;
pub const CRITICAL_BUSY: f64 = 0.5;

/// What the rule needs.
#[derive(Clone, Debug)]
pub struct BusyPollInput<'a> {
    /// The scenario's server endpoint (`127.0.0.1:6379`).
    pub server: &'a str,
    /// The capture the scenario was diagnosed from, or a description of the source.
    pub file: &'a str,
    pub cpu: ServerCpu,
    pub exchanges: u64,
    /// CPU per request of the healthy reference, microseconds, and what it is.
    pub floor_us: f64,
    pub floor_of: &'a str,
    /// How `cpu` was read (which counters, of which processes, over which interval).
    pub cpu_counters: &'a str,
    /// How the floor was read.
    pub floor_counters: &'a str,
    /// Mean exchange latency, ms.
    pub mean_ms: f64,
}

/// The finding, when the rule holds.
pub fn busy_poll(i: &BusyPollInput) -> Option<Finding> {
    let cpu_s = i.cpu.user_s + i.cpu.system_s;
    if i.exchanges < MIN_EXCHANGES || cpu_s < MIN_CPU.as_secs_f64() {
        return None;
    }
    let per = i.cpu.per_request_us;
    let floor = i.floor_us.max(1.0);
    if per < MIN_PER_REQUEST_US || per < FACTOR * floor {
        return None;
    }
    let factor = per / floor;
    let severity = if i.cpu.busy_share >= CRITICAL_BUSY {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let wasted_s = cpu_s - floor * i.exchanges as f64 / 1e6;
    let mut facts = vec![
        format!(
            "the server used {per:.0} µs of CPU per request, {factor:.0}× {} ({floor:.0} µs)",
            i.floor_of
        ),
        format!(
            "{:.3} s of CPU ({:.3} s user, {:.3} s system) in {:.3} s of wall time: {:.0}% of \
             one core, for {} exchanges of {:.3} ms mean",
            cpu_s,
            i.cpu.user_s,
            i.cpu.system_s,
            i.cpu.wall_s,
            i.cpu.busy_share * 100.0,
            i.exchanges,
            i.mean_ms
        ),
        "the packets show nothing unusual: the time goes into the process, not the network"
            .to_string(),
    ];
    if i.cpu.system_s > i.cpu.user_s {
        facts.push(
            "most of it is system time: the loop is making syscalls (polling the socket, \
             reading its queue) rather than computing"
                .to_string(),
        );
    }
    let mut evidence = Evidence {
        facts,
        rests_on: vec![
            format!("server CPU: {}", i.cpu_counters),
            format!("{}: {}", i.floor_of, i.floor_counters),
            "exchanges: the driver's count of completed exchanges in the scenario".to_string(),
        ],
        ..Evidence::default()
    };
    evidence.counts.insert("exchanges".into(), i.exchanges);
    evidence
        .values
        .insert("cpu_per_request_us".into(), round3(per));
    evidence
        .values
        .insert("floor_per_request_us".into(), round3(floor));
    evidence
        .values
        .insert("busy_share".into(), i.cpu.busy_share);
    evidence.values.insert("user_s".into(), i.cpu.user_s);
    evidence.values.insert("system_s".into(), i.cpu.system_s);
    Some(Finding {
        kind: FindingKind::BusyPoll,
        severity,
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
            "the server spends {per:.0} µs of CPU per request, {factor:.0}× what the exchange \
             needs, while the packets look normal: a loop is spinning"
        ),
        time_lost_ms: round3(wasted_s.max(0.0) * 1000.0),
        evidence,
        fix: "wait for the socket instead of polling it: block in epoll/poll/select for \
              writability (EPOLLOUT) when the send buffer is full, `await writer.drain()` in \
              asyncio, never spin on SIOCOUTQ or a non-blocking send that returns EAGAIN; give \
              event loops a timeout instead of 0"
            .to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(per_req_us: f64, busy: f64, floor: f64) -> BusyPollInput<'static> {
        let exchanges = 100;
        let cpu_s = per_req_us * exchanges as f64 / 1e6;
        BusyPollInput {
            server: "127.0.0.1:7000",
            file: "run/busy.pcap",
            cpu: ServerCpu::new(
                cpu_s * 0.3,
                cpu_s * 0.7,
                cpu_s / busy.max(0.001),
                exchanges,
                1,
            ),
            exchanges,
            floor_us: floor,
            floor_of: "the driver's own",
            cpu_counters: "utime + stime of the test's process",
            floor_counters: "getrusage of the test",
            mean_ms: 5.0,
        }
    }

    #[test]
    fn a_spinning_server_is_named() {
        let f = busy_poll(&input(9000.0, 0.95, 30.0)).expect("finding");
        assert_eq!(f.kind, FindingKind::BusyPoll);
        assert_eq!(f.severity, Severity::Critical);
        assert!(f.verdict.contains("300×"), "{}", f.verdict);
        assert!(f.evidence.facts.iter().any(|x| x.contains("system time")));
        // No packet shows it: it names the counters it read instead of frames.
        assert!(f.evidence.frames.is_empty());
        assert_eq!(f.evidence.rests_on.len(), 3, "{:?}", f.evidence.rests_on);
        assert!(f.evidence.rests_on[0].contains("utime + stime"));
        assert!(f.evidence.rests_on[1].contains("getrusage"));
        assert!(
            f.time_lost_ms > 800.0 && f.time_lost_ms < 900.0,
            "{}",
            f.time_lost_ms
        );
    }

    #[test]
    fn a_sleeping_server_is_not() {
        assert!(busy_poll(&input(25.0, 0.05, 30.0)).is_none());
        // Far above the floor but cheap in absolute terms: nothing worth naming.
        assert!(busy_poll(&input(150.0, 0.2, 5.0)).is_none());
        // Costly but so is the reference: the work itself is heavy.
        assert!(busy_poll(&input(900.0, 0.9, 400.0)).is_none());
    }

    #[test]
    fn too_little_evidence_says_nothing() {
        let mut i = input(9000.0, 0.95, 30.0);
        i.exchanges = 5;
        assert!(busy_poll(&i).is_none());
        let mut i = input(400.0, 0.95, 10.0);
        i.cpu = ServerCpu::new(0.01, 0.01, 0.02, 100, 1);
        assert!(busy_poll(&i).is_none());
    }
}
