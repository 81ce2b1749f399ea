//! The evidence audit: re-decode the frames a finding cites and check what it claims about
//! them, from the packets alone.
//!
//! A finding is a claim about traffic; its evidence names frames a person can open in
//! Wireshark. The audit reads those frames again with its own decoder ([`decode`], sharing no
//! code with `wire::`, the flow tracker or the detectors) and its own constants, so a bug in
//! the analysis cannot vouch for itself. A finding that fails is withdrawn, not shown.
//!
//! # Rules
//! 1. Every frame in `evidence.frames`, the timeline and the claims exists in the capture and
//!    is a TCP segment between the example flow's client and server.
//! 2. A timeline entry's direction is the segment's (the client is `example_flow.client`); an
//!    entry with `payload_bytes` carries exactly that much TCP payload; the entries' `t_ms`
//!    differences equal the frames' timestamp differences within [`TIME_TOLERANCE_MS`].
//! 3. A `nagle_hold` claim holds frame by frame (see `nagle.rs`): the data before and after the
//!    pause, nothing from the sender between them, a pure ACK that is the first to cover the
//!    held data, a segment below the full size, the MSS from the SYNs, the round trips from
//!    their frame pairs, and a hold and release that fit a delayed-ACK timer or one round trip.
//! 4. A `sequential_exchange` claim holds frame by frame (see `sequential.rs`): a request from
//!    the client, then its response, that took at least the round trip towards the server
//!    measured between the frames it names, after a silence of at least the round trip towards
//!    the client since the previous response; each round trip from a segment (not a
//!    retransmission) and the first answer acknowledging it (`round_trip.rs`).
//! 5. A `window_wait` claim holds frame by frame (see `window.rs`): a flight of at least four
//!    small data segments, exactly as many and as large as claimed, nothing from the sender
//!    until the data after the pause, and an ACK of some of the flight before that data.
//! 6. Arithmetic: the time lost is at most `flows_affected` × the capture's duration; what
//!    pipelining would save is at most the wall time measured.
//!
//! # What the audit cannot read
//! A frame of the flow (cited, or inside a range a claim scans) that the audit's decoder cannot
//! read — cut short, an IP length of 0 as segmentation offload (TSO/GSO, BIG TCP) captures
//! show, too many IPv6 extension headers, two segments of the flow in one frame (an 802.11
//! A-MSDU's subframes: the frame number does not say which is meant) — or an IP first
//! fragment, whose payload length is that fragment's only, withdraws nothing: the claims resting on it are *unverifiable*. The
//! finding stands, the claim is not counted in `claims_passed`, and [`Verdict::notes`] says
//! why. The audit never passes a claim it could not check in full.

mod decode;
mod nagle;
mod round_trip;
mod sequential;
#[cfg(test)]
mod sequential_tests;
#[cfg(test)]
mod tests;
mod window;

use std::collections::BTreeMap;
use std::io::Read;
use std::net::SocketAddr;
use std::time::Duration;

use crate::flow::Direction;
use crate::report::{AuditSummary, CaptureSummary, Claim, Finding, FindingKind, Withdrawn};
use crate::time::Timestamp;
use crate::wire::{CaptureError, CaptureReader};

use decode::{NotSegment, Segment};

/// How closely a timeline's relative times must match the frames' timestamps.
pub const TIME_TOLERANCE_MS: f64 = 0.01;

/// The outcome of auditing one finding.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Verdict {
    /// Claims (in `evidence.claims`) checked and found true.
    pub claims_passed: u64,
    /// What did not hold, each naming its frames; empty when the finding stands.
    pub failures: Vec<String>,
    /// What could not be checked (a frame the audit cannot decode, a bound with nothing to
    /// check it against): the finding stands, but the claims these name are not counted in
    /// `claims_passed`.
    pub notes: Vec<String>,
}

impl Verdict {
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }
}

/// A frame the audit needed, as it found it.
#[derive(Clone, Debug)]
struct Seen {
    ts: Timestamp,
    seg: Result<Segment, NotSegment>,
}

/// The audit of one finding: the frames it cites and the ranges it must scan.
#[derive(Debug)]
struct Job {
    /// Client and server of the example flow; `Err` when they do not parse.
    ends: Result<(SocketAddr, SocketAddr), String>,
    /// Sorted, deduplicated.
    cited: Vec<u64>,
    /// Inclusive frame ranges whose segments of this flow must all be seen.
    ranges: Vec<(u64, u64)>,
    seen: BTreeMap<u64, Seen>,
}

