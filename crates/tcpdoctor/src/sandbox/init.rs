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

use std::os::unix::process::CommandExt;
use std::process::Command;

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

/// Runs in the forked child; never returns.
pub fn run(words: &[String]) -> ! {
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

fn exit(code: i32) -> ! {
    // SAFETY: _exit skips the parent's atexit handlers and buffers, which belong to tcpdoctor.
    unsafe { libc::_exit(code) }
}
