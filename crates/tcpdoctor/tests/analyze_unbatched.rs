//! `unbatched_messages` on real kernel TCP: a CPython asyncio client sends small independent
//! requests (40-byte lines), pipelined, each with its own `transport.write()` and TCP_NODELAY
//! on, to an asyncio server that answers each line (`+OK\r\n`), captured by
//! `tcpdoctor sandbox -w` (as an unprivileged user) and read back with `analyze --format json`:
//! - over a 5 ms path, 20 rounds of 16 requests, each round's first request 400 µs ahead of
//!   the others: the server answers it before the rest reach it, so its answer's ACK number
//!   falls inside the round's burst — at least two messages — and the client's requests are
//!   named (client→server), quoting that frame; the server's answers only with such a frame
//!   of the client's quoted (a next round's request leaving while they came in);
//! - on loopback, 200 requests at once: the server usually answers only after they have
//!   arrived, which on the wire is one message in pieces answered in pieces: not named; on a
//!   loaded machine the two interleave, and either direction is named only with the frame
//!   whose ACK falls inside a burst quoted;
//! - the batched twin (one `writelines()` for the requests, one write per read for the
//!   answers): not named in either direction;
//! - the per-message client against the batching server: the server's answers are not named.
//!
//! The sandbox runs untraced (`--no-trace`): a traced client's every send stops for the
//! tracer, the server answers each request before the next leaves, and the capture can no
//! longer show that the client pipelines (see docs/unbatched_messages.md).
//!
//! Skips (saying why) without python3 or where this machine cannot build the sandbox for an
//! unprivileged user, unless CI requires them.

mod common;

use std::path::Path;

use common::live::{self, OpenDir};
use common::wan::{self, tcpdoctor_as};
use serde_json::Value;

const PYTHON: &str = "/usr/bin/python3";

fn has_python(test: &str) -> bool {
    if Path::new(PYTHON).exists() {
        return common::has_python3(test);
    }
    common::skip_unless_required(
        "TCPDOCTOR_REQUIRE_TOOLS",
        test,
        &format!("{PYTHON} is not installed"),
    );
    false
}

fn server_file(name: &str) -> String {
    common::repo()
        .join("testdata/servers")
        .join(name)
        .display()
        .to_string()
}

/// Captures the client (`client_args`) against the server in `mode` and analyses the capture.
fn capture(dir: &OpenDir, test: &str, mode: &str, client_args: &str) -> Option<Value> {
    let file = format!("{}.pcap", test);
    let script = format!(
        "{PYTHON} {} 7070 {mode} & {PYTHON} {} 127.0.0.1:7070 {client_args}; kill $!",
        server_file("answer_lines.py"),
        server_file("unbatched_client.py")
    );
    let args: Vec<String> = ["sandbox", "--no-trace", "-w", &file, "--", &script]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let out = tcpdoctor_as(live::NOBODY, dir, test, &args)?;
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{test}: {err}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("sent=200 answers=200"), "{test}: {said}{err}");
    let (report, _) = common::analyze_json(&dir.path(&file));
    Some(report)
}

fn unbatched<'a>(r: &'a Value, dir: &str) -> Option<&'a Value> {
    r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["kind"] == "unbatched_messages" && f["direction"] == dir)
}

#[test]
fn a_burst_the_server_began_answering_before_it_arrived_is_named() {
    let test = "analyze_unbatched_proven";
    if !has_python(test) {
        return;
    }
    let dir = OpenDir::new("unbatched-proven");
    let server = format!(
        "{PYTHON} {} 7070 per-message",
        server_file("answer_lines.py")
    );
    let client = format!(
        "{PYTHON} {} 198.18.0.1:7070 --rounds 20 --count 16 --lead-us 400",
        server_file("unbatched_client.py")
    );
    let path = ["--no-trace", "--delay", "5ms", "-w", "proven.pcapng"];
    let Some(out) = wan::sandbox(&dir, test, &path, &server, &client) else {
        return;
    };
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("sent=320 answers=320"), "{test}: {said}");
    let (r, _) = common::analyze_json(&dir.path("proven.pcapng"));
    let f = unbatched(&r, "client_to_server")
        .unwrap_or_else(|| panic!("the client's requests: {:#}", r["findings"]));
    let ev = &f["evidence"];
    let counts = &ev["counts"];
    let n = |k: &str| {
        counts[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {counts}"))
    };
    assert!(n("segments") >= 8, "{counts}");
    assert!(n("extra_packets") >= 7, "{counts}");
    assert!(n("segments_if_batched") < n("segments"), "{counts}");
    assert_eq!(n("header_bytes"), n("extra_packets") * 52, "{counts}");
    // The frames quoted are the burst's: each one 40-byte request, client to server.
    let frames = ev["frames"].as_array().expect("frames");
    assert!(frames.len() >= 8, "{ev:#}");
    let timeline = ev["timeline"].as_array().expect("timeline");
    for (entry, frame) in timeline.iter().zip(frames) {
        assert_eq!(&entry["frame"], frame);
        assert_eq!(entry["direction"], "client_to_server");
        assert_eq!(entry["payload_bytes"], 40, "{entry}");
    }
    let facts = ev["facts"].to_string();
    // Ready together by the wire, and at least two messages by the server's answer to the
    // first request, which left before the other 15 had reached it.
    assert!(facts.contains("every one carrying ACK number"), "{facts}");
    assert!(
        facts.contains("carrying an ACK number 40 bytes into"),
        "{facts}"
    );
    assert!(
        f["fix"].as_str().unwrap_or("").contains("writelines"),
        "{f:#}"
    );
    // The answers: named only where the client's data acknowledged a part of a burst of them
    // (a next round's request leaving while they came in), and then with that frame quoted.
    if let Some(f) = unbatched(&r, "server_to_client") {
        let facts = f["evidence"]["facts"].to_string();
        assert!(
            facts.contains("bytes into this burst"),
            "the answers: {facts}"
        );
    }
}

#[test]
fn a_burst_answered_after_it_arrived_is_not_named_nor_its_batched_twin() {
    let test = "analyze_unbatched_client";
    if !has_python(test) {
        return;
    }
    let dir = OpenDir::new("unbatched");
    let Some(r) = capture(&dir, "unbatched-per-message", "per-message", "") else {
        return;
    };
    // Usually every answer leaves after all (or nearly all) requests have arrived, and the
    // client sends nothing while they come: the same wire as one message in pieces answered
    // in pieces, not named. On a loaded machine the two interleave, and then the peer's data
    // proves a burst held two messages: named, either way, only with that proof quoted.
    for direction in ["client_to_server", "server_to_client"] {
        if let Some(f) = unbatched(&r, direction) {
            let facts = f["evidence"]["facts"].to_string();
            assert!(
                facts.contains("bytes into this burst"),
                "{direction}: {facts}"
            );
        }
    }

    let Some(r) = capture(&dir, "unbatched-batched", "batched", "--batched") else {
        return;
    };
    let named: Vec<&Value> = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == "unbatched_messages")
        .collect();
    assert!(named.is_empty(), "the batched twin: {named:#?}");
}

#[test]
fn a_server_answering_each_read_with_one_write_is_not_named() {
    let test = "analyze_unbatched_batching_server";
    if !has_python(test) {
        return;
    }
    let dir = OpenDir::new("unbatched-server");
    let Some(r) = capture(&dir, "unbatched-server-batched", "batched", "") else {
        return;
    };
    assert!(
        unbatched(&r, "server_to_client").is_none(),
        "the batching server: {:#}",
        r["findings"]
    );
}
