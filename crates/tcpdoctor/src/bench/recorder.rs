//! What the connections of one run share: the clock, the request budget, the stop flag,
//! histograms and counters.
//!
//! Each connection records into a small local buffer and flushes it, under a lock, into one of
//! a few histogram shards every [`FLUSH_EVERY`] exchanges and when it ends (also when it is
//! aborted: the flush runs on drop). A shard per connection would cost an HDR histogram each
//! (a few hundred KiB); a lock per exchange would make connections queue on one another.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tcpdoctor_core::bench::{ErrorCounts, LatencyHistogram};
use tcpdoctor_core::Timestamp;

const FLUSH_EVERY: usize = 256;

/// The run's monotonic clock, as the core's `Timestamp` (ns since the run started).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    base: Instant,
}

impl Clock {
    pub fn start() -> Clock {
        Clock {
            base: Instant::now(),
        }
    }

    pub fn now(&self) -> Timestamp {
        Timestamp(self.base.elapsed().as_nanos() as u64)
    }

    pub fn instant(&self, t: Timestamp) -> tokio::time::Instant {
        tokio::time::Instant::from_std(self.std_instant(t))
    }

    pub fn std_instant(&self, t: Timestamp) -> Instant {
        self.base + Duration::from_nanos(t.0)
    }
}

#[derive(Default)]
struct Shard {
    overall: LatencyHistogram,
    per_step: Vec<LatencyHistogram>,
    /// Open loop: how late the driver sent each measured request.
    send_lateness: LatencyHistogram,
}

/// Shared by every connection of one run.
pub struct Recorder {
    pub clock: Clock,
    /// Exchanges intended before this are warmup: sent, answered, not recorded.
    pub measure_from: Timestamp,
    /// No request intended at or after this is sent (`--duration`).
    pub stop_at: Option<Timestamp>,
    /// Measured requests still to send (`--requests`).
    budget: Option<AtomicU64>,
    /// Set when the run is over: connections stop sending and leave.
    stopped: AtomicBool,
    /// Exchanges completed, warmup included: the progress the hang detector watches.
    pub completed: AtomicU64,
    last_finish: AtomicU64,
    pub bytes_sent: AtomicU64,
    pub bytes_received: AtomicU64,
    pub connections_opened: AtomicU64,
    /// Connections the server closed after complete responses, reopened without an error.
    pub reconnects: AtomicU64,
    /// Nanoseconds spent spinning: to send open-loop requests on schedule, or polling for a
    /// one-connection closed loop's answers (conn.rs, rule 2).
    pub spin_ns: AtomicU64,
    shards: Vec<Mutex<Shard>>,
    errors: Mutex<ErrorCounts>,
    /// Setups (a login) that failed since one last succeeded, over all connections.
    setup_failures: AtomicU64,
    /// Set when setups kept failing: why the run stopped (the command exits 2 with it).
    refused: Mutex<Option<String>>,
}

/// Setups failing in a row, over all connections, before the run stops: a login the server
/// keeps refusing is reported once, not thousands of times.
pub const MAX_SETUP_FAILURES: u64 = 5;

impl Recorder {
    pub fn new(
        clock: Clock,
        measure_from: Timestamp,
        stop_at: Option<Timestamp>,
        requests: Option<u64>,
        steps: usize,
        shards: usize,
    ) -> Recorder {
        Recorder {
            clock,
            measure_from,
            stop_at,
            budget: requests.map(AtomicU64::new),
            stopped: AtomicBool::new(false),
            completed: AtomicU64::new(0),
            last_finish: AtomicU64::new(0),
            bytes_sent: AtomicU64::new(0),
            bytes_received: AtomicU64::new(0),
            connections_opened: AtomicU64::new(0),
            reconnects: AtomicU64::new(0),
            spin_ns: AtomicU64::new(0),
            shards: (0..shards.max(1))
                .map(|_| {
                    Mutex::new(Shard {
                        overall: LatencyHistogram::default(),
                        per_step: vec![LatencyHistogram::default(); steps],
                        send_lateness: LatencyHistogram::default(),
                    })
                })
                .collect(),
            errors: Mutex::new(ErrorCounts::default()),
            setup_failures: AtomicU64::new(0),
            refused: Mutex::new(None),
        }
    }

    /// A connection's setup failed with `answer`; at [`MAX_SETUP_FAILURES`] in a row the run
    /// stops and [`Recorder::refused`] says why.
    pub fn setup_failed(&self, answer: &str) {
        let n = self.setup_failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n >= MAX_SETUP_FAILURES {
            let mut r = self.refused.lock().unwrap_or_else(|e| e.into_inner());
            r.get_or_insert_with(|| {
                format!(
                    "the script's setup failed {n} times in a row, so the run stopped: {answer}"
                )
            });
            self.stop();
        }
    }

