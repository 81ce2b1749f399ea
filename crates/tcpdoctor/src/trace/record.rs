//! From stops to [`Call`]s: what each trapped call's entry and exit stops mean, shared by the
//! tracer of started programs ([`super::spawn`]) and the one that attaches ([`super::attach`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use nix::unistd::Pid;
use tcpdoctor_core::syscalls::{ioctl, sockopt, Call, CallKind, TracedProcess};
use tcpdoctor_core::time::Timestamp;

use super::fds::Sockets;
use super::regs::{self, Entry};
use super::Shared;

/// Calls kept per window between two [`super::Tracer::take`]s; beyond it they are counted.
pub const MAX_CALLS: usize = 1_000_000;

struct Pending {
    at: Timestamp,
    start: Instant,
    entry: Entry,
    kind: CallKind,
    /// What the entry read from the program's memory (setsockopt's value, a wait's timeout).
    arg: i64,
    value: i64,
}

pub struct Recorder {
    shared: Arc<Mutex<Shared>>,
    sockets: Sockets,
    tgid: HashMap<u32, u32>,
    pending: HashMap<u32, Pending>,
}

pub fn now() -> Timestamp {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp::from_nanos(d.as_nanos() as u64)
}

/// Whether /proc shows this process's own PID namespace: not in the sandbox's first process,
/// which runs in a PID namespace of its own under the host's /proc (no mount is made), where
/// /proc/N is another process.
fn proc_is_ours() -> bool {
    static OURS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *OURS.get_or_init(|| {
        std::fs::read_link("/proc/self")
            .ok()
            .and_then(|p| p.to_str()?.parse::<u32>().ok())
            == Some(std::process::id())
    })
}

fn comm(pid: u32) -> String {
    if !proc_is_ours() {
        return String::new();
    }
    crate::inspect::proc::comm(pid).unwrap_or_default()
}

