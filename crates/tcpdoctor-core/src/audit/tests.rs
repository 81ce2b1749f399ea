//! A delayed-ACK stall built byte by byte: the true claim passes, each falsified claim fails
//! with its reason.

use std::time::Duration;

use super::*;
use crate::report::{Evidence, FlowRef, NagleHold, ReleasedBy, Severity, TimelineEntry};
use crate::wire::testutil::{eth, ipv4_pkt, tcp_hdr, Tcp};

pub(super) const TS: [u8; 12] = [1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];

/// One TCP packet between 10.0.0.1:1234 (client) and 10.0.0.2:80 (server).
pub(super) fn pkt(
    from_client: bool,
    seq: u32,
    ack: u32,
    flags: u8,
    opts: &[u8],
    n: usize,
) -> Vec<u8> {
    let (sport, dport) = if from_client { (1234, 80) } else { (80, 1234) };
    let mut seg = tcp_hdr(&Tcp {
        sport,
        dport,
        seq,
        ack,
        flags,
        window: 512,
        options: opts.to_vec(),
    });
    seg.resize(seg.len() + n, b'x');
    let mut ip = ipv4_pkt(6, 0, None, &[], &seg);
    if !from_client {
        let (src, dst) = (ip[12..16].to_vec(), ip[16..20].to_vec());
        ip[12..16].copy_from_slice(&dst);
        ip[16..20].copy_from_slice(&src);
    }
    eth(0x0800, &[], &ip)
}

/// What lies between the held segment and its ACK (frame 6).
#[derive(Clone, Copy, PartialEq)]
enum Between {
    /// Data on another connection: must be ignored.
    OtherFlow,
    /// More data from the sender: there was no pause.
    SenderData,
    /// An earlier ACK of the held data from the receiver.
    EarlierAck,
    /// A copy of the held segment: the capture seeing it twice, or a retransmission.
    CopyOfBefore,
}

#[derive(Clone, Copy)]
struct Stall {
    between: Between,
    ack_no: u32,
    ack_payload: usize,
    ack_ms: f64,
    after_ms: f64,
    after_len: usize,
    /// The client's SYN announces an MSS.
    client_mss: bool,
    /// When frame 6 (`between`) was captured.
    six_ms: f64,
}

impl Default for Stall {
    /// The server sends 100 bytes at 31 ms; the client's delayed ACK leaves at 81 ms (10 ms
    /// round trip each way, 40 ms timer); the held 50 bytes arrive one trip later at 91 ms.
    fn default() -> Self {
        Stall {
            between: Between::OtherFlow,
            ack_no: 5101,
            ack_payload: 0,
            ack_ms: 81.0,
            after_ms: 91.0,
            after_len: 50,
            client_mss: true,
            six_ms: 50.0,
        }
    }
}

impl Stall {
    fn frames(&self) -> Vec<(f64, Vec<u8>)> {
        let syn_opts = [&[2, 4, 0x05, 0xb4][..], &TS].concat();
        let six = match self.between {
            Between::OtherFlow => {
                let mut p = pkt(true, 1, 1, 0x18, &TS, 30);
                p[14 + 20] = 0x04; // source port 1234 → 1235 (high byte 0x04, low 0xd3)
                p[14 + 21] = 0xd3;
                p
            }
            Between::SenderData => pkt(false, 5101, 1011, 0x18, &TS, 20),
            Between::EarlierAck => pkt(true, 1011, 5101, 0x10, &TS, 0),
            Between::CopyOfBefore => pkt(false, 5001, 1011, 0x18, &TS, 100),
        };
        vec![
            (
                0.0,
                pkt(
                    true,
                    1000,
                    0,
                    0x02,
                    if self.client_mss { &syn_opts } else { &TS },
                    0,
                ),
            ),
            (10.0, pkt(false, 5000, 1001, 0x12, &syn_opts, 0)),
            (20.0, pkt(true, 1001, 5001, 0x10, &TS, 0)),
            (30.0, pkt(true, 1001, 5001, 0x18, &TS, 10)),
            (31.0, pkt(false, 5001, 1011, 0x18, &TS, 100)),
            (self.six_ms, six),
            (
                self.ack_ms,
                pkt(true, 1011, self.ack_no, 0x10, &TS, self.ack_payload),
            ),
            (
                self.after_ms,
                pkt(false, 5101, 1011, 0x18, &TS, self.after_len),
            ),
        ]
    }

