//! Samples the processes' sockets every `interval` for `duration`.
//!
//! Each sample is one socket-diagnostics dump per network namespace, filtered in the kernel
//! to the local ports and address families the processes use (the whole namespace every
//! 200 ms, to find new outgoing connections), and a stat of each process. Most of its cost
//! is the kernel's walk over its connection table, whatever the filter: a few hundred
//! microseconds of system time per sample, hence the 20 ms default interval. The
//! descriptor table is re-read only when a dump shows a socket not yet attributed, the
//! counters at most every 100 ms, and options once when a socket is found and once at the
//! end (the final value: a server sets TCP_NODELAY just after `accept`, maybe after we
//! first saw it).
//! A sample identical to the previous one (an idle socket) is not stored again, except the
//! last, so an idle socket costs nothing and every socket's last sample is the end time.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::time::{Duration, Instant};

use tcpdoctor_core::inspect::{
    Observation, ProcessCounters, ProcessObservation, SocketObservation, SocketOptions, SocketRole,
    TcpSample,
};

use super::buffers::{self, Buffer, Seen};
use super::diag::{DiagSocket, Families, TCP_LISTEN};
use super::netns::{self, NsReader};
use super::options::{self, Pidfd, RawOptions};
use super::proc;

/// Samples kept per socket; past it only the latest replaces the last one.
const MAX_SAMPLES: usize = 20_000;
const COUNTERS_EVERY: Duration = Duration::from_millis(100);
/// How often the whole namespace is dumped, to find sockets on new local ports (a new
/// outgoing connection); in between, the kernel returns only the sockets on the local ports
/// the processes already use (their listeners' ports included, so new accepted connections
/// are seen at once).
const DISCOVER_EVERY: Duration = Duration::from_millis(200);

#[derive(Clone, Debug)]
pub struct Config {
    pub pids: Vec<u32>,
    /// Zero: one snapshot.
    pub duration: Duration,
    pub interval: Duration,
    /// Printed on stderr once the first sample is taken (a user, or a test, then knows the
    /// sockets are being watched).
    pub announce: Option<String>,
}

/// What was read, and what the user should be told about it on stderr.
#[derive(Debug)]
pub struct Outcome {
    pub observation: Observation,
    pub notes: Vec<String>,
}

/// Where a process's sockets are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Source {
    /// The diag socket of this namespace inode (0: ours, when the process's was unreadable).
    Ns(u64),
    /// Each descriptor duplicated (a namespace we could not enter).
    Dups,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Attribution {
    /// The sockets its descriptors point to.
    Fds,
    /// Its descriptors are refused: every socket of its uid in the namespace.
    Uid(u32),
}

struct BufSeen {
    first: u64,
    smallest: u64,
    largest: u64,
    last: u64,
}

impl BufSeen {
    fn new(v: u64) -> Self {
        BufSeen {
            first: v,
            smallest: v,
            largest: v,
            last: v,
        }
    }

    fn see(&mut self, v: u64) {
        self.smallest = self.smallest.min(v);
        self.largest = self.largest.max(v);
        self.last = v;
    }
}

struct Tracked {
    fd: i32,
    local: std::net::SocketAddr,
    remote: std::net::SocketAddr,
    state: u8,
    congestion: Option<String>,
    options: Option<RawOptions>,
    snd: Option<BufSeen>,
    rcv: Option<BufSeen>,
    samples: Vec<TcpSample>,
    /// The latest sample, when it equalled the one stored before it.
    unstored: Option<TcpSample>,
    closed: bool,
}

struct Target {
    pid: u32,
    comm: String,
    cmdline: String,
    netns: Option<u64>,
    uid: Option<u32>,
    source: Source,
    attribution: Attribution,
    pidfd: Option<Pidfd>,
    options_refused: Option<String>,
    first: Option<ProcessCounters>,
    last: Option<ProcessCounters>,
    counters_at: Option<Instant>,
    exited: bool,
    sockets: BTreeMap<u64, Tracked>,
    foreign: BTreeSet<u64>,
}

