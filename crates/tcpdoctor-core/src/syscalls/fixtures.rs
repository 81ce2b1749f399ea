//! Hand-built traces shaped like what real programs do, for the tests of this module.

use std::time::Duration;

use super::*;

/// Builds a [`Trace`] call by call on a simulated clock: each call starts `step` after the
/// previous one began.
pub(crate) struct Tb {
    pub trace: Trace,
    pub now: Timestamp,
    pub step: Duration,
    pub pid: u32,
}

pub(crate) const T0: Timestamp = Timestamp(1_700_000_000_000_000_000);

impl Tb {
    pub fn new(name: &str) -> Tb {
        Tb {
            trace: Trace {
                setup: Vec::new(),
                status: TraceStatus::Traced,
                processes: vec![TracedProcess {
                    pid: 4242,
                    name: name.to_string(),
                    threads: 1,
                    ended: None,
                }],
                sockets: Vec::new(),
                calls: Vec::new(),
                dropped: 0,
                traced_calls: 0,
                tracer_ns: 0,
                started: T0,
                ended: T0,
            },
            now: T0,
            step: Duration::from_micros(5),
            pid: 4242,
        }
    }

    /// A TCP socket of the current process: `local` and (unless a listener) `remote`.
    pub fn socket(&mut self, fd: i32, local: &str, remote: Option<&str>) -> u32 {
        self.trace.sockets.push(TracedSocket {
            pid: self.pid,
            fd,
            inode: 9000 + self.trace.sockets.len() as u64,
            local: Some(local.parse().expect("address")),
            remote: remote.map(|r| r.parse().expect("address")),
            first_seen: self.now,
            from_start: true,
        });
        self.trace.sockets.len() as u32 - 1
    }

    /// One call on `fd` (its socket looked up among the current process's sockets).
    pub fn call(&mut self, kind: CallKind, fd: i32, ret: i64, arg: i64, value: i64) -> &mut Tb {
        let pid = self.pid;
        let socket = self
            .trace
            .sockets
            .iter()
            .rposition(|s| s.pid == pid && s.fd == fd && s.first_seen <= self.now)
            .map(|i| i as u32);
        self.trace.calls.push(Call {
            at: self.now,
            took_ns: 1_000,
            pid,
            tid: pid,
            kind,
            fd,
            ret,
            arg,
            value,
            socket: if kind == CallKind::EpollWait || fd < 0 {
                None
            } else {
                socket
            },
        });
        self.trace.traced_calls += 1;
        self.trace.tracer_ns += 3_000;
        self.now = self.now.plus(self.step);
        self.trace.ended = self.now;
        self
    }

    pub fn wait(&mut self, kind: CallKind, timeout_ms: i64, ready: i64) -> &mut Tb {
        self.call(kind, 3, ready, timeout_ms, -1)
    }

    pub fn read(&mut self, kind: CallKind, fd: i32, bytes: i64) -> &mut Tb {
        self.call(kind, fd, bytes, 65536, -1)
    }

    pub fn write(&mut self, kind: CallKind, fd: i32, bytes: i64) -> &mut Tb {
        self.call(kind, fd, bytes, bytes, -1)
    }

    pub fn again(&mut self, kind: CallKind, fd: i32) -> &mut Tb {
        self.call(kind, fd, -labels::errno::EAGAIN, 65536, -1)
    }

    pub fn outq(&mut self, fd: i32, queued: i64) -> &mut Tb {
        self.call(CallKind::Ioctl, fd, 0, ioctl::SIOCOUTQ as i64, queued)
    }

    pub fn set(&mut self, fd: i32, level: u64, name: u64, value: i64) -> &mut Tb {
        self.call(
            CallKind::Setsockopt,
            fd,
            0,
            (level << 32 | name) as i64,
            value,
        )
    }

    /// Time passes without a traced call (computing, or blocked in an untraced call).
    pub fn idle(&mut self, d: Duration) -> &mut Tb {
        self.now = self.now.plus(d);
        self.trace.ended = self.now;
        self
    }
}

/// A CPython asyncio server answering `requests` requests of one connection with one
/// `transport.write()` per line (one `sendto` each), TCP_NODELAY set on accept (asyncio sets
/// it on every TCP transport).
pub(crate) fn asyncio_per_line(requests: u64, lines: u64) -> Trace {
    let mut t = Tb::new("python3");
    let listener = 6;
    t.socket(listener, "127.0.0.1:8000", None);
    t.wait(CallKind::EpollWait, -1, 1);
    t.call(CallKind::Accept, listener, 7, 0, -1);
    t.socket(7, "127.0.0.1:8000", Some("127.0.0.1:51000"));
    t.set(7, sockopt::IPPROTO_TCP, sockopt::TCP_NODELAY, 1);
    t.again(CallKind::Accept, listener);
    for _ in 0..requests {
        t.wait(CallKind::EpollWait, -1, 1);
        t.read(CallKind::Recvfrom, 7, 5);
        for _ in 0..lines {
            t.write(CallKind::Sendto, 7, 9);
        }
        t.idle(Duration::from_micros(300));
    }
    t.wait(CallKind::EpollWait, -1, 1);
    t.read(CallKind::Recvfrom, 7, 0);
    t.call(CallKind::Close, 7, 0, 0, -1);
    t.trace
}

/// A C server that writes each reply in two pieces (Nagle on) and then polls SIOCOUTQ until
/// its send queue is empty: the second piece waits for the client's delayed ACK (~40 ms), and
/// the loop asks `polls` times per reply while the queue holds it.
pub(crate) fn siocoutq_spinner(requests: u64, polls: u64) -> Trace {
    let mut t = Tb::new("spinner");
    t.step = Duration::from_micros(20);
    t.socket(3, "127.0.0.1:7000", None);
    t.call(CallKind::Accept, 3, 4, 0, -1);
    t.socket(4, "127.0.0.1:7000", Some("127.0.0.1:52000"));
    for _ in 0..requests {
        t.read(CallKind::Read, 4, 6);
        t.write(CallKind::Write, 4, 20);
        t.write(CallKind::Write, 4, 3);
        for _ in 0..polls {
            t.outq(4, 3);
        }
        t.outq(4, 0);
    }
    t.read(CallKind::Read, 4, 0);
    t.call(CallKind::Close, 4, 0, 0, -1);
    t.trace
}

/// The same C server with the polling loop replaced by work of the same CPU cost: after each
/// read it computes for `work` (no system call) and writes its reply once.
pub(crate) fn real_work_server(requests: u64, work: Duration) -> Trace {
    let mut t = Tb::new("worker");
    t.socket(3, "127.0.0.1:7000", None);
    t.call(CallKind::Accept, 3, 4, 0, -1);
    t.socket(4, "127.0.0.1:7000", Some("127.0.0.1:52000"));
    for _ in 0..requests {
        t.read(CallKind::Read, 4, 6);
        t.idle(work);
        t.write(CallKind::Write, 4, 23);
    }
    t.read(CallKind::Read, 4, 0);
    t.call(CallKind::Close, 4, 0, 0, -1);
    t.trace
}
