//! Helpers for the `tcpdoctor trace` tests: test programs compiled from testdata/servers at
//! test time, the trace report's per-socket call counts (read in ONE place, [`sockets`], so a
//! change of the report's shape is adapted here), and strace as the independent witness.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Scratch;

/// A C program of testdata/servers compiled with `cc` into a scratch directory of its own.
pub struct Compiled {
    pub path: PathBuf,
    _dir: Scratch,
}

impl std::ops::Deref for Compiled {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.path
    }
}

/// `cc -O2 -pthread testdata/servers/NAME.c -o NAME` (cc is there wherever Rust links).
pub fn compile(name: &str) -> Compiled {
    let dir = Scratch::new(&format!("cc-{name}"));
    let src = super::repo().join(format!("testdata/servers/{name}.c"));
    let path = dir.join(name);
    let out = Command::new("cc")
        .args(["-O2", "-Wall", "-pthread", "-o"])
        .arg(&path)
        .arg(&src)
        .output()
        .expect("run cc");
    assert!(
        out.status.success(),
        "cc {}: {}",
        src.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Compiled { path, _dir: dir }
}

/// One TCP socket of a trace report: the process that used it and its call counts, labelled
/// as the report labels them ("sendto", "ioctl(SIOCOUTQ)", "setsockopt(TCP_NODELAY)", …).
#[derive(Debug, Clone)]
pub struct SocketCounts {
    pub pid: u32,
    /// The peer's address: None for a listener.
    pub remote: Option<String>,
    pub counts: BTreeMap<String, u64>,
}

impl SocketCounts {
    /// Calls of `name`: the label `name` itself and every `name(DETAIL)` label.
    pub fn count(&self, name: &str) -> u64 {
        count_in(&self.counts, name)
    }
}

fn count_in(counts: &BTreeMap<String, u64>, name: &str) -> u64 {
    let detailed = format!("{name}(");
    counts
        .iter()
        .filter(|(k, _)| *k == name || k.starts_with(&detailed))
        .map(|(_, v)| v)
        .sum()
}

/// The TCP sockets of a `tcpdoctor trace --format json` report with their counts. THE one
/// place that knows the report's shape: the run schema's `syscalls` block (`sockets[]`, each
/// with its `pid` and `counts` by label; the readiness waits are per process, not here).
pub fn sockets(report: &Value) -> Vec<SocketCounts> {
    super::validate_with_def("run-report.schema.json", "syscalls", report);
    report["sockets"]
        .as_array()
        .unwrap_or_else(|| panic!("a trace report has sockets: {report}"))
        .iter()
        .map(|s| {
            let pid = s["pid"].as_u64().expect("pid") as u32;
            let counts = s["counts"]
                .as_object()
                .unwrap_or_else(|| panic!("counts: {s}"))
                .iter()
                .map(|(k, v)| (k.clone(), v.as_u64().expect("a count")))
                .collect();
            let remote = s["remote"].as_str().map(str::to_string);
            SocketCounts {
                pid,
                remote,
                counts,
            }
        })
        .collect()
}

/// Calls of `name` (with every `name(DETAIL)`) summed over all TCP sockets of the report.
pub fn total(report: &Value, name: &str) -> u64 {
    sockets(report).iter().map(|s| s.count(name)).sum()
}

/// The command line of `tcpdoctor trace --format json -o REPORT -- COMMAND…`.
pub fn trace_cmd(report: &Path, command: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"));
    c.args(["trace", "--format", "json", "-o"])
        .arg(report)
        .arg("--")
        .args(command)
        .current_dir(super::repo());
    c
}

/// Runs COMMAND to its end under `tcpdoctor trace`; its exit status, stderr and the report
/// (None when tcpdoctor wrote none).
pub fn trace_run(command: &[&str]) -> (ExitStatus, String, Option<Value>) {
    let dir = Scratch::new("trace");
    let report = dir.join("report.json");
    let out = trace_cmd(&report, command)
        .stdin(Stdio::null())
        .output()
        .expect("run tcpdoctor trace");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = std::fs::read(&report).ok().map(|b| {
        serde_json::from_slice(&b)
            .unwrap_or_else(|e| panic!("the trace report is not JSON ({e}); stderr: {stderr}"))
    });
    (out.status, stderr, json)
}

/// A server started under `tcpdoctor trace`, once it printed "listening on ADDR pid PID".
pub struct TracedServer {
    pub tcpdoctor: Child,
    pub addr: SocketAddr,
    pub pid: u32,
    pub report: PathBuf,
    pub stdout: BufReader<ChildStdout>,
    _dir: Scratch,
}

/// Starts `tcpdoctor trace -- SERVER ARGS…` and reads the server's readiness line (no sleep).
pub fn traced_server(server: &Path, args: &[&str]) -> TracedServer {
    let dir = Scratch::new("traced-server");
    let report = dir.join("report.json");
    let mut command = vec![server.to_str().expect("utf-8 path")];
    command.extend_from_slice(args);
    let mut tcpdoctor = trace_cmd(&report, &command)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn tcpdoctor trace");
    let mut stdout = BufReader::new(tcpdoctor.stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout
        .read_line(&mut line)
        .expect("read the readiness line");
    let (addr, pid) = parse_listening(&line).unwrap_or_else(|| {
        let _ = tcpdoctor.kill();
        let _ = tcpdoctor.wait();
        panic!("no readiness line from {}: {line:?}", server.display())
    });
    TracedServer {
        tcpdoctor,
        addr,
        pid,
        report,
        stdout,
        _dir: dir,
    }
}

/// "listening on 127.0.0.1:PORT pid PID".
fn parse_listening(line: &str) -> Option<(SocketAddr, u32)> {
    let rest = line.trim().strip_prefix("listening on ")?;
    let (addr, pid) = rest.split_once(" pid ")?;
    Some((addr.parse().ok()?, pid.parse().ok()?))
}

/// Waits at most `limit` for `child`; kills it and fails when it is still running then.
pub fn wait_bounded(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            return s;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still running after {limit:?}: it hangs");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether process `pid` is gone (no /proc entry, or a zombie: it ran its last instruction).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the command name's closing parenthesis.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| matches!(rest.trim_start().chars().next(), Some('Z' | 'X'))),
    }
}

/// Whether strace can run here; when it cannot, the test says SKIPPED — or fails when
/// TCPDOCTOR_REQUIRE_TOOLS is set (.ci/run installs strace).
pub fn strace_available(test: &str) -> bool {
    let ok = Command::new("strace")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        super::skip_unless_required(
            "TCPDOCTOR_REQUIRE_TOOLS",
            test,
            "strace is not installed (.ci/run installs it)",
        );
    }
    ok
}

