//! A fast, non-cryptographic hasher for the flow table (the multiply-rotate scheme of rustc's
//! FxHash). Flow keys come from the capture, not from an adversary we must defend a server
//! against; SipHash cost a fifth of the analyzer's time per packet.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            let mut w = [0u8; 8];
            w.copy_from_slice(c);
            self.add(u64::from_le_bytes(w));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    /// The multiply carries each input bit only upwards, so the low bits of the hash see only
    /// the low bits of the words: a flow key whose varying part is a client address in the
    /// high half (10.x.y.z facing one server: a SYN flood, a load balancer's clients) hashed to
    /// a few dozen values in the low 16 bits. The table picks buckets with the low bits; the
    /// rotation brings the well-mixed high bits down (rustc-hash 2 does the same).
    #[inline]
    fn finish(&self) -> u64 {
        self.hash.rotate_left(26)
    }
}

pub type FxHashMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;
pub type FxHashSet<K> = HashSet<K, BuildHasherDefault<FxHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::Hash;

    fn h<T: Hash>(t: &T) -> u64 {
        let mut s = FxHasher::default();
        t.hash(&mut s);
        s.finish()
    }

    #[test]
    fn distinguishes_nearby_keys() {
        let mut seen = std::collections::HashSet::new();
        for port in 0..10_000u16 {
            seen.insert(h(&(0x7f00_0001u32, port, 6379u16)));
        }
        assert_eq!(seen.len(), 10_000);
    }

    /// Keys that differ only in the client's address (one server, one client port) spread over
    /// the low bits the table indexes with: 65,536 keys fill most of 2^16 buckets.
    #[test]
    fn spreads_client_addresses_over_the_low_bits() {
        let mut buckets = std::collections::HashSet::new();
        for i in 0..65_536u64 {
            let ip = 0x0a00_0000u64 + i;
            buckets.insert(h(&(ip << 32 | 0xc000_0201, 40_000u32 << 16 | 80)) & 0xffff);
        }
        assert!(
            buckets.len() > 30_000,
            "{} buckets of 65,536",
            buckets.len()
        );
    }
}
