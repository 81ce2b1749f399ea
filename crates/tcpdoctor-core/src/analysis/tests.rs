//! The analysis under a SYN flood and under time that steps back.

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use super::*;
use crate::wire::{TcpFlags, TcpOptions};

const SYN: u8 = TcpFlags::SYN;
const ACK: u8 = TcpFlags::ACK;

fn ep(a: u32, port: u16) -> Endpoint {
    Endpoint {
        ip: IpAddr::V4(Ipv4Addr::from(a)),
        port,
    }
}

const SERVER: u32 = 0xc000_0201;

/// A segment between client `c` (10.x.y.z, port 40000) and the server, at `secs`.
#[allow(clippy::too_many_arguments)]
fn send(
    an: &mut Analyzer,
    frame: u64,
    secs: f64,
    c: u32,
    to_server: bool,
    seq: u32,
    ack: u32,
    flags: u8,
) {
    send_segment(an, frame, secs, c, to_server, seq, ack, flags, 0);
}

/// [`send`] with `len` bytes of payload.
#[allow(clippy::too_many_arguments)]
fn send_segment(
    an: &mut Analyzer,
    frame: u64,
    secs: f64,
    c: u32,
    to_server: bool,
    seq: u32,
    ack: u32,
    flags: u8,
    len: u32,
) {
    let (client, server) = (ep(0x0a00_0000 + c, 40000), ep(SERVER, 80));
    let (src, dst) = if to_server {
        (client, server)
    } else {
        (server, client)
    };
    let seg = TcpSegment {
        src,
        dst,
        seq,
        ack,
        flags: TcpFlags(flags),
        window: 1000,
        payload_len: len,
        options: TcpOptions::default(),
    };
    let ts = Timestamp::from_nanos((secs * 1e9) as u64);
    an.on_segment(PacketRef { frame, ts }, &seg);
}

/// SYN, SYN-ACK and ACK of client `c` at `secs`.
fn handshake(an: &mut Analyzer, frame: u64, secs: f64, c: u32) {
    send(an, frame, secs, c, true, 100, 0, SYN);
    send(an, frame + 1, secs, c, false, 500, 101, SYN | ACK);
    send(an, frame + 2, secs, c, true, 101, 501, ACK);
}

fn open_clients(an: &Analyzer) -> Vec<u32> {
    let mut v: Vec<u32> = an
        .flows
        .values()
        .map(|e| match e.flow.client.ip {
            IpAddr::V4(a) => u32::from(a) - 0x0a00_0000,
            IpAddr::V6(_) => unreachable!(),
        })
        .collect();
    v.sort_unstable();
    v
}

#[test]
fn a_syn_and_its_syn_ack_stay_compact_until_the_handshake_completes() {
    let mut an = Analyzer::default();
    send(&mut an, 1, 0.0, 1, true, 100, 0, SYN);
    send(&mut an, 2, 0.001, 1, false, 500, 101, SYN | ACK);
    assert_eq!((an.flows.len(), an.half_open.len()), (0, 1));
    send(&mut an, 3, 0.002, 1, true, 101, 501, ACK);
    assert_eq!((an.flows.len(), an.half_open.len()), (1, 0));
    let e = an.flows.values().next().unwrap();
    assert!(
        e.flow.handshake.completed(),
        "the kept SYN and SYN-ACK were replayed"
    );
    assert_eq!(e.flow.id, 1);
    assert_eq!(e.flow.handshake_rtt(), Some(Duration::from_millis(2)));
    let (summary, _) = an.finish("f", "pcap");
    assert_eq!((summary.flows, summary.half_open_untracked), (1, 0));
}

