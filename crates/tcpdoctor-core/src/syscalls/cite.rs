//! Findings cite what the program did: the traced calls of the end a finding blames, and
//! which of them produced the frames it quotes.
//!
//! Rules, for each `fragmented_writes` and `nagle_delayed_ack` finding, when the program was
//! traced ([`TraceStatus::Traced`] or [`TraceStatus::Attached`]):
//! 1. The blamed end is the sender of the finding's direction: for server → client, the
//!    traced sockets whose local endpoint is the finding's server (its listener too); for
//!    client → server, those whose remote endpoint is — of those, the ones that wrote bytes
//!    in the window (a readiness probe's connection, or a previous scenario's, is not
//!    counted among "its traced sockets"). No such socket: nothing is added.
//! 2. Writes per message ([`calls::messages`]): the distribution over those sockets, as
//!    `writes_per_response` / `writes_per_request`. A `fragmented_writes` finding whose
//!    sender wrote each message with one call (median 1) is contradicted: the evidence says
//!    so — the pieces were cut by the kernel or a hop, not by the program's writes.
//! 3. TCP_NODELAY: whether the sender ever set it on those sockets (or on the listener,
//!    whose options accepted sockets inherit, as they stood at the accept — settings made
//!    before the window, `Trace::setup`, included; a listener bound to 0.0.0.0 or [::] on the
//!    server's port counts), and when, as time after the trace window began. For a Nagle
//!    stall, whether it was on for the example's socket at the stall: if it
//!    was, Nagle held nothing there, the evidence says so, and, when every socket had it on
//!    before its first write, the finding is reworded as the detectors' own
//!    `reword_for_nodelay` words it.
//! 4. The quoted frames (the example's, from its first quoted frame to its last, in the
//!    finding's direction) are joined to the writes that produced them ([`super::join`]):
//!    "frames 41, 43, 45 carry the bytes of write() calls #7, #8, #9 (…)", retransmissions
//!    apart; the same writes go to [`Evidence::writes`](crate::report::Evidence) for the
//!    HTML timeline. For `fragmented_writes`, the pieces are the program's own writes only
//!    when every segment begins and ends on a call's boundary; a segment carrying part of a
//!    call means the kernel split writes as well (one call in many segments: the program
//!    wrote it whole). For a
//!    Nagle stall, the writes the released frame carried were made either before the
//!    delayed ACK (the kernel held them: Nagle) or after it (the program waited itself).
//! 5. A client that wrote a request in two or more calls and then read (write-write-read)
//!    is named with the calls, their sizes and the gap, on client → server findings.

pub mod calls;
mod example;

use std::net::SocketAddr;

use calls::{describe_message, messages, nodelay_at, nodelay_history, writes_per_message};

use super::join::{endpoint, SocketJoin};
use super::{Trace, TraceStatus};
use crate::flow::Direction;
use crate::report::{Finding, FindingKind};
use crate::stats::SizeCounter;
use crate::units::fmt_duration;
use crate::wire::Endpoint;

/// Adds what `trace` shows to the findings it speaks to (the rules above); `joins` are
/// [`super::join::Joiner::finish`]'s for the same trace and the findings' capture. Returns
/// how many findings gained evidence.
pub fn cite(findings: &mut [Finding], trace: &Trace, joins: &[SocketJoin]) -> usize {
    if !matches!(trace.status, TraceStatus::Traced | TraceStatus::Attached) {
        return 0;
    }
    let mut n = 0;
    for f in findings.iter_mut() {
        let kind = matches!(
            f.kind,
            FindingKind::FragmentedWrites | FindingKind::NagleDelayedAck
        );
        if kind && cite_one(f, trace, joins) {
            n += 1;
        }
    }
    n
}

/// The blamed end's sockets (rule 1).
struct Side {
    data: Vec<u32>,
    listeners: Vec<u32>,
    sender: &'static str,
    what: &'static str,
}

fn remote_known(s: &crate::syscalls::TracedSocket) -> bool {
    s.remote.is_some()
}

fn parse(s: &str) -> Option<Endpoint> {
    s.parse::<SocketAddr>().ok().map(endpoint)
}

/// A listener on `l` accepts connections to `server`: the same endpoint, or the same port on
/// the unspecified address.
fn listens_for(l: Endpoint, server: Endpoint) -> bool {
    l.port == server.port && (l.ip == server.ip || l.ip.is_unspecified())
}

