//! What released a held segment: the shared rule for recognising Nagle's algorithm at work.
//!
//! A pause inside a turn is a *Nagle hold* when:
//! 1. the first segment the peer sent during the pause that acknowledged everything the sender
//!    had sent was a pure ACK — not a FIN, an RST or data (those are not what Nagle waits
//!    for), and not an ACK that came long before the pause ended (then nothing was in flight
//!    for Nagle to wait on, and the sender simply wrote later);
//! 2. a segment smaller than a full one ([`Flow::full_segment`]: the MSS less the options every
//!    segment carries) was among the data that ACK acknowledged: Nagle holds a small write
//!    only while an earlier small segment is unacknowledged (Linux's Minshall check);
//! 3. the data after the pause followed that ACK after the round trip from the capture point
//!    to the sender, give or take a quarter of it plus [`RELEASE_SLACK`] (at the sender's end
//!    at once; at the receiver's end one round trip later — sooner is data the sender wrote
//!    before the ACK could reach it): the sender was waiting for exactly that ACK;
//! 4. the data after the pause is smaller than a full segment: Nagle holds only a sub-MSS
//!    segment, and a full one leaves as soon as the window allows (a full segment that waited
//!    for an ACK was held by a send buffer, a congestion window or a receive window);
//! 5. the data after the pause acknowledges nothing of the peer's that the data before it had
//!    not: otherwise it answers peer data that arrived during the pause (the next request),
//!    which the sender could not have answered earlier, Nagle or not;
//! 6. the peer did not advertise a zero or too-small window during the pause (then flow
//!    control held the data, not Nagle), and the sender did not retransmit during it (then
//!    the silence was a loss; a copy captured within a millisecond is the capture seeing one
//!    packet twice).
//!
//! It was released by a **delayed ACK** ([`nagle_release`]) when, in addition:
//! 7. the segment before the pause was itself small;
//! 8. the receiver held its ACK as long as a real delayed-ACK timer runs, as seen from the
//!    capture point (the round trip from the capture point to the receiver subtracted): at
//!    least [`DELAYED_ACK_MIN`] counted from the oldest segment the ACK acknowledged (whose
//!    arrival started the timer, at the earliest), and at most [`DELAYED_ACK_MAX`] counted
//!    from the segment before the pause. A "hold" of seconds is an idle connection;
//! 9. that ACK acknowledged at most one full segment of data: a receiver ACKs at once when
//!    more than one full segment has arrived since its last ACK (RFC 1122, Linux's
//!    `__tcp_ack_snd_check`), so a later ACK of more is a reader that was not reading.
//!
//! It cost a **round trip** instead ([`nagle_round_trip`]) when the receiver answered at once
//! (rule 8's hold below [`DELAYED_ACK_MIN`], so the two never claim the same pause, and no
//! more than a quarter of the path's round trip plus [`RELEASE_SLACK`]), the
//! pause lasted one round trip of the path (within [`ROUND_TRIP_SHARE`] below and a quarter
//! plus twice the slack above), and nothing else could have held the data:
//! no retransmission in that direction so far (after a loss the congestion window can be
//! one segment) and at most [`MAX_IN_FLIGHT`] segments in flight (every TCP may send at least
//! two segments at once, even after idle). The path's round trip must come from a captured
//! handshake: a data → ACK sample holds the receiver's timer when every ACK was delayed, and
//! would pass a delayed ACK off as an immediate one.

use std::time::Duration;

use crate::flow::{Direction, Flow};
use crate::report::{Claim, NagleHold, ReleasedBy};
use crate::turns::{AckRef, Pause, Turn};

