//! `busy_poll`: the server burns CPU *while it waits* — a loop polling its send queue
//! (`SIOCOUTQ`) until the peer's ACK empties it, a non-blocking `send`/`recv` retried on
//! `EAGAIN`, an event loop called with a zero timeout (PHYSICS §6, and §9 "A spinner spins
//! only while it waits"). The packets look normal; the process accounting does not, so this
//! finding exists only for live runs, where `run` samples the server's CPU along the driver's
//! timeline ([`CpuSamples`]).
//!
//! CPU per request alone cannot tell a spinner from a server that works: a JIT warming up, a
//! cold cache, a garbage collection or timer wake-ups also cost CPU per request. What only a
//! spinner does is burn a core while it has nothing to do — no request whose answer it has not
//! begun, and no bytes on their way to the driver (between exchanges, or while the rest of an
//! answer waits in its socket for an ACK) — without sleeping, and keep doing so to the end of
//! the run. A busy server's CPU is spent
//! while a request is in hand; a warm-up's is front-loaded and decays; a timer-driven server
//! sleeps between wake-ups.
//!
//! Rule, per scenario:
//! 0. What counts as waiting: time between exchanges (no request out), and time in the middle
//!    of an answer (its first bytes arrived, its rest not yet) only when the capture shows
//!    the rest of the answers held in the server's socket for the client's ACK (a
//!    `nagle_delayed_ack` or `nagle_round_trip` finding on the server's responses: Nagle, or
//!    the program itself waiting for the ACK), and then only each gap whose last
//!    [`super::cpu_samples::GAP_END`] intervals the server was awake for at least
//!    [`MIN_AWAKE_SHARE`] of: a spinner spins until the ACK lets the rest go, while a server
//!    that computed the rest, wrote it (Nagle then held it) and went back to `read` is asleep
//!    when the gap ends. A server that sends a header and then computes the rest is working in
//!    that gap, and the driver's clock alone cannot tell the two: without such a hold, or
//!    asleep at the gap's end, the gap counts for nothing.
//! 1. Enough to judge: at least [`MIN_EXCHANGES`] exchanges, and at least [`MIN_WAITING`] of
//!    sampled waiting time (1 ms intervals with no change; a closed loop whose exchanges
//!    follow each other within an interval leaves no such time, and then nothing is said).
//! 2. While waiting, the server's threads were awake — on a CPU or ready to run and waiting
//!    for one — at least [`MIN_AWAKE_SHARE`] of the time, in the first half of that time *and*
//!    in the second. A loop that polls instead of sleeping is always awake: on the CPU
//!    whenever the scheduler lets it, and in the run queue otherwise, so the figure stays
//!    near 100 % however busy the machine is (its CPU share alone measured 75–95 % on an idle
//!    2-core machine and 35–50 % while other work shared it). A server that sleeps until its
//!    socket is ready is awake a few % of that time (measured: Node.js 0–13 %, a JVM 0–6 %,
//!    CPython asyncio writing rows on 1 ms timers 3–10 % of CPU). Both halves: a spinner spins
//!    for every exchange to the end of the run, while a warm-up (JIT compiler threads, GC) is
//!    front-loaded and decays.
//! 3. It did not sleep while it burnt that CPU: at least [`MIN_CPU_PER_SLEEP`] of waiting CPU
//!    per voluntary context switch of its threads over the run (switches counted over the
//!    whole run, so a server sleeping during its work only lowers the figure). A timer-driven
//!    or event-driven server gives up the CPU at the end of each wake-up: it cannot stay
//!    awake longer per sleep than its timer's period, 1 ms for the finest common timers
//!    (measured: 10–110 µs per switch for Node.js, a JVM and asyncio); a spinner runs for the
//!    whole wait, a delayed ACK's 40 ms (measured: 28–77 ms per switch). Preemption by other
//!    work is an involuntary switch and does not count.
//! 4. Worth naming: at least [`MIN_SPIN_PER_REQUEST`] of waiting CPU per exchange (what
//!    `inspect` allows for the whole protocol work of a segment). Only sampled waiting time is
//!    counted, so this is a lower bound of the spin.
//! 5. In system calls: at least [`MIN_SYSCALL_SHARE`] of the server's CPU over the scenario
//!    was system time, read over at least [`MIN_CPU_FOR_SHARE`] of CPU (below that the
//!    accounting's ticks cannot split it, and there is no finding). A loop polling its socket
//!    lives in system calls — `ioctl(SIOCOUTQ)`, `epoll_wait` with a zero timeout, `recv`
//!    returning EAGAIN (PHYSICS §6) — even in an interpreter (measured: CPython's SIOCOUTQ
//!    loop 26–28 % system time, the specimen's 82 %); a server computing in user space runs
//!    at a few % (measured: CPython computing each answer's rest, 1–2 %). This is what tells
//!    a spinner from a server whose computing happens to end just as a held gap ends (under
//!    CPU contention its computing stretches to the ACK). A loop spinning in user space (on
//!    a flag in memory) is not named: a missing finding, never a wrong one.
//! 6. Critical when the server kept at least [`CRITICAL_BUSY`] of a core busy over the run.
//! 7. Traced: when the server's system calls were traced for the scenario, the trace decides
//!    in place of rules 2–5 ([`crate::syscalls::polling`]: a *poll* is a call that found
//!    nothing changed — `ioctl(SIOCOUTQ)` with the queue non-empty, a zero-timeout wait that
//!    returned 0, `EAGAIN` —, counted when repeated on its sockets (4 in a row on a thread,
//!    no progress between), and a poller makes at least 20 per request, an event loop a few):
//!    - it shows a polling mechanism: named (with rule 1's exchanges, severity by rule 6),
//!      and the finding says which call, how often and per request ("ioctl(SIOCOUTQ) 48,213
//!      times in 3 s, 161 per request, while its send queue was non-empty");
//!    - it saw every trapped call of the scenario and shows neither polls nor other calls
//!      that made no progress (20 per request of either): not named, whatever the CPU — it went into work, a warm-up, or a loop outside the trapped calls (a
//!      missing finding, never a wrong one); [`withheld_by_trace`] says so when rules 1–5
//!      alone would have named it;
//!    - it can say neither (it ended early, too few requests, many questions that are not
//!      repeated polls of its sockets): rules 1–6 decide.
//!
//!    Rules 2–3 cannot be read under a trace anyway: each trapped call stops the server until
//!    the tracer resumes it, and a stopped thread is neither on a CPU nor ready for one, and
//!    its stop counts as a voluntary context switch — a traced spinner reads as asleep
//!    between its polls.
//!
//! The driver's own CPU per request (what the same exchange costs a client that sleeps until
//! its answer) is quoted in the evidence for scale; the rule does not rest on it.

