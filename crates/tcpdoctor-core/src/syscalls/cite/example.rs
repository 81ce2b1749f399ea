//! Rules 3 and 4 at the finding's example: the writes behind its quoted frames, and what
//! they say about the finding (the pieces are the program's writes or not; Nagle held the
//! bytes or the program waited).

use super::calls::{self, nodelay_at};
use super::Side;
use crate::report::{Finding, FindingKind, WriteMark};
use crate::stats::round3;
use crate::syscalls::join::{describe_frames, describe_resent, describe_writes};
use crate::syscalls::join::{JoinedWrite, SocketJoin};
use crate::syscalls::Trace;
use crate::time::Timestamp;
use crate::units::fmt_duration;

/// Marks kept per finding for the timeline.
pub const MAX_MARKS: usize = 64;

/// The joined frames the finding quotes: its direction's, from its first quoted frame to its
/// last (rule 4).
fn quoted_frames(f: &Finding, j: &SocketJoin) -> Vec<u64> {
    let ends = f
        .evidence
        .frames
        .iter()
        .chain(f.evidence.timeline.iter().map(|t| &t.frame));
    let (lo, hi) = ends.fold((u64::MAX, 0), |(lo, hi), &n| (lo.min(n), hi.max(n)));
    j.frames
        .iter()
        .map(|fw| fw.segment.frame)
        .filter(|&n| n >= lo && n <= hi)
        .collect()
}

/// Rule 4, and rule 3 at the example's stall.
pub(super) fn quoted(
    f: &mut Finding,
    j: &SocketJoin,
    trace: &Trace,
    side: &Side,
    hist: &[calls::NodelaySet],
) {
    let frames = quoted_frames(f, j);
    if let Some(s) = describe_frames(j, &frames) {
        f.evidence.facts.push(s);
    }
    f.evidence.facts.extend(describe_resent(j, &frames));
    let carried: Vec<&JoinedWrite> = j
        .writes
        .iter()
        .filter(|w| w.frames.iter().any(|n| frames.contains(n)))
        .collect();
    // The capture's clock against the tracer's: a timeline entry whose frame the join holds.
    let origin = f.evidence.timeline.iter().find_map(|t| {
        let fw = j.frame(t.frame)?;
        Some(fw.segment.ts.0 as f64 - t.t_ms * 1e6)
    });
    if let Some(origin) = origin {
        f.evidence.writes = carried
            .iter()
            .take(MAX_MARKS)
            .map(|w| WriteMark {
                call: w.write.kind.name().to_string(),
                index: w.write.index,
                bytes: w.write.bytes,
                t_ms: round3((w.write.at.0 as f64 - origin) / 1e6),
                direction: f.direction,
                frames: w.frames.clone(),
            })
            .collect();
    }
    let fresh: Vec<u64> = frames
        .iter()
        .copied()
        .filter(|&n| j.frame(n).is_some_and(|fw| !fw.retransmission))
        .collect();
    match f.kind {
        FindingKind::FragmentedWrites if fresh.len() >= 2 && !carried.is_empty() => {
            f.evidence
                .facts
                .push(pieces_fact(side, j, &fresh, &carried));
        }
        FindingKind::NagleDelayedAck => {
            if let Some(origin) = origin {
                nagle_release(f, j, trace, side, hist, origin);
            }
        }
        _ => {}
    }
}

/// For `fragmented_writes`: are the example's segments the program's writes? Only when every
/// segment begins and ends on a call's boundary: a count of calls at least that of segments
/// is not enough (one call cut over many segments next to one segment of many calls).
fn pieces_fact(side: &Side, j: &SocketJoin, fresh: &[u64], carried: &[&JoinedWrite]) -> String {
    let (sender, w, segments) = (side.sender, carried.len(), fresh.len());
    let calls = describe_writes(carried);
    let cut = fresh
        .iter()
        .filter_map(|&n| j.frame(n))
        .filter(|fw| fw.starts_mid_write || fw.ends_mid_write)
        .count();
    if w == 1 {
        format!(
            "the trace contradicts one write per piece: the example's {segments} segments carry \
             one call, {calls}: the {sender} wrote it whole and the kernel cut it into segments \
             (the MSS, the receive or congestion window)"
        )
    } else if cut > 0 {
        format!(
            "the example's {segments} segments carry {w} calls ({calls}); {cut} of the segments \
             carry only part of a call, so the kernel split some writes too"
        )
    } else if w > segments {
        format!(
            "the example's {segments} segments carry {w} calls, each segment whole calls (some \
             sent together) — the pieces are the {sender}'s own writes"
        )
    } else {
        format!(
            "the example's {segments} segments carry {w} calls, one whole call each — the \
             pieces are the {sender}'s own writes"
        )
    }
}

/// How far the capture point is from the sender, at most: the least time from a write's entry
/// to the first frame carrying its bytes (0 at the sender's own end, give or take the stack's
/// µs; one way along the path when the capture is at the far end).
fn lag(j: &SocketJoin) -> std::time::Duration {
    j.writes
        .iter()
        .filter_map(|w| Some(j.frame(*w.frames.first()?)?.segment.ts.since(w.write.at)))
        .min()
        .unwrap_or_default()
}