/// A delayed ACK is held at least this long. Linux's minimum ACK timeout is 40 ms
/// (`TCP_DELACK_MIN`), which a kernel ticking at 100 Hz can fire up to 10 ms early; BSD and
/// macOS wait about 100 ms, Windows 200 ms. Shorter holds are an immediate ACK plus noise.
pub const DELAYED_ACK_MIN: Duration = Duration::from_millis(25);
/// RFC 1122 allows a delayed ACK at most 500 ms (Linux's own ceiling is 200 ms while
/// interactive, 500 ms otherwise); 10 % more for timer granularity.
pub const DELAYED_ACK_MAX: Duration = Duration::from_millis(550);
/// Allowance for scheduling between the ACK's arrival and the held data leaving.
pub const RELEASE_SLACK: Duration = Duration::from_millis(2);
/// A round-trip hold lasts about one round trip of the path: at least this share of it.
pub const ROUND_TRIP_SHARE: f64 = 0.75;
/// Segments in flight at most, for a round-trip hold (within any initial or restart window).
pub const MAX_IN_FLIGHT: u32 = 2;

/// The delayed-ACK timer a hold matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Timer {
    /// ≈ 40 ms: Linux's minimum ACK timeout (`TCP_DELACK_MIN`).
    Linux40,
    /// ≈ 100 ms: BSD and macOS.
    Bsd100,
    /// ≈ 200 ms: Windows, or Linux's maximum ACK timeout.
    Max200,
    /// Longer than the usual timers, within RFC 1122's 500 ms.
    Other,
}

impl Timer {
    pub fn label(self) -> &'static str {
        match self {
            Timer::Linux40 => "≈40 ms (Linux delayed-ACK minimum)",
            Timer::Bsd100 => "≈100 ms (BSD/macOS delayed ACK)",
            Timer::Max200 => "≈200 ms (Windows delayed ACK, or Linux's maximum)",
            Timer::Other => "260–500 ms (a long delayed-ACK timer, within RFC 1122's limit)",
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
        0..=69 => Timer::Linux40,
        70..=149 => Timer::Bsd100,
        150..=260 => Timer::Max200,
        _ => Timer::Other,
    }
}

/// A pause caused by Nagle waiting for an ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NagleRelease {
    pub pause: Pause,
    /// The ACK that released the data.
    pub ack: AckRef,
    /// How long the receiver held its ACK, from the oldest segment it acknowledged (the round
    /// trip to the receiver subtracted).
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

/// Rules 1–6, and the hold measured for rules 7–8.
fn held_by_nagle(flow: &Flow, dir: Direction, pause: &Pause) -> Option<NagleRelease> {
    let ack = pause.ack?;
    let full = flow.full_segment(dir);
    if !ack.pure
        || pause.window_limited
        || pause.retransmitted
        || ack.acked.smallest >= full
        || pause.after.len >= full
        || pause.after.ack > pause.before.ack
    {
        return None;
    }
    let to_receiver = flow.rtt_towards_receiver(dir).unwrap_or_default();
    let to_sender = flow.rtt_towards_receiver(dir.reverse()).unwrap_or_default();
    let release_after = pause.after.pkt.ts.since(ack.pkt.ts);
    let tolerance = to_sender / 4 + RELEASE_SLACK;
    if release_after > to_sender + tolerance || release_after + tolerance < to_sender {
        return None;
    }
    let ack_held = ack
        .pkt
        .ts
        .since(ack.acked.oldest.ts)
        .saturating_sub(to_receiver);
    Some(NagleRelease {
        pause: *pause,
        ack,
        ack_held,
        release_after,
        timer: classify_timer(ack_held),
    })
}

/// The pauses of `turn` that Nagle held until the receiver's delayed ACK — none when the
/// sender also paused with no ACK to wait for: it sets its own pace (a periodic stream, a slow
/// producer), and an ACK that happens to precede one of its sends released nothing (nDPI
/// ieee_c37118.pcap: a 20 ms stream, one delayed ACK landing just before a scheduled frame).
/// Every detector that counts delayed-ACK holds asks here, so they agree on the turn.
pub fn delayed_ack_stalls<'a>(
    flow: &'a Flow,
    turn: &'a Turn,
) -> impl Iterator<Item = NagleRelease> + 'a {
    let paced = turn.pauses.iter().any(|p| p.ack.is_none());
    turn.pauses
        .iter()
        .filter(move |_| !paced)
        .filter_map(move |p| nagle_release(flow, turn.dir, p))
}

