//! Detectors: one file per finding kind, all fed the same event stream.
//!
//! A detector never knows where its events came from (a file, a live capture, the proxy). It
//! sees segments, turns, exchanges and flow ends through [`Detector`], keeps bounded state per
//! server (a *group*) and, at the end, emits at most one [`Finding`] per group and direction.

mod connection_churn;
mod fragmented_writes;
mod nagle_delayed_ack;
mod nagle_round_trip;
mod release;
mod retransmission_stall;
mod rtt_bound;
pub(crate) mod unbatched_messages;
mod window_limited;
mod zero_window;

use crate::fxhash::FxHashSet as HashSet;
use std::any::Any;
use std::time::Duration;

pub use crate::analysis::shard::ShardMap;

use crate::analysis::ScriptedClient;
use crate::flow::{Direction, Flow, SegmentEvent};
use crate::hops::{Hop, HopSender};
use crate::report::{Finding, FindingKind, FlowRef, Severity};
pub(crate) use crate::time::Nanos;
use crate::time::Timestamp;
use crate::turns::{Exchange, Turn};
use crate::wire::Endpoint;

pub use release::{classify_timer, delayed_ack_stalls, round_trip_hold, NagleRelease, Timer};

/// Index of a server endpoint in [`Groups`].
pub type GroupId = usize;

/// Where in the capture an event was told to the detectors: the frame and the packet within
/// it (an 802.11 A-MSDU holds several) of the segment that caused it, and whether it came at
/// the flow's end. An event told when a flow ends (its last turn, its last exchange, the end
/// itself) is placed just after the flow's last segment, whenever the flow was ended (a FIN,
/// an idle timeout noticed later, the capture's end): so a position depends only on the
/// flow's own packets, never on when the analysis got round to ending it, and "the first
/// example" is the same however the capture's flows were divided among threads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct At {
    pub frame: u64,
    pub packet: u32,
    /// 0: while the segment was analysed; 1: when the flow ended.
    pub end: u8,
}

impl At {
    pub const fn new(frame: u64, packet: u32) -> At {
        At {
            frame,
            packet,
            end: 0,
        }
    }

    /// The position of the events told when a flow whose last segment was here ends.
    pub const fn at_end(self) -> At {
        At { end: 1, ..self }
    }
}

/// What a detector may know about the flow an event belongs to.
#[derive(Clone, Copy)]
pub struct FlowView<'a> {
    pub flow: &'a Flow,
    pub group: GroupId,
    /// This open flow's index in every detector's [`Slots`]: unique among open flows, reused
    /// once the flow has ended (after every detector's [`Detector::on_flow_end`]).
    pub slot: usize,
    pub exchanges: u32,
    /// When the first data byte of the flow was seen.
    pub first_data: Option<Timestamp>,
    /// Where the event being told happened ([`At`]).
    pub at: At,
    /// While a response turn that completes an exchange is told ([`Detector::on_turn`]), the
    /// request turn it answers (the turn just before it); None otherwise.
    pub answers: Option<&'a Turn>,
}

impl<'a> FlowView<'a> {
    /// A view of `flow` in `slot` with nothing else known (tests of per-flow state).
    #[cfg(test)]
    pub(crate) fn in_slot(flow: &'a Flow, slot: usize) -> FlowView<'a> {
        FlowView {
            flow,
            group: 0,
            slot,
            exchanges: 0,
            first_data: None,
            at: At::default(),
            answers: None,
        }
    }
}

impl FlowView<'_> {
    pub fn flow_ref(&self) -> FlowRef {
        FlowRef {
            id: self.flow.id,
            client: self.flow.client.to_string(),
            server: self.flow.server.to_string(),
        }
    }
}

/// Per-server facts the detectors share when they write findings.
#[derive(Clone, Debug)]
pub struct GroupInfo {
    pub server: Endpoint,
    pub flows: u64,
    pub exchanges: u64,
    /// Hops whose legs the capture holds with this server on one of them.
    pub hops: Vec<Hop>,
}

impl GroupInfo {
    /// The hop that sends this server's `dir` data, when the capture shows one.
    pub fn hop_sender(&self, dir: Direction) -> Option<HopSender<'_>> {
        self.hops.iter().find_map(|h| h.sender(self.server, dir))
    }

    /// Whether the capture shows this server behind a hop (its flows are a hop's upstream
    /// leg): the data it sends is its own, and the hop is measured on the other leg.
    pub fn behind_hop(&self) -> bool {
        self.hops.iter().any(|h| h.upstream == self.server)
    }
}