use std::time::Duration;

use super::cpu_samples::{CpuSamples, Phases};
use super::ServerCpu;
use crate::flow::Direction;
use crate::report::{Evidence, Finding, FindingKind, FlowRef, Severity};
use crate::stats::round3;
use crate::syscalls::TraceVerdict;

pub const MIN_EXCHANGES: u64 = 20;
pub const MIN_WAITING: Duration = Duration::from_millis(20);
pub const MIN_AWAKE_SHARE: f64 = 0.5;
pub const MIN_CPU_PER_SLEEP: Duration = Duration::from_millis(1);
pub const MIN_SPIN_PER_REQUEST: Duration = Duration::from_micros(100);
pub const CRITICAL_BUSY: f64 = 0.5;
pub const MIN_SYSCALL_SHARE: f64 = 0.10;
pub const MIN_CPU_FOR_SHARE: Duration = Duration::from_millis(50);

/// What the rule needs.
#[derive(Clone, Debug)]
pub struct BusyPollInput<'a> {
    /// The scenario's server endpoint (`127.0.0.1:6379`).
    pub server: &'a str,
    /// The capture the scenario was diagnosed from, or a description of the source.
    pub file: &'a str,
    /// The server's CPU over the scenario.
    pub cpu: ServerCpu,
    /// The server's CPU sampled along the driver's timeline.
    pub samples: &'a CpuSamples,
    /// The capture shows the rest of the server's answers held for the client's ACK (rule 0):
    /// the time in the middle of an answer is waiting time.
    pub held_for_ack: bool,
    pub exchanges: u64,
    /// The driver's own CPU per request, microseconds, and what it is (for scale).
    pub floor_us: f64,
    pub floor_of: &'a str,
    /// How `cpu` was read (which counters, of which processes, over which interval).
    pub cpu_counters: &'a str,
    /// How the floor was read.
    pub floor_counters: &'a str,
    /// Mean exchange latency, ms.
    pub mean_ms: f64,
    /// What the trace of the server's system calls over the scenario says about polling
    /// (`syscalls::verdict`), when the server was traced and the trace can say (rule 7).
    pub trace: Option<&'a TraceVerdict>,
}

