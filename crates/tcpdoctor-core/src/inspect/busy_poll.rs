//! `busy_poll` from a live process: it burns CPU far above what its TCP traffic needs, and it
//! rarely sleeps — a loop polling its sockets instead of waiting for them (PHYSICS §6).
//!
//! `run`'s rule ([`crate::run::busy_poll`]) compares with a driver doing the same exchanges.
//! `inspect` has no driver, so the floor comes from the traffic itself:
//!
//! 1. **Enough to judge**: at least [`MIN_CPU_NS`] of CPU over the interval
//!    (the process's CPU clock, nanoseconds, exited threads included; the threads'
//!    `/proc/PID/task/*/schedstat` only where that clock cannot be read) and at least
//!    [`MIN_CPU_SHARE`] of one core:
//!    below that the waste is not worth a finding.
//! 2. **Far above the traffic's need**: the process's CPU is at least [`FACTOR`] × the
//!    traffic's budget, [`BUDGET_PER_SEGMENT_NS`] per data segment its TCP sockets received or
//!    sent in the interval. The kernel's TCP send or receive path and one read or write
//!    syscall cost a few µs per segment; an interpreted handler (Python asyncio serves tens of
//!    thousands of small requests per second per core) a few tens of µs. 100 µs per segment is
//!    generous, and 10× it — 1 ms of CPU per data segment — is more than any request/response
//!    server spends on protocol work. A process that computes that much per message (image
//!    rendering, compression of large bodies) is named too: the facts say how much per
//!    segment, so a person can tell. A loop spinning less than 1 ms per segment is not named:
//!    without a driver, that much CPU cannot be told from real work.
//! 3. **Mostly runnable**: at least [`MIN_CPU_PER_SLEEP_NS`] of CPU per voluntary context
//!    switch. A process that waits for its sockets sleeps in `epoll_wait`/`read` once per
//!    batch of work and runs tens of µs per wake-up; a spinning loop hardly ever sleeps.
//!    The switches are summed over the threads alive when read, while the CPU clock keeps the
//!    time of threads that exited: when threads exited (or appeared) during sampling
//!    ([`ProcessObservation::ctxt_switches_incomplete`]) the sleeps are undercounted, this
//!    input is unknown, and there is no finding.
//!
//! Nor is there one when connections came and went during sampling (a connection that
//! appeared after the first sample was closed before the end): connections that open and close between two samples are never seen, so the
//! traffic counted is only a lower bound of the work, and rule 2's budget with it. A
//! connect-per-request server is then not judged (the process notes say so).
//! 4. **In system calls**: at least [`MIN_KERNEL_SHARE`] of that CPU time spent in the
//!    kernel (`/proc/PID/stat`'s `stime` against `utime`, over at least
//!    [`MIN_TICKS_FOR_SHARE`](super::summary::MIN_TICKS_FOR_SHARE) ticks). A loop polling
//!    its sockets lives in system calls (`ioctl(SIOCOUTQ)`, `epoll_wait` with a zero timeout,
//!    `recv` returning EAGAIN — PHYSICS §6's signature); a process computing (rendering,
//!    compressing, parsing) runs in user space. Without the split there is no finding: the
//!    two cannot be told apart. A loop spinning in user space (on a flag in memory) is
//!    therefore not named either — a missing finding, never a wrong one.
//! 5. **Critical** when the process kept at least [`CRITICAL_SHARE`] of a core busy.
//!
//! Only TCP traffic of the sockets read is counted: a process that also serves UDP or Unix
//! sockets has work `inspect` does not see (the finding says so). `time_lost_ms` is CPU time,
//! not latency: the process's CPU above the budget.

use super::interval::{flow_ref, process_name, server_of};
use super::summary::CpuSummary;
use super::{ProcessObservation, SocketRole};
use crate::flow::Direction;
use crate::numfmt::{count, dur_ms, num};
use crate::report::{Evidence, Finding, FindingKind, FlowRef, Severity};
use crate::stats::round3;

pub const MIN_CPU_NS: u64 = 50_000_000;
pub const MIN_CPU_SHARE: f64 = 0.25;
pub const BUDGET_PER_SEGMENT_NS: u64 = 100_000;
pub const FACTOR: f64 = 10.0;
pub const MIN_CPU_PER_SLEEP_NS: u64 = 1_000_000;
pub const CRITICAL_SHARE: f64 = 0.5;
pub const MIN_KERNEL_SHARE: f64 = 0.25;

/// Connections came and went during sampling: a connection first seen after the first
/// sample was closed before the end — and those that lived between two samples were not seen
/// at all.
pub fn churned(p: &ProcessObservation) -> bool {
    let Some(start) = p.first.map(|c| c.at_ns) else {
        return false;
    };
    p.sockets.iter().any(|s| {
        s.closed
            && s.role != SocketRole::Listener
            && s.samples.first().is_some_and(|x| x.at_ns > start)
    })
}

