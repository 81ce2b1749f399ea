//! The CPU a thread spends spinning (yielding in a loop instead of sleeping), counted apart
//! from its work.
//!
//! A task that spins yields to the runtime between looks, and while it is yielded the thread
//! runs the runtime's own polling and other tasks. The runtime's polling belongs to the spin
//! (a sleeping thread would not do it); another task's work does not. So:
//! 1. A spinning task calls [`yielding`] before each yield: unless a mark is already set, the
//!    thread's CPU clock now is the mark ("spinning since").
//! 2. Work calls [`settle`] when it starts (a connection's loop, each time an await returns):
//!    the thread's CPU since the mark is spin, and the mark is cleared, so the work that
//!    follows is not spin. A spin loop that ends settles too, before its task sleeps.
//! 3. The marks are per thread, not per task: a task moved to another worker while yielded
//!    leaves its mark on the first thread, which the next task to settle there closes. If that
//!    thread sleeps first, its wake-up's CPU (a few microseconds) is counted as spin once.

use std::cell::Cell;
use std::time::Duration;

thread_local! {
    static SINCE: Cell<Option<Duration>> = const { Cell::new(None) };
}

fn thread_cpu() -> Duration {
    crate::bench::cpu::clock_time(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Rule 1: the calling task is about to yield while it spins.
pub fn yielding() {
    SINCE.with(|s| {
        if s.get().is_none() {
            s.set(Some(thread_cpu()));
        }
    });
}

/// Rule 2: the CPU this thread has spun since the mark (zero without one); clears the mark.
pub fn settle() -> Duration {
    SINCE.with(|s| {
        s.take()
            .map_or(Duration::ZERO, |m| thread_cpu().saturating_sub(m))
    })
}

#[cfg(test)]
mod tests {
    use super::{settle, thread_cpu, yielding};
    use std::time::Duration;

    /// Burns `d` of this thread's CPU (its own clock, so a busy machine only makes it longer).
    fn burn(d: Duration) {
        let t = thread_cpu();
        while thread_cpu() < t + d {
            std::hint::black_box(0u64);
        }
    }

    #[test]
    fn spin_is_counted_from_the_first_mark_and_work_after_settling_is_not() {
        std::thread::spawn(|| {
            assert_eq!(settle(), Duration::ZERO, "no mark, no spin");
            yielding();
            burn(Duration::from_millis(20));
            yielding(); // a second mark does not move the first
            burn(Duration::from_millis(20));
            let spun = settle();
            burn(Duration::from_millis(20)); // work
            assert_eq!(settle(), Duration::ZERO, "work after settling is not spin");
            assert!(
                spun >= Duration::from_millis(40),
                "both bursts counted: {spun:?}"
            );
            assert!(
                spun < Duration::from_millis(60),
                "the work was not: {spun:?}"
            );
        })
        .join()
        .expect("thread");
    }
}
