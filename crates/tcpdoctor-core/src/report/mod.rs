//! The report model: one value that every renderer (text, JSON, later HTML) reads.
//!
//! Renderers never compute: a detector puts both the numbers and the sentences a person reads
//! into its [`Finding`], and the renderers only lay them out.

mod bench_text;
mod census;
pub mod claims;
mod notes;
pub(crate) mod text;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::flow::Direction;
use crate::wire::CaptureError;

pub use bench_text::render_bench_text;
pub use census::{AmsduSplit, Census, Skipped, TunnelCount};
pub use claims::{Claim, NagleHold, ReleasedBy, SequentialExchange, WindowWait};
pub use notes::Note;
pub use text::render_text;

/// Bumped when a field changes meaning or disappears (adding fields does not bump it).
pub const SCHEMA_VERSION: u32 = 1;

/// Stable identifiers of finding kinds: used in JSON, `--fail-on` and the docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FindingKind {
    NagleDelayedAck,
    FragmentedWrites,
    RttBound,
    ConnectionChurn,
    ZeroWindow,
    RetransmissionStall,
    BusyPoll,
    WindowLimited,
    NagleRoundTrip,
    PoolImbalance,
    UnbatchedMessages,
}

impl FindingKind {
    pub const ALL: [FindingKind; 11] = [
        FindingKind::NagleDelayedAck,
        FindingKind::FragmentedWrites,
        FindingKind::RttBound,
        FindingKind::ConnectionChurn,
        FindingKind::ZeroWindow,
        FindingKind::RetransmissionStall,
        FindingKind::BusyPoll,
        FindingKind::WindowLimited,
        FindingKind::NagleRoundTrip,
        FindingKind::PoolImbalance,
        FindingKind::UnbatchedMessages,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::NagleDelayedAck => "nagle_delayed_ack",
            FindingKind::FragmentedWrites => "fragmented_writes",
            FindingKind::RttBound => "rtt_bound",
            FindingKind::ConnectionChurn => "connection_churn",
            FindingKind::ZeroWindow => "zero_window",
            FindingKind::RetransmissionStall => "retransmission_stall",
            FindingKind::BusyPoll => "busy_poll",
            FindingKind::WindowLimited => "window_limited",
            FindingKind::NagleRoundTrip => "nagle_round_trip",
            FindingKind::PoolImbalance => "pool_imbalance",
            FindingKind::UnbatchedMessages => "unbatched_messages",
        }
    }

    pub fn parse(name: &str) -> Option<FindingKind> {
        Self::ALL.into_iter().find(|k| k.as_str() == name)
    }
}

impl std::fmt::Display for FindingKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// Summary statistics of a set of values (milliseconds, counts, bytes — the key says which).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Distribution {
    pub count: u64,
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

/// One bar of a histogram: `count` values equal to (or in the bucket named by) `value`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bucket {
    pub value: String,
    pub count: u64,
}

/// One line of an example timeline, as a person would read it next to Wireshark.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineEntry {
    /// Wireshark `frame.number`.
    pub frame: u64,
    /// Milliseconds since the first entry of this timeline.
    pub t_ms: f64,
    pub direction: Direction,
    /// What the packet is ("14 bytes", "pure ACK, acknowledges all data", …).
    pub what: String,
    /// Payload bytes of this one packet, 0 for a pure ACK; unset when the line stands for
    /// several packets (a whole request) or the detector does not say. Charts draw data and
    /// ACKs apart from it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payload_bytes: Option<u64>,
    /// Why it matters, if it does ("held ~40 ms by Nagle, released by the ACK above").
    #[serde(skip_serializing_if = "String::is_empty")]
    pub note: String,
}

/// The evidence behind a finding: numbers for machines, sentences for people.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Evidence {
    /// Sentences, most important first.
    pub facts: Vec<String>,
    pub counts: BTreeMap<String, u64>,
    /// Named values; the key ends in its unit (`_ms`, `_bytes`, `_share`).
    pub values: BTreeMap<String, f64>,
    pub distributions: BTreeMap<String, Distribution>,
    /// A histogram (e.g. payload sizes, the `uniq -c` of chunk sizes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub histogram: Vec<Bucket>,
    /// What `histogram` counts.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub histogram_of: String,
    /// Frame numbers of one example, to open in Wireshark.
    pub frames: Vec<u64>,
    pub timeline: Vec<TimelineEntry>,
    /// What the example's frames must show for the finding to stand (checked by the audit).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<Claim>,
    /// What the finding rests on when it is not only the packets of a kernel capture: the
    /// counters it read and how (process CPU from /proc), or a proxy's recording with what in
    /// it was observed and what modelled. Empty for a finding from a capture alone.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rests_on: Vec<String>,
    /// The traced program's write-family calls whose bytes the example's frames carried
    /// (`run` traces the programs it starts; see [`crate::syscalls::cite`]). Empty when the
    /// program was not traced.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<WriteMark>,
}

