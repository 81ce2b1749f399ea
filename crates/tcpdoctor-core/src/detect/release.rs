//! What released a held segment: the shared rule for recognising Nagle × delayed ACK.
//!
//! A pause inside a turn is a *Nagle hold released by a delayed ACK* when:
//! 1. during the pause the peer sent a pure ACK that acknowledged everything the sender had
//!    sent — the data before the pause was the outstanding small segment Nagle waits on;
//! 2. that ACK came late: after subtracting the round trip from the capture point to the
//!    receiver, the receiver held it at least [`DELAYED_ACK_MIN`] (a delayed-ACK timer, not
//!    an immediate ACK on a long path);
//! 3. the data after the pause followed that ACK within the round trip from the capture point
//!    to the sender (plus a quarter of it, for jitter) plus [`RELEASE_SLACK`]: the sender was
//!    waiting for exactly that ACK;
//! 4. the segment before the pause was smaller than the MSS (Linux holds a small segment only
//!    while an earlier *small* one is unacknowledged), and the peer did not advertise a zero
//!    window during the pause (then flow control held the data, not Nagle).
//!
//! Anywhere on the path, such a pause lasts about the ACK timer plus one round trip. A server
//! that simply takes 40 ms to compute fails rule 3 (its data is not timed by the ACK) or has no
//! pause at all (one segment per response).

use std::time::Duration;

use crate::flow::{Direction, Flow};
use crate::turns::Pause;

/// The receiver must have held its ACK at least this long (Linux's minimum is 40 ms; BSD/macOS
/// about 100 ms; Windows 200 ms). Shorter holds are scheduling noise, not a delayed-ACK timer.
pub const DELAYED_ACK_MIN: Duration = Duration::from_millis(10);
/// Allowance for scheduling between the ACK's arrival and the held data leaving.
pub const RELEASE_SLACK: Duration = Duration::from_millis(2);

/// The delayed-ACK timer a hold matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// ≈ 40 ms: Linux's minimum ACK timeout (`TCP_DELACK_MIN`).
    Linux40,
    /// ≈ 100 ms: BSD and macOS.
    Bsd100,
    /// ≈ 200 ms: Windows, or Linux's maximum ACK timeout.
    Max200,
    Other,
}

impl Timer {
    pub fn label(self) -> &'static str {
        match self {
            Timer::Linux40 => "≈40 ms (Linux delayed-ACK minimum)",
            Timer::Bsd100 => "≈100 ms (BSD/macOS delayed ACK)",
            Timer::Max200 => "≈200 ms (Windows delayed ACK, or Linux's maximum)",
            Timer::Other => "no standard delayed-ACK timer",
        }
    }

    pub fn key(self) -> &'static str {
        match self {
            Timer::Linux40 => "timer_40ms",
            Timer::Bsd100 => "timer_100ms",
            Timer::Max200 => "timer_200ms",
            Timer::Other => "timer_other",
        }
    }
}

/// Which delayed-ACK timer a receiver hold of `held` matches.
pub fn classify_timer(held: Duration) -> Timer {
    match held.as_millis() {
        25..=69 => Timer::Linux40,
        70..=149 => Timer::Bsd100,
        150..=260 => Timer::Max200,
        _ => Timer::Other,
    }
}

/// A pause caused by Nagle waiting for a delayed ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NagleRelease {
    pub pause: Pause,
    /// How long the receiver held its ACK (round trip to the receiver subtracted).
    pub ack_held: Duration,
    /// From the ACK to the held data, at the capture point.
    pub release_after: Duration,
    pub timer: Timer,
}

impl NagleRelease {
    /// Time the stall cost: the whole pause (without Nagle the data would have followed at once).
    pub fn stall(&self) -> Duration {
        self.pause.gap()
    }
}

/// Applies the rule above to one pause of a turn sent in `dir`.
pub fn nagle_release(flow: &Flow, dir: Direction, pause: &Pause) -> Option<NagleRelease> {
    let ack = pause.ack?;
    if !ack.covers_all || pause.window_limited || pause.before.len >= flow.mss(dir) {
        return None;
    }
    let to_receiver = flow.rtt_towards_receiver(dir).unwrap_or_default();
    let to_sender = flow.rtt_towards_receiver(dir.reverse()).unwrap_or_default();
    let ack_wait = ack.pkt.ts.since(pause.before.pkt.ts);
    let ack_held = ack_wait.saturating_sub(to_receiver);
    if ack_held < DELAYED_ACK_MIN {
        return None;
    }
    let release_after = pause.after.pkt.ts.since(ack.pkt.ts);
    if release_after > to_sender + to_sender / 4 + RELEASE_SLACK {
        return None;
    }
    Some(NagleRelease {
        pause: *pause,
        ack_held,
        release_after,
        timer: classify_timer(ack_held),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers() {
        assert_eq!(classify_timer(Duration::from_millis(41)), Timer::Linux40);
        assert_eq!(classify_timer(Duration::from_millis(104)), Timer::Bsd100);
        assert_eq!(classify_timer(Duration::from_millis(200)), Timer::Max200);
        assert_eq!(classify_timer(Duration::from_millis(12)), Timer::Other);
    }
}
