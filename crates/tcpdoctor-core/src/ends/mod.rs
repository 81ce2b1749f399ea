//! Two ends of one path: the same connections captured where the client runs and where the
//! server runs (`analyze --ends A B`; the two captures of a `wan:` path). One end alone cannot
//! tell a packet lost on the way from an acknowledgement lost on the way back, nor how long
//! each way took; the two together can.
//!
//! Rules:
//! 1. **Connections.** A connection is the same at both ends when its ports and its client's
//!    initial sequence number match; addresses are not compared (a NAT, or the sandbox's
//!    readdressing, changes them); within one file a connection is its two endpoints,
//!    addresses included (two clients may pick the same port). Its client sent the SYN; without one in the capture, the
//!    endpoint with the higher port is taken as the client and the ISN is unknown, and such a
//!    connection pairs only if its port pair is unique in both files.
//! 2. **Packets.** A packet is the same at both ends when its TCP header says the same:
//!    sequence and acknowledgement numbers, flags, window, payload length and the TSval when
//!    present (a copy sent again carries a newer TSval when timestamps are on). Packets that
//!    share all of these are matched so that their one-way delay is closest to the delay the
//!    unambiguous packets of that direction show (the median): a retransmission that got
//!    through is not mistaken for its lost original.
//! 3. **Whose end.** The client's end is the file in which the SYN-ACK follows the SYN by
//!    more (the client waits a round trip for it; the server answers at once). Without the
//!    handshake in both files, the first file is taken as the client's end and the report says
//!    so.
//! 4. **Lost on the path**: a packet the sender's end shows and the receiver's end never
//!    does, unless it was sent within one typical one-way delay of the receiver's capture
//!    ending (still in flight) or before that capture began.
//! 5. **Packets must be cut alike at both ends.** A capture taken above an offload (TSO/GSO at
//!    the sender, GRO at the receiver) holds packets the wire never carried, and then the two
//!    files do not pair packet for packet. When the largest packet of a direction differs
//!    between the files and more than a tenth of its packets find no partner, the report says
//!    so instead of presenting them as losses.
//! 6. **A retransmission** (data at or below the highest sequence number already sent)
//!    *replaced a lost packet* when the latest earlier copy of its first byte never arrived,
//!    and *was sent although the first copy arrived* otherwise: then it was the
//!    acknowledgement that was lost or late, or the sender gave up too early.
//! 7. **Clocks.** One-way delays subtract one file's timestamps from the other's: they are
//!    true only when both captures used one clock (one host, as the sandbox does). A negative
//!    delay proves the clocks differ; the round trip (the sum of the two directions' medians)
//!    does not depend on their offset.
//! 8. Memory is bounded: at most [`MAX_PACKETS`] TCP packets per file are compared; the report
//!    says when a file had more.

mod render;
#[cfg(test)]
mod tests;

use std::collections::HashMap;

use serde::Serialize;

use crate::time::Timestamp;
use crate::wire::{Endpoint, TcpFlags, TcpSegment};

pub use render::{one_line, render_ends};

