//! One capture's analysis: frames → segments → flows → turns → detectors → findings.
//!
//! Streaming and single-pass. Memory grows with the number of *concurrent* flows and of
//! servers, never with the number of packets: ended flows are swept out as the capture's own
//! clock moves on, and flows idle for [`IDLE_FLOW_TIMEOUT`] are ended.
//!
//! A SYN that opens a new connection on endpoints already in the table (a new ISN: see the
//! rules in [`crate::flow`]) ends the flow it displaces, unless that flow is a connection
//! attempt still waiting for its SYN-ACK: at most [`MAX_PARKED_ATTEMPTS`] of those are kept
//! per pair of endpoints until a retry of their SYN (or their SYN-ACK) comes, they idle out,
//! or the capture ends. An attempt the server refused with an RST stays open for
//! [`ENDED_FLOW_LINGER`], as an ended flow would linger, so that a client that sends the same
//! SYN again (Windows does) continues it; after that, the same SYN starts a new flow.
//!
//! A flow that begins with a bare SYN (or SYN-ACK) is kept compact until its handshake goes
//! on, and at most [`MAX_HALF_OPEN`] such attempts are kept, the oldest evicted and counted
//! (a SYN flood costs a bounded table, not a flow per SYN: see [`half_open`]). Flows age on
//! the capture's elapsed time, which a step back of the timestamps does not move (see
//! [`clock`]); the capture spans its earliest to its latest timestamp.

use std::collections::BinaryHeap;
use std::time::Duration;

use crate::detect::{self, At, Detector, FlowView, GroupId, GroupInfo};
use crate::flow::{Direction, Flow, FlowKey, FlowState, PacketRef, SegmentKind};
use crate::fxhash::FxHashMap;
use crate::hops::{self, Leg, LegRecord};
use crate::report::{CaptureSummary, Census, Finding, ServerSummary, MAX_SERVERS_LISTED};
use crate::seq::SeqNum;
use crate::stats::{round3, Histogram};
use crate::time::Timestamp;
use crate::turns::{Ended, TurnTracker};
use crate::wire::{decode_frame, Decoded, Endpoint, LinkType, Packets, TcpSegment, WlanSkip};

pub mod clock;
pub mod half_open;
mod linger;
pub mod shard;
#[cfg(test)]
mod shard_tests;
mod table;
use clock::CaptureClock;
pub use half_open::MAX_HALF_OPEN;
use half_open::{Attempt, HalfOpen};
use linger::Lingering;
use table::{FlowTable, Slot};

/// A flow with no packet for this long (capture time) is ended.
pub const IDLE_FLOW_TIMEOUT: Duration = Duration::from_secs(600);
/// Ended flows are kept this long to absorb their last ACKs, then forgotten.
pub const ENDED_FLOW_LINGER: Duration = Duration::from_secs(5);
/// How often (in packets) the flow table is swept, at least: with more flows in the table than
/// this, it is swept once every as many packets as it holds flows, so that the sweep (a pass
/// over the table) costs O(1) per packet however many flows are open.
const SWEEP_EVERY: u64 = 1 << 16;

/// A tracked flow (boxed, one per open flow: issue 29 counts its bytes). Its group and slot
/// are u32 (no capture holds 2³² servers or open flows at once), and where its last segment
/// was is kept as the frame and packet of an [`At`] (the `end` of one being analysed is 0).
struct Entry {
    flow: Flow,
    turns: TurnTracker,
    leg: LegRecord,
    /// The capture's elapsed-time clock at the flow's last segment ([`clock`]): what ages it.
    seen: Timestamp,
    /// Where its last segment was ([`Entry::last_at`]): the events told at its end are
    /// placed just after.
    last_frame: u64,
    last_packet: u32,
    group: u32,
    /// The detectors' per-flow slot while the flow is open ([`FlowView::slot`]).
    slot: u32,
}

impl Entry {
    fn group(&self) -> GroupId {
        self.group as GroupId
    }

    fn slot(&self) -> usize {
        self.slot as usize
    }

    fn last_at(&self) -> At {
        At::new(self.last_frame, self.last_packet)
    }

    fn set_last_at(&mut self, at: At) {
        debug_assert_eq!(at.end, 0, "a segment is analysed at end 0");
        (self.last_frame, self.last_packet) = (at.frame, at.packet);
    }

    /// When the flow's first new data (either way) was seen: the earlier of the two
    /// directions' first data segments (the flow records both, so the entry keeps none).
    fn first_data(&self) -> Option<Timestamp> {
        let [a, b] = [&self.flow.half[0], &self.flow.half[1]].map(|h| h.first_data());
        match (a, b) {
            (Some(a), Some(b)) => Some(if a.frame <= b.frame { a.ts } else { b.ts }),
            (a, b) => a.or(b).map(|p| p.ts),
        }
    }
}

/// A hop leg ordered by its flow's id (ids are unique, in one analyzer and once merged).
struct ByFlow(Leg);

impl PartialEq for ByFlow {
    fn eq(&self, other: &Self) -> bool {
        self.0.flow == other.0.flow
    }
}

impl Eq for ByFlow {}

impl PartialOrd for ByFlow {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByFlow {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.flow.cmp(&other.0.flow)
    }
}

/// Per-server totals for the capture summary.
#[derive(Default)]
struct GroupTotals {
    bytes: [u64; 2],
    latency_us: Histogram,
    rtt_us: Histogram,
}

