//! `window_limited`: a bulk transfer whose bytes in flight are capped by a small socket buffer,
//! so throughput ≈ cap / RTT: fast on localhost, slow across a WAN.
//!
//! Rule (PHYSICS §7: the in-flight window is bounded by min(sender `SO_SNDBUF`, receiver
//! `SO_RCVBUF`)), per flow and direction of the data:
//! 1. A *transfer* is a run of new data in one direction with no pause longer than
//!    [`END_GAP_RTTS`] round trips and no new data the other way (one turn: sequential
//!    request/response exchanges are `rtt_bound`'s business, never one transfer). Its time is cut into *round trips*: a round trip starts at
//!    the first data segment after the previous one ended and lasts one path RTT (handshake,
//!    else fastest data → ACK). The bytes sent in one round trip are the bytes in flight,
//!    wherever the capture was taken (the seq − ACK difference only shows the flight at the
//!    sender's end). Only paths of at least [`MIN_RTT`] count: on loopback a window costs
//!    nothing worth naming.
//! 2. A transfer qualifies with at least [`MIN_BYTES`] and [`MIN_RTTS`] complete round trips,
//!    and no retransmission (a lossy transfer is limited by congestion control, not a buffer).
//! 3. The *ceiling* is the p90 of bytes per round trip. The transfer is *capped* when, from the
//!    first round trip that reaches the ceiling on, at least [`MIN_RTTS`] round trips follow and
//!    at least [`MIN_HIT_SHARE`] of them carry within [`CEILING_BAND`] of it, and the achieved
//!    throughput is at most [`MAX_THROUGHPUT_RATIO`] × ceiling / RTT. Slow start never
//!    qualifies: a flight that doubles every round trip reaches its p90 only at the end.
//!    3b. When the round trips show no ceiling, the same test is made on *flights*: the
//!    transfer cut at silences of at least [`MIN_FLIGHT_SILENCE_RTT`] round trips and
//!    [`MIN_IDLE_GAP_RATIO`] × the longest gap inside the flight so far. A paced sender whose
//!    pacing slows (BBR's gain cycle) takes longer than a round trip over its capped flight,
//!    which then straddles the cut between round trips. Only the sender's own limit (4a and
//!    4b's silence) is named this way.
//! 4. The limiter: when the ceiling is at least [`RECEIVER_SHARE`] of the window the receiver
//!    advertised (scaled; both SYNs must be in the capture) during those round trips, it is
//!    the receiver's window (`SO_RCVBUF` or a slow reading application). Otherwise the sender
//!    held back on its own (`SO_SNDBUF`, or the application writing too little), but only when
//!    nothing says a bottleneck on the path set the pace instead:
//!    4a. At the sender's end (a round trip's first segment is acknowledged at least half a
//!    round trip after it left) the ACKs come back within [`MAX_RTT_INFLATION`] × the path
//!    RTT (median): a longer round trip is a queue on the path, which a bigger buffer would
//!    only fill. (At the receiver's end the ACK follows the data at once: not visible there.)
//!    4b. The sender idles part of each round trip, waiting for ACKs: its data fills at most
//!    [`MAX_BUSY_SHARE`] of the round trip (median; a round trip's data fills the span from
//!    its first segment to its last plus one mean spacing between them, so that segments a
//!    link spaced evenly fill it whatever their number — their span alone falls short by up
//!    to one spacing, 77% of a round trip for 4 segments 1.2 ms apart in 4.7 ms), or — a paced sender (BBR, `fq`) spreads
//!    a capped flight over most of it — the silence from a round trip's last segment to the
//!    next one's first is at least [`MIN_IDLE_GAP_RATIO`] × the longest gap inside it
//!    (median). A bottleneck delivers back to back at its own rate, and a sender it clocks
//!    (ACKs spaced by the link) or that paces at its rate has no such silence.
//!    An application writing a steady trickle has no such silence either; one that hands the
//!    socket a fixed amount per round trip looks exactly like a send buffer in any capture,
//!    which is why the finding names both, and both fixes.
//! 5. Per server and direction, one finding over the capped transfers. Time lost is half of
//!    their steady time (what one doubling of the buffer saves while the path has room).
//!    Critical from [`CRITICAL_STEADY`] of capped transfer time. The example is the transfer
//!    of the most bytes; of equal ones, the first judged in the capture (the smallest
//!    position, [`At`]: its end), so that any division of the flows among threads names it.