fn side(trace: &Trace, f: &Finding) -> Option<Side> {
    let server = parse(&f.server)?;
    let (mut data, mut listeners) = (Vec::new(), Vec::new());
    // The sender's sockets are those that wrote in this window: a connection of an earlier
    // window (a previous scenario's) or one that carried nothing (a readiness probe that
    // connected and closed) is not one the finding is about.
    let used: std::collections::BTreeSet<u32> = trace
        .calls
        .iter()
        .filter(|c| c.kind.writes() && c.ret > 0)
        .filter_map(|c| c.socket)
        .collect();
    for (i, s) in trace.sockets.iter().enumerate() {
        let i_u32 = i as u32;
        if remote_known(s) && !used.contains(&i_u32) {
            continue;
        }
        let (local, remote) = (s.local.map(endpoint), s.remote.map(endpoint));
        match f.direction {
            Direction::ServerToClient if local == Some(server) && remote.is_some() => {
                data.push(i as u32)
            }
            // A listener bound to every address (0.0.0.0, [::]) on the server's port
            // accepted the server's connections as well.
            Direction::ServerToClient
                if remote.is_none() && local.is_some_and(|l| listens_for(l, server)) =>
            {
                listeners.push(i as u32)
            }
            Direction::ClientToServer if remote == Some(server) => data.push(i as u32),
            _ => {}
        }
    }
    let (sender, what) = match f.direction {
        Direction::ServerToClient => ("server", "response"),
        Direction::ClientToServer => ("client", "request"),
    };
    (!data.is_empty()).then_some(Side {
        data,
        listeners,
        sender,
        what,
    })
}

fn cite_one(f: &mut Finding, trace: &Trace, joins: &[SocketJoin]) -> bool {
    let Some(side) = side(trace, f) else {
        return false;
    };
    writes_per(f, trace, &side);
    let history = nodelay_history(trace, &[side.data.clone(), side.listeners.clone()].concat());
    f.evidence.facts.push(nodelay_fact(trace, &side, &history));
    let example = example_join(f, &side, joins);
    if let Some(j) = example {
        match &j.not_joined {
            Some(why) => f.evidence.facts.push(format!(
                "the example's writes could not be joined to its frames: {why}"
            )),
            None => example::quoted(f, j, trace, &side, &history),
        }
    }
    if f.direction == Direction::ClientToServer {
        write_write_read(f, trace, &side, example);
    }
    let mut rests = format!(
        "the {}'s system calls, traced by tcpdoctor ({} calls{}), joined to the frames by \
         sequence number (bytes written since the connection began ↔ sequence offsets)",
        side.sender,
        crate::units::fmt_count(trace.traced_calls.max(trace.calls.len() as u64)),
        if trace.dropped > 0 {
            format!("; {} beyond its cap not kept", trace.dropped)
        } else {
            String::new()
        }
    );
    if let Some(j) = example {
        for n in &j.notes {
            rests.push_str(&format!("; {n}"));
        }
    }
    f.evidence.rests_on.push(rests);
    true
}

/// Rule 2.
fn writes_per(f: &mut Finding, trace: &Trace, side: &Side) {
    let per = writes_per_message(trace, &side.data);
    if per.is_empty() {
        return;
    }
    let mut c = SizeCounter::default();
    per.iter().for_each(|&v| c.record(v));
    let d = c.distribution();
    let mut names: Vec<&str> = trace
        .calls
        .iter()
        .filter(|c| c.kind.writes() && c.ret > 0)
        .filter(|c| c.socket.is_some_and(|s| side.data.contains(&s)))
        .map(|c| c.kind.name())
        .collect();
    names.sort_unstable();
    names.dedup();
    let (sender, what) = (side.sender, side.what);
    f.evidence.facts.push(format!(
        "the {sender} made {} {}() call{} per {what} (median; p90 {}, max {}) over {} {what}s on \
         {} traced socket{}",
        d.p50,
        names.join("()/"),
        if d.p50 == 1.0 { "" } else { "s" },
        d.p90,
        d.max,
        d.count,
        side.data.len(),
        if side.data.len() == 1 { "" } else { "s" }
    ));
    if f.kind == FindingKind::FragmentedWrites && d.p50 <= 1.0 {
        f.evidence.facts.push(format!(
            "the trace contradicts one write per piece: the {sender} wrote each {what} with one \
             call (median), so the pieces on the wire were cut by the kernel (window, MSS) or \
             a hop, not by the program's writes"
        ));
    }
    f.evidence
        .distributions
        .insert(format!("writes_per_{what}"), d);
}

