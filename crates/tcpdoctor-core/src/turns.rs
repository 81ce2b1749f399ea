//! Who talks when: turns and exchanges.
//!
//! Rules:
//! 1. A *turn* is a run of new data one side sends before the other side sends new data.
//!    Pure ACKs, window updates and retransmissions never end a turn.
//! 2. An *exchange* is a client→server turn (the request) followed by the server→client turn
//!    (the response). Its latency is first request byte to last response byte, at the capture
//!    point. A server turn with no request before it (a greeting) is not an exchange.
//! 3. Inside a turn, a silence of at least [`PAUSE_MIN`] between two data segments is a
//!    *pause*. A pause remembers the *first* segment the peer sent during it that acknowledged
//!    everything the sender had sent, whether that segment was a pure ACK (not a FIN or RST),
//!    and the oldest of the sender's segments it was the first to acknowledge — the facts that
//!    tell a segment held by Nagle's algorithm (released by that ACK) from a sender that was
//!    simply busy, or one whose data was acknowledged long before it wrote more.

use std::time::Duration;

use crate::flow::{Direction, MaybePacket, PacketRef, SegmentEvent, SegmentKind};
use crate::seq::SeqNum;
use crate::time::Timestamp;

/// Silences inside a turn shorter than this are not recorded as pauses.
pub const PAUSE_MIN: Duration = Duration::from_millis(1);
/// Payload sizes remembered per turn, for examples.
pub const SIZES_KEPT: usize = 16;
/// Pauses remembered per turn (the first ones).
pub const PAUSES_KEPT: usize = 8;
/// A copy of already-sent data this soon after it is a capture duplicate, not a retransmission.
pub const DUPLICATE: Duration = Duration::from_millis(1);

/// A data segment inside a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DataRef {
    pub pkt: PacketRef,
    pub len: u32,
    /// Sequence number just after this segment's payload.
    pub end: SeqNum,
    /// What it acknowledged of the peer's data (its ACK number; 0 without the ACK flag).
    pub ack: SeqNum,
}

/// The first segment from the peer that acknowledged everything the sender had sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckRef {
    pub pkt: PacketRef,
    /// An ACK and nothing else: no payload, no FIN, RST or SYN (a delayed ACK's shape).
    pub pure: bool,
    /// The sender's data this ACK was the first to acknowledge.
    pub acked: Unacked,
}

/// A silence inside a turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pause {
    /// Last data segment before the silence.
    pub before: DataRef,
    /// First data segment after it.
    pub after: DataRef,
    /// The first segment the peer sent during the silence that acknowledged everything the
    /// sender had sent, if any (an ACK before the silence began does not count: then the
    /// silence began with nothing in flight).
    pub ack: Option<AckRef>,
    /// The peer's receive window was closed (zero, or too small for the data that followed)
    /// when the silence began or during it: flow control, not Nagle, held the data.
    pub window_limited: bool,
    /// The sender retransmitted during the silence (a copy captured within [`DUPLICATE`] of
    /// the data before it is the capture seeing one packet twice, and does not count): a loss,
    /// not a hold.
    pub retransmitted: bool,
    /// The data the sender sent since its previous pause (or the turn's start), through
    /// `before`: a *flight*, what a congestion window let out in one go.
    pub flight: Flight,
}

/// The segments of a turn between two pauses, and the first ACK of any of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flight {
    /// Its first data segment.
    pub first: PacketRef,
    /// Data segments (new data) and their bytes.
    pub segments: u32,
    pub bytes: u64,
    /// The first segment from the peer that acknowledged some of the sender's data since the
    /// flight began (before the pause or during it), if any.
    pub first_ack: Option<PacketRef>,
}

impl Pause {
    pub fn gap(&self) -> Duration {
        self.after.pkt.ts.since(self.before.pkt.ts)
    }
}

