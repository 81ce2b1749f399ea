//! The per-client spans that tell parallel connections (rule 5): counted over whole spans once
//! every flow has ended, the same however the flows were divided among shards, and bounded
//! without a scan.

use std::net::{IpAddr, Ipv4Addr};

use super::{Detector, FlowView, RttBound, Span};
use crate::detect::ShardMap;
use crate::flow::{Direction, Flow, PacketRef};
use crate::time::Timestamp;
use crate::wire::{Endpoint, TcpFlags, TcpOptions, TcpSegment};

/// Flow `id` from client address 10.0.0.`host`, port `port`, to one server.
fn flow(id: u64, host: u8, port: u16) -> Flow {
    let seg = TcpSegment {
        src: Endpoint { ip: ip(host), port },
        dst: Endpoint {
            ip: IpAddr::V4(Ipv4Addr::new(198, 18, 0, 1)),
            port: 7000,
        },
        seq: 1,
        ack: 0,
        flags: TcpFlags(TcpFlags::SYN),
        window: 1000,
        payload_len: 0,
        options: TcpOptions::default(),
    };
    let pkt = PacketRef {
        frame: id,
        ts: Timestamp(id * 1000),
    };
    Flow::new(id, &seg, pkt)
}

fn ip(host: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, host))
}

fn view(flow: &Flow, slot: usize) -> FlowView<'_> {
    FlowView {
        exchanges: 1,
        ..FlowView::in_slot(flow, slot)
    }
}

fn span(a: u64, b: u64) -> Span {
    (Timestamp(a * 1_000_000), Timestamp(b * 1_000_000))
}

/// Flow `f` (in `slot`) had exchanges over `a..b` ms and ends, flagged by rule 3 or not.
fn end(d: &mut RttBound, f: &Flow, slot: usize, (a, b): (u64, u64), flagged: bool) {
    d.join_peer(&view(f, slot), Timestamp::ZERO);
    leave(d, f, slot, (a, b), flagged);
}

/// Flow `f`, joined already, ends.
fn leave(d: &mut RttBound, f: &Flow, slot: usize, (a, b): (u64, u64), flagged: bool) {
    assert!(d.open.remove(&view(f, slot)).is_some());
    d.leave_peer((0, f.client.ip), span(a, b), flagged);
}

/// Rule 5's figures for server 0 once every flagged flow is counted: (concurrent, peak).
fn parallel(d: &mut RttBound) -> (u64, u32) {
    d.settle_all();
    let st = d.state.get(0, Direction::ClientToServer);
    (st.concurrent_flows, st.peak)
}

/// (client host, exchanges' span in ms, flagged).
const FLOWS: [(u8, (u64, u64), bool); 8] = [
    (1, (10, 20), true),   // F: flagged
    (1, (15, 16), false),  // inside F
    (1, (20, 25), false),  // starts as F's last response arrives: not during it
    (1, (5, 10), false),   // ends as F's first request leaves: not during it
    (2, (0, 100), false),  // another client
    (1, (100, 200), true), // flagged, alone
    (1, (0, 300), false),  // spans both flagged flows, ends last
    (1, (150, 400), true), // flagged, overlaps the two above
];

fn flows() -> Vec<Flow> {
    FLOWS
        .iter()
        .enumerate()
        .map(|(i, &(host, _, _))| flow(i as u64 + 1, host, 40_000 + i as u16))
        .collect()
}

#[test]
fn overlaps_count_whole_spans_of_the_clients_flows_whatever_ended_first() {
    let flows = flows();
    // Every flow joins (its first exchange) before any ends; they end in the order given
    // and in the reverse one: the count is the same.
    for reverse in [false, true] {
        let mut d = RttBound::default();
        for (slot, f) in flows.iter().enumerate() {
            d.join_peer(&view(f, slot), Timestamp::ZERO);
        }
        let mut order: Vec<usize> = (0..FLOWS.len()).collect();
        if reverse {
            order.reverse();
        }
        for i in order {
            let (_, s, flagged) = FLOWS[i];
            leave(&mut d, &flows[i], i, s, flagged);
        }
        assert_eq!(d.kept, 8);
        // F overlaps 15..16 and 0..300; 100..200 overlaps 0..300 and 150..400; 150..400
        // overlaps those two: three concurrent flows, each with two others.
        assert_eq!(parallel(&mut d), (3, 3), "ended in reverse: {reverse}");
    }
    // Alone, a flagged flow is not concurrent: flows that only touch it, or another client's.
    let mut d = RttBound::default();
    end(&mut d, &flows[0], 0, (10, 20), true);
    end(&mut d, &flows[2], 2, (20, 25), false);
    end(&mut d, &flows[3], 3, (5, 10), false);
    end(&mut d, &flows[4], 4, (0, 100), false);
    assert_eq!(parallel(&mut d), (0, 0));
}

#[test]
fn flows_divided_between_two_detectors_count_as_one_detector_counts_them() {
    let flows = flows();
    let mut one = RttBound::default();
    let mut shards = [RttBound::default(), RttBound::default()];
    let mut alone = RttBound::default();
    for (i, (f, &(_, s, flagged))) in flows.iter().zip(&FLOWS).enumerate() {
        end(&mut one, f, i, s, flagged);
        end(&mut shards[i % 2], f, i, s, flagged);
        if i % 2 == 0 {
            end(&mut alone, f, i, s, flagged);
        }
    }
    // One shard alone sees F overlap 0..300 only.
    assert_eq!(parallel(&mut alone), (1, 2));
    let mut merged = RttBound::default();
    let states: Vec<_> = shards.iter_mut().map(|d| d.take_state()).collect();
    for s in states {
        merged.absorb(s, &ShardMap::identity(8, 1));
    }
    assert_eq!(merged.kept, 8);
    assert_eq!(parallel(&mut one), (3, 3));
    assert_eq!(parallel(&mut merged), (3, 3));
}

