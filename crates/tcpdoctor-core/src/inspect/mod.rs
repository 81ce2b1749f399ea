//! `inspect`: a live process's TCP sockets as the kernel sees them, and the findings that
//! evidence supports.
//!
//! The shell reads the kernel (the process's descriptors in `/proc/PID/fd`, socket diagnostics
//! over netlink for `tcp_info`, the options of each socket through a duplicate of its
//! descriptor, the process's CPU and syscall counters) and hands this module an
//! [`Observation`]: plain data, with time as data. [`diagnose`] turns it into an
//! [`InspectReport`] whose findings use the same [`Finding`] model as `analyze`.
//!
//! Nothing here guesses: an option the kernel would not give is `None`, and the process says
//! why in [`ProcessObservation::options_refused`].
//!
//! # Layout
//! - [`interval`]: what changed per socket between its first and last sample, how a socket is
//!   named in evidence, and the "held by Nagle" test on one sample.
//! - One rule per file, each with its thresholds and their reasons in its module doc:
//!   [`nagle`] (`nagle_delayed_ack`), [`window_limited`], [`busy_poll`], [`pool_imbalance`].
//! - [`summary`]: the per-process context the renderers print (CPU against traffic, socket
//!   deltas, connections per peer, what could not be read).
//! - [`text`]: the text report.
//! - [`server_sockets`]: what a `run` scenario's server had on its accepted sockets, added to
//!   the packet findings about its replies.

pub mod busy_poll;
pub mod interval;
pub mod nagle;
pub mod pool_imbalance;
pub mod server_sockets;
pub mod summary;
#[cfg(test)]
mod tests;
mod text;
pub mod window_limited;

use std::net::SocketAddr;

use serde::Serialize;

use crate::report::{Finding, ToolInfo, SCHEMA_VERSION};

pub use summary::{CpuSummary, PeerSummary, ProcessSummary, SocketSummary};
pub use text::render_text;

/// Everything one `inspect` run read.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Observation {
    /// When sampling began and ended, nanoseconds of the shell's monotonic clock.
    pub started_ns: u64,
    pub ended_ns: u64,
    /// The interval the sampler aimed for between two samples.
    pub interval_ns: u64,
    pub processes: Vec<ProcessObservation>,
}

/// One process and its TCP sockets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessObservation {
    pub pid: u32,
    /// `/proc/PID/comm`, and the command line when readable.
    pub comm: String,
    pub cmdline: String,
    /// Inode of the process's network namespace (`/proc/PID/ns/net`), when readable.
    pub netns: Option<u64>,
    /// The process's counters at the first and the last sample (absent when unreadable).
    pub first: Option<ProcessCounters>,
    pub last: Option<ProcessCounters>,
    /// Why socket options could not be read, naming the setting that refused them
    /// ("kernel.yama.ptrace_scope = 1", "another user's process: pidfd_getfd needs
    /// CAP_SYS_PTRACE"); `None` when they were read.
    pub options_refused: Option<String>,
    /// The process exited before sampling ended.
    pub exited: bool,
    /// How `tcp_info` was read when not over netlink `sock_diag` in the process's network
    /// namespace (`None`, the usual way): e.g. "getsockopt(TCP_INFO) on pidfd_getfd duplicates
    /// (the process's network namespace could not be entered)". Evidence quotes it.
    pub tcp_info_via: Option<String>,
    /// How the sockets were attributed to the process when not through its descriptors in
    /// `/proc/PID/fd` (`None`, the usual way): e.g. "every socket of uid 1001 in its network
    /// namespace (its descriptors were refused)". Evidence and the notes quote it.
    pub sockets_via: Option<String>,
    /// Why the context-switch counts of `first`/`last` miss part of the interval, when they
    /// do: they are summed over the threads alive when read, and a thread that exits takes
    /// its count with it ("threads exited during sampling: 3 of those seen"). `busy_poll`'s
    /// CPU-per-sleep is then unknown. `None` when every thread seen was seen to the end.
    #[serde(default)]
    pub ctxt_switches_incomplete: Option<String>,
    pub sockets: Vec<SocketObservation>,
}

