//! One proxied connection: connect upstream, then run both directions until both are done.
//!
//! Rules:
//! 1. Upstream connect failure: log `conn N: upstream ADDR refused: …` and reset the client.
//! 2. EOF on one side (FIN): drain that direction's pipeline, then `shutdown(Write)` the other
//!    socket; the opposite direction keeps running (half-close).
//! 3. A read error (ECONNRESET) on one side: the other socket is closed with SO_LINGER 0, which
//!    sends RST. A write error (the receiver went away) resets the socket we read from.
//! 4. Each direction reads continuously while bytes wait in its pipeline (a delay never stops
//!    the reading), but stops reading while more than `max_queued` bytes wait: back-pressure,
//!    bounded memory.
//! 5. Three ways to move bytes, the same contract (one write per chunk read unless the
//!    direction's chunk mode says otherwise): `splice(2)` for unimpaired TCP-to-TCP without a
//!    pcap (no copy through user space), a plain read/write loop for other unimpaired
//!    directions, and the impairment pipeline, which waits on a `timerfd` (see `timer.rs`):
//!    a delayed chunk leaves within a few microseconds of its time, not tokio's 1 ms.

use std::io::Read;
use std::net::SocketAddr;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::time::Duration;

use socket2::SockRef;
use tcpdoctor_core::impair::Poll;
use tcpdoctor_core::Timestamp;
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;

use super::record::{Event, RecordHandle, PCAP_PAYLOAD};
use super::sockopt;
use super::summary::{ConnStats, Registry, C2S, S2C};
use super::timer::Timer;
use super::{CapturePoint, Clock, DirConfig, LegConfig, ProxyConfig, Reader, Stream, Writer};

/// Read buffer per direction.
const BUF: usize = 128 * 1024;
/// On the splice path, chunks under this size are copied (see `splice_loop`).
const SMALL: usize = 16 * 1024;
/// Longest wait for the upstream to accept.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a held (Nagle) send queue is checked while writing a `--pcap`.
const HELD_POLL: Duration = Duration::from_millis(1);

/// How one direction ended.
#[derive(Debug)]
enum Outcome {
    /// EOF read, everything forwarded, the other socket shut down for writing.
    Done,
    /// Reading failed: the sender reset (or broke) its connection.
    ReadFailed(std::io::Error),
    /// Writing failed: the receiver went away.
    WriteFailed(std::io::Error),
}

pub async fn serve(
    id: u64,
    client: Stream,
    peer: Option<SocketAddr>,
    cfg: Arc<ProxyConfig>,
    clock: Clock,
    rec: RecordHandle,
    registry: Arc<Registry>,
) {
    let st = registry.open(id, peer);
    serve_inner(id, client, peer, &cfg, clock, &rec, &st).await;
    if rec.pcap {
        rec.send(Event::Close { conn: id }).await;
    }
    registry.close(&st);
}

