//! Process limits a network tool should not trip over.

/// Raises the soft limit on open files to the hard limit and returns the new soft limit.
///
/// Each proxied connection holds two sockets (and an impaired one a timer per direction), so
/// the usual soft limit of 1024 would cap a proxy or a load driver at a few hundred
/// connections while the hard limit allows far more — the same step haproxy and nginx take.
pub fn raise_fd_limit() -> std::io::Result<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if r.rlim_cur < r.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit from the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        r = raised;
    }
    Ok(r.rlim_cur)
}

/// Heap glibc keeps at its top after a free, rather than handing it back to the kernel.
const KEPT_HEAP_TOP: libc::c_int = 64 << 20;
/// Allocations from this size up get pages of their own from the kernel (mmap), returned when
/// freed; smaller ones come from the heap.
const OWN_PAGES_FROM: libc::c_int = 4 << 20;

/// Lets the heap keep up to [`KEPT_HEAP_TOP`] of freed memory at its top, and serves
/// allocations under [`OWN_PAGES_FROM`] from it (glibc only; a no-op elsewhere). By default
/// glibc returns the top of its heap to the kernel whenever 128 KiB or more is free there, and
/// maps the kernel's pages afresh for each large allocation until a free raises that limit, so
/// `analyze` — whose flows grow and free vectors of up to a few hundred KiB as they come and
/// go, and whose threads pass batches of segments of ~0.5 MB — asked the kernel for the same
/// pages again and again (19,000 page faults on a 300 MB capture on one thread). Peak memory is
/// not raised: what the heap keeps was in use a moment before.
pub fn keep_freed_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt sets one parameter of glibc's allocator, under the allocator's own lock.
    unsafe {
        libc::mallopt(libc::M_TRIM_THRESHOLD, KEPT_HEAP_TOP);
        libc::mallopt(libc::M_MMAP_THRESHOLD, OWN_PAGES_FROM);
    }
}

/// Hands the kernel back the freed pages of every heap (glibc's `malloc_trim`; a no-op
/// elsewhere). For the moment a large, short-lived structure has been freed and different
/// ones are about to be built: `analyze`'s shard threads free their flows when they finish,
/// and the merge then allocates in the reading thread's heap, not in the pages the shards
/// freed, so without this the process's peak memory would be both added up.
pub fn release_freed_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: malloc_trim only walks the allocator's free lists, under its own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_soft_limit_ends_at_the_hard_limit() {
        let soft = super::raise_fd_limit().expect("getrlimit works");
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
        assert_eq!(soft, r.rlim_cur);
        assert_eq!(r.rlim_cur, r.rlim_max);
    }
}
