//! The sandbox's first process (PID 1 of its PID namespace): runs the user's command, reaps
//! every orphan, and exits with the command's status.
//!
//! Why a PID namespace: when its first process exits, the kernel kills every other process
//! in it — background jobs, daemons that called setsid(), everything — and the sandbox's
//! `waitpid` on it returns only once they are all gone. Teardown cannot leak a process.
//! Rules:
//! 1. It dies with tcpdoctor (PR_SET_PDEATHSIG), so a killed tcpdoctor leaves nothing.
//! 2. One command string runs through `/bin/sh -c`; several words are exec'd as they are.
//! 3. Its exit status is the command's, or 128 + the signal that killed it; 127 when the
//!    command cannot be started.
//! 4. Traced (unless `--no-trace`): the command starts under `crate::trace` (this process is
//!    its tracer: tcpdoctor itself, having unshared the PID namespace, may not start the
//!    tracer's thread); when it exits, its calls are written as JSON to the anonymous file
//!    tcpdoctor made before the fork (a memfd), which it reads once this process is gone. This thread then never calls
//!    `waitpid`: every process of the command is traced (forks are followed), so an orphan
//!    re-parented to PID 1 is a tracee of the tracer thread, which reaps it. A wait here would
//!    not be safe even with `__WNOTHREAD`: the kernel reports a tracee's *stops* to its real
//!    parent when both are threads of one process (the orphan's real parent is this thread),
//!    so the wait would take a stop the tracer never sees, and the orphan would stay stopped
//!    for ever.

use std::fs::File;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::Command;

use tcpdoctor_core::syscalls::{Trace, TraceStatus};

use crate::trace::Spawned;

use crate::capture::stop;

/// The command the sandbox runs.
pub fn command(words: &[String]) -> Command {
    if let [one] = words {
        let mut c = Command::new("/bin/sh");
        c.arg("-c").arg(one);
        c
    } else {
        let mut c = Command::new(&words[0]);
        c.args(&words[1..]);
        c
    }
}

/// Runs in the forked child; never returns. `trace_to`: trace the command, its calls to this
/// file (rule 4).
pub fn run(words: &[String], trace_to: Option<&File>) -> ! {
    stop::uninstall();
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        )
    };
    let mut cmd = command(words);
    // The command starts with default signal handling even though PID 1 ignores signals.
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
                libc::signal(sig, libc::SIG_DFL);
            }
            Ok(())
        });
    }
    if let Some(file) = trace_to {
        traced(words, cmd, file);
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("tcpdoctor: error: sandbox: cannot run `{}`: {e}", words[0]);
            exit(127);
        }
    };
    let want = child.id() as libc::pid_t;
    loop {
        let mut status = 0;
        // SAFETY: waits for any child of this process.
        let pid = unsafe { libc::waitpid(-1, &mut status, 0) };
        if pid == want {
            let code = if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            };
            exit(code);
        }
        if pid < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            exit(127);
        }
    }
}

/// Rule 4: the command traced, its calls written to `file` when it exits; never returns.
fn traced(words: &[String], cmd: Command, mut file: &File) -> ! {
    let (code, trace) = match crate::trace::spawn(cmd) {
        Ok(Spawned::Traced(t)) => {
            let status = loop {
                if let Some(s) = t.try_wait() {
                    break s;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            };
            (code_of(status), t.take())
        }
        Ok(Spawned::Untraced(mut child, reason)) => {
            eprintln!("tcpdoctor: sandbox: the command runs untraced: {reason}");
            let status = child.wait().map_or(127, code_of);
            (
                status,
                Trace::not_traced(TraceStatus::Unavailable { reason }),
            )
        }
        Err(e) => {
            eprintln!("tcpdoctor: error: sandbox: cannot run `{}`: {e}", words[0]);
            exit(127);
        }
    };
    if let Ok(text) = serde_json::to_vec(&trace) {
        let _ = file.write_all(&text);
    }
    exit(code);
}

fn code_of(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn exit(code: i32) -> ! {
    // SAFETY: _exit skips the parent's atexit handlers and buffers, which belong to tcpdoctor.
    unsafe { libc::_exit(code) }
}