/// One system call that wrote bytes, placed on the finding's timeline above the frames that
/// carried them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WriteMark {
    /// strace's name: `write`, `writev`, `sendto`, `sendmsg`, …
    pub call: String,
    /// #k: 1-based over the calls that wrote bytes on that socket.
    pub index: u32,
    /// Bytes the call wrote (its result).
    pub bytes: u64,
    /// The call's entry, in milliseconds since the timeline's first entry (the tracer's
    /// clock set against the capture's: negative when the call came before that packet).
    pub t_ms: f64,
    /// Which way its bytes went.
    pub direction: Direction,
    /// Frames that carried its bytes for the first time (Wireshark `frame.number`).
    pub frames: Vec<u64>,
}

/// A flow, by its endpoints and its position in the capture.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowRef {
    /// 1-based, in order of first appearance in the capture.
    pub id: u64,
    pub client: String,
    pub server: String,
}

/// One diagnosis.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    pub kind: FindingKind,
    pub severity: Severity,
    /// The capture it was found in.
    pub file: String,
    /// The server endpoint of the affected flows (the group).
    pub server: String,
    /// Which way the affected data moved.
    pub direction: Direction,
    /// Flows of this server that show it, and flows of this server in the capture.
    pub flows_affected: u64,
    pub flows_total: u64,
    pub example_flow: FlowRef,
    /// One line a developer understands.
    pub verdict: String,
    /// Time the pathology cost, as far as the capture shows it.
    pub time_lost_ms: f64,
    pub evidence: Evidence,
    /// The concrete fix, best first.
    pub fix: String,
}

/// A capture that ends inside a record (tcpdump killed mid-write, a copy cut short): every
/// complete record before it was analysed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Truncation {
    /// Where the incomplete record starts: a byte offset in the file, or in the decompressed
    /// data when `decompressed` is set.
    pub at_byte: u64,
    pub decompressed: bool,
    /// Complete frames before it (Wireshark numbers them 1 to this).
    pub frames_before: u64,
    /// The one line people read, as the warning on stderr and in the text report.
    pub message: String,
}

impl Truncation {
    /// From the error [`CaptureReader::next_frame`](crate::wire::CaptureReader::next_frame)
    /// ended with, if it is a capture cut short ([`CaptureError::is_cut_short`]); `None` for
    /// any other error, which stays an error.
    pub fn from_error(
        err: &CaptureError,
        frames_before: u64,
        decompressed: bool,
    ) -> Option<Truncation> {
        let CaptureError::Truncated {
            what,
            offset,
            needed,
            available,
        } = *err
        else {
            return None;
        };
        let of = if decompressed {
            " of the decompressed data"
        } else {
            ""
        };
        Some(Truncation {
            at_byte: offset,
            decompressed,
            frames_before,
            message: format!(
                "capture ends mid-record at byte {offset}{of} (the {what} there needs {needed} \
                 bytes, {available} left); analysed the {} before it",
                complete_frames(frames_before)
            ),
        })
    }

    /// A gzip stream that stops before its end although the capture inside ends between two
    /// records (typically only the 8-byte gzip trailer is missing): nothing was lost that the
    /// reader can see, but the data is unverified and the file was probably cut.
    pub fn gzip_unfinished(decompressed_len: u64, frames_before: u64) -> Truncation {
        Truncation {
            at_byte: decompressed_len,
            decompressed: true,
            frames_before,
            message: format!(
                "the gzip data ends early, after {decompressed_len} decompressed bytes, between \
                 two records (its checksum is missing); analysed the {} before it",
                complete_frames(frames_before)
            ),
        }
    }
}

fn complete_frames(n: u64) -> String {
    match n {
        0 => "0 complete frames".to_string(),
        1 => "1 complete frame".to_string(),
        n => format!("{} complete frames", crate::units::fmt_count(n)),
    }
}

/// One server endpoint in a capture.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerSummary {
    pub server: String,
    pub flows: u64,
    pub exchanges: u64,
    pub bytes_to_server: u64,
    pub bytes_to_client: u64,
    /// Exchange latency at the capture point (first request byte to last response byte).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exchange_latency_ms: Option<Distribution>,
    /// Path RTT at the capture point (median over flows that showed it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rtt_ms: Option<f64>,
}

