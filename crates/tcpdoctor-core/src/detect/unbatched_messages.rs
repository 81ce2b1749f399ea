//! `unbatched_messages`: many small independent messages to one peer, one segment each.
//!
//! A sender with TCP_NODELAY on that writes each small message with its own call sends each as
//! its own packet: a syscall, ≈ 52 bytes of headers (66 with Ethernet), an ACK the other way
//! at least for every second one, and a slot of a congestion window that counts packets
//! (PHYSICS §7, §9). Writing the messages queued for one peer together (per-peer batching)
//! sends the same bytes in ⌈bytes / MSS⌉ packets. This is not `fragmented_writes` (one message
//! in pieces); the two look alike without payload, so this rule names a burst only when the
//! peer's ACK numbers prove it held at least two messages (rule 6).
//!
//! The core never reads payload. It tells whole messages by their sizes, and messages that were
//! ready together by two header fields of the segments that carry them: the ACK number, its
//! sender's `rcv_nxt` when it left — all of the peer's bytes its TCP had received — which reads
//! the same at either end of the path, and the TSval, its sender's clock when its TCP sent
//! it. Rule, per flow, over a *stretch* of its data
//! segments (all of them, or [`STRETCH_MAX`] at a time on a long flow):
//! 1. *Typical message.* Each side's typical message is the median size of its data segments
//!    in the stretch (`s_c`, `s_s`); the messages it sent are its bytes over that size
//!    (`M_c = B_c / s_c` requests, `M_s = B_s / s_s` answers).
//! 2. *Counts agree.* The two counts agree within [`AGREE`] and both are at least
//!    [`MIN_BURST`]. One request in *n* pieces answered whole (`M_c = n`, `M_s = 1`) or a
//!    request answered in *n* pieces disagree: nothing is said. A one-way stream is not judged.
//!    Agreeing counts do not show whole messages: one message in *n* pieces answered in *n*
//!    pieces agrees too. Only rule 6 tells messages apart.
//! 3. *Small segment.* A segment is a small one when `round(len / s)` is 1 (a piece under half
//!    the typical size is not), it holds
//!    at most [`SMALL_SEGMENT`] bytes and at most half a full segment, and it carries the ACK
//!    flag and the timestamp option (without a TSval nothing is said: rule 5).
//! 4. *Ready together.* A data segment is ready together with the previous data segment of its
//!    side when both carry the same ACK number (and the ACK flag): its sender had received
//!    none of the peer's data between the two, so the later one did not wait for anything
//!    from the peer. When new data from the peer arrived between them (a new turn), the ACK
//!    numbers differ and the two are not ready together. This alone is true of the pieces of
//!    one message as much as of pipelined messages.
//! 5. *Burst.* At least [`MIN_BURST`] consecutive data segments of one side, each a small
//!    segment (rule 3), each ready together with the previous one (rule 4), all with the
//!    first one's TSval (its TCP sent them within one tick of its clock: 1 ms on Linux), and
//!    all within [`SPAN_MAX`] of the first at the capture point. A longer run is cut into
//!    bursts of at most that span, so a paced sender's messages never add up to one. The TSval
//!    speaks for the sender where the capture cannot: at the far end of a path a queue can
//!    deliver messages paced a millisecond apart within microseconds of each other.
//! 6. *At least two messages.* A burst is named only when one of the peer's data segments
//!    in the stretch carries an ACK number strictly inside the burst's bytes (after its first
//!    byte, before its end): the peer had received a first part of the burst and not the rest,
//!    and sent data — it answered (or otherwise spoke) before the burst was whole, so that
//!    first part was at least one whole message and the burst holds at least two. Without
//!    such a segment nothing is said: a burst answered only after all of it had arrived looks
//!    on the wire exactly like one message written in pieces and answered in pieces
//!    (`fragmented_writes`), and the core does not read payload. On loopback, where a reader
//!    wakes after the whole burst has arrived, most truly pipelined bursts have no such
//!    segment and are not named.
//!
//!    6′. *The script's framing.* When `run` drove the flow, its driver knows where each of
//!    its messages ended in both byte streams ([`crate::message_ends`]: each request it wrote,
//!    each response its script's framing read). For such a flow the framing replaces rules
//!    1–3 and 6 over the bytes it covers: a segment is a small one when it carries exactly
//!    one whole message of its direction — it starts where one message ends and ends where
//!    the next one does — and the other conditions of rule 3 hold; a burst (rules 4 and 5)
//!    of such segments, each the next message after the previous one, holds one message per
//!    segment and at least [`MIN_BURST`] of them, and is named. A burst by rules 1–6 with a
//!    segment the framing shows is not one whole message (a message in pieces, or several)
//!    is not named: the framing knows better than the sizes. Bytes past what the driver
//!    recorded are judged by rules 1–6 alone; a flow without framing, by rules 1–6 alone.
//! 7. *Cost.* Batched, a burst's bytes need `⌈bytes / full segment⌉` segments
//!    ([`crate::flow::Flow::full_segment`]); the rest are *extra packets*, each with its headers
//!    ([`HEADER_V4`] or [`HEADER_V6`] bytes of IP and TCP with timestamps). A burst never
//!    spans two turns (rule 4), so it never adds up messages that no one write could have held.
//!    A batched sender never trips the rule: it sends a burst of small messages in segments of
//!    (up to) a full segment each, never [`MIN_BURST`] small ones in a row.
//! 8. Report a direction with at least one burst. Severity: a warning when the extra packets
//!    are at least [`WARN_SHARE`] of that direction's data segments in the judged stretches
//!    (most of what it sends is avoidable packets), else info. The example is the longest
//!    burst; of equal ones, the first judged in the capture (its stretch's position, [`At`],
//!    then its place among the stretch's bursts), so that any division of the flows among
//!    threads names the same one.

