use super::builder::*;
use crate::flow::Direction;
use crate::inspect::server_sockets::{corroborate, server_sockets};
use crate::report::{Evidence, Finding, FindingKind, FlowRef, Severity};

fn finding(kind: FindingKind, server: &str, direction: Direction) -> Finding {
    Finding {
        kind,
        severity: Severity::Critical,
        file: "run/direct.pcap".into(),
        server: server.into(),
        direction,
        flows_affected: 1,
        flows_total: 1,
        example_flow: FlowRef {
            id: 1,
            client: "127.0.0.1:40000".into(),
            server: server.into(),
        },
        verdict: "held by Nagle".into(),
        time_lost_ms: 1000.0,
        evidence: Evidence {
            facts: vec!["from the packets".into()],
            ..Evidence::default()
        },
        fix: "write once".into(),
    }
}

fn observed(nodelay: Option<bool>) -> crate::inspect::Observation {
    observation(vec![process(vec![
        listener(3),
        SocketBuilder::accepted(5, 40000)
            .options(|o| o.nodelay = nodelay)
            .traffic(2, 100, 1, 14, 1, |_, _| {})
            .build(),
        SocketBuilder::accepted(6, 40001)
            .options(|o| o.nodelay = nodelay)
            .traffic(2, 100, 1, 14, 1, |_, _| {})
            .build(),
    ])])
}

#[test]
fn a_nagle_finding_about_the_servers_replies_gains_its_sockets_options() {
    let s = server_sockets(&observed(Some(false)), 7000).expect("accepted sockets on 7000");
    assert_eq!((s.accepted, s.nodelay_off, s.nodelay_on), (2, 2, 0));
    let mut findings = vec![
        finding(
            FindingKind::NagleDelayedAck,
            "127.0.0.1:7000",
            Direction::ServerToClient,
        ),
        // A hop's port in a proxy scenario, a request's direction, another kind: untouched.
        finding(
            FindingKind::NagleDelayedAck,
            "127.0.0.1:9001",
            Direction::ServerToClient,
        ),
        finding(
            FindingKind::NagleDelayedAck,
            "127.0.0.1:7000",
            Direction::ClientToServer,
        ),
        finding(
            FindingKind::RttBound,
            "127.0.0.1:7000",
            Direction::ServerToClient,
        ),
    ];
    assert_eq!(corroborate(&mut findings, &s), 1);
    let facts = &findings[0].evidence.facts;
    assert_eq!(facts.len(), 2);
    assert!(
        facts[1].starts_with("the server's accepted sockets have TCP_NODELAY off (2 of 2 accepted sockets on port 7000, read from the live sockets of pid 4242 (specimen))"),
        "{}",
        facts[1]
    );
    assert!(findings[0].evidence.rests_on[0].contains("pidfd_getfd"));
    for f in &findings[1..] {
        assert_eq!(f.evidence.facts.len(), 1, "{f:?}");
    }
}

#[test]
fn nodelay_on_or_unknown_is_said_as_it_is() {
    let on = server_sockets(&observed(Some(true)), 7000).unwrap();
    assert!(
        on.nodelay_fact().contains("TCP_NODELAY on (2 of 2"),
        "{}",
        on.nodelay_fact()
    );
    let mut obs = observed(None);
    obs.processes[0].options_refused = Some("kernel.yama.ptrace_scope = 1".into());
    let unknown = server_sockets(&obs, 7000).unwrap();
    assert!(
        unknown
            .nodelay_fact()
            .contains("could not be read on its 2 accepted sockets on port 7000 (kernel.yama.ptrace_scope = 1)"),
        "{}",
        unknown.nodelay_fact()
    );
    assert!(server_sockets(&observed(Some(true)), 7001).is_none());
    assert_eq!(on.nodelay_cell(), "on (2 of 2)");
    assert_eq!(unknown.nodelay_cell(), "unknown (2 of 2)");
    let off = server_sockets(&observed(Some(false)), 7000).unwrap();
    assert_eq!(off.nodelay_cell(), "off (2 of 2)");
    let line = off.summary_line();
    assert!(
        line.starts_with("the server's accepted sockets on port 7000: TCP_NODELAY off (2 of 2), read from the live sockets of pid "),
        "{line}"
    );
    assert!(!line.contains("look at"), "a neutral line: {line}");
    // Read off only before the socket sent data, and never again: not known to be off.
    let mut obs = observed(Some(false));
    obs.processes[0].sockets[1].options_before_data = true;
    let stale = server_sockets(&obs, 7000).unwrap();
    assert_eq!((stale.nodelay_off, stale.nodelay_unknown), (1, 1));
}

/// The findings of a real capture (`testdata/captures/`).
fn analyze(bytes: &[u8]) -> Vec<Finding> {
    let mut reader = crate::wire::CaptureReader::new(bytes).expect("pcap header");
    let mut analyzer = crate::analysis::Analyzer::default();
    while let Some(f) = reader.next_frame().expect("frame") {
        analyzer.on_frame(f.number, f.ts, f.link, f.data, f.orig_len);
    }
    analyzer.finish("capture.pcap", "pcap").1
}

/// Issue 26: a server whose accepted sockets had TCP_NODELAY on cannot have had its Nagle
/// hold anything: the same packets (a piece, the client's delayed ACK, the rest) are read as
/// the program waiting for the ACK — verdict and fix. With TCP_NODELAY off, Nagle is named.
#[test]
fn with_nodelay_on_the_nagle_kinds_say_the_program_waited_for_the_ack() {
    const PERLINE: &[u8] =
        include_bytes!("../../../../../testdata/captures/nagle_perline_server.pcap");
    let found = analyze(PERLINE);
    let port: u16 = found
        .iter()
        .find(|f| f.kind == FindingKind::NagleDelayedAck)
        .and_then(|f| f.server.rsplit(':').next()?.parse().ok())
        .expect("the per-line capture has its Nagle stall");
    for (nodelay, waited) in [(true, true), (false, false)] {
        let mut findings = found.clone();
        let mut s = server_sockets(&observed(Some(nodelay)), 7000).unwrap();
        s.port = port;
        assert!(corroborate(&mut findings, &s) >= 2);
        let stall = findings
            .iter()
            .find(|f| f.kind == FindingKind::NagleDelayedAck)
            .unwrap();
        let frag = findings
            .iter()
            .find(|f| f.kind == FindingKind::FragmentedWrites)
            .unwrap();
        assert_eq!(
            stall.verdict.contains("waited for the client's ACK"),
            waited,
            "{}",
            stall.verdict
        );
        assert_eq!(
            stall.verdict.contains("Nagle's algorithm holds"),
            !waited,
            "{}",
            stall.verdict
        );
        assert_eq!(
            stall
                .fix
                .contains("do not wait for the send queue to drain"),
            waited,
            "{}",
            stall.fix
        );
        assert_eq!(
            frag.verdict.contains("Nagle held the pieces"),
            !waited,
            "{}",
            frag.verdict
        );
        // The packets decided the finding: its figures and frames do not change.
        let before = found
            .iter()
            .find(|f| f.kind == FindingKind::NagleDelayedAck)
            .unwrap();
        assert_eq!(stall.time_lost_ms, before.time_lost_ms);
        assert_eq!(stall.evidence.frames, before.evidence.frames);
        assert_eq!(stall.evidence.counts, before.evidence.counts);
    }
}
