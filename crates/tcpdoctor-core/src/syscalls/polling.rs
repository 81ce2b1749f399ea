//! Does the trace show a program polling its sockets — asking the kernel the same question
//! again and again and hearing "nothing changed" — or a program whose CPU went into work?
//! `busy_poll` rests on this when the server was traced (PHYSICS §6, §9 "A spinner spins
//! only while it waits").
//!
//! Rule, over one traced window and the requests served in it:
//! 1. A *poll* is a call that asked and found nothing changed:
//!    - `ioctl(SIOCOUTQ)` (or `SIOCOUTQNSD`) that found the send queue non-empty (the value it
//!      wrote back > 0): "has the peer acknowledged everything?" — not yet;
//!    - `ioctl(FIONREAD)` that found 0 bytes readable;
//!    - a readiness wait (`epoll_wait`, `poll`, `select`) with a zero timeout that returned 0;
//!    - a read-family call that failed with `EAGAIN` (nothing to read), a write-family call
//!      that failed with `EAGAIN` (send buffer full).
//!
//!    A call that moved bytes is not a poll however many there are (one `write()` per line is
//!    `fragmented_writes`, not spinning), nor a wait that slept (timeout ≠ 0: a timer loop
//!    gives the CPU up).
//! 2. A poll counts only when it is *repeated*: in a run of at least [`MIN_RUN`] polls of one
//!    thread with no *progress* between them (a call that moved bytes, an `accept` or
//!    `connect` that returned, a `close` or `shutdown`; other calls — a socket option, a wait
//!    that found something — neither count nor end a run), and, but for the zero-timeout
//!    waits (which watch every descriptor of the loop), on a TCP socket the tracer resolved.
//!    Why: the waits that block are not trapped (the filter stops only zero-timeout ones), so
//!    an event loop's lone `EAGAIN` — the one that ends an edge-triggered drain, the one that
//!    stops a write when the send buffer fills — is followed by a wait the trace does not see,
//!    then by progress. A server streaming a large response to a slow reader, or draining a
//!    large upload, makes one such `EAGAIN` per buffer, which can be dozens per request, and
//!    sleeps between them; a poller asks again at once, and keeps asking until the answer
//!    changes (hundreds in a row for a delayed ACK). One turn of an event loop asks each
//!    question at most once per descriptor — drain, write, zero-timeout wait: three in a row
//!    — so [`MIN_RUN`] is four. Polls on a pipe, a file or a Unix socket are not "its socket"
//!    and are not counted here (rule 5 still sees them).
//! 3. Polling: at least [`MIN_POLLS_PER_REQUEST`] counted polls per request, and at least
//!    [`MIN_POLLS`] in all. Why 20: a blocking or event-driven server asks at most a few such
//!    questions per request — the `EAGAIN` that ends an edge-triggered drain of its socket, a
//!    zero-timeout wait before the loop blocks. Measured under `strace -f` with 200 requests
//!    of a 14-line reply: CPython asyncio 0.04 polls per request (8 zero-timeout waits, no
//!    `EAGAIN`), Node.js `net` 1.0 (one `epoll_pwait(…, 0) = 0` per turn of libuv's loop). A
//!    poller asks for as long as it waits, one call every few µs untraced and every ~160 µs
//!    under `strace -f --seccomp-bpf`, which prints each (measured: the CPython spinner of
//!    `testdata/servers/siocoutq_spinner.py`, each request waiting ~40 ms for the delayed
//!    ACK, found its send queue non-empty 269 times per request). 20 polls per request is
//!    five times what an event loop asks, and means at least 20 polls' time per request
//!    spent asking: ~0.1 ms untraced, ~3 ms under strace — a wait for a delayed ACK (40 ms)
//!    is far beyond either, and a spinner that only ever waits less costs little and is not
//!    named. [`MIN_POLLS`] (ten requests at the threshold)
//!    keeps a burst at start-up (a connect retried on `EAGAIN`) from being named.
//! 4. The mechanism named is the label with the most counted polls (`ioctl(SIOCOUTQ)`,
//!    `epoll_wait(timeout 0)=0`, `recvfrom=EAGAIN`); the others are quoted with their counts.
//! 5. Real work, the converse ([`real_work`]): the trace saw every trapped call of the window
//!    (traced or attached, its window at least [`MIN_COVERAGE`] of the scenario's wall time),
//!    and both its polls of every kind (rule 1, on any descriptor, alone or repeated) and its
//!    calls that made no progress and did not sleep (rule 1's polls, and any other question —
//!    a `getsockopt(TCP_INFO)` or an `ioctl` asked in a loop), each counting every call the
//!    tracer dropped as if it were one, stay below [`MIN_POLLS_PER_REQUEST`] per request.
//!    Whatever CPU the program burnt did not go into asking the kernel through these calls:
//!    `busy_poll` must not be named from its CPU alone. (A loop spinning in user space, or on
//!    a call outside the trapped set, is then not named: a missing finding, never a wrong
//!    one.) Between rules 3 and 5 — many questions, but not repeated polls of a socket — the
//!    trace says nothing and the CPU decides.
//! 6. Otherwise (not traced, a trace that ended early, too few requests) the trace says
//!    nothing ([`verdict`] is `None`) and `busy_poll` judges from the CPU alone.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::Serialize;

