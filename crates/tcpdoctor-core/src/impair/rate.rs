//! Paced bandwidth: bytes leave at a steady rate, in small slices, not in bursts.
//!
//! Rules:
//! 1. The link sends `rate` bits per second. A slice of `n` bytes occupies it for `8n / rate`.
//! 2. Slices are at most one millisecond of the link's time (and at least one byte), so a 64 KiB
//!    chunk on a 10 mbit/s link leaves as ~1250-byte slices every millisecond, not as one burst
//!    followed by 52 ms of silence.
//! 3. The link is idle-aware: after a quiet spell, sending starts at once (no credit is saved
//!    up for a burst either).
//! 4. A caller that wakes late (timers have a granularity, schedulers have latency) keeps the average
//!    rate: up to [`CATCH_UP`] behind schedule, the link sends what it owes at once instead of
//!    restarting the schedule from the late instant, which would lose up to half the rate.

use std::collections::VecDeque;
use std::time::Duration;

use super::{Poll, Stage};
use crate::time::Timestamp;

/// How far behind schedule a late caller may be and still catch up (beyond it, the link was
/// idle, rule 3).
pub const CATCH_UP: Duration = Duration::from_millis(5);

pub struct Rate {
    bits_per_sec: u64,
    queue: VecDeque<Vec<u8>>,
    bytes: usize,
    /// When the link is next free.
    next_free: Timestamp,
}

impl Rate {
    /// `bits_per_sec` must be positive.
    pub fn new(bits_per_sec: u64) -> Rate {
        Rate {
            bits_per_sec: bits_per_sec.max(1),
            queue: VecDeque::new(),
            bytes: 0,
            next_free: Timestamp::ZERO,
        }
    }

    fn slice_len(&self) -> usize {
        ((self.bits_per_sec / 8 / 1000).max(1)).min(usize::MAX as u64) as usize
    }

    fn airtime(&self, n: usize) -> Duration {
        Duration::from_nanos(
            ((n as u128 * 8 * 1_000_000_000) / u128::from(self.bits_per_sec)) as u64,
        )
    }
}

impl Stage for Rate {
    fn push(&mut self, data: Vec<u8>, _now: Timestamp) {
        if data.is_empty() {
            return;
        }
        self.bytes += data.len();
        self.queue.push_back(data);
    }

    fn poll(&mut self, now: Timestamp) -> Poll {
        if self.queue.is_empty() {
            return Poll::Idle;
        }
        if self.next_free > now {
            return Poll::WaitUntil(self.next_free);
        }
        let max = self.slice_len();
        let Some(front) = self.queue.front_mut() else {
            return Poll::Idle;
        };
        let slice = if front.len() <= max {
            self.queue.pop_front().unwrap_or_default()
        } else {
            let rest = front.split_off(max);
            std::mem::replace(front, rest)
        };
        self.bytes -= slice.len();
        let start = if now.since(self.next_free) <= CATCH_UP {
            self.next_free
        } else {
            now
        };
        self.next_free = start.plus(self.airtime(slice.len()));
        Poll::Emit(slice)
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

    #[test]
    fn paces_smoothly_at_the_rate() {
        let mut r = Rate::new(10_000_000);
        r.push(vec![0; 65_536], us(0));
        let mut now = us(0);
        let mut slices = Vec::new();
        loop {
            match r.poll(now) {
                Poll::Emit(d) => slices.push((now, d.len())),
                Poll::WaitUntil(t) => now = t,
                Poll::Idle => break,
            }
        }
        assert!(slices.iter().all(|&(_, n)| n <= 1250));
        assert_eq!(slices.iter().map(|s| s.1).sum::<usize>(), 65_536);
        let (last, n) = *slices.last().unwrap();
        let done = last.plus(Duration::from_nanos(n as u64 * 800));
        let expected = Duration::from_micros(52_429);
        assert!((done.since(us(0)).as_micros() as i64 - expected.as_micros() as i64).abs() < 50);
        // Smooth: no gap between slices longer than one slice's airtime.
        for w in slices.windows(2) {
            assert!(w[1].0.since(w[0].0) <= Duration::from_micros(1_001));
        }
    }

    #[test]
    fn late_wakeups_keep_the_average_rate() {
        // 10 mbit/s, 100 kB: 80 ms of link time. A caller whose every sleep ends 1 ms late
        // (a 1 ms timer wheel) must still finish near 80 ms, not near 160 ms.
        let mut r = Rate::new(10_000_000);
        r.push(vec![0; 100_000], us(0));
        let mut now = us(0);
        let mut sent = 0;
        for _ in 0..10_000 {
            match r.poll(now) {
                Poll::Emit(d) => sent += d.len(),
                Poll::WaitUntil(t) => now = t.plus(Duration::from_millis(1)),
                Poll::Idle => break,
            }
        }
        assert_eq!(sent, 100_000);
        let took = now.since(us(0));
        assert!(took <= Duration::from_millis(82), "{took:?}");
    }

    #[test]
    fn idle_link_sends_at_once() {
        let mut r = Rate::new(8_000);
        r.push(vec![1], us(0));
        assert_eq!(r.poll(us(0)), Poll::Emit(vec![1]));
        r.push(vec![2], us(5_000_000));
        assert_eq!(r.poll(us(5_000_000)), Poll::Emit(vec![2]));
        r.push(vec![3], us(5_000_000));
        assert_eq!(r.poll(us(5_000_000)), Poll::WaitUntil(us(5_001_000)));
    }
}