    /// A connection got through its setup: the failures in a row start again from zero.
    pub fn setup_succeeded(&self) {
        if self.setup_failures.load(Ordering::Relaxed) != 0 {
            self.setup_failures.store(0, Ordering::Relaxed);
        }
    }

    /// Why the run stopped early because setups kept failing, if it did.
    pub fn refused(&self) -> Option<String> {
        self.refused
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// May up to `want` requests intended at `intended` be sent? Takes that many units of the
    /// budget (fewer if fewer are left, None if none) when they are measured; what the ticket
    /// still holds when dropped goes back. One atomic operation for a pipelined batch.
    pub fn take(&self, intended: Timestamp, want: u64) -> Option<Ticket<'_>> {
        if self.is_stopped() || self.stop_at.is_some_and(|s| intended >= s) || want == 0 {
            return None;
        }
        if intended < self.measure_from {
            return Some(Ticket {
                rec: self,
                counted: false,
                left: want,
            });
        }
        let left = match &self.budget {
            Some(b) => {
                let before = b
                    .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                        (n > 0).then(|| n - n.min(want))
                    })
                    .ok()?;
                before.min(want)
            }
            None => want,
        };
        Some(Ticket {
            rec: self,
            counted: true,
            left,
        })
    }

    /// True when no request intended at `now` or later could be sent.
    pub fn take_would_fail(&self, now: Timestamp) -> bool {
        self.is_stopped()
            || self.stop_at.is_some_and(|s| now >= s)
            || (now >= self.measure_from && self.budget_left() == Some(0))
    }

    /// Measured requests not yet sent, when the run is bounded by a count.
    pub fn budget_left(&self) -> Option<u64> {
        self.budget.as_ref().map(|b| b.load(Ordering::Relaxed))
    }

    pub fn last_finish(&self) -> Timestamp {
        Timestamp(self.last_finish.load(Ordering::Relaxed))
    }

    pub fn errors(&self) -> MutexGuard<'_, ErrorCounts> {
        self.errors.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Open loop: every shard's send lateness, merged.
    pub fn send_lateness(&self) -> LatencyHistogram {
        let mut all = LatencyHistogram::default();
        for s in &self.shards {
            all.merge(&s.lock().unwrap_or_else(|p| p.into_inner()).send_lateness);
        }
        all
    }

    /// Merges every shard: (overall, per step).
    pub fn histograms(&self) -> (LatencyHistogram, Vec<LatencyHistogram>) {
        let mut overall = LatencyHistogram::default();
        let mut steps: Vec<LatencyHistogram> = Vec::new();
        for s in &self.shards {
            let s = s.lock().unwrap_or_else(|p| p.into_inner());
            overall.merge(&s.overall);
            if steps.is_empty() {
                steps = s.per_step.clone();
            } else {
                for (a, b) in steps.iter_mut().zip(&s.per_step) {
                    a.merge(b);
                }
            }
        }
        if let [only] = steps.as_slice() {
            overall.merge(only);
        }
        (overall, steps)
    }
}

/// Permission to send `left` more requests; the unused rest returns to the budget on drop.
pub struct Ticket<'a> {
    rec: &'a Recorder,
    counted: bool,
    pub left: u64,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if let (true, Some(b)) = (self.counted && self.left > 0, &self.rec.budget) {
            b.fetch_add(self.left, Ordering::Relaxed);
        }
    }
}

/// One connection's view of the recorder: buffers latencies and byte counts, flushes in batches.
pub struct Local {
    rec: Arc<Recorder>,
    shard: usize,
    latencies: Vec<(usize, u64)>,
    /// Send lateness of measured open-loop requests, in ns, not yet flushed.
    late: Vec<u64>,
    spin_ns: u64,
    last_finish: u64,
    sent: u64,
    received: u64,
}

impl Local {
    pub fn new(rec: Arc<Recorder>, conn: u64) -> Local {
        let shard = (conn % rec.shards.len() as u64) as usize;
        Local {
            rec,
            shard,
            latencies: Vec::with_capacity(FLUSH_EVERY),
            late: Vec::with_capacity(FLUSH_EVERY),
            spin_ns: 0,
            last_finish: 0,
            sent: 0,
            received: 0,
        }
    }

    /// An exchange of `step` answered at `finished`, intended at `intended`.
    /// (The caller adds completed exchanges to [`Recorder::completed`], once per batch.)
    pub fn exchange(&mut self, step: usize, intended: Timestamp, finished: Timestamp) {
        if intended < self.rec.measure_from {
            return;
        }
        self.latencies
            .push((step, finished.0.saturating_sub(intended.0)));
        self.last_finish = self.last_finish.max(finished.0);
        if self.latencies.len() >= FLUSH_EVERY {
            self.flush();
        }
    }