impl GroupTotals {
    /// Adds another shard's totals for the same server.
    fn absorb(&mut self, other: GroupTotals) {
        self.bytes[0] += other.bytes[0];
        self.bytes[1] += other.bytes[1];
        self.latency_us.merge(&other.latency_us);
        self.rtt_us.merge(&other.rtt_us);
    }
}

/// Displaced connection attempts kept per pair of endpoints; the oldest beyond this ends.
pub const MAX_PARKED_ATTEMPTS: usize = 16;

/// A flow displaced by another connection on the same endpoints: an attempt still waiting for
/// its SYN to be answered is parked (a retry of its SYN finds it again); anything else,
/// refused attempts included, ends.
fn retire(
    parked: &mut FxHashMap<FlowKey, Vec<Entry>>,
    sinks: &mut Sinks,
    key: FlowKey,
    mut old: Box<Entry>,
) {
    if old.flow.is_attempt() && !old.flow.is_refused_attempt() {
        let attempts = parked.entry(key).or_default();
        if attempts.len() == MAX_PARKED_ATTEMPTS {
            let mut oldest = attempts.remove(0);
            sinks.end_flow(&mut oldest);
        }
        attempts.push(*old);
    } else {
        sinks.end_flow(&mut old);
    }
}

/// A parked attempt from `client` whose SYN carried `isn`, taken out of the parking. Attempts
/// parked here idle past the timeout are ended first, as the sweep would have ended them.
fn take_parked(
    parked: &mut FxHashMap<FlowKey, Vec<Entry>>,
    sinks: &mut Sinks,
    now: Timestamp,
    key: FlowKey,
    client: Endpoint,
    isn: SeqNum,
) -> Option<Box<Entry>> {
    let attempts = parked.get_mut(&key)?;
    attempts.retain_mut(|e| {
        let keep = now.since(e.seen) <= IDLE_FLOW_TIMEOUT;
        if !keep {
            sinks.end_flow(e);
        }
        keep
    });
    if attempts.is_empty() {
        parked.remove(&key);
        return None;
    }
    let i = attempts
        .iter()
        .position(|e| e.flow.client == client && e.flow.client_isn() == Some(isn))?;
    let e = attempts.remove(i);
    if attempts.is_empty() {
        parked.remove(&key);
    }
    Some(Box::new(e))
}

/// The flow a SYN that opens another connection on the endpoints `key` begins: a parked
/// attempt of its client with its ISN, else a new flow.
#[allow(clippy::too_many_arguments)]
fn next_connection(
    parked: &mut FxHashMap<FlowKey, Vec<Entry>>,
    sinks: &mut Sinks,
    next_flow_id: &mut u64,
    group_of: &mut FxHashMap<Endpoint, GroupId>,
    key: FlowKey,
    seg: &TcpSegment,
    pkt: PacketRef,
    now: Timestamp,
) -> Box<Entry> {
    match take_parked(parked, sinks, now, key, seg.src, SeqNum(seg.seq)) {
        Some(p) => p,
        None => new_entry(next_flow_id, group_of, sinks, seg, pkt, now),
    }
}

/// A refused attempt whose client sends its SYN again only after the linger time: a new flow,
/// as if the refused one had ended and been forgotten.
fn stale_refusal(entry: &Entry, now: Timestamp) -> bool {
    entry.flow.is_refused_attempt() && now.since(entry.seen) > ENDED_FLOW_LINGER
}

/// Whether the sweep, had it run at `now`, would have ended this open flow: a refused attempt
/// left alone longer than the linger time, or a flow idle past the timeout (an ended flow
/// lingers apart: [`Lingering::expired`]). A segment that finds its flow so is treated as the
/// sweep would have left it — its endpoints without a flow — so that whether the segment
/// continues a flow, starts one or is absorbed never depends on when the sweep happened to run
/// (it runs on a packet count that depends on the table's size). The order in which expired
/// flows end (the sweep ends its batch in the order flows began; a touched one ends at its
/// segment) still may.
fn expired(entry: &Entry, now: Timestamp) -> bool {
    debug_assert_eq!(
        entry.flow.state,
        FlowState::Open,
        "ended flows linger apart"
    );
    let idle = now.since(entry.seen);
    if entry.flow.is_refused_attempt() {
        idle > ENDED_FLOW_LINGER
    } else {
        idle > IDLE_FLOW_TIMEOUT
    }
}

/// Starts tracking a flow first seen in `seg`.
fn new_entry(
    next_id: &mut u64,
    group_of: &mut FxHashMap<Endpoint, GroupId>,
    sinks: &mut Sinks,
    seg: &TcpSegment,
    pkt: PacketRef,
    now: Timestamp,
) -> Box<Entry> {
    let flow = Flow::new(*next_id, seg, pkt);
    *next_id += 1;
    sinks.created(flow.id);
    let group = group_for(group_of, sinks, flow.server);
    entry_of(sinks, flow, group, now)
}

/// The group of `server`, created on its first flow; counts one more flow to it.
fn group_for(
    group_of: &mut FxHashMap<Endpoint, GroupId>,
    sinks: &mut Sinks,
    server: Endpoint,
) -> GroupId {
    let group = *group_of.entry(server).or_insert_with(|| {
        if let Some(shard) = &mut sinks.shard {
            shard.group_created(sinks.at);
        }
        sinks.groups.push(GroupInfo {
            server,
            flows: 0,
            exchanges: 0,
            hops: Vec::new(),
        });
        sinks.totals.push(GroupTotals::default());
        sinks.groups.len() - 1
    });
    sinks.groups[group].flows += 1;
    group
}

