//! `tcpdoctor analyze`: what is wrong with this traffic?

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use clap::{Args, ValueEnum};
use tcpdoctor_core::analysis::{Analyzer, ScriptedClient};
use tcpdoctor_core::ends::{compare, EndCapture};
use tcpdoctor_core::report::{render_text, FindingKind, Report, Truncation};
use tcpdoctor_core::wire::{decode_frame, CaptureError, CaptureReader};

use crate::capture_file::Input;
use crate::read_ahead::Source;
use crate::shards;
use crate::{output, EXIT_CLEAN, EXIT_ERROR, EXIT_FOUND};

/// Diagnose packet captures: name each TCP pathology, its cost, its evidence and its fix.
///
/// Reads pcap and pcapng files (tcpdump, Wireshark, tshark), plain or gzip-compressed
/// (recognised by content: .pcap.gz works, whatever its name). Link types: Ethernet (VLAN and
/// QinQ tags, MPLS, PPPoE), Linux cooked "any", raw IP, BSD loopback; IPv4 and IPv6. TCP inside
/// tunnels is unwrapped (up to 4 deep): VXLAN, Geneve, GRE (ERSPAN, NVGRE, WCCP, PPTP,
/// GRE-in-UDP), MPLS, PPPoE, IP-in-IP. Captures cut short by a snap length (`tcpdump -s 96`)
/// work as well as full ones: tcpdoctor needs the headers, not the payload. A file that ends
/// mid-record (tcpdump killed while writing) is analysed up to there, with a warning.
///
/// Record one with, for example:
///   tcpdoctor capture --port 6379 -w slow.pcap        (needs CAP_NET_RAW; or:)
///   tcpdoctor sandbox -w slow.pcap -- sh -c './server & ./client'   (any user)
///   sudo tcpdump -i any -s 128 -w slow.pcap 'tcp port 6379'
///
/// Exit status: 0 when nothing listed in --fail-on was found, 1 when something was,
/// 2 on bad input (the message names the file and byte offset) or a capture without TCP (the
/// message counts what it held instead). A file cut short mid-record exits as a complete one.
/// With several files, an unreadable one is reported and skipped, the others are analysed,
/// and the exit status is 2.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct AnalyzeArgs {
    /// Capture files (pcap or pcapng, possibly gzipped). Each is analysed on its own; findings
    /// name their file.
    /// An unreadable file among several is reported and skipped (exit status 2).
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Exit with status 1 if any of these finding kinds is found (comma-separated), or `any`.
    /// Kinds: nagle_delayed_ack, nagle_round_trip, fragmented_writes, rtt_bound,
    /// connection_churn, zero_window, retransmission_stall, window_limited, unbatched_messages.
    #[arg(long, value_name = "KIND,...", value_delimiter = ',', value_parser = parse_fail_on)]
    pub fail_on: Vec<FailOn>,

    /// The two FILEs are two ends of one path: the same connections captured where the client
    /// runs and where the server runs (as `sandbox --delay -w` writes them). Besides each
    /// file's findings, say what each way of the path did: packets lost on the way (by frame),
    /// one-way delays, the round trip, and whether each retransmission replaced a lost packet
    /// or resent one that had arrived (a lost or late acknowledgement). Connections pair by
    /// ports and initial sequence number, so addresses may differ (NAT). See docs/wan.md.
    #[arg(long)]
    pub ends: bool,

    /// Threads to use (default: the cores available). With more than one, several FILEs are
    /// analysed at once (up to N at a time); a single file's connections (a regular, uncompressed
    /// file of 8 MiB or more, or any size when --threads is given) are divided among N shards, 4 at
    /// most, by the hash of their endpoints, and as many threads analyse them (one also reads and
    /// decodes the file); a single gzip-compressed FILE is inflated on a thread of its own, ahead
    /// of the analysis. The report (stdout, and the exit status) is the same whatever N is, but for
    /// a divided file past rtt_bound's cap of 131,072 ended client spans, which each shard applies
    /// to its own share (a divided file past the cap of 65,536 half-open attempts at once is
    /// analysed again on one thread). Warnings on stderr come as each file is read. N files at once
    /// hold N analyses in memory.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,
}

/// The cores this process may run on (1 when that cannot be told).
pub(crate) fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Threads a capture's analysis may use: `analyze --threads`, or every core (the other
/// commands that analyse a capture use the default).
static THREADS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

