//! `busy_poll` from `run` against real servers: a server that polls its send queue until the
//! driver's ACK empties it is named (the built-in specimen and a CPython one, reply in two
//! writes with Nagle on, so each wait is the driver's delayed ACK); servers that work, warm up
//! or wake on timers are not (Node.js, a JVM, CPython asyncio on 1 ms timers), run after run.
//! The servers are in testdata/servers; those that need node or java skip without them unless
//! TCPDOCTOR_REQUIRE_TOOLS is set (CI installs them).

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::run::{free_port, scratch, tcpdoctor_in, SPECIMEN_LINE};
use serde_json::Value;

fn server_file(name: &str) -> String {
    common::repo()
        .join("testdata/servers")
        .join(name)
        .display()
        .to_string()
}

/// Whether `tool --version` runs; else the test skips (or fails where CI requires the tools).
fn has(tool: &str, version_flag: &str, test: &str) -> bool {
    if Command::new(tool).arg(version_flag).output().is_ok() {
        return true;
    }
    common::skip_unless_required(
        "TCPDOCTOR_REQUIRE_TOOLS",
        test,
        &format!("{tool} is not installed"),
    );
    false
}

/// `run --scenarios direct` of `server` (`{port}` replaced by a free port) with `preset`
/// flags and `requests` exchanges; returns the scenario's JSON.
fn run(dir: &Path, server: &str, preset: &[&str], requests: u64) -> Value {
    run_with(dir, server, preset, requests, &[])
}

/// As [`run`], with more flags (`--no-trace`).
fn run_with(dir: &Path, server: &str, preset: &[&str], requests: u64, extra: &[&str]) -> Value {
    let port = free_port();
    let server = server.replace("{port}", &port.to_string());
    let target = format!("127.0.0.1:{port}");
    let out = dir.join(format!("files-{port}"));
    let requests = requests.to_string();
    let mut args = vec![
        "run",
        "--format",
        "json",
        "--server",
        &server,
        "--target",
        &target,
        "--scenarios",
        "direct",
        "--requests",
        &requests,
        "--out",
        out.to_str().expect("utf-8 path"),
    ];
    args.extend_from_slice(preset);
    args.extend_from_slice(extra);
    let (r, code, err) = tcpdoctor_in(dir, &args);
    assert_eq!(code, 0, "{server}: {err}");
    r["scenarios"][0].clone()
}