/// A flow's entry, with a detector slot.
fn entry_of(sinks: &mut Sinks, flow: Flow, group: GroupId, now: Timestamp) -> Box<Entry> {
    let slot = sinks.free_slots.pop().unwrap_or_else(|| {
        sinks.slots += 1;
        sinks.slots - 1
    });
    let mut entry = Box::new(Entry {
        flow,
        turns: TurnTracker::default(),
        leg: LegRecord::default(),
        seen: now,
        last_frame: 0,
        last_packet: 0,
        group: u32::try_from(group).expect("fewer than 2^32 servers"),
        slot: u32::try_from(slot).expect("fewer than 2^32 open flows"),
    });
    entry.set_last_at(sinks.at);
    entry
}

/// The full flow of a compact attempt: the same id and group, its kept segments replayed
/// ([`half_open`] rule 3).
fn promote(sinks: &mut Sinks, key: FlowKey, attempt: Attempt) -> Box<Entry> {
    let mut kept = attempt.segments(&key);
    let (seg, pkt) = kept.next().expect("an attempt keeps its first segment");
    let flow = Flow::new(attempt.id, &seg, pkt);
    let mut entry = entry_of(sinks, flow, attempt.group, attempt.seen);
    // Each kept segment is told where it came (not where the attempt was promoted).
    let now_at = sinks.at;
    sinks.at = At::new(pkt.frame, 0);
    sinks.on_segment(&mut entry, &seg, pkt);
    for (seg, pkt) in kept {
        sinks.at = At::new(pkt.frame, 0);
        sinks.on_segment(&mut entry, &seg, pkt);
    }
    sinks.at = now_at;
    entry
}

/// A flow to end, in the order flows began: a tracked one, or a compact attempt (its id and
/// endpoints: it stays in its table until its turn).
enum Ending {
    Flow(Box<Entry>),
    Attempt(u64, FlowKey),
}

impl Ending {
    fn id(&self) -> u64 {
        match self {
            Ending::Flow(e) => e.flow.id,
            Ending::Attempt(id, _) => *id,
        }
    }
}

/// Ends flows in the order they began (detectors that keep the first example they see must
/// not depend on the hash function), promoting attempts one at a time.
fn end_in_order(sinks: &mut Sinks, half_open: &mut HalfOpen, mut ending: Vec<Ending>) {
    ending.sort_unstable_by_key(Ending::id);
    for e in ending {
        let mut entry = match e {
            Ending::Flow(e) => e,
            Ending::Attempt(_, key) => match half_open.remove(&key) {
                Some(a) => promote(sinks, key, a),
                None => continue,
            },
        };
        sinks.end_flow(&mut entry);
    }
}

/// Everything that hears about flows: the detectors and the per-server totals.
struct Sinks {
    groups: Vec<GroupInfo>,
    totals: Vec<GroupTotals>,
    detectors: Vec<Box<dyn Detector>>,
    /// Indices of the detectors that look at every segment, turn, exchange.
    per_segment: Vec<usize>,
    per_turn: Vec<usize>,
    per_exchange: Vec<usize>,
    exchanges: u64,
    /// Flows long enough to be one leg of a hop (see [`crate::hops`]).
    /// Past [`Sinks::max_legs`], those of the flows that began first, whatever order flows
    /// end in: so each shard keeps its first-begun ones, and the merged report the capture's.
    legs: BinaryHeap<ByFlow>,
    /// Legs kept at most ([`hops::MAX_LEGS`]; smaller in tests).
    max_legs: usize,
    /// Detector slots handed out so far, and those free again (their flows ended).
    slots: usize,
    free_slots: Vec<usize>,
    /// Where the segment being analysed is ([`At`]).
    at: At,
    /// Set when this analysis is one shard of a capture divided among threads.
    shard: Option<shard::ShardLog>,
}

