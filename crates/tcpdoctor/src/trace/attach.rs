//! Attaching to a running process for a bounded time (`inspect --pid P --trace D`).
//!
//! 1. Every thread of the process is seized (PTRACE_SEIZE, following the threads it starts)
//!    and interrupted once, then resumed with PTRACE_SYSCALL. A running process cannot be
//!    given a seccomp filter, so every system call it makes stops it twice (entry and exit):
//!    the overhead is higher than for a program tcpdoctor starts, and is stated (calls, the
//!    tracer's time per call).
//! 2. Entry and exit are told apart by PTRACE_GET_SYSCALL_INFO; only the calls of
//!    [`super::filter::trapped`] are recorded.
//! 3. A process stopped by a stop signal (before the attach or during it) stays stopped: its
//!    group-stop is left in place with `PTRACE_LISTEN`, never resumed by the tracer.
//! 4. At the deadline (or Ctrl-C) a timer thread wakes the tracer out of its wait; each
//!    thread is interrupted and detached from whatever stop it reports next, a pending signal
//!    passed on with the detach, so the process goes on as if nothing happened.
//! 5. Refusals name their cause: another user's process, Yama's ptrace_scope (1: only
//!    descendants, unless root or CAP_SYS_PTRACE), a process already traced.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::ptrace::{self, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tcpdoctor_core::syscalls::{Trace, TraceStatus};

use super::record::{self, Recorder};
use super::{ended_how, Shared, Tracer};

/// What an attach cost, besides the trace.
#[derive(Clone, Debug, Default)]
pub struct AttachCost {
    /// Every system call stop (two per call of any kind).
    pub stops: u64,
    pub threads: usize,
    /// Threads detached at the end (the others exited while traced).
    pub detached: usize,
}

extern "C" fn wake(_: libc::c_int) {}

