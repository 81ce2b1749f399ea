//! `watch`: a host's TCP sockets, sampled again and again, as Prometheus counters.
//!
//! The shell reads every TCP socket of the host's network namespace (socket diagnostics: each
//! one's `tcp_info`, no privilege needed) and which process holds it, and hands each sample to
//! a [`Ledger`] with the time as data. The ledger turns the kernel's per-socket counters into
//! per-series counters a scrape can `rate()`:
//! 1. A *series* is a process name and the listening port its connection was accepted on
//!    (`port="6379"`), or `port="client"` for a connection the process opened itself. Never a
//!    client address, a PID or a socket: the cardinality is the services a host runs.
//! 2. A socket's counters (`tcpi_busy_time`, `tcpi_rwnd_limited`, `tcpi_sndbuf_limited`,
//!    `tcpi_total_retrans`, `tcpi_total_rto`, bytes sent and received) are cumulative since the socket was
//!    created. Each sample adds to its series what grew since the socket's previous sample. A
//!    socket first seen after the ledger's first sample was opened since the previous one, so
//!    all it counted is added; sockets present at the first sample are taken as they are (the
//!    exporter counts from its own start, as exporters do). What a socket counted between
//!    its last sample and its close is not seen: a shorter `--interval` loses less.
//! 3. A socket is known from one sample to the next by its cookie (`idiag_cookie`, 64
//!    bits), which the kernel never gives to another socket; not by its inode, a 32-bit
//!    counter shared with pipes and other pseudo-files that wraps on a busy host (at 10,000
//!    a second, in five days), after which a new socket can carry a closed one's number
//!    (keyed on the inode, one whose counters exceeded the old one's would be counted only
//!    from the old one's values). A counter smaller than at the previous sample, which one socket's cannot be,
//!    is still taken as new: its whole value is added. Series counters never decrease.
//! 4. At most `max_series` series are kept; a sample that would make more adds nothing for
//!    them and counts each socket left out (`series_dropped`). A series whose process has had
//!    no socket for [`SERIES_IDLE_NS`] (or the idle time given) is removed (a process that came and went leaves nothing
//!    behind; if it comes back its counters start again from zero, which `rate()` reads as a
//!    reset).
//! 5. Gauges (open connections per series, sockets seen, the sample's cost) are the last
//!    sample's.
//! 6. Finding kinds: `inspect`'s own rules run over each interval of each series'
//!    connections and add, per kind, the time their findings estimate lost ([`kinds`]).
//!    They live inside their series: no series, no kind rows (the cap of rule 4 holds).
//!    `busy_poll` reads processes' CPU, only of those whose traffic warrants it ([`busy`]).

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::fxhash::FxHashMap;
use crate::inspect::TcpSample;
use crate::report::FindingKind;

mod busy;
mod exposition;
pub mod kinds;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_busy;
#[cfg(test)]
mod tests_kinds;

pub use busy::Busy;
pub use exposition::render;
pub use kinds::{Kinds, Options};

/// A series with no socket for this long is removed (nanoseconds).
pub const SERIES_IDLE_NS: u64 = 300_000_000_000;
/// The default cap on series.
pub const MAX_SERIES: usize = 1000;

/// `tcp_states`: the only states the ledger tells apart.
const TCP_ESTABLISHED: u8 = 1;
const TCP_LISTEN: u8 = 10;

/// One socket as a sample saw it.
#[derive(Clone, Debug)]
pub struct SocketSeen {
    pub inode: u64,
    /// The kernel's socket cookie: what tells one socket from another across samples.
    pub cookie: u64,
    /// The process holding it (its name, `comm`), when it could be told.
    pub process: Option<String>,
    pub state: u8,
    pub local: SocketAddr,
    pub remote: SocketAddr,
    /// Its `tcp_info`, when the kernel gave it.
    pub sample: Option<TcpSample>,
}

/// What a series label says about the port.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Port {
    /// Accepted on this listening port.
    Listen(u16),
    /// Opened by the process (a client connection).
    Client,
}

