//! What is known of each process and each of its sockets between samples, how a sample
//! updates it, and what it all becomes at the end: the core's [`ProcessObservation`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use tcpdoctor_core::inspect::{
    ProcessCounters, ProcessObservation, SocketObservation, SocketOptions, SocketRole, TcpSample,
};

use super::buffers::{self, Buffer, Seen};
use super::diag::{DiagSocket, TCP_LISTEN};
use super::netns::NsReader;
use super::options::{self, Pidfd, RawOptions};
use super::proc;

/// Samples stored per socket at most, and per process in all (the JSON carries each, ~570
/// B): past its share, a socket's stored samples are thinned to every other one (its first and
/// latest kept), so they still span the interval, more coarsely. Shares and counts do not
/// suffer: they use the samples taken (`taken`, `held`), counted before storing.
const MAX_SAMPLES_PER_SOCKET: usize = 4096;
const MAX_SAMPLES_PER_PROCESS: usize = 200_000;
/// The least a socket keeps, however many sockets share the process's budget.
const MIN_SAMPLES_PER_SOCKET: usize = 64;

/// How many samples each of `sockets` sockets may store.
fn cap(sockets: usize) -> usize {
    (MAX_SAMPLES_PER_PROCESS / sockets.max(1)).clamp(MIN_SAMPLES_PER_SOCKET, MAX_SAMPLES_PER_SOCKET)
}

/// Keeps the first sample, every other one after it, and the last.
fn thin(samples: &mut Vec<TcpSample>) {
    let Some(last) = samples.pop() else { return };
    let mut i = 0;
    samples.retain(|_| {
        i += 1;
        i % 2 == 1
    });
    samples.push(last);
}

/// Where a process's sockets are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Source {
    /// The diag socket of this namespace inode (0: ours, when the process's was unreadable).
    Ns(u64),
    /// Each descriptor duplicated (a namespace we could not enter).
    Dups,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Attribution {
    /// The sockets its descriptors point to.
    Fds,
    /// Its descriptors are refused: every socket of its uid in the namespace.
    Uid(u32),
}

pub(super) struct BufSeen {
    pub(super) first: u64,
    pub(super) smallest: u64,
    pub(super) largest: u64,
    pub(super) last: u64,
}

impl BufSeen {
    pub(super) fn new(v: u64) -> Self {
        BufSeen {
            first: v,
            smallest: v,
            largest: v,
            last: v,
        }
    }

    pub(super) fn see(&mut self, v: u64) {
        self.smallest = self.smallest.min(v);
        self.largest = self.largest.max(v);
        self.last = v;
    }
}

pub(super) struct Tracked {
    pub(super) fd: i32,
    pub(super) local: std::net::SocketAddr,
    pub(super) remote: std::net::SocketAddr,
    pub(super) state: u8,
    pub(super) congestion: Option<String>,
    pub(super) options: Option<RawOptions>,
    /// The options were read once the socket had sent data (`data_segs_out > 0`), or at the
    /// end while it was still open: what its writes were made with, not what a server had
    /// before its setsockopt after `accept`.
    pub(super) options_after_data: bool,
    pub(super) snd: Option<BufSeen>,
    pub(super) rcv: Option<BufSeen>,
    pub(super) samples: Vec<TcpSample>,
    /// The latest sample, when it equalled the one stored before it.
    pub(super) unstored: Option<TcpSample>,
    /// Samples taken (stored or not), and those of them that caught a write held by Nagle:
    /// shares and periods count these, not the stored ones.
    pub(super) taken: u64,
    pub(super) held: u64,
    pub(super) closed: bool,
}

pub(super) struct Target {
    pub(super) pid: u32,
    pub(super) comm: String,
    pub(super) cmdline: String,
    pub(super) netns: Option<u64>,
    pub(super) uid: Option<u32>,
    pub(super) source: Source,
    pub(super) attribution: Attribution,
    pub(super) pidfd: Option<Pidfd>,
    pub(super) options_refused: Option<String>,
    pub(super) first: Option<ProcessCounters>,
    pub(super) last: Option<ProcessCounters>,
    pub(super) counters_at: Option<Instant>,
    pub(super) exited: bool,
    pub(super) sockets: BTreeMap<u64, Tracked>,
    pub(super) foreign: BTreeSet<u64>,
    pub(super) threads: Threads,
}

/// The process's threads across the counter reads: context switches are summed over the
/// threads alive at each read, so a thread that exits in between takes its count away, and
/// threads that come and go between two reads are never counted at all.
#[derive(Default)]
pub(super) struct Threads {
    /// At the first read, and at the latest.
    first: Option<BTreeSet<u32>>,
    last: BTreeSet<u32>,
    /// Seen at one read and gone at a later one.
    exited: u64,
}

