//! How many threads analyse one capture file's flows (`analyze --threads`).
//!
//! Each thread reads the whole file and analyses the flows that hash to it
//! (`tcpdoctor_core::analysis::shard`); the shards merge into the report one thread writes.
//! Rules:
//! 1. Only a regular, uncompressed file is divided: each thread reads it from the page cache
//!    on its own. A gzip-compressed one would be inflated once per thread (it is inflated
//!    ahead on a second thread instead), a pipe cannot be read twice, and `--ends` keeps each
//!    file's packets in one pass.
//! 2. Only when every detector can merge its state ([`Analyzer::can_shard`]).
//! 3. With the default thread count, only a file of at least [`MIN_BYTES`]: below that the
//!    whole analysis takes milliseconds and a thread per core buys nothing. An explicit
//!    `--threads N` divides any file (so that the identity can be checked on small ones).

use tcpdoctor_core::analysis::Analyzer;

/// The smallest file divided among threads when `--threads` was not given.
pub const MIN_BYTES: u64 = 8 << 20;

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
    threads
}