/// A process's own accounting at one instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ProcessCounters {
    /// Nanoseconds of the shell's monotonic clock.
    pub at_ns: u64,
    /// CPU time of all threads, nanoseconds (the process's CPU clock, which keeps the time
    /// of threads that exited; the threads' schedstat where it cannot be read).
    pub cpu_ns: u64,
    /// The same time in clock ticks (`/proc/PID/stat` `utime`, `stime`: 10 ms each), split
    /// into user and kernel: a loop polling its sockets spends its time in system calls;
    /// `None` when unreadable.
    #[serde(default)]
    pub user_ticks: Option<u64>,
    #[serde(default)]
    pub system_ticks: Option<u64>,
    pub voluntary_ctxt_switches: u64,
    pub nonvoluntary_ctxt_switches: u64,
    /// Read and write syscalls (`/proc/PID/io` `syscr`/`syscw`; ioctl and epoll calls are not
    /// counted there); `None` when `io` was not readable.
    pub syscr: Option<u64>,
    pub syscw: Option<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SocketRole {
    Listener,
    /// Returned by `accept` (its local port is one the process listens on).
    Accepted,
    /// Opened by `connect`.
    Connected,
}

/// One TCP socket of the process.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SocketObservation {
    pub inode: u64,
    /// The descriptor it was found at (the lowest, when several point to it); -1 for a
    /// socket attributed to the process without one (see
    /// [`ProcessObservation::sockets_via`]).
    pub fd: i32,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    pub role: SocketRole,
    /// Congestion control (`cubic`, `bbr`), when the kernel said.
    pub congestion: Option<String>,
    pub options: SocketOptions,
    /// The options were read only when the socket was first seen, before any sample showed
    /// it sending data, and never again (it closed first): a server may have set them just
    /// after, before it wrote its replies. Rules do not take them as the options its writes
    /// were made with.
    #[serde(default)]
    pub options_before_data: bool,
    /// `tcp_info` over time, oldest first; the first and last give the deltas.
    pub samples: Vec<TcpSample>,
    /// How many times the sampler read this socket, stored or not: `samples` keeps a sample
    /// only when it differs from the one before (an idle socket's repeats are dropped), so
    /// shares, severities and the sampling period count these. 0 when not known (then
    /// `samples.len()` stands in).
    #[serde(default)]
    pub samples_taken: u64,
    /// Of the samples taken, those that caught a write held by Nagle
    /// ([`interval::held_by_nagle`]), repeats included; meaningful when `samples_taken > 0`.
    #[serde(default)]
    pub held_taken: u64,
    /// The socket was gone before sampling ended (closed by the process).
    pub closed: bool,
}

/// How a buffer size came to be.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "setting", rename_all = "snake_case")]
pub enum BufferSetting {
    /// Set by the application (`SO_SNDBUF`/`SO_RCVBUF`), which turns autotuning off.
    Fixed {
        evidence: String,
    },
    /// Left to the kernel.
    Autotuned {
        evidence: String,
    },
    Unknown {
        why: String,
    },
}

/// Options read from the live socket; `None` where they could not be read.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SocketOptions {
    pub nodelay: Option<bool>,
    pub cork: Option<bool>,
    /// What `getsockopt` returns (the kernel doubles what was set).
    pub sndbuf_bytes: Option<u64>,
    pub rcvbuf_bytes: Option<u64>,
    pub sndbuf: BufferSetting,
    pub rcvbuf: BufferSetting,
    pub notsent_lowat_bytes: Option<u64>,
    pub keepalive: Option<bool>,
}

