//! `tcpdoctor proxy`: an impairing, recording TCP forwarder.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use clap::Args;
use tcpdoctor_core::impair::ChunkMode;
use tcpdoctor_core::units::{fmt_duration, parse_duration, parse_rate_bps, parse_size};

use crate::proxy::{Addr, CapturePoint, DirConfig, LegConfig, ProxyConfig};
use crate::{EXIT_CLEAN, EXIT_ERROR};

/// Forward TCP (or Unix-socket) connections, byte-exact, optionally impaired and recorded.
///
/// Every connection accepted on --listen is forwarded to --upstream. Each direction can be
/// delayed, jittered, paced and re-chunked; each leg's socket options can be set; every chunk
/// can be recorded (JSON Lines) and written as a synthetic capture for `tcpdoctor analyze`,
/// Wireshark or tshark. Half-closes and resets propagate; Ctrl-C drains and prints a summary.
///
/// Directions: c2s (client → server) and s2c (server → client). Per-direction flags take one
/// value for both directions, or a list:  --delay 15ms   --delay c2s=15ms,s2c=5ms
///
/// Legs: the client leg is the proxy's socket towards the client (it carries s2c writes), the
/// server leg the proxy's socket towards the upstream (c2s writes). Per-leg flags take one
/// value for both legs, or a list:  --nagle on   --nagle client=on,server=off
///
/// Addresses: HOST:PORT, or unix:/path/to.sock (or any path starting with / or ./).
///
/// Reproduce the Nagle × delayed-ACK stall of a middlebox in front of a per-line server:
///   tcpdoctor proxy --listen 127.0.0.1:9001 --upstream 127.0.0.1:8001 \
///                   --nagle client=on --chunks preserve --pcap stall.pcap
///   tcpdoctor analyze stall.pcap        # names nagle_delayed_ack
///
/// Show a client that pays one round trip per command on a 30 ms path, captured at its end:
///   tcpdoctor proxy --listen :9001 --upstream 127.0.0.1:8001 --delay 15ms \
///                   --pcap wan.pcap --pcap-at client
///   tcpdoctor analyze wan.pcap          # RTT ≈ 30 ms; names rtt_bound
///
/// Add a WAN-like path (15 ms each way, 10 Mbit/s) and record every chunk:
///   tcpdoctor proxy --listen :9001 --upstream 127.0.0.1:8001 --delay 15ms --jitter 2ms \
///                   --rate 10mbit --record run.jsonl
///
/// Exit status: 0 after Ctrl-C (the summary is printed on stderr), 2 on a usage error or when
/// --listen cannot be bound.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct ProxyArgs {
    /// Address to accept connections on (`:9001` means 127.0.0.1:9001).
    #[arg(long, value_name = "ADDR")]
    pub listen: String,

    /// Address each accepted connection is forwarded to.
    #[arg(long, value_name = "ADDR")]
    pub upstream: String,

    /// One-way delay added to every chunk, order preserved (per direction). Held on an hrtimer
    /// armed a little early, then spun: a chunk leaves within microseconds of its time, so
    /// `200us` means 200 µs.
    #[arg(long, value_name = "D|c2s=D,s2c=D", default_value = "0")]
    pub delay: String,

    /// Uniform jitter ± J around --delay, seeded, never reordering (per direction).
    #[arg(long, value_name = "J|c2s=J,s2c=J", default_value = "0")]
    pub jitter: String,

    /// Seed of the jitter generator: the same seed gives the same delays.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// Paced bandwidth, smooth (1 ms slices), e.g. 10mbit or 1MB/s (per direction).
    #[arg(long, value_name = "RATE|c2s=RATE,s2c=RATE")]
    pub rate: Option<String>,

    /// Write boundaries: preserve (one write per chunk read, the faithful middlebox),
    /// coalesce (merge what is queued), split:N (re-slice into N-byte writes) (per direction).
    #[arg(
        long,
        value_name = "MODE|c2s=MODE,s2c=MODE",
        default_value = "preserve"
    )]
    pub chunks: String,

    /// Nagle's algorithm on the proxy's sockets (per leg). Default: off on both legs
    /// (TCP_NODELAY set), so the proxy itself adds no Nagle hold unless asked to.
    #[arg(long, value_name = "on|off|client=..,server=..", default_value = "off")]
    pub nagle: String,

    /// TCP_CORK while a batch is written; uncorked whenever the queue empties (per leg).
    #[arg(long, value_name = "on|off|client=..,server=..", num_args = 0..=1,
          default_missing_value = "on", default_value = "off")]
    pub cork: String,

    /// TCP_QUICKACK re-armed after every read, so the proxy never delays its ACKs (per leg).
    #[arg(long, value_name = "on|off|client=..,server=..", num_args = 0..=1,
          default_missing_value = "on", default_value = "off")]
    pub quickack: String,

    /// SO_SNDBUF of the proxy's sockets, e.g. 64KiB (per leg; default: the kernel's).
    #[arg(long, value_name = "SIZE|client=SIZE,server=SIZE")]
    pub sndbuf: Option<String>,

    /// SO_RCVBUF of the proxy's sockets (per leg; default: the kernel's).
    #[arg(long, value_name = "SIZE|client=SIZE,server=SIZE")]
    pub rcvbuf: Option<String>,

    /// Record every chunk read (connection, direction, bytes, time, gap) as JSON Lines.
    #[arg(long, value_name = "FILE.jsonl")]
    pub record: Option<PathBuf>,

    /// Write the forwarded traffic as a synthetic pcap (one TCP connection per proxied one).
    #[arg(long, value_name = "FILE.pcap")]
    pub pcap: Option<PathBuf>,

    /// Where the --pcap is seen from. proxy (default): what the proxy sent, when it sent it;
    /// the --delay does not show as RTT. client or server: as a capture at that end of the
    /// emulated path would show it: observed data times at that end, the handshake spanning the
    /// round trip (c2s + s2c delay), the far end's ACKs modelled one round trip after the data.
    /// Use client to let `tcpdoctor analyze` measure the path RTT and name rtt_bound.
    #[arg(long, value_name = "proxy|client|server", default_value = "proxy",
          value_parser = clap::builder::ValueParser::new(parse_capture_point))]
    pub pcap_at: CapturePoint,

    /// Also print the summary every interval while running, e.g. 5s.
    #[arg(long, value_name = "D")]
    pub summary_every: Option<String>,

    /// Worker threads. 1 (the default) runs every connection on one thread, which gives the
    /// lowest added latency; more threads help only with many busy connections.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub threads: u16,

    /// Stop reading a direction while more than this many bytes wait in its pipeline.
    #[arg(long, value_name = "SIZE", default_value = "4MiB")]
    pub max_queued: String,
}

