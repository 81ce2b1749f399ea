//! `retransmission_stall`: lost data recovered only by a timeout.
//!
//! Rule (PHYSICS §8), per server and direction of the lost data:
//! 1. A retransmission preceded by three or more duplicate ACKs is a fast retransmit: it cost
//!    about one round trip and is not a stall.
//! 2. Otherwise it is a *timeout stall* when it came at least [`MIN_STALL`] after the first
//!    transmission of the same bytes *and* at least [`MIN_STALL`] beyond the path RTT. Linux's
//!    retransmission timeout is at least RTT + 200 ms, while a tail-loss probe fires after
//!    about two RTTs (plus a few ms): quick probes fall below this line.
//! 3. Repeated retransmissions of the same bytes (exponential backoff) count once, with the
//!    longest wait.
//! 4. A SYN (same ISN) sent again while nothing had answered it (no SYN-ACK, no RST refusing
//!    it), at least [`MIN_SYN_STALL`] after the first, is a timeout stall of the connection's
//!    start, `client_to_server` (a full accept queue, or a dropping hop). It runs from the
//!    first SYN to the last one sent before the answer.
//! 5. A SYN sent again *after* a SYN-ACK answering it passed the capture point is no SYN loss.
//!    It is a lost SYN-ACK, `server_to_client`, only when the client then took a SYN-ACK sent
//!    after its retry (or never completed the handshake), and the retry came at least
//!    [`MIN_SYN_STALL`] after the answered SYN; it runs from that SYN to the last retry. A client
//!    that ACKs the earlier SYN-ACK right after its retry got it late: no stall. Copies of a
//!    SYN captured at the same instant fall below [`MIN_SYN_STALL`].
//! 6. The time lost is the time the stalls span, per flow and direction: stalls that overlap
//!    (a burst of segments lost together, each waiting for its own timeout) count their
//!    common time once, so a flow never loses more time than it lasted.
//! 7. Report every server and direction with at least one stall; critical from
//!    [`CRITICAL_LOST`] in total.

use crate::fxhash::FxHashMap as HashMap;
use std::any::Any;
use std::time::Duration;

use super::{rel_ms, At, Detector, FindingHead, FlowMarks, FlowView, Groups, PerGroup, ShardMap};
use crate::flow::{Direction, PacketRef, SegmentEvent, SegmentKind};
use crate::report::{Evidence, Finding, FindingKind, FlowRef, Severity, TimelineEntry};
use crate::stats::Histogram;
use crate::time::Timestamp;
use crate::units::fmt_duration;

pub const MIN_STALL: Duration = Duration::from_millis(150);
pub const MIN_SYN_STALL: Duration = Duration::from_millis(500);
pub const FAST_RETRANSMIT_DUP_ACKS: u32 = 3;
/// Critical when the stalls cost at least this much in total.
pub const CRITICAL_LOST: Duration = Duration::from_secs(1);

/// What was lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lost {
    Data,
    /// The client's SYN: it went unanswered and was sent again.
    Syn,
    /// The server's SYN-ACK: it passed the capture point, yet the client sent its SYN again.
    SynAck,
}

/// One stall, as the example of a finding shows it.
#[derive(Clone, Debug)]
struct Stall {
    lost: Lost,
    /// The first transmission (for a lost SYN-ACK: the SYN it answered).
    original: PacketRef,
    /// The lost SYN-ACK.
    answer: Option<PacketRef>,
    /// The retransmission that ended the wait.
    retrans: PacketRef,
}

#[derive(Default)]
struct State {
    stalls: u64,
    syn_stalls: u64,
    syn_ack_stalls: u64,
    fast_retransmits: u64,
    quick_retransmits: u64,
    lost: Duration,
    wait_us: Histogram,
    flows: u64,
    /// The first stall in the capture ([`At`]).
    example: Option<(FlowRef, Stall, At)>,
}