use std::any::Any;
use std::time::Duration;

use super::{
    of, rel_ms, At, Detector, FindingHead, FlowMarks, FlowView, Groups, Nanos, PerGroup, ShardMap,
    Slots,
};
use crate::flow::{Direction, PacketRef, SegmentEvent, SegmentKind};
use crate::report::{Evidence, Finding, FindingKind, FlowRef, Severity, TimelineEntry};
use crate::seq::SeqNum;
use crate::stats::{round3, Histogram};
use crate::time::Timestamp;
use crate::units::fmt_duration;

pub const MIN_RTT: Duration = Duration::from_millis(1);
pub const MIN_BYTES: u64 = 256 * 1024;
pub const MIN_RTTS: usize = 8;
/// A pause this many round trips long ends a transfer.
pub const END_GAP_RTTS: u32 = 2;
/// A round trip "hits the ceiling" when it carries at least (1 − this) × the ceiling.
pub const CEILING_BAND: f64 = 0.15;
pub const MIN_HIT_SHARE: f64 = 0.7;
pub const MAX_THROUGHPUT_RATIO: f64 = 1.2;
pub const RECEIVER_SHARE: f64 = 0.9;
/// Median share of a round trip between its first and last data segment, for a sender limit.
pub const MAX_BUSY_SHARE: f64 = 0.8;
/// A paced sender's silence closing each round trip, in multiples of the longest gap inside it
/// (median).
pub const MIN_IDLE_GAP_RATIO: f64 = 2.0;
/// A silence that ends a flight (rule 3b), in round trips at least.
pub const MIN_FLIGHT_SILENCE_RTT: f64 = 0.25;
/// At the sender's end, the first segment of a round trip ACKed after at most this × the path
/// RTT (median): longer is a queue on the path.
pub const MAX_RTT_INFLATION: f64 = 1.25;
/// Round trips still waiting for their first segment's ACK that an ACK is checked against.
const ACK_LOOKBACK: usize = 4;
pub const CRITICAL_STEADY: Duration = Duration::from_secs(10);
/// Round trips remembered per transfer (bounded memory); a longer transfer is judged in parts.
const MAX_ROUND_TRIPS: usize = 512;

/// Data sent in one round trip (or one flight, rule 3b). 64 bytes: the first round trip of
/// every open flow's transfer is one.
#[derive(Clone, Copy, Debug)]
struct RoundTrip {
    /// When its first segment was seen.
    start: Timestamp,
    last: PacketRef,
    bytes: u64,
    /// The longest silence between two of its segments.
    max_gap: Nanos,
    /// When an ACK first covered its first segment, after `start` ([`NOT_ACKED`]: not yet).
    acked_after: u64,
    /// Largest window the receiver advertised during it (a scaled window is below 2³⁰).
    max_window: u32,
    /// The end of its first segment.
    first_end: SeqNum,
    /// Data segments it carries.
    segments: u32,
}

/// [`RoundTrip::acked_after`] before an ACK covered the first segment.
const NOT_ACKED: u64 = u64::MAX;

/// A window as kept: an advertised window, scaled, is at most 65535 × 2¹⁴, below 2³².
fn window32(window: u64) -> u32 {
    u32::try_from(window).unwrap_or(u32::MAX)
}

impl RoundTrip {
    /// A round trip that starts with segment `ev`, under an advertised `window`.
    fn starting(ev: &SegmentEvent, window: u32) -> RoundTrip {
        RoundTrip {
            start: ev.pkt.ts,
            last: ev.pkt,
            bytes: 0,
            max_gap: Nanos::default(),
            acked_after: NOT_ACKED,
            max_window: window,
            first_end: ev.seq.plus(ev.len),
            segments: 0,
        }
    }

    fn max_gap(&self) -> Duration {
        self.max_gap.get()
    }

    fn acked_after(&self) -> Option<Duration> {
        (self.acked_after != NOT_ACKED).then(|| Duration::from_nanos(self.acked_after))
    }

    /// An ACK up to `ack` at `ts`, advertising `window`, was seen during this round trip.
    fn on_ack(&mut self, window: u32, ack: SeqNum, ts: Timestamp) {
        self.max_window = self.max_window.max(window);
        self.on_ack_seq(ack, ts);
    }