/// A run of data from one side.
///
/// Boxed in its tracker (two per open flow of request/response traffic: issue 29 counts their
/// bytes): 88 bytes. The turn before it is not copied into it: a response's request is told
/// beside it ([`crate::detect::FlowView::answers`]), and a request's previous response by its
/// exchange ([`Exchange::previous_response`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Turn {
    pub dir: Direction,
    pub first: PacketRef,
    pub last: PacketRef,
    pub bytes: u64,
    /// Segments carrying new data (retransmissions excluded).
    pub segments: u32,
    pub retransmissions: u32,
    /// Payload sizes of the first [`SIZES_KEPT`] segments.
    pub sizes: Sizes,
    pub pauses: Pauses,
    /// The flow had a turn before this one (the other side's).
    follows: bool,
    /// Sequence numbers of its first byte and just past its last new byte.
    pub seq_first: SeqNum,
    pub seq_end: SeqNum,
    /// The ACK number of the other side's data segment that ended it, when one did
    /// (`ended_by_ack`: an `Option<SeqNum>` in 5 bytes, not 8).
    ended_by_ack: SeqNum,
    ended_by_ack_seen: bool,
}

/// Where a turn started and ended, and how big it was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TurnBrief {
    pub first: PacketRef,
    pub last: PacketRef,
    pub bytes: u64,
    pub segments: u32,
}

impl Turn {
    fn start(dir: Direction, ev: &SegmentEvent, follows: bool) -> Turn {
        Turn {
            dir,
            first: ev.pkt,
            last: ev.pkt,
            bytes: 0,
            segments: 0,
            retransmissions: 0,
            sizes: Sizes::default(),
            pauses: Pauses::default(),
            follows,
            seq_first: ev.seq,
            seq_end: ev.seq,
            ended_by_ack: SeqNum(0),
            ended_by_ack_seen: false,
        }
    }

    /// Makes this (ended) turn a new one, as [`Turn::start`] would, in place: the sizes are
    /// not rewritten and the pauses keep their allocation.
    fn restart(&mut self, dir: Direction, ev: &SegmentEvent, follows: bool) {
        self.dir = dir;
        self.first = ev.pkt;
        self.last = ev.pkt;
        self.bytes = 0;
        self.segments = 0;
        self.retransmissions = 0;
        self.sizes.clear();
        self.pauses.clear();
        self.follows = follows;
        self.seq_first = ev.seq;
        self.seq_end = ev.seq;
        self.ended_by_ack = SeqNum(0);
        self.ended_by_ack_seen = false;
    }

    /// Whether the flow had a turn before this one (the other side's): false for its first.
    pub fn follows_a_turn(&self) -> bool {
        self.follows
    }

    /// The ACK number of the other side's data segment that ended it, when one did.
    pub fn ended_by_ack(&self) -> Option<SeqNum> {
        self.ended_by_ack_seen.then_some(self.ended_by_ack)
    }

    /// The other side's data segment that ended this turn acknowledged a first part of it and
    /// not the rest: the peer spoke (answered) before the turn was whole, so the turn held at
    /// least two messages.
    pub fn answered_in_part(&self) -> bool {
        self.ended_by_ack()
            .is_some_and(|a| a.diff(self.seq_first) > 0 && self.seq_end.diff(a) > 0)
    }

    pub fn brief(&self) -> TurnBrief {
        TurnBrief {
            first: self.first,
            last: self.last,
            bytes: self.bytes,
            segments: self.segments,
        }
    }
}

/// A turn's pauses (at most [`PAUSES_KEPT`]), read as a slice, and the count of those past
/// it. Most turns of request/response traffic have none, and every open flow holds one or two
/// turns: none costs 8 bytes, not a `Vec`'s 24, and the count lives in the allocation (a
/// pause is dropped only once [`PAUSES_KEPT`] are kept), so that a turn is 88 bytes, which
/// glibc's malloc keeps in a 96-byte chunk rather than 112 (mimalloc, the tcpdoctor
/// binary's allocator since, in its 96-byte class either way).
#[derive(Clone, Debug, Default)]
pub struct Pauses(Option<Box<PauseLog>>);

#[derive(Clone, Debug, Default)]
struct PauseLog {
    kept: Vec<Pause>,
    dropped: u32,
}

impl Pauses {
    fn push(&mut self, p: Pause) {
        self.0.get_or_insert_with(Box::default).kept.push(p);
    }

    /// Counts a pause past the kept ones.
    fn drop_one(&mut self) {
        let log = self.0.get_or_insert_with(Box::default);
        log.dropped = log.dropped.saturating_add(1);
    }

    /// Pauses beyond [`PAUSES_KEPT`] that were counted but not kept.
    pub fn dropped(&self) -> u32 {
        self.0.as_ref().map_or(0, |log| log.dropped)
    }

