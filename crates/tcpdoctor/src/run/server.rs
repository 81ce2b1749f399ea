//! The server under test: started from a command line in its own process group, its output in
//! a log file, ready when its port accepts and its start-up work is done, accounted from /proc,
//! stopped by process group — and, for a command line, with everything it left running (a
//! daemon that forked out of the group: see `reaper.rs`).
//!
//! CPU accounting:
//! 1. The tree is the server's process group and every descendant of its first process (a
//!    child that moved to a group of its own is still counted) — and, once that process exited
//!    leaving daemons (re-parented to `run`, its subreaper), every descendant of those: the
//!    processes new under `run` since the command started, taken when it exits (a server's
//!    start-up, before any other scenario's server starts).
//! 2. Each process's time on CPU is its process CPU clock, in nanoseconds, exact at the read
//!    and including threads that exited (`procfs::cpu_ns`; the 10 ms ticks of /proc/PID/stat
//!    made a 200-request scenario read 0 or 125% of a core); the ticks split that total into
//!    user and system. Where the clock cannot be read, the sum of the threads' schedstat is
//!    used, which loses a thread's time when it exits (a thread-per-connection server loses
//!    every connection's time when it closes) but not its ticks: when the ticks grew by more
//!    than their rounding (two ticks per process) beyond the nanoseconds, the difference is
//!    such threads' time, and the ticks are the figure. The figure's uncertainty is what the
//!    tree could have used while its clocks were read ([`TreeCpu::uncertainty_s`]).
//! 3. Ready is not idle: a server may listen before it has finished loading. After its port
//!    accepts, `run` waits (up to [`SETTLE_LIMIT`]) until the tree has used less than 5% of a
//!    core for [`QUIET_WINDOWS`] windows of [`SETTLE_WINDOW`] in a row, so start-up work is not
//!    charged to the first scenario.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use tcpdoctor_core::syscalls::{Trace, TraceStatus};

use super::server_proc::{Proc, Waitable};
use crate::proxy::Addr;
use crate::trace::Spawned;

/// A started server and its process group.
pub struct Server {
    child: Proc,
    pgid: libc::pid_t,
    pub log: PathBuf,
    pub command: String,
    /// `stop` has run: dropping it then has nothing left to do (no second scan of /proc).
    stopped: bool,
    /// A user's command line: `run` is its subreaper, and a daemon it forked (out of the
    /// process group) counts as the server running and is stopped with it.
    adopts: bool,
    /// `run`'s descendants before the command started: what is new among them once the
    /// command exited is what it left running (rule 1).
    before: Vec<libc::pid_t>,
    /// The daemons the command left when it exited (re-parented to `run`): counted with
    /// their descendants, as the server (rule 1).
    daemons: Vec<libc::pid_t>,
}

/// How long `wait_ready` waits at most for a server's start-up work to end (rule 3).
pub const SETTLE_LIMIT: Duration = Duration::from_secs(3);
/// One window of the settling watch, and how many quiet ones in a row mean settled.
pub const SETTLE_WINDOW: Duration = Duration::from_millis(10);
pub const QUIET_WINDOWS: u32 = 3;

/// CPU time of a process tree: nanoseconds on CPU (rule 2), the clock ticks that split it into
/// user and system, and how many processes it had.
#[derive(Clone, Copy, Debug, Default)]
pub struct TreeCpu {
    pub ns: u64,
    pub user_ticks: u64,
    pub system_ticks: u64,
    pub processes: u64,
    /// How long reading the processes' clocks took: the read is an instant somewhere in it.
    pub read_ns: u64,
}

impl TreeCpu {
    /// (user, system) seconds since `earlier`: the schedstat total (or the ticks', rule 2),
    /// split in the proportion of the ticks (all user when no tick fell in between).
    pub fn seconds_since(&self, earlier: &TreeCpu) -> (f64, f64) {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let u = self.user_ticks.saturating_sub(earlier.user_ticks) as f64;
        let s = self.system_ticks.saturating_sub(earlier.system_ticks) as f64;
        let precise = self.ns.saturating_sub(earlier.ns) as f64 / 1e9;
        let rounding = 2.0 * self.processes.max(earlier.processes).max(1) as f64 / hz;
        let ticked = (u + s) / hz;
        let total = if ticked > precise + rounding {
            ticked
        } else {
            precise
        };
        if u + s == 0.0 {
            (total, 0.0)
        } else {
            (total * u / (u + s), total * s / (u + s))
        }
    }

