//! Issue 26, "blame the element that held the bytes" and "headlines that never contradict
//! their own facts", end to end: `tcpdoctor run` starts real CPython servers, puts its own hop
//! in front of them, captures both legs live on `lo` (root) and diagnoses. Each verdict is
//! asserted both ways: the element that held the bytes is named, the one that forwarded them
//! at once is not.

mod common;

use std::process::Command;

use common::run::{live_capture_possible, scenario, scratch, tcpdoctor_in};
use common::{repo, skip_unless_required};
use serde_json::Value;

/// The `line` preset for the Python specimens: `LIST`, CRLF, a reply ended by a `.` line.
const LINE: &[&str] = &[
    "--preset",
    "line",
    "--param",
    "request=LIST",
    "--param",
    "terminator=\\r\\n",
    "--param",
    "until_line=^\\.\\r?$",
];

/// Whether the test can run here: live capture (root) and python3. Says why when it cannot.
fn runnable(test: &str) -> bool {
    if !live_capture_possible() {
        common::live::skip(test, "live capture on lo needs root");
        return false;
    }
    if Command::new("python3").arg("--version").output().is_err() {
        skip_unless_required("TCPDOCTOR_REQUIRE_TOOLS", test, "python3 is not installed");
        return false;
    }
    true
}

/// `run --scenarios SCENARIO` against `python3 specimens/SCRIPT --port P ARGS`; the report and
/// the server's port.
fn run_python(test: &str, script: &str, args: &str, scenario_name: &str) -> (Value, u16) {
    let dir = scratch(test);
    let port = common::run::free_port();
    let server = format!(
        "python3 {} --port {port} {args}",
        repo().join("specimens").join(script).display()
    );
    let target = format!("127.0.0.1:{port}");
    let out = dir.join("files");
    let mut argv = vec![
        "run",
        "--format",
        "json",
        "--server",
        &server,
        "--target",
        &target,
        "--requests",
        "40",
        "--scenarios",
        scenario_name,
        "--out",
        out.to_str().expect("utf-8 path"),
    ];
    argv.extend_from_slice(LINE);
    let (r, code, err) = tcpdoctor_in(&dir, &argv);
    assert_eq!(code, 0, "no gate asked for: exit 0; stderr: {err}");
    let sc = scenario(&r, scenario_name);
    assert!(
        sc["capture"]["source"]
            .as_str()
            .is_some_and(|s| s.starts_with("AF_PACKET on lo")),
        "the live capture holds both legs: {}",
        sc["capture"]
    );
    let _ = std::fs::remove_dir_all(&dir);
    (r, port)
}

/// The Nagle-kind findings about data sent from `port` (server→client), and those about data
/// sent from any other port (the hop's listening port in a proxy scenario).
fn nagle_findings(sc: &Value, port: u16) -> (Vec<&Value>, Vec<&Value>) {
    let kinds = ["nagle_delayed_ack", "nagle_round_trip", "fragmented_writes"];
    let all: Vec<&Value> = sc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| kinds.iter().any(|k| f["kind"] == *k) && f["direction"] == "server_to_client")
        .collect();
    let suffix = format!(":{port}");
    all.into_iter()
        .partition(|f| f["server"].as_str().is_some_and(|s| s.ends_with(&suffix)))
}

fn of_kind<'a>(fs: &[&'a Value], kind: &str) -> Option<&'a Value> {
    fs.iter().copied().find(|f| f["kind"] == kind)
}

