//! Where tracing is not possible — here a seccomp policy that refuses ptrace(2) with EPERM,
//! as a container's may (testdata/servers/no_ptrace.c) — tcpdoctor says so and carries on
//! without it (issue 27): `trace` runs the command untraced, `run` diagnoses from the capture
//! with its `syscalls` block saying why there are no calls, `inspect --trace` still inspects.

mod common;

use std::process::Command;

use common::run::{free_port, scratch};
use common::trace::compile;
use serde_json::Value;

const REASON: &str = "tcpdoctor runs under a seccomp policy (a container's) that forbids it";

#[test]
fn trace_runs_the_command_untraced_and_says_why() {
    let np = compile("no_ptrace");
    let out = Command::new(&*np)
        .arg(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["trace", "--", "sh", "-c", "echo ran; exit 3"])
        .output()
        .expect("no_ptrace");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ran\n");
    assert_eq!(out.status.code(), Some(3), "the command's status: {err}");
    assert!(
        err.contains(&format!("not traced: ptrace was refused: {REASON}")),
        "{err}"
    );
}

#[test]
fn run_diagnoses_from_the_capture_and_its_block_says_why_there_are_no_calls() {
    let test = "trace_refused_run";
    if !common::has_python3(test) {
        return;
    }
    let np = compile("no_ptrace");
    let dir = scratch(test);
    let port = free_port();
    let server = format!(
        "python3 {} {port} per-line 6",
        common::repo()
            .join("testdata/servers/asyncio_lines.py")
            .display()
    );
    let out = Command::new(&*np)
        .arg(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args([
            "run",
            "--format",
            "json",
            "--server",
            &server,
            "--target",
            &format!("127.0.0.1:{port}"),
            "--scenarios",
            "direct",
            "--requests",
            "20",
            "--out",
            dir.join("files").to_str().expect("utf-8"),
            "--preset",
            "line",
            "--param",
            "request=ROWS",
            "--param",
            "terminator=\\n",
            "--param",
            "until_line=^\\.\\r?$",
        ])
        .current_dir(&*dir)
        .output()
        .expect("no_ptrace");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains("the server runs untraced: ptrace was refused"),
        "{err}"
    );
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    common::validate_with("run-report.schema.json", &r);
    let sc = &r["scenarios"][0];
    let status = &sc["syscalls"]["status"];
    assert_eq!(status["state"], "unavailable", "{status:#}");
    assert!(
        status["reason"]
            .as_str()
            .is_some_and(|w| w.contains(REASON)),
        "{status:#}"
    );
    // The capture still diagnoses the per-line server.
    assert!(
        sc["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .any(|f| f["kind"] == "nagle_delayed_ack"),
        "{:#}",
        sc["findings"]
    );
}

#[test]
fn inspect_still_inspects_when_it_may_not_attach() {
    let np = compile("no_ptrace");
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let _c = std::net::TcpStream::connect(l.local_addr().unwrap()).expect("connect");
    let out = Command::new(&*np)
        .arg(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args([
            "inspect",
            "--pid",
            &std::process::id().to_string(),
            "--duration",
            "0",
            "--trace",
            "100ms",
            "--format",
            "json",
        ])
        .output()
        .expect("no_ptrace");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    common::validate_with("inspect-report.schema.json", &r);
    let t = &r["syscalls"][0]["calls"]["status"];
    assert_eq!(t["state"], "unavailable", "{t:#}");
    assert!(
        t["reason"]
            .as_str()
            .is_some_and(|w| w.contains("attaching to process")),
        "{t:#}"
    );
    assert!(
        r["observation"]["processes"][0]["sockets"]
            .as_array()
            .is_some_and(|s| !s.is_empty()),
        "the sockets were still read"
    );
}
