//! The congestion window counts packets (PHYSICS §9): tiny segments spend it.
//!
//! A sender may have about `cwnd` segments in flight, whatever their size: ten 19-byte
//! segments spend a fresh connection's initial window (IW10) as surely as ten full ones. A
//! message written as many tiny pieces with `TCP_NODELAY` therefore leaves a window's worth of
//! pieces, and the rest waits for an ACK one round trip later (and then often leaves
//! coalesced). Written whole, the same bytes would have been one or two segments, inside the
//! window. A pause inside a turn is such a *window wait* when:
//! 1. the flight before it (the turn's data since its previous pause, or its start) is at least
//!    [`MIN_FLIGHT`] segments, the initial window: Nagle lets at most one small segment be
//!    unacknowledged, so such a flight of small segments was not held by Nagle; and Linux
//!    never lowers the congestion window below the initial one without a loss (an idle
//!    restart and an application-limited decay both stop there), so a shorter flight
//!    followed by a pause was not stopped by the window (after a loss, or under BBR's
//!    PROBE_RTT, it can be smaller: those waits are missed, never claimed falsely);
//! 2. the flight is small in bytes: at most half a full segment per segment on average, so a
//!    window counted in bytes would not have stopped it — only a count of packets did;
//! 3. neither the receive window (closed or too small for what followed) nor a loss (a
//!    retransmission during the pause) explains the pause;
//! 4. an ACK of the flight's data passed the capture point before the data after the pause,
//!    and that data followed the flight's *first* ACK after the round trip from the capture
//!    point to the sender, give or take a quarter of it and [`RELEASE_SLACK`] (at the
//!    sender's end at once, at the receiver's end one round trip later): the sender sent the
//!    rest as soon as the window opened — not later (it was writing late), not sooner (it
//!    was written before that ACK could reach it);
//! 5. the path's round trip is at least [`MIN_RTT`] (below that, a round trip costs nothing
//!    worth naming, and a sender's own pacing cannot be told from a window);
//! 6. written whole, the turn would have left inside the window its first flight spent: its
//!    bytes fit in as many full segments as that flight had packets. A larger message needs
//!    round trips of slow start however it is written (the window grows per ACK, in packets,
//!    either way), and whether the tiny pieces added one depends on sizes the pause alone does
//!    not show: no cost is claimed for it.
//!
//! Its cost is the pause: written whole, the rest would have left with the flight. Pauses
//! that the Nagle rule already claims ([`super::delayed_ack_stalls`]) are not counted again.

use std::time::Duration;

use crate::flow::{Direction, Flow};
use crate::numfmt::count;
use crate::report::{Claim, Evidence, TimelineEntry, WindowWait as ClaimedWait};
use crate::stats::round3;
use crate::time::Timestamp;
use crate::turns::{Pause, Turn};
use crate::units::fmt_duration;

use super::super::release::RELEASE_SLACK;

/// Segments in a flight, at least, for a window wait.
pub const MIN_FLIGHT: u32 = 10;
/// The path's round trip, at least.
pub const MIN_RTT: Duration = Duration::from_millis(1);

/// A pause the congestion window made: the flight before it and the data after it, and the
/// claim the audit checks.
#[derive(Clone, Debug)]
pub struct WindowWait {
    pub pause: Pause,
    pub claim: Option<Claim>,
}

impl WindowWait {
    /// What it cost: the pause.
    pub fn cost(&self) -> Duration {
        self.pause.gap()
    }
}

/// The window waits in `turn`, skipping the pauses whose `before` frames are in `nagle`.
pub fn window_waits<'a>(
    flow: &'a Flow,
    turn: &'a Turn,
    nagle: &'a [u64],
) -> impl Iterator<Item = WindowWait> + 'a {
    let rtt = flow.rtt().filter(|r| *r >= MIN_RTT);
    // Rule 6: the packets of the turn's first flight, each full, would have carried it all.
    let full = u64::from(flow.full_segment(turn.dir).max(1));
    let fits = turn
        .pauses
        .first()
        .is_some_and(|p| turn.bytes <= u64::from(p.flight.segments) * full);
    turn.pauses
        .iter()
        .filter(move |p| !nagle.contains(&p.before.pkt.frame))
        .filter(move |_| fits)
        .filter_map(move |p| {
            let rtt = rtt?;
            window_wait(flow, turn.dir, p, rtt).then(|| WindowWait {
                pause: *p,
                claim: claim(flow, turn.dir, p),
            })
        })
}

