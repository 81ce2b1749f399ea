//! `sandbox --delay … --analyze`, and a server whose port is not given, as an unprivileged
//! user across a real WAN path (two namespaces, the delay line, real kernel TCP):
//! - without `--server-port` the command starts only once the server listens (a server that
//!   takes its time to listen is not raced: before, the client was refused and the captures
//!   held a SYN and a reset), and learns the port from `$TCPDOCTOR_SERVER`;
//! - `--analyze` analyses both ends as `analyze --ends` does: the per-line Nagle server is
//!   named `nagle_delayed_ack`, its coalesced twin is not; without -w the captures are removed;
//! - a client that could not connect is said (exit 1), never "No findings"; a server that
//!   ends before it listens is exit 2, naming it.
//!
//! Each test skips (saying why) where this machine cannot build the path for an unprivileged
//! user, unless `TCPDOCTOR_REQUIRE_WAN=1`, where it fails.

mod common;

use std::path::Path;
use std::process::Output;

use common::live::{self, OpenDir};
use common::wan::{exchange, tcpdoctor_as};
use serde_json::Value;

fn sandbox(dir: &OpenDir, test: &str, server: &str, client: &str) -> Option<Output> {
    let args: Vec<String> = [
        "sandbox",
        "--delay",
        "5ms",
        "--analyze",
        "--format",
        "json",
        "--server",
        server,
        "--",
        client,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    tcpdoctor_as(live::NOBODY, dir, test, &args)
}

fn text(out: &Output) -> (String, String, i32) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.code().unwrap_or(-1),
    )
}

fn nagle_named(r: &Value) -> usize {
    r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == "nagle_delayed_ack")
        .count()
}

#[test]
fn a_server_slow_to_listen_is_waited_for_and_both_ends_are_analysed() {
    let dir = OpenDir::new("wan-analyze");
    let ex = exchange(&dir);
    for (coalesce, named) in [("", true), (" coalesce", false)] {
        let test = format!("sandbox --delay --analyze, server{coalesce}");
        // The server listens half a second after it starts: a client started at once would
        // be refused. No --server-port: the port is read from the far namespace.
        let server = format!("sleep 0.5; exec {ex} serve 127.0.0.1:7070{coalesce}");
        let client = format!("{ex} client \"$TCPDOCTOR_SERVER\" 8 > client.txt");
        let Some(out) = sandbox(&dir, &test, &server, &client) else {
            return;
        };
        let (stdout, stderr, code) = text(&out);
        assert_eq!(code, 0, "{test}: {stderr}");
        assert!(
            stderr.contains("the server listens on port 7070"),
            "{test}: {stderr}"
        );
        let said = std::fs::read_to_string(dir.path("client.txt")).expect("client output");
        assert!(
            said.starts_with("sent_bytes="),
            "{test}: the client: {said}"
        );
        let r: Value = serde_json::from_str(&stdout).expect("JSON");
        common::validate(&r);
        let captures = r["captures"].as_array().expect("captures");
        assert_eq!(captures.len(), 2, "both ends");
        for c in captures {
            assert_eq!(c["exchanges"], 8, "{test}: {c}");
        }
        assert!(r["ends"].is_object(), "the two ends compared: {r}");
        // Per-line writes with Nagle on: named at both ends; the coalesced twin: at neither.
        let n = nagle_named(&r);
        assert_eq!(
            n,
            if named { 2 } else { 0 },
            "{test}: nagle_delayed_ack findings"
        );
        // Without -w the captures were in a directory of the run, removed after.
        let file = captures[0]["file"].as_str().expect("file");
        let scratch = Path::new(file).parent().expect("dir");
        assert!(
            scratch.starts_with(std::env::temp_dir()) && !scratch.exists(),
            "{} left behind",
            scratch.display()
        );
    }
}

#[test]
fn a_client_that_cannot_connect_is_said_not_called_healthy() {
    let dir = OpenDir::new("wan-refused");
    let ex = exchange(&dir);
    let test = "sandbox --delay --analyze, client to the wrong port";
    // The client knocks once on a port nothing listens on (tcpdoctor's own driver: refused,
    // exit 2), and the command ends with status 0.
    let client = &format!(
        "{} bench --target 198.18.0.1:7071 --preset echo --requests 1 >/dev/null 2>&1; true",
        env!("CARGO_BIN_EXE_tcpdoctor")
    );
    let Some(out) = sandbox(
        &dir,
        test,
        &format!("exec {ex} serve 127.0.0.1:7070"),
        client,
    ) else {
        return;
    };
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stderr.contains("no data crossed the path"), "{stderr}");
    assert!(stderr.contains("--server-port"), "{stderr}");
    assert!(!stdout.contains("No findings"), "{stdout}");

    // Text: the analysis says there was nothing to judge.
    let args: Vec<String> = [
        "sandbox",
        "--delay",
        "5ms",
        "--analyze",
        "--server",
        &format!("exec {ex} serve 127.0.0.1:7070"),
        "--",
        client,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let Some(out) = tcpdoctor_as(live::NOBODY, &dir, test, &args) else {
        return;
    };
    let (stdout, stderr, code) = text(&out);
    assert_eq!(code, 1, "{stdout}{stderr}");
    assert!(stdout.contains("Nothing to judge"), "{stdout}");
    assert!(!stdout.contains("No findings"), "{stdout}");
}

#[test]
fn a_server_that_ends_before_it_listens_is_named() {
    let dir = OpenDir::new("wan-noserver");
    let test = "sandbox --delay, a server that exits at once";
    let args: Vec<String> = [
        "sandbox", "--delay", "5ms", "--server", "exit 3", "--", "true",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let Some(out) = tcpdoctor_as(live::NOBODY, &dir, test, &args) else {
        return;
    };
    let (_, stderr, code) = text(&out);
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("the server exited (exit status: 3) before it listened on any port"),
        "{stderr}"
    );
}
