//! The `syscalls` block of a scenario (and of `inspect --trace`): what was traced and at what
//! cost, and per traced TCP socket what the program asked of it, counted the way `strace -c`
//! counts (see [`super::labels`]).
//!
//! Definitions:
//! 1. Counts are per TCP socket for the calls on its descriptor, and per process for the
//!    rest: readiness waits (`epoll_wait`, `poll`, `select` wait on many descriptors, not on
//!    one socket) and calls on descriptors that are not TCP sockets (pipes, files, UDP).
//!    A socket with no call counted (seen, never used while traced) is left out; a listener
//!    is kept with its `accept` counts.
//! 2. Writes per response: the successful write-family calls (result > 0) on a socket
//!    between two reads that returned data. A read returning > 0 bytes after at least one
//!    write closes the group; the writes after the last read form the last group. On a
//!    server's socket a group is a response; on a client's socket the same count is writes
//!    per request (its writes come before the reads). With pipelining several requests share
//!    a group, so the figure is an upper bound of writes per message.
//! 3. TCP_NODELAY: the last successful `setsockopt(IPPROTO_TCP, TCP_NODELAY)` on the socket
//!    (its value and when, ms after the traced window began); an accepted socket whose listener had
//!    it on when `accept` returned inherits it (Linux copies the listener's Nagle setting),
//!    and says so. Settings made before the window ([`Trace::setup`]: at start-up, or in an
//!    earlier window of the same trace — a listener's options are usually set before `listen`)
//!    count too, without a time (`before_window`). Never set means Nagle stayed on — for the
//!    part of the socket's life the trace saw (a socket opened before the trace started may
//!    have set it earlier).
//! 4. SIOCOUTQ: the `ioctl(SIOCOUTQ)` calls on the socket and how many found the send queue
//!    non-empty (bytes not yet acknowledged by the peer).
//! 5. Processes: those of the window — still running at its end, or with a call in it. The
//!    trace keeps every process it followed (a `run` server's start-up shims — pyenv's bash,
//!    `readlink` — ended before the first scenario); one that ended without a trapped call in
//!    the window is not this window's.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::labels::{label, outcome_label};
use super::polling::{verdict, TraceVerdict};
use super::{ioctl, sockopt, CallKind, Trace, TraceStatus};
use crate::report::Distribution;
use crate::stats::{round3, SizeCounter};
use crate::time::Timestamp;

/// What a trace shows, for JSON and text.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SyscallsReport {
    /// `{"state": "traced"}`, …, `{"state": "unavailable", "reason": "…"}`.
    pub status: TraceStatus,
    /// The traced window, seconds.
    pub window_s: f64,
    pub overhead: Overhead,
    /// Calls beyond the tracer's cap: counted in `overhead.traced_calls`, not in the counts.
    pub dropped: u64,
    /// Requests served in the window, when known (`run`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requests: Option<u64>,
    pub processes: Vec<ProcessCalls>,
    pub sockets: Vec<SocketCalls>,
    /// Whether the trace shows polling (`syscalls::polling`), when `requests` is known and
    /// the trace can say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub polling: Option<TraceVerdict>,
}

/// The cost of tracing, as the tracer measured it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Overhead {
    /// Calls that stopped the program (each an entry and an exit stop).
    pub traced_calls: u64,
    /// Time the tracer spent on those stops: the program was stopped at least that long.
    pub tracer_ms: f64,
    /// `tracer_ms` per traced call, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_call_us: Option<f64>,
}

/// A traced process and its calls on no TCP socket (definition 1).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessCalls {
    pub pid: u32,
    pub name: String,
    pub threads: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    pub counts: BTreeMap<String, u64>,
}

/// One traced TCP socket.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SocketCalls {
    pub pid: u32,
    pub fd: i32,
    /// Other descriptors of the same socket (a `dup`), counted here with `fd`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub other_fds: Vec<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub local: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote: Option<String>,
    /// The trace saw the connection start in this window: its counts begin with its first
    /// byte ([`super::Trace::from_start_in_window`]).
    pub from_start: bool,
    /// `accept` (a server's socket) or `connect` (a client's), when the trace saw it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opened_by: Option<&'static str>,
    pub counts: BTreeMap<String, u64>,
    /// Successful write-family calls and the bytes they wrote.
    pub writes: u64,
    pub bytes_written: u64,
    /// Read-family calls that returned data, and the bytes.
    pub reads: u64,
    pub bytes_read: u64,
    /// Definition 2; `count` is the number of responses (requests, on a client's socket).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub writes_per_response: Option<Distribution>,
    pub nodelay: NoDelay,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub siocoutq: Option<QueuePolls>,
}

