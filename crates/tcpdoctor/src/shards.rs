//! How many threads analyse one capture file's flows (`analyze --threads`).
//!
//! This thread reads and decodes the file once and hands each TCP segment, in batches, to the
//! shard its flow hashes to (`tcpdoctor_core::analysis::shard`); the shards merge into the
//! report one thread writes. Rules:
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
//! of them once the file is read. So N threads keep N cores busy, where a thread per shard
//! beside the reading one made N + 1 threads share N cores (on 2 cores, 1.5× one thread on
//! the bench capture).

use std::collections::VecDeque;
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};

use tcpdoctor_core::analysis::shard::Routed;
use tcpdoctor_core::analysis::Analyzer;

/// The smallest file divided among threads when `--threads` was not given.
pub const MIN_BYTES: u64 = 8 << 20;
/// The most shards: one thread reads and decodes for all of them (about a third of one
/// thread's work), so past a few shards it is the limit; and each shard adds up to about
/// 11 MB of batches ([`WAITING`]).
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
/// Batches waiting (all shards together, per shard) past which the reading thread stops
/// reading and analyses waiting batches itself: below it, the other threads have work in
/// hand for a while. The bench capture at two threads, median of three runs: 2.39 s at 0,
/// 2.05 s at 1, 1.79 s at 2, 1.74 s at 4, 1.78 s at 8; 2 to 8 are within this VM's noise,
/// and fewer waiting batches are less memory.
const HELP_ABOVE: usize = 2;
/// Batches waiting (all shards together, per shard) past which the reading thread waits
/// when no waiting batch is free for it to take. A batch is 4,096 segments of 120 bytes
/// (0.5 MB): 8 MB per shard on average, and one shard may hold them all. With the batches
/// being analysed, filled and recycled, about 11 MB per shard at most. Enough that a shard
/// busy for a while with a heavy stretch of its connections does not stop the others.
const WAITING: usize = 16;
/// Emptied batches kept per shard to be filled again (2 MB); the others are freed: what waits
/// is the memory that buys the overlap, what is recycled saves allocations.
const RECYCLED: usize = 4;

/// Analyses one capture with `count` shards: `read` streams the file through the dispatcher
/// it is given (calling the hook after each frame, which hands full batches to the shards)
/// and returns it with whatever else it read; the shards' analyzers come from `make(i)`.
/// Returns the dispatcher, the shards in order, `read`'s extra, and how the batches went.
pub fn run<T>(
    count: usize,
    make: &(dyn Fn(usize) -> Analyzer + Sync),
    read: impl FnOnce(Analyzer, &mut dyn FnMut(&mut Analyzer)) -> anyhow::Result<(Analyzer, T)>,
) -> anyhow::Result<(Analyzer, Vec<Analyzer>, T, Handed)> {
    let pool = Pool::new((0..count).map(make).collect());
    let outcome = std::thread::scope(|scope| {
        // Whatever panics in this thread (reading, decoding, a batch it took), the others
        // stop rather than wait for batches that will not come.
        let _stop = StopOnPanic(&pool);
        // Threads are numbered from 1; the reading thread is 0.
        let others: Vec<_> = (1..count)
            .map(|thread| {
                let pool = &pool;
                scope.spawn(move || {
                    let _stop = StopOnPanic(pool);
                    pool.work(thread)
                })
            })
            .collect();
        let outcome = read(Analyzer::dispatcher(count), &mut |d| {
            if d.batched() >= BATCH {
                pool.hand_over(d, true);
            }
        });
        let outcome = match outcome {
            Ok((mut d, extra)) => {
                pool.hand_over(&mut d, false);
                pool.lock().read = true;
                pool.changed.notify_all();
                // The rest with the others: the last batches, then each shard's end.
                pool.work(0);
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
        outcome
    });
    let (d, extra) = outcome?;
    let q = pool
        .queues
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let shards = q
        .shards
        .into_iter()
        .map(|a| *a.expect("every shard is back once all threads are done"))
        .collect();
    Ok((d, shards, extra, q.handed))
}

/// How a capture's batches went (`TCPDOCTOR_TRACE_SHARDS` prints it).
#[derive(Clone, Copy, Debug, Default)]
pub struct Handed {
    /// Batches handed over, all shards together.
    pub batches: usize,
    /// Of those, the ones the reading thread analysed itself while it read (many waited).
    pub by_reader: usize,
    /// Times the reading thread waited for room (the most waited, none free to take).
    pub waits: usize,
    /// Batches analysed on another thread than the shard's previous one (its tables then
    /// move between cores' caches).
    pub moved: usize,
}

/// The shards and their waiting batches, shared by the threads.
struct Pool {
    queues: Mutex<Queues>,
    /// Signalled on every change to `queues` that may let a thread go on: a batch waiting, a
    /// shard back, the end of the file, a stop.
    changed: Condvar,
}

/// Stops every thread if the one holding it panics.
struct StopOnPanic<'a>(&'a Pool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop();
        }
    }
}

/// What waits, and who is at work on what.
struct Queues {
    /// Each shard's analyzer; taken (None) while a thread works on it, so one thread at a
    /// time analyses a shard, its batches in order.
    shards: Vec<Option<Box<Analyzer>>>,
    waiting: Vec<VecDeque<Vec<Routed>>>,
    /// Whether the shard's flows are ended (the last thing done to it).
    ended: Vec<bool>,
    /// The whole file is read and handed over.
    read: bool,
    /// Reading failed or a thread panicked: everyone stops.
    stopped: bool,
    recycled: Vec<Vec<Routed>>,
    handed: Handed,
    /// The thread (0: the reading one) that last worked on each shard.
    ran_on: Vec<Option<usize>>,
}

