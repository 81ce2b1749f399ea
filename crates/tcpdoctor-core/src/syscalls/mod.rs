//! What the program asked the kernel to do: system calls traced from the programs tcpdoctor
//! starts (or attaches to), as data.
//!
//! The shell's tracer (`crates/tcpdoctor/src/trace`) stops the traced program at each call of
//! a small set — the write and send families, the read and receive families, socket options,
//! `ioctl`, the readiness waits, `shutdown`, `close`, `connect`, `accept` — and records one
//! [`Call`] per call at its exit, with the wall-clock instant of its entry. Descriptors that
//! are TCP sockets are resolved to their endpoints ([`TracedSocket`]), so the core can join
//! the bytes each call wrote to the sequence numbers of the frames that carried them.
//!
//! Nothing here reads a clock or a file: the trace is evidence, like a capture.
//!
//! # Layout
//! - `mod.rs`: the model ([`Trace`], [`Call`], [`TracedSocket`], [`TraceStatus`]).
//! - `labels.rs`: the names calls are counted under (`ioctl(SIOCOUTQ)`, `recvfrom=EAGAIN`).
//! - `summary.rs`: the `syscalls` block of a scenario ([`summarize`]): counts per socket and
//!   per process, writes per response, TCP_NODELAY, SIOCOUTQ.
//! - `polling.rs`: whether the trace shows a program polling its sockets ([`polling`]) or not
//!   ([`real_work`]), for `busy_poll`.
//! - `text.rs`: the block in a few lines ([`render_text`]).

#[cfg(test)]
pub(crate) mod fixtures;
pub mod labels;
pub mod polling;
pub mod summary;
mod text;

use std::net::SocketAddr;

use serde::{Deserialize, Serialize};

use crate::time::Timestamp;

pub use polling::{polling, real_work, verdict, PollingMechanism, RealWork, TraceVerdict};
pub use summary::{summarize, NoDelay, ProcessCalls, SocketCalls, SyscallsReport};
pub use text::render_text;

/// The calls the tracer traps. `Other` is never produced by the tracer; it stands for a call
/// number the core does not know (a newer tracer, a hand-made trace).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallKind {
    Write,
    Writev,
    Pwritev,
    Sendto,
    Sendmsg,
    Sendmmsg,
    Sendfile,
    Read,
    Readv,
    Recvfrom,
    Recvmsg,
    Recvmmsg,
    Setsockopt,
    Getsockopt,
    Ioctl,
    EpollWait,
    Poll,
    Select,
    Shutdown,
    Close,
    Connect,
    Accept,
    Socket,
    Dup,
    Other,
}

impl CallKind {
    /// The name a user knows from strace.
    pub fn name(self) -> &'static str {
        match self {
            CallKind::Write => "write",
            CallKind::Writev => "writev",
            CallKind::Pwritev => "pwritev",
            CallKind::Sendto => "sendto",
            CallKind::Sendmsg => "sendmsg",
            CallKind::Sendmmsg => "sendmmsg",
            CallKind::Sendfile => "sendfile",
            CallKind::Read => "read",
            CallKind::Readv => "readv",
            CallKind::Recvfrom => "recvfrom",
            CallKind::Recvmsg => "recvmsg",
            CallKind::Recvmmsg => "recvmmsg",
            CallKind::Setsockopt => "setsockopt",
            CallKind::Getsockopt => "getsockopt",
            CallKind::Ioctl => "ioctl",
            CallKind::EpollWait => "epoll_wait",
            CallKind::Poll => "poll",
            CallKind::Select => "select",
            CallKind::Shutdown => "shutdown",
            CallKind::Close => "close",
            CallKind::Connect => "connect",
            CallKind::Accept => "accept",
            CallKind::Socket => "socket",
            CallKind::Dup => "dup",
            CallKind::Other => "other",
        }
    }

    /// A call that moves bytes out through its descriptor (its result is the bytes written).
    pub fn writes(self) -> bool {
        matches!(
            self,
            CallKind::Write
                | CallKind::Writev
                | CallKind::Pwritev
                | CallKind::Sendto
                | CallKind::Sendmsg
                | CallKind::Sendmmsg
                | CallKind::Sendfile
        )
    }

    /// A call that takes bytes in through its descriptor (its result is the bytes read).
    pub fn reads(self) -> bool {
        matches!(
            self,
            CallKind::Read
                | CallKind::Readv
                | CallKind::Recvfrom
                | CallKind::Recvmsg
                | CallKind::Recvmmsg
        )
    }
}

/// `ioctl` requests that matter on a socket (Linux numbers, the same on x86-64 and aarch64).
pub mod ioctl {
    /// Bytes in the send queue not yet acknowledged (SIOCOUTQ == TIOCOUTQ).
    pub const SIOCOUTQ: u64 = 0x5411;
    /// Bytes readable (SIOCINQ == FIONREAD).
    pub const SIOCINQ: u64 = 0x541B;
    /// Bytes in the send queue not yet sent.
    pub const SIOCOUTQNSD: u64 = 0x894B;
}

