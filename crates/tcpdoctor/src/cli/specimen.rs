//! `tcpdoctor specimen`: the built-in servers that show each pathology and its fix.

use std::time::Duration;

use anyhow::Context;
use clap::Args;
use tcpdoctor_core::units::{fmt_duration, parse_duration, parse_size};

use crate::proxy::Addr;
use crate::specimen::{self, Drain, Protocol, ServerConfig, Writes};
use crate::EXIT_CLEAN;

/// Run a specimen server: an ordinary blocking server with a known pathology, or its fix.
///
/// Prints `listening ADDR:PORT` once it accepts (bind port 0 and read that line), serves each
/// connection on its own thread, and exits after --idle-timeout with no connection open.
/// `--listen unix:PATH` serves the same protocols on a Unix socket (no Nagle there).
///
///   # Nagle × delayed ACK: one write per reply line, Nagle on (≈40 ms per exchange)
///   tcpdoctor specimen --protocol line --writes per-line
///   # the fix: the reply built in memory and written once
///   tcpdoctor specimen --protocol line --writes whole
///   # fine directly (TCP_NODELAY, like asyncio), stalls behind a Nagle-on hop
///   tcpdoctor specimen --protocol line --writes per-line --nodelay
///   # a busy send loop: spins on the send queue after every reply (CPU, not latency)
///   tcpdoctor specimen --protocol length-prefixed --drain spin
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct SpecimenArgs {
    /// Address to listen on: IP:PORT, or unix:PATH (a stale socket file there is replaced).
    #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
    pub listen: String,

    /// Wire protocol.
    #[arg(long, value_enum, default_value_t = Protocol::Line)]
    pub protocol: Protocol,

    /// How a `line` reply is written.
    #[arg(long, value_enum, default_value_t = Writes::PerLine)]
    pub writes: Writes,

    /// Set TCP_NODELAY on accepted sockets (default: Nagle on, as in C, Java, Python `socket`).
    #[arg(long)]
    pub nodelay: bool,

    /// Set SO_SNDBUF to BYTES on accepted sockets (the kernel doubles it; a size set by hand
    /// turns send-buffer autotuning off), e.g. 64KiB.
    #[arg(long, value_name = "BYTES", value_parser = size)]
    pub sndbuf: Option<u32>,

    /// What to do after each reply.
    #[arg(long, value_enum, default_value_t = Drain::None)]
    pub drain: Drain,

    /// Lines per `line` reply, before the terminating `.` line.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=10000))]
    pub lines: u16,

    /// Bytes per reply line, `\r\n` included (at least 8).
    #[arg(long, default_value_t = 24, value_parser = clap::value_parser!(u16).range(8..=60000))]
    pub line_bytes: u16,

    /// Exit after this long with no connection open (e.g. 30s, 10m).
    #[arg(long, default_value = "60s", value_parser = duration)]
    pub idle_timeout: Duration,

    /// Answer N requests in all, then exit with status 3 when the next one arrives, leaving
    /// its connections to the kernel: a server that dies in the middle of a run.
    #[arg(long, value_name = "N")]
    pub exit_after: Option<u64>,

    /// Pause this long between the writes of a `per-line` reply (e.g. 1ms): a server that
    /// computes each row before writing it.
    #[arg(long, default_value = "0s", value_parser = duration, value_name = "DURATION")]
    pub line_gap: Duration,
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn size(s: &str) -> Result<u32, String> {
    let v = parse_size(s).map_err(|e| e.to_string())?;
    u32::try_from(v)
        .ok()
        .filter(|&v| v > 0 && v <= i32::MAX as u32)
        .ok_or_else(|| format!("{s}: between 1 byte and 2 GiB"))
}

fn listen(text: &str) -> anyhow::Result<Addr> {
    let addr = super::proxy::parse_addr("listen", text)?;
    super::proxy::check_unix_dir("listen", &addr)?;
    Ok(addr)
}

pub fn run(args: SpecimenArgs) -> anyhow::Result<u8> {
    let at = listen(&args.listen)?;
    if !args.line_gap.is_zero()
        && (args.protocol != Protocol::Line || args.writes != Writes::PerLine)
    {
        anyhow::bail!(
            "--line-gap {}: pauses between the writes of a reply, so it needs --protocol line \
             --writes per-line",
            fmt_duration(args.line_gap)
        );
    }
    let cfg = ServerConfig {
        protocol: args.protocol,
        writes: args.writes,
        nodelay: args.nodelay,
        sndbuf: args.sndbuf,
        drain: args.drain,
        lines: usize::from(args.lines),
        line_bytes: usize::from(args.line_bytes),
        max_body: 16 << 20,
        exit_after: args.exit_after,
        line_gap: args.line_gap,
    };
    let counters = specimen::run(&at, cfg, args.idle_timeout)
        .with_context(|| format!("--listen {}", args.listen))?;
    eprintln!(
        "tcpdoctor specimen: idle for {:?}, exiting after {} connections, {} requests",
        args.idle_timeout,
        counters
            .connections
            .load(std::sync::atomic::Ordering::Relaxed),
        counters.requests.load(std::sync::atomic::Ordering::Relaxed)
    );
    Ok(EXIT_CLEAN)
}
