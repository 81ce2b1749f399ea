//! `fragmented_writes` on simulated time: severity follows cost, TLS records are named as such,
//! and a turn with no extra segment is never fragmented.

use super::*;

/// One line per write with TCP_NODELAY and nothing held: many packets, no time lost. That is
/// information, not a warning, and the text says why it still matters.
#[test]
fn fragmented_writes_that_cost_no_time_are_info() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..20 {
        s.data(C2S, t, 10);
        for k in 0..8 {
            s.data(S2C, t + 50 + k * 10, 14);
        }
        t += 1_000;
    }
    s.close(t);
    let f = s.findings();
    let fw = get(&f, FindingKind::FragmentedWrites);
    assert_eq!(fw.severity, crate::report::Severity::Info);
    assert_eq!(fw.time_lost_ms, 0.0);
    assert!(fw.verdict.contains("Nagle"), "{}", fw.verdict);
    assert!(fw.verdict.contains("syscall"), "{}", fw.verdict);
}

/// When Nagle held pieces until the peer's delayed ACK, the pattern cost time: a warning,
/// with that time.
#[test]
fn fragmented_writes_held_by_nagle_are_a_warning_with_the_time_held() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..20 {
        s.data(C2S, t, 10);
        s.data(S2C, t + 60, 12);
        s.ack(C2S, t + 40_060);
        s.data(S2C, t + 40_090, 200);
        t += 41_000;
    }
    s.close(t);
    let f = s.findings();
    let fw = get(&f, FindingKind::FragmentedWrites);
    assert_eq!(fw.severity, crate::report::Severity::Warning);
    assert!(
        (fw.time_lost_ms - 20.0 * 40.03).abs() < 20.0,
        "{}",
        fw.time_lost_ms
    );
}

/// TLS on port 443, one record per write: common, and no time lost. Info, and the fix is to
/// buffer the records of a flight.
#[test]
fn tls_records_one_per_write_are_info_and_named_as_such() {
    let mut s = Sim::new();
    s.server = ep(443);
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..20 {
        s.data(C2S, t, 300);
        for (k, len) in [90u32, 120, 60, 200].into_iter().enumerate() {
            s.data(S2C, t + 50 + k as u64 * 10, len);
        }
        t += 1_000;
    }
    s.close(t);
    let f = s.findings();
    let fw = get(&f, FindingKind::FragmentedWrites);
    assert_eq!(fw.severity, crate::report::Severity::Info);
    assert!(fw.verdict.contains("TLS"), "{}", fw.verdict);
    assert!(fw.fix.contains("TLS record"), "{}", fw.fix);
}

/// A response of 36 full segments and two 1000-byte pieces, the second held by Nagle until a
/// delayed ACK: its 56,560 bytes need 38 segments and took 38, so the writes cost no packet a
/// whole write would not. Not fragmented (the hold itself is nagle_delayed_ack's).
#[test]
fn a_turn_without_extra_segments_is_never_fragmented() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..5 {
        s.data(C2S, t, 10);
        let mut u = t + 50;
        for k in 0..18 {
            s.data(S2C, u, 1460);
            if k % 2 == 1 {
                s.ack(C2S, u + 5);
            }
            u += 10;
        }
        s.data(S2C, u, 1000);
        s.ack(C2S, u + 40_000);
        s.data(S2C, u + 40_030, 1000);
        u += 40_040;
        for k in 0..18 {
            s.data(S2C, u, 1460);
            if k % 2 == 1 {
                s.ack(C2S, u + 5);
            }
            u += 10;
        }
        s.ack(C2S, u + 5);
        t = u + 1_000;
    }
    s.close(t);
    let f = s.findings();
    assert!(
        !f.iter().any(|x| x.kind == FindingKind::FragmentedWrites),
        "{:?}",
        f.iter()
            .filter(|x| x.kind == FindingKind::FragmentedWrites)
            .map(|x| &x.evidence.facts)
            .collect::<Vec<_>>()
    );
}

/// nDPI `line.pcap` (147.92.242.232:443): the client writes a request as two TLS records, and
/// Nagle holds the second until the server's delayed ACK (frames 86–88). A warning, with the
/// time held, and still named as TLS records with the flight-buffering fix.
#[test]
fn tls_records_held_by_nagle_are_a_warning_named_as_tls() {
    let mut s = Sim::new();
    s.server = ep(443);
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..5 {
        s.data(C2S, t, 295);
        s.ack(S2C, t + 40_000);
        s.data(C2S, t + 40_050, 541);
        s.data(S2C, t + 40_500, 600);
        t += 41_000;
    }
    s.close(t);
    let f = s.findings();
    let fw = get(&f, FindingKind::FragmentedWrites);
    assert_eq!(fw.direction, C2S);
    assert_eq!(fw.severity, crate::report::Severity::Warning);
    assert!(fw.time_lost_ms > 5.0 * 40.0, "{}", fw.time_lost_ms);
    assert!(fw.verdict.contains("TLS"), "{}", fw.verdict);
    assert!(fw.fix.contains("TLS record"), "{}", fw.fix);
}