fn read_tgid(tid: u32) -> u32 {
    if !proc_is_ours() {
        return tid;
    }
    std::fs::read_to_string(format!("/proc/{tid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Tgid:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(tid)
}

impl Recorder {
    pub fn new(shared: Arc<Mutex<Shared>>) -> Recorder {
        Recorder {
            shared,
            sockets: Sockets::default(),
            tgid: HashMap::new(),
            pending: HashMap::new(),
        }
    }

    fn shared(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A task the tracer sees for the first time (the program, a fork, a thread), its
    /// process read from /proc.
    pub fn task(&mut self, tid: u32) -> u32 {
        if let Some(&p) = self.tgid.get(&tid) {
            return p;
        }
        self.task_of(tid, read_tgid(tid))
    }

    /// A task born of `parent` (a fork/vfork/clone event): a thread of its process when the
    /// clone asked for CLONE_THREAD, else a process of its own.
    pub fn born(&mut self, parent: Pid, tid: u32, thread: bool) -> u32 {
        let pid = if thread {
            self.task(parent.as_raw() as u32)
        } else {
            tid
        };
        // Its first stop may have come before this event, and its process been guessed.
        if let Some(guessed) = self.tgid.get(&tid).copied().filter(|&g| g != pid) {
            self.tgid.remove(&tid);
            let mut s = self.shared();
            if let Some(i) = s.processes.iter().position(|p| p.pid == guessed) {
                s.processes[i].threads = s.processes[i].threads.saturating_sub(1);
                if s.processes[i].threads == 0 {
                    s.processes.remove(i);
                }
            }
        }
        self.task_of(tid, pid)
    }

    /// Task `tid` of process `pid`.
    pub fn task_of(&mut self, tid: u32, pid: u32) -> u32 {
        if let Some(&p) = self.tgid.get(&tid) {
            return p;
        }
        self.tgid.insert(tid, pid);
        let mut s = self.shared();
        if let Some(p) = s.processes.iter_mut().find(|p| p.pid == pid) {
            p.threads += 1;
        } else {
            s.processes.push(TracedProcess {
                pid,
                name: comm(pid),
                threads: 1,
                ended: None,
            });
        }
        pid
    }

    /// The task exec'd: new program, new name, the descriptors closed on exec are gone.
    pub fn exec(&mut self, tid: u32) {
        let pid = self.task(tid);
        self.pending.remove(&tid);
        self.sockets.forget_process(pid);
        let name = comm(pid);
        if let Some(p) = self.shared().processes.iter_mut().find(|p| p.pid == pid) {
            p.name = name;
        }
    }

    /// The task ended (`how`: "exited 0", "killed by SIGKILL").
    pub fn ended(&mut self, tid: u32, how: String) {
        self.pending.remove(&tid);
        let Some(pid) = self.tgid.remove(&tid) else {
            return;
        };
        if pid == tid {
            self.sockets.forget_process(pid);
            if let Some(p) = self.shared().processes.iter_mut().find(|p| p.pid == pid) {
                p.ended = Some(how);
            }
        }
    }

    /// A trapped call's entry stop.
    pub fn entry(&mut self, tid: Pid) -> nix::Result<()> {
        let start = Instant::now();
        let at = now();
        let entry = regs::entry(tid)?;
        let kind = super::filter::kind_of(entry.nr);
        // `filter` rule 4, for the attach mode that has no filter: a wait that blocks is not
        // recorded.
        if super::filter::ONLY_ZERO_TIMEOUT
            .iter()
            .any(|&(nr, arg)| nr == entry.nr && entry.args[arg as usize] as i32 != 0)
        {
            return Ok(());
        }
        let a = entry.args;
        let (arg, value) = match kind {
            CallKind::Write | CallKind::Read | CallKind::Sendto | CallKind::Recvfrom => {
                (a[2] as i64, -1)
            }
            CallKind::Sendfile => (a[3] as i64, -1),
            CallKind::Ioctl => (a[1] as i64, -1),
            CallKind::Setsockopt => {
                let v = if a[4] >= 4 {
                    regs::peek_int(tid, a[3]).unwrap_or(-1)
                } else {
                    -1
                };
                (((a[1] << 32) | (a[2] & 0xffff_ffff)) as i64, v)
            }
            CallKind::Getsockopt => (((a[1] << 32) | (a[2] & 0xffff_ffff)) as i64, -1),
            CallKind::EpollWait => (wait_timeout(tid, entry), -1),
            CallKind::Poll | CallKind::Select => (wait_timeout(tid, entry), -1),
            CallKind::Shutdown => (a[1] as i64, -1),
            CallKind::Writev | CallKind::Readv | CallKind::Pwritev => (-1, -1),
            _ => (0, -1),
        };
        self.pending.insert(
            tid.as_raw() as u32,
            Pending {
                at,
                start,
                entry,
                kind,
                arg,
                value,
            },
        );
        Ok(())
    }

    /// A trapped call's exit stop.
    pub fn exit(&mut self, tid: Pid) -> nix::Result<()> {
        let Some(p) = self.pending.remove(&(tid.as_raw() as u32)) else {
            return Ok(());
        };
        let ret = regs::result(tid)?;
        let pid = self.task(tid.as_raw() as u32);
        let a = p.entry.args;
        let fd_arg = a[0] as i32;
        let mut value = p.value;
        let (fd, socket) = match p.kind {
            CallKind::EpollWait | CallKind::Poll | CallKind::Select => (fd_arg, None),
            CallKind::Close => {
                if p.entry.nr == libc::SYS_close {
                    self.sockets.forget(pid, fd_arg);
                    (fd_arg, None)
                } else {
                    self.sockets.forget_range(pid, a[0] as i64, a[1] as i64);
                    (fd_arg, None)
                }
            }
            CallKind::Dup => {
                // dup2/dup3(old, new): `new` now holds what `old` held.
                self.sockets.forget(pid, a[1] as i32);
                let s = self.sockets.lookup(pid, a[1] as i32, p.at);
                (a[1] as i32, s)
            }
            CallKind::Accept => {
                // As strace shows it: the call is the listener's; the new connection (the
                // result) is resolved as one seen from its start.
                if ret >= 0 {
                    self.sockets.started(pid, ret as i32, p.at);
                }
                (fd_arg, self.sockets.lookup(pid, fd_arg, p.at))
            }
            CallKind::Connect if ret == 0 || ret == -i64::from(libc::EINPROGRESS) => {
                let s = self.sockets.started(pid, fd_arg, p.at);
                (fd_arg, s)
            }
            k if k.reads() || k.writes() => (fd_arg, self.sockets.lookup_data(pid, fd_arg, p.at)),
            _ => (fd_arg, self.sockets.lookup(pid, fd_arg, p.at)),
        };
        if ret == 0 {
            match p.kind {
                CallKind::Ioctl
                    if matches!(a[1], ioctl::SIOCOUTQ | ioctl::SIOCINQ | ioctl::SIOCOUTQNSD) =>
                {
                    value = regs::peek_int(tid, a[2]).unwrap_or(-1);
                }
                CallKind::Getsockopt
                    if a[1] == sockopt::IPPROTO_TCP || a[1] == sockopt::SOL_SOCKET =>
                {
                    value = regs::peek_int(tid, a[3]).unwrap_or(-1);
                }
                _ => {}
            }
        }
        let call = Call {
            at: p.at,
            took_ns: p.start.elapsed().as_nanos() as u64,
            pid,
            tid: tid.as_raw() as u32,
            kind: p.kind,
            fd,
            ret,
            arg: p.arg,
            value,
            socket,
        };
        let changed = self.sockets.take_changed();
        let mut s = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        s.traced_calls += 1;
        s.sync_sockets(&self.sockets.list, changed);
        if s.calls.len() < MAX_CALLS {
            s.calls.push(call);
        } else {
            s.dropped += 1;
        }
        Ok(())
    }

    /// Whether `tid` is between a trapped call's entry and exit stops.
    pub fn in_call(&self, tid: u32) -> bool {
        self.pending.contains_key(&tid)
    }
}

/// A readiness wait's timeout, milliseconds (-1: forever).
fn wait_timeout(tid: Pid, e: Entry) -> i64 {
    let a = e.args;
    let n = e.nr;
    #[cfg(target_arch = "x86_64")]
    {
        if n == libc::SYS_epoll_wait || n == libc::SYS_poll {
            let i = if n == libc::SYS_poll { 2 } else { 3 };
            return i64::from(a[i] as i32);
        }
        if n == libc::SYS_select {
            return regs::peek_time_ms(tid, a[4], true).unwrap_or(-1);
        }
    }
    if n == libc::SYS_epoll_pwait {
        i64::from(a[3] as i32)
    } else if n == libc::SYS_epoll_pwait2 || n == libc::SYS_ppoll {
        let i = if n == libc::SYS_ppoll { 2 } else { 3 };
        regs::peek_time_ms(tid, a[i], false).unwrap_or(-1)
    } else if n == libc::SYS_pselect6 {
        regs::peek_time_ms(tid, a[4], false).unwrap_or(-1)
    } else {
        -1
    }
}
