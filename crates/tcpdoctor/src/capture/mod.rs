//! Live capture: packets from an AF_PACKET ring into a pcap/pcapng file and/or the analyzer.
//!
//! No libpcap and no tcpdump: the socket, the kernel filter and the ring are set up here
//! ([`ring`], [`filter`]), so a capture needs only CAP_NET_RAW — which a process has inside
//! the network namespace `tcpdoctor sandbox` creates for it. Rules:
//! 1. The capture runs until its packet limit, its duration, or a stop request (Ctrl-C,
//!    SIGTERM, or the sandbox's command ending), then drains what the kernel already captured:
//!    it keeps reading for [`DRAIN`] so the block the kernel is still filling is retired and read.
//! 2. Packets go, in order, to the file and to the analyzer; frame numbers are the file's.
//!    A packet from a cooked socket (`--interface any`) goes with its SLL2 header in front.
//! 3. The summary counts packets written and packets the kernel dropped because the ring was
//!    full (`PACKET_STATISTICS`).

pub mod filter;
pub mod ring;
pub mod stop;

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use tcpdoctor_core::analysis::Analyzer;
use tcpdoctor_core::report::{CaptureSummary, Finding};
use tcpdoctor_core::wire::write::PcapWriter;
use tcpdoctor_core::wire::write_cooked::SLL2_HEADER;
use tcpdoctor_core::wire::write_pcapng::PcapngWriter;
use tcpdoctor_core::wire::LinkType;
use tcpdoctor_core::Timestamp;

pub use ring::Ring;

/// How long after a stop request the capture keeps reading: a few block timeouts.
pub const DRAIN: Duration = Duration::from_millis(4 * ring::BLOCK_TIMEOUT_MS as u64);

/// A validated capture request.
#[derive(Debug, Clone)]
pub struct CaptureConfig {
    pub interface: String,
    pub ports: Vec<u16>,
    pub snaplen: u32,
    pub buffer: usize,
    pub file: Option<PathBuf>,
    pub analyze: bool,
    pub duration: Option<Duration>,
    pub packets: Option<u64>,
}

enum FileWriter {
    Pcap(PcapWriter<BufWriter<File>>),
    Pcapng(PcapngWriter<BufWriter<File>>),
}

/// Where captured packets go.
pub struct Outputs {
    file: Option<(PathBuf, FileWriter)>,
    analyzer: Option<Analyzer>,
    link: LinkType,
    written: u64,
    last_ts: Timestamp,
    /// A cooked packet with its header, reused from packet to packet.
    frame: Vec<u8>,
}

/// What a finished capture reports.
pub struct Outcome {
    pub packets: u64,
    pub dropped: u64,
    /// Packets the kernel put in the ring that were not written: past the packet limit, or
    /// arriving after the stop.
    pub unread: u64,
    pub file: Option<PathBuf>,
    /// The analysis, when asked for.
    pub analysis: Option<(CaptureSummary, Vec<Finding>)>,
}

impl Outcome {
    /// One line: packets captured and dropped, and where they went.
    pub fn summary_line(&self) -> String {
        let mut s = format!(
            "{} packets captured, {} dropped by the kernel",
            self.packets, self.dropped
        );
        if self.unread > 0 {
            s.push_str(&format!(" ({} more left unread at the stop)", self.unread));
        }
        if let Some(f) = &self.file {
            s.push_str(&format!("; written to {}", f.display()));
        }
        s
    }
}

fn is_pcapng(p: &std::path::Path) -> bool {
    p.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("pcapng"))
}

impl Outputs {
    /// Creates the output file (before any namespace is entered: the user's own permissions
    /// apply) for packets of `link_type`.
    pub fn open(cfg: &CaptureConfig, link_type: u32) -> anyhow::Result<Outputs> {
        let file = match &cfg.file {
            None => None,
            Some(p) => {
                let f = File::create(p).with_context(|| format!("-w {}", p.display()))?;
                let out = BufWriter::with_capacity(1 << 20, f);
                let name = cfg.interface.as_str();
                let w = if is_pcapng(p) {
                    FileWriter::Pcapng(PcapngWriter::new(out, cfg.snaplen, link_type, name)?)
                } else {
                    FileWriter::Pcap(PcapWriter::with_link_type(out, cfg.snaplen, link_type)?)
                };
                Some((p.clone(), w))
            }
        };
        Ok(Outputs {
            file,
            analyzer: cfg.analyze.then(Analyzer::default),
            link: LinkType::from_code(link_type),
            written: 0,
            last_ts: Timestamp::ZERO,
            frame: Vec::new(),
        })
    }

