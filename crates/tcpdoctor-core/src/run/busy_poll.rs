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
//!    the same syscalls per exchange as a server that sleeps until data arrives) — at most
//!    [`FLOOR_CAP_US`], `inspect`'s generous budget for the protocol work of a segment: the
//!    driver's figure is its whole process (`getrusage`), which in `run` also holds the
//!    capture thread and the hop, and a busy machine inflates it; a floor above what any
//!    exchange needs would hide a spinning server behind the driver's own noise. When the cap
//!    is the floor, the server's CPU must also be at least [`MIN_KERNEL_SHARE`] system time
//!    (a loop of system calls, PHYSICS §6), so that a server computing between requests is
//!    not named for the driver's noise.
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
pub const MIN_KERNEL_SHARE: f64 = crate::inspect::busy_poll::MIN_KERNEL_SHARE;
pub const FLOOR_CAP_US: f64 = crate::inspect::busy_poll::BUDGET_PER_SEGMENT_NS as f64 / 1000.0;

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
    let floor = i.floor_us.clamp(1.0, FLOOR_CAP_US);
    if i.floor_us > FLOOR_CAP_US && i.cpu.system_s < MIN_KERNEL_SHARE * cpu_s {
        return None;
    }
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
        if i.floor_us > FLOOR_CAP_US {
            format!(
                "the server used {per:.0} µs of CPU per request, {factor:.0}× {floor:.0} µs (\
                 {} was {:.0} µs, above the {FLOOR_CAP_US:.0} µs any exchange's protocol work \
                 needs: the cap is the floor)",
                i.floor_of, i.floor_us
            )
        } else {
            format!(
                "the server used {per:.0} µs of CPU per request, {factor:.0}× {} ({floor:.0} µs)",
                i.floor_of
            )
        },
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

    /// A driver measured above any exchange's need (its process also holds run's capture
    /// thread, or the machine is busy) does not hide a spinning server: the floor is capped.
    /// With the cap as the floor, only a server whose CPU is mostly in system calls is named.
    #[test]
    fn an_inflated_driver_floor_is_capped() {
        let f = busy_poll(&input(1400.0, 0.27, 180.0)).expect("capped floor: named");
        assert!(f.verdict.contains("14×"), "{}", f.verdict);
        assert!(
            f.evidence.facts[0].contains("was 180 µs"),
            "{}",
            f.evidence.facts[0]
        );
        let mut computing = input(1400.0, 0.27, 180.0);
        computing.cpu.system_s = computing.cpu.user_s * 0.1;
        assert!(
            busy_poll(&computing).is_none(),
            "user-space work: not named"
        );
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
