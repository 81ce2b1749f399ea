//! `rtt_bound`: one round trip per command, so wall time ≈ exchanges × RTT.
//!
//! Rule (PHYSICS §5 and §9), per flow, then summed per server:
//! 1. An exchange is *sequential* when it left room for a whole round trip, as measured at the
//!    capture point: from its first request byte to its last response byte at least the round
//!    trip towards the server, and from the previous response to this request at least the
//!    round trip towards the client. At the client's end a sequential exchange cannot be
//!    faster than the path RTT; at the server's end it looks short, but the client pays the
//!    round trip in the silence before its next request. No slack is needed: each RTT is the
//!    fastest data → ACK sample so far, and a sequential exchange brings its own samples (its
//!    response acknowledges its request, its request the previous response), each no longer
//!    than the span it lies in. An exchange faster than that answers an earlier request (the
//!    client keeps several in flight) and is *overlapped*: not counted. Alternating turns
//!    alone do not prove waiting: a pipelining client that sends one request per response it
//!    reads alternates too.
//! 2. A sequential exchange *waited* for the part of its latency, and of the silence before
//!    it, that the round trip explains (never more than the span measured, and never more
//!    than the flow's final round trip: the RTT is the fastest sample, so an early estimate
//!    can be longer). Sending the requests without waiting would save all of it but the first
//!    request's round trip: the *saving*. So saving ≤ waiting ≤ the time measured.
//! 3. The flow has at least [`MIN_EXCHANGES`] sequential exchanges; its path RTT at the capture
//!    point (handshake, else fastest data → ACK, both halves summed) is at least [`MIN_RTT`];
//!    waiting is at least [`MIN_SHARE`] of the time from its first request to its last
//!    response; and the saving is at least [`MIN_SAVING`].
//! 4. Per server, the reported saving never exceeds the elapsed time the flagged flows covered
//!    together, less one round trip (connections that wait at the same time save that time
//!    once, and requests sent together still wait for the first answer); below
//!    [`MIN_SAVING`] after that, nothing is reported.
//! 5. When most flagged flows overlapped in time with other connections from the same client
//!    address to this server, the client already spreads its requests over parallel
//!    connections. A flow's time is its span from its first request byte to its last response
//!    byte; two flows overlap when their whole spans do, counted once every flow has ended
//!    (so the count depends on the flows alone, never on when each was ended), among the
//!    client's flows with at least one exchange. The wire shows request *turns*, not how many
//!    requests each carries: the advice covers a client with one request per turn (a
//!    browser's HTTP/1.1 pool, which cannot pipeline: multiplex, or fewer requests) and one
//!    whose protocol already pipelines (more requests per turn, batching). Otherwise it is
//!    pipelining or batching on the connection.
//! 6. Severity follows the time the finding says was lost (the saving, `time_lost_ms`):
//!    critical when it is at least [`CRITICAL_SAVING`] and at least [`CRITICAL_SHARE`] of the
//!    time the flagged flows covered together; otherwise a warning.
//! 7. When `run` says the client is its own scripted driver ([`ScriptedClient`]), the finding
//!    says so: the waiting is the script's protocol, and the fix is the script's (deeper
//!    `--pipeline`, batched commands), never the server's. It states the driver's pipelining
//!    depth and the requests per turn the wire carried (requests completed ÷ request turns
//!    to this server); "one request at a time" only with `--pipeline 1`, and multiplexing
//!    (HTTP/2) is never offered to a client that pipelines. The rule itself is unchanged.
//!
//! Cost and bounds: O(1) per exchange and per flow end (one table look-up per flow, at its
//! first exchange and at its end), and per open flow a fixed-size state. An ended flow leaves
//! its span (16 bytes) with its client until the end, where rule 5 counts the overlaps of the
//! flagged flows by sorting each such client's spans once. At most [`MAX_SPANS`] ended spans
//! are kept: beyond, the clients with no open flow, idle longest, have their flagged flows
//! counted against the spans they have and are forgotten; when every client has an open
//! flow, the client of the flow that ended does the same and keeps its newer half. Rule 4's
//! spans are folded into a total beyond [`SPANS_KEPT`] per server. Both caps apply per
//! analyzer: with the flows divided among threads ([`crate::analysis::shard`]) each thread
//! keeps its own (a thread reaches a cap only if one thread would), so a capture that reaches
//! one may count overlaps (rule 5) or the elapsed time (rule 4) differently than one thread
//! would; below them the merged report is one thread's, byte for byte. A client takes 64
//! bytes in the table of clients, its first span inline.

