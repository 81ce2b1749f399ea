//! `unbatched_messages` by the script's framing (its rule 6′) on real kernel TCP: `tcpdoctor
//! run` drives `testdata/servers/answer_lines.py` (CPython asyncio, TCP_NODELAY on) with the
//! `line` preset pipelining 16 requests, captured live on lo in the direct scenario.
//! - `per-message` (one `transport.write()` per answer): the answers to one read leave one
//!   5-byte segment each. On loopback the driver usually acknowledges none of them before the
//!   burst is whole, so the wire alone cannot tell them from one answer in pieces (`analyze`
//!   of the same capture names nothing); the driver's framing can, and `run` names them
//!   server→client, quoting the frames — which the test opens in the capture: data segments
//!   of that flow from the server, 5 bytes each, at the stream offsets of the responses the
//!   finding numbers.
//!   When the client happens to send a request having received only part of a burst (a loaded
//!   machine), `analyze` may name it by the wire (rule 6); its proof frame is checked too.
//! - `batched` (one write per read): not named.
//!
//! Skips (saying why) without root (live capture) or python3, unless CI requires them.

mod common;

use std::path::Path;

use common::run::{live_capture_possible, scenario, scratch, tcpdoctor_in};
use serde_json::Value;
use tcpdoctor_core::wire::{decode_tcp, CaptureReader, Decoded, TcpSegment};

/// Bytes of one answer: `+OK\r\n`.
const ANSWER: u32 = 5;

fn runnable(test: &str) -> bool {
    if !live_capture_possible() {
        common::live::skip(test, "live capture on lo needs root");
        return false;
    }
    common::has_python3(test)
}