/// A CPython asyncio per-line server with its own Nagle on (TCP_NODELAY cleared again) behind
/// the transparent hop (`proxy`: Nagle off on both of the hop's legs): the server's leg shows
/// the stall, the hop forwards every piece at once. The server is named; no finding names the
/// hop, and the server's finding says the hop forwarded the pieces promptly, with the figure.
#[test]
fn a_transparent_hop_passes_the_servers_nagle_stall_on_and_is_not_named() {
    let test = "a_transparent_hop_passes_the_servers_nagle_stall_on_and_is_not_named";
    if !runnable(test) {
        return;
    }
    let (r, port) = run_python(
        test,
        "aio_lineserver.py",
        "--nagle on --max-conns 1000 --idle-timeout 60",
        "proxy",
    );
    let sc = scenario(&r, "proxy");
    let (server, hop) = nagle_findings(sc, port);
    let stall = of_kind(&server, "nagle_delayed_ack")
        .unwrap_or_else(|| panic!("the server's own Nagle stall is named: {sc:#}"));
    let verdict = stall["verdict"].as_str().expect("verdict");
    assert!(verdict.contains("Nagle's algorithm holds"), "{verdict}");
    let facts = stall["evidence"]["facts"].to_string();
    assert!(
        facts.contains("accepted sockets have TCP_NODELAY off"),
        "run read the server's sockets: {facts}"
    );
    assert!(
        (facts.contains("which forwarded the first and last bytes of every one of the ")
            || facts.contains("too few to account for the holds"))
            && facts.contains("the hop passes these holds on, it does not cause them"),
        "the server's finding says the hop forwarded at once: {facts}"
    );
    assert!(
        hop.is_empty(),
        "no Nagle-kind finding about the hop's leg: {:#?}",
        hop
    );
    for f in sc["findings"].as_array().expect("findings") {
        let text = format!("{} {}", f["verdict"], f["fix"]);
        assert!(
            !text.contains("TCP_NODELAY on the hop")
                && !text.contains("TCP_NODELAY on its client")
                && !text.contains("TCP_NODELAY on that hop"),
            "nothing tells the user to fix the hop: {text}"
        );
    }
}

/// The same asyncio server with TCP_NODELAY (asyncio's default) behind `proxy-nagle` (Nagle
/// on the hop's socket towards the driver): the server's leg carries every line at once, the
/// hop keeps the lines after the first until the driver's delayed ACK. The hop is named, with
/// the lag it kept them; no Nagle finding names the server.
#[test]
fn a_hop_with_nagle_on_is_named_and_the_nodelay_server_is_not() {
    let test = "a_hop_with_nagle_on_is_named_and_the_nodelay_server_is_not";
    if !runnable(test) {
        return;
    }
    let (r, port) = run_python(
        test,
        "aio_lineserver.py",
        "--max-conns 1000 --idle-timeout 60",
        "proxy-nagle",
    );
    let sc = scenario(&r, "proxy-nagle");
    let (server, hop) = nagle_findings(sc, port);
    let stall = of_kind(&hop, "nagle_delayed_ack")
        .unwrap_or_else(|| panic!("the hop's Nagle stall is named: {sc:#}"));
    let verdict = stall["verdict"].as_str().expect("verdict");
    assert!(
        verdict.contains("the hop listening on") && verdict.contains("held bytes it had already"),
        "{verdict}"
    );
    let fix = stall["fix"].as_str().expect("fix");
    assert!(fix.contains("TCP_NODELAY on"), "{fix}");
    for kind in ["nagle_delayed_ack", "nagle_round_trip"] {
        assert!(
            of_kind(&server, kind).is_none(),
            "the server held nothing: {kind} on it: {:#?}",
            server
        );
    }
    // What the server does is said as it is: pieces that nothing held on its own leg.
    if let Some(f) = of_kind(&server, "fragmented_writes") {
        let v = f["verdict"].as_str().expect("verdict");
        assert!(v.contains("Nothing held them"), "{v}");
        assert!(!v.contains("Nagle held"), "{v}");
    }
}

/// A server with TCP_NODELAY on that waits for its send queue to drain after the first piece
/// of each reply: the packets show the delayed-ACK stall, but the server's own Nagle held
/// nothing. The verdict says the program waited for the ACK and the fix is to stop waiting;
/// it never says Nagle held the rest.
#[test]
fn a_nodelay_server_that_waits_for_the_ack_is_not_called_nagle() {
    let test = "a_nodelay_server_that_waits_for_the_ack_is_not_called_nagle";
    if !runnable(test) {
        return;
    }
    let (r, port) = run_python(test, "drain_wait_server.py", "--idle-timeout 60", "direct");
    let sc = scenario(&r, "direct");
    let k = &sc["server_sockets"];
    assert_eq!(
        k["nodelay_on"], k["accepted"],
        "the server's sockets have TCP_NODELAY on: {k}"
    );
    let (server, _) = nagle_findings(sc, port);
    let stall = of_kind(&server, "nagle_delayed_ack")
        .unwrap_or_else(|| panic!("the stall is seen on the wire: {sc:#}"));
    let verdict = stall["verdict"].as_str().expect("verdict");
    assert!(
        verdict.contains("waited for the client's ACK") && verdict.contains("Nagle held nothing"),
        "{verdict}"
    );
    assert!(!verdict.contains("Nagle's algorithm holds"), "{verdict}");
    let fix = stall["fix"].as_str().expect("fix");
    assert!(
        fix.contains("do not wait for the send queue to drain"),
        "{fix}"
    );
    for f in &server {
        let v = f["verdict"].as_str().expect("verdict");
        assert!(
            !v.contains("Nagle held the pieces") && !v.contains("Nagle's algorithm holds"),
            "{}: {v}",
            f["kind"]
        );
    }
}