    /// Empties it, keeping its allocation for the turn restarted in its place.
    fn clear(&mut self) {
        if let Some(log) = &mut self.0 {
            log.kept.clear();
            log.dropped = 0;
        }
    }
}

impl std::ops::Deref for Pauses {
    type Target = [Pause];

    fn deref(&self) -> &[Pause] {
        self.0.as_deref().map_or(&[], |log| &log.kept)
    }
}

impl PartialEq for Pauses {
    fn eq(&self, other: &Pauses) -> bool {
        **self == **other && self.dropped() == other.dropped()
    }
}

impl Eq for Pauses {}

/// Payload sizes a turn keeps inline before it allocates room for all [`SIZES_KEPT`].
const SIZES_INLINE: usize = 3;

/// The first payload sizes of a turn: up to [`SIZES_INLINE`] inline (most turns of
/// request/response traffic are a segment or a few, and every open flow holds one or two
/// turns), then all [`SIZES_KEPT`] in one allocation, kept when the turn is restarted. Only
/// the first `len` are meaningful (a restarted turn leaves older ones behind): equality
/// compares those. The count sits beside the enum's tag, and three sizes fit beside them in
/// the 16 bytes the boxed form takes: 16 bytes, not 32 (a turn is then 88 bytes, not
/// 104).
#[derive(Clone, Debug)]
pub struct Sizes(SizeBuf);

#[derive(Clone, Debug)]
enum SizeBuf {
    Inline {
        len: u8,
        sizes: [u32; SIZES_INLINE],
    },
    Heap {
        len: u8,
        all: Box<[u32; SIZES_KEPT]>,
    },
}

impl Default for Sizes {
    fn default() -> Sizes {
        Sizes(SizeBuf::Inline {
            len: 0,
            sizes: [0; SIZES_INLINE],
        })
    }
}

impl Sizes {
    /// Keeps `size` if fewer than [`SIZES_KEPT`] are kept already.
    pub fn push(&mut self, size: u32) {
        match &mut self.0 {
            SizeBuf::Inline { len, sizes } if usize::from(*len) < SIZES_INLINE => {
                sizes[usize::from(*len)] = size;
                *len += 1;
            }
            SizeBuf::Inline { len, sizes } => {
                let mut all = Box::new([0; SIZES_KEPT]);
                all[..SIZES_INLINE].copy_from_slice(sizes);
                all[SIZES_INLINE] = size;
                self.0 = SizeBuf::Heap { len: *len + 1, all };
            }
            SizeBuf::Heap { len, all } if usize::from(*len) < SIZES_KEPT => {
                all[usize::from(*len)] = size;
                *len += 1;
            }
            SizeBuf::Heap { .. } => {}
        }
    }

    /// Empties it, keeping its allocation for the turn restarted in its place.
    fn clear(&mut self) {
        match &mut self.0 {
            SizeBuf::Inline { len, .. } | SizeBuf::Heap { len, .. } => *len = 0,
        }
    }
}

impl PartialEq for Sizes {
    fn eq(&self, other: &Sizes) -> bool {
        **self == **other
    }
}

impl Eq for Sizes {}

impl std::ops::Deref for Sizes {
    type Target = [u32];

    fn deref(&self) -> &[u32] {
        match &self.0 {
            SizeBuf::Inline { len, sizes } => &sizes[..usize::from(*len)],
            SizeBuf::Heap { len, all } => &all[..usize::from(*len)],
        }
    }
}

/// A request turn and its response turn (borrowed from the tracker: turns are never copied).
#[derive(Clone, Copy, Debug)]
pub struct Exchange<'a> {
    /// 0-based position among the flow's exchanges.
    pub index: u32,
    pub request: &'a Turn,
    pub response: &'a Turn,
    /// Idle time between the previous exchange's last response byte and this request.
    pub idle_before: Option<Duration>,
    /// The previous exchange's response's last segment (the turn just before this request),
    /// when there was one: `idle_before` is counted from it.
    pub previous_response: Option<PacketRef>,
}

impl Exchange<'_> {
    /// First request byte to last response byte.
    pub fn latency(&self) -> Duration {
        self.response.last.ts.since(self.request.first.ts)
    }

    pub fn start(&self) -> Timestamp {
        self.request.first.ts
    }
}

/// What ended with the last segment (or [`TurnTracker::finish`]); read it from the tracker
/// with [`TurnTracker::ended_turn`] and [`TurnTracker::ended_exchange`] before the next call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ended {
    pub turn: bool,
    pub exchange: bool,
}