/// The round-trip hold that completed `turn`, if one did: only a pause that completes a
/// message counts — the turn answers the other side's turn (not a stream pushing on its
/// own), it is the turn's only pause, and the data after it ends the turn. A stream whose
/// period happens to be near the round trip is not a held tail.
pub fn round_trip_hold(flow: &Flow, turn: &Turn) -> Option<NagleRelease> {
    let [pause] = &turn.pauses[..] else {
        return None;
    };
    let completes_a_message =
        turn.follows_a_turn() && turn.pauses.dropped() == 0 && pause.after.pkt == turn.last;
    if !completes_a_message {
        return None;
    }
    nagle_round_trip(flow, turn.dir, pause)
}

/// A pause in a turn sent in `dir` that Nagle held until the receiver's delayed ACK.
fn nagle_release(flow: &Flow, dir: Direction, pause: &Pause) -> Option<NagleRelease> {
    let r = held_by_nagle(flow, dir, pause)?;
    let one_full = u64::from(flow.full_segment(dir));
    if flow.is_full(dir, pause.before.len)
        || r.ack_held < DELAYED_ACK_MIN
        || r.ack.acked.bytes > one_full
    {
        return None;
    }
    let to_receiver = flow.rtt_towards_receiver(dir).unwrap_or_default();
    let from_before = r
        .ack
        .pkt
        .ts
        .since(pause.before.pkt.ts)
        .saturating_sub(to_receiver);
    (from_before <= DELAYED_ACK_MAX).then_some(r)
}

/// A pause in a turn sent in `dir` that Nagle held for one round trip: the receiver ACKed at
/// once, and only that ACK let the rest leave.
fn nagle_round_trip(flow: &Flow, dir: Direction, pause: &Pause) -> Option<NagleRelease> {
    let r = held_by_nagle(flow, dir, pause)?;
    // Only a handshake tells an immediate ACK from a delayed one: without it the RTT comes
    // from data → ACK samples, which hold the timer when every ACK was delayed.
    let rtt = flow.handshake_rtt()?;
    let gap = pause.gap();
    let about_one_rtt = gap.as_secs_f64() >= ROUND_TRIP_SHARE * rtt.as_secs_f64()
        && gap <= rtt + rtt / 4 + 2 * RELEASE_SLACK;
    // Disjoint from nagle_release: a hold a delayed-ACK timer explains is never "at once".
    let at_once = r.ack_held <= rtt / 4 + RELEASE_SLACK && r.ack_held < DELAYED_ACK_MIN;
    let clean = flow.half(dir).retransmissions == 0 && r.ack.acked.segments <= MAX_IN_FLIGHT;
    (at_once && about_one_rtt && clean).then_some(r)
}

impl NagleRelease {
    /// The claim a finding quoting this hold makes, with every frame it rests on.
    pub fn claim(&self, flow: &Flow, dir: Direction, released_by: ReleasedBy) -> Claim {
        let (sender, receiver) = match dir {
            Direction::ClientToServer => (flow.client, flow.server),
            Direction::ServerToClient => (flow.server, flow.client),
        };
        Claim::NagleHold(NagleHold {
            sender: sender.to_string(),
            receiver: receiver.to_string(),
            oldest: self.ack.acked.oldest.frame,
            before: self.pause.before.pkt.frame,
            ack: self.ack.pkt.frame,
            after: self.pause.after.pkt.frame,
            full_segment: flow.full_segment(dir),
            syns: flow.syn_frames(),
            timestamps: flow.half(dir).timestamps,
            rtt_to_receiver: flow.rtt_sample_towards_receiver(dir).map(|(_, f)| f),
            rtt_to_sender: flow
                .rtt_sample_towards_receiver(dir.reverse())
                .map(|(_, f)| f),
            released_by,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timers() {
        assert_eq!(classify_timer(Duration::from_millis(41)), Timer::Linux40);
        assert_eq!(classify_timer(Duration::from_millis(104)), Timer::Bsd100);
        assert_eq!(classify_timer(Duration::from_millis(200)), Timer::Max200);
        assert_eq!(classify_timer(Duration::from_millis(400)), Timer::Other);
    }
}
