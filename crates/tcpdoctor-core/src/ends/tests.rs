use std::net::{IpAddr, Ipv4Addr};

use super::*;
use crate::wire::{Endpoint, TcpOptions};

const MS: u64 = 1_000_000;
const CLIENT: u16 = 40000;
const SERVER: u16 = 7000;

fn ep(ip: [u8; 4], port: u16) -> Endpoint {
    Endpoint {
        ip: IpAddr::V4(Ipv4Addr::from(ip)),
        port,
    }
}

/// A packet as both ends would show it (the addresses differ per end, as after a NAT).
#[derive(Clone, Copy)]
struct P {
    c2s: bool,
    seq: u32,
    ack: u32,
    flags: u8,
    len: u32,
    tsval: u32,
}

fn seg(p: P, client_ip: [u8; 4], server_ip: [u8; 4]) -> TcpSegment {
    let (c, s) = (ep(client_ip, CLIENT), ep(server_ip, SERVER));
    let (src, dst) = if p.c2s { (c, s) } else { (s, c) };
    TcpSegment {
        src,
        dst,
        seq: p.seq,
        ack: p.ack,
        flags: TcpFlags(p.flags),
        window: 512,
        payload_len: p.len,
        options: TcpOptions {
            timestamp: Some((p.tsval, 0)),
            ..TcpOptions::default()
        },
    }
}

const S: u8 = TcpFlags::SYN;
const A: u8 = TcpFlags::ACK;
const PA: u8 = TcpFlags::PSH | TcpFlags::ACK;

fn p(c2s: bool, seq: u32, ack: u32, flags: u8, len: u32, tsval: u32) -> P {
    P {
        c2s,
        seq,
        ack,
        flags,
        len,
        tsval,
    }
}

/// A path with `one_way` ms each way: each packet is seen at its sender's end at `t` and at the
/// receiver's end `one_way` later, unless it is in `lost` (indexes into `packets`).
/// Returns (client end, server end).
fn path(packets: &[(u64, P)], one_way: u64, lost: &[usize]) -> (EndCapture, EndCapture) {
    let mut near = Vec::new();
    let mut far = Vec::new();
    for (i, &(t, p)) in packets.iter().enumerate() {
        let (at_sender, at_receiver) = if p.c2s {
            (&mut near, &mut far)
        } else {
            (&mut far, &mut near)
        };
        at_sender.push((t * MS, p));
        if !lost.contains(&i) {
            at_receiver.push((t * MS + one_way * MS, p));
        }
    }
    let mut ends = [
        EndCapture::new("near.pcapng"),
        EndCapture::new("far.pcapng"),
    ];
    for (k, list) in [near, far].iter_mut().enumerate() {
        list.sort_by_key(|(t, _)| *t);
        let (cip, sip) = if k == 0 {
            ([198, 18, 0, 2], [198, 18, 0, 1])
        } else {
            ([198, 18, 0, 2], [127, 0, 0, 1])
        };
        for (n, (t, p)) in list.iter().enumerate() {
            ends[k].on_segment(n as u64 + 1, Timestamp(*t), &seg(*p, cip, sip));
        }
    }
    let [a, b] = ends;
    (a, b)
}

/// Handshake, one request, a response whose segment is lost and retransmitted at t=300.
fn lossy_exchange() -> Vec<(u64, P)> {
    vec![
        (0, p(true, 1000, 0, S, 0, 1)),
        (15, p(false, 5000, 1001, S | A, 0, 1)),
        (30, p(true, 1001, 5001, A, 0, 2)),
        (30, p(true, 1001, 5001, PA, 10, 2)),
        (45, p(false, 5001, 1011, PA, 100, 3)),
        (75, p(true, 1011, 5001, A, 0, 4)),
        (300, p(false, 5001, 1011, PA, 100, 300)),
        (315, p(true, 1011, 5101, A, 0, 5)),
    ]
}

#[test]
fn a_lost_response_is_lost_on_the_way_and_its_retransmission_replaced_it() {
    let (near, far) = path(&lossy_exchange(), 15, &[4]);
    let r = compare(near, far);
    assert_eq!(r.paired, 1);
    assert_eq!(r.roles.first_is_client_end, 1);
    assert_eq!(r.roles.assumed, 0);
    let s2c = &r.server_to_client;
    assert_eq!((s2c.sent, s2c.arrived, s2c.lost), (3, 2, 1));
    // At the far end: SYN 1, SYN-ACK 2, ACK 3, request 4, response 5.
    assert_eq!(s2c.lost_frames, vec![5]);
    assert_eq!(
        (s2c.retransmitted, s2c.replaced_lost, s2c.needless),
        (1, 1, 0)
    );
    let d = s2c.delay_ms.expect("delays");
    assert_eq!((d.min, d.p50, d.max), (15.0, 15.0, 15.0));
    assert_eq!(r.client_to_server.lost, 0);
    assert_eq!(r.round_trip_ms, Some(30.0));
    assert!(!r.clocks_differ);
}

