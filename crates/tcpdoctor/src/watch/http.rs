//! The exporter's HTTP side: `GET /metrics` (the Prometheus text exposition), `GET /healthz`
//! (200 while samples succeed, 503 saying why once none has for three intervals), `GET /` (a
//! line saying where the metrics are); anything else 404, a method other than GET or HEAD 405.
//!
//! Hand-written rather than a server crate: a scrape is one small GET answered from a string
//! already rendered, with the connection closed after it; a request line and headers under
//! 8 KiB, read with a 5 s timeout, so a slow or silent client holds only its own thread.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Shared;
use crate::capture::stop;

const READ_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_HEAD: usize = 8192;
/// Connections served at once; more wait in the kernel's backlog.
const MAX_CLIENTS: usize = 16;

static CLIENTS: AtomicUsize = AtomicUsize::new(0);

/// Accepts until [`shut`] wakes it after a stop.
pub fn run(listener: TcpListener, shared: &Arc<Mutex<Shared>>, stale_after: Duration) {
    for conn in listener.incoming() {
        if stop::requested() {
            return;
        }
        let Ok(conn) = conn else { continue };
        while CLIENTS.load(Ordering::Acquire) >= MAX_CLIENTS {
            std::thread::sleep(Duration::from_millis(5));
        }
        CLIENTS.fetch_add(1, Ordering::AcqRel);
        let shared = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("scrape".into())
            .spawn(move || {
                let _ = answer(conn, &shared, stale_after);
                CLIENTS.fetch_sub(1, Ordering::AcqRel);
            });
        if spawned.is_err() {
            CLIENTS.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

/// Wakes the accept loop so that it sees the stop.
pub fn shut(addr: SocketAddr) {
    let _ = TcpStream::connect_timeout(&addr, Duration::from_millis(200));
}

fn answer(conn: TcpStream, shared: &Mutex<Shared>, stale_after: Duration) -> std::io::Result<()> {
    conn.set_read_timeout(Some(READ_TIMEOUT))?;
    conn.set_write_timeout(Some(READ_TIMEOUT))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut line = String::new();
    reader.by_ref().take(MAX_HEAD as u64).read_line(&mut line)?;
    // The headers are read and ignored (up to the blank line), so the client's request has
    // been taken whole before the connection closes.
    let mut head = line.len();
    loop {
        let mut h = String::new();
        let n = reader.by_ref().take(MAX_HEAD as u64).read_line(&mut h)?;
        head += n;
        if n == 0 || h == "\r\n" || h == "\n" || head > MAX_HEAD {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let s = super::lock(shared);
            (
                "200 OK",
                "text/plain; version=0.0.4; charset=utf-8",
                s.metrics.clone(),
            )
        }
        ("GET" | "HEAD", "/healthz") => {
            let s = super::lock(shared);
            match (s.last_ok, &s.last_error) {
                (Some(t), _) if t.elapsed() <= stale_after => {
                    ("200 OK", "text/plain; charset=utf-8", "ok\n".to_owned())
                }
                (_, Some(e)) => (
                    "503 Service Unavailable",
                    "text/plain; charset=utf-8",
                    format!("sampling fails: {e}\n"),
                ),
                (Some(t), None) => (
                    "503 Service Unavailable",
                    "text/plain; charset=utf-8",
                    format!(
                        "no sample for {:.1} s (more than three intervals)\n",
                        t.elapsed().as_secs_f64()
                    ),
                ),
                (None, None) => (
                    "503 Service Unavailable",
                    "text/plain; charset=utf-8",
                    "no sample taken yet\n".to_owned(),
                ),
            }
        }
        ("GET" | "HEAD", "/") => (
            "200 OK",
            "text/plain; charset=utf-8",
            "tcpdoctor watch: metrics at /metrics, health at /healthz\n".to_owned(),
        ),
        ("GET" | "HEAD", _) => (
            "404 Not Found",
            "text/plain; charset=utf-8",
            "not found: try /metrics\n".to_owned(),
        ),
        _ => (
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            "only GET and HEAD\n".to_owned(),
        ),
    };
    let mut out = conn;
    write!(
        out,
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    if method != "HEAD" {
        out.write_all(body.as_bytes())?;
    }
    out.flush()
}
