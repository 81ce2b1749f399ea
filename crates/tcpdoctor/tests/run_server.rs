//! `run --server`: a full shell command line, and nothing it started is left running after
//! `run` — daemons that forked out of its process group included; `run`'s temporary files
//! are kept only when the run failed.

mod common;

use std::path::Path;
use std::process::Command;

use common::live::processes_with;
use common::run::{free_port, scratch, tcpdoctor_in, SPECIMEN_LINE};
use serde_json::Value;

/// `run --scenarios direct --requests 10` of `server` on `port`, files in `dir/files`.
fn run_server(dir: &Path, server: &str, port: u16, preset: &[&str]) -> (Value, i32, String) {
    run_server_n(dir, server, port, "10", preset)
}

/// As [`run_server`], with `requests` exchanges.
fn run_server_n(
    dir: &Path,
    server: &str,
    port: u16,
    requests: &str,
    preset: &[&str],
) -> (Value, i32, String) {
    let target = format!("127.0.0.1:{port}");
    let out = dir.join("files");
    let mut args = vec![
        "run",
        "--format",
        "json",
        "--server",
        server,
        "--target",
        &target,
        "--scenarios",
        "direct",
        "--requests",
        requests,
        "--out",
        out.to_str().expect("as in the report"),
    ];
    args.extend_from_slice(preset);
    tcpdoctor_in(dir, &args)
}

fn assert_stopped(port: u16, marker: &str) {
    assert!(
        std::net::TcpStream::connect(("127.0.0.1", port)).is_err(),
        "a server still listens on {port} after run exited"
    );
    let left = processes_with(marker);
    assert!(left.is_empty(), "left running after run: {left:?}");
}