fn threads() -> usize {
    match THREADS.load(std::sync::atomic::Ordering::Relaxed) {
        0 => cores(),
        n => n,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people: verdict, evidence, fix.
    Text,
    /// For machines: schema/analyze-report.schema.json.
    Json,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailOn {
    Any,
    Kind(FindingKind),
}

pub(crate) fn parse_fail_on(s: &str) -> Result<FailOn, String> {
    let s = s.trim();
    if s == "any" {
        return Ok(FailOn::Any);
    }
    FindingKind::parse(s).map(FailOn::Kind).ok_or_else(|| {
        let kinds: Vec<&str> = FindingKind::ALL.iter().map(|k| k.as_str()).collect();
        format!(
            "unknown finding kind `{s}` (expected one of: any, {})",
            kinds.join(", ")
        )
    })
}

pub fn run(args: AnalyzeArgs) -> anyhow::Result<u8> {
    crate::heap::prepare_for_analysis();
    if args.ends {
        if args.files.len() != 2 {
            eprintln!(
                "tcpdoctor: error: --ends compares two files (the client's end and the server's \
                 end of one path); {} given",
                args.files.len()
            );
            return Ok(EXIT_ERROR);
        }
        // A missing file is reported as any unreadable one is, below.
        let not_a_file = |f: &&PathBuf| std::fs::metadata(f).is_ok_and(|m| !m.is_file());
        if let Some(f) = args.files.iter().find(not_a_file) {
            eprintln!(
                "tcpdoctor: error: {} is not a regular file (a pipe?): with --ends the \
                 evidence audit must re-read both files' cited frames, so save it to a file first",
                f.display()
            );
            return Ok(EXIT_ERROR);
        }
    }
    if let Some(n) = args.threads {
        THREADS.store(usize::from(n), std::sync::atomic::Ordering::Relaxed);
    }
    let mut captures = Vec::new();
    let mut findings = Vec::new();
    let mut unreadable = 0;
    // With --ends, each file's TCP packets are kept for the comparison in the same pass.
    let mut ends: Vec<EndCapture> = Vec::new();
    for (result, end) in analyze_files(&args.files, args.ends) {
        match result {
            Ok((summary, found)) => {
                captures.push(summary);
                findings.extend(found);
                ends.extend(end);
            }
            // One file alone: its error is the whole answer. Among several, a bad file must
            // not hide the findings in the others: say so, go on, and exit 2 at the end.
            Err(e) if args.files.len() > 1 => {
                eprintln!("tcpdoctor: error: {e:#}");
                unreadable += 1;
            }
            Err(e) => return Err(e),
        }
    }
    if captures.is_empty() {
        bail!("none of the {} captures could be read", args.files.len());
    }
    let mut report = Report::new(captures, findings);
    let mut ends = ends.into_iter();
    if let (Some(first), Some(second), 0) = (ends.next(), ends.next(), unreadable) {
        report.ends = Some(compare(first, second));
    }
    let code = emit(&report, args.format, &args.fail_on)?;
    Ok(if unreadable > 0 { EXIT_ERROR } else { code })
}

type Analysed = (
    anyhow::Result<(
        tcpdoctor_core::report::CaptureSummary,
        Vec<tcpdoctor_core::report::Finding>,
    )>,
    Option<EndCapture>,
);

/// Analyses `files`, up to [`threads`] at a time, each on its own; the results in the order
/// of `files` (so the report does not depend on which finished first).
fn analyze_files(files: &[PathBuf], ends: bool) -> Vec<Analysed> {
    let one = |path: &PathBuf| {
        let mut end = ends.then(|| EndCapture::new(&path.display().to_string()));
        (analyze_file(path, end.as_mut()), end)
    };
    let workers = threads().min(files.len());
    if workers <= 1 {
        return files.iter().map(one).collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let mut done: Vec<(usize, Analysed)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some(path) = files.get(i) else {
                            return mine;
                        };
                        // One thread per file here: the files are the parallel work.
                        mine.push((i, with_threads(1, || one(path))));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    });
    done.sort_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, a)| a).collect()
}

thread_local! {
    /// Set while a worker of [`analyze_files`] runs: the threads its one file may use.
    static FILE_THREADS: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
}

fn with_threads<T>(n: usize, f: impl FnOnce() -> T) -> T {
    FILE_THREADS.with(|t| t.set(Some(n)));
    let out = f();
    FILE_THREADS.with(|t| t.set(None));
    out
}

