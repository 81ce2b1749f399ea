//! Checking a `nagle_hold` claim from its frames.
//!
//! 1. `before` and `after` are data from the sender to the receiver, in that order, with no
//!    sender data between them (every frame of the flow in the range is read) — except copies
//!    of bytes already sent, captured within [`DUPLICATE_MS`] of `before` (the same packet
//!    seen twice by the capture, which Wireshark marks as a retransmission). A later copy is a
//!    real retransmission: the silence was a loss, not a hold.
//! 2. `ack` lies between them and is a pure ACK from the receiver (no payload, ACK set, no
//!    SYN, FIN or RST) whose ACK number covers the end of `before` (wrapping arithmetic).
//! 3. `oldest` is sender data no later than `before`, and no segment from the receiver after
//!    it and before `ack` already acknowledged it.
//! 4. Some sender segment from `oldest` to `before` is below `full_segment`, and so is `after`.
//! 5. With `syns` (and their options captured) — else `full_segment` is unchecked and the
//!    claim only partly verified (not counted as passed, the finding kept): they are SYNs, and `full_segment` is the MSS
//!    the receiver's SYN announced (536 over IPv4, 1220 over IPv6 when it announced none), no
//!    more than the sender's own, less 12 bytes when `timestamps`; `timestamps` matches the
//!    options of `oldest`, `before` and `after` (when their options were captured).
//! 6. Each round trip is one side's segment `x` (occupying sequence space, not a retransmission:
//!    no earlier segment from its side since the flow's first SYN, or the capture's start,
//!    covers its bytes) and the other side's first later segment `y` acknowledging it (every
//!    frame from `x` to `y` is read); the pair lies outside the span from `oldest` to `after`
//!    it would measure — else the handshake's round trip (the SYN from that side to the first
//!    answer acknowledging it, the SYN not retransmitted) is used instead, and without one
//!    the claim's timing is unverifiable. Its value is their time difference (0 when the claim gives no pair).
//! 7. Released by a delayed ACK: the ACK was held (`t(ack) − t(oldest) − rtt_to_receiver`) at
//!    least [`DELAYED_ACK_MIN_MS`], and `t(ack) − t(before) − rtt_to_receiver` is at most
//!    [`DELAYED_ACK_MAX_MS`]; the data left `rtt_to_sender` after the ACK, give or take a
//!    quarter of it plus [`SLACK_MS`].
//! 8. Released by an immediate ACK: the path RTT (`rtt_to_receiver + rtt_to_sender`) is at
//!    least [`MIN_PATH_RTT_MS`]; the hold is below [`DELAYED_ACK_MIN_MS`] and at most a quarter
//!    of the path RTT plus [`SLACK_MS`]; the data left `rtt_to_sender` after the ACK, give or
//!    take a quarter of it plus [`SLACK_MS`]; and the pause
//!    `t(after) − t(before)` is within 0.75–1.25 path RTTs (plus 2 × [`SLACK_MS`] above).

use std::net::SocketAddr;

use super::decode::{Segment, ACK, FIN, RST, SYN};
use super::{ms_between, round_trip, Frames};
use crate::report::{NagleHold, ReleasedBy};

/// Copies of already-sent bytes this close to `before` are the capture seeing one packet twice.
pub const DUPLICATE_MS: f64 = 1.0;

/// The shortest ACK hold a delayed-ACK timer explains. Linux's minimum is 40 ms; the margin
/// covers a capture point a little closer to the receiver than the RTT sample says.
pub const DELAYED_ACK_MIN_MS: f64 = 25.0;
/// The longest: RFC 1122 allows 500 ms; 50 ms of margin for the same reason.
pub const DELAYED_ACK_MAX_MS: f64 = 550.0;
/// The shortest path round trip a round-trip hold is named on.
pub const MIN_PATH_RTT_MS: f64 = 1.0;
/// Scheduling and capture-timestamp slack around a round trip.
pub const SLACK_MS: f64 = 2.0;
/// Bytes the timestamp option takes from every segment's payload.
pub const TIMESTAMP_OPTION_BYTES: u32 = 12;
/// The MSS a peer that announces none allows over IPv4 (RFC 9293 §3.7.1).
pub const DEFAULT_MSS_V4: u32 = 536;
/// The same over IPv6 (RFC 9293 §3.7.1, RFC 8200's 1280-byte minimum MTU).
pub const DEFAULT_MSS_V6: u32 = 1220;