    /// An ACK up to `ack` at `ts` covers this round trip's first segment.
    fn on_ack_seq(&mut self, ack: SeqNum, ts: Timestamp) {
        if self.acked_after == NOT_ACKED && ack.diff(self.first_end) >= 0 {
            self.acked_after = ts.0.saturating_sub(self.start.0);
        }
    }
}

/// A transfer in progress: 88 bytes, boxed in the flow's [`DirState`]. Until its first round
/// trip or flight ends, the current flight is the current round trip (both start with the
/// transfer and take the same segments and ACKs), so only the round trip is kept.
#[derive(Debug)]
struct Transfer {
    rtt: Nanos,
    /// The round trips and flights completed so far and the current flight, allocated when
    /// the first of them ends: most transfers (a request, a response) end within their first
    /// round trip, and every open flow carries one.
    past: Option<Box<Past>>,
    current: RoundTrip,
    retransmitted: bool,
    /// Both SYNs were seen, so advertised windows are scaled correctly.
    window_exact: bool,
}

#[derive(Debug)]
struct Past {
    done: Vec<RoundTrip>,
    /// Rule 3b: the same data cut into flights at silences (at most [`MAX_ROUND_TRIPS`]).
    flights: Vec<RoundTrip>,
    /// The current flight.
    flight: RoundTrip,
}

impl Transfer {
    fn rtt(&self) -> Duration {
        self.rtt.get()
    }

    fn done(&self) -> &[RoundTrip] {
        self.past.as_ref().map_or(&[], |p| &p.done)
    }

    fn flights(&self) -> &[RoundTrip] {
        self.past.as_ref().map_or(&[], |p| &p.flights)
    }

    /// The current flight: the current round trip until the first of either ends.
    fn flight(&self) -> &RoundTrip {
        self.past.as_ref().map_or(&self.current, |p| &p.flight)
    }

    /// The past, allocated when the first round trip or flight ends (the current flight is
    /// then still the current round trip).
    fn past_mut(&mut self) -> &mut Past {
        let current = self.current;
        self.past.get_or_insert_with(|| {
            Box::new(Past {
                done: Vec::new(),
                flights: Vec::new(),
                flight: current,
            })
        })
    }
}

/// 16 bytes per direction of every open flow.
#[derive(Default)]
struct DirState {
    window: u32,
    window_exact: bool,
    /// Boxed: most open flows have none, and the slot of every open flow holds two.
    transfer: Option<Box<Transfer>>,
}

/// Which buffer held the flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Limiter {
    Receiver,
    Sender,
}

/// A transfer that qualified.
#[derive(Clone, Debug)]
struct Capped {
    ceiling: u64,
    window: u64,
    limiter: Limiter,
    rtt: Duration,
    bytes: u64,
    steady: Duration,
    steady_rtts: usize,
    /// Counted per flight (rule 3b), not per round trip.
    flights: bool,
    throughput: f64,
    busy_share: f64,
    /// Rule 4b: the share its segments fill, one spacing added to the span (median).
    filled_share: f64,
    /// Rule 4b's silence closing a round trip / the longest inside it (median), when known.
    idle_gap_ratio: Option<f64>,
    /// Rule 4a: the first segment's ACK delay / path RTT at the sender's end (median).
    ack_rtt_ratio: Option<f64>,
    hits: Vec<RoundTrip>,
}

#[derive(Default)]
struct State {
    transfers: u64,
    receiver: u64,
    flows: u64,
    bytes: u64,
    steady: Duration,
    ceiling: Histogram,
    rtt_us: Histogram,
    example: Option<Example>,
}

/// The transfer a finding shows.
struct Example {
    /// Where it was judged ([`At`]): of transfers of equal bytes, the first is kept.
    at: At,
    flow: FlowRef,
    capped: Capped,
}

impl Example {
    /// Whether this one is shown rather than `kept`: more bytes, or as many and earlier.
    fn beats(&self, kept: &Option<Example>) -> bool {
        kept.as_ref().is_none_or(|k| {
            (self.capped.bytes, std::cmp::Reverse(self.at))
                > (k.capped.bytes, std::cmp::Reverse(k.at))
        })
    }
}