/// The processes holding a TCP socket on local port `port` in our network namespace, or why
/// none could be named.
pub fn find_by_port(port: u16) -> anyhow::Result<Vec<u32>> {
    let mut reader = netns::here().map_err(|e| anyhow::anyhow!("socket diagnostics: {e}"))?;
    let dump = reader
        .diag
        .dump(0)
        .map_err(|e| anyhow::anyhow!("socket diagnostics: {e}"))?;
    let inodes: BTreeSet<u64> = dump
        .iter()
        .filter(|s| s.local.port() == port && s.inode != 0)
        .map(|s| s.inode)
        .collect();
    if inodes.is_empty() {
        anyhow::bail!(
            "--port {port}: no TCP socket has local port {port} in this network namespace"
        );
    }
    let (pids, refused) = proc::holders(&inodes);
    if pids.is_empty() {
        let owners: BTreeSet<u32> = dump
            .iter()
            .filter(|s| inodes.contains(&s.inode))
            .map(|s| s.uid)
            .collect();
        anyhow::bail!(
            "--port {port}: {} TCP sockets have local port {port} (owned by uid {:?}), but \
             no process whose descriptors this user may read holds them ({refused} processes \
             refused): run as root, or name the process with --pid",
            inodes.len(),
            owners
        );
    }
    Ok(pids)
}

/// Samples `cfg.pids` until `cfg.duration` passes, every process has exited, or `stop()`.
/// Errors only when nothing at all could be read (the message names the PIDs).
pub fn observe(cfg: &Config, stop: &dyn Fn() -> bool) -> anyhow::Result<Outcome> {
    let mut notes = Vec::new();
    let mut targets = Vec::new();
    let mut readers: HashMap<u64, NsReader> = HashMap::new();
    let our_ns = netns::ours();
    for &pid in &cfg.pids {
        match open_target(pid, our_ns, &mut readers, &mut notes) {
            Ok(t) => targets.push(t),
            Err(e) => notes.push(format!("pid {pid}: {e}")),
        }
    }
    if targets.is_empty() {
        anyhow::bail!("{}", notes.join("; "));
    }
    let mut announce = cfg.announce.clone();
    let mut last_round = false;
    let mut last_full: Option<Instant> = None;
    // Cleared if this kernel refuses the port filter (older than 4.16: no INET_DIAG_BC_S_EQ).
    let mut filters_work = true;
    let start = Instant::now();
    let started_ns = proc::monotonic_ns();
    let mut ended_ns;
    loop {
        let tick = Instant::now();
        let at_ns = proc::monotonic_ns();
        ended_ns = at_ns;
        // A failed dump is None: that round is skipped (its sockets are not "closed").
        let mut dumps: HashMap<u64, Option<Vec<DiagSocket>>> = HashMap::new();
        let full = !filters_work || last_full.is_none_or(|t| t.elapsed() >= DISCOVER_EVERY);
        if full {
            last_full = Some(tick);
        }
        let mut ports: HashMap<u64, (BTreeSet<u16>, Vec<std::net::SocketAddr>)> = HashMap::new();
        for t in targets.iter().filter(|t| !t.exited) {
            if let Source::Ns(key) = t.source {
                let (set, addrs) = ports.entry(key).or_default();
                for s in t.sockets.values().filter(|s| !s.closed) {
                    set.insert(s.local.port());
                    addrs.push(s.local);
                }
            }
        }
        for t in targets.iter_mut().filter(|t| !t.exited) {
            let gone = match &t.pidfd {
                Some(p) => p.exited(),
                None => !proc::alive(t.pid),
            };
            if gone {
                t.exited = true;
                notes.push(format!(
                    "pid {} ({}) exited after {:.1}s of sampling: the report keeps what was \
                     read until then",
                    t.pid,
                    t.comm,
                    start.elapsed().as_secs_f64()
                ));
                continue;
            }
            let dump = match t.source {
                Source::Ns(key) => dumps.entry(key).or_insert_with(|| {
                    let d = readers
                        .get_mut(&key)
                        .map(|r| {
                            let (wanted, families) = match (full, ports.get(&key)) {
                                (false, Some((p, addrs))) => (
                                    p.iter().copied().collect(),
                                    Families::of(addrs.iter().copied()),
                                ),
                                _ => (Vec::new(), Families::Both),
                            };
                            match r.diag.dump_ports(at_ns, &wanted, families) {
                                Err(e)
                                    if !wanted.is_empty()
                                        && e.raw_os_error() == Some(libc::EINVAL) =>
                                {
                                    filters_work = false;
                                    r.diag.dump(at_ns)
                                }
                                d => d,
                            }
                        })
                        .unwrap_or_else(|| Err(io::Error::other("no reader")));
                    d.map_err(|e| {
                        let note = format!("socket diagnostics failed: {e}");
                        if !notes.contains(&note) {
                            notes.push(note);
                        }
                    })
                    .ok()
                }),
                Source::Dups => &mut Some(Vec::new()),
            };
            if let Some(dump) = dump {
                sample_target(t, dump, at_ns);
            }
            let due = t.counters_at.is_none_or(|c| c.elapsed() >= COUNTERS_EVERY);
            if due {
                if let Some(c) = proc::counters(t.pid, at_ns) {
                    t.first.get_or_insert(c);
                    t.last = Some(c);
                }
                t.counters_at = Some(Instant::now());
            }
        }
        if let Some(a) = announce.take() {
            say(&a);
        }
        if last_round
            || targets.iter().all(|t| t.exited)
            || start.elapsed() + cfg.interval / 2 >= cfg.duration
        {
            break;
        }
        if stop() {
            // One more sample, at once: what the sockets were when the user stopped.
            last_round = true;
            continue;
        }
        let next = tick + cfg.interval;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
    }
    let pressure = buffers::pressure_here();
    let processes = targets
        .into_iter()
        .map(|t| finish(t, &readers, pressure))
        .collect::<Vec<_>>();
    if processes.iter().all(|p| p.sockets.is_empty()) {
        let named: Vec<String> = processes
            .iter()
            .map(|p| format!("pid {} ({})", p.pid, p.comm))
            .collect();
        let mut why = format!("{}: no TCP sockets visible", named.join(", "));
        if let Some(r) = processes.iter().find_map(|p| p.options_refused.as_ref()) {
            why.push_str(&format!(" ({r})"));
        }
        notes.push(why);
        anyhow::bail!("{}", notes.join("; "));
    }
    let observation = Observation {
        started_ns,
        ended_ns,
        interval_ns: u64::try_from(cfg.interval.as_nanos()).unwrap_or(u64::MAX),
        processes,
    };
    Ok(Outcome { observation, notes })
}

