//! Blame the element that held the bytes (PHYSICS §9), on real captures of both legs of a hop:
//! a transparent hop in front of a server whose own Nagle held the replies is not named (the
//! server's finding says the hop forwarded at once); a Nagle-on hop in front of a server that
//! sent every line at once is named, with the lag it kept the bytes.

use super::{ep, Sim, C2S, S2C};
use crate::analysis::Analyzer;
use crate::flow::Direction;
use crate::report::{Finding, FindingKind};
use crate::wire::{CaptureReader, Endpoint};

const PASSES: &[u8] =
    include_bytes!("../../../../../testdata/captures/hop_passes_server_nagle.pcap");
const HOLDS: &[u8] = include_bytes!("../../../../../testdata/captures/nagle_middlebox.pcap");

fn analyze(bytes: &[u8]) -> Vec<Finding> {
    let mut reader = CaptureReader::new(bytes).expect("pcap header");
    let mut analyzer = Analyzer::default();
    while let Some(f) = reader.next_frame().expect("frame") {
        analyzer.on_frame(f.number, f.ts, f.link, f.data, f.orig_len);
    }
    analyzer.finish("capture.pcap", "pcap").1
}

fn nagle_kinds(found: &[Finding], port: u16) -> Vec<&Finding> {
    found
        .iter()
        .filter(|f| {
            matches!(
                f.kind,
                FindingKind::NagleDelayedAck
                    | FindingKind::NagleRoundTrip
                    | FindingKind::FragmentedWrites
            ) && f.direction == Direction::ServerToClient
                && f.server.ends_with(&format!(":{port}"))
        })
        .collect()
}

#[test]
fn a_hop_that_forwarded_at_once_is_not_named_and_the_server_is() {
    // Hop on 39779, server on 57551 (see the capture's .expect).
    let found = analyze(PASSES);
    assert!(nagle_kinds(&found, 39779).is_empty(), "{found:#?}");
    let server = nagle_kinds(&found, 57551);
    let stall = server
        .iter()
        .find(|f| f.kind == FindingKind::NagleDelayedAck)
        .expect("the server's stall");
    assert!(stall
        .verdict
        .contains("the server writes each response in pieces"));
    let fact = stall
        .evidence
        .facts
        .iter()
        .find(|f| f.contains("through the hop listening on 127.0.0.1:39779"))
        .expect("the hop's fact moved to the server's finding");
    assert!(
        fact.contains("which forwarded the first and last bytes of every one of the ")
            && fact.contains("it does not cause them"),
        "{fact}"
    );
    // Counted once: the stalls of the server's leg, not twice.
    assert_eq!(stall.evidence.counts["stalled_turns"], 39);
    for f in &found {
        assert!(!f.fix.contains("hop's client-side socket"), "{}", f.fix);
        assert!(!f.verdict.contains("the hop listening on"), "{}", f.verdict);
    }
}

#[test]
fn a_hop_whose_own_nagle_held_the_bytes_is_named_and_the_server_is_not() {
    // Forwarder on 35391 (Nagle on), asyncio server on 40305 with TCP_NODELAY.
    let found = analyze(HOLDS);
    let hop = nagle_kinds(&found, 35391);
    let stall = hop
        .iter()
        .find(|f| f.kind == FindingKind::NagleDelayedAck)
        .expect("the hop's stall");
    assert!(
        stall
            .verdict
            .contains("the hop listening on 127.0.0.1:35391 held bytes it had already received"),
        "{}",
        stall.verdict
    );
    assert!(
        stall
            .fix
            .starts_with("Set TCP_NODELAY on the hop's client-side socket"),
        "{}",
        stall.fix
    );
    let server = nagle_kinds(&found, 40305);
    assert!(server
        .iter()
        .all(|f| f.kind == FindingKind::FragmentedWrites && f.verdict.contains("Nothing held")));
}

/// One leg's connection in a [`Sim`] that carries two.
struct Leg {
    client: Endpoint,
    server: Endpoint,
    cseq: u32,
    sseq: u32,
}

impl Leg {
    /// Opens the leg from `client` to `server` (ports) at `t`.
    fn open(s: &mut Sim, client: u16, server: u16, t: u64) -> Leg {
        s.server = ep(server);
        s.connect(client, t, 30, 10);
        Leg {
            client: s.client,
            server: s.server,
            cseq: s.cseq,
            sseq: s.sseq,
        }
    }

    /// Runs `f` on this leg's connection.
    fn on(&mut self, s: &mut Sim, f: impl FnOnce(&mut Sim)) {
        (s.client, s.server, s.cseq, s.sseq) = (self.client, self.server, self.cseq, self.sseq);
        f(s);
        (self.cseq, self.sseq) = (s.cseq, s.sseq);
    }
}