/// Where the turn that just ended lives (turns are moved, never cloned, on the hot path).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Last {
    #[default]
    Nothing,
    /// A client→server turn, now waiting in `request` for its response.
    Request,
    /// A server→client turn with no request before it, in `response`.
    Unsolicited,
    /// A server→client turn, in `response`, that completed an exchange with `request`.
    Exchange,
}

/// The talker's data since the peer last acknowledged everything.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unacked {
    /// The oldest segment (its arrival is when the receiver's delayed-ACK timer could start,
    /// at the earliest).
    pub oldest: PacketRef,
    /// Segments, the smallest of them, and their bytes (a receiver ACKs at once, without a
    /// timer, once more than one full segment has arrived since its last ACK).
    pub segments: u32,
    pub smallest: u32,
    pub bytes: u64,
}

/// Builds turns and exchanges for one flow.
///
/// Every open flow holds one (issue 29 counts its bytes: 176, not 304), so what it keeps is
/// kept compactly: what a turn in progress needs is stored bare, valid while a turn is active
/// (the talker's last data segment is the active turn's `last`; the flight in progress began
/// with that turn); the talker's unacknowledged data and the ACK of all of it are one field,
/// as they never coexist; small options are values beside bits of [`Flags`], slots are bytes.
#[derive(Debug)]
pub struct TurnTracker {
    /// Boxed: a turn is 88 bytes and a flow has at most two alive at once (a request
    /// waiting for its response, and that response), so an open flow carries two allocations
    /// rather than three turns inline, and an ended one none.
    slot: [Option<Box<Turn>>; 3],
    /// The slot of the turn in progress, or [`NO_SLOT`]. Turns are built in place and stay in
    /// their slot once finished, so no turn is ever moved or copied: slots 0 and 1 take
    /// client→server turns in alternation (a new request must not overwrite the one whose
    /// exchange the caller is about to read), slot 2 takes server→client turns.
    active: u8,
    /// The slot of the latest client→server turn.
    req: u8,
    /// The slot of the request of the last completed exchange.
    exchange_req: u8,
    /// The slot of the last turn that ended, or [`NO_SLOT`] (none has: the next turn is the
    /// flow's first).
    last_ended: u8,
    last: Last,
    flags: Flags,
    exchanges: u32,
    /// The talker's last data segment, while a turn is active: its length, the sequence
    /// number just after it and its ACK number (its packet is the active turn's `last`).
    last_len: u32,
    last_end: SeqNum,
    last_ack: SeqNum,
    /// What the side that is not talking did about the talker's data since its last data.
    acking: Acking,
    /// The flight in progress, while a turn is active: its first segment, the turn's segments
    /// and bytes before it, and the first peer segment acknowledging new data since it began.
    flight_first: PacketRef,
    flight_segments: u32,
    flight_bytes: u64,
    flight_ack: MaybePacket,
    /// Right edge of the receive window each side advertised (indexed by the direction of the
    /// data it limits), when the window is known exactly ([`Flags::EDGE`]).
    edge: [SeqNum; 2],
    /// The edge that limited the talker when it sent its last data segment
    /// ([`Flags::EDGE_AT_LAST_DATA`]).
    edge_at_last_data: SeqNum,
    /// The last segment of the latest response that completed an exchange, once the next
    /// response begins ([`Flags::RESPONSE_END`]; until then the response is in its slot,
    /// [`Flags::RESPONSE_IN_SLOT`]): what the next exchange's idle time is counted from.
    last_response_end: PacketRef,
}

/// No slot: no turn active, or none ended yet.
const NO_SLOT: u8 = u8::MAX;

/// The tracker's booleans, and which of its optional values are present.
#[derive(Clone, Copy, Debug, Default)]
struct Flags(u8);

impl Flags {
    /// The side that is not talking advertised a zero window since the talker's last data.
    const ZERO_WINDOW: u8 = 1;
    /// The talker retransmitted since its last data (capture duplicates aside).
    const RETRANSMIT: u8 = 1 << 1;
    /// The request (client→server slot) still waits for its response.
    const REQUEST_PENDING: u8 = 1 << 2;
    /// `edge[0]`, `edge[1]` are known (`EDGE << i`).
    const EDGE: u8 = 1 << 3;
    const EDGE_AT_LAST_DATA: u8 = 1 << 5;
    /// The server→client slot holds a response that completed an exchange: its end becomes
    /// `last_response_end` when the next response starts there (until then the exchange it
    /// completed can still be read, with the end before it).
    const RESPONSE_IN_SLOT: u8 = 1 << 6;
    const RESPONSE_END: u8 = 1 << 7;

