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
//!    connections. The wire shows request *turns*, not how many requests each carries: the
//!    advice covers a client with one request per turn (a browser's HTTP/1.1 pool, which
//!    cannot pipeline: multiplex, or fewer requests) and one whose protocol already pipelines
//!    (more requests per turn, batching). Otherwise it is pipelining or batching on the
//!    connection.
//! 6. Severity follows the time the finding says was lost (the saving, `time_lost_ms`):
//!    critical when it is at least [`CRITICAL_SAVING`] and at least [`CRITICAL_SHARE`] of the
//!    time the flagged flows covered together; otherwise a warning.
//! 7. When `run` says the client is its own scripted driver ([`ScriptedClient`]), the finding
//!    says so: the waiting is the script's protocol, and the fix is the script's (deeper
//!    `--pipeline`, batched commands), never the server's. It states the driver's pipelining
//!    depth and the requests per turn the wire carried (requests completed ÷ request turns
//!    to this server); "one request at a time" only with `--pipeline 1`, and multiplexing
//!    (HTTP/2) is never offered to a client that pipelines. The rule itself is unchanged.

use crate::analysis::ScriptedClient;
use crate::fxhash::FxHashMap as HashMap;
use std::collections::hash_map::Entry as MapEntry;
use std::collections::VecDeque;
use std::net::IpAddr;
use std::time::Duration;

use super::{Detector, FindingHead, FlowView, GroupId, Groups, PerGroup, Slots};
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
/// Ended flows remembered per client address and server, to tell parallel connections.
const PEERS_KEPT: usize = 64;
/// Client addresses remembered: beyond this, those with no open flow are forgotten, the ones
/// idle longest first.
const MAX_CLIENTS: usize = 65_536;
/// Flagged flows' time spans remembered per server before the oldest are folded into a total.
const SPANS_KEPT: usize = 4096;

#[derive(Default)]
struct FlowState {
    exchanges: u64,
    sequential: u64,
    /// Sequential exchanges after the flow's first (their round trips are what a client
    /// that did not wait would save), and those with a silence before them.
    sequential_later: u64,
    sequential_after_idle: u64,
    overlapped: u64,
    first: Option<Timestamp>,
    last: Timestamp,
    latency_sum: Duration,
    waiting: Duration,
    saving: Duration,
    /// One sequential exchange, as frames the audit can check (one after a previous response
    /// when the flow has one).
    example: Option<Box<Example>>,
    /// This flow's place in its client's [`Peers::open`], to leave it in O(1).
    peer_index: u32,
}

/// A sequential exchange and the round-trip samples it was judged on.
struct Example {
    previous: Option<PacketRef>,
    request: PacketRef,
    response: PacketRef,
    claim: SequentialExchange,
}

/// The flows of one client address to one server: the open ones (their spans live in
/// [`FlowState`]) and the spans of the last [`PEERS_KEPT`] that ended.
#[derive(Default)]
struct Peers {
    /// Open flows: (id, detector slot), in no particular order.
    open: Vec<(u64, usize)>,
    ended: VecDeque<(Timestamp, Timestamp)>,
    /// Whether the client is in [`RttBound::idle`].
    queued: bool,
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
    spans: Vec<(Timestamp, Timestamp)>,
    /// Length of spans folded away to bound memory.
    folded: Duration,
    example: Option<(FlowRef, Option<Box<Example>>)>,
}