impl Sinks {
    fn view(entry: &Entry, at: At) -> FlowView<'_> {
        FlowView {
            flow: &entry.flow,
            group: entry.group(),
            slot: entry.slot(),
            exchanges: entry.turns.exchanges(),
            first_data: entry.first_data(),
            at,
            answers: None,
        }
    }

    /// A flow (or a compact attempt) was given id `id` at the current position.
    fn created(&mut self, id: u64) {
        if let Some(shard) = &mut self.shard {
            shard.flow_created(id, self.at);
        }
    }

    fn on_segment(&mut self, entry: &mut Entry, seg: &TcpSegment, pkt: PacketRef) {
        entry.set_last_at(self.at);
        let ev = entry.flow.on_segment(seg, pkt);
        if matches!(
            ev.kind,
            SegmentKind::NewData | SegmentKind::DataAfterGap | SegmentKind::OutOfOrder
        ) {
            self.totals[entry.group()].bytes[ev.dir.index()] += u64::from(ev.len);
        }
        let ended = entry.turns.on_segment(&ev);
        Self::record_leg(entry, ended.turn);
        let view = Self::view(entry, self.at);
        for &i in &self.per_segment {
            self.detectors[i].on_segment(&view, &ev);
        }
        self.dispatch(&view, &entry.turns, ended);
    }

    fn record_leg(entry: &mut Entry, turn_ended: bool) {
        if let (true, Some(turn)) = (turn_ended, entry.turns.ended_turn()) {
            entry.leg.on_turn(&entry.flow, turn);
        }
    }

    fn dispatch(&mut self, view: &FlowView, turns: &TurnTracker, ended: Ended) {
        if !ended.turn {
            return;
        }
        if let Some(turn) = turns.ended_turn() {
            let view = FlowView {
                answers: turns.ended_exchange().map(|ex| ex.request),
                ..*view
            };
            for &i in &self.per_turn {
                self.detectors[i].on_turn(&view, turn);
            }
        }
        if let Some(ex) = &turns.ended_exchange() {
            self.exchanges += 1;
            self.totals[view.group]
                .latency_us
                .record_duration(ex.latency());
            for &i in &self.per_exchange {
                self.detectors[i].on_exchange(view, ex);
            }
        }
    }

    /// Ends a flow: closes its last turn and tells the detectors. Idempotent.
    fn end_flow(&mut self, entry: &mut Entry) {
        if entry.flow.state == FlowState::Ended {
            return;
        }
        let ended = entry.turns.finish();
        Self::record_leg(entry, ended.turn);
        if let Some(leg) = Leg::of(&entry.flow, std::mem::take(&mut entry.leg)) {
            if self.legs.len() < self.max_legs {
                self.legs.push(ByFlow(leg));
            } else if let Some(mut last) = self.legs.peek_mut() {
                if leg.flow < last.0.flow {
                    *last = ByFlow(leg);
                }
            }
        }
        let view = Self::view(entry, entry.last_at().at_end());
        self.dispatch(&view, &entry.turns, ended);
        self.groups[entry.group()].exchanges += u64::from(entry.turns.exchanges());
        if let (Some(rtt), Some(_)) = (entry.flow.rtt(), entry.first_data()) {
            self.totals[entry.group()].rtt_us.record_duration(rtt);
        }
        for d in self.detectors.iter_mut() {
            d.on_flow_end(&view);
        }
        self.free_slots.push(entry.slot());
        // Every caller drops the entry next (a closed flow lingers as a [`Lingering`]): the
        // state only guards against ending it twice.
        entry.flow.state = FlowState::Ended;
    }
}

/// Analyses one capture, packet by packet.
pub struct Analyzer {
    /// Boxed: an entry is most of a kilobyte, and growing the table should move pointers
    /// only (the table keeps nothing else: [`table`]).
    flows: FlowTable,
    /// Flows that ended, kept a while to absorb their last segments ([`linger`]).
    lingering: FlowTable<Lingering>,
    /// Connection attempts displaced by a SYN with another ISN on the same endpoints.
    parked: FxHashMap<FlowKey, Vec<Entry>>,
    /// Flows that are only a SYN (and its SYN-ACK) so far, compact and capped.
    half_open: HalfOpen,
    next_flow_id: u64,
    group_of: FxHashMap<Endpoint, GroupId>,
    sinks: Sinks,
    frames: u64,
    tcp_segments: u64,
    /// The segment count at which the table is swept next.
    next_sweep: u64,
    census: Census,
    clock: CaptureClock,
    link_types: Vec<LinkType>,
    /// Set for a dispatcher: the segments it decoded, by shard, not analysed here.
    router: Option<shard::Router>,
}

impl Default for Analyzer {
    fn default() -> Self {
        Analyzer::new(detect::all())
    }
}

/// What the analysis is told about the client when it is tcpdoctor's own scripted driver
/// (`run` drove the traffic and says so; a plain `analyze` of a capture knows nothing of the
/// client and passes nothing). Findings about the client's conversation then say that the
/// waiting is the script's own protocol, and how deep it pipelined.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScriptedClient {
    /// Requests the driver kept in flight per connection at most (`--pipeline`).
    pub pipeline: u32,
    /// Connections the driver kept open at once (`--connections`).
    pub connections: u32,
    /// Requests the driver completed during the capture (0 when unknown).
    pub requests: u64,
    /// Open loop at this many requests per second (`--rate`); None: closed loop.
    pub rate: Option<f64>,
}

impl Analyzer {
    /// An analyzer told that the capture's client is tcpdoctor's scripted driver.
    pub fn with_scripted_client(client: ScriptedClient) -> Analyzer {
        Analyzer::new(detect::with_client(Some(client)))
    }

    /// An analyzer told that the capture's client is tcpdoctor's scripted driver, and where
    /// the driver knows its messages ended ([`crate::message_ends`]).
    pub fn with_driver(
        client: Option<ScriptedClient>,
        ends: Option<std::sync::Arc<crate::message_ends::MessageEnds>>,
    ) -> Analyzer {
        Analyzer::new(detect::with_driver(client, ends))
    }

    pub fn new(detectors: Vec<Box<dyn Detector>>) -> Analyzer {
        Analyzer {
            flows: FlowTable::default(),
            lingering: FlowTable::default(),
            parked: FxHashMap::default(),
            half_open: HalfOpen::default(),
            next_flow_id: 1,
            group_of: FxHashMap::default(),
            sinks: Sinks {
                groups: Vec::new(),
                totals: Vec::new(),
                per_segment: (0..detectors.len())
                    .filter(|&i| detectors[i].wants_segments())
                    .collect(),
                per_turn: (0..detectors.len())
                    .filter(|&i| detectors[i].wants_turns())
                    .collect(),
                per_exchange: (0..detectors.len())
                    .filter(|&i| detectors[i].wants_exchanges())
                    .collect(),
                detectors,
                exchanges: 0,
                legs: BinaryHeap::new(),
                max_legs: hops::MAX_LEGS,
                slots: 0,
                free_slots: Vec::new(),
                at: At::default(),
                shard: None,
            },
            frames: 0,
            tcp_segments: 0,
            next_sweep: SWEEP_EVERY,
            census: Census::default(),
            clock: CaptureClock::default(),
            link_types: Vec::new(),
            router: None,
        }
    }

