//! The process's allocator: mimalloc on glibc targets (the system's elsewhere, or built
//! with `--no-default-features`, for a heap profiler; glibc's then with its defaults, so
//! such a build shows the arena waits below), and how `analyze` prepares its memory.
//!
//! Why not the system's (glibc's) malloc: `analyze` divides a capture's connections among
//! shards, and any thread may analyse a shard's next batch (`shards`), so a flow begun in one
//! thread often ends in another. glibc frees such a block under the lock of the arena of the
//! thread that allocated it, and on a capture of 100,000 short connections at two threads its
//! threads spent their time waiting on each other's arena locks: 5,773 context switches
//! and 0.77 s, where a thread per shard (the design before, each shard's memory freed in
//! the thread that allocated it) took 0.53 s. mimalloc frees a block from another
//! thread without a lock, onto a list its owner collects.

#[cfg(all(feature = "mimalloc", target_env = "gnu"))]
use libmimalloc_sys as mi;

#[cfg(all(feature = "mimalloc", target_env = "gnu"))]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc's `mi_option_purge_delay` (its 16th option in both the v2 and the v3 headers,
/// `mimalloc.h`; the crate names no constant for it): how long freed memory waits before it
/// is handed back to the kernel, in milliseconds; -1 never.
#[cfg(all(feature = "mimalloc", target_env = "gnu"))]
const PURGE_DELAY: mi::mi_option_t = 15;

/// Prepares the process for `analyze` (call it before any other thread starts: mimalloc's
/// options are not thread-safe to set):
/// 1. Keeps the memory it frees for its next allocations, rather than handing it back to the
///    kernel a moment later (mimalloc's default purge) and taking it again, zeroed, at the
///    next allocation: a capture's flows come and go by the hundred thousand. On a capture
///    of 400,000 concurrent connections at one thread, the default purged 435 times
///    (569 MiB) and spent 1.6 s of 3.9 s in the kernel; kept, 0.2 s of 3.0 s. Peak memory
///    stays where it was (518,368 KiB purging, 519,872 KiB kept): what is kept was in use a
///    moment before.
/// 2. Asks the kernel for no transparent huge pages (`PR_SET_THP_DISABLE`; mimalloc asks for
///    them where the system leaves it to the program): a 2 MiB page is resident whole as soon
///    as one byte of it is touched, and the flows' allocations are spread over many. On the
///    same capture, peak RSS at two threads 584,748 → 536,796 KiB (one thread 518,800 →
///    505,412), and no slower: medians of six runs on a 300 MB capture, one thread 0.76 s
///    with them and 0.77 s without, two threads 0.50 s and 0.46 s.
pub fn prepare_for_analysis() {
    #[cfg(all(feature = "mimalloc", target_env = "gnu"))]
    // SAFETY: sets one of mimalloc's options; no other thread is allocating yet.
    unsafe {
        mi::mi_option_set(PURGE_DELAY, -1)
    }
    #[cfg(target_os = "linux")]
    // SAFETY: prctl with integer arguments; it changes only this process's memory policy. A
    // kernel without it refuses, and nothing else changes.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