/// Socket option levels and names (Linux).
pub mod sockopt {
    pub const SOL_SOCKET: u64 = 1;
    pub const IPPROTO_TCP: u64 = 6;
    pub const TCP_NODELAY: u64 = 1;
    pub const TCP_CORK: u64 = 3;
    pub const TCP_QUICKACK: u64 = 12;
    pub const TCP_NOTSENT_LOWAT: u64 = 25;
    pub const SO_SNDBUF: u64 = 7;
    pub const SO_RCVBUF: u64 = 8;
    pub const SO_KEEPALIVE: u64 = 9;
    pub const SO_ERROR: u64 = 4;
}

/// One traced system call, recorded at its exit.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Call {
    /// Wall-clock instant of the call's entry (the tracer's clock, same epoch as captures
    /// taken on this machine).
    pub at: Timestamp,
    /// Nanoseconds from entry to exit (includes the time the call blocked).
    pub took_ns: u64,
    /// Process (thread group) and thread.
    pub pid: u32,
    pub tid: u32,
    pub kind: CallKind,
    /// The descriptor the call was on; -1 for calls without one (poll, select, epoll's own
    /// descriptor is kept).
    pub fd: i32,
    /// The result: bytes, a count, a new descriptor, or `-errno`.
    pub ret: i64,
    /// Call-specific first detail:
    /// - write/read families: the bytes asked for (sum of the iovecs where known; -1 unknown);
    /// - `ioctl`: the request number; `setsockopt`/`getsockopt`: `level << 32 | optname`;
    /// - `epoll_wait`/`poll`/`select`: the timeout in milliseconds (-1: forever);
    /// - `shutdown`: how; otherwise 0. (`accept` is the listener's call: `fd` and `socket`
    ///   are the listener's, the result is the new descriptor, as strace shows it.)
    pub arg: i64,
    /// Call-specific second detail: `setsockopt`'s integer value, `getsockopt`'s value read
    /// back, the integer `ioctl` wrote back (SIOCOUTQ's queued bytes); -1 when not read.
    pub value: i64,
    /// Index into [`Trace::sockets`] when the descriptor was a TCP socket.
    pub socket: Option<u32>,
}

impl Call {
    /// The call failed with this errno.
    pub fn errno(&self) -> Option<i64> {
        (self.ret < 0).then_some(-self.ret)
    }

    /// `level`, `optname` of a socket-option call.
    pub fn sockopt(&self) -> (u64, u64) {
        let a = self.arg as u64;
        (a >> 32, a & 0xffff_ffff)
    }
}

/// A TCP socket a traced program used, resolved when first seen.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TracedSocket {
    pub pid: u32,
    pub fd: i32,
    /// The socket's inode (socket:[N] in /proc/PID/fd).
    pub inode: u64,
    /// Endpoints as the program's end sees them; unknown for a socket never bound/connected
    /// when it was first seen (a listener is `local` only).
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    /// When the tracer first saw it.
    pub first_seen: Timestamp,
    /// Whether the tracer saw the connection start (accept/connect returned it): only then are
    /// the bytes it counts from the first byte of the stream, and a join to sequence numbers
    /// valid.
    pub from_start: bool,
}

/// A process the tracer followed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TracedProcess {
    pub pid: u32,
    /// Its command name (/proc/PID/comm) when first seen.
    pub name: String,
    /// Threads seen.
    pub threads: u32,
    /// How it ended, when it did while traced: "exited 0", "killed by SIGKILL".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
}

/// Whether a program was traced, and if not why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum TraceStatus {
    /// Traced from its start (a program tcpdoctor started) with a seccomp filter trapping only
    /// the calls above.
    Traced,
    /// Attached to a running process for a bounded time (every call stops it: no filter can
    /// be added to a running process).
    Attached,
    /// `--no-trace`.
    Off,
    /// Tracing was not possible; the run went on without it.
    Unavailable { reason: String },
}

/// Everything one tracer recorded (serialisable: the sandbox's first process hands it over).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Trace {
    pub status: TraceStatus,
    pub processes: Vec<TracedProcess>,
    pub sockets: Vec<TracedSocket>,
    /// In the order the tracer saw their exits (per thread, in program order).
    pub calls: Vec<Call>,
    /// The `setsockopt` calls made before this window (at start-up, or in an earlier
    /// window): an option set once on a listener is inherited by every socket it accepts
    /// later, so each window keeps them.
    pub setup: Vec<Call>,
    /// Calls beyond the tracer's cap: counted in `stops`, not kept.
    pub dropped: u64,
    /// Traced calls (each is an entry stop and an exit stop).
    pub traced_calls: u64,
    /// Time the tracer spent handling stops, nanoseconds: the program was stopped at least
    /// that long in total (the stated overhead).
    pub tracer_ns: u64,
    /// The window traced.
    pub started: Timestamp,
    pub ended: Timestamp,
}