/// A line on stderr; a closed stderr is no reason to stop (nor to panic, as eprintln! would).
pub fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

fn open_target(
    pid: u32,
    our_ns: Option<u64>,
    readers: &mut HashMap<u64, NsReader>,
    notes: &mut Vec<String>,
) -> anyhow::Result<Target> {
    let Some(comm) = proc::comm(pid) else {
        anyhow::bail!("no such process");
    };
    if !proc::alive(pid) {
        anyhow::bail!("{comm} has exited (a zombie waiting for its parent)");
    }
    let uid = proc::uid(pid);
    let netns = proc::netns(pid);
    let mut options_refused = None;
    let attribution = match proc::socket_fds(pid) {
        Ok(_) => Attribution::Fds,
        Err(e) if e.kind() == io::ErrorKind::PermissionDenied => {
            let uid = uid.unwrap_or(u32::MAX);
            options_refused = Some(format!(
                "{}; /proc/{pid}/fd is refused too, so its sockets are taken to be every TCP \
                 socket of uid {uid} in {} (other processes of that user included)",
                options::refusal_here(pid),
                if netns.is_some() {
                    "its network namespace"
                } else {
                    "tcpdoctor's network namespace (its own could not be read)"
                }
            ));
            Attribution::Uid(uid)
        }
        Err(e) => anyhow::bail!("reading /proc/{pid}/fd: {e}"),
    };
    let source = match netns {
        None => Source::Ns(0),
        Some(ns) if Some(ns) == our_ns => Source::Ns(0),
        Some(ns) => match netns::of(pid) {
            Ok(r) => {
                readers.entry(ns).or_insert(r);
                Source::Ns(ns)
            }
            Err(e) => {
                notes.push(format!(
                    "pid {pid}: entering its network namespace was refused ({e}): reading each \
                     socket through a duplicate of its descriptor instead"
                ));
                Source::Dups
            }
        },
    };
    if source == Source::Ns(0) && !readers.contains_key(&0) {
        let r = netns::here().map_err(|e| anyhow::anyhow!("socket diagnostics: {e}"))?;
        readers.insert(0, r);
    }
    let pidfd = match Pidfd::open(pid) {
        Ok(p) => Some(p),
        Err(e) => {
            options_refused.get_or_insert_with(|| match e.raw_os_error() {
                Some(libc::ENOSYS) => "this kernel has no pidfd_open (Linux 5.3 or later reads \
                                       another process's socket options)"
                    .to_owned(),
                _ => format!("pidfd_open: {e}"),
            });
            None
        }
    };
    Ok(Target {
        pid,
        comm,
        cmdline: proc::cmdline(pid),
        netns,
        uid,
        source,
        attribution,
        pidfd,
        options_refused,
        first: None,
        last: None,
        counters_at: None,
        exited: false,
        sockets: BTreeMap::new(),
        foreign: BTreeSet::new(),
    })
}