    /// Decodes and analyses one captured frame.
    pub fn on_frame(&mut self, frame: u64, ts: Timestamp, link: LinkType, data: &[u8], orig: u32) {
        self.frames += 1;
        if !self.link_types.contains(&link) {
            self.link_types.push(link);
        }
        let packets = decode_frame(link, data, orig);
        self.sinks.at = At::new(frame, 0);
        if packets.is_amsdu() {
            return self.on_amsdu(PacketRef { frame, ts }, packets);
        }
        for decoded in packets {
            self.on_decoded(PacketRef { frame, ts }, decoded);
        }
    }

    /// One packet of a frame.
    #[inline(always)]
    fn on_decoded(&mut self, pkt: PacketRef, decoded: Decoded) {
        match decoded {
            Decoded::Tcp(seg, None) => self.on_tcp(pkt, &seg),
            Decoded::Tcp(seg, via) => {
                self.census.tunnelled(via);
                self.on_tcp(pkt, &seg);
            }
            other => self.census.not_analysed(&other),
        }
    }

    /// An 802.11 A-MSDU: each subframe's packet, all citing the frame.
    #[inline(never)]
    fn on_amsdu(&mut self, pkt: PacketRef, packets: Packets<'_>) {
        let mut whole = 0;
        for (i, decoded) in packets.enumerate() {
            whole += u64::from(decoded != Decoded::Wlan(WlanSkip::BadSubframe));
            self.sinks.at = At::new(pkt.frame, i as u32);
            self.on_decoded(pkt, decoded);
        }
        self.census.amsdu(whole);
    }

    /// Number of TCP segments analysed so far.
    pub fn tcp_segments(&self) -> u64 {
        self.tcp_segments
    }

    /// Analyses one decoded TCP segment, the only packet of its frame.
    pub fn on_segment(&mut self, pkt: PacketRef, seg: &TcpSegment) {
        self.sinks.at = At::new(pkt.frame, 0);
        self.on_tcp(pkt, seg);
    }

    /// One TCP segment, at the position [`Sinks::at`] says.
    fn on_tcp(&mut self, pkt: PacketRef, seg: &TcpSegment) {
        self.tcp_segments += 1;
        let now = self.clock.observe(pkt);
        let key = FlowKey::of(seg);
        if let Some(router) = &mut self.router {
            let count = router.batches.len() as u64;
            router.batches[shard::shard_of(&key, count)].push(shard::Routed {
                pkt,
                seg: *seg,
                at: self.sinks.at,
                now,
            });
            return;
        }
        if let Some(shard) = &self.sinks.shard {
            if !shard.owns(&key) {
                return;
            }
        }
        self.on_flow_segment(key, pkt, seg, now);
    }

    /// A segment a dispatcher routed to this shard ([`Analyzer::dispatcher`]).
    pub fn on_routed(&mut self, r: &shard::Routed) {
        self.sinks.at = r.at;
        self.tcp_segments += 1;
        self.on_flow_segment(FlowKey::of(&r.seg), r.pkt, &r.seg, r.now);
    }

    /// A decoder for `count` shards: it reads every frame (the counts, clock, census and link
    /// types of the report are its) and keeps each TCP segment in its shard's batch
    /// ([`Analyzer::take_batch`]) for the shard's own analyzer ([`Analyzer::sharded`],
    /// [`Analyzer::on_routed`]). [`Analyzer::merge`] with it as `dispatcher`.
    pub fn dispatcher(count: usize) -> Analyzer {
        let mut a = Analyzer::new(Vec::new());
        a.router = Some(shard::Router {
            batches: (0..count).map(|_| Vec::new()).collect(),
        });
        a
    }

    /// The segments routed to `shard` since the last call, replaced by `empty` (a vector to
    /// reuse); None unless this is a dispatcher.
    pub fn take_batch(
        &mut self,
        shard: usize,
        empty: Vec<shard::Routed>,
    ) -> Option<Vec<shard::Routed>> {
        let router = self.router.as_mut()?;
        Some(std::mem::replace(&mut router.batches[shard], empty))
    }

    /// The most segments waiting in one shard's batch.
    pub fn batched(&self) -> usize {
        self.router
            .as_ref()
            .map_or(0, |r| r.batches.iter().map(Vec::len).max().unwrap_or(0))
    }

