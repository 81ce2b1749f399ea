//! `tcpdoctor sandbox`: run commands in a private network namespace and capture its loopback.
//!
//! Capture needs CAP_NET_RAW, which most users do not have on the host. Inside a network
//! namespace created through a user namespace, an ordinary user holds every capability over
//! that namespace: it can bring its loopback up and capture on it. The commands' traffic on
//! 127.0.0.1 is all there is to see, and nothing on the host is seen or touched.
//!
//! What runs where:
//! 1. tcpdoctor opens the output file as the user, then enters the namespaces
//!    ([`namespace::enter`]) while still single-threaded, and opens the capture on the
//!    namespace's `lo` before any command starts.
//! 2. It forks the namespace's first process ([`init`]), which runs the command.
//! 3. tcpdoctor reads the ring until that first process exits (SIGCHLD). By then every
//!    process in the namespace has gone (the PID namespace guarantees it); the capture drains
//!    and stops, and tcpdoctor exits, taking the namespaces with it.
//!    No mount is made, so none is left behind.
//! 4. Ctrl-C or SIGTERM SIGKILLs the first process (the handler does it at once), so the
//!    same teardown runs.

mod init;

/// A command line as `sandbox`, `sandbox --delay` and `trace` take it: one argument through
/// /bin/sh -c, several exec'd as they are.
pub use init::command;
pub mod namespace;

use std::io::{self, Read, Seek};

use anyhow::Context;
use tcpdoctor_core::wire::write::LINKTYPE_ETHERNET;

use crate::capture::{self, stop, CaptureConfig, Outcome, Outputs, Ring};

/// How the sandboxed command ended, and what was captured.
pub struct SandboxOutcome {
    /// The command's exit status (128 + signal if a signal ended it; 130 after Ctrl-C).
    pub status: i32,
    pub capture: Outcome,
    /// The command's system calls, when traced (`init` rule 4).
    pub trace: Option<tcpdoctor_core::syscalls::Trace>,
}

/// Runs `words` in a fresh network namespace, capturing its loopback per `cfg`. Must be called
/// while the process is single-threaded.
/// `ready` runs once the capture is open, before the command starts.
pub fn run(
    cfg: &CaptureConfig,
    words: &[String],
    trace: bool,
    ready: impl FnOnce(),
) -> anyhow::Result<SandboxOutcome> {
    // Where the first process leaves the command's calls (`init` rule 4): an anonymous
    // memory file, which no other process can name, replace or read (a name in the shared
    // temporary directory could be planted — a symlink, another user's file — before it).
    let trace_file = match trace {
        true => Some(handoff_file().context("sandbox: creating the trace's hand-off file")?),
        false => None,
    };
    let out = Outputs::open(cfg, LINKTYPE_ETHERNET)?;
    let opened = namespace::enter().and_then(|()| {
        Ring::open("lo", &cfg.ports, cfg.snaplen, cfg.buffer).context("capturing in the sandbox")
    });
    let ring = match opened {
        Ok(r) => r,
        Err(e) => {
            if let Some(p) = &cfg.file {
                let _ = std::fs::remove_file(p);
            }
            return Err(e);
        }
    };
    ready();
    stop::install();
    stop::on_child_exit();
    // SAFETY: the process is single-threaded (the kernel granted the new user namespace only
    // because it is); the child calls init::run and never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error()).context("starting the sandbox");
    }
    if pid == 0 {
        drop(ring);
        init::run(words, trace_file.as_ref());
    }
    stop::kill_on_stop(pid);
    // No thread: a process that unshared its PID namespace may not create any. The capture
    // runs here until SIGCHLD (or Ctrl-C) stops it.
    let outcome = capture::run(ring, out, cfg);
    if outcome.is_err() {
        // SAFETY: kills our own child, so the wait below returns.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let status = wait(pid);
    let status = if stop::interrupted() { 130 } else { status };
    let trace = trace_file.as_ref().and_then(|f| {
        let mut b = Vec::new();
        // From the start: the first process's writes moved the shared offset.
        (&*f).seek(io::SeekFrom::Start(0)).ok()?;
        (&*f).read_to_end(&mut b).ok()?;
        serde_json::from_slice(&b).ok()
    });
    let outcome = outcome?;
    Ok(SandboxOutcome {
        status,
        capture: outcome,
        trace,
    })
}

/// An anonymous file in memory (`memfd_create`), closed on exec: the first process, forked
/// without an exec, keeps it; the commands it starts do not get it.
fn handoff_file() -> io::Result<std::fs::File> {
    use std::os::fd::FromRawFd;
    // SAFETY: a NUL-terminated name and a flag; the descriptor returned is ours alone.
    let fd = unsafe { libc::memfd_create(c"tcpdoctor-sandbox-trace".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just opened and is owned by nothing else.
    Ok(unsafe { std::fs::File::from_raw_fd(fd) })
}

/// Waits for the namespace's first process; its exit status.
fn wait(pid: libc::pid_t) -> i32 {
    loop {
        let mut status = 0;
        // SAFETY: waits for our own child.
        let r = unsafe { libc::waitpid(pid, &mut status, 0) };
        if r == pid {
            return if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            };
        }
        if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return 127;
        }
    }
}