/// For a Nagle stall: when the writes of the released frame were made, against the delayed
/// ACK, and whether TCP_NODELAY was on at the stall.
fn nagle_release(
    f: &mut Finding,
    j: &SocketJoin,
    trace: &Trace,
    side: &Side,
    hist: &[calls::NodelaySet],
    origin: f64,
) {
    let sender = side.sender;
    let Some(&after) = f.evidence.frames.last() else {
        return;
    };
    // The delayed ACK: the last pure ACK from the peer before the released frame.
    let ack = f
        .evidence
        .timeline
        .iter()
        .filter(|t| t.frame < after)
        .rfind(|t| t.direction == f.direction.reverse() && t.payload_bytes == Some(0));
    let released: Vec<&JoinedWrite> = j
        .writes
        .iter()
        .filter(|w| w.frames.contains(&after))
        .collect();
    let stall_at = j.frame(after).map(|fw| fw.segment.ts);
    if let (Some(ack), Some(last)) = (ack, released.last()) {
        let ack_at = Timestamp((origin + ack.t_ms * 1e6).max(0.0) as u64);
        let first = released[0];
        let calls = describe_writes(&released);
        if last.write.at < ack_at {
            f.evidence.facts.push(format!(
                "the bytes of {calls} were written {} before the delayed ACK (frame {}) yet left \
                 only after it, in frame {after}: the kernel held them (Nagle); the program did \
                 not wait",
                fmt_duration(ack_at.since(last.write.at)),
                ack.frame
            ));
        } else if first.write.at >= ack_at && first.write.at < ack_at.plus(lag(j)) {
            // The capture point is not at the sender (a real path): the ACK seen there reached
            // the sender only later, and these writes came in between or too close to tell.
            f.evidence.facts.push(format!(
                "{calls} came {} after the delayed ACK (frame {}) passed the capture point, but \
                 the {sender}'s bytes reach this capture point no sooner than {} after its \
                 calls: the ACK may not have reached the {sender} yet, so whether it waited for \
                 the ACK or Nagle held the bytes cannot be told from this capture",
                fmt_duration(first.write.at.since(ack_at)),
                ack.frame,
                fmt_duration(lag(j))
            ));
        } else if first.write.at >= ack_at {
            f.evidence.facts.push(format!(
                "the trace contradicts a Nagle hold: {calls} came only {} after the delayed ACK \
                 (frame {}) reached the capture point — the {sender} waited for the ACK before \
                 writing the rest; Nagle did not hold it",
                fmt_duration(first.write.at.since(ack_at)),
                ack.frame
            ));
        } else {
            f.evidence.facts.push(format!(
                "of {calls}, released in frame {after}, some were written before the delayed \
                 ACK (frame {}) and some after it",
                ack.frame
            ));
        }
    }
    let (Some(at), Some(&socket)) = (stall_at, j.sockets.first()) else {
        return;
    };
    let on_then = nodelay_at(trace, hist, socket, &side.listeners, at);
    let set = hist.iter().find(|h| h.on && j.sockets.contains(&h.socket));
    // Times against the stall's frame (the tracer's clock and the capture's are the same
    // wall clock on one host): what a reader can check beside frame numbers.
    let vs_stall = |t: Timestamp| {
        if t <= at {
            format!("{} before the stall", fmt_duration(at.since(t)))
        } else {
            format!("{} after the stall", fmt_duration(t.since(at)))
        }
    };
    match (on_then, set) {
        (true, _) => {
            f.evidence.facts.push(format!(
                "TCP_NODELAY was on for the example's socket at the quoted stall (frame \
                 {after}): Nagle held nothing there"
            ));
            let all_on = side.data.iter().all(|&s| {
                let first = trace
                    .calls
                    .iter()
                    .find(|c| c.socket == Some(s) && c.kind.writes());
                first.is_some_and(|c| nodelay_at(trace, hist, s, &side.listeners, c.at))
            });
            if all_on && !f.verdict.contains("TCP_NODELAY on") {
                crate::detect::reword_for_nodelay(f);
            }
        }
        (false, Some(h)) if h.at > at => f.evidence.facts.push(format!(
            "TCP_NODELAY was set on the example's socket only {} (frame {after})",
            vs_stall(h.at)
        )),
        (false, Some(h)) => {
            let off = hist
                .iter()
                .find(|o| !o.on && o.at >= h.at && o.at <= at && j.sockets.contains(&o.socket));
            f.evidence.facts.push(match off {
                Some(o) => format!(
                    "TCP_NODELAY was off for the example's socket at the quoted stall (frame \
                     {after}): set {}, then turned off again {}",
                    vs_stall(h.at),
                    vs_stall(o.at)
                ),
                None => format!(
                    "TCP_NODELAY was off for the example's socket at the quoted stall (frame \
                     {after})"
                ),
            });
        }
        (false, None) => {}
    }
}
