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
