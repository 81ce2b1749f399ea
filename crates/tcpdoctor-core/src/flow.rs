//! The flow table: TCP connections seen in a capture, and what each segment means.
//!
//! Rules, in the order they are applied to a segment:
//! 1. A flow is keyed by its two endpoints, in either order, and by its ISNs (PHYSICS §9). A SYN
//!    (without ACK) on a key starts a new flow when its ISN differs from the one its sender's
//!    side of the flow carried, whatever state that flow is in (open, half-closed by one FIN,
//!    ended, idle), or, when that side sent no SYN, once that side sent data or the peer
//!    acknowledged something else than this SYN. A SYN with the same ISN is a retry and stays
//!    in its flow ([`Flow::is_new_connection`]).
//!    An RST from the server acknowledging the client's SYN before any SYN-ACK *refuses* the
//!    attempt: the flow stays open (the analysis gives it the linger time of an ended flow), so
//!    that a client sending the same SYN again, as Windows does, continues it.
//! 2. A connection attempt (SYN seen, handshake not completed, no data) displaced by a new ISN
//!    is kept aside, not ended, so that a retry of its SYN (or the SYN-ACK answering it) finds
//!    it again: SYN retries stay one flow even when attempts with other ISNs come between.
//! 3. Roles: the side that sent the SYN (without ACK) is the client; else the side that sent the
//!    SYN-ACK is the server; else the well-known port (< 1024) is the server; else the lower port.
//! 4. Handshake: a SYN-ACK *answers* the client's SYN when it acknowledges its ISN + 1 (an RST
//!    doing so refuses it, rule 1); the handshake *completes* with the client's first ACK of
//!    the SYN-ACK. A client SYN sent again before any answer means the earlier one went
//!    unanswered ([`Handshake::unanswered_syn_retry`]). Sent again after a SYN-ACK, it means
//!    that SYN-ACK did not reach the client, but only when the client then takes a SYN-ACK sent
//!    after its retry, or never completes the handshake: a client that ACKs right after its
//!    retry had the earlier SYN-ACK, late ([`Handshake::lost_syn_ack`]).
//! 5. Each direction tracks its highest sequence number sent (`next_seq`), what the peer has
//!    acknowledged of it (`acked`), its MSS and window scale from the SYN, and its window.
//! 6. Data is *new* when it starts at `next_seq`; *a gap* when it starts beyond it (the capture
//!    missed bytes, or they are still to come out of order); *out of order* when it fills such a
//!    gap; otherwise a *retransmission*. Sequence numbers compare with wrapping arithmetic.
//! 7. RTT at the capture point is measured per side: from the handshake (SYN → SYN-ACK is the
//!    round trip towards the server, SYN-ACK → ACK towards the client), else from the fastest
//!    data → ACK sample. Karn: never from a SYN or SYN-ACK that was sent more than once, nor
//!    from retransmitted data. Their sum is the path RTT.
//! 8. A retransmission remembers when the bytes were first sent and how many duplicate ACKs
//!    preceded it, so detectors can tell fast retransmit, tail-loss probes and timeouts apart.

use std::hash::Hash;
use std::net::IpAddr;
use std::time::Duration;

use crate::seq::SeqNum;
use crate::time::Timestamp;
use crate::wire::{Endpoint, TcpSegment};

mod compact;
mod handshake;
mod sent;
pub(crate) use compact::MaybePacket;
use compact::MaybeRtt;
pub use handshake::Handshake;
use sent::{SentLog, SentSegment};

/// Which way data moves, relative to the connection's roles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    ClientToServer,
    ServerToClient,
}

impl Direction {
    pub fn reverse(self) -> Direction {
        match self {
            Direction::ClientToServer => Direction::ServerToClient,
            Direction::ServerToClient => Direction::ClientToServer,
        }
    }

    pub fn index(self) -> usize {
        match self {
            Direction::ClientToServer => 0,
            Direction::ServerToClient => 1,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::ClientToServer => "client_to_server",
            Direction::ServerToClient => "server_to_client",
        }
    }

    /// `client→server` / `server→client`, for text.
    pub fn arrow(self) -> &'static str {
        match self {
            Direction::ClientToServer => "client→server",
            Direction::ServerToClient => "server→client",
        }
    }

    pub fn sender(self) -> &'static str {
        match self {
            Direction::ClientToServer => "client",
            Direction::ServerToClient => "server",
        }
    }

    pub fn receiver(self) -> &'static str {
        self.reverse().sender()
    }
}

/// A packet reference a person can look up in Wireshark (`frame.number`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketRef {
    pub frame: u64,
    pub ts: Timestamp,
}

/// What one segment is, once the flow's state is taken into account.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentKind {
    Syn,
    SynAck,
    /// Payload starting exactly where the sender's stream stood.
    NewData,
    /// Payload starting beyond the sender's stream: bytes before it are missing (so far).
    DataAfterGap,
    /// Payload filling an earlier gap.
    OutOfOrder,
    /// Payload already seen (entirely or partly).
    Retransmission,
    /// No payload, no SYN/FIN/RST.
    PureAck,
    Fin,
    Rst,
}

/// How a retransmission relates to the first transmission of the same bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetransInfo {
    /// When (and in which frame) these bytes were first seen, if still remembered.
    pub original: Option<PacketRef>,
    /// Duplicate ACKs the peer sent for this sequence number before the retransmission.
    pub dup_acks_before: u32,
    /// The retransmitted bytes end at the sender's highest sequence number (a tail).
    pub is_tail: bool,
    /// This is not the first retransmission of these bytes.
    pub repeated: bool,
}

/// One segment, classified. Detectors and the turn builder see these.
#[derive(Clone, Copy, Debug)]
pub struct SegmentEvent {
    pub pkt: PacketRef,
    pub dir: Direction,
    pub seq: SeqNum,
    pub ack: SeqNum,
    pub len: u32,
    pub kind: SegmentKind,
    pub fin: bool,
    pub syn: bool,
    pub rst: bool,
    pub psh: bool,
    pub has_ack: bool,
    /// The window this segment advertises, scaled when the scale is known.
    pub window: u64,
    /// Both SYNs were seen, so `window` is exact (scaled or not, as negotiated).
    pub window_exact: bool,
    /// Bytes of the peer's data this segment acknowledges for the first time.
    pub newly_acked: u32,
    /// After this segment, everything the peer has sent is acknowledged.
    pub acks_all_peer_data: bool,
    /// Same ACK number as the previous ACK from this side, no data, no window change.
    pub dup_ack: bool,
    pub retrans: Option<RetransInfo>,
    /// Sender's unacknowledged bytes just before this segment (0 when nothing was in flight).
    pub in_flight_before: u64,
    /// The TSval of its timestamp option: the sender's clock when its TCP sent it.
    pub tsval: Option<u32>,
}