/// Quick-ACK responses before the peer starts delaying its ACKs, and exchanges in all.
const QUICK: u64 = 40;
const EXCHANGES: u64 = 240;

/// A client (port 40000) → hop (7000) → upstream (8000), all on one host, captured there.
/// Each response is a 12-byte piece and a 200-byte rest. The receiver of the pieces ACKs
/// the first [`QUICK`] at once (quick-ACK mode at the connection's start) and later ones on
/// its 40 ms delayed-ACK timer. When `hop_holds`, the upstream sends both pieces at once
/// and the hop's Nagle holds the rest until the client's ACK; otherwise the upstream's Nagle
/// holds it until the hop's ACK and the hop forwards each piece within 20 µs.
fn through_a_hop(hop_holds: bool) -> Vec<Finding> {
    let mut s = Sim::new();
    let mut a = Leg::open(&mut s, 40000, 7000, 0);
    let mut b = Leg::open(&mut s, 40001, 8000, 100);
    let mut t = 1_000;
    for k in 0..EXCHANGES {
        let delay = if k < QUICK { 30 } else { 40_000 };
        a.on(&mut s, |s| s.data(C2S, t, 10));
        b.on(&mut s, |s| s.data(C2S, t + 20, 10));
        b.on(&mut s, |s| s.data(S2C, t + 60, 12));
        if hop_holds {
            b.on(&mut s, |s| s.data(S2C, t + 70, 200));
            b.on(&mut s, |s| s.ack(C2S, t + 90));
            a.on(&mut s, |s| s.data(S2C, t + 100, 12));
            a.on(&mut s, |s| s.ack(C2S, t + 100 + delay));
            a.on(&mut s, |s| s.data(S2C, t + 110 + delay, 200));
        } else {
            a.on(&mut s, |s| s.data(S2C, t + 80, 12));
            b.on(&mut s, |s| s.ack(C2S, t + 60 + delay));
            b.on(&mut s, |s| s.data(S2C, t + 70 + delay, 200));
            a.on(&mut s, |s| s.ack(C2S, t + 80 + delay));
            a.on(&mut s, |s| s.data(S2C, t + 90 + delay, 200));
        }
        t += 50_000;
    }
    a.on(&mut s, |s| s.close(t));
    b.on(&mut s, |s| s.close(t + 100));
    s.findings()
}

#[test]
fn a_nagle_hop_that_holds_only_after_the_quick_ack_start_is_named_and_the_upstream_is_not() {
    // The first 32 responses are all quick-ACKed: a sample of only those would see a hop
    // that forwarded everything at once. The sample spread over the leg sees the holds.
    let found = through_a_hop(true);
    let stall = nagle_kinds(&found, 7000)
        .into_iter()
        .find(|f| f.kind == FindingKind::NagleDelayedAck)
        .unwrap_or_else(|| panic!("the hop's stall: {found:#?}"));
    assert_eq!(stall.evidence.counts["stalled_turns"], EXCHANGES - QUICK);
    assert!(
        stall
            .verdict
            .contains("the hop listening on 198.18.0.1:7000 held bytes it had already received"),
        "{}",
        stall.verdict
    );
    assert!(stall.fix.contains("TCP_NODELAY"), "{}", stall.fix);
    assert!(
        nagle_kinds(&found, 8000)
            .iter()
            .all(|f| f.kind != FindingKind::NagleDelayedAck),
        "{found:#?}"
    );
    for f in &found {
        assert!(
            !f.verdict.contains("passes these holds on"),
            "{}",
            f.verdict
        );
    }
}

#[test]
fn an_upstream_that_holds_only_after_the_quick_ack_start_is_named_and_the_hop_is_not() {
    let found = through_a_hop(false);
    assert!(
        nagle_kinds(&found, 7000)
            .iter()
            .all(|f| f.kind != FindingKind::NagleDelayedAck),
        "{found:#?}"
    );
    let stall = nagle_kinds(&found, 8000)
        .into_iter()
        .find(|f| f.kind == FindingKind::NagleDelayedAck)
        .unwrap_or_else(|| panic!("the upstream's stall: {found:#?}"));
    assert_eq!(stall.evidence.counts["stalled_turns"], EXCHANGES - QUICK);
    assert!(
        stall.evidence.facts.iter().any(|f| f
            .contains("through the hop listening on 198.18.0.1:7000")
            && f.contains("it does not cause them")),
        "{:#?}",
        stall.evidence.facts
    );
    for f in &found {
        assert!(
            !f.verdict.contains("held bytes it had already received"),
            "{}",
            f.verdict
        );
    }
}
