//! The proxy's I/O shell: accept, connect, move bytes, sleep.
//!
//! Every decision about *when* and *in what pieces* bytes leave is made by the pure state
//! machines of `tcpdoctor_core::impair`; this module only reads, writes and waits. Time is
//! converted once, here, from `Instant` to the core's `Timestamp` (ns since the proxy started).
//!
//! # Layout
//! - `mod.rs`: configuration, listener, the accept loop ([`run`]) and shutdown.
//! - `conn.rs`: one connection — upstream connect, two directions, half-close and reset.
//! - `record.rs`: the JSON Lines and pcap sinks, on their own thread behind a bounded channel.
//! - `summary.rs`: byte and chunk counters, chunk-size distributions, the printed summary.
//! - `sockopt.rs`: per-leg socket options (Nagle, cork, quickack, buffers, linger), the
//!   unsent-bytes probe behind `--pcap`'s Nagle tracking, and the `splice(2)` pipe.
//! - `timer.rs`: a `timerfd` sleep, so delays keep sub-millisecond precision.

mod conn;
#[cfg(test)]
mod pcap_at_tests;
mod record;
mod sockopt;
mod summary;
#[cfg(test)]
mod tests;
pub(crate) mod timer;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use tcpdoctor_core::impair::{ChunkMode, Chunker, Delay, Pipeline, Rate, Stage};
use tcpdoctor_core::units::fmt_duration;
use tcpdoctor_core::Timestamp;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::task::JoinSet;

pub use summary::Summary;
pub use tcpdoctor_core::wire::capture_point::CapturePoint;

/// Where to listen or connect.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Addr {
    Tcp(SocketAddr),
    Unix(PathBuf),
}

impl std::fmt::Display for Addr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Addr::Tcp(a) => write!(f, "{a}"),
            Addr::Unix(p) => write!(f, "unix:{}", p.display()),
        }
    }
}

/// Impairments of one direction.
#[derive(Clone, Debug)]
pub struct DirConfig {
    pub delay: Duration,
    pub jitter: Duration,
    pub rate_bps: Option<u64>,
    pub chunks: ChunkMode,
}

impl DirConfig {
    /// No delay, no pacing, one write per chunk read: bytes can go straight through.
    fn is_passthrough(&self) -> bool {
        self.delay.is_zero() && self.rate_bps.is_none() && self.chunks == ChunkMode::Preserve
    }

    fn pipeline(&self, seed: u64) -> Pipeline {
        let mut stages: Vec<Box<dyn Stage + Send>> = Vec::new();
        if !self.delay.is_zero() {
            stages.push(Box::new(Delay::new(self.delay, self.jitter, seed)));
        }
        if let Some(r) = self.rate_bps {
            stages.push(Box::new(Rate::new(r)));
        }
        stages.push(Box::new(Chunker::new(self.chunks)));
        Pipeline::new(stages)
    }

    fn describe(&self) -> String {
        let mut s = Vec::new();
        if !self.delay.is_zero() {
            s.push(format!("delay {}", fmt_duration(self.delay)));
        }
        if !self.jitter.is_zero() {
            s.push(format!("jitter ±{}", fmt_duration(self.jitter)));
        }
        if let Some(r) = self.rate_bps {
            s.push(format!("rate {:.3} Mbit/s", r as f64 / 1e6));
        }
        s.push(match self.chunks {
            ChunkMode::Preserve => "chunks preserved".to_string(),
            ChunkMode::Coalesce => "chunks coalesced".to_string(),
            ChunkMode::Split(n) => format!("chunks split into {n}-byte writes"),
        });
        s.join(", ")
    }
}

/// Socket behaviour of one leg.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LegConfig {
    pub nagle: bool,
    pub cork: bool,
    pub quickack: bool,
    pub sndbuf: Option<usize>,
    pub rcvbuf: Option<usize>,
}

/// Everything `run` needs, validated.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    pub upstream: Addr,
    pub c2s: DirConfig,
    pub s2c: DirConfig,
    /// The proxy's socket towards the client.
    pub client_leg: LegConfig,
    /// The proxy's socket towards the upstream.
    pub server_leg: LegConfig,
    pub seed: u64,
    pub record: Option<PathBuf>,
    pub pcap: Option<PathBuf>,
    /// Where `pcap` is seen from: the proxy itself (what it sent, when), or one end of the
    /// emulated path (`tcpdoctor_core::wire::capture_point`), where the delays show as RTT.
    pub pcap_at: CapturePoint,
    pub summary_every: Option<Duration>,
    /// Bytes a direction may hold before it stops reading (back-pressure).
    pub max_queued: usize,
}