    /// What [`TreeCpu::seconds_since`] cannot resolve, seconds: when the ticks are the figure,
    /// their rounding (two ticks per process); otherwise the CPU the tree could have used
    /// while its clocks were read, at each end (every CPU of the machine, for the time the
    /// reads took) — the measured interval's edges are known only that closely.
    pub fn uncertainty_s(&self, earlier: &TreeCpu) -> f64 {
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let u = self.user_ticks.saturating_sub(earlier.user_ticks) as f64;
        let s = self.system_ticks.saturating_sub(earlier.system_ticks) as f64;
        let precise = self.ns.saturating_sub(earlier.ns) as f64 / 1e9;
        let rounding = 2.0 * self.processes.max(earlier.processes).max(1) as f64 / hz;
        if (u + s) / hz > precise + rounding {
            return rounding;
        }
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        (self.read_ns + earlier.read_ns) as f64 / 1e9 * cpus
    }
}

impl Server {
    /// Runs `command` with `sh -c` (full shell: `cd dir && ./srv`, `VAR=x ./srv`, pipes) in a
    /// new process group; stdout and stderr go to `log`. This process becomes a child
    /// subreaper first, so a server that daemonizes stays in its tree and is stopped at the end.
    /// `trace`: trace its system calls (`crate::trace`); the reason is kept when it cannot be.
    pub fn start(command: &str, log: &Path, trace: bool) -> anyhow::Result<Server> {
        let mut s = Server::start_with(command, log, trace, |_| {})?;
        s.adopts = true;
        Ok(s)
    }

    /// As [`Server::start`], with `prepare` applied to the command before it is spawned (the
    /// far end of a WAN path puts it in its network namespace). Its stop ends its process
    /// group only: sweeping every descendant of `run` would also end the server of the other
    /// scenarios (what a daemon of it leaves is swept when that one stops, at the end).
    pub fn start_with(
        command: &str,
        log: &Path,
        trace: bool,
        prepare: impl FnOnce(&mut Command),
    ) -> anyhow::Result<Server> {
        super::reaper::become_subreaper().context("--server: becoming a child subreaper")?;
        let mut cmd = Command::new("/bin/sh");
        cmd.arg("-c").arg(command);
        prepare(&mut cmd);
        Server::spawn(cmd, command.to_string(), log, trace)
            .with_context(|| format!("--server: starting `{command}`"))
    }

    /// Starts this binary itself with `args` (the demo's specimens).
    pub fn start_self(args: &[String], log: &Path, trace: bool) -> anyhow::Result<Server> {
        let exe = std::env::current_exe().context("finding the tcpdoctor binary")?;
        let mut cmd = Command::new(&exe);
        cmd.args(args);
        Server::spawn(cmd, format!("tcpdoctor {}", args.join(" ")), log, trace)
            .with_context(|| format!("starting {}", exe.display()))
    }

    fn spawn(mut cmd: Command, command: String, log: &Path, trace: bool) -> anyhow::Result<Server> {
        // SAFETY: getpid has no preconditions.
        let before = super::reaper::descendants(unsafe { libc::getpid() });
        let out = File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone()?;
        cmd.stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let child = if trace {
            match crate::trace::spawn(cmd)? {
                Spawned::Traced(t) => Proc::Traced(t),
                Spawned::Untraced(c, reason) => {
                    eprintln!("tcpdoctor: the server runs untraced: {reason}");
                    Proc::Plain(c, TraceStatus::Unavailable { reason })
                }
            }
        } else {
            Proc::Plain(cmd.spawn()?, TraceStatus::Off)
        };
        let pgid = child.id() as libc::pid_t;
        Ok(Server {
            child,
            pgid,
            log: log.to_path_buf(),
            command,
            stopped: false,
            adopts: false,
            before,
            daemons: Vec::new(),
        })
    }

    /// The system calls traced since the last call (the scenario's window), or why none were.
    pub fn take_trace(&self) -> Trace {
        self.child.take_trace()
    }

