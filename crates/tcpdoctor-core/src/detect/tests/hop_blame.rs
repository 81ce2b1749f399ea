//! Blame the element that held the bytes (PHYSICS §9), on real captures of both legs of a hop:
//! a transparent hop in front of a server whose own Nagle held the replies is not named (the
//! server's finding says the hop forwarded at once); a Nagle-on hop in front of a server that
//! sent every line at once is named, with the lag it kept the bytes.

use crate::analysis::Analyzer;
use crate::flow::Direction;
use crate::report::{Finding, FindingKind};
use crate::wire::CaptureReader;

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
