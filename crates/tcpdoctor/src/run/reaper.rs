//! Everything the server started, daemons included, stopped at the end.
//!
//! 1. `run` makes itself a child subreaper (`PR_SET_CHILD_SUBREAPER`): a process that forks
//!    and lets its parent exit (`redis-server --daemonize yes`, nginx's master, a double fork)
//!    is re-parented to `run`, not to init, so it stays in `run`'s process tree even after it
//!    left the server's process group and session.
//! 2. The server's processes are then `run`'s descendants: every process in /proc whose parent
//!    chain leads to `run`.
//! 3. Stopping: SIGTERM to each, a grace period, SIGKILL to what is left; the ones that were
//!    re-parented to `run` are reaped here (no zombie is left behind).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Makes this process the reaper of its orphaned descendants. Idempotent.
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: prctl with an integer option and argument.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Every live (not zombie) process whose parent chain leads to `root`, `root` excluded.
pub fn descendants(root: libc::pid_t) -> Vec<libc::pid_t> {
    let mut parent: HashMap<libc::pid_t, libc::pid_t> = HashMap::new();
    let mut live: Vec<libc::pid_t> = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if let Some(s) = crate::procfs::stat(pid) {
            parent.insert(pid, s.ppid as libc::pid_t);
            if !matches!(s.state, 'Z' | 'X') {
                live.push(pid);
            }
        }
    }
    live.into_iter()
        .filter(|&pid| {
            // Bounded: a chain in /proc is at most as long as the number of processes.
            let mut at = pid;
            for _ in 0..=parent.len() {
                match parent.get(&at) {
                    Some(&p) if p == root => return pid != root,
                    Some(&p) if p > 1 && p != at => at = p,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

/// Reaps the zombies among this process's own children, except `keep` (a child whose
/// `std::process::Child` will wait for it) and those still traced: a traced server's
/// orphans are reaped by its tracer thread, which must see their exit (`procfs::traced`).
pub fn reap_orphans(keep: libc::pid_t) {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == keep {
            continue;
        }
        if let Some(s) = crate::procfs::stat(pid) {
            if s.ppid == i64::from(me) && s.state == 'Z' && !crate::procfs::traced(pid) {
                let mut status = 0;
                // SAFETY: waits for a zombie child of ours, without blocking.
                unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            }
        }
    }
}

/// SIGTERM to every descendant of this process, SIGKILL after `grace` to what is left; reaps
/// the orphans that were re-parented here. Leaves `keep` (the server's own child, which its
/// `Child` handle reaps) for the caller to wait for.
pub fn stop_descendants(keep: libc::pid_t, grace: Duration) {
    // SAFETY: getpid has no preconditions.
    let me = unsafe { libc::getpid() };
    for pid in descendants(me) {
        // SAFETY: kill(2) on a process of our own tree.
        unsafe { libc::kill(pid, libc::SIGTERM) };
    }
    let start = Instant::now();
    while start.elapsed() < grace {
        reap_orphans(keep);
        if descendants(me).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    for pid in descendants(me) {
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    // SIGKILL cannot be caught; bounded wait for them to become zombies and be reaped.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(1) {
        reap_orphans(keep);
        if descendants(me).is_empty() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_is_a_descendant_and_is_stopped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        // SAFETY: getpid has no preconditions.
        let me = unsafe { libc::getpid() };
        let pid = child.id() as libc::pid_t;
        assert!(descendants(me).contains(&pid));
        assert!(!descendants(me).contains(&me));
        // The test harness's other tests may have children too: stop only this one's tree.
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let _ = child.wait();
        assert!(!descendants(me).contains(&pid));
    }
}