async fn serve_inner(
    id: u64,
    client: Stream,
    peer: Option<SocketAddr>,
    cfg: &ProxyConfig,
    clock: Clock,
    rec: &RecordHandle,
    st: &ConnStats,
) {
    if client.is_tcp() {
        if let Err(e) = sockopt::apply(client.fd(), &cfg.client_leg) {
            eprintln!("conn {id}: client leg socket options: {e}");
        }
    }
    let mut client = client;
    let connect = tokio::time::timeout(CONNECT_TIMEOUT, Stream::connect(&cfg.upstream));
    let connected = connect.await.unwrap_or_else(|_| {
        Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {CONNECT_TIMEOUT:?}"),
        ))
    });
    let mut upstream = match connected {
        Ok(s) => s,
        Err(e) => {
            let verb = match e.kind() {
                std::io::ErrorKind::ConnectionRefused => "refused",
                _ => "failed",
            };
            eprintln!(
                "conn {id}: upstream {} {verb}: {e}; resetting the client",
                cfg.upstream
            );
            st.set_end(format!("upstream {verb}: {e}"));
            let _ = sockopt::linger_zero(client.fd());
            return;
        }
    };
    if upstream.is_tcp() {
        if let Err(e) = sockopt::apply(upstream.fd(), &cfg.server_leg) {
            eprintln!("conn {id}: server leg socket options: {e}");
        }
    }
    if rec.pcap {
        rec.send(Event::Open {
            conn: id,
            ts: clock.now(),
            peer,
        })
        .await;
    }
    let (cfd, ufd) = (client.fd(), upstream.fd());
    let (ctcp, utcp) = (client.is_tcp(), upstream.is_tcp());
    let held = Held::default();
    // With the capture at one end, the bytes that end sends are recorded when read from it.
    let pcap_on_read = |dir: usize| {
        rec.pcap
            && match cfg.pcap_at {
                CapturePoint::Proxy => false,
                CapturePoint::Client => dir == C2S,
                CapturePoint::Server => dir == S2C,
            }
    };
    let c2s = Dir {
        id,
        dir: C2S,
        cfg: &cfg.c2s,
        seed: cfg.seed,
        max_queued: cfg.max_queued,
        in_leg: &cfg.client_leg,
        in_fd: cfd,
        in_tcp: ctcp,
        out_leg: &cfg.server_leg,
        out_fd: ufd,
        out_tcp: utcp,
        clock,
        rec,
        st,
        held: &held,
        pcap_on_read: pcap_on_read(C2S),
    };
    let s2c = Dir {
        dir: S2C,
        cfg: &cfg.s2c,
        in_leg: &cfg.server_leg,
        in_fd: ufd,
        in_tcp: utcp,
        out_leg: &cfg.client_leg,
        out_fd: cfd,
        out_tcp: ctcp,
        pcap_on_read: pcap_on_read(S2C),
        ..c2s
    };
    let splice = cfg.c2s.is_passthrough() && cfg.s2c.is_passthrough() && !rec.pcap;
    let reset = match (&client, &upstream) {
        (Stream::Tcp(c), Stream::Tcp(u)) if splice => {
            drive(st, cfd, ufd, c2s.spliced(c, u), s2c.spliced(u, c)).await
        }
        _ => {
            let (mut cr, mut cw) = client.split();
            let (mut ur, mut uw) = upstream.split();
            let a = c2s.run(&mut cr, &mut uw);
            let b = s2c.run(&mut ur, &mut cw);
            drive(st, cfd, ufd, a, b).await
        }
    };
    if let Some((fd, from)) = reset {
        // Both sockets are still open here: they live until the end of this function.
        let _ = sockopt::linger_zero(fd);
        if rec.pcap {
            rec.send(Event::Rst {
                conn: id,
                dir: from,
                ts: clock.now(),
            })
            .await;
        }
    } else {
        st.set_end("closed");
    }
}

/// Runs both directions until both are done, or one fails: then returns the socket to reset
/// and which direction's sender the RST stands for.
async fn drive(
    st: &ConnStats,
    cfd: RawFd,
    ufd: RawFd,
    a: impl std::future::Future<Output = Outcome>,
    b: impl std::future::Future<Output = Outcome>,
) -> Option<(RawFd, usize)> {
    let mut a = std::pin::pin!(a);
    let mut b = std::pin::pin!(b);
    let (mut a_done, mut b_done) = (false, false);
    while !a_done || !b_done {
        let (d, out) = tokio::select! {
            o = &mut a, if !a_done => (C2S, o),
            o = &mut b, if !b_done => (S2C, o),
        };
        let (in_fd, out_fd) = if d == C2S { (cfd, ufd) } else { (ufd, cfd) };
        let side = |d: usize| if d == C2S { "client" } else { "server" };
        match &out {
            Outcome::Done => {}
            Outcome::ReadFailed(e) => {
                st.set_end(format!("{} reset: {e}", side(d)));
                return Some((out_fd, d));
            }
            Outcome::WriteFailed(e) => {
                st.set_end(format!("{} went away: {e}", side(1 - d)));
                return Some((in_fd, 1 - d));
            }
        }
        if d == C2S {
            a_done = true;
        } else {
            b_done = true;
        }
    }
    None
}

