//! How many threads analyse one capture file's flows (`analyze --threads`).
//!
//! This thread reads and decodes the file once and hands each TCP segment, in batches, to the
//! thread of the shard its flow hashes to (`tcpdoctor_core::analysis::shard`); the shards
//! merge into the report one thread writes. Rules:
//! 1. Only a regular, uncompressed file is divided. A gzip-compressed one is inflated ahead on
//!    a second thread instead (inflating is then the slower part), and `--ends` keeps each
//!    file's packets in one pass.
//! 2. Only when every detector can merge its state ([`Analyzer::can_shard`]).
//! 3. With the default thread count, only a file of at least [`MIN_BYTES`]: below that the
//!    whole analysis takes milliseconds and a thread per core buys nothing. An explicit
//!    `--threads N` divides any file (so that the identity can be checked on small ones).
//! 4. Into at most [`MAX_SHARDS`] shards, whatever N.
//!
//! N threads in all: the reading thread and N − 1 others. A shard is not a thread: any of
//! them analyses any shard's next batch, one thread at a time per shard, so a shard's
//! segments stay in order. The reading thread takes batches too whenever many wait, and all
//! of them once the file is read: N shards keep N cores busy, where N analysing threads
//! beside a reading one would share N cores three ways (on 2 cores they gave 1.5× one
//! thread, measured on the bench capture).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use tcpdoctor_core::analysis::shard::Routed;
use tcpdoctor_core::analysis::Analyzer;

/// The smallest file divided among threads when `--threads` was not given.
pub const MIN_BYTES: u64 = 8 << 20;
/// The most shards: one thread reads and decodes for all of them (about a third of one
/// thread's work), so past a few shards it is the limit, and each shard holds up to about
/// 15 MB of batches.
pub const MAX_SHARDS: usize = 4;

/// The number of shards for a file of `size` bytes, given the `threads` allowed (`explicit`:
/// by `--threads`), whether the file can be read more than once (`divisible`: rule 1), and
/// an analyzer built as each shard's would be.
pub fn how_many(
    threads: usize,
    explicit: bool,
    divisible: bool,
    size: u64,
    analyzer: &Analyzer,
) -> usize {
    if threads < 2 || !divisible || (!explicit && size < MIN_BYTES) || !analyzer.can_shard() {
        return 1;
    }
    threads.min(MAX_SHARDS)
}

/// Segments handed over at a time.
const BATCH: usize = 4096;
/// Batches waiting per shard past which the reading thread stops reading and analyses
/// waiting batches itself: below it, the other threads have work in hand for a while.
const HELP_ABOVE: usize = 2;
/// Batches waiting per shard, at most: past it the reading thread waits (when no waiting
/// batch is free for it to take). About 7 MB per shard (a routed segment is about 120
/// bytes): enough that a shard busy for a while with a heavy stretch of its connections
/// does not stop the others.
const WAITING: usize = 16;
/// Emptied batches kept per shard to be filled again; the others are freed (what waits is
/// the memory that buys the overlap, what is recycled only saves allocations).
const RECYCLED: usize = 4;

/// Analyses one capture with `count` shards: `read` streams the file through the dispatcher
/// it is given (calling the hook after each frame, which hands full batches to the shards)
/// and returns it with whatever else it read; the shards' analyzers come from `make(i)`.
/// Returns the dispatcher, the shards in order, and `read`'s extra.
pub fn run<T>(
    count: usize,
    make: &(dyn Fn(usize) -> Analyzer + Sync),
    read: impl FnOnce(Analyzer, &mut dyn FnMut(&mut Analyzer)) -> anyhow::Result<(Analyzer, T)>,
) -> anyhow::Result<(Analyzer, Vec<Analyzer>, T)> {
    let pool = Pool::new((0..count).map(make).collect());
    let read = std::thread::scope(|scope| {
        let others: Vec<_> = (1..count)
            .map(|_| scope.spawn(|| pool.work(None)))
            .collect();
        let read = read(Analyzer::dispatcher(count), &mut |d| {
            if d.batched() >= BATCH {
                pool.hand_over(d);
            }
        });
        let read = match read {
            Ok((mut d, extra)) => {
                pool.hand_over(&mut d);
                pool.lock().read = true;
                pool.changed.notify_all();
                // The rest with the others: the last batches, then each shard's end.
                pool.work(None);
                Ok((d, extra))
            }
            Err(e) => {
                pool.stop();
                Err(e)
            }
        };
        for other in others {
            other
                .join()
                .unwrap_or_else(|p| std::panic::resume_unwind(p));
        }
        read
    });
    let shards = pool.into_analyzers();
    let (d, extra) = read?;
    Ok((d, shards, extra))
}

/// The shards' analyzers and their waiting batches, shared by the threads.
struct Pool {
    queues: Mutex<Queues>,
    /// Signalled on every change to `queues`: a batch waiting or taken, a shard free again,
    /// the end of the file, a stop.
    changed: Condvar,
    /// Each locked only by the thread `Queues::busy` says holds it, so never contended.
    analyzers: Vec<Mutex<Analyzer>>,
}

/// What waits, and who is at work on what.
struct Queues {
    waiting: Vec<VecDeque<Vec<Routed>>>,
    /// Batches waiting, all shards together.
    total: usize,
    /// Whether a thread is analysing one of the shard's batches (or ending its flows).
    busy: Vec<bool>,
    /// Whether the shard's flows are ended (the last thing done to it).
    ended: Vec<bool>,
    /// The whole file is read and handed over.
    read: bool,
    /// Reading failed or a thread panicked: everyone stops.
    stopped: bool,
    recycled: Vec<Vec<Routed>>,
}