/// Prints `report` in `format` and returns the exit code `fail_on` asks for.
pub(crate) fn emit(report: &Report, format: Format, fail_on: &[FailOn]) -> anyhow::Result<u8> {
    let text = match format {
        Format::Text => render_text(report),
        Format::Json => {
            let mut s = serde_json::to_string_pretty(report)?;
            s.push('\n');
            s
        }
    };
    output::print(&text)?;
    let failed = report.findings.iter().any(|f| {
        fail_on
            .iter()
            .any(|w| *w == FailOn::Any || *w == FailOn::Kind(f.kind))
    });
    Ok(if failed { EXIT_FOUND } else { EXIT_CLEAN })
}

/// Streams one capture through the analyzer, also handing each TCP packet to `end` when given
/// (two ends of one path are compared from what this one pass keeps: no second read).
pub(crate) fn analyze_file(
    path: &PathBuf,
    end: Option<&mut EndCapture>,
) -> anyhow::Result<(
    tcpdoctor_core::report::CaptureSummary,
    Vec<tcpdoctor_core::report::Finding>,
)> {
    analyze_file_as(path, end, None, None)
}

/// [`analyze_file`], told what the client was when tcpdoctor's own driver made the traffic
/// (`run`): findings about the client's conversation then say it is the script's.
pub(crate) fn analyze_file_as(
    path: &PathBuf,
    end: Option<&mut EndCapture>,
    client: Option<ScriptedClient>,
    ends: Option<std::sync::Arc<tcpdoctor_core::message_ends::MessageEnds>>,
) -> anyhow::Result<(
    tcpdoctor_core::report::CaptureSummary,
    Vec<tcpdoctor_core::report::Finding>,
)> {
    let name = path.display().to_string();
    let file = File::open(path).with_context(|| format!("reading {name}"))?;
    let meta = file.metadata().ok();
    let size = meta.as_ref().map_or(0, |m| m.len());
    let input = Input::new(file)
        .map_err(|cause| CaptureError::Io { offset: 0, cause })
        .with_context(|| format!("reading {name}"))?;
    let threads = FILE_THREADS.with(|t| t.get()).unwrap_or_else(threads);
    let make = |i: usize, n: usize| {
        let detectors = tcpdoctor_core::detect::with_driver(client, ends.clone());
        match n {
            1 => Analyzer::new(detectors),
            n => Analyzer::sharded(detectors, i, n),
        }
    };
    let mut progress = Progress::new(&name, size);
    // Several files at once would draw over each other's progress line.
    progress.enabled &= FILE_THREADS.with(|t| t.get()).is_none();
    let shards = shards::how_many(
        threads,
        THREADS.load(std::sync::atomic::Ordering::Relaxed) != 0,
        meta.as_ref().is_some_and(|m| m.is_file()) && !input.is_gzip() && end.is_none(),
        size,
        &make(0, 1),
    );
    let mut input = Some(input);
    let divided = if shards > 1 {
        let trace = std::env::var_os("TCPDOCTOR_TRACE_SHARDS").is_some();
        let started = Instant::now();
        if trace {
            eprintln!("tcpdoctor: {name}: flows divided among {shards} threads");
        }
        let make = |i: usize| make(i, shards);
        let (dispatcher, analyzers, (truncated, format), handed) =
            shards::run(shards, &make, |d, hook| {
                let input = input.take().expect("read once");
                let (d, truncated, format) =
                    read_capture(&name, input, 1, d, None, Some(&mut progress), hook)?;
                Ok((d, (truncated, format)))
            })?;
        progress.done();
        let read = started.elapsed();
        if analyzers.iter().any(Analyzer::shard_capped) {
            // Past the half-open cap, which attempts a full table keeps depends on all of
            // them: only one analyzer keeps the ones one analyzer keeps.
            if trace {
                eprintln!("tcpdoctor: {name}: a shard passed the half-open cap: read again");
            }
            None
        } else {
            let (summary, findings) =
                Analyzer::merge_dispatched(dispatcher, analyzers, &name, format);
            if trace {
                eprintln!(
                    "tcpdoctor: {name}: read and analysed in {:.3} s, merged in {:.3} s; \
                     {} batches, {} analysed by the reading thread as it read, which waited \
                     {} times for room; {} batches moved a shard to another thread",
                    read.as_secs_f64(),
                    (started.elapsed() - read).as_secs_f64(),
                    handed.batches,
                    handed.by_reader,
                    handed.waits,
                    handed.moved
                );
            }
            Some((summary, findings, truncated))
        }
    } else {
        None
    };
    let (mut summary, findings, truncated) = if let Some(divided) = divided {
        divided
    } else {
        let input = match input.take() {
            Some(input) => input,
            None => File::open(path)
                .and_then(Input::new)
                .map_err(|cause| CaptureError::Io { offset: 0, cause })
                .with_context(|| format!("reading {name}"))?,
        };
        let mut progress = Progress::new(&name, size);
        progress.enabled &= FILE_THREADS.with(|t| t.get()).is_none();
        let (analyzer, truncated, format) = read_capture(
            &name,
            input,
            threads,
            make(0, 1),
            end,
            Some(&mut progress),
            &mut |_| {},
        )?;
        progress.done();
        let (summary, findings) = analyzer.finish(&name, format);
        (summary, findings, truncated)
    };
    if let Some(t) = &truncated {
        eprintln!("tcpdoctor: warning: {name}: {}", t.message);
    }
    if summary.tcp_segments == 0 {
        bail!("{name}: {}", summary.no_tcp_message());
    }
    summary.truncated = truncated;
    let findings = super::audit_pass::audit_findings(path, &mut summary, findings)?;
    Ok((summary, findings))
}