use crate::analysis::ScriptedClient;
use crate::fxhash::FxHashMap as HashMap;
use std::any::Any;
use std::collections::hash_map::Entry as MapEntry;
use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Duration;

use smallvec::SmallVec;

use super::{
    At, Detector, FindingHead, FlowView, GroupId, Groups, Nanos, PerGroup, ShardMap, Slots,
};
use crate::flow::Direction;
use crate::flow::PacketRef;
use crate::report::{
    Claim, Evidence, Finding, FindingKind, FlowRef, SequentialExchange, Severity, TimelineEntry,
};
use crate::stats::{round3, Histogram};
use crate::time::Timestamp;
use crate::turns::Exchange;
use crate::units::fmt_duration;

mod text;

pub const MIN_EXCHANGES: u64 = 10;
pub const MIN_RTT: Duration = Duration::from_millis(1);
pub const MIN_SHARE: f64 = 0.5;
pub const MIN_SAVING: Duration = Duration::from_millis(100);
/// Critical when the saving is at least this share of the time the flows covered…
pub const CRITICAL_SHARE: f64 = 0.8;
/// …and at least this much.
pub const CRITICAL_SAVING: Duration = Duration::from_secs(1);
/// Ended flows' spans kept, over all clients, to tell parallel connections (rule 5).
const MAX_SPANS: usize = 1 << 17;
/// Flagged flows' time spans remembered per server before the oldest are folded into a total.
const SPANS_KEPT: usize = 4096;

/// A flow's exchanges' time: its first request byte to its last response byte.
type Span = (Timestamp, Timestamp);

/// A client of a server: the server's group (as u32: the key is 24 bytes, not 32) and the
/// client's address.
type ClientKey = (u32, IpAddr);

fn client_key(group: GroupId, ip: IpAddr) -> ClientKey {
    // Groups are servers seen in one capture: never 2³² of them.
    (u32::try_from(group).expect("fewer than 2^32 servers"), ip)
}

fn group_of(key: &ClientKey) -> GroupId {
    key.0 as GroupId
}

/// What a flow's exchanges showed so far: 64 bytes in the slot of every open flow. Made at the
/// flow's first exchange. The counts saturate at 2³² − 1 exchanges (a flow of more would take
/// terabytes of capture).
#[derive(Default)]
struct FlowState {
    /// The first request byte of its first exchange.
    first: Timestamp,
    /// The last response byte of its last exchange.
    last: Timestamp,
    latency_sum: Nanos,
    waiting: Nanos,
    saving: Nanos,
    /// One sequential exchange, as frames the audit can check (one after a previous response
    /// when the flow has one).
    example: Option<Box<Example>>,
    sequential: u32,
    /// Sequential exchanges after the flow's first (their round trips are what a client
    /// that did not wait would save), and those with a silence before them.
    sequential_later: u32,
    sequential_after_idle: u32,
    overlapped: u32,
}

/// Counts one more when `yes`.
fn bump(n: &mut u32, yes: bool) {
    *n = n.saturating_add(u32::from(yes));
}

/// A sequential exchange and the round-trip samples it was judged on.
struct Example {
    previous: Option<PacketRef>,
    request: PacketRef,
    response: PacketRef,
    claim: SequentialExchange,
}

/// The flows with an exchange from one client address to one server.
#[derive(Default)]
struct Peers {
    /// How many are open.
    open: u32,
    /// Whether the client is in [`RttBound::idle`].
    queued: bool,
    /// The spans of those that ended, flagged ones included (most clients have one: kept
    /// inline).
    ended: SmallVec<[Span; 1]>,
    /// The spans of the flagged ones whose overlaps are not counted yet (each also in
    /// `ended`). Allocated at the first: most clients have none, and the table holds one
    /// entry per client (8 bytes, not a `Vec`'s 24, in each of up to [`MAX_SPANS`] buckets).
    #[allow(clippy::box_collection)]
    flagged: Option<Box<Vec<Span>>>,
}

