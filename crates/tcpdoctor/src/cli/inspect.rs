//! `tcpdoctor inspect`: a live process's TCP sockets, as the kernel sees them.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use tcpdoctor_core::inspect::{diagnose, render_text, InspectReport};
use tcpdoctor_core::units::{fmt_duration, parse_duration};

use super::analyze::{parse_fail_on, FailOn};
use crate::inspect::{self, Config};
use crate::{output, EXIT_CLEAN, EXIT_FOUND};

/// Diagnose a running process from the kernel's own view of its TCP sockets.
///
/// Nothing is restarted, injected or captured. For each TCP socket of the process
/// (IPv4 and IPv6, found through /proc/PID/fd, in the process's own network namespace):
///   - endpoints, state, role (listener, accepted, connected), congestion control;
///   - the options read from the live socket through a duplicate of its descriptor
///     (pidfd_getfd, closed at once): TCP_NODELAY, TCP_CORK, SO_SNDBUF/SO_RCVBUF (fixed by
///     hand, autotuned or unknown, with the evidence), TCP_NOTSENT_LOWAT, SO_KEEPALIVE;
///   - the kernel's tcp_info, sampled every --interval for --duration: RTT, ato, MSS, cwnd,
///     unacked and not-sent bytes (a write held as Nagle holds one, caught in the act), retransmissions,
///     delivery rate, and the kernel's busy / receive-window-limited / send-buffer-limited
///     time;
///   - the process's CPU time (its CPU clock, exited threads included), context switches
///     (summed over its live threads' /proc/PID/task/*/status) and read/write syscalls over
///     the interval (/proc/PID/io counts only the read and write families: recv/send on a
///     socket, ioctl and epoll calls are not counted there).
///
///   tcpdoctor inspect --pid 4242                  # 3 s of sampling every 20 ms, text report
///   tcpdoctor inspect --port 6379 --duration 10s --format json
///   tcpdoctor inspect --pid 4242 --duration 0     # one snapshot
///
/// Permissions: any user may inspect their own processes; root (or CAP_SYS_PTRACE) any.
/// When the kernel refuses the options (another user's process, kernel.yama.ptrace_scope),
/// tcp_info is still reported (it needs no ptrace), the options are unknown and the report
/// says which setting refused them. Entering another network namespace needs root; without
/// it each socket is read through a duplicate of its descriptor.
///
/// Ctrl-C ends the sampling early and prints the report of what was read.
///
/// Exit status: 0 when nothing listed in --fail-on was found, 1 when something was, 2 when
/// nothing at all could be read (no such process, no TCP sockets visible) or on bad usage.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct InspectArgs {
    /// Processes to inspect (comma-separated or repeated).
    #[arg(
        long,
        value_name = "PID",
        value_delimiter = ',',
        required_unless_present = "port",
        conflicts_with = "port"
    )]
    pub pid: Vec<u32>,

    /// Inspect the processes holding a TCP socket with this local port (listening or
    /// connected), in tcpdoctor's own network namespace.
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,

    /// How long to sample (e.g. 3s, 1m); 0 takes one snapshot.
    #[arg(long, default_value = "3s", value_parser = duration, value_name = "DURATION")]
    pub duration: Duration,

    /// Time between two samples. The default, 20 ms, is half the shortest delayed-ACK
    /// timeout (40 ms on Linux, 200 ms on Windows), so every write Nagle holds until a
    /// delayed ACK is caught by at least one sample. Most of a sample's cost is the kernel's
    /// walk over its connection table: measured at about 2.5% of a core at 20 ms (4.3% at
    /// 10 ms) against a redis-server under 50 redis-benchmark connections
    /// (scripts/bench-inspect.sh).
    #[arg(long, default_value = "20ms", value_parser = interval, value_name = "DURATION")]
    pub interval: Duration,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Exit with status 1 if any of these finding kinds is found (comma-separated), or `any`.
    /// The kinds are `analyze`'s; from a live process: nagle_delayed_ack, window_limited,
    /// busy_poll, pool_imbalance.
    #[arg(long, value_name = "KIND,...", value_delimiter = ',', value_parser = parse_fail_on)]
    pub fail_on: Vec<FailOn>,

    /// Write the report to this file instead of standard output.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,

    /// Also trace the process's system calls for this long (e.g. 2s), from the start of the
    /// sampling: tcpdoctor attaches (ptrace; the same user, or root), records the socket
    /// calls — writes per response, TCP_NODELAY set or not, ioctl(SIOCOUTQ) and zero-timeout
    /// polling loops — and detaches; the process goes on unharmed. A running process cannot
    /// be given a seccomp filter, so while attached EVERY system call stops it twice: the
    /// report states the calls and the tracer's time per call. At most 60s.
    #[arg(long, value_parser = trace_duration, value_name = "DURATION")]
    pub trace: Option<Duration>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people: each socket, its options and kernel state, the findings and their fixes.
    Text,
    /// For machines: schema/inspect-report.schema.json.
    Json,
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn trace_duration(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d.is_zero() || d > Duration::from_secs(60) {
        return Err(format!("{s}: the trace must last between 1ms and 60s"));
    }
    Ok(d)
}