    /// An open-loop request intended at `intended` left `late` after it could have.
    pub fn sent_late(&mut self, intended: Timestamp, late: Duration) {
        if intended < self.rec.measure_from {
            return;
        }
        self.late.push(late.as_nanos() as u64);
        if self.late.len() >= FLUSH_EVERY {
            self.flush();
        }
    }

    /// Time spent spinning before a slot or polling for an answer.
    pub fn spun(&mut self, d: Duration) {
        self.spin_ns += d.as_nanos() as u64;
    }

    pub fn sent(&mut self, n: usize) {
        self.sent += n as u64;
    }

    pub fn received(&mut self, n: usize) {
        self.received += n as u64;
    }

    pub fn flush(&mut self) {
        if !self.late.is_empty() {
            let mut s = self.rec.shards[self.shard]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            for &ns in &self.late {
                s.send_lateness.record_ns(ns);
            }
            drop(s);
            self.late.clear();
        }
        self.rec.spin_ns.fetch_add(self.spin_ns, Ordering::Relaxed);
        self.spin_ns = 0;
        if !self.latencies.is_empty() {
            let mut s = self.rec.shards[self.shard]
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            // With one step the overall histogram is that step's: it is recorded once and
            // copied when the run's histograms are read.
            let single = s.per_step.len() == 1;
            for &(step, ns) in &self.latencies {
                let in_step = s.per_step.get_mut(step).map(|h| h.record_ns(ns)).is_some();
                if !(single && in_step) {
                    s.overall.record_ns(ns);
                }
            }
            drop(s);
            self.latencies.clear();
        }
        self.rec
            .last_finish
            .fetch_max(self.last_finish, Ordering::Relaxed);
        self.rec.bytes_sent.fetch_add(self.sent, Ordering::Relaxed);
        self.rec
            .bytes_received
            .fetch_add(self.received, Ordering::Relaxed);
        self.sent = 0;
        self.received = 0;
    }
}

impl Drop for Local {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_counts_measured_requests_only() {
        let rec = Recorder::new(
            Clock::start(),
            Timestamp(1_000),
            Some(Timestamp(10_000)),
            Some(2),
            1,
            2,
        );
        let warm = rec.take(Timestamp(10), 5).expect("warmup");
        assert_eq!((warm.counted, warm.left), (false, 5));
        drop(warm);
        assert_eq!(rec.budget_left(), Some(2), "warmup takes nothing");
        let a = rec.take(Timestamp(2_000), 1).expect("first");
        let mut b = rec.take(Timestamp(2_000), 16).expect("the rest");
        assert_eq!((a.left, b.left), (1, 1), "only what is left is granted");
        assert!(rec.take(Timestamp(2_000), 1).is_none(), "budget spent");
        drop(a);
        b.left -= 1;
        drop(b);
        assert_eq!(rec.budget_left(), Some(1));
        assert!(rec.take(Timestamp(10_000), 1).is_none(), "past --duration");
        rec.stop();
        assert!(rec.take(Timestamp(2_000), 1).is_none());
    }

    #[test]
    fn warmup_exchanges_are_not_recorded_and_drop_flushes() {
        let rec = Arc::new(Recorder::new(
            Clock::start(),
            Timestamp(1_000),
            None,
            None,
            2,
            1,
        ));
        {
            let mut l = Local::new(rec.clone(), 7);
            l.exchange(1, Timestamp(500), Timestamp(900));
            l.exchange(1, Timestamp(1_500), Timestamp(41_500));
            l.sent(10);
        }
        let (all, steps) = rec.histograms();
        assert_eq!(all.count(), 1);
        assert_eq!(steps[1].count(), 1);
        assert_eq!(steps[0].count(), 0);
        assert_eq!(rec.bytes_sent.load(Ordering::Relaxed), 10);
        assert_eq!(rec.last_finish(), Timestamp(41_500));
    }

    #[test]
    fn one_step_is_recorded_once_and_still_counts_overall() {
        for steps in [1, 2] {
            let rec = Arc::new(Recorder::new(
                Clock::start(),
                Timestamp(0),
                None,
                None,
                steps,
                2,
            ));
            for conn in 0..2 {
                let mut l = Local::new(rec.clone(), conn);
                l.exchange(0, Timestamp(0), Timestamp(1_000));
                l.exchange(0, Timestamp(0), Timestamp(5_000_000));
            }
            let (all, per_step) = rec.histograms();
            assert_eq!(all.count(), 4, "{steps} step(s)");
            assert_eq!(per_step[0].count(), 4, "{steps} step(s)");
            assert_eq!(
                all.quantile_ns(1.0),
                per_step[0].quantile_ns(1.0),
                "{steps} step(s)"
            );
        }
    }
}