/// A response written as 50 tiny writes with TCP_NODELAY on a fresh connection over a 30 ms
/// path, seen at the client's end: ten 19-byte segments (the initial window, counted in
/// packets), the client's ACKs at once, and the rest, coalesced, one round trip after the
/// first ACK. Each response cost a round trip the same bytes written whole would not have:
/// a warning whose time lost is those pauses, with the frames that show one.
fn window_spent_by_tiny_segments(at_sender: bool, whole: bool) -> Vec<Finding> {
    window_spent_then(at_sender, whole, 1)
}

/// [`window_spent_by_tiny_segments`], the rest after the pause in `rest_segments` segments of
/// 760 bytes (1: the 950-byte response; more: a large body after a header of tiny pieces).
fn window_spent_then(at_sender: bool, whole: bool, rest_segments: u64) -> Vec<Finding> {
    let mut s = Sim::new();
    let mut t = 0;
    for k in 0..5u16 {
        // At the client's end the round trip lies towards the server; at the server's end,
        // towards the client.
        let (to_server, to_client) = if at_sender {
            (20, 30_000)
        } else {
            (30_000, 20)
        };
        s.connect(40000 + k, t, to_server, to_client);
        t += 31_000;
        s.data(C2S, t, 20);
        // The response's first data at the capture point.
        let r = if at_sender { t + 50 } else { t + 30_050 };
        if whole {
            s.data(S2C, r, 950);
            s.ack(C2S, if at_sender { r + 30_010 } else { r + 40 });
            t = r + 31_000;
            s.data(C2S, t, 20);
        } else {
            for i in 0..10 {
                s.data(S2C, r + i * 4, 19);
            }
            // The first ACK: at the client's end it leaves at once; at the server's end it
            // arrives a round trip later, and the rest leaves 30 µs after it.
            let ack = if at_sender { r + 30_010 } else { r + 40 };
            s.ack(C2S, ack);
            let rest = if at_sender { ack + 30 } else { ack + 30_010 };
            for j in 0..rest_segments {
                s.data(S2C, rest + j * 4, 760);
            }
            let rest = rest + (rest_segments - 1) * 4;
            s.ack(C2S, if at_sender { rest + 30_010 } else { rest + 40 });
            // The client's next request ends the response turn (the simulated close is
            // faster than the path, and must not be the RTT the turn is judged with).
            t = rest + 61_000;
            s.data(C2S, t, 20);
        }
        // The simulated close answers a FIN in 10 µs, which at the server's end would be a
        // round trip faster than the path: there, the flows end with the capture.
        if !at_sender {
            s.close(t);
        }
        t += 1_000;
    }
    s.findings()
}

#[test]
fn tiny_segments_that_spend_the_congestion_window_cost_a_round_trip_each() {
    for at_sender in [false, true] {
        let f = window_spent_by_tiny_segments(at_sender, false);
        let fw = get(&f, FindingKind::FragmentedWrites);
        assert_eq!(fw.direction, S2C);
        assert_eq!(
            fw.severity,
            crate::report::Severity::Warning,
            "{}",
            fw.verdict
        );
        assert_eq!(fw.evidence.counts["window_waits"], 5, "{:?}", fw.evidence);
        // Each pause: one round trip less the flight's 36 µs, give or take the ACK's 40 µs.
        let per = fw.time_lost_ms / 5.0;
        assert!((29.9..30.1).contains(&per), "{per} ms per wait");
        assert!(
            fw.verdict.contains("congestion window counts packets"),
            "{}",
            fw.verdict
        );
        assert!(!fw.verdict.contains("cost no time"), "{}", fw.verdict);
        assert!(
            fw.verdict.contains("median 11 segments each"),
            "{}",
            fw.verdict
        );
        // Ten small segments in flight: not Nagle, which lets one be unacknowledged.
        assert_eq!(kinds(&f), vec![(FindingKind::FragmentedWrites, S2C)]);
        // The example's frames: the flight, its first ACK, its last segment, the rest.
        let fact = fw
            .evidence
            .facts
            .iter()
            .find(|x| x.contains("a flight of 10 segments"))
            .unwrap_or_else(|| panic!("{:?}", fw.evidence.facts));
        assert!(fact.contains("frames 5–14"), "{fact}");
        assert!(fw.evidence.frames.contains(&15) || fw.evidence.frames.contains(&16));
    }
}

