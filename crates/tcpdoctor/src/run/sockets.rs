//! The server's own sockets during a scenario, read from the live process the way `inspect`
//! reads them, so the scenario's report can say which options they had ("the server's
//! accepted sockets have TCP_NODELAY off") and its Nagle findings can quote it.
//!
//! 1. A thread takes one-snapshot readings of the server's processes (every [`EVERY`]) while
//!    the scenario runs, until every accepted socket on the server's port has sent data — the
//!    options a reply was written with: a server that sets TCP_NODELAY right after `accept`
//!    must not be caught before it did — and there are as many as the driver opened, or the
//!    scenario ends.
//! 2. Only accepted sockets that have sent data count; the reading with the most of them is
//!    kept. None when no such socket was seen (a server that closes after every reply may be
//!    between connections at every reading).
//! 3. Nothing here fails the scenario: a reading that cannot be taken is no reading.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use tcpdoctor_core::inspect::server_sockets::{server_sockets, ServerSockets};
use tcpdoctor_core::inspect::{Observation, SocketRole};

/// How often a reading is attempted once the driver's connections were seen; before that
/// more often, so that a short scenario is not over before its first reading.
const EVERY: Duration = Duration::from_millis(20);
const UNTIL_SEEN: Duration = Duration::from_millis(5);

pub struct SocketsReader {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Option<ServerSockets>>>,
}

impl SocketsReader {
    /// Starts reading `pids`' accepted sockets on `port`; `connections` is how many the driver
    /// opens.
    pub fn start(pids: Vec<u32>, port: u16, connections: u64) -> SocketsReader {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("server-sockets".into())
            .spawn(move || {
                let _helper = crate::bench::cpu::helper_thread();
                read(&pids, port, connections, &flag)
            })
            .ok();
        SocketsReader { stop, thread }
    }

    /// Stops reading; the best reading taken.
    pub fn finish(mut self) -> Option<ServerSockets> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take()?.join().ok()?
    }
}

impl Drop for SocketsReader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn read(pids: &[u32], port: u16, connections: u64, stop: &AtomicBool) -> Option<ServerSockets> {
    let cfg = crate::inspect::Config {
        pids: pids.to_vec(),
        duration: Duration::ZERO,
        interval: EVERY,
        announce: None,
    };
    let mut best: Option<ServerSockets> = None;
    let mut seen = false;
    while !stop.load(Ordering::Relaxed) {
        if let Ok(outcome) = crate::inspect::observe(&cfg, &|| stop.load(Ordering::Relaxed)) {
            let mut obs = outcome.observation;
            let waiting = keep_answered(&mut obs, port);
            seen |= waiting > 0;
            if let Some(s) = server_sockets(&obs, port) {
                let done = waiting == 0 && s.accepted >= connections;
                if best.as_ref().is_none_or(|b| s.accepted > b.accepted) {
                    best = Some(s);
                }
                if done {
                    break;
                }
                seen = true;
            }
        }
        std::thread::sleep(if seen { EVERY } else { UNTIL_SEEN });
    }
    best
}

/// Rule 2: drops the accepted sockets on `port` that have not sent data yet; how many.
fn keep_answered(obs: &mut Observation, port: u16) -> usize {
    let mut dropped = 0;
    for p in &mut obs.processes {
        p.sockets.retain(|s| {
            let waiting = s.role == SocketRole::Accepted
                && s.local.port() == port
                && s.samples.last().is_none_or(|t| t.data_segs_out == 0);
            dropped += usize::from(waiting);
            !waiting
        });
    }
    dropped
}