    fn finding(&self) -> Finding {
        let line = |frame, t_ms, direction, payload| TimelineEntry {
            frame,
            t_ms,
            direction,
            what: String::new(),
            payload_bytes: Some(payload),
            note: String::new(),
        };
        Finding {
            kind: FindingKind::NagleDelayedAck,
            severity: Severity::Critical,
            file: "t.pcap".into(),
            server: "10.0.0.2:80".into(),
            direction: Direction::ServerToClient,
            flows_affected: 1,
            flows_total: 1,
            example_flow: FlowRef {
                id: 1,
                client: "10.0.0.1:1234".into(),
                server: "10.0.0.2:80".into(),
            },
            verdict: "held".into(),
            time_lost_ms: 40.0,
            evidence: Evidence {
                facts: vec!["a fact".into()],
                frames: vec![5, 7, 8],
                timeline: vec![
                    line(5, 0.0, Direction::ServerToClient, 100),
                    line(7, self.ack_ms - 31.0, Direction::ClientToServer, 0),
                    line(8, self.after_ms - 31.0, Direction::ServerToClient, 50),
                ],
                claims: vec![Claim::NagleHold(NagleHold {
                    sender: "10.0.0.2:80".into(),
                    receiver: "10.0.0.1:1234".into(),
                    oldest: 5,
                    before: 5,
                    ack: 7,
                    after: 8,
                    full_segment: 1448,
                    syns: vec![1, 2],
                    timestamps: true,
                    rtt_to_receiver: Some([2, 3]),
                    rtt_to_sender: Some([1, 2]),
                    released_by: ReleasedBy::DelayedAck,
                })],
                ..Evidence::default()
            },
            fix: "write once".into(),
        }
    }
}

fn audit(frames: &[(f64, Vec<u8>)], f: &Finding) -> Verdict {
    let mut a = Auditor::new(std::slice::from_ref(f), Duration::from_millis(200));
    for (i, (t, data)) in frames.iter().enumerate() {
        a.on_frame(i as u64 + 1, Timestamp::from_nanos((t * 1e6) as u64), data);
    }
    a.finish().remove(0)
}

fn hold(f: &mut Finding) -> &mut NagleHold {
    match &mut f.evidence.claims[0] {
        Claim::NagleHold(h) => h,
        other => panic!("not a nagle_hold claim: {other:?}"),
    }
}

/// Audits `s` with `edit` applied to its finding; returns the failures.
fn failures(s: Stall, edit: impl FnOnce(&mut Finding)) -> Vec<String> {
    let mut f = s.finding();
    edit(&mut f);
    audit(&s.frames(), &f).failures
}

fn assert_fails(got: Vec<String>, want: &str) {
    assert!(
        got.iter().any(|g| g.contains(want)),
        "expected a failure containing `{want}`, got {got:#?}"
    );
}

#[test]
fn a_true_stall_passes() {
    let s = Stall::default();
    let v = audit(&s.frames(), &s.finding());
    assert_eq!(v.failures, Vec::<String>::new());
    assert_eq!(v.claims_passed, 1);
}

#[test]
fn wants_only_the_cited_frames_and_ranges() {
    let a = Auditor::new(&[Stall::default().finding()], Duration::from_secs(1));
    let wanted: Vec<u64> = (1..=10).filter(|&n| a.wants(n)).collect();
    assert_eq!(wanted, [1, 2, 3, 5, 6, 7, 8]);
    assert_eq!(a.last_wanted(), Some(8));
    assert_eq!(Auditor::new(&[], Duration::ZERO).last_wanted(), None);
}

#[test]
fn sender_data_inside_the_pause_fails() {
    let s = Stall {
        between: Between::SenderData,
        ..Stall::default()
    };
    assert_fails(
        failures(s, |_| {}),
        "frame 6 is sender data between frames 5 and 8",
    );
}

#[test]
fn an_earlier_ack_fails() {
    let s = Stall {
        between: Between::EarlierAck,
        ..Stall::default()
    };
    assert_fails(failures(s, |_| {}), "frame 6 already acknowledged frame 5");
}

#[test]
fn an_ack_short_of_the_data_fails() {
    let s = Stall {
        ack_no: 5050,
        ..Stall::default()
    };
    assert_fails(
        failures(s, |_| {}),
        "frame 7 acknowledges 5050 but frame 5 ends at 5101",
    );
}

#[test]
fn an_ack_with_data_fails() {
    let s = Stall {
        ack_payload: 5,
        ..Stall::default()
    };
    let got = failures(s, |_| {});
    assert_fails(got.clone(), "frame 7 is not a pure ACK");
    assert_fails(got, "timeline: frame 7 carries 5 payload bytes, not 0");
}

#[test]
fn a_short_hold_is_not_a_delayed_ack() {
    let s = Stall {
        ack_ms: 51.0,
        after_ms: 61.0,
        ..Stall::default()
    };
    assert_fails(failures(s, |_| {}), "too short for a delayed-ACK timer");
}