use std::any::Any;
use std::cmp::Reverse;
use std::sync::Arc;
use std::time::Duration;

use super::{At, Detector, FlowMarks, FlowView, Groups, PerGroup, ShardMap, Slots};
use crate::flow::{Direction, SegmentEvent, SegmentKind};
use crate::fxhash::FxHashMap;
use crate::message_ends::{ConnectionEnds, Cut, MessageEnds};
use crate::report::{Finding, FlowRef};
use crate::seq::SeqNum;
use crate::time::Timestamp;
use crate::wire::Endpoint;

mod proof;
mod text;

use proof::AckIndex;
use text::finding;

/// Segments of a burst, at least.
pub const MIN_BURST: usize = 8;
/// Most bytes a segment carrying one *small* message may hold (and at most half a full one).
pub const SMALL_SEGMENT: u32 = 512;
/// Longest time from a burst's first segment to its last: well under any non-loopback round
/// trip, so a paced sender's messages do not add up to a burst.
pub const SPAN_MAX: Duration = Duration::from_millis(1);
/// Largest ratio between the request and answer counts of rule 2.
pub const AGREE: f64 = 1.25;
/// Data segments kept per flow before a stretch is judged.
pub const STRETCH_MAX: usize = 4096;
/// Share of a direction's data segments that are extra packets, from which it is a warning.
pub const WARN_SHARE: f64 = 0.5;
/// IPv4 + TCP headers with the timestamp option, per packet.
pub const HEADER_V4: u64 = 52;
/// IPv6 + TCP headers with the timestamp option, per packet.
pub const HEADER_V6: u64 = 72;
/// Segments a new connection may send before the first ACK (RFC 6928, Linux's default).
const INITIAL_WINDOW: f64 = 10.0;
/// Frames of a burst the evidence quotes.
const FRAMES_QUOTED: usize = 8;

#[derive(Clone, Copy, Debug)]
struct Seg {
    frame: u64,
    ts: Timestamp,
    len: u32,
    dir: Direction,
    /// Its sequence number: the first byte it carries.
    seq: SeqNum,
    /// Its ACK number, when it carries the ACK flag (rule 4).
    ack: Option<SeqNum>,
    /// Its TSval, when it carries the timestamp option (rule 5).
    tsval: Option<u32>,
    /// Where it lies against the driver's message ends (rule 6′).
    cut: Cut,
}

/// A data segment as a flow's stretch keeps it until the stretch is judged: 40 bytes where a
/// [`Seg`] takes 64 (its [`Cut`] is placed only when judged, and the options are unpacked).
#[derive(Clone, Copy, Debug)]
struct Kept {
    frame: u64,
    ts: Timestamp,
    len: u32,
    seq: SeqNum,
    /// Its ACK number, when `has_ack`.
    ack: SeqNum,
    /// Its TSval, when `has_tsval`.
    tsval: u32,
    dir: Direction,
    has_ack: bool,
    has_tsval: bool,
}