/// A series' labels.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeriesKey {
    pub process: String,
    pub port: Port,
}

/// A series' counters (cumulative since the series began) and gauges (the last sample's).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Totals {
    pub busy_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
    pub retransmitted_segments: u64,
    /// Retransmission timeouts (`tcpi_total_rto`); `None` until a socket of the series
    /// reported the counter (kernels before 6.7 do not).
    pub retransmission_timeouts: Option<u64>,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    /// Sockets first seen after the ledger's first sample.
    pub opened: u64,
    /// Established connections at the last sample.
    pub established: u64,
    /// Per finding kind found on this series' connections ([`kinds`]).
    pub kinds: BTreeMap<FindingKind, KindTotals>,
    /// When the series last had a socket.
    last_seen_ns: u64,
}

/// One finding kind on one series.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KindTotals {
    /// The time the findings estimate they cost, summed over intervals, seconds.
    pub lost_seconds: f64,
    /// Connections the last interval's finding named (0 once it is no longer found).
    pub sockets: u64,
}

/// The counters of one socket at its previous sample.
#[derive(Clone, Copy, Debug, Default)]
struct Last {
    busy_us: u64,
    rwnd_limited_us: u64,
    sndbuf_limited_us: u64,
    total_retrans: u64,
    total_rto: Option<u64>,
    bytes_sent: u64,
    bytes_received: u64,
}

impl Last {
    fn of(s: &TcpSample) -> Last {
        Last {
            busy_us: s.busy_us,
            rwnd_limited_us: s.rwnd_limited_us,
            sndbuf_limited_us: s.sndbuf_limited_us,
            total_retrans: u64::from(s.total_retrans),
            total_rto: s.total_rto.map(u64::from),
            bytes_sent: s.bytes_sent,
            bytes_received: s.bytes_received,
        }
    }
}

/// The exporter's own health, as of the last sample.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Health {
    pub samples: u64,
    pub sample_errors: u64,
    /// The last sample's wall time and CPU time, seconds.
    pub sample_seconds: f64,
    pub sample_cpu_seconds: f64,
    pub sockets: u64,
    /// Sockets whose process could not be told (another user's, without the privilege).
    pub unattributed: u64,
    /// Sockets left out because the series cap was reached, summed over samples.
    pub series_dropped: u64,
    /// Series removed after their process had no socket for the idle time.
    pub series_expired: u64,
    /// Samples of candidate sockets taken between the host samples ([`kinds`]), in total.
    pub burst_samples: u64,
    /// The CPU time of the last interval's fast samples, seconds.
    pub burst_cpu_seconds: f64,
    /// Per process name: candidate sockets of the last interval whose options could not be
    /// read (another user's process without the privilege), so no rule that needs them ran.
    pub options_unreadable: BTreeMap<String, u64>,
}

/// Per-series counters built from successive samples ([module docs](self)).
#[derive(Debug)]
pub struct Ledger {
    max_series: usize,
    series_idle_ns: u64,
    /// Each socket's counters at its previous sample, by cookie.
    sockets: FxHashMap<u64, Last>,
    series: BTreeMap<SeriesKey, Totals>,
    pub health: Health,
}

impl Ledger {
    pub fn new(max_series: usize) -> Ledger {
        Ledger {
            max_series,
            series_idle_ns: SERIES_IDLE_NS,
            sockets: FxHashMap::default(),
            series: BTreeMap::new(),
            health: Health::default(),
        }
    }

    /// Removes a series after `ns` without a socket instead of [`SERIES_IDLE_NS`].
    pub fn with_series_idle(mut self, ns: u64) -> Ledger {
        self.series_idle_ns = ns;
        self
    }

    /// The series, in label order.
    pub fn series(&self) -> impl Iterator<Item = (&SeriesKey, &Totals)> {
        self.series.iter()
    }

