//! `nagle_delayed_ack` from a live socket: Nagle is on (read from the socket itself) on a
//! request/response connection that writes small segments, and, when the sampler was lucky,
//! a write caught held by it.
//!
//! The kind is analyze's `nagle_delayed_ack`: the same mechanism (PHYSICS §3), the same fix,
//! so that `--fail-on nagle_delayed_ack` gates both. Rule, per socket that is not a listener:
//! 1. **Request/response**: at least [`MIN_DATA_SEGS`] data segments each way in the interval.
//!    A socket that only sends (or only receives) is a stream, where Nagle merges small
//!    writes into full segments at no cost.
//! 2. **Small writes**: the mean payload of the data segments it sent is below
//!    [`SMALL_WRITE_SHARE`] of its MSS (`tcpi_snd_mss`, the current MSS with per-segment
//!    options taken off). Nagle holds only a segment smaller than the MSS; when the mean is
//!    under half of it, most of this socket's segments are ones it may hold.
//! 3. **Nagle on**: `TCP_NODELAY` read as 0 from the live socket, and `TCP_CORK` not set (a
//!    corked socket holds partial segments on purpose). When `TCP_NODELAY` could not be read,
//!    there is no finding: the report's process notes say the socket could not be checked.
//!    Nor is there one when `TCP_NODELAY` was read only before the socket sent data
//!    ([`super::SocketObservation::options_before_data`]: a server may set it just after
//!    `accept`, and this socket closed before it could be read again); the notes say so.
//! 4. **Caught holding**: a sample with `unacked > 0`, `0 < notsent < snd_mss`,
//!    `unacked < snd_cwnd` and, when the kernel reports it, room in the peer's window for the
//!    waiting bytes ([`held_by_nagle`](super::interval::held_by_nagle)): a sub-MSS write
//!    waiting while earlier data is unacknowledged and neither window stops it — consistent
//!    with Nagle's hold (`tcp_nagle_check`), though pacing or autocorking can hold a write the
//!    same way for a moment and the kernel does not show whether the unacknowledged segment
//!    is a small one (Minshall); a bulk sender held by its window is not it.
//!
//! 5. One finding per process, role and server endpoint. **Warning** when a write was caught
//!    held; **critical** when at least [`CRITICAL_HELD_SHARE`] of the samples of those sockets
//!    caught one (a held write is then the rule, not the exception) out of at least
//!    [`MIN_SAMPLES_CRITICAL`] samples (a share of fewer says nothing); **info** when Nagle is on
//!    with small writes but no sample caught a hold: a risk (it stalls behind any hop or real
//!    RTT), not a measured stall — and only when the socket's writes leave in pieces (at least
//!    [`PIECES_RATIO`] data segments sent per data segment received): a server that answers
//!    each small request with one segment gives Nagle nothing to hold, and is not named.
//!
//! A socket sampled once (`--duration 0`) is judged on its lifetime counters (rules 1 and 2)
//! and that one sample (rule 4).
//!
//! Samples are counted as TAKEN (every read of the socket, [`super::SocketObservation::samples_taken`]),
//! not as stored: an idle socket's repeated samples are not stored, but they are instants at
//! which no write was held, and a share of the stored ones would overstate the holds.
//!
//! `time_lost_ms` is an estimate: per socket, the share of samples that caught a held write ×
//! the time it was sampled. Samples taken at instants unrelated to the holds see a hold with
//! the probability that one is in progress, so this estimates the time writes spent held;
//! 0 when none was caught.

use std::collections::BTreeMap;

use super::interval::{
    flow_ref, options_source, process_name, role_name, sending_direction, server_of, socket_label,
    sockets_source, tcp_info_source, SocketInterval,
};
use super::{ProcessObservation, SocketRole};
use crate::numfmt::{count, dur_ms, num};
use crate::report::{Evidence, Finding, FindingKind, Severity};
use crate::stats::round3;

pub const MIN_DATA_SEGS: u64 = 2;
pub const SMALL_WRITE_SHARE: f64 = 0.5;
pub const CRITICAL_HELD_SHARE: f64 = 0.1;
pub const MIN_SAMPLES_CRITICAL: u64 = 10;
pub const PIECES_RATIO: f64 = 1.5;

/// A socket rules 1 and 2 hold for (`watch` asks it too, to choose the sockets it samples
/// fast).
pub fn small_request_response(iv: &SocketInterval) -> bool {
    let mss = f64::from(iv.last.snd_mss);
    iv.sock.role != SocketRole::Listener
        && iv.data_segs_out >= MIN_DATA_SEGS
        && iv.data_segs_in >= MIN_DATA_SEGS
        && mss > 0.0
        && iv
            .mean_write_bytes()
            .is_some_and(|m| m < SMALL_WRITE_SHARE * mss)
}