#[test]
fn a_retransmission_whose_first_copy_arrived_names_both_frames() {
    // The client's ACK of the response (index 5) is lost instead: the server resends data
    // that had arrived.
    let (near, far) = path(&lossy_exchange(), 15, &[5]);
    let r = compare(near, far);
    let s2c = &r.server_to_client;
    assert_eq!((s2c.lost, s2c.retransmitted, s2c.needless), (0, 1, 1));
    let n = s2c.needless_frames[0];
    // At the far end: SYN 1, SYN-ACK 2, ACK 3, request 4, response 5, resend 6.
    assert_eq!(n.resent_frame, 6);
    // At the near end: SYN 1, SYN-ACK 2, ACK 3, request 4, response 5.
    assert_eq!(n.arrived_frame, 5);
    assert_eq!(r.client_to_server.lost, 1);
    let text = render_ends(&r);
    assert!(
        text.contains("frame 6 in far.pcapng resends what frame 5 in near.pcapng shows arriving"),
        "{text}"
    );
}

#[test]
fn identical_copies_match_the_one_that_got_through() {
    // No timestamps to tell the copies apart: the original (t=45) is lost and the identical
    // retransmission (t=300) arrives at 315. Matching by the typical delay gives 15 ms,
    // not 270.
    let mut packets = lossy_exchange();
    for (_, p) in packets.iter_mut() {
        p.tsval = 0;
    }
    let (near, far) = path(&packets, 15, &[4]);
    let r = compare(near, far);
    let s2c = &r.server_to_client;
    assert_eq!((s2c.lost, s2c.replaced_lost), (1, 1));
    assert_eq!(s2c.lost_frames, vec![5]);
    assert_eq!(s2c.delay_ms.unwrap().max, 15.0);
}

#[test]
fn the_client_end_is_found_from_the_handshake_whatever_the_file_order() {
    let (near, far) = path(&lossy_exchange(), 15, &[]);
    let r = compare(far, near);
    assert_eq!(r.roles.second_is_client_end, 1);
    assert_eq!(r.client_to_server.sent, 5);
    assert_eq!(r.server_to_client.delay_ms.unwrap().p50, 15.0);
    assert!(render_ends(&r).contains("near.pcapng is the client's end (from the handshakes)"));
}

/// Moves every timestamp of a capture by `ns`, as a clock set differently would.
fn shift(cap: &mut EndCapture, ns: u64) {
    for c in &mut cap.conns {
        for p in &mut c.packets {
            p.ts = Timestamp(p.ts.0 + ns);
        }
    }
    cap.first = cap.first.map(|t| Timestamp(t.0 + ns));
    cap.last = cap.last.map(|t| Timestamp(t.0 + ns));
}

#[test]
fn different_clocks_show_as_a_negative_delay_and_the_round_trip_survives() {
    let (mut near, mut far) = path(&lossy_exchange(), 15, &[]);
    // The far host's clock is 20 ms behind the near one's.
    shift(&mut near, 1_000 * MS);
    shift(&mut far, 980 * MS);
    let r = compare(near, far);
    assert!(r.clocks_differ);
    assert_eq!(r.client_to_server.delay_ms.unwrap().p50, -5.0);
    assert_eq!(r.server_to_client.delay_ms.unwrap().p50, 35.0);
    assert_eq!(r.round_trip_ms, Some(30.0));
    assert!(render_ends(&r).contains("not taken on one clock"));
}

#[test]
fn a_new_isn_on_the_same_ports_is_another_connection() {
    let mut packets = lossy_exchange();
    // The same ports again, a new ISN: only at the client's end (its SYN was lost).
    packets.push((400, p(true, 9000, 0, S, 0, 400)));
    let n = packets.len() - 1;
    let (near, far) = path(&packets, 15, &[n]);
    let r = compare(near, far);
    assert_eq!(r.paired, 1);
    assert_eq!(r.unpaired, [1, 0]);
    assert_eq!(r.client_to_server.lost, 0);
}

#[test]
fn packets_still_in_flight_when_the_capture_stopped_are_not_lost() {
    let packets = lossy_exchange();
    let (near, mut far) = path(&packets, 15, &[7]);
    // The far capture stopped at 310: the final ACK (sent at 315) could not be in it anyway.
    far.last = Some(Timestamp(310 * MS));
    let r = compare(near, far);
    assert_eq!(r.client_to_server.lost, 0);
    assert_eq!(r.client_to_server.unaccounted, 1);
}

