//! Specimen servers: small, real servers that show each server-side pathology of PHYSICS.md
//! and its fix, built into the binary so `demo`, the tests and a curious user need nothing else.
//!
//! They are deliberately ordinary blocking servers — one thread per connection, plain
//! `read`/`write` on a std `TcpStream`, the socket options a C or Python server would have —
//! so that what the kernel does with their writes is exactly what it does with the real ones.
//! They also listen on a Unix socket (`unix:PATH`), as local daemons do: the same protocols
//! and writes, with no Nagle (a Unix socket has none) — what `run --target unix:PATH` drives.
//!
//! Protocols:
//! - `line`: a request is one line ending in `\n`; the reply is `lines` lines of text and a
//!   terminating `.\r\n` line (a Zino-style legacy listing). Requests may be pipelined: they
//!   are answered in order.
//! - `length-prefixed`: a request is a 4-byte big-endian length and that many bytes; the reply
//!   echoes it the same way, in one write.
//!
//! Behaviours (the pathology, and the flag that fixes it):
//! - `--writes per-line`: one `write` per reply line, Nagle on unless `--nodelay`: the
//!   Nagle × delayed-ACK stall (§3). `--writes whole` builds the reply and writes it once.
//! - `--drain spin`: after each reply, poll the send queue (`SIOCOUTQ`) until it is empty,
//!   as the busy event loops of §6 do: the same packets, far more CPU. `--drain none` trusts
//!   the kernel.
//! - `--line-gap D`: a pause between the writes of a per-line reply (a server computing each
//!   row); on a Unix socket, where nothing coalesces or holds writes, it is what makes a reply
//!   arrive in parts.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod socket;