    /// The flow table's part of a segment: `now` is the elapsed-time clock at it.
    #[inline(always)]
    fn on_flow_segment(&mut self, key: FlowKey, pkt: PacketRef, seg: &TcpSegment, now: Timestamp) {
        // At or past: a shard reading every frame counts the segments it does not own too,
        // so its count can step over the one the sweep was due at.
        if self.tcp_segments >= self.next_sweep {
            self.sweep(now);
            let table = (self.flows.len()
                + self.lingering.len()
                + self.parked.len()
                + self.half_open.len()) as u64;
            self.next_sweep = self.tcp_segments + table.max(SWEEP_EVERY);
        }
        let entry = match self.flows.entry(key) {
            Slot::Occupied(o) if !expired(o.get(), now) => {
                let e = o.into_mut();
                Self::displace_in(
                    &mut self.parked,
                    &mut self.sinks,
                    &mut self.next_flow_id,
                    &mut self.group_of,
                    e,
                    key,
                    seg,
                    pkt,
                    now,
                );
                e
            }
            Slot::Occupied(o) => {
                // What a sweep just before this segment would have done: end the flow and
                // forget it, so that the segment starts a flow of its own.
                let mut old = o.remove().0;
                self.sinks.end_flow(&mut old);
                if !self.start_flow(key, seg, pkt, now) {
                    return;
                }
                self.flows.get_mut(&key).expect("just started")
            }
            Slot::Vacant(_) => match self.lingering.get_mut(&key) {
                Some(ended) if !ended.expired(now) => {
                    if !ended.opens_another(seg) {
                        ended.absorb(now);
                        return;
                    }
                    // Another connection on the ended one's endpoints: it ends lingering.
                    self.lingering.remove(&key);
                    let (parked, sinks) = (&mut self.parked, &mut self.sinks);
                    let (ids, groups) = (&mut self.next_flow_id, &mut self.group_of);
                    let next = next_connection(parked, sinks, ids, groups, key, seg, pkt, now);
                    self.flows.insert(next)
                }
                expired => {
                    if expired.is_some() {
                        // What a sweep just before this segment would have done.
                        self.lingering.remove(&key);
                    }
                    if !self.start_flow(key, seg, pkt, now) {
                        return;
                    }
                    self.flows.get_mut(&key).expect("just started")
                }
            },
        };
        entry.seen = now;
        debug_assert_eq!(
            entry.flow.state,
            FlowState::Open,
            "ended flows linger apart"
        );
        self.sinks.on_segment(entry, seg, pkt);
        if entry.flow.is_closed() {
            self.sinks.end_flow(entry);
            let ended = Box::new(Lingering::of(entry));
            self.flows.remove(&key);
            self.lingering.insert(ended);
        }
    }

    /// The flow a segment on endpoints without a tracked flow begins (or continues, from the
    /// compact attempts), left in the table; false when a compact attempt absorbed the
    /// segment.
    fn start_flow(
        &mut self,
        key: FlowKey,
        seg: &TcpSegment,
        pkt: PacketRef,
        now: Timestamp,
    ) -> bool {
        let Slot::Vacant(v) = self.flows.entry(key) else {
            unreachable!("start_flow is called for endpoints without a flow");
        };
        if self
            .half_open
            .get_mut(&key)
            .is_some_and(|a| now.since(a.seen) > IDLE_FLOW_TIMEOUT)
        {
            // Idle past the timeout: the sweep would have ended it by now.
            end_in_order(
                &mut self.sinks,
                &mut self.half_open,
                vec![Ending::Attempt(0, key)],
            );
        }
        if let Some(a) = self.half_open.get_mut(&key) {
            if a.absorb(&key, seg, pkt, now) {
                return false;
            }
            let a = self.half_open.remove(&key).expect("just found");
            let e = v.insert(promote(&mut self.sinks, key, a)).into_mut();
            Self::displace_in(
                &mut self.parked,
                &mut self.sinks,
                &mut self.next_flow_id,
                &mut self.group_of,
                e,
                key,
                seg,
                pkt,
                now,
            );
            true
        } else if Attempt::may_start(seg) {
            // As `Flow::new` decides roles: a SYN's receiver, a SYN-ACK's sender.
            let server = if seg.flags.ack() { seg.src } else { seg.dst };
            let group = group_for(&mut self.group_of, &mut self.sinks, server);
            let id = self.next_flow_id;
            self.next_flow_id += 1;
            self.sinks.created(id);
            let attempt = Attempt::new(id, group, &key, seg, pkt, now);
            self.half_open.insert(key, attempt);
            false
        } else {
            v.insert(new_entry(
                &mut self.next_flow_id,
                &mut self.group_of,
                &mut self.sinks,
                seg,
                pkt,
                now,
            ));
            true
        }
    }

    /// A SYN that opens another connection on the endpoints of flow `e` replaces it, and a
    /// SYN-ACK answering an attempt `e` displaced brings that attempt back.
    #[allow(clippy::too_many_arguments)]
    fn displace_in(
        parked: &mut FxHashMap<FlowKey, Vec<Entry>>,
        sinks: &mut Sinks,
        next_flow_id: &mut u64,
        group_of: &mut FxHashMap<Endpoint, GroupId>,
        e: &mut Box<Entry>,
        key: FlowKey,
        seg: &TcpSegment,
        pkt: PacketRef,
        now: Timestamp,
    ) {
        let pure_syn = seg.flags.syn() && !seg.flags.ack();
        if pure_syn && (e.flow.is_new_connection(seg) || stale_refusal(e, now)) {
            let next = next_connection(parked, sinks, next_flow_id, group_of, key, seg, pkt, now);
            let old = std::mem::replace(e, next);
            retire(parked, sinks, key, old);
        } else if !pure_syn && seg.flags.syn() && e.flow.is_attempt() {
            // A SYN-ACK answering an attempt that a later SYN displaced.
            let answered = SeqNum(seg.ack.wrapping_sub(1));
            if e.flow.client_isn() != Some(answered) {
                if let Some(p) = take_parked(parked, sinks, now, key, seg.dst, answered) {
                    let old = std::mem::replace(e, p);
                    retire(parked, sinks, key, old);
                }
            }
        }
    }

