//! Checking a round-trip sample from its two frames.
//!
//! A sample is one side's segment `x` and the other side's answer `y`:
//! 1. `x` comes from the side the claim says and occupies sequence space (data, SYN or FIN);
//! 2. `y` comes from the other side, no earlier than `x`, and acknowledges all of `x`;
//! 3. `y` is the *first* segment from that side acknowledging `x` (every frame between is read);
//! 4. `x` is not a retransmission: no earlier segment from its side since `start` (the flow's
//!    first SYN, or the capture's first frame) covers any of its bytes — the ACK of a copy may
//!    answer the original, and the time would then be no round trip.
//!
//! Its value is `t(y) − t(x)`. A data → ACK time can be longer than the path's round trip (a
//! delayed ACK) but never shorter, so a span that holds the sample holds a round trip.

use super::decode::Segment;
use super::{ms_between, Frames};

/// The frames [`sample`] reads: the pair, and from `start` to the pair's first frame.
pub(super) fn ranges([x, y]: [u64; 2], start: u64) -> [(u64, u64); 2] {
    [(x.min(y), x.max(y)), (start.min(x), x)]
}

/// The round trip between `x` and `y` in milliseconds, where `x` is the client's segment when
/// `x_from_client`. `Ok(None)` when a frame was not read (rule 1 of the audit reports it, or it
/// is unverifiable); `Err` says which rule failed.
pub(super) fn sample(
    frames: &Frames,
    name: &str,
    [x, y]: [u64; 2],
    x_from_client: bool,
    start: u64,
) -> Result<Option<f64>, String> {
    let (Some((tx, sx)), Some((ty, sy))) = (frames.get(x), frames.get(y)) else {
        return Ok(None);
    };
    if sx.from_a != x_from_client || sy.from_a == x_from_client {
        return Err(format!(
            "{name}: frames {x} and {y} are not a segment and the other side's answer"
        ));
    }
    if sx.seq_len() == 0 {
        return Err(format!(
            "{name}: frame {x} occupies no sequence space: nothing to acknowledge"
        ));
    }
    if !sy.acks(sx.end()) || ty < tx || y <= x {
        return Err(format!("{name}: frame {y} does not acknowledge frame {x}"));
    }
    if let Some((m, _)) = frames
        .range(x + 1, y.saturating_sub(1))
        .find(|(_, s)| s.from_a != sx.from_a && s.acks(sx.end()))
    {
        return Err(format!(
            "{name}: frame {m}, not {y}, is the first to acknowledge frame {x}"
        ));
    }
    if let Some((m, _)) = frames
        .range(start.min(x), x.saturating_sub(1))
        .find(|(_, s)| overlaps(s, &sx))
    {
        return Err(format!(
            "{name}: frame {x} retransmits bytes frame {m} sent: not a round-trip sample"
        ));
    }
    Ok(Some(ms_between(tx, ty).max(0.0)))
}

/// Whether `s`, from the same side as `x`, occupied any of `x`'s sequence space.
fn overlaps(s: &Segment, x: &Segment) -> bool {
    s.from_a == x.from_a
        && s.seq_len() > 0
        && (s.seq.wrapping_sub(x.end()) as i32) < 0
        && (x.seq.wrapping_sub(s.end()) as i32) < 0
}
