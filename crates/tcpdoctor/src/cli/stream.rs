//! `tcpdoctor stream`: measure a one-way stream of framed messages.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use clap::{Args, ValueEnum};
use tcpdoctor_core::stream::framing::unescape;
use tcpdoctor_core::stream::{render, Direction, Framing};
use tcpdoctor_core::units::{parse_duration, parse_size};

use super::analyze::Format;
use crate::stream::StreamConfig;

/// Which way the messages flow.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Way {
    /// The server sends, tcpdoctor reads and counts whole messages.
    FromServer,
    /// tcpdoctor writes framed messages as fast as the server takes them.
    ToServer,
}

/// A one-way stream: messages per second, and calls and segments per message
///
/// The figure messaging libraries publish is a one-way stream's rate: a sender writes framed
/// messages as fast as the receiver takes them. tcpdoctor is one end of the stream and the
/// server under test the other. It measures one window after a warm-up and reports
/// messages/s and bytes/s, the data segments that carried them (from the kernel's own count,
/// tcp_info), and — when it started the server (--server), traced — the server's send (or
/// receive) calls per message. One call and one segment per small message is the cost
/// unbatched_messages names; fewer calls than messages is a batching sender (see
/// docs/stream.md).
///
///   tcpdoctor stream --server './pub --port 7000' --target 127.0.0.1:7000 --framing u32be
///   tcpdoctor stream --target 127.0.0.1:7000 --direction to-server --framing line --size 100
///   tcpdoctor stream --target unix:/run/feed.sock --hello 'SUBSCRIBE all\n' --framing crlf
///
/// Rates of a traced server are lower than untraced (the tracer stops it at each call):
/// compare rates with --no-trace, and count calls with the trace. `tcpdoctor ab --stream`
/// compares two implementations this way.
/// Exit status: 0 measured; 2 on bad input, a server that does not start, a connection that
/// fails, or a window in which no whole message was counted.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct StreamArgs {
    /// The server: HOST:PORT, :PORT (127.0.0.1), or unix:/path.
    #[arg(long, value_name = "ADDR")]
    pub target: String,

    /// Start this command (sh -c) as the server, traced, and wait until --target accepts a
    /// connection; it is stopped at the end.
    #[arg(long, value_name = "CMD")]
    pub server: Option<String>,

    /// Which way the messages flow.
    #[arg(long, value_enum, default_value = "from-server")]
    pub direction: Way,

    /// How the stream is cut into messages: u8, u16be, u16le, u32be, u32le (a length prefix
    /// counting the body after it), line (ends in \n), crlf (ends in \r\n), fixed (--size
    /// bytes each).
    #[arg(long, value_name = "FRAMING", default_value = "u32be")]
    pub framing: String,

    /// Bytes of each message on the stream, framing included: what tcpdoctor writes
    /// (to-server; default 100), or every message's size with `fixed` framing.
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,

    /// Bytes sent once on each connection before the stream (a subscription, a start
    /// command), with escapes \r \n \t \0 \\ \xNN.
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub hello: String,

    /// Connections, each its own stream.
    #[arg(long, default_value_t = 1,
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub connections: u64,

    /// Time before the window: connections open, buffers fill, the sender reaches its pace.
    #[arg(long, value_name = "DURATION", default_value = "1s")]
    pub warmup: String,

    /// The measured window.
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub duration: String,

    /// Do not trace the server's system calls (rates to compare are measured this way).
    #[arg(long)]
    pub no_trace: bool,

    /// How long the server may take to accept its first connection.
    #[arg(long, value_name = "DURATION", default_value = "10s")]
    pub ready_timeout: String,

    /// Where the server's output goes (default: a file in the system's temp directory).
    #[arg(long, value_name = "FILE")]
    pub server_log: Option<PathBuf>,

    /// Report format (JSON: schema/stream-report.schema.json).
    #[arg(long, value_enum, default_value = "text")]
    pub format: Format,
}

fn duration(flag: &str, text: &str, min: Duration) -> anyhow::Result<Duration> {
    let d = parse_duration(text).map_err(|e| anyhow!("--{flag} {text}: {e}"))?;
    if d < min || d > Duration::from_secs(24 * 3600) {
        bail!(
            "--{flag} {text}: must be from {} to 24h",
            tcpdoctor_core::units::fmt_duration(min)
        );
    }
    Ok(d)
}

pub fn config(args: &StreamArgs) -> anyhow::Result<StreamConfig> {
    let target = super::proxy::parse_addr("target", &args.target)?;
    super::proxy::check_unix_dir("target", &target)?;
    let size = args
        .size
        .as_deref()
        .map(|s| parse_size(s).map_err(|e| anyhow!("--size {s}: {e}")))
        .transpose()?;
    let framing = Framing::parse(&args.framing, size)
        .map_err(|e| anyhow!("--framing {}: {e}", args.framing))?;
    let direction = match args.direction {
        Way::FromServer => Direction::FromServer,
        Way::ToServer => Direction::ToServer,
    };
    let message = match direction {
        Direction::ToServer => framing
            .message(size.unwrap_or(100))
            .map_err(|e| anyhow!("{e}"))?,
        Direction::FromServer => {
            if size.is_some() && !matches!(framing, Framing::Fixed { .. }) {
                bail!(
                    "--size: from the server the framing gives each message's size; --size \
                     is for to-server or `fixed` framing"
                );
            }
            Vec::new()
        }
    };
    let hello = unescape(&args.hello).map_err(|e| anyhow!("--hello: {e}"))?;
    let log = match &args.server_log {
        Some(p) => p.clone(),
        None => std::env::temp_dir().join(format!("tcpdoctor-stream-{}.log", std::process::id())),
    };
    Ok(StreamConfig {
        target,
        direction,
        framing,
        message,
        hello,
        connections: args.connections,
        warmup: duration("warmup", &args.warmup, Duration::ZERO)?,
        duration: duration("duration", &args.duration, Duration::from_millis(100))?,
        connect_timeout: Duration::from_secs(5),
        server: args.server.clone(),
        trace: !args.no_trace,
        ready_timeout: duration(
            "ready-timeout",
            &args.ready_timeout,
            Duration::from_millis(1),
        )?,
        log,
    })
}

pub fn run(args: StreamArgs) -> anyhow::Result<u8> {
    let cfg = config(&args)?;
    crate::capture::stop::install();
    let report = crate::stream::run(&cfg).context("stream")?;
    if args.server_log.is_none() {
        // A log of our own choosing goes once the run succeeded (an error names and keeps it).
        let _ = std::fs::remove_file(&cfg.log);
    }
    match args.format {
        Format::Text => print!("{}", render(&report)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    if report.messages == 0 {
        bail!("stream: no whole message was counted in the window: nothing was measured");
    }
    Ok(crate::EXIT_CLEAN)
}