pub type Groups = [GroupInfo];

/// One finding kind's rule.
pub trait Detector: Send {
    /// Whether [`Detector::on_segment`] does anything (it is skipped otherwise: it runs for
    /// every packet).
    fn wants_segments(&self) -> bool {
        false
    }
    fn on_segment(&mut self, _flow: &FlowView, _ev: &SegmentEvent) {}
    /// Whether [`Detector::on_turn`] does anything.
    fn wants_turns(&self) -> bool {
        false
    }
    fn on_turn(&mut self, _flow: &FlowView, _turn: &Turn) {}
    /// Whether [`Detector::on_exchange`] does anything.
    fn wants_exchanges(&self) -> bool {
        false
    }
    fn on_exchange(&mut self, _flow: &FlowView, _ex: &Exchange<'_>) {}
    fn on_flow_end(&mut self, _flow: &FlowView) {}
    /// The findings, once every flow has ended.
    fn finish(&mut self, groups: &Groups) -> Vec<Finding>;

    /// Whether this detector's state can be merged with another shard's, so that a capture's
    /// flows may be divided among threads ([`crate::analysis::shard`]).
    fn mergeable(&self) -> bool {
        false
    }
    /// Takes out the state the findings come from, every flow having ended: for another
    /// shard's detector of the same kind to [`Detector::absorb`]. Only when mergeable.
    fn take_state(&mut self) -> Box<dyn Any + Send> {
        Box::new(())
    }
    /// Folds a state [`Detector::take_state`] gave, from a shard whose flow ids and groups
    /// `map` translates, into this one (emptied by its own `take_state`): the result must be
    /// what one detector fed every flow would hold, whatever the order shards come in.
    fn absorb(&mut self, _state: Box<dyn Any + Send>, _map: &ShardMap) {}
}

/// Every detector `analyze` runs.
pub fn all() -> Vec<Box<dyn Detector>> {
    with_client(None)
}

/// Every detector, told what the client is when `run` drove it ([`ScriptedClient`]).
pub fn with_client(client: Option<ScriptedClient>) -> Vec<Box<dyn Detector>> {
    with_driver(client, None)
}

/// Every detector, told what the client is when `run` drove it and where its driver knows
/// its messages ended ([`crate::message_ends`]).
pub fn with_driver(
    client: Option<ScriptedClient>,
    ends: Option<std::sync::Arc<crate::message_ends::MessageEnds>>,
) -> Vec<Box<dyn Detector>> {
    vec![
        Box::new(nagle_delayed_ack::NagleDelayedAck::default()),
        Box::new(nagle_round_trip::NagleRoundTrip::default()),
        Box::new(fragmented_writes::FragmentedWrites::with_ends(ends.clone())),
        Box::new(rtt_bound::RttBound::new(client)),
        Box::new(connection_churn::ConnectionChurn::default()),
        Box::new(zero_window::ZeroWindow::default()),
        Box::new(retransmission_stall::RetransmissionStall::default()),
        Box::new(window_limited::WindowLimited::default()),
        Box::new(unbatched_messages::UnbatchedMessages::with_ends(ends)),
    ]
}

/// Rewords a finding about data whose sender's sockets are known (read live, as `run` does)
/// to have had TCP_NODELAY on: the Nagle kinds then describe a program that waited for the
/// peer's ACK, not Nagle. Other kinds are left alone.
pub fn reword_for_nodelay(f: &mut Finding) {
    match f.kind {
        FindingKind::NagleDelayedAck => nagle_delayed_ack::reword_for_nodelay(f),
        FindingKind::NagleRoundTrip => nagle_round_trip::reword_for_nodelay(f),
        FindingKind::FragmentedWrites => fragmented_writes::reword_for_nodelay(f),
        _ => {}
    }
}

/// Rewords a `fragmented_writes` finding about the replies to a client known to pipeline up
/// to `depth` requests: a turn of no more segments than replies is whole replies, one per
/// segment (see `fragmented_writes` rule 8). Returns whether it did.
pub fn reword_for_pipelining(f: &mut Finding, depth: usize) -> bool {
    fragmented_writes::reword_for_pipelining(f, depth)
}

/// Per-(group, direction) state, created on first use.
#[derive(Debug)]
pub(crate) struct PerGroup<T> {
    slots: Vec<[Option<T>; 2]>,
}

impl<T> Default for PerGroup<T> {
    fn default() -> Self {
        PerGroup { slots: Vec::new() }
    }
}

impl<T: Default> PerGroup<T> {
    pub fn get(&mut self, group: GroupId, dir: Direction) -> &mut T {
        if self.slots.len() <= group {
            self.slots.resize_with(group + 1, || [None, None]);
        }
        self.slots[group][dir.index()].get_or_insert_with(T::default)
    }

