//! Finding kinds in `watch`: `inspect`'s own rules, run on each interval between two host
//! samples, their findings added to the series as counters.
//!
//! `inspect` samples one process's sockets every 20 ms; `watch` samples the whole host every
//! few seconds. That is enough for the kernel's cumulative counters, not to catch a write while
//! Nagle holds it (`nagle_delayed_ack` rule 4: a hold lasts one delayed ACK, ≈40 ms). So, per
//! interval, with the time as data:
//! 1. **Candidates** ([`Kinds::candidates`]): the connections for which the Nagle rule's
//!    rules 1 and 2 held over the interval just ended (request/response, small writes;
//!    [`nagle::small_request_response`], not a copy of it). Only their options are read
//!    (`TCP_NODELAY`, `TCP_CORK`, through the process: [`Kinds::set_options`]), once per
//!    socket: kept while the socket lives. Idle and bulk sockets cost nothing more.
//! 2. **Rules** ([`Kinds::conclude`]): each series' candidates become one `inspect` process
//!    observation (per socket: its sample at the previous host sample, an example of the fast
//!    samples that caught a hold, this sample; the fast samples' counts as `samples_taken`
//!    and `held_taken`), and `inspect`'s rule runs on it unchanged. Each finding adds its
//!    `time_lost_ms` to its kind on its series and sets the kind's socket gauge to the
//!    connections it names. A finding without a measured hold (Nagle on, small writes in
//!    pieces, none caught) adds 0 s: a risk, shown by the gauge alone.
//! 3. **Fast samples** ([`Kinds::burst_sample`]): the candidates with Nagle on (`TCP_NODELAY`
//!    read 0, not corked) are what the shell samples again and again before the next host
//!    sample, within its CPU and time budget. They count in the next interval as `inspect`
//!    counts its samples: the share of samples that caught a held write × the interval
//!    estimates the time writes spent held (samples at instants unrelated to the holds see one
//!    with the probability that one is in progress).
//! 4. A connection first seen at this sample has no interval yet: it is judged from the next
//!    one. A candidate whose options could not be read is counted per process
//!    ([`super::Health::options_unreadable`]), never judged.
//! 5. **Pools**: a process's client connections to one peer, when it holds at least
//!    [`pool_imbalance::MIN_POOL`] of them and any carried data in the interval, go to
//!    `inspect`'s `pool_imbalance` rule unchanged (per client series). It estimates no time
//!    lost (0 s); its gauge counts the connections that carried less than an even share.

use std::collections::BTreeMap;

use super::{listening_ports, series_key, Ledger, Port, SeriesKey, SocketSeen};
use crate::fxhash::FxHashMap;
use crate::inspect::interval::{held_by_nagle, wrap32, SocketInterval};
use crate::inspect::nagle::{self, MIN_DATA_SEGS};
use crate::inspect::pool_imbalance;
use crate::inspect::{
    BufferSetting, ProcessObservation, SocketObservation, SocketOptions, SocketRole, TcpSample,
};

/// `TCP_ESTABLISHED`, `TCP_CLOSE_WAIT`: the states in which a socket still sends.
const SENDING: [u8; 2] = [1, 8];

/// A socket's options as the shell read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Options {
    Read {
        nodelay: bool,
        cork: Option<bool>,
    },
    /// The process refused (permission): never judged, counted per process.
    Unreadable,
}

/// The fast samples of one socket since the last host sample.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Burst {
    taken: u64,
    held: u64,
    /// The first that caught a held write (the finding's evidence quotes one).
    example: Option<TcpSample>,
}

/// What is remembered between host samples ([module docs](self)).
#[derive(Debug, Default)]
pub struct Kinds {
    prev: FxHashMap<u64, TcpSample>,
    burst: FxHashMap<u64, Burst>,
    options: FxHashMap<u64, Options>,
    /// When the interval being judged began (the previous host sample).
    prev_at: Option<u64>,
}

/// One candidate connection of the interval just ended.
struct Candidate<'a> {
    seen: &'a SocketSeen,
    key: SeriesKey,
    sock: SocketObservation,
}

impl Kinds {
    /// Rule 1: the candidates of the interval that ends at `seen` whose options are not known
    /// yet (inodes): the shell reads them and hands them to [`Kinds::set_options`].
    pub fn candidates(&self, seen: &[SocketSeen]) -> Vec<u64> {
        self.judged(seen)
            .into_iter()
            .filter(|c| !self.options.contains_key(&c.seen.inode))
            .map(|c| c.seen.inode)
            .collect()
    }

