//! `tcpdoctor inspect` against real processes over loopback: specimen servers driven by a
//! client, a Python asyncio server, another user's process, processes and sockets that go
//! away while sampled. Assertions are on what was read (options, tcp_info samples, process
//! counters), not on findings: the rules are the core's, tested there.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::Value;

/// A child killed (and reaped) when dropped, so a failing test leaves no server behind.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn pid(&self) -> String {
        self.child.id().to_string()
    }
}

/// Starts `cmd` and waits for its `listening 127.0.0.1:PORT` line on stdout.
fn start(mut cmd: Command) -> Server {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn server");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("read readiness line");
    let port = line
        .trim()
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no `listening ADDR:PORT` line: {line:?}"));
    Server { child, port }
}

/// A Python server running `script`, started as [`start`] does; None without python3.
fn python_server(test: &str, script: &str) -> Option<Server> {
    if !common::has_python3(test) {
        return None;
    }
    let mut cmd = Command::new("python3");
    cmd.args(["-c", script]);
    Some(start(cmd))
}

fn specimen(args: &[&str]) -> Server {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"));
    cmd.args(["specimen", "--idle-timeout", "60s"]).args(args);
    start(cmd)
}

/// One `line` request and its whole reply (ended by a `.` line).
fn exchange(s: &mut TcpStream) -> std::io::Result<()> {
    s.write_all(b"LIST\n")?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b".\r\n") {
        let n = s.read(&mut buf)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        got.extend_from_slice(&buf[..n]);
    }
    Ok(())
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    s
}

/// A client exchanging with the server until stopped (at most 100 000 exchanges), pausing
/// `pause` between exchanges.
fn drive(port: u16, pause: Duration) -> (Arc<AtomicBool>, JoinHandle<u64>) {
    let stop = Arc::new(AtomicBool::new(false));
    let mut s = connect(port);
    exchange(&mut s).expect("first exchange");
    let flag = Arc::clone(&stop);
    let h = std::thread::spawn(move || {
        let mut n = 1;
        while !flag.load(Ordering::SeqCst) && n < 100_000 {
            if exchange(&mut s).is_err() {
                break;
            }
            n += 1;
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
        }
        n
    });
    (stop, h)
}

/// Validates an inspect report against schema/inspect-report.schema.json.
fn validate(report: &Value) {
    common::validate_with("inspect-report.schema.json", report);
}

/// Runs `tcpdoctor inspect --format json ARGS`: the report (Null when none), exit code, stderr.
fn inspect(args: &[&str]) -> (Value, i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .arg("inspect")
        .args(["--format", "json"])
        .args(args)
        .output()
        .expect("run inspect");
    parse(out)
}

fn parse(out: std::process::Output) -> (Value, i32, String) {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let code = out.status.code().unwrap_or(-1);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    if !report.is_null() {
        validate(&report);
    }
    (report, code, stderr)
}

/// Ends a sampling `inspect` with SIGINT (it stops and prints what it read) and returns its
/// report; exit 0 asserted. Its stdout is read before the rest of its stderr: a report of
/// thousands of samples fills the pipe before inspect can end.
fn interrupt(child: Child, mut stderr: BufReader<std::process::ChildStderr>) -> Value {
    // SAFETY: SIGINT to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("inspect output");
    let mut rest = String::new();
    let _ = stderr.read_to_string(&mut rest);
    let (r, code, _) = parse(out);
    assert_eq!(code, 0, "{rest}");
    r
}

fn process(report: &Value) -> &Value {
    &report["observation"]["processes"][0]
}

/// The process's sockets of `role` (listener, accepted, connected).
fn sockets<'a>(report: &'a Value, role: &str) -> Vec<&'a Value> {
    process(report)["sockets"]
        .as_array()
        .expect("sockets")
        .iter()
        .filter(|s| s["role"] == role)
        .collect()
}

