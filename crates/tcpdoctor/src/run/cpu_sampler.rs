//! The server's CPU sampled along the driver's timeline, for `busy_poll`
//! (`tcpdoctor_core::run::CpuSamples` says what the samples mean).
//!
//! A helper thread (its CPU is tcpdoctor's, not the driver's work: `bench::cpu`) reads, every
//! [`INTERVAL`]:
//! 1. the process CPU clock of every process of the server's tree (`procfs::cpu_ns`: exact at
//!    the read, all threads, exited ones included) — an interval's CPU is the sum of the
//!    growth of the processes present at both its ends;
//! 2. the driver's phase (`bench::timeline`): whether a request was out with its answer not
//!    begun, and whether that changed, or answer bytes arrived, since the last read;
//! 3. the time the tree's *active* threads spent ready to run but waiting for a CPU
//!    (`procfs::thread_schedstat`'s run delay): with the CPU time, the time they did not sleep,
//!    which a loop that never sleeps fills whatever else the machine runs. Active: the threads
//!    that ran or waited to run during the last refresh window (a JVM's or Node's idle helper
//!    threads are not read every millisecond);
//! 4. every [`REFRESH`], the tree's members again (a process started meanwhile joins from its
//!    first read), all their threads' schedstat (which are active) and each thread's
//!    voluntary context switches (`procfs::voluntary_switches`), so a thread that exits
//!    during the run takes at most one refresh's switches with it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tcpdoctor_core::run::{CpuInterval, CpuSamples, Phase};

use crate::bench::timeline::Timeline;

/// How often the server's CPU is read: fine enough that the gaps between a spinner's
/// exchanges (milliseconds: a delayed ACK's 40 ms, an open loop's slot) hold whole intervals,
/// cheap enough (one `clock_gettime` per process) to leave the machine to the server.
pub const INTERVAL: Duration = Duration::from_millis(1);
/// How often the tree's members and their threads' switches are read again.
pub const REFRESH: Duration = Duration::from_millis(50);

/// How the samples are read, for the findings that rest on them.
pub const COUNTERS: &str = "the process CPU clock of each process of the server's tree and \
    the run delay (ready, waiting for a CPU) of its active threads from \
    /proc/PID/task/TID/schedstat, read every 1 ms, each interval marked by whether the driver \
    then had a request out with its answer not begun, and whether answer bytes arrived in it; \
    voluntary_ctxt_switches of each of its threads from /proc/PID/task/TID/status every 50 ms";

/// A running sampler.
pub struct Sampler {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<CpuSamples>,
}

impl Sampler {
    /// Starts sampling the tree `members` lists, along `timeline`.
    pub fn start(
        members: impl Fn() -> Vec<i32> + Send + 'static,
        timeline: Arc<Timeline>,
    ) -> std::io::Result<Sampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let thread = std::thread::Builder::new()
            .name("tcpdoctor-cpu-sampler".into())
            .spawn(move || {
                let _helper = crate::bench::cpu::helper_thread();
                sample(&members, &timeline, &stopped)
            })?;
        Ok(Sampler { stop, thread })
    }

    /// Stops sampling (after one last read) and returns the samples.
    pub fn finish(self) -> CpuSamples {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap_or_default()
    }
}

/// Each thread's voluntary switches: first and last seen.
#[derive(Default)]
struct Switches {
    threads: HashMap<(i32, i32), (u64, u64)>,
    first_read: bool,
    readable: bool,
}

impl Switches {
    fn read(&mut self, pids: &[i32]) {
        for &pid in pids {
            for (tid, n) in crate::procfs::voluntary_switches(pid) {
                self.readable = true;
                // A thread first seen after the first read was born since: all its switches
                // are the run's.
                let first = if self.first_read { n } else { 0 };
                self.threads.entry((pid, tid)).or_insert((first, n)).1 = n;
            }
        }
        self.first_read = false;
    }

    fn total(&self) -> Option<u64> {
        self.readable.then(|| {
            self.threads
                .values()
                .map(|(a, b)| b.saturating_sub(*a))
                .sum()
        })
    }
}

/// Run-queue waits of the tree's threads (rule 3).
#[derive(Default)]
struct Ready {
    /// Each thread's (run, ready) at its last read.
    last: HashMap<(i32, i32), (u64, u64)>,
    /// Each thread's (run, ready) at the last refresh.
    window: HashMap<(i32, i32), (u64, u64)>,
    active: Vec<(i32, i32)>,
}