/// A piece of work on one shard.
enum Task {
    Batch(usize, Vec<Routed>),
    End(usize),
}

impl Task {
    fn shard(&self) -> usize {
        match *self {
            Task::Batch(i, _) | Task::End(i) => i,
        }
    }
}

impl Queues {
    /// The next piece of work a thread can take, marking its shard busy: a batch of the
    /// shard `last` worked on (it is warm in this thread's cache), else of the free shard
    /// with the most waiting; once the file is read and a shard's batches are done, its end.
    fn claim(&mut self, last: Option<usize>) -> Option<Task> {
        let free = |q: &Queues, i: usize| !q.busy[i] && !q.waiting[i].is_empty();
        let pick = last.filter(|&i| free(self, i)).or_else(|| {
            (0..self.waiting.len())
                .filter(|&i| free(self, i))
                .max_by_key(|&i| (self.waiting[i].len(), std::cmp::Reverse(i)))
        });
        if let Some(i) = pick {
            let batch = self.waiting[i].pop_front().expect("a waiting batch");
            self.total -= 1;
            self.busy[i] = true;
            return Some(Task::Batch(i, batch));
        }
        if !self.read {
            return None;
        }
        let i = (0..self.ended.len()).find(|&i| !self.ended[i] && !self.busy[i])?;
        self.busy[i] = true;
        Some(Task::End(i))
    }

    fn finished(&self) -> bool {
        self.stopped || (self.read && self.ended.iter().all(|&e| e))
    }
}

impl Pool {
    fn new(analyzers: Vec<Analyzer>) -> Pool {
        let n = analyzers.len();
        Pool {
            queues: Mutex::new(Queues {
                waiting: (0..n).map(|_| VecDeque::new()).collect(),
                total: 0,
                busy: vec![false; n],
                ended: vec![false; n],
                read: false,
                stopped: false,
                recycled: Vec::new(),
            }),
            changed: Condvar::new(),
            analyzers: analyzers.into_iter().map(Mutex::new).collect(),
        }
    }

    /// The queues, whatever a panicking thread left (it stops everyone first).
    fn lock(&self) -> MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn stop(&self) {
        self.lock().stopped = true;
        self.changed.notify_all();
    }

    /// Takes the dispatcher's batches; then, while many wait, analyses some in this thread
    /// (or, with none free to take and the most waiting, waits for room).
    fn hand_over(&self, d: &mut Analyzer) {
        let shards = self.analyzers.len();
        let mut q = self.lock();
        for i in 0..shards {
            let empty = q
                .recycled
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(BATCH));
            let batch = d.take_batch(i, empty).expect("a dispatcher");
            if q.stopped {
                // Another thread panicked: its join says so, and nothing here is used.
                continue;
            }
            if batch.is_empty() {
                q.recycled.push(batch);
            } else {
                q.waiting[i].push_back(batch);
                q.total += 1;
            }
        }
        self.changed.notify_all();
        let mut last = None;
        loop {
            let task = loop {
                if q.stopped || q.total <= HELP_ABOVE * shards {
                    return;
                }
                if let Some(task) = q.claim(last) {
                    break task;
                }
                if q.total <= WAITING * shards {
                    return;
                }
                q = self.changed.wait(q).unwrap_or_else(PoisonError::into_inner);
            };
            drop(q);
            last = Some(task.shard());
            self.run(task);
            q = self.lock();
        }
    }

    /// Takes work until every shard is ended (or everyone stops): `last` is the shard this
    /// thread worked on last.
    fn work(&self, mut last: Option<usize>) {
        loop {
            let mut q = self.lock();
            let task = loop {
                if q.finished() {
                    return;
                }
                if let Some(task) = q.claim(last) {
                    break task;
                }
                q = self.changed.wait(q).unwrap_or_else(PoisonError::into_inner);
            };
            drop(q);
            last = Some(task.shard());
            self.run(task);
        }
    }

    /// Does one piece of work and frees its shard. A panic in it stops everyone.
    fn run(&self, task: Task) {
        struct StopOnPanic<'a>(&'a Pool);
        impl Drop for StopOnPanic<'_> {
            fn drop(&mut self) {
                if std::thread::panicking() {
                    self.0.stop();
                }
            }
        }
        let guard = StopOnPanic(self);
        let i = task.shard();
        let mut a = self.analyzers[i]
            .try_lock()
            .expect("a busy shard is locked by its thread only");
        let recycle = match task {
            Task::Batch(_, mut batch) => {
                for r in &batch {
                    a.on_routed(r);
                }
                batch.clear();
                Some(batch)
            }
            Task::End(_) => {
                // Here, in parallel, not in the merge.
                a.end_flows();
                None
            }
        };
        drop(a);
        std::mem::forget(guard);
        let mut q = self.lock();
        q.busy[i] = false;
        match recycle {
            Some(batch) if q.recycled.len() < RECYCLED * self.analyzers.len() => {
                q.recycled.push(batch)
            }
            Some(_) => {}
            None => q.ended[i] = true,
        }
        drop(q);
        self.changed.notify_all();
    }

    fn into_analyzers(self) -> Vec<Analyzer> {
        self.analyzers
            .into_iter()
            .map(|a| a.into_inner().unwrap_or_else(PoisonError::into_inner))
            .collect()
    }
}
