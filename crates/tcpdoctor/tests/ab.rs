//! `tcpdoctor ab` end to end: real servers and real commands in alternating rounds; the
//! verdicts asserted both ways (A/A is no difference, a known slowdown is one), hangs under
//! backpressure counted with their sockets, what differs named from the captures, and two
//! real implementations of one protocol from the package registries compared.
//!
//! The A/A tests use --confidence 99.9: a test suite runs many times, and each figure's
//! chance of a verdict on identical sides is 1 − confidence.

mod common;

use std::sync::Mutex;

use common::ab::{figure, running_with, tcpdoctor_in};
use common::run::{free_port, scratch, SPECIMEN_LINE};
use serde_json::Value;

/// One comparison at a time: two measuring at once would be each other's noise.
static SERIAL: Mutex<()> = Mutex::new(());

fn specimen(port: u16, extra: &str) -> String {
    format!(
        "{} specimen --listen 127.0.0.1:{port} --idle-timeout 60s {extra}",
        env!("CARGO_BIN_EXE_tcpdoctor")
    )
}

/// `ab --format json` with two specimen servers on `port`, driven by the line preset.
fn ab_servers(
    dir: &std::path::Path,
    port: u16,
    a: &str,
    b: &str,
    extra: &[&str],
) -> (Value, i32, String) {
    let (sa, sb) = (specimen(port, a), specimen(port, b));
    let target = format!("127.0.0.1:{port}");
    let out = dir.join("ab");
    let mut args = vec![
        "ab",
        "--format",
        "json",
        "--server-a",
        &sa,
        "--server-b",
        &sb,
        "--target",
        &target,
        "--out",
        out.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(SPECIMEN_LINE);
    args.extend_from_slice(extra);
    tcpdoctor_in(dir, &args)
}

fn ci(f: &Value) -> (f64, f64) {
    (
        f["ci"][0].as_f64().expect("ci low"),
        f["ci"][1].as_f64().expect("ci high"),
    )
}

/// A/A: the same server as both sides is no difference on every figure, the interval
/// covering 1; the gate passes (it measured every figure) with exit 0.
#[test]
fn the_same_server_twice_is_no_difference() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("ab-aa");
    let port = free_port();
    let same = "--writes per-line --nodelay --lines 2 --line-gap 2ms";
    let (r, code, err) = ab_servers(
        &dir,
        port,
        same,
        same,
        &[
            "--requests",
            "30",
            "--rounds",
            "6",
            "--confidence",
            "99.9",
            "--fail-if-slower",
        ],
    );
    assert_eq!(code, 0, "{err}\n{:#}", r["reasons"]);
    assert!(r.is_object(), "a report: {err}");
    assert_eq!(r["settings"]["mode"], "server");
    assert_eq!(
        r["settings"]["order"],
        "warm-up A B · A B B A A B B A A B B A"
    );
    for f in r["figures"].as_array().expect("figures") {
        assert_eq!(f["verdict"], "no_difference", "{f:#}");
        assert_eq!(f["pairs"], 6, "{f:#}");
        let (lo, hi) = ci(f);
        assert!(lo <= 1.0 && 1.0 <= hi, "{f:#}");
    }
    assert_eq!(r["result"], "passed");
    assert_eq!(r["hangs"], serde_json::json!({"a": 0, "b": 0}));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A known 1.3× slowdown (5 ms → 6.5 ms between the reply's two lines: 10 → 13 ms of work
/// per request): B slower on p50 and throughput, the interval excluding 1 and holding the
/// ratio; --fail-if-slower fails with p50 named; --fail-if-slower=2 (B may be twice as slow)
/// does not fail on it.
#[test]
fn a_known_slowdown_is_b_slower_with_the_ratio_in_its_interval() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("ab-slow");
    let port = free_port();
    let a = "--writes per-line --nodelay --lines 2 --line-gap 5ms";
    let b = "--writes per-line --nodelay --lines 2 --line-gap 6500us";
    let (r, code, err) = ab_servers(
        &dir,
        port,
        a,
        b,
        &["--requests", "20", "--rounds", "5", "--fail-if-slower"],
    );
    assert_eq!(code, 1, "{err}");
    assert!(r.is_object(), "a report: {err}");
    let p50 = figure(&r, "p50 direct");
    assert_eq!(p50["verdict"], "slower", "{p50:#}");
    let (lo, hi) = ci(p50);
    let ratio = p50["ratio"].as_f64().expect("ratio");
    assert!(1.0 < lo && lo <= ratio && ratio <= hi, "{p50:#}");
    // 10 → 13 ms of work plus the same exchange overhead on both: a bit under 1.3.
    assert!((1.1..1.35).contains(&ratio), "{p50:#}");
    assert_eq!(figure(&r, "throughput direct")["verdict"], "slower");
    assert_eq!(r["result"], "failed");
    assert!(
        r["reasons"].as_array().expect("reasons").iter().any(|x| x
            .as_str()
            .is_some_and(|x| x.starts_with("p50 direct: B is slower"))),
        "{:#}",
        r["reasons"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// What differs is named from the captures, over a real WAN path (both ends kernel TCP):
/// B writes each reply line on its own with Nagle on (the second line waits for the client's
/// delayed ACK), A writes the reply once; the report names nagle_delayed_ack in B only, with
/// frames of B's capture, B's extra segments per exchange, and B slower.
#[test]
fn a_nagle_stall_in_b_only_is_named_with_its_frames_over_a_wan_path() {
    let test = "a_nagle_stall_in_b_only_is_named_with_its_frames_over_a_wan_path";
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("ab-why");
    let port = free_port();
    let (r, code, err) = ab_servers(
        &dir,
        port,
        "--writes whole --lines 3",
        "--writes per-line --lines 3",
        &[
            "--requests",
            "10",
            "--rounds",
            "3",
            "--warmup",
            "0",
            "--scenarios",
            "wan:5ms",
        ],
    );
    let failed_runs: Vec<String> = r["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|x| x["outcome"]["reason"].as_str().map(str::to_string))
        .collect();
    if common::wan_unavailable(test, &format!("{err}{failed_runs:?}")) {
        return;
    }
    assert_eq!(code, 0, "no gate: {err}");
    let why = &r["why"][0];
    assert_eq!(why["a"]["runs_analysed"], 3, "{why:#}\n{err}");
    let kinds = |side: &str| -> Vec<String> {
        why[side]["kinds"]
            .as_array()
            .expect("kinds")
            .iter()
            .filter_map(|k| k["kind"].as_str().map(str::to_string))
            .collect()
    };
    assert!(
        kinds("b").contains(&"nagle_delayed_ack".to_string()),
        "{why:#}"
    );
    assert!(
        !kinds("a").contains(&"nagle_delayed_ack".to_string()),
        "{why:#}"
    );
    let differences: Vec<&str> = why["differences"]
        .as_array()
        .expect("differences")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let named = differences
        .iter()
        .find(|d| d.starts_with("nagle_delayed_ack in B only (3 of 3 analysed runs"))
        .unwrap_or_else(|| panic!("not named: {why:#}"));
    assert!(
        named.contains("frames ") && named.contains(".pcapng"),
        "{named}"
    );
    assert!(
        differences
            .iter()
            .any(|d| d.starts_with("B sends ") && d.contains("the TCP segments per request")),
        "{differences:#?}"
    );
    assert_eq!(figure(&r, "p50 wan:5ms")["verdict"], "slower");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Over a Unix socket (`--target unix:PATH`, as `run` takes it): the figures are compared the
/// same way (B's 4 ms of work per request against A's 1 ms is B slower); there are no packets
/// to analyse, and the report says nothing about a "why" it could not look at.
#[test]
fn servers_on_a_unix_socket_are_compared_too() {
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("ab-unix");
    let sock = dir.join("s.sock");
    let exe = env!("CARGO_BIN_EXE_tcpdoctor");
    let server = |gap: &str| {
        format!(
            "{exe} specimen --listen unix:{} --idle-timeout 60s --writes per-line --lines 2 \
             --line-gap {gap}",
            sock.display()
        )
    };
    let (sa, sb) = (server("1ms"), server("4ms"));
    let target = format!("unix:{}", sock.display());
    let out = dir.join("ab");
    let mut args = vec![
        "ab",
        "--format",
        "json",
        "--server-a",
        &sa,
        "--server-b",
        &sb,
        "--target",
        &target,
        "--requests",
        "20",
        "--rounds",
        "3",
        "--warmup",
        "0",
        "--out",
        out.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(SPECIMEN_LINE);
    let (r, code, err) = tcpdoctor_in(&dir, &args);
    assert_eq!(code, 0, "{err}");
    let p50 = figure(&r, "p50 direct");
    assert_eq!(p50["pairs"], 3, "{p50:#}\n{err}");
    assert_eq!(p50["verdict"], "slower", "{p50:#}");
    assert!(
        r.get("why").is_none(),
        "no capture over a Unix socket: {:#}",
        r["why"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A side that deadlocks under backpressure in some runs (all writes before any read, more
/// bytes than the socket buffers hold): each such run is a hang — stopped after --hang-after
/// with its sockets recorded (both peers' windows zero, unread bytes queued) — and the runs
/// after it go on; B hung in 2 of 4; --fail-if-slower fails on the hangs.
#[test]
fn hangs_under_backpressure_are_counted_with_their_sockets_and_the_runs_go_on() {
    let test = "hangs_under_backpressure_are_counted_with_their_sockets_and_the_runs_go_on";
    if !common::has_python3(test) {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("ab-hang");
    let script = common::repo().join("testdata/servers/backpressure.py");
    let state = dir.join("b.state");
    let a = format!("python3 {} --sizes 2m", script.display());
    let b = format!(
        "python3 {} --write-then-read --sizes 16k,2m --state {}",
        script.display(),
        state.display()
    );
    let out = dir.join("ab");
    let (r, code, err) = tcpdoctor_in(
        &dir,
        &[
            "ab",
            "--format",
            "json",
            "--command-a",
            &a,
            "--command-b",
            &b,
            "--figure",
            "rate:higher=\\(([0-9.]+) MB/s\\)",
            "--rounds",
            "4",
            "--warmup",
            "0",
            "--hang-after",
            "2s",
            "--why-runs",
            "0",
            "--fail-if-slower",
            "--out",
            out.to_str().expect("utf-8"),
        ],
    );
    assert_eq!(code, 1, "{err}");
    assert!(r.is_object(), "a report: {err}");
    assert_eq!(r["hangs"], serde_json::json!({"a": 0, "b": 2}), "{err}");
    let runs = r["runs"].as_array().expect("runs");
    let states: Vec<(u64, &str, &str)> = runs
        .iter()
        .map(|x| {
            (
                x["round"].as_u64().expect("round"),
                x["side"].as_str().expect("side"),
                x["outcome"]["state"].as_str().expect("state"),
            )
        })
        .collect();
    // Order A B, B A, A B, B A; B's 1st and 3rd runs are small (done), its 2nd and 4th hang.
    assert_eq!(
        states,
        [
            (1, "a", "ok"),
            (1, "b", "ok"),
            (2, "b", "hang"),
            (2, "a", "ok"),
            (3, "a", "ok"),
            (3, "b", "ok"),
            (4, "b", "hang"),
            (4, "a", "ok"),
        ]
    );
    for hung in runs.iter().filter(|x| x["outcome"]["state"] == "hang") {
        let sockets = hung["outcome"]["sockets"].as_array().expect("sockets");
        let tcp: Vec<&Value> = sockets.iter().filter(|s| s["kind"] == "tcp").collect();
        assert_eq!(
            tcp.len(),
            2,
            "the client's and the server's end: {sockets:#?}"
        );
        for s in tcp {
            assert_eq!(s["peer_zero_window"], true, "{s:#}");
            assert!(s["unread_bytes"].as_u64().is_some_and(|n| n > 0), "{s:#}");
            assert!(s["notsent_bytes"].as_u64().is_some_and(|n| n > 0), "{s:#}");
        }
    }
    assert!(
        r["reasons"]
            .as_array()
            .expect("reasons")
            .iter()
            .any(|x| x == "B hung in 2 of 4 measured run(s)"),
        "{:#}",
        r["reasons"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Bad input is exit 2 with the flag named, before any run.
#[test]
fn bad_input_names_the_flag() {
    let dir = scratch("ab-bad");
    for (args, says) in [
        (
            vec![
                "ab",
                "--command-a",
                "true",
                "--command-b",
                "true",
                "--figure",
                "rps=([0-9]+)",
            ],
            "--figure rps=([0-9]+): say which way the figure improves",
        ),
        (
            vec![
                "ab",
                "--command-a",
                "true",
                "--command-b",
                "true",
                "--figure",
                "rps:up=x",
            ],
            "`up` is not higher or lower",
        ),
        (
            vec![
                "ab",
                "--command-a",
                "true",
                "--command-b",
                "true",
                "--figure",
                "rps:higher=(",
            ],
            "--figure rps:higher=(: the regex",
        ),
        (
            vec![
                "ab",
                "--command-a",
                "true",
                "--command-b",
                "true",
                "--hang-after",
                "0s",
            ],
            "--hang-after 0s",
        ),
        (
            vec![
                "ab",
                "--command-a",
                "true",
                "--command-b",
                "true",
                "--fail-if-slower=0.9",
            ],
            "--fail-if-slower=0.9",
        ),
        (
            vec![
                "ab",
                "--server-a",
                "x",
                "--server-b",
                "y",
                "--target",
                "127.0.0.1:1",
            ],
            "need --script FILE or --preset NAME",
        ),
        (
            vec![
                "ab",
                "--command-a",
                "true",
                "--command-b",
                "true",
                "--scenarios",
                "direct",
            ],
            "ab: --scenarios goes with --server-a/--server-b",
        ),
        (
            vec![
                "ab",
                "--server-a",
                "x",
                "--server-b",
                "y",
                "--target",
                "127.0.0.1:1",
                "--preset",
                "echo",
                "--why-runs",
                "2",
            ],
            "ab: --why-runs goes with --command-a/--command-b",
        ),
        (
            vec![
                "ab",
                "--server-a",
                "x",
                "--server-b",
                "y",
                "--target",
                "127.0.0.1:1",
                "--preset",
                "echo",
                "--scenarios",
                "direct,bogus",
            ],
            "--scenarios: ",
        ),
        (
            vec![
                "ab",
                "--server-a",
                "x",
                "--server-b",
                "y",
                "--target",
                "127.0.0.1:1",
                "--preset",
                "nosuch",
            ],
            "--preset nosuch: unknown preset",
        ),
    ] {
        let (_, code, err) = tcpdoctor_in(&dir, &args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // A side that never runs (its command fails every time) is a setup error, after the
    // report that shows each failure.
    let (r, code, err) = tcpdoctor_in(
        &dir,
        &[
            "ab",
            "--format",
            "json",
            "--command-a",
            "true",
            "--command-b",
            "exit 3",
            "--rounds",
            "3",
            "--warmup",
            "0",
            "--why-runs",
            "0",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("every run of B failed (the first: exit status: 3"),
        "{err}"
    );
    assert_eq!(r["figures"][0]["verdict"], "not_compared", "{r:#}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A command that leaves a process running after it exits (a server started in the
/// background and never stopped) has it stopped after each run, said in the report, so the
/// next run — the other side's — never meets it; nothing is left when `ab` ends.
#[test]
fn what_a_command_leaves_running_is_stopped_and_said() {
    let dir = scratch("ab-left");
    let marker = format!("{}.123", std::process::id() % 1000 + 7000);
    let a = format!("sleep {marker} & true");
    let (r, code, err) = tcpdoctor_in(
        &dir,
        &[
            "ab",
            "--format",
            "json",
            "--command-a",
            &a,
            "--command-b",
            "true",
            "--rounds",
            "3",
            "--warmup",
            "0",
            "--why-runs",
            "0",
        ],
    );
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("A's run left ") && err.contains("sleep"),
        "{err}"
    );
    let w = r["warnings"].as_array().expect("warnings");
    assert!(
        w.iter().any(|w| w
            .as_str()
            .is_some_and(|w| w.starts_with("A's runs left processes running"))),
        "{w:#?}"
    );
    // No process whose command line is that sleep is left.
    let left = running_with(&format!("sleep\0{marker}\0"));
    assert!(left.is_empty(), "still running: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Ctrl-C (SIGINT) during a gated comparison stops the run under way, prints the report of
/// the runs before it, never says `passed`, and exits 2.
#[test]
fn an_interrupted_comparison_is_never_a_pass() {
    use std::io::{BufRead, BufReader};
    let dir = scratch("ab-int");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args([
            "ab",
            "--format",
            "json",
            "--command-a",
            "sleep 0.2",
            "--command-b",
            "sleep 0.2",
            "--rounds",
            "20",
            "--warmup",
            "0",
            "--why-runs",
            "0",
            "--fail-if-slower",
        ])
        .current_dir(&dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start ab");
    let stderr = child.stderr.take().expect("stderr");
    let mut lines = BufReader::new(stderr).lines();
    // Interrupt once the 4th run has started (the first three are done).
    for line in lines.by_ref() {
        if line.expect("stderr line").contains("run 4/40") {
            break;
        }
    }
    // SAFETY: a signal to the child we started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    let out = child.wait_with_output().expect("ab ends");
    assert_eq!(out.status.code(), Some(2), "{rest:#?}");
    let r: Value = serde_json::from_slice(&out.stdout).expect("the report of the runs before");
    common::validate_with("ab-report.schema.json", &r);
    assert_eq!(r["result"], "failed", "{r:#}");
    // The signal lands in run 4, or a later one when this thread was slow to send it (a
    // loaded machine; CI saw run 5): the report covers exactly the runs before that one.
    let during: u64 = r["reasons"]
        .as_array()
        .expect("reasons")
        .iter()
        .find_map(|x| {
            let rest = x.as_str()?.strip_prefix("interrupted during run ")?;
            rest.split('/').next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no interrupted reason: {:#}", r["reasons"]));
    assert!(during >= 4, "{:#}", r["reasons"]);
    assert_eq!(
        r["runs"].as_array().map(Vec::len),
        Some(during as usize - 1),
        "{r:#}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Server mode: B's server accepts nothing (its listener's backlog completes the handshakes;
/// no request is ever read). Each of B's runs is a hang, stopped — `run` gets SIGINT and stops
/// its server — with the driver's socket recorded; the gate fails on B's hangs and on the
/// figures it could not compare; nothing is left running.
#[test]
fn a_server_that_never_answers_is_a_hang_in_server_mode() {
    let test = "a_server_that_never_answers_is_a_hang_in_server_mode";
    if !common::has_python3(test) {
        return;
    }
    let _one = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let dir = scratch("ab-mute");
    let port = free_port();
    let a = specimen(port, "--writes whole --lines 2");
    let marker = format!("mute-{port}");
    let b = format!(
        "python3 -c 'import socket,time; s=socket.create_server((\"127.0.0.1\",{port})); \
         time.sleep(300)' {marker}"
    );
    let target = format!("127.0.0.1:{port}");
    let out = dir.join("ab");
    let mut args = vec![
        "ab",
        "--format",
        "json",
        "--server-a",
        &a,
        "--server-b",
        &b,
        "--target",
        &target,
        "--requests",
        "10",
        "--rounds",
        "3",
        "--warmup",
        "0",
        "--hang-after",
        "3s",
        "--fail-if-slower",
        "--out",
        out.to_str().expect("utf-8"),
    ];
    args.extend_from_slice(SPECIMEN_LINE);
    let (r, code, err) = tcpdoctor_in(&dir, &args);
    assert_eq!(code, 1, "{err}");
    assert_eq!(r["hangs"], serde_json::json!({"a": 0, "b": 3}), "{err}");
    let hung = r["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .find(|x| x["outcome"]["state"] == "hang")
        .expect("a hung run");
    let driver = hung["outcome"]["sockets"]
        .as_array()
        .expect("sockets")
        .iter()
        .find(|s| {
            s["kind"] == "tcp"
                && s["endpoints"]
                    .as_str()
                    .is_some_and(|e| e.ends_with(&format!("→ 127.0.0.1:{port}")))
        })
        .unwrap_or_else(|| panic!("the driver's socket: {hung:#}"));
    // Its request was delivered (acknowledged by the server's kernel); no answer came.
    assert_eq!(driver["unsent_bytes"], 0, "{driver:#}");
    assert_eq!(r["result"], "failed");
    assert!(
        r["reasons"]
            .as_array()
            .expect("reasons")
            .iter()
            .any(|x| x == "B hung in 3 of 3 measured run(s)"),
        "{:#}",
        r["reasons"]
    );
    let left = running_with(&marker);
    assert!(left.is_empty(), "still running: {left:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