use super::labels::{empty_zero_wait, errno, is_wait};
use super::{ioctl, Call, CallKind, Trace, TraceStatus};
use crate::numfmt::{dur_ms, num};
use crate::stats::round3;
use crate::units::fmt_count;

pub const MIN_POLLS_PER_REQUEST: f64 = 20.0;
pub const MIN_RUN: u64 = 4;
pub const MIN_POLLS: u64 = 200;
pub const MIN_COVERAGE: f64 = 0.9;

/// What kind of "nothing changed" a poll heard (rule 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Poll {
    SendQueue,
    ReadQueue,
    ZeroWait,
    ReadAgain,
    WriteAgain,
}

fn poll_of(c: &Call) -> Option<Poll> {
    let again = c.errno() == Some(errno::EAGAIN);
    match c.kind {
        CallKind::Ioctl if c.ret == 0 => match c.arg as u64 {
            ioctl::SIOCOUTQ | ioctl::SIOCOUTQNSD if c.value > 0 => Some(Poll::SendQueue),
            ioctl::SIOCINQ if c.value == 0 => Some(Poll::ReadQueue),
            _ => None,
        },
        _ if empty_zero_wait(c) => Some(Poll::ZeroWait),
        k if k.reads() && again => Some(Poll::ReadAgain),
        k if k.writes() && again => Some(Poll::WriteAgain),
        _ => None,
    }
}

/// The trace shows a program polling (rule 3): the mechanism, with its numbers.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PollingMechanism {
    /// The dominant mechanism's label, as in the counts: `ioctl(SIOCOUTQ)`,
    /// `epoll_wait(timeout 0)=0`, `recvfrom=EAGAIN`, `sendto=EAGAIN`, `ioctl(FIONREAD)`.
    pub label: String,
    /// Its polls (calls that found nothing changed).
    pub calls: u64,
    pub per_request: f64,
    /// Polls of every mechanism.
    pub polls: u64,
    pub polls_per_request: f64,
    pub requests: u64,
    pub wall_s: f64,
    /// "ioctl(SIOCOUTQ) 48,213 times in 3 s, 161 per request, while its send queue was
    /// non-empty".
    pub sentence: String,
    /// The other mechanisms' sentences, most polls first.
    pub others: Vec<String>,
}

/// The trace covered the window and shows no polling (rule 5).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RealWork {
    /// Trapped calls in the window (kept and dropped).
    pub calls: u64,
    pub calls_per_request: f64,
    /// Polls, plus the dropped calls counted as polls.
    pub polls: u64,
    pub polls_per_request: f64,
    pub requests: u64,
    pub sentence: String,
}

/// What the trace says about polling, when it says anything.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum TraceVerdict {
    Polling(PollingMechanism),
    RealWork(RealWork),
}

impl TraceVerdict {
    pub fn sentence(&self) -> &str {
        match self {
            TraceVerdict::Polling(m) => &m.sentence,
            TraceVerdict::RealWork(w) => &w.sentence,
        }
    }
}

fn recorded(status: &TraceStatus) -> bool {
    matches!(status, TraceStatus::Traced | TraceStatus::Attached)
}

/// A call that ends a run of polls (rule 2): it moved bytes, or a connection began or ended.
fn progress(c: &Call) -> bool {
    match c.kind {
        k if k.reads() || k.writes() => c.ret > 0,
        CallKind::Accept | CallKind::Connect => c.ret >= 0,
        CallKind::Close | CallKind::Shutdown => true,
        _ => false,
    }
}

/// A poll rule 2 may count: on a resolved TCP socket, or a zero-timeout wait.
fn on_its_socket(c: &Call) -> bool {
    c.socket.is_some() || empty_zero_wait(c)
}

/// Polls by mechanism and call name, most first: rule 2's repeated polls of its sockets
/// (`repeated`), or every poll (rule 5).
fn count_polls(trace: &Trace, repeated: bool) -> Vec<((Poll, CallKind), u64)> {
    let mut by: BTreeMap<(Poll, CallKind), u64> = BTreeMap::new();
    if repeated {
        // The current run of each thread: its polls so far.
        let mut runs: BTreeMap<u32, Vec<(Poll, CallKind)>> = BTreeMap::new();
        let close = |run: &mut Vec<(Poll, CallKind)>, by: &mut BTreeMap<_, u64>| {
            if run.len() as u64 >= MIN_RUN {
                for &p in run.iter() {
                    *by.entry(p).or_default() += 1;
                }
            }
            run.clear();
        };
        for c in &trace.calls {
            let run = runs.entry(c.tid).or_default();
            match poll_of(c) {
                Some(p) if on_its_socket(c) => run.push((p, c.kind)),
                _ if progress(c) => close(run, &mut by),
                _ => {}
            }
        }
        for run in runs.values_mut() {
            close(run, &mut by);
        }
    } else {
        for c in &trace.calls {
            if let Some(p) = poll_of(c) {
                *by.entry((p, c.kind)).or_default() += 1;
            }
        }
    }
    let mut v: Vec<_> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v
}

