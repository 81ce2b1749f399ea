//! `sandbox` traces the programs it runs, as an unprivileged user (issue 27):
//! - `--delay`: a real Node.js `net` client writing each request as a header and a body in two
//!   `socket.write()` calls is seen doing so — "the client wrote the request in two calls" —
//!   on the finding that blames it, with the server traced too;
//! - the plain sandbox: a CPython asyncio server writing one line per call, run with its
//!   client in one command, is seen making one send per line, never setting TCP_NODELAY.
//!
//! Each test skips where this machine cannot build the sandbox for an unprivileged user (or
//! lacks python3/node), unless CI requires it.

mod common;

use std::path::Path;

use common::live::{self, OpenDir};
use common::wan::{tcpdoctor_as, tcpdoctor_as_env};
use serde_json::Value;

fn has(program: &str, test: &str) -> bool {
    if Path::new(program).exists() {
        return true;
    }
    common::skip_unless_required(
        "TCPDOCTOR_REQUIRE_TOOLS",
        test,
        &format!("{program} is not installed"),
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

/// The report on stdout (lines the commands printed there are not JSON: skipped).
fn report(stdout: &[u8]) -> Value {
    let text = String::from_utf8_lossy(stdout);
    let start = text.find("{\n").expect("a JSON report");
    let r: Value = serde_json::from_str(&text[start..]).expect("JSON");
    common::validate(&r);
    r
}

fn program<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["syscalls"]
        .as_array()
        .expect("syscalls")
        .iter()
        .find(|p| p["program"] == name)
        .unwrap_or_else(|| panic!("the {name}'s calls: {:#}", r["syscalls"]))
}

#[test]
fn a_node_client_writing_header_and_body_apart_is_named_with_its_two_calls() {
    let test = "sandbox_trace_node_two_writes";
    if !has("/usr/bin/node", test) || !has("/usr/bin/python3", test) {
        return;
    }
    let dir = OpenDir::new("sandbox-trace-node");
    let server = format!("/usr/bin/python3 {} 7071", server_file("http_ok.py"));
    let client = format!("/usr/bin/node {} 10", server_file("node_two_writes.js"));
    let args: Vec<String> = [
        "sandbox",
        "--delay",
        "5ms",
        "--analyze",
        "--format",
        "json",
        "--server",
        &server,
        "--server-port",
        "7071",
        "--",
        &client,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let Some(out) = tcpdoctor_as(live::NOBODY, &dir, test, &args) else {
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let r = report(&out.stdout);
    let client = program(&r, "client");
    assert_eq!(client["calls"]["status"]["state"], "traced", "{client:#}");
    let sock = client["calls"]["sockets"]
        .as_array()
        .expect("sockets")
        .iter()
        .find(|s| s["remote"].is_string())
        .unwrap_or_else(|| panic!("the client's connection: {client:#}"));
    assert_eq!(
        sock["writes_per_response"]["p50"].as_f64(),
        Some(2.0),
        "{sock:#}"
    );
    assert_eq!(sock["nodelay"]["set"], false, "{sock:#}");
    assert_eq!(program(&r, "server")["calls"]["status"]["state"], "traced");
    // The finding that blames the client names its two calls.
    let named = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["direction"] == "client_to_server")
        .map(|f| f["evidence"]["facts"].to_string())
        .find(|facts| facts.contains("the client wrote the request in two calls"));
    assert!(
        named.is_some(),
        "write-write-read named: {:#}",
        r["findings"]
    );
}

#[test]
fn the_plain_sandbox_traces_its_command_and_cites_the_servers_writes() {
    let test = "sandbox_trace_plain";
    if !has("/usr/bin/python3", test) {
        return;
    }
    let dir = OpenDir::new("sandbox-trace-plain");
    // The client waits for the port, then asks 10 times, one request at a time.
    let script = format!(
        "/usr/bin/python3 {} 7072 per-line 5 & /usr/bin/python3 {} 7072 10",
        server_file("asyncio_lines.py"),
        server_file("line_client.py")
    );
    let args: Vec<String> = [
        "sandbox",
        "-w",
        "plain.pcap",
        "--analyze",
        "--format",
        "json",
        "--",
        &script,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    // The first process hands the trace over in an anonymous file, not a name in the shared
    // temporary directory (which another user could plant first): no such directory needed.
    let tmp = [("TMPDIR", "/nonexistent/tcpdoctor-no-tmp")];
    let Some(out) = tcpdoctor_as_env(live::NOBODY, &dir, test, &args, &tmp) else {
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let r = report(&out.stdout);
    let cmd = program(&r, "command");
    assert_eq!(cmd["calls"]["status"]["state"], "traced", "{cmd:#}");
    let f = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["kind"] == "nagle_delayed_ack" && f["direction"] == "server_to_client")
        .unwrap_or_else(|| panic!("the per-line server's stall: {:#}", r["findings"]));
    let facts = f["evidence"]["facts"].to_string();
    assert!(
        facts.contains("the server made 6 sendto() calls per response"),
        "{facts}"
    );
    assert!(facts.contains("never set TCP_NODELAY"), "{facts}");
    assert!(
        !f["evidence"]["writes"]
            .as_array()
            .is_none_or(|w| w.is_empty()),
        "-w wrote the capture: the quoted frames are joined to writes"
    );
}

/// An orphan the command leaves (its parent exited: it is re-parented to the sandbox's first
/// process, whose other thread traces it) keeps running: its stops are the tracer's alone.
/// Before the fix the first process's reaping `waitpid` took one of the orphan's seccomp stops
/// and nobody resumed it: the orphan stayed stopped (state `t`) and the command waited for ever.
#[test]
fn an_orphan_making_trapped_calls_is_never_left_stopped() {
    let test = "sandbox_trace_orphan";
    if !has("/usr/bin/python3", test) {
        return;
    }
    let dir = OpenDir::new("sandbox-trace-orphan");
    std::fs::write(
        dir.path("looper.py"),
        "import os\nfd = os.open('/dev/null', os.O_WRONLY)\nfor i in range(50000):\n    \
         os.write(fd, b'x')\nopen('done', 'w').close()\n",
    )
    .expect("looper.py");
    // `( … & )`: the subshell exits at once, so the looper's parent is the sandbox's PID 1.
    // The wait for it is bounded (≈ 60 s, far beyond the second or so it takes traced) so a
    // stopped orphan fails the test rather than hanging it.
    let script = "( /usr/bin/python3 looper.py & ) ; i=0; \
                  while [ ! -e done ] && [ $i -lt 3000 ]; do sleep 0.02; i=$((i+1)); done; \
                  test -e done && echo looper-finished";
    let args: Vec<String> = ["sandbox", "-w", "orphan.pcap", "--", script]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let Some(out) = tcpdoctor_as(live::NOBODY, &dir, test, &args) else {
        return;
    };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("looper-finished"),
        "the orphan never finished its 50,000 traced writes: {err}"
    );
    assert_eq!(out.status.code(), Some(0), "{err}");
}