/// What one capture file held.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CaptureSummary {
    pub file: String,
    pub format: String,
    pub link_types: Vec<String>,
    pub frames: u64,
    pub tcp_segments: u64,
    pub skipped: Skipped,
    /// The tunnels TCP was found in (or that held none), in a fixed order; empty for a
    /// capture without any.
    pub tunnels: Vec<TunnelCount>,
    /// The 802.11 A-MSDUs split into their subframes; absent when the capture has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amsdu: Option<AmsduSplit>,
    pub flows: u64,
    pub exchanges: u64,
    /// From the earliest to the latest timestamp, in whatever order the file holds them.
    pub duration_ms: f64,
    /// Set when timestamps went backwards (a clock step, files merged end to end).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_steps_back: Option<TimeStepsBack>,
    /// Half-open connection attempts (a SYN, perhaps its SYN-ACK, nothing more) evicted
    /// beyond the cap of [`crate::analysis::MAX_HALF_OPEN`] kept at once: not analysed.
    #[serde(skip_serializing_if = "is_zero")]
    pub half_open_untracked: u64,
    /// Busiest servers first; at most [`MAX_SERVERS_LISTED`].
    pub servers: Vec<ServerSummary>,
    /// Servers not listed in `servers`.
    pub servers_omitted: u64,
    /// Set when the file ends inside a record; null for a complete file.
    pub truncated: Option<Truncation>,
    /// What the evidence audit checked in this capture; absent when it did not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditSummary>,
    /// Findings of this capture that failed the audit; [`Report::new`] moves them to
    /// [`Report::withdrawn`], so they are serialized there and only there.
    #[serde(skip)]
    pub withdrawn: Vec<Withdrawn>,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Timestamps that went backwards in a capture.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TimeStepsBack {
    /// Frames whose timestamp is earlier than the frame's before them.
    pub count: u64,
    /// The largest such step.
    pub largest_ms: f64,
    /// The frame that largest step landed on.
    pub largest_at_frame: u64,
}

/// What the evidence audit did with one capture's findings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct AuditSummary {
    /// Findings audited (kept and withdrawn).
    pub findings: u64,
    pub withdrawn: u64,
    /// Claims (`evidence.claims`) of the kept findings, each checked and true.
    pub claims_passed: u64,
    /// Claims of kept findings the audit could not check in full (a frame its decoder cannot
    /// read, such as an offload frame with IP length 0, or an MSS whose SYNs were not
    /// captured): not refuted, not confirmed.
    pub claims_unverified: u64,
    /// Frames read again for the audit.
    pub frames_read: u64,
}

/// A finding the evidence audit refuted: what it said, and why it does not stand.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Withdrawn {
    pub kind: FindingKind,
    pub server: String,
    pub direction: Direction,
    pub file: String,
    pub verdict: String,
    /// Each failed check, naming its frames.
    pub reasons: Vec<String>,
}

pub const MAX_SERVERS_LISTED: usize = 20;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
}

impl ToolInfo {
    /// This build of tcpdoctor.
    pub fn current() -> ToolInfo {
        ToolInfo {
            name: "tcpdoctor".into(),
            version: env!("CARGO_PKG_VERSION").into(),
        }
    }
}

/// The whole report of one `analyze` run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub tool: ToolInfo,
    pub captures: Vec<CaptureSummary>,
    /// Most costly first.
    pub findings: Vec<Finding>,
    /// Findings the evidence audit refuted: not findings, listed so that nobody loses them.
    pub withdrawn: Vec<Withdrawn>,
    /// With `analyze --ends`: what the two files show together as two ends of one path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ends: Option<crate::ends::EndsReport>,
    /// `sandbox`: the system calls of the programs it ran (docs/syscalls.md).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub syscalls: Vec<ProgramCalls>,
}

/// One traced program of a `sandbox`: its role and what its calls show.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProgramCalls {
    /// "command", "client" or "server".
    pub program: String,
    pub calls: crate::syscalls::SyscallsReport,
}

impl Report {
    pub fn new(mut captures: Vec<CaptureSummary>, mut findings: Vec<Finding>) -> Report {
        let withdrawn = captures
            .iter_mut()
            .flat_map(|c| std::mem::take(&mut c.withdrawn))
            .collect();
        findings.sort_by(|a, b| {
            b.severity
                .cmp(&a.severity)
                .then(b.time_lost_ms.total_cmp(&a.time_lost_ms))
                .then(a.kind.cmp(&b.kind))
        });
        Report {
            schema_version: SCHEMA_VERSION,
            tool: ToolInfo::current(),
            captures,
            findings,
            withdrawn,
            ends: None,
            syscalls: Vec::new(),
        }
    }
}
