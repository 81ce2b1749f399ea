//! The tables of tracked flows, by their endpoints, in 8 bytes per bucket (issue 29).
//!
//! A map from [`FlowKey`] to a boxed entry keeps the key in every bucket beside the pointer:
//! 48 bytes, where the flow itself already knows its endpoints. This table keeps the pointer
//! only and reads a flow's endpoints from it (hashing them as [`FlowKey`] does, with
//! [`FxHasher`]): at 400,000 open flows its 524,288 buckets take 4.7 MB, not 25.7 MB. A
//! lookup compares the endpoints of the flows whose hash tag matches, which it reads next
//! anyway.

use std::hash::{BuildHasher, BuildHasherDefault};

use hashbrown::hash_table::{self, HashTable};

use super::Entry;
use crate::flow::FlowKey;
use crate::fxhash::FxHasher;
use crate::wire::Endpoint;

/// What a table keeps: something that knows its flow's two endpoints.
pub(crate) trait Endpoints {
    /// The flow's client and server.
    fn endpoints(&self) -> (Endpoint, Endpoint);
}

impl Endpoints for Entry {
    #[inline(always)]
    fn endpoints(&self) -> (Endpoint, Endpoint) {
        (self.flow.client, self.flow.server)
    }
}

/// One hash table slot's view of a flow: its entry, or room for one.
pub(crate) type Slot<'a, T = Entry> = hash_table::Entry<'a, Box<T>>;

/// Open flows ([`Entry`]), or ended ones lingering ([`super::linger::Lingering`]).
pub(crate) struct FlowTable<T = Entry> {
    table: HashTable<Box<T>>,
}

impl<T> Default for FlowTable<T> {
    fn default() -> Self {
        FlowTable {
            table: HashTable::new(),
        }
    }
}

#[inline(always)]
fn hash(key: &FlowKey) -> u64 {
    BuildHasherDefault::<FxHasher>::default().hash_one(key)
}

/// The key of a tracked flow: its two endpoints in the canonical order.
#[inline]
fn key_of<T: Endpoints>(e: &T) -> FlowKey {
    let (c, s) = e.endpoints();
    FlowKey::new(c, s)
}

/// Whether `e` is the flow between the endpoints of `key` (in either role).
#[inline(always)]
fn is<T: Endpoints>(e: &T, key: &FlowKey) -> bool {
    let (c, s) = e.endpoints();
    (c == key.0 && s == key.1) || (c == key.1 && s == key.0)
}

impl<T: Endpoints> FlowTable<T> {
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    #[inline(always)]
    pub(crate) fn entry(&mut self, key: FlowKey) -> Slot<'_, T> {
        self.table
            .entry(hash(&key), |e| is(&**e, &key), |e| hash(&key_of(&**e)))
    }

    pub(crate) fn get_mut(&mut self, key: &FlowKey) -> Option<&mut Box<T>> {
        self.table.find_mut(hash(key), |e| is(&**e, key))
    }

    /// Puts `value` in the table, under the key it knows; the key must not be there yet.
    pub(crate) fn insert(&mut self, value: Box<T>) -> &mut Box<T> {
        let key = key_of(&*value);
        match self.entry(key) {
            hash_table::Entry::Vacant(v) => v.insert(value).into_mut(),
            hash_table::Entry::Occupied(_) => unreachable!("a flow inserted twice"),
        }
    }

    pub(crate) fn remove(&mut self, key: &FlowKey) -> Option<Box<T>> {
        match self.table.find_entry(hash(key), |e| is(&**e, key)) {
            Ok(o) => Some(o.remove().0),
            Err(_) => None,
        }
    }

    /// Keeps only what `keep` says to.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        self.table.retain(|e| keep(&**e));
    }

    /// Every flow's key, with its entry.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (FlowKey, &T)> {
        self.table.iter().map(|e| (key_of(&**e), &**e))
    }

    #[cfg(test)]
    pub(crate) fn values(&self) -> impl Iterator<Item = &T> {
        self.table.iter().map(|e| &**e)
    }

    /// Every flow, the table freed.
    pub(crate) fn into_values(self) -> impl Iterator<Item = Box<T>> {
        self.table.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::Analyzer;
    use crate::flow::PacketRef;
    use crate::time::Timestamp;
    use crate::wire::{TcpFlags, TcpOptions, TcpSegment};

    fn seg(src: u16, dst: u16, flags: u8) -> TcpSegment {
        let ep = |port| Endpoint {
            ip: "10.0.0.1".parse().unwrap(),
            port,
        };
        TcpSegment {
            src: ep(src),
            dst: ep(dst),
            seq: 1,
            ack: 1,
            flags: TcpFlags(flags),
            window: 1000,
            payload_len: 10,
            options: TcpOptions::default(),
        }
    }

    /// A flow is found by the key of a segment either way, and only by its own endpoints;
    /// removed, it is gone; taken out, the table is empty.
    #[test]
    fn flows_are_found_by_their_endpoints_either_way() {
        let mut an = Analyzer::default();
        let pkt = PacketRef {
            frame: 1,
            ts: Timestamp(1000),
        };
        // Mid-stream data: each makes a flow at once (no handshake to wait for).
        for port in [40_000, 40_001, 40_002] {
            an.on_segment(pkt, &seg(port, 80, TcpFlags::ACK));
        }
        assert_eq!(an.flows.len(), 3);
        let there = FlowKey::of(&seg(40_001, 80, 0));
        let back = FlowKey::of(&seg(80, 40_001, 0));
        assert_eq!(there, back);
        let id = an
            .flows
            .get_mut(&back)
            .expect("found from either side")
            .flow
            .id;
        assert_eq!(id, 2);
        let found: Vec<u64> = an
            .flows
            .iter()
            .filter(|(k, _)| *k == there)
            .map(|(_, e)| e.flow.id)
            .collect();
        assert_eq!(found, [2]);
        assert!(an
            .flows
            .get_mut(&FlowKey::of(&seg(40_009, 80, 0)))
            .is_none());
        assert_eq!(an.flows.remove(&there).map(|e| e.flow.id), Some(2));
        assert!(an.flows.get_mut(&there).is_none());
        assert_eq!(an.flows.len(), 2);
        let mut rest: Vec<u64> = std::mem::take(&mut an.flows)
            .into_values()
            .map(|e| e.flow.id)
            .collect();
        rest.sort_unstable();
        assert_eq!(rest, [1, 3]);
        assert_eq!(an.flows.len(), 0);
    }
}
