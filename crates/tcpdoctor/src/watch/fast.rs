//! The shell's side of the finding kinds (`tcpdoctor_core::watch::kinds`): the options of the
//! candidate connections, read through their process, and the fast samples of those with
//! Nagle on, taken between two host samples.
//!
//! 1. Options: `TCP_NODELAY` and `TCP_CORK` through a duplicate of the process's descriptor
//!    (`pidfd_getfd`, as `inspect` reads them), once per candidate socket (the core keeps
//!    them while the socket lives). A refusal (another user's process, Yama) marks the socket
//!    unreadable and is said once per process on stderr, naming the setting that refused it.
//! 2. Fast samples: one socket-diagnostics dump filtered in the kernel to the candidates'
//!    local ports (at most [`MAX_PORTS`]; as `inspect`'s sampler does) every [`PERIOD`], for
//!    at most [`WALL_SHARE`] of the interval (never past [`WALL_MAX`], nor into the next host
//!    sample) and at most [`CPU_SHARE`] of the interval in CPU time (0.5%: with the host
//!    samples' ≈0.9% at 10,000 sockets, the exporter stays under 2% of a core): the kernel
//!    still walks its whole connection table per dump, so on a host with many sockets the CPU
//!    budget ends the burst first. A host with no candidate takes none.

use std::collections::HashSet;
use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use tcpdoctor_core::watch::{Kinds, Options, SocketSeen};

use super::host::Owners;
use crate::capture::stop;
use crate::inspect::diag::{Diag, Families};
use crate::inspect::options::{self, Pidfd};
use crate::inspect::proc;

/// One fast sample every this long: a Nagle hold lasts one delayed ACK (≥ 40 ms on Linux).
pub const PERIOD: Duration = Duration::from_millis(10);
pub const WALL_SHARE: f64 = 0.2;
pub const WALL_MAX: Duration = Duration::from_secs(1);
pub const CPU_SHARE: f64 = 0.005;
pub const MAX_PORTS: usize = 64;

/// Reads the options the core asks for (rule 1); `refused` holds the PIDs already reported.
pub fn read_options(
    kinds: &mut Kinds,
    owners: &Owners,
    seen: &[SocketSeen],
    refused: &mut HashSet<u32>,
) {
    for inode in kinds.candidates(seen) {
        let Some((pid, fd)) = owners.holder_of(inode) else {
            continue;
        };
        match Pidfd::open(pid).and_then(|p| options::read(&p, fd, inode)) {
            Ok(o) => {
                if let Some(nodelay) = o.nodelay {
                    kinds.set_options(
                        inode,
                        Options::Read {
                            nodelay,
                            cork: o.cork,
                        },
                    );
                }
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
                kinds.set_options(inode, Options::Unreadable);
                if refused.insert(pid) {
                    crate::inspect::say(&format!(
                        "tcpdoctor watch: {} (pid {pid}): socket options refused ({}): its \
                         connections are not judged for nagle_delayed_ack (counted in \
                         tcpdoctor_watch_options_unreadable_sockets)",
                        proc::comm(pid).unwrap_or_else(|| "?".into()),
                        options::refusal_here(pid)
                    ));
                }
            }
            // Gone, or the descriptor now holds something else: tried again next interval.
            Err(_) => {}
        }
    }
}

/// Samples `sockets` fast (rule 2) until the budget for `interval` is spent or `deadline`;
/// returns the samples taken and their CPU time, seconds.
pub fn burst(
    diag: &mut Diag,
    kinds: &mut Kinds,
    sockets: &[(u64, SocketAddr)],
    interval: Duration,
    deadline: Instant,
) -> (u64, f64) {
    if sockets.is_empty() {
        return (0, 0.0);
    }
    let mut ports: Vec<u16> = sockets.iter().map(|(_, a)| a.port()).collect();
    ports.sort_unstable();
    ports.dedup();
    ports.truncate(MAX_PORTS);
    let families = Families::of(sockets.iter().map(|(_, a)| *a));
    let wanted: HashSet<u64> = sockets.iter().map(|(i, _)| *i).collect();
    let start = Instant::now();
    let wall = interval.mul_f64(WALL_SHARE).min(WALL_MAX);
    let cpu_budget = interval.as_secs_f64() * CPU_SHARE;
    let cpu0 = super::cpu_seconds();
    let mut taken = 0;
    loop {
        let tick = Instant::now();
        if stop::requested()
            || tick.duration_since(start) >= wall
            || tick + PERIOD >= deadline
            || super::cpu_seconds() - cpu0 >= cpu_budget
        {
            break;
        }
        let Ok(dump) = diag.dump_ports(proc::monotonic_ns(), &ports, families) else {
            break;
        };
        for s in dump.iter().filter(|s| wanted.contains(&s.inode)) {
            if let Some(sample) = &s.sample {
                kinds.burst_sample(s.inode, sample);
                taken += 1;
            }
        }
        std::thread::sleep(PERIOD.saturating_sub(tick.elapsed()));
    }
    (taken, (super::cpu_seconds() - cpu0).max(0.0))
}
