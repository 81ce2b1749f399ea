//! `unbatched_messages` on simulated time: each threshold just below and just above (burst
//! length, span, segment size, the agreement of the request and answer counts), the ACK
//! field (a sender that received the peer's data between two messages did not have them
//! ready together), the TSval (messages the sender's TCP sent in different ticks of its clock
//! were not ready together, however bunched they arrive), bursts that end at each new batch of
//! requests, the batched twin, and severity by the extra packets' share. The reviewer's wrong
//! findings are each a test here: a strictly sequential client with one larger message, a
//! server at the far end of a path that answers one request at a time, a paced sender, and
//! answers to separate batches.

use super::*;
use crate::detect::unbatched_messages::{AGREE, MIN_BURST, SMALL_SEGMENT, SPAN_MAX};
use crate::report::Severity;

/// Data from `dir` at `t` µs carrying ACK number `ack` (`None`: everything the peer sent) and
/// TSval `tsval` (`None`: the sender's clock in ms, `t / 1000`).
fn send(s: &mut Sim, dir: Direction, t: u64, len: u32, ack: Option<u32>, tsval: Option<u32>) {
    let (seq, all) = match dir {
        C2S => (s.cseq, s.sseq),
        S2C => (s.sseq, s.cseq),
    };
    let o = TcpOptions {
        timestamp: Some((tsval.unwrap_or((t / 1000) as u32), 0)),
        ..TcpOptions::default()
    };
    s.raw(dir, t, seq, ack.unwrap_or(all), ACK | PSH, len, o);
    match dir {
        C2S => s.cseq += len,
        S2C => s.sseq += len,
    }
}

/// A pipelined conversation with rule 6's proof both ways: `n` requests of `req` bytes `gap` µs
/// apart; the server's answer to the first request, which left when only that one had
/// arrived (its ACK number is one request into the burst); `answers` answers of `ans` bytes
/// `gap` µs apart to the rest (every request had arrived); one more request from the client,
/// sent when only the first of those answers had arrived. Each side's clock is the capture's,
/// in ms.
fn pipelined(n: u64, req: u32, answers: u64, ans: u32, gap: u64) -> Vec<Finding> {
    let mut s = Sim::new();
    let t = conversation(&mut s, 40000, 0, (n, req), (answers, ans), gap);
    s.close(t + 1_000);
    s.findings()
}

/// [`pipelined`]'s conversation on a new connection from `port` opened at `t0`, left open;
/// returns when its last request left.
fn conversation(
    s: &mut Sim,
    port: u16,
    t0: u64,
    (n, req): (u64, u32),
    (answers, ans): (u64, u32),
    gap: u64,
) -> u64 {
    s.connect(port, t0, 30, 10);
    let mut t = t0 + 1_000;
    let first_request = s.cseq;
    for _ in 0..n {
        send(s, C2S, t, req, None, None);
        t += gap;
    }
    t += 20;
    send(s, S2C, t, ans, Some(first_request + req), None);
    // The answers start on a tick of the server's clock.
    t = (t / 1_000 + 2) * 1_000;
    let first_answer = s.sseq;
    for _ in 0..answers {
        send(s, S2C, t, ans, None, None);
        t += gap;
    }
    t += 2_000;
    send(s, C2S, t, req, Some(first_answer + ans), None);
    t
}

/// The same without the proof of rule 6: every request arrived before the first answer and
/// every answer before the next request, so each side's burst may be one message in pieces.
fn pipelined_unproven(n: u64, req: u32, answers: u64, ans: u32, gap: u64) -> Vec<Finding> {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..n {
        send(&mut s, C2S, t, req, None, None);
        t += gap;
    }
    t += 20;
    for _ in 0..answers {
        send(&mut s, S2C, t, ans, None, None);
        t += gap;
    }
    s.close(t + 1_000);
    s.findings()
}

fn named(f: &[Finding], dir: Direction) -> bool {
    kinds(f).contains(&(FindingKind::UnbatchedMessages, dir))
}

fn of_dir(f: &[Finding], dir: Direction) -> &Finding {
    f.iter()
        .find(|f| f.kind == FindingKind::UnbatchedMessages && f.direction == dir)
        .expect("named")
}

