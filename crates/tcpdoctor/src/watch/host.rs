//! One sample of the host's TCP sockets: a socket-diagnostics dump of the network namespace
//! (every socket's `tcp_info`, no privilege needed) and the process holding each socket.
//!
//! Which process holds a socket is read from `/proc/PID/fd` (a link `socket:[INODE]` per
//! descriptor). Those reads are the expensive part, so they are remembered: a sample rereads
//! the descriptors of the processes already known to hold sockets when it meets a socket it
//! cannot place, and walks every process only when that was not enough, at most once per
//! [`FULL_SCAN_EVERY`] (a socket opened by a new process waits that long to be placed). The
//! descriptors of another user's process are refused without privilege: its sockets are
//! *unattributed*, counted and named in the exporter's health, never guessed.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use tcpdoctor_core::watch::SocketSeen;

use crate::inspect::diag::DiagSocket;
use crate::inspect::proc;

/// At most one walk over every process per this long.
const FULL_SCAN_EVERY: Duration = Duration::from_secs(30);

/// What is remembered between samples about which process holds which socket.
#[derive(Default)]
pub struct Owners {
    /// Socket inode → PID.
    by_inode: HashMap<u64, u32>,
    /// PID → its name, for the processes known to hold sockets.
    names: BTreeMap<u32, String>,
    last_full: Option<Instant>,
    /// Processes whose descriptors were refused at the last full walk.
    pub refused: usize,
}

impl Owners {
    /// The sockets of `dump`, each with its process's name where it could be told.
    pub fn place(&mut self, dump: Vec<DiagSocket>) -> Vec<SocketSeen> {
        // A socket with no inode (TIME_WAIT) belongs to no process: never looked for.
        let unknown = |o: &Owners| {
            dump.iter()
                .any(|s| s.inode != 0 && !o.by_inode.contains_key(&s.inode))
        };
        if unknown(self) {
            let known: Vec<u32> = self.names.keys().copied().collect();
            self.rescan(known);
            if unknown(self)
                && self
                    .last_full
                    .is_none_or(|t| t.elapsed() >= FULL_SCAN_EVERY)
            {
                self.full_scan();
            }
        }
        // Forget sockets that are gone, and processes that hold none of the rest.
        let live: std::collections::HashSet<u64> = dump.iter().map(|s| s.inode).collect();
        self.by_inode.retain(|i, _| live.contains(i));
        let holding: std::collections::HashSet<u32> = self.by_inode.values().copied().collect();
        self.names.retain(|p, _| holding.contains(p));
        dump.into_iter()
            .map(|s| SocketSeen {
                process: self
                    .by_inode
                    .get(&s.inode)
                    .and_then(|p| self.names.get(p))
                    .cloned(),
                inode: s.inode,
                state: s.state,
                local_port: s.local.port(),
                sample: s.sample,
            })
            .collect()
    }

    fn rescan(&mut self, pids: Vec<u32>) {
        for pid in pids {
            self.read(pid);
        }
    }

    fn full_scan(&mut self) {
        self.last_full = Some(Instant::now());
        self.refused = 0;
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in dir.flatten() {
            if let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) {
                self.read(pid);
            }
        }
    }

    /// Rereads one process's socket descriptors.
    fn read(&mut self, pid: u32) {
        match proc::socket_fds(pid) {
            Ok(fds) if !fds.is_empty() => {
                let Some(name) = proc::comm(pid) else {
                    return;
                };
                for inode in fds.keys() {
                    self.by_inode.insert(*inode, pid);
                }
                self.names.insert(pid, name);
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => self.refused += 1,
            Err(_) => {}
        }
    }
}