/// One direction: read from one socket, impair, write to the other.
#[derive(Clone, Copy)]
struct Dir<'a> {
    id: u64,
    dir: usize,
    cfg: &'a DirConfig,
    seed: u64,
    max_queued: usize,
    in_leg: &'a LegConfig,
    in_fd: RawFd,
    in_tcp: bool,
    out_leg: &'a LegConfig,
    out_fd: RawFd,
    out_tcp: bool,
    clock: Clock,
    rec: &'a RecordHandle,
    st: &'a ConnStats,
    /// Per direction, heads and lengths of writes the kernel still holds (pcap + Nagle only).
    /// Shared, so that one direction can record the other's release before its own bytes.
    held: &'a Held,
    /// The pcap is taken at this direction's sending end: its bytes (and FIN) are recorded
    /// when read, not when written on.
    pcap_on_read: bool,
}

type Held = std::sync::Mutex<[Vec<(Vec<u8>, usize)>; 2]>;

/// Per-direction bookkeeping for recordings.
#[derive(Default)]
struct Track {
    last_read: Option<Timestamp>,
}

impl Dir<'_> {
    /// Whether the pcap must follow bytes the kernel holds back (Nagle on the outbound leg).
    fn watch_held(&self) -> bool {
        self.rec.pcap && !self.pcap_on_read && self.out_tcp && self.out_leg.nagle
    }

    async fn run(self, r: &mut Reader<'_>, w: &mut Writer<'_>) -> Outcome {
        let mut track = Track::default();
        let out = if self.cfg.is_passthrough() && !self.watch_held() {
            self.pass_through(r, w, &mut track).await
        } else {
            self.impaired(r, w, &mut track).await
        };
        if matches!(out, Outcome::Done) {
            self.release_held(self.dir, false).await;
            let _ = w.shutdown().await;
            if self.rec.pcap && !self.pcap_on_read {
                self.record_fin().await;
            }
        }
        out
    }

    /// The fast path: no impairment, each chunk written as read, from the read buffer.
    async fn pass_through(
        &self,
        r: &mut Reader<'_>,
        w: &mut Writer<'_>,
        track: &mut Track,
    ) -> Outcome {
        let mut buf = vec![0u8; BUF];
        loop {
            let n = match r.read(&mut buf).await {
                Ok(0) => {
                    self.on_eof().await;
                    return Outcome::Done;
                }
                Ok(n) => n,
                Err(e) => return Outcome::ReadFailed(e),
            };
            let ts = self.on_read(n, track).await;
            self.read_passed(&buf[..n], ts).await;
            if let Err(e) = w.write_all(&buf[..n]).await {
                return Outcome::WriteFailed(e);
            }
            self.on_write(&buf[..n], track).await;
            if self.out_leg.cork && self.out_tcp {
                let _ = sockopt::uncork(self.out_fd);
            }
        }
    }

    /// The zero-copy path (TCP to TCP, no impairment, no pcap): `splice(2)` moves each chunk
    /// from the socket into a pipe and on into the other socket without entering user space.
    ///
    /// Two pipes take turns, so that reading never waits for a slow write: while one drains
    /// into a receiver that cannot take more yet, the other fills from the sender. Each chunk
    /// is still read into an empty pipe and written, in order, as soon as the receiver can take
    /// it — a chunk waits only while the socket could not have sent it anyway (its send queue
    /// is full, where the kernel would merge it with the one before). A pipe is filled only
    /// when empty, so "would block" always means the socket, never a full pipe.
    ///
    /// Small chunks are copied instead: while both pipes are empty and the last chunk was
    /// under [`SMALL`], a chunk is read into a buffer of that size and sent at once (what the
    /// receiver cannot take yet goes into a pipe, ahead of anything spliced later). A copy of
    /// a few KiB costs less than two splices and their page references — a couple of
    /// microseconds per hop for request/response traffic — while bulk streams, whose chunks
    /// fill the buffer, go back to splicing on the next read.
    async fn spliced(&self, src: &TcpStream, dst: &TcpStream) -> Outcome {
        let out = self.splice_loop(src, dst).await;
        if matches!(out, Outcome::Done) {
            let _ = socket2::SockRef::from(dst).shutdown(std::net::Shutdown::Write);
        }
        out
    }

    async fn splice_loop(&self, src: &TcpStream, dst: &TcpStream) -> Outcome {
        let pipes = match (sockopt::Pipe::new(), sockopt::Pipe::new()) {
            (Ok(a), Ok(b)) => [a, b],
            (Err(e), _) | (_, Err(e)) => return Outcome::ReadFailed(e),
        };
        // Bytes waiting in each pipe; `head` is the one to drain first. Invariant: when the head
        // is empty, so is the other.
        let mut queued = [0usize; 2];
        let mut head = 0;
        let mut eof = false;
        let mut track = Track::default();
        let mut small = vec![0u8; SMALL];
        let mut last_small = true;
        loop {
            if eof && queued[head] == 0 {
                return Outcome::Done;
            }
            let fill = if queued[head] == 0 { head } else { 1 - head };
            let can_fill = !eof && queued[fill] == 0;
            let copy = last_small && queued[head] == 0;
            tokio::select! {
                biased;
                ready = dst.writable(), if queued[head] > 0 => {
                    if let Err(e) = ready {
                        return Outcome::WriteFailed(e);
                    }
                    let left = queued[head];
                    match dst.try_io(Interest::WRITABLE, || pipes[head].drain_to(self.out_fd, left)) {
                        Ok(k) => queued[head] -= k,
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                        Err(e) => return Outcome::WriteFailed(e),
                    }
                    if queued[head] == 0 {
                        head = 1 - head;
                        if queued[head] == 0 && self.out_leg.cork {
                            let _ = sockopt::uncork(self.out_fd);
                        }
                    }
                }
                ready = src.readable(), if can_fill => {
                    if let Err(e) = ready {
                        return Outcome::ReadFailed(e);
                    }
                    let pipe = &pipes[fill];
                    let got = if copy {
                        read_once(src, || (&*SockRef::from(src)).read(&mut small), |n| n < SMALL)
                    } else {
                        read_once(src, || pipe.fill_from(self.in_fd), |n| pipe.drained_socket(n))
                    };
                    let n = match got {
                        Ok(Some(n)) => n,
                        Ok(None) => continue,
                        Err(e) => return Outcome::ReadFailed(e),
                    };
                    if n == 0 {
                        eof = true;
                        continue;
                    }
                    last_small = n < SMALL;
                    self.on_read(n, &mut track).await;
                    if !copy {
                        queued[fill] = n;
                        continue;
                    }
                    // Copied: sent at once; what the receiver cannot take yet waits in the
                    // (empty) head pipe, ahead of anything spliced later.
                    let sent = match send_now(dst, &small[..n]) {
                        Ok(k) => k,
                        Err(e) => return Outcome::WriteFailed(e),
                    };
                    if sent < n {
                        if let Err(e) = pipes[head].fill_with(&small[sent..n]) {
                            return Outcome::WriteFailed(e);
                        }
                        queued[head] = n - sent;
                    } else if self.out_leg.cork {
                        let _ = sockopt::uncork(self.out_fd);
                    }
                }
            }
        }
    }

    /// The general path: every chunk goes through the direction's pipeline.
    async fn impaired(&self, r: &mut Reader<'_>, w: &mut Writer<'_>, track: &mut Track) -> Outcome {
        let mut pipe = self
            .cfg
            .pipeline(self.seed.wrapping_add(self.id.wrapping_mul(2)) ^ self.dir as u64);
        let mut buf = vec![0u8; BUF];
        let mut eof = false;
        let mut timer: Option<Timer> = None;
        // The instant the last sleep was for: the first write after it is a timed one.
        let mut due: Option<Timestamp> = None;
        loop {
            let now = self.clock.now();
            let mut wait = None;
            let mut wrote = false;
            loop {
                match pipe.poll(now) {
                    Poll::Emit(d) => {
                        if let Some(t) = due.take_if(|t| *t <= now) {
                            self.st.dirs[self.dir].add_late(now.since(t));
                        }
                        if let Err(e) = w.write_all(&d).await {
                            return Outcome::WriteFailed(e);
                        }
                        wrote = true;
                        self.on_write(&d, track).await;
                    }
                    Poll::WaitUntil(t) => {
                        wait = Some(t);
                        break;
                    }
                    Poll::Idle => break,
                }
            }
            if wrote && self.out_leg.cork && self.out_tcp && pipe.queued() == 0 {
                let _ = sockopt::uncork(self.out_fd);
            }
            if eof && pipe.queued() == 0 {
                return Outcome::Done;
            }
            let can_read = !eof && pipe.queued() < self.max_queued;
            if wait.is_some() && timer.is_none() {
                // Without a timerfd (fd limit reached), tokio's millisecond timer still works.
                timer = Timer::new().ok();
            }
            due = wait;
            let sleep_until = wait.map(|t| self.clock.instant(t));
            tokio::select! {
                res = r.read(&mut buf), if can_read => match res {
                    Ok(0) => {
                        eof = true;
                        self.on_eof().await;
                    }
                    Ok(n) => {
                        let ts = self.on_read(n, track).await;
                        self.read_passed(&buf[..n], ts).await;
                        pipe.push(buf[..n].to_vec(), ts);
                    }
                    Err(e) => return Outcome::ReadFailed(e),
                },
                _ = sleep_opt(timer.as_ref(), sleep_until) => {}
                _ = tokio::time::sleep(HELD_POLL), if self.has_held(self.dir) => {
                    self.release_held(self.dir, true).await;
                }
            }
        }
    }

    /// Counts and records a chunk of `n` bytes just read; returns its timestamp.
    async fn on_read(&self, n: usize, track: &mut Track) -> Timestamp {
        let ts = self.clock.now();
        self.st.dirs[self.dir].add_chunk(n);
        if self.in_leg.quickack && self.in_tcp {
            let _ = sockopt::quickack(self.in_fd);
        }
        if self.rec.jsonl {
            let gap = track.last_read.map(|p| ts.since(p).as_nanos() as u64);
            self.rec
                .send(Event::Read {
                    conn: self.id,
                    dir: self.dir,
                    ts,
                    len: n,
                    gap,
                })
                .await;
        }
        track.last_read = Some(ts);
        ts
    }

    /// With the pcap at this direction's sending end: records bytes just read, at `ts`.
    async fn read_passed(&self, d: &[u8], ts: Timestamp) {
        if !self.pcap_on_read {
            return;
        }
        self.release_held(1 - self.dir, true).await;
        let head = d[..d.len().min(PCAP_PAYLOAD)].to_vec();
        self.sent(self.dir, head, d.len(), ts).await;
    }

    /// This direction's FIN, for the pcap.
    async fn record_fin(&self) {
        self.rec
            .send(Event::Fin {
                conn: self.id,
                dir: self.dir,
                ts: self.clock.now(),
            })
            .await;
    }

    /// With the pcap at this direction's sending end: the sender's FIN passed when read.
    async fn on_eof(&self) {
        if self.pcap_on_read {
            self.release_held(1 - self.dir, true).await;
            self.record_fin().await;
        }
    }

    /// Records bytes just written: at once, or — when the kernel holds them (Nagle) — later,
    /// when they leave.
    async fn on_write(&self, d: &[u8], _track: &mut Track) {
        if !self.rec.pcap {
            return;
        }
        // Bytes the other direction's kernel held and has since sent left before these (the
        // peer received them and answered): record them first, in wire order.
        self.release_held(1 - self.dir, true).await;
        if self.pcap_on_read {
            return;
        }
        let head = d[..d.len().min(PCAP_PAYLOAD)].to_vec();
        if self.watch_held() {
            let queued =
                self.has_held(self.dir) || sockopt::unsent_bytes(self.out_fd).is_ok_and(|n| n > 0);
            if queued {
                if let Ok(mut h) = self.held.lock() {
                    h[self.dir].push((head, d.len()));
                    return;
                }
            }
        }
        self.sent(self.dir, head, d.len(), self.clock.now()).await;
    }

    fn has_held(&self, dir: usize) -> bool {
        self.held.lock().is_ok_and(|h| !h[dir].is_empty())
    }

    /// If the bytes held in `dir` have left (or `check` is false: they leave now, with a FIN),
    /// records the peer's ACK that released them and then the bytes.
    async fn release_held(&self, dir: usize, check: bool) {
        if !self.has_held(dir) {
            return;
        }
        // The socket `dir` writes to: ours, or for the other direction the one we read from.
        let fd = if dir == self.dir {
            self.out_fd
        } else {
            self.in_fd
        };
        if check && sockopt::unsent_bytes(fd).is_ok_and(|n| n > 0) {
            return;
        }
        let taken = match self.held.lock() {
            Ok(mut h) => std::mem::take(&mut h[dir]),
            Err(_) => return,
        };
        if taken.is_empty() {
            return;
        }
        let ts = self.clock.now();
        if check {
            self.rec
                .send(Event::Acked {
                    conn: self.id,
                    dir,
                    ts,
                })
                .await;
        }
        // Released together, the held writes leave together: as one segment (up to the MSS,
        // which the synthetic capture applies).
        let mut head = Vec::new();
        let mut len = 0;
        for (h, n) in taken {
            if head.len() == len {
                head.extend_from_slice(
                    &h[..h.len().min(PCAP_PAYLOAD - head.len().min(PCAP_PAYLOAD))],
                );
            }
            len += n;
        }
        self.sent(dir, head, len, ts).await;
    }

    async fn sent(&self, dir: usize, head: Vec<u8>, len: usize, ts: Timestamp) {
        self.rec
            .send(Event::Sent {
                conn: self.id,
                dir,
                ts,
                head,
                len,
            })
            .await;
    }
}