    pub fn set_options(&mut self, inode: u64, options: Options) {
        self.options.insert(inode, options);
    }

    /// Rules 2 and 4 for the interval that ends at `seen` (the sample the ledger has just
    /// observed): adds the findings to the ledger's series and returns the sockets to sample
    /// fast until the next host sample (inode and local address).
    pub fn conclude(
        &mut self,
        seen: &[SocketSeen],
        ledger: &mut Ledger,
    ) -> Vec<(u64, std::net::SocketAddr)> {
        let mut groups: BTreeMap<SeriesKey, Vec<SocketObservation>> = BTreeMap::new();
        let mut unreadable: BTreeMap<String, u64> = BTreeMap::new();
        let mut fast = Vec::new();
        for c in self.judged(seen) {
            match self.options.get(&c.seen.inode) {
                Some(Options::Unreadable) => {
                    *unreadable.entry(c.key.process.clone()).or_default() += 1;
                }
                Some(Options::Read { nodelay, cork }) => {
                    if !nodelay && *cork != Some(true) {
                        fast.push((c.seen.inode, c.seen.local));
                    }
                    groups.entry(c.key).or_default().push(c.sock);
                }
                None => {}
            }
        }
        for (key, sockets) in groups {
            let p = process(&key.process, sockets);
            let (findings, _notes) = nagle::nagle(&p);
            for f in findings {
                ledger.add_kind(&key, f.kind, f.time_lost_ms / 1e3, f.flows_affected);
            }
        }
        ledger.health.options_unreadable = unreadable;
        for (key, sockets) in self.pools(seen) {
            for f in pool_imbalance::pool_imbalance(&process(&key.process, sockets)) {
                ledger.add_kind(&key, f.kind, f.time_lost_ms / 1e3, f.flows_affected);
            }
        }
        // Roll the interval: this sample starts the next one.
        self.prev.clear();
        self.prev_at = seen.iter().find_map(|s| s.sample.map(|x| x.at_ns));
        for s in seen {
            if let Some(sample) = s.sample.filter(|x| SENDING.contains(&x.state)) {
                self.prev.insert(s.inode, sample);
            }
        }
        self.options.retain(|i, _| self.prev.contains_key(i));
        self.burst.clear();
        fast
    }

    /// When the interval that ends at the next host sample began (`None` before the first).
    pub fn interval_start(&self) -> Option<u64> {
        self.prev_at
    }

    /// A sending socket's sample at the start of the interval.
    pub fn before(&self, inode: u64) -> Option<TcpSample> {
        self.prev.get(&inode).copied()
    }

    /// Rule 3: one fast sample of a socket [`Kinds::conclude`] returned.
    pub fn burst_sample(&mut self, inode: u64, sample: &TcpSample) {
        let b = self.burst.entry(inode).or_default();
        b.taken += 1;
        if held_by_nagle(sample) {
            b.held += 1;
            b.example.get_or_insert(*sample);
        }
    }

    /// Rule 5: per client series, its connections to peers it holds at least two connections
    /// to, when any of them carried data in the interval (an idle pool is not looked at).
    fn pools(&self, seen: &[SocketSeen]) -> BTreeMap<SeriesKey, Vec<SocketObservation>> {
        let listens = listening_ports(seen);
        let mut by_peer: FxHashMap<(&str, std::net::SocketAddr), Vec<(&SocketSeen, TcpSample)>> =
            FxHashMap::default();
        for s in seen {
            let (Some(now), Some(prev)) = (s.sample.as_ref(), self.prev.get(&s.inode)) else {
                continue;
            };
            let Some(process) = s.process.as_deref() else {
                continue;
            };
            if SENDING.contains(&now.state)
                && !listens
                    .get(process)
                    .is_some_and(|ports| ports.contains(&s.local.port()))
            {
                by_peer
                    .entry((process, s.remote))
                    .or_default()
                    .push((s, *prev));
            }
        }
        let mut out: BTreeMap<SeriesKey, Vec<SocketObservation>> = BTreeMap::new();
        for ((process, _), conns) in by_peer {
            let used = conns.iter().any(|(s, prev)| {
                s.sample.is_some_and(|now| {
                    wrap32(prev.data_segs_out, now.data_segs_out)
                        + wrap32(prev.data_segs_in, now.data_segs_in)
                        > 0
                })
            });
            if conns.len() < pool_imbalance::MIN_POOL || !used {
                continue;
            }
            let key = SeriesKey {
                process: process.to_owned(),
                port: Port::Client,
            };
            let list = out.entry(key).or_default();
            for (s, prev) in conns {
                if let Some(now) = s.sample {
                    let sock =
                        observation(s, SocketRole::Connected, prev, now, Burst::default(), None);
                    list.push(sock);
                }
            }
        }
        out
    }

