//! `nagle_round_trip`: Nagle holds the tail of a message for one round trip.
//!
//! Rule (PHYSICS §9, "Nagle without delayed ACK"), per server and direction:
//! 1. Look at every pause inside a turn (see [`crate::turns`]).
//! 2. A pause is a *round-trip hold* when [`round_trip_hold`] says so: a small segment was
//!    in flight, the peer's first ACK of everything sent was a pure ACK sent at once (no
//!    delayed-ACK timer: the receiver had more than one segment, or was in quick-ACK mode),
//!    the sub-MSS rest of the message left right after that ACK reached the sender, the pause
//!    lasted about one round trip, and neither the congestion window (no retransmission so
//!    far, at most two segments in flight) nor the receive window can have held it.
//! 3. Only a pause that completes a message counts: the turn answers the other side's turn
//!    (a request or a response, not a stream that pushes on its own), it is the turn's only
//!    pause, and the data after it ends the turn. A stream of periodic messages whose period
//!    happens to be near the round trip is not a held tail.
//! 4. Its cost is the pause: without Nagle the tail would have left with the rest.
//! 5. Report from [`MIN_HOLDS`] holds on a path of at least [`MIN_RTT`] (below that a round
//!    trip costs nothing worth naming). Critical when ≥ [`CRITICAL_SHARE`] of the turns were
//!    held and the holds cost ≥ [`CRITICAL_LOST`] in total; else a warning.
//!
//! 6. On the client-facing leg of a hop whose both legs the capture holds, the hold is blamed
//!    on the element that held the bytes ([`super::hop_blame`], as in `nagle_delayed_ack`).
//! 7. A sender whose sockets are known to have TCP_NODELAY on waited for the ACK itself
//!    ([`reword_for_nodelay`]).
//!
//! It is not `nagle_delayed_ack`: no timer is involved, so `--fail-on nagle_delayed_ack` and
//! the stall counts (which are about ≈40/200 ms timers) do not include it. At the receiver's
//! end the shape is ambiguous with a sender that wrote the tail one round trip later, which is
//! why one hold is not enough.

use std::any::Any;
use std::time::Duration;

use super::{
    of, rel_ms, round_trip_hold, At, Detector, FindingHead, FlowMarks, FlowView, Groups, Held,
    HopBlame, NagleRelease, Passed, PerGroup, ShardMap,
};
use crate::flow::Direction;
use crate::report::{
    Claim, Evidence, Finding, FindingKind, FlowRef, ReleasedBy, Severity, TimelineEntry,
};
use crate::stats::Histogram;
use crate::turns::Turn;
use crate::units::fmt_duration;

pub const MIN_HOLDS: u64 = 3;
pub const MIN_RTT: Duration = Duration::from_millis(1);
pub const CRITICAL_SHARE: f64 = 0.10;
pub const CRITICAL_LOST: Duration = Duration::from_millis(500);

#[derive(Default)]
struct State {
    turns: u64,
    held_turns: u64,
    holds: u64,
    hold_us: Histogram,
    rtt_us: Histogram,
    lost: Duration,
    flows: u64,
    /// The first hold in the capture ([`At`]: the smallest position).
    example: Option<(FlowRef, Turn, NagleRelease, Claim, At)>,
}

#[derive(Default)]
pub struct NagleRoundTrip {
    state: PerGroup<State>,
    marks: FlowMarks,
}

impl Detector for NagleRoundTrip {
    fn wants_turns(&self) -> bool {
        true
    }

    fn on_turn(&mut self, flow: &FlowView, turn: &Turn) {
        let st = self.state.get(flow.group, turn.dir);
        st.turns += 1;
        // Most turns have no pause at all: the hold, which needs one, is looked for first.
        let Some(r) = round_trip_hold(flow.flow, turn) else {
            return;
        };
        // The hold was judged on the handshake's RTT: report that one, and only on paths
        // where a round trip costs something.
        let Some(rtt) = flow.flow.handshake_rtt().filter(|r| *r >= MIN_RTT) else {
            return;
        };
        st.holds += 1;
        st.held_turns += 1;
        st.hold_us.record_duration(r.stall());
        st.rtt_us.record_duration(rtt);
        st.lost += r.stall();
        if super::first_at(&st.example, flow.at, |e| e.4) {
            let claim = r.claim(flow.flow, turn.dir, ReleasedBy::ImmediateAck);
            st.example = Some((flow.flow_ref(), turn.clone(), r, claim, flow.at));
        }
        self.marks.count(flow.flow.id, turn.dir, &mut st.flows);
    }