/// Splits `text` into a value per side: `V` for both, or `a=V,b=V` naming either side.
fn per_side<T: Clone>(
    flag: &str,
    text: &str,
    names: [&str; 2],
    default: T,
    parse: impl Fn(&str) -> Result<T, String>,
) -> anyhow::Result<[T; 2]> {
    let ctx = |e: String| anyhow::anyhow!("--{flag} {text}: {e}");
    if !text.contains('=') {
        let v = parse(text).map_err(ctx)?;
        return Ok([v.clone(), v]);
    }
    let mut out = [default.clone(), default];
    let mut seen = [false, false];
    for part in text.split(',') {
        let Some((name, value)) = part.split_once('=') else {
            bail!(
                "--{flag} {text}: `{part}` is not NAME=VALUE (names: {})",
                names.join(", ")
            );
        };
        let i = match names.iter().position(|n| *n == name.trim()) {
            Some(i) => i,
            None if name.trim() == "both" => {
                let v = parse(value).map_err(ctx)?;
                out = [v.clone(), v];
                seen = [true, true];
                continue;
            }
            None => bail!(
                "--{flag} {text}: unknown name `{name}` (expected {} or both)",
                names.join(", ")
            ),
        };
        if seen[i] {
            bail!("--{flag} {text}: `{name}` given twice");
        }
        seen[i] = true;
        out[i] = parse(value).map_err(ctx)?;
    }
    Ok(out)
}

fn parse_capture_point(s: &str) -> Result<CapturePoint, String> {
    s.parse()
}

fn on_off(s: &str) -> Result<bool, String> {
    match s.trim() {
        "on" | "true" | "yes" | "1" => Ok(true),
        "off" | "false" | "no" | "0" => Ok(false),
        other => Err(format!("`{other}` is not on or off")),
    }
}

fn duration(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}

fn size(s: &str) -> Result<Option<usize>, String> {
    let v = parse_size(s).map_err(|e| e.to_string())?;
    if v == 0 || v > i32::MAX as u64 {
        return Err(format!("`{s}` must be between 1 byte and 2 GiB"));
    }
    Ok(Some(v as usize))
}

