//! `tcpdoctor run` and `tcpdoctor demo`: the investigation in one command — start the target,
//! drive it through each scenario, capture, diagnose, compare, gate.
//!
//! The numbers and sentences are the core's (`tcpdoctor_core::run`); this module starts
//! processes, proxies and captures, and reads clocks and /proc.
//!
//! # Layout
//! - `mod.rs`: the plan shared by every scenario, and where files go.
//! - `scenario.rs`: one scenario end to end (hop, capture, driver, CPU, diagnosis).
//! - `baseline.rs`: `--baseline`: a saved report read back, checked and compared.
//! - `server.rs`: the server process: start, ready, CPU from /proc, stop.
//! - `cpu_sampler.rs`: the server's CPU every millisecond along the driver's timeline.
//! - `reaper.rs`: what the server started, daemons included: found through /proc, stopped.
//! - `live.rs`: a live capture on `lo` for one scenario.
//! - `demo.rs`: the built-in pathologies and their fixes.

pub mod baseline;
pub mod cpu_sampler;
pub mod demo;
pub mod far;
pub mod live;
pub mod reaper;
pub mod scenario;
pub mod server;
pub mod server_proc;
pub mod sockets;
pub mod syscalls;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tcpdoctor_core::script::Script;

/// What every scenario of one run shares.
pub struct Plan {
    /// TCP, or a Unix socket: then direct scenarios have no packets to capture, and a hop
    /// listens on TCP and forwards to the socket.
    pub target: crate::proxy::Addr,
    pub script: Arc<Script>,
    pub requests: u64,
    /// Runs per scenario, one after another; the figures pool them.
    pub repeat: u64,
    pub connections: u64,
    pub timeout: Duration,
    /// Where captures and logs go.
    pub out_dir: PathBuf,
    /// Why direct scenarios have no capture, when live capture is unavailable (a Unix target
    /// has its own reason).
    pub no_capture_reason: String,
    /// Trace the server's system calls (`crate::trace`; off with `--no-trace`).
    pub trace: bool,
}

impl Plan {
    /// `DIR/<scenario>.<what>`, the scenario name made safe for a file name.
    pub fn file(&self, scenario: &str, what: &str) -> PathBuf {
        let safe: String = scenario
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.out_dir.join(format!("{safe}.{what}"))
    }
}
