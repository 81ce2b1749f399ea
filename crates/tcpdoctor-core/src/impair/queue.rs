//! A bottleneck link for whole packets: serialisation at a rate behind a bounded drop-tail FIFO.
//!
//! Rules:
//! 1. The link sends `rate` bits per second: a packet of `n` bytes occupies it for `8n / rate`.
//!    It is store-and-forward: a packet leaves when its last bit is sent, so it waits its own
//!    airtime even on an idle link (as on a real link, and as netem's `rate` does). An idle link
//!    starts sending at once: no tick to wait for, and no credit saved up from a quiet spell.
//! 2. Packets leave whole and in the order they came: the link never splits or reorders.
//! 3. The buffer holds what the link has yet to send, in bytes, including the rest of the packet
//!    on the wire. A packet that would take it past the limit is dropped on arrival (drop-tail)
//!    and counted; nothing already queued is ever dropped.
//! 4. The default limit, [`default_limit`], is what the link sends in 100 ms, and at least
//!    64 KiB. 100 ms of buffer is the classic rule of thumb for a router port (one typical
//!    Internet round trip times the link rate, Villamizar & Song 1994) and what a bulk flow
//!    needs to keep a bottleneck busy; edge devices often hold more (bufferbloat), data-centre
//!    switches less. The 64 KiB floor keeps slow links sane: at 1 mbit/s, 100 ms is 8 packets,
//!    fewer than a sender's initial window, and one 64 KiB GSO burst must fit an idle link.
//! 5. A packet's departure is fixed when it arrives, from its arrival time, so a shell that polls
//!    late delays nothing behind it; [`Bottleneck::pop_due`] says when each packet left.

use std::collections::VecDeque;

use super::{Poll, Stage};
use crate::time::Timestamp;

/// The default buffer of a link of `bits_per_sec` (rule 4), in bytes.
pub fn default_limit(bits_per_sec: u64) -> u64 {
    (bits_per_sec / 80).max(64 * 1024)
}

pub struct Bottleneck {
    bits_per_sec: u64,
    limit: u64,
    /// Bytes in front of each packet that are not on the wire ([`Bottleneck::with_framing`]).
    framing: usize,
    queue: VecDeque<(Timestamp, Vec<u8>)>,
    bytes: usize,
    /// When the link finishes the last packet accepted.
    busy_until: Timestamp,
    /// Sub-nanosecond airtime carried between back-to-back packets (in 1/rate ns), so odd rates
    /// keep their average exactly.
    carry: u128,
    dropped: u64,
    dropped_bytes: u64,
}

impl Bottleneck {
    /// `bits_per_sec` and `limit` (bytes) are clamped to at least 1.
    pub fn new(bits_per_sec: u64, limit: u64) -> Bottleneck {
        Bottleneck {
            bits_per_sec: bits_per_sec.max(1),
            limit: limit.max(1),
            framing: 0,
            queue: VecDeque::new(),
            bytes: 0,
            busy_until: Timestamp::ZERO,
            carry: 0,
            dropped: 0,
            dropped_bytes: 0,
        }
    }

    /// Each packet given to this link starts with `bytes` of device framing (a TUN device's
    /// `virtio_net_hdr`) that the wire does not carry: serialisation and the buffer count the
    /// rest.
    pub fn with_framing(mut self, bytes: usize) -> Bottleneck {
        self.framing = bytes;
        self
    }

    fn wire_len(&self, packet: &[u8]) -> usize {
        packet.len().saturating_sub(self.framing)
    }

    /// Bytes the link has yet to send at `now` (rule 3), rounded up.
    pub fn backlog(&self, now: Timestamp) -> u64 {
        let left = u128::from(self.busy_until.0.saturating_sub(now.0));
        (left * u128::from(self.bits_per_sec)).div_ceil(8_000_000_000) as u64
    }

    /// Takes a packet that arrived at `now`; `false` if the full buffer dropped it.
    pub fn offer(&mut self, packet: Vec<u8>, now: Timestamp) -> bool {
        let len = self.wire_len(&packet);
        if self.backlog(now) + len as u64 > self.limit {
            self.dropped += 1;
            self.dropped_bytes += len as u64;
            return false;
        }
        let start = if self.busy_until > now {
            self.busy_until
        } else {
            self.carry = 0;
            now
        };
        let work = len as u128 * 8_000_000_000 + self.carry;
        let rate = u128::from(self.bits_per_sec);
        self.carry = work % rate;
        self.busy_until = start.plus(std::time::Duration::from_nanos((work / rate) as u64));
        self.bytes += len;
        self.queue.push_back((self.busy_until, packet));
        true
    }

    /// The next packet that has left by `now`, with the instant it left.
    pub fn pop_due(&mut self, now: Timestamp) -> Option<(Timestamp, Vec<u8>)> {
        match self.queue.front() {
            Some((left, _)) if *left <= now => {
                let (left, packet) = self.queue.pop_front()?;
                self.bytes -= self.wire_len(&packet);
                Some((left, packet))
            }
            _ => None,
        }
    }

    /// When the next packet leaves, if one is queued.
    pub fn next_departure(&self) -> Option<Timestamp> {
        self.queue.front().map(|(t, _)| *t)
    }

    /// Packets the full buffer dropped, and their bytes.
    pub fn dropped(&self) -> (u64, u64) {
        (self.dropped, self.dropped_bytes)
    }
}

impl Stage for Bottleneck {
    fn push(&mut self, data: Vec<u8>, now: Timestamp) {
        if !data.is_empty() {
            self.offer(data, now);
        }
    }

