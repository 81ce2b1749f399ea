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
//! 5. Where the duplicate is refused (a container's seccomp policy may forbid pidfd_getfd),
//!    the descriptor's inode (/proc/PID/fd/N → socket:[inode]) is looked up in the kernel's
//!    TCP tables of the process's network namespace (/proc/PID/net/tcp and tcp6): a socket
//!    found there is TCP, with its endpoints.

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
            .or_insert_with(|| Pidfd::open(pid).ok());
        let dup = match pidfd.as_ref().map(|p| p.dup(fd)) {
            Some(Ok(d)) => d,
            // Rule 5: no duplicate (a container's policy refuses pidfd_getfd): the table.
            Some(Err(e)) if e.raw_os_error() == Some(libc::EBADF) => return None,
            _ => return from_table(pid, fd),
        };
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

/// Rule 5: `fd` of `pid` through its inode and the kernel's TCP tables; None when it is not a
/// TCP socket (not in the tables) or /proc cannot say.
fn from_table(pid: u32, fd: i32) -> Option<Resolved> {
    let link = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
    let inode = crate::inspect::proc::socket_inode(link.to_str()?)?;
    for table in ["tcp", "tcp6"] {
        let text = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).ok()?;
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() > 9 && f[9].parse::<u64>().ok() == Some(inode) {
                let remote = table_addr(f[2]).filter(|a| a.port() != 0);
                return Some(Resolved {
                    inode,
                    local: table_addr(f[1]),
                    remote,
                });
            }
        }
    }
    None
}

/// An address of /proc/net/tcp{,6}: the address as the kernel's 32-bit words in hex (each in
/// this machine's byte order), a colon, the port in hex.
fn table_addr(text: &str) -> Option<SocketAddr> {
    let (addr, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| {
        u32::from_str_radix(addr.get(8 * i..8 * i + 8)?, 16)
            .ok()
            .map(u32::to_ne_bytes)
    };
    let ip: std::net::IpAddr = match addr.len() {
        8 => std::net::Ipv4Addr::from(word(0)?).into(),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[4 * i..4 * i + 4].copy_from_slice(&word(i)?);
            }
            std::net::Ipv6Addr::from(b).into()
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_socket_is_found_in_the_kernels_table_by_its_inode() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).expect("connect");
        let (_a, _) = l.accept().expect("accept");
        use std::os::fd::AsRawFd;
        let r = from_table(std::process::id(), c.as_raw_fd()).expect("in /proc/net/tcp");
        assert_eq!(r.local, c.local_addr().ok());
        assert_eq!(r.remote, c.peer_addr().ok());
        let l6 = std::net::TcpListener::bind("[::1]:0").expect("bind ::1");
        let r = from_table(std::process::id(), l6.as_raw_fd()).expect("in /proc/net/tcp6");
        assert_eq!(r.local, l6.local_addr().ok());
        assert_eq!(r.remote, None, "a listener has no peer");
        // Not TCP: a pipe is in no table.
        let (p, _w) = std::io::pipe().expect("pipe");
        assert!(from_table(std::process::id(), p.as_raw_fd()).is_none());
    }
}