/// What one side of a flow tells of a SYN it might send ([`Flow::syn_clue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SynClue {
    /// Its SYN was seen, with this ISN: a SYN with another opens another connection.
    Isn(SeqNum),
    /// No SYN of its was seen, but it sent: it was past its SYN, any SYN is another one.
    Sent,
    /// No SYN of its was seen and it sent nothing, but the peer acknowledged up to here: a
    /// SYN whose ISN this does not acknowledge is another connection's.
    Acked(SeqNum),
    /// Nothing: a SYN may be this side's first.
    Nothing,
}

impl SynClue {
    /// Whether a SYN carrying `isn` opens another connection rather than retrying this one's.
    pub fn opens_another(self, isn: SeqNum) -> bool {
        match self {
            SynClue::Isn(own) => own != isn,
            SynClue::Sent => true,
            SynClue::Acked(a) => a != isn.plus(1),
            SynClue::Nothing => false,
        }
    }
}

/// The state of one direction of a flow (the side that sends in that direction).
#[derive(Clone, Debug, Default)]
pub struct HalfFlow {
    pub isn: Option<SeqNum>,
    /// Highest sequence number sent (end of the highest byte, plus SYN/FIN), once anything
    /// was ([`HalfFlow::next_seq`]). This and the next three optional values are kept as a
    /// value and a flag beside the other flags, not as `Option`s (their tags and padding would
    /// make `HalfFlow` 160 bytes, not 144: issue 29).
    next_seq: SeqNum,
    sent: bool,
    /// Highest sequence number the peer has acknowledged ([`HalfFlow::acked`]).
    acked: SeqNum,
    acked_seen: bool,
    /// The MSS this side's SYN announced ([`HalfFlow::mss`]).
    mss: u16,
    mss_seen: bool,
    pub window_scale: Option<u8>,
    pub fin_seen: bool,
    /// Last ACK number and window this side sent, for duplicate-ACK recognition.
    last_ack: SeqNum,
    last_window: u16,
    last_ack_seen: bool,
    dup_acks: u32,
    /// Gaps in this side's stream: [start, end) not yet seen (allocated at the first gap:
    /// most directions never have one). Boxed so that none costs 8 bytes, not a `Vec`'s 24.
    #[allow(clippy::box_collection)]
    holes: Option<Box<Vec<(SeqNum, SeqNum)>>>,
    /// Recently sent, not yet acknowledged segments: (start, end, first sent, retransmitted).
    unacked: SentLog,
    /// This side's first new data (not a retransmission): [`HalfFlow::first_data`].
    first_data: MaybePacket,
    pub data_bytes: u64,
    pub retransmissions: u64,
    pub max_payload: u32,
    /// This side's data segments carry the timestamp option (12 bytes on every segment).
    pub timestamps: bool,
    /// Fastest data → ACK time seen at the capture point for this side's data, and the data
    /// and ACK frames of that sample ([`HalfFlow::min_ack_rtt`]).
    min_ack_rtt: MaybeRtt,
}

impl HalfFlow {
    /// Highest sequence number sent (end of the highest byte, plus SYN/FIN).
    #[inline]
    pub fn next_seq(&self) -> Option<SeqNum> {
        self.sent.then_some(self.next_seq)
    }

    #[inline]
    fn set_next_seq(&mut self, n: SeqNum) {
        (self.next_seq, self.sent) = (n, true);
    }

    /// Highest sequence number the peer has acknowledged.
    #[inline]
    pub fn acked(&self) -> Option<SeqNum> {
        self.acked_seen.then_some(self.acked)
    }

    /// This side's first new data (not a retransmission).
    #[inline]
    pub fn first_data(&self) -> Option<PacketRef> {
        self.first_data.get()
    }

    /// The MSS this side's SYN announced.
    #[inline]
    pub fn mss(&self) -> Option<u16> {
        self.mss_seen.then_some(self.mss)
    }

    /// Whether this side's previous ACK carried the same ACK number and window.
    fn sent_ack_before(&self, ack: SeqNum, window: u16) -> bool {
        self.last_ack_seen && self.last_ack == ack && self.last_window == window
    }

    /// Fastest data → ACK time seen at the capture point for this side's data, and the data
    /// and ACK frames of that sample.
    pub fn min_ack_rtt(&self) -> Option<(Duration, [u64; 2])> {
        self.min_ack_rtt.get()
    }
}

/// At most this many unacknowledged segments are remembered per direction (bounded memory).
const MAX_REMEMBERED_SEGMENTS: usize = 4096;
/// At most this many sequence gaps are remembered per direction.
const MAX_HOLES: usize = 8;

/// Where a direction's RTT at the capture point comes from ([`Flow::rtt_towards_receiver`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RttFrom {
    None,
    /// The handshake's sample ([`Handshake::rtt_towards`]).
    Handshake,
    /// The fastest data → ACK sample ([`HalfFlow::min_ack_rtt`]).
    Data,
}

/// Lifecycle of a flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowState {
    Open,
    /// Both FINs or an RST seen; the flow has been handed to detectors as ended.
    Ended,
}

/// One TCP connection.
#[derive(Clone, Debug)]
pub struct Flow {
    /// 1-based, in order of first appearance in the capture.
    pub id: u64,
    pub client: Endpoint,
    pub server: Endpoint,
    /// Whether the roles come from the handshake (true) or from the port numbers (false).
    pub roles_from_handshake: bool,
    pub half: [HalfFlow; 2],
    pub handshake: Handshake,
    pub first: PacketRef,
    pub last_ts: Timestamp,
    pub packets: u64,
    pub state: FlowState,
    pub reset: bool,
    /// The side whose FIN or RST (not a refusal of a SYN) came first: the one that ended the
    /// connection. None while neither has.
    pub closed_by: Option<Direction>,
    /// The other side's close did not acknowledge the first one (its FIN or RST carried no
    /// ACK of the first side's FIN, or came after a RST, after which a stack sends nothing):
    /// both sides closed at once, each before it had the other's close, and which came first
    /// depends on where the capture was taken.
    pub closed_together: bool,
    /// Which sample [`Flow::rtt_sample_towards_receiver`] is, per direction: decided by
    /// [`Flow::on_segment`] whenever the handshake or a data → ACK sample changes (the only
    /// places either changes), and read from there (detectors ask for it several times per
    /// segment). Two bytes, where the samples themselves were 48 per open flow (issue 29).
    rtt_from: [RttFrom; 2],
    /// [`Flow::full_segment`] per direction, recomputed by [`Flow::on_segment`] whenever a
    /// SYN, the largest payload or the timestamp option changes it.
    full: [u32; 2],
}