/// Definition 3.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NoDelay {
    /// The program set TCP_NODELAY on this socket (or its listener, for an accepted one).
    pub set: bool,
    /// The value in force after the last set (non-zero: Nagle off).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<i64>,
    /// When it was set, ms after the traced window began (in `run`, the scenario's start).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<f64>,
    /// Successful `setsockopt(TCP_NODELAY)` calls on this socket.
    pub calls: u64,
    /// Inherited from the listener it was accepted from (set there, not here).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_listener: bool,
    /// Set before the traced window began (at start-up, or in an earlier window): no time.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub before_window: bool,
}

/// Definition 4.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct QueuePolls {
    pub calls: u64,
    /// …that found bytes not yet acknowledged.
    pub non_empty: u64,
}

/// Per socket, while walking the calls.
#[derive(Default)]
struct Acc {
    counts: BTreeMap<String, u64>,
    writes: u64,
    bytes_written: u64,
    reads: u64,
    bytes_read: u64,
    group: u64,
    groups: SizeCounter,
    nodelay: NoDelay,
    /// When TCP_NODELAY was set, and to what (for inheritance by accepted sockets).
    nodelay_history: Vec<(Timestamp, i64)>,
    outq: QueuePolls,
    opened_by: Option<&'static str>,
}

fn bump(counts: &mut BTreeMap<String, u64>, c: &super::Call) {
    *counts.entry(label(c)).or_default() += 1;
    if let Some(o) = outcome_label(c) {
        *counts.entry(o).or_default() += 1;
    }
}

/// The `syscalls` block of `trace`; `requests` served in its window when known.
pub fn summarize(trace: &Trace, requests: Option<u64>) -> SyscallsReport {
    let window = trace.ended.since(trace.started);
    let ms_after = |t: Timestamp| round3(t.since(trace.started).as_secs_f64() * 1e3);
    let mut socks: Vec<Acc> = trace.sockets.iter().map(|_| Acc::default()).collect();
    // Descriptors of one socket (a dup: a reader and a writer of one connection) are counted
    // as the socket they are, under its first descriptor: a read on one ends the response
    // the other was writing, and an option set through one is the socket's.
    let canon: Vec<usize> = (0..trace.sockets.len() as u32)
        .map(|i| trace.canonical(i) as usize)
        .collect();
    let at = |i: u32| canon.get(i as usize).copied();
    let mut procs: BTreeMap<u32, BTreeMap<String, u64>> = BTreeMap::new();
    // Accepted sockets: (listener, the accept's index in the calls).
    let mut accepted: Vec<(usize, usize)> = Vec::new();
    // Definition 3: what was set before the window still holds (and is inherited).
    for c in &trace.setup {
        let Some(a) = c.socket.and_then(at).and_then(|i| socks.get_mut(i)) else {
            continue;
        };
        if c.kind == CallKind::Setsockopt
            && c.ret == 0
            && c.sockopt() == (sockopt::IPPROTO_TCP, sockopt::TCP_NODELAY)
        {
            a.nodelay = NoDelay {
                set: true,
                value: Some(c.value),
                at_ms: None,
                calls: 0,
                from_listener: false,
                before_window: true,
            };
            a.nodelay_history.push((c.at, c.value));
        }
    }
    for (k, c) in trace.calls.iter().enumerate() {
        let Some(i) = c.socket.and_then(at) else {
            bump(procs.entry(c.pid).or_default(), c);
            continue;
        };
        let a = &mut socks[i];
        bump(&mut a.counts, c);
        match c.kind {
            k if k.writes() && c.ret > 0 => {
                a.writes += 1;
                a.bytes_written += c.ret as u64;
                a.group += 1;
            }
            k if k.reads() && c.ret > 0 => {
                a.reads += 1;
                a.bytes_read += c.ret as u64;
                if a.group > 0 {
                    a.groups.record(a.group.min(u32::MAX as u64) as u32);
                    a.group = 0;
                }
            }
            CallKind::Setsockopt
                if c.ret == 0 && c.sockopt() == (sockopt::IPPROTO_TCP, sockopt::TCP_NODELAY) =>
            {
                a.nodelay = NoDelay {
                    set: true,
                    value: Some(c.value),
                    at_ms: Some(ms_after(c.at)),
                    calls: a.nodelay.calls + 1,
                    from_listener: false,
                    before_window: false,
                };
                a.nodelay_history.push((c.at, c.value));
            }
            CallKind::Ioctl if c.arg as u64 == ioctl::SIOCOUTQ => {
                a.outq.calls += 1;
                a.outq.non_empty += u64::from(c.ret == 0 && c.value > 0);
            }
            CallKind::Accept if c.ret >= 0 => accepted.push((i, k)),
            CallKind::Connect => a.opened_by = Some("connect"),
            _ => {}
        }
    }
    inherit_nodelay(trace, &mut socks, &accepted);
    let whole = trace.from_start_in_window();
    let sockets = trace
        .sockets
        .iter()
        .enumerate()
        .zip(socks)
        .filter(|(_, a)| !a.counts.is_empty())
        .map(|((i, s), mut a)| {
            if a.group > 0 {
                a.groups.record(a.group.min(u32::MAX as u64) as u32);
            }
            let same = trace.same_socket(i as u32);
            SocketCalls {
                pid: s.pid,
                fd: s.fd,
                other_fds: same
                    .iter()
                    .filter(|&&j| j as usize != i)
                    .map(|&j| trace.sockets[j as usize].fd)
                    .collect(),
                local: s.local.map(|x| x.to_string()),
                remote: s.remote.map(|x| x.to_string()),
                from_start: same.iter().any(|&j| whole[j as usize]),
                opened_by: a.opened_by,
                counts: a.counts,
                writes: a.writes,
                bytes_written: a.bytes_written,
                reads: a.reads,
                bytes_read: a.bytes_read,
                writes_per_response: (a.groups.total() > 0).then(|| a.groups.distribution()),
                nodelay: a.nodelay,
                siocoutq: (a.outq.calls > 0).then_some(a.outq),
            }
        })
        .collect();
    // Definition 5: the processes of this window.
    let active: std::collections::BTreeSet<u32> = trace.calls.iter().map(|c| c.pid).collect();
    let mut processes: Vec<ProcessCalls> = trace
        .processes
        .iter()
        .filter(|p| p.ended.is_none() || active.contains(&p.pid))
        .map(|p| ProcessCalls {
            pid: p.pid,
            name: p.name.clone(),
            threads: p.threads,
            ended: p.ended.clone(),
            counts: procs.remove(&p.pid).unwrap_or_default(),
        })
        .collect();
    // Calls of a process the tracer did not describe still count.
    processes.extend(procs.into_iter().map(|(pid, counts)| ProcessCalls {
        pid,
        name: String::new(),
        threads: 0,
        ended: None,
        counts,
    }));
    SyscallsReport {
        status: trace.status.clone(),
        window_s: round3(window.as_secs_f64()),
        overhead: Overhead {
            traced_calls: trace.traced_calls,
            tracer_ms: round3(trace.tracer_ns as f64 / 1e6),
            per_call_us: (trace.traced_calls > 0)
                .then(|| round3(trace.tracer_ns as f64 / 1e3 / trace.traced_calls as f64)),
        },
        dropped: trace.dropped,
        requests,
        processes,
        sockets,
        polling: requests.and_then(|r| verdict(trace, r, window)),
    }
}

