//! `fragmented_writes`: messages leave as many small segments, one per application write.
//!
//! Rule (PHYSICS §4 and §9), per server and direction:
//! 1. A turn's *extra segments* are its segments less the full segments its bytes need
//!    (`segments − ⌈bytes / full segment⌉`, a full segment being the sender's effective MSS,
//!    [`crate::flow::Flow::full_segment`]). A turn with no extra segment is never fragmented,
//!    whatever happened inside it: whole writes would have made as many packets.
//! 2. A turn is *fragmented* when it has at least [`MIN_SEGMENTS`] segments, at least twice as
//!    many as its bytes need, and its median segment is small (≤ [`SMALL_SEGMENT`] bytes, and
//!    ≤ half a full segment).
//! 3. A turn is also fragmented when Nagle held part of it until the peer's delayed ACK
//!    ([`delayed_ack_stalls`], the shape of PHYSICS §3: once Nagle holds, everything written
//!    meanwhile leaves as one segment, so a per-line response is often only two segments on
//!    the wire). The time those holds lasted is the time the pattern cost.
//! 4. Report when at least [`MIN_TURNS`] turns and [`MIN_SHARE`] of the turns in that
//!    direction are fragmented.
//! 5. Severity follows cost: a warning only when the pieces cost measured time — Nagle held
//!    some of the turns (rule 3) or the pieces spent the congestion window (rule 9); the time
//!    lost is both together. Otherwise info, however many turns are fragmented: the pieces
//!    cost no measured time, and the finding says why they still matter (a syscall and a
//!    packet per piece, and a stall behind any hop with Nagle on).
//! 6. On a TLS port ([`TLS_PORTS`]; the core never sees payload bytes, so the port is the only
//!    clue) the pieces are most likely TLS records, one per write, which is common; the fix is
//!    to buffer the records of one flight and write them together, whether or not Nagle held
//!    them.
//! 7. On the client-facing leg of a hop whose both legs the capture holds, pieces that Nagle
//!    held are blamed on the element that held them ([`super::hop_blame`], as in
//!    `nagle_delayed_ack`); "Nagle held the pieces" is said only of a leg where something did.
//!    A sender whose sockets are known to have TCP_NODELAY on waited for the ACK itself
//!    ([`reword_for_nodelay`]).
//! 8. The capture cannot tell one reply in eight pieces from eight pipelined replies in eight
//!    segments (the core never reads payload). Where the client is known to pipeline up to
//!    *P* requests (`run` knows its driver), a turn holds up to *P* replies, and turns of at
//!    most *P* segments are described as whole replies, one per write
//!    ([`reword_for_pipelining`]).
//! 9. The congestion window counts packets (PHYSICS §9): a pause after a flight of at least
//!    [`window::MIN_FLIGHT`] small segments, released by the flight's first ACK one round
//!    trip later, is a *window wait* ([`window`]: written whole, the rest would have left
//!    inside the window; only for a turn whose bytes fit in the first flight's packets). A turn with one is fragmented; the pauses are time lost, stated as
//!    a `window_wait` claim the evidence audit re-reads. Pauses rule 3 counts are not counted
//!    again.
//! 10. A turn that rule 2 alone would call fragmented is not when the other side's data
//!     segment that ended it carries an ACK number strictly inside the turn's bytes
//!     ([`crate::turns::Turn::answered_in_part`]): the peer answered a first part before the
//!     rest had arrived, so the turn held at least two messages, not one in pieces — the proof
//!     `unbatched_messages` names such a burst by (its rule 6), so the two never claim the
//!     opposite of the same frames.
//! 11. Where `run`'s driver recorded where its messages ended ([`crate::message_ends`], the
//!     script's framing), a turn whose bytes begin and end on message ends and hold at least
//!     two whole messages, in no more segments than messages, is not fragmented whatever
//!     rules 2, 3 and 9 say: it is pipelined whole messages, one per segment — what
//!     `unbatched_messages` names — never one message in pieces.
//! 12. The example is the first fragmented turn in the capture (the smallest position,
//!     [`At`]) with a window wait (rule 9), else the first the Nagle rule held nothing of
//!     (it shows the pieces themselves), else the first: the same whatever division of the
//!     flows among threads.

