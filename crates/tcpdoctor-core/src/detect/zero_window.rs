//! `zero_window`: the receiver stopped reading; its buffer filled and the sender waited.
//!
//! Rule (PHYSICS §8), per server and direction of the stalled data:
//! 1. An *episode* starts when a side advertises a window of zero (outside SYN/RST) and ends
//!    when it advertises a non-zero window again (or the flow ends).
//! 2. Episodes shorter than [`MIN_EPISODE`] are normal flow control in a fast bulk transfer
//!    and are only counted as "brief".
//! 3. Report when the episodes of at least [`MIN_EPISODE`] add up to [`MIN_TOTAL`] or more.
//!    Critical from [`CRITICAL_TOTAL`].

use std::any::Any;
use std::time::Duration;

use super::{
    of, rel_ms, At, Detector, FindingHead, FlowMarks, FlowView, Groups, PerGroup, ShardMap,
};
use crate::flow::{Direction, PacketRef, SegmentEvent};
use crate::fxhash::FxHashMap;
use crate::report::{Evidence, Finding, FindingKind, FlowRef, Severity, TimelineEntry};
use crate::stats::Histogram;
use crate::units::fmt_duration;

pub const MIN_EPISODE: Duration = Duration::from_millis(5);
pub const MIN_TOTAL: Duration = Duration::from_millis(20);
pub const CRITICAL_TOTAL: Duration = Duration::from_secs(1);

#[derive(Default)]
struct FlowState {
    /// Open episode per advertising side (indexed by the direction the *advertiser* sends in).
    open: [Option<PacketRef>; 2],
}

#[derive(Default)]
struct State {
    episodes: u64,
    brief: u64,
    stalled: Duration,
    episode_us: Histogram,
    flows: u64,
    /// The longest episode; of equally long ones, the first in the capture ([`At`]).
    example: Option<Example>,
}

type Example = (FlowRef, PacketRef, PacketRef, At);

/// Whether episode `a` is the example rather than `b`: longer, or as long and earlier.
fn rather(a: &Example, b: &Example) -> bool {
    let len = |e: &Example| e.2.ts.since(e.1.ts);
    (len(a), std::cmp::Reverse(a.3)) > (len(b), std::cmp::Reverse(b.3))
}

#[derive(Default)]
pub struct ZeroWindow {
    /// The flows with an episode open, by flow id: rare, so a map, not a slot per open flow.
    open: FxHashMap<u64, FlowState>,
    state: PerGroup<State>,
    marks: FlowMarks,
}

impl ZeroWindow {
    fn close(&mut self, flow: &FlowView, advertiser: Direction, start: PacketRef, end: PacketRef) {
        let stalled_dir = advertiser.reverse();
        let st = self.state.get(flow.group, stalled_dir);
        let d = end.ts.since(start.ts);
        if d < MIN_EPISODE {
            st.brief += 1;
            return;
        }
        st.episodes += 1;
        st.stalled += d;
        st.episode_us.record_duration(d);
        let this = (flow.flow_ref(), start, end, flow.at);
        if st.example.as_ref().is_none_or(|e| rather(&this, e)) {
            st.example = Some(this);
        }
        self.marks.count(flow.flow.id, stalled_dir, &mut st.flows);
    }
}

impl Detector for ZeroWindow {
    fn wants_segments(&self) -> bool {
        true
    }

    fn on_segment(&mut self, flow: &FlowView, ev: &SegmentEvent) {
        if ev.syn || ev.rst || !ev.has_ack {
            return;
        }
        let i = ev.dir.index();
        if ev.window == 0 {
            let fs = self.open.entry(flow.flow.id).or_default();
            fs.open[i].get_or_insert(ev.pkt);
        } else if self.open.is_empty() {
            // No episode open anywhere: the common case, without a lookup.
        } else if let Some(fs) = self.open.get_mut(&flow.flow.id) {
            if let Some(start) = fs.open[i].take() {
                if fs.open == [None, None] {
                    self.open.remove(&flow.flow.id);
                }
                self.close(flow, ev.dir, start, ev.pkt);
            }
        }
    }