    /// The command's exit status, if it has exited.
    pub fn exited(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        self.child.try_wait()
    }

    pub fn pgid(&self) -> libc::pid_t {
        self.pgid
    }

    /// Rule 3: waits until the tree has been quiet for [`QUIET_WINDOWS`] windows in a row, at
    /// most `limit`; false when it was still busy then.
    pub fn wait_settled(&self, limit: Duration) -> bool {
        let start = Instant::now();
        let quiet_ns = SETTLE_WINDOW.as_nanos() as u64 / 20;
        let mut last = self.cpu().ns;
        let mut quiet = 0;
        while start.elapsed() < limit {
            std::thread::sleep(SETTLE_WINDOW);
            let now = self.cpu().ns;
            if now.saturating_sub(last) < quiet_ns {
                quiet += 1;
                if quiet >= QUIET_WINDOWS {
                    return true;
                }
            } else {
                quiet = 0;
            }
            last = now;
        }
        false
    }

    /// The process whose exit means the server is gone (the driver stops waiting then): the
    /// command's own while it runs; once it exited leaving a daemon, the daemon (the lowest
    /// pid it left: a master, usually, before its workers).
    pub fn watch_pid(&self) -> libc::pid_t {
        if self.adopts && crate::procfs::process_gone(self.pgid) {
            // SAFETY: getpid has no preconditions.
            let me = unsafe { libc::getpid() };
            if let Some(daemon) = super::reaper::descendants(me).into_iter().min() {
                return daemon;
            }
        }
        self.pgid
    }

    /// Waits until `target` accepts a connection, the server exits, or `limit` passes.
    pub fn wait_ready(&mut self, target: &Addr, limit: Duration) -> anyhow::Result<()> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(2);
        loop {
            if crate::capture::stop::interrupted() {
                bail!("interrupted while waiting for {target} to accept a connection");
            }
            let ok = match target {
                Addr::Tcp(a) => {
                    std::net::TcpStream::connect_timeout(a, Duration::from_millis(200)).is_ok()
                }
                Addr::Unix(p) => std::os::unix::net::UnixStream::connect(p).is_ok(),
            };
            if ok {
                // A command that daemonized may have exited only now: note what it left.
                if matches!(self.child.try_wait(), Ok(Some(_))) {
                    self.daemons_running();
                }
                let settle = limit.saturating_sub(start.elapsed()).min(SETTLE_LIMIT);
                if !self.wait_settled(settle) {
                    eprintln!(
                        "tcpdoctor: the server was still busy {} after {target} accepted; \
                         the first scenario's server CPU may include its start-up work",
                        tcpdoctor_core::units::fmt_duration(settle)
                    );
                }
                return Ok(());
            }
            if let Some(status) = self.child.try_wait()? {
                // A daemonizing server's command exits 0 once its daemon is forked.
                if status.success() && self.daemons_running() {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(50));
                    if start.elapsed() <= limit {
                        continue;
                    }
                }
                bail!(
                    "the server exited ({status}) before {target} accepted a connection; its \
                     output ({}):\n{}",
                    self.log.display(),
                    tail(&self.log)
                );
            }
            if start.elapsed() > limit {
                bail!(
                    "{target} did not accept a connection within {} of starting the server \
                     (is --target the address it listens on?); its output ({}):\n{}",
                    tcpdoctor_core::units::fmt_duration(limit),
                    self.log.display(),
                    tail(&self.log)
                );
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }

    /// Whether the server is still running: its command, or, once that exited cleanly, the
    /// daemons it left.
    pub fn running(&mut self) -> bool {
        match self.child.try_wait() {
            Ok(None) => true,
            Ok(Some(status)) => status.success() && self.daemons_running(),
            Err(_) => false,
        }
    }

    /// Processes this command started that still run outside its own child (a daemon
    /// re-parented to us). Only for a command line `run` adopts.
    fn daemons_running(&mut self) -> bool {
        if !self.adopts {
            return false;
        }
        super::reaper::reap_orphans(self.child.id() as libc::pid_t);
        // SAFETY: getpid has no preconditions.
        let now = super::reaper::descendants(unsafe { libc::getpid() });
        if self.daemons.is_empty() {
            self.daemons = now
                .iter()
                .copied()
                .filter(|p| !self.before.contains(p))
                .collect();
        }
        !now.is_empty()
    }