    fn has(self, f: u8) -> bool {
        self.0 & f != 0
    }

    fn set(&mut self, f: u8, on: bool) {
        if on {
            self.0 |= f;
        } else {
            self.0 &= !f;
        }
    }

    /// `value` when `f` is set.
    fn get<T>(self, f: u8, value: T) -> Option<T> {
        self.has(f).then_some(value)
    }
}

/// The talker's data since the peer last acknowledged all of it, or that ACK: an ACK of
/// everything takes the unacknowledged data it acknowledged, and new data clears the ACK, so
/// the two are never both there.
#[derive(Clone, Copy, Debug, Default)]
enum Acking {
    /// Nothing sent since the turn began, or since the ACK below was taken.
    #[default]
    Nothing,
    /// The talker's data not yet acknowledged in full.
    Unacked(Unacked),
    /// The first segment from the side that is not talking, since the talker's last data,
    /// that acknowledged everything the talker had sent.
    Acked(AckRef),
}

impl Default for TurnTracker {
    fn default() -> TurnTracker {
        TurnTracker {
            slot: [None, None, None],
            active: NO_SLOT,
            req: 0,
            exchange_req: 0,
            last_ended: NO_SLOT,
            last: Last::Nothing,
            flags: Flags::default(),
            exchanges: 0,
            last_len: 0,
            last_end: SeqNum(0),
            last_ack: SeqNum(0),
            acking: Acking::Nothing,
            flight_first: PacketRef {
                frame: 0,
                ts: Timestamp::ZERO,
            },
            flight_segments: 0,
            flight_bytes: 0,
            flight_ack: MaybePacket::NONE,
            edge: [SeqNum(0); 2],
            edge_at_last_data: SeqNum(0),
            last_response_end: PacketRef {
                frame: 0,
                ts: Timestamp::ZERO,
            },
        }
    }
}