impl Ready {
    /// The active threads' ready time since the last tick.
    fn tick(&mut self) -> u64 {
        let mut ready = 0;
        for &(pid, tid) in &self.active {
            if let Some(now) = crate::procfs::thread_schedstat(pid, tid) {
                if let Some(last) = self.last.insert((pid, tid), now) {
                    ready += now.1.saturating_sub(last.1);
                }
            }
        }
        ready
    }

    /// Every thread of `pids` read: active are those that ran or waited since the last
    /// refresh, or are new. (What the active ones did since the last tick is not counted:
    /// at most one tick's in a refresh's fifty.)
    fn refresh(&mut self, pids: &[i32]) {
        self.active.clear();
        let mut window = HashMap::new();
        for &pid in pids {
            for tid in crate::procfs::threads(pid) {
                let Some(now) = crate::procfs::thread_schedstat(pid, tid) else {
                    continue;
                };
                if self.window.get(&(pid, tid)) != Some(&now) {
                    self.active.push((pid, tid));
                }
                // Ticks count from here: what a thread did while it was not read every tick
                // is not placed in any one interval.
                self.last.insert((pid, tid), now);
                window.insert((pid, tid), now);
            }
        }
        self.window = window;
    }
}

fn clocks(pids: &[i32]) -> HashMap<i32, u64> {
    pids.iter()
        .filter_map(|&p| Some((p, crate::procfs::cpu_ns(p)?)))
        .collect()
}

fn sample(members: &dyn Fn() -> Vec<i32>, timeline: &Timeline, stop: &AtomicBool) -> CpuSamples {
    let mut pids = members();
    let mut switches = Switches {
        first_read: true,
        ..Switches::default()
    };
    switches.read(&pids);
    let mut ready = Ready::default();
    ready.refresh(&pids);
    let mut refreshed = Instant::now();
    let mut phase = timeline.phase();
    let mut last = clocks(&pids);
    let mut at = Instant::now();
    let mut intervals = Vec::new();
    loop {
        let done = stop.load(Ordering::SeqCst);
        if !done {
            std::thread::sleep(INTERVAL);
        }
        let now_phase = timeline.phase();
        let now = clocks(&pids);
        let ready_ns = ready.tick();
        let now_at = Instant::now();
        let cpu_ns = now
            .iter()
            .filter_map(|(p, ns)| Some(ns.saturating_sub(*last.get(p)?)))
            .sum();
        intervals.push(CpuInterval {
            wall_ns: now_at.duration_since(at).as_nanos() as u64,
            cpu_ns,
            ready_ns,
            phase: match (
                now_phase.changes == phase.changes,
                phase.owing,
                phase.partial,
            ) {
                (false, _, _) => Phase::Mixed,
                (true, true, _) => Phase::Working,
                (true, false, true) => Phase::MidAnswer,
                (true, false, false) => Phase::Waiting,
            },
        });
        (phase, last, at) = (now_phase, now, now_at);
        if done || refreshed.elapsed() >= REFRESH {
            switches.read(&pids);
            if done {
                break;
            }
            pids = members();
            for (p, ns) in clocks(&pids) {
                last.entry(p).or_insert(ns);
            }
            ready.refresh(&pids);
            refreshed = Instant::now();
        }
    }
    CpuSamples {
        intervals,
        voluntary_switches: switches.total(),
        counters: COUNTERS.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A child that spins, then sleeps in short naps: the samples see a core busy, then
    /// nearly idle, in the phase the timeline says.
    #[test]
    fn a_spinning_then_napping_child_is_seen_along_the_timeline() {
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done; sleep 0.2")
            .spawn()
            .expect("spawn sh");
        let pid = child.id() as i32;
        let timeline = Arc::new(Timeline::default());
        let sampler = Sampler::start(move || vec![pid], Arc::clone(&timeline)).expect("start");
        let _ = child.wait();
        let s = sampler.finish();
        let p = s.phases(true, 0.5);
        assert!(p.waiting.wall_ns > 100_000_000, "{p:?}");
        assert!(
            p.waiting.cpu_ns > 20_000_000,
            "the loop's CPU is seen: {p:?}"
        );
        assert_eq!(p.working.wall_ns, 0, "nothing was owed: {p:?}");
        assert!(s.voluntary_switches.is_some());
        assert_eq!(s.counters, COUNTERS);
    }
}