use std::any::Any;
use std::time::Duration;

mod window;

use window::{window_waits, WindowWait};

use super::{
    delayed_ack_stalls, of, At, Detector, FindingHead, FlowMarks, FlowView, Groups, Held, HopBlame,
    Passed, PerGroup, ShardMap,
};
use crate::flow::Direction;
use crate::message_ends::FlowFraming;
use crate::report::{Evidence, Finding, FindingKind, FlowRef, Severity, TimelineEntry};
use crate::stats::SizeCounter;
use crate::turns::Turn;
use crate::units::fmt_duration;

pub const MIN_SEGMENTS: u32 = 3;
pub const SMALL_SEGMENT: u32 = 512;
pub const MIN_TURNS: u64 = 3;
pub const MIN_SHARE: f64 = 0.20;
/// Server ports where the payload is (almost always) TLS: HTTPS, DNS over TLS, IMAPS, POP3S,
/// SMTPS, and the usual alternative HTTPS port.
pub const TLS_PORTS: [u16; 6] = [443, 853, 993, 995, 465, 8443];

#[derive(Default)]
struct State {
    turns: u64,
    fragmented: u64,
    held_by_nagle: u64,
    /// How long Nagle held pieces of the fragmented turns, in all.
    held: Duration,
    /// Rule 7: turns whose pieces spent the congestion window, the waits, and their time.
    window_turns: u64,
    window_waits: u64,
    window: Duration,
    extra_segments: u64,
    segments_per_turn: SizeCounter,
    sizes: SizeCounter,
    flows: u64,
    example: Option<Example>,
}

/// The turn a finding shows (rule 12).
#[derive(Clone)]
struct Example {
    /// Its kind (0: a window wait, 1: nothing held by Nagle, 2: held) and where it was told
    /// ([`At`]): the smallest is kept.
    rank: (u8, At),
    flow: FlowRef,
    turn: Turn,
    /// A full segment on its flow and direction (the sender's effective MSS).
    full: u32,
    /// Its first window wait (rule 9), when it has one.
    wait: Option<WindowWait>,
}

#[derive(Default)]
pub struct FragmentedWrites {
    state: PerGroup<State>,
    marks: FlowMarks,
    framing: FlowFraming,
}

impl FragmentedWrites {
    /// Counts a turn sent in pieces (kept out of `on_turn`: most turns are whole, and they
    /// need not pay for this one's stack frame).
    #[inline(never)]
    fn record(&mut self, flow: &FlowView, turn: &Turn, frag: Fragmented) {
        let st = self.state.get(flow.group, turn.dir);
        st.fragmented += 1;
        if frag.held > Duration::ZERO {
            st.held_by_nagle += 1;
            st.held += frag.held;
        }
        st.extra_segments += frag.extra;
        st.segments_per_turn.record(turn.segments);
        for &s in turn.sizes.iter() {
            st.sizes.record(s);
        }
        self.marks.count(flow.flow.id, turn.dir, &mut st.flows);
        if !frag.waits.is_empty() {
            st.window_turns += 1;
            st.window_waits += frag.waits.len() as u64;
            st.window += frag.window;
        }
        // Rule 12: a window wait shown when there is one (its frames must be on the example
        // flow), else the pieces themselves (no Nagle hold), the first of its kind.
        let kind = if !frag.waits.is_empty() {
            0
        } else if turn.pauses.is_empty() {
            1
        } else {
            2
        };
        let rank = (kind, flow.at);
        if st.example.as_ref().is_none_or(|e| rank < e.rank) {
            st.example = Some(Example {
                rank,
                flow: flow.flow_ref(),
                turn: turn.clone(),
                full: flow.flow.full_segment(turn.dir),
                wait: frag.waits.into_iter().next(),
            });
        }
    }

