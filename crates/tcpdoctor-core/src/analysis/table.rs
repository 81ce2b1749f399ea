//! The table of tracked flows, by their endpoints, in 8 bytes per bucket (issue 29).
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

/// One hash table slot's view of a flow: its entry, or room for one.
pub(crate) type Slot<'a> = hash_table::Entry<'a, Box<Entry>>;

#[derive(Default)]
pub(crate) struct FlowTable {
    table: HashTable<Box<Entry>>,
}

#[inline(always)]
fn hash(key: &FlowKey) -> u64 {
    BuildHasherDefault::<FxHasher>::default().hash_one(key)
}

/// The key of a tracked flow: its two endpoints in the canonical order.
#[inline]
fn key_of(e: &Entry) -> FlowKey {
    FlowKey::new(e.flow.client, e.flow.server)
}

/// Whether `e` is the flow between the endpoints of `key` (in either role).
#[inline(always)]
fn is(e: &Entry, key: &FlowKey) -> bool {
    let (c, s): (Endpoint, Endpoint) = (e.flow.client, e.flow.server);
    (c == key.0 && s == key.1) || (c == key.1 && s == key.0)
}

impl FlowTable {
    pub(crate) fn len(&self) -> usize {
        self.table.len()
    }

    #[inline(always)]
    pub(crate) fn entry(&mut self, key: FlowKey) -> Slot<'_> {
        self.table
            .entry(hash(&key), |e| is(e, &key), |e| hash(&key_of(e)))
    }

    pub(crate) fn get_mut(&mut self, key: &FlowKey) -> Option<&mut Box<Entry>> {
        self.table.find_mut(hash(key), |e| is(e, key))
    }

    pub(crate) fn remove(&mut self, key: &FlowKey) -> Option<Box<Entry>> {
        match self.table.find_entry(hash(key), |e| is(e, key)) {
            Ok(o) => Some(o.remove().0),
            Err(_) => None,
        }
    }

    /// Every flow's key, with its entry.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (FlowKey, &Entry)> {
        self.table.iter().map(|e| (key_of(e), &**e))
    }

    #[cfg(test)]
    pub(crate) fn values(&self) -> impl Iterator<Item = &Entry> {
        self.table.iter().map(|e| &**e)
    }

    /// Every flow, the table freed.
    pub(crate) fn into_values(self) -> impl Iterator<Item = Box<Entry>> {
        self.table.into_iter()
    }
}