/// One non-blocking send of `data` (no SIGPIPE): how much the socket took, 0 when full.
fn send_now(dst: &TcpStream, data: &[u8]) -> std::io::Result<usize> {
    match dst.try_io(Interest::WRITABLE, || {
        SockRef::from(dst).send_with_flags(data, libc::MSG_NOSIGNAL)
    }) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
        r => r,
    }
}

/// One read from `src` with `read`: `Some(n)` (0 at EOF), or None when the socket had nothing.
///
/// A read that `emptied` the socket (it moved less than it could) answers "would block" to
/// tokio at once: that clears the readiness now instead of after one more read that can only
/// fail (two system calls per round trip saved). New bytes arriving meanwhile raise a new
/// edge, so nothing is missed.
fn read_once(
    src: &TcpStream,
    mut read: impl FnMut() -> std::io::Result<usize>,
    emptied: impl Fn(usize) -> bool,
) -> std::io::Result<Option<usize>> {
    let mut moved = None;
    let got = src.try_io(Interest::READABLE, || {
        let n = read()?;
        if n > 0 && emptied(n) {
            moved = Some(n);
            return Err(std::io::ErrorKind::WouldBlock.into());
        }
        Ok(n)
    });
    match (got, moved) {
        (_, Some(n)) | (Ok(n), None) => Ok(Some(n)),
        (Err(e), None) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(None),
        (Err(e), None) => Err(e),
    }
}

async fn sleep_opt(timer: Option<&Timer>, until: Option<std::time::Instant>) {
    match (timer, until) {
        (Some(timer), Some(t)) => {
            if timer.sleep_until(t).await.is_err() {
                tokio::time::sleep_until(t.into()).await;
            }
        }
        (None, Some(t)) => tokio::time::sleep_until(t.into()).await,
        (_, None) => std::future::pending().await,
    }
}
