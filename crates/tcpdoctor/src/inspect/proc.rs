//! What /proc says about a process: its socket descriptors, name, network namespace and
//! counters. Everything here may fail (the process exits, or belongs to another user): each
//! reader returns what it could read and lets the caller say what it could not.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::unix::fs::MetadataExt;

use tcpdoctor_core::inspect::ProcessCounters;

/// The entries of a /proc directory whose names are numbers (processes in /proc, descriptors
/// in /proc/PID/fd), with the number.
fn numbered<N: std::str::FromStr>(
    dir: &str,
) -> io::Result<impl Iterator<Item = (N, std::fs::DirEntry)>> {
    Ok(std::fs::read_dir(dir)?.flatten().filter_map(|entry| {
        let n = entry.file_name().to_str()?.parse::<N>().ok()?;
        Some((n, entry))
    }))
}

/// Every process /proc shows (none when /proc cannot be read).
pub fn pids() -> impl Iterator<Item = u32> {
    numbered::<u32>("/proc")
        .into_iter()
        .flatten()
        .map(|(pid, _)| pid)
}

/// A process's descriptors: each number and its /proc entry (whose link says what it is).
pub fn fd_entries(pid: u32) -> io::Result<impl Iterator<Item = (i32, std::fs::DirEntry)>> {
    numbered(&format!("/proc/{pid}/fd"))
}

/// The process's sockets: inode → the lowest descriptor pointing to it.
pub fn socket_fds(pid: u32) -> io::Result<BTreeMap<u64, i32>> {
    let mut out = BTreeMap::new();
    for (fd, entry) in fd_entries(pid)? {
        // A descriptor closed between the listing and the readlink is simply not there.
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if let Some(inode) = socket_inode(&target.to_string_lossy()) {
            let at = out.entry(inode).or_insert(fd);
            *at = (*at).min(fd);
        }
    }
    Ok(out)
}

/// `socket:[12345]` → 12345.
pub fn socket_inode(link: &str) -> Option<u64> {
    link.strip_prefix("socket:[")?
        .strip_suffix(']')?
        .parse()
        .ok()
}

pub fn comm(pid: u32) -> Option<String> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(s.trim_end().to_owned())
}

/// The command line, arguments joined by spaces (empty when unreadable, or a kernel thread).
pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_default()
}

/// The inode of the process's network namespace (`None` when the link is refused: it needs
/// the same ptrace access as the descriptors).
pub fn netns(pid: u32) -> Option<u64> {
    std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .ok()
        .map(|m| m.ino())
}

/// The real uid the process runs as (`Uid:` of /proc/PID/status, readable by anyone).
pub fn uid(pid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    u32::try_from(status_field(&status, "Uid:")?).ok()
}

/// Whether the process still runs (not gone, not a zombie).
pub fn alive(pid: u32) -> bool {
    i32::try_from(pid).is_ok_and(|p| !crate::procfs::process_gone(p))
}

fn status_field(status: &str, name: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The process's counters now: CPU from its CPU clock (exited threads included) and its
/// user/system ticks; context switches summed over its live threads (a thread that exited
/// takes its share with it); read/write syscalls from /proc/PID/io
/// (`None` there when refused; only `read`/`readv`/`pread` and the `write` family count
/// there: `recv`/`send` on a socket, as Rust's and many servers' socket I/O is, do not). `None` when the process
/// is gone or its CPU time cannot be read.
///
/// With them, the threads whose counts were summed: a thread missing from a later read
/// exited and took its count away, so the caller can tell when the sum is incomplete.
pub fn counters(pid: u32, at_ns: u64) -> Option<(ProcessCounters, BTreeSet<u32>)> {
    let cpu_ns = crate::procfs::cpu_ns(i32::try_from(pid).ok()?)?;
    let (mut vol, mut nonvol) = (0u64, 0u64);
    let mut tids = BTreeSet::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            if let Ok(s) = std::fs::read_to_string(t.path().join("status")) {
                vol += status_field(&s, "voluntary_ctxt_switches:").unwrap_or(0);
                nonvol += status_field(&s, "nonvoluntary_ctxt_switches:").unwrap_or(0);
                if let Some(tid) = t.file_name().to_str().and_then(|n| n.parse().ok()) {
                    tids.insert(tid);
                }
            }
        }
    }
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).ok();
    let io_field = |name: &str| {
        io.as_deref()?
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .trim()
            .parse::<u64>()
            .ok()
    };
    let stat = crate::procfs::stat(i32::try_from(pid).ok()?);
    let counters = ProcessCounters {
        at_ns,
        cpu_ns,
        user_ticks: stat.as_ref().map(|s| s.utime),
        system_ticks: stat.as_ref().map(|s| s.stime),
        voluntary_ctxt_switches: vol,
        nonvoluntary_ctxt_switches: nonvol,
        syscr: io_field("syscr:"),
        syscw: io_field("syscw:"),
    };
    Some((counters, tids))
}

/// The processes holding any of `inodes`, among those whose descriptors we may read, with
/// the number of processes whose descriptors were refused.
pub fn holders(inodes: &std::collections::BTreeSet<u64>) -> (Vec<u32>, usize) {
    let mut found = Vec::new();
    let mut refused = 0;
    for pid in pids() {
        match socket_fds(pid) {
            Ok(fds) => {
                if fds.keys().any(|i| inodes.contains(i)) {
                    found.push(pid);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => refused += 1,
            Err(_) => {}
        }
    }
    found.sort_unstable();
    (found, refused)
}

/// CLOCK_MONOTONIC now, nanoseconds: the clock every `at_ns` of an observation is on.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

#[cfg(test)]
mod tests {
    use super::{counters, socket_fds, socket_inode, status_field};

    #[test]
    fn socket_links_and_status_fields() {
        assert_eq!(socket_inode("socket:[4242]"), Some(4242));
        assert_eq!(socket_inode("pipe:[4242]"), None);
        assert_eq!(socket_inode("/dev/null"), None);
        let s = "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nvoluntary_ctxt_switches:\t17\n";
        assert_eq!(status_field(s, "Uid:"), Some(1000));
        assert_eq!(status_field(s, "voluntary_ctxt_switches:"), Some(17));
        assert_eq!(status_field(s, "Gid:"), None);
    }

    #[test]
    fn our_own_sockets_and_counters() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let me = std::process::id();
        let fds = socket_fds(me).expect("our fds");
        let fd = std::os::fd::AsRawFd::as_raw_fd(&l);
        assert!(fds.values().any(|&f| f == fd), "{fds:?}");
        let (c, tids) = counters(me, 7).expect("our counters");
        assert_eq!(c.at_ns, 7);
        assert!(!tids.is_empty(), "our threads");
        assert!(c.cpu_ns > 0 && c.syscr.is_some());
    }
}
