//! `pool_imbalance`: a process holds several connections to one peer — a pool — and uses them
//! unevenly: some carry the load (and queue requests behind each other), others sit idle
//! (holding memory, a server slot and a file descriptor at both ends for nothing).
//!
//! Rule, per process:
//! 1. A **pool** is at least [`MIN_POOL`] connected sockets (opened by `connect`) to the same
//!    remote `ip:port`. Accepted sockets are not a pool: the clients choose how they spread.
//! 2. A connection's **use** is the data segments it sent and received in the interval
//!    (segments, not bytes: each request and reply costs one turn whatever its size), compared
//!    as a **rate**: divided by the time that connection itself was observed (first to last
//!    sample), so one opened (or closed) during sampling is not taken for an idle one. A
//!    connection seen in one sample only has no rate and is left out, the facts saying so;
//!    when every connection was seen once (`inspect --duration 0`), their counters
//!    since they opened are compared as they are.
//! 3. **Enough traffic**: at least [`MIN_SEGMENTS_PER_CONNECTION`] × the pool's size in all.
//!    A pool used evenly at random still gives each connection a Poisson-like count; with at
//!    least 100 segments per connection on average its coefficient of variation is about
//!    1/√100 = 0.1.
//! 4. **Uneven** when the coefficient of variation of the rates (population standard deviation
//!    over the mean) is at least [`MIN_CV`]: five times what an even, random spread shows at the
//!    minimum traffic. Two connections split 80/20 have 0.6; one connection doing everything
//!    in a pool of n has √(n − 1).
//! 5. **Warning** from [`WARNING_CV`] (two connections: one did all the work), else **info**.
//!
//! `flows_affected` counts the connections that carried less than an even share (the idle
//! end); `example_flow` is the busiest connection. `time_lost_ms` is 0: the counters show how
//! the load spread, not how long requests queued on the busy connections.

use std::collections::BTreeMap;

use super::interval::{
    flow_ref, process_name, socket_label, sockets_source, tcp_info_source, SocketInterval,
};
use super::{ProcessObservation, SocketRole};
use crate::flow::Direction;
use crate::numfmt::{count, num};
use crate::report::{Evidence, Finding, FindingKind, Severity};
use crate::stats::round3;

pub const MIN_POOL: usize = 2;
pub const MIN_SEGMENTS_PER_CONNECTION: u64 = 100;
pub const MIN_CV: f64 = 0.5;
pub const WARNING_CV: f64 = 1.0;
/// Connections listed in the facts, busiest first.
const LISTED: usize = 8;

/// How the use of one pool spread.
#[derive(Clone, Debug)]
pub struct Spread {
    /// Data segments of all the connections.
    pub total: u64,
    /// Data segments per connection.
    pub mean: f64,
    /// Of the weights compared (rates, or counts): standard deviation over mean.
    pub cv: f64,
    pub busiest_share: f64,
    pub below_even: u64,
}

/// The spread of `uses` (one count per connection); `None` for an empty pool.
pub fn spread(uses: &[u64]) -> Option<Spread> {
    let weights: Vec<f64> = uses.iter().map(|&u| u as f64).collect();
    spread_of(uses, &weights)
}

/// The spread of `weights` (one per connection: its rate, or its count), with the counts
/// `uses` for the totals.
fn spread_of(uses: &[u64], weights: &[f64]) -> Option<Spread> {
    if uses.is_empty() || uses.len() != weights.len() {
        return None;
    }
    let n = uses.len() as f64;
    let total: u64 = uses.iter().sum();
    let sum: f64 = weights.iter().sum();
    let w_mean = sum / n;
    let var = weights.iter().map(|&w| (w - w_mean).powi(2)).sum::<f64>() / n;
    let cv = if w_mean > 0.0 {
        var.sqrt() / w_mean
    } else {
        0.0
    };
    let max = weights.iter().copied().fold(0.0, f64::max);
    Some(Spread {
        total,
        mean: total as f64 / n,
        cv,
        busiest_share: if sum > 0.0 { max / sum } else { 0.0 },
        below_even: weights.iter().filter(|&&w| w < w_mean).count() as u64,
    })
}

/// Connected sockets by remote endpoint, with their use in the interval.
pub fn pools(p: &ProcessObservation) -> BTreeMap<String, Vec<(SocketInterval<'_>, u64)>> {
    let mut pools: BTreeMap<String, Vec<(SocketInterval, u64)>> = BTreeMap::new();
    for iv in p.sockets.iter().filter_map(SocketInterval::of) {
        if iv.sock.role == SocketRole::Connected {
            pools
                .entry(iv.sock.remote.to_string())
                .or_default()
                .push((iv, iv.data_segs_in + iv.data_segs_out));
        }
    }
    pools
}

/// A connection compared: its interval, its use, and its rate (data segments per second, or
/// the use itself when no connection of the pool has an interval).
type Compared<'a> = (SocketInterval<'a>, u64, f64);