impl Threads {
    pub(super) fn see(&mut self, now: BTreeSet<u32>) {
        if self.first.is_some() {
            self.exited += self.last.difference(&now).count() as u64;
        } else {
            self.first = Some(now.clone());
        }
        self.last = now;
    }

    /// Why the summed switches miss part of the interval, when the thread set changed.
    pub(super) fn incomplete(&self) -> Option<String> {
        let first = self.first.as_ref()?;
        let appeared = self.last.difference(first).count();
        if self.exited == 0 && appeared == 0 {
            return None;
        }
        Some(format!(
            "threads came and went during sampling: {} exited and {} appeared between the \
             first and last reads of /proc/PID/task/*/status, and a thread that exits takes \
             its context switches with it (threads living between two reads are not seen)",
            self.exited, appeared
        ))
    }
}

/// One sample of one process: its sockets in `dump` (or read through duplicates).
pub(super) fn sample_target(t: &mut Target, dump: &[DiagSocket], at_ns: u64) {
    let dup_read;
    let dump = if t.source == Source::Dups {
        let fds = proc::socket_fds(t.pid).unwrap_or_default();
        let got = match &t.pidfd {
            Some(p) => super::dups::read(p, &fds, t.uid.unwrap_or(0), at_ns),
            None => super::dups::DupRead::default(),
        };
        // Refused only when the kernel said so (EPERM): descriptors that are all Unix
        // sockets, or closed in between, give nothing without refusing anything.
        if got.refused && t.options_refused.is_none() {
            t.options_refused = Some(options::refusal_here(t.pid));
        }
        dup_read = got.sockets;
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
    let mut reread = Vec::new();
    let cap = cap(t.sockets.len());
    for s in dump {
        if let Some(tr) = t.sockets.get_mut(&s.inode) {
            record(tr, s, cap);
            if !tr.options_after_data && sent_data(s) {
                reread.push((s.inode, tr.fd));
            }
        }
    }
    // The first sample after accept can land before the server's setsockopt: read the
    // options again once the socket has sent data, the options its writes were made with.
    for (inode, fd) in reread {
        let o = read_options(t, fd, inode);
        if let Some(tr) = t.sockets.get_mut(&inode) {
            tr.options_after_data = true;
            if o.is_some() {
                tr.options = o;
            }
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
        let options_after_data = sent_data(s);
        t.sockets.insert(
            s.inode,
            Tracked {
                fd,
                local: s.local,
                remote: s.remote,
                state: s.state,
                congestion: s.congestion.clone(),
                options,
                options_after_data,
                snd: None,
                rcv: None,
                samples: Vec::new(),
                unstored: None,
                taken: 0,
                held: 0,
                closed: false,
            },
        );
    }
}

/// The socket has sent data: its options now are the ones its writes were made with.
fn sent_data(s: &DiagSocket) -> bool {
    s.sample.is_some_and(|x| x.data_segs_out > 0)
}

/// The options of descriptor `fd` of the process, noting why when they are refused.
pub(super) fn read_options(t: &mut Target, fd: i32, inode: u64) -> Option<RawOptions> {
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

fn record(tr: &mut Tracked, s: &DiagSocket, cap: usize) {
    // Back in a dump after missing from one (a dump cut short): it was never closed.
    tr.closed = false;
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
    tr.taken += 1;
    if tcpdoctor_core::inspect::interval::held_by_nagle(&sample) {
        tr.held += 1;
    }
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
        tr.samples.push(sample);
        while tr.samples.len() > cap.max(2) {
            thin(&mut tr.samples);
        }
    }
}

pub(super) fn finish(
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
                    // The latest there can be: whatever its writes were made with.
                    s.options_after_data = true;
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
            // Read at first sight only, and never again (closed before it was seen sending, or
            // before a re-read): the application may have changed them before it wrote.
            let options_before_data = opts.is_some() && !s.options_after_data;
            SocketObservation {
                inode,
                fd: s.fd,
                local: s.local,
                remote: s.remote,
                role,
                congestion: s.congestion,
                options,
                samples: s.samples,
                options_before_data,
                samples_taken: s.taken,
                held_taken: s.held,
                closed: s.closed,
            }
        })
        .collect();
    let tcp_info_via = match t.source {
        // Key 0 is our own namespace: the process's, or the one read when its is unknown.
        Source::Ns(0) if t.netns.is_none() => Some(
            "netlink sock_diag in tcpdoctor's own network namespace (the process's namespace \
             could not be read)"
                .to_string(),
        ),
        Source::Ns(_) => None,
        Source::Dups => Some(
            "getsockopt(TCP_INFO) on pidfd_getfd duplicates (the process's network namespace \
             could not be entered)"
                .to_string(),
        ),
    };
    let sockets_via = match t.attribution {
        Attribution::Fds => None,
        Attribution::Uid(uid) => Some(format!(
            "every TCP socket of uid {uid} in its network namespace (its descriptors were \
             refused; that user's other processes' sockets are included)"
        )),
    };
    ProcessObservation {
        pid: t.pid,
        comm: t.comm,
        cmdline: t.cmdline,
        netns: t.netns,
        first: t.first,
        last: t.last,
        options_refused: t.options_refused,
        exited: t.exited,
        tcp_info_via,
        sockets_via,
        ctxt_switches_incomplete: t.threads.incomplete(),
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
            threads: super::Threads::default(),
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
            cookie: inode,
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
            unread: None,
        }
    }

    #[test]
    fn stored_samples_are_bounded_and_still_span_the_interval() {
        assert_eq!(super::cap(1), super::MAX_SAMPLES_PER_SOCKET);
        assert_eq!(super::cap(100_000), super::MIN_SAMPLES_PER_SOCKET);
        assert!(super::cap(1000) * 1000 <= super::MAX_SAMPLES_PER_PROCESS);
        let mut t = target();
        let busy = |segs, at| socket(11, 7, ("127.0.0.1:80", "127.0.0.1:5000"), 1, segs, at);
        // A thousandth of the process's budget for this one: 200 stored at most.
        for k in 0..10_000u32 {
            sample_target(&mut t, &[busy(k, u64::from(k))], u64::from(k));
            if k == 0 {
                for i in 0..999 {
                    t.sockets.insert(
                        1_000_000 + i,
                        super::Tracked {
                            fd: -1,
                            local: "127.0.0.1:1".parse().expect("addr"),
                            remote: "127.0.0.1:2".parse().expect("addr"),
                            state: 1,
                            congestion: None,
                            options: None,
                            options_after_data: false,
                            snd: None,
                            rcv: None,
                            samples: Vec::new(),
                            unstored: None,
                            taken: 0,
                            held: 0,
                            closed: true,
                        },
                    );
                }
            }
        }
        let s = &t.sockets[&11];
        let cap = super::cap(1000);
        assert_eq!(cap, 200);
        assert!(s.samples.len() <= cap, "{}", s.samples.len());
        assert!(s.samples.len() >= cap / 2, "{}", s.samples.len());
        assert_eq!(s.samples.first().map(|x| x.at_ns), Some(0));
        assert_eq!(s.samples.last().map(|x| x.at_ns), Some(9_999));
        assert!(s.samples.windows(2).all(|w| w[0].at_ns < w[1].at_ns));
        assert_eq!(s.taken, 10_000, "every sample taken still counted");
    }

    #[test]
    fn a_thread_that_exits_or_appears_makes_the_switch_count_incomplete() {
        let set = |v: &[u32]| v.iter().copied().collect::<BTreeSet<u32>>();
        let mut th = super::Threads::default();
        th.see(set(&[1, 2]));
        th.see(set(&[1, 2]));
        assert_eq!(th.incomplete(), None, "the same threads throughout");
        th.see(set(&[1]));
        th.see(set(&[1, 2]));
        let why = th.incomplete().expect("a thread exited");
        assert!(why.contains("1 exited and 0 appeared"), "{why}");
        let mut th = super::Threads::default();
        th.see(set(&[1]));
        th.see(set(&[1, 3]));
        let why = th.incomplete().expect("a thread appeared");
        assert!(why.contains("0 exited and 1 appeared"), "{why}");
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
        // The listener misses one dump (a dump cut short) and is back in the next.
        sample_target(&mut t, &[conn(2, 450)], 450);
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
        assert_eq!(at, vec![100, 300, 450]);
        // Five samples taken, three stored: shares count the five.
        assert_eq!((c.samples_taken, c.held_taken), (5, 0));
        let l = p.sockets.iter().find(|s| s.inode == 10).expect("listener");
        assert!(!l.closed, "back in the next dump after missing from one");
        assert_eq!((l.role, l.closed), (SocketRole::Listener, false));
        // The last sample of an idle socket carries the end time (400: kept when it went
        // missing).
        assert_eq!(
            l.samples.iter().map(|s| s.at_ns).collect::<Vec<_>>(),
            vec![100, 400, 500]
        );
        // Options refused: none reported, buffer sizes still known from the dump.
        assert_eq!(c.options.nodelay, None);
        assert_eq!(c.options.sndbuf_bytes, Some(16384));
    }
}