impl TurnTracker {
    pub fn on_segment(&mut self, ev: &SegmentEvent) -> Ended {
        let mut out = Ended::default();
        self.last = Last::Nothing;
        if ev.has_ack && !ev.syn {
            let i = ev.dir.reverse().index();
            self.flags.set(Flags::EDGE << i, ev.window_exact);
            if ev.window_exact {
                self.edge[i] = ev.ack.plus(ev.window.min(u64::from(u32::MAX >> 1)) as u32);
            }
        }
        let carries_new_data = matches!(
            ev.kind,
            SegmentKind::NewData | SegmentKind::DataAfterGap | SegmentKind::OutOfOrder
        );
        if !carries_new_data {
            if let Some(turn) = self
                .slot
                .get_mut(usize::from(self.active))
                .and_then(|t| t.as_deref_mut())
            {
                if ev.kind == SegmentKind::Retransmission && ev.dir == turn.dir {
                    turn.retransmissions += 1;
                    // The talker's last data is the active turn's last segment.
                    if ev.pkt.ts.since(turn.last.ts) > DUPLICATE {
                        self.flags.set(Flags::RETRANSMIT, true);
                    }
                } else if ev.dir != turn.dir && ev.has_ack && !ev.syn {
                    if ev.newly_acked > 0 {
                        self.flight_ack.get_or_insert(ev.pkt);
                    }
                    if let (true, Acking::Unacked(u)) = (ev.acks_all_peer_data, self.acking) {
                        self.acking = Acking::Acked(AckRef {
                            pkt: ev.pkt,
                            pure: ev.len == 0 && !ev.fin && !ev.rst,
                            acked: u,
                        });
                    }
                    if ev.window == 0 {
                        self.flags.set(Flags::ZERO_WINDOW, true);
                    }
                }
            }
            return out;
        }

        if let Some(turn) = self
            .slot
            .get_mut(usize::from(self.active))
            .and_then(|t| t.as_deref_mut())
            .filter(|t| t.dir != ev.dir)
        {
            turn.ended_by_ack = ev.ack;
            turn.ended_by_ack_seen = ev.has_ack;
            out = self.finish();
        }
        let i = if self.active != NO_SLOT {
            usize::from(self.active)
        } else {
            let slot = match ev.dir {
                Direction::ClientToServer => {
                    self.req = 1 - self.req;
                    self.req
                }
                Direction::ServerToClient => 2,
            };
            let i = usize::from(slot);
            let follows = self.last_ended != NO_SLOT;
            if self.flags.has(Flags::RESPONSE_IN_SLOT) && slot == 2 {
                // The response about to be overwritten completed an exchange: the next
                // exchange's idle time counts from its end.
                if let Some(r) = self.slot[2].as_deref() {
                    self.last_response_end = r.last;
                    self.flags.set(Flags::RESPONSE_END, true);
                }
                self.flags.set(Flags::RESPONSE_IN_SLOT, false);
            }
            match &mut self.slot[i] {
                Some(turn) => turn.restart(ev.dir, ev, follows),
                empty => *empty = Some(Box::new(Turn::start(ev.dir, ev, follows))),
            }
            self.active = slot;
            i
        };
        let Some(turn) = self.slot[i].as_deref_mut() else {
            return out;
        };
        let this = DataRef {
            pkt: ev.pkt,
            len: ev.len,
            end: ev.seq.plus(ev.len),
            ack: if ev.has_ack { ev.ack } else { SeqNum(0) },
        };
        if turn.segments == 0 {
            (self.flight_first, self.flight_segments, self.flight_bytes) = (ev.pkt, 0, 0);
            self.flight_ack = MaybePacket::NONE;
        } else if ev.pkt.ts.since(turn.last.ts) >= PAUSE_MIN {
            // The talker's last data segment (the turn's last, so far).
            let prev = DataRef {
                pkt: turn.last,
                len: self.last_len,
                end: self.last_end,
                ack: self.last_ack,
            };
            let flight = Flight {
                first: self.flight_first,
                segments: turn.segments - self.flight_segments,
                bytes: turn.bytes - self.flight_bytes,
                first_ack: self.flight_ack.get(),
            };
            (self.flight_first, self.flight_segments, self.flight_bytes) =
                (ev.pkt, turn.segments, turn.bytes);
            self.flight_ack = MaybePacket::NONE;
            if turn.pauses.len() < PAUSES_KEPT {
                let edge = self
                    .flags
                    .get(Flags::EDGE_AT_LAST_DATA, self.edge_at_last_data);
                turn.pauses.push(Pause {
                    flight,
                    before: prev,
                    after: this,
                    ack: match self.acking {
                        Acking::Acked(a) => Some(a),
                        _ => None,
                    },
                    retransmitted: self.flags.has(Flags::RETRANSMIT),
                    window_limited: self.flags.has(Flags::ZERO_WINDOW)
                        || edge.is_some_and(|edge| edge.diff(prev.end) < i64::from(ev.len)),
                });
            } else {
                turn.pauses.drop_one();
            }
        }
        turn.last = ev.pkt;
        turn.bytes += u64::from(ev.len);
        turn.segments += 1;
        if ev.seq.plus(ev.len).diff(turn.seq_end) > 0 {
            turn.seq_end = ev.seq.plus(ev.len);
        }
        turn.sizes.push(ev.len);
        self.acking = Acking::Unacked(match self.acking {
            Acking::Unacked(u) => Unacked {
                segments: u.segments + 1,
                smallest: u.smallest.min(ev.len),
                bytes: u.bytes + u64::from(ev.len),
                ..u
            },
            _ => Unacked {
                oldest: ev.pkt,
                segments: 1,
                smallest: ev.len,
                bytes: u64::from(ev.len),
            },
        });
        (self.last_len, self.last_end, self.last_ack) = (this.len, this.end, this.ack);
        let d = ev.dir.index();
        self.flags
            .set(Flags::EDGE_AT_LAST_DATA, self.flags.has(Flags::EDGE << d));
        self.edge_at_last_data = self.edge[d];
        self.flags
            .set(Flags::ZERO_WINDOW | Flags::RETRANSMIT, false);
        out
    }

