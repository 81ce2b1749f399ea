//! `tcpdoctor capture`: record packets without tcpdump or libpcap.

use std::path::PathBuf;

use anyhow::bail;
use clap::Args;
use tcpdoctor_core::report::Report;
use tcpdoctor_core::units::{parse_duration, parse_size};

use super::analyze::{emit, parse_fail_on, FailOn, Format};
use crate::capture::{self, stop, CaptureConfig, Outputs, Ring};
use crate::EXIT_CLEAN;

/// The largest snap length accepted (libpcap's maximum).
const MAX_SNAPLEN: u64 = 262_144;

/// Record TCP traffic on an interface to a pcap or pcapng file, or analyse it live.
///
/// An AF_PACKET capture done by tcpdoctor itself (no tcpdump, no libpcap), filtered in the
/// kernel by port, with nanosecond timestamps. The file opens in `tcpdoctor analyze`,
/// tshark and Wireshark. Ctrl-C, --duration or --packets ends it; it then prints how many
/// packets it captured and how many the kernel dropped.
///
///   tcpdoctor capture --port 6379 -w redis.pcap
///   tcpdoctor capture -i any --port 443 -w web.pcapng
///   tcpdoctor capture --port 8080 --duration 10s --analyze
///
/// Needs CAP_NET_RAW. Without it, `tcpdoctor sandbox -- COMMAND` runs your server and
/// client in a private network namespace and captures there, as any user.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct CaptureArgs {
    /// Interface to capture on, or `any` for all of them (written as Linux cooked v2, SLL2;
    /// loopback's packets once each, as tcpdump shows them).
    #[arg(long, short = 'i', default_value = "lo", value_name = "NAME")]
    pub interface: String,

    #[command(flatten)]
    pub opts: CaptureOpts,

    /// Stop after this long (e.g. 10s, 1.5m).
    #[arg(long, value_name = "DURATION")]
    pub duration: Option<String>,

    /// Stop after this many packets.
    #[arg(long, value_name = "N")]
    pub packets: Option<u64>,
}

/// Options shared by `capture` and `sandbox`.
#[derive(Debug, Args)]
pub struct CaptureOpts {
    /// Keep only TCP packets from or to this port (repeat, or comma-separate; up to 32).
    #[arg(long, short = 'p', value_name = "PORT", value_delimiter = ',')]
    pub port: Vec<u16>,

    /// Bytes kept per packet (headers are enough for analysis; 262144 keeps everything).
    #[arg(long, short = 's', default_value = "256", value_name = "BYTES")]
    pub snaplen: String,

    /// Kernel ring size: a bigger ring rides out longer bursts without drops.
    #[arg(long, default_value = "32MiB", value_name = "SIZE")]
    pub buffer: String,

    /// Write the packets here: pcap, or pcapng when the name ends in .pcapng.
    #[arg(short = 'w', long = "write", value_name = "FILE")]
    pub write: Option<PathBuf>,

    /// Analyse the packets as they arrive and print the findings at the end.
    #[arg(long)]
    pub analyze: bool,

    /// Output format of the findings (with --analyze).
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// With --analyze: exit with status 1 if any of these finding kinds is found, or `any`.
    #[arg(long, value_name = "KIND,...", value_delimiter = ',', value_parser = parse_fail_on)]
    pub fail_on: Vec<FailOn>,
}

impl CaptureOpts {
    /// Validates the shared flags into a config for `interface`.
    pub fn config(&self, interface: &str) -> anyhow::Result<CaptureConfig> {
        let snaplen = parse_size(&self.snaplen).map_err(|e| anyhow::anyhow!("--snaplen: {e}"))?;
        if snaplen == 0 || snaplen > MAX_SNAPLEN {
            bail!("--snaplen: {snaplen} is out of range (1 to {MAX_SNAPLEN})");
        }
        let buffer = parse_size(&self.buffer).map_err(|e| anyhow::anyhow!("--buffer: {e}"))?;
        if !(2 << 20..=4 << 30).contains(&buffer) {
            bail!("--buffer: {buffer} bytes is out of range (2MiB to 4GiB)");
        }
        if self.port.contains(&0) {
            bail!("--port: 0 is not a port");
        }
        if self.port.len() > capture::filter::MAX_PORTS {
            bail!("--port: at most {} ports", capture::filter::MAX_PORTS);
        }
        if !self.analyze && (!self.fail_on.is_empty() || self.format != Format::Text) {
            bail!("--format and --fail-on apply to --analyze");
        }
        Ok(CaptureConfig {
            interface: interface.to_string(),
            ports: self.port.clone(),
            snaplen: snaplen as u32,
            buffer: buffer as usize,
            file: self.write.clone(),
            analyze: self.analyze,
            duration: None,
            packets: None,
        })
    }