/// Streams the capture `input` (named `name`) through `analyzer`, and each TCP packet through
/// `end` when given; returns the analyzer, how the file was cut short if it was, and the
/// capture's format. `threads` above 1 lets a gzip-compressed input inflate ahead;
/// `after_frame` is called after each frame (a dispatcher's hand-over: [`shards::run`]).
fn read_capture(
    name: &str,
    input: Input,
    threads: usize,
    mut analyzer: Analyzer,
    mut end: Option<&mut EndCapture>,
    mut progress: Option<&mut Progress>,
    after_frame: &mut dyn FnMut(&mut Analyzer),
) -> anyhow::Result<(Analyzer, Option<Truncation>, &'static str)> {
    let input = Source::new(input, threads)
        .map_err(|cause| CaptureError::Io { offset: 0, cause })
        .with_context(|| format!("reading {name}"))?;
    let gzip = input.is_gzip();
    let reading = || match gzip {
        true => format!("reading {name} (gzip-compressed: byte offsets count decompressed bytes)"),
        false => format!("reading {name}"),
    };
    // The reader has its own large buffer: a BufReader in between would copy every byte twice.
    let mut reader = CaptureReader::with_buffer_size(input, 4 << 20).with_context(reading)?;
    let format = reader.format().name();
    let truncated = loop {
        let frame = match reader.next_frame() {
            Ok(Some(frame)) => frame,
            Ok(None) => break None,
            // Only the end of the file is forgiven: every record before it was whole.
            Err(e) if e.is_cut_short() => {
                break Truncation::from_error(&e, reader.frames_read(), gzip)
            }
            Err(e) => return Err(e).with_context(reading),
        };
        if let Some(end) = end.as_deref_mut() {
            for decoded in decode_frame(frame.link, frame.data, frame.orig_len) {
                if let Some(seg) = decoded.tcp() {
                    end.on_segment(frame.number, frame.ts, seg);
                }
            }
        }
        analyzer.on_frame(
            frame.number,
            frame.ts,
            frame.link,
            frame.data,
            frame.orig_len,
        );
        after_frame(&mut analyzer);
        if frame.number % 65536 == 0 {
            if let Some(progress) = progress.as_deref_mut() {
                let input = reader.get_ref();
                progress.update(input.compressed_read().unwrap_or(reader.bytes_read()));
            }
        }
    };
    let truncated = truncated.or_else(|| {
        let input = reader.get_ref();
        input
            .gzip_cut_short()
            .then(|| Truncation::gzip_unfinished(reader.bytes_read(), reader.frames_read()))
    });
    Ok((analyzer, truncated, format))
}

/// A one-line progress indicator on stderr, only on a terminal and only for long runs.
struct Progress<'a> {
    name: &'a str,
    size: u64,
    started: Instant,
    last: Instant,
    shown: bool,
    enabled: bool,
}

impl<'a> Progress<'a> {
    fn new(name: &'a str, size: u64) -> Self {
        let now = Instant::now();
        Progress {
            name,
            size,
            started: now,
            last: now,
            shown: false,
            enabled: std::io::stderr().is_terminal(),
        }
    }

    fn update(&mut self, done: u64) {
        if !self.enabled || self.last.elapsed() < Duration::from_millis(250) {
            return;
        }
        if self.started.elapsed() < Duration::from_secs(1) {
            return;
        }
        self.last = Instant::now();
        self.shown = true;
        let pct = if self.size > 0 {
            100.0 * done as f64 / self.size as f64
        } else {
            0.0
        };
        let rate = done as f64 / self.started.elapsed().as_secs_f64() / 1e6;
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{}: {:5.1}% ({:.0} MB/s)  ", self.name, pct, rate);
        let _ = err.flush();
    }

    fn done(&mut self) {
        if self.shown {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}
