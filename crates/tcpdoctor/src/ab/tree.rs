//! A run's processes and their sockets, read from /proc and through duplicates of their
//! descriptors (`pidfd_getfd`: the processes are ours, in whatever network namespace): how
//! many bytes their TCP sockets have moved (the progress a hang watch needs), and what every
//! socket looked like when a run was declared hung.

use std::collections::{BTreeMap, BTreeSet};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use tcpdoctor_core::ab::HungSocket;

use crate::inspect::options::Pidfd;
use crate::inspect::proc;

/// `root` and every process descended from it (read from each process's parent in
/// /proc/PID/stat; a process that exits meanwhile is simply not listed).
pub fn descendants(root: u32) -> Vec<u32> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    if let Ok(dir) = std::fs::read_dir("/proc") {
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(ppid) = parent(pid) {
                children.entry(ppid).or_default().push(pid);
            }
        }
    }
    let mut out = vec![root];
    let mut seen = BTreeSet::from([root]);
    let mut i = 0;
    while i < out.len() {
        if let Some(c) = children.get(&out[i]) {
            for &p in c {
                if seen.insert(p) {
                    out.push(p);
                }
            }
        }
        i += 1;
        if out.len() > 100_000 {
            break;
        }
    }
    out
}

fn parent(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name is in parentheses and may hold anything: fields start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split(' ').nth(1)?.parse().ok()
}

/// A socket's address family (SO_DOMAIN).
fn domain(fd: BorrowedFd<'_>) -> Option<i32> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `v`, which we own.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(v)
}

fn ioctl_len(fd: BorrowedFd<'_>, req: libc::c_ulong) -> Option<u64> {
    let mut v: libc::c_int = 0;
    // SAFETY: SIOCINQ/SIOCOUTQ write one int we own.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), req as _, &mut v) };
    (r == 0 && v >= 0).then_some(v as u64)
}