/// The measurements the rule compares, named where the rule holds or not.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    pub phases: Phases,
    /// Waiting CPU per voluntary context switch, µs (None: switches unknown; infinite
    /// when there were none).
    pub cpu_per_sleep_us: Option<f64>,
    /// Waiting CPU per exchange, µs.
    pub spin_per_request_us: f64,
}

/// Rule 1–4's figures.
pub fn measure(i: &BusyPollInput) -> Measured {
    let phases = i.samples.phases(i.held_for_ack, MIN_AWAKE_SHARE);
    let wait_us = phases.waiting.cpu_ns as f64 / 1e3;
    Measured {
        phases,
        cpu_per_sleep_us: i.samples.voluntary_switches.map(|n| {
            if n == 0 {
                f64::INFINITY
            } else {
                wait_us / n as f64
            }
        }),
        spin_per_request_us: wait_us / i.exchanges.max(1) as f64,
    }
}

/// The finding, when the rule holds.
pub fn busy_poll(i: &BusyPollInput) -> Option<Finding> {
    match i.trace {
        Some(TraceVerdict::Polling(poll)) => {
            (i.exchanges >= MIN_EXCHANGES).then(|| traced::finding(i, &measure(i), poll))
        }
        Some(TraceVerdict::RealWork(_)) => None,
        None => by_cpu(i),
    }
}

/// Rule 7's second case in words: the CPU alone (rules 1–5) would have named the server, and
/// the trace, which saw every call, shows it did not poll. `None` otherwise.
pub fn withheld_by_trace(i: &BusyPollInput) -> Option<String> {
    let Some(TraceVerdict::RealWork(w)) = i.trace else {
        return None;
    };
    by_cpu(i).map(|f| {
        format!(
            "busy_poll not named: by its CPU alone the server looked like a spinner ({}), but \
             {}",
            f.verdict, w.sentence
        )
    })
}

/// Rules 1–6, from the CPU alone.
fn by_cpu(i: &BusyPollInput) -> Option<Finding> {
    let m = measure(i);
    let p = &m.phases;
    let enough = i.exchanges >= MIN_EXCHANGES
        && p.waiting.wall_ns >= MIN_WAITING.as_nanos() as u64
        && p.waiting_halves.iter().all(|h| h.wall_ns > 0);
    if !enough
        || p.waiting_halves
            .iter()
            .any(|h| h.awake_share() < MIN_AWAKE_SHARE)
        || m.cpu_per_sleep_us? < MIN_CPU_PER_SLEEP.as_nanos() as f64 / 1e3
        || m.spin_per_request_us < MIN_SPIN_PER_REQUEST.as_nanos() as f64 / 1e3
        || !in_system_calls(&i.cpu)
    {
        return None;
    }
    Some(finding(i, &m, severity(&i.cpu)))
}

/// Rule 5: enough CPU to split, and enough of it in the kernel.
fn in_system_calls(cpu: &ServerCpu) -> bool {
    let total = cpu.user_s + cpu.system_s;
    total >= MIN_CPU_FOR_SHARE.as_secs_f64() && cpu.system_s >= MIN_SYSCALL_SHARE * total
}

pub(super) fn pct(x: f64) -> String {
    format!("{:.0}%", x * 100.0)
}

fn ms(ns: u64) -> String {
    format!("{:.0} ms", ns as f64 / 1e6)
}