/// TCP packets kept per file (about 56 bytes each).
pub const MAX_PACKETS: usize = 4_000_000;
/// Frame numbers listed per kind of evidence.
pub const MAX_LISTED: usize = 10;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ConnKey {
    client_port: u16,
    server_port: u16,
    isn: Option<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct Fingerprint {
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    len: u32,
    tsval: Option<u32>,
}

#[derive(Clone, Copy, Debug)]
struct Packet {
    frame: u64,
    ts: Timestamp,
    /// From the connection's client.
    c2s: bool,
    fp: Fingerprint,
}

#[derive(Debug, Default)]
struct Connection {
    key: Option<ConnKey>,
    /// Ports of the two endpoints, lower first: the key before the client is known.
    ports: (u16, u16),
    /// The client's endpoint as this file shows it (rule 1).
    client: Option<Endpoint>,
    syn: Option<Timestamp>,
    syn_ack: Option<Timestamp>,
    packets: Vec<Packet>,
}

/// One file's TCP packets, grouped by connection: what [`compare`] reads.
#[derive(Debug, Default)]
pub struct EndCapture {
    name: String,
    conns: Vec<Connection>,
    /// The two endpoints (lower first) → the connection they currently belong to. Within one
    /// file the addresses count: two clients may use the same port.
    current: HashMap<(Endpoint, Endpoint), usize>,
    packets: usize,
    first: Option<Timestamp>,
    last: Option<Timestamp>,
    /// Packets not kept because the file had more than [`MAX_PACKETS`].
    pub skipped: u64,
}

impl EndCapture {
    pub fn new(name: &str) -> EndCapture {
        EndCapture {
            name: name.to_string(),
            ..EndCapture::default()
        }
    }

    /// One TCP packet of the file, in file order.
    pub fn on_segment(&mut self, frame: u64, ts: Timestamp, seg: &TcpSegment) {
        if self.packets >= MAX_PACKETS {
            self.skipped += 1;
            return;
        }
        self.packets += 1;
        self.first = Some(self.first.map_or(ts, |f| f.min(ts)));
        self.last = Some(self.last.map_or(ts, |l| l.max(ts)));
        let (a, b) = (seg.src.port, seg.dst.port);
        let ports = (a.min(b), a.max(b));
        let ends = (seg.src.min(seg.dst), seg.src.max(seg.dst));
        let is_syn = seg.flags.syn() && !seg.flags.ack();
        let idx = match self.current.get(&ends) {
            // A SYN with a new ISN on a known port pair is a new connection (PHYSICS: flows are
            // identified by the 4-tuple and the ISN); the same ISN again is its retransmission.
            Some(&i) if !is_syn || self.conns[i].key.and_then(|k| k.isn) == Some(seg.seq) => i,
            _ => {
                self.conns.push(Connection {
                    ports,
                    ..Connection::default()
                });
                let i = self.conns.len() - 1;
                self.current.insert(ends, i);
                i
            }
        };
        let conn = &mut self.conns[idx];
        if conn.key.is_none() {
            conn.client = Some(if is_syn {
                seg.src
            } else if seg.flags.syn() {
                seg.dst
            } else if a >= b {
                seg.src
            } else {
                seg.dst
            });
            conn.key = Some(if is_syn {
                ConnKey {
                    client_port: a,
                    server_port: b,
                    isn: Some(seg.seq),
                }
            } else if seg.flags.syn() {
                // A SYN-ACK goes to the client; its ack is the client's ISN + 1.
                ConnKey {
                    client_port: b,
                    server_port: a,
                    isn: Some(seg.ack.wrapping_sub(1)),
                }
            } else {
                ConnKey {
                    client_port: ports.1,
                    server_port: ports.0,
                    isn: None,
                }
            });
        }
        if is_syn {
            conn.syn.get_or_insert(ts);
        } else if seg.flags.syn() {
            conn.syn_ack.get_or_insert(ts);
        }
        conn.packets.push(Packet {
            frame,
            ts,
            c2s: conn.client == Some(seg.src),
            fp: Fingerprint {
                seq: seg.seq,
                ack: seg.ack,
                flags: seg.flags.0
                    & (TcpFlags::FIN
                        | TcpFlags::SYN
                        | TcpFlags::RST
                        | TcpFlags::ACK
                        | TcpFlags::PSH),
                window: seg.window,
                len: seg.payload_len,
                tsval: seg.options.timestamp.map(|t| t.0),
            },
        });
    }
}

/// A spread of one-way delays, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    pub min: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// A retransmission sent although its first copy had arrived: the frames that show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Needless {
    /// The retransmission, at the sender's end.
    pub resent_frame: u64,
    /// The first copy's arrival, at the receiver's end.
    pub arrived_frame: u64,
}

/// One direction (client → server or server → client) over every paired connection.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct OneWay {
    /// Packets the sender's end shows.
    pub sent: u64,
    /// Of those, seen at the receiver's end.
    pub arrived: u64,
    /// Never seen at the receiver's end (rule 4).
    pub lost: u64,
    /// The first lost packets' frame numbers at the sender's end.
    pub lost_frames: Vec<u64>,
    /// Sent too close to the end (or before the start) of the receiver's capture to tell.
    pub unaccounted: u64,
    /// Seen at the receiver's end with no matching packet at the sender's end.
    pub only_at_receiver: u64,
    /// One-way delay of the packets that arrived (rule 7).
    pub delay_ms: Option<Spread>,
    /// Data packets sent again (rule 6).
    pub retransmitted: u64,
    /// Retransmissions whose earlier copy never arrived.
    pub replaced_lost: u64,
    /// Retransmissions whose earlier copy had arrived.
    pub needless: u64,
    /// The first of those, with the frames that show the earlier copy arriving.
    pub needless_frames: Vec<Needless>,
    /// The largest payload of one packet at the sender's end and at the receiver's end: two
    /// captures of the same packets agree (rule 5).
    pub largest_at_sender: u32,
    pub largest_at_receiver: u32,
}