#[test]
fn a_burst_of_min_burst_requests_is_named_one_fewer_is_not() {
    let n = MIN_BURST as u64;
    let f = pipelined(n, 40, n, 5, 50);
    assert!(named(&f, C2S), "{:?}", kinds(&f));
    let u = of_dir(&f, C2S);
    assert_eq!(u.evidence.counts["segments"], n);
    assert_eq!(u.evidence.counts["segments_if_batched"], 1);
    assert_eq!(u.evidence.counts["extra_packets"], n - 1);
    assert_eq!(u.evidence.counts["header_bytes"], (n - 1) * 52);
    assert_eq!(u.evidence.frames.len(), MIN_BURST.min(8));
    assert_eq!(u.time_lost_ms, 0.0, "packets, not measured time");
    assert!(
        u.evidence.facts[0].contains("ACK number"),
        "{:?}",
        u.evidence
    );
    let f = pipelined(n - 1, 40, n - 1, 5, 50);
    assert!(!named(&f, C2S) && !named(&f, S2C), "{:?}", kinds(&f));
}

/// Every answer carries the same ACK number as the first: all of them could have left in the
/// first one's write, the first included.
#[test]
fn a_burst_of_min_burst_answers_is_named_one_fewer_is_not() {
    let n = MIN_BURST as u64;
    let f = pipelined(n, 40, n, 5, 50);
    assert!(named(&f, S2C), "{:?}", kinds(&f));
    let u = of_dir(&f, S2C);
    assert_eq!(u.evidence.counts["segments"], n);
    assert!(
        u.verdict
            .contains("the client sent data acknowledging a first part of the burst"),
        "{}",
        u.verdict
    );
    assert!(!u.verdict.contains("request"), "{}", u.verdict);
    let f = pipelined(n - 1, 40, n - 1, 5, 50);
    assert!(!named(&f, S2C), "{:?}", kinds(&f));
}

/// Rule 6: the same bursts, each answered only after all of it had arrived, are one message
/// in pieces answered in pieces as much as pipelined messages: nothing is said either way.
#[test]
fn a_burst_without_an_ack_inside_it_is_not_named() {
    for n in [MIN_BURST as u64, 16, 200] {
        let f = pipelined_unproven(n, 40, n, 5, 50);
        assert!(!named(&f, C2S) && !named(&f, S2C), "{n}: {:?}", kinds(&f));
        let f = pipelined(n, 40, n, 5, 50);
        assert!(named(&f, C2S) && named(&f, S2C), "{n}: {:?}", kinds(&f));
    }
}

/// Rule 3: a piece under half the typical size (the 2-byte `\r\n` ending a request of 27-byte
/// header lines) is not a whole message and ends a burst.
#[test]
fn a_piece_under_half_the_typical_size_is_not_a_small_message() {
    for (tail, want) in [(14u32, true), (13, false)] {
        let mut s = Sim::new();
        s.connect(40000, 0, 30, 10);
        let first = s.cseq;
        let mut t = 1_000;
        // 7 segments of 27 bytes, then `tail`, then 8 more of 27 bytes, all one burst's worth.
        for k in 0..16u64 {
            let len = if k == 7 { tail } else { 27 };
            send(&mut s, C2S, t, len, None, None);
            t += 20;
        }
        send(&mut s, S2C, t + 20, 27, Some(first + 27), None);
        for k in 0..16u64 {
            send(&mut s, S2C, t + 2_000 + k * 20, 27, None, None);
        }
        s.close(t + 20_000);
        let f = s.findings();
        let got = named(&f, C2S);
        assert_eq!(got, want, "tail {tail}: {:?}", kinds(&f));
    }
}

/// Rule 5's span at the capture point: 8 requests over exactly `SPAN_MAX` are a burst, over
/// 1 µs more are not (the sender's clock here ticks every 10 ms, so the TSval does not decide).
#[test]
fn a_burst_spans_at_most_span_max() {
    let max = SPAN_MAX.as_micros() as u64;
    let n = MIN_BURST as u64;
    for (span, want) in [(max, true), (max + 7, false)] {
        let gap = span / (n - 1);
        let mut s = Sim::new();
        s.connect(40000, 0, 30, 10);
        let first = s.cseq;
        for k in 0..n {
            send(&mut s, C2S, 1_000 + k * gap, 40, None, Some(7));
        }
        send(&mut s, S2C, 4_000, 5, Some(first + 40), None);
        for k in 0..n {
            send(&mut s, S2C, 5_000 + k * 300, 5, None, None);
        }
        s.close(20_000);
        let f = s.findings();
        assert_eq!(named(&f, C2S), want, "span {span} µs: {:?}", kinds(&f));
    }
}