impl ProxyConfig {
    /// A faithful forwarder to `upstream`: no impairment, Nagle off on both legs, nothing
    /// recorded. Set the fields to impair or record, e.g. `c2s.delay`, `pcap`, `pcap_at`.
    pub fn forward_to(upstream: Addr) -> ProxyConfig {
        let dir = DirConfig {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            rate_bps: None,
            chunks: ChunkMode::Preserve,
        };
        ProxyConfig {
            upstream,
            c2s: dir.clone(),
            s2c: dir,
            client_leg: LegConfig::default(),
            server_leg: LegConfig::default(),
            seed: 1,
            record: None,
            pcap: None,
            pcap_at: CapturePoint::Proxy,
            summary_every: None,
            max_queued: 4 << 20,
        }
    }

    /// The effective settings, one line each, for stderr at startup.
    pub fn describe(&self) -> Vec<String> {
        let mut v = vec![
            format!("c2s: {}", self.c2s.describe()),
            format!("s2c: {}", self.s2c.describe()),
        ];
        let (c, s) = (&self.client_leg, &self.server_leg);
        v.push(match (c.nagle, s.nagle) {
            (false, false) => "nagle: off on both legs (TCP_NODELAY set)".to_string(),
            (true, true) => "nagle: ON on both legs (TCP_NODELAY cleared)".to_string(),
            (true, false) => {
                "nagle: ON on the client leg (s2c writes), off on the server leg".to_string()
            }
            (false, true) => {
                "nagle: off on the client leg, ON on the server leg (c2s writes)".to_string()
            }
        });
        for (name, leg) in [("client", c), ("server", s)] {
            let mut o = Vec::new();
            if leg.cork {
                o.push("TCP_CORK while writing".to_string());
            }
            if leg.quickack {
                o.push("TCP_QUICKACK after every read".to_string());
            }
            if let Some(b) = leg.sndbuf {
                o.push(format!("SO_SNDBUF {b}"));
            }
            if let Some(b) = leg.rcvbuf {
                o.push(format!("SO_RCVBUF {b}"));
            }
            if !o.is_empty() {
                v.push(format!("{name} leg: {}", o.join(", ")));
            }
        }
        if let Some(p) = &self.record {
            v.push(format!("recording chunks to {}", p.display()));
        }
        if let Some(p) = &self.pcap {
            v.push(match self.pcap_at {
                CapturePoint::Proxy => {
                    format!(
                        "writing a synthetic capture to {} (as sent by the proxy)",
                        p.display()
                    )
                }
                at => format!(
                    "writing a synthetic capture to {} as seen at the {at} (RTT {} modelled)",
                    p.display(),
                    fmt_duration(self.c2s.delay + self.s2c.delay)
                ),
            });
        }
        v
    }
}

/// A bound listener, TCP or Unix.
pub enum Listener {
    Tcp(TcpListener),
    Unix(UnixListener, PathBuf),
}

impl Listener {
    pub async fn bind(addr: &Addr) -> anyhow::Result<Listener> {
        Ok(match addr {
            Addr::Tcp(a) => Listener::Tcp(TcpListener::bind(a).await?),
            Addr::Unix(p) => Listener::Unix(UnixListener::bind(p)?, p.clone()),
        })
    }

    pub fn local_desc(&self) -> String {
        match self {
            Listener::Tcp(l) => l
                .local_addr()
                .map_or_else(|_| "?".into(), |a| a.to_string()),
            Listener::Unix(_, p) => format!("unix:{}", p.display()),
        }
    }

    async fn accept(&self) -> std::io::Result<(Stream, Option<SocketAddr>)> {
        match self {
            Listener::Tcp(l) => {
                let (s, peer) = l.accept().await?;
                Ok((Stream::Tcp(s), Some(peer)))
            }
            Listener::Unix(l, _) => {
                let (s, _) = l.accept().await?;
                Ok((Stream::Unix(s), None))
            }
        }
    }
}