    /// Folds another shard's states in ([`Detector::absorb`]): each is merged, by `merge`, into
    /// this one's state for the same server (as `map` translates it) and direction.
    pub fn absorb(
        &mut self,
        mut other: PerGroup<T>,
        map: &ShardMap,
        mut merge: impl FnMut(&mut T, T),
    ) {
        for (g, dir, st) in other.drain() {
            merge(self.get(map.group(g), dir), st);
        }
    }

    /// All states, with their group and direction.
    pub fn drain(&mut self) -> impl Iterator<Item = (GroupId, Direction, T)> + '_ {
        self.slots.drain(..).enumerate().flat_map(|(g, [a, b])| {
            a.map(|s| (g, Direction::ClientToServer, s))
                .into_iter()
                .chain(b.map(|s| (g, Direction::ServerToClient, s)))
        })
    }
}

/// [`Detector::mergeable`] and [`Detector::take_state`] of a detector whose findings come from
/// its `state` field alone: that field is what it hands over to another shard's detector, which
/// folds it in with its own [`Detector::absorb`].
macro_rules! hands_over_its_state {
    () => {
        fn mergeable(&self) -> bool {
            true
        }

        fn take_state(&mut self) -> Box<dyn std::any::Any + Send> {
            super::hand_over(&mut self.state)
        }
    };
}
pub(crate) use hands_over_its_state;

/// [`Detector::take_state`] of a detector whose findings come from one field: the field,
/// left empty.
pub(crate) fn hand_over<T: Default + Send + 'static>(state: &mut T) -> Box<dyn Any + Send> {
    Box::new(std::mem::take(state))
}

/// The state [`Detector::absorb`] is given, as the same kind of detector's `take_state` made
/// it (a state of another kind is a bug in the merge, not in the capture).
pub(crate) fn handed<T: 'static>(state: Box<dyn Any + Send>) -> T {
    *state
        .downcast::<T>()
        .expect("a state handed over by the same kind of detector")
}

/// Keeps, of two examples, the one at the smaller position: the one a single analyzer meets
/// first (see [`At`]). For [`Detector::absorb`].
pub(crate) fn earlier<E>(mine: &mut Option<E>, theirs: Option<E>, at: impl Fn(&E) -> At) {
    if let Some(t) = theirs {
        if mine.as_ref().is_none_or(|m| at(&t) < at(m)) {
            *mine = Some(t);
        }
    }
}

/// Whether an example at `at` comes before the one kept (or none is kept yet).
pub(crate) fn first_at<E>(kept: &Option<E>, at: At, kept_at: impl Fn(&E) -> At) -> bool {
    kept.as_ref().is_none_or(|k| at < kept_at(k))
}

/// Per-open-flow state, indexed by [`FlowView::slot`]: a vector index rather than a hash
/// lookup per segment. Each state remembers its flow's id (0: none; ids start at 1), so a
/// slot reused by a later flow never hands it the state of an earlier one.
#[derive(Debug)]
pub(crate) struct Slots<T> {
    slots: Vec<(u64, T)>,
}

impl<T> Default for Slots<T> {
    fn default() -> Self {
        Slots { slots: Vec::new() }
    }
}

impl<T: Default> Slots<T> {
    /// The flow's state, if it has one.
    #[inline]
    pub fn get(&self, flow: &FlowView) -> Option<&T> {
        self.get_at(flow.slot, flow.flow.id)
    }

    /// The state of flow `id` in `slot`, if it has one.
    #[inline]
    pub fn get_at(&self, slot: usize, id: u64) -> Option<&T> {
        match self.slots.get(slot) {
            Some((owner, t)) if *owner == id => Some(t),
            _ => None,
        }
    }