impl Kept {
    fn new(ev: &SegmentEvent) -> Kept {
        Kept {
            frame: ev.pkt.frame,
            ts: ev.pkt.ts,
            len: ev.len,
            seq: ev.seq,
            ack: ev.ack,
            tsval: ev.tsval.unwrap_or(0),
            dir: ev.dir,
            has_ack: ev.has_ack,
            has_tsval: ev.tsval.is_some(),
        }
    }

    /// The segment, placed at `cut`.
    fn seg(self, cut: Cut) -> Seg {
        Seg {
            frame: self.frame,
            ts: self.ts,
            len: self.len,
            dir: self.dir,
            seq: self.seq,
            ack: self.has_ack.then_some(self.ack),
            tsval: self.has_tsval.then_some(self.tsval),
            cut,
        }
    }
}

/// One burst (rule 5).
#[derive(Clone, Debug, Default)]
struct Burst {
    segs: Vec<Seg>,
    bytes: u64,
    /// The message numbers of its first and last segment, when the framing numbers them
    /// (rule 6′).
    messages: Option<(u64, u64)>,
    /// What shows it held at least two messages.
    proof: Option<Proof>,
}

/// Rule 6 or 6′.
#[derive(Clone, Copy, Debug)]
enum Proof {
    /// The peer's data segment whose ACK number fell inside the burst's bytes.
    Ack(Seg),
    /// The script's framing: one whole message per segment.
    Framing,
}

/// The counts of rule 2 for one stretch: (bytes, typical size, messages) per side.
#[derive(Clone, Copy, Debug)]
struct Counts {
    side: [(u64, u32, f64); 2],
}

#[derive(Default)]
struct State {
    bursts: u64,
    segments: u64,
    bytes: u64,
    batched: u64,
    /// This direction's data segments in the judged stretches.
    dir_segments: u64,
    /// Bursts shown by the script's framing (rule 6′).
    framed: u64,
    flows: u64,
    example: Option<Example>,
}

struct Example {
    /// Where it was judged ([`At`]) and its place among the bursts judged there: of bursts of
    /// equal length, the first is kept.
    at: (At, usize),
    flow: FlowRef,
    burst: Burst,
    batched: u64,
    /// Rule 2's counts (None for a burst rule 6′ named where they did not agree).
    counts: Option<Counts>,
    /// The median size of its side's segments (of the burst's own, under rule 6′).
    typical: u32,
    header: u64,
    /// The burst's ACK number, relative to the peer's initial sequence number when known.
    ack: String,
}

/// Which burst a finding shows: the greatest of these, a longer burst, or as long and
/// judged earlier.
type Rank = (usize, Reverse<(At, usize)>);

impl Example {
    fn rank(&self) -> Rank {
        (self.burst.segs.len(), Reverse(self.at))
    }

    /// Whether this one is shown rather than `kept`.
    fn beats(&self, kept: &Option<Example>) -> bool {
        kept.as_ref().is_none_or(|k| self.rank() > k.rank())
    }
}

#[derive(Default)]
pub struct UnbatchedMessages {
    stretch: Slots<Vec<Kept>>,
    state: PerGroup<State>,
    marks: FlowMarks,
    /// Where `run`'s driver knows its messages ended (rule 6′).
    ends: Option<Arc<MessageEnds>>,
    /// The flow each recorded connection's ends were given to: the first flow on its
    /// endpoints (a later connection reusing them is not the recorded one).
    taken: FxHashMap<(Endpoint, Endpoint), u64>,
    /// The stretch being judged, unpacked: one vector for every stretch of every flow.
    scratch: Vec<Seg>,
    /// One side's segment sizes in the stretch being counted (rule 1), likewise reused.
    sizes: Vec<u32>,
}

impl Detector for UnbatchedMessages {
    fn wants_segments(&self) -> bool {
        true
    }

    fn on_segment(&mut self, flow: &FlowView, ev: &SegmentEvent) {
        if ev.len == 0 || !matches!(ev.kind, SegmentKind::NewData | SegmentKind::DataAfterGap) {
            return;
        }
        let segs = self.stretch.get_or_default(flow);
        crate::compact::push(segs, Kept::new(ev));
        if segs.len() >= STRETCH_MAX {
            // The flow's next stretch fills the same vector: it was about to hold as many.
            let mut segs = std::mem::take(segs);
            self.judge(flow, &segs);
            segs.clear();
            *self.stretch.get_or_default(flow) = segs;
        }
    }

