//! `fragmented_writes`: messages leave as many small segments, one per application write.
//!
//! Rule (PHYSICS §4 and §9), per server and direction:
//! 0. A turn whose segments are no more than its bytes need in full segments
//!    ([`crate::flow::Flow::full_segment`], the sender's effective MSS) is never fragmented,
//!    whatever happened inside it: whole writes would have made as many packets.
//! 1. A turn is *fragmented* when it has at least [`MIN_SEGMENTS`] segments, at least twice as
//!    many as its bytes need at the MSS, and its median segment is small (≤ [`SMALL_SEGMENT`]
//!    bytes, and ≤ half the MSS).
//! 2. A turn is also fragmented when Nagle held part of it until the peer's ACK (the shape of
//!    PHYSICS §3: once Nagle holds, everything written meanwhile leaves as one segment, so a
//!    per-line response is often only two segments on the wire).
//! 3. Report when at least [`MIN_TURNS`] turns and [`MIN_SHARE`] of the turns in that
//!    direction are fragmented. Warning when Nagle held some of them, or when at least
//!    [`WARN_SHARE`] of the turns are fragmented (a stall waiting to happen behind any Nagle-on
//!    hop); info otherwise.

use std::time::Duration;

use super::{nagle_release, of, Detector, FindingHead, FlowMarks, FlowView, Groups, PerGroup};
use crate::flow::Direction;
use crate::report::{Evidence, Finding, FindingKind, FlowRef, Severity, TimelineEntry};
use crate::stats::SizeCounter;
use crate::turns::Turn;

pub const MIN_SEGMENTS: u32 = 3;
pub const SMALL_SEGMENT: u32 = 512;
pub const MIN_TURNS: u64 = 3;
pub const MIN_SHARE: f64 = 0.20;
/// From this share of fragmented turns, the finding is a warning even without a Nagle hold.
pub const WARN_SHARE: f64 = 0.5;

#[derive(Default)]
struct State {
    turns: u64,
    fragmented: u64,
    held_by_nagle: u64,
    extra_segments: u64,
    segments_per_turn: SizeCounter,
    sizes: SizeCounter,
    flows: u64,
    example: Option<(FlowRef, Turn)>,
}

#[derive(Default)]
pub struct FragmentedWrites {
    state: PerGroup<State>,
    marks: FlowMarks,
}

/// Whether a turn was written in pieces, and whether Nagle held some of them.
fn classify(flow: &FlowView, turn: &Turn) -> Option<bool> {
    let mss = u64::from(flow.flow.full_segment(turn.dir).max(1));
    if u64::from(turn.segments) <= turn.bytes.div_ceil(mss) {
        return None;
    }
    let held = turn
        .pauses
        .iter()
        .any(|p| nagle_release(flow.flow, turn.dir, p).is_some());
    if held {
        return Some(true);
    }
    if turn.segments < MIN_SEGMENTS {
        return None;
    }
    let needed = turn.bytes.div_ceil(mss).max(1);
    let mut sizes = turn.sizes.to_vec();
    sizes.sort_unstable();
    let median = sizes[sizes.len() / 2];
    let small = median <= SMALL_SEGMENT && u64::from(median) * 2 <= mss;
    (u64::from(turn.segments) >= 2 * needed && small).then_some(false)
}

impl Detector for FragmentedWrites {
    fn wants_turns(&self) -> bool {
        true
    }

    fn on_turn(&mut self, flow: &FlowView, turn: &Turn) {
        let st = self.state.get(flow.group, turn.dir);
        st.turns += 1;
        let Some(held) = classify(flow, turn) else {
            return;
        };
        st.fragmented += 1;
        st.held_by_nagle += u64::from(held);
        let mss = u64::from(flow.flow.full_segment(turn.dir).max(1));
        st.extra_segments += u64::from(turn.segments).saturating_sub(turn.bytes.div_ceil(mss));
        st.segments_per_turn.record(turn.segments);
        for &s in turn.sizes.iter() {
            st.sizes.record(s);
        }
        self.marks.count(flow.flow.id, turn.dir, &mut st.flows);
        // Prefer an example that shows the pieces themselves (no Nagle hold).
        let better = match &st.example {
            None => true,
            Some((_, t)) => !t.pauses.is_empty() && turn.pauses.is_empty(),
        };
        if better {
            st.example = Some((flow.flow_ref(), turn.clone()));
        }
    }

    fn on_flow_end(&mut self, flow: &FlowView) {
        self.marks.forget(flow.flow.id);
    }

