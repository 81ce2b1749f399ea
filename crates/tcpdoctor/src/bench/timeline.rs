//! Whether the server owes the driver work at this moment, for `run`'s CPU sampler
//! (`run/cpu_sampler.rs`) to tell CPU spent working from CPU spent waiting (`busy_poll`).
//!
//! A connection *owes* while it has a request out whose answer has not begun: the server has
//! work in hand. Once the first bytes of the answer arrived (the rest may be held by Nagle
//! until an ACK, or still being written), or when nothing is out, the connection does not owe.
//! The driver updates one counter of owing connections and a count of changes; the sampler
//! reads both at each sample: an interval in which the count of changes did not move was
//! spent wholly working (some connection owed) or wholly waiting (none did). A second
//! counter says whether some connection had an answer begun and not complete: waiting then
//! is *mid-answer* (the rest is due: held in the server's socket for an ACK, or still being
//! computed), otherwise *idle* (between exchanges). An answer begins and completes with bytes
//! arriving, so that counter changes only when the count of changes moves too.

use std::sync::atomic::{AtomicU64, Ordering};

/// Shared between the driver's connections and the sampler.
#[derive(Debug, Default)]
pub struct Timeline {
    owing: AtomicU64,
    partial: AtomicU64,
    changes: AtomicU64,
}

/// What the sampler reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Phase {
    /// Some connection owed an answer not begun.
    pub owing: bool,
    /// Some connection had an answer begun and not complete.
    pub partial: bool,
    /// Changes and arrivals so far: equal at both ends of an interval means neither within it.
    pub changes: u64,
}

impl Timeline {
    /// One connection's state: `was` is what it last told (updated), `owes` what holds now.
    pub fn set(&self, was: &mut bool, owes: bool) {
        if *was == owes {
            return;
        }
        *was = owes;
        // Only a change of the whole (none owing ↔ some owing) is a change of phase.
        let flipped = if owes {
            self.owing.fetch_add(1, Ordering::SeqCst) == 0
        } else {
            self.owing.fetch_sub(1, Ordering::SeqCst) == 1
        };
        if flipped {
            self.changes.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// One connection's answer in progress: `was` is what it last told (updated), `now`
    /// whether an answer has begun and not completed.
    pub fn set_partial(&self, was: &mut bool, now: bool) {
        if *was == now {
            return;
        }
        *was = now;
        if now {
            self.partial.fetch_add(1, Ordering::SeqCst);
        } else {
            self.partial.fetch_sub(1, Ordering::SeqCst);
        }
    }

    /// Bytes of an answer arrived: the server was sending.
    pub fn arrived(&self) {
        self.changes.fetch_add(1, Ordering::SeqCst);
    }

    pub fn phase(&self) -> Phase {
        // Changes first: a change between the two reads makes the next interval mixed.
        let changes = self.changes.load(Ordering::SeqCst);
        Phase {
            owing: self.owing.load(Ordering::SeqCst) > 0,
            partial: self.partial.load(Ordering::SeqCst) > 0,
            changes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owing_connections_are_counted_and_changes_seen() {
        let t = Timeline::default();
        let (mut a, mut b) = (false, false);
        assert!(!t.phase().owing);
        t.set(&mut a, true);
        t.set(&mut b, true);
        t.set(&mut a, true);
        assert_eq!(
            t.phase().changes,
            1,
            "a second owing connection is no change of phase"
        );
        t.set(&mut a, false);
        assert!(t.phase().owing, "b still owes");
        assert_eq!(t.phase().changes, 1);
        t.set(&mut b, false);
        t.arrived();
        assert_eq!(
            t.phase(),
            Phase {
                owing: false,
                partial: false,
                changes: 3
            }
        );
        let mut p = false;
        t.set_partial(&mut p, true);
        t.set_partial(&mut p, true);
        assert!(t.phase().partial);
        t.set_partial(&mut p, false);
        assert!(!t.phase().partial);
    }
}