impl State {
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
fn merge(spans: &mut Vec<(Timestamp, Timestamp)>) {
    spans.sort_unstable();
    let mut out: Vec<(Timestamp, Timestamp)> = Vec::with_capacity(spans.len());
    for &(a, b) in spans.iter() {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    *spans = out;
}

pub struct RttBound {
    /// The client, when `run` says it is its own scripted driver (rule 7).
    client: Option<ScriptedClient>,
    open: Slots<FlowState>,
    /// Flows with exchanges per client address and server, to tell parallel connections.
    clients: HashMap<(GroupId, IpAddr), Peers>,
    /// Clients whose open flows all ended, oldest first: the ones forgotten first once there
    /// are more than [`MAX_CLIENTS`] (each client at most once: [`Peers::queued`]).
    idle: VecDeque<(GroupId, IpAddr)>,
    /// [`MAX_CLIENTS`], smaller in tests.
    max_clients: usize,
    state: PerGroup<State>,
}

impl Default for RttBound {
    fn default() -> Self {
        RttBound {
            client: None,
            open: Slots::default(),
            clients: HashMap::default(),
            idle: VecDeque::new(),
            max_clients: MAX_CLIENTS,
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

    /// Records `flow`'s exchange span and marks the flows of the same client that overlap it.
    /// How many other connections from the flow's client address to this server exchanged
    /// data while it did (open ones, and the last [`PEERS_KEPT`] that ended). Work per flow,
    /// only for the flows that are reported, never per exchange.
    fn overlapping(&self, flow: &FlowView, first: Timestamp, last: Timestamp) -> u32 {
        let Some(peers) = self.clients.get(&(flow.group, flow.flow.client.ip)) else {
            return 0;
        };
        let open = peers
            .open
            .iter()
            .filter(|&&(id, _)| id != flow.flow.id)
            .filter_map(|&(id, slot)| self.open.get_at(slot, id))
            .filter_map(|fs| Some((fs.first?, fs.last)));
        let overlaps = open
            .chain(peers.ended.iter().copied())
            .filter(|&(a, b)| a < last && first < b)
            .count();
        u32::try_from(overlaps).unwrap_or(u32::MAX)
    }

    /// The flow's state; on its first exchange, the flow joins its client's open flows.
    fn join_peer(&mut self, flow: &FlowView) -> &mut FlowState {
        let mut joined = None;
        if self.open.get(flow).is_none() {
            let peers = self
                .clients
                .entry((flow.group, flow.flow.client.ip))
                .or_default();
            joined = Some(peers.open.len() as u32);
            peers.open.push((flow.flow.id, flow.slot));
        }
        let fs = self.open.get_or_default(flow);
        if let Some(index) = joined {
            fs.peer_index = index;
        }
        fs
    }

    /// Moves an ending flow from its client's open flows (at `index` there) to the ended
    /// spans. O(1): the last open flow takes its place.
    fn forget_peer(&mut self, flow: &FlowView, index: u32, span: Option<(Timestamp, Timestamp)>) {
        let key = (flow.group, flow.flow.client.ip);
        let Some(peers) = self.clients.get_mut(&key) else {
            return;
        };
        let index = index as usize;
        if peers
            .open
            .get(index)
            .is_some_and(|&(id, _)| id == flow.flow.id)
        {
            peers.open.swap_remove(index);
            if let Some(&(id, slot)) = peers.open.get(index) {
                if let Some(moved) = self.open.get_mut_at(slot, id) {
                    moved.peer_index = index as u32;
                }
            }
        }
        if let Some(span) = span {
            if peers.ended.len() == PEERS_KEPT {
                peers.ended.pop_front();
            }
            peers.ended.push_back(span);
        }
        if peers.open.is_empty() && !peers.queued {
            peers.queued = true;
            self.idle.push_back(key);
        }
        self.evict_idle_clients();
    }

    /// Bounded memory over captures with very many client addresses: beyond [`MAX_CLIENTS`],
    /// the clients idle longest (no open flow) are forgotten. Amortised O(1): each client
    /// enters the queue once per time it falls idle.
    fn evict_idle_clients(&mut self) {
        while self.clients.len() > self.max_clients {
            let Some(key) = self.idle.pop_front() else {
                return;
            };
            let MapEntry::Occupied(mut e) = self.clients.entry(key) else {
                continue;
            };
            if e.get().open.is_empty() {
                e.remove();
            } else {
                e.get_mut().queued = false;
            }
        }
    }
}

impl Detector for RttBound {
    fn wants_exchanges(&self) -> bool {
        true
    }

    fn on_exchange(&mut self, flow: &FlowView, ex: &Exchange<'_>) {
        let to_server = flow.flow.rtt_towards_receiver(Direction::ClientToServer);
        let to_client = flow.flow.rtt_towards_receiver(Direction::ServerToClient);
        let fs = self.join_peer(flow);
        fs.exchanges += 1;
        fs.first.get_or_insert(ex.start());
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
                fs.sequential += 1;
                fs.sequential_after_idle += u64::from(idle.is_some());
                fs.latency_sum += latency;
                fs.waiting += own + before;
                let previous = ex.idle_before.and(ex.request.previous).map(|p| p.last);
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
                    fs.sequential_later += 1;
                    fs.saving += own + before;
                }
            } else {
                fs.overlapped += 1;
            }
        }
    }

    fn on_flow_end(&mut self, flow: &FlowView) {
        let Some(fs) = self.open.remove(flow) else {
            return;
        };
        // Counted before this flow's span joins its client's ended ones, and only for a flow
        // that rule 3 flags (the count scans the client's other flows).
        let peak = match (fs.first, judge(flow, &fs)) {
            (Some(first), Some(_)) => self.overlapping(flow, first, fs.last) + 1,
            _ => 0,
        };
        self.forget_peer(flow, fs.peer_index, fs.first.map(|f| (f, fs.last)));
        let Some(Judged {
            first,
            rtt,
            to_server,
            to_client,
            wall,
            waiting,
            saving,
        }) = judge(flow, &fs)
        else {
            return;
        };
        let st = self.state.get(flow.group, Direction::ClientToServer);
        st.flows += 1;
        st.exchanges += fs.sequential;
        st.overlapped += fs.overlapped;
        st.wall += wall;
        st.waiting += waiting;
        st.saving += saving;
        st.add_span(first, fs.last);
        if peak > 1 {
            st.concurrent_flows += 1;
            st.peak = st.peak.max(peak);
        }
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
            .record_duration(fs.latency_sum / fs.sequential.min(u32::MAX as u64) as u32);
        if st.example.is_none() {
            st.example = Some((flow.flow_ref(), fs.example));
        }
    }

    fn finish(&mut self, groups: &Groups) -> Vec<Finding> {
        let mut out = Vec::new();
        for (group, dir, mut st) in self.state.drain() {
            let Some((example_flow, example)) = st.example.take() else {
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
                (example_flow, example),
                groups,
                self.client,
            ));
        }
        out
    }
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
    let (Some(first), Some(rtt)) = (fs.first, flow.flow.rtt()) else {
        return None;
    };
    if fs.sequential < MIN_EXCHANGES || rtt < MIN_RTT {
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
    let rounds = |exchanges: u64, after_idle: u64| {
        to_server.saturating_mul(exchanges.min(u64::from(u32::MAX)) as u32)
            + to_client.saturating_mul(after_idle.min(u64::from(u32::MAX)) as u32)
    };
    let wall = fs.last.since(first);
    // Rule 2 bounds both by the spans measured; the guard keeps it so whatever changes.
    let waiting = fs
        .waiting
        .min(rounds(fs.sequential, fs.sequential_after_idle))
        .min(wall);
    let saving = fs
        .saving
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