#[derive(Default)]
pub struct WindowLimited {
    open: Slots<[DirState; 2]>,
    state: PerGroup<State>,
    marks: FlowMarks,
}

impl WindowLimited {
    fn close(&mut self, flow: &FlowView, dir: Direction, t: Transfer) {
        let Some(c) = judge(&t) else {
            return;
        };
        let st = self.state.get(flow.group, dir);
        st.transfers += 1;
        st.receiver += u64::from(c.limiter == Limiter::Receiver);
        st.bytes += c.bytes;
        st.steady += c.steady;
        st.ceiling.record(c.ceiling as f64);
        st.rtt_us.record_duration(c.rtt);
        self.marks.count(flow.flow.id, dir, &mut st.flows);
        let example = Example {
            at: flow.at,
            flow: flow.flow_ref(),
            capped: c,
        };
        if example.beats(&st.example) {
            st.example = Some(example);
        }
    }
}

impl Detector for WindowLimited {
    fn wants_segments(&self) -> bool {
        true
    }

    fn on_segment(&mut self, flow: &FlowView, ev: &SegmentEvent) {
        if ev.syn || ev.rst {
            return;
        }
        let dirs = self.open.get_or_default(flow);
        if ev.has_ack {
            // This segment advertises the window for data flowing the other way.
            let d = &mut dirs[ev.dir.reverse().index()];
            let window = window32(ev.window);
            d.window = window;
            d.window_exact = ev.window_exact;
            if let Some(t) = d.transfer.as_mut() {
                t.current.on_ack(window, ev.ack, ev.pkt.ts);
                if let Some(p) = t.past.as_deref_mut() {
                    p.flight.on_ack(window, ev.ack, ev.pkt.ts);
                    let done = p.done.iter_mut().rev().take(ACK_LOOKBACK);
                    for r in done.chain(p.flights.iter_mut().rev().take(ACK_LOOKBACK)) {
                        r.on_ack_seq(ev.ack, ev.pkt.ts);
                    }
                }
                // A transfer that starts right after the handshake (an upload: the SYN-ACK,
                // skipped above, is the only segment before it) learns here that both SYNs
                // were seen.
                t.window_exact |= ev.window_exact;
            }
        }
        if ev.len == 0 {
            return;
        }
        // New data the other way (a request) ends the other side's transfer: a transfer is
        // one turn, so a run of request/response exchanges is never one transfer.
        let ended = if ev.kind == SegmentKind::NewData {
            dirs[ev.dir.reverse().index()].transfer.take()
        } else {
            None
        };
        let dirs = match ended {
            Some(t) => {
                self.close(flow, ev.dir.reverse(), *t);
                self.open.get_or_default(flow)
            }
            None => dirs,
        };
        let d = &mut dirs[ev.dir.index()];
        let window = d.window;
        let window_exact = d.window_exact;
        match ev.kind {
            SegmentKind::NewData | SegmentKind::DataAfterGap => {}
            _ => {
                if let Some(t) = d.transfer.as_mut() {
                    t.retransmitted = true;
                }
                return;
            }
        }
        let fresh = |rtt| Transfer {
            rtt,
            past: None,
            current: RoundTrip::starting(ev, window),
            retransmitted: false,
            window_exact,
        };
        let mut ended = None;
        match d.transfer.as_mut() {
            Some(t) => {
                // A pause of END_GAP_RTTS ends the transfer; a long one is judged in parts.
                let paused = ev.pkt.ts.since(t.current.last.ts) > t.rtt() * END_GAP_RTTS;
                let next_rtt = ev.pkt.ts.since(t.current.start) >= t.rtt();
                if paused || (next_rtt && t.done().len() == MAX_ROUND_TRIPS) {
                    let rtt = t.rtt;
                    ended = d.transfer.replace(Box::new(fresh(rtt)));
                } else if next_rtt {
                    // The flight parts from the round trip here: the past keeps it as it
                    // stands (the round trip ending now) before a new round trip begins.
                    t.past_mut();
                    let next = RoundTrip::starting(ev, window);
                    let current = std::mem::replace(&mut t.current, next);
                    t.past_mut().done.push(current);
                }
            }
            None => match flow.flow.rtt() {
                Some(rtt) if rtt >= MIN_RTT => d.transfer = Some(Box::new(fresh(Nanos::new(rtt)))),
                _ => return,
            },
        }
        if let Some(t) = d.transfer.as_mut() {
            // Rule 3b: a flight ends at a silence of at least MIN_FLIGHT_SILENCE_RTT round
            // trips and MIN_IDLE_GAP_RATIO × the longest gap inside it.
            let flight = t.flight();
            let gap = ev.pkt.ts.since(flight.last.ts);
            let silence = gap.as_secs_f64() >= MIN_FLIGHT_SILENCE_RTT * t.rtt().as_secs_f64()
                && gap.as_secs_f64() >= MIN_IDLE_GAP_RATIO * flight.max_gap().as_secs_f64();
            if silence && t.flights().len() < MAX_ROUND_TRIPS {
                let next = RoundTrip::starting(ev, window);
                let p = t.past_mut();
                let flight = std::mem::replace(&mut p.flight, next);
                p.flights.push(flight);
            }
            let c = &mut t.current;
            c.bytes += u64::from(ev.len);
            c.segments = c.segments.saturating_add(1);
            c.max_gap = c.max_gap.max(Nanos::new(ev.pkt.ts.since(c.last.ts)));
            c.last = ev.pkt;
            // Without a past the flight is the round trip, just updated the same way (no
            // silence: the first one would have ended it).
            if let Some(p) = t.past.as_deref_mut() {
                if !silence {
                    p.flight.max_gap = p.flight.max_gap.max(Nanos::new(gap));
                }
                p.flight.bytes += u64::from(ev.len);
                p.flight.segments = p.flight.segments.saturating_add(1);
                p.flight.last = ev.pkt;
            }
        }
        if let Some(t) = ended {
            self.close(flow, ev.dir, *t);
        }
    }