    /// Ends the current turn (the other side spoke, or the flow ended).
    pub fn finish(&mut self) -> Ended {
        let i = std::mem::replace(&mut self.active, NO_SLOT);
        let Some(turn) = self.slot.get(usize::from(i)).and_then(|t| t.as_deref()) else {
            self.last = Last::Nothing;
            return Ended::default();
        };
        let dir = turn.dir;
        self.last_ended = i;
        self.acking = Acking::Nothing;
        self.flags
            .set(Flags::ZERO_WINDOW | Flags::RETRANSMIT, false);
        self.flight_ack = MaybePacket::NONE;
        match dir {
            Direction::ClientToServer => {
                self.flags.set(Flags::REQUEST_PENDING, true);
                self.last = Last::Request;
                Ended {
                    turn: true,
                    exchange: false,
                }
            }
            Direction::ServerToClient => {
                let paired = self.flags.has(Flags::REQUEST_PENDING);
                self.flags.set(Flags::REQUEST_PENDING, false);
                if paired {
                    self.exchange_req = self.req;
                    // Its end is kept when the next response starts (the exchange read now
                    // counts its idle time from the end before).
                    self.flags.set(Flags::RESPONSE_IN_SLOT, true);
                    self.exchanges += 1;
                }
                self.last = if paired {
                    Last::Exchange
                } else {
                    Last::Unsolicited
                };
                Ended {
                    turn: true,
                    exchange: paired,
                }
            }
        }
    }

    /// The turn that the last call ended, if it ended one.
    pub fn ended_turn(&self) -> Option<&Turn> {
        match self.last {
            Last::Nothing => None,
            Last::Request => self.slot[usize::from(self.req)].as_deref(),
            Last::Unsolicited | Last::Exchange => self.slot[2].as_deref(),
        }
    }