#[test]
fn attempts_beyond_the_cap_are_dropped_oldest_first_and_counted() {
    let n = MAX_HALF_OPEN as u32;
    for (extra, dropped) in [(0u32, 0u64), (10, 10)] {
        let mut an = Analyzer::default();
        for c in 0..n + extra {
            send(
                &mut an,
                u64::from(c) + 1,
                f64::from(c) * 1e-6,
                c,
                true,
                100,
                0,
                SYN,
            );
        }
        assert_eq!(an.half_open.len(), MAX_HALF_OPEN);
        // The newest attempt completes as a connection with its handshake; the oldest, when
        // evicted, comes back as a flow that never saw its SYN.
        let f = u64::from(n + extra) + 1;
        let last = n + extra - 1;
        send(&mut an, f, 1.0, last, false, 500, 101, SYN | ACK);
        send(&mut an, f + 1, 1.0, last, true, 101, 501, ACK);
        send(&mut an, f + 2, 1.0, 0, true, 101, 501, ACK);
        let completed = |an: &Analyzer, c: u32| {
            an.flows
                .values()
                .find(|e| e.flow.client.ip == ep(0x0a00_0000 + c, 0).ip)
                .map(|e| e.flow.handshake.first_syn().is_some())
        };
        assert_eq!(completed(&an, last), Some(true));
        assert_eq!(completed(&an, 0), Some(extra == 0), "extra {extra}");
        let (summary, _) = an.finish("f", "pcap");
        assert_eq!(summary.half_open_untracked, dropped);
    }
}

/// A SYN sent again with the same ISN (the kernel's retries at 1 and 3 s) keeps its attempt
/// compact, and the flow it becomes when the handshake completes saw every retry; a SYN with
/// another ISN does not count as a retry.
#[test]
fn syn_retries_stay_compact_and_are_replayed() {
    let mut an = Analyzer::default();
    for (frame, secs) in [(1, 0.0), (2, 1.0), (3, 3.0)] {
        send(&mut an, frame, secs, 1, true, 100, 0, SYN);
    }
    send(&mut an, 4, 3.001, 1, false, 500, 101, SYN | ACK);
    send(&mut an, 5, 4.001, 1, false, 500, 101, SYN | ACK);
    assert_eq!((an.flows.len(), an.half_open.len()), (0, 1));
    send(&mut an, 6, 4.002, 1, true, 101, 501, ACK);
    assert_eq!((an.flows.len(), an.half_open.len()), (1, 0));
    let e = an.flows.values().next().unwrap();
    assert_eq!(e.flow.handshake.syn_retries(), 2);
    assert!(e.flow.handshake.completed());
    assert_eq!(
        e.flow
            .handshake
            .unanswered_syn_retry()
            .map(|(a, b)| (a.frame, b.frame)),
        Some((1, 3))
    );
    // Another ISN is another connection: the attempt becomes a flow.
    let mut an = Analyzer::default();
    send(&mut an, 1, 0.0, 1, true, 100, 0, SYN);
    send(&mut an, 2, 1.0, 1, true, 7000, 0, SYN);
    assert_eq!(an.half_open.len(), 0);
}

/// A flood whose SYNs are each sent three times stays in the capped table of attempts: beyond
/// the cap the oldest are evicted and counted, as for SYNs sent once.
#[test]
fn a_retried_flood_is_capped_like_a_flood() {
    let n = MAX_HALF_OPEN as u32 + 10;
    let mut an = Analyzer::default();
    let mut frame = 0;
    for round in 0..3 {
        for c in 0..n {
            frame += 1;
            let secs = [0.0, 1.0, 3.0][round] + f64::from(c) * 1e-7;
            send(&mut an, frame, secs, c, true, 100, 0, SYN);
        }
    }
    assert_eq!((an.flows.len(), an.half_open.len()), (0, MAX_HALF_OPEN));
    let (summary, _) = an.finish("f", "pcap");
    assert!(
        summary.half_open_untracked >= 10,
        "{}",
        summary.half_open_untracked
    );
}