    /// The detector told where `run`'s driver knows its messages ended (rule 11).
    pub fn with_ends(ends: Option<std::sync::Arc<crate::message_ends::MessageEnds>>) -> Self {
        FragmentedWrites {
            framing: FlowFraming::new(ends),
            ..FragmentedWrites::default()
        }
    }

    /// Rule 11: the turn is whole messages, one segment each at most.
    fn whole_messages(&mut self, flow: &FlowView, turn: &Turn) -> bool {
        let f = flow.flow;
        let Some(ends) = self.framing.of(f.id, f.client, f.server) else {
            return false;
        };
        let half = f.half(turn.dir);
        let Some(isn) = half.isn.filter(|_| half.data_bytes <= u64::from(u32::MAX)) else {
            return false;
        };
        let start = u64::from(turn.seq_first.0.wrapping_sub(isn.0).wrapping_sub(1));
        let end = u64::from(turn.seq_end.0.wrapping_sub(isn.0).wrapping_sub(1));
        ends.whole_messages(turn.dir, start, end)
            .is_some_and(|k| k >= 2 && u64::from(turn.segments) <= k)
    }
}

/// A fragmented turn: its segments beyond what its bytes need, and how long Nagle held pieces
/// of it (zero when nothing was held).
struct Fragmented {
    extra: u64,
    held: Duration,
    /// Rule 7's waits in this turn, and their time.
    waits: Vec<WindowWait>,
    window: Duration,
}

/// Whether a turn was written in pieces (rules 1–3).
fn classify(flow: &FlowView, turn: &Turn) -> Option<Fragmented> {
    let full = u64::from(flow.flow.full_segment(turn.dir).max(1));
    // No segment more than ⌈bytes / full⌉ (most turns), told without a division:
    // segments ≤ ⌈b / f⌉ ⇔ (segments − 1) × f < b.
    if u64::from(turn.segments.saturating_sub(1)) * full < turn.bytes {
        return None;
    }
    let needed = turn.bytes.div_ceil(full);
    let extra = u64::from(turn.segments).saturating_sub(needed);
    if extra == 0 {
        return None;
    }
    let mut held = Duration::ZERO;
    let mut nagle = Vec::new();
    for r in delayed_ack_stalls(flow.flow, turn) {
        held += r.stall();
        nagle.push(r.pause.before.pkt.frame);
    }
    let waits: Vec<WindowWait> = window_waits(flow.flow, turn, &nagle).collect();
    let window = waits.iter().map(WindowWait::cost).sum();
    if held > Duration::ZERO || !waits.is_empty() {
        return Some(Fragmented {
            extra,
            held,
            waits,
            window,
        });
    }
    // Rule 10: the peer answered a first part before the rest arrived; not one message.
    if turn.segments < MIN_SEGMENTS || turn.answered_in_part() {
        return None;
    }
    let mut sizes = turn.sizes.to_vec();
    sizes.sort_unstable();
    let median = sizes[sizes.len() / 2];
    let small = median <= SMALL_SEGMENT && u64::from(median) * 2 <= full;
    (u64::from(turn.segments) >= 2 * needed.max(1) && small).then_some(Fragmented {
        extra,
        held: Duration::ZERO,
        waits,
        window,
    })
}

impl Detector for FragmentedWrites {
    fn wants_turns(&self) -> bool {
        true
    }

    fn on_turn(&mut self, flow: &FlowView, turn: &Turn) {
        let st = self.state.get(flow.group, turn.dir);
        st.turns += 1;
        let Some(frag) = classify(flow, turn) else {
            return;
        };
        if self.whole_messages(flow, turn) {
            return;
        }
        self.record(flow, turn, frag);
    }

    fn on_flow_end(&mut self, flow: &FlowView) {
        self.marks.forget(flow.flow.id);
    }

