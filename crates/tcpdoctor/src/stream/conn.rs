//! One connection of a stream: reads and counts (from the server) or writes (to the server)
//! until told to stop, publishing its totals in atomics the measuring thread reads.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tcpdoctor_core::stream::{Counter, Direction, Framing};

use crate::proxy::Addr;

/// How long a blocked read or write waits before looking at the stop flag.
const POLL: Duration = Duration::from_millis(50);
/// Bytes read per call, and written per batch (whole messages, at least one).
const CHUNK: usize = 256 * 1024;

/// A connected socket of either family.
pub enum Sock {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Sock {
    pub fn connect(target: &Addr, timeout: Duration) -> io::Result<Sock> {
        let s = match target {
            Addr::Tcp(a) => {
                let s = TcpStream::connect_timeout(a, timeout)?;
                s.set_nodelay(true)?;
                Sock::Tcp(s)
            }
            Addr::Unix(p) => Sock::Unix(UnixStream::connect(p)?),
        };
        match &s {
            Sock::Tcp(t) => {
                t.set_read_timeout(Some(POLL))?;
                t.set_write_timeout(Some(POLL))?;
            }
            Sock::Unix(u) => {
                u.set_read_timeout(Some(POLL))?;
                u.set_write_timeout(Some(POLL))?;
            }
        }
        Ok(s)
    }

    pub fn try_clone(&self) -> io::Result<Sock> {
        Ok(match self {
            Sock::Tcp(t) => Sock::Tcp(t.try_clone()?),
            Sock::Unix(u) => Sock::Unix(u.try_clone()?),
        })
    }

    pub fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Sock::Tcp(t) => t.as_fd(),
            Sock::Unix(u) => u.as_fd(),
        }
    }

    /// Its local address (TCP): the peer the server's trace shows for it.
    pub fn local(&self) -> Option<std::net::SocketAddr> {
        match self {
            Sock::Tcp(t) => t.local_addr().ok(),
            Sock::Unix(_) => None,
        }
    }

    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(t) => t.read(buf),
            Sock::Unix(u) => u.read(buf),
        }
    }

    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sock::Tcp(t) => t.write(buf),
            Sock::Unix(u) => u.write(buf),
        }
    }
}

/// What every connection publishes, and what stops them.
#[derive(Default)]
pub struct Shared {
    pub stop: AtomicBool,
    /// Whole messages counted (from the server).
    pub messages: AtomicU64,
    /// Bytes read (from the server) or written (to the server).
    pub bytes: AtomicU64,
    /// The first connection's failure: the run stops with it.
    pub failure: Mutex<Option<String>>,
}

impl Shared {
    fn fail(&self, conn: u64, what: String) {
        let mut f = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(format!("connection {conn}: {what}"));
        }
        self.stop.store(true, Ordering::SeqCst);
    }
}

fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Runs connection `conn` until `shared.stop`.
pub fn run(
    conn: u64,
    mut sock: Sock,
    direction: Direction,
    framing: Framing,
    hello: &[u8],
    message: &[u8],
    shared: &Arc<Shared>,
) {
    if let Err(e) = write_all(&mut sock, hello, shared) {
        shared.fail(
            conn,
            format!("sending --hello: {}", crate::bench::conn::reason(&e)),
        );
        return;
    }
    let r = match direction {
        Direction::FromServer => receive(&mut sock, framing, shared),
        Direction::ToServer => send(&mut sock, message, shared),
    };
    if let Err(what) = r {
        shared.fail(conn, what);
    }
}

fn write_all(sock: &mut Sock, mut bytes: &[u8], shared: &Shared) -> io::Result<()> {
    while !bytes.is_empty() && !shared.stop.load(Ordering::Relaxed) {
        match sock.write(bytes) {
            Ok(n) => bytes = &bytes[n..],
            Err(e) if timed_out(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn receive(sock: &mut Sock, framing: Framing, shared: &Shared) -> Result<(), String> {
    let mut counter = Counter::new(framing);
    let mut buf = vec![0u8; CHUNK];
    while !shared.stop.load(Ordering::Relaxed) {
        match sock.read(&mut buf) {
            Ok(0) => return Err("the server closed the stream".into()),
            Ok(n) => {
                let before = counter.messages;
                counter.feed(&buf[..n])?;
                shared.bytes.fetch_add(n as u64, Ordering::Relaxed);
                shared
                    .messages
                    .fetch_add(counter.messages - before, Ordering::Relaxed);
            }
            Err(e) if timed_out(&e) => {}
            Err(e) => return Err(crate::bench::conn::reason(&e)),
        }
    }
    Ok(())
}

fn send(sock: &mut Sock, message: &[u8], shared: &Shared) -> Result<(), String> {
    let copies = (CHUNK / message.len()).max(1);
    let batch = message.repeat(copies);
    let mut at = 0;
    while !shared.stop.load(Ordering::Relaxed) {
        match sock.write(&batch[at..]) {
            Ok(n) => {
                shared.bytes.fetch_add(n as u64, Ordering::Relaxed);
                at = (at + n) % batch.len();
            }
            Err(e) if timed_out(&e) => {}
            Err(e) => return Err(crate::bench::conn::reason(&e)),
        }
    }
    Ok(())
}
