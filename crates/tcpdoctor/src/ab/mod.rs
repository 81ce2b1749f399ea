//! `tcpdoctor ab`'s runs: each side's command or server run once per slot, watched for
//! hangs (`watch`), and what their traffic shows (`why`).

pub mod command;
pub mod server;
pub mod stream;
pub mod tree;
mod watch;
pub mod why;

use std::collections::BTreeMap;

use tcpdoctor_core::ab::{Brief, Outcome};

/// One analysed run's findings and counts, for the side-by-side "why".
#[derive(Clone, Debug)]
pub struct WhyRun {
    /// The scenario (server mode); `None` for a command's traffic.
    pub scenario: Option<String>,
    pub source: String,
    pub findings: Vec<Brief>,
    pub flows: u64,
    /// The driver's requests (server mode) or the analysis's turns (command mode).
    pub exchanges: u64,
    pub tcp_segments: u64,
}

/// What one run gave.
#[derive(Clone, Debug)]
pub struct RunResult {
    pub outcome: Outcome,
    pub wall_s: f64,
    pub figures: BTreeMap<String, f64>,
    /// Its traffic analysed, when the run captured it (server mode: each scenario).
    pub why: Vec<WhyRun>,
    /// Processes it left running after it ended (stopped by `ab`).
    pub leftovers: Vec<String>,
}
