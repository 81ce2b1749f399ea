//! The path's two network namespaces: *near*, where tcpdoctor and the client's sockets live,
//! and *far*, where the server runs. Both belong to one user namespace tcpdoctor created, so
//! it holds every capability over both without privilege on the host.
//!
//! Rules:
//! 1. The near namespace is the one this process entered ([`crate::sandbox::namespace`]);
//!    the far one is made by `unshare(CLONE_NEWNET)` on the calling thread, which then
//!    returns to near with `setns`. Namespaces are per thread: nothing else moves.
//! 2. Each namespace is held by an open descriptor; when the descriptors and every process in
//!    a namespace are gone, the kernel removes it (nothing is mounted, nothing is left).
//! 3. A command runs in far by `setns` between fork and exec.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::Context;

pub struct Namespaces {
    near: OwnedFd,
    far: OwnedFd,
}

fn open_current() -> io::Result<OwnedFd> {
    // SAFETY: open(2) of a fixed path.
    let raw = unsafe {
        libc::open(
            c"/proc/thread-self/ns/net".as_ptr(),
            libc::O_RDONLY | libc::O_CLOEXEC,
        )
    };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(raw) })
}

fn enter(ns: &OwnedFd) -> io::Result<()> {
    // SAFETY: setns(2) with a namespace descriptor we hold.
    if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Namespaces {
    /// Creates the far namespace (loopback up), runs `setup` inside it, and comes back.
    pub fn create<T>(setup: impl FnOnce() -> anyhow::Result<T>) -> anyhow::Result<(Self, T)> {
        let near = open_current().context("opening this network namespace")?;
        // SAFETY: unshare(2) with a namespace flag only.
        if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
            return Err(io::Error::last_os_error()).context("creating the far network namespace");
        }
        let made = open_current()
            .context("opening the far network namespace")
            .and_then(|far| {
                crate::sandbox::namespace::loopback_up()?;
                Ok((far, setup()?))
            });
        enter(&near).context("returning to the near network namespace")?;
        let (far, value) = made?;
        Ok((Namespaces { near, far }, value))
    }

    /// Runs `f` with this thread in the far namespace.
    pub fn in_far<T>(&self, f: impl FnOnce() -> T) -> anyhow::Result<T> {
        enter(&self.far).context("entering the far network namespace")?;
        let value = f();
        enter(&self.near).context("returning to the near network namespace")?;
        Ok(value)
    }

    /// Makes `cmd` start in the far namespace.
    pub fn spawn_in_far(&self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt;
        let fd = self.far.as_raw_fd();
        // SAFETY: only async-signal-safe calls (setns) between fork and exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
}