/// File A (an hour in) then file B (from 0), merged end to end: B's time ages A's flows, a
/// step back neither expires B's flows (as ageing on the latest timestamp would) nor keeps A's
/// forever (as raw timestamps would).
#[test]
fn a_step_back_ages_flows_on_elapsed_time() {
    let mut an = Analyzer::default();
    handshake(&mut an, 1, 3600.0, 1);
    send(&mut an, 4, 0.0, 2, true, 100, 0, SYN);
    send(&mut an, 5, 0.0, 2, false, 500, 101, SYN | ACK);
    send(&mut an, 6, 300.0, 2, true, 101, 501, ACK);
    an.sweep(an.clock.now());
    assert_eq!(
        open_clients(&an),
        vec![1, 2],
        "300 s elapsed: nothing idles out"
    );
    send(&mut an, 7, 700.0, 2, true, 101, 501, ACK);
    an.sweep(an.clock.now());
    assert_eq!(
        open_clients(&an),
        vec![2],
        "700 s elapsed: A idled out, B did not"
    );
    let (summary, _) = an.finish("f", "pcap");
    assert_eq!(summary.duration_ms, 3_600_000.0, "0 s to 3600 s");
    let back = summary.time_steps_back.unwrap();
    assert_eq!((back.count, back.largest_at_frame), (1, 4));
}

#[test]
fn forward_time_reports_no_step_and_its_own_span() {
    let mut an = Analyzer::default();
    handshake(&mut an, 1, 10.0, 1);
    handshake(&mut an, 4, 12.5, 2);
    let (summary, _) = an.finish("f", "pcap");
    assert_eq!(summary.duration_ms, 2500.0);
    assert!(summary.time_steps_back.is_none());
}

/// A flow's own clock never goes back: its last timestamp is the latest it saw.
#[test]
fn a_flows_last_timestamp_is_its_latest() {
    let mut an = Analyzer::default();
    handshake(&mut an, 1, 100.0, 1);
    send(&mut an, 4, 50.0, 1, true, 101, 501, ACK);
    let e = an.flows.values().next().unwrap();
    assert_eq!(e.flow.last_ts, Timestamp::from_nanos(100_000_000_000));
}

/// A flow idle past the timeout has ended when its next segment comes, whether or not the
/// table was swept in between (the sweep runs on a packet count that depends on the table's
/// size): the segment starts a flow of its own either way.
#[test]
fn an_idle_flow_has_ended_whether_or_not_a_sweep_ran_meanwhile() {
    let run = |filler: u64| {
        let mut an = Analyzer::default();
        handshake(&mut an, 1, 0.0, 1);
        // Client 2 keeps its own flow busy for 700 s while client 1 says nothing.
        handshake(&mut an, 4, 0.5, 2);
        for i in 0..filler {
            let secs = 1.0 + 699.0 * i as f64 / filler as f64;
            send(&mut an, 7 + i, secs, 2, true, 101, 501, ACK);
        }
        send(&mut an, 1 << 40, 700.5, 1, true, 101, 501, ACK);
        an.finish("t", "pcap").0.flows
    };
    assert_eq!(
        run(10),
        3,
        "client 1's segment after 700 s of silence is a new flow"
    );
    assert_eq!(run(SWEEP_EVERY + 10), 3, "and the same after a sweep");
}