/// Definition 3's inheritance: an accepted socket never set itself takes its listener's
/// setting as it stood when `accept` returned.
fn inherit_nodelay(trace: &Trace, socks: &mut [Acc], accepted: &[(usize, usize)]) {
    for &(listener, k) in accepted {
        let Some(child) = accepted_socket(trace, k).map(|c| trace.canonical(c as u32) as usize)
        else {
            continue;
        };
        socks[child].opened_by = Some("accept");
        let at = trace.calls[k].at;
        let on_listener = socks[listener]
            .nodelay_history
            .iter()
            .rev()
            .find(|(t, _)| *t <= at)
            .map(|(_, v)| *v);
        let a = &mut socks[child];
        if let (Some(value), false) = (on_listener, a.nodelay.calls > 0) {
            a.nodelay = NoDelay {
                set: true,
                value: Some(value),
                at_ms: None,
                calls: 0,
                from_listener: true,
                before_window: false,
            };
        }
    }
}

/// The socket the `accept` at `trace.calls[k]` returned: the one the next call of that process
/// on the returned descriptor was on, or else the first socket of that descriptor the tracer
/// resolved after the accept began.
fn accepted_socket(trace: &Trace, k: usize) -> Option<usize> {
    let c = &trace.calls[k];
    let fd = c.ret;
    trace.calls[k + 1..]
        .iter()
        .find(|n| n.pid == c.pid && i64::from(n.fd) == fd && n.socket.is_some())
        .and_then(|n| n.socket.map(|i| i as usize))
        .filter(|&i| i < trace.sockets.len())
        .or_else(|| {
            trace
                .sockets
                .iter()
                .position(|s| s.pid == c.pid && i64::from(s.fd) == fd && s.first_seen >= c.at)
        })
}

/// The traced window as a duration (for callers that have no other wall clock).
pub fn window(trace: &Trace) -> Duration {
    trace.ended.since(trace.started)
}

#[cfg(test)]
#[path = "summary_tests.rs"]
mod tests;