impl Job {
    fn needs(&self, n: u64) -> bool {
        self.cited.binary_search(&n).is_ok() || self.ranges.iter().any(|&(a, b)| a <= n && n <= b)
    }
}

/// Streams the frames a set of findings cites and checks the findings against them.
///
/// Feed it every frame of the capture the findings came from (or only those [`wants`]
/// accepts), in order, then call [`finish`].
///
/// [`wants`]: Auditor::wants
/// [`finish`]: Auditor::finish
#[derive(Debug)]
pub struct Auditor {
    findings: Vec<Finding>,
    duration: Duration,
    jobs: Vec<Job>,
    /// Merged, sorted inclusive ranges of every frame any job needs.
    wanted: Vec<(u64, u64)>,
}

impl Auditor {
    /// An audit of `findings`, found in a capture spanning `duration`.
    pub fn new(findings: &[Finding], duration: Duration) -> Auditor {
        let jobs: Vec<Job> = findings.iter().map(job).collect();
        let mut all: Vec<(u64, u64)> = jobs
            .iter()
            .flat_map(|j| {
                j.cited
                    .iter()
                    .map(|&n| (n, n))
                    .chain(j.ranges.iter().copied())
            })
            .collect();
        all.sort_unstable();
        let mut wanted: Vec<(u64, u64)> = Vec::new();
        for (a, b) in all {
            match wanted.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => wanted.push((a, b)),
            }
        }
        Auditor {
            findings: findings.to_vec(),
            duration,
            jobs,
            wanted,
        }
    }

    /// Whether frame `number` is needed (a binary search over merged ranges).
    pub fn wants(&self, number: u64) -> bool {
        let i = self.wanted.partition_point(|&(_, end)| end < number);
        self.wanted
            .get(i)
            .is_some_and(|&(start, _)| start <= number)
    }

    /// The last frame needed; reading can stop after it. `None` when nothing is cited.
    pub fn last_wanted(&self) -> Option<u64> {
        self.wanted.last().map(|&(_, end)| end)
    }

    /// One frame of the capture: its Wireshark number, time and captured bytes.
    pub fn on_frame(&mut self, number: u64, ts: Timestamp, data: &[u8]) {
        if !self.wants(number) {
            return;
        }
        for job in &mut self.jobs {
            let Ok((client, server)) = job.ends else {
                continue;
            };
            if !job.needs(number) {
                continue;
            }
            let seg = decode::decode(data, client, server);
            let cited = job.cited.binary_search(&number).is_ok();
            if cited || !matches!(seg, Err(NotSegment::Elsewhere)) {
                job.seen.insert(number, Seen { ts, seg });
            }
        }
    }

    /// Reads the capture the findings came from (a second pass over it) and hands over the
    /// frames wanted, stopping after the last one. Returns how many frames were handed over.
    /// A file cut short mid-record ends the pass without error: the analysis pass already
    /// warned, and the frames before the cut were read.
    pub fn read_capture<R: Read>(
        &mut self,
        reader: &mut CaptureReader<R>,
    ) -> Result<u64, CaptureError> {
        let Some(last) = self.last_wanted() else {
            return Ok(0);
        };
        let mut frames_read = 0;
        loop {
            let frame = match reader.next_frame() {
                Ok(Some(frame)) => frame,
                Ok(None) => break,
                Err(e) if e.is_cut_short() => break,
                Err(e) => return Err(e),
            };
            if frame.number > last {
                break;
            }
            if self.wants(frame.number) {
                frames_read += 1;
                self.on_frame(frame.number, frame.ts, frame.data);
            }
        }
        Ok(frames_read)
    }

    /// One verdict per finding, in the order given to [`Auditor::new`].
    pub fn finish(self) -> Vec<Verdict> {
        self.findings
            .iter()
            .zip(&self.jobs)
            .map(|(f, j)| check(f, j, self.duration))
            .collect()
    }
}