fn accepted(report: &Value) -> &Value {
    sockets(report, "accepted")
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no accepted socket in {report:#}"))
}

fn n(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

#[test]
fn a_per_line_server_has_nagle_on_and_is_caught_holding_a_write() {
    let server = specimen(&["--writes", "per-line"]);
    let (stop, client) = drive(server.port, Duration::ZERO);
    let (r, code, err) = inspect(&["--pid", &server.pid(), "--duration", "2s"]);
    stop.store(true, Ordering::SeqCst);
    client.join().expect("client");
    assert_eq!(code, 0, "{err}");
    let listener = &sockets(&r, "listener")[0];
    let port = format!(":{}", server.port);
    assert!(
        listener["local"]
            .as_str()
            .is_some_and(|l| l.ends_with(&port)),
        "{listener:#}"
    );
    let s = accepted(&r);
    assert_eq!(s["options"]["nodelay"], false, "{s:#}");
    assert_eq!(s["closed"], false);
    let samples = s["samples"].as_array().expect("samples");
    assert!(samples.len() > 1, "{} samples", samples.len());
    // Nagle holding the rest of a reply until the client's delayed ACK: one segment in flight
    // and bytes written but not sent. It lasts up to 40 ms per exchange: 10 ms sampling sees it.
    let held = samples
        .iter()
        .filter(|x| n(&x["unacked"]) > 0 && n(&x["notsent_bytes"]) > 0)
        .count();
    assert!(held > 0, "no sample caught a held write: {samples:#?}");
    // The report's own rule (room in the congestion window and, on 5.4+, in the peer's
    // window for the waiting bytes) counts holds on the real socket too.
    let at = process(&r)["sockets"]
        .as_array()
        .expect("sockets")
        .iter()
        .position(|x| x["inode"] == s["inode"])
        .expect("the accepted socket");
    let summary = &r["processes"][0]["sockets"][at];
    assert!(n(&summary["held_samples"]) > 0, "{summary:#}");
    if samples[0]["snd_wnd_bytes"].is_null() {
        eprintln!("note: this kernel does not report tcpi_snd_wnd (before 5.4)");
    }
    let (first, last) = (&samples[0], &samples[samples.len() - 1]);
    assert!(
        n(&last["data_segs_in"]) > n(&first["data_segs_in"]),
        "requests arrived"
    );
    assert!(n(&last["ato_us"]) > 0 && n(&last["snd_mss"]) > 0);
    let p = process(&r);
    assert!(n(&p["last"]["cpu_ns"]) >= n(&p["first"]["cpu_ns"]));
    assert!(p["options_refused"].is_null(), "{p:#}");
}

#[test]
fn nodelay_is_read_from_the_live_socket() {
    let server = specimen(&["--nodelay"]);
    let mut c = connect(server.port);
    exchange(&mut c).expect("exchange");
    let (r, code, err) = inspect(&["--pid", &server.pid(), "--duration", "0"]);
    assert_eq!(code, 0, "{err}");
    let s = accepted(&r);
    assert_eq!(s["options"]["nodelay"], true, "{s:#}");
    assert_eq!(s["options"]["cork"], false);
    assert_eq!(
        s["samples"].as_array().map(Vec::len),
        Some(1),
        "one snapshot"
    );
    // --out writes the same report to a file, nothing to stdout.
    let dir = common::live::OpenDir::new("inspect-out");
    let path = dir.path("report.json");
    let path_arg = path.to_str().expect("utf-8 path");
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args([
            "inspect",
            "--format",
            "json",
            "--duration",
            "0",
            "--out",
            path_arg,
        ])
        .args(["--pid", &server.pid()])
        .output()
        .expect("run inspect --out");
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stdout.is_empty());
    let written: Value =
        serde_json::from_slice(&std::fs::read(&path).expect("report file")).expect("JSON");
    validate(&written);
    assert_eq!(accepted(&written)["options"]["nodelay"], true);
}

#[test]
fn a_send_buffer_set_by_hand_is_reported_fixed_with_its_evidence() {
    let fixed = specimen(&["--sndbuf", "65536"]);
    let auto = specimen(&[]);
    let mut c1 = connect(fixed.port);
    exchange(&mut c1).expect("exchange");
    let mut c2 = connect(auto.port);
    exchange(&mut c2).expect("exchange");
    let (r, code, err) = inspect(&["--pid", &fixed.pid(), "--duration", "0"]);
    assert_eq!(code, 0, "{err}");
    let o = &accepted(&r)["options"];
    assert_eq!(
        n(&o["sndbuf_bytes"]),
        131_072,
        "the kernel doubles 65536: {o:#}"
    );
    assert_eq!(o["sndbuf"]["setting"], "fixed", "{o:#}");
    assert!(o["sndbuf"]["evidence"]
        .as_str()
        .is_some_and(|e| e.contains("65536")));
    let (r, code, err) = inspect(&["--pid", &auto.pid(), "--duration", "0"]);
    assert_eq!(code, 0, "{err}");
    let o = &accepted(&r)["options"];
    assert_ne!(
        o["sndbuf"]["setting"], "fixed",
        "autotuned, never fixed: {o:#}"
    );
}

#[test]
fn a_python_asyncio_server_has_nodelay_on() {
    let script = r#"
import asyncio
async def handle(reader, writer):
    while await reader.readline():
        writer.write(b"200 ok\r\n.\r\n")
        await writer.drain()
    writer.close()
async def main():
    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    print("listening 127.0.0.1:%d" % server.sockets[0].getsockname()[1], flush=True)
    await asyncio.sleep(60)
asyncio.run(main())
"#;
    let Some(server) = python_server("a_python_asyncio_server_has_nodelay_on", script) else {
        return;
    };
    let mut c = connect(server.port);
    exchange(&mut c).expect("exchange");
    let (r, code, err) = inspect(&["--pid", &server.pid(), "--duration", "0"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(accepted(&r)["options"]["nodelay"], true, "{r:#}");
}

#[test]
fn a_pid_that_does_not_exist_is_a_clear_error() {
    let (r, code, err) = inspect(&["--pid", "999999999"]);
    assert_eq!(code, 2, "{err}");
    assert!(r.is_null());
    assert!(err.contains("pid 999999999: no such process"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn a_process_that_exits_while_sampled_keeps_what_was_read() {
    let mut server = specimen(&["--exit-after", "1"]);
    let mut c = connect(server.port);
    // Answered before inspect starts, so the server has accepted the connection by its first
    // sample (a connect returns before the server's accept: a loaded machine sampled a
    // process with no accepted socket yet, which then exited before the next sample).
    exchange(&mut c).expect("the one request answered");
    let mut inspect = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["inspect", "--format", "json", "--duration", "60s"])
        .args(["--pid", &server.pid()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn inspect");
    let mut stderr = wait_for_sampling(&mut inspect);
    // The next request makes the specimen exit (--exit-after 1).
    let _ = exchange(&mut c);
    let _ = server.child.wait();
    // Every process gone: inspect ends by itself, long before its 60 s.
    let mut err = String::new();
    let _ = stderr.read_to_string(&mut err);
    let (r, code, _) = parse(inspect.wait_with_output().expect("inspect output"));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("exited after"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let p = process(&r);
    assert_eq!(p["exited"], true, "{p:#}");
    assert!(!accepted(&r)["samples"]
        .as_array()
        .expect("samples")
        .is_empty());
}

/// Waits for inspect's line saying its first sample is taken.
fn wait_for_sampling(inspect: &mut Child) -> BufReader<std::process::ChildStderr> {
    let mut err = BufReader::new(inspect.stderr.take().expect("stderr"));
    let mut line = String::new();
    err.read_line(&mut line).expect("read inspect's stderr");
    assert!(line.contains("sampling pid"), "{line}");
    err
}

#[test]
fn a_socket_the_process_closes_while_sampled_is_really_closed() {
    let server = specimen(&[]);
    let mut c = connect(server.port);
    exchange(&mut c).expect("exchange");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["inspect", "--format", "json", "--duration", "60s"])
        .args(["--pid", &server.pid()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn inspect");
    let stderr = wait_for_sampling(&mut child);
    // The client ends the connection; the server reads EOF and closes its socket. Its FIN
    // reaches us only if no duplicate of the descriptor is alive anywhere, inspect included.
    c.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let mut b = [0u8; 16];
    let got = c.read(&mut b);
    assert!(
        matches!(got, Ok(0)),
        "the server's close did not reach the client while inspect ran: {got:?}"
    );
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "inspect must still be sampling for this to prove anything"
    );
    let r = interrupt(child, stderr);
    let s = accepted(&r);
    assert_eq!(s["closed"], true, "{s:#}");
    assert!(!s["samples"].as_array().expect("samples").is_empty());
}

#[test]
fn another_users_process_reports_tcp_info_and_says_why_options_are_unknown() {
    if !common::live::is_root() {
        common::live::skip(
            "another_users_process_reports_tcp_info_and_says_why_options_are_unknown",
            "needs root, to run inspect as another user (nobody) against our process",
        );
        return;
    }
    let server = specimen(&[]);
    let mut c = connect(server.port);
    exchange(&mut c).expect("exchange");
    let dir = common::live::OpenDir::new("inspect-nobody");
    let bin = dir.install(&common::live::tcpdoctor_bin());
    let out = common::live::unprivileged(&bin)
        .args(["inspect", "--format", "json", "--duration", "0"])
        .args(["--pid", &server.pid()])
        .output()
        .expect("run inspect as nobody");
    let (r, code, err) = parse(out);
    assert_eq!(code, 0, "{err}");
    let p = process(&r);
    let why = p["options_refused"].as_str().unwrap_or_default();
    assert!(why.contains("another user's process"), "{p:#}");
    assert!(why.contains("CAP_SYS_PTRACE"), "{why}");
    let port = format!(":{}", server.port);
    let s = sockets(&r, "accepted")
        .into_iter()
        .find(|s| s["local"].as_str().is_some_and(|l| l.ends_with(&port)))
        .unwrap_or_else(|| panic!("the specimen's accepted socket: {r:#}"));
    assert!(s["options"]["nodelay"].is_null(), "{s:#}");
    let sample = &s["samples"][0];
    assert_eq!(n(&sample["state"]), 1, "tcp_info read: {s:#}");
    assert!(n(&sample["snd_mss"]) > 0);
}

#[test]
fn a_spinning_server_burns_far_more_cpu_per_request_than_its_twin() {
    let spin = specimen(&["--writes", "whole", "--drain", "spin"]);
    let calm = specimen(&["--writes", "whole"]);
    // The client pauses between requests: the reply's ACK is delayed, and a server that waits
    // for its send queue to drain spins all that time.
    let pause = Duration::from_millis(5);
    let (stop1, c1) = drive(spin.port, pause);
    let (stop2, c2) = drive(calm.port, pause);
    let pids = format!("{},{}", spin.pid(), calm.pid());
    let (r, code, err) = inspect(&["--pid", &pids, "--duration", "3s"]);
    for s in [stop1, stop2] {
        s.store(true, Ordering::SeqCst);
    }
    c1.join().expect("client");
    c2.join().expect("client");
    assert_eq!(code, 0, "{err}");
    let per_segment = |pid: &str| {
        let p = r["observation"]["processes"]
            .as_array()
            .expect("processes")
            .iter()
            .find(|p| p["pid"].as_u64().is_some_and(|v| v.to_string() == pid))
            .expect("process");
        let cpu = n(&p["last"]["cpu_ns"]) - n(&p["first"]["cpu_ns"]);
        let segs: u64 = p["sockets"]
            .as_array()
            .expect("sockets")
            .iter()
            .filter(|s| s["role"] == "accepted")
            .map(|s| {
                let v = s["samples"].as_array().expect("samples");
                n(&v[v.len() - 1]["data_segs_in"]) - n(&v[0]["data_segs_in"])
            })
            .sum();
        assert!(segs > 10, "pid {pid}: {segs} requests in 3 s");
        cpu / segs
    };
    let (hot, cold) = (per_segment(&spin.pid()), per_segment(&calm.pid()));
    assert!(
        hot > 5 * cold,
        "spinning: {hot} ns of CPU per request, its twin: {cold} ns"
    );
    // The findings: busy_poll for the spinner (its CPU in the kernel's ioctl), not its twin.
    let busy: Vec<&str> = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == "busy_poll")
        .filter_map(|f| f["file"].as_str())
        .collect();
    assert_eq!(
        busy,
        vec![format!("pid {} (tcpdoctor)", spin.pid())],
        "busy_poll for the spinner only: {:#}",
        r["processes"]
    );
}

#[test]
fn port_finds_the_process_listening_on_it() {
    let server = specimen(&[]);
    let mut c = connect(server.port);
    exchange(&mut c).expect("exchange");
    let port = server.port.to_string();
    let (r, code, err) = inspect(&["--port", &port, "--duration", "0"]);
    assert_eq!(code, 0, "{err}");
    let pids: Vec<u64> = r["observation"]["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| n(&p["pid"]))
        .collect();
    // The test's own client socket has the port as its remote, not local, port: not us.
    assert_eq!(pids, vec![u64::from(server.child.id())]);
}

/// Review item 4: a pool used evenly that grew while sampled is not `pool_imbalance`. A Python
/// client (the inspected process) exchanges on one connection, then opens a second one and
/// alternates between them at the same pace: the first carries five times the segments
/// because it was observed five times longer, not because it was used more.
#[test]
fn a_pool_that_grew_while_sampled_is_not_called_uneven() {
    let script = r#"
import socket, sys, threading, time
port = int(sys.argv[1])
def conn():
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(20)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s
def exchange(s):
    s.sendall(b"LIST\n")
    got = b""
    while not got.endswith(b".\r\n"):
        b = s.recv(4096)
        if not b:
            sys.exit("server closed")
        got += b
go = threading.Event()
def control():
    for line in sys.stdin:
        if line.strip() == "go":
            go.set()
threading.Thread(target=control, daemon=True).start()
conns = [conn()]
exchange(conns[0])
print("ready", flush=True)
n = [0, 0]
for _ in range(20000):
    for i, s in enumerate(conns):
        exchange(s)
        if go.is_set():
            n[i] += 1
    if n[0] >= 400 and len(conns) == 1:
        conns.append(conn())
        print("opened", flush=True)
    if n[1] == 100:
        print("b100", flush=True)
    time.sleep(0.005)
"#;
    if !common::has_python3("a_pool_that_grew_while_sampled_is_not_called_uneven") {
        return;
    }
    let server = specimen(&["--writes", "whole", "--nodelay"]);
    let mut child = Command::new("python3")
        .args(["-c", script, &server.port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn python client");
    let mut to_client = child.stdin.take().expect("stdin");
    let mut from_client = BufReader::new(child.stdout.take().expect("stdout"));
    let client = Server { child, port: 0 };
    let mut line = String::new();
    from_client.read_line(&mut line).expect("client ready");
    assert_eq!(line.trim(), "ready");
    let mut inspect = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["inspect", "--format", "json", "--duration", "60s"])
        .args(["--pid", &client.pid()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn inspect");
    let stderr = wait_for_sampling(&mut inspect);
    to_client.write_all(b"go\n").expect("tell the client to go");
    for want in ["opened", "b100"] {
        line.clear();
        from_client.read_line(&mut line).expect("client progress");
        assert_eq!(line.trim(), want);
    }
    let r = interrupt(inspect, stderr);
    let peer = format!("127.0.0.1:{}", server.port);
    let pool = r["processes"][0]["peers"]
        .as_array()
        .expect("peers")
        .iter()
        .find(|p| p["peer"] == peer.as_str())
        .unwrap_or_else(|| panic!("no pool to {peer}: {r:#}"));
    assert_eq!(pool["connections"], 2, "{pool:#}");
    // The raw counts are uneven (the older connection carried most of the segments: what
    // the rule compared before)...
    let busiest = pool["busiest_share"].as_f64().expect("busiest_share");
    assert!(
        busiest >= 0.7,
        "the scenario must be uneven by raw counts: {pool:#}"
    );
    // ...but the rates are not.
    let uneven: Vec<&Value> = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == "pool_imbalance")
        .collect();
    assert!(uneven.is_empty(), "{uneven:#?}");
    drop(client);
}

/// Review item 11: --help says where the figures really come from.
#[test]
fn help_names_the_sources_the_code_reads() {
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["inspect", "--help"])
        .output()
        .expect("run inspect --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("CPU clock"), "{help}");
    assert!(
        !help.contains("schedstat"),
        "the CPU clock, not schedstat: {help}"
    );
    assert!(help.contains("recv/send on a"), "{help}");
    assert!(help.contains("local port"), "{help}");
    assert!(!help.contains("held by Nagle"), "{help}");
}

#[test]
fn bad_input_is_a_clear_error_with_status_2() {
    let unused = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = unused.local_addr().expect("addr").port();
    drop(unused);
    let cases: [(&[&str], &str); 4] = [
        (
            &["--port", &port.to_string()],
            "no TCP socket has local port",
        ),
        (&["--pid", "1", "--interval", "0"], "interval"),
        (&["--pid", "abc"], "invalid value"),
        (&["--pid", "1", "--port", "80"], "cannot be used with"),
    ];
    for (args, says) in cases {
        let (r, code, err) = inspect(args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(r.is_null());
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

#[test]
fn a_namespace_we_may_not_enter_is_read_through_duplicates() {
    let test = "a_namespace_we_may_not_enter_is_read_through_duplicates";
    if !common::live::is_root() {
        common::live::skip(
            test,
            "needs root, to make a network namespace for nobody's server",
        );
        return;
    }
    let dir = common::live::OpenDir::new("inspect-netns");
    let bin = dir.install(&common::live::tcpdoctor_bin());
    // nobody's specimen in a network namespace of its own (created by root): nobody may read
    // its descriptors but not enter its namespace.
    let script = format!(
        "ip link set lo up && exec setpriv --reuid={u} --regid={u} --clear-groups {} specimen \
         --idle-timeout 60s",
        bin.display(),
        u = common::live::NOBODY
    );
    let mut cmd = Command::new("unshare");
    cmd.args(["--net", "sh", "-c", &script]);
    let server = start(cmd);
    let out = common::live::unprivileged(&bin)
        .args(["inspect", "--format", "json", "--duration", "0"])
        .args(["--pid", &server.pid()])
        .output()
        .expect("run inspect as nobody");
    let (r, code, err) = parse(out);
    assert_eq!(code, 0, "{err}");
    assert!(
        err.contains("entering its network namespace was refused"),
        "{err}"
    );
    let listener = sockets(&r, "listener")
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("the listener, read through a duplicate: {r:#}"));
    assert_eq!(listener["options"]["nodelay"], false, "{listener:#}");
    assert_eq!(
        n(&listener["samples"][0]["state"]),
        10,
        "tcp_info of a listener"
    );
    assert!(process(&r)["options_refused"].is_null());
}

#[test]
fn ipv6_sockets_are_read_too() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        common::live::skip("ipv6_sockets_are_read_too", "no IPv6 loopback here");
        return;
    }
    let server = specimen(&["--listen", "[::1]:0", "--nodelay"]);
    let mut c = TcpStream::connect(("::1", server.port)).expect("connect over IPv6");
    c.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    exchange(&mut c).expect("exchange");
    let (r, code, err) = inspect(&["--pid", &server.pid(), "--duration", "0"]);
    assert_eq!(code, 0, "{err}");
    let s = accepted(&r);
    assert!(
        s["local"].as_str().is_some_and(|a| a.starts_with("[::1]:")),
        "{s:#}"
    );
    assert_eq!(s["options"]["nodelay"], true);
    assert_eq!(n(&s["samples"][0]["state"]), 1);
}

#[test]
fn a_thread_per_connection_server_with_connect_per_request_clients_is_not_busy_poll() {
    // Each connection gets its own thread, which waits in recv (it sleeps properly); the
    // client opens a connection per request. Threads that exit take their context switches
    // with them, and connections living between two samples are never seen: neither the
    // sleeps nor the traffic can be counted in full, so busy_poll must not be judged.
    let script = r#"
import socket, threading
def serve(c):
    f = c.makefile("rb")
    while f.readline():
        c.sendall(b"200 ok\r\n.\r\n")
    c.close()
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(128)
print("listening 127.0.0.1:%d" % l.getsockname()[1], flush=True)
while True:
    c, _ = l.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
"#;
    let name = "a_thread_per_connection_server_with_connect_per_request_clients_is_not_busy_poll";
    let Some(server) = python_server(name, script) else {
        return;
    };
    let port = server.port;
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let client = std::thread::spawn(move || {
        let mut n = 0u64;
        while !flag.load(Ordering::SeqCst) && n < 100_000 {
            let mut s = connect(port);
            if exchange(&mut s).is_err() {
                break;
            }
            n += 1;
        }
        n
    });
    let (r, code, err) = inspect(&["--pid", &server.pid(), "--duration", "3s"]);
    stop.store(true, Ordering::SeqCst);
    let requests = client.join().expect("client");
    assert_eq!(code, 0, "{err}");
    assert!(requests > 10, "{requests} requests");
    let busy: Vec<&Value> = r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == "busy_poll")
        .collect();
    assert!(busy.is_empty(), "{busy:#?}\n{:#}", r["processes"]);
    // And the report says why it could not judge.
    let notes = r["processes"][0]["notes"].as_array().expect("notes");
    assert!(
        notes.iter().filter_map(Value::as_str).any(|n| {
            n.contains("busy_poll is not judged") || n.contains("busy_poll not judged")
        }),
        "{notes:#?}"
    );
}

#[test]
fn nodelay_set_after_accept_is_read_once_the_socket_has_sent_data() {
    // The server sets TCP_NODELAY 300 ms after accept, then serves: inspect's first sample of
    // the accepted socket sees Nagle on. The connection closes while inspect runs, so only a
    // re-read once data was sent can tell the options the replies were written with.
    let script = r#"
import socket, time
l = socket.socket()
l.bind(("127.0.0.1", 0))
l.listen(8)
print("listening 127.0.0.1:%d" % l.getsockname()[1], flush=True)
while True:
    c, _ = l.accept()
    time.sleep(0.3)
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = c.makefile("rb")
    while f.readline():
        c.sendall(b"200 ok\r\n.\r\n")
    f.close()
    c.close()
"#;
    let name = "nodelay_set_after_accept_is_read_once_the_socket_has_sent_data";
    let Some(server) = python_server(name, script) else {
        return;
    };
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["inspect", "--format", "json", "--duration", "60s"])
        .args(["--pid", &server.pid()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn inspect");
    let stderr = wait_for_sampling(&mut child);
    let mut c = connect(server.port);
    // Paced, so that samples are likely to see the socket sending (then its options are read
    // again); whether they do or not, the options must not be reported as final unless they
    // were read after its data.
    for _ in 0..5 {
        exchange(&mut c).expect("exchange");
        std::thread::sleep(Duration::from_millis(30));
    }
    // The client ends; the server closes its socket (its EOF reaches us once it has).
    c.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let mut b = [0u8; 16];
    assert!(matches!(c.read(&mut b), Ok(0)), "the server did not close");
    // One more connection, after the first one is closed: once the server has accepted it,
    // the first one's close has been seen by at least one sample (the sampler reads both).
    let mut c2 = connect(server.port);
    exchange(&mut c2).expect("second connection");
    assert!(
        child.try_wait().expect("try_wait").is_none(),
        "inspect must still be sampling for this to prove anything"
    );
    let r = interrupt(child, stderr);
    let first = sockets(&r, "accepted")
        .into_iter()
        .find(|s| s["remote"] == c.local_addr().expect("addr").to_string())
        .unwrap_or_else(|| panic!("the first connection: {r:#}"));
    assert_eq!(first["closed"], true, "{first:#}");
    let seen_sending = first["samples"]
        .as_array()
        .expect("samples")
        .iter()
        .any(|x| n(&x["data_segs_out"]) > 0);
    eprintln!("first connection seen sending: {seen_sending}");
    if seen_sending {
        // Read again once it had sent: the option its replies were written with.
        assert_eq!(first["options"]["nodelay"], true, "{first:#}");
        assert_eq!(first["options_before_data"], false, "{first:#}");
    } else {
        // Never seen sending: what was read at first sight is said to be only that.
        assert_eq!(first["options_before_data"], true, "{first:#}");
    }
}

#[test]
fn nagle_shares_count_every_sample_taken_not_only_those_stored() {
    // A client doing 2 exchanges then pausing 1 s: while it pauses the socket is idle and its
    // samples, all alike, are not stored again. They are still instants at which no write
    // was held: shares and the severity must count them.
    let server = specimen(&["--writes", "per-line"]);
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let mut c = connect(server.port);
    exchange(&mut c).expect("first exchange");
    let client = std::thread::spawn(move || {
        for _ in 0..60 {
            if flag.load(Ordering::SeqCst) {
                break;
            }
            for _ in 0..2 {
                if exchange(&mut c).is_err() {
                    return;
                }
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
    let (r, code, err) = inspect(&["--pid", &server.pid(), "--duration", "3s"]);
    stop.store(true, Ordering::SeqCst);
    client.join().expect("client");
    assert_eq!(code, 0, "{err}");
    let s = accepted(&r);
    let stored = s["samples"].as_array().expect("samples").len() as u64;
    let taken = n(&s["samples_taken"]);
    let held = n(&s["held_taken"]);
    assert!(
        taken > stored,
        "idle repeats are taken, not stored: {taken} taken, {stored} stored"
    );
    let summary = &r["processes"][0]["sockets"]
        .as_array()
        .expect("summary sockets")
        .iter()
        .find(|x| x["inode"] == s["inode"])
        .expect("the socket's summary")
        .clone();
    assert_eq!(n(&summary["samples"]), taken, "{summary:#}");
    assert_eq!(n(&summary["held_samples"]), held, "{summary:#}");
    // The finding, when there is one, counts the samples taken, and its severity follows the
    // share of those that caught a hold.
    for f in r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .filter(|f| f["kind"] == "nagle_delayed_ack")
    {
        assert_eq!(n(&f["evidence"]["counts"]["samples"]), taken, "{f:#}");
        assert_eq!(n(&f["evidence"]["counts"]["held_samples"]), held, "{f:#}");
        let critical = held as f64 / taken as f64 >= 0.1 && taken >= 10;
        assert_eq!(f["severity"] == "critical", critical, "{f:#}");
    }
}

/// A Python process (the inspected one) that prints `ready PID` once it is set up and then
/// runs `script` for at most 8 s; `None` (skipped, or failed in CI) without python3.
fn python_process(test: &str, script: &str, args: &[&str]) -> Option<(Server, String)> {
    if !common::has_python3(test) {
        return None;
    }
    let mut child = Command::new("python3")
        .args(["-c", script])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn python");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("ready line");
    assert!(line.starts_with("ready"), "{line:?}");
    let pid = child.id().to_string();
    Some((Server { child, port: 0 }, pid))
}

fn kinds_of(r: &Value) -> Vec<String> {
    r["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .map(|f| format!("{} {}", f["kind"].as_str().unwrap_or(""), f["severity"]))
        .collect()
}

/// `window_limited` from a live process: a bulk sender to a reader that drains 4 KB per
/// millisecond through an 8 KB receive buffer is limited by the receiver's window — the
/// kernel's own `rwnd_limited` counter says so; the same sender to a reader that keeps up is
/// not limited at all.
#[test]
fn a_sender_held_by_the_peers_receive_window_is_window_limited_and_its_twin_is_not() {
    let script = r#"
import socket, sys, threading, time, os
slow = sys.argv[1] == "slow"
srv = socket.socket()
if slow:
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
srv.bind(("127.0.0.1", 0)); srv.listen(1)
def sink():
    c, _ = srv.accept()
    while c.recv(4096 if slow else 1 << 20):
        if slow:
            time.sleep(0.001)
threading.Thread(target=sink, daemon=True).start()
s = socket.create_connection(srv.getsockname())
print("ready", flush=True)
end = time.time() + 8
buf = b"x" * 65536
while time.time() < end:
    s.sendall(buf)
"#;
    let test = "a_sender_held_by_the_peers_receive_window_is_window_limited_and_its_twin_is_not";
    for (mode, named) in [("slow", true), ("fast", false)] {
        let Some((_p, pid)) = python_process(test, script, &[mode]) else {
            return;
        };
        let (r, code, err) = inspect(&["--pid", &pid, "--duration", "2s"]);
        assert_eq!(code, 0, "{err}");
        validate(&r);
        let k = kinds_of(&r);
        let wl: Vec<&Value> = r["findings"]
            .as_array()
            .expect("findings")
            .iter()
            .filter(|f| f["kind"] == "window_limited")
            .collect();
        if named {
            assert_eq!(wl.len(), 1, "{mode}: {k:?}");
            let v = wl[0]["verdict"].as_str().unwrap_or("");
            assert!(v.contains("receive window"), "{v}");
        } else {
            assert!(wl.is_empty(), "{mode}: {k:?}");
        }
    }
}

/// `pool_imbalance` from a live process: three connections to one server, one of them
/// carrying 18 of every 20 exchanges, is named; the same three used in turn are not.
#[test]
fn a_pool_used_unevenly_is_named_and_one_used_in_turn_is_not() {
    let script = r#"
import socket, sys, time
port, pattern = int(sys.argv[1]), [int(x) for x in sys.argv[2].split(",")]
conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
def exchange(s):
    s.sendall(b"LIST\n")
    got = b""
    while not got.endswith(b".\r\n"):
        b = s.recv(4096)
        if not b:
            sys.exit("server closed")
        got += b
for s in conns:
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    exchange(s)
print("ready", flush=True)
end = time.time() + 8
while time.time() < end:
    for i in pattern:
        exchange(conns[i])
"#;
    let test = "a_pool_used_unevenly_is_named_and_one_used_in_turn_is_not";
    let server = specimen(&["--writes", "whole", "--nodelay"]);
    let port = server.port.to_string();
    let uneven = "0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,2";
    for (pattern, named) in [(uneven, true), ("0,1,2", false)] {
        let Some((_p, pid)) = python_process(test, script, &[&port, pattern]) else {
            return;
        };
        let (r, code, err) = inspect(&["--pid", &pid, "--duration", "2s"]);
        assert_eq!(code, 0, "{err}");
        validate(&r);
        let k = kinds_of(&r);
        let pool = k.iter().any(|k| k.starts_with("pool_imbalance"));
        assert_eq!(pool, named, "pattern {pattern}: {k:?}");
    }
}