pub fn busy_poll(p: &ProcessObservation, cpu: &CpuSummary) -> Option<Finding> {
    let cpu_ns = cpu.cpu_ms * 1e6;
    if cpu_ns < MIN_CPU_NS as f64 || cpu.cpu_share < MIN_CPU_SHARE {
        return None;
    }
    let segments = cpu.data_segs_in + cpu.data_segs_out;
    let budget_ns = segments as f64 * BUDGET_PER_SEGMENT_NS as f64;
    if cpu_ns < FACTOR * budget_ns {
        return None;
    }
    if p.ctxt_switches_incomplete.is_some() || churned(p) {
        return None;
    }
    let per_sleep_ns = cpu_ns / cpu.voluntary_ctxt_switches.max(1) as f64;
    if per_sleep_ns < MIN_CPU_PER_SLEEP_NS as f64 {
        return None;
    }
    let kernel_share = cpu.kernel_share?;
    if kernel_share < MIN_KERNEL_SHARE {
        return None;
    }
    let severity = if cpu.cpu_share >= CRITICAL_SHARE {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let listener = p.sockets.iter().find(|s| s.role == SocketRole::Listener);
    let (server, example_flow) = match listener.or(p.sockets.first()) {
        Some(s) => (server_of(s), flow_ref(s)),
        None => (
            process_name(p),
            FlowRef {
                id: 0,
                client: String::new(),
                server: process_name(p),
            },
        ),
    };
    let per_segment = if segments > 0 {
        format!(
            "{} of CPU per data segment, {}× the budget of {} per segment",
            dur_ms(cpu_ns / segments as f64 / 1e6),
            num(cpu_ns / budget_ns),
            dur_ms(BUDGET_PER_SEGMENT_NS as f64 / 1e6)
        )
    } else {
        "no data segment at all: its TCP sockets sat idle".to_string()
    };
    let mut facts = vec![
        format!(
            "{} of CPU in {} ({:.0}% of one core) for {} in and {} out over {}: {per_segment}",
            dur_ms(cpu.cpu_ms),
            dur_ms(cpu.interval_ms),
            cpu.cpu_share * 100.0,
            count(cpu.data_segs_in, "data segment"),
            count(cpu.data_segs_out, "data segment"),
            count(p.sockets.len() as u64, "TCP socket")
        ),
        format!(
            "it slept {} (voluntary context switches, {} per second): {} of CPU per sleep — a \
             process waiting for its sockets sleeps once per batch of work",
            count(cpu.voluntary_ctxt_switches, "time"),
            num(cpu.voluntary_ctxt_switches_per_s),
            dur_ms(per_sleep_ns / 1e6)
        ),
    ];
    facts.push(format!(
        "{}% of that CPU was spent in the kernel (system time, /proc/PID/stat): a loop of \
         system calls, not computation",
        num(kernel_share * 100.0)
    ));
    if let (Some(r), Some(w)) = (cpu.syscr, cpu.syscw) {
        facts.push(format!(
            "{} read and {} write syscalls in the interval (/proc/PID/io counts only the read \
             and write families: recv/send on a socket are not counted, and ioctl and epoll \
             calls, what a polling loop mostly makes, are not counted there either)",
            crate::units::fmt_count(r),
            crate::units::fmt_count(w)
        ));
    }
    facts.push(
        "only TCP traffic is counted: work on UDP or Unix sockets is not seen here".to_string(),
    );
    let mut evidence = Evidence {
        facts,
        rests_on: vec![
            "process CPU: the process's CPU clock (clock_gettime on clock_getcpuclockid, ns), \
             first and last sample; its user/system split from /proc/PID/stat's ticks"
                .to_string(),
            "context switches: voluntary_ctxt_switches of the live threads, /proc/PID/task/*/status".to_string(),
            format!(
                "traffic: data segments in and out of the process's TCP sockets, {}; {}",
                super::interval::tcp_info_source(p),
                super::interval::sockets_source(p)
            ),
        ],
        ..Evidence::default()
    };
    evidence.counts.insert("data_segments".into(), segments);
    evidence.counts.insert(
        "voluntary_ctxt_switches".into(),
        cpu.voluntary_ctxt_switches,
    );
    let v = &mut evidence.values;
    v.insert("cpu_ms".into(), round3(cpu.cpu_ms));
    v.insert("cpu_share".into(), round3(cpu.cpu_share));
    v.insert("budget_ms".into(), round3(budget_ns / 1e6));
    v.insert("cpu_per_sleep_ms".into(), round3(per_sleep_ns / 1e6));
    v.insert("kernel_share".into(), kernel_share);
    Some(Finding {
        kind: FindingKind::BusyPoll,
        severity,
        file: process_name(p),
        server,
        direction: Direction::ServerToClient,
        flows_affected: 0,
        flows_total: 0,
        example_flow,
        verdict: format!(
            "the process burns {:.0}% of a core while its TCP traffic needs a tenth of that at \
             most and it hardly ever sleeps: a loop is polling instead of waiting",
            cpu.cpu_share * 100.0
        ),
        time_lost_ms: round3(((cpu_ns - budget_ns) / 1e6).max(0.0)),
        evidence,
        fix: "wait for the socket instead of polling it: block in epoll/poll/select for \
              readability or writability (EPOLLOUT) when the send buffer is full, `await \
              writer.drain()` in asyncio, never spin on SIOCOUTQ or a non-blocking call that \
              returns EAGAIN; give event loops a timeout instead of 0"
            .to_string(),
    })
}