impl Flow {
    pub fn new(id: u64, seg: &TcpSegment, pkt: PacketRef) -> Flow {
        let (client, server, from_hs) = if seg.flags.syn() && !seg.flags.ack() {
            (seg.src, seg.dst, true)
        } else if seg.flags.syn() && seg.flags.ack() {
            (seg.dst, seg.src, true)
        } else if is_server_port(seg.dst.port, seg.src.port)
            || (seg.dst.port == seg.src.port && seg.dst.ip < seg.src.ip)
        {
            (seg.src, seg.dst, false)
        } else {
            (seg.dst, seg.src, false)
        };
        Flow {
            id,
            client,
            server,
            roles_from_handshake: from_hs,
            half: [HalfFlow::default(), HalfFlow::default()],
            handshake: Handshake::default(),
            first: pkt,
            last_ts: pkt.ts,
            packets: 0,
            state: FlowState::Open,
            reset: false,
            closed_by: None,
            closed_together: false,
            rtt_from: [RttFrom::None; 2],
            full: [0; 2],
        }
        .with_full_segments()
    }

    fn with_full_segments(mut self) -> Flow {
        self.remeasure_full_segments();
        self
    }

    fn remeasure_full_segments(&mut self) {
        self.full = [
            self.measure_full_segment(Direction::ClientToServer),
            self.measure_full_segment(Direction::ServerToClient),
        ];
    }

    pub fn direction_of(&self, seg: &TcpSegment) -> Direction {
        if seg.src == self.client && seg.dst == self.server {
            Direction::ClientToServer
        } else {
            Direction::ServerToClient
        }
    }

    pub fn half(&self, dir: Direction) -> &HalfFlow {
        &self.half[dir.index()]
    }

    /// Round trip at the capture point towards the side that *receives* in `dir`
    /// (from this side's data passing the capture point to the peer's answer passing it).
    #[inline]
    /// A FIN or RST (not a refusal) from `dir`, with its ACK number when `has_ack`:
    /// [`Flow::closed_by`] and [`Flow::closed_together`].
    fn note_close(&mut self, dir: Direction, has_ack: bool, ack: SeqNum) {
        match self.closed_by {
            None => self.closed_by = Some(dir),
            Some(first) if first != dir => {
                // The first side's FIN is in its next sequence number; a RST is not.
                let peer = &self.half[first.index()];
                let answered =
                    has_ack && peer.fin_seen && peer.next_seq().is_some_and(|n| ack >= n);
                self.closed_together |= !answered;
            }
            Some(_) => {}
        }
    }

    pub fn rtt_towards_receiver(&self, dir: Direction) -> Option<Duration> {
        match self.rtt_from[dir.index()] {
            RttFrom::None => None,
            RttFrom::Handshake => self.handshake.rtt_towards(dir).map(|(rtt, _)| rtt),
            RttFrom::Data => self.half(dir).min_ack_rtt.nanos().map(Duration::from_nanos),
        }
    }

    /// [`Flow::rtt_towards_receiver`] and the two frames it was measured between (the sent
    /// segment and the answer), so that a claim built on it can be re-checked.
    #[inline]
    pub fn rtt_sample_towards_receiver(&self, dir: Direction) -> Option<(Duration, [u64; 2])> {
        match self.rtt_from[dir.index()] {
            RttFrom::None => None,
            RttFrom::Handshake => self.handshake.rtt_towards(dir),
            RttFrom::Data => self.half(dir).min_ack_rtt(),
        }
    }

    /// Where [`Flow::measure_rtt_towards_receiver`] takes its sample from.
    fn rtt_source(&self, dir: Direction) -> RttFrom {
        let from_hs = self.handshake.rtt_towards(dir);
        let from_data = self.half(dir).min_ack_rtt.nanos();
        match (from_hs, from_data) {
            (Some(h), Some(d)) if Duration::from_nanos(d) < h.0 => RttFrom::Data,
            (Some(_), _) => RttFrom::Handshake,
            (None, Some(_)) => RttFrom::Data,
            (None, None) => RttFrom::None,
        }
    }

    /// Computes [`Flow::rtt_sample_towards_receiver`] from the handshake and the data → ACK
    /// samples.
    #[cfg(test)]
    fn measure_rtt_towards_receiver(&self, dir: Direction) -> Option<(Duration, [u64; 2])> {
        let from_hs = self.handshake.rtt_towards(dir);
        let h = self.half(dir);
        let from_data = h.min_ack_rtt();
        match (from_hs, from_data) {
            (Some(h), Some(d)) => Some(if d.0 < h.0 { d } else { h }),
            (h, d) => h.or(d),
        }
    }

    /// The path RTT measured on the handshake alone (both halves), when it was captured
    /// cleanly. A data → ACK sample can include a delayed-ACK timer when every ACK of the
    /// flow was delayed, so a rule that must tell an immediate ACK from a delayed one needs
    /// this.
    pub fn handshake_rtt(&self) -> Option<Duration> {
        let a = self.handshake.rtt_towards(Direction::ClientToServer)?;
        let b = self.handshake.rtt_towards(Direction::ServerToClient)?;
        Some(a.0 + b.0)
    }

    /// The frames of the SYN and SYN-ACK that announced the MSS values, when captured.
    pub fn syn_frames(&self) -> Vec<u64> {
        let hs = &self.handshake;
        [hs.syn(), hs.syn_ack()]
            .into_iter()
            .flatten()
            .map(|p| p.frame)
            .collect()
    }

