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
