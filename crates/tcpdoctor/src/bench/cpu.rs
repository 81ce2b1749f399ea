//! The driver's own CPU time (getrusage, all threads): a load generator that burns more CPU per
//! request than the server it drives measures itself, not the server.

use std::marker::PhantomData;
use std::sync::Mutex;
use std::time::Duration;

/// How [`CpuTimes::now`] reads the driver's CPU, for the findings that rest on it.
pub const COUNTERS: &str = "getrusage(RUSAGE_SELF) user + system time of the driver over the \
    scenario, less its spinning (an open loop awake for its slots and answers, one-connection polling for answers) and the CPU clocks of tcpdoctor's helper threads \
    (capture, socket readers, delay line, proxy hop), divided by its exchanges";

/// User and system CPU time of this process so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: Duration,
    pub system: Duration,
}

impl CpuTimes {
    pub fn now() -> CpuTimes {
        // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_SELF is always valid.
        let ru = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
                return CpuTimes::default();
            }
            ru
        };
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        CpuTimes {
            user: tv(ru.ru_utime),
            system: tv(ru.ru_stime),
        }
    }

    pub fn since(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

/// tcpdoctor's own threads that are not the driver (the WAN delay line, the capture and socket
/// readers): their CPU is in getrusage, and is reported apart from the driver's work.
static HELPERS: Mutex<Helpers> = Mutex::new(Helpers {
    live: Vec::new(),
    retired: Duration::ZERO,
    next: 0,
});

struct Helpers {
    /// Each live helper: its key and its thread's CPU clock.
    live: Vec<(u64, libc::clockid_t)>,
    /// The CPU of helpers that have ended.
    retired: Duration,
    next: u64,
}

/// Marks the calling thread a helper until dropped (on the same thread: it is not `Send`).
pub struct HelperThread {
    key: u64,
    _not_send: PhantomData<*const ()>,
}

/// Counts the calling thread's CPU as tcpdoctor's, not the driver's (see [`helpers_cpu`]).
pub fn helper_thread() -> HelperThread {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: pthread_getcpuclockid writes the clock id of the calling thread.
    let ok = unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0;
    let mut h = HELPERS.lock().unwrap_or_else(|e| e.into_inner());
    h.next += 1;
    let key = h.next;
    if ok {
        h.live.push((key, clock));
    }
    HelperThread {
        key,
        _not_send: PhantomData,
    }
}

impl Drop for HelperThread {
    fn drop(&mut self) {
        let mut h = HELPERS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = h.live.iter().position(|(k, _)| *k == self.key) {
            h.live.swap_remove(i);
            h.retired += clock_time(libc::CLOCK_THREAD_CPUTIME_ID);
        }
    }
}

/// The CPU time of every helper thread so far, ended ones included: the difference of two
/// readings is what the helpers used between them.
pub fn helpers_cpu() -> Duration {
    let h = HELPERS.lock().unwrap_or_else(|e| e.into_inner());
    h.retired + h.live.iter().map(|(_, c)| clock_time(*c)).sum::<Duration>()
}

pub(crate) fn clock_time(clock: libc::clockid_t) -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec; the clock is this thread's or a live
    // registered thread's (it is removed, under the lock, before its thread ends).
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return Duration::ZERO;
    }
    Duration::new(
        ts.tv_sec.max(0) as u64,
        ts.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burning_cpu_shows_up() {
        let a = CpuTimes::now();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let d = CpuTimes::now().since(a);
        assert!(d.user + d.system > Duration::ZERO, "{d:?}");
    }

    fn burn(ms: u64) {
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(ms) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
    }

    #[test]
    fn a_helper_threads_cpu_is_counted_apart_live_and_ended() {
        let before = helpers_cpu();
        let (tx, rx) = std::sync::mpsc::channel();
        let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::spawn(move || {
            let _h = helper_thread();
            burn(40);
            tx.send(()).unwrap();
            go_rx.recv().unwrap();
        });
        rx.recv().unwrap();
        let live = helpers_cpu().saturating_sub(before);
        // Not a timing bound: the helper burned 40 ms of wall time; it ran for some of it.
        assert!(live > Duration::from_millis(1), "live helper: {live:?}");
        // A thread that is not a helper is not counted.
        let other = helpers_cpu();
        burn(30);
        let after_other = helpers_cpu();
        go_tx.send(()).unwrap();
        t.join().unwrap();
        let ended = helpers_cpu().saturating_sub(before);
        assert!(
            ended >= live,
            "an ended helper keeps its CPU: {ended:?} < {live:?}"
        );
        assert!(
            after_other.saturating_sub(other) < Duration::from_millis(30),
            "the calling thread is not a helper"
        );
    }
}