/// Runs COMMAND under `strace -f -yy -e trace=CALLS` and counts, per call name, the calls made
/// on a TCP socket (strace's `-yy` decoration `N<TCP:[…]>` on the first argument). A call
/// strace shows as `<unfinished ...>` is counted once, at its start line. `accept4` counts as
/// `accept` (the report's name). Fails the test when COMMAND does not exit 0.
pub fn strace_tcp_counts(command: &[&str], calls: &[&str]) -> BTreeMap<String, u64> {
    let dir = Scratch::new("strace");
    let log = dir.join("strace.log");
    let out = Command::new("strace")
        .args(["-f", "-yy", "-qq", "-e"])
        .arg(format!("trace={}", calls.join(",")))
        .arg("-o")
        .arg(&log)
        .args(command)
        .stdin(Stdio::null())
        .output()
        .expect("run strace");
    assert!(
        out.status.success(),
        "strace {command:?}: {:?} {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&log).expect("strace log");
    let mut counts = BTreeMap::new();
    for line in text.lines() {
        // "PID name(FD<TCP:[…]>, …" — resumed lines start with "<... name resumed>".
        // strace pads the pid to five columns: "7613  accept(…" has two spaces, "12345 accept(…"
        // one.
        let Some((_, call)) = line.split_once(' ') else {
            continue;
        };
        let call = call.trim_start();
        let Some((name, args)) = call.split_once('(') else {
            continue;
        };
        if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        let first = args.split(',').next().unwrap_or("");
        if first.contains("<TCP:[") || first.contains("<TCPv6:[") {
            let name = if name == "accept4" { "accept" } else { name };
            *counts.entry(name.to_string()).or_insert(0) += 1;
        }
    }
    counts
}
