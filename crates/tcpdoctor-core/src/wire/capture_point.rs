//! Where a synthetic capture is taken: in the middle of an emulated path, or at one end of it.
//!
//! A forwarder that delays traffic (`tcpdoctor proxy --delay`) sees every byte in the middle of
//! the path it emulates. Written as it saw them, its packets show no path round trip: the
//! handshake happened on loopback. [`PathCapture`] instead writes what a capture at one end
//! would show, from the times the caller observed. Rules:
//!
//! 1. [`CapturePoint::Proxy`]: every packet at the time the caller gives; nothing is modelled
//!    (the handshake at the time the connection opened, each side acknowledging all it got).
//! 2. At an end (the *near* side, [`CapturePoint::Client`] or [`CapturePoint::Server`]), the
//!    caller gives the near side's data at the time it left the near side, and the far side's
//!    data at the time it reached the near side (for a proxy: when it read from, and when it
//!    wrote to, the near side's socket). Those are observed.
//! 3. The handshake is modelled, back-dated from the time the connection opened (`t`) so that it
//!    spans one path round trip `rtt` (the emulated delays of both directions): at the client
//!    SYN at t − rtt, SYN/ACK and ACK at t; at the server SYN and SYN/ACK at t − rtt, ACK at t.
//! 4. The near side acknowledges, on every packet, all the far side sent so far: its
//!    acknowledgments leave at once, nothing lies between it and the capture point.
//! 5. The far side's acknowledgment of near data is modelled one `rtt` after the data left (the
//!    data travelling out, the ACK travelling back). A far packet passing within `slack` of
//!    that time, before or after, carries it, as a prompt response does; otherwise a pure ACK
//!    is written at exactly data time + `rtt`. `slack` is the path's jitter plus
//!    [`PIGGYBACK`]. A far packet never acknowledges near data sent later than that (it could
//!    not have arrived yet).
//! 6. Packets are returned in time order per connection: a packet waits while a modelled ACK
//!    that may precede it is still undecided (at most `slack` after its time), and
//!    [`PathCapture::finish`] returns what is left.

use std::collections::VecDeque;
use std::fmt;
use std::net::SocketAddrV4;
use std::str::FromStr;
use std::time::Duration;

use super::write::{Packet, Side, SyntheticTcp};
use crate::time::Timestamp;

/// How much later than its modelled time a far packet may pass and still carry an
/// acknowledgment: the far side's think time before it answers (a server's reply to a
/// request on loopback takes microseconds; the proxy's timer adds tens of them).
pub const PIGGYBACK: Duration = Duration::from_millis(1);

/// Where the capture is taken.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CapturePoint {
    /// In the middle: what the forwarder sent on, when it sent it (nothing modelled).
    #[default]
    Proxy,
    /// At the client's end of the emulated path.
    Client,
    /// At the server's end of the emulated path.
    Server,
}

impl CapturePoint {
    /// The side the capture sits next to, if at an end.
    pub fn near(self) -> Option<Side> {
        match self {
            CapturePoint::Proxy => None,
            CapturePoint::Client => Some(Side::Client),
            CapturePoint::Server => Some(Side::Server),
        }
    }
}

impl fmt::Display for CapturePoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CapturePoint::Proxy => "proxy",
            CapturePoint::Client => "client",
            CapturePoint::Server => "server",
        })
    }
}

impl FromStr for CapturePoint {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim() {
            "proxy" | "middle" => Ok(CapturePoint::Proxy),
            "client" => Ok(CapturePoint::Client),
            "server" => Ok(CapturePoint::Server),
            other => Err(format!("`{other}` is not proxy, client or server")),
        }
    }
}

/// The emulated path, as far as the model needs it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EmulatedPath {
    /// Round trip: the one-way delays of both directions added.
    pub rtt: Duration,
    /// How far a round trip may fall short of `rtt` (the jitters of both directions added).
    pub jitter: Duration,
}

/// One synthetic connection as seen from a [`CapturePoint`]; each method returns the packets
/// now ready to write, in time order.
pub struct PathCapture {
    tcp: SyntheticTcp,
    near: Option<Side>,
    rtt: Duration,
    slack: Duration,
    /// Near data the far side has not acknowledged yet: (when its ACK is due, seq after it).
    unacked: VecDeque<(Timestamp, u32)>,
    /// Packets waiting for the modelled ACKs before them to be decided.
    waiting: Vec<Packet>,
}