    super::hands_over_its_state!();

    fn absorb(&mut self, state: Box<dyn Any + Send>, map: &ShardMap) {
        let other: PerGroup<State> = super::handed(state);
        self.state.absorb(other, map, |st, o| {
            st.turns += o.turns;
            st.fragmented += o.fragmented;
            st.held_by_nagle += o.held_by_nagle;
            st.held += o.held;
            st.window_turns += o.window_turns;
            st.window_waits += o.window_waits;
            st.window += o.window;
            st.extra_segments += o.extra_segments;
            st.segments_per_turn.merge(&o.segments_per_turn);
            st.sizes.merge(&o.sizes);
            st.flows += o.flows;
            if let Some(e) = o.example {
                if st.example.as_ref().is_none_or(|k| e.rank < k.rank) {
                    st.example = Some(Example {
                        flow: map.flow_ref(e.flow),
                        ..e
                    });
                }
            }
        });
    }

    fn finish(&mut self, groups: &Groups) -> Vec<Finding> {
        let mut out = Vec::new();
        for (group, dir, st) in self.state.drain() {
            let share = st.fragmented as f64 / st.turns.max(1) as f64;
            if st.fragmented < MIN_TURNS || share < MIN_SHARE {
                continue;
            }
            let Some(example) = &st.example else {
                continue;
            };
            out.push(finding(group, dir, &st, share, example, groups));
        }
        super::settle(out)
    }
}