    fn packet(&mut self, p: &ring::Packet) -> std::io::Result<()> {
        self.written += 1;
        self.last_ts = p.ts;
        let (data, orig_len) = match &p.cooked {
            Some(h) => {
                h.frame_into(p.data, &mut self.frame);
                (
                    &self.frame[..],
                    p.orig_len.saturating_add(SLL2_HEADER as u32),
                )
            }
            None => (p.data, p.orig_len),
        };
        match &mut self.file {
            Some((_, FileWriter::Pcap(w))) => w.write_packet(p.ts, data, orig_len)?,
            Some((_, FileWriter::Pcapng(w))) => w.write_packet(p.ts, data, orig_len)?,
            None => {}
        }
        if let Some(a) = &mut self.analyzer {
            a.on_frame(self.written, p.ts, self.link, data, orig_len);
        }
        Ok(())
    }

    fn finish(self, received: u64, dropped: u64) -> anyhow::Result<Outcome> {
        let mut path = None;
        if let Some((p, w)) = self.file {
            let r = match w {
                FileWriter::Pcap(mut w) => w.flush(),
                FileWriter::Pcapng(w) => w.finish(self.last_ts, received, dropped).map(drop),
            };
            r.with_context(|| format!("writing {}", p.display()))?;
            path = Some(p);
        }
        let analysis = self.analyzer.map(|a| {
            let name = path
                .as_ref()
                .map_or_else(|| "live capture".to_string(), |p| p.display().to_string());
            a.finish(&name, "live")
        });
        Ok(Outcome {
            packets: self.written,
            dropped,
            unread: received.saturating_sub(dropped + self.written),
            file: path,
            analysis,
        })
    }
}

/// Moves the next block's packets (up to `limit` written in all) into `out`; a write error.
fn take(ring: &mut Ring, out: &mut Outputs, limit: u64) -> Option<std::io::Error> {
    let mut failed = None;
    ring.drain_block(|p| {
        if out.written >= limit {
            return false;
        }
        if let Err(e) = out.packet(&p) {
            failed = Some(e);
            return false;
        }
        true
    });
    failed
}

/// Reads `ring` into `out` until a limit in `cfg` is reached or [`stop::requested`], then
/// drains and finishes.
pub fn run(ring: Ring, out: Outputs, cfg: &CaptureConfig) -> anyhow::Result<Outcome> {
    run_until(ring, out, cfg, stop::requested)
}

/// [`run`], stopping when `stopped` says so instead of on a signal (captures inside `run`).
pub fn run_until(
    mut ring: Ring,
    mut out: Outputs,
    cfg: &CaptureConfig,
    stopped: impl Fn() -> bool,
) -> anyhow::Result<Outcome> {
    let started = Instant::now();
    let limit = cfg.packets.unwrap_or(u64::MAX);
    let mut stopping: Option<Instant> = None;
    let mut failed: Option<std::io::Error> = None;
    loop {
        if stopping.is_none() && (stopped() || cfg.duration.is_some_and(|d| started.elapsed() >= d))
        {
            stopping = Some(Instant::now());
        }
        if out.written >= limit || failed.is_some() {
            break;
        }
        // One reading of the clock per lap: the guard and the remainder must agree, or the
        // drain's remainder can go below zero between them.
        let draining_for = stopping.map(|t| t.elapsed());
        let timeout = match draining_for {
            Some(e) if e >= DRAIN => {
                // A last lap over what the kernel has already handed over, and no further:
                // under a flood the ring never empties.
                for _ in 0..ring.blocks() {
                    if !ring.wait(0)? {
                        break;
                    }
                    failed = take(&mut ring, &mut out, limit);
                    if failed.is_some() {
                        break;
                    }
                }
                break;
            }
            Some(e) => DRAIN.saturating_sub(e),
            None => match cfg.duration {
                Some(d) => d
                    .saturating_sub(started.elapsed())
                    .min(Duration::from_millis(100)),
                None => Duration::from_millis(100),
            },
        };
        if ring.wait(timeout.as_millis().max(1) as i32)? {
            failed = take(&mut ring, &mut out, limit);
        }
    }
    if let Some(e) = failed {
        let name = out.file.as_ref().map(|(p, _)| p.display().to_string());
        return Err(anyhow::Error::new(e).context(format!(
            "writing {}",
            name.unwrap_or_else(|| "the capture".into())
        )));
    }
    let (received, dropped) = ring.statistics();
    out.finish(received, dropped)
}