    /// The connections of `seen` for which the Nagle rule's rules 1 and 2 held since the
    /// previous sample, each as inspect would have observed it.
    fn judged<'a>(&self, seen: &'a [SocketSeen]) -> Vec<Candidate<'a>> {
        let listens = listening_ports(seen);
        let mut out = Vec::new();
        for s in seen {
            let (Some(now), Some(prev)) = (s.sample.as_ref(), self.prev.get(&s.inode)) else {
                continue;
            };
            // Cheap first: most sockets did not exchange anything in the interval.
            if !SENDING.contains(&now.state)
                || wrap32(prev.data_segs_out, now.data_segs_out) < MIN_DATA_SEGS
                || wrap32(prev.data_segs_in, now.data_segs_in) < MIN_DATA_SEGS
            {
                continue;
            }
            let Some(key) = series_key(s, &listens) else {
                continue;
            };
            let role = match key.port {
                Port::Listen(_) => SocketRole::Accepted,
                Port::Client => SocketRole::Connected,
            };
            let burst = self.burst.get(&s.inode).copied().unwrap_or_default();
            let sock = observation(s, role, *prev, *now, burst, self.options.get(&s.inode));
            if SocketInterval::of(&sock).is_some_and(|iv| nagle::small_request_response(&iv)) {
                out.push(Candidate { seen: s, key, sock });
            }
        }
        out
    }
}

/// A socket as `inspect` observes it over one interval (rule 2).
pub(super) fn observation(
    s: &SocketSeen,
    role: SocketRole,
    prev: TcpSample,
    now: TcpSample,
    burst: Burst,
    options: Option<&Options>,
) -> SocketObservation {
    let (nodelay, cork) = match options {
        Some(Options::Read { nodelay, cork }) => (Some(*nodelay), *cork),
        _ => (None, None),
    };
    let unknown = || BufferSetting::Unknown {
        why: "not read by watch".into(),
    };
    let mut samples = vec![prev];
    samples.extend(burst.example);
    samples.push(now);
    SocketObservation {
        inode: s.inode,
        fd: -1,
        local: s.local,
        remote: s.remote,
        role,
        congestion: None,
        options: SocketOptions {
            nodelay,
            cork,
            sndbuf_bytes: None,
            rcvbuf_bytes: None,
            sndbuf: unknown(),
            rcvbuf: unknown(),
            notsent_lowat_bytes: None,
            keepalive: None,
        },
        options_before_data: false,
        // The fast samples and this one (the previous one counted in the last interval).
        samples_taken: burst.taken + 1,
        held_taken: burst.held + u64::from(held_by_nagle(&now)),
        samples,
        closed: false,
    }
}

/// One series' candidates as one `inspect` process.
pub(super) fn process(name: &str, sockets: Vec<SocketObservation>) -> ProcessObservation {
    ProcessObservation {
        pid: 0,
        comm: name.to_owned(),
        cmdline: String::new(),
        netns: None,
        first: None,
        last: None,
        options_refused: None,
        exited: false,
        tcp_info_via: None,
        sockets_via: None,
        ctxt_switches_incomplete: None,
        sockets,
    }
}

impl Ledger {
    /// Adds one finding's estimate to `kind` on series `key`; nothing when the series is not
    /// kept (its sockets were already counted as dropped).
    pub(super) fn add_kind(
        &mut self,
        key: &SeriesKey,
        kind: crate::report::FindingKind,
        lost_seconds: f64,
        sockets: u64,
    ) {
        if let Some(t) = self.series.get_mut(key) {
            let k = t.kinds.entry(kind).or_default();
            k.lost_seconds += lost_seconds.max(0.0);
            k.sockets += sockets;
        }
    }
}