fn finding(i: &BusyPollInput, m: &Measured, severity: Severity) -> Finding {
    let p = &m.phases;
    let cpu_s = i.cpu.user_s + i.cpu.system_s;
    let per = i.cpu.per_request_us;
    let spin = m.spin_per_request_us;
    let switches = i.samples.voluntary_switches.unwrap_or(0);
    let per_sleep = m.cpu_per_sleep_us.unwrap_or(f64::INFINITY);
    let mut facts = vec![
        format!(
            "while it owed the driver nothing (no request whose answer it had not begun, no \
             bytes arriving) the server was awake (on a CPU or ready for one) {} of the time — \
             {} in the first half of that time, {} in the second ({} sampled) — and used {} of \
             a core, against {} while it had a request in hand ({} sampled)",
            pct(p.waiting.awake_share()),
            pct(p.waiting_halves[0].awake_share()),
            pct(p.waiting_halves[1].awake_share()),
            ms(p.waiting.wall_ns),
            pct(p.waiting.share()),
            pct(p.working.share()),
            ms(p.working.wall_ns),
        ),
        format!(
            "{per:.0} µs of CPU per request, at least {spin:.0} µs of it while waiting; {:.1} \
             voluntary context switches per request, {}: it did not sleep while it waited",
            switches as f64 / i.exchanges.max(1) as f64,
            if per_sleep.is_finite() {
                format!("{per_sleep:.0} µs of waiting CPU per switch")
            } else {
                "no switch at all".to_string()
            }
        ),
        format!(
            "{:.3} s of CPU ({:.3} s user, {:.3} s system) in {:.3} s of wall time: {} of one \
             core, for {} exchanges of {:.3} ms mean; {} was {:.0} µs per request",
            cpu_s,
            i.cpu.user_s,
            i.cpu.system_s,
            i.cpu.wall_s,
            pct(i.cpu.busy_share),
            i.exchanges,
            i.mean_ms,
            i.floor_of,
            i.floor_us
        ),
        if i.held_for_ack {
            "the waiting time includes the middle of answers: the capture shows their rest held \
             in the server's socket for the client's ACK (see nagle_delayed_ack), and the server \
             burnt CPU for as long as that hold lasted"
                .to_string()
        } else {
            "the waiting time is between exchanges only (no answer was held for an ACK in the \
             capture, so the middle of an answer, where a server may still be computing, is not \
             counted)"
                .to_string()
        },
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
            format!("server CPU along the run: {}", i.samples.counters),
            format!("server CPU over the scenario: {}", i.cpu_counters),
            format!("{}: {}", i.floor_of, i.floor_counters),
            "exchanges: the driver's count of completed exchanges in the scenario".to_string(),
        ],
        ..Evidence::default()
    };
    evidence.counts.insert("exchanges".into(), i.exchanges);
    evidence
        .counts
        .insert("voluntary_switches".into(), switches);
    let v = &mut evidence.values;
    v.insert("cpu_per_request_us".into(), round3(per));
    v.insert("waiting_cpu_per_request_us".into(), round3(spin));
    v.insert("waiting_share".into(), round3(p.waiting.share()));
    v.insert(
        "waiting_awake_share".into(),
        round3(p.waiting.awake_share()),
    );
    v.insert(
        "waiting_first_half_awake_share".into(),
        round3(p.waiting_halves[0].awake_share()),
    );
    v.insert(
        "waiting_second_half_awake_share".into(),
        round3(p.waiting_halves[1].awake_share()),
    );
    v.insert("working_share".into(), round3(p.working.share()));
    v.insert(
        "waiting_sampled_ms".into(),
        round3(p.waiting.wall_ns as f64 / 1e6),
    );
    v.insert(
        "working_sampled_ms".into(),
        round3(p.working.wall_ns as f64 / 1e6),
    );
    if per_sleep.is_finite() {
        v.insert("waiting_cpu_per_switch_us".into(), round3(per_sleep));
    }
    v.insert("floor_per_request_us".into(), round3(i.floor_us));
    v.insert("busy_share".into(), i.cpu.busy_share);
    v.insert("user_s".into(), i.cpu.user_s);
    v.insert("system_s".into(), i.cpu.system_s);
    Finding {
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
            "the server stays awake while it waits for nothing ({} of that time, {} of a core; \
             at least {spin:.0} µs of CPU per request), without sleeping, to the end of the \
             run: a loop is spinning",
            pct(p.waiting.awake_share()),
            pct(p.waiting.share())
        ),
        // CPU burnt while waiting: the cost is a core, not latency; several spinning threads
        // cannot burn more than the waiting time's wall clock in this figure.
        time_lost_ms: round3(p.waiting.cpu_ns.min(p.waiting.wall_ns) as f64 / 1e6),
        evidence,
        fix: FIX.to_string(),
    }
}

pub(super) const FIX: &str = "wait for the socket instead of polling it: block in \
    epoll/poll/select for writability (EPOLLOUT) when the send buffer is full, `await \
    writer.drain()` in asyncio, never spin on SIOCOUTQ or a non-blocking send that returns \
    EAGAIN; give event loops a timeout instead of 0";

/// Rule 6.
pub(super) fn severity(cpu: &ServerCpu) -> Severity {
    if cpu.busy_share >= CRITICAL_BUSY {
        Severity::Critical
    } else {
        Severity::Warning
    }
}

#[path = "busy_poll_traced.rs"]
mod traced;

#[cfg(test)]
#[path = "busy_poll_tests.rs"]
mod tests;
