//! `tcpdoctor watch`: the host's TCP sockets as Prometheus metrics, sampled every
//! `--interval` and served over HTTP at `/metrics` (the core's [`Ledger`] turns samples into
//! series; see `tcpdoctor_core::watch`).
//!
//! Two threads: the sampler (one socket-diagnostics dump, the owners placed, the ledger fed,
//! the exposition rendered once per sample so a scrape costs a copy; the CPU of processes
//! with request/response traffic read for `busy_poll`, their threads only when that CPU is
//! far over their traffic's budget; then the options of the finding kinds' candidates read
//! and the Nagle-on ones sampled fast, see [`fast`]), and the
//! HTTP server (one short-lived thread per connection, each request answered and the
//! connection closed).
//! SIGINT and SIGTERM stop both: the listener is closed and the process exits 0.

mod fast;
mod host;
mod http;

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use tcpdoctor_core::watch::{render, Busy, Kinds, Ledger};

use crate::capture::stop;
use crate::inspect::diag::Diag;
use crate::inspect::proc;

pub struct Config {
    pub listen: SocketAddr,
    pub interval: Duration,
    pub max_series: usize,
    /// A series with no socket for this long is removed.
    pub series_idle: Duration,
    /// The network namespace whose sockets are read (`/proc/PID/ns/net`, `/run/netns/NAME`);
    /// None: our own. The HTTP side always serves from our own.
    pub netns: Option<PathBuf>,
}

/// What the HTTP side serves: the last exposition and how fresh it is.
#[derive(Default)]
pub struct Shared {
    pub metrics: String,
    /// When the last sample succeeded, and the error of the last one that failed.
    pub last_ok: Option<Instant>,
    pub last_error: Option<String>,
}

/// Serves until SIGINT or SIGTERM.
pub fn serve(cfg: &Config) -> anyhow::Result<()> {
    let listener = TcpListener::bind(cfg.listen)
        .with_context(|| format!("--listen {}: cannot listen there", cfg.listen))?;
    let addr = listener.local_addr()?;
    let mut diag = match &cfg.netns {
        None => Diag::open().context("socket diagnostics (netlink) could not be opened")?,
        Some(path) => open_in(path)?,
    };
    stop::install();
    let shared = Arc::new(Mutex::new(Shared::default()));
    let server = {
        let shared = Arc::clone(&shared);
        let stale_after = cfg.interval * 3;
        std::thread::Builder::new()
            .name("http".into())
            .spawn(move || http::run(listener, &shared, stale_after))?
    };
    let idle_ns = u64::try_from(cfg.series_idle.as_nanos()).unwrap_or(u64::MAX);
    let mut ledger = Ledger::new(cfg.max_series).with_series_idle(idle_ns);
    let mut owners = host::Owners::default();
    let mut kinds = Kinds::default();
    let mut busy = Busy::default();
    let mut refused = std::collections::HashSet::new();
    let mut announced = false;
    while !stop::requested() {
        let tick = Instant::now();
        let cpu = cpu_seconds();
        let at_ns = proc::monotonic_ns();
        let next = tick + cfg.interval;
        let mut fast = Vec::new();
        match diag.dump(at_ns) {
            Ok(dump) => {
                let seen = owners.place(dump);
                ledger.observe(at_ns, &seen);
                fast::read_options(&mut kinds, &owners, &seen, &mut refused);
                read_cpu(&mut busy, &kinds, &owners, &seen);
                busy.conclude(&mut ledger);
                fast = kinds.conclude(&seen, &mut ledger);
                ledger.health.sample_seconds = tick.elapsed().as_secs_f64();
                ledger.health.sample_cpu_seconds = (cpu_seconds() - cpu).max(0.0);
                let text = render(&ledger, env!("CARGO_PKG_VERSION"));
                let mut s = lock(&shared);
                s.metrics = text;
                s.last_ok = Some(Instant::now());
                s.last_error = None;
            }
            Err(e) => {
                ledger.failed();
                let msg = format!("socket diagnostics failed: {e}");
                crate::inspect::say(&format!("tcpdoctor watch: {msg}"));
                let mut s = lock(&shared);
                s.metrics = render(&ledger, env!("CARGO_PKG_VERSION"));
                s.last_error = Some(msg);
            }
        }
        if !announced {
            announced = true;
            crate::inspect::say(&format!(
                "tcpdoctor watch: serving http://{addr}/metrics (every {} s; {} sockets in the \
                 first sample{})",
                cfg.interval.as_secs_f64(),
                ledger.health.sockets,
                match owners.refused {
                    0 => String::new(),
                    n => format!(
                        "; {n} processes' descriptors refused: their sockets are unattributed \
                         (run as root, or with CAP_DAC_READ_SEARCH and CAP_SYS_PTRACE, to place them)"
                    ),
                }
            ));
        }
        // The fast samples count in the next interval (and its exposition).
        let (taken, cpu) = fast::burst(&mut diag, &mut kinds, &fast, cfg.interval, next);
        ledger.health.burst_samples += taken;
        ledger.health.burst_cpu_seconds = cpu;
        while !stop::requested() {
            let now = Instant::now();
            if next <= now {
                break;
            }
            std::thread::sleep((next - now).min(Duration::from_millis(100)));
        }
    }
    http::shut(addr);
    let _ = server.join();
    crate::inspect::say("tcpdoctor watch: stopped");
    Ok(())
}

/// `busy_poll`'s stages 2 and 3 (`tcpdoctor_core::watch::busy`): the CPU clock of each
/// process whose connections carried requests and replies, and `inspect`'s walk of the
/// threads of those the core asks for.
fn read_cpu(
    busy: &mut Busy,
    kinds: &Kinds,
    owners: &host::Owners,
    seen: &[tcpdoctor_core::watch::SocketSeen],
) {
    for pid in busy.candidates(kinds, seen, |inode| owners.pid_of(inode)) {
        let Some(cpu_ns) = i32::try_from(pid).ok().and_then(crate::procfs::cpu_ns) else {
            continue;
        };
        // Each read is timed when made: the sample's own instant may be some way behind.
        let at_ns = proc::monotonic_ns();
        if busy.cpu(pid, at_ns, cpu_ns) {
            if let Some((counters, threads)) = proc::counters(pid, at_ns) {
                busy.walked(pid, counters, threads);
            }
        }
    }
}

/// A socket-diagnostics socket opened inside the network namespace at `path`: it answers for
/// that namespace from then on, whichever thread uses it.
fn open_in(path: &Path) -> anyhow::Result<Diag> {
    match crate::inspect::netns::at(path) {
        Ok(r) => Ok(r.diag),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => Err(e).with_context(|| {
            format!(
                "--netns {}: entering that network namespace needs CAP_SYS_ADMIN over it \
                 (root), or run watch inside it instead",
                path.display()
            )
        }),
        Err(e) => Err(e).with_context(|| {
            format!(
                "--netns {}: not a network namespace that can be entered",
                path.display()
            )
        }),
    }
}

fn lock(shared: &Mutex<Shared>) -> std::sync::MutexGuard<'_, Shared> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

/// This process's CPU time (user and system), seconds.
pub(crate) fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}