fn busy_poll(s: &Value) -> Option<&Value> {
    s["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["kind"] == "busy_poll")
}

/// What the rule measured, for a failure to show.
fn measured(s: &Value) -> String {
    format!(
        "server_cpu {} findings {:#}",
        s["server_cpu"], s["findings"]
    )
}

/// Named, with the measurements it rests on quoted: traced, the polling calls (rule 7);
/// untraced, the CPU along the driver's timeline.
fn assert_named(s: &Value, who: &str) {
    let f = busy_poll(s).unwrap_or_else(|| panic!("{who}: no busy_poll: {}", measured(s)));
    let facts = f["evidence"]["facts"].to_string();
    if s["syscalls"]["status"]["state"] == "traced" {
        for quoted in [
            "ioctl(SIOCOUTQ)",
            "per request, while its send queue was non-empty",
            "the trace stops the server at each of these calls",
        ] {
            assert!(facts.contains(quoted), "{who}: {quoted:?} not in {facts}");
        }
        let polls = &s["syscalls"]["polling"];
        assert!(
            polls.is_object(),
            "{who}: the trace's verdict: {:#}",
            s["syscalls"]
        );
        return;
    }
    for quoted in [
        "was awake (on a CPU or ready for one)",
        "in the first half of that time",
        "voluntary context switches per request",
        "µs of CPU per request",
    ] {
        assert!(facts.contains(quoted), "{who}: {quoted:?} not in {facts}");
    }
    let v = &f["evidence"]["values"];
    assert!(
        v["waiting_first_half_awake_share"].as_f64() >= Some(0.5)
            && v["waiting_second_half_awake_share"].as_f64() >= Some(0.5),
        "{who}: {v:#}"
    );
    let rests_on = f["evidence"]["rests_on"].to_string();
    assert!(
        rests_on.contains("every 1 ms") && rests_on.contains("voluntary_ctxt_switches"),
        "{who}: {rests_on}"
    );
}

fn assert_not_named(s: &Value, who: &str) {
    assert!(busy_poll(s).is_none(), "{who}: {}", measured(s));
    // The server's CPU was read: the rule had its data and said no.
    assert!(
        s["server_cpu"]["per_request_us"].as_f64() > Some(0.0),
        "{who}: {}",
        measured(s)
    );
}

#[test]
fn a_server_polling_its_send_queue_while_the_ack_is_delayed_is_named() {
    let dir = scratch("busy-specimen");
    let exe = env!("CARGO_BIN_EXE_tcpdoctor");
    // One reply line and the terminator, one write each, Nagle on: the terminator waits for
    // the first line's ACK, which the driver delays; the server polls SIOCOUTQ all along.
    let spin = format!(
        "{exe} specimen --listen 127.0.0.1:{{port}} --lines 1 --writes per-line --drain spin"
    );
    let s = run(&dir, &spin, SPECIMEN_LINE, 30);
    assert_named(&s, "specimen, reply in two writes, traced");
    let s = run_with(&dir, &spin, SPECIMEN_LINE, 30, &["--no-trace"]);
    assert_named(&s, "specimen, reply in two writes, untraced");
    // Its fixed twin writes the same way and trusts the kernel to send the queue.
    let fixed = spin.replace("--drain spin", "--drain none");
    let s = run(&dir, &fixed, SPECIMEN_LINE, 30);
    assert_not_named(&s, "specimen, no polling");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cpython_server_polling_siocoutq_is_named_and_its_twin_that_trusts_the_kernel_is_not() {
    let test =
        "a_cpython_server_polling_siocoutq_is_named_and_its_twin_that_trusts_the_kernel_is_not";
    if !has("python3", "--version", test) {
        return;
    }
    let dir = scratch("busy-cpython-spin");
    let spinner = format!("python3 {} {{port}}", server_file("siocoutq_spinner.py"));
    let s = run(&dir, &spinner, SPECIMEN_LINE, 30);
    assert_named(&s, "CPython SIOCOUTQ spinner, traced");
    // Its one connection came from a blocking accept() entered before the scenario's trace
    // window began: it is still the window's, and the stall's frames are joined to its calls.
    let nagle = s["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["kind"] == "nagle_delayed_ack")
        .unwrap_or_else(|| panic!("the spinner's replies stall: {:#}", s["findings"]));
    let facts = nagle["evidence"]["facts"].to_string();
    assert!(
        facts.contains("the bytes of sendto() call") && !facts.contains("not be joined"),
        "{facts}"
    );
    let s = run_with(&dir, &spinner, SPECIMEN_LINE, 30, &["--no-trace"]);
    assert_named(&s, "CPython SIOCOUTQ spinner, untraced");
    let s = run(&dir, &format!("{spinner} trust"), SPECIMEN_LINE, 30);
    assert_not_named(&s, "CPython, the same writes, no polling");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server that sends a header, computes the rest in user space (no system call, no sleep)
/// and then sends it: the driver sees the same gap mid-answer as for a spinner, but nothing
/// in the capture was held for an ACK, so the gap is work, and busy_poll is not named (it was,
/// critical, when the middle of every answer counted as waiting).
#[test]
fn a_server_computing_the_rest_of_its_answer_is_not_named() {
    let test = "a_server_computing_the_rest_of_its_answer_is_not_named";
    if !has("python3", "--version", test) {
        return;
    }
    let dir = scratch("busy-compute-rows");
    let server = format!("python3 {} {{port}}", server_file("compute_rows.py"));
    for _ in 0..2 {
        let s = run(&dir, &server, SPECIMEN_LINE, 100);
        assert_not_named(&s, "a CPython server computing each answer's rest");
    }
    // Nagle on and ~20 ms of computing: the rest, written after it, waits for the client's
    // delayed ACK (a nagle_delayed_ack hold, so the gap's time could count as waiting), but
    // the server sleeps in `read` by the time the hold ends: its computing was work.
    let held = format!(
        "python3 {} {{port}} 220000 nagle",
        server_file("compute_rows.py")
    );
    let s = run(&dir, &held, SPECIMEN_LINE, 60);
    assert!(
        s["findings"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f["kind"] == "nagle_delayed_ack")),
        "the rest is held for the ACK: {}",
        s["findings"]
    );
    assert_not_named(&s, "a CPython server computing, then held by Nagle");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_cpython_asyncio_server_writing_rows_on_1ms_timers_is_not_named() {
    let test = "a_cpython_asyncio_server_writing_rows_on_1ms_timers_is_not_named";
    if !has("python3", "--version", test) {
        return;
    }
    let dir = scratch("busy-asyncio");
    let server = format!("python3 {} {{port}}", server_file("asyncio_timer_rows.py"));
    for i in 0..2 {
        let s = run(&dir, &server, SPECIMEN_LINE, 60);
        assert_not_named(&s, &format!("asyncio on 1 ms timers, run {i}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_node_http_server_is_not_named_run_after_run() {
    let test = "a_node_http_server_is_not_named_run_after_run";
    if !has("node", "--version", test) {
        return;
    }
    let dir = scratch("busy-node");
    let server = format!("node {} {{port}}", server_file("node_http.js"));
    // The default request count, where its JIT warm-up weighs most.
    for i in 0..3 {
        let s = run(&dir, &server, &["--preset", "http1"], 200);
        assert_not_named(&s, &format!("Node.js, run {i}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The JVM line server compiled once into `dir` (`javac`), so each run starts the JVM only.
fn jvm_server(dir: &Path) -> Option<String> {
    let classes: PathBuf = dir.join("classes");
    let ok = Command::new("javac")
        .args(["-d", classes.to_str()?, &server_file("LineServer.java")])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "javac LineServer.java");
    Some(format!(
        "java -cp {} LineServer {{port}}",
        classes.display()
    ))
}

#[test]
fn a_jvm_server_is_not_named_run_after_run() {
    let test = "a_jvm_server_is_not_named_run_after_run";
    if !has("java", "-version", test) || !has("javac", "-version", test) {
        return;
    }
    let dir = scratch("busy-jvm");
    let server = jvm_server(&dir).expect("utf-8 path");
    for i in 0..3 {
        let s = run(&dir, &server, SPECIMEN_LINE, 200);
        assert_not_named(&s, &format!("JVM, run {i}"));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The two C servers of testdata/servers under `run`, traced (its default): the one polling
/// ioctl(SIOCOUTQ) until its send queue drains is named by that call, and its twin, which
/// spends the same wait computing in user space, is not — the trace shows its CPU went into
/// real work, not into asking the kernel.
#[test]
fn traced_the_c_siocoutq_spinner_is_named_by_its_calls_and_its_working_twin_is_not() {
    let dir = scratch("busy-c-servers");
    let spin = common::trace::compile("siocoutq_server");
    let work = common::trace::compile("work_server");
    let s = run(
        &dir,
        &format!("{} {{port}}", spin.display()),
        SPECIMEN_LINE,
        30,
    );
    assert_named(&s, "C SIOCOUTQ spinner, traced");
    let s = run(
        &dir,
        &format!("{} {{port}}", work.display()),
        SPECIMEN_LINE,
        30,
    );
    assert_not_named(&s, "C server computing, traced");
    assert_eq!(
        s["syscalls"]["polling"]["verdict"], "real_work",
        "the trace says why: {:#}",
        s["syscalls"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