    fn on_flow_end(&mut self, flow: &FlowView) {
        if let Some(segs) = self.stretch.remove(flow) {
            self.judge(flow, &segs);
        }
        self.marks.forget(flow.flow.id);
    }

    super::hands_over_its_state!();

    fn absorb(&mut self, state: Box<dyn Any + Send>, map: &ShardMap) {
        let other: PerGroup<State> = super::handed(state);
        self.state.absorb(other, map, |st, o| {
            st.bursts += o.bursts;
            st.segments += o.segments;
            st.bytes += o.bytes;
            st.batched += o.batched;
            st.dir_segments += o.dir_segments;
            st.framed += o.framed;
            st.flows += o.flows;
            if let Some(e) = o.example {
                let e = Example {
                    flow: map.flow_ref(e.flow),
                    ..e
                };
                if e.beats(&st.example) {
                    st.example = Some(e);
                }
            }
        });
    }

    fn finish(&mut self, groups: &Groups) -> Vec<Finding> {
        let mut out = Vec::new();
        for (group, dir, st) in self.state.drain() {
            if st.bursts == 0 {
                continue;
            }
            if let Some(f) = finding(group, dir, &st, groups) {
                out.push(f);
            }
        }
        out
    }
}

impl UnbatchedMessages {
    /// The detector told where `run`'s driver knows its messages ended (rule 6′).
    pub fn with_ends(ends: Option<Arc<MessageEnds>>) -> UnbatchedMessages {
        UnbatchedMessages {
            ends,
            ..UnbatchedMessages::default()
        }
    }

    /// The driver's message ends for this flow: the first flow on the recorded endpoints.
    fn framing(&mut self, flow: &FlowView) -> Option<Arc<MessageEnds>> {
        let ends = self.ends.clone()?;
        let key = (flow.flow.client, flow.flow.server);
        ends.get(key.0, key.1)?;
        let id = *self.taken.entry(key).or_insert(flow.flow.id);
        (id == flow.flow.id).then_some(ends)
    }

    /// Rules 1–7 over one stretch of a flow. A stretch whose counts disagree (rule 2) and
    /// that has no framing (rule 6′) holds no burst: it is not unpacked.
    fn judge(&mut self, flow: &FlowView, kept: &[Kept]) {
        let counts = counts(kept.iter().map(|k| (k.dir, k.len)), &mut self.sizes);
        let framing = self.framing(flow);
        if counts.is_none() && framing.is_none() {
            return;
        }
        let mut segs = std::mem::take(&mut self.scratch);
        segs.clear();
        match framing
            .as_ref()
            .and_then(|e| e.get(flow.flow.client, flow.flow.server))
        {
            Some(ends) => segs.extend(with_cuts(flow, kept, ends)),
            None => segs.extend(kept.iter().map(|k| k.seg(Cut::Unknown))),
        }
        self.judge_segments(flow, framing, counts, &segs);
        self.scratch = segs;
    }