    fn on_flow_end(&mut self, flow: &FlowView) {
        if let Some(dirs) = self.open.remove(flow) {
            for (i, d) in dirs.into_iter().enumerate() {
                let dir = if i == 0 {
                    Direction::ClientToServer
                } else {
                    Direction::ServerToClient
                };
                if let Some(t) = d.transfer {
                    self.close(flow, dir, *t);
                }
            }
        }
        self.marks.forget(flow.flow.id);
    }

    super::hands_over_its_state!();

    fn absorb(&mut self, state: Box<dyn Any + Send>, map: &ShardMap) {
        let other: PerGroup<State> = super::handed(state);
        self.state.absorb(other, map, |st, o| {
            st.transfers += o.transfers;
            st.receiver += o.receiver;
            st.flows += o.flows;
            st.bytes += o.bytes;
            st.steady += o.steady;
            st.ceiling.merge(&o.ceiling);
            st.rtt_us.merge(&o.rtt_us);
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
        for (group, dir, mut st) in self.state.drain() {
            let Some(example) = st.example.take() else {
                continue;
            };
            out.push(finding(group, dir, &st, example, groups));
        }
        out
    }
}

/// The state this detector keeps per open flow, by size ([`super::tests`] keeps it small).
#[cfg(test)]
pub(super) fn per_flow_sizes() -> Vec<(&'static str, usize)> {
    use std::mem::size_of;
    vec![
        ("window_limited::RoundTrip", size_of::<RoundTrip>()),
        ("window_limited::Transfer", size_of::<Transfer>()),
        ("window_limited slot", size_of::<(u64, [DirState; 2])>()),
    ]
}

/// Whether a transfer was held at a ceiling (rules 2-4).
fn judge(t: &Transfer) -> Option<Capped> {
    let bytes = t.done().iter().map(|r| r.bytes).sum::<u64>() + t.current.bytes;
    // Round trips and flights are two cuts of the same data.
    debug_assert_eq!(
        bytes,
        t.flights().iter().map(|r| r.bytes).sum::<u64>() + t.flight().bytes,
        "the flights of a transfer carry its round trips' bytes"
    );
    if bytes < MIN_BYTES || t.done().len() < MIN_RTTS || t.retransmitted {
        return None;
    }
    if let Some(c) = judge_units(t, t.done(), bytes, false) {
        return Some(c);
    }
    // Rule 3b: the same, counted per flight.
    judge_units(t, t.flights(), bytes, true)
}

/// Rules 3 and 4 over `units`: round trips, or flights (then only a paced sender's own limit,
/// rule 4b's silence, can be named).
fn judge_units(t: &Transfer, units: &[RoundTrip], bytes: u64, flights: bool) -> Option<Capped> {
    // When the unit after the last one started.
    let end = if flights {
        t.flight().start
    } else {
        t.current.start
    };
    if units.len() < MIN_RTTS {
        return None;
    }
    let mut sorted: Vec<u64> = units.iter().map(|r| r.bytes).collect();
    sorted.sort_unstable();
    let ceiling = sorted[(sorted.len() * 9).div_ceil(10) - 1];
    let floor = (1.0 - CEILING_BAND) * ceiling as f64;
    let first = units.iter().position(|r| r.bytes as f64 >= floor)?;
    let steady = &units[first..];
    let hits: Vec<RoundTrip> = steady
        .iter()
        .copied()
        .filter(|r| r.bytes as f64 >= floor)
        .collect();
    if steady.len() < MIN_RTTS || (hits.len() as f64) < MIN_HIT_SHARE * steady.len() as f64 {
        return None;
    }
    let steady_bytes: u64 = steady.iter().map(|r| r.bytes).sum();
    let span = end.since(steady[0].start);
    let throughput = steady_bytes as f64 / span.as_secs_f64().max(1e-9);
    let rtt = t.rtt().as_secs_f64();
    if throughput > MAX_THROUGHPUT_RATIO * ceiling as f64 / rtt {
        return None;
    }
    let mut windows: Vec<u64> = steady.iter().map(|r| u64::from(r.max_window)).collect();
    windows.sort_unstable();
    let window = windows[windows.len() / 2];
    let busy_share = median(
        steady
            .iter()
            .map(|r| r.last.ts.since(r.start).as_secs_f64() / rtt)
            .collect(),
    )?;
    let filled_share = median(steady.iter().map(|r| filled(r) / rtt).collect())?;
    // Rule 4b: the silence after each round trip (to the next one's first segment) against
    // the longest one inside it.
    let next_starts = steady.iter().skip(1).map(|r| r.start).chain([end]);
    let idle_gap_ratio = median(
        steady
            .iter()
            .zip(next_starts)
            .filter(|(r, _)| !r.max_gap().is_zero())
            .map(|(r, next)| next.since(r.last.ts).as_secs_f64() / r.max_gap().as_secs_f64())
            .collect(),
    );
    // Rule 4a: at the sender's end, how long the first segment of a round trip waited for its ACK.
    let ack_rtt_ratio = median(
        steady
            .iter()
            .filter_map(RoundTrip::acked_after)
            .map(|d| d.as_secs_f64() / rtt)
            .collect(),
    )
    .filter(|&r| r >= 0.5);
    // Without both SYNs the window scale is unknown, and so is the receiver's real window.
    let receiver_capped = t.window_exact && ceiling as f64 >= RECEIVER_SHARE * window as f64;
    let queued = ack_rtt_ratio.is_some_and(|r| r > MAX_RTT_INFLATION);
    let paced = idle_gap_ratio.is_some_and(|r| r >= MIN_IDLE_GAP_RATIO);
    let idle = paced || (filled_share <= MAX_BUSY_SHARE && !flights);
    let limiter = if flights {
        if receiver_capped || !paced || queued {
            return None;
        }
        Limiter::Sender
    } else if window > 0 && receiver_capped {
        Limiter::Receiver
    } else if idle && !queued {
        Limiter::Sender
    } else {
        return None;
    };
    Some(Capped {
        ceiling,
        window,
        limiter,
        rtt: t.rtt(),
        bytes,
        steady: span,
        steady_rtts: steady.len(),
        flights,
        throughput,
        busy_share,
        filled_share,
        idle_gap_ratio,
        ack_rtt_ratio,
        hits,
    })
}

/// Seconds of a round trip its segments fill (rule 4b): from its first segment to its last,
/// plus one mean spacing between them — the slot of the last one. Segments a link spaced
/// evenly fill the whole round trip however few they are, where their span alone falls short
/// of it by up to one spacing (4 segments 1.2 ms apart span 3.6 ms of a 4.7 ms round trip,
/// 77%, and fill 4.8 ms). One segment fills nothing.
fn filled(r: &RoundTrip) -> f64 {
    let span = r.last.ts.since(r.start).as_secs_f64();
    match r.segments {
        0 | 1 => span,
        n => span * f64::from(n) / f64::from(n - 1),
    }
}

/// The median of `v` (the upper one of an even count), none when empty.
fn median(mut v: Vec<f64>) -> Option<f64> {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

fn kib(bytes: u64) -> String {
    if bytes >= 1024 * 1024 {
        format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
    } else {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    }
}

fn rate(bytes_per_s: f64) -> String {
    format!("{:.2} MB/s", bytes_per_s / 1e6)
}

fn finding(
    group: usize,
    dir: Direction,
    st: &State,
    Example {
        flow: example_flow,
        capped: c,
        at: _,
    }: Example,
    groups: &Groups,
) -> Finding {
    let writer = dir.sender();
    let reader = dir.receiver();
    let rtt_ms = round3(crate::units::ms(c.rtt));
    let cap_rate = c.ceiling as f64 / c.rtt.as_secs_f64();
    let whose = match c.limiter {
        Limiter::Receiver => {
            format!("the {reader}'s receive window (SO_RCVBUF, or an application reading slowly)")
        }
        Limiter::Sender => {
            format!("the {writer}'s send buffer (SO_SNDBUF) or an application writing too little")
        }
    };
    let severity = if st.steady >= CRITICAL_STEADY {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let verdict = format!(
        "Window-limited: the {writer} sent at most ~{} per {rtt_ms:.1} ms round trip, the bytes \
         in flight capped by {whose}; that allows {} and the transfer got {}.",
        kib(c.ceiling),
        rate(cap_rate),
        rate(c.throughput),
    );
    let mut ev = Evidence::default();
    ev.facts.push(if c.flights {
        format!(
            "ceiling: {} ({} B) sent per flight in {} of {} steady flights (p90; a flight counts \
             when within {:.0}% of it; counted per flight, each a round trip or a paced flight \
             that spilled into the next with no silence between); no retransmission",
            kib(c.ceiling),
            c.ceiling,
            c.hits.len(),
            c.steady_rtts,
            CEILING_BAND * 100.0
        )
    } else {
        format!(
            "ceiling: {} ({} B) sent per round trip in {} of {} steady round trips (p90; a round \
             trip counts when within {:.0}% of it); no retransmission",
            kib(c.ceiling),
            c.ceiling,
            c.hits.len(),
            c.steady_rtts,
            CEILING_BAND * 100.0
        )
    });
    ev.facts.push(format!(
        "path RTT {rtt_ms:.2} ms: ceiling / RTT = {}, achieved {} ({} over {})",
        rate(cap_rate),
        rate(c.throughput),
        kib(c.bytes),
        fmt_duration(c.steady)
    ));
    ev.facts.push(match c.limiter {
        Limiter::Receiver => format!(
            "the {reader} advertised {} ({} B, after window scaling): the flight filled it — the {reader}'s \
             window is the limit",
            kib(c.window),
            c.window
        ),
        Limiter::Sender if c.filled_share <= MAX_BUSY_SHARE => format!(
            "the {reader} advertised {} ({} B), {:.0}× the ceiling, yet the {writer} sent for \
             only {:.0}% of each round trip and waited for ACKs the rest: its own buffer (or \
             its application) is the limit",
            kib(c.window),
            c.window,
            c.window as f64 / c.ceiling.max(1) as f64,
            c.busy_share * 100.0
        ),
        Limiter::Sender => format!(
            "the {reader} advertised {} ({} B), {:.0}× the ceiling, yet the {writer} paced each \
             flight over {:.0}% of the round trip, then fell silent for {:.1}× the longest gap \
             inside it until the ACKs came back (a bottleneck on the path delivers back to \
             back): its own buffer (or its application) is the limit",
            kib(c.window),
            c.window,
            c.window as f64 / c.ceiling.max(1) as f64,
            c.busy_share * 100.0,
            c.idle_gap_ratio.unwrap_or(0.0)
        ),
    });
    if let Some(r) = c.ack_rtt_ratio.filter(|_| c.limiter == Limiter::Sender) {
        ev.facts.push(format!(
            "captured at the {writer}'s end: each round trip's first segment was acknowledged \
             after {r:.2}× the path RTT, so no queue on the path was building (a bottleneck \
             lengthens it)"
        ));
    }
    ev.facts.push(
        "each doubling of the buffer roughly doubles throughput until the path's bandwidth is \
         reached"
            .to_string(),
    );
    ev.facts.push(format!(
        "transfers capped: {}; flows affected: {}",
        st.transfers,
        of(st.flows, groups[group].flows)
    ));
    ev.counts.insert("transfers".into(), st.transfers);
    ev.counts
        .insert("receiver_limited_transfers".into(), st.receiver);
    ev.counts
        .insert("steady_round_trips".into(), c.steady_rtts as u64);
    ev.counts.insert("ceiling_hits".into(), c.hits.len() as u64);
    ev.counts
        .insert("counted_per_flight".into(), u64::from(c.flights));
    ev.values.insert("ceiling_bytes".into(), c.ceiling as f64);
    ev.values
        .insert("advertised_window_bytes".into(), c.window as f64);
    ev.values.insert("rtt_ms".into(), rtt_ms);
    ev.values
        .insert("throughput_bytes_per_s".into(), c.throughput.round());
    ev.values
        .insert("ceiling_per_rtt_bytes_per_s".into(), cap_rate.round());
    ev.values.insert("busy_share".into(), round3(c.busy_share));
    ev.values
        .insert("filled_share".into(), round3(c.filled_share));
    if let Some(r) = c.idle_gap_ratio {
        ev.values.insert("idle_gap_ratio".into(), round3(r));
    }
    if let Some(r) = c.ack_rtt_ratio {
        ev.values.insert("ack_rtt_ratio".into(), round3(r));
    }
    ev.counts.insert(
        "example_limited_by_receiver_window".into(),
        u64::from(c.limiter == Limiter::Receiver),
    );
    ev.distributions
        .insert("ceiling_bytes".into(), st.ceiling.distribution(1.0));
    ev.distributions
        .insert("rtt_ms".into(), st.rtt_us.distribution(1e-3));
    ev.frames = c.hits.iter().take(6).map(|r| r.last.frame).collect();
    let origin = c.hits[0].start;
    for r in c.hits.iter().take(4) {
        ev.timeline.push(TimelineEntry {
            frame: r.last.frame,
            t_ms: rel_ms(r.last.ts, origin),
            direction: dir,
            payload_bytes: None,
            what: format!("{} sent in this round trip", kib(r.bytes)),
            note: match c.limiter {
                Limiter::Receiver => format!(
                    "the ceiling: the {reader}'s window ({}) is full; the {writer} waits for it \
                     to open",
                    kib(u64::from(r.max_window))
                ),
                Limiter::Sender => format!(
                    "the ceiling; the {writer} waits for ACKs ({} advertised)",
                    kib(u64::from(r.max_window))
                ),
            },
        });
    }
    let bdp = kib((100e6 / 8.0 * c.rtt.as_secs_f64()) as u64);
    let fix = match c.limiter {
        Limiter::Receiver => format!(
            "Do not set SO_RCVBUF on the {reader} (a fixed value turns receive autotuning off) \
             and check that net.ipv4.tcp_rmem's maximum (and net.core.rmem_max) allows at least \
             bandwidth × RTT; if a fixed size is needed, set it to at least bandwidth × RTT \
             (e.g. 100 Mbit/s × {rtt_ms:.0} ms = {bdp}) before connect()/listen(), since the \
             window scale is fixed in the SYN. If the {reader}'s application reads slowly, \
             read promptly."
        ),
        Limiter::Sender => format!(
            "Do not set SO_SNDBUF on the {writer} (a fixed value turns send autotuning off) and \
             check that net.ipv4.tcp_wmem's maximum (and net.core.wmem_max) allows at least \
             bandwidth × RTT; if a fixed size is needed, set it to at least bandwidth × RTT \
             (e.g. 100 Mbit/s × {rtt_ms:.0} ms = {bdp}). If the {writer}'s application writes \
             in small, spaced chunks, give the socket more data at a time."
        ),
    };
    FindingHead {
        kind: FindingKind::WindowLimited,
        severity,
        group,
        direction: dir,
        flows_affected: st.flows,
        example_flow,
        time_lost: st.steady / 2,
    }
    .finish(groups, verdict, ev, &fix)
}