    fn on_flow_end(&mut self, flow: &FlowView) {
        self.marks.forget(flow.flow.id);
    }

    super::hands_over_its_state!();

    fn absorb(&mut self, state: Box<dyn Any + Send>, map: &ShardMap) {
        let other: PerGroup<State> = super::handed(state);
        self.state.absorb(other, map, |st, o| {
            st.turns += o.turns;
            st.held_turns += o.held_turns;
            st.holds += o.holds;
            st.hold_us.merge(&o.hold_us);
            st.rtt_us.merge(&o.rtt_us);
            st.lost += o.lost;
            st.flows += o.flows;
            let theirs = o
                .example
                .map(|(f, t, r, c, at)| (map.flow_ref(f), t, r, c, at));
            super::earlier(&mut st.example, theirs, |e| e.4);
        });
    }

    fn finish(&mut self, groups: &Groups) -> Vec<Finding> {
        let mut out = Vec::new();
        for (group, dir, mut st) in self.state.drain() {
            if st.holds < MIN_HOLDS {
                continue;
            }
            let Some(example) = st.example.take() else {
                continue;
            };
            let (f, t, r, c, _) = example;
            out.push(finding(group, dir, &st, (f, t, r, c), groups));
        }
        super::settle(out)
    }
}

fn finding(
    group: usize,
    dir: Direction,
    st: &State,
    (example_flow, turn, r, claim): (FlowRef, Turn, NagleRelease, Claim),
    groups: &Groups,
) -> (Finding, Option<Passed>) {
    let share = st.held_turns as f64 / st.turns.max(1) as f64;
    let severity = if share >= CRITICAL_SHARE && st.lost >= CRITICAL_LOST {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let hold = st.hold_us.distribution(1e-3);
    let rtt = st.rtt_us.distribution(1e-3);
    let (what, whose, sender, receiver) = super::message_words(dir);
    let blame = super::hop_blame(
        groups,
        group,
        dir,
        Held {
            typical: Duration::from_micros(st.hold_us.quantile(0.5) as u64),
            share,
        },
    );
    let passed_on = matches!(blame, Some(HopBlame::Upstream(_)));
    let held = format!(
        "{} {} waited one extra round trip ({:.1} ms median)",
        st.held_turns,
        if st.held_turns == 1 { whose } else { what },
        hold.p50,
    );
    let verdict = match &blame {
        Some(HopBlame::Upstream(p)) => format!(
            "{held} on their way through {}, {}: the last pieces already left {} a round trip \
             late, so the hop passes the wait on and does not cause it; {} lost.",
            p.subject,
            p.promptly,
            p.upstream,
            fmt_duration(st.lost),
        ),
        _ => {
            let writer = match &blame {
                Some(HopBlame::Hop { cause, .. }) => cause.clone(),
                _ => format!("the {sender} writes"),
            };
            format!(
                "{held}: {writer} each {whose} in pieces and Nagle's algorithm holds the last, \
                 small piece until the {receiver} acknowledges the first — the {receiver} \
                 answered at once, so this costs the path's round trip, not a delayed-ACK timer; \
                 {} lost.",
                fmt_duration(st.lost),
            )
        }
    };
    let mut ev = Evidence::default();
    ev.facts
        .push(format!("held {what}: {}", of(st.held_turns, st.turns)));
    ev.facts.push(format!(
        "hold length: median {:.1} ms, max {:.1} ms; path round trip {:.1} ms (median over \
         holds)",
        hold.p50, hold.max, rtt.p50
    ));
    ev.facts.push(format!(
        "each hold: a small {sender} segment in flight, the {receiver}'s immediate pure ACK \
         of everything sent, then the sub-MSS rest of the {whose} as soon as that ACK reached \
         the {sender}; no loss before it and at most two segments in flight, so neither the \
         congestion window nor the receive window held it"
    ));
    ev.facts.push(format!(
        "time lost: {} over {} holds",
        fmt_duration(st.lost),
        st.holds
    ));
    match &blame {
        Some(HopBlame::Hop { text, .. }) => ev.facts.push(text.fact.clone()),
        Some(HopBlame::Upstream(p)) => ev.facts.push(p.fact.clone()),
        None => {}
    }
    ev.counts.insert("held_turns".into(), st.held_turns);
    ev.counts.insert("turns".into(), st.turns);
    ev.counts.insert("holds".into(), st.holds);
    ev.values
        .insert("held_share".into(), crate::stats::round3(share));
    ev.values.insert("median_hold_ms".into(), hold.p50);
    ev.distributions.insert("hold_ms".into(), hold);
    ev.distributions.insert("rtt_ms".into(), rtt);
    let p = r.pause;
    let small = r.ack.acked.oldest;
    ev.frames = vec![
        small.frame,
        p.before.pkt.frame,
        r.ack.pkt.frame,
        p.after.pkt.frame,
    ];
    ev.frames.dedup();
    ev.claims.push(claim);
    let origin = turn.first.ts;
    let mut push = |frame, ts, direction, what: String, bytes: Option<u32>, note: String| {
        ev.timeline.push(TimelineEntry {
            frame,
            t_ms: rel_ms(ts, origin),
            direction,
            what,
            payload_bytes: bytes.map(u64::from),
            note,
        });
    };
    if small.frame != p.before.pkt.frame {
        push(
            small.frame,
            small.ts,
            dir,
            format!("{whose} data"),
            None,
            format!("the first of {} segments in flight", r.ack.acked.segments),
        );
    }
    push(
        p.before.pkt.frame,
        p.before.pkt.ts,
        dir,
        format!("{} bytes", p.before.len),
        Some(p.before.len),
        if passed_on {
            "last segment before the silence; the rest has not come through yet".into()
        } else {
            "last segment before the silence; a small one is unacknowledged, so Nagle holds the \
             next small write"
                .into()
        },
    );
    push(
        r.ack.pkt.frame,
        r.ack.pkt.ts,
        dir.reverse(),
        "pure ACK of everything sent".into(),
        Some(0),
        format!(
            "sent at once by the {receiver} ({} after the oldest segment, round trip \
             subtracted)",
            fmt_duration(r.ack_held)
        ),
    );
    push(
        p.after.pkt.frame,
        p.after.pkt.ts,
        dir,
        format!("{} bytes", p.after.len),
        Some(p.after.len),
        format!("released {} after the ACK", fmt_duration(r.release_after)),
    );
    let fix = match dir {
        Direction::ServerToClient => {
            "Write each response with one call (build header and body in one buffer, or use \
             writev), or set TCP_NODELAY on the server's sockets once responses are whole; \
             TCP_CORK / MSG_MORE around the pieces also works. If the server already does \
             that, an application that waits for its send queue to drain before writing more \
             shows the same shape: write without waiting."
        }
        Direction::ClientToServer => {
            "Send each request with one call (build header and body in one buffer, or use \
             writev), or set TCP_NODELAY on the client's socket once requests are whole; \
             TCP_CORK / MSG_MORE around the pieces also works."
        }
    };
    let fix: String = match &blame {
        Some(HopBlame::Hop { text, .. }) => text.fix.clone(),
        Some(HopBlame::Upstream(p)) => format!(
            "Fix {}, not the hop (it forwards what it reads at once): have it write each \
             {whose} with one call (a buffer or writev), or set TCP_NODELAY on its sockets \
             once {what} are whole; where it already has TCP_NODELAY, stop waiting for the \
             send queue to drain between pieces.",
            p.upstream
        ),
        None => fix.to_string(),
    };
    let passed = HopBlame::passed(blame);
    let f = FindingHead {
        kind: FindingKind::NagleRoundTrip,
        severity,
        group,
        direction: dir,
        flows_affected: st.flows,
        example_flow,
        time_lost: st.lost,
    }
    .finish(groups, verdict, ev, &fix);
    (f, passed)
}

/// Rewords a finding of this kind about a sender whose sockets had TCP_NODELAY on (rule 7):
/// Nagle held nothing; the sender wrote the tail only once the peer acknowledged the first
/// piece, which costs the round trip.
pub fn reword_for_nodelay(f: &mut Finding) {
    let (what, whose, sender, receiver) = super::message_words(f.direction);
    let n = f.evidence.counts.get("held_turns").copied().unwrap_or(0);
    let median = f
        .evidence
        .values
        .get("median_hold_ms")
        .copied()
        .unwrap_or(0.0);
    f.verdict = format!(
        "{n} {} waited one extra round trip ({median:.1} ms median): the {sender} wrote each \
         {whose} in pieces and waited for the {receiver}'s ACK of the first before writing the \
         last — its sockets have TCP_NODELAY on, so Nagle held nothing; {} lost.",
        if n == 1 { whose } else { what },
        fmt_duration(Duration::from_secs_f64(f.time_lost_ms.max(0.0) / 1e3)),
    );
    f.fix = super::nodelay_wait_fix(whose);
    for t in &mut f.evidence.timeline {
        if t.note.contains("Nagle holds") {
            t.note = format!(
                "last segment before the silence; the {sender} writes the rest once it is \
                 acknowledged"
            );
        }
    }
}