/// A long run of back-to-back requests is cut into bursts of at most `SPAN_MAX`: the cost
/// adds up per burst, never across a paced run.
#[test]
fn a_long_run_is_cut_into_bursts_of_span_max() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    // 44 requests 100 µs apart, all in one tick of a coarse sender clock: 4.3 ms at the
    // capture, 11 to each millisecond.
    let first = s.cseq;
    for k in 0..44 {
        send(&mut s, C2S, 10_000 + k * 100, 40, None, Some(3));
    }
    // The server's first answers, each sent when one more burst had begun to arrive.
    for k in 0..44u32 {
        let ack = (k < 4).then(|| first + 40 * (11 * k + 1));
        send(&mut s, S2C, 20_000 + u64::from(k) * 2_000, 5, ack, None);
    }
    s.close(200_000);
    let f = s.findings();
    let u = of_dir(&f, C2S);
    assert_eq!(u.evidence.counts["bursts"], 4, "{}", u.verdict);
    assert_eq!(u.evidence.counts["segments_if_batched"], 4);
}

/// Rule 5's TSval: requests that reach the capture within 20 µs of each other (bunched by a
/// queue on the path, seen at the server's end) but whose TSvals show the client's TCP sent
/// them 1 ms apart were not ready together. The same arrivals with one TSval are.
#[test]
fn messages_sent_in_different_ticks_of_the_senders_clock_are_not_a_burst() {
    for (paced, want) in [(true, false), (false, true)] {
        let mut s = Sim::new();
        s.connect(40000, 0, 30, 10);
        let first = s.cseq;
        for k in 0..20u64 {
            let tsval = if paced { 100 + k as u32 } else { 100 };
            send(&mut s, C2S, 50_000 + k * 20, 40, None, Some(tsval));
        }
        send(&mut s, S2C, 58_000, 5, Some(first + 40), None);
        for k in 0..20u64 {
            send(&mut s, S2C, 60_000 + k * 2_000, 5, None, None);
        }
        s.close(200_000);
        let f = s.findings();
        assert_eq!(named(&f, C2S), want, "paced {paced}: {:?}", kinds(&f));
    }
}

/// Without the timestamp option the capture cannot tell when the sender sent what reached it
/// bunched: nothing is said.
#[test]
fn without_tcp_timestamps_nothing_is_said() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    for k in 0..20 {
        s.data(C2S, 1_000 + k * 20, 40);
    }
    for k in 0..20 {
        s.data(S2C, 2_000 + k * 20, 5);
    }
    s.close(10_000);
    let f = s.findings();
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

/// Request, answer, request, answer 30 µs apart: each request carries a new ACK number (the
/// answer before it had arrived), so nothing is pipelined and nothing is said.
#[test]
fn strict_alternation_is_not_pipelining() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..40 {
        send(&mut s, C2S, t, 40, None, Some(1));
        send(&mut s, S2C, t + 30, 5, None, Some(1));
        t += 60;
    }
    s.close(t + 1_000);
    let f = s.findings();
    assert!(!named(&f, C2S) && !named(&f, S2C), "{:?}", kinds(&f));
}

/// The reviewer's test 1 and 2: a strictly sequential client (each request after its answer)
/// whose first message is a 100-byte greeting, or whose every 20th request is larger. Sizes
/// put more requests than answers on the books; the ACK numbers show every request waited.
#[test]
fn a_sequential_client_with_larger_messages_is_not_pipelining() {
    for greeting in [true, false] {
        let mut s = Sim::new();
        s.connect(40000, 0, 30, 10);
        let mut t = 1_000;
        if greeting {
            send(&mut s, C2S, t, 100, None, Some(1));
            send(&mut s, S2C, t + 20, 5, None, Some(1));
            t += 40;
        }
        for k in 0..300 {
            let len = if !greeting && k % 20 == 0 { 20 } else { 9 };
            send(&mut s, C2S, t, len, None, Some(1));
            send(&mut s, S2C, t + 20, 5, None, Some(1));
            t += 40;
        }
        s.close(t + 1_000);
        let f = s.findings();
        assert!(
            !named(&f, C2S) && !named(&f, S2C),
            "greeting {greeting}: {:?}",
            kinds(&f)
        );
    }
}

