//! Stop requests: Ctrl-C and SIGTERM end a capture cleanly instead of killing the process, and
//! in a sandbox they also end the sandboxed commands at once (the handler kills the namespace's
//! first process, which takes every other process of the namespace with it). In a sandbox the
//! end of that first process (SIGCHLD) stops the capture too.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
static KILL_ON_STOP: AtomicI32 = AtomicI32::new(0);

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
    INTERRUPTED.store(true, Ordering::SeqCst);
    let pid = KILL_ON_STOP.load(Ordering::SeqCst);
    // Never 0 (our own group) or -1 (every process we may signal).
    if pid != 0 && pid != -1 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

extern "C" fn on_child(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn handle(sig: libc::c_int, f: extern "C" fn(libc::c_int)) {
    // SAFETY: a handler that only touches atomics and calls kill(2); no SA_RESTART, so a
    // blocking poll returns early.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = f as usize;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(sig, &sa, std::ptr::null_mut());
    }
}

/// Installs the handlers for SIGINT, SIGTERM and SIGHUP.
pub fn install() {
    for sig in SIGNALS {
        handle(sig, on_signal);
    }
}

/// Also stop when a child exits (the sandbox's first process).
pub fn on_child_exit() {
    handle(libc::SIGCHLD, on_child);
}

/// Puts the default dispositions back (in a child about to run other code).
pub fn uninstall() {
    for sig in SIGNALS.into_iter().chain([libc::SIGCHLD]) {
        // SAFETY: restores the default disposition.
        unsafe { libc::signal(sig, libc::SIG_DFL) };
    }
}

pub fn requested() -> bool {
    STOP.load(Ordering::SeqCst)
}

/// Whether Ctrl-C, SIGTERM or SIGHUP arrived.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// From now on a stop signal also SIGKILLs `pid`; if one already came, kills it now.
pub fn kill_on_stop(pid: libc::pid_t) {
    KILL_ON_STOP.store(pid, Ordering::SeqCst);
    // A negative pid is a process group (kill(2)).
    if interrupted() {
        // SAFETY: plain kill(2) of our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// From now on a stop signal SIGKILLs the process group `pgid` (`run`'s server); if one
/// already came, kills it now.
pub fn kill_group_on_stop(pgid: libc::pid_t) {
    // Group 1 would be kill(-1): every process we may signal. A spawned child's pgid is never 1.
    if pgid > 1 {
        kill_on_stop(-pgid);
    }
}