    /// The full round-trip time of the path, as far as the capture shows it.
    #[inline]
    pub fn rtt(&self) -> Option<Duration> {
        match (
            self.rtt_towards_receiver(Direction::ClientToServer),
            self.rtt_towards_receiver(Direction::ServerToClient),
        ) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        }
    }

    /// The payload of a full-sized segment sent in `dir` (PHYSICS §9): the smaller of the MSS
    /// values the two SYNs announced (each side's own MTU bounds what it sends, the peer's
    /// announcement bounds what it may send; a captured SYN without the option announces
    /// RFC 9293's default), less the option bytes this sender carries on
    /// every segment (12 for timestamps). Without an announced MSS: the largest payload seen,
    /// at least 536, or 1460 before any. A segment is *small* only below this.
    #[inline]
    pub fn full_segment(&self, dir: Direction) -> u32 {
        self.full[dir.index()]
    }

    /// Computes [`Flow::full_segment`] from the SYNs and the payloads seen.
    fn measure_full_segment(&self, dir: Direction) -> u32 {
        // The receiver's SYN bounds what the sender may send (RFC 9293's default when it
        // carries no option); the sender's own option, when present, reflects its MTU. A
        // sender's SYN without the option says nothing about what it can send.
        let own = self.half(dir).mss().map(u32::from);
        let announced = match (self.syn_mss(dir.reverse()), own) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let seen = self.half(dir).max_payload;
        match announced {
            Some(m) => {
                let options = if self.half(dir).timestamps { 12 } else { 0 };
                m.saturating_sub(options).max(1)
            }
            None if seen > 0 => seen.max(536),
            None => 1460,
        }
    }

    /// The MSS the side sending in `dir` announced in its SYN, when the SYN was captured: a
    /// SYN without the option announces the default (RFC 9293: 536 bytes over IPv4, 1220 over
    /// IPv6).
    fn syn_mss(&self, dir: Direction) -> Option<u32> {
        let h = self.half(dir);
        h.isn?;
        Some(match h.mss() {
            Some(m) => u32::from(m),
            None if self.client.ip.is_ipv6() => 1220,
            None => 536,
        })
    }

    /// Whether a payload of `len` bytes sent in `dir` fills a segment.
    #[inline]
    pub fn is_full(&self, dir: Direction, len: u32) -> bool {
        len >= self.full_segment(dir)
    }

    /// Processes one segment of this flow and classifies it.
    pub fn on_segment(&mut self, seg: &TcpSegment, pkt: PacketRef) -> SegmentEvent {
        let dir = self.direction_of(seg);
        let d = dir.index();
        let p = dir.reverse().index();
        self.packets += 1;
        self.last_ts = self.last_ts.max(pkt.ts);
        let flags = seg.flags;
        let seq = SeqNum(seg.seq);
        let ack = SeqNum(seg.ack);

        // Whether an input of the RTT samples changed (the handshake, a data → ACK sample),
        // and of the full segment sizes (a SYN, the largest payload, the timestamp option).
        let mut rtt_changed = false;
        let mut full_changed = flags.syn();

        // Handshake bookkeeping.
        if flags.syn() {
            rtt_changed = true;
            let h = &mut self.half[d];
            h.isn = Some(seq);
            if h.next_seq().is_none_or(|n| seq.plus(1) > n) {
                h.set_next_seq(seq.plus(1));
            }
            if let Some(mss) = seg.options.mss {
                (h.mss, h.mss_seen) = (mss, true);
            }
            h.window_scale = seg.options.window_scale;
            if !flags.ack() {
                if dir == Direction::ClientToServer {
                    self.handshake.on_syn(pkt);
                }
            } else {
                let answers = self.half[p].isn.is_none_or(|isn| ack == isn.plus(1));
                self.handshake.on_syn_ack(pkt, answers);
            }
        } else if dir == Direction::ClientToServer
            && flags.ack()
            && self.handshake.ack().is_none()
            && self.handshake.syn_ack().is_some()
            && self.half[p].isn.is_some_and(|isn| ack >= isn.plus(1))
        {
            self.handshake.on_ack(pkt);
            rtt_changed = true;
        }

        // The scale only applies when both SYNs carried it.
        let scale = match (self.half[d].window_scale, self.half[p].window_scale) {
            (Some(s), Some(_)) if !flags.syn() => Some(s.min(14)),
            _ => None,
        };
        let window = u64::from(seg.window) << scale.unwrap_or(0);
        let window_exact = self.half[d].isn.is_some() && self.half[p].isn.is_some();

        // ACK side: what this segment acknowledges of the peer's data.
        let mut newly_acked = 0u32;
        let mut dup_ack = false;
        let peer_in_flight_before = in_flight(&self.half[p]);
        if flags.ack() {
            let (before, after) = self.half.split_at_mut(1);
            let (me, peer) = if d == 0 {
                (&mut before[0], &mut after[0])
            } else {
                (&mut after[0], &mut before[0])
            };
            let prev_acked = peer.acked();
            match prev_acked {
                Some(a) if ack > a => {
                    newly_acked = ack.diff(a).min(u32::MAX as i64) as u32;
                    peer.acked = ack;
                }
                None => (peer.acked, peer.acked_seen) = (ack, true),
                _ => {}
            }
            if newly_acked > 0 || prev_acked.is_none() {
                peer.dup_acks = 0;
                // RTT sample from the newest fully acknowledged, never-retransmitted segment.
                let mut sample = None;
                while let Some(front) = peer.unacked.front() {
                    if front.end <= ack {
                        if !front.retransmitted {
                            sample = Some((pkt.ts.since(front.first.ts), front.first.frame));
                        }
                        peer.unacked.pop_front();
                    } else {
                        break;
                    }
                }
                if let Some((s, sent)) = sample {
                    if peer.min_ack_rtt().is_none_or(|(m, _)| s < m) {
                        peer.min_ack_rtt = Some((s, [sent, pkt.frame])).into();
                        rtt_changed = true;
                    }
                }
            } else if seg.payload_len == 0
                && !flags.syn()
                && !flags.fin()
                && !flags.rst()
                && me.sent_ack_before(ack, seg.window)
                && peer_in_flight_before > 0
            {
                dup_ack = true;
                peer.dup_acks += 1;
            }
            (me.last_ack, me.last_window, me.last_ack_seen) = (ack, seg.window, true);
        }
        let acks_all_peer_data = flags.ack()
            && match self.half[p].next_seq() {
                Some(n) => ack >= n || (self.half[p].fin_seen && ack.plus(1) >= n),
                None => true,
            };

        // Data side.
        let len = seg.payload_len;
        let in_flight_before = in_flight(&self.half[d]);
        let mut retrans = None;
        let kind = if flags.rst() {
            let client_isn = self.client_isn();
            if dir == Direction::ServerToClient
                && flags.ack()
                && self.is_attempt()
                && client_isn.is_some_and(|isn| ack == isn.plus(1))
            {
                // Refused: the flow stays open for a retry of the same SYN.
                self.handshake.on_refusal(pkt);
                rtt_changed = true;
            } else {
                self.reset = true;
                self.note_close(dir, flags.ack(), ack);
            }
            SegmentKind::Rst
        } else if flags.syn() {
            if flags.ack() {
                SegmentKind::SynAck
            } else {
                SegmentKind::Syn
            }
        } else if len > 0 {
            let h = &mut self.half[d];
            let start = seq;
            let end = seq.plus(len);
            let timestamps = h.timestamps || seg.options.timestamp.is_some();
            full_changed |= len > h.max_payload || timestamps != h.timestamps;
            h.max_payload = h.max_payload.max(len);
            h.timestamps = timestamps;
            match h.next_seq() {
                None => {
                    h.set_next_seq(end);
                    h.data_bytes += u64::from(len);
                    remember(h, start, end, pkt);
                    SegmentKind::NewData
                }
                Some(n) if start == n => {
                    h.set_next_seq(end);
                    h.data_bytes += u64::from(len);
                    remember(h, start, end, pkt);
                    SegmentKind::NewData
                }
                Some(n) if start > n => {
                    let holes = h.holes.get_or_insert_with(Box::default);
                    if holes.len() == MAX_HOLES {
                        holes.remove(0);
                    }
                    holes.push((n, start));
                    h.set_next_seq(end);
                    h.data_bytes += u64::from(len);
                    remember(h, start, end, pkt);
                    SegmentKind::DataAfterGap
                }
                Some(n) => {
                    let filled = h.holes.as_deref_mut().and_then(|holes| {
                        let i = holes.iter().position(|&(a, b)| start >= a && start < b)?;
                        let (a, b) = holes.remove(i);
                        if start > a {
                            holes.push((a, start));
                        }
                        if end < b {
                            holes.push((end, b));
                        }
                        Some(())
                    });
                    if filled.is_some() {
                        h.data_bytes += u64::from(len);
                        SegmentKind::OutOfOrder
                    } else {
                        h.retransmissions += 1;
                        if end > n {
                            h.data_bytes += end.diff(n) as u64;
                            h.set_next_seq(end);
                        }
                        let mut original = None;
                        let mut repeated = false;
                        for s in h.unacked.iter_mut() {
                            if s.start <= start && start < s.end {
                                original = Some(s.first);
                                repeated = s.retransmitted;
                                s.retransmitted = true;
                                break;
                            }
                        }
                        retrans = Some(RetransInfo {
                            original,
                            dup_acks_before: h.dup_acks,
                            is_tail: Some(end) >= h.next_seq(),
                            repeated,
                        });
                        SegmentKind::Retransmission
                    }
                }
            }
        } else if flags.fin() {
            SegmentKind::Fin
        } else {
            SegmentKind::PureAck
        };
        if matches!(
            kind,
            SegmentKind::NewData | SegmentKind::DataAfterGap | SegmentKind::OutOfOrder
        ) {
            self.half[d].first_data.get_or_insert(pkt);
        }
        if flags.fin() {
            let h = &mut self.half[d];
            let fin_end = seq.plus(len).plus(1);
            if h.next_seq().is_none_or(|n| fin_end > n) {
                h.set_next_seq(fin_end);
            }
            h.fin_seen = true;
            self.note_close(dir, flags.ack(), ack);
        }
        if full_changed {
            self.remeasure_full_segments();
        }
        if rtt_changed {
            self.rtt_from = [
                self.rtt_source(Direction::ClientToServer),
                self.rtt_source(Direction::ServerToClient),
            ];
        }

        SegmentEvent {
            pkt,
            dir,
            seq,
            ack,
            len,
            kind,
            fin: flags.fin(),
            syn: flags.syn(),
            rst: flags.rst(),
            psh: flags.psh(),
            has_ack: flags.ack(),
            window,
            window_exact,
            newly_acked,
            acks_all_peer_data,
            dup_ack,
            retrans,
            in_flight_before,
            tsval: seg.options.timestamp.map(|t| t.0),
        }
    }

    /// Whether `syn` (a SYN without ACK on this flow's endpoints) opens another connection
    /// rather than retrying this one's SYN: its ISN differs from the one this side sent, or
    /// this side was already past its SYN (it sent data, or the peer acknowledged something
    /// else) when no SYN of its was seen.
    pub fn is_new_connection(&self, syn: &TcpSegment) -> bool {
        self.syn_clue(self.direction_of(syn))
            .opens_another(SeqNum(syn.seq))
    }

    /// What the side sending in `dir` tells of a SYN it might send again
    /// ([`Flow::is_new_connection`]), in 8 bytes: all an ended flow keeps of its halves.
    pub fn syn_clue(&self, dir: Direction) -> SynClue {
        let h = self.half(dir);
        match (h.isn, h.next_seq(), h.acked()) {
            (Some(isn), _, _) => SynClue::Isn(isn),
            (None, Some(_), _) => SynClue::Sent,
            (None, None, Some(a)) => SynClue::Acked(a),
            (None, None, None) => SynClue::Nothing,
        }
    }

    /// A connection attempt still under way: a client SYN seen, the handshake not completed,
    /// no data, not reset (it may have been refused: the client may send its SYN again).
    pub fn is_attempt(&self) -> bool {
        self.handshake.first_syn().is_some()
            && self.handshake.ack().is_none()
            && !self.reset
            && self
                .half
                .iter()
                .all(|h| h.first_data.is_none() && !h.fin_seen)
    }

    /// An attempt the server refused (RST) and that nothing followed since.
    pub fn is_refused_attempt(&self) -> bool {
        self.handshake.refused().is_some() && self.is_attempt()
    }

    /// The client's ISN, when its SYN was seen.
    pub fn client_isn(&self) -> Option<SeqNum> {
        self.half(Direction::ClientToServer).isn
    }

    /// Both sides have closed, or the connection was reset.
    pub fn is_closed(&self) -> bool {
        self.reset || (self.half[0].fin_seen && self.half[1].fin_seen)
    }
}

