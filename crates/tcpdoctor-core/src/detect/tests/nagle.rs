//! Nagle's two costs on simulated time, and the shapes that only look like them: an ACK long
//! before the pause ended, a FIN, a full segment released by an ACK, data that arrived sooner
//! than the ACK could have reached its sender, an idle connection, segments full once the
//! timestamp option is counted, and a tail held for one round trip.

use super::*;

fn nagle(f: &[Finding]) -> bool {
    f.iter().any(|f| f.kind == FindingKind::NagleDelayedAck)
}

/// nDPI netflix.pcap flow 11: a small response segment, the client's ACK of everything 1.5 ms
/// later, then 30 s of silence, a keep-alive ACK, and more data. Nothing was held.
#[test]
fn ack_long_before_the_pause_ended_is_not_a_stall() {
    let mut s = Sim::new();
    s.connect(40000, 0, 50_000, 100);
    let mut t = 100_000;
    for _ in 0..3 {
        s.data(C2S, t, 300);
        s.data(S2C, t + 55_000, 1448);
        s.data(S2C, t + 55_200, 1276);
        s.ack(C2S, t + 56_700);
        s.ack(C2S, t + 30_400_000);
        s.data(S2C, t + 30_454_000, 31);
        t += 31_000_000;
    }
    s.close(t);
    let f = s.findings();
    assert!(!nagle(&f), "{:?}", kinds(&f));
}

/// The first segment acknowledging everything is the client's FIN: a close, not a delayed ACK.
#[test]
fn fin_is_not_a_release() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    s.data(C2S, 1_000, 10);
    s.data(S2C, 1_060, 12);
    let (c, srv) = (s.cseq, s.sseq);
    s.raw(
        C2S,
        41_060,
        c,
        srv,
        TcpFlags::FIN | ACK,
        0,
        TcpOptions::default(),
    );
    s.data(S2C, 41_090, 200);
    let f = s.findings();
    assert!(!nagle(&f), "{:?}", kinds(&f));
}

/// A client uploading in 8 KiB writes (5 × 1460 + 892): the server ACKs every second segment,
/// delays the last ACK ~110 ms, and the next write leaves as full segments after it. A full
/// segment is never held by Nagle: a send buffer held it.
#[test]
fn full_segment_released_by_an_ack_is_not_nagle() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..5 {
        for k in 0..5 {
            s.data(C2S, t + k * 20, 1460);
        }
        s.data(C2S, t + 100, 892);
        s.ack(S2C, t + 111_000);
        t += 111_130;
    }
    s.data(S2C, t, 20);
    s.close(t + 1_000);
    let f = s.findings();
    assert!(!nagle(&f), "{:?}", kinds(&f));
}

/// Captured at the client of an 88 ms path: the client's ACK leaves 133 ms after a small
/// segment, and the server's next data arrives 15 ms later — before that ACK could even have
/// reached the server. The server wrote it on its own.
#[test]
fn data_sooner_than_the_ack_could_reach_the_sender_is_not_released_by_it() {
    let mut s = Sim::new();
    s.connect(40000, 0, 88_000, 50);
    let mut t = 100_000;
    for _ in 0..5 {
        s.data(C2S, t, 13);
        s.data(S2C, t + 90_000, 65);
        s.ack(C2S, t + 223_000);
        s.data(S2C, t + 238_000, 600);
        t += 300_000;
    }
    s.close(t);
    let f = s.findings();
    assert!(!nagle(&f), "{:?}", kinds(&f));
}

/// An ACK two seconds after the segment is an idle connection, not a delayed-ACK timer.
#[test]
fn hold_beyond_any_delayed_ack_timer_is_not_a_stall() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..5 {
        s.data(C2S, t, 10);
        s.data(S2C, t + 60, 12);
        s.ack(C2S, t + 2_000_060);
        s.data(S2C, t + 2_000_090, 200);
        t += 2_100_000;
    }
    s.close(t);
    let f = s.findings();
    assert!(!nagle(&f), "{:?}", kinds(&f));
}

/// With timestamps on (12 option bytes per segment), 1448 bytes fill a segment of a
/// 1460-byte MSS: it is not the small segment Nagle waits on.
#[test]
fn segment_full_once_timestamps_are_counted_is_not_small() {
    let mut s = Sim::new();
    let ts = TcpOptions {
        timestamp: Some((1, 1)),
        ..TcpOptions::default()
    };
    let syn = TcpOptions {
        mss: Some(1460),
        timestamp: Some((1, 0)),
        ..TcpOptions::default()
    };
    let (c, srv) = (s.cseq, s.sseq);
    s.raw(C2S, 0, c, 0, TcpFlags::SYN, 0, syn);
    s.raw(S2C, 30, srv, c + 1, TcpFlags::SYN | ACK, 0, syn);
    s.raw(C2S, 40, c + 1, srv + 1, ACK, 0, ts);
    let (mut c, mut srv) = (c + 1, srv + 1);
    let mut t = 1_000;
    for _ in 0..5 {
        s.raw(C2S, t, c, srv, ACK | PSH, 10, ts);
        c += 10;
        s.raw(S2C, t + 60, srv, c, ACK | PSH, 1448, ts);
        srv += 1448;
        s.raw(C2S, t + 40_060, c, srv, ACK, 0, ts);
        s.raw(S2C, t + 40_090, srv, c, ACK | PSH, 200, ts);
        srv += 200;
        t += 41_000;
    }
    let f = s.findings();
    assert!(!nagle(&f), "{:?}", kinds(&f));
}