/// Which file is each paired connection's client end, and how that was decided.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Roles {
    /// Connections whose client ran where the first file was captured.
    pub first_is_client_end: u64,
    /// Connections whose client ran where the second file was captured.
    pub second_is_client_end: u64,
    /// Connections without the handshake in both files: the first file was taken as the
    /// client's end (rule 3).
    pub assumed: u64,
}

/// What the two ends of one path show together.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct EndsReport {
    /// The two files, as given.
    pub files: [String; 2],
    /// Connections found in both files.
    pub paired: u64,
    /// Connections in one file only (first, second).
    pub unpaired: [u64; 2],
    pub roles: Roles,
    pub client_to_server: OneWay,
    pub server_to_client: OneWay,
    /// The sum of the two directions' median one-way delays: the path's round trip,
    /// independent of the two clocks' offset.
    pub round_trip_ms: Option<f64>,
    /// A one-way delay came out negative: the files were not taken on one clock, and the
    /// one-way figures include the clocks' offset (rule 7).
    pub clocks_differ: bool,
    /// TCP packets not compared because a file had more than [`MAX_PACKETS`] (first, second).
    pub skipped: [u64; 2],
    /// The two files cut the data into packets differently (rule 5): the per-packet figures
    /// (losses, packets seen at one end only) do not apply.
    pub segmentation_differs: bool,
}

/// Pairs the connections of two ends' captures and compares them packet by packet.
pub fn compare(first: EndCapture, second: EndCapture) -> EndsReport {
    let mut report = EndsReport {
        files: [first.name.clone(), second.name.clone()],
        skipped: [first.skipped, second.skipped],
        ..EndsReport::default()
    };
    let pairs = pair_connections(&first, &second);
    report.paired = pairs.len() as u64;
    report.unpaired = [
        (first.conns.len() - pairs.len()) as u64,
        (second.conns.len() - pairs.len()) as u64,
    ];
    // Pass 1: whose end is whose, and the unambiguous matches of each direction.
    let mut ways = Vec::with_capacity(pairs.len() * 2);
    for &(i, j) in &pairs {
        let (a, b) = (&first.conns[i], &second.conns[j]);
        let first_is_client = match (a.syn.zip(a.syn_ack), b.syn.zip(b.syn_ack)) {
            (Some((sa, aa)), Some((sb, ab))) => aa.since(sa) >= ab.since(sb),
            _ => {
                report.roles.assumed += 1;
                true
            }
        };
        if first_is_client {
            report.roles.first_is_client_end += 1;
        } else {
            report.roles.second_is_client_end += 1;
        }
        let (client_end, server_end, client_cap, server_cap) = if first_is_client {
            (a, b, &first, &second)
        } else {
            (b, a, &second, &first)
        };
        ways.push((Way::new(client_end, server_end, true), server_cap));
        ways.push((Way::new(server_end, client_end, false), client_cap));
    }
    // Rule 2: what the unambiguous packets of each direction show, over every connection.
    let mut sure = [Vec::new(), Vec::new()];
    for (w, _) in &ways {
        sure[usize::from(!w.c2s)].extend_from_slice(&w.sure);
    }
    let hint = sure.map(|mut d| {
        d.sort_unstable();
        Hint {
            typical: d.get(d.len() / 2).copied(),
            negative_ok: d.first().is_some_and(|&m| m < 0),
        }
    });
    // Pass 2: the ambiguous copies, then the tallies.
    let mut delays = [Vec::new(), Vec::new()];
    for (w, to_cap) in ways {
        let k = usize::from(!w.c2s);
        let out = if w.c2s {
            &mut report.client_to_server
        } else {
            &mut report.server_to_client
        };
        w.finish(hint[k], to_cap, out, &mut delays[k]);
    }
    let [c2s_ns, s2c_ns] = &mut delays;
    report.client_to_server.delay_ms = spread(c2s_ns);
    report.server_to_client.delay_ms = spread(s2c_ns);
    let (c2s, s2c) = (
        report.client_to_server.delay_ms,
        report.server_to_client.delay_ms,
    );
    report.clocks_differ = [c2s, s2c].iter().flatten().any(|s| s.min < 0.0);
    report.segmentation_differs = [&report.client_to_server, &report.server_to_client]
        .iter()
        .any(|d| {
            let unmatched = d.lost + d.only_at_receiver;
            d.largest_at_sender != d.largest_at_receiver && unmatched * 10 > d.sent.max(1)
        });
    report.round_trip_ms = c2s.zip(s2c).map(|(a, b)| a.p50 + b.p50);
    report
}

