//! One direction of a WAN path, packet by packet: what the delay line does to each IP packet.
//!
//! Rules:
//! 1. Stages, in the order a real path applies them: the MTU check, loss, the bottleneck
//!    (rate and queue), then propagation delay with jitter. Each is optional but the delay.
//! 2. Packets are numbered from 1 as they are pushed, whatever then happens to them, so
//!    `drop=8,9` names the 8th and 9th packets the sender's capture shows in that direction.
//! 3. A packet larger than the path MTU is dropped and counted (`dropped_mtu`). The shell sets
//!    the devices' MTU to the path's, so the count should stay zero: a packet that trips it
//!    means a device or an offload handed the line a packet the path cannot carry (a shell that
//!    reads GSO super-packets must segment them first when [`PathSpec::needs_per_packet`]).
//! 4. Loss is decided before the bottleneck: a lost packet takes no room in the queue.
//! 5. A packet enters the delay at the instant it left the bottleneck, never at the instant the
//!    shell polled: a late shell delays nothing behind it, and [`OneWayPath::pop_due`] gives
//!    each packet's due time so the shell can measure how late it delivered.
//! 6. Packets are moved, never copied or split; no stage allocates per packet beyond its
//!    queues' amortised growth.
//! 7. A shell may keep device framing in front of each packet (the delay line keeps a TUN
//!    device's 10-byte `virtio_net_hdr`, so a packet is read and written whole with one call):
//!    [`OneWayPath::with_framing`]. Those bytes are not on the wire: the MTU check, the
//!    bottleneck and the counters see the rest.

use super::queue::Bottleneck;
use super::spec::PathSpec;
use super::{Delay, Loss, Poll, Stage};
use crate::flow::Direction;
use crate::time::Timestamp;

/// What one direction did with the packets it was given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathCounters {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    /// Dropped by the loss model or the drop list.
    pub dropped_loss: u64,
    /// Dropped by the full bottleneck buffer (drop-tail).
    pub dropped_queue: u64,
    /// Dropped for being larger than the path MTU (rule 3).
    pub dropped_mtu: u64,
}

impl PathCounters {
    /// Packets pushed and not yet delivered or dropped.
    pub fn in_flight(&self) -> u64 {
        self.packets_in
            - self.packets_out
            - self.dropped_loss
            - self.dropped_queue
            - self.dropped_mtu
    }
}

pub struct OneWayPath {
    framing: usize,
    mtu: Option<usize>,
    loss: Loss,
    bottleneck: Option<Bottleneck>,
    delay: Delay,
    counters: PathCounters,
}

impl OneWayPath {
    /// The `dir` half of `spec`.
    pub fn new(spec: &PathSpec, dir: Direction) -> OneWayPath {
        let d = spec.direction(dir);
        let seeds = spec.seeds(dir);
        let delay = Delay::new(d.delay, d.jitter, seeds.jitter);
        OneWayPath {
            framing: 0,
            mtu: spec.mtu.map(|m| m as usize),
            loss: Loss::new(d.loss, &d.drop, seeds.loss),
            bottleneck: d.rate.map(|r| Bottleneck::new(r.bits_per_sec, r.queue)),
            delay: if d.reorder { delay.reordering() } else { delay },
            counters: PathCounters::default(),
        }
    }

    /// Every packet pushed starts with `bytes` of device framing (rule 7).
    pub fn with_framing(mut self, bytes: usize) -> OneWayPath {
        self.framing = bytes;
        self.bottleneck = self.bottleneck.map(|b| b.with_framing(bytes));
        self
    }

    /// Takes one whole IP packet that the sender's device handed the line at `now` (after
    /// the framing, rule 7).
    pub fn push(&mut self, packet: Vec<u8>, now: Timestamp) {
        let len = packet.len().saturating_sub(self.framing);
        let c = &mut self.counters;
        c.packets_in += 1;
        c.bytes_in += len as u64;
        // Rule 2: every packet takes its number from the loss model, even one dropped for size.
        let lost = self.loss.drops_next();
        if self.mtu.is_some_and(|mtu| len > mtu) {
            c.dropped_mtu += 1;
        } else if lost {
            c.dropped_loss += 1;
        } else if let Some(b) = &mut self.bottleneck {
            if !b.offer(packet, now) {
                c.dropped_queue += 1;
            }
        } else {
            self.delay.push(packet, now);
        }
    }

    /// Moves what has left the bottleneck by `now` into the delay (rule 5).
    fn advance(&mut self, now: Timestamp) {
        if let Some(b) = &mut self.bottleneck {
            while let Some((left, packet)) = b.pop_due(now) {
                self.delay.push(packet, left);
            }
        }
    }

    /// The next packet due at the receiver's device by `now`, with the instant it was due.
    pub fn pop_due(&mut self, now: Timestamp) -> Option<(Timestamp, Vec<u8>)> {
        self.advance(now);
        let (due, packet) = self.delay.pop_due(now)?;
        self.counters.packets_out += 1;
        self.counters.bytes_out += packet.len().saturating_sub(self.framing) as u64;
        Some((due, packet))
    }

    /// When something next happens: a packet due, or one leaving the bottleneck.
    pub fn next_wakeup(&self) -> Option<Timestamp> {
        let left = self
            .bottleneck
            .as_ref()
            .and_then(Bottleneck::next_departure);
        match (self.delay.next_due(), left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    pub fn counters(&self) -> PathCounters {
        self.counters
    }
}

impl Stage for OneWayPath {
    fn push(&mut self, data: Vec<u8>, now: Timestamp) {
        OneWayPath::push(self, data, now);
    }

    /// Call until it stops returning `Emit`; `WaitUntil` is the next instant anything is due.
    fn poll(&mut self, now: Timestamp) -> Poll {
        if let Some((_, packet)) = self.pop_due(now) {
            return Poll::Emit(packet);
        }
        self.next_wakeup().map_or(Poll::Idle, Poll::WaitUntil)
    }

    fn queued(&self) -> usize {
        self.delay.queued() + self.bottleneck.as_ref().map_or(0, Stage::queued)
    }
}

#[cfg(test)]
mod tests;
