//! One capture's analysis: frames → segments → flows → turns → detectors → findings.
//!
//! Streaming and single-pass. Memory grows with the number of *concurrent* flows and of
//! servers, never with the number of packets: ended flows are swept out as the capture's own
//! clock moves on, and flows idle for [`IDLE_FLOW_TIMEOUT`] are ended.

use std::collections::hash_map::Entry as MapEntry;
use std::time::Duration;

use crate::detect::{self, Detector, FlowView, GroupId, GroupInfo};
use crate::flow::{Direction, Flow, FlowKey, FlowState, PacketRef, SegmentKind};
use crate::fxhash::FxHashMap;
use crate::report::{CaptureSummary, Census, Finding, ServerSummary, MAX_SERVERS_LISTED};
use crate::seq::SeqNum;
use crate::stats::{round3, Histogram};
use crate::time::Timestamp;
use crate::turns::{Ended, TurnTracker};
use crate::wire::{decode_tcp, Decoded, Endpoint, LinkType, TcpSegment};

/// A flow with no packet for this long (capture time) is ended.
pub const IDLE_FLOW_TIMEOUT: Duration = Duration::from_secs(600);
/// Ended flows are kept this long to absorb their last ACKs, then forgotten.
pub const ENDED_FLOW_LINGER: Duration = Duration::from_secs(5);
/// How often (in packets) the flow table is swept.
const SWEEP_EVERY: u64 = 1 << 16;

struct Entry {
    flow: Flow,
    turns: TurnTracker,
    group: GroupId,
    first_data: Option<Timestamp>,
}

/// Per-server totals for the capture summary.
#[derive(Default)]
struct GroupTotals {
    bytes: [u64; 2],
    latency_us: Histogram,
    rtt_us: Histogram,
}

/// Starts tracking a flow first seen in `seg`.
fn new_entry(
    next_id: &mut u64,
    group_of: &mut FxHashMap<Endpoint, GroupId>,
    sinks: &mut Sinks,
    seg: &TcpSegment,
    pkt: PacketRef,
) -> Box<Entry> {
    let flow = Flow::new(*next_id, seg, pkt);
    *next_id += 1;
    let group = *group_of.entry(flow.server).or_insert_with(|| {
        sinks.groups.push(GroupInfo {
            server: flow.server,
            flows: 0,
            exchanges: 0,
        });
        sinks.totals.push(GroupTotals::default());
        sinks.groups.len() - 1
    });
    sinks.groups[group].flows += 1;
    Box::new(Entry {
        flow,
        turns: TurnTracker::default(),
        group,
        first_data: None,
    })
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
}