#[test]
fn a_hold_of_seconds_is_idle() {
    let s = Stall {
        ack_ms: 1031.0,
        after_ms: 1041.0,
        ..Stall::default()
    };
    assert_fails(failures(s, |_| {}), "longer than any delayed-ACK timer");
}

#[test]
fn a_late_release_fails() {
    let s = Stall {
        after_ms: 150.0,
        ..Stall::default()
    };
    assert_fails(failures(s, |_| {}), "not one trip to the sender");
}

#[test]
fn a_full_released_segment_fails() {
    let s = Stall {
        after_len: 1448,
        ..Stall::default()
    };
    assert_fails(
        failures(s, |f| f.evidence.timeline[2].payload_bytes = Some(1448)),
        "frame 8 carries 1448 bytes: a full segment",
    );
}

#[test]
fn a_wrong_full_segment_fails() {
    assert_fails(
        failures(Stall::default(), |f| hold(f).full_segment = 1460),
        "so a full segment is 1448 bytes, not 1460",
    );
    assert_fails(
        failures(Stall::default(), |f| hold(f).full_segment = 90),
        "no segment from frame 5 to 5 is below the full 90 bytes",
    );
}

#[test]
fn a_receiver_without_an_mss_option_allows_536() {
    let s = Stall {
        client_mss: false,
        ..Stall::default()
    };
    assert_fails(
        failures(s, |_| {}),
        "segments of MSS 536, so a full segment is 524 bytes, not 1448",
    );
    assert!(failures(s, |f| hold(f).full_segment = 524).is_empty());
}

#[test]
fn wrong_timestamps_fail() {
    assert_fails(
        failures(Stall::default(), |f| hold(f).timestamps = false),
        "frame 5 carries the timestamp option",
    );
}

#[test]
fn an_rtt_pair_the_wrong_way_round_fails() {
    assert_fails(
        failures(Stall::default(), |f| hold(f).rtt_to_receiver = Some([1, 2])),
        "rtt_to_receiver: frames 1 and 2 are not a segment and the other side's answer",
    );
    assert_fails(
        failures(Stall::default(), |f| hold(f).rtt_to_sender = Some([4, 2])),
        "rtt_to_sender: frame 2 does not acknowledge frame 4",
    );
}

#[test]
fn an_immediate_ack_claim_on_a_delayed_ack_fails() {
    assert_fails(
        failures(Stall::default(), |f| {
            hold(f).released_by = ReleasedBy::ImmediateAck
        }),
        "not immediate",
    );
}

#[test]
fn frames_elsewhere_or_missing_fail() {
    assert_fails(
        failures(Stall::default(), |f| f.evidence.frames.push(6)),
        "frame 6 is not a TCP segment between 10.0.0.1:1234 and 10.0.0.2:80",
    );
    assert_fails(
        failures(Stall::default(), |f| hold(f).after = 99),
        "frame 99 is not in the capture",
    );
    assert_fails(
        failures(Stall::default(), |f| hold(f).sender = "10.0.0.9:80".into()),
        "are not the example flow's endpoints",
    );
}

#[test]
fn a_timeline_that_lies_fails() {
    assert_fails(
        failures(Stall::default(), |f| f.evidence.timeline[1].t_ms += 0.5),
        "timeline: frame 7 is 50.000 ms after frame 5, not 50.500 ms",
    );
    assert_fails(
        failures(Stall::default(), |f| {
            f.evidence.timeline[0].direction = Direction::ClientToServer
        }),
        "timeline: frame 5 does not travel",
    );
}

#[test]
fn impossible_arithmetic_fails() {
    assert_fails(
        failures(Stall::default(), |f| f.time_lost_ms = 250.0),
        "exceeds 1 flow(s)",
    );
    let got = failures(Stall::default(), |f| {
        f.kind = FindingKind::RttBound;
        f.evidence.claims.clear();
        f.evidence.values.insert("wall_ms".into(), 10.0);
        f.evidence.values.insert("pipelining_saves_ms".into(), 12.0);
    });
    assert_fails(got, "pipelining would save 12.000 ms");
}

#[test]
fn a_copy_of_the_held_segment_is_a_capture_duplicate_only_at_once() {
    let dup = Stall {
        between: Between::CopyOfBefore,
        six_ms: 31.05,
        ..Stall::default()
    };
    assert!(
        failures(dup, |_| {}).is_empty(),
        "{:?}",
        failures(dup, |_| {})
    );
    let retransmitted = Stall {
        between: Between::CopyOfBefore,
        ..Stall::default()
    };
    assert_fails(
        failures(retransmitted, |_| {}),
        "frame 6 is sender data between frames 5 and 8",
    );
}

/// Sets the IPv4 total length of an Ethernet frame built by `pkt` to 0, as offload shows.
fn zero_length(frame: &mut [u8]) {
    frame[14 + 2] = 0;
    frame[14 + 3] = 0;
}