    fn finish(&mut self, groups: &Groups) -> Vec<Finding> {
        let mut out = Vec::new();
        for (group, dir, st) in self.state.drain() {
            let share = st.fragmented as f64 / st.turns.max(1) as f64;
            if st.fragmented < MIN_TURNS || share < MIN_SHARE {
                continue;
            }
            let Some((flow_ref, turn)) = st.example.clone() else {
                continue;
            };
            out.push(finding(group, dir, &st, share, flow_ref, &turn, groups));
        }
        out
    }
}

fn finding(
    group: usize,
    dir: Direction,
    st: &State,
    share: f64,
    example_flow: FlowRef,
    turn: &Turn,
    groups: &Groups,
) -> Finding {
    let severity = if st.held_by_nagle > 0 || share >= WARN_SHARE {
        Severity::Warning
    } else {
        Severity::Info
    };
    let (what, sender) = match dir {
        Direction::ServerToClient => ("responses", "server"),
        Direction::ClientToServer => ("requests", "client"),
    };
    let seg_dist = st.segments_per_turn.distribution();
    let size_dist = st.sizes.distribution();
    let hop = super::hop_text(groups, group, dir);
    let writer = match &hop {
        Some(h) => format!("The {} re-emits", h.subject.trim_start_matches("the ")),
        None => format!("The {sender} writes"),
    };
    let mut verdict = format!(
        "{writer} {what} in pieces: {} {what} left as several small segments \
         (median {} segments each, median segment {} bytes) — one syscall and one packet per piece",
        st.fragmented, seg_dist.p50, size_dist.p50
    );

    if st.held_by_nagle > 0 {
        verdict.push_str(&format!(
            "; Nagle held the pieces of {} of them (see nagle_delayed_ack).",
            st.held_by_nagle
        ));
    } else {
        verdict.push_str(", a stall waiting to happen behind any Nagle-on hop.");
    }
    let mut ev = Evidence::default();
    ev.facts.push(format!(
        "fragmented {what}: {}",
        of(st.fragmented, st.turns)
    ));
    let mut per_turn = format!(
        "segments per fragmented {}: median {}, max {}",
        &what[..what.len() - 1],
        seg_dist.p50,
        seg_dist.max
    );
    if st.extra_segments > 0 {
        per_turn.push_str(&format!(
            "; {} segments more than the bytes needed",
            st.extra_segments
        ));
    }
    ev.facts.push(per_turn);
    if st.held_by_nagle > 0 {
        ev.facts.push(format!(
            "{} {what} show the Nagle shape instead: a small first piece, a delayed ACK, then \
             everything written meanwhile as one segment",
            st.held_by_nagle
        ));
    }
    ev.facts.push(format!(
        "payload sizes (count × bytes): {}",
        st.sizes
            .top(8)
            .iter()
            .map(|b| format!("{}×{}", b.count, b.value))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if let Some(h) = &hop {
        ev.facts.push(h.fact.clone());
    }
    ev.counts.insert("fragmented_turns".into(), st.fragmented);
    ev.counts.insert("turns".into(), st.turns);
    ev.counts.insert("held_by_nagle".into(), st.held_by_nagle);
    ev.counts.insert("extra_segments".into(), st.extra_segments);
    ev.values
        .insert("fragmented_share".into(), crate::stats::round3(share));
    ev.distributions
        .insert("segments_per_turn".into(), seg_dist);
    ev.distributions.insert("segment_bytes".into(), size_dist);
    ev.histogram = st.sizes.top(12);
    ev.histogram_of = "payload bytes per segment in fragmented turns".into();
    ev.frames = vec![turn.first.frame, turn.last.frame];
    ev.timeline.push(TimelineEntry {
        frame: turn.first.frame,
        t_ms: 0.0,
        direction: dir,
        payload_bytes: None,
        what: format!(
            "{} segments, {} bytes: {}",
            turn.segments,
            turn.bytes,
            turn.sizes
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(" + ")
        ),
        note: format!("through frame {}", turn.last.frame),
    });
    let fix = match dir {
        Direction::ServerToClient => {
            "Build each response in memory and write it with one call (a buffered writer, \
             writev, or a line-buffered channel flushed once per response); with responses \
             whole, TCP_NODELAY is then safe and fast."
        }
        Direction::ClientToServer => {
            "Build each request in memory and write it with one call (a buffered writer or \
             writev); with requests whole, TCP_NODELAY is then safe and fast."
        }
    };
    let fix = hop.as_ref().map_or(fix, |h| h.fix.as_str());
    FindingHead {
        kind: FindingKind::FragmentedWrites,
        severity,
        group,
        direction: dir,
        flows_affected: st.flows,
        example_flow,
        time_lost: Duration::ZERO,
    }
    .finish(groups, verdict, ev, fix)
}