/// A closed flow leaves the table of open flows for the compact one of ended flows
/// ([`linger`]): its last ACK and a retransmitted FIN are absorbed there, each keeping it
/// longer, and so is its own SYN again; a SYN with another ISN opens a new flow on its
/// endpoints; a segment past the linger time starts one as the sweep would have left it; the
/// sweep forgets it.
#[test]
fn a_closed_flow_lingers_compact_and_absorbs_its_last_segments() {
    const FIN: u8 = TcpFlags::FIN;
    let tables = |an: &Analyzer| (an.flows.len(), an.lingering.len());
    let closed = |c: u32, secs: f64| {
        let mut an = Analyzer::default();
        handshake(&mut an, 1, secs, c);
        send(&mut an, 4, secs + 0.1, c, true, 101, 501, FIN | ACK);
        send(&mut an, 5, secs + 0.1, c, false, 501, 102, FIN | ACK);
        an
    };
    let mut an = closed(1, 0.0);
    assert_eq!(tables(&an), (0, 1));
    send(&mut an, 6, 0.2, 1, true, 102, 502, ACK);
    send(&mut an, 7, 4.0, 1, false, 501, 102, FIN | ACK);
    send(&mut an, 8, 8.5, 1, true, 102, 502, ACK);
    send(&mut an, 9, 9.0, 1, true, 100, 0, SYN);
    assert_eq!(tables(&an), (0, 1), "absorbed, 4.5 s apart at most");
    assert_eq!(an.half_open.len(), 0);
    send(&mut an, 10, 9.5, 1, true, 9000, 0, SYN);
    assert_eq!(tables(&an), (1, 0), "another ISN: another connection");
    assert_eq!(an.finish("t", "pcap").0.flows, 2);

    let mut an = closed(1, 0.0);
    send(&mut an, 6, 5.2, 1, true, 102, 502, ACK);
    assert_eq!(
        tables(&an),
        (1, 0),
        "past the linger time: a flow of its own"
    );
    assert_eq!(an.finish("t", "pcap").0.flows, 2);

    let mut an = closed(1, 0.0);
    an.sweep(Timestamp::from_nanos(5_000_000_000));
    assert_eq!(tables(&an), (0, 1), "within the linger time");
    an.sweep(Timestamp::from_nanos(5_200_000_000));
    assert_eq!(tables(&an), (0, 0), "forgotten");
}

/// What every open flow carries inline (issue 29: peak memory per open connection). Printed
/// for the record (`-- --nocapture`), and held under the sizes reached on 64-bit targets, so
/// that a field added to the per-flow state is a decision, not an accident.
#[test]
#[cfg(target_pointer_width = "64")]
fn per_flow_state_stays_small() {
    use std::mem::size_of;
    let sizes = [
        ("Entry", size_of::<Entry>(), 736),
        ("Flow", size_of::<Flow>(), 424),
        ("HalfFlow", size_of::<crate::flow::HalfFlow>(), 136),
        ("Handshake", size_of::<crate::flow::Handshake>(), 56),
        ("TurnTracker", size_of::<TurnTracker>(), 176),
        ("Turn", size_of::<crate::turns::Turn>(), 88),
        ("Sizes", size_of::<crate::turns::Sizes>(), 16),
        ("LegRecord", size_of::<LegRecord>(), 104),
        ("Lingering", size_of::<Lingering>(), 64),
    ];
    for (name, size, most) in sizes {
        eprintln!("size_of::<{name}>() = {size}");
        assert!(size <= most, "{name} is {size} bytes, more than {most}");
    }
}

/// A shard that reads every frame ([`Analyzer::sharded`] fed by `on_frame`) counts every
/// segment but looks at its own only: its table is still swept, whichever shard the segment
/// at the sweep's count belongs to (else flows idle past the timeout, and ended ones, pile up
/// for the rest of the capture).
#[test]
fn a_shard_reading_every_frame_still_sweeps_its_table() {
    let n = 30_000;
    for i in 0..2 {
        let mut an = Analyzer::sharded(detect::all(), i, 2);
        let mut frame = 1;
        // Phase 1 at 0 s, phase 2 past the idle timeout: a sweep in phase 2 ends phase 1.
        for (c0, secs) in [(0, 0.0), (n, 700.0)] {
            for c in c0..c0 + n {
                handshake(&mut an, frame, secs, c);
                frame += 3;
            }
        }
        let stale = open_clients(&an).into_iter().filter(|&c| c < n).count();
        assert_eq!(
            stale, 0,
            "shard {i} kept {stale} flows idle past the timeout"
        );
        assert!(
            !open_clients(&an).is_empty(),
            "shard {i} owns phase 2 flows"
        );
    }
}

