//! `inspect --trace D`: each inspected process attached to (`crate::trace::attach`) while the
//! sampling runs, and what its system calls show added to the report.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tcpdoctor_core::inspect::{InspectReport, ProcessTrace};
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

/// Adds what the traces show to the report: per process its calls (or why it could not be
/// attached to) and the attach's cost.
pub fn add(report: &mut InspectReport, traces: Vec<Attached>) {
    for a in traces {
        let (trace, attach) = match a.result {
            Ok((t, cost)) => (
                t,
                Some(tcpdoctor_core::inspect::AttachCost {
                    stops: cost.stops,
                    threads: cost.threads as u64,
                    detached: cost.detached as u64,
                }),
            ),
            Err(reason) => {
                eprintln!("tcpdoctor inspect: --trace: {reason}");
                (
                    Trace::not_traced(tcpdoctor_core::syscalls::TraceStatus::Unavailable {
                        reason,
                    }),
                    None,
                )
            }
        };
        report.syscalls.push(ProcessTrace {
            pid: a.pid,
            calls: tcpdoctor_core::syscalls::summarize(&trace, None),
            attach,
        });
    }
}