    /// CPU time of the server's tree (rule 1).
    pub fn cpu(&self) -> TreeCpu {
        tree_cpu(self.pgid, &self.roots())
    }

    /// The processes of the server's tree (rule 1).
    pub fn pids(&self) -> Vec<u32> {
        tree_members(self.pgid, &self.roots())
            .into_iter()
            .filter_map(|p| u32::try_from(p).ok())
            .collect()
    }

    /// Lists the server's tree (rule 1) each time it is called: for a thread that samples it.
    pub fn members(&self) -> impl Fn() -> Vec<libc::pid_t> + Send + 'static {
        let (pgid, roots) = (self.pgid, self.roots());
        move || tree_members(pgid, &roots)
    }

    fn roots(&self) -> Vec<libc::pid_t> {
        let mut roots = vec![self.child.id() as libc::pid_t];
        roots.extend_from_slice(&self.daemons);
        if self.adopts && self.daemons.is_empty() {
            // A daemon its command left after `wait_ready` last looked (the command exited
            // only once its daemon already listened, as a traced or slow parent does): what
            // was re-parented to us since the server started is the server's too.
            // SAFETY: getpid has no preconditions.
            let me = unsafe { libc::getpid() };
            roots.extend(
                super::reaper::descendants(me)
                    .into_iter()
                    .filter(|p| !self.before.contains(p)),
            );
        }
        roots
    }

    /// SIGTERM to the group, SIGKILL after a grace period; reaps the child. For a command
    /// line, then the same for every process it left (daemons that left the group).
    pub fn stop(&mut self) {
        self.stopped = true;
        stop_group(&mut self.child, self.pgid);
        if self.adopts {
            super::reaper::stop_descendants(self.child.id() as libc::pid_t, Duration::from_secs(2));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.stopped {
            return;
        }
        if matches!(self.child.try_wait(), Ok(None))
            || group_cpu(self.pgid).processes > 0
            || self.daemons_running()
        {
            self.stop();
        }
    }
}