/// Keeps the findings whose verdict is ok and moves the others to `summary.withdrawn`, with
/// what the audit did in `summary.audit`. `verdicts` are [`Auditor::finish`]'s, in order.
pub fn settle(
    summary: &mut CaptureSummary,
    findings: Vec<Finding>,
    verdicts: Vec<Verdict>,
    frames_read: u64,
) -> Vec<Finding> {
    let mut audit = AuditSummary {
        findings: findings.len() as u64,
        frames_read,
        ..AuditSummary::default()
    };
    let mut kept = Vec::new();
    for (f, v) in findings.into_iter().zip(verdicts) {
        if v.ok() {
            audit.claims_passed += v.claims_passed;
            let stated = f.evidence.claims.len() as u64;
            audit.claims_unverified += stated.saturating_sub(v.claims_passed);
            kept.push(f);
        } else {
            audit.withdrawn += 1;
            summary.withdrawn.push(Withdrawn {
                kind: f.kind,
                server: f.server,
                direction: f.direction,
                file: f.file,
                verdict: f.verdict,
                reasons: v.failures,
            });
        }
    }
    summary.audit = Some(audit);
    kept
}

/// Every frame a finding cites, and the ranges its claims need scanned.
fn job(f: &Finding) -> Job {
    let ends = parse_end(&f.example_flow.client).and_then(|c| {
        let s = parse_end(&f.example_flow.server)?;
        if c == s {
            return Err(format!("example flow: client and server are both {c}"));
        }
        Ok((c, s))
    });
    let mut cited: Vec<u64> = f.evidence.frames.clone();
    cited.extend(f.evidence.timeline.iter().map(|t| t.frame));
    let mut ranges = Vec::new();
    for claim in &f.evidence.claims {
        match claim {
            Claim::NagleHold(h) => {
                cited.extend(nagle::frames(h));
                ranges.extend(nagle::ranges(h));
            }
            Claim::SequentialExchange(c) => {
                cited.extend(sequential::cited(c));
                ranges.extend(sequential::ranges(c));
            }
            Claim::WindowWait(w) => {
                cited.extend(window::cited(w));
                ranges.extend(window::ranges(w));
            }
        }
    }
    cited.sort_unstable();
    cited.dedup();
    Job {
        ends,
        cited,
        ranges,
        seen: BTreeMap::new(),
    }
}

fn parse_end(s: &str) -> Result<SocketAddr, String> {
    s.parse()
        .map_err(|_| format!("example flow endpoint `{s}` is not an ip:port"))
}

/// The decoded frames of one job, for the checks.
pub(crate) struct Frames<'a> {
    seen: &'a BTreeMap<u64, Seen>,
}

impl Frames<'_> {
    /// The segment in frame `n` with its time, if it decoded (rule 1 reports it otherwise).
    fn get(&self, n: u64) -> Option<(Timestamp, Segment)> {
        let s = self.seen.get(&n)?;
        s.seg.as_ref().ok().map(|seg| (s.ts, *seg))
    }

    /// Why frame `n` (of the flow, or cited) cannot be used: it does not decode, or it is an IP
    /// fragment whose payload length counts that fragment only.
    fn unusable(&self, n: u64) -> Option<String> {
        match &self.seen.get(&n)?.seg {
            Err(NotSegment::Bad(why)) => Some(format!("frame {n} does not decode: {why}")),
            Ok(s) if s.fragment => Some(format!(
                "frame {n} is an IP fragment: its TCP payload length is unknown"
            )),
            _ => None,
        }
    }

    /// Every frame in `from..=to` that the flow may own and that cannot be used, with why.
    fn unusable_in(&self, from: u64, to: u64) -> Vec<(u64, String)> {
        if from > to {
            return Vec::new();
        }
        self.seen
            .range(from..=to)
            .filter_map(|(&n, _)| self.unusable(n).map(|why| (n, why)))
            .collect()
    }

    /// The flow's segments in frames `from..=to`, in order (none when `from > to`).
    fn range(&self, from: u64, to: u64) -> impl Iterator<Item = (u64, Segment)> + '_ {
        self.seen
            .range(from..=to.max(from))
            .filter(move |_| from <= to)
            .filter_map(|(&n, s)| s.seg.as_ref().ok().map(|seg| (n, *seg)))
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Signed milliseconds from `a` to `b`.
fn ms_between(a: Timestamp, b: Timestamp) -> f64 {
    (b.as_nanos() as f64 - a.as_nanos() as f64) / 1e6
}

