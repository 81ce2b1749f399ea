//! One capture analysed by several threads, each taking a share of its connections.
//!
//! Every thread reads the whole capture (each frame's timestamp drives its clock, so flows
//! age the same in every shard) but analyses only the segments of the flows that hash to it:
//! a flow's packets all go to one shard, in order. At the end the shards are merged into the
//! report one thread would have written:
//! 1. **Flow ids** are given in order of the position ([`At`]) of the segment that began the
//!    flow, across all shards: the order one thread gives them in.
//! 2. **Servers** (groups) are ordered by the position of their first flow; the same server
//!    seen by several shards is one group, its counts added.
//! 3. **Detectors** hand over their per-server state ([`Detector::take_state`]) and fold the
//!    other shards' into theirs ([`Detector::absorb`]), ids translated by a [`ShardMap`]:
//!    counts add, distributions merge exactly, and an example is the one at the smallest
//!    position, which is the one a single thread keeps.
//! 4. The frame and segment counts, the clock, the census of what was not analysed, and the
//!    link types come from shard 0, which sees every frame as the others do.
//!
//! A capture can also be decoded once, by a *dispatcher* that hands each segment (with its
//! position and the clock) to its shard's analyzer: the frames are then read and decoded once,
//! and the summary's counts, clock and census come from the dispatcher.
//!
//! The result is the single thread's, byte for byte, with one exception stated where its cap
//! is: `rtt_bound`'s ended client spans are capped per shard, so a capture that reaches that
//! cap may keep a different sample. Hop legs past their cap are, in every analyzer, those of
//! the flows that began first. Half-open attempts are capped at each shard's share of the cap;
//! a shard that passes it says so ([`crate::analysis::Analyzer::shard_capped`]) and the
//! capture must be analysed again by one analyzer (`analyze` does): while no shard passes its
//! share, the shards together hold no more than one analyzer may, and it drops none.

use std::hash::{Hash, Hasher};

use crate::detect::{At, GroupId};
use crate::flow::{FlowKey, PacketRef};
use crate::fxhash::FxHashMap;
use crate::report::FlowRef;
use crate::time::Timestamp;
use crate::wire::Endpoint;
use crate::wire::TcpSegment;

/// What a shard records as it goes: which flows it owns, and where its flows and servers
/// began.
#[derive(Debug)]
pub(crate) struct ShardLog {
    index: u64,
    count: u64,
    /// Where each flow began ([`began_at`]), by its id in this shard (id 1 first).
    pub(crate) flows: Vec<u64>,
    /// Where each server was first seen, by its group in this shard.
    pub(crate) groups: Vec<At>,
}

impl ShardLog {
    pub(crate) fn new(index: usize, count: usize) -> ShardLog {
        assert!(index < count, "shard {index} of {count}");
        ShardLog {
            index: index as u64,
            count: count as u64,
            flows: Vec::new(),
            groups: Vec::new(),
        }
    }

    /// Whether the flow on these endpoints is this shard's.
    #[inline]
    pub(crate) fn owns(&self, key: &FlowKey) -> bool {
        shard_of(key, self.count) == self.index as usize
    }

    pub(crate) fn flow_created(&mut self, id: u64, at: At) {
        debug_assert_eq!(id as usize, self.flows.len() + 1, "ids are given in order");
        self.flows.push(began_at(at));
    }

    pub(crate) fn group_created(&mut self, at: At) {
        self.groups.push(at);
    }
}

/// A flow's first position in 8 bytes (it is kept for every flow): the frame above 16 bits,
/// the packet within it below (an A-MSDU holds far fewer than 65,536). A flow begins while a
/// segment is analysed, never at an end.
fn began_at(at: At) -> u64 {
    at.frame << 16 | u64::from(at.packet.min(0xffff))
}

/// The shard, of `count`, that the flow on these endpoints belongs to.
#[inline]
pub(crate) fn shard_of(key: &FlowKey, count: u64) -> usize {
    let mut h = crate::fxhash::FxHasher::default();
    key.hash(&mut h);
    // The high bits of the product: FxHash mixes upwards.
    ((u128::from(h.finish()) * u128::from(count)) >> 64) as usize
}