/// `run --scenarios direct` against `answer_lines.py PORT MODE`, pipelining 16 requests: the
/// direct scenario's report, and the directory holding its capture.
fn run_answer_lines(test: &str, mode: &str, attempt: u32) -> (common::Scratch, Value) {
    let dir = scratch(&format!("{test}-{attempt}"));
    let port = common::run::free_port();
    let server = format!(
        "python3 {} {port} {mode}",
        common::repo()
            .join("testdata/servers/answer_lines.py")
            .display()
    );
    let target = format!("127.0.0.1:{port}");
    let out = dir.join("files");
    let (r, code, err) = tcpdoctor_in(
        &dir,
        &[
            "run",
            "--format",
            "json",
            "--server",
            &server,
            "--target",
            &target,
            "--preset",
            "line",
            "--param",
            "request=GET {i}",
            "--param",
            "terminator=\\n",
            "--pipeline",
            "16",
            "--requests",
            "400",
            "--scenarios",
            "direct",
            "--out",
            out.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let s = scenario(&r, "direct").clone();
    assert_eq!(s["figures"]["errors"], 0, "{s:#}");
    (dir, s)
}

fn unbatched(s: &Value, dir: &str) -> Option<Value> {
    finding(s, "unbatched_messages", dir)
}

fn finding(s: &Value, kind: &str, dir: &str) -> Option<Value> {
    s["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["kind"] == kind && f["direction"] == dir)
        .cloned()
}

/// The TCP segments of a capture, by frame number.
fn segments(file: &Path) -> Vec<(u64, TcpSegment)> {
    let f = std::fs::File::open(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let mut r = CaptureReader::new(f).expect("a capture");
    let mut v = Vec::new();
    while let Some(fr) = r.next_frame().expect("readable") {
        if let Decoded::Tcp(s, _) = decode_tcp(fr.link, fr.data, fr.orig_len) {
            v.push((fr.number, s));
        }
    }
    v
}

/// `"frames 41–56"` and `"responses 17–32"` out of the framing fact.
fn range_after(fact: &str, word: &str) -> (u64, u64) {
    let at = fact
        .find(word)
        .unwrap_or_else(|| panic!("no {word:?} in {fact}"))
        + word.len();
    let rest = &fact[at..];
    let end = rest
        .find(|c: char| !c.is_ascii_digit() && c != '–')
        .expect("a range");
    let (a, b) = rest[..end].split_once('–').expect("a range");
    (a.parse().expect("a number"), b.parse().expect("a number"))
}

/// The frames the finding quotes are the server's 5-byte answers on its example flow, at the
/// stream offsets of the responses it numbers.
fn check_frames(s: &Value, f: &Value) {
    let fact = f["evidence"]["facts"]
        .as_array()
        .expect("facts")
        .iter()
        .filter_map(Value::as_str)
        .find(|x| x.starts_with("the script's framing: "))
        .unwrap_or_else(|| panic!("no framing fact: {f:#}"));
    let (first, last) = range_after(fact, "frames ");
    let (m0, m1) = range_after(fact, "(responses ");
    assert!(
        fact.contains("each carry exactly one whole response"),
        "{fact}"
    );
    assert!(m1 > m0 && m1 - m0 + 1 >= 8, "{fact}");
    let file = s["capture"]["file"].as_str().expect("a capture file");
    let client = f["example_flow"]["client"].as_str().expect("client");
    let server = f["example_flow"]["server"].as_str().expect("server");
    let segs = segments(Path::new(file));
    let isn = segs
        .iter()
        .find(|(_, g)| {
            g.flags.syn()
                && g.flags.ack()
                && g.src.to_string() == server
                && g.dst.to_string() == client
        })
        .map(|(_, g)| g.seq)
        .expect("the server's SYN-ACK on the example flow");
    let answers: Vec<&(u64, TcpSegment)> = segs
        .iter()
        .filter(|(n, g)| {
            (first..=last).contains(n)
                && g.payload_len > 0
                && g.src.to_string() == server
                && g.dst.to_string() == client
        })
        .collect();
    assert_eq!(answers.len() as u64, m1 - m0 + 1, "{fact}");
    for (i, (n, g)) in answers.iter().enumerate() {
        assert_eq!(g.payload_len, ANSWER, "frame {n}");
        let offset = g.seq.wrapping_sub(isn).wrapping_sub(1);
        assert_eq!(
            u64::from(offset),
            (m0 - 1 + i as u64) * u64::from(ANSWER),
            "frame {n} is response {}",
            m0 + i as u64
        );
    }
    for n in f["evidence"]["frames"].as_array().expect("frames") {
        let n = n.as_u64().expect("a frame");
        assert!(
            answers.iter().any(|(m, _)| *m == n),
            "frame {n} not in {fact}"
        );
    }
}

/// A finding by the wire alone quotes a frame of the peer's data whose ACK number lies
/// strictly inside the burst's bytes: check that frame in the capture.
fn check_wire_proof(file: &Path, f: &Value) {
    let fact = f["evidence"]["facts"]
        .as_array()
        .expect("facts")
        .iter()
        .filter_map(Value::as_str)
        .find(|x| x.contains("carrying an ACK number"))
        .unwrap_or_else(|| panic!("named by the wire without rule 6's proof: {f:#}"));
    let number = |after: &str| -> u32 {
        let at = fact
            .find(after)
            .unwrap_or_else(|| panic!("{after:?} in {fact}"))
            + after.len();
        let digits: String = fact[at..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == ',')
            .filter(char::is_ascii_digit)
            .collect();
        digits
            .parse()
            .unwrap_or_else(|_| panic!("a number after {after:?} in {fact}"))
    };
    let proof = u64::from(number("frame "));
    let into = number("ACK number ");
    let whole = number("into this burst's ");
    assert!(into > 0 && into < whole, "{fact}");
    let first = f["evidence"]["frames"][0].as_u64().expect("a burst frame");
    let segs = segments(file);
    let at = |n: u64| {
        &segs
            .iter()
            .find(|(m, _)| *m == n)
            .unwrap_or_else(|| panic!("frame {n} is not TCP in {}", file.display()))
            .1
    };
    let (burst, peer) = (at(first), at(proof));
    assert!(peer.payload_len > 0, "frame {proof} carries data: {fact}");
    assert_eq!((peer.src, peer.dst), (burst.dst, burst.src), "{fact}");
    assert!(peer.flags.ack(), "{fact}");
    assert_eq!(
        peer.ack.wrapping_sub(burst.seq),
        into,
        "frame {proof}: {fact}"
    );
}

#[test]
fn one_write_per_answer_is_named_by_the_scripts_framing_and_batched_is_not() {
    let test = "one_write_per_answer_is_named_by_the_scripts_framing_and_batched_is_not";
    if !runnable(test) {
        return;
    }
    // A burst needs its 16 answers within one tick of the server's clock and no request
    // arriving among them; a loaded machine can spoil every round of a run: a few runs.
    let mut seen = None;
    for attempt in 0..4 {
        let (dir, s) = run_answer_lines(test, "per-message", attempt);
        if let Some(f) = unbatched(&s, "server_to_client") {
            seen = Some((dir, s, f));
            break;
        }
        eprintln!("attempt {attempt}: not named: {:?}", common::run::kinds(&s));
    }
    let (_dir, s, f) = seen.expect("unbatched_messages server→client in one of 4 runs");
    assert!(
        f["verdict"]
            .as_str()
            .expect("verdict")
            .contains("the script's framing shows each segment carried exactly one whole response"),
        "{f:#}"
    );
    assert!(
        f["evidence"]["counts"]["bursts_by_framing"].as_u64() >= Some(1),
        "{f:#}"
    );
    check_frames(&s, &f);
    // The same answers are never also "one response written in pieces": the framing shows
    // every turn of them is whole answers, one segment each (fragmented_writes rule 11).
    assert!(
        finding(&s, "fragmented_writes", "server_to_client").is_none(),
        "{:#}",
        s["findings"]
    );
    // The driver writes its pipelined requests together: never a burst of requests.
    assert!(unbatched(&s, "client_to_server").is_none(), "{s:#}");
    // The wire alone cannot tell a burst answered after it was whole from one answer in
    // pieces; it names one only when the client sent data acknowledging part of it (rule 6),
    // which a loaded machine can make happen on loopback too. Whatever it names must carry
    // that proof, true in the capture.
    let file = s["capture"]["file"].as_str().expect("a capture file");
    let (plain, _) = common::analyze_json(Path::new(file));
    for f in plain["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == "unbatched_messages")
    {
        check_wire_proof(Path::new(file), f);
    }

    let (_dir, s) = run_answer_lines(test, "batched", 0);
    assert!(unbatched(&s, "server_to_client").is_none(), "{s:#}");
    assert!(unbatched(&s, "client_to_server").is_none(), "{s:#}");
}
