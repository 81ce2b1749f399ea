//! `rtt_bound`: one round trip per command, so wall time ≈ exchanges × RTT.
//!
//! Rule (PHYSICS §5), per flow, then summed per server:
//! 1. The flow has at least [`MIN_EXCHANGES`] exchanges, strictly alternating (the turn model
//!    guarantees it: a pipelining client sends many requests in one turn, so it has few
//!    exchanges).
//! 2. The path RTT at the capture point (handshake, else fastest data → ACK) is at least
//!    [`MIN_RTT`]: below that, round trips cost nothing worth naming.
//! 3. Waiting on round trips — exchanges × RTT — is at least [`MIN_SHARE`] of the time from
//!    the first request to the last response, and pipelining would save at least [`MIN_SAVING`]
//!    ((exchanges − 1) × RTT).
//! 4. Critical from [`CRITICAL_SHARE`] of the wall time and a saving of [`CRITICAL_SAVING`].

use crate::fxhash::FxHashMap as HashMap;
use std::time::Duration;

use super::{Detector, FindingHead, FlowView, Groups, PerGroup};
use crate::flow::Direction;
use crate::report::{Evidence, Finding, FindingKind, FlowRef, Severity};
use crate::stats::{round3, Histogram};
use crate::time::Timestamp;
use crate::turns::Exchange;
use crate::units::fmt_duration;

pub const MIN_EXCHANGES: u64 = 10;
pub const MIN_RTT: Duration = Duration::from_millis(1);
pub const MIN_SHARE: f64 = 0.5;
pub const MIN_SAVING: Duration = Duration::from_millis(100);
/// Critical when round trips are at least this share of the wall time…
pub const CRITICAL_SHARE: f64 = 0.8;
/// …and pipelining would save at least this much.
pub const CRITICAL_SAVING: Duration = Duration::from_secs(1);

#[derive(Default)]
struct FlowState {
    exchanges: u64,
    first: Option<Timestamp>,
    last: Timestamp,
    latency_sum: Duration,
}

#[derive(Default)]
struct State {
    flows: u64,
    exchanges: u64,
    wall: Duration,
    waiting: Duration,
    saving: Duration,
    rtt_us: Histogram,
    latency_us: Histogram,
    example: Option<FlowRef>,
}

#[derive(Default)]
pub struct RttBound {
    open: HashMap<u64, FlowState>,
    state: PerGroup<State>,
}

impl Detector for RttBound {
    fn wants_exchanges(&self) -> bool {
        true
    }

    fn on_exchange(&mut self, flow: &FlowView, ex: &Exchange<'_>) {
        let fs = self.open.entry(flow.flow.id).or_default();
        fs.exchanges += 1;
        fs.first.get_or_insert(ex.start());
        fs.last = ex.response.last.ts;
        fs.latency_sum += ex.latency();
    }

    fn on_flow_end(&mut self, flow: &FlowView) {
        let Some(fs) = self.open.remove(&flow.flow.id) else {
            return;
        };
        let (Some(first), Some(rtt)) = (fs.first, flow.flow.rtt()) else {
            return;
        };
        if fs.exchanges < MIN_EXCHANGES || rtt < MIN_RTT {
            return;
        }
        let wall = fs.last.since(first);
        let waiting = rtt * fs.exchanges.min(u32::MAX as u64) as u32;
        let saving = rtt * (fs.exchanges - 1).min(u32::MAX as u64) as u32;
        let share = waiting.as_secs_f64() / wall.as_secs_f64().max(1e-9);
        if share < MIN_SHARE || saving < MIN_SAVING {
            return;
        }
        let st = self.state.get(flow.group, Direction::ClientToServer);
        st.flows += 1;
        st.exchanges += fs.exchanges;
        st.wall += wall;
        st.waiting += waiting.min(wall);
        st.saving += saving;
        st.rtt_us.record_duration(rtt);
        // One value per flow (its mean exchange latency) keeps per-flow state small.
        st.latency_us
            .record_duration(fs.latency_sum / fs.exchanges.min(u32::MAX as u64) as u32);
        st.example.get_or_insert_with(|| flow.flow_ref());
    }

    fn finish(&mut self, groups: &Groups) -> Vec<Finding> {
        let mut out = Vec::new();
        for (group, dir, st) in self.state.drain() {
            let Some(example_flow) = st.example.clone() else {
                continue;
            };
            out.push(finding(group, dir, &st, example_flow, groups));
        }
        out
    }
}

fn finding(
    group: usize,
    dir: Direction,
    st: &State,
    example_flow: FlowRef,
    groups: &Groups,
) -> Finding {
    let share = st.waiting.as_secs_f64() / st.wall.as_secs_f64().max(1e-9);
    let rtt = st.rtt_us.distribution(1e-3);
    let latency = st.latency_us.distribution(1e-3);
    let severity = if share >= CRITICAL_SHARE && st.saving >= CRITICAL_SAVING {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let verdict = format!(
        "Round-trip bound: {} sequential exchanges each waited one round trip ({:.1} ms); \
         waiting on the network is {:.0}% of the {} they took, and pipelining would save \
         about {}.",
        st.exchanges,
        rtt.p50,
        share * 100.0,
        fmt_duration(st.wall),
        fmt_duration(st.saving)
    );
    let mut ev = Evidence::default();
    ev.facts.push(format!(
        "{} exchanges in {} flow(s), strictly one after another: each request waited for the \
         previous response",
        st.exchanges, st.flows
    ));
    ev.facts.push(format!(
        "path RTT at the capture point: {:.2} ms (median over flows); mean exchange latency \
         {:.2} ms (median over flows)",
        rtt.p50, latency.p50
    ));
    ev.facts.push(format!(
        "wall time {}, of which ≈{} is round trips ({:.0}%)",
        fmt_duration(st.wall),
        fmt_duration(st.waiting),
        share * 100.0
    ));
    ev.facts.push(format!(
        "sent all at once, the same exchanges would need about one round trip plus the \
         server's time: ≈{} saved",
        fmt_duration(st.saving)
    ));
    ev.counts.insert("exchanges".into(), st.exchanges);
    ev.counts.insert("flows".into(), st.flows);
    ev.values.insert("rtt_ms".into(), rtt.p50);
    ev.values
        .insert("wall_ms".into(), round3(crate::units::ms(st.wall)));
    ev.values
        .insert("waiting_ms".into(), round3(crate::units::ms(st.waiting)));
    ev.values.insert("round_trip_share".into(), round3(share));
    ev.values.insert(
        "pipelining_saves_ms".into(),
        round3(crate::units::ms(st.saving)),
    );
    ev.distributions.insert("rtt_ms".into(), rtt);
    ev.distributions
        .insert("flow_mean_exchange_latency_ms".into(), latency);
    let fix = "Stop paying one round trip per command: pipeline (send the next requests \
               without waiting for each reply), batch commands into one request (multi-get, \
               bulk endpoints, one query instead of N), or move the chatty loop next to the \
               server. On this path every sequential command costs one RTT, whatever the \
               server does.";
    FindingHead {
        kind: FindingKind::RttBound,
        severity,
        group,
        direction: dir,
        flows_affected: st.flows,
        example_flow,
        time_lost: st.saving,
    }
    .finish(groups, verdict, ev, fix)
}