/// Rule 5's evidence for a risk never caught: the socket sent at least [`PIECES_RATIO`] data
/// segments per data segment it received — its replies (or requests) leave in pieces, the
/// writes Nagle can hold. A socket answering each small request with one segment (one write
/// per reply, the fixed twin) gives Nagle nothing to hold: no finding.
fn in_pieces(iv: &SocketInterval) -> bool {
    iv.data_segs_out as f64 >= PIECES_RATIO * iv.data_segs_in.max(1) as f64
}

struct Group<'a> {
    role: SocketRole,
    server: String,
    total: u64,
    nagle_on: Vec<(SocketInterval<'a>, u64)>,
}

/// The findings for one process, and a note for each group of sockets whose `TCP_NODELAY`
/// could not be read although they write small request/response segments.
pub fn nagle(p: &ProcessObservation) -> (Vec<Finding>, Vec<String>) {
    let mut groups: BTreeMap<(u8, String), Group> = BTreeMap::new();
    let mut unchecked = 0u64;
    let mut before_data = 0u64;
    for iv in p.sockets.iter().filter_map(SocketInterval::of) {
        if iv.sock.role == SocketRole::Listener {
            continue;
        }
        let server = server_of(iv.sock);
        let g = groups
            .entry((iv.sock.role as u8, server.clone()))
            .or_insert_with(|| Group {
                role: iv.sock.role,
                server,
                total: 0,
                nagle_on: Vec::new(),
            });
        g.total += 1;
        if !small_request_response(&iv) {
            continue;
        }
        let o = &iv.sock.options;
        if iv.sock.options_before_data && o.nodelay == Some(false) {
            before_data += 1;
            continue;
        }
        match o.nodelay {
            Some(false) if o.cork != Some(true) => {
                let held = iv.held_samples();
                if held > 0 || in_pieces(&iv) {
                    g.nagle_on.push((iv, held));
                }
            }
            Some(_) => {}
            None => unchecked += 1,
        }
    }
    let mut notes = Vec::new();
    if unchecked > 0 {
        notes.push(format!(
            "Nagle could not be checked on {} with small request/response writes: TCP_NODELAY \
             was not readable ({})",
            count(unchecked, "socket"),
            if p.options_refused.is_some() {
                "the socket options were refused, see above"
            } else {
                "the kernel did not give it"
            }
        ));
    }
    if before_data > 0 {
        notes.push(format!(
            "Nagle not judged on {} with small request/response writes: TCP_NODELAY read 0, but \
             only before it sent data (it closed before it could be read again; a server may \
             set TCP_NODELAY just after accept)",
            count(before_data, "socket")
        ));
    }
    let findings = groups
        .into_values()
        .filter(|g| !g.nagle_on.is_empty())
        .map(|g| finding(p, g))
        .collect();
    (findings, notes)
}