fn finding(
    group: usize,
    dir: Direction,
    st: &State,
    share: f64,
    example: &Example,
    groups: &Groups,
) -> (Finding, Option<Passed>) {
    let turn = &example.turn;
    // Rule 5: severity follows the time the pattern cost.
    let lost = st.held + st.window;
    let severity = if lost > Duration::ZERO {
        Severity::Warning
    } else {
        Severity::Info
    };
    let port = groups[group].server.port;
    let tls = TLS_PORTS.contains(&port);
    let (what, sender) = match dir {
        Direction::ServerToClient => ("responses", "server"),
        Direction::ClientToServer => ("requests", "client"),
    };
    let seg_dist = st.segments_per_turn.distribution();
    let size_dist = st.sizes.distribution();
    // Rule 7: a hop is weighed against the holds only when something held the pieces.
    let blame = if st.held > Duration::ZERO {
        super::hop_blame(
            groups,
            group,
            dir,
            Held {
                typical: st.held / st.held_by_nagle.max(1) as u32,
                share: st.held_by_nagle as f64 / st.turns.max(1) as f64,
            },
        )
    } else {
        super::hop_text(groups, group, dir).map(|text| HopBlame::Hop {
            cause: format!("{} re-emits", text.subject),
            text,
        })
    };
    let writer = match &blame {
        Some(HopBlame::Hop { cause, .. }) => format!("The {}", cause.trim_start_matches("the ")),
        Some(HopBlame::Upstream(p)) => format!(
            "The {} passes on, as they arrive from {},",
            p.subject.trim_start_matches("the "),
            p.upstream
        ),
        None => format!("The {sender} writes"),
    };
    let mut verdict = format!(
        "{writer} {what} in pieces: {} {what} left as several small segments \
         (median {} segments each, median segment {} bytes)",
        st.fragmented, seg_dist.p50, size_dist.p50
    );
    match &blame {
        Some(HopBlame::Upstream(p)) => verdict.push_str(&format!(
            "; the pieces of {} of them already arrived late from {}, {} in all, and the hop, {}, \
             passed the wait on.",
            st.held_by_nagle,
            p.upstream,
            fmt_duration(st.held),
            p.promptly
        )),
        _ if st.held > Duration::ZERO => {
            verdict.push_str(&nagle_clause(st.held_by_nagle, st.held));
        }
        _ if st.window == Duration::ZERO => verdict.push_str(
            ". Nothing held them, so they cost no time in this capture, but each piece costs \
             a syscall and a packet, and behind a hop with Nagle on the pieces after the \
             first wait for an ACK (a nagle_delayed_ack stall waiting to happen).",
        ),
        _ => verdict.push('.'),
    }
    if st.window > Duration::ZERO {
        verdict.push_str(&window::verdict(st.window_turns, st.window));
    }
    if tls {
        verdict.push_str(&format!(
            " On port {port} the pieces are most likely TLS records: one record per write is \
             common."
        ));
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
            "; {} segments more than the bytes needed in full segments ({} bytes on the \
             example flow)",
            st.extra_segments, example.full
        ));
    }
    ev.facts.push(per_turn);
    if st.held_by_nagle > 0 && !matches!(blame, Some(HopBlame::Upstream(_))) {
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
    match &blame {
        Some(HopBlame::Hop { text, .. }) => ev.facts.push(text.fact.clone()),
        Some(HopBlame::Upstream(p)) => ev.facts.push(p.fact.clone()),
        None => {}
    }
    ev.counts.insert("fragmented_turns".into(), st.fragmented);
    ev.counts.insert("turns".into(), st.turns);
    ev.counts.insert("held_by_nagle".into(), st.held_by_nagle);
    ev.counts.insert("extra_segments".into(), st.extra_segments);
    ev.values.insert(
        "nagle_held_ms".into(),
        crate::stats::round3(crate::units::ms(st.held)),
    );
    ev.values
        .insert("fragmented_share".into(), crate::stats::round3(share));
    ev.counts.insert("window_waits".into(), st.window_waits);
    ev.values.insert(
        "window_wait_ms".into(),
        crate::stats::round3(crate::units::ms(st.window)),
    );
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
    if let Some(w) = &example.wait {
        let counts = (st.window_turns, st.window_waits);
        window::evidence(&mut ev, dir, w, example.full, counts, turn.first.ts);
    }
    let fix = if tls {
        "One TLS record per write is common (many TLS stacks seal each application write as its \
         own record and send it at once). Buffer the records of one flight and write them \
         together: build the whole message before handing it to the TLS layer, or put a write \
         buffer under it (a buffering BIO, a buffered stream flushed once per message), so a \
         message leaves as a few full-sized records and segments; then TCP_NODELAY is safe \
         and fast."
    } else {
        match dir {
            Direction::ServerToClient => {
                "Build each response in memory and write it with one call (a buffered writer, \
                 writev, or a line-buffered channel flushed once per response); with responses \
                 whole, TCP_NODELAY is then safe and fast."
            }
            Direction::ClientToServer => {
                "Build each request in memory and write it with one call (a buffered writer or \
                 writev); with requests whole, TCP_NODELAY is then safe and fast."
            }
        }
    };
    let fix: String = match &blame {
        Some(HopBlame::Hop { text, .. }) => text.fix.clone(),
        Some(HopBlame::Upstream(p)) => format!(
            "Fix {}, not the hop (it forwards what it reads at once): {}",
            p.upstream,
            fix.trim_end()
        ),
        None => fix.to_string(),
    };
    let passed = HopBlame::passed(blame);
    let f = FindingHead {
        kind: FindingKind::FragmentedWrites,
        severity,
        group,
        direction: dir,
        flows_affected: st.flows,
        example_flow: example.flow.clone(),
        time_lost: lost,
    }
    .finish(groups, verdict, ev, &fix);
    (f, passed)
}

/// The verdict's sentence on the pieces Nagle held (rule 3).
fn nagle_clause(held_by_nagle: u64, held: Duration) -> String {
    format!(
        "; Nagle held the pieces of {held_by_nagle} of them until the peer's delayed ACK, {} in \
         all (see nagle_delayed_ack).",
        fmt_duration(held)
    )
}

