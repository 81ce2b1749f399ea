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

    /// The product's high bits depend on every input bit, its low bits only on the input's
    /// low bits; hashbrown picks the bucket from the low bits. Rotated (as rustc-hash 2 does),
    /// keys that differ only in their high bytes (client addresses 10.0.y.z, written as
    /// little-endian words) still spread over the table rather than share a few buckets.
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

    /// Client addresses that differ only in their last octets (one per connection, as at a
    /// load balancer) must not share buckets: hashbrown indexes by the low bits.
    #[test]
    fn spreads_addresses_over_the_low_bits() {
        let mut buckets = std::collections::HashSet::new();
        for i in 0..4096u32 {
            let ip = std::net::IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 + i));
            buckets.insert(h(&(0usize, ip)) & 0xfff);
        }
        // Without the rotation every key lands in one bucket (the low 12 bits of the address
        // word are the same); 4096 random keys would fill about 2600 of them.
        assert!(buckets.len() > 1024, "{} buckets", buckets.len());
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