fn finding(p: &ProcessObservation, g: Group) -> Finding {
    let (ex, ex_held) = *g
        .nagle_on
        .iter()
        .max_by_key(|(iv, held)| (*held, iv.data_segs_out))
        .expect("a group with a Nagle-on socket");
    let samples: u64 = g.nagle_on.iter().map(|(iv, _)| iv.samples_taken()).sum();
    let held: u64 = g.nagle_on.iter().map(|(_, h)| h).sum();
    let caught_sockets = g.nagle_on.iter().filter(|(_, h)| *h > 0).count() as u64;
    let held_share = held as f64 / samples.max(1) as f64;
    let time_lost_ms: f64 = g
        .nagle_on
        .iter()
        .map(|(iv, h)| *h as f64 / iv.samples_taken().max(1) as f64 * iv.span_ms())
        .sum();
    let severity = if held == 0 {
        Severity::Info
    } else if held_share >= CRITICAL_HELD_SHARE && samples >= MIN_SAMPLES_CRITICAL {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let role = role_name(g.role);
    let whose = match g.role {
        SocketRole::Accepted => format!("the server's accepted sockets on {}", g.server),
        _ => format!("this process's connections to {}", g.server),
    };
    let (writes, write) = match g.role {
        SocketRole::Accepted => ("replies", "reply"),
        _ => ("requests", "request"),
    };
    let peer = match g.role {
        SocketRole::Accepted => "client",
        _ => "server",
    };
    let verdict = if held > 0 {
        format!(
            "Nagle is on: {whose} have TCP_NODELAY off and send small {writes}, and the kernel \
             was caught holding a {write} in {held} of {samples} samples of those sockets until the {peer}'s ACK \
             (a delayed ACK costs ≈40 ms each time)"
        )
    } else {
        format!(
            "Nagle is on: {whose} have TCP_NODELAY off and send small {writes}; no sample caught \
             a write held, but any {write} written in pieces can wait for the {peer}'s delayed \
             ACK (≈40 ms) behind a hop or a real round trip — a risk, not a measured stall"
        )
    };
    let mss = ex.last.snd_mss;
    let mean = ex.mean_write_bytes().unwrap_or(0.0);
    let mut facts = vec![format!(
        "{}: TCP_NODELAY off (getsockopt returned 0), TCP_CORK {}",
        socket_label(ex.sock),
        match ex.sock.options.cork {
            Some(true) => "on",
            Some(false) => "off",
            None => "unknown",
        }
    )];
    match ex
        .sock
        .samples
        .iter()
        .find(|s| super::interval::held_by_nagle(s))
    {
        Some(s) => facts.push(format!(
            "caught holding a write in {ex_held} of {} samples, e.g. unacked {} (segments in \
             flight), notsent {} B below the MSS of {} B, congestion window {} not full: \
             consistent with Nagle's hold, which waits for an ACK before sending it",
            ex.samples_taken(),
            s.unacked,
            s.notsent_bytes,
            s.snd_mss,
            s.snd_cwnd
        )),
        None => facts.push(format!(
            "not caught holding a write in {} ({}): with both ends fast, ACKs often return \
             before the next write and Nagle has nothing to hold",
            count(ex.samples_taken(), "sample"),
            ex.sampled()
        )),
    }
    facts.push(format!(
        "{} sent, {} B each on average (MSS {mss} B), and {} received {}: request/response \
         with small writes",
        count(ex.data_segs_out, "data segment"),
        num(mean),
        count(ex.data_segs_in, "data segment"),
        ex.over()
    ));
    facts.push(format!(
        "this socket's own delayed-ACK timeout (ato) is {}; a Linux peer delays its ACK 40 to \
         200 ms the same way, and a held write waits for that ACK",
        dur_ms(f64::from(ex.last.ato_us) / 1e3)
    ));
    if g.nagle_on.len() > 1 || g.total > 1 {
        facts.push(format!(
            "{} of {} {role} sockets of this server have Nagle on with small writes; {} caught \
             holding",
            g.nagle_on.len(),
            g.total,
            caught_sockets
        ));
    }
    let mut evidence = Evidence {
        facts,
        rests_on: vec![
            options_source("TCP_NODELAY and TCP_CORK", ex.sock.fd),
            format!(
                "{}: unacked, notsent, snd_mss, snd_cwnd, ato and data segment and byte \
                 counters, {}",
                tcp_info_source(p),
                ex.sampled()
            ),
            sockets_source(p),
        ],
        ..Evidence::default()
    };
    let c = &mut evidence.counts;
    c.insert("sockets_nagle_on".into(), g.nagle_on.len() as u64);
    c.insert("sockets_caught_holding".into(), caught_sockets);
    c.insert("samples".into(), samples);
    c.insert("held_samples".into(), held);
    c.insert("data_segs_out".into(), ex.data_segs_out);
    c.insert("data_segs_in".into(), ex.data_segs_in);
    let v = &mut evidence.values;
    v.insert("mean_write_bytes".into(), round3(mean));
    v.insert("snd_mss_bytes".into(), f64::from(mss));
    v.insert("ato_ms".into(), f64::from(ex.last.ato_us) / 1e3);
    v.insert("rtt_ms".into(), f64::from(ex.last.rtt_us) / 1e3);
    v.insert("held_share".into(), round3(held_share));
    Finding {
        kind: FindingKind::NagleDelayedAck,
        severity,
        file: process_name(p),
        server: g.server.clone(),
        direction: sending_direction(ex.sock),
        flows_affected: g.nagle_on.len() as u64,
        flows_total: g.total,
        example_flow: flow_ref(ex.sock),
        verdict,
        time_lost_ms: round3(time_lost_ms),
        evidence,
        fix: "Write each message once (build it in a buffer, or writev), then set TCP_NODELAY \
              on the socket after accept()/connect(): setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, \
              1); Python sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1); Rust \
              TcpStream::set_nodelay(true); Java Socket.setTcpNoDelay(true) (Go and asyncio set \
              it by default). Never rely on TCP_QUICKACK alone."
            .to_string(),
    }
}