/// One sample of one process: its sockets in `dump` (or read through duplicates).
fn sample_target(t: &mut Target, dump: &[DiagSocket], at_ns: u64) {
    let dup_read;
    let dump = if t.source == Source::Dups {
        let fds = proc::socket_fds(t.pid).unwrap_or_default();
        dup_read = match &t.pidfd {
            Some(p) => super::dups::read(p, &fds, t.uid.unwrap_or(0), at_ns),
            None => Vec::new(),
        };
        if dup_read.is_empty() && !fds.is_empty() && t.options_refused.is_none() {
            t.options_refused = Some(options::refusal_here(t.pid));
        }
        &dup_read[..]
    } else {
        dump
    };
    let unknown = dump.iter().any(|s| {
        s.inode != 0 && !t.sockets.contains_key(&s.inode) && !t.foreign.contains(&s.inode)
    });
    if unknown {
        discover(t, dump);
    }
    let present: BTreeSet<u64> = dump.iter().map(|s| s.inode).collect();
    for s in dump {
        if let Some(tr) = t.sockets.get_mut(&s.inode) {
            record(tr, s);
        }
    }
    for (inode, tr) in t.sockets.iter_mut() {
        if !tr.closed && !present.contains(inode) {
            tr.closed = true;
            if let Some(u) = tr.unstored.take() {
                tr.samples.push(u);
            }
        }
    }
}

/// Attributes the dump's new sockets to the process (or to others).
fn discover(t: &mut Target, dump: &[DiagSocket]) {
    let fds = match t.attribution {
        Attribution::Fds => proc::socket_fds(t.pid).unwrap_or_default(),
        Attribution::Uid(_) => BTreeMap::new(),
    };
    for s in dump {
        if s.inode == 0 || t.sockets.contains_key(&s.inode) || t.foreign.contains(&s.inode) {
            continue;
        }
        let fd = match t.attribution {
            Attribution::Fds => fds.get(&s.inode).copied(),
            Attribution::Uid(uid) => (s.uid == uid).then_some(-1),
        };
        let Some(fd) = fd else {
            t.foreign.insert(s.inode);
            continue;
        };
        let options = read_options(t, fd, s.inode);
        t.sockets.insert(
            s.inode,
            Tracked {
                fd,
                local: s.local,
                remote: s.remote,
                state: s.state,
                congestion: s.congestion.clone(),
                options,
                snd: None,
                rcv: None,
                samples: Vec::new(),
                unstored: None,
                closed: false,
            },
        );
    }
}

