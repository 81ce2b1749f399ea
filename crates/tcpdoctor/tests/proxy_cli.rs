//! `tcpdoctor proxy` as a user runs it: flag errors exit 2 naming the flag; a running proxy
//! announces its address, forwards, and on SIGINT drains and prints its summary.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStderr, Command, Stdio};

#[test]
fn flag_errors_exit_2_and_name_the_flag() {
    for (flag, value) in [
        ("--delay", "15"),
        ("--nagle", "sometimes"),
        ("--chunks", "split:0"),
        ("--rate", "c2s=fast"),
        ("--upstream", "unix:"),
    ] {
        let mut args = vec![
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "127.0.0.1:9",
        ];
        if flag == "--upstream" {
            args[4] = value;
        } else {
            args.extend([flag, value]);
        }
        let out = common::tcpdoctor(&args);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {e}");
        assert!(e.contains(flag), "{flag} {value}: {e}");
    }
}

#[test]
fn forwards_then_drains_and_summarises_on_sigint() {
    let up = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let up_addr = up.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        let (mut s, _) = up.accept().unwrap();
        let mut req = Vec::new();
        s.read_to_end(&mut req).unwrap();
        s.write_all(&req).unwrap();
    });
    let (child, mut err, addr) = start_proxy(&["--upstream", &up_addr.to_string()]);
    let mut banner = String::new();
    for _ in 0..3 {
        err.read_line(&mut banner).unwrap();
    }
    assert!(banner.contains("nagle: off on both legs"), "{banner}");

    let mut c = std::net::TcpStream::connect(&addr).unwrap();
    c.write_all(b"three\nlines\nhere\n").unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut back = Vec::new();
    c.read_to_end(&mut back).unwrap();
    assert_eq!(back, b"three\nlines\nhere\n");
    server.join().unwrap();

    let rest = interrupt(child, err);
    assert!(rest.contains("1 connections (0 open)"), "{rest}");
    assert!(rest.contains("c2s: 17 bytes in 1 chunks"), "{rest}");
}

/// Starts `tcpdoctor proxy --listen 127.0.0.1:0 ARGS`; returns it, its stderr past the first
/// line, and the address that line announced (readiness).
fn start_proxy(args: &[&str]) -> (Child, BufReader<ChildStderr>, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["proxy", "--listen", "127.0.0.1:0"])
        .args(args)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn tcpdoctor proxy");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut first = String::new();
    err.read_line(&mut first).expect("first line");
    let addr = first
        .split_whitespace()
        .nth(2)
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_string();
    (child, err, addr)
}

/// SIGINT, then the rest of stderr (the summary); the proxy must exit 0.
fn interrupt(mut child: Child, mut err: BufReader<ChildStderr>) -> String {
    // SAFETY: sends SIGINT to the child we spawned.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let mut rest = String::new();
    err.read_to_string(&mut rest).expect("stderr to the end");
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "{rest}");
    rest
}

/// With `--delay`, every forwarded chunk is a timed write, and the summary says how late they
/// left: ten 1-byte exchanges, ten timed writes each way.
#[test]
fn delay_summary_counts_every_timed_write() {
    let up = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let up_addr = up.local_addr().expect("addr");
    let server = std::thread::spawn(move || {
        let (mut s, _) = up.accept().expect("accept");
        let mut b = [0u8; 1];
        while s.read(&mut b).expect("read") == 1 {
            s.write_all(&b).expect("echo");
        }
    });
    let (child, err, addr) = start_proxy(&["--upstream", &up_addr.to_string(), "--delay", "2ms"]);
    let mut c = std::net::TcpStream::connect(&addr).expect("connect");
    c.set_nodelay(true).expect("nodelay");
    for i in 0..10u8 {
        c.write_all(&[i]).expect("write");
        let mut b = [0u8; 1];
        c.read_exact(&mut b).expect("read");
        assert_eq!(b[0], i);
    }
    drop(c);
    server.join().expect("server");
    let rest = interrupt(child, err);
    assert!(rest.contains("c2s: 10 bytes in 10 chunks"), "{rest}");
    assert!(rest.contains("s2c: 10 bytes in 10 chunks"), "{rest}");
    assert_eq!(
        rest.matches("delay held: 10 timed writes left late by")
            .count(),
        2,
        "{rest}"
    );
}

/// Without an impairment nothing is timed, and the summary does not pretend otherwise.
#[test]
fn no_delay_no_timing_line() {
    let up = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let up_addr = up.local_addr().expect("addr");
    let server = std::thread::spawn(move || {
        let (mut s, _) = up.accept().expect("accept");
        let mut req = Vec::new();
        s.read_to_end(&mut req).expect("read");
    });
    let (child, err, addr) = start_proxy(&["--upstream", &up_addr.to_string()]);
    let mut c = std::net::TcpStream::connect(&addr).expect("connect");
    c.write_all(b"x").expect("write");
    drop(c);
    server.join().expect("server");
    let rest = interrupt(child, err);
    assert!(rest.contains("c2s: 1 bytes in 1 chunks"), "{rest}");
    assert!(!rest.contains("delay held"), "{rest}");
}