#[test]
fn past_its_cap_the_table_forgets_the_clients_idle_longest_and_no_busy_one() {
    let mut d = RttBound {
        max_spans: 4,
        ..RttBound::default()
    };
    // Client 1 keeps a flow open throughout; clients 2..=9 each end one flow in turn, client 2
    // two flagged flows that overlap each other.
    let busy = flow(1, 1, 40_000);
    d.join_peer(&view(&busy, 0), Timestamp::ZERO);
    let f2 = flow(2, 2, 40_001);
    end(&mut d, &f2, 1, (0, 10), true);
    let others: Vec<Flow> = (2..=9).map(|h| flow(u64::from(h) + 1, h, 40_000)).collect();
    for (i, f) in others.iter().enumerate() {
        let h = i as u8 + 2;
        end(&mut d, f, i + 2, (5, 20), h == 2);
        assert!(d.kept <= 4, "{} spans kept", d.kept);
        assert!(d.idle.len() <= d.clients.len(), "each client queued once");
    }
    // Client 2 was forgotten, its flagged flows counted first (each overlapped the other).
    assert!(!d.clients.contains_key(&(0, ip(2))));
    assert_eq!(
        d.state.get(0, Direction::ClientToServer).concurrent_flows,
        2
    );
    // The busy client is kept, with the four that fell idle last.
    assert!(d.clients.contains_key(&(0, ip(1))));
    for h in 3..=5 {
        assert!(!d.clients.contains_key(&(0, ip(h))), "client {h}");
    }
    for h in 6..=9 {
        assert_eq!(d.clients[&(0, ip(h))].ended.len(), 1, "client {h}");
    }
    assert_eq!(d.kept, 4);
}

#[test]
fn a_client_always_busy_keeps_its_newer_spans_once_the_table_is_full() {
    let mut d = RttBound {
        max_spans: 8,
        ..RttBound::default()
    };
    let busy = flow(1, 1, 40_000);
    d.join_peer(&view(&busy, 0), Timestamp::ZERO);
    let flows: Vec<Flow> = (2..=40).map(|id| flow(id, 1, 40_000 + id as u16)).collect();
    for (i, f) in flows.iter().enumerate() {
        let t = i as u64 * 10;
        // Every third flagged, each overlapping the one before it.
        end(&mut d, f, i + 1, (t, t + 15), i % 3 == 0);
        assert!(d.kept <= 8, "{} spans kept", d.kept);
    }
    let peers = &d.clients[&(0, ip(1))];
    assert_eq!(peers.open, 1);
    let last = peers.ended.last().copied();
    assert_eq!(last, Some(span(380, 395)), "the newest span stays");
    // Every flagged flow was counted, whenever it was.
    let (concurrent, peak) = parallel(&mut d);
    assert_eq!(concurrent, 13);
    assert_eq!(peak, 3);
}

#[test]
fn a_client_busy_again_is_not_forgotten_for_its_earlier_idleness() {
    let mut d = RttBound {
        max_spans: 2,
        ..RttBound::default()
    };
    let a1 = flow(1, 1, 40_000);
    end(&mut d, &a1, 0, (0, 1), false); // client 1 idle, queued
    let a2 = flow(2, 1, 40_001);
    d.join_peer(&view(&a2, 0), Timestamp::ZERO); // busy again, still queued from before
    let b = flow(3, 2, 40_000);
    let c = flow(4, 3, 40_000);
    end(&mut d, &b, 1, (0, 1), false);
    end(&mut d, &c, 2, (0, 1), false); // three spans: client 1's old entry is popped, not evicted
    assert_eq!(d.clients[&(0, ip(1))].open, 1, "client 1 has an open flow");
    assert!(
        !d.clients.contains_key(&(0, ip(2))),
        "client 2 idle: forgotten"
    );
    assert_eq!(d.kept, 2);
}

/// A flow whose first exchange is told as it ends (one exchange, its response ended by the
/// close: most flows of a busy server) is judged from `ending` and takes no slot; its client
/// joins and is left with no open flow. A flow with a slot keeps using it at its end.
#[test]
fn an_exchange_told_at_the_end_takes_no_slot() {
    let mut d = RttBound::default();
    let key = |f: &Flow| (0, f.client.ip);
    let f = flow(1, 1, 40_000);
    let at_end = FlowView {
        at: view(&f, 5).at.at_end(),
        ..view(&f, 5)
    };
    d.join_peer(&at_end, Timestamp::ZERO);
    assert!(d.open.slots.is_empty(), "no slot taken");
    assert_eq!(d.clients[&key(&f)].open, 1);
    d.on_flow_end(&at_end);
    assert!(d.ending.is_none());
    assert_eq!(d.clients[&key(&f)].open, 0);
    assert_eq!(d.clients[&key(&f)].ended.len(), 1, "its span is kept");

    let g = flow(2, 1, 40_001);
    d.join_peer(&view(&g, 0), Timestamp::ZERO);
    let g_end = FlowView {
        at: view(&g, 0).at.at_end(),
        ..view(&g, 0)
    };
    d.join_peer(&g_end, Timestamp::ZERO);
    assert!(d.ending.is_none(), "a flow with a slot keeps it");
    assert_eq!(d.clients[&key(&g)].open, 1, "joined once");
    d.on_flow_end(&g_end);
    assert!(d.open.get(&view(&g, 0)).is_none());
    assert_eq!(d.clients[&key(&g)].open, 0);
    assert_eq!(d.clients[&key(&g)].ended.len(), 2);
}
