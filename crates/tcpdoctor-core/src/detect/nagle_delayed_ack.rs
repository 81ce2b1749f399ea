//! `nagle_delayed_ack`: a message written in pieces waits for the peer's delayed ACK.
//!
//! Rule (PHYSICS §3), per server and direction:
//! 1. Look at every pause inside a turn (see [`crate::turns`]).
//! 2. A pause is a *stall* when [`delayed_ack_stalls`] says so: a small segment was in flight, the
//!    peer's first ACK of everything sent was a pure ACK that came only after a real
//!    delayed-ACK timer (25–550 ms beyond the round trip, as seen from the capture point), and
//!    the rest of the message left right after that ACK (within the round trip to the
//!    sender + 2 ms). An ACK that came at once (Nagle then cost a round trip, not a timer) is
//!    `nagle_round_trip`'s, not this kind's.
//! 3. A turn in which the sender also paused with no ACK to wait for (its own pace: a
//!    periodic stream, a slow producer) is left out: an ACK that coincides with one of its
//!    sends released nothing (nDPI ieee_c37118.pcap: a 20 ms stream, one delayed ACK landing
//!    3 ms before a scheduled frame).
//! 4. A turn with at least one stall is a *stalled* request (client→server) or response
//!    (server→client). Its cost is the length of its stalls.
//! 5. Report from [`MIN_STALLS`] stall: rules 2's conditions are specific enough that a
//!    single one is real (a POST whose body waited 40 ms). Critical when ≥ [`CRITICAL_SHARE`]
//!    of the turns stalled and the stalls cost ≥ [`CRITICAL_LOST`] in total.
//! 6. Stalls on the client-facing leg of a hop whose both legs the capture holds are blamed
//!    on the element that held the bytes ([`super::hop_blame`]): the hop when it kept bytes it
//!    had already received for about a stall; else the upstream, whose own finding gains the
//!    hop's fact (the hop's is dropped, [`super::settle`]).
//! 7. A server whose sockets are known to have TCP_NODELAY on (`run` reads them) cannot have
//!    had its Nagle hold anything: the same shape then means the program wrote the rest only
//!    once the peer's ACK came (it waited for its send queue to drain), and
//!    [`nodelay_reading`] says so.

use std::any::Any;
use std::time::Duration;

use super::{
    delayed_ack_stalls, of, rel_ms, At, Detector, FindingHead, FlowMarks, FlowView, Groups, Held,
    HopBlame, NagleRelease, Passed, PerGroup, ShardMap, Timer,
};
use crate::flow::Direction;
use crate::report::{
    Claim, Evidence, Finding, FindingKind, FlowRef, ReleasedBy, Severity, TimelineEntry,
};
use crate::stats::Histogram;
use crate::turns::{Turn, TurnBrief};
use crate::units::fmt_duration;

pub const MIN_STALLS: u64 = 1;
pub const CRITICAL_SHARE: f64 = 0.10;
pub const CRITICAL_LOST: Duration = Duration::from_millis(100);

#[derive(Default)]
struct State {
    turns: u64,
    stalled_turns: u64,
    stalls: u64,
    stall_us: Histogram,
    held_us: Histogram,
    lost: Duration,
    timers: [u64; 4],
    flows: u64,
    example: Option<Example>,
}

#[derive(Clone)]
struct Example {
    /// Where it was told ([`At`]): the example kept is the first in the capture.
    at: At,
    flow: FlowRef,
    turn: Turn,
    release: NagleRelease,
    /// The other side's turn just before (the request, for a stalled response).
    before: Option<TurnBrief>,
    claim: Claim,
}

#[derive(Default)]
pub struct NagleDelayedAck {
    state: PerGroup<State>,
    marks: FlowMarks,
}

impl Detector for NagleDelayedAck {
    fn wants_turns(&self) -> bool {
        true
    }

