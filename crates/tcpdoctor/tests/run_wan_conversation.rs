//! Findings over a real path (`run --scenarios wan:15ms`: the server in a far network
//! namespace, a delay line between, real kernel TCP at both ends) that describe the
//! conversation that happened and claim only the time the packets show was lost:
//!
//! - a server writing each reply as 50 tiny writes with TCP_NODELAY spends the congestion
//!   window (counted in packets) on fresh connections: `fragmented_writes` claims the round
//!   trips that cost, with the frames, and the client's own clock saw at least that much
//!   beyond one round trip per exchange; the same server writing whole claims none;
//! - redis driven with `--pipeline 8 --connections 4` (each batch answered in one write):
//!   `rtt_bound` names the driver's pipelining and the requests per turn the wire carried,
//!   never "one request at a time" nor HTTP/2; memcached driven the same way (one write per
//!   answer, batches split as timing allows) is never called sequential either; driven one
//!   request at a time on one connection, memcached is told so.
//!
//! Each test skips (saying why) where no WAN path can be built, unless
//! `TCPDOCTOR_REQUIRE_WAN=1`; the redis and memcached ones also skip without their server
//! unless `TCPDOCTOR_REQUIRE_TOOLS=1`.

mod common;

use std::process::Command;

use common::run::{free_port, scratch, tcpdoctor_in, SPECIMEN_LINE};
use serde_json::Value;

/// The path's round trip: 15 ms each way.
const RTT_MS: f64 = 30.0;

/// `run` of `server` (listening on `port`) over `wan:15ms` with `args`; None (the reason
/// printed) when no WAN path can be built here.
fn run_wan(dir: &std::path::Path, server: &str, port: u16, args: &[&str]) -> Option<Value> {
    let target = format!("127.0.0.1:{port}");
    let files = dir.join("files");
    let mut all = vec![
        "run",
        "--format",
        "json",
        "--server",
        server,
        "--target",
        &target,
        "--scenarios",
        "wan:15ms",
        "--out",
        files.to_str().expect("utf-8"),
    ];
    all.extend_from_slice(args);
    let (r, code, err) = tcpdoctor_in(dir, &all);
    if code == 2 && common::wan_unavailable("run wan:15ms", &err) {
        return None;
    }
    assert_eq!(code, 0, "{err}");
    Some(r)
}

fn scenario(r: &Value) -> &Value {
    &r["scenarios"][0]
}

fn finding<'a>(findings: &'a Value, kind: &str) -> Option<&'a Value> {
    findings
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["kind"] == kind)
}

