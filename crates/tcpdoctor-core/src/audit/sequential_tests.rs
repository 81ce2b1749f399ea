//! A sequential exchange built byte by byte: the true claim passes, each falsified one fails.

use std::time::Duration;

use super::tests::{pkt, TS};
use super::*;
use crate::report::{Evidence, FlowRef, SequentialExchange, Severity};

/// When the frames of the second exchange were captured (the handshake takes 10 ms each way).
#[derive(Clone, Copy)]
struct Times {
    /// The client's ACK of the first response (frame 5).
    ack: f64,
    /// The second request (frame 6).
    request: f64,
    /// Its response (frame 7).
    response: f64,
    /// Frame 5 carries 5 bytes of client data instead of being a pure ACK.
    ack_with_data: bool,
}

const HEALTHY: Times = Times {
    ack: 50.0,
    request: 60.0,
    response: 80.0,
    ack_with_data: false,
};

/// SYN at 0, SYN-ACK at 10, ACK at 20; request 1 at 30, response 1 at 40; then frames 5–7.
fn frames(t: Times) -> Vec<(f64, Vec<u8>)> {
    let extra = if t.ack_with_data { 5 } else { 0 };
    vec![
        (0.0, pkt(true, 1000, 0, 0x02, &TS, 0)),
        (10.0, pkt(false, 5000, 1001, 0x12, &TS, 0)),
        (20.0, pkt(true, 1001, 5001, 0x10, &TS, 0)),
        (30.0, pkt(true, 1001, 5001, 0x18, &TS, 10)),
        (40.0, pkt(false, 5001, 1011, 0x18, &TS, 100)),
        (t.ack, pkt(true, 1011, 5101, 0x18, &TS, extra)),
        (
            t.request,
            pkt(true, 1011 + extra as u32, 5101, 0x18, &TS, 10),
        ),
        (
            t.response,
            pkt(false, 5101, 1021 + extra as u32, 0x18, &TS, 100),
        ),
    ]
}

fn claim() -> SequentialExchange {
    SequentialExchange {
        request: 7,
        response: 8,
        previous_response: Some(5),
        syns: vec![1, 2],
        rtt_to_server: Some([1, 2]),
        rtt_to_client: Some([2, 3]),
    }
}

fn finding(c: SequentialExchange) -> Finding {
    Finding {
        kind: FindingKind::RttBound,
        severity: Severity::Warning,
        file: "t.pcap".into(),
        server: "10.0.0.2:80".into(),
        direction: Direction::ClientToServer,
        flows_affected: 1,
        flows_total: 1,
        example_flow: FlowRef {
            id: 1,
            client: "10.0.0.1:1234".into(),
            server: "10.0.0.2:80".into(),
        },
        verdict: "round trips".into(),
        time_lost_ms: 10.0,
        evidence: Evidence {
            frames: vec![5, 7, 8],
            claims: vec![Claim::SequentialExchange(c)],
            ..Evidence::default()
        },
        fix: "pipeline".into(),
    }
}

fn audit(t: Times, c: SequentialExchange) -> Verdict {
    let f = finding(c);
    let mut a = Auditor::new(std::slice::from_ref(&f), Duration::from_millis(100));
    for (i, (ms, data)) in frames(t).iter().enumerate() {
        a.on_frame(i as u64 + 1, Timestamp::from_nanos((ms * 1e6) as u64), data);
    }
    a.finish().remove(0)
}

fn assert_fails(v: Verdict, want: &str) {
    assert!(
        v.failures.iter().any(|g| g.contains(want)),
        "expected a failure containing `{want}`, got {:#?}",
        v.failures
    );
}

#[test]
fn a_sequential_exchange_passes() {
    let v = audit(HEALTHY, claim());
    assert_eq!(v.failures, Vec::<String>::new());
    assert_eq!(v.notes, Vec::<String>::new());
    assert_eq!(v.claims_passed, 1);
}

#[test]
fn an_exchange_faster_than_the_round_trip_overlapped() {
    let t = Times {
        response: 65.0,
        ..HEALTHY
    };
    assert_fails(
        audit(t, claim()),
        "less than the 10.000 ms round trip towards the server",
    );
}

#[test]
fn a_request_sooner_than_the_round_trip_did_not_wait() {
    let t = Times {
        ack: 41.0,
        request: 45.0,
        ..HEALTHY
    };
    assert_fails(
        audit(t, claim()),
        "less than the 10.000 ms round trip towards the client",
    );
}

#[test]
fn client_data_after_the_previous_response_breaks_the_claim() {
    let t = Times {
        ack_with_data: true,
        ..HEALTHY
    };
    assert_fails(
        audit(t, claim()),
        "frame 6 is client data between frames 5 and 7",
    );
}

#[test]
fn frames_the_wrong_way_round_fail() {
    let c = SequentialExchange {
        request: 8,
        response: 7,
        ..claim()
    };
    let v = audit(HEALTHY, c);
    assert_fails(v.clone(), "frame 8 is not data from the client");
    assert_fails(v, "frame 7 is not data from the server");
}

#[test]
fn a_round_trip_pair_that_is_no_answer_fails() {
    let c = SequentialExchange {
        rtt_to_server: Some([2, 3]),
        ..claim()
    };
    assert_fails(
        audit(HEALTHY, c),
        "rtt_to_server: frames 2 and 3 are not a segment",
    );
    let c = SequentialExchange {
        rtt_to_client: Some([5, 6]),
        ..claim()
    };
    // Frame 5 (the first response) is acknowledged by frame 6: a true pair, 10 ms.
    assert_eq!(audit(HEALTHY, c).failures, Vec::<String>::new());
    let c = SequentialExchange {
        rtt_to_client: Some([5, 8]),
        ..claim()
    };
    assert_fails(
        audit(HEALTHY, c),
        "are not a segment and the other side's answer",
    );
}

#[test]
fn without_a_round_trip_the_claim_is_unverified() {
    let c = SequentialExchange {
        rtt_to_server: None,
        rtt_to_client: None,
        ..claim()
    };
    let v = audit(HEALTHY, c);
    assert!(v.ok(), "{:?}", v.failures);
    assert_eq!(v.claims_passed, 0);
}
