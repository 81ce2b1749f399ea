//! `tcpdoctor proxy` as a user runs it: flag errors exit 2 naming the flag; a running proxy
//! announces its address, forwards, and on SIGINT drains and prints its summary.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

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
    let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
        .args(["proxy", "--listen", "127.0.0.1:0", "--upstream"])
        .arg(up_addr.to_string())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    // Readiness: the first line names the bound address.
    let mut first = String::new();
    err.read_line(&mut first).unwrap();
    let addr = first
        .split_whitespace()
        .nth(2)
        .unwrap_or_else(|| panic!("no address in {first:?}"))
        .to_string();
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

    // SAFETY: sends SIGINT to the child we spawned.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGINT);
    }
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{rest}");
    assert!(rest.contains("1 connections (0 open)"), "{rest}");
    assert!(rest.contains("c2s: 17 bytes in 1 chunks"), "{rest}");
}