/// The per-line specimen with TCP_NODELAY, each reply 50 lines of 19 bytes written one by
/// one (`per-line`) or in one write (`whole`), 40 exchanges over 4 fresh connections.
fn tiny_writes(writes: &str) -> Option<Value> {
    let dir = scratch(&format!("wan-window-{writes}"));
    let port = free_port();
    let server = format!(
        "{} specimen --listen 127.0.0.1:{port} --protocol line --writes {writes} --nodelay \
         --lines 50 --line-bytes 19",
        env!("CARGO_BIN_EXE_tcpdoctor")
    );
    // Untraced: whether ten pieces fill a fresh connection's window before its first ACK is
    // timing, and the tracer's stops (tens of µs per write here) spread the 50 writes out
    // (a traced run once saw 3 of the 4 first replies wait). The test is about the window's
    // accounting, so the server runs as it would in production.
    let mut args = vec!["--requests", "40", "--connections", "4", "--no-trace"];
    args.extend_from_slice(SPECIMEN_LINE);
    let r = run_wan(&dir, &server, port, &args);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

#[test]
fn tiny_writes_that_spend_the_congestion_window_cost_what_the_clients_clock_shows() {
    let Some(r) = tiny_writes("per-line") else {
        return;
    };
    let s = scenario(&r);
    // At both ends of the path: the capture at the client's and the one at the server's.
    for findings in [&s["findings"], &s["server_end"]["findings"]] {
        let fw = finding(findings, "fragmented_writes").expect("fragmented_writes");
        assert_eq!(fw["direction"], "server_to_client");
        assert_eq!(fw["severity"], "warning", "{}", fw["verdict"]);
        let waits = fw["evidence"]["counts"]["window_waits"]
            .as_u64()
            .expect("waits");
        let lost = fw["time_lost_ms"].as_f64().expect("time lost");
        // Every fresh connection's first reply: ten 19-byte segments fill IW10.
        assert!(waits >= 4, "{waits} window waits: {}", fw["verdict"]);
        let per = lost / waits as f64;
        assert!(
            (0.75 * RTT_MS..=1.25 * RTT_MS + 2.0).contains(&per),
            "{per} ms per wait: each is about one round trip"
        );
        let verdict = fw["verdict"].as_str().expect("verdict");
        assert!(
            verdict.contains("congestion window counts packets"),
            "{verdict}"
        );
        assert!(!verdict.contains("cost no time"), "{verdict}");
        let facts = fw["evidence"]["facts"].to_string();
        assert!(facts.contains("is the first ACK of it"), "{facts}");
        // The example's frames are cited, and the evidence audit let the finding stand.
        assert!(fw["evidence"]["frames"].as_array().expect("frames").len() >= 4);
    }
    // The client's own clock: the exchanges that waited took two round trips, and the time
    // beyond one round trip per exchange is at least what the finding claims was lost.
    let lat = &s["bench"]["latency_ms"];
    let n = lat["count"].as_f64().expect("count");
    let mean = lat["mean"].as_f64().expect("mean");
    let max = lat["max"].as_f64().expect("max");
    assert!(
        max >= 2.0 * RTT_MS,
        "slowest exchange {max} ms: two round trips"
    );
    let beyond = (mean - RTT_MS) * n;
    let fw = finding(&s["findings"], "fragmented_writes").expect("fragmented_writes");
    let lost = fw["time_lost_ms"].as_f64().expect("time lost");
    assert!(
        beyond >= 0.9 * lost,
        "the client saw {beyond} ms beyond one round trip per exchange; claimed {lost} ms"
    );
    // The audit re-read the example's frames, found its window_wait claim true, and withdrew
    // nothing.
    let summary = &s["capture"]["summary"];
    let withdrawn = &summary["withdrawn"];
    assert!(
        withdrawn.as_array().is_none_or(|w| w.is_empty()),
        "{withdrawn}"
    );
    let claims = fw["evidence"]["claims"].as_array().expect("claims");
    assert!(
        claims.iter().any(|c| c["claim"] == "window_wait"),
        "{claims:?}"
    );
    let passed = summary["audit"]["claims_passed"].as_u64().expect("audit");
    assert!(passed >= 1, "{}", summary["audit"]);
}

#[test]
fn the_same_replies_written_whole_claim_no_window_cost() {
    let Some(r) = tiny_writes("whole") else {
        return;
    };
    let s = scenario(&r);
    for findings in [&s["findings"], &s["server_end"]["findings"]] {
        if let Some(fw) = finding(findings, "fragmented_writes") {
            panic!("whole replies are not fragmented: {}", fw["verdict"]);
        }
    }
    // What the client's clock saw: one round trip per exchange plus the server's time.
    let lat = &s["bench"]["latency_ms"];
    assert!(lat["min"].as_f64().expect("min") >= RTT_MS, "{lat}");
}

/// Whether `tool` is missing (the test then skips, saying why, unless tools are required).
fn tool_missing(test: &str, tool: &str) -> bool {
    if Command::new(tool).arg("--version").output().is_ok() {
        return false;
    }
    common::skip_unless_required(
        "TCPDOCTOR_REQUIRE_TOOLS",
        test,
        &format!("{tool} is not installed"),
    );
    true
}

/// A real server, `server(port)` its command line, driven untraced over wan:15ms with the
/// script `preset` and `args`. Untraced: the batching of a pipelining server is timing, which
/// the tracer's stops change (see run_blame.rs's run_pipelined).
fn served(
    name: &str,
    server: impl Fn(u16) -> String,
    preset: &str,
    args: &[&str],
) -> Option<Value> {
    let dir = scratch(name);
    let port = free_port();
    let mut all = vec!["--preset", preset, "--no-trace"];
    all.extend_from_slice(args);
    let r = run_wan(&dir, &server(port), port, &all);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// memcached (as root it must be told a user) driven over wan:15ms with `args`.
fn memcached(name: &str, args: &[&str]) -> Option<Value> {
    let user = if common::live::is_root() {
        "-u root "
    } else {
        ""
    };
    let server = |port| format!("memcached {user}-l 127.0.0.1 -p {port} -U 0");
    served(name, server, "memcache", args)
}

/// redis-server (protected mode off: the client's address is the path's, not loopback) driven
/// over wan:15ms with `args`.
fn redis(name: &str, args: &[&str]) -> Option<Value> {
    let server = |port| {
        format!(
            "redis-server --port {port} --bind 127.0.0.1 --save '' --appendonly no \
             --protected-mode no"
        )
    };
    served(name, server, "resp", args)
}

const PIPELINED: [&str; 6] = [
    "--pipeline",
    "8",
    "--connections",
    "4",
    "--requests",
    "2000",
];

/// What no finding may say of a client that pipelines.
fn assert_never_one_at_a_time(findings: &Value) {
    for f in findings.as_array().expect("findings") {
        let all = format!("{} {} {}", f["verdict"], f["evidence"]["facts"], f["fix"]);
        for never in [
            "one request at a time",
            "HTTP/2",
            "Multiplex",
            "one request per",
        ] {
            assert!(!all.contains(never), "{never}: {all}");
        }
    }
}

#[test]
fn pipelined_redis_is_told_of_its_batches_not_of_one_request_at_a_time() {
    let test = "pipelined_redis_is_told_of_its_batches_not_of_one_request_at_a_time";
    if tool_missing(test, "redis-server") {
        return;
    }
    // redis answers all the requests one read brought in one write, so each batch of eight
    // arrives whole, the driver refills all eight slots in one write, and every turn waits a
    // round trip for the previous batch's answers: rtt_bound at both ends of the path.
    let Some(r) = redis("wan-redis-pipelined", &PIPELINED) else {
        return;
    };
    let s = scenario(&r);
    for findings in [&s["findings"], &s["server_end"]["findings"]] {
        assert_never_one_at_a_time(findings);
        let rb = finding(findings, "rtt_bound")
            .unwrap_or_else(|| panic!("no rtt_bound: {findings} {}", s["figures"]));
        assert_pipelined_wording(rb);
        // Whole batches: most turns carried the driver's eight.
        let per_turn = rb["evidence"]["values"]["requests_per_turn"]
            .as_f64()
            .expect("requests_per_turn");
        assert!((4.0..=8.0).contains(&per_turn), "{per_turn}");
    }
}

/// A pipelining driver's rtt_bound: its depth, requests per turn, the script's fix, and a
/// severity that follows the time it says was lost.
fn assert_pipelined_wording(rb: &Value) {
    let verdict = rb["verdict"].as_str().expect("verdict");
    assert!(verdict.contains("--pipeline 8"), "{verdict}");
    assert!(verdict.contains("requests per turn"), "{verdict}");
    let fix = rb["fix"].as_str().expect("fix");
    assert!(fix.contains("raise --pipeline"), "{fix}");
    assert!(fix.contains("scripted client"), "{fix}");
    // The wire carried requests in turns, never more than the driver's depth.
    let per_turn = rb["evidence"]["values"]["requests_per_turn"]
        .as_f64()
        .expect("requests_per_turn");
    assert!((1.0..=8.0).contains(&per_turn), "{per_turn}");
    // Severity follows the time the finding says was lost.
    let lost = rb["time_lost_ms"].as_f64().expect("lost");
    let elapsed = rb["evidence"]["values"]["elapsed_ms"]
        .as_f64()
        .expect("elapsed");
    let critical = lost >= 1000.0 && lost >= 0.8 * elapsed;
    assert_eq!(
        rb["severity"] == "critical",
        critical,
        "{lost} of {elapsed} ms"
    );
}

#[test]
fn pipelined_memcached_is_never_told_it_sends_one_request_at_a_time() {
    let test = "pipelined_memcached_is_never_told_it_sends_one_request_at_a_time";
    if tool_missing(test, "memcached") {
        return;
    }
    // memcached 1.6 answers each request with its own sendmsg; the kernel merges some of a
    // batch's answers into one segment and not others, as timing allows (the first often
    // leaves alone). The driver refills a slot per answer read, so its turns follow that
    // split: some runs show batches that each waited a round trip (rtt_bound), others a
    // sliding window of exchanges faster than a round trip, which the rule does not count.
    // Whichever the wire showed, no finding may call this client sequential, and an
    // rtt_bound names the driver's pipelining (the whole-batch case is the redis test's).
    let Some(r) = memcached("wan-mc-pipelined", &PIPELINED) else {
        return;
    };
    let s = scenario(&r);
    let mut seen = 0;
    for findings in [&s["findings"], &s["server_end"]["findings"]] {
        assert_never_one_at_a_time(findings);
        if let Some(rb) = finding(findings, "rtt_bound") {
            assert_pipelined_wording(rb);
            seen += 1;
        }
    }
    eprintln!("{test}: rtt_bound at {seen} of 2 ends: {}", s["figures"]);
}

#[test]
fn memcached_one_request_at_a_time_keeps_the_sequential_wording() {
    let test = "memcached_one_request_at_a_time_keeps_the_sequential_wording";
    if tool_missing(test, "memcached") {
        return;
    }
    let Some(r) = memcached("wan-mc-sequential", &["--requests", "40"]) else {
        return;
    };
    let s = scenario(&r);
    let rb = finding(&s["findings"], "rtt_bound").expect("rtt_bound");
    let verdict = rb["verdict"].as_str().expect("verdict");
    assert!(verdict.contains("one request at a time"), "{verdict}");
    assert!(verdict.contains("--pipeline 1"), "{verdict}");
    assert!(!rb["fix"].as_str().expect("fix").contains("HTTP/2"));
    assert_eq!(rb["evidence"]["values"]["requests_per_turn"], 1.0);
}