impl State {
    fn data_stalls(&self) -> u64 {
        self.stalls - self.syn_stalls - self.syn_ack_stalls
    }
}

#[derive(Default)]
pub struct RetransmissionStall {
    /// Per open flow: first transmission frame → longest wait counted so far.
    counted: HashMap<u64, HashMap<u64, Duration>>,
    /// Per open flow and direction: the end of the time already counted as lost, so that
    /// stalls that overlap (several segments lost in one burst, each waiting for its own
    /// timeout) cost the time they span once, not once each.
    covered: HashMap<(u64, usize), Timestamp>,
    state: PerGroup<State>,
    marks: FlowMarks,
}

impl RetransmissionStall {
    fn record(&mut self, flow: &FlowView, dir: Direction, stall: Stall) {
        let wait = stall.retrans.ts.since(stall.original.ts);
        let key = stall.answer.unwrap_or(stall.original).frame;
        let seen = self
            .counted
            .entry(flow.flow.id)
            .or_default()
            .entry(key)
            .or_insert(Duration::ZERO);
        let first_time = seen.is_zero();
        *seen = (*seen).max(wait);
        let covered = self
            .covered
            .entry((flow.flow.id, dir.index()))
            .or_insert(stall.original.ts);
        let extra = stall.retrans.ts.since((*covered).max(stall.original.ts));
        *covered = (*covered).max(stall.retrans.ts);
        let st = self.state.get(flow.group, dir);
        st.lost += extra;
        if first_time {
            st.stalls += 1;
            st.syn_stalls += u64::from(stall.lost == Lost::Syn);
            st.syn_ack_stalls += u64::from(stall.lost == Lost::SynAck);
            st.wait_us.record_duration(wait);
            if super::first_at(&st.example, flow.at, |e| e.2) {
                st.example = Some((flow.flow_ref(), stall, flow.at));
            }
        }
        self.marks.count(flow.flow.id, dir, &mut st.flows);
    }
}

impl Detector for RetransmissionStall {
    fn wants_segments(&self) -> bool {
        true
    }

    fn on_segment(&mut self, flow: &FlowView, ev: &SegmentEvent) {
        if ev.kind != SegmentKind::Retransmission {
            return;
        }
        let Some(r) = ev.retrans else {
            return;
        };
        if r.dup_acks_before >= FAST_RETRANSMIT_DUP_ACKS {
            self.state.get(flow.group, ev.dir).fast_retransmits += 1;
            return;
        }
        let Some(original) = r.original else {
            return;
        };
        let wait = ev.pkt.ts.since(original.ts);
        let rtt = flow.flow.rtt().unwrap_or_default();
        if wait < MIN_STALL || wait < rtt + MIN_STALL {
            self.state.get(flow.group, ev.dir).quick_retransmits += 1;
            return;
        }
        let stall = Stall {
            lost: Lost::Data,
            original,
            answer: None,
            retrans: ev.pkt,
        };
        self.record(flow, ev.dir, stall);
    }

    fn on_flow_end(&mut self, flow: &FlowView) {
        let hs = &flow.flow.handshake;
        if let Some((first, retry)) = hs.unanswered_syn_retry() {
            if retry.ts.since(first.ts) >= MIN_SYN_STALL {
                let stall = Stall {
                    lost: Lost::Syn,
                    original: first,
                    answer: None,
                    retrans: retry,
                };
                self.record(flow, Direction::ClientToServer, stall);
            }
        }
        if let Some((syn, syn_ack, retry)) = hs.lost_syn_ack() {
            if retry.ts.since(syn.ts) >= MIN_SYN_STALL {
                let stall = Stall {
                    lost: Lost::SynAck,
                    original: syn,
                    answer: Some(syn_ack),
                    retrans: retry,
                };
                self.record(flow, Direction::ServerToClient, stall);
            }
        }
        self.counted.remove(&flow.flow.id);
        self.covered.remove(&(flow.flow.id, 0));
        self.covered.remove(&(flow.flow.id, 1));
        self.marks.forget(flow.flow.id);
    }