/// Calls that made no progress and did not sleep (rule 5): polls, and any other question.
fn questions(trace: &Trace) -> u64 {
    let sleeps = |c: &Call| is_wait(c.kind) && c.arg != 0;
    trace
        .calls
        .iter()
        .filter(|c| !progress(c) && !sleeps(c))
        .filter(|c| c.kind != CallKind::Setsockopt && c.kind != CallKind::Socket)
        .count() as u64
}

fn label_of(p: Poll, k: CallKind) -> String {
    match p {
        Poll::SendQueue => "ioctl(SIOCOUTQ)".to_string(),
        Poll::ReadQueue => "ioctl(FIONREAD)".to_string(),
        Poll::ZeroWait => format!("{}(timeout 0)=0", k.name()),
        Poll::ReadAgain | Poll::WriteAgain => format!("{}=EAGAIN", k.name()),
    }
}

fn sentence(p: Poll, k: CallKind, n: u64, wall: Duration, requests: u64) -> String {
    let times = format!(
        "{} times in {}, {} per request",
        fmt_count(n),
        dur_ms(wall.as_secs_f64() * 1e3),
        per_request(n as f64 / requests.max(1) as f64)
    );
    match p {
        Poll::SendQueue => format!("ioctl(SIOCOUTQ) {times}, while its send queue was non-empty"),
        Poll::ReadQueue => format!("ioctl(FIONREAD) found nothing to read {times}"),
        Poll::ZeroWait => format!("{} with timeout 0 returned nothing {times}", k.name()),
        Poll::ReadAgain => format!("{} returned EAGAIN (nothing to read) {times}", k.name()),
        Poll::WriteAgain => {
            format!("{} returned EAGAIN (send buffer full) {times}", k.name())
        }
    }
}

/// A rate per request as a person reads it: `161`, `2.1`, `1,600`.
fn per_request(x: f64) -> String {
    if x >= 1000.0 {
        fmt_count(x.round() as u64)
    } else {
        num(x)
    }
}

/// Rules 1–4: the dominant polling mechanism of `trace`, over `requests` requests served in
/// `wall`, when the program polled.
pub fn polling(trace: &Trace, requests: u64, wall: Duration) -> Option<PollingMechanism> {
    if !recorded(&trace.status) || requests == 0 {
        return None;
    }
    let polls = count_polls(trace, true);
    let total: u64 = polls.iter().map(|p| p.1).sum();
    let per = |n: u64| round3(n as f64 / requests as f64);
    if total < MIN_POLLS || per(total) < MIN_POLLS_PER_REQUEST {
        return None;
    }
    let ((p, k), n) = polls[0];
    Some(PollingMechanism {
        label: label_of(p, k),
        calls: n,
        per_request: per(n),
        polls: total,
        polls_per_request: per(total),
        requests,
        wall_s: round3(wall.as_secs_f64()),
        sentence: sentence(p, k, n, wall, requests),
        others: polls[1..]
            .iter()
            .map(|&((p, k), n)| sentence(p, k, n, wall, requests))
            .collect(),
    })
}

/// Rule 5: the trace covered the `wall` time of the `requests` and shows no polling.
pub fn real_work(trace: &Trace, requests: u64, wall: Duration) -> Option<RealWork> {
    let window = trace.ended.since(trace.started);
    if !recorded(&trace.status)
        || requests == 0
        || window.as_secs_f64() < MIN_COVERAGE * wall.as_secs_f64()
    {
        return None;
    }
    let polls = count_polls(trace, false).iter().map(|p| p.1).sum::<u64>() + trace.dropped;
    let per = |n: u64| round3(n as f64 / requests as f64);
    if per(polls) >= MIN_POLLS_PER_REQUEST
        || per(questions(trace) + trace.dropped) >= MIN_POLLS_PER_REQUEST
    {
        return None;
    }
    let calls = trace.calls.len() as u64 + trace.dropped;
    Some(RealWork {
        calls,
        calls_per_request: per(calls),
        polls,
        polls_per_request: per(polls),
        requests,
        sentence: format!(
            "the trace saw every trapped call for {} ({} calls, {} per request): {} of them \
             polls that found nothing changed, {} per request (a poller makes at least {}): \
             the CPU did not go into polling its sockets",
            dur_ms(window.as_secs_f64() * 1e3),
            fmt_count(calls),
            per_request(per(calls)),
            fmt_count(polls),
            per_request(per(polls)),
            MIN_POLLS_PER_REQUEST
        ),
    })
}

/// Rules 3 and 5 together: what the trace says about polling, or `None` (rule 6).
pub fn verdict(trace: &Trace, requests: u64, wall: Duration) -> Option<TraceVerdict> {
    polling(trace, requests, wall)
        .map(TraceVerdict::Polling)
        .or_else(|| real_work(trace, requests, wall).map(TraceVerdict::RealWork))
}

#[cfg(test)]
#[path = "polling_tests.rs"]
mod tests;
