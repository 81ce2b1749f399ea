//! `run --scenarios wan:15ms`: a real path (the server restarted in a far network namespace, a
//! delay line between, real kernel TCP at both ends). The per-line Nagle specimen costs two
//! round trips and the client's delayed ACK per exchange there and is named
//! `nagle_delayed_ack` with its stalls; the report records the path's definition, writes both
//! ends' captures, and `--baseline` refuses a scenario of the same name that was another path.
//! One copy of the server runs at a time: the near one is stopped before a `wan:` scenario
//! starts the far one, and started again after it.

mod common;

use common::run::{scratch, tcpdoctor_in, SPECIMEN_LINE};
use serde_json::Value;

fn specimen(port: u16) -> String {
    format!(
        "{} specimen --listen 127.0.0.1:{port} --protocol line --writes per-line",
        env!("CARGO_BIN_EXE_tcpdoctor")
    )
}

/// `run` of the per-line specimen (20 exchanges) with `extra`; None (the reason printed) when
/// no WAN path can be built here.
fn run(dir: &std::path::Path, extra: &[&str], test: &str) -> Option<(Value, i32, String)> {
    let port = common::run::free_port();
    run_server(dir, &specimen(port), port, "20", extra, test)
}

/// `run` of `server` (listening on `port`) for `requests` exchanges with `extra`, its files
/// kept in `dir`/files.
fn run_server(
    dir: &std::path::Path,
    server: &str,
    port: u16,
    requests: &str,
    extra: &[&str],
    test: &str,
) -> Option<(Value, i32, String)> {
    let target = format!("127.0.0.1:{port}");
    let files = dir.join("files");
    let mut args = vec![
        "run",
        "--format",
        "json",
        "--server",
        server,
        "--target",
        &target,
        "--requests",
        requests,
        "--out",
        files.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(SPECIMEN_LINE);
    args.extend_from_slice(extra);
    let (r, code, err) = tcpdoctor_in(dir, &args);
    if code == 2 && common::wan_unavailable(test, &err) {
        return None;
    }
    Some((r, code, err))
}

fn scenario<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["scenarios"]
        .as_array()
        .expect("scenarios")
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no scenario {name}"))
}