/// Bytes sent and not yet acknowledged (0 until the peer's first ACK is seen).
fn in_flight(h: &HalfFlow) -> u64 {
    match (h.next_seq(), h.acked()) {
        (Some(n), Some(a)) if n > a => n.diff(a) as u64,
        _ => 0,
    }
}

fn remember(h: &mut HalfFlow, start: SeqNum, end: SeqNum, pkt: PacketRef) {
    if h.unacked.len() == MAX_REMEMBERED_SEGMENTS {
        h.unacked.pop_front();
    }
    h.unacked.push_back(SentSegment {
        start,
        end,
        first: pkt,
        retransmitted: false,
    });
}

/// A well-known port on one side and not the other decides the server.
fn is_server_port(candidate: u16, other: u16) -> bool {
    if candidate < 1024 && other >= 1024 {
        return true;
    }
    if other < 1024 && candidate >= 1024 {
        return false;
    }
    candidate < other
}

/// The key of a flow: its two endpoints in a canonical order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowKey(pub Endpoint, pub Endpoint);

impl FlowKey {
    /// The lower endpoint (address, then port) first. Looked up once per packet, so IPv4, the
    /// common case, compares and hashes as plain integers.
    #[inline(always)]
    pub fn of(seg: &TcpSegment) -> FlowKey {
        FlowKey::new(seg.src, seg.dst)
    }

