use super::builder::*;
use crate::inspect::pool_imbalance::spread;
use crate::inspect::{diagnose, SocketObservation};
use crate::report::{Finding, FindingKind, Severity};

/// A connection to `server` that carried `segs` data segments each way over 3 s.
fn conn(fd: i32, server: &str, segs: u32) -> SocketObservation {
    SocketBuilder::connected(fd, 50000 + fd as u16, server)
        .options(|o| o.nodelay = Some(true))
        .traffic(2, 3000, segs, 100, segs, |_, _| {})
        .build()
}

fn pool(uses: &[u32]) -> Vec<SocketObservation> {
    uses.iter()
        .enumerate()
        .map(|(i, &u)| conn(10 + i as i32, "127.0.0.1:6379", u))
        .collect()
}

fn imbalance(sockets: Vec<SocketObservation>) -> Vec<Finding> {
    diagnose(observation(vec![process(sockets)]))
        .findings
        .into_iter()
        .filter(|f| f.kind == FindingKind::PoolImbalance)
        .collect()
}

#[test]
fn a_pool_with_one_busy_connection_is_named() {
    let f = imbalance(pool(&[450, 25, 15, 10]));
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(f.severity, Severity::Warning);
    assert_eq!(f.server, "127.0.0.1:6379");
    assert_eq!((f.flows_affected, f.flows_total), (3, 4));
    assert_eq!(f.example_flow.id, 10, "the busiest");
    assert_eq!(f.evidence.counts["data_segments"], 1000);
    assert_eq!(f.evidence.values["busiest_share"], 0.9);
    assert!(
        f.verdict.contains("90%") && f.verdict.contains("25%"),
        "{}",
        f.verdict
    );
    assert!(f.evidence.facts[2].contains("(fd 10, inode 10010): 900 data segments in 3 s (90%)"));
}

#[test]
fn a_two_connection_pool_split_80_20_is_info() {
    let f = imbalance(pool(&[400, 100]));
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].severity, Severity::Info);
    assert_eq!(f[0].evidence.values["cv_ratio"], 0.6);
}

#[test]
fn an_even_pool_is_not_a_finding() {
    assert!(imbalance(pool(&[250, 260, 240, 250])).is_empty());
    // Poisson-like noise at the minimum traffic.
    assert!(imbalance(pool(&[70, 60, 55, 50])).is_empty());
}

#[test]
fn too_little_traffic_or_no_pool_is_not_a_finding() {
    // 100 segments over 2 connections: below 100 per connection.
    assert!(imbalance(pool(&[45, 5])).is_empty());
    // One connection is not a pool.
    assert!(imbalance(pool(&[1000])).is_empty());
    // Two connections to two different servers are not one pool.
    assert!(imbalance(vec![
        conn(10, "127.0.0.1:6379", 900),
        conn(11, "127.0.0.1:6380", 10),
    ])
    .is_empty());
}

#[test]
fn the_spread_measure() {
    let s = spread(&[100, 0]).unwrap();
    assert_eq!(s.cv, 1.0);
    assert_eq!(s.busiest_share, 1.0);
    assert_eq!(s.below_even, 1);
    let s = spread(&[0, 0, 0]).unwrap();
    assert_eq!((s.cv, s.busiest_share), (0.0, 0.0));
    assert!(spread(&[]).is_none());
}

/// A connection to the pool's server that carried 10 data segments each way every 100 ms,
/// opened `opened_ms` into a 3 s interval.
fn conn_from(fd: i32, opened_ms: u64, per_100ms: u32) -> SocketObservation {
    let samples = (3000 - opened_ms) / 100 + 1;
    SocketBuilder::connected(fd, 50000 + fd as u16, "127.0.0.1:6379")
        .options(|o| o.nodelay = Some(true))
        .traffic(samples, 100, per_100ms, 100, per_100ms, |_, s| {
            s.at_ns += opened_ms * MS
        })
        .build()
}

/// Review item 4: a pool used evenly that grew during sampling: the late connection carried
/// fewer segments only because it was observed for less time (600 vs 100 raw: cv 0.71).
#[test]
fn a_connection_opened_during_sampling_is_compared_by_its_rate() {
    let f = imbalance(vec![conn_from(10, 0, 10), conn_from(11, 2500, 10)]);
    assert!(f.is_empty(), "{f:#?}");
    // The same late connection used at a tenth of the rate is still named, by rate.
    let f = imbalance(vec![conn_from(10, 0, 10), conn_from(11, 500, 1)]);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].example_flow.id, 10);
    assert!(
        f[0].evidence.facts.iter().any(|l| l.contains("in 2.5 s")),
        "{:#?}",
        f[0].evidence.facts
    );
}

/// A connection seen in one sample only has no rate: it is left out of the comparison.
#[test]
fn a_connection_seen_once_is_not_compared() {
    let f = imbalance(vec![
        conn_from(10, 0, 10),
        conn_from(11, 0, 10),
        conn_from(12, 3000, 10),
    ]);
    assert!(f.is_empty(), "{f:#?}");
}