/// The same ten tiny pieces followed by a body of 30 segments (22,990 bytes in all, more than
/// the ten packets of the first flight carry even when full): written whole it would need a
/// second round trip of slow start too, so the pause is not claimed as the pieces' cost.
#[test]
fn a_large_body_after_tiny_pieces_claims_no_window_cost() {
    for at_sender in [false, true] {
        let f = window_spent_then(at_sender, false, 30);
        let fw = get(&f, FindingKind::FragmentedWrites);
        assert_eq!(fw.evidence.counts["window_waits"], 0, "{}", fw.verdict);
        assert!(
            !fw.verdict.contains("congestion window counts packets"),
            "{}",
            fw.verdict
        );
    }
}

/// The same server writing each response whole: one segment inside the window, nothing
/// fragmented, no cost claimed.
#[test]
fn a_response_written_whole_claims_no_window_cost() {
    for at_sender in [false, true] {
        let f = window_spent_by_tiny_segments(at_sender, true);
        assert!(
            !f.iter().any(|x| x.kind == FindingKind::FragmentedWrites),
            "{:?}",
            kinds(&f)
        );
    }
}

/// A sender that writes a burst of five tiny messages every 10 ms over a 30 ms path, seen at
/// the receiver's end: each burst follows an ACK, but sooner than that ACK could have reached
/// the sender. It writes on its own clock; nothing waited for the window.
#[test]
fn bursts_written_faster_than_the_round_trip_are_not_window_waits() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30_000, 20);
    let mut t = 31_000;
    for _ in 0..10 {
        s.data(C2S, t, 20);
        let mut r = t + 30_050;
        for _ in 0..4 {
            for i in 0..5 {
                s.data(S2C, r + i * 4, 19);
            }
            s.ack(C2S, r + 40);
            r += 10_000;
        }
        t = r + 30_000;
    }
    s.close(t);
    let f = s.findings();
    let fw = get(&f, FindingKind::FragmentedWrites);
    assert_eq!(fw.evidence.counts["window_waits"], 0, "{}", fw.verdict);
    assert_eq!(fw.time_lost_ms, 0.0);
}

/// Three, then six, tiny segments then a pause of one round trip: fewer than the initial
/// window's ten packets, so the window did not stop them (a sender waiting for an ACK it
/// polls for looks the same), and no window wait is claimed.
#[test]
fn a_flight_shorter_than_any_window_is_not_a_window_wait() {
    let mut s = Sim::new();
    let mut t = 0;
    for k in 0..5u16 {
        s.connect(40000 + k, t, 30_000, 20);
        t += 31_000;
        s.data(C2S, t, 20);
        let r = t + 30_050;
        for i in 0..(3 + 3 * u64::from(k % 2)) {
            s.data(S2C, r + i * 4, 19);
        }
        s.ack(C2S, r + 40);
        s.data(S2C, r + 30_050, 760);
        s.ack(C2S, r + 30_090);
        t = r + 31_000;
        s.close(t);
        t += 1_000;
    }
    let f = s.findings();
    let fw = get(&f, FindingKind::FragmentedWrites);
    assert_eq!(fw.evidence.counts["window_waits"], 0, "{}", fw.verdict);
}

/// Rule 12: of equally good examples, the first in the capture, not the first told. The first
/// connection's one fragmented response is its last turn, told only when the flow ends (here
/// at the capture's end); the second connection, all after it, has three, told as it goes and
/// ended by its FIN. The example is the first connection's: its turn lies before them all.
#[test]
fn the_example_is_the_first_fragmented_turn_in_the_capture_not_the_first_told() {
    let pieces = |s: &mut Sim, t: u64| {
        s.data(C2S, t, 10);
        for k in 0..8 {
            s.data(S2C, t + 50 + k * 10, 14);
        }
    };
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    pieces(&mut s, 1_000);
    s.connect(40001, 5_000, 30, 10);
    let mut t = 6_000;
    for _ in 0..3 {
        pieces(&mut s, t);
        t += 1_000;
    }
    s.data(C2S, t, 10);
    s.close(t + 100);
    let f = s.findings();
    let fw = get(&f, FindingKind::FragmentedWrites);
    assert_eq!(fw.evidence.counts["fragmented_turns"], 4);
    assert_eq!(fw.example_flow.id, 1);
    assert!(
        fw.example_flow.client.ends_with(":40000"),
        "{:?}",
        fw.example_flow
    );
    assert_eq!(
        fw.evidence.frames[0], 5,
        "the first connection's first piece"
    );
}