    fn poll(&mut self, now: Timestamp) -> Poll {
        if let Some((_, packet)) = self.pop_due(now) {
            return Poll::Emit(packet);
        }
        self.next_departure().map_or(Poll::Idle, Poll::WaitUntil)
    }

    fn queued(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(v: u64) -> Timestamp {
        Timestamp(v * 1_000)
    }

    fn packet(seq: u32, len: usize) -> Vec<u8> {
        let mut p = vec![0u8; len];
        p[..4].copy_from_slice(&seq.to_be_bytes());
        p
    }

    fn seq(p: &[u8]) -> u32 {
        u32::from_be_bytes([p[0], p[1], p[2], p[3]])
    }

    #[test]
    fn ten_mbit_carries_ten_mbit_per_second_in_order() {
        // 1500-byte packets offered at 12 mbit/s for two seconds: the link is never idle.
        let mut b = Bottleneck::new(10_000_000, default_limit(10_000_000));
        let (mut sent, mut last_seq, mut bytes_in_first_second) = (0u32, None, 0u64);
        for ms in 0..2_000u64 {
            b.offer(packet(sent, 1_500), us(ms * 1_000));
            sent += 1;
            while let Some((left, p)) = b.pop_due(us(ms * 1_000)) {
                assert_eq!(p.len(), 1_500, "never split");
                if let Some(l) = last_seq {
                    assert!(seq(&p) > l, "never reordered");
                }
                last_seq = Some(seq(&p));
                if left <= us(1_000_000) {
                    bytes_in_first_second += p.len() as u64;
                }
            }
        }
        let mbit = bytes_in_first_second as f64 * 8.0 / 1e6;
        assert!((9.9..=10.1).contains(&mbit), "{mbit} Mbit in one second");
        let (dropped, _) = b.dropped();
        assert!(
            dropped > 0,
            "2 mbit/s too much for two seconds overflows 125 kB"
        );
        // The buffer never holds more than its limit (rule 3).
        assert!(b.backlog(us(1_999_000)) <= default_limit(10_000_000));
        assert!(
            b.backlog(us(1_999_000)) > default_limit(10_000_000) - 1_500,
            "it was full"
        );
    }

    #[test]
    fn a_burst_beyond_the_limit_is_tail_dropped() {
        let mut b = Bottleneck::new(10_000_000, 64 * 1024);
        let accepted: Vec<bool> = (0..100).map(|i| b.offer(packet(i, 1_500), us(0))).collect();
        // 43 × 1500 = 64 500 fits in 65 536; the 44th would not.
        assert!(accepted[..43].iter().all(|&a| a));
        assert!(accepted[43..].iter().all(|&a| !a));
        assert_eq!(b.dropped(), (57, 57 * 1_500));
        let mut out = Vec::new();
        let mut now = us(0);
        loop {
            match b.poll(now) {
                Poll::Emit(p) => out.push((now, seq(&p))),
                Poll::WaitUntil(t) => now = t,
                Poll::Idle => break,
            }
        }
        let seqs: Vec<u32> = out.iter().map(|o| o.1).collect();
        assert_eq!(
            seqs,
            (0..43).collect::<Vec<_>>(),
            "the head of the burst, in order"
        );
        // Back to back: the 43rd leaves after 43 airtimes of 1.2 ms.
        assert_eq!(out[42].0, us(43 * 1_200));
        // Once the link has drained, a packet is accepted again.
        assert!(b.offer(packet(100, 1_500), now));
    }

    #[test]
    fn an_idle_link_starts_at_once_and_saves_no_credit() {
        let mut b = Bottleneck::new(8_000_000, 1 << 20);
        b.offer(packet(0, 1_000), us(0));
        assert_eq!(
            b.poll(us(0)),
            Poll::WaitUntil(us(1_000)),
            "its own airtime, 1 ms"
        );
        assert!(matches!(b.poll(us(1_000)), Poll::Emit(_)));
        // Quiet for 5 s, then two packets: the first waits only its airtime, the second queues.
        b.offer(packet(1, 1_000), us(5_000_000));
        b.offer(packet(2, 1_000), us(5_000_000));
        assert_eq!(b.next_departure(), Some(us(5_001_000)));
        assert_eq!(b.backlog(us(5_000_500)), 1_500);
        let late = us(9_000_000);
        assert_eq!(
            b.pop_due(late).map(|(t, p)| (t, seq(&p))),
            Some((us(5_001_000), 1))
        );
        assert_eq!(
            b.pop_due(late).map(|(t, p)| (t, seq(&p))),
            Some((us(5_002_000), 2))
        );
        assert_eq!(b.pop_due(late), None);
        assert_eq!(b.queued(), 0);
    }

    #[test]
    fn odd_rates_keep_their_average() {
        // 7 mbit/s: 1500 bytes take 1 714 285.71… ns; 7000 packets take exactly 12 s.
        let mut b = Bottleneck::new(7_000_000, u64::MAX);
        for i in 0..7_000 {
            b.offer(packet(i, 1_500), us(0));
        }
        assert_eq!(b.next_departure(), Some(Timestamp(1_714_285)));
        let mut last = None;
        while let Some((t, _)) = b.pop_due(Timestamp(u64::MAX)) {
            last = Some(t);
        }
        assert_eq!(last, Some(us(12_000_000)));
    }

    #[test]
    fn default_limit_is_100ms_of_the_link_but_at_least_64_kib() {
        assert_eq!(default_limit(10_000_000), 125_000);
        assert_eq!(default_limit(1_000_000_000), 12_500_000);
        assert_eq!(default_limit(1_000_000), 65_536);
    }
}