/// A piece of work on one shard, with the shard's analyzer.
struct Task {
    shard: usize,
    analyzer: Box<Analyzer>,
    /// A batch to analyse; None: end the shard's flows.
    batch: Option<Vec<Routed>>,
}

impl Queues {
    /// The next piece of work `thread` can take: a batch of the shard it worked on `last`
    /// (warm in its cache), else of the free shard with the most waiting; once the file is
    /// read and a shard's batches are all done, its end. (Giving each thread a shard of its
    /// own to prefer did not keep shards on their threads: on the bench capture at two
    /// threads the reading thread reads most of the time, so the other analyses both shards
    /// whenever its own is empty, and as many batches moved, 101 to 233 of 742 either way.)
    fn claim(&mut self, thread: usize, last: Option<usize>) -> Option<Task> {
        let free = |q: &Queues, i: usize| q.shards[i].is_some() && !q.waiting[i].is_empty();
        let pick = last.filter(|&i| free(self, i)).or_else(|| {
            (0..self.waiting.len())
                .filter(|&i| free(self, i))
                .max_by_key(|&i| (self.waiting[i].len(), std::cmp::Reverse(i)))
        });
        if let Some(i) = pick {
            if self.ran_on[i].replace(thread).is_some_and(|t| t != thread) {
                self.handed.moved += 1;
            }
            return Some(Task {
                shard: i,
                analyzer: self.shards[i].take().expect("a free shard"),
                batch: self.waiting[i].pop_front(),
            });
        }
        if !self.read {
            return None;
        }
        let i = (0..self.shards.len())
            .find(|&i| !self.ended[i] && self.shards[i].is_some() && self.waiting[i].is_empty())?;
        Some(Task {
            shard: i,
            analyzer: self.shards[i].take().expect("a free shard"),
            batch: None,
        })
    }

    fn waiting(&self) -> usize {
        self.waiting.iter().map(VecDeque::len).sum()
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
                shards: analyzers.into_iter().map(|a| Some(Box::new(a))).collect(),
                waiting: (0..n).map(|_| VecDeque::new()).collect(),
                ended: vec![false; n],
                read: false,
                stopped: false,
                recycled: Vec::new(),
                handed: Handed::default(),
                ran_on: vec![None; n],
            }),
            changed: Condvar::new(),
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

    /// Takes the dispatcher's batches (leaving it emptied ones to fill when `refill`, none
    /// after the last); then, while many wait, analyses some in this thread (or, with none
    /// free to take and the most waiting, waits for room).
    fn hand_over(&self, d: &mut Analyzer, refill: bool) {
        let mut q = self.lock();
        let shards = q.shards.len();
        // Emptied batches for the dispatcher to fill; none after the last hand-over.
        let mut spare: Vec<Vec<Routed>> = match refill {
            true => (0..shards).filter_map(|_| q.recycled.pop()).collect(),
            false => Vec::new(),
        };
        drop(q);
        let batches: Vec<Vec<Routed>> = (0..shards)
            .map(|i| {
                let empty = match refill {
                    true => spare.pop().unwrap_or_else(|| Vec::with_capacity(BATCH)),
                    false => Vec::new(),
                };
                d.take_batch(i, empty).expect("a dispatcher")
            })
            .collect();
        let mut unwanted = Vec::new();
        let mut q = self.lock();
        for (i, batch) in batches.into_iter().enumerate() {
            if !batch.is_empty() && !q.stopped {
                q.waiting[i].push_back(batch);
                q.handed.batches += 1;
            } else if batch.capacity() > 0 && q.recycled.len() < RECYCLED * shards {
                // Empty, or not wanted: another thread panicked, its join says so.
                q.recycled.push(batch);
            } else {
                unwanted.push(batch);
            }
        }
        self.changed.notify_all();
        drop(q);
        drop(unwanted);
        let mut q = self.lock();
        let mut last = None;
        loop {
            let task = loop {
                let waiting = q.waiting();
                if q.stopped || waiting <= HELP_ABOVE * shards {
                    return;
                }
                if let Some(task) = q.claim(0, last) {
                    q.handed.by_reader += 1;
                    break task;
                }
                if waiting <= WAITING * shards {
                    return;
                }
                q.handed.waits += 1;
                q = self.changed.wait(q).unwrap_or_else(PoisonError::into_inner);
            };
            drop(q);
            last = Some(task.shard);
            self.run(task);
            q = self.lock();
        }
    }

    /// Takes work until every shard is ended (or everyone stops), as `thread`.
    fn work(&self, thread: usize) {
        let mut last = None;
        loop {
            let mut q = self.lock();
            let task = loop {
                if q.finished() {
                    return;
                }
                if let Some(task) = q.claim(thread, last) {
                    break task;
                }
                q = self.changed.wait(q).unwrap_or_else(PoisonError::into_inner);
            };
            drop(q);
            last = Some(task.shard);
            self.run(task);
        }
    }

    /// Does one piece of work and gives the shard back.
    fn run(&self, task: Task) {
        let Task {
            shard,
            mut analyzer,
            batch,
        } = task;
        let batch = batch.map(|mut batch| {
            for r in &batch {
                analyzer.on_routed(r);
            }
            batch.clear();
            batch
        });
        if batch.is_none() {
            // Here, in parallel, not in the merge.
            analyzer.end_flows();
        }
        let mut q = self.lock();
        q.shards[shard] = Some(analyzer);
        let cap = RECYCLED * q.shards.len();
        let surplus = match batch {
            Some(batch) if q.recycled.len() < cap => {
                q.recycled.push(batch);
                None
            }
            Some(batch) => Some(batch),
            None => {
                q.ended[shard] = true;
                None
            }
        };
        drop(q);
        self.changed.notify_all();
        drop(surplus);
    }
}
