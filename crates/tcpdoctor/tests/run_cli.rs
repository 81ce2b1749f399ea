//! `tcpdoctor run` and `tcpdoctor demo` end to end: real specimen servers started by `run`,
//! real kernel TCP over loopback, real captures, the JSON validated against its schema.

mod common;

use common::run::{
    free_port, kinds, live_capture_possible, run_never_ready, run_specimen, run_specimen_with,
    scenario, scratch, tcpdoctor_in,
};
use common::{num, repo};

#[test]
fn run_names_the_stall_the_fixed_twin_is_clean_and_the_baseline_compares() {
    let dir = scratch("run");
    let sandbox: &[&str] = if live_capture_possible() {
        &[]
    } else {
        &["--sandbox"]
    };
    let mut extra = vec!["--scenarios", "direct,proxy-nagle", "--save", "before.json"];
    extra.extend_from_slice(sandbox);
    let (before, code, err) = run_specimen(&dir, "per-line", &extra);
    assert_eq!(code, 0, "no gate asked for: exit 0; stderr: {err}");
    let direct = scenario(&before, "direct");
    assert!(
        kinds(direct).contains(&"nagle_delayed_ack".to_string()),
        "per-line server, direct: {:?}; {}",
        kinds(direct),
        direct["capture_note"]
    );
    assert!(num(&direct["figures"]["stalls_30ms"]) >= 20.0);
    assert!(
        direct["server_cpu"]["wall_s"]
            .as_f64()
            .expect("as in the report")
            > 0.0
    );
    let hop = scenario(&before, "proxy-nagle");
    assert!(kinds(hop).contains(&"nagle_delayed_ack".to_string()));
    assert!(
        hop["figures"]["s2c_chunks_per_exchange"]
            .as_f64()
            .expect("as in the report")
            >= 1.0
    );

    // The fixed twin, compared with the saved report.
    let mut extra = vec![
        "--scenarios",
        "direct",
        "--baseline",
        "before.json",
        "--check",
        "stalls==0",
        "--fail-on",
        "nagle_delayed_ack",
    ];
    extra.extend_from_slice(sandbox);
    let (after, code, err) = run_specimen(&dir, "whole", &extra);
    assert_eq!(code, 0, "fixed twin passes its gate; stderr: {err}");
    let direct_after = scenario(&after, "direct");
    assert!(kinds(direct_after).is_empty(), "{:?}", kinds(direct_after));
    let cmp = &after["comparisons"][0];
    assert_eq!(cmp["title"], "direct: baseline → now");
    let row = |m: &str| {
        cmp["rows"]
            .as_array()
            .expect("as in the report")
            .iter()
            .find(|r| r["metric"] == m)
            .cloned()
            .expect("as in the report")
    };
    let t = row("throughput");
    let (b, a) = (num(&t["before"]), num(&t["after"]));
    assert_eq!(b, num(&direct["figures"]["throughput_rps"]));
    assert_eq!(a, num(&direct_after["figures"]["throughput_rps"]));
    assert!((num(&t["ratio"]) - a / b).abs() < 0.01 * a / b);
    assert!(a > 5.0 * b, "whole writes {a} req/s vs per-line {b} req/s");
    assert_eq!(t["better"], true);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn checks_and_fail_on_gate_the_exit_code() {
    let dir = scratch("gate");
    let (r, code, err) = run_specimen(
        &dir,
        "per-line",
        &[
            "--scenarios",
            "proxy-nagle",
            "--check",
            "p99<5ms",
            "--check",
            "errors==0",
        ],
    );
    assert_eq!(code, 1, "a failed check exits 1; stderr: {err}");
    let checks = r["checks"].as_array().expect("as in the report");
    assert_eq!(checks.len(), 2);
    assert_eq!(checks[0]["passed"], false);
    assert!(checks[0]["message"]
        .as_str()
        .expect("as in the report")
        .contains("limit < 5 ms"));
    assert_eq!(checks[1]["passed"], true);
    let (r, code, _) = run_specimen(
        &dir,
        "whole",
        &[
            "--scenarios",
            "proxy",
            "--check",
            "p99<1s",
            "--fail-on",
            "any",
        ],
    );
    assert_eq!(code, 0, "{}", r["failed_on"]);
    let (r, code, _) = run_specimen(
        &dir,
        "per-line",
        &[
            "--scenarios",
            "proxy",
            "--fail-on",
            "rtt_bound,nagle_delayed_ack",
        ],
    );
    assert_eq!(code, 1);
    assert!(r["failed_on"][0]
        .as_str()
        .expect("as in the report")
        .starts_with("nagle_delayed_ack in proxy"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn repeat_pools_the_runs_and_keeps_their_spread() {
    let dir = scratch("repeat");
    let (r, code, err) = run_specimen(
        &dir,
        "whole",
        &["--scenarios", "direct,proxy", "--repeat", "3"],
    );
    assert_eq!(code, 0, "stderr: {err}");
    assert_eq!(r["settings"]["repeat"], 3);
    for name in ["direct", "proxy"] {
        let s = scenario(&r, name);
        let rep = &s["repeat"];
        assert_eq!(rep["runs"], 3, "{name}: {rep}");
        assert_eq!(rep["completed"], 3, "{name}: {rep}");
        let per_run = rep["per_run"].as_array().expect("as in the report");
        assert_eq!(per_run.len(), 3);
        // Every run made --requests exchanges; the figures pool all three.
        for run in per_run {
            assert_eq!(run["exchanges"], 30, "{name}: {run}");
        }
        assert_eq!(s["figures"]["exchanges"], 90, "{name}");
        assert_eq!(s["bench"]["exchanges"], 90, "{name}");
        let histogram: f64 = s["latency_histogram"]
            .as_array()
            .expect("as in the report")
            .iter()
            .map(|b| num(&b["count"]))
            .sum();
        assert_eq!(histogram, 90.0, "{name}: the histogram holds every run");
        let p50s: Vec<f64> = per_run.iter().map(|x| num(&x["p50_ms"])).collect();
        let lo = p50s.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = p50s.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let pooled = num(&s["figures"]["p50_ms"]);
        assert!(
            lo <= pooled && pooled <= hi,
            "{name}: pooled p50 {pooled} outside the runs' {lo}–{hi}"
        );
        // Throughput is all exchanges over all measured time: with equal exchanges per run,
        // the harmonic mean of the runs' rates (measured_s is rounded to the ms, too coarse
        // to divide by on loopback).
        let rates: Vec<f64> = per_run.iter().map(|x| num(&x["throughput_rps"])).collect();
        let harmonic = 3.0 / rates.iter().map(|r| 1.0 / r).sum::<f64>();
        let rps = num(&s["figures"]["throughput_rps"]);
        assert!(
            (rps - harmonic).abs() <= 0.001 * rps,
            "{name}: pooled {rps} req/s, runs {rates:?} (harmonic mean {harmonic})"
        );
        // The server's CPU covers the three runs.
        assert!(num(&s["server_cpu"]["wall_s"]) > 0.0, "{name}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_that_never_listens_is_stopped_and_named() {
    let dir = scratch("noready");
    let port = free_port();
    let other = free_port();
    let exe = env!("CARGO_BIN_EXE_tcpdoctor");
    // Listens on `other`, while run waits for `port`.
    let marker = format!("--idle-timeout 61s --listen 127.0.0.1:{other}");
    let server = format!("{exe} specimen {marker}");
    let target = format!("127.0.0.1:{port}");
    let (code, err) = run_never_ready(&dir, &server, &target);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("did not accept a connection"), "{err}");
    assert!(
        err.contains("listening 127.0.0.1"),
        "the server's output is shown: {err}"
    );
    // No orphan: nothing serves `other` any more.
    assert!(std::net::TcpStream::connect(("127.0.0.1", other)).is_err());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server that dies in the second of three repetitions: `run` stops at once (it watches the
/// process, it does not wait out --timeout), exits 2 and shows the server's last words.
#[test]
fn a_server_that_dies_mid_repeat_ends_the_run_with_its_log() {
    let dir = scratch("dies");
    let (_, code, err) = run_specimen_with(
        &dir,
        "whole",
        "--exit-after 45",
        &["--repeat", "3", "--scenarios", "direct,proxy"],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the server exited during the run"), "{err}");
    assert!(
        err.contains("45 requests answered"),
        "its log is shown: {err}"
    );
    assert!(
        !err.contains("proxy (driver"),
        "no scenario runs after the server died: {err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_arguments_exit_2_naming_the_flag() {
    let dir = repo();
    for (args, needle) in [
        (
            vec!["--scenarios", "lan"],
            "--scenarios: unknown scenario `lan`",
        ),
        (
            vec!["--check", "p98<5ms"],
            "--check: check `p98<5ms`: unknown figure",
        ),
        (
            vec!["--baseline", "/nonexistent.json"],
            "--baseline /nonexistent.json",
        ),
        (vec!["--fail-on", "slow"], "unknown finding kind `slow`"),
        (vec!["--repeat", "0"], "'--repeat <K>'"),
        (vec!["--repeat", "many"], "'--repeat <K>'"),
        // Refused before any work, not after a long run:
        (
            vec!["--html", "/nonexistent-tcpdoctor-dir/r.html"],
            "--html /nonexistent-tcpdoctor-dir/r.html: no directory",
        ),
        (vec!["--save", "/"], "--save /: is a directory"),
        (
            vec!["--timeout", "0"],
            "--timeout 0: must be more than zero",
        ),
        (
            vec!["--check", "p99<5ms@nosuch"],
            "--check p99<5ms@nosuch: no scenario `nosuch`",
        ),
        (vec!["--sandbox"], "--server <CMD>"),
    ] {
        let mut all = vec!["run", "--target", "127.0.0.1:9", "--preset", "echo"];
        all.extend_from_slice(&args);
        let (_, code, err) = tcpdoctor_in(&dir, &all);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
    }
    for (target, needle) in [
        (
            "localhost",
            "--target localhost: not HOST:PORT or unix:/path",
        ),
        ("unix:", "--target unix:: empty Unix socket path"),
        (
            "unix:/nonexistent-tcpdoctor-dir/s.sock",
            "--target unix:/nonexistent-tcpdoctor-dir/s.sock: no directory \
             /nonexistent-tcpdoctor-dir",
        ),
    ] {
        let (_, code, err) = tcpdoctor_in(&dir, &["run", "--target", target, "--preset", "echo"]);
        assert_eq!(code, 2, "{target}: {err}");
        assert!(err.contains(needle), "{target}: {err}");
    }
}

#[test]
fn demo_reproduces_and_fixes_every_pathology() {
    let dir = scratch("demo");
    let html = dir.join("demo.html");
    let (r, code, err) = tcpdoctor_in(
        &dir,
        &[
            "demo",
            "--format",
            "json",
            "--out",
            dir.to_str().expect("as in the report"),
            "--html",
            html.to_str().expect("as in the report"),
        ],
    );
    if common::wan_unavailable("demo", &format!("{err} {}", r["reasons"])) {
        return;
    }
    let cases = r["cases"]
        .as_array()
        .unwrap_or_else(|| panic!("no cases: {err}"));
    let verdicts: Vec<(String, bool, bool)> = cases
        .iter()
        .map(|c| {
            (
                c["expected"]
                    .as_str()
                    .expect("as in the report")
                    .to_string(),
                c["reproduced"].as_bool().expect("as in the report"),
                c["fixed"].as_bool().expect("as in the report"),
            )
        })
        .collect();
    let expected = [
        "nagle_delayed_ack",
        "nagle_delayed_ack",
        "nagle_delayed_ack",
        "rtt_bound",
        "busy_poll",
        "nagle_delayed_ack",
    ];
    assert_eq!(
        verdicts.iter().map(|v| v.0.as_str()).collect::<Vec<_>>(),
        expected
    );
    // What each scenario measured (server CPU, stalls, latency), for a failure to show.
    let measured: Vec<String> = r["scenarios"]
        .as_array()
        .map(|v| {
            v.iter()
                .map(|s| {
                    format!(
                        "{}: server_cpu {} p50 {} stalls {} findings {}",
                        s["name"],
                        s["server_cpu"],
                        s["figures"]["p50_ms"],
                        s["figures"]["stalls"],
                        s["findings"].as_array().map_or(0, |f| f.len())
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    for (c, v) in cases.iter().zip(&verdicts) {
        assert!(
            v.1 && v.2,
            "{}: reproduced {} fixed {}: {}\n{}",
            c["title"],
            v.1,
            v.2,
            c["diagnosis"],
            measured.join("\n")
        );
    }
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("6 of 6 pathologies reproduced and fixed"),
        "{err}"
    );
    // The before/after table agrees with the scenarios it compares.
    for (case, cmp) in cases
        .iter()
        .zip(r["comparisons"].as_array().expect("as in the report"))
    {
        assert_eq!(cmp["before"], case["before"]);
        let before = scenario(&r, case["before"].as_str().expect("as in the report"));
        let p50 = cmp["rows"]
            .as_array()
            .expect("as in the report")
            .iter()
            .find(|x| x["metric"] == "p50")
            .expect("as in the report");
        assert_eq!(num(&p50["before"]), num(&before["figures"]["p50_ms"]));
    }
    // Findings that do not rest on a kernel capture alone say what they rest on: busy_poll on
    // the /proc counters, a hop's recording on what it observed and what it modelled. The WAN
    // cases rest on the delay line's capture of real kernel packets: nothing to add.
    let rests_on = |kind: &str| -> Vec<String> {
        let case = cases
            .iter()
            .find(|c| c["expected"] == kind)
            .expect("a case for the kind");
        let before = scenario(&r, case["before"].as_str().expect("as in the report"));
        let f = before["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .find(|f| f["kind"] == kind)
            .unwrap_or_else(|| panic!("{kind} in {}", before["name"]))
            .clone();
        f["evidence"]["rests_on"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| x.as_str().unwrap_or("").to_string())
                    .collect()
            })
            .unwrap_or_default()
    };
    // The demo traces its specimens: the spinner is named by its calls (busy_poll rule 7),
    // its CPU quoted for scale.
    let busy = rests_on("busy_poll");
    assert!(
        busy.iter()
            .any(|x| x.starts_with("system calls of the server's processes, traced"))
            && busy.iter().any(|x| x.contains("schedstat")),
        "{busy:?}"
    );
    let wan = rests_on("rtt_bound");
    assert!(wan.is_empty(), "{wan:?}");
    let wan_case = cases
        .iter()
        .find(|c| c["expected"] == "rtt_bound")
        .expect("the round-trip case");
    let before = scenario(&r, wan_case["before"].as_str().expect("name"));
    assert!(
        before["capture"]["file"]
            .as_str()
            .is_some_and(|f| f.ends_with("near.pcapng")),
        "{}",
        before["capture"]
    );
    let page = std::fs::read_to_string(&html).expect("--html wrote the report");
    assert!(page.contains("nagle_delayed_ack") && page.contains("<svg"));
    assert!(
        page.contains("rests on:"),
        "the HTML shows what findings rest on"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 12, a lost wake-up: through a delay hop, responses written a line at a time reach the
/// driver in several reads, and on `run`'s multi-thread runtime the driver forgot bytes that
/// arrived between a short read and its clearing of the socket's readiness: the whole response
/// sat in the socket and the exchange timed out (53–77 timeouts in 20,000 exchanges before the
/// fix). Thousands of exchanges on 8 connections must all complete: no timeout, no error.
#[test]
fn thousands_of_exchanges_through_the_delay_hop_lose_no_wake_up() {
    let dir = scratch("lost-wakeup");
    let port = free_port();
    let exe = env!("CARGO_BIN_EXE_tcpdoctor");
    let server = format!(
        "{exe} specimen --listen 127.0.0.1:{port} --writes per-line --nodelay --line-gap 20us"
    );
    let target = format!("127.0.0.1:{port}");
    let mut args = vec![
        "run",
        "--format",
        "json",
        "--server",
        &server,
        "--target",
        &target,
        "--scenarios",
        "proxy-delay:100us",
        "--connections",
        "8",
        "--requests",
        "12000",
        "--timeout",
        "1s",
        "--out",
        dir.to_str().expect("utf-8 temp dir"),
    ];
    args.extend_from_slice(common::run::SPECIMEN_LINE);
    let (r, code, err) = tcpdoctor_in(&dir, &args);
    assert_eq!(code, 0, "stderr: {err}");
    let wan = scenario(&r, "proxy-delay:100us");
    let b = &wan["bench"];
    assert_eq!(
        b["errors"]["timeouts"], 0,
        "every response arrived, so none may time out: {}",
        b["note"]
    );
    assert_eq!(wan["figures"]["errors"], 0, "{}", b["errors"]);
    assert_eq!(wan["figures"]["exchanges"], 12000);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 12: a server may listen before it has finished loading. Its start-up work (here
/// 0.6 s of CPU burnt after `listen`) must not be charged to the first scenario: `run` waits
/// for the server to settle before measuring. The server's CPU is counted in nanoseconds
/// (schedstat), so a scenario of 50 echoes shows CPU per request above 0 where 10 ms ticks
/// read 0 (or 10 ms).
#[test]
fn a_servers_start_up_work_is_not_charged_to_the_first_scenario() {
    let dir = scratch("startup-cpu");
    if std::process::Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .map_or(true, |s| !s.success())
    {
        common::skip_unless_required(
            "TCPDOCTOR_REQUIRE_TOOLS",
            "python3 server",
            "python3 not found",
        );
        return;
    }
    let srv = dir.join("loading_server.py");
    std::fs::write(
        &srv,
        "import socket, sys, threading, time\n\
         l = socket.socket()\n\
         l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n\
         l.bind(('127.0.0.1', int(sys.argv[1])))\n\
         l.listen(64)\n\
         t = time.process_time()\n\
         while time.process_time() - t < 0.6:\n    pass\n\
         def serve(c):\n    while True:\n        d = c.recv(65536)\n        if not d:\n            return\n        c.sendall(d)\n\
         while True:\n    c, _ = l.accept()\n    threading.Thread(target=serve, args=(c,), daemon=True).start()\n",
    )
    .expect("server script");
    let port = free_port();
    let server = format!("python3 {} {port}", srv.display());
    let target = format!("127.0.0.1:{port}");
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
            "echo",
            "--requests",
            "50",
            "--scenarios",
            "direct",
            "--out",
            dir.to_str().expect("utf-8 temp dir"),
        ],
    );
    assert_eq!(code, 0, "{err}");
    let cpu = &scenario(&r, "direct")["server_cpu"];
    let total = num(&cpu["user_s"]) + num(&cpu["system_s"]);
    assert!(
        total < 0.3,
        "0.6 s of start-up CPU charged to the first scenario: {cpu}"
    );
    assert!(
        num(&cpu["per_request_us"]) > 0.0,
        "50 echoes cost some CPU, counted in ns: {cpu}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