/// The options of descriptor `fd` of the process, noting why when they are refused.
fn read_options(t: &mut Target, fd: i32, inode: u64) -> Option<RawOptions> {
    if fd < 0 || t.options_refused.is_some() {
        return None;
    }
    let pidfd = t.pidfd.as_ref()?;
    match options::read(pidfd, fd, inode) {
        Ok(o) => Some(o),
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => {
            t.options_refused = Some(options::refusal_here(t.pid));
            None
        }
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
            t.options_refused = Some(
                "this kernel has no pidfd_getfd (Linux 5.6 or later reads another process's \
                 socket options)"
                    .to_owned(),
            );
            None
        }
        // The descriptor was closed in between: nothing to say about it.
        Err(_) => None,
    }
}

fn record(tr: &mut Tracked, s: &DiagSocket) {
    tr.state = s.state;
    tr.remote = s.remote;
    if s.congestion.is_some() {
        tr.congestion.clone_from(&s.congestion);
    }
    for (seen, v) in [(&mut tr.snd, s.sndbuf), (&mut tr.rcv, s.rcvbuf)] {
        if let Some(v) = v {
            match seen {
                Some(b) => b.see(u64::from(v)),
                None => *seen = Some(BufSeen::new(u64::from(v))),
            }
        }
    }
    let Some(sample) = s.sample else { return };
    let same = tr.samples.last().is_some_and(|last| {
        TcpSample {
            at_ns: sample.at_ns,
            ..*last
        } == sample
    });
    if same {
        tr.unstored = Some(sample);
    } else {
        tr.unstored = None;
        if tr.samples.len() >= MAX_SAMPLES {
            tr.samples.pop();
        }
        tr.samples.push(sample);
    }
}