    /// The flow's state, created (default) on first use.
    #[inline]
    pub fn get_or_default(&mut self, flow: &FlowView) -> &mut T {
        if self.slots.len() <= flow.slot {
            // Grown by an eighth at a time (still geometric: amortised O(1)), not doubled:
            // every open flow has a slot here, and doubling leaves up to half of them unused.
            let len = self.slots.len();
            if self.slots.capacity() <= flow.slot {
                self.slots
                    .reserve_exact((flow.slot + 1).max(len + len / 8) - len);
            }
            self.slots.resize_with(flow.slot + 1, || (0, T::default()));
        }
        let (id, t) = &mut self.slots[flow.slot];
        if *id != flow.flow.id {
            *id = flow.flow.id;
            *t = T::default();
        }
        t
    }

    /// Takes the flow's state out.
    pub fn remove(&mut self, flow: &FlowView) -> Option<T> {
        match self.slots.get_mut(flow.slot) {
            Some((id, t)) if *id == flow.flow.id => {
                *id = 0;
                Some(std::mem::take(t))
            }
            _ => None,
        }
    }
}

/// Which open flows have already been counted as affected (bounded by concurrent flows).
#[derive(Debug, Default)]
pub(crate) struct FlowMarks {
    marked: HashSet<(u64, usize)>,
}

impl FlowMarks {
    /// Adds one to `affected` the first time `(flow, dir)` is seen.
    pub fn count(&mut self, flow: u64, dir: Direction, affected: &mut u64) {
        if self.marked.insert((flow, dir.index())) {
            *affected += 1;
        }
    }

    pub fn forget(&mut self, flow: u64) {
        self.marked.remove(&(flow, 0));
        self.marked.remove(&(flow, 1));
    }
}

/// Fields every finding shares; detectors fill in the rest.
pub(crate) struct FindingHead {
    pub kind: FindingKind,
    pub severity: Severity,
    pub group: GroupId,
    pub direction: Direction,
    pub flows_affected: u64,
    pub example_flow: FlowRef,
    pub time_lost: Duration,
}

impl FindingHead {
    pub fn finish(
        self,
        groups: &Groups,
        verdict: String,
        evidence: crate::report::Evidence,
        fix: &str,
    ) -> Finding {
        let g = &groups[self.group];
        Finding {
            kind: self.kind,
            severity: self.severity,
            file: String::new(),
            server: g.server.to_string(),
            direction: self.direction,
            flows_affected: self.flows_affected,
            flows_total: g.flows,
            example_flow: self.example_flow,
            verdict,
            time_lost_ms: crate::stats::round3(crate::units::ms(self.time_lost)),
            evidence,
            fix: fix.to_string(),
        }
    }
}

/// How a finding names a hop that sends its messages (see [`crate::hops`]): the subject of
/// its verdict, a fact about the source leg, and the fix.
pub(crate) struct HopText {
    pub subject: String,
    pub fact: String,
    pub fix: String,
}

/// What a finding about held data measured, to weigh the hop's part in it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Held {
    /// The typical hold (the median stall) on the hop's client-facing leg.
    pub typical: Duration,
    /// The share of that leg's turns that were held.
    pub share: f64,
}

/// Who a finding about data that a hop sends blames ([`hop_blame`]).
pub(crate) enum HopBlame {
    /// The hop's own socket held bytes it had already received: it is named.
    Hop {
        text: HopText,
        /// `the hop listening on H held bytes it had already received (…)`.
        cause: String,
    },
    /// The hop forwarded what it read at once: the holds came from upstream.
    Upstream(Passed),
}

impl HopBlame {
    /// What [`settle`] needs of a finding's blame: the upstream it passes the finding to.
    pub(crate) fn passed(blame: Option<HopBlame>) -> Option<Passed> {
        match blame {
            Some(HopBlame::Upstream(p)) => Some(p),
            _ => None,
        }
    }
}

/// A finding the hop passed on from its upstream (see [`settle`]).
pub(crate) struct Passed {
    /// The upstream server, as findings name it.
    pub upstream: String,
    /// The hop, as the verdict names it.
    pub subject: String,
    /// `which forwarded the first and last bytes of every one of the 30 responses compared on
    /// both legs within 0.4 ms of receiving them (median 0.2 ms)`.
    pub promptly: String,
    /// The fact the upstream's own finding gains, or this one keeps.
    pub fact: String,
}