    /// The key of the flow between `a` and `b`, whichever order they are given in.
    #[inline(always)]
    pub fn new(a: Endpoint, b: Endpoint) -> FlowKey {
        let a_first = match (a.ip, b.ip) {
            (IpAddr::V4(x), IpAddr::V4(y)) => (x.to_bits(), a.port) <= (y.to_bits(), b.port),
            _ => (a.ip, a.port) <= (b.ip, b.port),
        };
        if a_first {
            FlowKey(a, b)
        } else {
            FlowKey(b, a)
        }
    }
}

impl std::hash::Hash for FlowKey {
    /// Consistent with the derived `Eq`: equal keys write the same words.
    #[inline]
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        match (self.0.ip, self.1.ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                h.write_u64(u64::from(a.to_bits()) << 32 | u64::from(b.to_bits()))
            }
            (a, b) => {
                a.hash(h);
                b.hash(h);
            }
        }
        h.write_u32(u32::from(self.0.port) << 16 | u32::from(self.1.port));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{TcpFlags, TcpOptions};
    use std::net::{IpAddr, Ipv4Addr};

    fn ep(port: u16) -> Endpoint {
        Endpoint {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port,
        }
    }

    fn seg(src: u16, dst: u16, seq: u32, ack: u32, flags: u8, len: u32) -> TcpSegment {
        TcpSegment {
            src: ep(src),
            dst: ep(dst),
            seq,
            ack,
            flags: TcpFlags(flags),
            window: 512,
            payload_len: len,
            options: TcpOptions::default(),
        }
    }

    fn at(frame: u64, us: u64) -> PacketRef {
        PacketRef {
            frame,
            ts: Timestamp(us * 1000),
        }
    }

    const S: u8 = TcpFlags::SYN;
    const A: u8 = TcpFlags::ACK;
    const P: u8 = TcpFlags::PSH;

    #[test]
    fn roles_and_handshake_rtt() {
        let syn = seg(40000, 80, 1000, 0, S, 0);
        let mut f = Flow::new(1, &syn, at(1, 0));
        assert_eq!(f.client, ep(40000));
        f.on_segment(&syn, at(1, 0));
        let e = f.on_segment(&seg(80, 40000, 5000, 1001, S | A, 0), at(2, 300));
        assert_eq!(e.kind, SegmentKind::SynAck);
        assert_eq!(e.dir, Direction::ServerToClient);
        f.on_segment(&seg(40000, 80, 1001, 5001, A, 0), at(3, 400));
        assert_eq!(
            f.rtt_towards_receiver(Direction::ClientToServer),
            Some(Duration::from_micros(300))
        );
        assert_eq!(
            f.rtt_towards_receiver(Direction::ServerToClient),
            Some(Duration::from_micros(100))
        );
        assert_eq!(f.rtt(), Some(Duration::from_micros(400)));
    }

    /// `closed_by`: the first FIN or RST, never a refusal of a SYN. A refused connect retried
    /// and accepted, then closed by the client, was closed by the client; the server's FIN
    /// after it changes nothing.
    #[test]
    fn closed_by_is_the_first_fin_or_rst_not_a_refusal() {
        const F: u8 = TcpFlags::FIN;
        let syn = seg(40000, 80, 1000, 0, S, 0);
        let mut f = Flow::new(1, &syn, at(1, 0));
        f.on_segment(&syn, at(1, 0));
        f.on_segment(&seg(80, 40000, 0, 1001, TcpFlags::RST | A, 0), at(2, 100));
        assert_eq!(f.closed_by, None, "a refusal");
        f.on_segment(&syn, at(3, 3_000_000));
        f.on_segment(&seg(80, 40000, 5000, 1001, S | A, 0), at(4, 3_000_300));
        f.on_segment(&seg(40000, 80, 1001, 5001, A, 0), at(5, 3_000_400));
        f.on_segment(&seg(40000, 80, 1001, 5001, A | P, 10), at(6, 3_000_500));
        f.on_segment(&seg(80, 40000, 5001, 1011, A | P, 20), at(7, 3_000_600));
        assert_eq!(f.closed_by, None);
        f.on_segment(&seg(40000, 80, 1011, 5021, F | A, 0), at(8, 3_000_700));
        assert_eq!(f.closed_by, Some(Direction::ClientToServer));
        f.on_segment(&seg(80, 40000, 5021, 1012, F | A, 0), at(9, 3_000_800));
        assert_eq!(f.closed_by, Some(Direction::ClientToServer));
        assert!(
            !f.closed_together,
            "the server's FIN acknowledged the client's"
        );

        // The server's RST after its answer.
        let mut f = Flow::new(1, &syn, at(1, 0));
        f.on_segment(&syn, at(1, 0));
        f.on_segment(&seg(80, 40000, 5000, 1001, S | A, 0), at(2, 300));
        f.on_segment(&seg(40000, 80, 1001, 5001, A | P, 10), at(3, 500));
        f.on_segment(
            &seg(80, 40000, 5001, 1011, TcpFlags::RST | A, 0),
            at(4, 600),
        );
        assert_eq!(f.closed_by, Some(Direction::ServerToClient));
        assert!(!f.closed_together);

        // FINs that cross: the client's acknowledges only the server's data, not its FIN.
        let mut f = Flow::new(1, &syn, at(1, 0));
        f.on_segment(&syn, at(1, 0));
        f.on_segment(&seg(80, 40000, 5000, 1001, S | A, 0), at(2, 300));
        f.on_segment(&seg(40000, 80, 1001, 5001, A | P, 10), at(3, 500));
        f.on_segment(&seg(80, 40000, 5001, 1011, A | P, 20), at(4, 600));
        f.on_segment(&seg(80, 40000, 5021, 1011, F | A, 0), at(5, 700));
        f.on_segment(&seg(40000, 80, 1011, 5021, F | A, 0), at(6, 710));
        assert_eq!(f.closed_by, Some(Direction::ServerToClient));
        assert!(f.closed_together);
    }

    /// The memoised RTT samples equal a fresh measurement after every segment, through a
    /// handshake, data → ACK samples (a faster one replacing a slower one), a SYN retry and an
    /// RST: every place that changes an input recomputes them.
    #[test]
    fn rtt_samples_follow_every_change_of_their_inputs() {
        let steps = [
            (seg(40000, 80, 1000, 0, S, 0), 0),
            (seg(40000, 80, 1000, 0, S, 0), 1_000_000), // the SYN again: Karn
            (seg(80, 40000, 5000, 1001, S | A, 0), 1_000_300),
            (seg(40000, 80, 1001, 5001, A, 0), 1_000_400),
            (seg(40000, 80, 1001, 5001, A | P, 10), 1_001_000),
            (seg(80, 40000, 5001, 1011, A, 0), 1_041_000),
            (seg(40000, 80, 1011, 5001, A | P, 10), 1_050_000),
            (seg(80, 40000, 5001, 1021, A, 0), 1_050_200),
            (seg(80, 40000, 5001, 1021, A | P, 20), 1_060_000),
            (seg(40000, 80, 1021, 5021, A, 0), 1_060_050),
            (seg(80, 40000, 5021, 1021, TcpFlags::RST, 0), 1_070_000),
        ];
        let mut f = Flow::new(1, &steps[0].0, at(1, 0));
        let mut seen = Vec::new();
        for (i, (s, us)) in steps.iter().enumerate() {
            f.on_segment(s, at(i as u64 + 1, *us));
            for dir in [Direction::ClientToServer, Direction::ServerToClient] {
                let fresh = f.measure_rtt_towards_receiver(dir);
                assert_eq!(f.rtt_sample_towards_receiver(dir), fresh, "after step {i}");
                seen.push(fresh);
            }
        }
        assert!(seen.contains(&Some((Duration::from_micros(50), [9, 10]))));
        assert!(seen.contains(&Some((Duration::from_micros(200), [7, 8]))));
    }

    /// The memoised full segment sizes equal a fresh computation after every segment: before
    /// any SYN (largest payload seen), after each SYN's MSS, once timestamps appear.
    #[test]
    fn full_segments_follow_syns_payloads_and_timestamps() {
        let with = |mut s: TcpSegment, mss: Option<u16>, ts: bool| {
            s.options.mss = mss;
            s.options.timestamp = ts.then_some((1, 2));
            s
        };
        let steps = [
            with(seg(40000, 80, 1, 1, A | P, 700), None, false),
            with(seg(40000, 80, 701, 1, A | P, 900), None, false),
            with(seg(40000, 80, 5000, 0, S, 0), Some(1460), true),
            with(seg(80, 40000, 9000, 5001, S | A, 0), Some(1400), true),
            with(seg(40000, 80, 5001, 9001, A | P, 100), None, true),
            with(seg(80, 40000, 9001, 5101, A | P, 1388), None, true),
        ];
        let mut f = Flow::new(1, &steps[0], at(1, 0));
        let mut seen = Vec::new();
        for (i, s) in steps.iter().enumerate() {
            f.on_segment(s, at(i as u64 + 1, 10 * i as u64));
            for dir in [Direction::ClientToServer, Direction::ServerToClient] {
                let fresh = f.measure_full_segment(dir);
                assert_eq!(f.full_segment(dir), fresh, "after step {i}");
                seen.push(fresh);
            }
        }
        assert_eq!(&seen[..4], &[700, 1460, 900, 1460]);
        assert_eq!(&seen[seen.len() - 2..], &[1388, 1388]);
    }

    #[test]
    fn flow_keys_are_the_same_both_ways_and_hash_alike() {
        use std::hash::BuildHasher;
        let hasher = std::hash::BuildHasherDefault::<crate::fxhash::FxHasher>::default();
        let v6 = |port| Endpoint {
            ip: "2001:db8::1".parse().expect("v6"),
            port,
        };
        let pairs = [
            (ep(40000), ep(80)),
            (ep(80), ep(80)),
            (
                Endpoint {
                    ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
                    port: 1,
                },
                ep(2),
            ),
            (v6(40000), v6(80)),
        ];
        for (a, b) in pairs {
            let mut s = seg(0, 0, 1, 1, A, 0);
            (s.src, s.dst) = (a, b);
            let k1 = FlowKey::of(&s);
            (s.src, s.dst) = (b, a);
            let k2 = FlowKey::of(&s);
            assert_eq!(k1, k2);
            assert!((k1.0.ip, k1.0.port) <= (k1.1.ip, k1.1.port), "{k1:?}");
            assert_eq!(hasher.hash_one(k1), hasher.hash_one(k2));
        }
    }

    #[test]
    fn roles_without_handshake_use_ports() {
        let f = Flow::new(1, &seg(6379, 51000, 1, 1, A, 10), at(1, 0));
        assert_eq!(f.server, ep(6379));
        let f = Flow::new(1, &seg(2000, 443, 1, 1, A, 10), at(1, 0));
        assert_eq!(f.server, ep(443));
    }

    #[test]
    fn classifies_new_retransmitted_gap_and_out_of_order() {
        let first = seg(40000, 80, 100, 1, A | P, 10);
        let mut f = Flow::new(1, &first, at(1, 0));
        assert_eq!(f.on_segment(&first, at(1, 0)).kind, SegmentKind::NewData);
        let e = f.on_segment(&seg(40000, 80, 110, 1, A | P, 10), at(2, 10));
        assert_eq!(e.kind, SegmentKind::NewData);
        assert_eq!(e.in_flight_before, 0, "nothing acked yet is not counted");
        // Gap: 120..130 missing.
        let e = f.on_segment(&seg(40000, 80, 130, 1, A | P, 10), at(3, 20));
        assert_eq!(e.kind, SegmentKind::DataAfterGap);
        let e = f.on_segment(&seg(40000, 80, 120, 1, A | P, 10), at(4, 30));
        assert_eq!(e.kind, SegmentKind::OutOfOrder);
        let e = f.on_segment(&seg(40000, 80, 100, 1, A | P, 10), at(5, 200_000));
        assert_eq!(e.kind, SegmentKind::Retransmission);
        let r = e.retrans.unwrap();
        assert_eq!(r.original.unwrap().frame, 1);
        assert!(!r.is_tail);
    }

    #[test]
    fn ack_tracking_across_sequence_wrap() {
        let isn = u32::MAX - 5;
        let first = seg(40000, 80, isn, 1, A | P, 10);
        let mut f = Flow::new(1, &first, at(1, 0));
        f.on_segment(&seg(80, 40000, 1, isn, A, 0), at(1, 0));
        f.on_segment(&first, at(2, 0));
        let e = f.on_segment(&seg(80, 40000, 1, isn.wrapping_add(10), A, 0), at(3, 50));
        assert_eq!(e.newly_acked, 10);
        assert!(e.acks_all_peer_data);
        assert_eq!(
            f.half(Direction::ClientToServer)
                .min_ack_rtt()
                .map(|(rtt, _)| rtt),
            Some(Duration::from_micros(50))
        );
        let e = f.on_segment(
            &seg(40000, 80, isn.wrapping_add(10), 1, A | P, 4),
            at(4, 60),
        );
        assert_eq!(e.kind, SegmentKind::NewData);
    }

    #[test]
    fn duplicate_acks_counted_before_fast_retransmit() {
        let mut f = Flow::new(1, &seg(40000, 80, 0, 1, A, 0), at(1, 0));
        f.on_segment(&seg(80, 40000, 1, 0, A, 0), at(1, 0));
        for i in 0..5u32 {
            f.on_segment(
                &seg(40000, 80, i * 100, 1, A, 100),
                at(2 + u64::from(i), 10),
            );
        }
        f.on_segment(&seg(80, 40000, 1, 100, A, 0), at(10, 100));
        for i in 0..3 {
            let e = f.on_segment(&seg(80, 40000, 1, 100, A, 0), at(11 + i, 110));
            assert!(e.dup_ack);
        }
        let e = f.on_segment(&seg(40000, 80, 100, 1, A, 100), at(20, 120));
        let r = e.retrans.unwrap();
        assert_eq!(r.dup_acks_before, 3);
        assert_eq!(r.original.unwrap().frame, 3);
    }

    #[test]
    fn syn_retries_before_and_after_the_syn_ack() {
        // Unanswered for 1 s, then answered: the retry is a SYN loss.
        let syn = seg(40000, 80, 1000, 0, S, 0);
        let mut f = Flow::new(1, &syn, at(1, 0));
        f.on_segment(&syn, at(1, 0));
        f.on_segment(&syn, at(2, 1_000_000));
        f.on_segment(&seg(80, 40000, 5000, 1001, S | A, 0), at(3, 1_000_300));
        f.on_segment(&seg(40000, 80, 1001, 5001, A, 0), at(4, 1_000_400));
        let hs = &f.handshake;
        assert!(hs.completed());
        let (first, retry) = hs.unanswered_syn_retry().unwrap();
        assert_eq!((first.frame, retry.frame), (1, 2));
        assert!(hs.lost_syn_ack().is_none());

        // Answered at once, sent again anyway, and the SYN-ACK after the retry is taken: the
        // first SYN-ACK was lost; the SYN was not.
        let mut f = Flow::new(1, &syn, at(1, 0));
        f.on_segment(&syn, at(1, 0));
        f.on_segment(&seg(80, 40000, 5000, 1001, S | A, 0), at(2, 300));
        f.on_segment(&syn, at(3, 1_000_000));
        f.on_segment(&seg(80, 40000, 5000, 1001, S | A, 0), at(4, 1_000_300));
        f.on_segment(&seg(40000, 80, 1001, 5001, A, 0), at(5, 1_000_400));
        let hs = &f.handshake;
        assert!(hs.unanswered_syn_retry().is_none());
        let (answered, syn_ack, retry) = hs.lost_syn_ack().unwrap();
        assert_eq!((answered.frame, syn_ack.frame, retry.frame), (1, 2, 3));
        assert_eq!(
            f.rtt_towards_receiver(Direction::ServerToClient),
            None,
            "Karn: which SYN-ACK the ACK answers is ambiguous"
        );

        // The client ACKs the first SYN-ACK just after its retry: it was late, not lost.
        let mut f = Flow::new(1, &syn, at(1, 0));
        f.on_segment(&syn, at(1, 0));
        f.on_segment(&seg(80, 40000, 5000, 1001, S | A, 0), at(2, 865_000));
        f.on_segment(&syn, at(3, 997_000));
        f.on_segment(&seg(40000, 80, 1001, 5001, A, 0), at(4, 1_000_000));
        assert!(f.handshake.lost_syn_ack().is_none());
        assert!(f.handshake.unanswered_syn_retry().is_none());
    }

    #[test]
    fn a_syn_ack_for_another_isn_does_not_answer() {
        let syn = seg(40000, 80, 1000, 0, S, 0);
        let mut f = Flow::new(1, &syn, at(1, 0));
        f.on_segment(&syn, at(1, 0));
        f.on_segment(&seg(80, 40000, 5000, 77, S | A, 0), at(2, 300));
        assert!(f.handshake.syn_ack().is_none());
        f.on_segment(&syn, at(3, 1_000_000));
        assert!(f.handshake.unanswered_syn_retry().is_some());
    }

    #[test]
    fn new_connection_or_retry_on_the_same_endpoints() {
        let syn = seg(40000, 80, 1000, 0, S, 0);
        let mut f = Flow::new(1, &syn, at(1, 0));
        f.on_segment(&syn, at(1, 0));
        assert!(!f.is_new_connection(&syn), "same ISN: a retry");
        assert!(f.is_new_connection(&seg(40000, 80, 2000, 0, S, 0)));
        assert!(f.is_attempt());

        // Seen from its SYN-ACK only: the client's SYN that the SYN-ACK acknowledges is a
        // retry of this connection; another is not.
        let sa = seg(80, 40000, 5000, 1001, S | A, 0);
        let mut f = Flow::new(1, &sa, at(1, 0));
        f.on_segment(&sa, at(1, 0));
        assert!(!f.is_new_connection(&syn));
        assert!(f.is_new_connection(&seg(40000, 80, 3000, 0, S, 0)));

        // Picked up mid-stream: any SYN from a side that already sent data is new.
        let data = seg(40000, 80, 1500, 1, A | P, 10);
        let mut f = Flow::new(1, &data, at(1, 0));
        f.on_segment(&data, at(1, 0));
        assert!(f.is_new_connection(&seg(40000, 80, 1499, 0, S, 0)));
        assert!(!f.is_attempt());
    }
}