/// Rule 3's overall fact.
fn nodelay_fact(trace: &Trace, side: &Side, history: &[calls::NodelaySet]) -> String {
    let sender = side.sender;
    let n = side.data.len();
    let sockets = format!("{n} traced socket{}", if n == 1 { "" } else { "s" });
    let listener = if side.listeners.is_empty() {
        ""
    } else {
        " nor on its listening socket"
    };
    // Attached to a running program, its listener's options were set before the trace began
    // and an accepted socket inherits them unseen; a socket first seen mid-connection may
    // have been set before too. Then "never set" is not known, only "not while traced".
    let whole = trace.from_start_in_window();
    let mid =
        trace.status == TraceStatus::Attached || side.data.iter().any(|&s| !whole[s as usize]);
    let Some(first) = history.iter().find(|h| h.on) else {
        return if mid {
            format!(
                "the {sender} did not set TCP_NODELAY on its {sockets}{listener} while traced \
                 (a setting made before the trace began — on the listener, inherited by every \
                 socket it accepts — is not in it)"
            )
        } else {
            format!("the {sender} never set TCP_NODELAY on its {sockets}{listener}: Nagle was on")
        };
    };
    let on: Vec<u32> = side
        .data
        .iter()
        .copied()
        .filter(|&s| nodelay_at(trace, history, s, &side.listeners, trace.ended))
        .collect();
    let s = &trace.sockets[first.socket as usize];
    let whose = if side.listeners.contains(&first.socket) {
        "on its listening socket (accepted sockets inherit it)".to_string()
    } else {
        format!(
            "{} after {} returned the socket",
            fmt_duration(first.at.since(s.first_seen)),
            if sender == "server" {
                "accept"
            } else {
                "connect"
            }
        )
    };
    let on = if on.len() == n {
        format!("on for every traced socket ({n}) at the end")
    } else {
        format!("on for {} of its {sockets} at the end", on.len())
    };
    let mut out = format!(
        "the {sender} set TCP_NODELAY {}, {whose}; {on}",
        when(trace, first.at)
    );
    if let Some(off) = history.iter().find(|h| !h.on) {
        out.push_str(&format!("; turned off again {}", when(trace, off.at)));
    }
    out
}

/// When a call was made, against the traced window: "12 ms after the trace window began",
/// or "before the trace window began" for a setting of [`Trace::setup`].
pub(crate) fn when(trace: &Trace, at: crate::time::Timestamp) -> String {
    if at < trace.started {
        "before the trace window began (at start-up or in an earlier window)".to_string()
    } else {
        format!(
            "{} after the trace window began",
            fmt_duration(at.since(trace.started))
        )
    }
}

/// The join of the example flow's sending socket.
fn example_join<'a>(f: &Finding, side: &Side, joins: &'a [SocketJoin]) -> Option<&'a SocketJoin> {
    let (client, server) = (
        parse(&f.example_flow.client)?,
        parse(&f.example_flow.server)?,
    );
    let (local, remote) = match f.direction {
        Direction::ServerToClient => (server, client),
        Direction::ClientToServer => (client, server),
    };
    let mut of_flow = joins.iter().filter(|j| {
        j.local == Some(local)
            && j.remote == Some(remote)
            && j.sockets.iter().any(|s| side.data.contains(s))
    });
    let quoted = |j: &&SocketJoin| f.evidence.frames.iter().any(|&n| j.frame(n).is_some());
    let all: Vec<&SocketJoin> = of_flow.by_ref().collect();
    all.iter().copied().find(quoted).or(all.first().copied())
}

/// Rule 5.
fn write_write_read(f: &mut Finding, trace: &Trace, side: &Side, j: Option<&SocketJoin>) {
    let sockets: Vec<u32> = match j {
        Some(j) => j.sockets.clone(),
        None => side.data.clone(),
    };
    let all: Vec<calls::Message> = sockets.iter().flat_map(|&s| messages(trace, s)).collect();
    let split: Vec<&calls::Message> = all
        .iter()
        .filter(|m| m.writes.len() >= 2 && m.read_after.is_some())
        .collect();
    // The message of the quoted frames' first write, else the first split one.
    let quoted = j.and_then(|j| {
        let first = j.writes.iter().find(|w| {
            w.frames.iter().any(|n| {
                f.evidence.frames.contains(n) || f.evidence.timeline.iter().any(|t| t.frame == *n)
            })
        })?;
        split
            .iter()
            .find(|m| m.writes.contains(&first.write.call))
            .copied()
    });
    let Some(m) = quoted.or(split.first().copied()) else {
        return;
    };
    let n = m.writes.len();
    let count = match n {
        2 => "two".to_string(),
        3 => "three".to_string(),
        n => n.to_string(),
    };
    f.evidence.facts.push(format!(
        "the client wrote the request in {count} calls: {} ({} of {} requests were written in \
         two or more calls before a read)",
        describe_message(trace, m),
        split.len(),
        all.len()
    ));
}