    /// Rules 1–7 over one stretch, its segments placed against the framing when known, with
    /// its counts (rules 1 and 2) when they agree.
    fn judge_segments(
        &mut self,
        flow: &FlowView,
        framing: Option<Arc<MessageEnds>>,
        counts: Option<Counts>,
        segs: &[Seg],
    ) {
        let full = [
            flow.flow.full_segment(Direction::ClientToServer).max(1),
            flow.flow.full_segment(Direction::ServerToClient).max(1),
        ];
        // Rule 6′: one whole message per segment, as the framing numbers them.
        let mut named = match framing {
            Some(_) => runs(segs, full, |s| match s.cut {
                Cut::Whole(n) => Some(Some(n)),
                _ => None,
            }),
            None => Vec::new(),
        };
        for b in &mut named {
            b.proof = Some(Proof::Framing);
        }
        if counts.is_none() && named.is_empty() {
            return;
        }
        let header = if flow.flow.server.ip.is_ipv6() {
            HEADER_V6
        } else {
            HEADER_V4
        };
        for dir in [Direction::ClientToServer, Direction::ServerToClient] {
            let st = self.state.get(flow.group, dir);
            st.dir_segments += segs.iter().filter(|s| s.dir == dir).count() as u64;
        }
        if let Some(c) = &counts {
            let mut acks: [Option<AckIndex>; 2] = [None, None];
            for mut burst in bursts(segs, c, full) {
                // The framing knows better than the sizes (rule 6′).
                if burst.segs.iter().any(|s| s.cut == Cut::NotWhole)
                    || named.iter().any(|n| overlap(n, &burst))
                {
                    continue;
                }
                let Some(p) = proof(segs, &burst, &mut acks) else {
                    continue;
                };
                burst.proof = Some(Proof::Ack(p));
                named.push(burst);
            }
        }
        for (i, burst) in named.into_iter().enumerate() {
            let dir = burst.segs[0].dir;
            let batched = burst.bytes.div_ceil(u64::from(full[dir.index()]));
            let st = self.state.get(flow.group, dir);
            st.bursts += 1;
            st.framed += u64::from(matches!(burst.proof, Some(Proof::Framing)));
            st.segments += burst.segs.len() as u64;
            st.bytes += burst.bytes;
            st.batched += batched;
            self.marks.count(flow.flow.id, dir, &mut st.flows);
            let rank: Rank = (burst.segs.len(), Reverse((flow.at, i)));
            if st.example.as_ref().is_none_or(|e| rank > e.rank()) {
                let ack = ack_shown(flow, dir, burst.segs[0].ack);
                let typical = match (&counts, burst.proof) {
                    (Some(c), Some(Proof::Ack(_))) => c.side[dir.index()].1,
                    _ => median(&burst),
                };
                st.example = Some(Example {
                    at: (flow.at, i),
                    flow: flow.flow_ref(),
                    burst,
                    batched,
                    counts,
                    typical,
                    header,
                    ack,
                });
            }
        }
    }
}

/// The state this detector keeps per open flow, by size ([`super::tests`] keeps it small).
#[cfg(test)]
pub(super) fn per_flow_sizes() -> Vec<(&'static str, usize)> {
    use std::mem::size_of;
    vec![
        ("unbatched_messages slot", size_of::<(u64, Vec<Kept>)>()),
        ("unbatched_messages::Kept", size_of::<Kept>()),
    ]
}

/// The stretch with each segment placed against the driver's message ends (rule 6′). A
/// direction whose ISN the capture did not show, or whose stream passed 2³² bytes (where
/// sequence numbers no longer name one offset), stays unknown.
fn with_cuts<'a>(
    flow: &FlowView,
    segs: &'a [Kept],
    ends: &'a ConnectionEnds,
) -> impl Iterator<Item = Seg> + 'a {
    let isn = [Direction::ClientToServer, Direction::ServerToClient].map(|d| {
        let half = flow.flow.half(d);
        half.isn.filter(|_| half.data_bytes <= u64::from(u32::MAX))
    });
    segs.iter().map(move |&s| {
        let cut = match isn[s.dir.index()] {
            Some(isn) => {
                let start = u64::from(s.seq.0.wrapping_sub(isn.0).wrapping_sub(1));
                ends.cut(s.dir, start, start + u64::from(s.len))
            }
            None => Cut::Unknown,
        };
        s.seg(cut)
    })
}

/// Whether two bursts share a segment.
fn overlap(a: &Burst, b: &Burst) -> bool {
    a.segs
        .iter()
        .any(|s| b.segs.iter().any(|t| t.frame == s.frame))
}

/// The median size of a burst's segments.
fn median(b: &Burst) -> u32 {
    let mut sizes: Vec<u32> = b.segs.iter().map(|s| s.len).collect();
    sizes.sort_unstable();
    sizes.get(sizes.len() / 2).copied().unwrap_or(0)
}