    /// Ends idle flows and forgets long-ended ones, by the capture's elapsed time `now`.
    fn sweep(&mut self, now: Timestamp) {
        let stale: Vec<FlowKey> = self
            .flows
            .iter()
            .filter(|(_, e)| expired(e, now))
            .map(|(k, _)| k)
            .collect();
        let mut ending: Vec<Ending> = stale
            .into_iter()
            .filter_map(|k| self.flows.remove(&k).map(Ending::Flow))
            .collect();
        ending.extend(
            self.half_open
                .idle(now, IDLE_FLOW_TIMEOUT)
                .into_iter()
                .map(|(id, k)| Ending::Attempt(id, k)),
        );
        end_in_order(&mut self.sinks, &mut self.half_open, ending);
        self.lingering.retain(|ended| !ended.expired(now));
        let sinks = &mut self.sinks;
        self.parked.retain(|_, attempts| {
            attempts.retain_mut(|e| {
                let keep = now.since(e.seen) <= IDLE_FLOW_TIMEOUT;
                if !keep {
                    sinks.end_flow(e);
                }
                keep
            });
            !attempts.is_empty()
        });
    }

    /// One of `count` analyses of a capture, each reading all of it and analysing the flows
    /// that hash to it (`index`, from 0); [`Analyzer::merge`] makes one report of them.
    pub fn sharded(detectors: Vec<Box<dyn Detector>>, index: usize, count: usize) -> Analyzer {
        let mut a = Analyzer::new(detectors);
        a.sinks.shard = Some(shard::ShardLog::new(index, count));
        // Its share of the half-open cap: while no shard passes its share, the shards hold no
        // more attempts together than the cap, so one analyzer would have dropped none
        // either ([`Analyzer::shard_capped`]).
        a.half_open.cap = (MAX_HALF_OPEN / count).max(1);
        a
    }

    /// Whether every detector can merge its state with another shard's ([`shard`]).
    pub fn can_shard(&self) -> bool {
        self.sinks.detectors.iter().all(|d| d.mergeable())
    }

    /// Whether this shard dropped half-open attempts past its share of the cap
    /// ([`MAX_HALF_OPEN`] / shards): which ones a full table evicts depends on every attempt it
    /// holds, so shards keep a different set than one analyzer would. The capture must then be
    /// analysed again by one analyzer for the report to be one analyzer's. While no shard
    /// passes its share, one analyzer holds no more than the cap and drops none.
    pub fn shard_capped(&self) -> bool {
        self.half_open.dropped > 0
    }

    /// Ends every flow and collects the findings. `file` names the capture in findings.
    pub fn finish(mut self, file: &str, format: &str) -> (CaptureSummary, Vec<Finding>) {
        self.end_flows();
        self.report(file, format)
    }

    /// The report of the shards of one capture ([`Analyzer::sharded`], every shard given in
    /// order), as one analyzer would have written it. Panics unless [`Analyzer::can_shard`].
    pub fn merge(
        shards: Vec<Analyzer>,
        file: &str,
        format: &str,
    ) -> (CaptureSummary, Vec<Finding>) {
        Self::merge_from(None, shards, file, format)
    }

    /// [`Analyzer::merge`] of the shards a dispatcher fed ([`Analyzer::dispatcher`]): the
    /// frame and segment counts, the clock, the census and the link types are the
    /// dispatcher's (the shards saw only their own segments).
    pub fn merge_dispatched(
        dispatcher: Analyzer,
        shards: Vec<Analyzer>,
        file: &str,
        format: &str,
    ) -> (CaptureSummary, Vec<Finding>) {
        Self::merge_from(Some(dispatcher), shards, file, format)
    }

    fn merge_from(
        dispatcher: Option<Analyzer>,
        mut shards: Vec<Analyzer>,
        file: &str,
        format: &str,
    ) -> (CaptureSummary, Vec<Finding>) {
        assert!(!shards.is_empty(), "no shard to merge");
        for s in shards.iter_mut() {
            s.end_flows();
        }
        let servers: Vec<Vec<Endpoint>> = shards
            .iter()
            .map(|s| s.sinks.groups.iter().map(|g| g.server).collect())
            .collect();
        let (maps, flows, order) = {
            let logs: Vec<&shard::ShardLog> = shards
                .iter()
                .map(|s| s.sinks.shard.as_ref().expect("a sharded analyzer"))
                .collect();
            shard::maps(&logs, &servers)
        };
        let mut groups: Vec<GroupInfo> = order
            .iter()
            .map(|&server| GroupInfo {
                server,
                flows: 0,
                exchanges: 0,
                hops: Vec::new(),
            })
            .collect();
        let mut totals: Vec<GroupTotals> = order.iter().map(|_| GroupTotals::default()).collect();
        let mut legs = BinaryHeap::new();
        let (mut exchanges, mut dropped) = (0, 0);
        let mut states: Vec<Vec<Box<dyn std::any::Any + Send>>> = Vec::new();
        let mut merged = None;
        // Each shard but the first is dropped once its state is taken, before the states are
        // merged: its (empty) flow table and detector slots are not kept through the merge.
        for (mut s, map) in shards.into_iter().zip(&maps) {
            s.sinks.shard = None;
            let sinks = &mut s.sinks;
            for (g, (info, t)) in sinks.groups.iter().zip(sinks.totals.drain(..)).enumerate() {
                let into = map.group(g);
                groups[into].flows += info.flows;
                groups[into].exchanges += info.exchanges;
                totals[into].absorb(t);
            }
            legs.extend(sinks.legs.drain().map(|ByFlow(mut leg)| {
                leg.flow = map.flow(leg.flow);
                ByFlow(leg)
            }));
            exchanges += sinks.exchanges;
            dropped += s.half_open.dropped;
            states.push(sinks.detectors.iter_mut().map(|d| d.take_state()).collect());
            merged.get_or_insert(s);
        }
        let mut merged = merged.expect("a shard");
        for (shard_states, map) in states.into_iter().zip(&maps) {
            for (d, state) in merged.sinks.detectors.iter_mut().zip(shard_states) {
                d.absorb(state, map);
            }
        }
        merged.sinks.groups = groups;
        merged.sinks.totals = totals;
        merged.sinks.legs = legs;
        merged.sinks.exchanges = exchanges;
        merged.half_open.dropped = dropped;
        merged.next_flow_id = flows + 1;
        if let Some(d) = dispatcher {
            merged.frames = d.frames;
            merged.tcp_segments = d.tcp_segments;
            merged.census = d.census;
            merged.clock = d.clock;
            merged.link_types = d.link_types;
        }
        merged.report(file, format)
    }