#[test]
fn the_per_line_nagle_server_over_a_real_15ms_path_is_named_with_its_stalls() {
    let dir = scratch("run-wan");
    let Some((r, code, err)) = run(
        &dir,
        &["--scenarios", "wan:15ms", "--save", "wan.json"],
        "run wan:15ms",
    ) else {
        return;
    };
    assert_eq!(code, 0, "{err}");
    let s = scenario(&r, "wan:15ms");
    assert_eq!(s["definition"], "wan:15ms");
    let kinds: Vec<&str> = s["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter_map(|f| f["kind"].as_str())
        .collect();
    assert!(kinds.contains(&"nagle_delayed_ack"), "{kinds:?}");
    // Every exchange after the first is held by the client's delayed ACK (the first is in
    // quick-ack mode): the analyzer's timer stalls, not a clock threshold.
    let stalls = s["figures"]["stalls"].as_u64().expect("stalls");
    assert!(stalls >= 15, "{stalls} of 20 exchanges held by a timer");
    // Two round trips and the delayed ACK: a floor, whatever the machine's load.
    let p50 = s["figures"]["p50_ms"].as_f64().expect("p50");
    assert!(p50 >= 90.0, "median {p50} ms");
    // The delay line is a thread of tcpdoctor's process: its CPU is reported apart and kept
    // out of the driver's work per request (the floor `busy_poll` compares a server with).
    let cpu = &s["bench"]["cpu"];
    let f = |k: &str| cpu[k].as_f64().unwrap_or_else(|| panic!("{k}: {cpu}"));
    assert!(f("helpers_s") > 0.0, "the line moved packets: {cpu}");
    let exchanges = s["bench"]["exchanges"].as_f64().expect("exchanges");
    let driver_s = f("per_request_us") * exchanges / 1e6;
    let apart = f("user_s") + f("system_s") - f("spin_s") - f("helpers_s");
    assert!(
        (driver_s - apart.max(0.0)).abs() <= 0.004,
        "per request = (user + system - spin - helpers) / exchanges: {cpu}"
    );
    // The server's end, analysed too: the same Nagle stall, seen where the server sends.
    let end: Vec<&str> = s["server_end"]["findings"]
        .as_array()
        .expect("server_end")
        .iter()
        .filter_map(|f| f["kind"].as_str())
        .collect();
    assert!(end.contains(&"nagle_delayed_ack"), "{end:?}");
    // Both ends read together: the path lost nothing (none was asked for) and, the line
    // being never early, each way took at least the 15 ms it was given.
    let path = &s["server_end"]["path"];
    assert!(path["paired"].as_u64().expect("paired") >= 1, "{path}");
    for way in ["client_to_server", "server_to_client"] {
        assert_eq!(path[way]["lost"], 0, "{way}: {path}");
        assert!(
            path[way]["arrived"].as_u64().expect("arrived") > 20,
            "{way}: {path}"
        );
        let min = path[way]["delay_ms"]["min"].as_f64().expect("delay");
        assert!(min >= 15.0, "{way}: one-way delay {min} ms on a 15 ms path");
    }
    let near = s["capture"]["file"].as_str().expect("capture");
    assert!(near.ends_with("near.pcapng"), "{near}");
    assert!(std::path::Path::new(&near.replace("near.pcapng", "far.pcapng")).exists());

    // The same name, saved when wan: was the delaying hop: refused before any work.
    let saved = dir.join("wan.json");
    let mut old: Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).expect("saved")).expect("JSON");
    for s in old["scenarios"].as_array_mut().expect("scenarios") {
        s.as_object_mut().expect("object").remove("definition");
    }
    let older = dir.join("old.json");
    std::fs::write(&older, old.to_string()).expect("write");
    let older = older.to_str().expect("utf-8").to_string();
    let (_, code, err) = run(
        &dir,
        &["--scenarios", "wan:15ms", "--baseline", &older],
        "baseline refusal",
    )
    .expect("the path was available a moment ago");
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("proxy-delay:15ms (a delaying hop)") && err.contains("not comparable"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// One server at a time: over `direct,wan:1ms,proxy` the `--server` command runs three
/// times (near for `direct`, at the far end for `wan:1ms`, near again for `proxy`), and each
/// copy has stopped before the next one starts. The command logs `start PID` when it starts
/// and `stop PID` when SIGTERM stops it; a copy that started while another had not stopped
/// is an overlap (before: the near server kept running through the `wan:` scenario, so a
/// server owning a pid file, a lock or a data directory met its own twin).
#[test]
fn each_scenario_runs_its_own_server_and_the_previous_one_is_stopped_first() {
    let dir = scratch("run-wan-one-server");
    let port = common::run::free_port();
    let events = dir.join("events");
    let server = format!(
        "echo start $$ >> '{e}'; trap 'echo stop $$ >> \"{e}\"; exit 0' TERM; {s} & wait $!",
        e = events.display(),
        s = specimen(port)
    );
    let Some((r, code, err)) = run_server(
        &dir,
        &server,
        port,
        "5",
        &["--scenarios", "direct,wan:1ms,proxy"],
        "one server per scenario",
    ) else {
        return;
    };
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["scenarios"].as_array().expect("scenarios").len(), 3);
    let log = std::fs::read_to_string(&events).expect("the server's events");
    let mut live: Vec<&str> = Vec::new();
    let mut starts = 0;
    for line in log.lines() {
        match line.split_once(' ') {
            Some(("start", pid)) => {
                assert!(
                    live.is_empty(),
                    "server {pid} started while {live:?} still ran:\n{log}"
                );
                live.push(pid);
                starts += 1;
            }
            Some(("stop", pid)) => live.retain(|p| *p != pid),
            _ => panic!("{line:?} in\n{log}"),
        }
    }
    assert_eq!(starts, 3, "one server per scenario:\n{log}");
    assert!(live.is_empty(), "{live:?} never stopped:\n{log}");
    // The near server's second start has its own log; the first one's is kept.
    // (`run_server` keeps `run`'s files in DIR/files.)
    let files = dir.join("files");
    assert!(files.join("server.log").exists() && files.join("server.2.log").exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_wan_path_needs_the_server_command() {
    let (_, code, err) = tcpdoctor_in(
        &std::env::temp_dir(),
        &[
            "run",
            "--target",
            "127.0.0.1:9",
            "--preset",
            "echo",
            "--scenarios",
            "wan:15ms",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("give --server CMD") && err.contains("proxy-delay:D"),
        "{err}"
    );
}
