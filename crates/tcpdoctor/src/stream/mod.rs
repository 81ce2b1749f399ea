//! `tcpdoctor stream`: one end of a one-way stream against the server under test, measured
//! over one window after a warm-up (the figures and sentences are the core's:
//! `tcpdoctor_core::stream`).
//!
//! 1. With `--server`, the command is started (traced unless `--no-trace`, as `run` starts
//!    one) and waited for until the target accepts a connection.
//! 2. `--connections` connections are opened, each on a thread of its own with blocking
//!    calls; each sends `--hello` once, then reads and counts whole messages (from the
//!    server) or writes framed messages as fast as the socket takes them (to the server).
//! 3. After `--warmup` the counts, each TCP socket's `tcp_info`, the server's CPU and its
//!    trace are read (the trace so far is dropped); after `--duration` more they are read
//!    again: the window is the difference.
//! 4. A connection that fails (the server closed it, a reset, bytes not in the framing) stops
//!    the run: an error naming the connection, exit 2. So does a window with no whole
//!    message (nothing measured is not a rate).

pub mod conn;

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use tcpdoctor_core::stream::{self, CallsSeen, Direction, Framing, Measured, Setup, StreamReport};
use tcpdoctor_core::syscalls::{Trace, TraceStatus};

use crate::inspect::tcp_info;
use crate::proxy::Addr;
use crate::run::server::Server;
use conn::{Shared, Sock};

/// What one stream run needs.
pub struct StreamConfig {
    pub target: Addr,
    pub direction: Direction,
    pub framing: Framing,
    /// The message tcpdoctor writes (to the server); empty from the server.
    pub message: Vec<u8>,
    pub hello: Vec<u8>,
    pub connections: u64,
    pub warmup: Duration,
    pub duration: Duration,
    pub connect_timeout: Duration,
    pub server: Option<String>,
    pub trace: bool,
    pub ready_timeout: Duration,
    pub log: PathBuf,
}

/// Why a Unix socket's server is not traced.
const UNIX_CALLS: &str = "a Unix socket's peer has no address to find tcpdoctor's connections \
     by in a trace, so the server was not traced (it would only have slowed it)";

/// Counters at one instant (rule 3).
#[derive(Default)]
struct Reading {
    at: Option<Instant>,
    messages: u64,
    bytes: u64,
    data_segs_in: u64,
    bytes_acked: u64,
    full_segment: u32,
    cpu: Option<crate::run::server::TreeCpu>,
    /// To the server: bytes its sockets of the stream hold unread (socket diagnostics), when
    /// they are in this network namespace.
    server_unread: Option<u64>,
}

/// Rule 1 to the server: the bytes the server's sockets of the stream (local: the target,
/// peer: one of ours) hold unread, summed; `None` when not one of them is in the dump.
fn server_unread(
    diag: Option<&mut crate::inspect::diag::Diag>,
    target: &Addr,
    peers: &[std::net::SocketAddr],
) -> Option<u64> {
    let Addr::Tcp(t) = target else {
        return None;
    };
    let families = crate::inspect::diag::Families::of(std::iter::once(*t));
    let all = diag?.dump_ports(0, &[t.port()], families).ok()?;
    let ours: Vec<_> = all
        .iter()
        .filter(|d| d.local.port() == t.port() && peers.contains(&d.remote))
        .collect();
    if ours.len() < peers.len() {
        return None;
    }
    ours.iter()
        .map(|d| d.unread.map(u64::from))
        .sum::<Option<u64>>()
}

fn read_now(
    socks: &[Sock],
    shared: &Shared,
    server: Option<&Server>,
    unread: Option<u64>,
) -> Reading {
    let mut r = Reading {
        server_unread: unread,
        at: Some(Instant::now()),
        messages: shared.messages.load(Ordering::SeqCst),
        bytes: shared.bytes.load(Ordering::SeqCst),
        cpu: server.map(|s| s.cpu()),
        ..Reading::default()
    };
    for s in socks {
        if let Sock::Tcp(_) = s {
            if let Ok(raw) = tcp_info::getsockopt(s.fd()) {
                let t = tcp_info::parse(&raw, 0);
                r.data_segs_in += u64::from(t.data_segs_in);
                r.bytes_acked += t.bytes_acked;
                r.full_segment = r.full_segment.max(t.snd_mss).max(t.rcv_mss);
            }
        }
    }
    r
}

