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
//! 4. A SYN sent again after going unanswered for at least [`MIN_SYN_STALL`] is a timeout
//!    stall of the connection's start (a full accept queue, or a dropping hop).
//! 5. Report every server and direction with at least one stall; critical from
//!    [`CRITICAL_LOST`] in total.

use crate::fxhash::FxHashMap as HashMap;
use std::time::Duration;

use super::{rel_ms, Detector, FindingHead, FlowMarks, FlowView, Groups, PerGroup};
use crate::flow::{Direction, PacketRef, SegmentEvent, SegmentKind};
use crate::report::{Evidence, Finding, FindingKind, FlowRef, Severity, TimelineEntry};
use crate::stats::Histogram;
use crate::units::fmt_duration;

pub const MIN_STALL: Duration = Duration::from_millis(150);
pub const MIN_SYN_STALL: Duration = Duration::from_millis(500);
pub const FAST_RETRANSMIT_DUP_ACKS: u32 = 3;
/// Critical when the stalls cost at least this much in total.
pub const CRITICAL_LOST: Duration = Duration::from_secs(1);

#[derive(Default)]
struct State {
    stalls: u64,
    syn_stalls: u64,
    fast_retransmits: u64,
    quick_retransmits: u64,
    lost: Duration,
    wait_us: Histogram,
    flows: u64,
    example: Option<(FlowRef, PacketRef, PacketRef, bool)>,
}

#[derive(Default)]
pub struct RetransmissionStall {
    /// Per open flow: first transmission frame → longest wait counted so far.
    counted: HashMap<u64, HashMap<u64, Duration>>,
    state: PerGroup<State>,
    marks: FlowMarks,
}

impl RetransmissionStall {
    fn record(
        &mut self,
        flow: &FlowView,
        dir: Direction,
        original: PacketRef,
        retrans: PacketRef,
        syn: bool,
    ) {
        let wait = retrans.ts.since(original.ts);
        let seen = self
            .counted
            .entry(flow.flow.id)
            .or_default()
            .entry(original.frame)
            .or_insert(Duration::ZERO);
        let extra = wait.saturating_sub(*seen);
        let first_time = seen.is_zero();
        *seen = (*seen).max(wait);
        let st = self.state.get(flow.group, dir);
        st.lost += extra;
        if first_time {
            st.stalls += 1;
            st.syn_stalls += u64::from(syn);
            st.wait_us.record_duration(wait);
            if st.example.is_none() {
                st.example = Some((flow.flow_ref(), original, retrans, syn));
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
        self.record(flow, ev.dir, original, ev.pkt, false);
    }

    fn on_flow_end(&mut self, flow: &FlowView) {
        let hs = flow.flow.handshake;
        if let (Some(first), Some(last)) = (hs.first_syn, hs.syn) {
            if hs.syn_retries > 0 && last.ts.since(first.ts) >= MIN_SYN_STALL {
                self.record(flow, Direction::ClientToServer, first, last, true);
            }
        }
        self.counted.remove(&flow.flow.id);
        self.marks.forget(flow.flow.id);
    }

    fn finish(&mut self, groups: &Groups) -> Vec<Finding> {
        let mut out = Vec::new();
        for (group, dir, st) in self.state.drain() {
            if st.stalls == 0 {
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
    (example_flow, original, retrans, syn): (FlowRef, PacketRef, PacketRef, bool),
    groups: &Groups,
) -> Finding {
    let dist = st.wait_us.distribution(1e-3);
    let severity = if st.lost >= CRITICAL_LOST {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let sender = dir.sender();
    let verdict = if st.syn_stalls == st.stalls {
        format!(
            "Connection attempts waited for the SYN timeout: {} SYN(s) went unanswered and \
             were sent again {} later; {} lost.",
            st.stalls,
            fmt_duration(retrans.ts.since(original.ts)),
            fmt_duration(st.lost)
        )
    } else {
        format!(
            "Lost {sender} data was recovered only by the retransmission timeout: {} stall(s) \
             of {:.0} ms median (max {:.0} ms), with too few duplicate ACKs for fast \
             retransmit; {} lost.",
            st.stalls,
            dist.p50,
            dist.max,
            fmt_duration(st.lost)
        )
    };
    let mut ev = Evidence::default();
    ev.facts.push(format!(
        "timeout stalls: {} (of which SYN retries: {}); wait from first transmission: median \
         {:.1} ms, max {:.1} ms",
        st.stalls, st.syn_stalls, dist.p50, dist.max
    ));
    ev.facts.push(format!(
        "recovered without a timeout: {} fast retransmit(s), {} quick retransmission(s) \
         (tail-loss probes and the like)",
        st.fast_retransmits, st.quick_retransmits
    ));
    ev.counts.insert("stalls".into(), st.stalls);
    ev.counts.insert("syn_stalls".into(), st.syn_stalls);
    ev.counts
        .insert("fast_retransmits".into(), st.fast_retransmits);
    ev.counts
        .insert("quick_retransmits".into(), st.quick_retransmits);
    ev.distributions.insert("wait_ms".into(), dist);
    ev.frames = vec![original.frame, retrans.frame];
    let what = if syn { "SYN" } else { "data" };
    ev.timeline.push(TimelineEntry {
        frame: original.frame,
        t_ms: 0.0,
        direction: dir,
        payload_bytes: None,
        what: format!("{what} sent"),
        note: "lost before it reached the peer".into(),
    });
    ev.timeline.push(TimelineEntry {
        frame: retrans.frame,
        t_ms: rel_ms(retrans.ts, original.ts),
        direction: dir,
        payload_bytes: None,
        what: format!("same {what} sent again"),
        note: "after the retransmission timeout".into(),
    });
    let fix = if st.syn_stalls == st.stalls {
        "SYNs are being dropped: check the server's accept queue (`ss -lnt`: Recv-Q at the \
         backlog; raise listen() backlog and net.core.somaxconn, accept faster) and any \
         firewall or rate limiter on the path."
    } else {
        "Find where packets are lost (interface drops, a policing or shaping hop, a full queue: \
         `ip -s link`, `nstat -az TcpRetransSegs TcpExtTCPLossProbes`, `ss -ti`). TCP waited \
         for its timeout because nothing followed the lost segment to trigger fast \
         retransmit: keep SACK and tail-loss probes on (net.ipv4.tcp_early_retrans=3), and \
         avoid tiny last segments on lossy paths."
    };
    FindingHead {
        kind: FindingKind::RetransmissionStall,
        severity,
        group,
        direction: dir,
        flows_affected: st.flows,
        example_flow,
        time_lost: st.lost,
    }
    .finish(groups, verdict, ev, fix)
}