    fn on_flow_end(&mut self, flow: &FlowView) {
        if let Some(fs) = self.open.remove(&flow.flow.id) {
            for dir in [Direction::ClientToServer, Direction::ServerToClient] {
                if let Some(start) = fs.open[dir.index()] {
                    let end = PacketRef {
                        frame: start.frame,
                        ts: flow.flow.last_ts,
                    };
                    self.close(flow, dir, start, end);
                }
            }
        }
        self.marks.forget(flow.flow.id);
    }

    super::hands_over_its_state!();

    fn absorb(&mut self, state: Box<dyn Any + Send>, map: &ShardMap) {
        let other: PerGroup<State> = super::handed(state);
        self.state.absorb(other, map, |st, o| {
            st.episodes += o.episodes;
            st.brief += o.brief;
            st.stalled += o.stalled;
            st.episode_us.merge(&o.episode_us);
            st.flows += o.flows;
            if let Some((f, s, e, at)) = o.example {
                let theirs = (map.flow_ref(f), s, e, at);
                if st.example.as_ref().is_none_or(|e| rather(&theirs, e)) {
                    st.example = Some(theirs);
                }
            }
        });
    }

    fn finish(&mut self, groups: &Groups) -> Vec<Finding> {
        let mut out = Vec::new();
        for (group, dir, st) in self.state.drain() {
            if st.stalled < MIN_TOTAL {
                continue;
            }
            let Some(example) = st.example.clone() else {
                continue;
            };
            out.push(finding(group, dir, &st, example, groups));
        }
        out
    }
}

fn finding(
    group: usize,
    dir: Direction,
    st: &State,
    (example_flow, start, end, _): Example,
    groups: &Groups,
) -> Finding {
    let reader = dir.receiver();
    let writer = dir.sender();
    let dist = st.episode_us.distribution(1e-3);
    let severity = if st.stalled >= CRITICAL_TOTAL {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let verdict = format!(
        "The {reader} stops reading: its receive window hit zero {} times and the {writer}'s \
         data waited {} in total ({:.1} ms median each).",
        st.episodes,
        fmt_duration(st.stalled),
        dist.p50
    );
    let mut ev = Evidence::default();
    ev.facts.push(format!(
        "zero-window episodes ≥ {}: {}; brief ones (normal flow control): {}",
        fmt_duration(MIN_EPISODE),
        st.episodes,
        st.brief
    ));
    ev.facts.push(format!(
        "episode length: median {:.1} ms, max {:.1} ms; {} stalled in total",
        dist.p50,
        dist.max,
        fmt_duration(st.stalled)
    ));
    ev.facts.push(format!(
        "flows affected: {}",
        of(st.flows, groups[group].flows)
    ));
    ev.counts.insert("episodes".into(), st.episodes);
    ev.counts.insert("brief_episodes".into(), st.brief);
    ev.values.insert(
        "stalled_ms".into(),
        crate::stats::round3(crate::units::ms(st.stalled)),
    );
    ev.distributions.insert("episode_ms".into(), dist);
    ev.frames = if end.frame != start.frame {
        vec![start.frame, end.frame]
    } else {
        vec![start.frame]
    };
    ev.timeline.push(TimelineEntry {
        frame: start.frame,
        t_ms: 0.0,
        direction: dir.reverse(),
        payload_bytes: None,
        what: "window 0".into(),
        note: format!("the {reader}'s buffer is full; the {writer} must stop"),
    });
    if end.frame != start.frame {
        ev.timeline.push(TimelineEntry {
            frame: end.frame,
            t_ms: rel_ms(end.ts, start.ts),
            direction: dir.reverse(),
            payload_bytes: None,
            what: "window opens again".into(),
            note: format!("the {reader} read; the {writer} may send"),
        });
    }
    let fix = format!(
        "The {reader}'s application is not reading as fast as the {writer} sends: read the \
         socket promptly (no slow work between reads; a reader thread or task that drains into \
         an application queue), read in larger chunks, and raise SO_RCVBUF only if the bursts \
         are short. If the {reader} is deliberately slow, this is back-pressure working as \
         designed."
    );
    FindingHead {
        kind: FindingKind::ZeroWindow,
        severity,
        group,
        direction: dir,
        flows_affected: st.flows,
        example_flow,
        time_lost: st.stalled,
    }
    .finish(groups, verdict, ev, &fix)
}
