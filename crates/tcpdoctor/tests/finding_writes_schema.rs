//! The evidence a traced program adds to a finding (`evidence.writes`, `writes_per_*`) stays
//! inside the committed JSON Schema.

mod common;

use tcpdoctor_core::flow::Direction;
use tcpdoctor_core::report::{
    Evidence, Finding, FindingKind, FlowRef, Report, Severity, WriteMark,
};

#[test]
fn a_finding_with_traced_writes_matches_the_analyze_schema() {
    let mut evidence = Evidence::default();
    evidence.facts.push(
        "frame 5 carries the bytes of write() call #1 (12 bytes); frame 7 carries the bytes of \
         write() calls #2–#14 (13 calls, 195 bytes in all, 2 µs apart)"
            .into(),
    );
    evidence.frames = vec![5, 6, 7];
    evidence.writes = vec![WriteMark {
        call: "write".into(),
        index: 1,
        bytes: 12,
        t_ms: -0.005,
        direction: Direction::ServerToClient,
        frames: vec![5],
    }];
    evidence
        .rests_on
        .push("the server's system calls, traced by tcpdoctor".into());
    let finding = Finding {
        kind: FindingKind::NagleDelayedAck,
        severity: Severity::Warning,
        file: "lo.pcap".into(),
        server: "127.0.0.1:7000".into(),
        direction: Direction::ServerToClient,
        flows_affected: 1,
        flows_total: 1,
        example_flow: FlowRef {
            id: 1,
            client: "127.0.0.1:40000".into(),
            server: "127.0.0.1:7000".into(),
        },
        verdict: "1 response stalled".into(),
        time_lost_ms: 40.0,
        evidence,
        fix: "write each response with one call".into(),
    };
    let report = Report::new(Vec::new(), vec![finding]);
    let json = serde_json::to_value(&report).expect("serializes");
    assert_eq!(json["findings"][0]["evidence"]["writes"][0]["index"], 1);
    common::validate(&json);
    // A mark without its frames is not what the schema describes.
    let mut bad = json.clone();
    bad["findings"][0]["evidence"]["writes"][0]
        .as_object_mut()
        .unwrap()
        .remove("frames");
    let schema: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(common::repo().join("schema/analyze-report.schema.json")).unwrap(),
    )
    .unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    assert!(!validator.is_valid(&bad));
}