    /// The exchange that the last call completed, if it completed one.
    pub fn ended_exchange(&self) -> Option<Exchange<'_>> {
        match (
            self.last,
            self.slot[usize::from(self.exchange_req)].as_deref(),
            self.slot[2].as_deref(),
        ) {
            (Last::Exchange, Some(request), Some(response)) => {
                let previous = self.flags.get(Flags::RESPONSE_END, self.last_response_end);
                Some(Exchange {
                    index: self.exchanges - 1,
                    request,
                    response,
                    idle_before: previous.map(|p| request.first.ts.since(p.ts)),
                    previous_response: previous,
                })
            }
            _ => None,
        }
    }

    pub fn exchanges(&self) -> u32 {
        self.exchanges
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes read back the same whether they sit inline or moved to the heap, stop at
    /// SIZES_KEPT, and compare by their kept prefix only.
    #[test]
    fn sizes_inline_then_allocated() {
        let mut s = Sizes::default();
        let mut expect = Vec::new();
        for n in 1..=20u32 {
            s.push(n * 10);
            if expect.len() < SIZES_KEPT {
                expect.push(n * 10);
            }
            assert_eq!(&*s, &expect[..], "after {n} pushes");
        }
        let mut restarted = s.clone();
        restarted.clear();
        restarted.push(10);
        let mut small = Sizes::default();
        small.push(10);
        assert_eq!(restarted, small);
        assert_ne!(s, small);
    }

    const C2S: Direction = Direction::ClientToServer;
    const S2C: Direction = Direction::ServerToClient;

    fn ev(frame: u64, us: u64, dir: Direction, len: u32, covers_all: bool) -> SegmentEvent {
        SegmentEvent {
            pkt: PacketRef {
                frame,
                ts: Timestamp(us * 1000),
            },
            dir,
            seq: SeqNum(0),
            ack: SeqNum(0),
            len,
            kind: if len > 0 {
                SegmentKind::NewData
            } else {
                SegmentKind::PureAck
            },
            fin: false,
            syn: false,
            rst: false,
            psh: len > 0,
            has_ack: true,
            window: 65535,
            window_exact: false,
            newly_acked: 0,
            acks_all_peer_data: covers_all,
            dup_ack: false,
            tsval: None,
            retrans: None,
            in_flight_before: 0,
        }
    }

    /// The per-line server stall: request, first line, 40 ms, client ACK, rest of the lines.
    #[test]
    fn stall_shape_becomes_a_pause_released_by_an_ack() {
        let mut t = TurnTracker::default();
        let timeline = [
            ev(1, 0, C2S, 10, true),
            ev(2, 50, S2C, 12, true),
            ev(3, 40_050, C2S, 0, true),
            ev(4, 40_080, S2C, 90, true),
            ev(5, 41_000, C2S, 10, true),
        ];
        let mut exchange = None;
        for e in &timeline {
            if t.on_segment(e).exchange {
                let x = t.ended_exchange().expect("exchange");
                exchange = Some((x.request.clone(), x.response.clone(), x.latency()));
            }
        }
        let (request, response, latency) = exchange.expect("exchange closed by the next request");
        assert_eq!(request.segments, 1);
        assert_eq!(response.segments, 2);
        assert_eq!(&*response.sizes, &[12, 90]);
        assert_eq!(latency, Duration::from_micros(40_080));
        let p = response.pauses[0];
        assert_eq!(p.before.pkt.frame, 2);
        assert_eq!(p.after.pkt.frame, 4);
        let ack = p.ack.expect("the client's pure ACK is remembered");
        assert_eq!(ack.pkt.frame, 3);
        assert!(ack.pure);
        assert_eq!(ack.acked.oldest.frame, 2);
        assert_eq!((ack.acked.segments, ack.acked.smallest), (1, 12));
        assert_eq!(p.gap(), Duration::from_micros(40_030));
    }

    #[test]
    fn greeting_is_a_turn_but_not_an_exchange_and_idle_is_measured() {
        let mut t = TurnTracker::default();
        assert!(!t.on_segment(&ev(1, 0, S2C, 20, true)).turn);
        let o = t.on_segment(&ev(2, 100, C2S, 5, true));
        assert!(o.turn && !o.exchange);
        assert_eq!(t.ended_turn().unwrap().dir, S2C);
        assert!(t.ended_exchange().is_none());
        t.on_segment(&ev(3, 200, S2C, 5, true));
        assert_eq!(t.ended_turn().unwrap().dir, C2S, "the request ended");
        t.on_segment(&ev(30, 210, S2C, 5, true));
        assert!(t.ended_turn().is_none(), "nothing ended with that segment");
        assert!(t.on_segment(&ev(4, 1_200, C2S, 5, true)).exchange);
        assert_eq!(t.ended_exchange().unwrap().idle_before, None);
        t.on_segment(&ev(5, 1_300, S2C, 5, true));
        assert!(t.finish().exchange);
        let ex = t.ended_exchange().unwrap();
        assert_eq!(ex.index, 1);
        assert_eq!(ex.idle_before, Some(Duration::from_micros(990)));
        assert_eq!(t.exchanges(), 2);
    }

    /// What a turn used to copy of the turn before it, read where it now lives: whether there
    /// was one (the first turn has none), and for an exchange the previous exchange's
    /// response's last segment (none for the first exchange, nor after a greeting alone).
    #[test]
    fn the_turn_before_is_told_without_a_copy() {
        let mut t = TurnTracker::default();
        t.on_segment(&ev(1, 0, S2C, 20, true));
        t.on_segment(&ev(2, 100, C2S, 5, true));
        assert!(
            !t.ended_turn().unwrap().follows_a_turn(),
            "the greeting is first"
        );
        t.on_segment(&ev(3, 200, S2C, 5, true));
        assert!(
            t.ended_turn().unwrap().follows_a_turn(),
            "the request follows it"
        );
        t.on_segment(&ev(4, 300, S2C, 5, true));
        assert!(t.on_segment(&ev(5, 1_000, C2S, 5, true)).exchange);
        let ex = t.ended_exchange().unwrap();
        assert_eq!((ex.previous_response, ex.idle_before), (None, None));
        assert_eq!(ex.request.first.frame, 2);
        t.on_segment(&ev(6, 1_100, S2C, 5, true));
        assert!(t.finish().exchange);
        let ex = t.ended_exchange().unwrap();
        let previous = ex.previous_response.expect("the first exchange's response");
        assert_eq!(previous.frame, 4, "its last segment");
        assert_eq!(ex.idle_before, Some(Duration::from_micros(700)));
        assert_eq!((ex.request.first.frame, ex.response.first.frame), (5, 6));
    }

    #[test]
    fn short_silences_are_not_pauses_and_acks_do_not_end_turns() {
        let mut t = TurnTracker::default();
        t.on_segment(&ev(1, 0, C2S, 10, true));
        t.on_segment(&ev(2, 100, S2C, 0, true));
        t.on_segment(&ev(3, 500, C2S, 10, true));
        assert!(t.finish().turn);
        let turn = t.ended_turn().unwrap();
        assert_eq!(turn.segments, 2);
        assert!(turn.pauses.is_empty());
    }
}