/// [`HopText`] for `dir` data on `group`'s flows, when a hop sends it.
pub(crate) fn hop_text(groups: &Groups, group: GroupId, dir: Direction) -> Option<HopText> {
    let h = groups.get(group)?.hop_sender(dir)?;
    let (whose, receiver) = match dir {
        Direction::ServerToClient => ("response", "client"),
        Direction::ClientToServer => ("request", "server"),
    };
    let subject = format!("the hop listening on {}", h.hop.listen);
    let per = h.source_shape.segments_per_message();
    let fact = if h.source_shape.all_whole() {
        format!(
            "this is one leg of a hop: {} relays {} (flow {}), whose own leg carries each \
             {whose} whole ({per:.1} segments per {whose}); the hop splits them on this leg",
            h.hop.listen, h.source, h.source_flow
        )
    } else {
        format!(
            "this is one leg of a hop: {} relays {} (flow {}), whose own leg carries each \
             {whose} in pieces too ({per:.1} segments per {whose}, {} of {} whole); the hop \
             passes every piece on",
            h.hop.listen, h.source, h.source_flow, h.source_shape.whole, h.source_shape.messages
        )
    };
    let fix = if h.source_shape.all_whole() {
        format!(
            "Fix the hop, not {}: it already writes each {whose} whole. Have the hop forward \
             what it reads with one write per read (or coalesce before writing), and set \
             TCP_NODELAY on its {receiver}-side socket.",
            h.source
        )
    } else {
        format!(
            "Fix both ends of the hop: have {} write each {whose} with one call (a buffer or \
             writev), and set TCP_NODELAY on the hop's {receiver}-side socket (or have it \
             coalesce what it reads before writing).",
            h.source
        )
    };
    Some(HopText { subject, fact, fix })
}

/// Blames the element that held the bytes (PHYSICS §9), for a finding about held `dir` data
/// on `group`'s flows when a hop sends it:
/// 1. The hop *held* a response when its last byte left on the client-facing leg at least
///    half the typical hold after it arrived on the upstream leg ([`crate::hops`] rule 5).
/// 2. The hop is the cause when it held at least one of the compared responses (a sample
///    spread over the whole leg, so the held share over the leg applies to it) and at least
///    half as many as the leg's held share predicts among them: its own socket had the bytes
///    and did not send them. The finding names the hop, with the lag measured.
/// 3. Otherwise the hop forwarded what it read at once (no compared response kept as long,
///    or too few to account for the holds): the holds were already in the bytes it received.
///    No finding names the hop as their cause ([`settle`]).
/// 4. With no response compared on both legs, the hop is named as before (its leg is all
///    the capture can tell about).
pub(crate) fn hop_blame(
    groups: &Groups,
    group: GroupId,
    dir: Direction,
    held: Held,
) -> Option<HopBlame> {
    let text = hop_text(groups, group, dir)?;
    let h = groups.get(group)?.hop_sender(dir)?;
    let fw = &h.hop.forwarding;
    let compared = fw.compared();
    let at_least = held.typical / 2;
    let n_held = fw.held(at_least);
    let expected = held.share * compared as f64;
    let ms = |d: Duration| crate::units::fmt_duration(d);
    if compared == 0 || (n_held >= 1 && n_held as f64 >= expected / 2.0) {
        let cause = if compared == 0 {
            format!("{} re-emits", text.subject)
        } else {
            format!(
                "{} held bytes it had already received (the last bytes of {} of {} responses \
                 compared left it {} or more after they arrived from {}; median {}) and \
                 re-emits",
                text.subject,
                n_held,
                compared,
                ms(at_least),
                h.source,
                ms(fw.median_last())
            )
        };
        let mut text = text;
        if compared > 0 && !h.source_shape.all_whole() {
            // The hop held them: its fix first; the source's pieces cost nothing on its own leg.
            text.fix = format!(
                "Set TCP_NODELAY on the hop's client-side socket (or have it coalesce what it \
                 reads before writing): the hop held these bytes. {} writes each response in \
                 pieces too; one write per response there would also give the hop's Nagle \
                 nothing to hold.",
                h.source
            );
        }
        if compared > 0 {
            text.fact.push_str(&format!(
                "; the hop kept the last bytes of {n_held} of {compared} responses {} or more \
                 after they arrived on the upstream leg (median {}): its own socket held them",
                ms(at_least),
                ms(fw.median_last())
            ));
        }
        return Some(HopBlame::Hop { text, cause });
    }
    // The slowest forwarding may be a scheduler hiccup or a hold the upstream's own timer
    // overlapped; the count within the threshold is what rule 3 decided on, so say that.
    let promptly = if n_held == 0 {
        format!(
            "which forwarded the first and last bytes of every one of the {compared} responses \
             compared on both legs within {} of receiving them (median {})",
            ms(fw.max_lag()),
            ms(fw.median_last())
        )
    } else {
        format!(
            "which forwarded the last bytes of {} of the {compared} responses compared on both \
             legs within {} of receiving them (median {}; the slowest {}, too few to account \
             for the holds)",
            compared - n_held,
            ms(at_least),
            ms(fw.median_last()),
            ms(fw.max_lag())
        )
    };
    let fact = format!(
        "the client {} reaches {} through {} (flow {}), {promptly}: the hop passes these holds \
         on, it does not cause them; {} held the bytes itself",
        h.hop.client, h.source, text.subject, h.hop.client_flow, h.source
    );
    Some(HopBlame::Upstream(Passed {
        upstream: h.source.to_string(),
        subject: text.subject,
        promptly,
        fact,
    }))
}

