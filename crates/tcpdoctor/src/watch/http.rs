//! The exporter's HTTP side: `GET /metrics` (the Prometheus text exposition), `GET /healthz`
//! (200 while samples succeed, 503 saying why once none has for three intervals), `GET /` (a
//! line saying where the metrics are); anything else 404, a method other than GET or HEAD 405.
//!
//! Hand-written rather than a server crate: a scrape is one small GET answered from a string
//! already rendered, with the connection closed after it. A request line and headers under
//! 8 KiB must arrive, and the answer be taken, within [`DEADLINE`] of the accept, whatever the
//! client's pace; at most [`MAX_CLIENTS`] are served at once and one more is answered 503 at
//! once and closed, so slow or silent clients can neither hold the scrapes nor the shutdown.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::Shared;
use crate::capture::stop;

/// The whole exchange with one client: its request read and the answer written.
const DEADLINE: Duration = Duration::from_secs(5);
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
        let Ok(mut conn) = conn else { continue };
        if CLIENTS.load(Ordering::Acquire) >= MAX_CLIENTS {
            let _ = conn.set_write_timeout(Some(Duration::from_millis(200)));
            let body = "busy: too many clients at once\n";
            let _ = write!(
                conn,
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            // Take what the client already sent, so that closing does not reset the answer.
            let _ = conn.shutdown(std::net::Shutdown::Write);
            let _ = conn.set_nonblocking(true);
            let _ = conn.read(&mut [0u8; 4096]);
            continue;
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

/// The time left before `deadline`, or a timed-out error.
fn left(deadline: Instant) -> std::io::Result<Duration> {
    deadline
        .checked_duration_since(Instant::now())
        .filter(|d| !d.is_zero())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::TimedOut, "client too slow"))
}

/// Reads the request line and headers (up to the blank line, at most [`MAX_HEAD`] bytes)
/// before `deadline`; the request line.
fn read_head(conn: &TcpStream, deadline: Instant) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let mut reader = conn;
    while !head.ends_with(b"\r\n\r\n") && !head.ends_with(b"\n\n") && head.len() < MAX_HEAD {
        conn.set_read_timeout(Some(left(deadline)?))?;
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&head);
    Ok(text.lines().next().unwrap_or("").to_owned())
}

fn answer(conn: TcpStream, shared: &Mutex<Shared>, stale_after: Duration) -> std::io::Result<()> {
    let deadline = Instant::now() + DEADLINE;
    let line = read_head(&conn, deadline)?;
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
    let mut out = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if method != "HEAD" {
        out.extend_from_slice(body.as_bytes());
    }
    // Written in pieces, each within what is left of the deadline.
    let mut conn = conn;
    let mut at = 0;
    while at < out.len() {
        conn.set_write_timeout(Some(left(deadline)?))?;
        let end = (at + (64 << 10)).min(out.len());
        at += conn.write(&out[at..end])?;
    }
    conn.flush()
}