impl Sinks {
    fn view(entry: &Entry) -> FlowView<'_> {
        FlowView {
            flow: &entry.flow,
            group: entry.group,
            exchanges: entry.turns.exchanges(),
            first_data: entry.first_data,
        }
    }

    fn on_segment(&mut self, entry: &mut Entry, seg: &TcpSegment, pkt: PacketRef) {
        let ev = entry.flow.on_segment(seg, pkt);
        if matches!(
            ev.kind,
            SegmentKind::NewData | SegmentKind::DataAfterGap | SegmentKind::OutOfOrder
        ) {
            entry.first_data.get_or_insert(pkt.ts);
            self.totals[entry.group].bytes[ev.dir.index()] += u64::from(ev.len);
        }
        let ended = entry.turns.on_segment(&ev);
        let view = Self::view(entry);
        for &i in &self.per_segment {
            self.detectors[i].on_segment(&view, &ev);
        }
        self.dispatch(&view, &entry.turns, ended);
    }

    fn dispatch(&mut self, view: &FlowView, turns: &TurnTracker, ended: Ended) {
        if !ended.turn {
            return;
        }
        if let Some(turn) = turns.ended_turn() {
            for &i in &self.per_turn {
                self.detectors[i].on_turn(view, turn);
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
        let view = Self::view(entry);
        self.dispatch(&view, &entry.turns, ended);
        self.groups[entry.group].exchanges += u64::from(entry.turns.exchanges());
        if let (Some(rtt), Some(_)) = (entry.flow.rtt(), entry.first_data) {
            self.totals[entry.group].rtt_us.record_duration(rtt);
        }
        for d in self.detectors.iter_mut() {
            d.on_flow_end(&view);
        }
        entry.flow.state = FlowState::Ended;
        entry.flow.forget_history();
        entry.turns = TurnTracker::default();
    }
}

/// Analyses one capture, packet by packet.
pub struct Analyzer {
    /// Boxed: an entry is over a kilobyte, and probing and growing the table should touch
    /// keys and pointers only.
    flows: FxHashMap<FlowKey, Box<Entry>>,
    next_flow_id: u64,
    group_of: FxHashMap<Endpoint, GroupId>,
    sinks: Sinks,
    frames: u64,
    tcp_segments: u64,
    census: Census,
    first_ts: Option<Timestamp>,
    last_ts: Timestamp,
    link_types: Vec<LinkType>,
}

impl Default for Analyzer {
    fn default() -> Self {
        Analyzer::new(detect::all())
    }
}

impl Analyzer {
    pub fn new(detectors: Vec<Box<dyn Detector>>) -> Analyzer {
        Analyzer {
            flows: FxHashMap::default(),
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
            },
            frames: 0,
            tcp_segments: 0,
            census: Census::default(),
            first_ts: None,
            last_ts: Timestamp::ZERO,
            link_types: Vec::new(),
        }
    }

    /// Decodes and analyses one captured frame.
    pub fn on_frame(&mut self, frame: u64, ts: Timestamp, link: LinkType, data: &[u8], orig: u32) {
        self.frames += 1;
        if !self.link_types.contains(&link) {
            self.link_types.push(link);
        }
        match decode_tcp(link, data, orig) {
            Decoded::Tcp(seg, None) => self.on_segment(PacketRef { frame, ts }, &seg),
            Decoded::Tcp(seg, via) => {
                self.census.tunnelled(via);
                self.on_segment(PacketRef { frame, ts }, &seg);
            }
            other => self.census.not_analysed(&other),
        }
    }

    /// Number of TCP segments analysed so far.
    pub fn tcp_segments(&self) -> u64 {
        self.tcp_segments
    }

    /// Analyses one decoded TCP segment.
    pub fn on_segment(&mut self, pkt: PacketRef, seg: &TcpSegment) {
        self.tcp_segments += 1;
        self.first_ts.get_or_insert(pkt.ts);
        self.last_ts = self.last_ts.max(pkt.ts);
        if self.tcp_segments.is_multiple_of(SWEEP_EVERY) {
            self.sweep(pkt.ts);
        }
        let key = FlowKey::of(seg);
        let starts_new = seg.flags.syn() && !seg.flags.ack();
        let entry = match self.flows.entry(key) {
            MapEntry::Occupied(o) => {
                let e = o.into_mut();
                let reuse = starts_new
                    && e.flow.is_closed()
                    && e.flow.half(e.flow.direction_of(seg)).isn != Some(SeqNum(seg.seq));
                if reuse {
                    let fresh = new_entry(
                        &mut self.next_flow_id,
                        &mut self.group_of,
                        &mut self.sinks,
                        seg,
                        pkt,
                    );
                    let mut old = std::mem::replace(e, fresh);
                    self.sinks.end_flow(&mut old);
                }
                e
            }
            MapEntry::Vacant(v) => v.insert(new_entry(
                &mut self.next_flow_id,
                &mut self.group_of,
                &mut self.sinks,
                seg,
                pkt,
            )),
        };
        if entry.flow.state == FlowState::Ended {
            entry.flow.last_ts = pkt.ts;
            return;
        }
        self.sinks.on_segment(entry, seg, pkt);
        if entry.flow.is_closed() {
            self.sinks.end_flow(entry);
        }
    }

    /// Ends idle flows and forgets long-ended ones.
    fn sweep(&mut self, now: Timestamp) {
        let stale: Vec<FlowKey> = self
            .flows
            .iter()
            .filter(|(_, e)| match e.flow.state {
                FlowState::Ended => now.since(e.flow.last_ts) > ENDED_FLOW_LINGER,
                FlowState::Open => now.since(e.flow.last_ts) > IDLE_FLOW_TIMEOUT,
            })
            .map(|(k, _)| *k)
            .collect();
        for key in stale {
            if let Some(mut entry) = self.flows.remove(&key) {
                self.sinks.end_flow(&mut entry);
            }
        }
    }

    /// Ends every flow and collects the findings. `file` names the capture in findings.
    pub fn finish(mut self, file: &str, format: &str) -> (CaptureSummary, Vec<Finding>) {
        let mut open: Vec<Box<Entry>> = self.flows.drain().map(|(_, e)| e).collect();
        open.sort_by_key(|e| e.flow.id);
        for mut entry in open {
            self.sinks.end_flow(&mut entry);
        }
        let sinks = &mut self.sinks;
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
        let duration = match self.first_ts {
            Some(first) => self.last_ts.since(first),
            None => Duration::ZERO,
        };
        let (skipped, tunnels) = self.census.finish();
        let summary = CaptureSummary {
            file: file.to_string(),
            format: format.to_string(),
            link_types: self.link_types.iter().map(|l| l.to_string()).collect(),
            frames: self.frames,
            tcp_segments: self.tcp_segments,
            skipped,
            tunnels,
            flows: self.next_flow_id - 1,
            exchanges: self.sinks.exchanges,
            duration_ms: round3(crate::units::ms(duration)),
            servers,
            servers_omitted: omitted,
            truncated: None,
        };
        (summary, findings)
    }
}
