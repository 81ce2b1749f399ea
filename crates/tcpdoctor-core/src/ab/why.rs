//! Why one side is slower: the findings of each side's analysed traffic, side by side, and
//! what differs between them.
//!
//! What is named as a difference:
//! 1. A finding kind seen on one side only (in any analysed run), with its verdict, the time
//!    it lost and the frames of one example.
//! 2. A kind seen on both sides whose time lost per analysed run differs by [`TIME_FACTOR`]×
//!    or more.
//! 3. TCP segments (all of them, ACKs included) per request — per turn where the requests
//!    are not known (a benchmark command's traffic) — differing by [`SEGMENTS_FACTOR`]× or
//!    more: the same work in more packets (writes split, messages unbatched).

use serde::{Deserialize, Serialize};

use super::Side;
use crate::report::Finding;

/// Time lost per run this many times the other side's is named.
pub const TIME_FACTOR: f64 = 2.0;
/// Segments per request (or turn) this many times the other side's are named.
pub const SEGMENTS_FACTOR: f64 = 1.25;

/// What `ab` keeps of one finding (from an analysis in this process, or a `run` report's
/// JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Brief {
    pub kind: String,
    pub verdict: String,
    pub time_lost_ms: f64,
    #[serde(default)]
    pub frames: Vec<u64>,
    pub file: String,
    pub fix: String,
}

impl Brief {
    pub fn of(f: &Finding) -> Brief {
        Brief {
            kind: f.kind.as_str().to_string(),
            verdict: f.verdict.clone(),
            time_lost_ms: f.time_lost_ms,
            frames: f.evidence.frames.clone(),
            file: f.file.clone(),
            fix: f.fix.clone(),
        }
    }
}

/// One kind of finding on one side.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KindSeen {
    pub kind: String,
    /// Analysed runs it was found in.
    pub runs: u32,
    /// Summed over those runs.
    pub time_lost_ms: f64,
    /// One example: its verdict, frames and file.
    pub verdict: String,
    pub frames: Vec<u64>,
    pub file: String,
    pub fix: String,
}

/// What one side's analysed runs showed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SideFindings {
    pub side: Side,
    pub runs_analysed: u32,
    /// The captures (or run directories) the findings come from.
    pub sources: Vec<String>,
    pub kinds: Vec<KindSeen>,
    pub flows: u64,
    /// Requests the driver made (`per` = `request`), or turns the analysis saw (`turn`).
    pub exchanges: u64,
    pub per: String,
    pub tcp_segments: u64,
}

impl SideFindings {
    /// `per`: `request` when the exchanges are the driver's requests, `turn` when they are
    /// the turns the analysis found.
    pub fn new(side: Side, per: &str) -> SideFindings {
        SideFindings {
            per: per.to_string(),
            side,
            runs_analysed: 0,
            sources: Vec::new(),
            kinds: Vec::new(),
            flows: 0,
            exchanges: 0,
            tcp_segments: 0,
        }
    }

    /// Adds one analysed run: its findings and its traffic's counts.
    pub fn add(
        &mut self,
        source: &str,
        findings: &[Brief],
        flows: u64,
        exchanges: u64,
        tcp_segments: u64,
    ) {
        self.runs_analysed += 1;
        self.sources.push(source.to_string());
        self.flows += flows;
        self.exchanges += exchanges;
        self.tcp_segments += tcp_segments;
        let mut seen_here: Vec<&str> = Vec::new();
        for f in findings {
            let kind = f.kind.as_str();
            match self.kinds.iter_mut().find(|k| k.kind == kind) {
                Some(k) => {
                    k.time_lost_ms += f.time_lost_ms;
                    if !seen_here.contains(&kind) {
                        k.runs += 1;
                    }
                }
                None => self.kinds.push(KindSeen {
                    kind: kind.to_string(),
                    runs: 1,
                    time_lost_ms: f.time_lost_ms,
                    verdict: f.verdict.clone(),
                    frames: f.frames.iter().take(8).copied().collect(),
                    file: f.file.clone(),
                    fix: f.fix.clone(),
                }),
            }
            seen_here.push(kind);
        }
    }

    /// TCP segments per request (or turn), when any were seen.
    pub fn segments_per_exchange(&self) -> Option<f64> {
        (self.exchanges > 0).then(|| self.tcp_segments as f64 / self.exchanges as f64)
    }

    fn per_run_ms(&self, k: &KindSeen) -> f64 {
        k.time_lost_ms / f64::from(self.runs_analysed.max(1))
    }
}

/// Both sides and what differs, for one scenario (server mode) or the command's traffic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Why {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scenario: Option<String>,
    pub a: SideFindings,
    pub b: SideFindings,
    pub differences: Vec<String>,
}

impl Why {
    pub fn of(scenario: Option<String>, a: SideFindings, b: SideFindings) -> Why {
        let differences = differences(&a, &b);
        Why {
            scenario,
            a,
            b,
            differences,
        }
    }
}

fn frames_text(k: &KindSeen) -> String {
    if k.frames.is_empty() {
        return format!("in {}", k.file);
    }
    let list: Vec<String> = k.frames.iter().map(u64::to_string).collect();
    format!("frames {} of {}", list.join(", "), k.file)
}

/// The differences between the two sides' analysed runs (empty: none the rules name).
pub fn differences(a: &SideFindings, b: &SideFindings) -> Vec<String> {
    let mut out = Vec::new();
    // A side with no analysed run cannot differ from the other in anything the rules see.
    if a.runs_analysed == 0 || b.runs_analysed == 0 {
        return out;
    }
    for (this, other) in [(a, b), (b, a)] {
        for k in &this.kinds {
            if other.kinds.iter().any(|o| o.kind == k.kind) {
                continue;
            }
            out.push(format!(
                "{} in {} only ({} of {} analysed runs, {} ms lost over them): {} — {}",
                k.kind,
                this.side.letter(),
                k.runs,
                this.runs_analysed,
                crate::numfmt::num(k.time_lost_ms),
                k.verdict,
                frames_text(k)
            ));
        }
    }
    for ka in &a.kinds {
        let Some(kb) = b.kinds.iter().find(|k| k.kind == ka.kind) else {
            continue;
        };
        let (ta, tb) = (a.per_run_ms(ka), b.per_run_ms(kb));
        let (more, less, more_side, k) = if tb >= ta {
            (tb, ta, Side::B, kb)
        } else {
            (ta, tb, Side::A, ka)
        };
        if more > 0.0 && (less <= 0.0 || more / less >= TIME_FACTOR) {
            out.push(format!(
                "{} on both sides; {} loses {} ms per analysed run to it, the other {} ms: {}",
                ka.kind,
                more_side.letter(),
                crate::numfmt::num(more),
                crate::numfmt::num(less),
                frames_text(k)
            ));
        }
    }
    if let (Some(sa), Some(sb)) = (a.segments_per_exchange(), b.segments_per_exchange()) {
        let ratio_apart = sb / sa >= SEGMENTS_FACTOR || sa / sb >= SEGMENTS_FACTOR;
        if sa > 0.0 && sb > 0.0 && a.per == b.per && ratio_apart {
            let (more, m, l) = if sb > sa {
                ("B", sb, sa)
            } else {
                ("A", sa, sb)
            };
            out.push(format!(
                "{more} sends {:.2}× the TCP segments per {} ({:.1} against {:.1}; all \
                 segments, ACKs included)",
                m / l,
                a.per,
                m,
                l
            ));
        }
    }
    out
}
