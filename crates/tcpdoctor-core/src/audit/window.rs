//! Checking a `window_wait` claim from its frames.
//!
//! 1. `first` ≤ `before` < `after`; `first`, `before` and `after` carry data from the sender,
//!    and from `first` to `before` the sender sent exactly `segments` data segments with
//!    `bytes` in all (every frame of the flow in the range is read).
//! 2. The flight is at least [`MIN_FLIGHT`] segments, and small: `bytes` × 2 ≤ `segments` ×
//!    `full_segment` (a window counted in bytes would not have stopped it).
//! 3. With `syns` (their options captured): `full_segment` is no more than the smallest MSS
//!    they announce (the default when the receiver's announces none); without, the claim is
//!    only partly verified.
//! 4. No data from the sender between `before` and `after`.
//! 5. `ack` is from the receiver, after `first` and before `after` in the capture, and
//!    acknowledges past `first`'s sequence number (some of the flight); `after` passed the
//!    capture point no earlier than it.

use super::decode::SYN;
use super::nagle::{DEFAULT_MSS_V4, DEFAULT_MSS_V6};
use super::{ms_between, Frames};
use crate::report::WindowWait;

/// A flight of fewer segments proves no window: the initial window (RFC 6928, Linux's
/// `TCP_INIT_CWND`) is 10 packets, and Linux does not go below it without a loss.
pub const MIN_FLIGHT: u32 = 10;

pub(super) fn cited(w: &WindowWait) -> Vec<u64> {
    let mut v = vec![w.first, w.before, w.ack, w.after];
    v.extend(&w.syns);
    v
}

pub(super) fn ranges(w: &WindowWait) -> Vec<(u64, u64)> {
    vec![(w.first, w.after.max(w.first))]
}

pub(super) fn check(
    w: &WindowWait,
    client_is_v4: bool,
    frames: &Frames,
    out: &mut Vec<String>,
    unsure: &mut Vec<String>,
) {
    let mut cited = cited(w);
    cited.sort_unstable();
    cited.dedup();
    unsure.extend(cited.iter().filter_map(|&n| frames.unusable(n)));
    for (from, to) in ranges(w) {
        for (n, why) in frames.unusable_in(from, to) {
            if cited.binary_search(&n).is_err() {
                unsure.push(format!("{why} (within frames {from} to {to})"));
            }
        }
    }
    let mut fail = |s: String| out.push(format!("window_wait: {s}"));
    let (f, b, k, a) = (w.first, w.before, w.ack, w.after);
    let (Some(first), Some(_), Some(ack), Some(after)) =
        (frames.get(f), frames.get(b), frames.get(k), frames.get(a))
    else {
        return; // Rule 1 of the audit has reported the frame.
    };
    // The sender is the side `first` comes from (the finding's direction is checked by the
    // timeline); `before` and `after` must be the same side.
    let from_sender = |s: &super::decode::Segment| s.from_a == first.1.from_a;

    // 1.
    if !(f <= b && b < a) {
        fail(format!("frames {f}, {b}, {a} are not in order"));
    }
    let mut segments = 0u32;
    let mut bytes = 0u64;
    for (_, s) in frames.range(f, b) {
        if from_sender(&s) && s.payload > 0 {
            segments += 1;
            bytes += u64::from(s.payload);
        }
    }
    for (n, got) in [(f, first), (b, frames.get(b).unwrap_or(first)), (a, after)] {
        if !from_sender(&got.1) || got.1.payload == 0 {
            fail(format!("frame {n} is not data from the sender"));
        }
    }
    if segments != w.segments || bytes != w.bytes {
        fail(format!(
            "frames {f} to {b} carry {segments} data segments of {bytes} bytes from the \
             sender, not {} of {}",
            w.segments, w.bytes
        ));
    }

    // 2.
    if w.segments < MIN_FLIGHT {
        fail(format!(
            "a flight of {} segments proves no window",
            w.segments
        ));
    }
    if w.bytes * 2 > u64::from(w.segments) * u64::from(w.full_segment) {
        fail(format!(
            "{} bytes in {} segments are not small next to full segments of {}",
            w.bytes, w.segments, w.full_segment
        ));
    }

    // 3.
    let syns: Vec<_> = w.syns.iter().filter_map(|&n| frames.get(n)).collect();
    if w.syns.is_empty() || syns.len() != w.syns.len() {
        unsure.push(format!(
            "no SYNs captured: full_segment {} is not checked against an MSS",
            w.full_segment
        ));
    } else {
        for (n, (_, s)) in w.syns.iter().zip(&syns) {
            if !s.has(SYN) {
                fail(format!("frame {n} is not a SYN"));
            }
        }
        let default = if client_is_v4 {
            DEFAULT_MSS_V4
        } else {
            DEFAULT_MSS_V6
        };
        let announced = syns.iter().map(|(_, s)| s.mss.map_or(default, u32::from));
        if syns.iter().all(|(_, s)| s.timestamps.is_some()) {
            if let Some(mss) = announced.min() {
                if w.full_segment > mss {
                    fail(format!(
                        "full_segment {} exceeds the {mss}-byte MSS the SYNs allow",
                        w.full_segment
                    ));
                }
            }
        } else {
            unsure.push("the SYNs' options were not captured".into());
        }
    }

    // 4.
    if let Some((n, _)) = frames
        .range(b + 1, a.saturating_sub(1))
        .find(|(_, s)| from_sender(s) && s.payload > 0)
    {
        fail(format!(
            "frame {n} is sender data between frames {b} and {a}: no pause"
        ));
    }

    // 5.
    if from_sender(&ack.1) {
        fail(format!("frame {k} is not from the receiver"));
    }
    if !(f < k && k < a) {
        fail(format!("frame {k} does not lie between frames {f} and {a}"));
    }
    if !ack.1.acks(first.1.seq.wrapping_add(1)) {
        fail(format!(
            "frame {k} does not acknowledge any of the flight that starts in frame {f}"
        ));
    }
    if ms_between(ack.0, after.0) < 0.0 {
        fail(format!(
            "frame {a} passed the capture point before frame {k}"
        ));
    }
}