    /// Prints the one-line summary on stderr and, with --analyze, the findings on stdout;
    /// returns the exit code --fail-on asks for.
    pub fn report(&self, outcome: capture::Outcome) -> anyhow::Result<u8> {
        self.report_traced(outcome, &[])
    }

    /// As [`CaptureOpts::report`], with the system calls of the programs that made the
    /// traffic (`sandbox`): cited in the findings — joined to the frames when the capture was
    /// written to a file (-w) — and listed in the report.
    pub fn report_traced(
        &self,
        outcome: capture::Outcome,
        traces: &[(&str, tcpdoctor_core::syscalls::Trace)],
    ) -> anyhow::Result<u8> {
        eprintln!("tcpdoctor: {}", outcome.summary_line());
        match outcome.analysis {
            Some((summary, _)) if summary.tcp_segments == 0 => {
                eprintln!("tcpdoctor: no TCP packets were captured: nothing to analyse");
                Ok(EXIT_CLEAN)
            }
            Some((summary, mut findings)) => {
                for (who, t) in traces {
                    let cited = match &self.write {
                        Some(file) => crate::run::syscalls::cite_from(&mut findings, t, file),
                        None => Ok(tcpdoctor_core::syscalls::cite::cite(&mut findings, t, &[])),
                    };
                    if let Err(e) = cited {
                        eprintln!("tcpdoctor: the {who}'s system calls were not joined to the frames: {e:#}");
                    }
                }
                let mut report = Report::new(vec![summary], findings);
                report.syscalls = program_calls(traces);
                emit(&report, self.format, &self.fail_on)
            }
            None => Ok(EXIT_CLEAN),
        }
    }
}

/// What the capture is filtered on, for the startup line.
pub fn describe(cfg: &CaptureConfig) -> String {
    let ports: Vec<String> = cfg.ports.iter().map(u16::to_string).collect();
    let filter = match ports.len() {
        0 => "all packets".to_string(),
        1 => format!("tcp port {}", ports[0]),
        _ => format!("tcp ports {}", ports.join(",")),
    };
    format!(
        "capturing on {} ({filter}), {} bytes per packet",
        cfg.interface, cfg.snaplen
    )
}

pub fn run(args: CaptureArgs) -> anyhow::Result<u8> {
    let mut cfg = args.opts.config(&args.interface)?;
    cfg.duration = match &args.duration {
        Some(d) => Some(parse_duration(d).map_err(|e| anyhow::anyhow!("--duration: {e}"))?),
        None => None,
    };
    cfg.packets = args.packets;
    if cfg.packets == Some(0) {
        bail!("--packets: must be at least 1");
    }
    if cfg.file.is_none() && !cfg.analyze {
        bail!("say where the packets go: -w FILE.pcap, --analyze, or both");
    }
    let ring = Ring::open(&cfg.interface, &cfg.ports, cfg.snaplen, cfg.buffer)?;
    let out = Outputs::open(&cfg, ring.link.link_type)?;
    stop::install();
    eprintln!("tcpdoctor: {}; Ctrl-C to stop", describe(&cfg));
    let outcome = capture::run(ring, out, &cfg)?;
    args.opts.report(outcome)
}

/// Each traced program's summary, for the report.
pub fn program_calls(
    traces: &[(&str, tcpdoctor_core::syscalls::Trace)],
) -> Vec<tcpdoctor_core::report::ProgramCalls> {
    traces
        .iter()
        .map(|(who, t)| tcpdoctor_core::report::ProgramCalls {
            program: (*who).to_string(),
            calls: tcpdoctor_core::syscalls::summarize(t, None),
        })
        .collect()
}