#[test]
fn an_undecodable_frame_in_the_pause_makes_the_claim_unverifiable() {
    // Frame 6: sender data with IP total length 0 — it may hide data in the pause.
    let s = Stall::default();
    let mut frames = s.frames();
    frames[5].1 = pkt(false, 5101, 1011, 0x18, &TS, 20);
    zero_length(&mut frames[5].1);
    let v = audit(&frames, &s.finding());
    assert!(v.ok(), "{:#?}", v.failures);
    assert_eq!(v.claims_passed, 0);
    assert!(
        v.notes
            .iter()
            .any(|n| n.contains("frame 6 does not decode")),
        "{:#?}",
        v.notes
    );
}

#[test]
fn offload_length_zero_on_cited_frames_withdraws_nothing() {
    let s = Stall::default();
    let mut frames = s.frames();
    for f in &mut frames {
        zero_length(&mut f.1);
    }
    let v = audit(&frames, &s.finding());
    assert!(v.ok(), "{:#?}", v.failures);
    assert_eq!(v.claims_passed, 0);
    assert!(!v.notes.is_empty());
}

#[test]
fn a_clean_stall_passes_its_claim_with_no_notes() {
    let s = Stall::default();
    let v = audit(&s.frames(), &s.finding());
    assert!(v.ok(), "{:#?}", v.failures);
    assert_eq!((v.claims_passed, v.notes.len()), (1, 0), "{:#?}", v.notes);
}

/// The reviewer's reproducer: the held data and its own delayed ACK as the round trip to the
/// receiver, the ACK and the released data as the one to the sender — a 40 ms delayed ACK
/// passed as an immediate one.
#[test]
fn a_self_referential_round_trip_does_not_pass_a_false_immediate_claim() {
    let got = failures(Stall::default(), |f| {
        let h = hold(f);
        h.released_by = ReleasedBy::ImmediateAck;
        h.rtt_to_receiver = Some([5, 7]);
        h.rtt_to_sender = Some([7, 8]);
    });
    assert_fails(got, "frame 7 occupies no sequence space");
    // A pair inside the span it measures is not used: the handshake's round trip (frames 2
    // and 3) stands in, and shows a 40 ms hold.
    let got = failures(Stall::default(), |f| {
        let h = hold(f);
        h.released_by = ReleasedBy::ImmediateAck;
        h.rtt_to_receiver = Some([5, 7]);
    });
    assert_fails(got, "held 40.000 ms: a delayed ACK");
    // Without SYNs there is nothing to stand in: unverifiable, not passed.
    let s = Stall::default();
    let mut f = s.finding();
    hold(&mut f).released_by = ReleasedBy::ImmediateAck;
    hold(&mut f).rtt_to_receiver = Some([5, 7]);
    hold(&mut f).syns.clear();
    let v = audit(&s.frames(), &f);
    assert!(v.ok(), "{v:#?}");
    assert_eq!(v.claims_passed, 0, "{v:#?}");
    assert!(
        v.notes.iter().any(|n| n.contains("lie within the span")),
        "{v:#?}"
    );
    // Even with honest round trips, a 40 ms hold is a delayed ACK.
    let got = failures(Stall::default(), |f| {
        hold(f).released_by = ReleasedBy::ImmediateAck;
    });
    assert_fails(got, "a delayed ACK, not an immediate one");
}

#[test]
fn a_round_trip_answer_must_be_the_first_and_its_segment_no_retransmission() {
    // Frame 3 (the client's ACK) acknowledges the SYN-ACK first, not frame 4.
    let got = failures(Stall::default(), |f| {
        hold(f).rtt_to_receiver = Some([2, 4]);
    });
    assert_fails(got, "frame 3, not 4, is the first to acknowledge frame 2");
    // Frame 6 is a later copy of frame 5's bytes: a retransmission, not a sample.
    let s = Stall {
        between: Between::CopyOfBefore,
        six_ms: 31.05,
        ..Stall::default()
    };
    let got = failures(s, |f| {
        hold(f).rtt_to_receiver = Some([6, 7]);
    });
    assert_fails(got, "frame 6 retransmits bytes frame 5 sent");
}

/// The reviewer's reproducer: without SYNs any `full_segment` passed.
#[test]
fn without_syns_full_segment_is_unverified_not_passed() {
    let s = Stall::default();
    let mut f = s.finding();
    hold(&mut f).syns.clear();
    hold(&mut f).full_segment = 60000;
    let v = audit(&s.frames(), &f);
    assert!(v.ok(), "{v:#?}");
    assert_eq!(v.claims_passed, 0, "{v:#?}");
    assert!(v.notes.iter().any(|n| n.contains("no SYNs")), "{v:#?}");
}