/// The reviewer's redis case, at the client's end of a 30 ms path: the client pipelines
/// requests paced 500 µs apart; the server answers each alone, but each answer carries a new
/// ACK number (its TCP held one more request each time), and the answers reach the client
/// bunched by the path. Neither side is named.
#[test]
fn a_server_answering_one_request_at_a_time_is_not_named_at_the_far_end() {
    let mut s = Sim::new();
    s.connect(40000, 0, 15_000, 15_000);
    let first = s.cseq;
    let t0 = 40_000u64;
    for k in 0..60u64 {
        send(&mut s, C2S, t0 + k * 500, 14, None, None);
    }
    // The answers, each acknowledging exactly its own request, reach the client 20 µs apart.
    for k in 0..60u32 {
        let ack = first + 14 * (k + 1);
        send(
            &mut s,
            S2C,
            t0 + 70_000 + u64::from(k) * 20,
            7,
            Some(ack),
            Some(5),
        );
    }
    s.close(t0 + 200_000);
    let f = s.findings();
    assert!(!named(&f, C2S) && !named(&f, S2C), "{:?}", kinds(&f));
}

/// The server answers request k alone though request k+1 arrived only after its previous
/// answer left (it was busy answering): each answer's ACK number is new, and a batched server
/// would do the same. Each request carries a new ACK number too (an answer arrived between),
/// so the capture cannot show that the client did not wait: nothing is said.
#[test]
fn an_answer_to_a_request_that_came_while_answering_is_not_avoidable() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    send(&mut s, C2S, t, 40, None, Some(1));
    for _ in 0..20 {
        send(&mut s, C2S, t + 20, 40, None, Some(1));
        send(&mut s, S2C, t + 40, 5, None, Some(1));
        t += 60;
    }
    send(&mut s, S2C, t + 40, 5, None, Some(1));
    s.close(t + 1_000);
    let f = s.findings();
    assert!(!named(&f, S2C) && !named(&f, C2S), "{:?}", kinds(&f));
}

/// The reviewer's memcached case: after one `set`, the client sends 30 rounds of 16 gets in
/// one segment, then 30 rounds of 16 gets each in its own segment; the server answers each
/// get with its own segment, all after the whole round had arrived, and the client waits for
/// all 16 replies. No ACK number falls inside a burst: 16 gets answered by 16 replies look
/// like one message in 16 pieces answered in 16 pieces, and nothing is said (rule 6).
#[test]
fn memcached_rounds_answered_after_they_arrived_are_not_named() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    send(&mut s, C2S, t, 20, None, None);
    send(&mut s, S2C, t + 30, 8, None, None);
    t += 1_000;
    for round in 0..60 {
        if round < 30 {
            send(&mut s, C2S, t, 16 * 7, None, None);
        } else {
            for k in 0..16 {
                send(&mut s, C2S, t + k * 5, 7, None, None);
            }
        }
        for k in 0..16 {
            send(&mut s, S2C, t + 100 + k * 10, 25, None, None);
        }
        t += 1_000;
    }
    s.close(t + 1_000);
    let f = s.findings();
    assert!(!named(&f, C2S) && !named(&f, S2C), "{:?}", kinds(&f));
}

/// Rounds of 16 gets each in its own segment, where the server's first reply left when only
/// the first get had arrived and the client's next round left when only the first of the
/// other 15 replies had arrived: one burst per round each way, never adding up two rounds.
#[test]
fn bursts_end_at_each_new_batch_of_requests() {
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    let mut client_ack = None;
    for _ in 0..30 {
        let round = s.cseq;
        for k in 0..16 {
            send(&mut s, C2S, t + k * 5, 7, client_ack, None);
        }
        send(&mut s, S2C, t + 100, 25, Some(round + 7), None);
        let replies = s.sseq;
        for k in 0..15 {
            send(&mut s, S2C, t + 2_000 + k * 10, 25, None, None);
        }
        client_ack = Some(replies + 25);
        t += 4_000;
    }
    send(&mut s, C2S, t, 7, client_ack, None);
    s.close(t + 1_000);
    let f = s.findings();
    let u = of_dir(&f, S2C);
    assert_eq!(u.evidence.counts["bursts"], 30, "{}", u.verdict);
    assert_eq!(u.evidence.counts["segments"], 30 * 15);
    assert_eq!(u.evidence.counts["segments_if_batched"], 30);
    assert_eq!(u.evidence.counts["extra_packets"], 30 * 14);
    let u = of_dir(&f, C2S);
    assert_eq!(u.evidence.counts["bursts"], 30, "{}", u.verdict);
    assert_eq!(u.evidence.counts["extra_packets"], 30 * 15);
}