fn tasks(pid: u32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn refusal(pid: u32, e: Errno) -> String {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    match (e, scope.as_str()) {
        (Errno::ESRCH, _) => format!("process {pid} does not exist"),
        (Errno::EPERM, "1") => format!(
            "attaching to process {pid} was refused: kernel.yama.ptrace_scope = 1 lets a user \
             trace only its own descendants (run tcpdoctor as root, or with CAP_SYS_PTRACE)"
        ),
        (Errno::EPERM, "2") | (Errno::EPERM, "3") => {
            format!("attaching to process {pid} was refused: kernel.yama.ptrace_scope = {scope}")
        }
        (Errno::EPERM, _) => format!(
            "attaching to process {pid} was refused: it belongs to another user, is already \
             traced (a debugger, strace), or a security policy forbids ptrace"
        ),
        (e, _) => format!("attaching to process {pid}: {e}"),
    }
}

/// Traces `pid` for `duration` (or until `stop`), then detaches (rules 1–4).
pub fn attach(
    pid: u32,
    duration: Duration,
    stop: Arc<AtomicBool>,
) -> Result<(Trace, AttachCost), String> {
    let shared = Arc::new(Mutex::new(Shared {
        window_start: record::now(),
        ..Shared::default()
    }));
    let worker_shared = Arc::clone(&shared);
    let (tid_tx, tid_rx) = std::sync::mpsc::channel::<libc::pid_t>();
    let worker = std::thread::Builder::new()
        .name("tcpdoctor-attach".into())
        .spawn(move || {
            // SAFETY: gettid has no preconditions.
            let _ = tid_tx.send(unsafe { libc::gettid() });
            run(pid, duration, &worker_shared)
        })
        .map_err(|e| format!("starting the tracer thread: {e}"))?;
    let tracer_tid = tid_rx
        .recv()
        .map_err(|_| "the tracer thread ended at once".to_string())?;
    // Rule 4: the timer wakes the tracer's wait (EINTR) at the deadline or on Ctrl-C.
    let action = nix::sys::signal::SigAction::new(
        nix::sys::signal::SigHandler::Handler(wake),
        nix::sys::signal::SaFlags::empty(),
        nix::sys::signal::SigSet::empty(),
    );
    // SAFETY: the handler does nothing; installing it only makes waits return EINTR.
    let _ = unsafe { nix::sys::signal::sigaction(Signal::SIGUSR2, &action) };
    let started = Instant::now();
    while !worker.is_finished() {
        if started.elapsed() >= duration || stop.load(Ordering::Relaxed) {
            shared.lock().unwrap_or_else(|p| p.into_inner()).done = true;
            // SAFETY: signals one thread of our own process.
            unsafe {
                libc::syscall(libc::SYS_tgkill, libc::getpid(), tracer_tid, libc::SIGUSR2);
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let cost = worker
        .join()
        .map_err(|_| "the tracer thread panicked".to_string())??;
    let t = Tracer {
        pid,
        status: TraceStatus::Attached,
        shared,
        thread: None,
    };
    Ok((t.take(), cost))
}

fn run(pid: u32, duration: Duration, shared: &Arc<Mutex<Shared>>) -> Result<AttachCost, String> {
    let lock = || shared.lock().unwrap_or_else(|p| p.into_inner());
    let opts = Options::PTRACE_O_TRACESYSGOOD | Options::PTRACE_O_TRACECLONE;
    let mut live: HashSet<i32> = HashSet::new();
    // The leader first: its refusal is the process's.
    ptrace::seize(Pid::from_raw(pid as i32), opts).map_err(|e| refusal(pid, e))?;
    live.insert(pid as i32);
    // Then every other thread, listed again until no new one appears: a thread started by
    // one not yet seized is not followed (one started by a seized thread is, and refuses a
    // second seize: its clone event adds it).
    for _ in 0..100 {
        let mut added = false;
        for tid in tasks(pid) {
            if !live.contains(&tid) && ptrace::seize(Pid::from_raw(tid), opts).is_ok() {
                live.insert(tid);
                added = true;
            }
        }
        if !added {
            break;
        }
    }
    let mut cost = AttachCost {
        threads: live.len(),
        ..AttachCost::default()
    };
    let mut rec = Recorder::new(Arc::clone(shared));
    for &tid in &live {
        rec.task_of(tid as u32, pid);
        let _ = ptrace::interrupt(Pid::from_raw(tid));
    }
    let flags = WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD;
    let deadline = Instant::now() + duration;
    // Phase 1: trace until the deadline.
    while !live.is_empty() && !lock().done && Instant::now() < deadline {
        let status = match waitpid(None, Some(flags)) {
            Ok(s) => s,
            Err(Errno::EINTR) => continue,
            Err(_) => break,
        };
        let t0 = Instant::now();
        match status {
            WaitStatus::Exited(p, _) | WaitStatus::Signaled(p, _, _) => {
                live.remove(&p.as_raw());
                rec.ended(p.as_raw() as u32, ended_how(&status));
                continue;
            }
            WaitStatus::PtraceSyscall(p) => {
                cost.stops += 1;
                syscall_stop(&mut rec, p);
                let _ = ptrace::syscall(p, None);
            }
            WaitStatus::PtraceEvent(p, sig, ev) => {
                if ev == libc::PTRACE_EVENT_CLONE {
                    if let Ok(new) = ptrace::getevent(p) {
                        live.insert(new as i32);
                        cost.threads += 1;
                        rec.born(p, new as u32, true);
                    }
                }
                if ev == libc::PTRACE_EVENT_STOP && is_group_stop(sig) {
                    // The process is stopped (SIGSTOP, SIGTSTP, …), or was when we attached:
                    // it stays stopped until a SIGCONT, which the kernel reports as another
                    // PTRACE_EVENT_STOP (with SIGTRAP). PTRACE_SYSCALL here would run it.
                    listen(p);
                } else {
                    // PTRACE_EVENT_STOP (our interrupt, a new thread's start, the end of a
                    // group-stop) and the clone event itself: resume, stopping at calls.
                    let _ = ptrace::syscall(p, None);
                }
            }
            WaitStatus::Stopped(p, sig) => {
                live.insert(p.as_raw());
                let _ = ptrace::syscall(p, Some(sig));
            }
            _ => {}
        }
        lock().tracer_ns += t0.elapsed().as_nanos() as u64;
    }
    // Phase 2 (rule 4): stop each thread once more and detach it from that stop.
    for &tid in &live {
        let _ = ptrace::interrupt(Pid::from_raw(tid));
    }
    let limit = Instant::now() + Duration::from_secs(5);
    // Threads already detached (or ended): a clone event naming one after its first stop
    // was seen must not add it back.
    let mut gone: HashSet<i32> = HashSet::new();
    while !live.is_empty() && Instant::now() < limit {
        let status = match waitpid(None, Some(flags)) {
            Ok(s) => s,
            Err(Errno::EINTR) => continue,
            Err(_) => break,
        };
        if let Some(p) = status.pid() {
            gone.insert(p.as_raw());
        }
        match status {
            WaitStatus::Exited(p, _) | WaitStatus::Signaled(p, _, _) => {
                live.remove(&p.as_raw());
                rec.ended(p.as_raw() as u32, ended_how(&status));
            }
            WaitStatus::Stopped(p, sig) => {
                if ptrace::detach(p, Some(sig)).is_ok() {
                    cost.detached += 1;
                }
                live.remove(&p.as_raw());
            }
            WaitStatus::PtraceSyscall(p) => {
                syscall_stop(&mut rec, p);
                if ptrace::detach(p, None).is_ok() {
                    cost.detached += 1;
                }
                live.remove(&p.as_raw());
            }
            WaitStatus::PtraceEvent(p, _, ev) => {
                if ev == libc::PTRACE_EVENT_CLONE {
                    // A thread started during the detach is traced too: its first stop comes,
                    // and it is detached from it.
                    if let Ok(new) = ptrace::getevent(p) {
                        if !gone.contains(&(new as i32)) {
                            live.insert(new as i32);
                        }
                        cost.threads += 1;
                    }
                }
                if ptrace::detach(p, None).is_ok() {
                    cost.detached += 1;
                }
                live.remove(&p.as_raw());
            }
            _ => {}
        }
    }
    Ok(cost)
}

/// Whether a `PTRACE_EVENT_STOP` with `sig` is a group-stop (the process stopped by a stop
/// signal) rather than an interrupt or a new thread's first stop (SIGTRAP).
fn is_group_stop(sig: Signal) -> bool {
    matches!(
        sig,
        Signal::SIGSTOP | Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU
    )
}

/// `PTRACE_LISTEN`: the task stays in its group-stop, and the tracer hears when it ends.
fn listen(p: Pid) {
    // SAFETY: a ptrace request without memory arguments on a task we seized.
    unsafe { libc::ptrace(libc::PTRACE_LISTEN, p.as_raw(), 0, 0) };
}

/// Rule 2: an entry or an exit stop, told apart by the kernel.
fn syscall_stop(rec: &mut Recorder, p: Pid) {
    let Some(info) = syscall_info(p) else {
        return;
    };
    if info.op == SYSCALL_INFO_ENTRY {
        if super::filter::kind_of(info.nr as i64) != tcpdoctor_core::syscalls::CallKind::Other {
            let _ = rec.entry(p);
        }
    } else if info.op == SYSCALL_INFO_EXIT && rec.in_call(p.as_raw() as u32) {
        let _ = rec.exit(p);
    }
}

/// `PTRACE_GET_SYSCALL_INFO` (Linux 5.3), and its `op` values: declared here because the C
/// libraries' bindings differ (glibc's has them, musl's does not), and the layout is the
/// kernel's (`struct ptrace_syscall_info`, include/uapi/linux/ptrace.h).
const PTRACE_GET_SYSCALL_INFO: libc::c_uint = 0x420e;
const SYSCALL_INFO_ENTRY: u8 = 1;
const SYSCALL_INFO_EXIT: u8 = 2;

/// The head of `struct ptrace_syscall_info`: `op`, then at offset 24 the union whose first
/// member is the entry's `nr` (or the exit's `rval`), and room for the rest of the union.
#[repr(C)]
#[derive(Default)]
struct SyscallInfo {
    op: u8,
    _pad: [u8; 3],
    _arch: u32,
    _instruction_pointer: u64,
    _stack_pointer: u64,
    nr: u64,
    _rest: [u64; 7],
}

/// The kind of stop `p` is in, and at an entry the call's number.
fn syscall_info(p: Pid) -> Option<SyscallInfo> {
    let mut info = SyscallInfo::default();
    // SAFETY: the kernel writes at most `size_of::<SyscallInfo>()` bytes into `info`, which
    // lives across the call; `p` is a task we seized and is in a syscall stop.
    let r = unsafe {
        libc::ptrace(
            PTRACE_GET_SYSCALL_INFO as _,
            p.as_raw(),
            std::mem::size_of::<SyscallInfo>(),
            &mut info as *mut SyscallInfo,
        )
    };
    (r > 0).then_some(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(path: &std::path::Path) -> usize {
        std::fs::read_to_string(path).map_or(0, |t| t.lines().count())
    }

    fn state(pid: u32) -> char {
        crate::procfs::stat(pid as i32).map_or('?', |s| s.state)
    }

    /// Bounded poll (no sleep stands in for readiness): until `done`, at most 10 s.
    fn until(what: &str, mut done: impl FnMut() -> bool) {
        let start = Instant::now();
        while !done() {
            assert!(start.elapsed() < Duration::from_secs(10), "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A process stopped by SIGSTOP does not run while it is attached to, and is still
    /// stopped after the detach; SIGCONT then resumes it. (Resuming its group-stop with
    /// PTRACE_SYSCALL ran it for the whole attach.)
    #[test]
    fn a_stopped_process_stays_stopped_through_the_attach() {
        let dir = std::env::temp_dir().join(format!("td-attach-stop-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("ticks");
        let mut child = std::process::Command::new("sh")
            .arg("-c")
            .arg("while :; do echo x >> \"$0\"; sleep 0.005; done")
            .arg(&file)
            .spawn()
            .expect("sh");
        let pid = child.id();
        until("the loop ticks", || lines(&file) > 0);
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(pid as i32, libc::SIGSTOP) };
        until("stopped", || state(pid) == 'T');
        let before = lines(&file);
        let got = attach(
            pid,
            Duration::from_millis(300),
            Arc::new(AtomicBool::new(false)),
        );
        let during = lines(&file);
        let after_state = state(pid);
        // SAFETY: as above.
        unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        let resumed = {
            let start = Instant::now();
            while lines(&file) == during && start.elapsed() < Duration::from_secs(10) {
                std::thread::sleep(Duration::from_millis(5));
            }
            lines(&file) > during
        };
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        let (_, cost) = got.expect("attached");
        assert_eq!(cost.detached, cost.threads, "{cost:?}");
        assert_eq!(during, before, "the stopped loop ran while attached");
        assert_eq!(after_state, 'T', "still stopped after the detach");
        assert!(resumed, "SIGCONT resumes it once detached");
    }
}
