//! One sample of the host's TCP sockets: a socket-diagnostics dump of the network namespace
//! (every socket's `tcp_info`, no privilege needed) and the process holding each socket.
//!
//! Which process holds a socket is read from `/proc/PID/fd` (a link `socket:[INODE]` per
//! descriptor). Those reads are the expensive part (a `readlink` per descriptor), so:
//! 1. Each known process's descriptors are remembered (descriptor → inode). Rereading a
//!    process lists its descriptors and reads the link only of those that are new, or whose
//!    remembered socket has gone from the dump (the number may have been reused): a busy
//!    server with 10,000 connections costs a link read per *new* connection, not per
//!    connection.
//! 2. A sample rereads the known processes only when the dump holds a socket it cannot place;
//!    every process is walked at most once per [`FULL_SCAN_EVERY`] (a socket of a process that
//!    just started may wait that long to be placed).
//! 3. A socket still unplaced after that (another user's process, without the privilege; a
//!    process of another PID namespace) is remembered as such until the next walk, so it
//!    does not make every sample reread everything. It is *unattributed*: counted, never
//!    guessed.
//!    Sockets without an inode (TIME_WAIT) belong to no process and are never looked for.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use tcpdoctor_core::watch::SocketSeen;

use crate::inspect::diag::DiagSocket;
use crate::inspect::proc;

/// At most one walk over every process per this long.
const FULL_SCAN_EVERY: Duration = Duration::from_secs(30);

/// A process known to hold sockets.
struct Holder {
    name: String,
    /// Descriptor → the socket inode it pointed to when read.
    fds: HashMap<i32, u64>,
}

/// What is remembered between samples about which process holds which socket.
#[derive(Default)]
pub struct Owners {
    /// Socket inode → PID.
    by_inode: HashMap<u64, u32>,
    holders: HashMap<u32, Holder>,
    /// Sockets no process could be found for since the last walk.
    unplaced: HashSet<u64>,
    last_full: Option<Instant>,
    /// Processes whose descriptors were refused at the last walk.
    pub refused: usize,
}

impl Owners {
    /// The sockets of `dump`, each with its process's name where it could be told.
    pub fn place(&mut self, dump: Vec<DiagSocket>) -> Vec<SocketSeen> {
        let live: HashSet<u64> = dump.iter().map(|s| s.inode).collect();
        let full_due = self
            .last_full
            .is_none_or(|t| t.elapsed() >= FULL_SCAN_EVERY);
        if full_due {
            self.unplaced.clear();
        }
        let unknown = |o: &Owners| dump.iter().any(|s| o.wanted(s.inode));
        if unknown(self) {
            let known: Vec<u32> = self.holders.keys().copied().collect();
            for pid in known {
                self.read(pid, &live);
            }
            if unknown(self) && full_due {
                self.full_scan(&live);
            }
            for s in &dump {
                if self.wanted(s.inode) {
                    self.unplaced.insert(s.inode);
                }
            }
        }
        // Forget sockets that are gone, and processes that hold none of the rest.
        self.by_inode.retain(|i, _| live.contains(i));
        self.unplaced.retain(|i| live.contains(i));
        let holding: HashSet<u32> = self.by_inode.values().copied().collect();
        self.holders.retain(|p, _| holding.contains(p));
        dump.into_iter()
            .map(|s| SocketSeen {
                process: self
                    .by_inode
                    .get(&s.inode)
                    .and_then(|p| self.holders.get(p))
                    .map(|h| h.name.clone()),
                inode: s.inode,
                cookie: s.cookie,
                state: s.state,
                local: s.local,
                remote: s.remote,
                sample: s.sample,
            })
            .collect()
    }

    /// The PID of the process holding socket `inode`, when placed.
    pub fn pid_of(&self, inode: u64) -> Option<u32> {
        self.by_inode
            .get(&inode)
            .copied()
            .filter(|p| self.holders.contains_key(p))
    }

    /// The process holding socket `inode` and a descriptor of it there, when placed.
    pub fn holder_of(&self, inode: u64) -> Option<(u32, i32)> {
        let pid = *self.by_inode.get(&inode)?;
        let h = self.holders.get(&pid)?;
        h.fds
            .iter()
            .filter(|(_, &i)| i == inode)
            .map(|(&fd, _)| fd)
            .min()
            .map(|fd| (pid, fd))
    }

    /// Whether a socket is still to be placed: it has an inode, no known holder (none, or one
    /// that has gone), and was not already looked for in vain since the last walk.
    fn wanted(&self, inode: u64) -> bool {
        inode != 0
            && !self.unplaced.contains(&inode)
            && self
                .by_inode
                .get(&inode)
                .is_none_or(|p| !self.holders.contains_key(p))
    }

    fn full_scan(&mut self, live: &HashSet<u64>) {
        self.last_full = Some(Instant::now());
        self.refused = 0;
        for pid in proc::pids() {
            self.read(pid, live);
        }
    }

    /// Rereads one process's socket descriptors (rule 1).
    fn read(&mut self, pid: u32, live: &HashSet<u64>) {
        let fds_now = match proc::fd_entries(pid) {
            Ok(d) => d,
            Err(e) => {
                if e.kind() == std::io::ErrorKind::PermissionDenied {
                    self.refused += 1;
                }
                // Gone (or refused): its sockets are nobody's until another holder is found.
                self.holders.remove(&pid);
                self.by_inode.retain(|_, p| *p != pid);
                return;
            }
        };
        let before = self.holders.remove(&pid).map(|h| h.fds).unwrap_or_default();
        let mut fds = HashMap::new();
        for (fd, entry) in fds_now {
            let inode = match before.get(&fd) {
                Some(&i) if live.contains(&i) => Some(i),
                // New, or its socket is gone (the number may be another file now).
                _ => std::fs::read_link(entry.path())
                    .ok()
                    .and_then(|t| proc::socket_inode(&t.to_string_lossy())),
            };
            if let Some(i) = inode {
                fds.insert(fd, i);
            }
        }
        // Sockets it no longer holds are no longer its (another process may hold them now).
        let kept: HashSet<u64> = fds.values().copied().collect();
        for gone in before.values().filter(|i| !kept.contains(i)) {
            if self.by_inode.get(gone) == Some(&pid) {
                self.by_inode.remove(gone);
            }
        }
        if fds.is_empty() {
            return;
        }
        let Some(name) = proc::comm(pid) else {
            return;
        };
        for &inode in fds.values() {
            self.by_inode.insert(inode, pid);
        }
        self.holders.insert(pid, Holder { name, fds });
    }
}