/// A flood past the half-open cap ([`MAX_HALF_OPEN`]), its flows divided among shards: each
/// shard caps its share (the cap / shards), and one that passed it says so
/// ([`Analyzer::shard_capped`]: `analyze` then reads the file again on one thread); a flood
/// one analyzer holds whole passes no share either, and the merge counts what it counts.
#[test]
fn a_flood_past_the_half_open_cap_is_told_by_the_shards_and_one_within_it_merges_whole() {
    for (n, dropped) in [
        (MAX_HALF_OPEN as u32 + 1000, 1000),
        (MAX_HALF_OPEN as u32 / 2, 0),
    ] {
        let mut one = Analyzer::default();
        let mut d = Analyzer::dispatcher(2);
        for c in 0..n {
            let (frame, secs) = (u64::from(c) + 1, f64::from(c) * 1e-6);
            send(&mut one, frame, secs, c, true, 100, 0, SYN);
            send(&mut d, frame, secs, c, true, 100, 0, SYN);
        }
        let shards: Vec<Analyzer> = (0..2)
            .map(|i| {
                let mut s = Analyzer::sharded(detect::all(), i, 2);
                for r in d.take_batch(i, Vec::new()).expect("a dispatcher") {
                    s.on_routed(&r);
                }
                s
            })
            .collect();
        let capped = shards.iter().any(Analyzer::shard_capped);
        let (one, _) = one.finish("f", "pcap");
        assert_eq!(one.half_open_untracked, dropped);
        assert_eq!(
            capped,
            dropped > 0,
            "{n} attempts: a shard told it passed its share"
        );
        if !capped {
            let (many, _) = Analyzer::merge_dispatched(d, shards, "f", "pcap");
            assert_eq!(many.half_open_untracked, 0);
            assert_eq!(many.flows, one.flows);
        }
    }
}

/// A segment of client `c` with `len` bytes of payload.
#[allow(clippy::too_many_arguments)]
fn send_data(
    an: &mut Analyzer,
    frame: u64,
    secs: f64,
    c: u32,
    to_server: bool,
    seq: u32,
    ack: u32,
    len: u32,
) {
    let flags = ACK | TcpFlags::PSH;
    send_segment(an, frame, secs, c, to_server, seq, ack, flags, len);
}

/// Past the cap on hop legs, the legs kept are those of the flows that began first, whatever
/// order the flows end in: so each shard keeps its first-begun ones, and the merged report
/// keeps the capture's first-begun ones, as one analyzer does.
#[test]
fn legs_past_the_cap_are_those_of_the_first_begun_flows() {
    let mut an = Analyzer::default();
    an.sinks.max_legs = 2;
    let mut frame = 1;
    for c in 1..=3 {
        handshake(&mut an, frame, 0.0, c);
        frame += 3;
    }
    // Four exchanges each (eight turns); client 1's flow ends last (the capture's end), the
    // others at their RSTs.
    for i in 0..4u32 {
        for c in 1..=3 {
            let secs = 0.01 * f64::from(frame as u32);
            send_data(
                &mut an,
                frame,
                secs,
                c,
                true,
                101 + 10 * i,
                501 + 10 * i,
                10,
            );
            send_data(
                &mut an,
                frame + 1,
                secs + 0.001,
                c,
                false,
                501 + 10 * i,
                111 + 10 * i,
                10,
            );
            frame += 2;
        }
    }
    for c in 2..=3 {
        send(&mut an, frame, 1.0, c, true, 141, 541, TcpFlags::RST);
        frame += 1;
    }
    an.end_flows();
    let mut kept: Vec<u64> = an.sinks.legs.iter().map(|l| l.0.flow).collect();
    kept.sort_unstable();
    assert_eq!(kept, [1, 2], "the legs of the first two flows to begin");
}
