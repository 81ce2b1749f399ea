//! Reading a process's sockets in its own network namespace (a container, the far side of a
//! `wan:` path): a netlink socket answers for the namespace it was created in, so a
//! short-lived thread enters the process's namespace (`setns`), opens the socket, reads the
//! buffer sysctls there, and exits; the sampler then uses that socket from anywhere.
//!
//! Entering another namespace needs CAP_SYS_ADMIN over it. An unprivileged user's own
//! container lives in a user namespace that a thread of a multi-threaded process may not
//! join (`setns` refuses CLONE_NEWUSER there), so when entering is refused the caller falls
//! back to reading each socket through a duplicate of its descriptor.

use std::io;
use std::os::fd::AsRawFd;

use super::buffers::Limits;
use super::diag::Diag;

/// A diag socket for one namespace and the buffer limits read in it.
pub struct NsReader {
    pub diag: Diag,
    pub send: Limits,
    pub receive: Limits,
}

/// The inode of our own network namespace.
pub fn ours() -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/thread-self/ns/net")
        .ok()
        .map(|m| m.ino())
}

/// Opens a reader in our namespace.
pub fn here() -> io::Result<NsReader> {
    Ok(NsReader {
        diag: Diag::open()?,
        send: limits("tcp_wmem", "wmem_max"),
        receive: limits("tcp_rmem", "rmem_max"),
    })
}

/// Opens a reader in the network namespace of `pid` (entering it from a short-lived thread).
pub fn of(pid: u32) -> io::Result<NsReader> {
    at(std::path::Path::new(&format!("/proc/{pid}/ns/net")))
}

/// Opens a reader in the network namespace named by `path` (`/proc/PID/ns/net`, or a bind
/// mount such as `/run/netns/NAME`), entering it from a short-lived thread.
pub fn at(path: &std::path::Path) -> io::Result<NsReader> {
    let ns = std::fs::File::open(path)?;
    std::thread::spawn(move || {
        // SAFETY: setns(2) on this thread only, with a namespace descriptor we hold.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error());
        }
        here()
    })
    .join()
    .map_err(|_| io::Error::other("the namespace thread panicked"))?
}

/// `net.ipv4.<triple>` and `net.core.<max>` as this thread's namespace shows them
/// (/proc/sys/net answers for the reading thread's namespace).
fn limits(triple: &str, core: &str) -> Limits {
    let read = |p: String| std::fs::read_to_string(p).ok();
    let autotune = read(format!("/proc/sys/net/ipv4/{triple}")).and_then(|t| {
        let v: Vec<u64> = t
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        <[u64; 3]>::try_from(v).ok()
    });
    let core_max = read(format!("/proc/sys/net/core/{core}")).and_then(|t| t.trim().parse().ok());
    Limits { autotune, core_max }
}

#[cfg(test)]
mod tests {
    #[test]
    fn our_own_namespace_reads_its_limits() {
        let r = super::here().expect("a diag socket here");
        assert!(r.send.autotune.is_some() && r.receive.autotune.is_some());
        assert!(super::ours().is_some());
        // Entering a namespace (even our own) needs CAP_SYS_ADMIN.
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            let r = super::of(std::process::id()).expect("entering our own namespace");
            assert_eq!(r.send, super::here().expect("here").send);
        }
    }
}
