//! Helpers of the `run` end-to-end tests: start `tcpdoctor run` against specimen servers and
//! read its JSON (validated against schema/run-report.schema.json).

use std::path::Path;
use std::process::Command;

use serde_json::Value;

use super::validate_with;

/// `tcpdoctor ARGS` in `dir`, with `dir` as its `TMPDIR` too: what the command keeps there (a
/// failed `run`'s captures and logs) goes with the test's scratch directory.
pub fn tcpdoctor_in(dir: &Path, args: &[&str]) -> (Value, i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(args)
        .current_dir(dir)
        .env("TMPDIR", dir)
        .output()
        .expect("run tcpdoctor");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().unwrap_or(-1);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    if !v.is_null() {
        validate_with("run-report.schema.json", &v);
    }
    (v, code, stderr)
}

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// A test's directory (its scripts, `--out`, and the `TMPDIR` of the commands run in it by
/// [`tcpdoctor_in`]), removed when the test is done; kept when it fails.
pub fn scratch(name: &str) -> super::Scratch {
    super::Scratch::new(name)
}

/// The `line` preset set up for the specimen's protocol: `LIST`, a reply ended by a `.` line.
pub const SPECIMEN_LINE: &[&str] = &[
    "--preset",
    "line",
    "--param",
    "request=LIST",
    "--param",
    "terminator=\\n",
    "--param",
    "until_line=^\\.\\r?$",
];

/// `run --server SERVER --target TARGET --ready-timeout 1s` for a server that will never accept
/// on TARGET: returns run's exit code and stderr.
pub fn run_never_ready(dir: &Path, server: &str, target: &str) -> (i32, String) {
    let (_, code, err) = tcpdoctor_in(
        dir,
        &[
            "run",
            "--server",
            server,
            "--target",
            target,
            "--preset",
            "echo",
            "--ready-timeout",
            "1s",
            "--out",
            dir.to_str().expect("as in the report"),
        ],
    );
    (code, err)
}

/// `run` against a specimen it starts itself; `writes` is per-line or whole.
pub fn run_specimen(dir: &Path, writes: &str, extra: &[&str]) -> (Value, i32, String) {
    run_specimen_with(dir, writes, "", extra)
}

/// [`run_specimen`], with more flags for the specimen (`server_flags`).
pub fn run_specimen_with(
    dir: &Path,
    writes: &str,
    server_flags: &str,
    extra: &[&str],
) -> (Value, i32, String) {
    let port = free_port();
    let exe = env!("CARGO_BIN_EXE_tcpdoctor");
    let server = format!(
        "{exe} specimen --listen 127.0.0.1:{port} --writes {writes} --idle-timeout 60s {server_flags}"
    );
    let target = format!("127.0.0.1:{port}");
    let out = dir.join(format!("files-{writes}"));
    let mut args = vec![
        "run",
        "--format",
        "json",
        "--server",
        &server,
        "--target",
        &target,
        "--requests",
        "30",
        "--out",
        out.to_str().expect("as in the report"),
    ];
    args.extend_from_slice(SPECIMEN_LINE);
    args.extend_from_slice(extra);
    let r = tcpdoctor_in(dir, &args);
    // The server was stopped: nothing listens on its port any more.
    assert!(
        std::net::TcpStream::connect(&target).is_err(),
        "the server on {target} is still running after run exited"
    );
    r
}

pub fn scenario<'a>(r: &'a Value, name: &str) -> &'a Value {
    r["scenarios"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == name))
        .unwrap_or_else(|| panic!("no scenario {name}"))
}

pub fn kinds(s: &Value) -> Vec<String> {
    s["findings"]
        .as_array()
        .expect("as in the report")
        .iter()
        .map(|f| f["kind"].as_str().expect("as in the report").to_string())
        .collect()
}

pub fn live_capture_possible() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}