/// `run --pipeline P` against `server` (a shell command listening on `port`); the report.
fn run_pipelined(test: &str, server: &str, port: u16, preset: &[&str], depth: &str) -> Value {
    let dir = scratch(test);
    let target = format!("127.0.0.1:{port}");
    let out = dir.join("files");
    let mut argv = vec![
        "run",
        "--format",
        "json",
        "--server",
        server,
        "--target",
        &target,
        "--pipeline",
        depth,
        "--connections",
        "2",
        "--requests",
        "800",
        "--scenarios",
        "direct",
        "--out",
        out.to_str().expect("utf-8 path"),
        // How a pipelining server batches its replies is timing: each traced call stops it
        // twice (run says so: "tracing took … of the server's time"), and memcached then
        // answers a batch with fewer, larger writes. These tests are about the wording of
        // whole replies, so the server runs untraced, as it would in production.
        "--no-trace",
    ];
    argv.extend_from_slice(preset);
    let (r, code, err) = tcpdoctor_in(&dir, &argv);
    assert_eq!(code, 0, "no gate asked for: exit 0; stderr: {err}");
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// Pipelined memcached: each reply is its own write, so a turn of 8 replies is 8 segments —
/// whole replies, not "responses in pieces": unbatched messages, which the script's framing
/// proves. The per-line specimen pipelined the same way
/// writes more segments than a turn holds replies: its replies are in pieces, and said so.
#[test]
fn pipelined_whole_replies_are_not_called_responses_in_pieces() {
    let test = "pipelined_whole_replies_are_not_called_responses_in_pieces";
    if !live_capture_possible() {
        common::live::skip(test, "live capture on lo needs root");
        return;
    }
    if Command::new("memcached").arg("--version").output().is_err() {
        skip_unless_required(
            "TCPDOCTOR_REQUIRE_TOOLS",
            test,
            "memcached is not installed",
        );
        return;
    }
    let port = common::run::free_port();
    let server = format!("memcached -u nobody -l 127.0.0.1 -p {port} -U 0");
    let r = run_pipelined(test, &server, port, &["--preset", "memcache"], "8");
    let sc = scenario(&r, "direct");
    let (server_findings, _) = nagle_findings(sc, port);
    // run's driver knows where each reply ended (the script's framing): a burst of whole
    // replies one segment each is unbatched_messages, and fragmented_writes (its rule 11)
    // does not call those turns responses in pieces. A turn the framing could not show
    // whole (past the driver's record) may still be counted there: then only as whole
    // replies, one per write, never "in pieces".
    let unbatched = sc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["kind"] == "unbatched_messages" && f["direction"] == "server_to_client");
    let fragmented = of_kind(&server_findings, "fragmented_writes");
    assert!(
        unbatched.is_some() || fragmented.is_some(),
        "a segment per reply is still many small segments: {sc:#}"
    );
    if let Some(u) = unbatched {
        let v = u["verdict"].as_str().expect("verdict");
        assert!(
            v.contains(
                "the script's framing shows each segment carried exactly one whole response"
            ),
            "{v}"
        );
    }
    if let Some(f) = fragmented {
        let v = f["verdict"].as_str().expect("verdict");
        assert!(!v.contains("in pieces:"), "{v}");
        assert!(v.contains("one reply per write"), "{v}");
    }

    // The per-line specimen with TCP_NODELAY, pipelined 4 deep: replies in pieces.
    let port = common::run::free_port();
    let exe = env!("CARGO_BIN_EXE_tcpdoctor");
    let server = format!(
        "{exe} specimen --listen 127.0.0.1:{port} --writes per-line --nodelay --idle-timeout 60s"
    );
    let r = run_pipelined(test, &server, port, common::run::SPECIMEN_LINE, "4");
    let sc = scenario(&r, "direct");
    let (server_findings, _) = nagle_findings(sc, port);
    let f = of_kind(&server_findings, "fragmented_writes")
        .unwrap_or_else(|| panic!("per-line replies are fragmented: {sc:#}"));
    let v = f["verdict"].as_str().expect("verdict");
    assert!(v.contains("writes responses in pieces"), "{v}");
}