/// Index pairs (first file, second file) of the same connection (rule 1).
fn pair_connections(first: &EndCapture, second: &EndCapture) -> Vec<(usize, usize)> {
    let index = |cap: &EndCapture| {
        let mut m: HashMap<ConnKey, Vec<usize>> = HashMap::new();
        for (i, c) in cap.conns.iter().enumerate() {
            if let Some(k) = c.key {
                m.entry(k).or_default().push(i);
            }
        }
        m
    };
    let (ia, ib) = (index(first), index(second));
    let by_ports = |cap: &EndCapture| {
        let mut m: HashMap<(u16, u16), usize> = HashMap::new();
        for c in &cap.conns {
            *m.entry(c.ports).or_default() += 1;
        }
        m
    };
    let (pa, pb) = (by_ports(first), by_ports(second));
    let mut pairs = Vec::new();
    for (key, a) in &ia {
        let Some(b) = ib.get(key) else { continue };
        if key.isn.is_none() {
            let ports = first.conns[a[0]].ports;
            if pa.get(&ports) != Some(&1) || pb.get(&ports) != Some(&1) {
                continue;
            }
        }
        // The same key twice in a file (a port pair reused with the same ISN): pair in order.
        pairs.extend(a.iter().copied().zip(b.iter().copied()));
    }
    pairs.sort_unstable();
    pairs
}

/// The whole-capture view of one direction that settles ambiguous copies (rule 2).
#[derive(Clone, Copy, Debug)]
struct Hint {
    /// The median delay of the direction's unambiguous packets over every connection.
    typical: Option<i64>,
    /// Some unambiguous packet arrived before it was sent: the clocks differ (rule 7).
    negative_ok: bool,
}

/// One direction of one connection: `sent` at the sender's end, `arrived` at the receiver's.
struct Way<'a> {
    c2s: bool,
    sent: Vec<&'a Packet>,
    arrived: Vec<&'a Packet>,
    by_fp: HashMap<Fingerprint, Vec<usize>>,
    /// Per sent packet, the arrival it was matched with.
    matched: Vec<Option<usize>>,
    /// Arrivals whose fingerprint more than one packet carries.
    ambiguous: Vec<usize>,
    only_at_receiver: u64,
    /// Delays of the unambiguous matches, ns.
    sure: Vec<i64>,
}

fn delay(s: &Packet, r: &Packet) -> i64 {
    r.ts.0 as i64 - s.ts.0 as i64
}