fn interval(s: &str) -> Result<Duration, String> {
    let d = duration(s)?;
    if d < Duration::from_millis(1) || d > Duration::from_secs(60) {
        return Err(format!("{s}: the interval must be between 1ms and 60s"));
    }
    Ok(d)
}

pub fn run(args: InspectArgs) -> anyhow::Result<u8> {
    let pids = match args.port {
        Some(port) => inspect::find_by_port(port)?,
        None => {
            let mut pids = args.pid.clone();
            pids.sort_unstable();
            pids.dedup();
            pids
        }
    };
    if pids.is_empty() {
        bail!("no process to inspect: give --pid or --port");
    }
    let list: Vec<String> = pids.iter().map(u32::to_string).collect();
    let announce = (!args.duration.is_zero()).then(|| {
        format!(
            "tcpdoctor inspect: sampling pid {} every {} for {} (Ctrl-C ends early)",
            list.join(","),
            fmt_duration(args.interval),
            fmt_duration(args.duration)
        )
    });
    let cfg = Config {
        pids,
        duration: args.duration,
        interval: args.interval,
        announce,
    };
    crate::capture::stop::install();
    let traced = args
        .trace
        .map(|d| super::inspect_trace::start(&cfg.pids, d));
    let outcome = inspect::observe(&cfg, &crate::capture::stop::requested)?;
    let traces = traced.map(super::inspect_trace::finish).unwrap_or_default();
    for note in &outcome.notes {
        inspect::say(&format!("tcpdoctor inspect: {note}"));
    }
    if std::io::stderr().is_terminal() && !cfg.duration.is_zero() {
        inspect::say("tcpdoctor inspect: done");
    }
    let mut report = diagnose(outcome.observation);
    super::inspect_trace::add(&mut report, traces);
    emit(&report, args.format, &args.fail_on, args.out.as_ref())
}

fn emit(
    report: &InspectReport,
    format: Format,
    fail_on: &[FailOn],
    out: Option<&PathBuf>,
) -> anyhow::Result<u8> {
    let text = match format {
        Format::Text => render_text(report),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(report)?;
            s.push('\n');
            s
        }
    };
    match out {
        Some(path) => std::fs::write(path, &text)
            .with_context(|| format!("writing --out {}", path.display()))?,
        None => output::print(&text)?,
    }
    let failed = report.findings.iter().any(|f| {
        fail_on
            .iter()
            .any(|w| *w == FailOn::Any || *w == FailOn::Kind(f.kind))
    });
    Ok(if failed { EXIT_FOUND } else { EXIT_CLEAN })
}
