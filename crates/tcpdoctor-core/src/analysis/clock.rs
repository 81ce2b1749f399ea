//! The capture's clock, when its timestamps do not always move forward.
//!
//! A capture's timestamps step backwards when the capturing host's clock is stepped (NTP, a
//! VM resumed), when files are merged by concatenation (`mergecap -a`), or, by microseconds,
//! when frames from several queues or interfaces are written slightly out of order. Rules:
//! 1. The capture spans from its *earliest* to its *latest* timestamp, whatever their order in
//!    the file: never negative, never the last minus the first.
//! 2. Every frame earlier than the one before it is a step back; the count, the largest step
//!    and the frame it landed on are reported.
//! 3. Time that ages flows (idle timeout, linger of ended flows) is *elapsed* time: the sum of
//!    the forward steps between consecutive timestamps. A step back adds nothing, so it neither
//!    ages every flow at once (as the latest timestamp would, for flows of the earlier half of
//!    a merge) nor freezes their ageing (as raw timestamps would, for the later half).
//!    Elapsed time equals the timestamp in a capture that never steps back; after steps back
//!    it runs ahead of the timestamps by at most the sum of the steps.

use std::time::Duration;

use crate::flow::PacketRef;
use crate::report::TimeStepsBack;
use crate::stats::round3;
use crate::time::Timestamp;

#[derive(Clone, Copy, Debug, Default)]
pub struct CaptureClock {
    /// (earliest, latest) timestamp seen; None before the first.
    range: Option<(Timestamp, Timestamp)>,
    prev: Timestamp,
    elapsed: Timestamp,
    steps_back: u64,
    /// The largest step back and the frame it landed on.
    largest: Option<(Duration, u64)>,
}

impl CaptureClock {
    /// Takes in one packet's timestamp; returns the elapsed-time clock (rule 3).
    pub fn observe(&mut self, pkt: PacketRef) -> Timestamp {
        let ts = pkt.ts;
        match &mut self.range {
            None => {
                self.range = Some((ts, ts));
                self.elapsed = ts;
            }
            Some((earliest, latest)) => {
                *earliest = (*earliest).min(ts);
                *latest = (*latest).max(ts);
                if ts < self.prev {
                    let step = self.prev.since(ts);
                    self.steps_back += 1;
                    if self.largest.is_none_or(|(s, _)| step > s) {
                        self.largest = Some((step, pkt.frame));
                    }
                } else {
                    self.elapsed = self.elapsed.plus(ts.since(self.prev));
                }
            }
        }
        self.prev = ts;
        self.elapsed
    }

    /// The elapsed-time clock now.
    pub fn now(&self) -> Timestamp {
        self.elapsed
    }

    /// From the earliest to the latest timestamp (rule 1).
    pub fn span(&self) -> Duration {
        self.range.map_or(Duration::ZERO, |(a, b)| b.since(a))
    }

    /// The steps back, for the report; None when time never went backwards.
    pub fn steps_back(&self) -> Option<TimeStepsBack> {
        let (step, frame) = self.largest?;
        Some(TimeStepsBack {
            count: self.steps_back,
            largest_ms: round3(crate::units::ms(step)),
            largest_at_frame: frame,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(clock: &mut CaptureClock, frame: u64, secs: f64) -> f64 {
        let ts = Timestamp::from_nanos((secs * 1e9) as u64);
        clock.observe(PacketRef { frame, ts }).as_nanos() as f64 / 1e9
    }

    #[test]
    fn forward_only_elapsed_is_the_timestamp_and_nothing_is_reported() {
        let mut c = CaptureClock::default();
        for (i, t) in [100.0, 100.5, 101.0, 101.0, 160.0].into_iter().enumerate() {
            assert_eq!(at(&mut c, i as u64 + 1, t), t);
        }
        assert_eq!(c.span(), Duration::from_secs(60));
        assert!(c.steps_back().is_none());
    }

    #[test]
    fn a_merge_spans_earliest_to_latest_and_elapsed_time_keeps_going() {
        // File A covers [3600, 3601]; file B, appended after it, covers [0, 1].
        let mut c = CaptureClock::default();
        assert_eq!(at(&mut c, 1, 3600.0), 3600.0);
        assert_eq!(at(&mut c, 2, 3601.0), 3601.0);
        assert_eq!(at(&mut c, 3, 0.0), 3601.0, "a step back adds nothing");
        assert_eq!(at(&mut c, 4, 1.0), 3602.0, "B's forward second counts");
        assert_eq!(
            c.span(),
            Duration::from_secs(3601),
            "not last - first (-3599 s)"
        );
        let s = c.steps_back().expect("the step is reported");
        assert_eq!((s.count, s.largest_at_frame), (1, 3));
        assert_eq!(s.largest_ms, 3_601_000.0);
    }

    #[test]
    fn the_largest_of_several_steps_is_the_one_reported() {
        let mut c = CaptureClock::default();
        at(&mut c, 1, 10.0);
        at(&mut c, 2, 9.999);
        at(&mut c, 3, 12.0);
        at(&mut c, 4, 7.0);
        at(&mut c, 5, 8.0);
        let s = c.steps_back().unwrap();
        assert_eq!((s.count, s.largest_at_frame, s.largest_ms), (2, 4, 5000.0));
        assert_eq!(c.span(), Duration::from_secs(5), "7 s to 12 s");
    }
}