    /// Adds one sample of every socket, taken at `at_ns` (a monotonic clock).
    pub fn observe(&mut self, at_ns: u64, seen: &[SocketSeen]) {
        let first = self.health.samples == 0;
        self.health.samples += 1;
        self.health.sockets = seen.len() as u64;
        // A socket with no inode (TIME_WAIT, closed) belongs to no process: not unattributed.
        self.health.unattributed = seen
            .iter()
            .filter(|s| s.process.is_none() && s.inode != 0)
            .count() as u64;
        let listens = listening_ports(seen);
        for t in self.series.values_mut() {
            t.established = 0;
            for k in t.kinds.values_mut() {
                k.sockets = 0;
            }
        }
        let mut next = FxHashMap::default();
        next.reserve(seen.len());
        for s in seen {
            let Some(sample) = &s.sample else {
                continue;
            };
            if s.state == TCP_LISTEN {
                continue;
            }
            let now = Last::of(sample);
            let before = self.sockets.get(&s.cookie).copied();
            // Remembered whether or not its process is known yet: one placed later is counted
            // from here, not from zero.
            next.insert(s.cookie, now);
            let Some(key) = series_key(s, &listens) else {
                continue;
            };
            if !self.series.contains_key(&key) && self.series.len() >= self.max_series {
                self.health.series_dropped += 1;
                continue;
            }
            let t = self.series.entry(key).or_default();
            t.last_seen_ns = at_ns;
            if s.state == TCP_ESTABLISHED {
                t.established += 1;
            }
            let base = match before {
                Some(b) => b,
                // Present when the ledger began: counted from here on.
                None if first => continue,
                None => {
                    t.opened += 1;
                    Last::default()
                }
            };
            t.busy_us += grown(base.busy_us, now.busy_us);
            t.rwnd_limited_us += grown(base.rwnd_limited_us, now.rwnd_limited_us);
            t.sndbuf_limited_us += grown(base.sndbuf_limited_us, now.sndbuf_limited_us);
            t.retransmitted_segments += grown(base.total_retrans, now.total_retrans);
            if let Some(rto) = now.total_rto {
                *t.retransmission_timeouts.get_or_insert(0) +=
                    grown(base.total_rto.unwrap_or(0), rto);
            }
            t.bytes_sent += grown(base.bytes_sent, now.bytes_sent);
            t.bytes_received += grown(base.bytes_received, now.bytes_received);
        }
        self.sockets = next;
        let before = self.series.len();
        let idle = self.series_idle_ns;
        self.series
            .retain(|_, t| at_ns.saturating_sub(t.last_seen_ns) < idle);
        self.health.series_expired += (before - self.series.len()) as u64;
    }

    /// Counts a sample that could not be taken.
    pub fn failed(&mut self) {
        self.health.sample_errors += 1;
    }
}

/// Each process's listening ports: a connection on one of them was accepted there.
pub(crate) fn listening_ports(seen: &[SocketSeen]) -> FxHashMap<&str, Vec<u16>> {
    let mut listens: FxHashMap<&str, Vec<u16>> = FxHashMap::default();
    for s in seen.iter().filter(|s| s.state == TCP_LISTEN) {
        if let Some(p) = &s.process {
            listens.entry(p.as_str()).or_default().push(s.local.port());
        }
    }
    listens
}

/// The series of a socket whose process is known (rule 1).
pub(crate) fn series_key(s: &SocketSeen, listens: &FxHashMap<&str, Vec<u16>>) -> Option<SeriesKey> {
    let process = s.process.as_ref()?;
    let port = match listens.get(process.as_str()) {
        Some(ports) if ports.contains(&s.local.port()) => Port::Listen(s.local.port()),
        _ => Port::Client,
    };
    Some(SeriesKey {
        process: process.clone(),
        port,
    })
}

/// What a cumulative counter added since `before` (rule 3: a smaller value is a new socket).
fn grown(before: u64, now: u64) -> u64 {
    if now >= before {
        now - before
    } else {
        now
    }
}
