//! Real servers on loopback for the `bench` end-to-end tests, each a few lines of std::net.
//!
//! Every server binds 127.0.0.1:0 (or a fresh Unix socket path), runs on its own threads for
//! the rest of the test process, and is ready when the function returns (the listener is
//! bound before it does). Sockets keep Rust's default — Nagle ON — unless said otherwise:
//! that is what makes the per-line server stall.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn serve(handler: impl Fn(TcpStream) + Send + Sync + 'static) -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    let addr = l.local_addr().expect("local addr");
    let handler = Arc::new(handler);
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            let h = handler.clone();
            thread::spawn(move || h(s));
        }
    });
    addr
}

/// A memcache-like server (`set`, `get`). `per_line`: each response line is its own write
/// (the Zino-style server of PHYSICS §3: with Nagle on it stalls on the client's delayed ACK);
/// otherwise the whole response is one write (its fixed twin).
pub fn memcache(per_line: bool) -> SocketAddr {
    serve(move |s| {
        let _ = memcache_conn(s, per_line);
    })
}

fn memcache_conn(s: TcpStream, per_line: bool) -> std::io::Result<()> {
    let mut out = s.try_clone()?;
    let mut r = BufReader::new(s);
    let mut value: Vec<u8> = b"hello".to_vec();
    let mut line = String::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.first().copied() {
            Some("set") => {
                let n: usize = words.get(4).and_then(|w| w.parse().ok()).unwrap_or(0);
                let mut data = vec![0u8; n + 2];
                r.read_exact(&mut data)?;
                data.truncate(n);
                value = data;
                out.write_all(b"STORED\r\n")?;
            }
            Some("get") => {
                let key = words.get(1).copied().unwrap_or("");
                let head = format!("VALUE {key} 0 {}\r\n", value.len());
                let mut body = value.clone();
                body.extend_from_slice(b"\r\n");
                if per_line {
                    out.write_all(head.as_bytes())?;
                    out.write_all(&body)?;
                    out.write_all(b"END\r\n")?;
                } else {
                    let mut all = head.into_bytes();
                    all.extend_from_slice(&body);
                    all.extend_from_slice(b"END\r\n");
                    out.write_all(&all)?;
                }
            }
            _ => out.write_all(b"ERROR\r\n")?,
        }
    }
}

/// A line echo server that answers everything it has read in one write, after `cost` per read
/// (the fixed cost of one round of work: pipelining amortises it over many requests).
/// `seen` counts the lines it received.
pub fn batch_echo(cost: Duration, seen: Arc<AtomicU64>) -> SocketAddr {
    serve(move |mut s| {
        let _ = s.set_nodelay(true);
        let mut buf = vec![0u8; 64 * 1024];
        let mut pending: Vec<u8> = Vec::new();
        loop {
            let n = match s.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            pending.extend_from_slice(&buf[..n]);
            let Some(end) = pending.iter().rposition(|&b| b == b'\n') else {
                continue;
            };
            let lines = pending[..=end].iter().filter(|&&b| b == b'\n').count();
            seen.fetch_add(lines as u64, Ordering::Relaxed);
            if !cost.is_zero() {
                thread::sleep(cost);
            }
            if s.write_all(&pending[..=end]).is_err() {
                return;
            }
            pending.drain(..=end);
        }
    })
}

/// A line echo server that never answers the `nth` line of each connection (1-based).
pub fn echo_dropping(nth: u64) -> SocketAddr {
    serve(move |s| {
        let _ = s.set_nodelay(true);
        let Ok(mut out) = s.try_clone() else { return };
        let r = BufReader::new(s);
        for (i, line) in r.split(b'\n').enumerate() {
            let Ok(mut line) = line else { return };
            if i as u64 + 1 == nth {
                continue;
            }
            line.push(b'\n');
            if out.write_all(&line).is_err() {
                return;
            }
        }
    })
}

/// Speaks first (`200 hello`), then answers every line with two lines and nothing that marks
/// the end: a client can only frame the answer by silence.
pub fn greeting_then_unframed() -> SocketAddr {
    serve(|s| {
        let _ = s.set_nodelay(true);
        let Ok(mut out) = s.try_clone() else { return };
        if out.write_all(b"200 hello\r\n").is_err() {
            return;
        }
        for line in BufReader::new(s).split(b'\n') {
            if line.is_err() || out.write_all(b"first\r\nsecond\r\n").is_err() {
                return;
            }
        }
    })
}

/// Accepts, reads, never answers.
pub fn silent() -> SocketAddr {
    serve(|mut s| {
        let mut buf = [0u8; 4096];
        while matches!(s.read(&mut buf), Ok(n) if n > 0) {}
    })
}

/// A keep-alive HTTP/1.1 server: answers every request with a 200 and a small body.
pub fn http() -> SocketAddr {
    serve(|s| {
        let _ = s.set_nodelay(true);
        let Ok(mut out) = s.try_clone() else { return };
        let mut r = BufReader::new(s);
        let mut line = String::new();
        loop {
            // Request line and headers, up to the empty line.
            let mut got_any = false;
            loop {
                line.clear();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {}
                }
                if line == "\r\n" || line == "\n" {
                    break;
                }
                got_any = true;
            }
            if !got_any {
                continue;
            }
            let body = "hello from tcpdoctor's test server\n";
            let resp = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if out.write_all(resp.as_bytes()).is_err() {
                return;
            }
        }
    })
}