/// Rules 1 and 2 over a stretch's segments (each its direction and length): each side's
/// bytes, typical segment and messages, when the counts agree. `sizes` is scratch space.
fn counts(
    segs: impl Iterator<Item = (Direction, u32)> + Clone,
    sizes: &mut Vec<u32>,
) -> Option<Counts> {
    let mut side = [(0u64, 0u32, 0f64); 2];
    for dir in [Direction::ClientToServer, Direction::ServerToClient] {
        sizes.clear();
        sizes.extend(segs.clone().filter(|s| s.0 == dir).map(|s| s.1));
        if sizes.is_empty() {
            return None;
        }
        let bytes: u64 = sizes.iter().map(|&l| u64::from(l)).sum();
        // The median as the sorted sizes would have it at len / 2, found in linear time.
        let mid = sizes.len() / 2;
        let typical = (*sizes.select_nth_unstable(mid).1).max(1);
        side[dir.index()] = (bytes, typical, bytes as f64 / f64::from(typical));
    }
    let (a, b) = (side[0].2, side[1].2);
    let agree = a.min(b) >= MIN_BURST as f64 && a.max(b) <= AGREE * a.min(b);
    agree.then_some(Counts { side })
}

/// Rules 3–5: the bursts of both sides in one stretch whose counts agree.
fn bursts(segs: &[Seg], counts: &Counts, full: [u32; 2]) -> Vec<Burst> {
    runs(segs, full, |s| {
        // round(len / typical) == 1, in integers: typical / 2 <= len < 3 typical / 2 (a
        // quotient of two u32s is never within an f64 rounding of a half).
        let (len, typical) = (u64::from(s.len), u64::from(counts.side[s.dir.index()].1));
        (2 * len >= typical && 2 * len < 3 * typical).then_some(None)
    })
}

/// Rules 3–5 with `one` saying whether a segment carries one message (rule 3's first
/// condition, or rule 6′: then which message, and a burst's messages follow each other).
fn runs(segs: &[Seg], full: [u32; 2], one: impl Fn(&Seg) -> Option<Option<u64>>) -> Vec<Burst> {
    let mut out = Vec::new();
    // Each side's open run (none while its `segs` is empty): one vector per side, reused, so
    // that the many runs that never reach a burst allocate nothing.
    let mut open: [Burst; 2] = Default::default();
    for &s in segs {
        let i = s.dir.index();
        let number = one(&s);
        let one_small = number.is_some()
            && s.len <= SMALL_SEGMENT
            && s.len * 2 <= full[i]
            && s.ack.is_some()
            && s.tsval.is_some();
        let number = number.flatten();
        let b = &mut open[i];
        let continues = one_small && !b.segs.is_empty() && {
            let (first, last) = (b.segs[0], b.segs[b.segs.len() - 1]);
            let next = match (b.messages, number) {
                (None, None) => true,
                (Some((_, at)), Some(n)) => n == at + 1,
                _ => false,
            };
            next && last.ack == s.ack && first.tsval == s.tsval && s.ts.since(first.ts) <= SPAN_MAX
        };
        if continues {
            b.segs.push(s);
            b.bytes += u64::from(s.len);
            if let (Some(m), Some(n)) = (b.messages.as_mut(), number) {
                m.1 = n;
            }
            continue;
        }
        close(b, &mut out);
        if one_small {
            b.segs.push(s);
            b.bytes = u64::from(s.len);
            b.messages = number.map(|n| (n, n));
            b.proof = None;
        }
    }
    for b in &mut open {
        close(b, &mut out);
    }
    out
}

/// Rule 6: the first of the peer's data segments whose ACK number falls strictly inside the
/// burst's bytes — the peer had received a first part of the burst, not all of it, and sent
/// data — when there is one. `acks` keeps each direction's [`AckIndex`] once built.
fn proof(segs: &[Seg], b: &Burst, acks: &mut [Option<AckIndex>; 2]) -> Option<Seg> {
    let first = b.segs[0];
    let last = b.segs[b.segs.len() - 1];
    let index = acks[first.dir.index()].get_or_insert_with(|| AckIndex::new(segs, first.dir));
    index.first_inside(segs, first.seq, last.seq.plus(last.len))
}

fn close(open: &mut Burst, out: &mut Vec<Burst>) {
    if open.segs.len() >= MIN_BURST {
        out.push(std::mem::take(open));
    } else {
        open.segs.clear();
    }
}

/// An ACK number as tshark shows it by default: relative to the peer's initial sequence
/// number when the handshake was seen.
fn ack_shown(flow: &FlowView, dir: Direction, ack: Option<SeqNum>) -> String {
    let Some(ack) = ack else {
        return "?".into();
    };
    match flow.flow.half(dir.reverse()).isn {
        Some(isn) => ack.diff(isn).to_string(),
        None => format!("{} (absolute)", ack.0),
    }
}