fn check(f: &Finding, job: &Job, duration: Duration) -> Verdict {
    let mut v = Verdict::default();
    let (client, server) = match &job.ends {
        Ok(e) => *e,
        Err(why) => {
            v.failures.push(why.clone());
            return v;
        }
    };
    // Rule 1.
    for &n in &job.cited {
        match job.seen.get(&n).map(|s| &s.seg) {
            None => v.failures.push(format!("frame {n} is not in the capture")),
            Some(Err(NotSegment::Elsewhere)) => v.failures.push(format!(
                "frame {n} is not a TCP segment between {client} and {server}"
            )),
            // The audit's own limits withdraw nothing: the claims resting on this frame are
            // unverifiable (see `nagle::check`).
            Some(Err(NotSegment::Bad(why))) => {
                v.notes.push(format!("frame {n} does not decode: {why}"))
            }
            Some(Ok(_)) => {}
        }
    }
    let frames = Frames { seen: &job.seen };
    timeline(f, &frames, &mut v.failures);
    for claim in &f.evidence.claims {
        let before = v.failures.len();
        let mut unsure = Vec::new();
        match claim {
            Claim::NagleHold(h) => {
                nagle::check(h, client, server, &frames, &mut v.failures, &mut unsure)
            }
            Claim::SequentialExchange(c) => {
                sequential::check(c, &frames, &mut v.failures, &mut unsure)
            }
            Claim::WindowWait(w) => {
                window::check(w, client.is_ipv4(), &frames, &mut v.failures, &mut unsure)
            }
        }
        if v.failures.len() != before {
            continue;
        }
        if unsure.is_empty() {
            v.claims_passed += 1;
        } else {
            v.notes.push(format!(
                "{} claim unverifiable: {}",
                claim_name(claim),
                unsure.join("; ")
            ));
        }
    }
    arithmetic(f, duration, &mut v.failures);
    v
}

fn claim_name(c: &Claim) -> &'static str {
    match c {
        Claim::NagleHold(_) => "nagle_hold",
        Claim::SequentialExchange(_) => "sequential_exchange",
        Claim::WindowWait(_) => "window_wait",
    }
}

/// Rule 2.
fn timeline(f: &Finding, frames: &Frames, out: &mut Vec<String>) {
    let mut origin: Option<(f64, Timestamp, u64)> = None;
    for e in &f.evidence.timeline {
        let Some((ts, seg)) = frames.get(e.frame) else {
            continue;
        };
        let n = e.frame;
        let from_client = e.direction == Direction::ClientToServer;
        if seg.from_a != from_client {
            out.push(format!(
                "timeline: frame {n} does not travel {:?}",
                e.direction
            ));
        }
        if let Some(p) = e.payload_bytes.filter(|_| !seg.fragment) {
            if u64::from(seg.payload) != p {
                out.push(format!(
                    "timeline: frame {n} carries {} payload bytes, not {p}",
                    seg.payload
                ));
            }
        }
        match origin {
            None => origin = Some((e.t_ms, ts, n)),
            Some((t0, ts0, n0)) => {
                let said = e.t_ms - t0;
                let seen = ms_between(ts0, ts);
                if (said - seen).abs() > TIME_TOLERANCE_MS {
                    out.push(format!(
                        "timeline: frame {n} is {seen:.3} ms after frame {n0}, not {said:.3} ms"
                    ));
                }
            }
        }
    }
}

/// Rule 6.
fn arithmetic(f: &Finding, duration: Duration, out: &mut Vec<String>) {
    let bound = f.flows_affected as f64 * ms(duration);
    // Reports round to the microsecond.
    if f.time_lost_ms > bound + 0.001 {
        out.push(format!(
            "time lost {:.3} ms exceeds {} flow(s) × the capture's {:.3} ms",
            f.time_lost_ms,
            f.flows_affected,
            ms(duration)
        ));
    }
    if f.kind == FindingKind::RttBound {
        let values = &f.evidence.values;
        if let (Some(save), Some(wall)) = (values.get("pipelining_saves_ms"), values.get("wall_ms"))
        {
            if save > wall {
                out.push(format!(
                    "pipelining would save {save:.3} ms of a wall time of only {wall:.3} ms"
                ));
            }
        }
    }
}
