//! `window_limited` on simulated time: a bulk response over a 20 ms path (captured at the
//! server), capped by the sender, capped by the receiver's window, ramping, lossy, paced by the
//! path, and on loopback.

use super::*;

const MSS: u32 = 1448;

/// A 20 ms path: SYN-ACK 10 ms after the SYN, the ACK 10 ms later; then the request.
fn wan() -> Sim {
    let mut s = Sim::new();
    s.connect(40000, 0, 10_000, 10_000);
    s.data(C2S, 20_100, 20);
    s
}

/// `rounds` round trips of `segs` segments `gap` µs apart; the client ACKs each round trip
/// 20 ms after its first segment, and the next one starts 100 µs after that ACK.
fn rounds(s: &mut Sim, start: u64, rounds: &[u64], gap: u64) -> u64 {
    let mut t = start;
    for &segs in rounds {
        for k in 0..segs {
            s.data(S2C, t + k * gap, MSS);
        }
        s.ack(C2S, t + 20_000);
        t += 20_100;
    }
    t
}

fn limited(f: &[Finding]) -> Option<&Finding> {
    f.iter().find(|f| f.kind == FindingKind::WindowLimited)
}

#[test]
fn small_send_buffer_caps_the_flight() {
    let mut s = wan();
    // 40 round trips of 20 segments (28,960 B) in 1.9 ms, then idle: the window (128,000 B)
    // is never full.
    let t = rounds(&mut s, 30_000, &[20; 40], 100);
    s.close(t);
    let f = s.findings();
    assert_eq!(kinds(&f), vec![(FindingKind::WindowLimited, S2C)]);
    let w = get(&f, FindingKind::WindowLimited);
    assert_eq!(w.evidence.values["ceiling_bytes"], f64::from(20 * MSS));
    assert_eq!(w.evidence.counts["example_limited_by_receiver_window"], 0);
    assert!((w.evidence.values["rtt_ms"] - 20.0).abs() < 0.5);
    assert!(w.evidence.values["busy_share"] < 0.2);
    assert!(w.verdict.contains("send buffer"), "{}", w.verdict);
    assert!(!w.evidence.frames.is_empty());
}

#[test]
fn small_receive_window_caps_the_flight() {
    let mut s = wan();
    // The client advertises 227 << 7 = 29,056 B; the server keeps it full, ACK-clocked: 20
    // segments spread evenly over each round trip (no idle time at all).
    s.window[C2S.index()] = 227;
    let t = rounds(&mut s, 30_000, &[20; 40], 1_000);
    s.close(t);
    let f = s.findings();
    assert_eq!(kinds(&f), vec![(FindingKind::WindowLimited, S2C)]);
    let w = get(&f, FindingKind::WindowLimited);
    assert_eq!(w.evidence.counts["example_limited_by_receiver_window"], 1);
    assert_eq!(w.evidence.values["advertised_window_bytes"], 29_056.0);
    assert!(w.verdict.contains("receive window"), "{}", w.verdict);
}

#[test]
fn slow_start_is_ramping_not_capped() {
    let mut s = wan();
    s.window[C2S.index()] = u16::MAX;
    let ramp: Vec<u64> = (1..=10).map(|k| 1u64 << k).collect();
    let t = rounds(&mut s, 30_000, &ramp, 10);
    s.close(t);
    let f = s.findings();
    assert!(limited(&f).is_none(), "{:?}", kinds(&f));
}

#[test]
fn a_lossy_transfer_is_congestion_control_not_a_buffer() {
    let mut s = wan();
    let t = rounds(&mut s, 30_000, &[20; 20], 100);
    s.resend(S2C, t, 5 * MSS, MSS);
    let t = rounds(&mut s, t + 100, &[20; 20], 100);
    s.close(t);
    let f = s.findings();
    assert!(limited(&f).is_none(), "{:?}", kinds(&f));
}

#[test]
fn a_path_that_spreads_the_data_is_not_a_buffer() {
    let mut s = wan();
    // Same bytes per round trip as the capped sender, but spread over the whole round trip
    // with a window far larger: a bottleneck paces it.
    let t = rounds(&mut s, 30_000, &[20; 40], 1_000);
    s.close(t);
    let f = s.findings();
    assert!(limited(&f).is_none(), "{:?}", kinds(&f));
}

#[test]
fn loopback_bulk_is_not_window_limited() {
    let mut s = Sim::new();
    s.connect(40000, 0, 20, 10);
    s.data(C2S, 100, 20);
    s.window[C2S.index()] = 227;
    let mut t = 200;
    for _ in 0..40 {
        for k in 0..20 {
            s.data(S2C, t + k, MSS);
        }
        s.ack(C2S, t + 30);
        t += 40;
    }
    s.close(t);
    assert_eq!(kinds(&s.findings()), vec![]);
}

#[test]
fn a_short_capped_transfer_is_not_reported() {
    let mut s = wan();
    // 6 round trips: fewer than MIN_RTTS, and under MIN_BYTES.
    let t = rounds(&mut s, 30_000, &[20; 6], 100);
    s.close(t);
    assert_eq!(kinds(&s.findings()), vec![]);
}