/// An HTTP/1.0-style server: one response per connection, its body ending with the close
/// (no Content-Length), the way old servers and `Connection: close` answers work.
pub fn http_close() -> SocketAddr {
    serve(|s| {
        let Ok(mut out) = s.try_clone() else { return };
        let mut r = BufReader::new(s);
        let mut line = String::new();
        loop {
            line.clear();
            match r.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {}
            }
        }
        let _ = out.write_all(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nbye\n");
    })
}

/// An HTTP/1.1 keep-alive server that answers `answers` requests on a connection (with a
/// length, no `Connection: close`) and then drops it without a word, whatever the client sent
/// meanwhile — what a keep-alive timeout does to a client that sends just as the server gives
/// up on the connection (the client sees a FIN or a reset, and no answer).
pub fn http_silent_close(answers: usize) -> SocketAddr {
    serve(move |s| {
        let Ok(mut out) = s.try_clone() else { return };
        let mut r = BufReader::new(s);
        let mut line = String::new();
        for _ in 0..answers {
            loop {
                line.clear();
                match r.read_line(&mut line) {
                    Ok(0) | Err(_) => return,
                    Ok(_) if line == "\r\n" => break,
                    Ok(_) => {}
                }
            }
            if out
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nok\n")
                .is_err()
            {
                return;
            }
        }
    })
}

/// A line echo server on a Unix socket at a fresh path under the system temp directory.
pub fn unix_echo(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("tcpdoctor-{name}-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let l = UnixListener::bind(&path).expect("bind unix socket");
    thread::spawn(move || {
        for s in l.incoming().flatten() {
            thread::spawn(move || {
                let _ = unix_echo_conn(s);
            });
        }
    });
    path
}

fn unix_echo_conn(s: UnixStream) -> std::io::Result<()> {
    let mut out = s.try_clone()?;
    let r = BufReader::new(s);
    for line in r.split(b'\n') {
        let mut line = line?;
        line.push(b'\n');
        out.write_all(&line)?;
    }
    Ok(())
}

/// A redis-server on a free port, stopped when dropped. None when redis-server is missing.
pub struct Redis {
    child: Child,
    pub port: u16,
}

impl Redis {
    pub fn start() -> Option<Redis> {
        if Command::new("redis-server")
            .arg("--version")
            .output()
            .is_err()
        {
            return None;
        }
        // redis has no `--port 0`: take a free port from the kernel, release it, start redis
        // on it; another process may grab it in between, so retry a few times.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("free port")
                .port();
            let child = Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn redis-server");
            let mut r = Redis { child, port };
            if r.wait_ready() {
                return Some(r);
            }
        }
        panic!("redis-server did not start on any of 5 free ports");
    }

    /// Polls the port (bounded: 10 s) until redis answers PING; false if it exited.
    fn wait_ready(&mut self) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return false;
            }
            if let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) {
                let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
                let mut buf = [0u8; 7];
                if s.write_all(b"PING\r\n").is_ok()
                    && s.read_exact(&mut buf).is_ok()
                    && &buf == b"+PONG\r\n"
                {
                    return true;
                }
            }
            thread::sleep(Duration::from_millis(20));
        }
        false
    }

    pub fn target(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Removes a Unix socket path when dropped.
pub struct Cleanup(pub PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(Path::new(&self.0));
    }
}

/// A server that makes every connection wait `wait` for its greeting (`HELLO\n`), answers one
/// request line with an HTTP response saying `Connection: close`, and closes: each exchange
/// after the first waits for a new connection and its greeting.
pub fn slow_greeting_then_close(wait: Duration) -> SocketAddr {
    serve(move |s| {
        let Ok(mut out) = s.try_clone() else { return };
        thread::sleep(wait);
        if out.write_all(b"HELLO\n").is_err() {
            return;
        }
        let mut r = BufReader::new(s);
        let mut line = String::new();
        if !matches!(r.read_line(&mut line), Ok(n) if n > 0) {
            return;
        }
        let _ =
            out.write_all(b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok");
    })
}

/// `python3 -u -m http.server 0` in `dir` (HTTP/1.0: it closes the connection after every
/// response); None when python3 is missing. Ready when it has printed its port.
pub fn python_http_server(dir: &Path) -> Option<(Child, SocketAddr)> {
    let mut child = Command::new("python3")
        .args(["-u", "-m", "http.server", "0", "--bind", "127.0.0.1"])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let mut out = BufReader::new(child.stdout.take()?);
    let mut line = String::new();
    out.read_line(&mut line).ok()?;
    // "Serving HTTP on 127.0.0.1 port 36241 (http://127.0.0.1:36241/) ..."
    let port: u16 = line
        .split(" port ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((child, SocketAddr::from(([127, 0, 0, 1], port))))
}