impl Peers {
    /// Rule 5 for the flagged flows not counted yet: how many of the client's other ended
    /// flows overlapped each, into its server's state. O(n log n) in the client's spans.
    fn settle(&mut self, group: GroupId, state: &mut PerGroup<State>) {
        let Some(flagged) = self.flagged.take().filter(|f| !f.is_empty()) else {
            return;
        };
        let st = state.get(group, Direction::ClientToServer);
        let mut starts: Vec<Timestamp> = self.ended.iter().map(|s| s.0).collect();
        let mut ends: Vec<Timestamp> = self.ended.iter().map(|s| s.1).collect();
        starts.sort_unstable();
        ends.sort_unstable();
        for &(first, last) in flagged.iter() {
            // A span misses this one when it starts at or after its end or ends at or before
            // its start, never both (a flagged flow's span is not empty: rule 3's saving lies
            // in it); the flow's own span is among them and overlaps.
            let after = starts.len() - starts.partition_point(|&s| s < last);
            let before = ends.partition_point(|&e| e <= first);
            let others = self.ended.len().saturating_sub(after + before + 1);
            st.overlapped_with(others);
        }
    }
}

/// The finding's example: the flagged flow that ended first (its end's position, [`At`]).
struct Chosen {
    at: At,
    flow: FlowRef,
    example: Option<Box<Example>>,
}

#[derive(Default)]
struct State {
    flows: u64,
    exchanges: u64,
    overlapped: u64,
    wall: Duration,
    waiting: Duration,
    saving: Duration,
    concurrent_flows: u64,
    peak: u32,
    near_client: u64,
    near_server: u64,
    rtt_us: Histogram,
    to_server_us: Histogram,
    to_client_us: Histogram,
    latency_us: Histogram,
    /// The flagged flows' spans (first request → last response), merged when they overlap.
    spans: Vec<Span>,
    /// Length of spans folded away to bound memory.
    folded: Duration,
    example: Option<Chosen>,
}

impl State {
    /// Rule 5: a flagged flow overlapped `others` other flows of its client.
    fn overlapped_with(&mut self, others: usize) {
        if others > 0 {
            self.concurrent_flows += 1;
            self.peak = self.peak.max(u32::try_from(others + 1).unwrap_or(u32::MAX));
        }
    }

    /// Another shard's state for the same server ([`Detector::absorb`]).
    fn absorb(&mut self, o: State, map: &ShardMap) {
        self.flows += o.flows;
        self.exchanges += o.exchanges;
        self.overlapped += o.overlapped;
        self.wall += o.wall;
        self.waiting += o.waiting;
        self.saving += o.saving;
        self.concurrent_flows += o.concurrent_flows;
        self.peak = self.peak.max(o.peak);
        self.near_client += o.near_client;
        self.near_server += o.near_server;
        self.rtt_us.merge(&o.rtt_us);
        self.to_server_us.merge(&o.to_server_us);
        self.to_client_us.merge(&o.to_client_us);
        self.latency_us.merge(&o.latency_us);
        self.spans.extend(o.spans);
        self.folded += o.folded;
        let theirs = o.example.map(|c| Chosen {
            flow: map.flow_ref(c.flow),
            ..c
        });
        super::earlier(&mut self.example, theirs, |c| c.at);
    }

    fn add_span(&mut self, first: Timestamp, last: Timestamp) {
        self.spans.push((first, last));
        if self.spans.len() > 2 * SPANS_KEPT {
            merge(&mut self.spans);
            if self.spans.len() > SPANS_KEPT {
                let old = self.spans.len() - SPANS_KEPT;
                self.folded += self.spans.drain(..old).map(|(a, b)| b.since(a)).sum();
            }
        }
    }

    /// The time the flagged flows covered together.
    fn elapsed(&mut self) -> Duration {
        merge(&mut self.spans);
        self.folded
            + self
                .spans
                .iter()
                .map(|&(a, b)| b.since(a))
                .sum::<Duration>()
    }

