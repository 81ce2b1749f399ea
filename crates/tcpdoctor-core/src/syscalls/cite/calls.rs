//! What one end's calls show without the capture: the writes per message, TCP_NODELAY's
//! history, and messages written in several calls before a read.
//!
//! A *message* is the run of write-family calls (result > 0) on one socket up to the next
//! read-family call on it that returned data: a response on a server's socket, a request on a
//! client's — the same grouping as the `syscalls` block's writes per response
//! ([`crate::syscalls::summary`], definition 2). Pipelined messages written between the same
//! two reads count as one; a read that found nothing (`EAGAIN`: a non-blocking program looks
//! before it waits) or the end of the stream does not end a message.

use std::time::Duration;

use crate::syscalls::sockopt::{IPPROTO_TCP, TCP_NODELAY};
use crate::syscalls::{Call, Trace};
use crate::time::Timestamp;
use crate::units::{fmt_count, fmt_duration};

/// The calls on `sockets`, in the trace's order, with their index in [`Trace::calls`].
fn on<'a>(trace: &'a Trace, sockets: &'a [u32]) -> impl Iterator<Item = (usize, &'a Call)> {
    trace
        .calls
        .iter()
        .enumerate()
        .filter(|(_, c)| c.socket.is_some_and(|s| sockets.contains(&s)))
}

/// One message: the write calls (indices into [`Trace::calls`]) between two reads, and the
/// read that followed it, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    pub writes: Vec<usize>,
    pub read_after: Option<usize>,
}

/// The messages written on `socket` (one socket: messages of two sockets do not interleave),
/// through any of its descriptors (a program that reads on one `dup` and writes on another).
pub fn messages(trace: &Trace, socket: u32) -> Vec<Message> {
    let mut out = Vec::new();
    let mut cur: Vec<usize> = Vec::new();
    let one = trace.same_socket(socket);
    for (i, c) in on(trace, &one) {
        if c.kind.writes() && c.ret > 0 {
            cur.push(i);
        } else if c.kind.reads() && c.ret > 0 && !cur.is_empty() {
            // The first read after the writes that brought data: the answer.
            out.push(Message {
                writes: std::mem::take(&mut cur),
                read_after: Some(i),
            });
        }
    }
    if !cur.is_empty() {
        out.push(Message {
            writes: cur,
            read_after: None,
        });
    }
    out
}

/// Write calls per message over `sockets` (each socket once, whichever descriptors name it).
pub fn writes_per_message(trace: &Trace, sockets: &[u32]) -> Vec<u32> {
    let mut once: Vec<u32> = sockets.iter().map(|&s| trace.canonical(s)).collect();
    once.sort_unstable();
    once.dedup();
    once.iter()
        .flat_map(|&s| messages(trace, s))
        .map(|m| m.writes.len() as u32)
        .collect()
}

/// A `setsockopt(IPPROTO_TCP, TCP_NODELAY, v)` that succeeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodelaySet {
    pub socket: u32,
    pub at: Timestamp,
    pub on: bool,
}

/// Every successful TCP_NODELAY setting on `sockets`, in order: those made before the window
/// ([`Trace::setup`]: a listener's options are set at start-up) first. An option belongs to
/// the socket, not the descriptor: a setting through any descriptor of it counts, and is
/// recorded against the socket's first descriptor ([`Trace::canonical`]).
pub fn nodelay_history(trace: &Trace, sockets: &[u32]) -> Vec<NodelaySet> {
    let wanted: Vec<u32> = sockets.iter().map(|&s| trace.canonical(s)).collect();
    trace
        .setup
        .iter()
        .chain(trace.calls.iter())
        .filter(|c| {
            c.socket
                .is_some_and(|s| wanted.contains(&trace.canonical(s)))
        })
        .filter(|c| {
            c.kind == crate::syscalls::CallKind::Setsockopt
                && c.ret == 0
                && c.sockopt() == (IPPROTO_TCP, TCP_NODELAY)
        })
        .filter_map(|c| {
            Some(NodelaySet {
                socket: trace.canonical(c.socket?),
                at: c.at,
                on: c.value != 0,
            })
        })
        .collect()
}

/// Whether TCP_NODELAY was on for `socket` at `t`: its own last setting before `t`, else the
/// listener's as it stood when the socket was accepted (Linux copies the listener's setting
/// into the new socket once; a later change on the listener does not reach it).
pub fn nodelay_at(
    trace: &Trace,
    history: &[NodelaySet],
    socket: u32,
    listeners: &[u32],
    t: Timestamp,
) -> bool {
    let before = |s: u32, t: Timestamp| {
        let s = trace.canonical(s);
        history
            .iter()
            .rev()
            .find(|h| h.socket == s && h.at <= t)
            .map(|h| h.on)
    };
    let accepted = trace
        .sockets
        .get(socket as usize)
        .map_or(t, |s| s.first_seen.min(t));
    before(socket, t)
        .or_else(|| listeners.iter().find_map(|&l| before(l, accepted)))
        .unwrap_or(false)
}

/// "write(… 120 bytes) then write(… 35 bytes) 12 µs later; read() returned the first bytes of
/// the answer 41.2 ms after the last write". The time is from the last write's entry to the
/// end of the read that returned data: how long the program went without its answer, however
/// it waited for it (blocked in `read()`, or in a wait the tracer does not trap and then a
/// `read()` that returned at once).
pub fn describe_message(trace: &Trace, m: &Message) -> String {
    let call = |i: usize| {
        let c = &trace.calls[i];
        format!(
            "{}(… {} bytes)",
            c.kind.name(),
            fmt_count(c.ret.max(0) as u64)
        )
    };
    let mut out = String::new();
    for (k, &i) in m.writes.iter().enumerate() {
        if k == 0 {
            out.push_str(&call(i));
        } else {
            let gap = trace.calls[i].at.since(trace.calls[m.writes[k - 1]].at);
            out.push_str(&format!(" then {} {} later", call(i), fmt_duration(gap)));
        }
    }
    if let (Some(r), Some(&last)) = (m.read_after, m.writes.last()) {
        let c = &trace.calls[r];
        let done = c.at.plus(Duration::from_nanos(c.took_ns));
        out.push_str(&format!(
            "; {}() returned the first bytes of the answer {} after the last write",
            c.kind.name(),
            fmt_duration(done.since(trace.calls[last].at))
        ));
    }
    out
}