/// A TCP segment a dispatching analyzer ([`crate::analysis::Analyzer::dispatcher`]) decoded
/// and hands to the shard that owns its flow: where it was, and the capture's elapsed-time
/// clock at it (the dispatcher sees every segment; a shard only its own).
#[derive(Clone, Copy, Debug)]
pub struct Routed {
    pub pkt: PacketRef,
    pub seg: TcpSegment,
    pub at: At,
    pub now: Timestamp,
}

/// What a dispatcher keeps: a batch of segments per shard, taken by the caller to send on.
#[derive(Debug)]
pub(crate) struct Router {
    pub(crate) batches: Vec<Vec<Routed>>,
}

/// How one shard's flow ids and groups read in the merged report.
#[derive(Debug, Default)]
pub struct ShardMap {
    /// Global id of each of the shard's flows (index: its id − 1).
    flows: Vec<u64>,
    /// Global group of each of the shard's groups.
    groups: Vec<GroupId>,
}

impl ShardMap {
    /// A map that changes nothing: for tests of a detector's merge, and one thread.
    pub fn identity(flows: u64, groups: usize) -> ShardMap {
        ShardMap {
            flows: (1..=flows).collect(),
            groups: (0..groups).collect(),
        }
    }

    /// The global id of the shard's flow `id` (0, "no flow", stays 0).
    pub fn flow(&self, id: u64) -> u64 {
        match id {
            0 => 0,
            id => self.flows[id as usize - 1],
        }
    }

    /// The global group of the shard's group `g`.
    pub fn group(&self, g: GroupId) -> GroupId {
        self.groups[g]
    }

    /// `r` with its id translated.
    pub fn flow_ref(&self, r: FlowRef) -> FlowRef {
        FlowRef {
            id: self.flow(r.id),
            ..r
        }
    }
}

/// The maps of every shard, from the positions they logged and their servers' endpoints
/// (`servers[s][g]`: the endpoint of shard `s`'s group `g`). Returns the maps, the number of
/// flows, and the global groups' endpoints in order.
pub(crate) fn maps(
    logs: &[&ShardLog],
    servers: &[Vec<Endpoint>],
) -> (Vec<ShardMap>, u64, Vec<Endpoint>) {
    let mut began: Vec<(u64, u32, u32)> = Vec::new();
    for (s, log) in logs.iter().enumerate() {
        began.extend(
            log.flows
                .iter()
                .enumerate()
                .map(|(i, at)| (*at, s as u32, i as u32)),
        );
    }
    began.sort_unstable();
    let mut out: Vec<ShardMap> = logs
        .iter()
        .map(|log| ShardMap {
            flows: vec![0; log.flows.len()],
            groups: Vec::new(),
        })
        .collect();
    for (rank, (_, s, i)) in began.iter().enumerate() {
        out[*s as usize].flows[*i as usize] = rank as u64 + 1;
    }
    let mut first: FxHashMap<Endpoint, At> = FxHashMap::default();
    for (log, eps) in logs.iter().zip(servers) {
        for (at, ep) in log.groups.iter().zip(eps) {
            first
                .entry(*ep)
                .and_modify(|a| *a = (*a).min(*at))
                .or_insert(*at);
        }
    }
    let mut order: Vec<(At, Endpoint)> = first.into_iter().map(|(ep, at)| (at, ep)).collect();
    order.sort_unstable_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    let global: FxHashMap<Endpoint, GroupId> = order
        .iter()
        .enumerate()
        .map(|(g, (_, ep))| (*ep, g))
        .collect();
    for (map, eps) in out.iter_mut().zip(servers) {
        map.groups = eps.iter().map(|ep| global[ep]).collect();
    }
    (
        out,
        began.len() as u64,
        order.into_iter().map(|(_, ep)| ep).collect(),
    )
}
