//! `unbatched_messages` on simulated time: each threshold just below and just above (burst
//! length, gap, segment size, the agreement of the request and answer counts), pipelining
//! against strict alternation, the batched twin, and severity by the extra packets' share.

use super::*;
use crate::detect::unbatched_messages::{AGREE, GAP_MAX, MIN_BURST, SMALL_SEGMENT};
use crate::report::Severity;

/// A pipelined conversation: `n` requests of `req` bytes `gap` µs apart, then `answers`
/// answers of `ans` bytes `gap` µs apart (every request had arrived before the first answer).
fn pipelined(n: u64, req: u32, answers: u64, ans: u32, gap: u64) -> Vec<Finding> {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..n {
        s.data(C2S, t, req);
        t += gap;
    }
    t += 200;
    for _ in 0..answers {
        s.data(S2C, t, ans);
        t += gap;
    }
    s.close(t + 1_000);
    s.findings()
}

fn named(f: &[Finding], dir: Direction) -> bool {
    kinds(f).contains(&(FindingKind::UnbatchedMessages, dir))
}

#[test]
fn a_burst_of_min_burst_requests_is_named_one_fewer_is_not() {
    let n = MIN_BURST as u64;
    let f = pipelined(n, 40, n, 5, 50);
    assert!(named(&f, C2S), "{:?}", kinds(&f));
    let u = get(&f, FindingKind::UnbatchedMessages);
    assert_eq!(u.evidence.counts["segments"], n);
    assert_eq!(u.evidence.counts["segments_if_batched"], 1);
    assert_eq!(u.evidence.counts["extra_packets"], n - 1);
    assert_eq!(u.evidence.counts["header_bytes"], (n - 1) * 52);
    assert_eq!(u.evidence.frames.len(), MIN_BURST.min(8));
    assert_eq!(u.time_lost_ms, 0.0, "packets, not measured time");
    let f = pipelined(n - 1, 40, n - 1, 5, 50);
    assert!(!named(&f, C2S) && !named(&f, S2C), "{:?}", kinds(&f));
}

/// The first answer of a stretch may have been written alone legitimately (the server may
/// have read its request alone): a burst of answers starts at the second, so it takes
/// `MIN_BURST + 1` answers.
#[test]
fn a_burst_of_min_burst_answers_after_the_first_is_named_one_fewer_is_not() {
    let n = MIN_BURST as u64 + 1;
    let f = pipelined(n, 40, n, 5, 50);
    assert!(named(&f, S2C), "{:?}", kinds(&f));
    let u = f
        .iter()
        .find(|f| f.kind == FindingKind::UnbatchedMessages && f.direction == S2C)
        .expect("answers");
    assert_eq!(u.evidence.counts["segments"], n - 1);
    let f = pipelined(n - 1, 40, n - 1, 5, 50);
    assert!(!named(&f, S2C), "{:?}", kinds(&f));
}

#[test]
fn messages_further_apart_than_gap_max_were_not_ready_together() {
    let max = GAP_MAX.as_micros() as u64;
    let f = pipelined(12, 40, 12, 5, max);
    assert!(named(&f, C2S), "{:?}", kinds(&f));
    let f = pipelined(12, 40, 12, 5, max + 1);
    assert!(!named(&f, C2S) && !named(&f, S2C), "{:?}", kinds(&f));
}

#[test]
fn only_small_segments_count_as_small_messages() {
    let f = pipelined(12, SMALL_SEGMENT, 12, 5, 50);
    assert!(named(&f, C2S), "{:?}", kinds(&f));
    let f = pipelined(12, SMALL_SEGMENT + 1, 12, 5, 50);
    assert!(!named(&f, C2S), "{:?}", kinds(&f));
    assert!(
        named(&f, S2C),
        "the answers are small still: {:?}",
        kinds(&f)
    );
}

/// 16 requests: 20 answers agree (ratio 1.25), 21 do not (a request or answer in pieces).
#[test]
fn request_and_answer_counts_must_agree() {
    let most = (16.0 * AGREE) as u64;
    let f = pipelined(16, 40, most, 5, 50);
    assert!(named(&f, C2S), "{:?}", kinds(&f));
    let f = pipelined(16, 40, most + 1, 5, 50);
    assert!(!named(&f, C2S) && !named(&f, S2C), "{:?}", kinds(&f));
}

/// One request written in 16 pieces, answered with one segment: fragmented, not unbatched.
#[test]
fn one_request_in_pieces_is_not_unbatched_messages() {
    let f = pipelined(16, 40, 1, 200, 50);
    assert!(!named(&f, C2S), "{:?}", kinds(&f));
}

/// The batched twin: the same 16 requests in one write, the 16 answers in one write.
#[test]
fn the_batched_twin_is_not_named() {
    let f = pipelined(1, 16 * 40, 1, 16 * 5, 50);
    assert!(!named(&f, C2S) && !named(&f, S2C), "{:?}", kinds(&f));
}

/// Request, answer, request, answer 30 µs apart: the capture cannot tell a fast sequential
/// client from a pipelined one, so nothing is pipelined and nothing is said.
#[test]
fn strict_alternation_is_not_pipelining() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..40 {
        s.data(C2S, t, 40);
        s.data(S2C, t + 30, 5);
        t += 60;
    }
    s.close(t + 1_000);
    let f = s.findings();
    assert!(!named(&f, C2S) && !named(&f, S2C), "{:?}", kinds(&f));
}

/// The server answers request k alone though request k+1 arrived only after its previous
/// answer left (it was busy answering): a batched server would do the same. Not named.
#[test]
fn an_answer_to_a_request_that_came_while_answering_is_not_avoidable() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    s.data(C2S, t, 40);
    for _ in 0..20 {
        s.data(C2S, t + 20, 40);
        s.data(S2C, t + 40, 5);
        t += 60;
    }
    s.data(S2C, t + 40, 5);
    s.close(t + 1_000);
    let f = s.findings();
    assert!(!named(&f, S2C), "{:?}", kinds(&f));
    assert!(named(&f, C2S), "the client pipelines: {:?}", kinds(&f));
}

#[test]
fn severity_follows_the_extra_packets_share() {
    let f = pipelined(20, 40, 20, 5, 50);
    let u = get(&f, FindingKind::UnbatchedMessages);
    assert_eq!(u.severity, Severity::Warning, "{}", u.verdict);
    // The same burst of 8 among 24 more requests each answered before the next: 7 extra
    // packets of 32 data segments is info.
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..24 {
        s.data(C2S, t, 40);
        s.data(S2C, t + 30, 5);
        t += 5_000;
    }
    for _ in 0..8 {
        s.data(C2S, t, 40);
        t += 50;
    }
    for _ in 0..8 {
        s.data(S2C, t, 5);
        t += 5_000;
    }
    s.close(t);
    let f = s.findings();
    let u = f
        .iter()
        .find(|f| f.kind == FindingKind::UnbatchedMessages && f.direction == C2S)
        .expect("the burst of 8 is named");
    assert_eq!(u.severity, Severity::Info, "{}", u.verdict);
    assert_eq!(u.evidence.counts["extra_packets"], 7);
    assert_eq!(u.evidence.counts["direction_segments"], 32);
}