    fn on_turn(&mut self, flow: &FlowView, turn: &Turn) {
        let st = self.state.get(flow.group, turn.dir);
        st.turns += 1;
        let mut stalled = false;
        for r in delayed_ack_stalls(flow.flow, turn) {
            stalled = true;
            st.stalls += 1;
            st.stall_us.record_duration(r.stall());
            st.held_us.record_duration(r.ack_held);
            st.lost += r.stall();
            st.timers[r.timer as usize] += 1;
            if super::first_at(&st.example, flow.at, |e| e.at) {
                st.example = Some(Example {
                    at: flow.at,
                    flow: flow.flow_ref(),
                    turn: turn.clone(),
                    release: r,
                    before: flow
                        .answers
                        .map(Turn::brief)
                        .filter(|_| turn.dir == Direction::ServerToClient),
                    claim: r.claim(flow.flow, turn.dir, ReleasedBy::DelayedAck),
                });
            }
        }
        if stalled {
            st.stalled_turns += 1;
            self.marks.count(flow.flow.id, turn.dir, &mut st.flows);
        }
    }

    fn on_flow_end(&mut self, flow: &FlowView) {
        self.marks.forget(flow.flow.id);
    }

    super::hands_over_its_state!();

    fn absorb(&mut self, state: Box<dyn Any + Send>, map: &ShardMap) {
        let other: PerGroup<State> = super::handed(state);
        self.state.absorb(other, map, |st, o| {
            st.turns += o.turns;
            st.stalled_turns += o.stalled_turns;
            st.stalls += o.stalls;
            st.stall_us.merge(&o.stall_us);
            st.held_us.merge(&o.held_us);
            st.lost += o.lost;
            for (t, n) in st.timers.iter_mut().zip(o.timers) {
                *t += n;
            }
            st.flows += o.flows;
            let theirs = o.example.map(|e| Example {
                flow: map.flow_ref(e.flow),
                ..e
            });
            super::earlier(&mut st.example, theirs, |e| e.at);
        });
    }

    fn finish(&mut self, groups: &Groups) -> Vec<Finding> {
        let mut out = Vec::new();
        for (group, dir, st) in self.state.drain() {
            if st.stalls < MIN_STALLS {
                continue;
            }
            let Some(example) = st.example.clone() else {
                continue;
            };
            out.push(finding(group, dir, &st, example, groups));
        }
        super::settle(out)
    }
}

