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

use std::sync::mpsc::sync_channel;

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

/// Segments handed to a shard's thread at a time.
const BATCH: usize = 4096;
/// Batches waiting for each shard's thread, at most: enough that a shard busy for a while
/// with a heavy stretch of its connections does not stop the reading (and with it the other
/// shards) at once. About 7 MB per shard (a routed segment is about 112 bytes); measured on
/// the 1 GiB bench capture, 4 waiting batches gave 1.41–1.65× one thread, 16 gave 1.69–1.83×,
/// 64 no more.
const WAITING: usize = 16;
/// Emptied batches kept to be filled again; the others are freed (what waits is the memory
/// that buys the overlap, what is recycled only saves allocations).
const RECYCLED: usize = 4;

/// Analyses one capture with `count` shards: `read` streams the file through the dispatcher
/// it is given (calling the hook after each frame, which hands full batches to the shards'
/// threads) and returns it with whatever else it read; the shards' analyzers come from
/// `make(i)`. Returns the dispatcher, the shards in order, and `read`'s extra.
pub fn run<T>(
    count: usize,
    make: &(dyn Fn(usize) -> Analyzer + Sync),
    read: impl FnOnce(Analyzer, &mut dyn FnMut(&mut Analyzer)) -> anyhow::Result<(Analyzer, T)>,
) -> anyhow::Result<(Analyzer, Vec<Analyzer>, T)> {
    std::thread::scope(|scope| {
        let mut to = Vec::with_capacity(count);
        let mut back = Vec::with_capacity(count);
        let mut workers = Vec::with_capacity(count);
        for i in 0..count {
            let (tx, rx) = sync_channel::<Vec<Routed>>(WAITING);
            // Emptied batches come back to be filled again (no allocation per batch).
            let (btx, brx) = sync_channel::<Vec<Routed>>(RECYCLED);
            workers.push(scope.spawn(move || {
                let mut a = make(i);
                for mut batch in rx {
                    for r in &batch {
                        a.on_routed(r);
                    }
                    batch.clear();
                    let _ = btx.try_send(batch);
                }
                // Here, in parallel and in this thread's arena, not in the merge.
                a.end_flows();
                a
            }));
            to.push(tx);
            back.push(brx);
        }
        let hand_over = |d: &mut Analyzer, at_least: usize| {
            if d.batched() < at_least.max(1) {
                return;
            }
            for (i, (tx, brx)) in to.iter().zip(&back).enumerate() {
                let empty = brx.try_recv().unwrap_or_else(|_| Vec::with_capacity(BATCH));
                let batch = d.take_batch(i, empty).expect("a dispatcher");
                if !batch.is_empty() {
                    // Fails only if the shard's thread panicked: its join says so below.
                    let _ = tx.send(batch);
                }
            }
        };
        let read = read(Analyzer::dispatcher(count), &mut |d| hand_over(d, BATCH));
        let read = read.map(|(mut d, extra)| {
            hand_over(&mut d, 1);
            (d, extra)
        });
        drop(to);
        let shards: Vec<Analyzer> = workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        // The shards' flows are freed; the merge allocates elsewhere.
        crate::limits::release_freed_heap();
        let (d, extra) = read?;
        Ok((d, shards, extra))
    })
}