    /// Ends every flow still open, in the order flows began, as [`Analyzer::finish`] and
    /// [`Analyzer::merge`] do first. `analyze` calls it once a shard's segments are done, on
    /// whichever thread is free: the shards' flows then end in parallel, not one shard after
    /// another in the merging thread. The report is the same either way.
    ///
    /// As [`end_in_order`] would, but the flow table is freed first and the flows are listed
    /// by pointer (8 bytes each, not an [`Ending`], which has room for endpoints), beside the
    /// compact attempts: what the detectors keep as flows end is allocated while the table's
    /// memory is free again (issue 29).
    pub fn end_flows(&mut self) {
        self.lingering = FlowTable::default();
        let parked = std::mem::take(&mut self.parked);
        let mut open: Vec<Box<Entry>> =
            Vec::with_capacity(self.flows.len() + parked.values().map(Vec::len).sum::<usize>());
        open.extend(std::mem::take(&mut self.flows).into_values());
        open.extend(parked.into_values().flatten().map(Box::new));
        open.sort_unstable_by_key(|e| e.flow.id);
        let mut attempts = self.half_open.all();
        attempts.sort_unstable_by_key(|&(id, _)| id);
        let mut attempts = attempts.into_iter().peekable();
        for mut entry in open {
            while let Some((_, key)) = attempts.next_if(|&(id, _)| id < entry.flow.id) {
                self.end_attempt(key);
            }
            self.sinks.end_flow(&mut entry);
        }
        for (_, key) in attempts {
            self.end_attempt(key);
        }
    }

    /// Ends a compact attempt still in its table (promoted first, [`half_open`] rule 3).
    fn end_attempt(&mut self, key: FlowKey) {
        if let Some(a) = self.half_open.remove(&key) {
            let mut entry = promote(&mut self.sinks, key, a);
            self.sinks.end_flow(&mut entry);
        }
    }

    /// The report, once every flow has ended.
    fn report(mut self, file: &str, format: &str) -> (CaptureSummary, Vec<Finding>) {
        let sinks = &mut self.sinks;
        // In the order flows began, whichever order they ended in (one thread or several).
        let mut legs: Vec<Leg> = std::mem::take(&mut sinks.legs)
            .into_sorted_vec()
            .into_iter()
            .map(|l| l.0)
            .collect();
        legs.truncate(sinks.max_legs);
        for hop in hops::pair(&legs) {
            for g in sinks.groups.iter_mut() {
                if g.server == hop.listen || g.server == hop.upstream {
                    g.hops.push(hop.clone());
                }
            }
        }
        let mut findings = Vec::new();
        for d in sinks.detectors.iter_mut() {
            findings.extend(d.finish(&sinks.groups));
        }
        for f in &mut findings {
            f.file = file.to_string();
        }
        let mut servers: Vec<ServerSummary> = self
            .sinks
            .groups
            .iter()
            .zip(&self.sinks.totals)
            .map(|(g, t)| ServerSummary {
                server: g.server.to_string(),
                flows: g.flows,
                exchanges: g.exchanges,
                bytes_to_server: t.bytes[Direction::ClientToServer.index()],
                bytes_to_client: t.bytes[Direction::ServerToClient.index()],
                exchange_latency_ms: (!t.latency_us.is_empty())
                    .then(|| t.latency_us.distribution(1e-3)),
                rtt_ms: (!t.rtt_us.is_empty()).then(|| round3(t.rtt_us.quantile(0.5) / 1e3)),
            })
            .filter(|s| s.bytes_to_client + s.bytes_to_server > 0 || s.flows > 0)
            .collect();
        servers.sort_by(|a, b| {
            (b.exchanges, b.bytes_to_client + b.bytes_to_server)
                .cmp(&(a.exchanges, a.bytes_to_client + a.bytes_to_server))
        });
        let omitted = servers.len().saturating_sub(MAX_SERVERS_LISTED) as u64;
        servers.truncate(MAX_SERVERS_LISTED);
        let duration = self.clock.span();
        let (skipped, tunnels, amsdu) = self.census.finish();
        let summary = CaptureSummary {
            file: file.to_string(),
            format: format.to_string(),
            link_types: self.link_types.iter().map(|l| l.to_string()).collect(),
            frames: self.frames,
            tcp_segments: self.tcp_segments,
            skipped,
            tunnels,
            amsdu,
            flows: self.next_flow_id - 1,
            exchanges: self.sinks.exchanges,
            duration_ms: round3(crate::units::ms(duration)),
            time_steps_back: self.clock.steps_back(),
            half_open_untracked: self.half_open.dropped,
            servers,
            servers_omitted: omitted,
            audit: None,
            withdrawn: Vec::new(),
            truncated: None,
        };
        (summary, findings)
    }
}

#[cfg(test)]
mod tests;