/// Rewords a finding of this kind about a sender whose sockets had TCP_NODELAY on (rule 7):
/// what waited for the peer's ACK was the program, not Nagle.
pub fn reword_for_nodelay(f: &mut Finding) {
    let n = f.evidence.counts.get("held_by_nagle").copied().unwrap_or(0);
    let ms = f
        .evidence
        .values
        .get("nagle_held_ms")
        .copied()
        .unwrap_or(0.0);
    let held = Duration::from_secs_f64(ms.max(0.0) / 1e3);
    // The clause as `nagle_clause` wrote it (its figure was rounded since).
    let Some(start) = f.verdict.find("; Nagle held the pieces of ") else {
        return;
    };
    let tail = "(see nagle_delayed_ack).";
    let Some(len) = f.verdict[start..].find(tail) else {
        return;
    };
    let clause = f.verdict[start..start + len + tail.len()].to_string();
    let sender = match f.direction {
        Direction::ServerToClient => "server",
        Direction::ClientToServer => "client",
    };
    f.verdict = f.verdict.replace(
        &clause,
        &format!(
            "; the {sender} wrote the rest of {n} of them only once the peer's ACK of a piece \
             came (its delayed ACK), {} in all: its sockets have TCP_NODELAY on, so Nagle held \
             nothing (see nagle_delayed_ack).",
            fmt_duration(held)
        ),
    );
    for fact in &mut f.evidence.facts {
        if fact.contains("show the Nagle shape instead") {
            *fact = format!(
                "{n} of them show a wait for the ACK instead: a small first piece, the peer's \
                 delayed ACK, then the rest"
            );
        }
    }
    f.fix = format!(
        "{} Do not wait for the send queue to drain (SIOCOUTQ, tcp_info's unacked, a flush \
         that waits for the peer) before writing more.",
        f.fix.trim_end()
    );
}

/// Rewords a finding of this kind about replies to a client known to pipeline up to `depth`
/// requests (`run` drives it so): a turn then holds up to `depth` replies, and a turn of no
/// more segments than that may be whole replies, one per segment — not replies in pieces.
/// Applies only when every fragmented turn had at most `depth` segments; returns whether it
/// did.
pub fn reword_for_pipelining(f: &mut Finding, depth: usize) -> bool {
    let Some(segs) = f.evidence.distributions.get("segments_per_turn") else {
        return false;
    };
    if f.kind != FindingKind::FragmentedWrites
        || !f.verdict.starts_with("The server writes")
        || depth < 2
        || f.direction != Direction::ServerToClient
        || segs.max > depth as f64
    {
        return false;
    }
    let (p50, max) = (segs.p50, segs.max);
    let n = f
        .evidence
        .counts
        .get("fragmented_turns")
        .copied()
        .unwrap_or(0);
    let bytes = f
        .evidence
        .distributions
        .get("segment_bytes")
        .map_or(0.0, |d| d.p50);
    let rest = f
        .verdict
        .find("; Nagle held")
        .or_else(|| f.verdict.find(". Nothing held them"))
        .or_else(|| f.verdict.find(". The congestion window counts packets"))
        .map_or(String::new(), |i| f.verdict[i..].to_string());
    let rest = if rest.starts_with(". Nothing held them") {
        ". Nothing held them, so they cost no time in this capture; each costs a syscall and a \
         packet."
            .to_string()
    } else {
        rest
    };
    f.verdict = format!(
        "The server answers each batch of pipelined requests (up to {depth} at a time) with one \
         reply per write: {n} turns left as several small segments (median {p50}, at most \
         {max} — no more than the replies a turn can hold; median segment {bytes} bytes), so \
         these are most likely whole replies, one per segment, not replies in pieces{rest}"
    );
    f.evidence.facts.push(format!(
        "the client pipelined up to {depth} requests: a server turn holds up to {depth} replies, \
         and no fragmented turn had more segments than that"
    ));
    f.fix = "The replies are most likely whole already: to save the packets and syscalls, gather the replies of one \
             batch and write them together (one writev per batch, or a write buffer flushed \
             once the batch is answered)."
        .to_string();
    true
}