/// Waits `d`, or less when a connection failed or a stop signal came.
fn wait(d: Duration, shared: &Shared) -> anyhow::Result<()> {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if let Some(f) = shared
            .failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
        {
            bail!("{f}");
        }
        if crate::capture::stop::interrupted() {
            bail!("interrupted");
        }
        std::thread::sleep((end - Instant::now()).min(Duration::from_millis(20)));
    }
    Ok(())
}

/// Rule 3 for the trace: the calls of the family on the stream's sockets, by name.
fn calls_of(trace: &Trace, direction: Direction, peers: &[std::net::SocketAddr]) -> CallsSeen {
    match &trace.status {
        TraceStatus::Off if peers.is_empty() => return CallsSeen::Unknown(UNIX_CALLS.into()),
        TraceStatus::Off => return CallsSeen::Unknown("--no-trace".into()),
        TraceStatus::Unavailable { reason } => {
            return CallsSeen::Unknown(format!("the server could not be traced: {reason}"))
        }
        TraceStatus::Traced | TraceStatus::Attached => {}
    }
    if peers.is_empty() {
        return CallsSeen::Unknown(UNIX_CALLS.into());
    }
    if trace.dropped > 0 {
        return CallsSeen::Unknown(format!(
            "the tracer kept {} calls and dropped {} beyond its cap: shorten --duration",
            trace.calls.len(),
            trace.dropped
        ));
    }
    let mut by: Vec<(String, u64)> = Vec::new();
    let mut bytes = 0u64;
    for c in &trace.calls {
        let family = match direction {
            Direction::FromServer => c.kind.writes(),
            Direction::ToServer => c.kind.reads(),
        };
        if !family || c.ret <= 0 {
            continue;
        }
        let ours = c
            .socket
            .and_then(|i| trace.sockets.get(i as usize))
            .and_then(|s| s.remote)
            .is_some_and(|r| peers.contains(&r));
        if !ours {
            continue;
        }
        bytes += c.ret as u64;
        match by.iter_mut().find(|(n, _)| n == c.kind.name()) {
            Some((_, n)) => *n += 1,
            None => by.push((c.kind.name().to_string(), 1)),
        }
    }
    CallsSeen::Counted { by, bytes }
}

/// Runs the stream and returns its report.
pub fn run(cfg: &StreamConfig) -> anyhow::Result<StreamReport> {
    let mut server = match &cfg.server {
        Some(cmd) => {
            // Over a Unix socket the trace cannot tell the stream's sockets (rule 3 of the
            // core): tracing would only slow the server.
            let trace = cfg.trace && matches!(cfg.target, Addr::Tcp(_));
            let mut s = Server::start(cmd, &cfg.log, trace)
                .with_context(|| format!("starting --server `{cmd}`"))?;
            if let Err(e) = s.wait_ready(&cfg.target, cfg.ready_timeout) {
                s.stop();
                bail!("{e:#}");
            }
            s.wait_settled(crate::run::server::SETTLE_LIMIT);
            Some(s)
        }
        None => None,
    };
    let mut result = measure(cfg, server.as_ref());
    if let Some(s) = server.as_mut() {
        // A server that closed the stream by exiting closes its sockets a moment before it
        // can be waited for: give it that moment.
        let mut exited = s.exited().ok().flatten();
        let give = Instant::now() + Duration::from_millis(500);
        while result.is_err() && exited.is_none() && Instant::now() < give {
            std::thread::sleep(Duration::from_millis(10));
            exited = s.exited().ok().flatten();
        }
        if let (Err(e), Some(status)) = (&result, exited) {
            result = Err(anyhow::anyhow!(
                "{e:#}: the server exited ({status}); its output ({}):\n{}",
                cfg.log.display(),
                crate::run::server::tail(&cfg.log)
            ));
        }
        s.stop();
    }
    result
}