/// Findings a hop passed on ([`hop_blame`] rule 3): one whose upstream has a finding of its
/// own of the same kind and direction is dropped, and that finding gains the hop's fact (the
/// holds are counted once, on the element that held them); one whose upstream has none is
/// kept, phrased about the upstream by its detector.
pub(crate) fn settle(found: Vec<(Finding, Option<Passed>)>) -> Vec<Finding> {
    let owners: Vec<(FindingKind, Direction, String)> = found
        .iter()
        .filter(|(_, p)| p.is_none())
        .map(|(f, _)| (f.kind, f.direction, f.server.clone()))
        .collect();
    let mut kept: Vec<Finding> = Vec::with_capacity(found.len());
    let mut moved: Vec<(FindingKind, Direction, String, String)> = Vec::new();
    for (f, passed) in found {
        match passed {
            Some(p) if owners.contains(&(f.kind, f.direction, p.upstream.clone())) => {
                moved.push((f.kind, f.direction, p.upstream, p.fact));
            }
            _ => kept.push(f),
        }
    }
    for (kind, dir, upstream, fact) in moved {
        if let Some(f) = kept
            .iter_mut()
            .find(|f| f.kind == kind && f.direction == dir && f.server == upstream)
        {
            if !f.evidence.facts.contains(&fact) {
                f.evidence.facts.push(fact);
            }
        }
    }
    kept
}

/// How a finding names the messages of `dir` and the two ends: (plural, singular, sender,
/// receiver), e.g. `("responses", "response", "server", "client")`.
pub(crate) fn message_words(
    dir: Direction,
) -> (&'static str, &'static str, &'static str, &'static str) {
    match dir {
        Direction::ServerToClient => ("responses", "response", "server", "client"),
        Direction::ClientToServer => ("requests", "request", "client", "server"),
    }
}

/// The fix of a Nagle-kind finding whose sender had TCP_NODELAY on and waited for the ACK
/// itself (`reword_for_nodelay`), for its `whose` (`response`, `request`).
pub(crate) fn nodelay_wait_fix(whose: &str) -> String {
    format!(
        "Write each {whose} whole, with one call (a buffer or writev), and do not wait for the \
         send queue to drain (SIOCOUTQ, tcp_info's unacked, a flush that waits for the peer) \
         before writing more: with TCP_NODELAY on, what is written leaves at once."
    )
}

/// `12 of 30 (40%)`
pub(crate) fn of(part: u64, whole: u64) -> String {
    if whole == 0 {
        return format!("{part}");
    }
    format!(
        "{part} of {whole} ({:.0}%)",
        100.0 * part as f64 / whole as f64
    )
}

/// Milliseconds between two instants, rounded for timelines.
pub(crate) fn rel_ms(t: Timestamp, origin: Timestamp) -> f64 {
    crate::stats::round3(t.since(origin).as_nanos() as f64 / 1e6)
}

#[cfg(test)]
mod tests;
