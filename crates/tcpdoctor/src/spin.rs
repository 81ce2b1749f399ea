//! The CPU a thread spends spinning (yielding in a loop instead of sleeping), counted apart
//! from its work.
//!
//! A task that spins yields to the runtime between looks, and while it is yielded the thread
//! runs the runtime's own polling and other tasks. The runtime's polling belongs to the spin
//! (a sleeping thread would not do it); another task's work does not. So:
//! 1. A spinning task calls [`yielding`] before each yield: unless a mark is already set, the
//!    thread's CPU clock now is the mark ("spinning since").
//! 2. Every poll of a task run under [`settled`] first settles: the thread's CPU since the
//!    mark is spin (handed to the task's sink), and the mark is cleared, so what the task
//!    does in that poll is not spin. The benchmark's connections run under it, so one
//!    connection's sends and reads are never counted as another's spin.
//! 3. A task not run under [`settled`] that the runtime polls while a mark is set has its work
//!    counted as spin at the next settle. On a current-thread runtime (`bench --threads 1`)
//!    that is the run's progress ticker, ten times a second; elsewhere the ticker runs on the
//!    caller's thread, apart from the connections.
//! 4. Marks are per thread. A task moved to another worker while yielded leaves its mark on
//!    the first thread; the runtimes drop a thread's mark when the thread goes to sleep
//!    ([`drop_mark`] as `on_thread_park`), so such a mark never spans a sleep and the
//!    wake-up after it, and the connections settled there meanwhile credit only the
//!    runtime's polling. Marks also carry the epoch they were set in ([`new_epoch`], one per
//!    benchmark run): one left by a task aborted while yielded is dropped by the next run
//!    instead of charging it CPU from before its start.

use std::cell::Cell;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

thread_local! {
    /// The mark: (epoch, the thread's CPU clock when it was set).
    static SINCE: Cell<Option<(u64, Duration)>> = const { Cell::new(None) };
}

static EPOCH: AtomicU64 = AtomicU64::new(0);

fn thread_cpu() -> Duration {
    crate::bench::cpu::clock_time(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Rule 4: marks set before now are dropped, not settled.
pub fn new_epoch() {
    EPOCH.fetch_add(1, Ordering::Relaxed);
}

/// Rule 1: the calling task is about to yield while it spins.
pub fn yielding() {
    SINCE.with(|s| {
        let epoch = EPOCH.load(Ordering::Relaxed);
        if s.get().is_none_or(|(e, _)| e != epoch) {
            s.set(Some((epoch, thread_cpu())));
        }
    });
}

/// Rule 4: this thread is going to sleep; its mark, if any, is dropped uncounted.
pub fn drop_mark() {
    SINCE.with(|s| s.set(None));
}

/// Rule 2: the CPU this thread has spun since the mark (zero without one, or with one from
/// another epoch); clears the mark.
pub fn settle() -> Duration {
    SINCE.with(|s| match s.take() {
        Some((epoch, m)) if epoch == EPOCH.load(Ordering::Relaxed) => {
            thread_cpu().saturating_sub(m)
        }
        _ => Duration::ZERO,
    })
}

/// Rule 2: runs `f`, settling before each of its polls and handing what was spun to `sink`.
pub async fn settled<F: Future>(f: F, sink: impl Fn(Duration)) -> F::Output {
    let mut f = std::pin::pin!(f);
    std::future::poll_fn(|cx| {
        let spun = settle();
        if !spun.is_zero() {
            sink(spun);
        }
        f.as_mut().poll(cx)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::{drop_mark, settle, settled, thread_cpu, yielding, EPOCH, SINCE};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Arc;
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

    /// Rule 4. The epoch is process-wide and other tests hold marks while they run, so this
    /// one plants a mark of an earlier epoch instead of starting a new one.
    #[test]
    fn a_mark_from_an_earlier_epoch_is_dropped_and_does_not_block_a_new_one() {
        std::thread::spawn(|| {
            let old = EPOCH.load(Ordering::Relaxed).wrapping_sub(1);
            SINCE.with(|s| s.set(Some((old, thread_cpu()))));
            burn(Duration::from_millis(5));
            assert_eq!(
                settle(),
                Duration::ZERO,
                "an earlier run's mark is not this run's"
            );
            SINCE.with(|s| s.set(Some((old, Duration::ZERO))));
            yielding();
            burn(Duration::from_millis(5));
            let spun = settle();
            assert!(
                spun >= Duration::from_millis(5) && spun < Duration::from_millis(50),
                "counted from the new mark: {spun:?}"
            );
            yielding();
            drop_mark();
            assert_eq!(
                settle(),
                Duration::ZERO,
                "a thread that sleeps drops its mark"
            );
        })
        .join()
        .expect("thread");
    }

    /// Two tasks on one thread: one spins (marks, yields) while the other works 30 ms in one
    /// poll. Run under `settled`, the worker's poll settles first, so its 30 ms are not spin.
    #[test]
    fn another_tasks_work_during_a_spin_is_not_spin() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let spun = Arc::new(AtomicU64::new(0));
        let sink = |spun: &Arc<AtomicU64>| {
            let spun = spun.clone();
            move |d: Duration| {
                spun.fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
            }
        };
        rt.block_on(async {
            let spinner = tokio::spawn(settled(
                async {
                    for _ in 0..50 {
                        yielding();
                        tokio::task::yield_now().await;
                    }
                },
                sink(&spun),
            ));
            let worker = tokio::spawn(settled(
                async {
                    for _ in 0..3 {
                        burn(Duration::from_millis(10));
                        tokio::task::yield_now().await;
                    }
                },
                sink(&spun),
            ));
            spinner.await.expect("spinner");
            worker.await.expect("worker");
        });
        let spun = Duration::from_nanos(spun.load(Ordering::Relaxed));
        assert!(spun > Duration::ZERO, "the spinner's yields counted");
        assert!(
            spun < Duration::from_millis(10),
            "none of the worker's 30 ms: {spun:?}"
        );
    }
}