/// Every frame the claim names.
pub(super) fn frames(h: &NagleHold) -> Vec<u64> {
    frames_of(h)
}

fn frames_of(h: &NagleHold) -> Vec<u64> {
    let mut v = vec![h.oldest, h.before, h.ack, h.after];
    v.extend(&h.syns);
    v.extend(h.rtt_to_receiver.iter().flatten());
    v.extend(h.rtt_to_sender.iter().flatten());
    v
}

/// The ranges whose segments must all be read: the pause, oldest to the ACK, each round trip's
/// pair (the answer must be the first), and from the flow's start (its first SYN, else the
/// capture's) to each pair's first frame (which must not be a retransmission).
pub(super) fn ranges(h: &NagleHold) -> Vec<(u64, u64)> {
    let span = |a: u64, b: u64| (a.min(b), a.max(b));
    let start = h.syns.iter().copied().min().unwrap_or(1);
    let mut v = vec![span(h.before, h.after), span(h.oldest, h.ack)];
    for [x, y] in [h.rtt_to_receiver, h.rtt_to_sender].into_iter().flatten() {
        v.extend(round_trip::ranges([x, y], start));
        if x < h.after && y > h.oldest && !h.syns.is_empty() {
            // The handshake's round trip stands in for a pair inside the hold.
            v.push(span(start, h.oldest));
        }
    }
    v
}