/// `cd DIR && VAR=x ./srv` was run as `exec cd DIR && …` and failed.
#[test]
fn a_server_command_has_shell_semantics() {
    let dir = scratch("server-shell");
    std::fs::create_dir_all(dir.join("srv")).expect("dir");
    let port = free_port();
    let exe = env!("CARGO_BIN_EXE_tcpdoctor");
    let server = format!(
        "cd srv && SPECIMEN_MARK=shell-{port} {exe} specimen --listen 127.0.0.1:{port} \
         --writes whole --idle-timeout 60s && echo never"
    );
    let (r, code, err) = run_server(&dir, &server, port, SPECIMEN_LINE);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["scenarios"][0]["figures"]["exchanges"], 10, "{err}");
    assert_stopped(port, &format!("127.0.0.1:{port}"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server that daemonizes — a double fork into its own session (`setsid … &`), the way
/// daemons leave their process group — is waited for, driven, and stopped at the end.
#[test]
fn a_server_that_daemonizes_out_of_its_group_is_stopped() {
    let dir = scratch("server-daemon");
    let port = free_port();
    let exe = env!("CARGO_BIN_EXE_tcpdoctor");
    // The shell exits at once (status 0); the specimen runs in a new session, re-parented.
    let server = format!(
        "setsid {exe} specimen --listen 127.0.0.1:{port} --writes whole --idle-timeout 60s \
         >daemon.log 2>&1 &"
    );
    let (r, code, err) = run_server(&dir, &server, port, SPECIMEN_LINE);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["scenarios"][0]["figures"]["exchanges"], 10, "{err}");
    assert_daemon_counted(&r);
    assert_stopped(port, &format!("127.0.0.1:{port}"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The daemon's CPU is the server's: it is in the accounted tree (before, a daemon out of the
/// command's group and parentage counted 0 processes and 0 µs per request).
fn assert_daemon_counted(r: &Value) {
    let cpu = &r["scenarios"][0]["server_cpu"];
    assert!(
        cpu["processes"].as_u64() >= Some(1),
        "the daemon is counted: {cpu}"
    );
    assert!(
        cpu["per_request_us"].as_f64() > Some(0.0),
        "answering costs the daemon some CPU: {cpu}"
    );
}

/// `redis-server --daemonize yes`: the real daemon, stopped after run (it removes its pid
/// file when SIGTERM stops it cleanly).
#[test]
fn a_daemonizing_redis_server_is_stopped() {
    if Command::new("redis-server")
        .arg("--version")
        .output()
        .is_err()
    {
        common::skip_unless_required(
            "TCPDOCTOR_REQUIRE_TOOLS",
            "a_daemonizing_redis_server_is_stopped",
            "redis-server is not installed",
        );
        return;
    }
    let dir = scratch("server-redis");
    let port = free_port();
    let d = dir.display();
    let server = format!(
        "redis-server --port {port} --bind 127.0.0.1 --save '' --appendonly no \
         --daemonize yes --pidfile {d}/redis.pid --dir {d} --logfile {d}/redis.log"
    );
    let (r, code, err) = run_server(&dir, &server, port, &["--preset", "resp"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(r["scenarios"][0]["figures"]["exchanges"], 10, "{err}");
    assert_daemon_counted(&r);
    assert_stopped(port, &format!(":{port}"));
    assert!(
        !dir.join("redis.pid").exists(),
        "redis was not stopped cleanly"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `run` without --out: its directory under the temp dir is gone after a run that passed,
/// and kept, and named, after one that failed its gate.
#[test]
fn temporary_files_are_kept_only_when_the_run_failed() {
    let dir = scratch("server-tmp");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let port = free_port();
    let exe = env!("CARGO_BIN_EXE_tcpdoctor");
    let server = format!("{exe} specimen --listen 127.0.0.1:{port} --writes whole");
    let target = format!("127.0.0.1:{port}");
    let run = |extra: &[&str]| {
        let mut args = vec![
            "run",
            "--server",
            &server,
            "--target",
            &target,
            "--scenarios",
            "direct",
            "--requests",
            "5",
        ];
        args.extend_from_slice(SPECIMEN_LINE);
        args.extend_from_slice(extra);
        let out = Command::new(exe)
            .args(&args)
            .env("TMPDIR", &tmp)
            .current_dir(&dir)
            .output()
            .expect("run tcpdoctor");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let left = || -> Vec<String> {
        std::fs::read_dir(&tmp)
            .expect("tmp")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect()
    };

    let (code, err) = run(&[]);
    assert_eq!(code, 0, "{err}");
    assert!(left().is_empty(), "a passing run left {:?}", left());
    assert!(
        err.contains("are removed (keep them with --out DIR)"),
        "{err}"
    );

    let (code, err) = run(&["--check", "throughput>1000000000"]);
    assert_eq!(code, 1, "{err}");
    let kept = left();
    assert_eq!(kept.len(), 1, "{kept:?}");
    let kept = tmp.join(&kept[0]);
    assert!(kept.join("server.log").exists(), "{}", kept.display());
    assert!(
        err.contains(&format!("captures and logs kept in {}", kept.display())),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `demo` without --out: its temporary directory is removed when every case passed, and kept
/// and named when one did not.
#[test]
fn a_demo_leaves_its_temporary_files_only_when_it_failed() {
    let dir = scratch("demo-tmp");
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["demo", "--format", "json"])
        .env("TMPDIR", &dir)
        .current_dir(&dir)
        .output()
        .expect("run tcpdoctor demo");
    let err = String::from_utf8_lossy(&out.stderr);
    let left: Vec<_> = std::fs::read_dir(&dir)
        .expect("tmp")
        .flatten()
        .map(|e| e.path())
        .collect();
    if out.status.code() == Some(0) {
        assert!(left.is_empty(), "a passing demo left {left:?}; {err}");
        assert!(
            err.contains("are removed (keep them with --out DIR)"),
            "{err}"
        );
    } else {
        // A loaded machine may miss a case: then the files stay, and stderr says where.
        assert_eq!(left.len(), 1, "{left:?}; {err}");
        assert!(
            err.contains(&format!("captures and logs kept in {}", left[0].display())),
            "{err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Issue 15, "run uses it": each scenario says which options the server's accepted sockets
/// had, read from the live process, and a Nagle finding about the server's replies quotes it.
/// The per-line specimen has Nagle on; its `--nodelay` twin has it off.
#[test]
fn a_scenario_reports_the_options_of_the_servers_sockets() {
    let exe = env!("CARGO_BIN_EXE_tcpdoctor");
    // The fixed twin answers in microseconds: enough exchanges that its connection is open
    // while the sockets are read (a scenario over before any reading has no `server_sockets`).
    for (flags, off, n) in [
        ("--writes per-line", true, "10"),
        ("--writes per-line --nodelay", false, "3000"),
    ] {
        let dir = scratch("server-sockets");
        let port = free_port();
        let server = format!("{exe} specimen --listen 127.0.0.1:{port} {flags}");
        let (r, code, err) = run_server_n(&dir, &server, port, n, SPECIMEN_LINE);
        common::validate_with("run-report.schema.json", &r);
        let sc = &r["scenarios"][0];
        assert_eq!(sc["figures"]["exchanges"].to_string(), n, "{err}");
        let k = &sc["server_sockets"];
        assert!(k["accepted"].as_u64() >= Some(1), "{flags}: {k}");
        let (on, off_n) = (k["nodelay_on"].as_u64(), k["nodelay_off"].as_u64());
        assert_eq!(k["port"], port, "{k}");
        if off {
            assert_eq!(off_n, k["accepted"].as_u64(), "{flags}: {k}");
            let nagle = sc["findings"]
                .as_array()
                .expect("findings")
                .iter()
                .find(|f| f["kind"] == "nagle_delayed_ack")
                .unwrap_or_else(|| panic!("Nagle named with Nagle on: {sc:#}"));
            let facts = nagle["evidence"]["facts"].to_string();
            assert!(
                facts.contains("accepted sockets have TCP_NODELAY off"),
                "{facts}"
            );
            assert_eq!(code, 0, "{err}");
        } else {
            assert_eq!(on, k["accepted"].as_u64(), "{flags}: {k}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
