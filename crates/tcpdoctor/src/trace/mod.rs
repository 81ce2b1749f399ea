//! Syscall tracing without root: the programs tcpdoctor starts are traced from their first
//! instruction (a process may trace its own children), stopping only at the calls that matter
//! (see [`filter`]); a running process can be attached to for a bounded time ([`attach`]).
//!
//! The tracer is one thread: ptrace requests are accepted only from the thread that became the
//! tracer, and it waits with `__WNOTHREAD` so it never reaps a child another thread of
//! tcpdoctor waits for. Nothing else may `waitpid` a traced program: its exit status is read
//! through [`Tracer::try_wait`].

pub mod attach;
mod fds;
pub mod filter;
mod record;
mod regs;
mod spawn;

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use tcpdoctor_core::syscalls::{Call, CallKind, Trace, TraceStatus, TracedProcess, TracedSocket};
use tcpdoctor_core::time::Timestamp;

pub use spawn::{spawn, Spawned};

/// Socket-option calls kept from earlier windows (a server sets a handful per connection).
pub const MAX_SETUP: usize = 100_000;

/// What the tracer thread shares with the rest of tcpdoctor.
#[derive(Default)]
pub struct Shared {
    pub calls: Vec<Call>,
    pub sockets: Vec<TracedSocket>,
    pub processes: Vec<TracedProcess>,
    pub dropped: u64,
    pub traced_calls: u64,
    pub tracer_ns: u64,
    /// The traced program's own exit status (wait(2)'s raw status), once it ended.
    pub root_status: Option<i32>,
    /// The tracer thread ended: every traced task is gone (or it failed: `error`).
    pub done: bool,
    pub error: Option<String>,
    /// Start of the current window.
    pub window_start: Timestamp,
    /// `setsockopt` calls of the earlier windows (`Trace::setup`), at most [`MAX_SETUP`].
    pub setup: Vec<Call>,
}

impl Shared {
    fn sync_sockets(&mut self, list: &[TracedSocket], changed: bool) {
        if changed {
            self.sockets = list.to_vec();
        } else if list.len() > self.sockets.len() {
            let from = self.sockets.len();
            self.sockets.extend_from_slice(&list[from..]);
        }
    }
}

/// A traced program: its pid, its exit status, and the calls recorded so far.
pub struct Tracer {
    pid: u32,
    status: TraceStatus,
    shared: Arc<Mutex<Shared>>,
    thread: Option<JoinHandle<()>>,
}

impl Tracer {
    pub fn id(&self) -> u32 {
        self.pid
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The program's exit status once it has ended (the tracer reaped it). When the tracer
    /// thread ended without reaping it (it panicked: the kernel then kills what it traced,
    /// `PTRACE_O_EXITKILL`, and the program is no longer traced), it is reaped here; a status
    /// nobody can read any more is exit status 255, never a success.
    pub fn try_wait(&self) -> Option<ExitStatus> {
        let mut s = self.lock();
        if s.root_status.is_none() && s.done {
            let mut raw = 0;
            // SAFETY: waits, without blocking, for our own child, whose tracer is gone.
            let r = unsafe { libc::waitpid(self.pid as i32, &mut raw, libc::WNOHANG) };
            if r == self.pid as i32 {
                s.root_status = Some(raw);
            } else if r < 0 {
                s.root_status = Some(255 << 8);
            }
        }
        s.root_status.map(ExitStatus::from_raw)
    }

    /// The calls recorded since the last `take` (or the start), with every socket and process
    /// seen so far; starts a new window.
    pub fn take(&self) -> Trace {
        let at = record::now();
        let mut s = self.lock();
        let calls = std::mem::take(&mut s.calls);
        let started = std::mem::replace(&mut s.window_start, at);
        let setup = s.setup.clone();
        for c in calls.iter().filter(|c| c.kind == CallKind::Setsockopt) {
            if s.setup.len() < MAX_SETUP {
                s.setup.push(c.clone());
            }
        }
        let status = match &s.error {
            Some(e) => TraceStatus::Unavailable { reason: e.clone() },
            None => self.status.clone(),
        };
        let t = Trace {
            status,
            processes: s.processes.clone(),
            sockets: s.sockets.clone(),
            calls,
            setup,
            dropped: std::mem::take(&mut s.dropped),
            traced_calls: std::mem::take(&mut s.traced_calls),
            tracer_ns: std::mem::take(&mut s.tracer_ns),
            started,
            ended: at,
        };
        drop(s);
        t
    }

    /// Waits (at most `limit`) for the tracer thread to end — every traced task gone — and
    /// returns the last window. The caller must have stopped the program.
    pub fn finish(mut self, limit: std::time::Duration) -> Trace {
        let start = std::time::Instant::now();
        while !self.lock().done && start.elapsed() < limit {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        if self.lock().done {
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
        self.take()
    }
}

/// How a task ended, in words.
pub fn ended_how(status: &nix::sys::wait::WaitStatus) -> String {
    use nix::sys::wait::WaitStatus;
    match status {
        WaitStatus::Exited(_, code) => format!("exited {code}"),
        WaitStatus::Signaled(_, sig, _) => format!("killed by {}", sig.as_str()),
        other => format!("{other:?}"),
    }
}

/// Whether `program` can be executed: a path to a file, or a name found on PATH.
pub fn found(program: &str) -> bool {
    if program.contains('/') {
        return std::path::Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|d| d.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended_tracer(pid: u32) -> Tracer {
        Tracer {
            pid,
            status: TraceStatus::Traced,
            shared: Arc::new(Mutex::new(Shared {
                done: true,
                ..Shared::default()
            })),
            thread: None,
        }
    }

    /// A tracer thread that ended without reaping the program (it panicked) leaves its real
    /// status to be read, not a made-up success.
    #[test]
    fn a_status_the_tracer_did_not_read_is_the_programs_own_or_a_failure_never_success() {
        // Reaped below through the tracer's `try_wait`, as a program whose tracer died is.
        #[allow(clippy::zombie_processes)]
        let child = std::process::Command::new("sh")
            .args(["-c", "exit 7"])
            .spawn()
            .expect("sh");
        let t = ended_tracer(child.id());
        let status = loop {
            if let Some(s) = t.try_wait() {
                break s;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        };
        assert_eq!(status.code(), Some(7), "the program's own status");
        assert_eq!(t.try_wait().and_then(|s| s.code()), Some(7), "kept");
        // Reaped already (by someone else): the status is lost, and not a success.
        let gone = ended_tracer(child.id());
        let lost = gone.try_wait().expect("ended");
        assert!(!lost.success(), "{lost:?}");
    }
}