/// The claim the audit re-checks for one wait.
fn claim(flow: &Flow, dir: Direction, p: &Pause) -> Option<Claim> {
    let (sender, receiver) = match dir {
        Direction::ClientToServer => (flow.client, flow.server),
        Direction::ServerToClient => (flow.server, flow.client),
    };
    Some(Claim::WindowWait(ClaimedWait {
        sender: sender.to_string(),
        receiver: receiver.to_string(),
        first: p.flight.first.frame,
        before: p.before.pkt.frame,
        ack: p.flight.first_ack?.frame,
        after: p.after.pkt.frame,
        segments: p.flight.segments,
        bytes: p.flight.bytes,
        full_segment: flow.full_segment(dir),
        syns: flow.syn_frames(),
    }))
}

/// Rules 1–4 for one pause.
fn window_wait(flow: &Flow, dir: Direction, p: &Pause, rtt: Duration) -> bool {
    let f = &p.flight;
    let full = u64::from(flow.full_segment(dir).max(1));
    if f.segments < MIN_FLIGHT
        || f.bytes * 2 > u64::from(f.segments) * full
        || p.window_limited
        || p.retransmitted
    {
        return false;
    }
    let Some(ack) = f.first_ack else {
        return false;
    };
    if ack.ts > p.after.pkt.ts {
        return false;
    }
    // From the capture point to the sender and back: at the sender's end ≈ 0.
    let to_sender = flow
        .rtt_towards_receiver(dir.reverse())
        .unwrap_or(rtt)
        .min(rtt);
    let release = p.after.pkt.ts.since(ack.ts);
    let give = to_sender / 4 + RELEASE_SLACK;
    release + give >= to_sender && release <= to_sender + give
}

/// The verdict's sentence about the waits.
pub fn verdict(turns: u64, lost: Duration) -> String {
    format!(
        " The congestion window counts packets, not bytes: in {} the pieces spent it, and the \
         rest of the message waited for an ACK one round trip later, {} in all (written \
         whole, it would have left inside the window).",
        count(turns, "turn"),
        fmt_duration(lost)
    )
}

/// The example wait: a fact naming its frames, and its timeline after the turn's entry (times
/// from `origin`, the turn's first segment).
pub fn evidence(
    ev: &mut Evidence,
    dir: Direction,
    w: &WindowWait,
    full: u32,
    (turns, waits): (u64, u64),
    origin: Timestamp,
) {
    let p = &w.pause;
    let f = &p.flight;
    let Some(ack) = f.first_ack else {
        return;
    };
    ev.facts.push(format!(
        "the congestion window counts packets: {} ({} pauses in {}) waited for an ACK after a \
         flight of small segments; example: frames {}–{} are a flight of {} ({}, {:.0} bytes \
         each on average, a full segment being {full}), frame {} is the first ACK of it, and \
         frame {} carries the next data {} after frame {}: no more than a window of packets \
         was sent before an ACK came back, {} lost in that pause",
        count(turns, "turn"),
        waits,
        count(turns, "turn"),
        f.first.frame,
        p.before.pkt.frame,
        count(u64::from(f.segments), "segment"),
        count(f.bytes, "byte"),
        f.bytes as f64 / f64::from(f.segments.max(1)),
        ack.frame,
        p.after.pkt.frame,
        fmt_duration(p.gap()),
        p.before.pkt.frame,
        fmt_duration(w.cost()),
    ));
    let t = |ts: Timestamp| round3(crate::units::ms(ts.since(origin)));
    let mut entry = |frame, ts, direction, bytes: Option<u32>, what: String, note: String| {
        ev.timeline.push(TimelineEntry {
            frame,
            t_ms: t(ts),
            direction,
            what,
            payload_bytes: bytes.map(u64::from),
            note,
        });
        ev.frames.push(frame);
    };
    entry(
        f.first.frame,
        f.first.ts,
        dir,
        None,
        format!(
            "a flight of {} begins ({})",
            count(u64::from(f.segments), "segment"),
            count(f.bytes, "byte")
        ),
        String::new(),
    );
    entry(
        ack.frame,
        ack.ts,
        dir.reverse(),
        None,
        "the first ACK of that flight".into(),
        String::new(),
    );
    entry(
        p.before.pkt.frame,
        p.before.pkt.ts,
        dir,
        Some(p.before.len),
        format!("{} bytes: the flight's last segment", p.before.len),
        "then silence: the window's packets are spent".into(),
    );
    entry(
        p.after.pkt.frame,
        p.after.pkt.ts,
        dir,
        Some(p.after.len),
        format!(
            "{} bytes: the rest leaves once the window opens",
            p.after.len
        ),
        format!("{} after the segment above", fmt_duration(p.gap())),
    );
    ev.claims.extend(w.claim.clone());
    if let Some(Claim::WindowWait(c)) = &w.claim {
        ev.frames.extend(&c.syns);
    }
    ev.timeline.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
    ev.frames.sort_unstable();
    ev.frames.dedup();
}