/// Captured at the server of a 40 ms path: each response is a 20-byte header and a 1500-byte
/// body; the header and one full segment leave, the client ACKs both at once (more than one
/// MSS arrived), and the 60-byte tail leaves the instant that ACK is back — one RTT late.
#[test]
fn tail_held_for_one_round_trip_is_nagle_round_trip() {
    let mut s = Sim::new();
    s.connect(40000, 0, 100, 40_000);
    let mut t = 100_000;
    for _ in 0..10 {
        s.data(C2S, t, 30);
        s.data(S2C, t + 100, 20);
        s.data(S2C, t + 110, 1460);
        s.ack(C2S, t + 40_200);
        s.data(S2C, t + 40_230, 60);
        t += 200_000;
    }
    s.close(t);
    let f = s.findings();
    assert!(!nagle(&f), "no delayed-ACK timer here: {:?}", kinds(&f));
    let r = get(&f, FindingKind::NagleRoundTrip);
    assert_eq!(r.direction, S2C);
    assert_eq!(r.evidence.counts["holds"], 10);
    assert!(
        (r.time_lost_ms - 10.0 * 40.12).abs() < 5.0,
        "{}",
        r.time_lost_ms
    );
}

/// The same responses after a loss: the congestion window, not Nagle, may hold the tail.
#[test]
fn tail_after_a_loss_is_not_blamed_on_nagle() {
    let mut s = Sim::new();
    s.connect(40000, 0, 100, 40_000);
    s.data(C2S, 100_000, 30);
    s.data(S2C, 100_100, 1460);
    s.resend(S2C, 400_000, 1460, 1460);
    s.ack(C2S, 440_000);
    let mut t = 500_000;
    for _ in 0..10 {
        s.data(C2S, t, 30);
        s.data(S2C, t + 100, 20);
        s.data(S2C, t + 110, 1460);
        s.ack(C2S, t + 40_200);
        s.data(S2C, t + 40_230, 60);
        t += 200_000;
    }
    s.close(t);
    let f = s.findings();
    assert!(
        !f.iter().any(|f| f.kind == FindingKind::NagleRoundTrip),
        "{:?}",
        kinds(&f)
    );
}

/// nDPI line.pcap's shape, captured at the server of a 400 ms path: an ACK held 60 ms — a delayed ACK, although
/// it is under a quarter of the round trip. One pause is one kind, never both.
#[test]
fn a_delayed_ack_on_a_long_path_is_not_also_a_round_trip_hold() {
    let mut s = Sim::new();
    s.connect(40000, 0, 100, 400_000);
    let mut t = 500_000;
    for _ in 0..5 {
        s.data(C2S, t, 30);
        s.data(S2C, t + 100, 20);
        s.ack(C2S, t + 460_100);
        s.data(S2C, t + 460_130, 60);
        t += 1_000_000;
    }
    s.close(t);
    let f = s.findings();
    assert!(nagle(&f), "{:?}", kinds(&f));
    assert!(
        !f.iter().any(|f| f.kind == FindingKind::NagleRoundTrip),
        "{:?}",
        kinds(&f)
    );
}

/// Captured mid-stream (no handshake), a client that delays every ACK 40 ms makes each data →
/// ACK sample 40 ms: the only RTT such a capture offers holds the timer. The per-response
/// stalls are then not "an immediate ACK one round trip away".
#[test]
fn a_stall_captured_without_its_handshake_is_not_called_a_round_trip() {
    let mut s = Sim::new();
    let mut t = 1_000;
    for _ in 0..10 {
        s.data(C2S, t, 10);
        s.data(S2C, t + 60, 12);
        s.ack(C2S, t + 40_060);
        s.data(S2C, t + 40_090, 200);
        s.ack(C2S, t + 80_090);
        t += 100_000;
    }
    let f = s.findings();
    assert!(
        !f.iter().any(|f| f.kind == FindingKind::NagleRoundTrip),
        "{:?}",
        kinds(&f)
    );
}

/// nDPI ieee_c37118.pcap's shape: a device streams a small frame every 20 ms; the client's
/// delayed ACK happens to land just before one of them. The sender keeps its own pace (its
/// other pauses had nothing to wait for): nothing was held.
#[test]
fn a_periodic_stream_with_a_coincidental_ack_is_not_a_stall() {
    let mut s = Sim::new();
    s.connect(40000, 0, 300, 300);
    s.data(C2S, 1_000, 20);
    let mut t = 2_000;
    for k in 0..20 {
        s.data(S2C, t, 54);
        if k == 6 {
            // The client's only ACK, of all seven frames so far, 0.2 ms before frame 7.
            s.ack(C2S, t + 19_800);
        }
        t += 20_000;
    }
    let f = s.findings();
    assert!(!nagle(&f), "{:?}", kinds(&f));
    // fragmented_writes asks the same question: no time held by Nagle there either.
    assert!(
        !f.iter()
            .any(|f| f.kind == FindingKind::FragmentedWrites && f.time_lost_ms > 0.0),
        "{:?}",
        kinds(&f)
    );
}
