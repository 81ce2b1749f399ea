//! Samples the processes' sockets every `interval` for `duration`.
//!
//! Each sample is one socket-diagnostics dump per network namespace, filtered in the kernel
//! to the local ports and address families the processes use (the whole namespace every
//! 200 ms, to find new outgoing connections), and a stat of each process. Most of its cost
//! is the kernel's walk over its connection table, whatever the filter: a few hundred
//! microseconds of system time per sample, hence the 20 ms default interval. The
//! descriptor table is re-read only when a dump shows a socket not yet attributed, the
//! counters at most every 100 ms, and options when a socket is found, again once a sample
//! shows it sending data (a server sets TCP_NODELAY just after `accept`, maybe after we first
//! saw it: the options its writes were made with), and at the end for sockets still open.
//! A sample identical to the previous one (an idle socket) is not stored again, except the
//! last, so an idle socket costs nothing and every socket's last sample is the end time;
//! every sample taken is still counted (`samples_taken`, `held_taken`).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io;
use std::time::{Duration, Instant};

use tcpdoctor_core::inspect::Observation;

use super::buffers;
use super::diag::{DiagSocket, Families};
use super::netns::{self, NsReader};
use super::options::{self, Pidfd};
use super::proc;
use super::track::{finish, sample_target, Attribution, Source, Target, Threads};

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
                if let Some((c, tids)) = proc::counters(t.pid, at_ns) {
                    t.first.get_or_insert(c);
                    t.last = Some(c);
                    t.threads.see(tids);
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
        // In steps of at most 50 ms, so that Ctrl-C is answered soon whatever the interval.
        let next = tick + cfg.interval;
        loop {
            let now = Instant::now();
            if next <= now || stop() {
                break;
            }
            std::thread::sleep((next - now).min(Duration::from_millis(50)));
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
        threads: Threads::default(),
    })
}