impl PathCapture {
    /// A connection that opened at `opened` (caller's time); the handshake per rule 3.
    pub fn new(
        client: SocketAddrV4,
        server: SocketAddrV4,
        at: CapturePoint,
        path: EmulatedPath,
        opened: Timestamp,
        snap_payload: usize,
    ) -> (PathCapture, Vec<Packet>) {
        let before = opened.minus(path.rtt);
        let times = match at {
            CapturePoint::Proxy => [opened; 3],
            CapturePoint::Client => [before, opened, opened],
            CapturePoint::Server => [before, before, opened],
        };
        let (mut tcp, pkts) = SyntheticTcp::with_handshake(client, server, times, snap_payload);
        if let Some(near) = at.near() {
            // The far side has acknowledged the handshake, nothing more yet.
            let syn_acked = tcp.next_seq(near);
            tcp.set_acknowledged(near.other(), syn_acked);
        }
        let c = PathCapture {
            tcp,
            near: at.near(),
            rtt: path.rtt,
            slack: path.jitter + PIGGYBACK,
            unacked: VecDeque::new(),
            waiting: Vec::new(),
        };
        (c, pkts)
    }

    fn is_far(&self, side: Side) -> bool {
        self.near.is_some_and(|n| n != side)
    }

    /// Decides the modelled ACKs whose time is over: before a packet at `ts`, every ACK due
    /// more than `slack` earlier is a pure ACK (rule 5).
    fn decide(&mut self, ts: Timestamp) {
        let slack = self.slack;
        self.pure_acks_while(|due| due.plus(slack) < ts);
    }

    /// Writes a pure ACK at its due time for each leading unacknowledged write with `due(t)`.
    fn pure_acks_while(&mut self, due: impl Fn(Timestamp) -> bool) {
        let Some(near) = self.near else { return };
        let far = near.other();
        while let Some(&(t, end)) = self.unacked.front() {
            if !due(t) {
                break;
            }
            self.unacked.pop_front();
            self.tcp.set_acknowledged(far, end);
            let p = self.tcp.ack(t, far);
            self.waiting.push(p);
        }
    }

    /// A far packet at `ts` acknowledges the near data due by `ts` + `slack` (rule 5).
    fn far_acknowledges(&mut self, ts: Timestamp) {
        let Some(near) = self.near else { return };
        let limit = ts.plus(self.slack);
        let mut acked = None;
        while let Some(&(due, end)) = self.unacked.front() {
            if due > limit {
                break;
            }
            self.unacked.pop_front();
            acked = Some(end);
        }
        if let Some(end) = acked {
            self.tcp.set_acknowledged(near.other(), end);
        }
    }

    /// Near data (or a FIN) just sent: its modelled ACK is due one round trip later.
    fn near_sent(&mut self, ts: Timestamp, from: Side) {
        if self.near == Some(from) {
            let end = self.tcp.next_seq(from);
            self.unacked.push_back((ts.plus(self.rtt), end));
        }
    }

    fn before(&mut self, ts: Timestamp, from: Side) {
        self.decide(ts);
        if self.is_far(from) {
            self.far_acknowledges(ts);
        }
    }

    /// Returns the waiting packets that no undecided ACK can precede any more.
    fn ready(&mut self) -> Vec<Packet> {
        self.waiting.sort_by_key(|p| p.0);
        let cut = match self.unacked.front() {
            Some(&(due, _)) => self.waiting.partition_point(|p| p.0 < due),
            None => self.waiting.len(),
        };
        self.waiting.drain(..cut).collect()
    }

    /// `from` wrote `len` bytes (of which `head` is known) passing the capture point at `ts`.
    pub fn data(&mut self, ts: Timestamp, from: Side, head: &[u8], len: usize) -> Vec<Packet> {
        self.before(ts, from);
        let pkts = self.tcp.data_len(ts, from, head, len);
        self.waiting.extend(pkts);
        self.near_sent(ts, from);
        self.ready()
    }

    /// An observed pure ACK from `from`.
    pub fn ack(&mut self, ts: Timestamp, from: Side) -> Vec<Packet> {
        self.before(ts, from);
        let p = self.tcp.ack(ts, from);
        self.waiting.push(p);
        self.ready()
    }

    /// `from` closed its direction.
    pub fn fin(&mut self, ts: Timestamp, from: Side) -> Vec<Packet> {
        self.before(ts, from);
        let p = self.tcp.fin(ts, from);
        self.waiting.push(p);
        self.near_sent(ts, from);
        self.ready()
    }

    /// `from` reset the connection: modelled ACKs not yet due never come.
    pub fn rst(&mut self, ts: Timestamp, from: Side) -> Vec<Packet> {
        self.pure_acks_while(|due| due <= ts);
        self.unacked.clear();
        let p = self.tcp.rst(ts, from);
        self.waiting.push(p);
        self.ready()
    }

    /// The connection is over: the modelled ACKs still undecided are written (rule 5).
    pub fn finish(&mut self) -> Vec<Packet> {
        self.pure_acks_while(|_| true);
        self.ready()
    }
}

#[cfg(test)]
#[path = "capture_point_tests.rs"]
mod tests;
