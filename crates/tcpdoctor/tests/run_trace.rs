//! `run` traces the server it starts (issue 27): a CPython asyncio server on a socket from
//! `socket.create_server()` (Nagle left on by asyncio) writing one `transport.write()` per
//! line is seen making one send call per line, never setting TCP_NODELAY, and its Nagle stall
//! cites the calls behind the quoted frames; its twin writing each response once makes one
//! call per response and shows no stall; `--no-trace` turns tracing off and says so.

mod common;

use common::run::{free_port, scratch, tcpdoctor_in};
use serde_json::Value;

/// 12 rows and a "." line per response.
const ROWS: u64 = 12;

/// `run --scenarios direct` of testdata/servers/asyncio_lines.py in `mode`, 40 requests.
fn run(test: &str, mode: &str, extra: &[&str]) -> Value {
    run_server(test, &format!("{mode} {ROWS}"), extra)
}

/// The same with the server's arguments after its port.
fn run_server(test: &str, server_args: &str, extra: &[&str]) -> Value {
    let (r, code, err) = run_raw(test, server_args, "direct", "40", extra);
    assert_eq!(code, 0, "no gate: exit 0; stderr: {err}");
    r["scenarios"][0].clone()
}

/// `run --scenarios SCENARIO --requests N` of asyncio_lines.py: report, exit code, stderr.
fn run_raw(
    test: &str,
    server_args: &str,
    scenario: &str,
    requests: &str,
    extra: &[&str],
) -> (Value, i32, String) {
    let dir = scratch(test);
    let port = free_port();
    let server = format!(
        "python3 {} {port} {server_args}",
        common::repo()
            .join("testdata/servers/asyncio_lines.py")
            .display()
    );
    let target = format!("127.0.0.1:{port}");
    let out = dir.join("files");
    let mut args = vec![
        "run",
        "--format",
        "json",
        "--server",
        &server,
        "--target",
        &target,
        "--scenarios",
        scenario,
        "--requests",
        requests,
        "--out",
        out.to_str().expect("utf-8 path"),
        "--preset",
        "line",
        "--param",
        "request=ROWS",
        "--param",
        "terminator=\\n",
        "--param",
        "until_line=^\\.\\r?$",
    ];
    args.extend_from_slice(extra);
    tcpdoctor_in(&dir, &args)
}

/// The accepted socket the driver's requests came in on (the one that wrote the responses).
fn served(sc: &Value) -> &Value {
    let calls = &sc["syscalls"];
    assert_eq!(calls["status"]["state"], "traced", "{calls:#}");
    calls["sockets"]
        .as_array()
        .expect("sockets")
        .iter()
        .filter(|s| s["remote"].is_string())
        .max_by_key(|s| s["writes"].as_u64().unwrap_or(0))
        .unwrap_or_else(|| panic!("an accepted socket: {calls:#}"))
}

fn finding<'a>(sc: &'a Value, kind: &str) -> Option<&'a Value> {
    sc["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["kind"] == kind && f["direction"] == "server_to_client")
}

#[test]
fn a_per_line_asyncio_server_is_seen_writing_each_line_and_its_stall_cites_the_calls() {
    let test = "run_trace_per_line";
    if !common::has_python3(test) {
        return;
    }
    let sc = run(test, "per-line", &[]);
    let s = served(&sc);
    let wpr = &s["writes_per_response"];
    // One transport.write() per line: asyncio sends each at once (the socket is writable).
    assert_eq!(wpr["p50"].as_f64(), Some((ROWS + 1) as f64), "{s:#}");
    assert_eq!(wpr["max"].as_f64(), Some((ROWS + 1) as f64), "{s:#}");
    assert!(wpr["count"].as_u64().unwrap_or(0) >= 39, "{s:#}");
    assert_eq!(
        s["nodelay"]["set"], false,
        "create_server() sockets keep Nagle: {s:#}"
    );
    assert_eq!(
        s["counts"]["sendto"].as_u64(),
        Some(40 * (ROWS + 1)),
        "{s:#}"
    );
    // The stall is still there under the tracer, and it cites the program's calls.
    let f = finding(&sc, "nagle_delayed_ack")
        .unwrap_or_else(|| panic!("the traced server still stalls: {sc:#}"));
    let facts = f["evidence"]["facts"].to_string();
    assert!(
        facts.contains(&format!(
            "the server made {} sendto() calls per response",
            ROWS + 1
        )),
        "{facts}"
    );
    assert!(facts.contains("never set TCP_NODELAY"), "{facts}");
    assert!(
        facts.contains("the kernel held them (Nagle); the program did not wait"),
        "{facts}"
    );
    let marks = f["evidence"]["writes"].as_array().expect("write marks");
    assert!(!marks.is_empty(), "the quoted frames are joined to writes");
    let frames: Vec<u64> = f["evidence"]["frames"]
        .as_array()
        .expect("frames")
        .iter()
        .filter_map(Value::as_u64)
        .collect();
    for m in marks {
        for fr in m["frames"].as_array().expect("frames of a write") {
            assert!(
                fr.as_u64().is_some_and(|n| frames.contains(&n)),
                "a write's frame {fr} is one the finding quotes {frames:?}"
            );
        }
    }
}

