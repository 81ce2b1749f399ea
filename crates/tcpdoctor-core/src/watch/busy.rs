//! `busy_poll` in `watch`: `inspect`'s rule ([`busy_poll::busy_poll`], unchanged) on the
//! processes that may be polling, within the exporter's budget.
//!
//! The rule needs a process's CPU, its user/system split and the voluntary context switches of
//! every thread over an interval. Walking every process's threads every interval costs more
//! than the exporter may spend, so a process is read in stages, each needed only when the one
//! before says so (the time as data; the shell reads, this module decides):
//! 1. **Candidates** ([`Busy::candidates`]): the processes whose connections carried
//!    request/response traffic in the interval just ended (data segments in *and* out, from
//!    the sockets' `tcp_info` deltas the host sample already has). Idle processes cost
//!    nothing. A connection first seen at this sample counts all it carried (it opened in
//!    the interval).
//! 2. **CPU** ([`Busy::cpu`]): each candidate's CPU clock is read (one read). When the
//!    previous host sample read it too, the interval's CPU decides the walk: at least
//!    [`busy_poll::MIN_CPU_NS`] and [`busy_poll::MIN_CPU_SHARE`] of a core, and at least
//!    [`busy_poll::FACTOR`] × the traffic's budget of [`busy_poll::BUDGET_PER_SEGMENT_NS`] per
//!    data segment — `busy_poll`'s rules 1 and 2, which the rule itself checks again.
//! 3. **Walk** ([`Busy::walked`]): a process past stage 2, or walked at the previous sample,
//!    has every thread's counters read (`inspect`'s own reading: CPU clock, `/proc/PID/stat`
//!    ticks, `/proc/PID/task/*/status` switches).
//! 4. **Rule** ([`Busy::conclude`]): a process walked at both ends of the interval becomes one
//!    `inspect` process observation (its connections over the interval, its counters at both
//!    ends) and `busy_poll` runs on it. A thread that exited between the walks took its
//!    switches with it: the sleeps are undercounted and the rule does not judge (as in
//!    `inspect`). A connection of the process at the previous sample that has gone since
//!    carried traffic that is not seen: the budget is then a lower bound, and the process is
//!    not judged (`inspect`'s reason for connections that came and went).
//! 5. A finding adds its `time_lost_ms` — CPU time above the traffic's budget, not latency —
//!    to `tcpdoctor_finding_lost_seconds_total{kind="busy_poll"}` and counts the process's
//!    connections in the sockets gauge, on the series that carried most of its segments.
//!
//! So a polling process is named from the third interval of its traffic on (stage 2 needs two
//! CPU reads, stage 4 two walks). A process spinning with idle sockets is not a candidate and
//! is not named: a missing finding, never a wrong one.

use std::collections::BTreeSet;
use std::net::SocketAddr;

use super::{listening_ports, series_key, Kinds, Ledger, Port, SeriesKey, SocketSeen};
use crate::fxhash::FxHashMap;
use crate::inspect::busy_poll::{self, BUDGET_PER_SEGMENT_NS, FACTOR, MIN_CPU_NS, MIN_CPU_SHARE};
use crate::inspect::interval::wrap32;
use crate::inspect::{summary, ProcessCounters, ProcessObservation, SocketRole, TcpSample};

/// What one process's connections carried in the interval (stage 1).
#[derive(Clone, Debug)]
struct Traffic {
    key: SeriesKey,
    segs_in: u64,
    segs_out: u64,
    /// Its connections now, with their samples at the start and the end of the interval.
    sockets: Vec<Conn>,
    /// The connections that carried none of the segments do not pick the series.
    key_segments: u64,
}

/// One connection of a candidate over the interval.
#[derive(Clone, Debug)]
struct Conn {
    inode: u64,
    role: SocketRole,
    local: SocketAddr,
    remote: SocketAddr,
    prev: TcpSample,
    now: TcpSample,
}

/// One process read at one host sample.
#[derive(Clone, Debug)]
struct Reading {
    at_ns: u64,
    cpu_ns: u64,
    walked: Option<(ProcessCounters, BTreeSet<u32>)>,
    /// Its connections' inodes (stage 4's test for connections that went).
    inodes: Vec<u64>,
}

/// What is remembered between host samples ([module docs](self)).
#[derive(Debug, Default)]
pub struct Busy {
    /// The candidates read at the previous host sample.
    before: FxHashMap<u32, Reading>,
    traffic: FxHashMap<u32, Traffic>,
    now: FxHashMap<u32, Reading>,
}

