//! Impairments: pure state machines that decide when (and in what pieces) forwarded bytes leave.
//!
//! The proxy's I/O shell reads a chunk, [`Stage::push`]es it with the time it arrived, and asks
//! [`Stage::poll`] what to do now: write these bytes ([`Poll::Emit`]), sleep until an instant
//! ([`Poll::WaitUntil`]), or wait for more input ([`Poll::Idle`]). No stage reads a clock or
//! touches a socket, so every behaviour is tested on simulated time.
//!
//! One file per impairment: [`delay`] (one-way delay with seeded jitter, never reordering
//! unless asked), [`rate`] (paced bandwidth), [`chunks`] (preserve, coalesce or re-slice write
//! boundaries), [`loss`] (seeded per-packet drops: random, Gilbert–Elliott bursts, a list of
//! packet numbers), [`queue`] (a bottleneck link for whole packets: serialisation behind a
//! drop-tail buffer).
//!
//! Two ways to chain them:
//! - [`Pipeline`], for the proxy's byte streams: delay, then rate, then chunking — write
//!   boundaries are decided last, when the bytes are due, which is what a forwarder does.
//! - [`OneWayPath`] ([`path`]), for the WAN delay line's IP packets, one per direction: MTU,
//!   loss, bottleneck, delay, with counters. Built from a [`PathSpec`] ([`spec`]), the path
//!   definition a `wan:` scenario names (`wan:15ms,loss=1%`), parsed and printed canonically.

pub mod chunks;
pub mod delay;
pub mod loss;
pub mod path;
mod probability;
pub mod queue;
pub mod rate;
mod rng;
pub mod spec;

use crate::time::Timestamp;

pub use chunks::{ChunkMode, Chunker};
pub use delay::Delay;
pub use loss::{Loss, LossModel};
pub use path::{OneWayPath, PathCounters};
pub use probability::Probability;
pub use queue::Bottleneck;
pub use rate::Rate;
pub use rng::SplitMix64;
pub use spec::{DirectionSpec, PathSpec, RateSpec, SpecError};

/// What a stage wants the shell to do now.
#[derive(Debug, PartialEq, Eq)]
pub enum Poll {
    /// Write these bytes now, as one write.
    Emit(Vec<u8>),
    /// Nothing is due before this instant.
    WaitUntil(Timestamp),
    /// Nothing queued.
    Idle,
}

/// One impairment.
pub trait Stage {
    /// Queues bytes that arrived at `now`.
    fn push(&mut self, data: Vec<u8>, now: Timestamp);
    /// What to do at `now`. Call repeatedly until it returns something other than `Emit`.
    fn poll(&mut self, now: Timestamp) -> Poll;
    /// Bytes queued and not yet emitted.
    fn queued(&self) -> usize;
}

/// Stages applied in order; what one emits, the next receives at the same instant.
pub struct Pipeline {
    stages: Vec<Box<dyn Stage + Send>>,
}

impl Default for Pipeline {
    /// A faithful forwarder: no delay, no pacing, one write per chunk read.
    fn default() -> Self {
        Pipeline::new(Vec::new())
    }
}

impl Pipeline {
    /// Chains `stages`; an empty list forwards each chunk as it is.
    pub fn new(mut stages: Vec<Box<dyn Stage + Send>>) -> Pipeline {
        if stages.is_empty() {
            stages.push(Box::new(Chunker::new(ChunkMode::Preserve)));
        }
        Pipeline { stages }
    }

    pub fn push(&mut self, data: Vec<u8>, now: Timestamp) {
        if let Some(first) = self.stages.first_mut() {
            first.push(data, now);
        }
    }

    /// Moves bytes through every stage that is due, then says what the shell should do.
    pub fn poll(&mut self, now: Timestamp) -> Poll {
        let mut earliest: Option<Timestamp> = None;
        let n = self.stages.len();
        for i in 0..n.saturating_sub(1) {
            loop {
                match self.stages[i].poll(now) {
                    Poll::Emit(d) => self.stages[i + 1].push(d, now),
                    Poll::WaitUntil(t) => {
                        earliest = Some(earliest.map_or(t, |e| e.min(t)));
                        break;
                    }
                    Poll::Idle => break,
                }
            }
        }
        match self.stages[n - 1].poll(now) {
            Poll::Emit(d) => Poll::Emit(d),
            Poll::WaitUntil(t) => Poll::WaitUntil(earliest.map_or(t, |e| e.min(t))),
            Poll::Idle => earliest.map_or(Poll::Idle, Poll::WaitUntil),
        }
    }

    pub fn queued(&self) -> usize {
        self.stages.iter().map(|s| s.queued()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn ms(v: u64) -> Timestamp {
        Timestamp(v * 1_000_000)
    }

    #[test]
    fn delay_then_coalesce_merges_chunks_due_together() {
        let mut p = Pipeline::new(vec![
            Box::new(Delay::new(Duration::from_millis(10), Duration::ZERO, 1)),
            Box::new(Chunker::new(ChunkMode::Coalesce)),
        ]);
        p.push(b"ab".to_vec(), ms(0));
        p.push(b"cd".to_vec(), ms(0));
        assert_eq!(p.poll(ms(1)), Poll::WaitUntil(ms(10)));
        assert_eq!(p.poll(ms(10)), Poll::Emit(b"abcd".to_vec()));
        assert_eq!(p.poll(ms(10)), Poll::Idle);
    }

    #[test]
    fn empty_pipeline_forwards_each_chunk_as_it_came() {
        let mut p = Pipeline::default();
        p.push(b"one".to_vec(), ms(0));
        p.push(b"two".to_vec(), ms(0));
        assert_eq!(p.queued(), 6);
        assert_eq!(p.poll(ms(0)), Poll::Emit(b"one".to_vec()));
        assert_eq!(p.poll(ms(0)), Poll::Emit(b"two".to_vec()));
        assert_eq!(p.poll(ms(0)), Poll::Idle);
    }

    #[test]
    fn delay_rate_split_in_order_and_byte_exact() {
        let mut p = Pipeline::new(vec![
            Box::new(Delay::new(
                Duration::from_millis(5),
                Duration::from_millis(3),
                42,
            )),
            Box::new(Rate::new(8_000_000)),
            Box::new(Chunker::new(ChunkMode::Split(7))),
        ]);
        let mut sent = Vec::new();
        for i in 0..50u8 {
            let chunk: Vec<u8> = (0..(i as usize * 13 % 97 + 1))
                .map(|k| (k as u8) ^ i)
                .collect();
            sent.extend_from_slice(&chunk);
            p.push(chunk, ms(u64::from(i)));
        }
        let mut got = Vec::new();
        let mut now = ms(0);
        for _ in 0..100_000 {
            match p.poll(now) {
                Poll::Emit(d) => {
                    assert!(d.len() <= 7);
                    got.extend_from_slice(&d);
                }
                Poll::WaitUntil(t) => {
                    assert!(t > now, "WaitUntil must move time forward");
                    now = t;
                }
                Poll::Idle => break,
            }
        }
        assert_eq!(got, sent);
        assert_eq!(p.queued(), 0);
    }
}