impl Trace {
    /// The first traced socket that is the same socket as `i`: the same process and inode
    /// (a `dup`, a `try_clone` reader and writer of one connection); `i` itself when its
    /// inode is unknown.
    pub fn canonical(&self, i: u32) -> u32 {
        let Some(s) = self.sockets.get(i as usize) else {
            return i;
        };
        if s.inode == 0 {
            return i;
        }
        self.sockets
            .iter()
            .position(|t| t.pid == s.pid && t.inode == s.inode)
            .map_or(i, |p| p as u32)
    }

    /// Every traced socket (descriptor) that is the same socket as `i`, `i` included.
    pub fn same_socket(&self, i: u32) -> Vec<u32> {
        let c = self.canonical(i);
        (0..self.sockets.len() as u32)
            .filter(|&j| self.canonical(j) == c)
            .collect()
    }

    /// Per socket of [`Trace::sockets`]: whether this window's calls on it start with its
    /// connection — the tracer saw accept/connect return it ([`TracedSocket::from_start`])
    /// *in this window*. A connection opened in an earlier window (`run` takes one window per
    /// scenario; sockets are kept whole) has its earlier bytes in calls this window does not
    /// hold. A socket counts as this window's when it was first seen in it, or when the call
    /// that returned it is among the window's calls: a call is kept by the window its exit
    /// fell in, and `first_seen` is its entry — a blocking `accept` entered before the window
    /// began.
    pub fn from_start_in_window(&self) -> Vec<bool> {
        let opened: std::collections::HashSet<(u32, i32, Timestamp)> = self
            .calls
            .iter()
            .filter_map(|c| match c.kind {
                CallKind::Accept if c.ret >= 0 => Some((c.pid, c.ret as i32, c.at)),
                CallKind::Connect => Some((c.pid, c.fd, c.at)),
                _ => None,
            })
            .collect();
        self.sockets
            .iter()
            .map(|s| {
                s.from_start
                    && (s.first_seen >= self.started
                        || opened.contains(&(s.pid, s.fd, s.first_seen)))
            })
            .collect()
    }

    /// A trace that did not happen, with its reason.
    pub fn not_traced(status: TraceStatus) -> Trace {
        Trace {
            status,
            processes: Vec::new(),
            sockets: Vec::new(),
            calls: Vec::new(),
            setup: Vec::new(),
            dropped: 0,
            traced_calls: 0,
            tracer_ns: 0,
            started: Timestamp::ZERO,
            ended: Timestamp::ZERO,
        }
    }

    /// The trace with socket endpoints renamed as a capture elsewhere on the path sees them:
    /// each endpoint equal to a `from` of `map` (local or remote) becomes its `to`. A
    /// destination NAT (the far end of a `wan:` path maps 198.18.0.1:P to the server's own
    /// 127.0.0.1:P) rewrites addresses only, never sequence numbers, so the readdressed
    /// sockets join to that capture's frames byte for byte.
    pub fn readdressed(&self, map: &[(SocketAddr, SocketAddr)]) -> Trace {
        let to = |a: Option<SocketAddr>| {
            a.map(|a| map.iter().find(|(f, _)| *f == a).map_or(a, |(_, t)| *t))
        };
        let mut t = self.clone();
        for s in &mut t.sockets {
            s.local = to(s.local);
            s.remote = to(s.remote);
        }
        t
    }

    /// The part of the trace from `from` to `to` (one scenario of a server traced for its
    /// whole life): the calls that began in it, the window clamped to what was traced.
    /// Sockets and processes are kept whole (calls index the sockets). The tracer's time is
    /// apportioned by calls (an estimate: every stop costs about the same), and `dropped`
    /// stays the whole trace's — which calls were dropped is not known, so a slice of a trace
    /// that dropped any may have lost some (the polling rule then counts them all).
    pub fn between(&self, from: Timestamp, to: Timestamp) -> Trace {
        let calls: Vec<Call> = self
            .calls
            .iter()
            .filter(|c| c.at >= from && c.at < to)
            .cloned()
            .collect();
        let kept = self.calls.len().max(1) as u128;
        let share = |n: u64| (u128::from(n) * calls.len() as u128 / kept) as u64;
        let started = self.started.max(from);
        let mut setup = self.setup.clone();
        setup.extend(
            self.calls
                .iter()
                .filter(|c| c.at < from && c.kind == CallKind::Setsockopt)
                .cloned(),
        );
        Trace {
            setup,
            status: self.status.clone(),
            processes: self.processes.clone(),
            sockets: self.sockets.clone(),
            traced_calls: calls.len() as u64,
            tracer_ns: share(self.tracer_ns),
            dropped: self.dropped,
            started,
            ended: self.ended.min(to).max(started),
            calls,
        }
    }
}

pub mod cite;
#[cfg(test)]
mod cite_tests;
pub mod join;
#[cfg(test)]
mod join_tests;