fn measure(cfg: &StreamConfig, server: Option<&Server>) -> anyhow::Result<StreamReport> {
    let shared = Arc::new(Shared::default());
    let mut socks = Vec::new();
    let mut threads = Vec::new();
    for conn in 1..=cfg.connections {
        let sock = Sock::connect(&cfg.target, cfg.connect_timeout).with_context(|| {
            format!(
                "connection {conn} to {}: {}",
                cfg.target, "could not connect"
            )
        })?;
        socks.push(sock.try_clone()?);
        let (shared, hello, message) = (shared.clone(), cfg.hello.clone(), cfg.message.clone());
        let (direction, framing) = (cfg.direction, cfg.framing);
        threads.push(std::thread::spawn(move || {
            conn::run(conn, sock, direction, framing, &hello, &message, &shared)
        }));
    }
    let stop = |shared: &Shared, threads: Vec<std::thread::JoinHandle<()>>| {
        shared.stop.store(true, Ordering::SeqCst);
        for t in threads {
            let _ = t.join();
        }
    };
    let peers: Vec<_> = socks.iter().filter_map(Sock::local).collect();
    let mut diag = match cfg.direction {
        Direction::ToServer => crate::inspect::diag::Diag::open().ok(),
        Direction::FromServer => None,
    };
    let window = (|| {
        wait(cfg.warmup, &shared)?;
        let unread = server_unread(diag.as_mut(), &cfg.target, &peers);
        let start = read_now(&socks, &shared, server, unread);
        if let Some(s) = server {
            let _ = s.take_trace();
        }
        wait(cfg.duration, &shared)?;
        let end = read_now(&socks, &shared, server, None);
        let end = Reading {
            server_unread: server_unread(diag.as_mut(), &cfg.target, &peers),
            ..end
        };
        let trace = server.map(|s| s.take_trace());
        Ok::<_, anyhow::Error>((start, end, trace))
    })();
    stop(&shared, threads);
    let (start, end, trace) = window?;
    let seconds = match (start.at, end.at) {
        (Some(a), Some(b)) => b.duration_since(a).as_secs_f64(),
        _ => 0.0,
    };
    let tcp = matches!(cfg.target, Addr::Tcp(_));
    let mut notes = Vec::new();
    let (messages, bytes) = match (cfg.direction, tcp) {
        (Direction::FromServer, _) => (end.messages - start.messages, end.bytes - start.bytes),
        (Direction::ToServer, true) => {
            let acked = end.bytes_acked.saturating_sub(start.bytes_acked);
            let b = match (start.server_unread, end.server_unread) {
                (Some(a), Some(z)) => (acked + a).saturating_sub(z),
                _ => {
                    notes.push(
                        "the server's sockets are not in this network namespace, so what they hold \
                         unread could not be read: the counts are the bytes its TCP \
                         acknowledged, some of them perhaps still unread"
                            .to_string(),
                    );
                    acked
                }
            };
            (b / cfg.message.len() as u64, b)
        }
        (Direction::ToServer, false) => {
            let b = end.bytes - start.bytes;
            (b / cfg.message.len() as u64, b)
        }
    };
    let calls = match (&trace, server) {
        (Some(t), _) => calls_of(t, cfg.direction, &peers),
        (None, _) => {
            CallsSeen::Unknown("the server was not started by tcpdoctor (--server)".into())
        }
    };
    let measured = Measured {
        direction: cfg.direction,
        seconds,
        messages,
        bytes,
        data_segments: if tcp {
            Ok(end.data_segs_in.saturating_sub(start.data_segs_in))
        } else {
            Err("a Unix socket has no segments".into())
        },
        full_segment: (end.full_segment > 0).then_some(end.full_segment),
        server_cpu_s: match (start.cpu, end.cpu) {
            (Some(a), Some(b)) => {
                let (u, s) = b.seconds_since(&a);
                Some(u + s)
            }
            _ => None,
        },
        calls,
        notes,
        traced: trace
            .as_ref()
            .is_some_and(|t| matches!(t.status, TraceStatus::Traced | TraceStatus::Attached)),
    };
    let setup = Setup {
        target: cfg.target.to_string(),
        direction: cfg.direction,
        framing: cfg.framing.name(),
        message_bytes: match (cfg.direction, cfg.framing) {
            (Direction::ToServer, _) => Some(cfg.message.len() as u64),
            (_, Framing::Fixed { size }) => Some(u64::from(size)),
            _ => None,
        },
        connections: cfg.connections,
        warmup_s: cfg.warmup.as_secs_f64(),
        server: cfg.server.clone(),
    };
    Ok(stream::report(
        &format!("tcpdoctor {}", env!("CARGO_PKG_VERSION")),
        setup,
        measured,
    ))
}
