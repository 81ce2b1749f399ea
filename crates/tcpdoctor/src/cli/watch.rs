//! `tcpdoctor watch`: the host's TCP sockets as a Prometheus exporter.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::watch::{serve, Config};
use crate::EXIT_CLEAN;

/// Export the host's TCP sockets to Prometheus, per process and listening port.
///
/// How long each service's connections were limited by the send buffer or the peer's
/// receive window, busy, and how much they retransmitted: counters to `rate()`, served at
/// http://LISTEN/metrics.
///
/// Every --interval, one socket-diagnostics dump reads every TCP socket of this network
/// namespace, or of --netns's (tcp_info: no privilege needed), and /proc tells which
/// process holds each. A series is (process name, listening port), or port="client" for connections the process
/// opened; never a client address or a socket, so the series count is the services a host
/// runs (at most --max-series; what did not fit is counted in
/// tcpdoctor_watch_series_dropped_total). Another user's process can be placed only by root,
/// or with both CAP_DAC_READ_SEARCH (to list its /proc/PID/fd) and CAP_SYS_PTRACE (to read
/// the links): otherwise its sockets are counted as unattributed, not guessed. The
/// kernel's counters are cumulative per socket: a socket's last interval before it closes
/// is not seen, so a shorter --interval loses less.
///
/// Finding kinds, with inspect's rules: connections that exchanged small requests and
/// replies have TCP_NODELAY and TCP_CORK read through their process (pidfd_getfd: another
/// user's process needs root or CAP_SYS_PTRACE; refusals are said on stderr and counted), and
/// those with Nagle on are sampled every 10 ms for part of the next interval (at most 20% of
/// it, 0.5% of it in CPU): tcpdoctor_finding_lost_seconds_total{kind="nagle_delayed_ack"} is the
/// time their writes spent held by Nagle.
///
/// Endpoints: /metrics (Prometheus text format), /healthz (200 while sampling works, 503
/// and why otherwise). SIGINT or SIGTERM stops it (exit 0). Logs go to stderr. The
/// deployment files (systemd unit, Kubernetes DaemonSet, Grafana dashboard) are in deploy/;
/// see docs/watch.md.
///
/// Examples:
///   tcpdoctor watch                                  (http://127.0.0.1:9747/metrics)
///   tcpdoctor watch --listen 0.0.0.0:9747 --interval 15s
///   curl -s localhost:9747/metrics | grep send_buffer_limited
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct WatchArgs {
    /// Address to serve the metrics on (127.0.0.1:0 picks a free port, printed on stderr).
    #[arg(long, default_value = "127.0.0.1:9747", value_name = "ADDR:PORT")]
    pub listen: SocketAddr,

    /// How often the sockets are sampled.
    #[arg(long, default_value = "5s", value_parser = interval, value_name = "DURATION")]
    pub interval: Duration,

    /// At most this many series (process, port); sockets of further ones are counted as
    /// dropped.
    #[arg(long, default_value_t = 1000, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_series: u32,

    /// Remove a series once its process has had no socket for this long (a process that
    /// comes back starts again from zero: a counter reset to rate()).
    #[arg(long, default_value = "5m", value_parser = series_idle, value_name = "DURATION")]
    pub series_idle: Duration,

    /// Read the sockets of this network namespace instead of our own (a file such as
    /// /proc/PID/ns/net or /run/netns/NAME; needs CAP_SYS_ADMIN over it, i.e. root). The
    /// metrics are still served from our own namespace. Process names are read from our
    /// /proc, which shows the namespace's processes when our PID namespace is the host's.
    #[arg(long, value_name = "PATH")]
    pub netns: Option<PathBuf>,
}

fn interval(s: &str) -> Result<Duration, String> {
    let d = tcpdoctor_core::units::parse_duration(s).map_err(|e| e.to_string())?;
    if d < Duration::from_millis(100) || d > Duration::from_secs(3600) {
        return Err(format!("{s}: the interval must be between 100ms and 1h"));
    }
    Ok(d)
}

fn series_idle(s: &str) -> Result<Duration, String> {
    let d = tcpdoctor_core::units::parse_duration(s).map_err(|e| e.to_string())?;
    if d < Duration::from_secs(1) || d > Duration::from_secs(7 * 24 * 3600) {
        return Err(format!(
            "{s}: the series expiry must be between 1s and 168h"
        ));
    }
    Ok(d)
}

pub fn run(args: WatchArgs) -> anyhow::Result<u8> {
    serve(&Config {
        listen: args.listen,
        interval: args.interval,
        max_series: args.max_series as usize,
        series_idle: args.series_idle,
        netns: args.netns,
    })?;
    Ok(EXIT_CLEAN)
}