impl Busy {
    /// Stage 1: the PIDs whose connections carried request/response traffic since the
    /// previous host sample (`pid_of`: the process holding a socket, by inode). Call before
    /// [`Kinds::conclude`], which rolls the interval.
    pub fn candidates(
        &mut self,
        kinds: &Kinds,
        seen: &[SocketSeen],
        pid_of: impl Fn(u64) -> Option<u32>,
    ) -> Vec<u32> {
        self.traffic.clear();
        self.now.clear();
        let Some(start_ns) = kinds.interval_start() else {
            return Vec::new();
        };
        let prev_of = |s: &SocketSeen, now: &TcpSample| {
            kinds.before(s.inode).unwrap_or(TcpSample {
                at_ns: start_ns,
                state: now.state,
                ..TcpSample::default()
            })
        };
        // First the segments per process, nothing kept per socket (most carry none).
        let mut segs: FxHashMap<u32, (u64, u64)> = FxHashMap::default();
        for s in seen.iter().filter(|s| s.state != super::TCP_LISTEN) {
            let (Some(now), Some(pid)) = (s.sample.as_ref(), pid_of(s.inode)) else {
                continue;
            };
            let prev = prev_of(s, now);
            let e = segs.entry(pid).or_default();
            e.0 += wrap32(prev.data_segs_in, now.data_segs_in);
            e.1 += wrap32(prev.data_segs_out, now.data_segs_out);
        }
        segs.retain(|_, (i, o)| *i > 0 && *o > 0);
        if segs.is_empty() {
            return Vec::new();
        }
        // Then the candidates' connections.
        let listens = listening_ports(seen);
        for s in seen.iter().filter(|s| s.state != super::TCP_LISTEN) {
            let (Some(now), Some(pid)) = (s.sample, pid_of(s.inode)) else {
                continue;
            };
            let Some(&(segs_in, segs_out)) = segs.get(&pid) else {
                continue;
            };
            let Some(key) = series_key(s, &listens) else {
                continue;
            };
            let prev = prev_of(s, &now);
            let carried = wrap32(prev.data_segs_in, now.data_segs_in)
                + wrap32(prev.data_segs_out, now.data_segs_out);
            let role = match key.port {
                Port::Listen(_) => SocketRole::Accepted,
                Port::Client => SocketRole::Connected,
            };
            let t = self.traffic.entry(pid).or_insert_with(|| Traffic {
                key: key.clone(),
                segs_in,
                segs_out,
                sockets: Vec::new(),
                key_segments: 0,
            });
            t.sockets.push(Conn {
                inode: s.inode,
                role,
                local: s.local,
                remote: s.remote,
                prev,
                now,
            });
            if carried > t.key_segments {
                t.key = key;
                t.key_segments = carried;
            }
        }
        let mut pids: Vec<u32> = self.traffic.keys().copied().collect();
        pids.sort_unstable();
        pids
    }

    /// Stage 2: candidate `pid`'s CPU clock at `at_ns`; whether to walk its threads now.
    pub fn cpu(&mut self, pid: u32, at_ns: u64, cpu_ns: u64) -> bool {
        let Some(t) = self.traffic.get(&pid) else {
            return false;
        };
        let inodes = t.sockets.iter().map(|s| s.inode).collect();
        self.now.insert(
            pid,
            Reading {
                at_ns,
                cpu_ns,
                walked: None,
                inodes,
            },
        );
        let Some(b) = self.before.get(&pid) else {
            return false;
        };
        if b.walked.is_some() {
            return true;
        }
        let wall = at_ns.saturating_sub(b.at_ns);
        let cpu = cpu_ns.saturating_sub(b.cpu_ns);
        let budget = (t.segs_in + t.segs_out) as f64 * BUDGET_PER_SEGMENT_NS as f64;
        wall > 0
            && cpu >= MIN_CPU_NS
            && cpu as f64 / wall as f64 >= MIN_CPU_SHARE
            && cpu as f64 >= FACTOR * budget
    }

    /// Stage 3: what the walk of `pid`'s threads read (and the threads it summed).
    pub fn walked(&mut self, pid: u32, counters: ProcessCounters, threads: BTreeSet<u32>) {
        if let Some(r) = self.now.get_mut(&pid) {
            r.walked = Some((counters, threads));
        }
    }

    /// Stage 4 and 5: runs the rule on the processes walked at both ends of the interval and
    /// adds its findings to `ledger`; this sample's readings start the next interval.
    pub fn conclude(&mut self, ledger: &mut Ledger) {
        let mut pids: Vec<u32> = self.now.keys().copied().collect();
        pids.sort_unstable();
        for pid in pids {
            let (Some(now), Some(before), Some(t)) = (
                self.now.get(&pid),
                self.before.get(&pid),
                self.traffic.get(&pid),
            ) else {
                continue;
            };
            let (Some((last, tids_now)), Some((first, tids_before))) =
                (&now.walked, &before.walked)
            else {
                continue;
            };
            if before.inodes.iter().any(|i| !now.inodes.contains(i)) {
                continue;
            }
            let exited = tids_before.difference(tids_now).count();
            let p = observation(pid, t, *first, *last, exited);
            let Some(cpu) = summary::cpu(&p, t.segs_in, t.segs_out) else {
                continue;
            };
            if let Some(f) = busy_poll::busy_poll(&p, &cpu) {
                let sockets = p.sockets.len() as u64;
                ledger.add_kind(&t.key, f.kind, f.time_lost_ms / 1e3, sockets);
            }
        }
        self.before = std::mem::take(&mut self.now);
        self.traffic.clear();
    }
}

/// One candidate as `inspect` observes a process over the interval.
fn observation(
    pid: u32,
    t: &Traffic,
    first: ProcessCounters,
    last: ProcessCounters,
    exited: usize,
) -> ProcessObservation {
    let sockets = t
        .sockets
        .iter()
        .map(|c| {
            let seen = SocketSeen {
                inode: c.inode,
                cookie: c.inode,
                process: None,
                state: c.now.state,
                local: c.local,
                remote: c.remote,
                sample: Some(c.now),
            };
            let burst = super::kinds::Burst::default();
            super::kinds::observation(&seen, c.role, c.prev, c.now, burst, None)
        })
        .collect();
    let mut p = super::kinds::process(&t.key.process, sockets);
    p.pid = pid;
    p.first = Some(first);
    p.last = Some(last);
    p.ctxt_switches_incomplete =
        (exited > 0).then(|| format!("threads exited between two host samples: {exited}"));
    p
}