    super::hands_over_its_state!();

    fn absorb(&mut self, state: Box<dyn Any + Send>, map: &ShardMap) {
        let other: PerGroup<State> = super::handed(state);
        self.state.absorb(other, map, |st, o| {
            st.stalls += o.stalls;
            st.syn_stalls += o.syn_stalls;
            st.syn_ack_stalls += o.syn_ack_stalls;
            st.fast_retransmits += o.fast_retransmits;
            st.quick_retransmits += o.quick_retransmits;
            st.lost += o.lost;
            st.wait_us.merge(&o.wait_us);
            st.flows += o.flows;
            let theirs = o.example.map(|(f, s, at)| (map.flow_ref(f), s, at));
            super::earlier(&mut st.example, theirs, |e| e.2);
        });
    }

    fn finish(&mut self, groups: &Groups) -> Vec<Finding> {
        let mut out = Vec::new();
        for (group, dir, st) in self.state.drain() {
            if st.stalls == 0 {
                continue;
            }
            let Some((flow, stall, _)) = st.example.clone() else {
                continue;
            };
            out.push(finding(group, dir, &st, (flow, stall), groups));
        }
        out
    }
}

const SYN_FIX: &str = "SYNs are being dropped: check the server's accept queue (`ss -lnt`: \
     Recv-Q at the backlog; raise listen() backlog and net.core.somaxconn, accept faster) and \
     any firewall or rate limiter on the path.";
const SYN_ACK_FIX: &str = "The server answered; its SYN-ACK was lost between the capture point \
     and the client, or the client's host discarded it (a host firewall, a connection-tracking \
     table, an asymmetric route, a bad checksum). Capture at the client to see whether \
     SYN-ACKs arrive, and look for drops on the server→client path. The server's accept queue \
     is not the cause.";
const DATA_FIX: &str = "Find where packets are lost (interface drops, a policing or shaping \
     hop, a full queue: `ip -s link`, `nstat -az TcpRetransSegs TcpExtTCPLossProbes`, \
     `ss -ti`). TCP waited for its timeout because nothing followed the lost segment to \
     trigger fast retransmit: keep SACK and tail-loss probes on \
     (net.ipv4.tcp_early_retrans=3), and avoid tiny last segments on lossy paths.";

fn verdict(dir: Direction, st: &State, example: &Stall) -> String {
    let dist = st.wait_us.distribution(1e-3);
    let example_wait = fmt_duration(example.retrans.ts.since(example.original.ts));
    let lost = fmt_duration(st.lost);
    if st.syn_stalls == st.stalls {
        return format!(
            "Connection attempts waited for the SYN timeout: {} SYN(s) went unanswered and \
             were sent again ({example_wait} from the first to the last); {lost} lost.",
            st.stalls
        );
    }
    if st.syn_ack_stalls == st.stalls {
        return format!(
            "Connection attempts waited for the client's SYN timeout although the server \
             answered: {} SYN-ACK(s) passed the capture point but did not reach the client, \
             which sent its SYN again ({example_wait} from the answered SYN to the last); \
             {lost} lost.",
            st.stalls
        );
    }
    let mut of_which = Vec::new();
    if st.syn_stalls > 0 {
        of_which.push(format!(
            "{} SYN(s) unanswered and sent again",
            st.syn_stalls
        ));
    }
    if st.syn_ack_stalls > 0 {
        of_which.push(format!(
            "{} SYN-ACK(s) that did not reach the client",
            st.syn_ack_stalls
        ));
    }
    let of_which = if of_which.is_empty() {
        String::new()
    } else {
        format!(" (of which {})", of_which.join(", "))
    };
    format!(
        "{} data went unacknowledged until the retransmission timeout sent it again (the data \
         or its acknowledgement was lost or delayed): {} stall(s) of {:.0} ms median (max {:.0} ms)\
         {of_which}, with too few duplicate ACKs for fast retransmit; {lost} lost.",
        capitalized(dir.sender()),
        st.stalls,
        dist.p50,
        dist.max
    )
}

