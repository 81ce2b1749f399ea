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
//! 3. A command runs in far by `setns` between fork and exec. Whatever it starts stays in far
//!    (a network namespace cannot be left without privilege over another), so the far
//!    namespace names the far tree: readiness is a socket listening there, and stopping it is
//!    stopping every process whose `/proc/PID/ns/net` is far — a daemon that left the process
//!    group included.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::Context;

/// Why the far server did not come to listen.
pub enum NotListening {
    /// Ctrl-C (or SIGTERM, SIGHUP) while it was starting.
    Interrupted,
    /// Its command exited with this status, leaving nothing in far.
    Exited(std::process::ExitStatus),
    /// Nothing listened within the limit.
    TimedOut,
}

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

    /// Whether a TCP socket in the far namespace listens on `port` (its own /proc/net/tcp{,6}:
    /// no probe connection the server would have to accept, nothing in the captures).
    pub fn far_listens(&self, port: u16) -> anyhow::Result<bool> {
        self.in_far(|| listening(port))
    }

    /// The ports TCP sockets in the far namespace listen on, in ascending order.
    pub fn far_listening_ports(&self) -> anyhow::Result<Vec<u16>> {
        self.in_far(listening_ports)
    }

    /// Waits (up to `limit`) until a socket in far listens on `port`. `exited` says whether the
    /// command that starts the server has ended: one that ends with status 0 while processes
    /// remain in far (`srv &`, a daemon) is still starting. Why it did not listen, if not.
    pub fn wait_listening(
        &self,
        port: u16,
        limit: std::time::Duration,
        exited: impl FnMut() -> io::Result<Option<std::process::ExitStatus>>,
    ) -> anyhow::Result<Result<(), NotListening>> {
        self.wait_until(limit, exited, || {
            self.far_listens(port).map(|l| l.then_some(()))
        })
    }

    /// [`Self::wait_listening`] for a server whose port is not known: until a socket in far
    /// listens on any port; the ports listened on then.
    pub fn wait_listening_any(
        &self,
        limit: std::time::Duration,
        exited: impl FnMut() -> io::Result<Option<std::process::ExitStatus>>,
    ) -> anyhow::Result<Result<Vec<u16>, NotListening>> {
        self.wait_until(limit, exited, || {
            let ports = self.far_listening_ports()?;
            Ok((!ports.is_empty()).then_some(ports))
        })
    }

    fn wait_until<T>(
        &self,
        limit: std::time::Duration,
        mut exited: impl FnMut() -> io::Result<Option<std::process::ExitStatus>>,
        mut ready: impl FnMut() -> anyhow::Result<Option<T>>,
    ) -> anyhow::Result<Result<T, NotListening>> {
        let start = std::time::Instant::now();
        loop {
            if crate::capture::stop::interrupted() {
                return Ok(Err(NotListening::Interrupted));
            }
            if let Some(v) = ready()? {
                return Ok(Ok(v));
            }
            if let Some(status) = exited()? {
                if !status.success() || self.far_processes().is_empty() {
                    return Ok(Err(NotListening::Exited(status)));
                }
            }
            if start.elapsed() > limit {
                return Ok(Err(NotListening::TimedOut));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    /// The processes in the far namespace (as far as /proc lets this user see).
    pub fn far_processes(&self) -> Vec<libc::pid_t> {
        // SAFETY: fstat on a descriptor we hold.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(self.far.as_raw_fd(), &mut st) } != 0 {
            return Vec::new();
        }
        let want = format!("net:[{}]", st.st_ino);
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.flatten()
            .filter_map(|e| e.file_name().to_str()?.parse::<libc::pid_t>().ok())
            .filter(|pid| {
                std::fs::read_link(format!("/proc/{pid}/ns/net"))
                    .is_ok_and(|l| l.to_string_lossy() == want)
            })
            .collect()
    }

    /// SIGTERM to every process in the far namespace, SIGKILL after `grace` to what is left.
    pub fn stop_far_processes(&self, grace: std::time::Duration) {
        let signal = |sig| {
            for pid in self.far_processes() {
                // SAFETY: kill(2) of a process in the namespace we made.
                unsafe { libc::kill(pid, sig) };
            }
        };
        let mut seen = self.far_processes();
        signal(libc::SIGTERM);
        let start = std::time::Instant::now();
        while start.elapsed() < grace {
            reap(&seen);
            if self.far_processes().is_empty() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        seen = self.far_processes();
        signal(libc::SIGKILL);
        for _ in 0..100 {
            reap(&seen);
            if self.far_processes().is_empty() {
                return;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }
}

/// Collects `pids` that have exited if they are our children (daemons re-parented to us);
/// never waits on any other child, whose `Child` handle will, nor on a traced process: the
/// wait would take its tracer's stops (the SIGTERM's, which then never reaches it), and its
/// tracer thread reaps it (`procfs::traced`).
fn reap(pids: &[libc::pid_t]) {
    for &pid in pids {
        if crate::procfs::traced(pid) {
            continue;
        }
        let mut status = 0;
        // SAFETY: waitpid on one pid, without blocking; ECHILD when it is not ours.
        unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
    }
}

/// Whether a TCP socket of this thread's network namespace listens on `port`.
fn listening(port: u16) -> bool {
    listening_ports().contains(&port)
}

/// The ports TCP sockets of this thread's network namespace listen on (state 0A in
/// /proc/net/tcp{,6}), ascending, each once.
fn listening_ports() -> Vec<u16> {
    let mut ports: Vec<u16> = ["/proc/thread-self/net/tcp", "/proc/thread-self/net/tcp6"]
        .iter()
        .filter_map(|p| std::fs::read_to_string(p).ok())
        .flat_map(|table| {
            table
                .lines()
                .skip(1)
                .filter_map(|l| {
                    let f: Vec<&str> = l.split_whitespace().collect();
                    if f.len() > 3 && f[3] == "0A" {
                        let (_, port) = f[1].rsplit_once(':')?;
                        u16::from_str_radix(port, 16).ok()
                    } else {
                        None
                    }
                })
                .collect::<Vec<_>>()
        })
        .collect();
    ports.sort_unstable();
    ports.dedup();
    ports
}