pub fn pool_imbalance(p: &ProcessObservation) -> Vec<Finding> {
    let mut out = Vec::new();
    for (peer, conns) in pools(p) {
        let timed = conns.iter().any(|(iv, _)| iv.span_ns > 0);
        let seen_once = if timed {
            conns.iter().filter(|(iv, _)| iv.span_ns == 0).count()
        } else {
            0
        };
        let mut compared: Vec<Compared> = conns
            .into_iter()
            .filter(|(iv, _)| !timed || iv.span_ns > 0)
            .map(|(iv, u)| {
                let rate = if timed {
                    u as f64 * 1e9 / iv.span_ns as f64
                } else {
                    u as f64
                };
                (iv, u, rate)
            })
            .collect();
        if compared.len() < MIN_POOL {
            continue;
        }
        let uses: Vec<u64> = compared.iter().map(|c| c.1).collect();
        let rates: Vec<f64> = compared.iter().map(|c| c.2).collect();
        let Some(s) = spread_of(&uses, &rates) else {
            continue;
        };
        if s.total < MIN_SEGMENTS_PER_CONNECTION * compared.len() as u64 || s.cv < MIN_CV {
            continue;
        }
        compared.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.sock.fd.cmp(&b.0.sock.fd)));
        out.push(finding(p, &peer, &compared, &s, timed, seen_once));
    }
    out
}

fn finding(
    p: &ProcessObservation,
    peer: &str,
    conns: &[Compared],
    s: &Spread,
    timed: bool,
    seen_once: usize,
) -> Finding {
    let n = conns.len() as u64;
    let busiest = conns[0].0;
    let even = 1.0 / n as f64;
    let idle = conns.iter().filter(|c| c.1 == 0).count() as u64;
    let severity = if s.cv >= WARNING_CV {
        Severity::Warning
    } else {
        Severity::Info
    };
    let what = if timed {
        "of the pool's rate (data segments per second, each connection over the time it was \
         observed)"
    } else {
        "of the pool's data segments (counted since each connection opened: one sample)"
    };
    let mut facts = vec![format!(
        "{} to {peer} carried {} {}; the busiest carried {:.0}% {what} where an even spread \
         gives each {:.0}%; {} carried less than an even share{}",
        count(n, "connection"),
        count(s.total, "data segment"),
        if timed { "while observed" } else { "in all" },
        s.busiest_share * 100.0,
        even * 100.0,
        s.below_even,
        if idle > 0 {
            format!(", {idle} none at all")
        } else {
            String::new()
        }
    )];
    facts.push(format!(
        "coefficient of variation of the use {} (0 is perfectly even; an even random spread \
         shows about {} at this traffic)",
        num(s.cv),
        num(1.0 / s.mean.max(1.0).sqrt())
    ));
    let rate_sum: f64 = conns.iter().map(|c| c.2).sum();
    for (iv, u, rate) in conns.iter().take(LISTED) {
        facts.push(format!(
            "{}: {} {} ({:.0}%)",
            socket_label(iv.sock),
            count(*u, "data segment"),
            iv.over(),
            rate / rate_sum.max(f64::MIN_POSITIVE) * 100.0
        ));
    }
    if conns.len() > LISTED {
        facts.push(format!("… and {} more connections", conns.len() - LISTED));
    }
    if seen_once > 0 {
        facts.push(format!(
            "{} to {peer} seen in one sample only (opened at the end of sampling, or closed \
             at its start): no rate, not compared",
            count(seen_once as u64, "more connection")
        ));
    }
    let mut evidence = Evidence {
        facts,
        rests_on: vec![
            format!(
                "{}: data segments in and out per connection, its own first and last sample",
                tcp_info_source(p)
            ),
            sockets_source(p),
        ],
        ..Evidence::default()
    };
    evidence.counts.insert("connections".into(), n);
    evidence.counts.insert("data_segments".into(), s.total);
    evidence
        .counts
        .insert("connections_below_even_share".into(), s.below_even);
    evidence.counts.insert("connections_idle".into(), idle);
    evidence.values.insert("cv_ratio".into(), round3(s.cv));
    evidence
        .values
        .insert("busiest_share".into(), round3(s.busiest_share));
    evidence.values.insert("even_share".into(), round3(even));
    Finding {
        kind: FindingKind::PoolImbalance,
        severity,
        file: process_name(p),
        server: peer.to_string(),
        direction: Direction::ClientToServer,
        flows_affected: s.below_even,
        flows_total: n,
        example_flow: flow_ref(busiest.sock),
        verdict: format!(
            "Uneven pool: this process holds {n} connections to {peer} and the busiest carries \
             {:.0}% of their traffic ({:.0}% would be even): requests queue on the busiest while \
             {} less than an even share",
            s.busiest_share * 100.0,
            even * 100.0,
            crate::numfmt::count_of(s.below_even, "connection carries", "connections carry")
        ),
        time_lost_ms: 0.0,
        evidence,
        fix: "Size the pool to the concurrency the process really has (the connections it \
              never uses can go), or make the pool spread requests (round-robin or \
              least-in-flight instead of always the most recently returned connection); if one \
              connection carries a pipelined stream on purpose, this is expected."
            .to_string(),
    }
}