/// Stops the process group `pgid` led by `child`: SIGTERM, up to 2 s for the leader to exit
/// and the group to empty, then SIGKILL and reap the leader.
pub fn stop_group(child: &mut impl Waitable, pgid: libc::pid_t) {
    kill_group(pgid, libc::SIGTERM);
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        if !matches!(child.try_wait(), Ok(None)) && group_cpu(pgid).processes == 0 {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    kill_group(pgid, libc::SIGKILL);
    child.wait_killed();
}

fn kill_group(pgid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: kill(2) on a process group we created.
    unsafe { libc::kill(-pgid, sig) };
}

/// The last lines of a log, for error messages.
pub fn tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let from = lines.len().saturating_sub(10);
    if lines.is_empty() {
        "  (no output)".to_string()
    } else {
        lines[from..]
            .iter()
            .map(|l| format!("  | {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Every live process: (pid, its stat), zombies excluded (their time is gone with them, or
/// counted in their parent's).
fn processes() -> Vec<(i32, crate::procfs::Stat)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| Some((pid, crate::procfs::stat(pid)?)))
        .filter(|(_, s)| s.state != 'Z')
        .collect()
}

/// Processes whose process group is `pgid`, counted by ticks only.
pub fn group_cpu(pgid: libc::pid_t) -> TreeCpu {
    let mut t = TreeCpu::default();
    for (_, s) in processes() {
        if s.pgrp == i64::from(pgid) {
            t.user_ticks += s.utime;
            t.system_ticks += s.stime;
            t.processes += 1;
        }
    }
    t
}

/// How [`tree_cpu`] reads the server's CPU, for the findings that rest on it.
pub const CPU_COUNTERS: &str = "time on CPU in nanoseconds from /proc/PID/task/*/schedstat of \
    every thread of the server's process group and of its first process's descendants (split \
    into user and system by /proc/PID/stat's ticks), read when the scenario's measured \
    interval starts and ends";

/// Rule 1: the processes of group `pgid`, `roots` and their descendants.
pub fn tree_members(pgid: libc::pid_t, roots: &[libc::pid_t]) -> Vec<libc::pid_t> {
    tree(pgid, roots).into_iter().map(|(pid, _)| pid).collect()
}

fn tree(pgid: libc::pid_t, roots: &[libc::pid_t]) -> Vec<(i32, crate::procfs::Stat)> {
    let all = processes();
    let parent: std::collections::HashMap<i32, i32> =
        all.iter().map(|(p, s)| (*p, s.ppid as i32)).collect();
    let descends = |mut pid: i32| {
        // Bounded: a parent chain is short, and a cycle cannot occur in /proc, but a racing
        // read could show one.
        for _ in 0..64 {
            if roots.contains(&pid) {
                return true;
            }
            match parent.get(&pid) {
                Some(&p) if p > 1 && p != pid => pid = p,
                _ => return false,
            }
        }
        false
    };
    all.into_iter()
        .filter(|(pid, s)| s.pgrp == i64::from(pgid) || descends(*pid))
        .collect()
}

/// Rules 1 and 2: the processes of group `pgid`, `roots` and their descendants, their time
/// on CPU in ns (ticks × 10 ms for a process whose clock cannot be read).
pub fn tree_cpu(pgid: libc::pid_t, roots: &[libc::pid_t]) -> TreeCpu {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    let mut t = TreeCpu::default();
    let members = tree(pgid, roots);
    // The clocks are read together, after the scan of /proc, so the instant they stand for
    // is known to the microseconds the reads take, not the milliseconds of the scan.
    let start = Instant::now();
    for (pid, s) in &members {
        t.ns += crate::procfs::cpu_ns(*pid).unwrap_or((s.utime + s.stime) * (1_000_000_000 / hz));
        t.user_ticks += s.utime;
        t.system_ticks += s.stime;
        t.processes += 1;
    }
    t.read_ns = start.elapsed().as_nanos() as u64;
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn our_own_group_is_counted() {
        // SAFETY: getpgrp has no preconditions.
        let me = unsafe { libc::getpgrp() };
        let mut x = 0u64;
        for i in 0..3_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(group_cpu(me).processes >= 1);
        let tree = tree_cpu(me, &[std::process::id() as i32]);
        assert!(tree.processes >= 1 && tree.ns > 0, "{tree:?}");
    }

    #[test]
    fn the_ticks_split_the_nanoseconds_and_stand_in_for_exited_threads() {
        let a = TreeCpu::default();
        let b = TreeCpu {
            ns: 41_000_000,
            user_ticks: 3,
            system_ticks: 1,
            processes: 1,
            read_ns: 0,
        };
        let (u, s) = b.seconds_since(&a);
        assert!(
            (u - 0.03075).abs() < 1e-12 && (s - 0.01025).abs() < 1e-12,
            "{u} {s}"
        );
        let c = TreeCpu { ns: 1_500_000, ..a };
        assert_eq!(
            c.seconds_since(&a),
            (0.0015, 0.0),
            "no tick in between: all user"
        );
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
        let one_tick = TreeCpu {
            ns: 2_000_000,
            user_ticks: 1,
            processes: 1,
            ..a
        };
        assert_eq!(
            one_tick.seconds_since(&a).0,
            0.002,
            "a tick crossed is rounding, not time"
        );
        let exited = TreeCpu {
            ns: 2_000_000,
            user_ticks: 50,
            system_ticks: 50,
            processes: 1,
            read_ns: 0,
        };
        assert!(
            (exited.uncertainty_s(&a) - 2.0 / hz).abs() < 1e-12,
            "the ticks are the figure: their rounding is the uncertainty"
        );
        let read = TreeCpu {
            ns: 41_000_000,
            user_ticks: 4,
            processes: 1,
            read_ns: 30_000,
            ..a
        };
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        assert!(
            (read.uncertainty_s(&TreeCpu {
                read_ns: 10_000,
                ..a
            }) - 40e-6 * cpus)
                .abs()
                < 1e-12,
            "the clocks are the figure: the reads' time on every CPU"
        );
        let (u, s) = exited.seconds_since(&a);
        assert!(
            (u + s - 100.0 / hz).abs() < 1e-9,
            "threads that exited took their schedstat, not their ticks: {u} {s}"
        );
    }
}