#[test]
fn severity_follows_the_extra_packets_share() {
    let f = pipelined(20, 40, 20, 5, 50);
    let u = of_dir(&f, C2S);
    assert_eq!(u.severity, Severity::Warning, "{}", u.verdict);
    // The same burst of 8 among 24 more requests each answered before the next: 7 extra
    // packets of 32 data segments is info.
    let mut s = Sim::new();
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..24 {
        send(&mut s, C2S, t, 40, None, None);
        send(&mut s, S2C, t + 30, 5, None, None);
        t += 5_000;
    }
    let first = s.cseq;
    for _ in 0..8 {
        send(&mut s, C2S, t, 40, None, Some(900));
        t += 50;
    }
    send(&mut s, S2C, t, 5, Some(first + 40), None);
    t += 5_000;
    for _ in 0..7 {
        send(&mut s, S2C, t, 5, None, None);
        t += 5_000;
    }
    s.close(t);
    let f = s.findings();
    let u = of_dir(&f, C2S);
    assert_eq!(u.severity, Severity::Info, "{}", u.verdict);
    assert_eq!(u.evidence.counts["extra_packets"], 7);
    assert_eq!(u.evidence.counts["direction_segments"], 32);
}

/// Ten rounds of 16 small pieces each way, the client's next round after the whole answer.
/// Unproven (each side answers only the whole burst): `fragmented_writes` names both sides
/// (one message in pieces, as far as the wire shows) and `unbatched_messages` neither. Proven
/// (the server's first answer of every round acknowledges one piece, the rest still on the
/// way): `unbatched_messages` names the client's bursts and `fragmented_writes` no longer
/// calls those turns one request in pieces. Never both claims on the same frames.
#[test]
fn fragmented_writes_and_unbatched_messages_never_claim_the_same_burst() {
    for proven in [false, true] {
        let mut s = Sim::new();
        s.connect(40000, 0, 30, 10);
        let mut t = 10_000;
        for _ in 0..10 {
            let round = s.cseq;
            for k in 0..16 {
                send(&mut s, C2S, t + k * 10, 27, None, None);
            }
            let ack = proven.then_some(round + 27);
            send(&mut s, S2C, t + 200, 30, ack, None);
            for k in 1..16 {
                send(&mut s, S2C, t + 200 + k * 10, 30, None, None);
            }
            t += 10_000;
        }
        s.close(t);
        let f = s.findings();
        let k = kinds(&f);
        let fragmented = k.contains(&(FindingKind::FragmentedWrites, C2S));
        assert_eq!(named(&f, C2S), proven, "proven {proven}: {k:?}");
        assert_eq!(fragmented, !proven, "proven {proven}: {k:?}");
        assert!(!named(&f, S2C), "proven {proven}: {k:?}");
    }
}

/// Rule 8: of bursts of equal length, the example is the first in the capture, not the first
/// judged. The first connection's bursts are judged only when it ends (here at the capture's
/// end); the second's, all after them, at its FIN, before.
#[test]
fn of_equal_bursts_the_example_is_the_first_in_the_capture_not_the_first_judged() {
    let n = MIN_BURST as u64;
    let mut s = Sim::new();
    conversation(&mut s, 40000, 0, (n, 40), (n, 5), 50);
    let t = conversation(&mut s, 40001, 100_000, (n, 40), (n, 5), 50);
    s.close(t + 1_000);
    let f = s.findings();
    for dir in [C2S, S2C] {
        let u = of_dir(&f, dir);
        assert_eq!(u.evidence.counts["bursts"], 2, "{:?}", u.evidence.counts);
        assert_eq!(u.example_flow.id, 1);
        assert!(
            u.example_flow.client.ends_with(":40000"),
            "{:?}",
            u.example_flow
        );
    }
}