#[test]
fn sequential_large_responses_are_not_one_transfer() {
    let mut s = wan();
    // 40 requests, each answered by 20 segments and followed by the next request one round
    // trip later: as many bytes per round trip as the capped sender, but each response is
    // its own turn (29 KB, under MIN_BYTES).
    let mut t = 30_000;
    for _ in 0..40 {
        for k in 0..20 {
            s.data(S2C, t + k * 100, MSS);
        }
        s.data(C2S, t + 20_000, 20);
        t += 20_100;
    }
    s.close(t);
    let f = s.findings();
    assert!(limited(&f).is_none(), "{:?}", kinds(&f));
}

/// `rounds` round trips of `segs` segments `gap` µs apart; each round trip's first segment is
/// ACKed `ack_after` µs after it left (the sender's end), and the next round trip starts
/// `period` µs after the previous one.
fn paced(s: &mut Sim, start: u64, rounds: usize, segs: u64, gap: u64, ack_after: u64, period: u64) {
    let mut t = start;
    for _ in 0..rounds {
        for k in 0..segs {
            s.data(S2C, t + k * gap, MSS);
        }
        s.ack(C2S, t + ack_after);
        t += period;
    }
    s.close(t);
}

#[test]
fn a_paced_sender_capped_by_its_send_buffer_is_named() {
    // BBR capped by SO_SNDBUF (measured across a 40 ms path: 47 segments paced over ~85% of
    // each round trip, then silence until the ACKs free the buffer): the data spans more than
    // MAX_BUSY_SHARE of the round trip, but the silence closing it is many times the longest
    // gap inside it, and the ACKs come back in one path RTT.
    let mut s = wan();
    paced(&mut s, 30_000, 40, 20, 900, 20_000, 20_100);
    let f = s.findings();
    assert_eq!(kinds(&f), vec![(FindingKind::WindowLimited, S2C)]);
    let w = get(&f, FindingKind::WindowLimited);
    assert_eq!(w.evidence.counts["example_limited_by_receiver_window"], 0);
    assert!(w.evidence.values["busy_share"] > 0.8);
    assert!(w.evidence.values["idle_gap_ratio"] >= 2.0);
    assert!((w.evidence.values["ack_rtt_ratio"] - 1.0).abs() < 0.05);
    assert!(w.verdict.contains("send buffer"), "{}", w.verdict);
}

#[test]
fn a_queue_on_the_path_is_a_bottleneck_not_a_send_buffer() {
    // The same bursts as the capped sender, but at the sender's end each round trip's first
    // segment is ACKed 1.5 path RTTs later: a queue is building at a bottleneck, which a
    // bigger buffer would only fill.
    let mut s = wan();
    paced(&mut s, 30_000, 40, 20, 100, 30_000, 30_100);
    let f = s.findings();
    assert!(limited(&f).is_none(), "{:?}", kinds(&f));
}

#[test]
fn a_bottleneck_that_delivers_back_to_back_is_not_a_send_buffer() {
    // At the receiver's end of a bottleneck: segments arrive evenly spaced by the link, with
    // no silence between round trips longer than the gaps inside them (the ACKs follow at
    // once, so rule 4a cannot see the queue).
    let mut s = wan();
    paced(&mut s, 30_000, 40, 20, 1_000, 50, 20_000);
    let f = s.findings();
    assert!(limited(&f).is_none(), "{:?}", kinds(&f));
}

#[test]
fn a_paced_flight_longer_than_a_round_trip_is_counted_per_flight() {
    // BBR's gain cycle slows the pacing for a while: the capped flight (20 segments) takes
    // 20.9 ms, longer than the 20.1 ms round trip, then the sender is silent 10 ms until the
    // ACKs free its buffer. Cut into round trips, the bytes per round trip swing (the flight
    // straddles the cut); cut at the silences, every flight carries the same bytes.
    let mut s = wan();
    paced(&mut s, 30_000, 40, 20, 1_100, 20_000, 31_000);
    let f = s.findings();
    assert_eq!(kinds(&f), vec![(FindingKind::WindowLimited, S2C)]);
    let w = get(&f, FindingKind::WindowLimited);
    assert_eq!(w.evidence.counts["counted_per_flight"], 1);
    assert_eq!(w.evidence.values["ceiling_bytes"], f64::from(20 * MSS));
    assert!(
        w.evidence.facts[0].contains("per flight"),
        "{}",
        w.evidence.facts[0]
    );
}

/// Rule 5: of transfers of equal bytes, the example is the first in the capture, not the
/// first judged. The first connection's transfer is judged only when the flow ends (here at
/// the capture's end); the second's, all after it, is judged at its FIN, before.
#[test]
fn of_equal_transfers_the_example_is_the_first_in_the_capture_not_the_first_judged() {
    let mut s = wan();
    rounds(&mut s, 30_000, &[20; 40], 100);
    let t0 = 1_000_000;
    s.connect(40001, t0, 10_000, 10_000);
    s.data(C2S, t0 + 20_100, 20);
    let t = rounds(&mut s, t0 + 30_000, &[20; 40], 100);
    s.close(t);
    let f = s.findings();
    let w = get(&f, FindingKind::WindowLimited);
    assert_eq!(w.evidence.counts["transfers"], 2);
    assert_eq!(w.example_flow.id, 1);
    assert!(
        w.example_flow.client.ends_with(":40000"),
        "{:?}",
        w.example_flow
    );
}
