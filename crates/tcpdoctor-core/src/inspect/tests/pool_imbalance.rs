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
    assert!(f.evidence.facts[2].contains("(fd 10, inode 10010): 900 data segments (90%)"));
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
