//! `unbatched_messages` on real kernel TCP: a CPython asyncio client sends 200 small
//! independent requests (40-byte lines), pipelined, each with its own `transport.write()`
//! and TCP_NODELAY on, to an asyncio server that answers each line (`+OK\r\n`), captured by
//! `tcpdoctor sandbox -w` (a private loopback, as an unprivileged user) and read back with
//! `analyze --format json`:
//! - the per-message pair: the client's requests are named (client→server), with the frames
//!   of a burst, each a 40-byte request; the server's answers, one write each, are named too;
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
use common::wan::tcpdoctor_as;
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
fn a_client_writing_each_small_message_alone_is_named_and_its_batched_twin_is_not() {
    let test = "analyze_unbatched_client";
    if !has_python(test) {
        return;
    }
    let dir = OpenDir::new("unbatched");
    let Some(r) = capture(&dir, "unbatched-per-message", "per-message", "") else {
        return;
    };
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
    assert!(facts.contains("200 requests"), "{facts}");
    assert!(facts.contains("200 answers"), "{facts}");
    // Ready together by the wire: every request of the burst carries one ACK number.
    assert!(facts.contains("every one carrying ACK number"), "{facts}");
    assert!(
        f["fix"].as_str().unwrap_or("").contains("writelines"),
        "{f:#}"
    );
    // The server writes each answer alone too, with the requests already acknowledged.
    let s = unbatched(&r, "server_to_client")
        .unwrap_or_else(|| panic!("the per-message server's answers: {:#}", r["findings"]));
    let verdict = s["verdict"].as_str().unwrap_or("");
    assert!(
        verdict.contains("already been acknowledged by the server"),
        "{verdict}"
    );

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
