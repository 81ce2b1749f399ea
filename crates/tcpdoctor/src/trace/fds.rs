//! Descriptor → TCP socket, for the traced processes.
//!
//! 1. A descriptor is resolved the first time a traced call uses it: a duplicate of it
//!    (pidfd_getfd — the tracer may, it is the process's tracer) is asked for its type,
//!    protocol and endpoints (getsockname/getpeername) and closed at once, so the program's
//!    socket closes when the program closes it. The answer — a TCP socket or not — is cached
//!    per (process, descriptor).
//! 2. The cache forgets a descriptor when the program closes it (`close`, `close_range`, the
//!    target of `dup2`/`dup3`), when `accept` or `connect` return on it (a new connection) and
//!    when the process execs or exits: a descriptor number is reused once closed.
//! 3. A socket first seen unconnected (a client's socket before `connect`) is resolved again
//!    when `connect` returns: its endpoints are known then, and it is marked as seen from the
//!    connection's start (bytes counted from the first), as is every socket `accept` returns.
//! 4. A socket first seen unbound (port 0: a listener's options are set before its bind) is
//!    resolved again at its next call until it has an address; one whose peer was not known
//!    (a non-blocking connect returns before the handshake ends) at its first data call.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::fd::AsFd;

use tcpdoctor_core::syscalls::TracedSocket;
use tcpdoctor_core::time::Timestamp;

use crate::inspect::dups::inode_of;
use crate::inspect::options::Pidfd;

#[derive(Default)]
pub struct Sockets {
    by_fd: HashMap<(u32, i32), Option<u32>>,
    pidfds: HashMap<u32, Option<Pidfd>>,
    pub list: Vec<TracedSocket>,
    /// An entry of `list` was updated in place (rule 4) since the last [`Sockets::take_changed`].
    changed: bool,
}

struct Resolved {
    inode: u64,
    local: Option<SocketAddr>,
    remote: Option<SocketAddr>,
}

impl Sockets {
    /// The socket index of `fd` in process `pid`, resolving it the first time (rule 1).
    pub fn lookup(&mut self, pid: u32, fd: i32, now: Timestamp) -> Option<u32> {
        self.lookup_as(pid, fd, now, false)
    }

    /// As [`Sockets::lookup`], for a call that moved data: the socket is connected, so a peer
    /// not known yet (a non-blocking connect still in progress when it returned) is read now.
    pub fn lookup_data(&mut self, pid: u32, fd: i32, now: Timestamp) -> Option<u32> {
        self.lookup_as(pid, fd, now, true)
    }

    fn lookup_as(&mut self, pid: u32, fd: i32, now: Timestamp, data: bool) -> Option<u32> {
        if fd < 0 {
            return None;
        }
        if let Some(&known) = self.by_fd.get(&(pid, fd)) {
            // Rule 4: first seen before bind (a listener's SO_REUSEADDR) or before its
            // connection was established: its addresses now.
            if let Some(i) = known {
                let s = &self.list[i as usize];
                let (local, remote, inode) = (s.local, s.remote, s.inode);
                if local.is_none_or(|a| a.port() == 0) || (data && remote.is_none()) {
                    if let Some(r) = self.resolve(pid, fd).filter(|r| r.inode == inode) {
                        let s = &mut self.list[i as usize];
                        let remote = s.remote.or(r.remote);
                        // Only a real change is copied out (the whole list is, each time).
                        if (s.local, s.remote) != (r.local, remote) {
                            s.local = r.local;
                            s.remote = remote;
                            self.changed = true;
                        }
                    }
                }
            }
            return known;
        }
        let got = self
            .resolve(pid, fd)
            .map(|r| self.add(pid, fd, r, now, false));
        self.by_fd.insert((pid, fd), got);
        got
    }

    /// `accept` returned `fd`, or `connect` returned on it: a connection seen from its start.
    pub fn started(&mut self, pid: u32, fd: i32, now: Timestamp) -> Option<u32> {
        self.forget(pid, fd);
        let r = self.resolve(pid, fd)?;
        let i = self.add(pid, fd, r, now, true);
        self.by_fd.insert((pid, fd), Some(i));
        Some(i)
    }

    /// Whether an entry was updated in place since the last call.
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    pub fn forget(&mut self, pid: u32, fd: i32) {
        self.by_fd.remove(&(pid, fd));
    }

    /// `close_range(first, last)`.
    pub fn forget_range(&mut self, pid: u32, first: i64, last: i64) {
        self.by_fd
            .retain(|&(p, fd), _| p != pid || i64::from(fd) < first || i64::from(fd) > last);
    }

    /// The process exec'd or exited: its descriptors are not what they were.
    pub fn forget_process(&mut self, pid: u32) {
        self.by_fd.retain(|&(p, _), _| p != pid);
        self.pidfds.remove(&pid);
    }

    fn add(&mut self, pid: u32, fd: i32, r: Resolved, now: Timestamp, from_start: bool) -> u32 {
        self.list.push(TracedSocket {
            pid,
            fd,
            inode: r.inode,
            local: r.local,
            remote: r.remote,
            first_seen: now,
            from_start,
        });
        (self.list.len() - 1) as u32
    }

    fn resolve(&mut self, pid: u32, fd: i32) -> Option<Resolved> {
        let pidfd = self
            .pidfds
            .entry(pid)
            .or_insert_with(|| Pidfd::open(pid).ok())
            .as_ref()?;
        let dup = pidfd.dup(fd).ok()?;
        let inode = inode_of(dup.as_fd())?;
        let sock = socket2::SockRef::from(&dup);
        if sock.r#type().ok()? != socket2::Type::STREAM {
            return None;
        }
        if sock.protocol().ok().flatten() != Some(socket2::Protocol::TCP) {
            return None;
        }
        let local = sock.local_addr().ok().and_then(|a| a.as_socket());
        let remote = sock.peer_addr().ok().and_then(|a| a.as_socket());
        Some(Resolved {
            inode,
            local,
            remote,
        })
    }
}