    /// Rule 4: the summed saving, at most `elapsed` less one round trip (connections that
    /// waited at the same time save that time once, and the requests, sent together, still
    /// wait one round trip for the first answer).
    fn capped_saving(&self, elapsed: Duration) -> Duration {
        let one_round_trip =
            Duration::from_secs_f64(self.rtt_us.distribution(1e-3).min.max(0.0) / 1e3);
        self.saving.min(elapsed.saturating_sub(one_round_trip))
    }
}

/// Sorts and merges overlapping spans.
fn merge(spans: &mut Vec<Span>) {
    spans.sort_unstable();
    let mut out: Vec<Span> = Vec::with_capacity(spans.len());
    for &(a, b) in spans.iter() {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    *spans = out;
}

/// What a shard hands over ([`Detector::take_state`]): the servers' states and the clients'
/// ended flows, every flow having ended.
struct Handed {
    state: PerGroup<State>,
    clients: HashMap<ClientKey, Peers>,
}

pub struct RttBound {
    /// The client, when `run` says it is its own scripted driver (rule 7).
    client: Option<ScriptedClient>,
    open: Slots<FlowState>,
    /// The state of the flow whose first exchange was told as it ended ([`At::end`]), with
    /// its id: it is judged a moment later, at its end, and takes no slot. (A busy server's
    /// flows often carry one exchange, told at their end: in slots, this state would take
    /// 72 bytes for every open flow, allocated as the flows close.)
    ending: Option<(u64, FlowState)>,
    /// Flows with exchanges per server and client address, to tell parallel connections.
    clients: HashMap<ClientKey, Peers>,
    /// Ended spans in [`RttBound::clients`].
    kept: usize,
    /// Clients whose open flows all ended, oldest first: the ones forgotten first once more
    /// than [`MAX_SPANS`] spans are kept (each client at most once: [`Peers::queued`]).
    idle: VecDeque<ClientKey>,
    /// [`MAX_SPANS`], smaller in tests.
    max_spans: usize,
    state: PerGroup<State>,
}

impl Default for RttBound {
    fn default() -> Self {
        RttBound {
            client: None,
            open: Slots::default(),
            ending: None,
            clients: HashMap::default(),
            kept: 0,
            idle: VecDeque::new(),
            max_spans: MAX_SPANS,
            state: PerGroup::default(),
        }
    }
}

impl RttBound {
    pub fn new(client: Option<ScriptedClient>) -> RttBound {
        RttBound {
            client,
            ..RttBound::default()
        }
    }

    /// The flow's state; on its first exchange (which starts at `start`), the flow joins its
    /// client's open flows.
    fn join_peer(&mut self, flow: &FlowView, start: Timestamp) -> &mut FlowState {
        let id = flow.flow.id;
        let in_slot = self.open.get(flow).is_some();
        let joins = !in_slot && self.ending.as_ref().is_none_or(|(e, _)| *e != id);
        if joins {
            self.clients
                .entry(client_key(flow.group, flow.flow.client.ip))
                .or_default()
                .open += 1;
        }
        let fs = if !in_slot && flow.at.end == 1 {
            if joins {
                self.ending = Some((id, FlowState::default()));
            }
            &mut self.ending.as_mut().expect("just set").1
        } else {
            self.open.get_or_default(flow)
        };
        if joins {
            fs.first = start;
        }
        fs
    }

    /// A flow of `key` that had exchanges over `span` ended (`flagged` by rule 3): its span
    /// joins the client's ended ones. O(1), amortised over the spans forgotten.
    fn leave_peer(&mut self, key: ClientKey, span: Span, flagged: bool) {
        let Some(peers) = self.clients.get_mut(&key) else {
            return;
        };
        peers.open = peers.open.saturating_sub(1);
        peers.ended.push(span);
        if flagged {
            peers.flagged.get_or_insert_default().push(span);
        }
        self.kept += 1;
        if peers.open == 0 && !peers.queued {
            peers.queued = true;
            self.idle.push_back(key);
        }
        if self.kept > self.max_spans {
            self.forget(key);
        }
    }

    /// Bounded memory over captures with very many flows: beyond [`MAX_SPANS`] ended spans,
    /// the clients idle longest (no open flow) are settled (rule 5 counted for their flagged
    /// flows) and forgotten; when every client has an open flow, `key`'s client is settled
    /// and keeps its newer half. Amortised O(1) per span: each client enters the queue once
    /// per time it falls idle, and a span is forgotten once.
    fn forget(&mut self, key: ClientKey) {
        while self.kept > self.max_spans {
            let Some(k) = self.idle.pop_front() else {
                break;
            };
            let MapEntry::Occupied(mut e) = self.clients.entry(k) else {
                continue;
            };
            if e.get().open > 0 {
                e.get_mut().queued = false;
                continue;
            }
            let mut peers = e.remove();
            peers.settle(group_of(&k), &mut self.state);
            self.kept -= peers.ended.len();
        }
        if self.kept > self.max_spans {
            if let Some(peers) = self.clients.get_mut(&key) {
                peers.settle(group_of(&key), &mut self.state);
                let old = peers.ended.len() / 2;
                peers.ended.drain(..old);
                self.kept -= old;
            }
        }
    }

    /// Rule 5 for every flagged flow not counted yet, every flow having ended.
    fn settle_all(&mut self) {
        for (key, mut peers) in self.clients.drain() {
            peers.settle(group_of(&key), &mut self.state);
        }
        self.idle.clear();
        self.kept = 0;
    }
}

impl Detector for RttBound {
    fn wants_exchanges(&self) -> bool {
        true
    }

    fn on_exchange(&mut self, flow: &FlowView, ex: &Exchange<'_>) {
        let to_server = flow.flow.rtt_towards_receiver(Direction::ClientToServer);
        let to_client = flow.flow.rtt_towards_receiver(Direction::ServerToClient);
        let fs = self.join_peer(flow, ex.start());
        fs.last = ex.response.last.ts;
        if to_server.is_some() || to_client.is_some() {
            let to_server = to_server.unwrap_or_default();
            let to_client = to_client.unwrap_or_default();
            let latency = ex.latency();
            let idle = ex.idle_before;
            let sequential = latency >= to_server && idle.is_none_or(|i| i >= to_client);
            if sequential {
                let own = latency.min(to_server);
                let before = idle.map_or(Duration::ZERO, |i| i.min(to_client));
                bump(&mut fs.sequential, true);
                bump(&mut fs.sequential_after_idle, idle.is_some());
                fs.latency_sum.add(latency);
                fs.waiting.add(own + before);
                let previous = ex.previous_response;
                // The first sequential exchange, or a later one that follows a response
                // (it shows both round trips).
                let better = match &fs.example {
                    None => true,
                    Some(e) => e.previous.is_none() && previous.is_some(),
                };
                if better {
                    fs.example = Some(Box::new(example(flow, ex, previous)));
                }
                // Sent at once, the requests would still pay the first one's round trip.
                if ex.index > 0 {
                    bump(&mut fs.sequential_later, true);
                    fs.saving.add(own + before);
                }
            } else {
                bump(&mut fs.overlapped, true);
            }
        }
    }

    fn on_flow_end(&mut self, flow: &FlowView) {
        let ending = self.ending.take_if(|(id, _)| *id == flow.flow.id);
        let Some(fs) = ending.map(|(_, fs)| fs).or_else(|| self.open.remove(flow)) else {
            return;
        };
        let first = fs.first;
        let judged = judge(flow, &fs);
        self.leave_peer(
            client_key(flow.group, flow.flow.client.ip),
            (first, fs.last),
            judged.is_some(),
        );
        let Some(Judged {
            first,
            rtt,
            to_server,
            to_client,
            wall,
            waiting,
            saving,
        }) = judged
        else {
            return;
        };
        let st = self.state.get(flow.group, Direction::ClientToServer);
        st.flows += 1;
        st.exchanges += u64::from(fs.sequential);
        st.overlapped += u64::from(fs.overlapped);
        st.wall += wall;
        st.waiting += waiting;
        st.saving += saving;
        st.add_span(first, fs.last);
        // Where the capture point sits: most of the round trip lies on one side of it.
        let towards_server = to_server.as_secs_f64() / rtt.as_secs_f64().max(1e-9);
        if towards_server >= 0.75 {
            st.near_client += 1;
        } else if towards_server <= 0.25 {
            st.near_server += 1;
        }
        st.rtt_us.record_duration(rtt);
        st.to_server_us.record_duration(to_server);
        st.to_client_us.record_duration(to_client);
        // One value per flow (its mean sequential exchange latency) keeps per-flow state small.
        st.latency_us
            .record_duration(fs.latency_sum.get() / fs.sequential);
        if super::first_at(&st.example, flow.at, |c| c.at) {
            st.example = Some(Chosen {
                at: flow.at,
                flow: flow.flow_ref(),
                example: fs.example,
            });
        }
    }

    fn mergeable(&self) -> bool {
        true
    }

    fn take_state(&mut self) -> Box<dyn Any + Send> {
        self.idle.clear();
        self.kept = 0;
        Box::new(Handed {
            state: std::mem::take(&mut self.state),
            clients: std::mem::take(&mut self.clients),
        })
    }

    fn absorb(&mut self, state: Box<dyn Any + Send>, map: &ShardMap) {
        let other: Handed = super::handed(state);
        self.state
            .absorb(other.state, map, |st, o| st.absorb(o, map));
        for (key, p) in other.clients {
            self.kept += p.ended.len();
            let into = client_key(map.group(group_of(&key)), key.1);
            let peers = self.clients.entry(into).or_default();
            peers.ended.extend(p.ended);
            if let Some(f) = p.flagged {
                peers.flagged.get_or_insert_default().extend(*f);
            }
        }
    }

    fn finish(&mut self, groups: &Groups) -> Vec<Finding> {
        self.settle_all();
        let mut out = Vec::new();
        for (group, dir, mut st) in self.state.drain() {
            let Some(chosen) = st.example.take() else {
                continue;
            };
            let elapsed = st.elapsed();
            let saving = st.capped_saving(elapsed);
            // Rule 4 can cap the summed saving below rule 3's minimum: then there is nothing
            // worth reporting for this server.
            if saving < MIN_SAVING {
                continue;
            }
            out.push(finding(
                group,
                dir,
                &st,
                (elapsed, saving),
                (chosen.flow, chosen.example),
                groups,
                self.client,
            ));
        }
        out
    }
}

/// The state this detector keeps per open flow, by size ([`super::tests`] keeps it small).
#[cfg(test)]
pub(super) fn per_flow_sizes() -> Vec<(&'static str, usize)> {
    vec![
        ("rtt_bound slot", std::mem::size_of::<(u64, FlowState)>()),
        (
            "rtt_bound client",
            std::mem::size_of::<(ClientKey, Peers)>(),
        ),
    ]
}

/// What rule 3 measured of a flow it flags.
struct Judged {
    first: Timestamp,
    rtt: Duration,
    to_server: Duration,
    to_client: Duration,
    wall: Duration,
    waiting: Duration,
    saving: Duration,
}

/// Rules 1–3 over an ended flow's state: its figures when it is flagged.
fn judge(flow: &FlowView, fs: &FlowState) -> Option<Judged> {
    let first = fs.first;
    let rtt = flow.flow.rtt()?;
    if u64::from(fs.sequential) < MIN_EXCHANGES || rtt < MIN_RTT {
        return None;
    }
    let to_server = flow
        .flow
        .rtt_towards_receiver(Direction::ClientToServer)
        .unwrap_or_default();
    let to_client = flow
        .flow
        .rtt_towards_receiver(Direction::ServerToClient)
        .unwrap_or_default();
    // The RTT is the fastest sample, so it only shrinks as the flow goes on: an exchange
    // judged early may have been credited a longer round trip than the flow's final one.
    // No exchange waited more than one final round trip.
    let rounds = |exchanges: u32, after_idle: u32| {
        to_server.saturating_mul(exchanges) + to_client.saturating_mul(after_idle)
    };
    let wall = fs.last.since(first);
    // Rule 2 bounds both by the spans measured; the guard keeps it so whatever changes.
    let waiting = fs
        .waiting
        .get()
        .min(rounds(fs.sequential, fs.sequential_after_idle))
        .min(wall);
    let saving = fs
        .saving
        .get()
        .min(rounds(fs.sequential_later, fs.sequential_after_idle))
        .min(waiting);
    let share = waiting.as_secs_f64() / wall.as_secs_f64().max(1e-9);
    if share < MIN_SHARE || saving < MIN_SAVING {
        return None;
    }
    Some(Judged {
        first,
        rtt,
        to_server,
        to_client,
        wall,
        waiting,
        saving,
    })
}

#[allow(clippy::too_many_arguments)]
fn finding(
    group: usize,
    dir: Direction,
    st: &State,
    (elapsed, saving): (Duration, Duration),
    (example_flow, example): (FlowRef, Option<Box<Example>>),
    groups: &Groups,
    client: Option<ScriptedClient>,
) -> Finding {
    let share = st.waiting.as_secs_f64() / st.wall.as_secs_f64().max(1e-9);
    let rtt = st.rtt_us.distribution(1e-3);
    let to_server = st.to_server_us.distribution(1e-3);
    let to_client = st.to_client_us.distribution(1e-3);
    let latency = st.latency_us.distribution(1e-3);
    let parallel = st.concurrent_flows * 2 > st.flows;
    // Rule 6: the time this finding says was lost, and its share of the time it covered.
    let lost_share = saving.as_secs_f64() / elapsed.as_secs_f64().max(1e-9);
    let severity = if lost_share >= CRITICAL_SHARE && saving >= CRITICAL_SAVING {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let words = text::wording(
        &text::Figures {
            turns: st.exchanges,
            flows: st.flows,
            all_turns: groups[group].exchanges,
            rtt_ms: rtt.p50,
            share,
            wall: st.wall,
            elapsed,
            saving,
            parallel,
            peak: st.peak,
        },
        client.as_ref(),
    );
    let verdict = words.verdict;
    let mut ev = Evidence::default();
    ev.facts.push(words.turns_fact);
    ev.facts.extend(words.client_fact);
    if st.overlapped > 0 {
        ev.facts.push(format!(
            "{} more exchanges in these flows were faster than a round trip allows: they \
             answered earlier requests (the client had several in flight) and are not counted",
            st.overlapped
        ));
    }
    ev.facts.push(format!(
        "path RTT at the capture point: {:.2} ms (median over flows): {:.2} ms towards the \
         server, {:.2} ms towards the client — {}; mean sequential exchange latency {:.2} ms \
         (median over flows)",
        rtt.p50,
        to_server.p50,
        to_client.p50,
        capture_point(st),
        latency.p50
    ));
    ev.facts.push(format!(
        "wall time {}, of which ≈{} is round trips ({:.0}%)",
        fmt_duration(st.wall),
        fmt_duration(st.waiting),
        share * 100.0
    ));
    if st.concurrent_flows > 0 {
        let which = if st.flows == 1 {
            "this flow".to_string()
        } else {
            format!("{} of these {} flows", st.concurrent_flows, st.flows)
        };
        ev.facts.push(format!(
            "{which} overlapped in time with other connections from the same client address \
             to this server (up to {} overlapping connections, each flow included); the \
             flagged flows covered {} together",
            st.peak,
            fmt_duration(elapsed)
        ));
    }
    ev.facts.push(format!(
        "sent without waiting, the same requests would need about one round trip plus the \
         server's time: ≈{} saved, of the {} measured",
        fmt_duration(saving),
        fmt_duration(elapsed)
    ));
    if let Some(e) = example {
        add_example(&mut ev, *e);
    }
    ev.counts.insert("exchanges".into(), st.exchanges);
    ev.counts
        .insert("overlapped_exchanges".into(), st.overlapped);
    ev.counts.insert("flows".into(), st.flows);
    ev.counts
        .insert("concurrent_flows".into(), st.concurrent_flows);
    ev.counts.insert(
        "max_concurrent_connections".into(),
        u64::from(st.peak.max(1)),
    );
    if let Some(c) = client {
        ev.counts
            .insert("driver_pipeline".into(), u64::from(c.pipeline));
        ev.counts
            .insert("driver_connections".into(), u64::from(c.connections));
        ev.counts.insert("driver_requests".into(), c.requests);
        ev.counts
            .insert("request_turns".into(), groups[group].exchanges);
        if c.requests > 0 && groups[group].exchanges > 0 {
            ev.values.insert(
                "requests_per_turn".into(),
                round3(c.requests as f64 / groups[group].exchanges as f64),
            );
        }
    }
    ev.values.insert("rtt_ms".into(), rtt.p50);
    ev.values
        .insert("rtt_towards_server_ms".into(), to_server.p50);
    ev.values
        .insert("rtt_towards_client_ms".into(), to_client.p50);
    ev.values
        .insert("wall_ms".into(), round3(crate::units::ms(st.wall)));
    ev.values
        .insert("elapsed_ms".into(), round3(crate::units::ms(elapsed)));
    ev.values
        .insert("waiting_ms".into(), round3(crate::units::ms(st.waiting)));
    ev.values.insert("round_trip_share".into(), round3(share));
    ev.values.insert(
        "pipelining_saves_ms".into(),
        round3(crate::units::ms(saving)),
    );
    ev.distributions.insert("rtt_ms".into(), rtt);
    ev.distributions
        .insert("flow_mean_exchange_latency_ms".into(), latency);
    let fix = words.fix;
    FindingHead {
        kind: FindingKind::RttBound,
        severity,
        group,
        direction: dir,
        flows_affected: st.flows,
        example_flow,
        time_lost: saving,
    }
    .finish(groups, verdict, ev, fix)
}

/// The claim and frames of one sequential exchange, with the round-trip samples in effect
/// when it was judged.
fn example(flow: &FlowView, ex: &Exchange<'_>, previous: Option<PacketRef>) -> Example {
    let pair = |dir| flow.flow.rtt_sample_towards_receiver(dir).map(|(_, f)| f);
    Example {
        previous,
        request: ex.request.first,
        response: ex.response.last,
        claim: SequentialExchange {
            request: ex.request.first.frame,
            response: ex.response.last.frame,
            previous_response: previous.map(|p| p.frame),
            syns: flow.flow.syn_frames(),
            rtt_to_server: pair(Direction::ClientToServer),
            rtt_to_client: pair(Direction::ServerToClient),
        },
    }
}

/// The example exchange as a timeline, its frames, and its claim.
fn add_example(ev: &mut Evidence, e: Example) {
    let origin = e.previous.unwrap_or(e.request).ts;
    let mut entry = |p: PacketRef, direction, what: String| {
        ev.timeline.push(TimelineEntry {
            frame: p.frame,
            t_ms: round3(crate::units::ms(p.ts.since(origin))),
            direction,
            what,
            payload_bytes: None,
            note: String::new(),
        });
        ev.frames.push(p.frame);
    };
    if let Some(p) = e.previous {
        entry(
            p,
            Direction::ServerToClient,
            "end of the previous response".into(),
        );
    }
    let waited = if e.previous.is_some() {
        "request starts, after the response above"
    } else {
        "request starts"
    };
    entry(e.request, Direction::ClientToServer, waited.into());
    entry(
        e.response,
        Direction::ServerToClient,
        format!(
            "end of its response, {} after the request: at least one round trip",
            fmt_duration(e.response.ts.since(e.request.ts))
        ),
    );
    let c = &e.claim;
    let pairs: Vec<String> = [
        (c.rtt_to_server, "towards the server"),
        (c.rtt_to_client, "towards the client"),
    ]
    .into_iter()
    .filter_map(|(pair, way)| {
        let [x, y] = pair?;
        ev.frames.extend([x, y]);
        Some(format!("frame {x} → its first ACK in frame {y} {way}"))
    })
    .collect();
    if !pairs.is_empty() {
        ev.facts.push(format!(
            "the example's round trips were measured as the fastest segment → ACK times up to \
             it: {}",
            pairs.join("; ")
        ));
    }
    ev.frames.sort_unstable();
    ev.frames.dedup();
    ev.claims.push(Claim::SequentialExchange(e.claim));
}

/// Where the capture point sits on the path, from how the round trip splits around it.
fn capture_point(st: &State) -> &'static str {
    if st.near_client * 2 > st.flows {
        "captured near the client"
    } else if st.near_server * 2 > st.flows {
        "captured near the server: exchanges look short there, and the client pays the round \
         trip in the silence before each request"
    } else {
        "captured between the two"
    }
}

#[cfg(test)]
mod tests;
