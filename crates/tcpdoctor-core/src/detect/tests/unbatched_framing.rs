//! `unbatched_messages` rule 6′ on simulated time: the driver's message ends (the script's
//! framing) name a burst of whole messages one segment each that the wire alone cannot tell
//! from one message in pieces; a message in pieces is never named, with or without them; a
//! later connection on the recorded endpoints is not the recorded one.

use std::sync::Arc;

use super::*;
use crate::detect::unbatched_messages::MIN_BURST;
use crate::message_ends::{ConnectionEnds, MessageEnds};

/// Data from `dir` at `t` µs carrying the ACK number of everything the peer sent, with the
/// sender's clock in ms as its TSval.
fn send(s: &mut Sim, dir: Direction, t: u64, len: u32) {
    let (seq, ack) = match dir {
        C2S => (s.cseq, s.sseq),
        S2C => (s.sseq, s.cseq),
    };
    let o = TcpOptions {
        timestamp: Some(((t / 1000) as u32, 0)),
        ..TcpOptions::default()
    };
    s.raw(dir, t, seq, ack, ACK | PSH, len, o);
    match dir {
        C2S => s.cseq += len,
        S2C => s.sseq += len,
    }
}

/// The driver's record of one connection from port 40000: requests of `req` bytes and
/// responses of `ans` bytes, `n` each.
fn ends(n: usize, req: usize, ans: usize) -> ConnectionEnds {
    let mut c = ConnectionEnds::new(ep(40000), ep(7000));
    for _ in 0..n {
        c.message(C2S, req);
        c.message(S2C, ans);
    }
    c
}

/// `n` requests of `req` bytes in one segment, then the answers: `n × ans` bytes in segments
/// of `piece` bytes, 50 µs apart, all within one tick of the server's clock. Nothing from the
/// client acknowledges a part of them (no proof by rule 6). The capture's frame numbers of the
/// answers are returned with the findings.
fn exchange(
    framing: Option<ConnectionEnds>,
    n: u32,
    req: u32,
    ans: u32,
    piece: u32,
) -> (Vec<Finding>, Vec<u64>) {
    let mut s = Sim::new();
    if let Some(c) = framing {
        s.an = Analyzer::with_driver(None, Some(Arc::new(MessageEnds::new(vec![c]))));
    }
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    send(&mut s, C2S, t, n * req);
    t = 2_000;
    let mut frames = Vec::new();
    let mut left = n * ans;
    while left > 0 {
        let len = piece.min(left);
        send(&mut s, S2C, t, len);
        frames.push(s.frame);
        left -= len;
        t += 50;
    }
    s.close(t + 2_000);
    (s.findings(), frames)
}

fn named(f: &[Finding], dir: Direction) -> Option<&Finding> {
    f.iter()
        .find(|f| f.kind == FindingKind::UnbatchedMessages && f.direction == dir)
}

#[test]
fn whole_answers_one_segment_each_are_named_by_the_framing_alone() {
    let n = 16;
    let (f, frames) = exchange(Some(ends(16, 10, 5)), n, 10, 5, 5);
    let u = named(&f, S2C).unwrap_or_else(|| panic!("named: {:?}", kinds(&f)));
    assert_eq!(u.evidence.counts["segments"], u64::from(n));
    assert_eq!(u.evidence.counts["bursts_by_framing"], 1);
    assert_eq!(u.evidence.counts["extra_packets"], u64::from(n) - 1);
    let quote = format!(
        "the script's framing: the 16 segments in frames {}–{} each carry exactly one whole \
         response (responses 1–16 of this connection",
        frames[0], frames[15]
    );
    assert!(
        u.evidence.facts.iter().any(|x| x.contains(&quote)),
        "{:#?}",
        u.evidence.facts
    );
    assert_eq!(u.evidence.frames, frames[..8].to_vec());
    assert!(
        u.verdict
            .contains("the script's framing shows each segment carried exactly one whole response"),
        "{}",
        u.verdict
    );
    // The request went as one segment of 16: never a burst.
    assert!(named(&f, C2S).is_none());
    // The same capture without the framing: one message in pieces as far as the wire can tell.
    let (f, _) = exchange(None, n, 10, 5, 5);
    assert!(named(&f, S2C).is_none(), "{:?}", kinds(&f));
}