/// Each socket of the tree, duplicated for a moment: (pid, descriptor's duplicate).
fn each_socket(pids: &[u32], mut f: impl FnMut(u32, BorrowedFd<'_>)) {
    for &pid in pids {
        let (Ok(fds), Ok(pidfd)) = (proc::socket_fds(pid), Pidfd::open(pid)) else {
            continue;
        };
        let mut seen = BTreeSet::new();
        for (&inode, &fd) in &fds {
            if !seen.insert(inode) {
                continue;
            }
            if let Ok(dup) = pidfd.dup(fd) {
                f(pid, dup.as_fd());
            }
        }
    }
}

/// The peer process of a Unix socket (SO_PEERCRED), when the kernel says.
fn peer_pid(fd: BorrowedFd<'_>) -> Option<u32> {
    // SAFETY: a zeroed ucred is a valid value; getsockopt writes at most `len` bytes into it.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: as above.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    (r == 0 && cred.pid > 0).then_some(cred.pid as u32)
}

/// The bytes the tree's TCP sockets have acknowledged and received, summed; and whether the
/// tree holds a Unix stream socket talking to another process (whose progress only the
/// processes' I/O counters show). A socket whose peer is its own process — asyncio's
/// self-pipe, a wake-up pair — is not a conversation and does not count.
pub fn bytes_moved(pids: &[u32]) -> (u64, bool) {
    let mut total = 0u64;
    let mut unix = false;
    each_socket(pids, |pid, fd| match domain(fd) {
        Some(libc::AF_INET) | Some(libc::AF_INET6) => {
            if let Ok(info) = crate::inspect::tcp_info::getsockopt(fd) {
                let s = crate::inspect::tcp_info::parse(&info, 0);
                total = total.wrapping_add(s.bytes_acked.wrapping_add(s.bytes_received));
            }
        }
        Some(libc::AF_UNIX) => {
            let stream = socket2::SockRef::from(&fd).r#type().ok() == Some(socket2::Type::STREAM);
            if stream && peer_pid(fd).is_some_and(|p| p != pid) {
                unix = true;
            }
        }
        _ => {}
    });
    (total, unix)
}

/// Characters read and written by the tree's processes (/proc/PID/io), summed.
pub fn io_chars(pids: &[u32]) -> u64 {
    pids.iter()
        .filter_map(|p| std::fs::read_to_string(format!("/proc/{p}/io")).ok())
        .map(|t| {
            t.lines()
                .filter(|l| l.starts_with("rchar:") || l.starts_with("wchar:"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

/// What every TCP and Unix stream socket of the tree looked like now.
pub fn snapshot(pids: &[u32]) -> Vec<HungSocket> {
    let mut out = Vec::new();
    each_socket(pids, |pid, fd| {
        let process = proc::comm(pid).unwrap_or_else(|| "?".into());
        let sock = socket2::SockRef::from(&fd);
        let stream = sock.r#type().ok() == Some(socket2::Type::STREAM);
        match domain(fd) {
            Some(libc::AF_INET) | Some(libc::AF_INET6) if stream => {
                let local = sock.local_addr().ok().and_then(|a| a.as_socket());
                let peer = sock.peer_addr().ok().and_then(|a| a.as_socket());
                let Some(peer) = peer else {
                    return; // a listener
                };
                let info = crate::inspect::tcp_info::getsockopt(fd)
                    .ok()
                    .map(|b| crate::inspect::tcp_info::parse(&b, 0));
                out.push(HungSocket {
                    pid,
                    process,
                    kind: "tcp".into(),
                    endpoints: format!(
                        "{} → {peer}",
                        local.map_or("?".to_string(), |l| l.to_string())
                    ),
                    unread_bytes: ioctl_len(fd, libc::FIONREAD as libc::c_ulong),
                    unsent_bytes: ioctl_len(fd, libc::TIOCOUTQ as libc::c_ulong),
                    unacked: info.as_ref().map(|i| i.unacked),
                    notsent_bytes: info.as_ref().map(|i| i.notsent_bytes),
                    peer_zero_window: info.as_ref().and_then(|i| i.snd_wnd_bytes).map(|w| w == 0),
                });
            }
            Some(libc::AF_UNIX) if stream => {
                let path = sock
                    .local_addr()
                    .ok()
                    .and_then(|a| a.as_pathname().map(|p| p.display().to_string()))
                    .unwrap_or_else(|| "(unnamed)".into());
                out.push(HungSocket {
                    pid,
                    process,
                    kind: "unix".into(),
                    endpoints: path,
                    unread_bytes: ioctl_len(fd, libc::FIONREAD as libc::c_ulong),
                    unsent_bytes: ioctl_len(fd, libc::TIOCOUTQ as libc::c_ulong),
                    unacked: None,
                    notsent_bytes: None,
                    peer_zero_window: None,
                });
            }
            _ => {}
        }
    });
    out
}

/// Sends `sig` to every process of the tree (and `root`'s process group).
pub fn signal_all(root: u32, pids: &[u32], sig: i32) {
    // SAFETY: kill with a pid we started or found descended from it; errors are ignored
    // (a process already gone).
    unsafe {
        libc::kill(-(root as i32), sig);
        for &p in pids {
            libc::kill(p as i32, sig);
        }
    }
}

/// Makes this process the reaper of every orphan its runs leave (`PR_SET_CHILD_SUBREAPER`):
/// a daemon a benchmark command double-forks stays our descendant, to be found and stopped.
pub fn become_subreaper() {
    // SAFETY: prctl with an integer flag; failure leaves orphans to init (said nowhere: the
    // sweep then finds fewer leftovers).
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
}

/// Stops every process still descended from this one once a run has ended (a server its
/// command started in the background and never stopped, a daemon it forked): SIGTERM, up to
/// two seconds to go, then SIGKILL; each reaped. Returns their names.
pub fn sweep_leftovers() -> Vec<String> {
    let me = std::process::id();
    let mut names = Vec::new();
    // What is already on its way out (a server its `run` just signalled, now an orphan of
    // ours) is given a moment to go by itself, and reaped: only what is still alive after
    // that was left running.
    let alive = || -> Vec<u32> {
        reap_any();
        descendants(me)
            .into_iter()
            .filter(|&p| p != me && still(&[p]) > 0)
            .collect()
    };
    let settle = std::time::Instant::now() + std::time::Duration::from_secs(1);
    while !alive().is_empty() && std::time::Instant::now() < settle {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    for round in 0..5 {
        let left = alive();
        if left.is_empty() {
            break;
        }
        if round == 0 {
            names = left
                .iter()
                .map(|&p| proc::comm(p).unwrap_or_else(|| p.to_string()))
                .collect();
            for &p in &left {
                // SAFETY: a signal to a process descended from us.
                unsafe { libc::kill(p as i32, libc::SIGTERM) };
            }
            let until = std::time::Instant::now() + std::time::Duration::from_secs(2);
            while std::time::Instant::now() < until {
                reap_any();
                if still(&left) == 0 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        }
        for &p in &left {
            // SAFETY: as above.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        reap_any();
    }
    reap_any();
    names.sort();
    names.dedup();
    names
}

/// Reaps our exited children that nothing else waits for; returns how many.
fn reap_any() -> usize {
    let mut n = 0;
    loop {
        let mut status = 0;
        // SAFETY: waitpid on any child without blocking.
        let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if pid <= 0 {
            return n;
        }
        n += 1;
    }
}

/// How many of `pids` still exist (and are not zombies waiting for us).
fn still(pids: &[u32]) -> usize {
    pids.iter()
        .filter(|&&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| s.rfind(')').map(|i| s[i + 2..].starts_with('Z')))
                .is_some_and(|zombie| !zombie)
        })
        .count()
}
