//! One-way delay per chunk (or per packet), with optional seeded jitter, never reordering unless
//! asked.
//!
//! Rules:
//! 1. A chunk arriving at `t` is due at `t + delay + j`, with `j` drawn uniformly from
//!    `[-jitter, +jitter]` (seeded) and the total never below zero.
//! 2. A chunk is never due before the chunk ahead of it: order is preserved, so jitter can only
//!    bunch chunks up, never swap them (TCP would see that as loss on a real path; a proxy
//!    cannot reorder a byte stream anyway).
//! 3. Except on a line built [`Delay::reordering`] (IP packets only, `wan:…,reorder`): there
//!    each packet keeps its own due time and may overtake the ones ahead; packets due at the
//!    same instant leave in arrival order.
//! 4. Chunks keep their boundaries; what is due is emitted one chunk at a time.

use std::collections::VecDeque;
use std::time::Duration;

use super::{Poll, SplitMix64, Stage};
use crate::time::Timestamp;

pub struct Delay {
    delay: Duration,
    jitter: Duration,
    rng: SplitMix64,
    queue: VecDeque<(Timestamp, Vec<u8>)>,
    last_due: Timestamp,
    bytes: usize,
    reorder: bool,
}

impl Delay {
    pub fn new(delay: Duration, jitter: Duration, seed: u64) -> Delay {
        Delay {
            delay,
            jitter,
            rng: SplitMix64::new(seed),
            queue: VecDeque::new(),
            last_due: Timestamp::ZERO,
            bytes: 0,
            reorder: false,
        }
    }

    /// Rule 3: jitter may reorder.
    pub fn reordering(mut self) -> Delay {
        self.reorder = true;
        self
    }

    /// The next chunk due by `now`, with the instant it was due (a late caller can tell how
    /// late it is).
    pub fn pop_due(&mut self, now: Timestamp) -> Option<(Timestamp, Vec<u8>)> {
        match self.queue.front() {
            Some((due, _)) if *due <= now => {
                let (due, data) = self.queue.pop_front()?;
                self.bytes -= data.len();
                Some((due, data))
            }
            _ => None,
        }
    }

    /// When the next chunk is due, if any is queued.
    pub fn next_due(&self) -> Option<Timestamp> {
        self.queue.front().map(|(due, _)| *due)
    }

    fn sample(&mut self) -> Duration {
        if self.jitter.is_zero() {
            return self.delay;
        }
        let j = self.jitter.as_nanos() as f64 * (2.0 * self.rng.next_f64() - 1.0);
        let total = self.delay.as_nanos() as f64 + j;
        Duration::from_nanos(total.max(0.0) as u64)
    }
}

impl Stage for Delay {
    fn push(&mut self, data: Vec<u8>, now: Timestamp) {
        if data.is_empty() {
            return;
        }
        let d = self.sample();
        self.bytes += data.len();
        if self.reorder {
            let due = now.plus(d);
            // Usually at or near the back: jitter moves a packet past only a few others.
            let at = self
                .queue
                .iter()
                .rposition(|(t, _)| *t <= due)
                .map_or(0, |i| i + 1);
            self.queue.insert(at, (due, data));
            return;
        }
        let due = now.plus(d).max(self.last_due);
        self.last_due = due;
        self.queue.push_back((due, data));
    }

    fn poll(&mut self, now: Timestamp) -> Poll {
        if let Some((_, data)) = self.pop_due(now) {
            return Poll::Emit(data);
        }
        self.next_due().map_or(Poll::Idle, Poll::WaitUntil)
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
    fn each_chunk_waits_the_delay() {
        let mut d = Delay::new(Duration::from_millis(15), Duration::ZERO, 0);
        d.push(vec![1], us(0));
        d.push(vec![2], us(5_000));
        assert_eq!(d.poll(us(14_999)), Poll::WaitUntil(us(15_000)));
        assert_eq!(d.poll(us(15_000)), Poll::Emit(vec![1]));
        assert_eq!(d.poll(us(15_000)), Poll::WaitUntil(us(20_000)));
        assert_eq!(d.poll(us(20_000)), Poll::Emit(vec![2]));
        assert_eq!(d.poll(us(20_000)), Poll::Idle);
    }

    /// Issue 3: a late shell must not make later chunks later. Each due time is counted from
    /// its own chunk's arrival, never from when the chunk ahead was polled or emitted.
    #[test]
    fn a_late_poll_does_not_push_later_chunks_back() {
        let mut d = Delay::new(Duration::from_millis(5), Duration::ZERO, 0);
        d.push(vec![1], us(0));
        d.push(vec![2], us(1_000));
        // The shell wakes 900 µs late for the first chunk...
        assert_eq!(d.poll(us(5_900)), Poll::Emit(vec![1]));
        // ...the second is still due 5 ms after its own arrival, not after that emit.
        assert_eq!(d.poll(us(5_900)), Poll::WaitUntil(us(6_000)));
        d.push(vec![3], us(6_000));
        assert_eq!(d.poll(us(6_000)), Poll::Emit(vec![2]));
        assert_eq!(d.poll(us(6_000)), Poll::WaitUntil(us(11_000)));
    }

    #[test]
    fn jitter_is_seeded_bounded_and_never_reorders() {
        let run = |seed| {
            let mut d = Delay::new(Duration::from_millis(10), Duration::from_millis(8), seed);
            let mut dues = Vec::new();
            for i in 0..500u64 {
                d.push(vec![i as u8], us(i * 20_000));
            }
            let mut now = us(0);
            let mut order = Vec::new();
            loop {
                match d.poll(now) {
                    Poll::Emit(v) => {
                        order.push(v[0]);
                        dues.push(now);
                    }
                    Poll::WaitUntil(t) => now = t,
                    Poll::Idle => break,
                }
            }
            (order, dues)
        };
        let (order, dues) = run(1);
        let expected: Vec<u8> = (0..500u64).map(|i| i as u8).collect();
        assert_eq!(order, expected, "never reordered");
        // Order keeping can only move a chunk up to its predecessor's due time, which is itself
        // bounded, so every chunk stays within delay ± jitter.
        let mut spread = std::collections::BTreeSet::new();
        for (i, due) in dues.iter().enumerate() {
            let waited = due.since(us(i as u64 * 20_000));
            assert!(
                waited <= Duration::from_millis(18),
                "chunk {i} waited {waited:?}"
            );
            assert!(
                waited >= Duration::from_millis(2),
                "chunk {i} waited {waited:?}"
            );
            spread.insert(waited.as_micros() / 1000);
        }
        assert!(
            spread.len() > 10,
            "jitter actually varies the delay: {spread:?}"
        );
        assert_eq!(run(1).1, dues, "same seed, same schedule");
        assert_ne!(run(2).1, dues, "another seed, another schedule");
    }
}