/// Below MIN_BURST whole messages the framing names nothing either.
#[test]
fn fewer_than_min_burst_whole_answers_are_not_named() {
    let n = MIN_BURST as u32;
    let (f, _) = exchange(Some(ends(n as usize, 10, 5)), n, 10, 5, 5);
    assert!(named(&f, S2C).is_some(), "{:?}", kinds(&f));
    let (f, _) = exchange(Some(ends(n as usize - 1, 10, 5)), n - 1, 10, 5, 5);
    assert!(named(&f, S2C).is_none(), "{:?}", kinds(&f));
}

/// Each answer of 10 bytes left in two 5-byte segments: a message in pieces. The segments
/// start or end inside a message, so none is one whole message: never named, whatever the
/// framing says elsewhere; nor are pieces that straddle two answers.
#[test]
fn a_message_in_pieces_is_never_named_even_with_the_framing() {
    let (f, _) = exchange(Some(ends(16, 10, 10)), 16, 10, 10, 5);
    assert!(named(&f, S2C).is_none(), "{:?}", kinds(&f));
    // 7-byte pieces of 10-byte answers: boundaries off the segment edges.
    let (f, _) = exchange(Some(ends(16, 10, 10)), 16, 10, 10, 7);
    assert!(named(&f, S2C).is_none(), "{:?}", kinds(&f));
    // One 160-byte answer in 32 pieces of 5 bytes.
    let mut one = ConnectionEnds::new(ep(40000), ep(7000));
    one.message(C2S, 10);
    one.message(S2C, 160);
    let (f, _) = exchange(Some(one), 1, 10, 160, 5);
    assert!(named(&f, S2C).is_none(), "{:?}", kinds(&f));
}

/// Rule 6 alone names a burst of requests whose first part the server answered before the
/// rest arrived; when the framing shows those requests are pieces of larger ones, the framing
/// knows better and nothing is said.
#[test]
fn the_framing_overrules_the_ack_proof_for_pieces() {
    let run = |framing: Option<ConnectionEnds>| {
        let mut s = Sim::new();
        if let Some(c) = framing {
            s.an = Analyzer::with_driver(None, Some(Arc::new(MessageEnds::new(vec![c]))));
        }
        s.connect(40000, 0, 30, 10);
        let first = s.cseq;
        let mut t = 1_000;
        for _ in 0..16 {
            send(&mut s, C2S, t, 40);
            t += 50;
        }
        // The server's answer acknowledging the first 40 bytes only.
        let o = TcpOptions {
            timestamp: Some(((t / 1000) as u32, 0)),
            ..TcpOptions::default()
        };
        let sseq = s.sseq;
        s.raw(S2C, t + 20, sseq, first + 40, ACK | PSH, 5, o);
        s.sseq += 5;
        t = 3_000;
        for _ in 0..15 {
            send(&mut s, S2C, t, 5);
            t += 50;
        }
        s.close(t + 2_000);
        s.findings()
    };
    let f = run(None);
    assert!(named(&f, C2S).is_some(), "{:?}", kinds(&f));
    // The driver wrote 8 requests of 80 bytes: each left in two segments.
    let mut pieces = ConnectionEnds::new(ep(40000), ep(7000));
    for _ in 0..8 {
        pieces.message(C2S, 80);
        pieces.message(S2C, 10);
    }
    let f = run(Some(pieces));
    assert!(named(&f, C2S).is_none(), "{:?}", kinds(&f));
    // 16 requests of 40 bytes: the framing agrees with the ACK.
    let mut whole = ConnectionEnds::new(ep(40000), ep(7000));
    for _ in 0..16 {
        whole.message(C2S, 40);
        whole.message(S2C, 5);
    }
    let f = run(Some(whole));
    let u = named(&f, C2S).unwrap_or_else(|| panic!("named: {:?}", kinds(&f)));
    assert_eq!(u.evidence.counts["bursts_by_framing"], 1);
}