pub(super) fn check(
    h: &NagleHold,
    client: SocketAddr,
    server: SocketAddr,
    frames: &Frames,
    out: &mut Vec<String>,
    unsure: &mut Vec<String>,
) {
    // A frame the audit cannot use withdraws nothing: what rests on it is unverifiable.
    let mut cited: Vec<u64> = frames_of(h);
    cited.sort_unstable();
    cited.dedup();
    unsure.extend(cited.iter().filter_map(|&n| frames.unusable(n)));
    for (from, to) in ranges(h) {
        for (n, why) in frames.unusable_in(from, to) {
            if cited.binary_search(&n).is_err() {
                unsure.push(format!("{why} (within frames {from} to {to})"));
            }
        }
    }
    let mut fail = |s: String| out.push(format!("nagle_hold: {s}"));
    // Which side is the sender, as `from_a` (the client) says it.
    let sender_is_client = match (
        h.sender.parse::<SocketAddr>(),
        h.receiver.parse::<SocketAddr>(),
    ) {
        (Ok(s), Ok(r)) if s == client && r == server => true,
        (Ok(s), Ok(r)) if s == server && r == client => false,
        _ => {
            return fail(format!(
                "sender {} and receiver {} are not the example flow's endpoints",
                h.sender, h.receiver
            ))
        }
    };
    let from_sender = |s: &Segment| s.from_a == sender_is_client;
    let (Some(oldest), Some(before), Some(ack), Some(after)) = (
        frames.get(h.oldest),
        frames.get(h.before),
        frames.get(h.ack),
        frames.get(h.after),
    ) else {
        return; // Rule 1 has reported the frame.
    };
    let (b, a, o, k) = (h.before, h.after, h.oldest, h.ack);

    // 1.
    for (n, (_, s)) in [(b, before), (a, after), (o, oldest)] {
        if !from_sender(&s) || s.payload == 0 {
            fail(format!("frame {n} is not data from {}", h.sender));
        }
    }
    if !(o <= b && b < k && k < a) {
        fail(format!(
            "frames out of order: oldest {o} ≤ before {b} < ack {k} < after {a} does not hold"
        ));
    }
    let before_end = before.1.end();
    let duplicate = |t, s: &Segment| {
        (s.end().wrapping_sub(before_end) as i32) <= 0
            && ms_between(before.0, t).abs() <= DUPLICATE_MS
    };
    if let Some((n, _)) = frames.range(b + 1, a.saturating_sub(1)).find(|(n, s)| {
        from_sender(s) && s.payload > 0 && !frames.get(*n).is_some_and(|(t, _)| duplicate(t, s))
    }) {
        fail(format!(
            "frame {n} is sender data between frames {b} and {a}"
        ));
    }

    // 2.
    let ack_seg = ack.1;
    if from_sender(&ack_seg)
        || ack_seg.payload != 0
        || !ack_seg.has(ACK)
        || ack_seg.has(SYN | FIN | RST)
    {
        fail(format!("frame {k} is not a pure ACK from {}", h.receiver));
    }
    if !ack_seg.acks(before.1.end()) {
        fail(format!(
            "frame {k} acknowledges {} but frame {b} ends at {}",
            ack_seg.ack,
            before.1.end()
        ));
    }

    // 3.
    if let Some((n, _)) = frames
        .range(o + 1, k.saturating_sub(1))
        .find(|(_, s)| !from_sender(s) && s.acks(oldest.1.end()))
    {
        fail(format!(
            "frame {n} already acknowledged frame {o} before frame {k}"
        ));
    }

    // 4.
    let full = h.full_segment;
    let small = frames
        .range(o, b)
        .any(|(_, s)| from_sender(&s) && s.payload > 0 && s.payload < full && !s.fragment);
    if !small && frames.unusable_in(o, b).is_empty() {
        fail(format!(
            "no segment from frame {o} to {b} is below the full {full} bytes"
        ));
    }
    if after.1.payload >= full {
        fail(format!(
            "frame {a} carries {} bytes: a full segment ({full}), not a held tail",
            after.1.payload
        ));
    }

    // 5.
    if h.syns.is_empty() {
        unsure.push(format!(
            "no SYNs captured: full_segment {full} is not checked against an MSS"
        ));
    } else {
        let syns: Vec<Segment> = h
            .syns
            .iter()
            .filter_map(|&n| frames.get(n))
            .map(|(_, s)| s)
            .collect();
        for &n in &h.syns {
            if frames.get(n).is_some_and(|(_, s)| !s.has(SYN)) {
                fail(format!("frame {n} is not a SYN"));
            }
        }
        let captured = syns.len() == h.syns.len() && syns.iter().all(|s| s.timestamps.is_some());
        if !captured {
            unsure.push(format!(
                "the SYNs' options were not captured: full_segment {full} is not checked \
                 against an MSS"
            ));
        } else {
            // The sender may send what the receiver announced (the default when it announced
            // nothing), and no more than it announced itself.
            let default = if client.is_ipv4() {
                DEFAULT_MSS_V4
            } else {
                DEFAULT_MSS_V6
            };
            let receiver = syns.iter().find(|s| !from_sender(s)).map(|s| s.mss);
            let sender = syns.iter().find(|s| from_sender(s)).and_then(|s| s.mss);
            let mss = receiver
                .map(|m| m.map_or(default, u32::from))
                .into_iter()
                .chain(sender.map(u32::from))
                .min()
                .unwrap_or(default);
            let want = mss.saturating_sub(if h.timestamps {
                TIMESTAMP_OPTION_BYTES
            } else {
                0
            });
            if want != full {
                fail(format!(
                    "the SYNs allow the sender segments of MSS {mss}, so a full segment is \
                     {want} bytes, not {full}"
                ));
            }
        }
    }
    for (n, (_, s)) in [(o, oldest), (b, before), (a, after)] {
        if s.timestamps.is_some_and(|t| t != h.timestamps) {
            fail(format!(
                "frame {n} {} the timestamp option",
                if h.timestamps { "lacks" } else { "carries" }
            ));
        }
    }

    // 6.
    let start = h.syns.iter().copied().min().unwrap_or(1);
    let mut rtt = |pair: Option<[u64; 2]>, first_from_sender: bool, name: &str| -> Option<f64> {
        let Some([x, y]) = pair else {
            return Some(0.0);
        };
        let x_from_client = sender_is_client == first_from_sender;
        let value = match round_trip::sample(frames, name, [x, y], x_from_client, start) {
            Ok(v) => v?, // None: reported by rule 1, or unverifiable.
            Err(why) => {
                fail(why);
                return None;
            }
        };
        if x < a && y > o {
            // A sample the hold itself supplies cannot vouch for it; the handshake's (the SYN
            // from that side and the first answer acknowledging it) stands in, read here.
            let syn = h.syns.iter().copied().find_map(|n| {
                frames
                    .get(n)
                    .filter(|(_, s)| s.has(SYN) && from_sender(s) == first_from_sender)
                    .map(|got| (n, got))
            });
            let sample = syn.and_then(|(n, (tn, sn))| {
                let earlier = frames
                    .range(start, n.saturating_sub(1))
                    .any(|(_, s)| s.from_a == sn.from_a && s.has(SYN));
                let (m, _) = frames
                    .range(n + 1, o.saturating_sub(1))
                    .find(|(_, s)| s.from_a != sn.from_a && s.acks(sn.end()))?;
                let (tm, _) = frames.get(m)?;
                (!earlier && tm >= tn).then(|| ms_between(tn, tm))
            });
            if sample.is_none() {
                unsure.push(format!(
                    "{name}: frames {x} and {y} lie within the span from frame {o} to {a} it \
                     would measure, and the handshake gives no round trip to check it with"
                ));
            }
            return sample;
        }
        Some(value)
    };
    let to_receiver = rtt(h.rtt_to_receiver, true, "rtt_to_receiver");
    let to_sender = rtt(h.rtt_to_sender, false, "rtt_to_sender");
    let (Some(to_receiver), Some(to_sender)) = (to_receiver, to_sender) else {
        return; // The timing rests on a round trip the audit could not read or use.
    };

    // 7 and 8.
    let hold = ms_between(oldest.0, ack.0) - to_receiver;
    match h.released_by {
        ReleasedBy::DelayedAck => {
            if hold < DELAYED_ACK_MIN_MS {
                fail(format!(
                    "the ACK in frame {k} was held {hold:.3} ms after frame {o} (less \
                     {to_receiver:.3} ms to the receiver): too short for a delayed-ACK timer"
                ));
            }
            let from_before = ms_between(before.0, ack.0) - to_receiver;
            if from_before > DELAYED_ACK_MAX_MS {
                fail(format!(
                    "frame {k} came {from_before:.3} ms after frame {b}: longer than any \
                     delayed-ACK timer"
                ));
            }
            let release = ms_between(ack.0, after.0);
            let slack = to_sender / 4.0 + SLACK_MS;
            if (release - to_sender).abs() > slack {
                fail(format!(
                    "frame {a} left {release:.3} ms after the ACK in frame {k}, not one trip \
                     to the sender ({to_sender:.3} ± {slack:.3} ms)"
                ));
            }
        }
        ReleasedBy::ImmediateAck => {
            let path = to_receiver + to_sender;
            if path < MIN_PATH_RTT_MS {
                fail(format!(
                    "a {path:.3} ms path is under the {MIN_PATH_RTT_MS} ms a round-trip hold \
                     needs"
                ));
            }
            if hold >= DELAYED_ACK_MIN_MS {
                fail(format!(
                    "the ACK in frame {k} was held {hold:.3} ms: a delayed ACK, not an \
                     immediate one"
                ));
            }
            let release = ms_between(ack.0, after.0);
            let slack = to_sender / 4.0 + SLACK_MS;
            if (release - to_sender).abs() > slack {
                fail(format!(
                    "frame {a} left {release:.3} ms after the ACK in frame {k}, not one trip \
                     to the sender ({to_sender:.3} ± {slack:.3} ms)"
                ));
            }
            if hold > path / 4.0 + SLACK_MS {
                fail(format!(
                    "the ACK in frame {k} was held {hold:.3} ms: not immediate on a \
                     {path:.3} ms path"
                ));
            }
            let pause = ms_between(before.0, after.0);
            if pause < 0.75 * path || pause > 1.25 * path + 2.0 * SLACK_MS {
                fail(format!(
                    "the pause from frame {b} to {a} is {pause:.3} ms, not one {path:.3} ms \
                     round trip"
                ));
            }
        }
    }
}