impl<'a> Way<'a> {
    /// The unambiguous matches (rule 2): sent once and arrived once.
    fn new(from: &'a Connection, to: &'a Connection, c2s: bool) -> Way<'a> {
        let sent: Vec<&Packet> = from.packets.iter().filter(|p| p.c2s == c2s).collect();
        let arrived: Vec<&Packet> = to.packets.iter().filter(|p| p.c2s == c2s).collect();
        let mut by_fp: HashMap<Fingerprint, Vec<usize>> = HashMap::new();
        for (i, p) in sent.iter().enumerate() {
            by_fp.entry(p.fp).or_default().push(i);
        }
        let mut arrivals: HashMap<Fingerprint, u32> = HashMap::new();
        for r in &arrived {
            *arrivals.entry(r.fp).or_default() += 1;
        }
        let mut w = Way {
            c2s,
            matched: vec![None; sent.len()],
            ambiguous: Vec::new(),
            only_at_receiver: 0,
            sure: Vec::new(),
            sent,
            arrived,
            by_fp,
        };
        for (j, r) in w.arrived.iter().enumerate() {
            match w.by_fp.get(&r.fp) {
                // A duplicate delivery is ambiguous too.
                Some(c) if c.len() == 1 && arrivals[&r.fp] == 1 => {
                    w.matched[c[0]] = Some(j);
                    w.sure.push(delay(w.sent[c[0]], r));
                }
                Some(_) => w.ambiguous.push(j),
                None => w.only_at_receiver += 1,
            }
        }
        w
    }

    /// Settles the ambiguous copies and adds this direction's counts to `out`.
    fn finish(
        mut self,
        hint: Hint,
        to_cap: &EndCapture,
        out: &mut OneWay,
        delays_ns: &mut Vec<i64>,
    ) {
        self.sure.sort_unstable();
        let typical = self.sure.get(self.sure.len() / 2).copied().or(hint.typical);
        let want = typical.unwrap_or(0);
        for j in std::mem::take(&mut self.ambiguous) {
            let r = self.arrived[j];
            let free: Vec<usize> = self.by_fp[&r.fp]
                .iter()
                .copied()
                .filter(|&i| self.matched[i].is_none())
                .collect();
            // On one clock nothing arrives before it was sent: a copy sent after this
            // arrival cannot be the one that arrived.
            let causal: Vec<usize> = free
                .iter()
                .copied()
                .filter(|&i| hint.negative_ok || delay(self.sent[i], r) >= 0)
                .collect();
            let pool = if causal.is_empty() { &free } else { &causal };
            let best = pool
                .iter()
                .copied()
                .min_by_key(|&i| (delay(self.sent[i], r) - want).unsigned_abs());
            match best {
                Some(i) => self.matched[i] = Some(j),
                None => self.only_at_receiver += 1,
            }
        }
        out.only_at_receiver += self.only_at_receiver;
        let largest = |v: &[&Packet]| v.iter().map(|p| p.fp.len).max().unwrap_or(0);
        out.largest_at_sender = out.largest_at_sender.max(largest(&self.sent));
        out.largest_at_receiver = out.largest_at_receiver.max(largest(&self.arrived));
        let (sent, arrived, matched) = (&self.sent, &self.arrived, &self.matched);
        let window = (to_cap.first, to_cap.last);
        let mut highest: Option<u32> = None;
        // Data sent so far: (first byte, end), the index of the send, most recent last.
        let mut copies: Vec<(u32, u32, usize)> = Vec::new();
        for (i, s) in sent.iter().enumerate() {
            out.sent += 1;
            match matched[i] {
                Some(j) => {
                    out.arrived += 1;
                    delays_ns.push(delay(s, arrived[j]));
                }
                None if in_flight(s.ts, typical, window) => out.unaccounted += 1,
                None => {
                    out.lost += 1;
                    if out.lost_frames.len() < MAX_LISTED {
                        out.lost_frames.push(s.frame);
                    }
                }
            }
            let span = s.fp.len + u32::from(s.fp.flags & (TcpFlags::SYN | TcpFlags::FIN) != 0);
            if span == 0 {
                continue;
            }
            let end = s.fp.seq.wrapping_add(span);
            let resent = highest.is_some_and(|h| (s.fp.seq.wrapping_sub(h) as i32) < 0);
            if resent {
                out.retransmitted += 1;
                let earlier = copies.iter().rev().take(4096).find(|&&(a, e, _)| {
                    (s.fp.seq.wrapping_sub(a) as i32) >= 0 && (e.wrapping_sub(s.fp.seq) as i32) > 0
                });
                match earlier.and_then(|&(_, _, k)| matched[k]) {
                    Some(j) => {
                        out.needless += 1;
                        if out.needless_frames.len() < MAX_LISTED {
                            out.needless_frames.push(Needless {
                                resent_frame: s.frame,
                                arrived_frame: arrived[j].frame,
                            });
                        }
                    }
                    None => out.replaced_lost += 1,
                }
            }
            copies.push((s.fp.seq, end, i));
            if highest.is_none_or(|h| (end.wrapping_sub(h) as i32) > 0) {
                highest = Some(end);
            }
        }
    }
}

/// Rule 4: sent when the receiver's capture could not have seen it arrive.
fn in_flight(
    sent: Timestamp,
    typical_ns: Option<i64>,
    (first, last): (Option<Timestamp>, Option<Timestamp>),
) -> bool {
    let due = sent.0 as i64 + typical_ns.unwrap_or(0).max(0) * 2;
    let (Some(first), Some(last)) = (first, last) else {
        return true;
    };
    due >= last.0 as i64 || (sent.0 as i64 + typical_ns.unwrap_or(0)) < first.0 as i64
}

fn spread(ns: &mut [i64]) -> Option<Spread> {
    if ns.is_empty() {
        return None;
    }
    ns.sort_unstable();
    let at = |q: f64| ns[((ns.len() - 1) as f64 * q).round() as usize] as f64 / 1e6;
    Some(Spread {
        min: at(0.0),
        p50: at(0.5),
        p99: at(0.99),
        max: at(1.0),
    })
}