/// A handshake from port 40000 at `t` with the client's ISN `isn` (the server's 90 000).
fn connect_with_isn(s: &mut Sim, t: u64, isn: u32) {
    s.client = ep(40000);
    let opts = TcpOptions {
        mss: Some(1460),
        window_scale: Some(7),
        ..TcpOptions::default()
    };
    s.raw(C2S, t, isn, 0, TcpFlags::SYN, 0, opts);
    s.raw(S2C, t + 30, 90_000, isn + 1, TcpFlags::SYN | ACK, 0, opts);
    s.cseq = isn + 1;
    s.sseq = 90_001;
    s.raw(C2S, t + 40, s.cseq, s.sseq, ACK, 0, TcpOptions::default());
}

/// The recorded connection is the first on its endpoints: a later one reusing them (a new
/// ISN) is judged from the wire alone.
#[test]
fn a_later_connection_on_the_same_endpoints_has_no_framing() {
    let mut s = Sim::new();
    s.an = Analyzer::with_driver(
        None,
        Some(Arc::new(MessageEnds::new(vec![ends(16, 10, 5)]))),
    );
    let mut t = 0;
    for isn in [1_000, 7_000_000] {
        connect_with_isn(&mut s, t, isn);
        t += 1_000;
        send(&mut s, C2S, t, 160);
        t = (t / 1000 + 1) * 1000;
        for _ in 0..16 {
            send(&mut s, S2C, t, 5);
            t += 50;
        }
        s.close(t + 2_000);
        t += 10_000_000;
    }
    let f = s.findings();
    let u = named(&f, S2C).unwrap_or_else(|| panic!("named: {:?}", kinds(&f)));
    assert_eq!(u.flows_total, 2, "two connections");
    assert_eq!(u.flows_affected, 1, "{:#?}", u.evidence);
    assert_eq!(u.evidence.counts["bursts"], 1, "{:#?}", u.evidence);
}

/// `rounds` pipelined rounds of 16 requests, each round's answers one 5-byte segment each
/// (whole answers) or each answer in two pieces of 3 and 2 bytes, 50 µs apart.
fn rounds(framing: bool, pieces: bool, rounds: usize) -> Vec<Finding> {
    let n = 16;
    let mut s = Sim::new();
    if framing {
        let c = ends(n * rounds, 10, 5);
        s.an = Analyzer::with_driver(None, Some(Arc::new(MessageEnds::new(vec![c]))));
    }
    s.connect(40000, 0, 30, 10);
    let mut t = 1_000;
    for _ in 0..rounds {
        send(&mut s, C2S, t, n as u32 * 10);
        t += 1_000;
        for _ in 0..n {
            if pieces {
                send(&mut s, S2C, t, 3);
                t += 50;
                send(&mut s, S2C, t, 2);
            } else {
                send(&mut s, S2C, t, 5);
            }
            t += 50;
        }
        t += 5_000;
    }
    s.close(t + 2_000);
    s.findings()
}

fn fragmented(f: &[Finding]) -> bool {
    f.iter()
        .any(|f| f.kind == FindingKind::FragmentedWrites && f.direction == S2C)
}

/// fragmented_writes rule 11: turns the framing shows are whole answers, one segment each,
/// are not "one response in pieces"; answers the framing shows in pieces still are, and
/// without the framing the wire alone says pieces.
#[test]
fn whole_answers_shown_by_the_framing_are_not_fragmented_writes() {
    assert!(
        fragmented(&rounds(false, false, 6)),
        "the wire alone: small pieces"
    );
    let whole = rounds(true, false, 6);
    assert!(!fragmented(&whole), "{whole:#?}");
    let pieces = rounds(true, true, 6);
    assert!(fragmented(&pieces), "{pieces:#?}");
}