fn finish(
    mut t: Target,
    readers: &HashMap<u64, NsReader>,
    pressure: Option<bool>,
) -> ProcessObservation {
    let limits = match t.source {
        Source::Ns(key) => readers.get(&key).map(|r| (r.send, r.receive)),
        Source::Dups => None,
    }
    .unwrap_or_default();
    let listening: BTreeSet<u16> = t
        .sockets
        .values()
        .filter(|s| s.state == TCP_LISTEN)
        .map(|s| s.local.port())
        .collect();
    // The final options of sockets still open (a server may set them just after accept).
    if !t.exited {
        let open: Vec<(u64, i32)> = t
            .sockets
            .iter()
            .filter(|(_, s)| !s.closed && s.fd >= 0)
            .map(|(i, s)| (*i, s.fd))
            .collect();
        for (inode, fd) in open {
            if let Some(o) = read_options(&mut t, fd, inode) {
                if let Some(s) = t.sockets.get_mut(&inode) {
                    s.options = Some(o);
                }
            }
        }
    }
    let refused = t.options_refused.is_some();
    let sockets = t
        .sockets
        .into_iter()
        .map(|(inode, mut s)| {
            if let Some(u) = s.unstored.take() {
                s.samples.push(u);
            }
            let role = if s.state == TCP_LISTEN {
                SocketRole::Listener
            } else if listening.contains(&s.local.port()) {
                SocketRole::Accepted
            } else {
                SocketRole::Connected
            };
            let opts = if refused { None } else { s.options.clone() };
            let mss = s
                .samples
                .last()
                .filter(|x| !matches!(x.state, 2 | 3 | 7 | TCP_LISTEN))
                .map_or(0, |x| x.snd_mss);
            let seen = |b: &Option<BufSeen>| {
                b.as_ref().map(|b| Seen {
                    first: b.first,
                    smallest: b.smallest,
                    largest: b.largest,
                    last: b.last,
                    listener: role == SocketRole::Listener,
                    mss,
                    pressure,
                })
            };
            let o = opts.clone().unwrap_or_default();
            let options = SocketOptions {
                nodelay: o.nodelay,
                cork: o.cork,
                sndbuf_bytes: o.sndbuf.or(s.snd.as_ref().map(|b| b.last)),
                rcvbuf_bytes: o.rcvbuf.or(s.rcv.as_ref().map(|b| b.last)),
                sndbuf: buffers::setting(Buffer::Send, seen(&s.snd), limits.0),
                rcvbuf: buffers::setting(Buffer::Receive, seen(&s.rcv), limits.1),
                notsent_lowat_bytes: o.notsent_lowat,
                keepalive: o.keepalive,
            };
            SocketObservation {
                inode,
                fd: s.fd,
                local: s.local,
                remote: s.remote,
                role,
                congestion: s.congestion,
                options,
                samples: s.samples,
                closed: s.closed,
            }
        })
        .collect();
    ProcessObservation {
        pid: t.pid,
        comm: t.comm,
        cmdline: t.cmdline,
        netns: t.netns,
        first: t.first,
        last: t.last,
        options_refused: t.options_refused,
        exited: t.exited,
        sockets,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet, HashMap};
    use std::net::SocketAddr;

    use tcpdoctor_core::inspect::{SocketRole, TcpSample};

    use super::{finish, sample_target, Attribution, DiagSocket, Source, Target, TCP_LISTEN};

    /// A process whose sockets are attributed by uid (no /proc reads, no duplicates).
    fn target() -> Target {
        Target {
            pid: 1,
            comm: "srv".into(),
            cmdline: String::new(),
            netns: None,
            uid: Some(7),
            source: Source::Ns(0),
            attribution: Attribution::Uid(7),
            pidfd: None,
            options_refused: Some("another user's process".into()),
            first: None,
            last: None,
            counters_at: None,
            exited: false,
            sockets: BTreeMap::new(),
            foreign: BTreeSet::new(),
        }
    }

    /// A dumped socket; `segs` is its one changing counter, `at` when it was dumped.
    fn socket(
        inode: u64,
        uid: u32,
        ends: (&str, &str),
        state: u8,
        segs: u32,
        at: u64,
    ) -> DiagSocket {
        let addr = |a: &str| a.parse::<SocketAddr>().expect("addr");
        DiagSocket {
            inode,
            uid,
            state,
            local: addr(ends.0),
            remote: addr(ends.1),
            sample: Some(TcpSample {
                at_ns: at,
                state,
                segs_in: segs,
                ..TcpSample::default()
            }),
            congestion: Some("cubic".into()),
            sndbuf: Some(16384),
            rcvbuf: Some(131_072),
        }
    }

    #[test]
    fn sockets_come_and_go_and_idle_samples_are_not_stored_twice() {
        let mut t = target();
        let listener = |at| socket(10, 7, ("127.0.0.1:80", "0.0.0.0:0"), TCP_LISTEN, 0, at);
        let conn = |segs, at| socket(11, 7, ("127.0.0.1:80", "127.0.0.1:5000"), 1, segs, at);
        let other = socket(12, 8, ("127.0.0.1:5000", "127.0.0.1:80"), 1, 0, 100);
        sample_target(&mut t, &[listener(100), conn(1, 100), other], 100);
        assert_eq!(t.sockets.keys().copied().collect::<Vec<_>>(), vec![10, 11]);
        assert!(t.foreign.contains(&12), "another uid's socket is not ours");
        // Idle: the same counters again are not stored; new ones are.
        sample_target(&mut t, &[listener(200), conn(1, 200)], 200);
        sample_target(&mut t, &[listener(300), conn(2, 300)], 300);
        sample_target(&mut t, &[listener(400), conn(2, 400)], 400);
        // The connection leaves the dump: closed, its last sample kept.
        sample_target(&mut t, &[listener(500)], 500);
        let p = finish(t, &HashMap::new(), Some(false));
        let c = p
            .sockets
            .iter()
            .find(|s| s.inode == 11)
            .expect("connection");
        assert!(c.closed);
        assert_eq!(
            c.role,
            SocketRole::Accepted,
            "its local port is a listening one"
        );
        let at: Vec<u64> = c.samples.iter().map(|s| s.at_ns).collect();
        assert_eq!(at, vec![100, 300, 400]);
        let l = p.sockets.iter().find(|s| s.inode == 10).expect("listener");
        assert_eq!((l.role, l.closed), (SocketRole::Listener, false));
        // The last sample of an idle socket carries the end time.
        assert_eq!(
            l.samples.iter().map(|s| s.at_ns).collect::<Vec<_>>(),
            vec![100, 500]
        );
        // Options refused: none reported, buffer sizes still known from the dump.
        assert_eq!(c.options.nodelay, None);
        assert_eq!(c.options.sndbuf_bytes, Some(16384));
    }
}