impl Drop for Listener {
    /// A Unix listener leaves its socket file behind; remove it so the next run can bind.
    fn drop(&mut self) {
        if let Listener::Unix(_, p) = self {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// One side's socket.
pub(crate) enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

type Reader<'a> = Box<dyn AsyncRead + Unpin + Send + 'a>;
type Writer<'a> = Box<dyn AsyncWrite + Unpin + Send + 'a>;

impl Stream {
    async fn connect(addr: &Addr) -> std::io::Result<Stream> {
        Ok(match addr {
            Addr::Tcp(a) => Stream::Tcp(TcpStream::connect(a).await?),
            Addr::Unix(p) => Stream::Unix(UnixStream::connect(p).await?),
        })
    }

    fn fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }

    fn is_tcp(&self) -> bool {
        matches!(self, Stream::Tcp(_))
    }

    /// Borrowed halves: unlike owned ones, dropping them sends no FIN, so a socket about to
    /// be reset (SO_LINGER 0) sends only the RST.
    fn split(&mut self) -> (Reader<'_>, Writer<'_>) {
        match self {
            Stream::Tcp(s) => {
                let (r, w) = s.split();
                (Box::new(r), Box::new(w))
            }
            Stream::Unix(s) => {
                let (r, w) = s.split();
                (Box::new(r), Box::new(w))
            }
        }
    }
}

/// The proxy's clock: `Instant`s become core `Timestamp`s (ns since start).
#[derive(Clone, Copy)]
pub(crate) struct Clock {
    start: Instant,
    /// Unix time of `start`, for files people open in Wireshark.
    pub unix_start_ns: u64,
}

impl Clock {
    fn new() -> Clock {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        Clock {
            start: Instant::now(),
            unix_start_ns: unix,
        }
    }

    pub fn now(&self) -> Timestamp {
        self.at(Instant::now())
    }

    pub fn at(&self, i: Instant) -> Timestamp {
        Timestamp(i.saturating_duration_since(self.start).as_nanos() as u64)
    }

    pub fn instant(&self, t: Timestamp) -> Instant {
        self.start + Duration::from_nanos(t.as_nanos())
    }
}

/// The next tick of an optional interval; never, without one.
async fn tick(t: &mut Option<tokio::time::Interval>) {
    match t {
        Some(t) => {
            t.tick().await;
        }
        None => std::future::pending().await,
    }
}

/// How long open connections may take to finish after shutdown is asked for.
const DRAIN_GRACE: Duration = Duration::from_secs(5);

/// Accepts on `listener` and forwards each connection until `shutdown` completes; then stops
/// accepting, lets open connections finish (up to [`DRAIN_GRACE`]), flushes the recordings and
/// returns the summary.
pub async fn run(
    listener: Listener,
    config: ProxyConfig,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<Summary> {
    let clock = Clock::new();
    let recorder = record::Recorder::start(&config, clock).context("opening recordings")?;
    let stats = Arc::new(summary::Registry::default());
    let config = Arc::new(config);
    let mut conns = JoinSet::new();
    let mut next_id: u64 = 0;
    let mut ticker = config.summary_every.map(|d| {
        let mut t = tokio::time::interval_at(tokio::time::Instant::now() + d, d);
        t.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        t
    });
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((client, peer)) => {
                    next_id += 1;
                    let id = next_id;
                    let cfg = Arc::clone(&config);
                    let rec = recorder.handle();
                    let reg = Arc::clone(&stats);
                    conns.spawn(conn::serve(id, client, peer, cfg, clock, rec, reg));
                }
                Err(e) => {
                    // Out of file descriptors and the like: say so, back off briefly, go on.
                    eprintln!("tcpdoctor proxy: accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            _ = tick(&mut ticker) => {
                eprint!("{}", stats.summary().render());
            }
        }
    }
    drop(listener);
    let deadline = tokio::time::sleep(DRAIN_GRACE);
    tokio::pin!(deadline);
    let second = tokio::signal::ctrl_c();
    tokio::pin!(second);
    while !conns.is_empty() {
        tokio::select! {
            _ = conns.join_next() => {}
            _ = &mut deadline => break,
            _ = &mut second => break,
        }
    }
    conns.abort_all();
    while conns.join_next().await.is_some() {}
    recorder.finish().await.context("writing recordings")?;
    Ok(stats.summary())
}
