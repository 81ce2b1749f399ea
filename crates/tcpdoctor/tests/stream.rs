//! `tcpdoctor stream` end to end against real Python servers over kernel TCP and a Unix
//! socket (testdata/servers/stream_peer.py): the server's calls per message counted from its
//! trace, the segments from the kernel's tcp_info, and what they say asserted both ways (one
//! call per message named, a batching sender not; a reader in parts named, a bulk reader
//! not); bad input and a server that fails are clear errors, exit 2. Then `ab --stream`
//! compares the per-message sender with its batching twin.
//!
//! No timing is asserted but "B faster" of a sender that makes one call per message against
//! one that makes one per 655 (a factor of tens on any machine, and the verdict needs the
//! interval clear of 1).

mod common;

use std::sync::Mutex;

use common::ab::{figure, tcpdoctor_in};
use common::run::{free_port, scratch};
use serde_json::Value;

/// One stream at a time: two measuring at once would be each other's noise.
static SERIAL: Mutex<()> = Mutex::new(());

fn peer(where_: &str, mode: &str) -> String {
    format!(
        "python3 {} {where_} {mode}",
        common::repo()
            .join("testdata/servers/stream_peer.py")
            .display()
    )
}

/// `stream --format json ARGS` in `dir`: the report (validated), exit code, stderr.
fn stream(dir: &std::path::Path, args: &[&str]) -> (Value, i32, String) {
    let mut defaults = vec!["--format", "json", "--warmup", "0.3s"];
    if !args.contains(&"--duration") {
        defaults.extend(["--duration", "0.7s"]);
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .arg("stream")
        .args(defaults)
        .args(args)
        .current_dir(dir)
        .env("TMPDIR", dir)
        .output()
        .expect("run tcpdoctor");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    if !v.is_null() {
        common::validate_with("stream-report.schema.json", &v);
    }
    (
        v,
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn served(dir: &std::path::Path, mode: &str, extra: &[&str]) -> Value {
    let port = free_port();
    let server = peer(&port.to_string(), mode);
    let target = format!("127.0.0.1:{port}");
    let mut args = vec!["--server", &server, "--target", &target];
    args.extend_from_slice(extra);
    let (r, code, err) = stream(dir, &args);
    assert_eq!(code, 0, "{mode}: {err}");
    assert!(r["messages"].as_u64().expect("present") > 0, "{r:#}");
    r
}

fn per_call(r: &Value) -> f64 {
    r["calls"]["per_message"]
        .as_f64()
        .unwrap_or_else(|| panic!("no calls: {r:#}"))
}

#[test]
fn a_sender_with_one_call_per_message_is_named_and_its_batching_twin_is_not() {
    if !common::has_python3("a_sender_with_one_call_per_message_is_named") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = scratch("stream-senders");
    let each = served(&dir, "send-each", &[]);
    assert_eq!(each["calls"]["family"], "send");
    // Each 100-byte message is one sendall(): one send call, unless a send was cut short.
    let c = per_call(&each);
    assert!((0.95..=1.05).contains(&c), "{c}: {each:#}");
    assert_eq!(
        each["mean_message_bytes"].as_f64().map(f64::round),
        Some(100.0)
    );
    // Segments counted by the kernel: never more than the calls that made them.
    let segs = each["segments"]["data_segments"].as_u64().expect("present");
    assert!(
        segs > 0 && segs <= each["calls"]["total"].as_u64().expect("present") + 2,
        "{each:#}"
    );
    let reading = each["reading"]
        .as_str()
        .unwrap_or_else(|| panic!("{each:#}"));
    assert!(
        reading.contains("writes each message with its own call"),
        "{reading}"
    );
    assert!(each["traced"].as_bool().expect("present"));
    assert!(each["warnings"][0]
        .as_str()
        .expect("present")
        .contains("--no-trace"));

    let batched = served(&dir, "send-batched", &[]);
    let c = per_call(&batched);
    assert!(c < 0.05, "{c}: {batched:#}");
    let reading = batched["reading"].as_str().unwrap_or_default();
    assert!(reading.starts_with("the server batches"), "{batched:#}");
    assert!(!reading.contains("unbatched_messages"));
    assert!(
        batched["segments"]["per_message"]
            .as_f64()
            .expect("present")
            < each["segments"]["per_message"].as_f64().expect("present"),
        "{batched:#}\n{each:#}"
    );

    // Untraced: no calls, said why, and nothing read into the counts.
    let quiet = served(&dir, "send-each", &["--no-trace"]);
    assert!(
        quiet["calls"].is_null() && quiet["reading"].is_null(),
        "{quiet:#}"
    );
    assert_eq!(quiet["calls_unknown"], "--no-trace");
    assert!(!quiet["traced"].as_bool().expect("present"));
}

#[test]
fn a_reader_in_parts_is_named_and_a_bulk_reader_is_not() {
    if !common::has_python3("a_reader_in_parts_is_named") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = scratch("stream-readers");
    let parts = served(&dir, "read-parts", &["--direction", "to-server"]);
    assert_eq!(parts["calls"]["family"], "receive");
    assert_eq!(parts["message_bytes"], 100);
    let c = per_call(&parts);
    assert!(c >= 1.9, "{c}: {parts:#}");
    assert!(parts["segments"].is_null() && parts["segments_unknown"].is_string());
    let reading = parts["reading"]
        .as_str()
        .unwrap_or_else(|| panic!("{parts:#}"));
    assert!(reading.contains("reads each message in parts"), "{reading}");

    let bulk = served(&dir, "read-bulk", &["--direction", "to-server"]);
    let c = per_call(&bulk);
    assert!(c < 0.5, "{c}: {bulk:#}");
    let reading = bulk["reading"].as_str().unwrap_or_default();
    assert!(!reading.contains("in parts"), "{reading}");
}

#[test]
fn a_unix_socket_stream_is_counted_and_says_what_it_cannot_show() {
    if !common::has_python3("a_unix_socket_stream_is_counted") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = scratch("stream-unix");
    let path = dir.join("feed.sock");
    let server = peer(path.to_str().expect("present"), "send-batched");
    let target = format!("unix:{}", path.display());
    let (r, code, err) = stream(&dir, &["--server", &server, "--target", &target]);
    assert_eq!(code, 0, "{err}");
    assert!(r["messages"].as_u64().expect("present") > 0, "{r:#}");
    assert_eq!(r["segments_unknown"], "a Unix socket has no segments");
    assert!(
        r["calls_unknown"]
            .as_str()
            .expect("present")
            .contains("Unix socket"),
        "{r:#}"
    );
}

#[test]
fn bad_input_and_failing_servers_are_clear_errors() {
    let dir = scratch("stream-bad");
    let d: &std::path::Path = &dir;
    for (args, says) in [
        (
            vec!["--target", ":1", "--framing", "u24"],
            "--framing u24: unknown framing",
        ),
        (
            vec!["--target", ":1", "--size", "64"],
            "--size: from the server",
        ),
        (
            vec![
                "--target",
                ":1",
                "--direction",
                "to-server",
                "--framing",
                "u8",
                "--size",
                "1k",
            ],
            "at most 255",
        ),
        (
            vec!["--target", ":1", "--hello", "a\\q"],
            "--hello: character 2",
        ),
        (vec!["--target", ":1", "--duration", "0s"], "--duration 0s"),
        (
            vec!["--target", "unix:/nonexistent-dir/x.sock"],
            "no directory /nonexistent-dir",
        ),
        (vec!["--target", ":1", "--server", "exit 3"], "exit"),
    ] {
        let (r, code, err) = stream(d, &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(r.is_null(), "{args:?}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    if !common::has_python3("bad_input_and_failing_servers_are_clear_errors") {
        return;
    }
    // A stream not in the framing: the prefix's stream byte is named. (The first connection
    // accepted is the readiness probe.)
    let port = free_port();
    let liar = format!(
        "python3 -c 'import socket; l = socket.create_server((\"127.0.0.1\", {port})); \
         cs = [l.accept()[0] for _ in range(2)]; cs[1].sendall(b\"\\xff\" * 64); cs[1].recv(1)'"
    );
    let target = format!("127.0.0.1:{port}");
    let (_, code, err) = stream(d, &["--server", &liar, "--target", &target, "--no-trace"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("prefix at stream byte 0 announces 4294967295 bytes"),
        "{err}"
    );
    // A server that exits mid-stream: said, with its status and its last words.
    let port = free_port();
    let quitter = format!(
        "python3 -c 'import socket, sys; l = socket.create_server((\"127.0.0.1\", {port})); \
         cs = [l.accept()[0] for _ in range(2)]; cs[1].sendall(b\"\\0\\0\\0\\1x\" * 9); \
         print(\"giving up\"); sys.exit(3)'"
    );
    let target = format!("127.0.0.1:{port}");
    let (_, code, err) = stream(
        d,
        &["--server", &quitter, "--target", &target, "--no-trace"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the server closed the stream"), "{err}");
    assert!(err.contains("the server exited (exit status: 3)"), "{err}");
    assert!(err.contains("| giving up"), "{err}");
    // A server that sends nothing: nothing measured is an error, not a rate of zero.
    let port = free_port();
    let mute = format!(
        "python3 -c 'import socket; l = socket.create_server((\"127.0.0.1\", {port})); \
         cs = [l.accept()[0] for _ in range(2)]; cs[1].recv(1)'"
    );
    let target = format!("127.0.0.1:{port}");
    let (r, code, err) = stream(d, &["--server", &mute, "--target", &target, "--no-trace"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no whole message was counted"), "{err}");
    assert_eq!(r["messages"], 0, "{r:#}");
}

#[test]
fn ab_stream_finds_the_batching_sender_faster_and_says_why() {
    if !common::has_python3("ab_stream_finds_the_batching_sender_faster") {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = scratch("ab-stream");
    let port = free_port();
    let (a, b) = (
        peer(&port.to_string(), "send-each"),
        peer(&port.to_string(), "send-batched"),
    );
    let target = format!("127.0.0.1:{port}");
    let out = &*dir.join("ab");
    let (r, code, err) = tcpdoctor_in(
        &dir,
        &[
            "ab",
            "--format",
            "json",
            "--stream",
            "from-server",
            "--server-a",
            &a,
            "--server-b",
            &b,
            "--target",
            &target,
            "--rounds",
            "4",
            "--warmup",
            "0",
            "--duration",
            "0.5s",
            "--stream-warmup",
            "0.2s",
            "--fail-if-slower",
            "--out",
            out.to_str().expect("present"),
        ],
    );
    assert_eq!(code, 0, "{err}\n{r:#}");
    assert_eq!(r["settings"]["mode"], "stream");
    let rate = figure(&r, "messages/s");
    assert_eq!(rate["verdict"], "faster", "{rate:#}");
    assert!(rate["ci"][0].as_f64().expect("present") > 1.0, "{rate:#}");
    assert_eq!(r["result"], "passed");
    let st = &r["stream"];
    assert!(
        st["a"]["reading"]
            .as_str()
            .expect("present")
            .contains("its own call"),
        "{st:#}"
    );
    assert!(
        st["b"]["reading"]
            .as_str()
            .expect("present")
            .contains("batches"),
        "{st:#}"
    );
    let diffs = st["differences"].as_array().expect("present");
    assert!(
        diffs
            .iter()
            .any(|d| d.as_str().expect("present").starts_with("A makes")
                && d.as_str()
                    .expect("present")
                    .contains("send calls per message of B")),
        "{st:#}"
    );
    // The same comparison the other way round is B slower, and the gate fails.
    let (r, code, _) = tcpdoctor_in(
        &dir,
        &[
            "ab",
            "--format",
            "json",
            "--stream",
            "from-server",
            "--server-a",
            &b,
            "--server-b",
            &a,
            "--target",
            &target,
            "--rounds",
            "3",
            "--warmup",
            "0",
            "--duration",
            "0.5s",
            "--stream-warmup",
            "0.2s",
            "--fail-if-slower",
            "--out",
            out.to_str().expect("present"),
        ],
    );
    assert_eq!(code, 1, "{r:#}");
    assert_eq!(figure(&r, "messages/s")["verdict"], "slower");
    // Conversation flags do not go with a stream.
    let (_, code, err) = tcpdoctor_in(
        &dir,
        &[
            "ab",
            "--stream",
            "to-server",
            "--server-a",
            &a,
            "--server-b",
            &b,
            "--target",
            &target,
            "--preset",
            "line",
        ],
    );
    assert_eq!(code, 2);
    assert!(err.contains("--preset drives a conversation"), "{err}");
}