/// The per-line server whose listener (0.0.0.0) got TCP_NODELAY before `listen`, at start-up —
/// before the scenario's trace window: the accepted socket inherits it, the trace says so, and
/// no finding claims "never set TCP_NODELAY" (the live sockets show it on).
#[test]
fn tcp_nodelay_set_on_the_listener_at_start_up_is_seen_on_the_accepted_socket() {
    let test = "run_trace_nodelay_listener";
    if !common::has_python3(test) {
        return;
    }
    let sc = run_server(test, &format!("per-line {ROWS} nodelay-listener"), &[]);
    let s = served(&sc);
    let nd = &s["nodelay"];
    assert_eq!(nd["set"], true, "{s:#}");
    assert_eq!(nd["value"], 1, "{s:#}");
    assert_eq!(nd["from_listener"], true, "{s:#}");
    assert_eq!(
        nd["calls"], 0,
        "the program never set it on the socket: {s:#}"
    );
    let listener = sc["syscalls"]["sockets"]
        .as_array()
        .expect("sockets")
        .iter()
        .find(|s| s["remote"].is_null())
        .unwrap_or_else(|| panic!("the listener: {:#}", sc["syscalls"]));
    assert_eq!(listener["nodelay"]["before_window"], true, "{listener:#}");
    // Nagle off: the per-line writes still fragment, but nothing stalls.
    assert!(finding(&sc, "nagle_delayed_ack").is_none(), "{sc:#}");
    let f =
        finding(&sc, "fragmented_writes").unwrap_or_else(|| panic!("one segment per line: {sc:#}"));
    let facts = f["evidence"]["facts"].to_string();
    assert!(!facts.contains("never set TCP_NODELAY"), "{facts}");
    assert!(
        facts.contains("the server set TCP_NODELAY before the trace window began")
            && facts.contains("on its listening socket (accepted sockets inherit it)"),
        "{facts}"
    );
}

#[test]
fn the_twin_writing_each_response_once_makes_one_call_per_response_and_no_stall() {
    let test = "run_trace_whole";
    if !common::has_python3(test) {
        return;
    }
    let sc = run(test, "whole", &[]);
    let s = served(&sc);
    assert_eq!(s["writes_per_response"]["p50"].as_f64(), Some(1.0), "{s:#}");
    assert_eq!(s["writes_per_response"]["max"].as_f64(), Some(1.0), "{s:#}");
    assert_eq!(s["counts"]["sendto"].as_u64(), Some(40), "{s:#}");
    for kind in ["nagle_delayed_ack", "fragmented_writes"] {
        assert!(finding(&sc, kind).is_none(), "{kind}: {sc:#}");
    }
}

#[test]
fn no_trace_turns_tracing_off_and_says_so() {
    let test = "run_trace_off";
    if !common::has_python3(test) {
        return;
    }
    let sc = run(test, "whole", &["--no-trace"]);
    assert_eq!(
        sc["syscalls"]["status"]["state"], "off",
        "{:#}",
        sc["syscalls"]
    );
    assert!(sc["syscalls"]["sockets"]
        .as_array()
        .is_none_or(|a| a.is_empty()));
}

/// Over a real path the far end maps the line's address to the server's own: the server's
/// calls are joined to the frames of both ends' captures, and both ends' findings cite them.
#[test]
fn over_a_wan_path_both_ends_findings_cite_the_servers_calls() {
    let test = "run_trace_wan";
    if !common::has_python3(test) {
        return;
    }
    let (r, code, err) = run_raw(test, &format!("per-line {ROWS}"), "wan:10ms", "20", &[]);
    if code == 2 && common::wan_unavailable(test, &err) {
        return;
    }
    assert_eq!(code, 0, "{err}");
    let sc = &r["scenarios"][0];
    let cites = |findings: &Value| {
        findings
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["kind"] == "nagle_delayed_ack")
            .map(|f| f["evidence"]["facts"].to_string())
            .any(|facts| {
                facts.contains(&format!("{} sendto() calls per response", ROWS + 1))
                    && facts.contains("the bytes of sendto() call")
            })
    };
    assert!(
        cites(&sc["findings"]),
        "the client's end: {:#}",
        sc["findings"]
    );
    assert!(
        cites(&sc["server_end"]["findings"]),
        "the server's end: {:#}",
        sc["server_end"]["findings"]
    );
}