/// Parses `HOST:PORT`, `:PORT` (127.0.0.1), `unix:/path`, or a path.
pub fn parse_addr(flag: &str, text: &str) -> anyhow::Result<Addr> {
    let t = text.trim();
    if let Some(p) = t.strip_prefix("unix:") {
        if p.is_empty() {
            bail!("--{flag} {text}: empty Unix socket path");
        }
        return Ok(Addr::Unix(PathBuf::from(p)));
    }
    if t.starts_with('/') || t.starts_with("./") {
        return Ok(Addr::Unix(PathBuf::from(t)));
    }
    let t = if t.starts_with(':') {
        format!("127.0.0.1{t}")
    } else {
        t.to_string()
    };
    use std::net::ToSocketAddrs;
    let addr = t
        .to_socket_addrs()
        .with_context(|| format!("--{flag} {text}: not HOST:PORT or unix:/path"))?
        .next()
        .with_context(|| format!("--{flag} {text}: resolves to no address"))?;
    Ok(Addr::Tcp(addr))
}

/// A Unix socket path whose directory does not exist can neither be bound nor reached: say
/// so now, naming the flag, rather than as a connect error (or a readiness timeout) later.
pub fn check_unix_dir(flag: &str, addr: &Addr) -> anyhow::Result<()> {
    if let Addr::Unix(p) = addr {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            if !dir.is_dir() {
                bail!(
                    "--{flag} {addr}: no directory {} (a Unix socket's directory must exist)",
                    dir.display()
                );
            }
        }
    }
    Ok(())
}

impl ProxyArgs {
    /// Raw flags → a validated config; no I/O except name resolution.
    pub fn config(&self) -> anyhow::Result<(Addr, ProxyConfig)> {
        let listen = parse_addr("listen", &self.listen)?;
        let upstream = parse_addr("upstream", &self.upstream)?;
        let dirs = ["c2s", "s2c"];
        let legs = ["client", "server"];
        let delay = per_side("delay", &self.delay, dirs, Duration::ZERO, duration)?;
        let jitter = per_side("jitter", &self.jitter, dirs, Duration::ZERO, duration)?;
        let rate = match &self.rate {
            None => [None, None],
            Some(r) => per_side("rate", r, dirs, None, |s| {
                let v = parse_rate_bps(s).map_err(|e| e.to_string())?;
                if v == 0 {
                    return Err("a rate must be positive".into());
                }
                Ok(Some(v))
            })?,
        };
        let chunks = per_side("chunks", &self.chunks, dirs, ChunkMode::Preserve, |s| {
            s.trim().parse::<ChunkMode>()
        })?;
        for i in 0..2 {
            if jitter[i] > delay[i] {
                bail!(
                    "--jitter {}: the {} jitter ({}) exceeds its delay ({}); delays cannot go \
                     below zero, so jitter would no longer be symmetric",
                    self.jitter,
                    dirs[i],
                    fmt_duration(jitter[i]),
                    fmt_duration(delay[i])
                );
            }
        }
        if self.pcap.is_none() && self.pcap_at != CapturePoint::Proxy {
            bail!("--pcap-at {}: needs --pcap FILE", self.pcap_at);
        }
        let nagle = per_side("nagle", &self.nagle, legs, false, on_off)?;
        let cork = per_side("cork", &self.cork, legs, false, on_off)?;
        let quickack = per_side("quickack", &self.quickack, legs, false, on_off)?;
        let sndbuf = match &self.sndbuf {
            None => [None, None],
            Some(s) => per_side("sndbuf", s, legs, None, size)?,
        };
        let rcvbuf = match &self.rcvbuf {
            None => [None, None],
            Some(s) => per_side("rcvbuf", s, legs, None, size)?,
        };
        let summary_every = match &self.summary_every {
            None => None,
            Some(s) => {
                let d = parse_duration(s).with_context(|| format!("--summary-every {s}"))?;
                if d.is_zero() {
                    bail!("--summary-every {s}: must be positive");
                }
                Some(d)
            }
        };
        let max_queued = parse_size(&self.max_queued)
            .with_context(|| format!("--max-queued {}", self.max_queued))?;
        if max_queued == 0 {
            bail!("--max-queued {}: must be positive", self.max_queued);
        }
        let dir = |i: usize| DirConfig {
            delay: delay[i],
            jitter: jitter[i],
            rate_bps: rate[i],
            chunks: chunks[i],
        };
        let leg = |i: usize| LegConfig {
            nagle: nagle[i],
            cork: cork[i],
            quickack: quickack[i],
            sndbuf: sndbuf[i],
            rcvbuf: rcvbuf[i],
        };
        Ok((
            listen,
            ProxyConfig {
                c2s: dir(0),
                s2c: dir(1),
                client_leg: leg(0),
                server_leg: leg(1),
                seed: self.seed,
                record: self.record.clone(),
                pcap: self.pcap.clone(),
                pcap_at: self.pcap_at,
                summary_every,
                max_queued: max_queued.min(usize::MAX as u64) as usize,
                ..ProxyConfig::forward_to(upstream)
            },
        ))
    }
}

