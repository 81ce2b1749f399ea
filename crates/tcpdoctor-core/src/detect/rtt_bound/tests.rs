//! The per-client table that tells parallel connections: leaving it and forgetting idle
//! clients never scans it.

use std::net::{IpAddr, Ipv4Addr};

use super::{Detector, FlowView, RttBound};
use crate::detect::At;
use crate::flow::{Flow, PacketRef};
use crate::time::Timestamp;
use crate::wire::{Endpoint, TcpFlags, TcpOptions, TcpSegment};

/// Flow `id` from client address 10.0.0.`host`, port `port`, to one server.
fn flow(id: u64, host: u8, port: u16) -> Flow {
    let seg = TcpSegment {
        src: Endpoint {
            ip: IpAddr::V4(Ipv4Addr::new(10, 0, 0, host)),
            port,
        },
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

fn view(flow: &Flow, slot: usize) -> FlowView<'_> {
    FlowView {
        flow,
        group: 0,
        slot,
        exchanges: 1,
        first_data: None,
        at: At::default(),
    }
}

fn client_count(d: &RttBound, host: u8) -> Option<usize> {
    let key = (0, IpAddr::V4(Ipv4Addr::new(10, 0, 0, host)));
    d.clients.get(&key).map(|p| p.open.len())
}

/// Each open flow knows where it sits in its client's list, so that it leaves in O(1).
fn assert_indices_consistent(d: &RttBound) {
    for peers in d.clients.values() {
        for (i, &(id, slot)) in peers.open.iter().enumerate() {
            let fs = d.open.get_at(slot, id).expect("an open peer has state");
            assert_eq!(fs.peer_index as usize, i, "flow {id}");
        }
    }
}

#[test]
fn a_flow_leaves_its_clients_list_by_swapping_in_the_last() {
    let mut d = RttBound::default();
    let flows: Vec<Flow> = (1..=4).map(|id| flow(id, 1, 40_000 + id as u16)).collect();
    for (slot, f) in flows.iter().enumerate() {
        d.join_peer(&view(f, slot));
    }
    assert_eq!(client_count(&d, 1), Some(4));
    // The second flow ends: the last takes its place, and knows it.
    d.on_flow_end(&view(&flows[1], 1));
    assert_eq!(client_count(&d, 1), Some(3));
    let key = (0, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
    let ids: Vec<u64> = d.clients[&key].open.iter().map(|&(id, _)| id).collect();
    assert_eq!(ids, vec![1, 4, 3]);
    assert_indices_consistent(&d);
    // Ending a flow twice, or one that never joined, changes nothing.
    d.on_flow_end(&view(&flows[1], 1));
    assert_eq!(client_count(&d, 1), Some(3));
    for (slot, f) in flows.iter().enumerate() {
        d.on_flow_end(&view(f, slot));
    }
    assert_eq!(client_count(&d, 1), Some(0));
    assert_eq!(d.idle.len(), 1);
}

#[test]
fn past_its_cap_the_table_forgets_the_clients_idle_longest_and_no_busy_one() {
    let mut d = RttBound {
        max_clients: 4,
        ..RttBound::default()
    };
    // Client 1 keeps a flow open throughout; clients 2..=9 each open one and end it in turn.
    let busy = flow(1, 1, 40_000);
    d.join_peer(&view(&busy, 0));
    let others: Vec<Flow> = (2..=9).map(|h| flow(u64::from(h), h, 40_000)).collect();
    for (i, f) in others.iter().enumerate() {
        d.join_peer(&view(f, i + 1));
    }
    assert_eq!(
        d.clients.len(),
        9,
        "clients with open flows are never forgotten"
    );
    for (i, f) in others.iter().enumerate() {
        d.on_flow_end(&view(f, i + 1));
        assert!(d.clients.len() <= 9);
        assert!(d.idle.len() <= d.clients.len(), "each client queued once");
    }
    // Four remain: the busy client and the three that fell idle last.
    assert_eq!(d.clients.len(), 4);
    assert_eq!(client_count(&d, 1), Some(1));
    for h in 2..=6 {
        assert_eq!(
            client_count(&d, h),
            None,
            "client {h} idle longest: forgotten"
        );
    }
    for h in 7..=9 {
        assert_eq!(client_count(&d, h), Some(0), "client {h} idle last: kept");
    }
    assert_indices_consistent(&d);
}

#[test]
fn a_client_busy_again_is_not_forgotten_for_its_earlier_idleness() {
    let mut d = RttBound {
        max_clients: 2,
        ..RttBound::default()
    };
    let a1 = flow(1, 1, 40_000);
    d.join_peer(&view(&a1, 0));
    d.on_flow_end(&view(&a1, 0)); // client 1 idle, queued
    let a2 = flow(2, 1, 40_001);
    d.join_peer(&view(&a2, 0)); // busy again, still queued from before
    let b = flow(3, 2, 40_000);
    let c = flow(4, 3, 40_000);
    d.join_peer(&view(&b, 1));
    d.join_peer(&view(&c, 2));
    d.on_flow_end(&view(&b, 1)); // three clients: client 1's old entry is popped, not evicted
    assert_eq!(client_count(&d, 1), Some(1), "client 1 has an open flow");
    assert_eq!(client_count(&d, 2), None, "client 2 was idle: forgotten");
    assert_eq!(d.clients.len(), 2);
    assert_indices_consistent(&d);
}