fn fix(st: &State) -> String {
    let mut parts = Vec::new();
    if st.data_stalls() > 0 {
        parts.push(DATA_FIX.to_string());
    }
    let mixed = st.data_stalls() > 0;
    if st.syn_stalls > 0 {
        parts.push(if mixed {
            format!("For the SYN retries: {SYN_FIX}")
        } else {
            SYN_FIX.to_string()
        });
    }
    if st.syn_ack_stalls > 0 {
        parts.push(if mixed || st.syn_stalls > 0 {
            format!("For the lost SYN-ACKs: {SYN_ACK_FIX}")
        } else {
            SYN_ACK_FIX.to_string()
        });
    }
    parts.join(" ")
}

/// The example stall, packet by packet.
fn timeline(dir: Direction, s: &Stall) -> Vec<TimelineEntry> {
    let entry = |pkt: PacketRef, direction, what: &str, note: &str| TimelineEntry {
        frame: pkt.frame,
        t_ms: rel_ms(pkt.ts, s.original.ts),
        direction,
        payload_bytes: None,
        what: what.into(),
        note: note.into(),
    };
    match (s.lost, s.answer) {
        (Lost::SynAck, Some(answer)) => vec![
            entry(
                s.original,
                dir.reverse(),
                "SYN sent",
                "answered by the server",
            ),
            entry(
                answer,
                dir,
                "SYN-ACK sent",
                "passed the capture point, never reached the client",
            ),
            entry(
                s.retrans,
                dir.reverse(),
                "same SYN sent again",
                "after the client's SYN timeout: it had no SYN-ACK",
            ),
        ],
        _ => {
            let what = if s.lost == Lost::Syn { "SYN" } else { "data" };
            vec![
                entry(
                    s.original,
                    dir,
                    &format!("{what} sent"),
                    "lost before it reached the peer",
                ),
                entry(
                    s.retrans,
                    dir,
                    &format!("same {what} sent again"),
                    "after the retransmission timeout",
                ),
            ]
        }
    }
}

fn finding(
    group: usize,
    dir: Direction,
    st: &State,
    (example_flow, example): (FlowRef, Stall),
    groups: &Groups,
) -> Finding {
    let dist = st.wait_us.distribution(1e-3);
    let severity = if st.lost >= CRITICAL_LOST {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let mut ev = Evidence::default();
    ev.facts.push(format!(
        "timeout stalls: {} (of which SYN retries: {}, lost SYN-ACKs: {}); wait from first \
         transmission: median {:.1} ms, max {:.1} ms",
        st.stalls, st.syn_stalls, st.syn_ack_stalls, dist.p50, dist.max
    ));
    ev.facts.push(format!(
        "recovered without a timeout: {} fast retransmit(s), {} quick retransmission(s) \
         (tail-loss probes and the like)",
        st.fast_retransmits, st.quick_retransmits
    ));
    ev.counts.insert("stalls".into(), st.stalls);
    ev.counts.insert("syn_stalls".into(), st.syn_stalls);
    ev.counts.insert("syn_ack_stalls".into(), st.syn_ack_stalls);
    ev.counts
        .insert("fast_retransmits".into(), st.fast_retransmits);
    ev.counts
        .insert("quick_retransmits".into(), st.quick_retransmits);
    ev.distributions.insert("wait_ms".into(), dist);
    ev.timeline = timeline(dir, &example);
    ev.frames = ev.timeline.iter().map(|e| e.frame).collect();
    FindingHead {
        kind: FindingKind::RetransmissionStall,
        severity,
        group,
        direction: dir,
        flows_affected: st.flows,
        example_flow,
        time_lost: st.lost,
    }
    .finish(groups, verdict(dir, st, &example), ev, &fix(st))
}

fn capitalized(word: &str) -> String {
    let mut c = word.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