pub fn run(args: ProxyArgs) -> anyhow::Result<u8> {
    let (listen, config) = match args.config() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tcpdoctor: error: {e:#}");
            return Ok(EXIT_ERROR);
        }
    };
    if let Err(e) = crate::limits::raise_fd_limit() {
        eprintln!("tcpdoctor proxy: cannot raise the open-file limit ({e}); continuing");
    }
    let rt = super::runtime(usize::from(args.threads))?;
    rt.block_on(async move {
        let listener = crate::proxy::Listener::bind(&listen)
            .await
            .with_context(|| format!("--listen {}: cannot listen", args.listen))?;
        eprintln!(
            "tcpdoctor proxy: {} → {}",
            listener.local_desc(),
            config.upstream
        );
        for line in config.describe() {
            eprintln!("  {line}");
        }
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
            eprintln!(
                "tcpdoctor proxy: interrupted, draining connections (Ctrl-C again to stop now)"
            );
        };
        let summary = crate::proxy::run(listener, config, shutdown).await?;
        eprint!("{}", summary.render());
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(EXIT_CLEAN)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: ProxyArgs,
    }

    fn cfg(args: &[&str]) -> anyhow::Result<ProxyConfig> {
        let mut v = vec!["t", "--listen", "127.0.0.1:0", "--upstream", "127.0.0.1:9"];
        v.extend_from_slice(args);
        T::try_parse_from(v)?.a.config().map(|c| c.1)
    }

    #[test]
    fn per_direction_and_per_leg_syntax() {
        let c = cfg(&["--delay", "c2s=15ms,s2c=5ms", "--nagle", "client=on"]).unwrap();
        assert_eq!(c.c2s.delay, Duration::from_millis(15));
        assert_eq!(c.s2c.delay, Duration::from_millis(5));
        assert!(c.client_leg.nagle && !c.server_leg.nagle);
        let c = cfg(&["--delay", "7ms", "--chunks", "split:8", "--cork"]).unwrap();
        assert_eq!(c.s2c.delay, Duration::from_millis(7));
        assert_eq!(c.c2s.chunks, ChunkMode::Split(8));
        assert!(c.client_leg.cork && c.server_leg.cork);
        let c = cfg(&[]).unwrap();
        assert!(
            !c.client_leg.nagle && !c.server_leg.nagle,
            "nagle off by default"
        );
        assert_eq!(c.c2s.chunks, ChunkMode::Preserve);
        assert_eq!(
            c.pcap_at,
            CapturePoint::Proxy,
            "the pcap is the proxy's by default"
        );
        let c = cfg(&["--pcap", "x.pcap", "--pcap-at", "client"]).unwrap();
        assert_eq!(c.pcap_at, CapturePoint::Client);
        assert!(cfg(&["--pcap", "x.pcap", "--pcap-at", "nic"]).is_err());
    }

    #[test]
    fn errors_name_the_flag() {
        for (args, flag) in [
            (vec!["--delay", "15"], "--delay"),
            (vec!["--delay", "up=1ms"], "--delay"),
            (vec!["--nagle", "maybe"], "--nagle"),
            (vec!["--chunks", "split:0"], "--chunks"),
            (vec!["--rate", "0mbit"], "--rate"),
            (vec!["--jitter", "5ms"], "--jitter"),
            (vec!["--sndbuf", "client=lots"], "--sndbuf"),
            (vec!["--summary-every", "0s"], "--summary-every"),
            (vec!["--pcap-at", "client"], "--pcap-at"),
        ] {
            let e = format!("{:#}", cfg(&args).unwrap_err());
            assert!(e.contains(flag), "{args:?}: {e}");
        }
        assert!(parse_addr("upstream", "unix:").is_err());
        assert!(matches!(
            parse_addr("upstream", "unix:/tmp/x.sock").unwrap(),
            Addr::Unix(_)
        ));
        assert!(matches!(
            parse_addr("listen", ":9001").unwrap(),
            Addr::Tcp(_)
        ));
    }
}