#[test]
fn captures_of_other_traffic_pair_nothing_and_say_so() {
    let (near, _) = path(&lossy_exchange(), 15, &[]);
    let mut other = EndCapture::new("other.pcap");
    let mut s = seg(p(true, 77, 0, S, 0, 1), [10, 0, 0, 1], [10, 0, 0, 2]);
    s.src.port = 1234;
    other.on_segment(1, Timestamp(0), &s);
    let r = compare(near, other);
    assert_eq!(r.paired, 0);
    assert!(render_ends(&r).contains("No connection appears in both files"));
}

#[test]
fn identical_copies_never_match_a_copy_sent_after_the_arrival() {
    // No handshake, no timestamps: a request and its needless retransmission, sent at 0 and
    // 16 ms over 15 ms. Nothing unambiguous tells the typical delay; on one clock the arrival
    // at 15 can only be the copy sent at 0.
    let packets = [
        (0, p(true, 1, 1, PA, 10, 0)),
        (16, p(true, 1, 1, PA, 10, 0)),
    ];
    let (near, far) = path(&packets, 15, &[]);
    let r = compare(near, far);
    let c2s = &r.client_to_server;
    assert_eq!((c2s.lost, c2s.retransmitted, c2s.needless), (0, 1, 1));
    assert_eq!(c2s.delay_ms.unwrap().min, 15.0);
    assert!(!r.clocks_differ);
}

#[test]
fn two_clients_on_the_same_port_stay_two_connections() {
    // The server's end sees two clients that picked the same port; the client's end of the
    // first sees only its own. Grouping by ports alone would file the second client's packets
    // under the first and call them lost.
    let (near, _) = path(&lossy_exchange(), 15, &[]);
    let mut far = EndCapture::new("far.pcapng");
    let mut n = 0;
    let mut add = |cap: &mut EndCapture, t: u64, pk: P, client: [u8; 4]| {
        n += 1;
        cap.on_segment(n, Timestamp(t * MS), &seg(pk, client, [127, 0, 0, 1]));
    };
    for (t, pk) in lossy_exchange() {
        let at = if pk.c2s { t + 15 } else { t };
        add(&mut far, at, pk, [198, 18, 0, 2]);
        // Another client, another address, the same port, its own ISN.
        let other = P {
            seq: pk.seq.wrapping_add(if pk.c2s { 77_000 } else { 0 }),
            ack: pk.ack.wrapping_add(if pk.c2s { 0 } else { 77_000 }),
            ..pk
        };
        add(&mut far, at, other, [198, 18, 0, 9]);
    }
    let r = compare(near, far);
    assert_eq!(r.paired, 1);
    assert_eq!(r.unpaired, [0, 1]);
    assert_eq!(r.client_to_server.lost, 0);
    assert_eq!(r.server_to_client.only_at_receiver, 0);
    assert_eq!(r.client_to_server.only_at_receiver, 0);
}

#[test]
fn packets_cut_differently_at_the_two_ends_are_not_called_losses() {
    // The client's end captured above TSO (one 2896-byte super-packet), the server's end
    // below it (two wire packets): nothing pairs, and the report says why.
    let mut near = EndCapture::new("near.pcapng");
    let mut far = EndCapture::new("far.pcapng");
    let (c, sv) = ([198, 18, 0, 2], [198, 18, 0, 1]);
    for k in 0..20u32 {
        let t = u64::from(k) * 10;
        near.on_segment(
            u64::from(k) + 1,
            Timestamp(t * MS),
            &seg(p(true, 1 + k * 2896, 1, PA, 2896, k), c, sv),
        );
        for half in 0..2u32 {
            far.on_segment(
                u64::from(k * 2 + half) + 1,
                Timestamp((t + 15) * MS),
                &seg(p(true, 1 + k * 2896 + half * 1448, 1, PA, 1448, k), c, sv),
            );
        }
    }
    let r = compare(near, far);
    assert_eq!(r.paired, 1);
    assert!(r.segmentation_differs, "{r:?}");
    let text = render_ends(&r);
    assert!(
        text.contains("cut the data into packets differently"),
        "{text}"
    );
    assert!(text.contains("largest packet 2896 bytes"), "{text}");

    // The same packets at both ends: no such note.
    let (near, far) = path(&lossy_exchange(), 15, &[4]);
    assert!(!compare(near, far).segmentation_differs);
}
