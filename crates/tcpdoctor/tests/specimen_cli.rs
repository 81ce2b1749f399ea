//! `tcpdoctor specimen` over real loopback TCP: the per-line server with Nagle stalls most
//! exchanges near the delayed-ACK timer, its fixed twin does not, and every variant answers
//! byte-exact. Assertions are on the shape of the distribution, never on wall time.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Specimen {
    child: Child,
    addr: String,
}

impl Specimen {
    fn start(args: &[&str]) -> Specimen {
        let mut child = Command::new(env!("CARGO_BIN_EXE_tcpdoctor"))
            .args(["specimen", "--idle-timeout", "10s"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn tcpdoctor specimen");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("readiness line");
        let addr = line
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("no readiness line: {line:?}"))
            .trim()
            .to_string();
        Specimen { child, addr }
    }

    fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(&self.addr).expect("connect");
        s.set_nodelay(true).expect("nodelay");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        s
    }
}

impl Drop for Specimen {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `n` sequential `line` exchanges; returns each one's latency and checks each reply.
fn line_exchanges(s: &Specimen, n: usize, lines: usize) -> Vec<Duration> {
    let mut c = s.connect();
    let mut reader = BufReader::new(c.try_clone().expect("clone"));
    let mut lat = Vec::with_capacity(n);
    for i in 0..n {
        let t = Instant::now();
        c.write_all(format!("GET {i}\r\n").as_bytes())
            .expect("write");
        let mut got = 0;
        loop {
            let mut line = String::new();
            assert!(reader.read_line(&mut line).expect("read") > 0, "early EOF");
            if line == ".\r\n" {
                break;
            }
            assert_eq!(line.len(), 24, "{line:?}");
            got += 1;
        }
        lat.push(t.elapsed());
        assert_eq!(got, lines);
    }
    lat
}

fn share_at_least(lat: &[Duration], ms: u64) -> f64 {
    lat.iter()
        .filter(|d| **d >= Duration::from_millis(ms))
        .count() as f64
        / lat.len() as f64
}

#[test]
fn per_line_with_nagle_stalls_and_the_whole_reply_does_not() {
    let stalled = share_at_least(
        &line_exchanges(&Specimen::start(&["--writes", "per-line"]), 30, 4),
        30,
    );
    let fixed = share_at_least(
        &line_exchanges(&Specimen::start(&["--writes", "whole"]), 30, 4),
        30,
    );
    eprintln!("share of exchanges >= 30 ms: per-line {stalled:.2}, whole {fixed:.2}");
    assert!(
        stalled >= 0.5,
        "per-line with Nagle should stall: {stalled}"
    );
    assert!(fixed < 0.2, "the whole reply should not: {fixed}");
}

#[test]
fn pipelined_line_requests_are_answered_in_order() {
    let s = Specimen::start(&["--writes", "whole", "--lines", "2"]);
    let mut c = s.connect();
    c.write_all(b"a\nb\nc\n").expect("write");
    let mut back = vec![0u8; 3 * (2 * 24 + 3)];
    c.read_exact(&mut back).expect("three replies");
    assert_eq!(back.windows(3).filter(|w| w == b".\r\n").count(), 3);
}

#[test]
fn length_prefixed_echo_is_byte_exact_with_and_without_spinning() {
    for drain in ["none", "spin"] {
        let s = Specimen::start(&["--protocol", "length-prefixed", "--drain", drain]);
        let mut c = s.connect();
        for len in [0usize, 1, 100, 70_000] {
            let body: Vec<u8> = (0..len).map(|i| (i * 7 % 251) as u8).collect();
            let mut req = (len as u32).to_be_bytes().to_vec();
            req.extend_from_slice(&body);
            c.write_all(&req).expect("write");
            let mut back = vec![0u8; req.len()];
            c.read_exact(&mut back).expect("echo");
            assert!(back == req, "{drain}: echo of {len} bytes differs");
        }
    }
}

/// On a Unix socket: the same protocols, byte-exact, and a stale socket file left by an
/// earlier server (nobody accepting) does not stop it from binding.
#[test]
fn a_unix_socket_specimen_replaces_a_stale_file_and_answers() {
    use std::os::unix::net::{UnixListener, UnixStream};
    let dir = std::env::temp_dir().join(format!("tcpdoctor-spec-unix-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("s.sock");
    drop(UnixListener::bind(&path).expect("a stale socket file"));
    assert!(path.exists());
    let listen = format!("unix:{}", path.display());
    let s = Specimen::start(&["--listen", &listen, "--writes", "per-line", "--lines", "2"]);
    assert_eq!(s.addr, listen);
    let mut c = UnixStream::connect(&path).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    c.write_all(b"a\nb\n").expect("write");
    let mut back = vec![0u8; 2 * (2 * 24 + 3)];
    c.read_exact(&mut back).expect("two replies");
    assert_eq!(back.windows(3).filter(|w| w == b".\r\n").count(), 2);
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_flags_exit_2_naming_the_flag() {
    for (flag, value) in [
        ("--writes", "sometimes"),
        ("--idle-timeout", "soon"),
        ("--line-bytes", "3"),
        ("--listen", "unix:/nonexistent-tcpdoctor-dir/s.sock"),
        ("--line-gap", "a while"),
    ] {
        let out = common::tcpdoctor(&["specimen", flag, value]);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {e}");
        assert!(e.contains(flag), "{flag} {value}: {e}");
    }
    // A gap where there are no separate writes to put it between is refused, not ignored.
    for extra in [
        &["--writes", "whole"][..],
        &["--protocol", "length-prefixed"][..],
    ] {
        let mut args = vec!["specimen", "--line-gap", "1ms"];
        args.extend_from_slice(extra);
        let out = common::tcpdoctor(&args);
        let e = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {e}");
        assert!(e.contains("--line-gap 1.0 ms"), "{extra:?}: {e}");
    }
}
