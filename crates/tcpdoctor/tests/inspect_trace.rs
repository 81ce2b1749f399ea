//! `inspect --pid P --trace D` (issue 27): tcpdoctor attaches to a running CPython asyncio
//! server for D, sees one send call per line of each response and no TCP_NODELAY, detaches —
//! and the server goes on serving, untraced, with every answer intact.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

const ROWS: usize = 12;

/// testdata/servers/asyncio_lines.py per-line on a free port, once it listens.
fn start_server() -> (Child, u16) {
    let port = common::run::free_port();
    let mut child = Command::new("python3")
        .arg(common::repo().join("testdata/servers/asyncio_lines.py"))
        .args([port.to_string(), "per-line".into(), ROWS.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    // Its readiness line.
    let mut out = child.stdout.take().expect("stdout");
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while !line.ends_with(b"\n") && out.read(&mut b).expect("read") == 1 {
        line.push(b[0]);
    }
    assert!(
        String::from_utf8_lossy(&line).contains("listening"),
        "{line:?}"
    );
    (child, port)
}

/// One request and its whole response; checks every row came back in order.
fn exchange(s: &mut TcpStream, n: u64) {
    s.write_all(format!("q{n}\n").as_bytes()).expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(b".\r\n") {
        let k = s.read(&mut buf).expect("read");
        assert!(k > 0, "the server closed the connection");
        got.extend_from_slice(&buf[..k]);
    }
    let text = String::from_utf8(got).expect("utf-8");
    let rows: Vec<&str> = text.lines().collect();
    assert_eq!(rows.len(), ROWS + 1, "{text}");
    for (i, r) in rows[..ROWS].iter().enumerate() {
        assert_eq!(*r, format!("{:03} q{n} row", 200 + i), "{text}");
    }
}

fn tracer_pid(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[test]
fn attaching_sees_one_send_per_line_and_detaching_leaves_the_server_serving() {
    let test = "inspect_trace_attach";
    if !common::has_python3(test) {
        return;
    }
    let (mut server, port) = start_server();
    let pid = server.id();
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    exchange(&mut s, 0);
    // A client exchanging until told to stop (bounded: 2,000 exchanges, 60 s).
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let client = std::thread::spawn(move || {
        let start = Instant::now();
        let mut n = 1;
        while !flag.load(Ordering::Relaxed) && n < 2000 && start.elapsed() < Duration::from_secs(60)
        {
            exchange(&mut s, n);
            n += 1;
        }
        (s, n)
    });
    let out = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args([
            "inspect",
            "--pid",
            &pid.to_string(),
            "--duration",
            "1s",
            "--trace",
            "1s",
            "--format",
            "json",
        ])
        .output()
        .expect("tcpdoctor");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let r: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    common::validate_with("inspect-report.schema.json", &r);
    let t = &r["syscalls"][0];
    assert_eq!(t["pid"], pid, "{t:#}");
    assert_eq!(t["calls"]["status"]["state"], "attached", "{t:#}");
    let a = &t["attach"];
    assert!(a["stops"].as_u64().unwrap_or(0) > 0, "{a:#}");
    assert_eq!(a["detached"], a["threads"], "every thread detached: {a:#}");
    let served = t["calls"]["sockets"]
        .as_array()
        .expect("sockets")
        .iter()
        .max_by_key(|s| s["writes"].as_u64().unwrap_or(0))
        .expect("a socket");
    // Responses seen whole while attached: one sendto() per row and one for the "." line.
    let wpr = &served["writes_per_response"];
    assert_eq!(wpr["p50"].as_f64(), Some((ROWS + 1) as f64), "{served:#}");
    assert!(wpr["count"].as_u64().unwrap_or(0) >= 3, "{served:#}");
    assert_eq!(served["nodelay"]["set"], false, "{served:#}");
    // Detached: no tracer, and the same connection keeps being served correctly.
    assert_eq!(tracer_pid(pid), Some(0), "detached");
    stop.store(true, Ordering::Relaxed);
    let (mut s, n) = client
        .join()
        .expect("the client ran without a wrong answer");
    for k in 0..20 {
        exchange(&mut s, n + k);
    }
    assert!(
        server.try_wait().expect("status").is_none(),
        "the server still runs"
    );
    let _ = server.kill();
    let _ = server.wait();
}