fn finding(
    group: usize,
    dir: Direction,
    st: &State,
    example: Example,
    groups: &Groups,
) -> (Finding, Option<Passed>) {
    let Example {
        flow: example_flow,
        turn,
        release,
        before,
        claim,
        at: _,
    } = example;
    let ex = &release;
    let share = st.stalled_turns as f64 / st.turns.max(1) as f64;
    let severity = if share >= CRITICAL_SHARE && st.lost >= CRITICAL_LOST {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let stall = st.stall_us.distribution(1e-3);
    let held = st.held_us.distribution(1e-3);
    let timer = dominant_timer(&st.timers);
    let median = fmt_duration(Duration::from_micros(st.stall_us.quantile(0.5) as u64));
    let (what, whose, sender, receiver) = super::message_words(dir);
    let blame = super::hop_blame(
        groups,
        group,
        dir,
        Held {
            typical: Duration::from_micros(st.stall_us.quantile(0.5) as u64),
            share,
        },
    );
    let passed_on = matches!(blame, Some(HopBlame::Upstream(_)));
    let lost = fmt_duration(st.lost);
    let stalled = format!(
        "{} {} stalled ({median} median)",
        st.stalled_turns,
        if st.stalled_turns == 1 { whose } else { what },
    );
    let verdict = match &blame {
        Some(HopBlame::Upstream(p)) => format!(
            "{stalled} on their way through {}, {}: the pieces already left {} with the stall \
             in them, so the hop passes it on and does not cause it; {lost} lost.",
            p.subject, p.promptly, p.upstream
        ),
        _ => {
            let writer = match &blame {
                Some(HopBlame::Hop { cause, .. }) => cause.clone(),
                _ => format!("the {sender} writes"),
            };
            format!(
                "{stalled}: {writer} each {whose} in pieces and Nagle's algorithm holds the rest \
                 until the {receiver}'s delayed ACK ({}); {lost} lost.",
                short_timer(timer),
            )
        }
    };
    let mut ev = Evidence::default();
    ev.facts.push(format!(
        "stalled {what}: {}",
        of(st.stalled_turns, st.turns)
    ));
    ev.facts.push(format!(
        "stall length: median {:.1} ms, max {:.1} ms; the {receiver} held its ACK {:.1} ms \
         (median) — {}",
        stall.p50,
        stall.max,
        held.p50,
        timer.label()
    ));
    ev.facts.push(format!(
        "time lost: {} over {} stall{}",
        fmt_duration(st.lost),
        st.stalls,
        if st.stalls == 1 { "" } else { "s" }
    ));
    ev.facts.push(format!(
        "each stall: a small {sender} segment, silence, a pure ACK from the {receiver} \
         acknowledging all of it, then the rest of the {whose} as soon as that ACK reached the \
         {sender} (at once at the {sender}'s end, one round trip later at the {receiver}'s)"
    ));
    match &blame {
        Some(HopBlame::Hop { text, .. }) => ev.facts.push(text.fact.clone()),
        Some(HopBlame::Upstream(p)) => ev.facts.push(p.fact.clone()),
        None => {}
    }
    ev.counts.insert("stalled_turns".into(), st.stalled_turns);
    ev.counts.insert("turns".into(), st.turns);
    ev.counts.insert("stalls".into(), st.stalls);
    for t in [Timer::Linux40, Timer::Bsd100, Timer::Max200, Timer::Other] {
        ev.counts.insert(t.key().into(), st.timers[t as usize]);
    }
    ev.values
        .insert("stalled_share".into(), crate::stats::round3(share));
    ev.values.insert("median_stall_ms".into(), stall.p50);
    ev.distributions.insert("stall_ms".into(), stall);
    ev.distributions.insert("ack_held_ms".into(), held);
    let p = ex.pause;
    let ack = ex.ack.pkt;
    let armed = ex.ack.acked.oldest;
    ev.frames = vec![p.before.pkt.frame, ack.frame, p.after.pkt.frame];
    ev.claims.push(claim);
    if armed.frame != p.before.pkt.frame {
        ev.frames.insert(0, armed.frame);
    }
    let origin = before.map_or(turn.first.ts, |b| b.first.ts);
    if let Some(b) = before {
        ev.timeline.push(TimelineEntry {
            frame: b.first.frame,
            t_ms: 0.0,
            direction: dir.reverse(),
            what: format!("request: {} bytes in {} segment(s)", b.bytes, b.segments),
            payload_bytes: (b.segments == 1).then_some(b.bytes),
            note: if b.last.frame != b.first.frame {
                format!("through frame {}", b.last.frame)
            } else {
                String::new()
            },
        });
    }
    if turn.first.frame != p.before.pkt.frame && turn.first.frame != armed.frame {
        ev.timeline.push(TimelineEntry {
            frame: turn.first.frame,
            t_ms: rel_ms(turn.first.ts, origin),
            direction: dir,
            what: format!("first {whose} segment ({} bytes)", turn.sizes[0]),
            payload_bytes: Some(u64::from(turn.sizes[0])),
            note: String::new(),
        });
    }
    if armed.frame != p.before.pkt.frame {
        ev.timeline.push(TimelineEntry {
            frame: armed.frame,
            t_ms: rel_ms(armed.ts, origin),
            direction: dir,
            what: format!("{whose} data"),
            payload_bytes: None,
            note: format!("oldest segment the {receiver} had not acknowledged yet"),
        });
    }
    ev.timeline.push(TimelineEntry {
        frame: p.before.pkt.frame,
        t_ms: rel_ms(p.before.pkt.ts, origin),
        direction: dir,
        what: format!("{} bytes", p.before.len),
        payload_bytes: Some(u64::from(p.before.len)),
        note: match passed_on {
            false => "small segment in flight; Nagle holds what the application writes next",
            true => "small segment in flight; the rest has not come through yet",
        }
        .into(),
    });
    ev.timeline.push(TimelineEntry {
        frame: ack.frame,
        t_ms: rel_ms(ack.ts, origin),
        direction: dir.reverse(),
        what: "pure ACK of everything sent".into(),
        payload_bytes: Some(0),
        note: format!(
            "delayed ACK: the {receiver} held it {} (its first ACK of that data)",
            fmt_duration(ex.ack_held)
        ),
    });
    ev.timeline.push(TimelineEntry {
        frame: p.after.pkt.frame,
        t_ms: rel_ms(p.after.pkt.ts, origin),
        direction: dir,
        what: format!("{} bytes", p.after.len),
        payload_bytes: Some(u64::from(p.after.len)),
        note: format!("released {} after the ACK", fmt_duration(ex.release_after)),
    });
    let fix = match dir {
        // The capture holds the hop's legs too: the hop is judged there, not guessed at here.
        Direction::ServerToClient if groups[group].behind_hop() => {
            "Write each response with one call: build it in a buffer (or use writev / a \
             buffered writer) and send it once. Where responses are already whole when \
             written, set TCP_NODELAY on the server's sockets. TCP_QUICKACK on the client is \
             not a fix."
        }
        Direction::ServerToClient => {
            "Write each response with one call: build it in a buffer (or use writev / a \
             buffered writer) and send it once. Where responses are already whole when \
             written, set TCP_NODELAY on the server's sockets. If the server already does \
             both, a hop between the two ends (proxy, tunnel, sidecar) re-emits the pieces \
             with Nagle on: set TCP_NODELAY on that hop. TCP_QUICKACK on the client is not a \
             fix."
        }
        Direction::ClientToServer => {
            "Send each request with one call: build header and body in one buffer (or use \
             writev, or TCP_CORK / MSG_MORE around the pieces), then set TCP_NODELAY on the \
             client's socket so whole requests leave at once. If the client already does \
             both, a hop between the ends re-emits the pieces with Nagle on: set TCP_NODELAY \
             on that hop. TCP_QUICKACK on the server is not a fix."
        }
    };
    let fix: String = match &blame {
        Some(HopBlame::Hop { text, .. }) => text.fix.clone(),
        Some(HopBlame::Upstream(p)) => format!(
            "Fix {}, not the hop (it forwards what it reads at once): have it write each \
             {whose} with one call (a buffer or writev), then set TCP_NODELAY on its \
             sockets; where it already has TCP_NODELAY, stop waiting for the send queue to \
             drain between pieces.",
            p.upstream
        ),
        None => fix.to_string(),
    };
    let passed = HopBlame::passed(blame);
    let f = FindingHead {
        kind: FindingKind::NagleDelayedAck,
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
/// the sender wrote the rest only once the peer's ACK came.
pub fn reword_for_nodelay(f: &mut Finding) {
    let (what, whose, sender, receiver) = super::message_words(f.direction);
    let n = f.evidence.counts.get("stalled_turns").copied().unwrap_or(0);
    let median = f
        .evidence
        .values
        .get("median_stall_ms")
        .copied()
        .unwrap_or(0.0);
    let verdict = format!(
        "{n} {} stalled ({median:.1} ms median): the {sender} wrote each {whose} in pieces and \
         waited for the {receiver}'s ACK of a piece before writing the rest — its sockets have \
         TCP_NODELAY on, so Nagle held nothing; the {receiver}'s delayed ACK set the pace; \
         {} lost.",
        if n == 1 { whose } else { what },
        fmt_duration(Duration::from_secs_f64(f.time_lost_ms.max(0.0) / 1e3)),
    );
    let fix = format!(
        "{} TCP_QUICKACK on the {receiver} only hides it.",
        super::nodelay_wait_fix(whose)
    );
    f.verdict = verdict;
    f.fix = fix;
    for t in &mut f.evidence.timeline {
        if t.note.contains("Nagle holds") {
            t.note = format!(
                "small segment in flight; the {sender} writes the rest once it is acknowledged"
            );
        }
    }
}

fn dominant_timer(counts: &[u64; 4]) -> Timer {
    [Timer::Linux40, Timer::Bsd100, Timer::Max200, Timer::Other]
        .into_iter()
        .max_by_key(|t| (counts[*t as usize], std::cmp::Reverse(*t as usize)))
        .unwrap_or(Timer::Other)
}

fn short_timer(t: Timer) -> &'static str {
    match t {
        Timer::Linux40 => "≈40 ms, Linux",
        Timer::Bsd100 => "≈100 ms, BSD/macOS",
        Timer::Max200 => "≈200 ms",
        Timer::Other => "timer varies",
    }
}