use crate::proxy::Addr;
pub use socket::SpecimenListener;
use socket::Stream;

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Protocol {
    /// One request line; the reply is several lines and a `.` line.
    Line,
    /// 4-byte big-endian length, then the body; echoed back.
    LengthPrefixed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Writes {
    /// One write per reply line (the pathology when Nagle is on).
    PerLine,
    /// The whole reply in one write (the fix).
    Whole,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Drain {
    /// Write and move on: the kernel sends the queue.
    None,
    /// Spin on SIOCOUTQ until the send queue is empty after every reply (burns CPU).
    Spin,
}

#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub protocol: Protocol,
    pub writes: Writes,
    pub nodelay: bool,
    /// SO_SNDBUF for accepted sockets (None: the kernel's autotuning).
    pub sndbuf: Option<u32>,
    pub drain: Drain,
    /// Lines per reply (`line` protocol), besides the terminator.
    pub lines: usize,
    /// Bytes per reply line, including `\r\n`.
    pub line_bytes: usize,
    /// Largest request body accepted (`length-prefixed`); larger closes the connection.
    pub max_body: usize,
    /// Answer this many requests in all, then exit the process (status 3) when the next one
    /// arrives: a server that dies in the middle of a run.
    pub exit_after: Option<u64>,
    /// A pause between the writes of a `per-line` reply, as a server that computes each row
    /// before writing it. On a Unix socket (no Nagle) this is what splits a reply into the
    /// chunks a Nagle-on hop in front of it then holds.
    pub line_gap: Duration,
}

/// Counts what the server did, for whoever runs it in-process.
#[derive(Debug, Default)]
pub struct Counters {
    pub connections: AtomicU64,
    pub requests: AtomicU64,
}

/// Accepts until the listener fails or `idle` passes with no new connection and none open.
/// Each connection runs on its own thread.
pub fn serve(
    listener: SpecimenListener,
    cfg: ServerConfig,
    idle: Duration,
) -> io::Result<Arc<Counters>> {
    let counters = Arc::new(Counters::default());
    let open = Arc::new(AtomicU64::new(0));
    listener.set_nonblocking(true)?;
    let mut quiet_since = Instant::now();
    loop {
        match listener.accept() {
            Ok(stream) => {
                stream.set_nonblocking(false)?;
                counters.connections.fetch_add(1, Ordering::Relaxed);
                open.fetch_add(1, Ordering::SeqCst);
                let (cfg, counters, open) = (cfg.clone(), Arc::clone(&counters), Arc::clone(&open));
                std::thread::spawn(move || {
                    let _ = connection(stream, &cfg, &counters);
                    open.fetch_sub(1, Ordering::SeqCst);
                });
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                if open.load(Ordering::SeqCst) > 0 {
                    quiet_since = Instant::now();
                } else if quiet_since.elapsed() >= idle {
                    return Ok(counters);
                }
                // Wake on the next connection, or after a while to re-check the idle clock.
                let mut pfd = libc::pollfd {
                    fd: listener.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one pollfd on the stack.
                unsafe { libc::poll(&mut pfd, 1, 100) };
            }
            Err(e) => return Err(e),
        }
    }
}

/// Binds `at`, prints the readiness line (`listening 127.0.0.1:PORT` or
/// `listening unix:PATH`) and serves; a Unix socket file is removed when serving ends.
pub fn run(at: &Addr, cfg: ServerConfig, idle: Duration) -> io::Result<Arc<Counters>> {
    let listener = SpecimenListener::bind(at)?;
    let mut out = io::stdout().lock();
    writeln!(out, "listening {}", listener.local(at)?)?;
    out.flush()?;
    drop(out);
    let served = serve(listener, cfg, idle);
    if let Addr::Unix(p) = at {
        let _ = std::fs::remove_file(p);
    }
    served
}

fn connection(stream: Stream, cfg: &ServerConfig, counters: &Counters) -> io::Result<()> {
    if let Stream::Tcp(s) = &stream {
        s.set_nodelay(cfg.nodelay)?;
        if let Some(bytes) = cfg.sndbuf {
            socket2::SockRef::from(s).set_send_buffer_size(bytes as usize)?;
        }
    }
    match cfg.protocol {
        Protocol::Line => line_connection(stream, cfg, counters),
        Protocol::LengthPrefixed => lp_connection(stream, cfg, counters),
    }
}

fn line_connection(stream: Stream, cfg: &ServerConfig, counters: &Counters) -> io::Result<()> {
    let mut out = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut request = Vec::new();
    let reply_lines = reply_lines(cfg);
    loop {
        request.clear();
        if reader.read_until(b'\n', &mut request)? == 0 {
            return Ok(());
        }
        count_request(cfg, counters);
        match cfg.writes {
            Writes::PerLine => {
                for (i, line) in reply_lines.iter().enumerate() {
                    if i > 0 && !cfg.line_gap.is_zero() {
                        std::thread::sleep(cfg.line_gap);
                    }
                    out.write_all(line)?;
                }
            }
            Writes::Whole => out.write_all(&reply_lines.concat())?,
        }
        if cfg.drain == Drain::Spin {
            spin_until_sent(&out);
        }
    }
}

/// Counts a request about to be answered; with `exit_after`, the process dies instead of
/// answering one more than that.
fn count_request(cfg: &ServerConfig, counters: &Counters) {
    let n = counters.requests.fetch_add(1, Ordering::SeqCst) + 1;
    if let Some(limit) = cfg.exit_after.filter(|&limit| n > limit) {
        eprintln!("tcpdoctor specimen: {limit} requests answered (--exit-after): exiting");
        std::process::exit(3);
    }
}

fn reply_lines(cfg: &ServerConfig) -> Vec<Vec<u8>> {
    let width = cfg.line_bytes.max(8) - 2;
    let mut lines: Vec<Vec<u8>> = (0..cfg.lines)
        .map(|i| {
            let mut l = format!("{:03} ", 200 + i % 100).into_bytes();
            l.resize(width, b'x');
            l.extend_from_slice(b"\r\n");
            l
        })
        .collect();
    lines.push(b".\r\n".to_vec());
    lines
}

fn lp_connection(mut stream: Stream, cfg: &ServerConfig, counters: &Counters) -> io::Result<()> {
    let mut body = Vec::new();
    loop {
        let mut head = [0u8; 4];
        match stream.read_exact(&mut head) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        }
        let len = u32::from_be_bytes(head) as usize;
        if len > cfg.max_body {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request too large",
            ));
        }
        body.clear();
        body.extend_from_slice(&head);
        body.resize(4 + len, 0);
        stream.read_exact(&mut body[4..])?;
        count_request(cfg, counters);
        stream.write_all(&body)?;
        if cfg.drain == Drain::Spin {
            spin_until_sent(&stream);
        }
    }
}

/// The busy loop of PHYSICS §6: ask the kernel how much is still queued until nothing is,
/// re-checking readability in between as an event loop flipping its interest would. Bounded
/// (one second per reply) so a peer that stops reading cannot pin a core forever.
fn spin_until_sent(stream: &Stream) {
    let fd = stream.as_raw_fd();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        let mut queued: libc::c_int = 0;
        // SAFETY: SIOCOUTQ writes one c_int through a pointer to our local, on a socket we own.
        if unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) } != 0 || queued == 0 {
            return;
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack, zero timeout.
        unsafe { libc::poll(&mut pfd, 1, 0) };
    }
}