/// The kernel's `tcp_info` (and socket memory) for one socket at one instant. Counters are
/// cumulative since the socket was created; times are microseconds as the kernel keeps them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TcpSample {
    /// Nanoseconds of the shell's monotonic clock.
    pub at_ns: u64,
    /// `TCP_ESTABLISHED` = 1 … as in the kernel's `tcp_states`.
    pub state: u8,
    pub rtt_us: u32,
    pub rttvar_us: u32,
    pub min_rtt_us: u32,
    /// Delayed-ACK timeout (`ato`), microseconds.
    pub ato_us: u32,
    pub snd_mss: u32,
    pub rcv_mss: u32,
    pub snd_cwnd: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// Bytes written by the application and not yet sent.
    pub notsent_bytes: u32,
    pub total_retrans: u32,
    pub segs_out: u32,
    pub segs_in: u32,
    pub data_segs_out: u32,
    pub data_segs_in: u32,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    pub bytes_sent: u64,
    pub bytes_retrans: u64,
    /// `tcpi_delivery_rate` and `tcpi_pacing_rate` in bits per second (the project's `_bps`):
    /// the kernel's bytes per second × 8, as `ss` prints them.
    pub delivery_rate_bps: u64,
    pub pacing_rate_bps: u64,
    /// The kernel's limit counters (`tcpi_busy_time`, `tcpi_rwnd_limited`,
    /// `tcpi_sndbuf_limited`), microseconds.
    pub busy_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
    /// The peer's advertised window as last seen, bytes (`tcpi_snd_wnd`); `None` when the
    /// kernel's `tcp_info` is too short to hold it (before 5.4), never a 0 it did not say.
    pub snd_wnd_bytes: Option<u32>,
    /// Retransmission timeouts since the socket was created, SYN and SYN-ACK ones included
    /// (`tcpi_total_rto`, Linux 6.7); `None` when the kernel's `tcp_info` is too short to
    /// hold it. Not in `inspect`'s JSON (`watch` counts it).
    #[serde(skip)]
    pub total_rto: Option<u32>,
}

/// The result of [`diagnose`]: what was read, and the findings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct InspectReport {
    pub schema_version: u32,
    pub tool: ToolInfo,
    pub observation: Observation,
    /// What the renderers print next to the findings, one per process of `observation`, in the
    /// same order.
    pub processes: Vec<ProcessSummary>,
    /// Most costly first, the same model as `analyze`'s findings.
    pub findings: Vec<Finding>,
    /// `--trace D`: each process's system calls while attached (docs/syscalls.md).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub syscalls: Vec<ProcessTrace>,
}

/// One process's attach (`inspect --trace`): what its calls show, and what the attach cost.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessTrace {
    pub pid: u32,
    pub calls: crate::syscalls::SyscallsReport,
    /// Every system call stop while attached (two per call of any kind: a running process
    /// cannot be given a filter), threads traced and detached at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attach: Option<AttachCost>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct AttachCost {
    pub stops: u64,
    pub threads: u64,
    pub detached: u64,
}

/// Turns what was read into findings: every rule on every process, then the findings sorted
/// as `analyze` sorts them (severity, then time lost).
pub fn diagnose(observation: Observation) -> InspectReport {
    let mut processes = Vec::new();
    let mut findings = Vec::new();
    for p in &observation.processes {
        let mut summary = summary::process(p);
        let (nagle, notes) = nagle::nagle(p);
        findings.extend(nagle);
        summary.notes.extend(notes);
        findings.extend(window_limited::window_limited(p));
        if let Some(cpu) = &summary.cpu {
            findings.extend(busy_poll::busy_poll(p, cpu));
        }
        findings.extend(pool_imbalance::pool_imbalance(p));
        processes.push(summary);
    }
    findings.sort_by(|a, b| {
        b.severity
            .cmp(&a.severity)
            .then(b.time_lost_ms.total_cmp(&a.time_lost_ms))
            .then(a.kind.cmp(&b.kind))
            .then(a.file.cmp(&b.file))
            .then(a.server.cmp(&b.server))
    });
    InspectReport {
        schema_version: SCHEMA_VERSION,
        tool: ToolInfo::current(),
        observation,
        processes,
        findings,
        syscalls: Vec::new(),
    }
}
