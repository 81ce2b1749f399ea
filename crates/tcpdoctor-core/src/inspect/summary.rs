//! The context a person needs next to the findings, computed once here so that every renderer
//! (text, JSON, HTML) prints the same figures: per process its CPU against its traffic, per
//! socket what changed in the interval, and how many connections go to each peer.

use serde::Serialize;

use super::interval::{state_name, SocketInterval};
use super::pool_imbalance::{pools, spread};
use super::{ProcessObservation, SocketRole};
use crate::stats::round3;

/// What `/proc/PID/io` counts, said wherever its syscall figures appear.
pub const SYSCALLS_COUNTED: &str =
    "read and write syscalls from /proc/PID/io (syscr, syscw), which counts only the read and write families: recv/send/sendmsg on a socket, ioctl and epoll calls are not counted there";

/// One process: what it spent and what its sockets did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProcessSummary {
    pub pid: u32,
    /// How findings name it (their `file`): `pid 4242 (redis-server)`.
    pub name: String,
    /// `None` when the process's counters were not read at both ends of the interval.
    pub cpu: Option<CpuSummary>,
    /// One per socket, in the order of `observation.processes[].sockets`.
    pub sockets: Vec<SocketSummary>,
    /// Connections per peer: connected sockets by remote `ip:port`, accepted ones by remote ip.
    pub peers: Vec<PeerSummary>,
    /// What could not be read or checked, once per process ("TCP_NODELAY unknown on 3
    /// sockets: kernel.yama.ptrace_scope = 1").
    pub notes: Vec<String>,
}

/// The process's own accounting over the interval, set against its TCP traffic.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuSummary {
    pub interval_ms: f64,
    pub cpu_ms: f64,
    /// CPU time / wall time: 1.0 is one core kept busy.
    pub cpu_share: f64,
    pub voluntary_ctxt_switches: u64,
    pub nonvoluntary_ctxt_switches: u64,
    pub voluntary_ctxt_switches_per_s: f64,
    pub nonvoluntary_ctxt_switches_per_s: f64,
    /// Data segments received and sent by all the process's TCP sockets in the interval.
    pub data_segs_in: u64,
    pub data_segs_out: u64,
    /// CPU nanoseconds per data segment received; `None` when none was received.
    pub cpu_ns_per_data_seg_in: Option<f64>,
    pub syscr: Option<u64>,
    pub syscw: Option<u64>,
    pub syscr_per_data_seg_in: Option<f64>,
    pub syscw_per_data_seg_out: Option<f64>,
    /// What the syscall counts include: [`SYSCALLS_COUNTED`].
    pub syscalls_counted: String,
    /// The share of the CPU time spent in the kernel (system calls), from the clock ticks;
    /// `None` when the ticks were unreadable or fewer than [`MIN_TICKS_FOR_SHARE`].
    pub kernel_share: Option<f64>,
}

/// Ticks (10 ms) the user/kernel split needs before it says anything: one tick either way
/// is then at most a 10 % error.
pub const MIN_TICKS_FOR_SHARE: u64 = 10;

/// One socket over the interval.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SocketSummary {
    pub fd: i32,
    pub inode: u64,
    /// The state at the last sample as `ss` prints it (`ESTAB`, `LISTEN`, `CLOSE-WAIT`).
    pub state: String,
    /// Samples taken of it (every read, an idle socket's unstored repeats included).
    pub samples: u64,
    pub interval_ms: f64,
    /// Sampled once: the counts below are the socket's lifetime counters, not deltas.
    pub lifetime: bool,
    pub data_segs_in: u64,
    pub data_segs_out: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub retrans: u64,
    /// Mean payload of the data segments sent; `None` when none was sent.
    pub mean_write_bytes: Option<f64>,
    /// Samples taken that caught a write held as Nagle holds one (`unacked > 0`, `0 < notsent <
    /// snd_mss`, `unacked < snd_cwnd`, room in the peer's window when known: see
    /// `interval::held_by_nagle`) — counted whatever `TCP_NODELAY` says.
    pub held_samples: u64,
}

/// The connections a process holds with one peer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PeerSummary {
    pub role: SocketRole,
    /// `ip:port` for connected sockets, the client's ip for accepted ones.
    pub peer: String,
    pub connections: u64,
    pub data_segments: u64,
    /// The busiest connection's share of `data_segments`; `None` when there were none.
    pub busiest_share: Option<f64>,
}

fn per(n: Option<u64>, d: u64) -> Option<f64> {
    match n {
        Some(n) if d > 0 => Some(round3(n as f64 / d as f64)),
        _ => None,
    }
}

pub fn cpu(p: &ProcessObservation, data_segs_in: u64, data_segs_out: u64) -> Option<CpuSummary> {
    let (a, b) = (p.first?, p.last?);
    let wall_ns = b.at_ns.checked_sub(a.at_ns).filter(|&w| w > 0)?;
    let cpu_ns = b.cpu_ns.saturating_sub(a.cpu_ns);
    let wall_s = wall_ns as f64 / 1e9;
    let vol = b
        .voluntary_ctxt_switches
        .saturating_sub(a.voluntary_ctxt_switches);
    let invol = b
        .nonvoluntary_ctxt_switches
        .saturating_sub(a.nonvoluntary_ctxt_switches);
    let delta = |x: Option<u64>, y: Option<u64>| Some(y?.saturating_sub(x?));
    let syscr = delta(a.syscr, b.syscr);
    let syscw = delta(a.syscw, b.syscw);
    Some(CpuSummary {
        interval_ms: round3(wall_ns as f64 / 1e6),
        cpu_ms: round3(cpu_ns as f64 / 1e6),
        cpu_share: round3(cpu_ns as f64 / wall_ns as f64),
        voluntary_ctxt_switches: vol,
        nonvoluntary_ctxt_switches: invol,
        voluntary_ctxt_switches_per_s: round3(vol as f64 / wall_s),
        nonvoluntary_ctxt_switches_per_s: round3(invol as f64 / wall_s),
        data_segs_in,
        data_segs_out,
        cpu_ns_per_data_seg_in: per(Some(cpu_ns), data_segs_in).map(f64::round),
        syscr,
        syscw,
        syscr_per_data_seg_in: per(syscr, data_segs_in),
        syscw_per_data_seg_out: per(syscw, data_segs_out),
        syscalls_counted: SYSCALLS_COUNTED.to_string(),
        kernel_share: kernel_share(&a, &b),
    })
}

fn kernel_share(a: &super::ProcessCounters, b: &super::ProcessCounters) -> Option<f64> {
    let user = b.user_ticks?.checked_sub(a.user_ticks?)?;
    let system = b.system_ticks?.checked_sub(a.system_ticks?)?;
    let total = user + system;
    (total >= MIN_TICKS_FOR_SHARE).then(|| round3(system as f64 / total as f64))
}

pub fn socket(s: &super::SocketObservation) -> SocketSummary {
    match SocketInterval::of(s) {
        Some(iv) => SocketSummary {
            fd: s.fd,
            inode: s.inode,
            state: if s.closed {
                "closed".to_string()
            } else {
                state_name(iv.last.state).to_string()
            },
            samples: iv.samples_taken(),
            interval_ms: round3(iv.span_ms()),
            lifetime: iv.lifetime,
            data_segs_in: iv.data_segs_in,
            data_segs_out: iv.data_segs_out,
            bytes_sent: iv.bytes_sent,
            bytes_received: iv.bytes_received,
            retrans: iv.retrans,
            mean_write_bytes: iv.mean_write_bytes().map(round3),
            held_samples: iv.held_samples(),
        },
        None => SocketSummary {
            fd: s.fd,
            inode: s.inode,
            state: if s.closed { "closed" } else { "UNKNOWN" }.to_string(),
            samples: 0,
            interval_ms: 0.0,
            lifetime: false,
            data_segs_in: 0,
            data_segs_out: 0,
            bytes_sent: 0,
            bytes_received: 0,
            retrans: 0,
            mean_write_bytes: None,
            held_samples: 0,
        },
    }
}

pub fn peers(p: &ProcessObservation) -> Vec<PeerSummary> {
    let mut out: Vec<PeerSummary> = pools(p)
        .into_iter()
        .map(|(peer, conns)| {
            let uses: Vec<u64> = conns.iter().map(|(_, u)| *u).collect();
            let s = spread(&uses);
            PeerSummary {
                role: SocketRole::Connected,
                peer,
                connections: conns.len() as u64,
                data_segments: s.as_ref().map_or(0, |s| s.total),
                busiest_share: s.filter(|s| s.total > 0).map(|s| round3(s.busiest_share)),
            }
        })
        .collect();
    let mut clients: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    for iv in p.sockets.iter().filter_map(SocketInterval::of) {
        if iv.sock.role == SocketRole::Accepted {
            clients
                .entry(iv.sock.remote.ip().to_string())
                .or_default()
                .push(iv.data_segs_in + iv.data_segs_out);
        }
    }
    for (peer, uses) in clients {
        let s = spread(&uses);
        out.push(PeerSummary {
            role: SocketRole::Accepted,
            peer,
            connections: uses.len() as u64,
            data_segments: s.as_ref().map_or(0, |s| s.total),
            busiest_share: s.filter(|s| s.total > 0).map(|s| round3(s.busiest_share)),
        });
    }
    out
}

/// Everything but the notes the rules add.
pub fn process(p: &ProcessObservation) -> ProcessSummary {
    let sockets: Vec<SocketSummary> = p.sockets.iter().map(socket).collect();
    let data_in = sockets.iter().map(|s| s.data_segs_in).sum();
    let data_out = sockets.iter().map(|s| s.data_segs_out).sum();
    let mut notes = Vec::new();
    if let Some(why) = &p.options_refused {
        notes.push(format!("socket options unknown: {why}"));
    }
    if let Some(via) = &p.sockets_via {
        notes.push(format!(
            "sockets attributed to the process as {via}: some may belong to another process"
        ));
    }
    if let Some(via) = &p.tcp_info_via {
        notes.push(format!("tcp_info read by {via}"));
    }
    if p.first.is_none() || p.last.is_none() {
        notes.push(
            "CPU and context switches unknown: the process's counters were not read at both \
             ends of the interval"
                .to_string(),
        );
    }
    if p.exited {
        notes.push("the process exited before sampling ended".to_string());
    }
    let closed = p.sockets.iter().filter(|s| s.closed).count() as u64;
    if closed > 0 {
        notes.push(format!(
            "{} closed by the process during sampling (counted up to its last sample)",
            crate::numfmt::count_of(closed, "socket was", "sockets were")
        ));
    }
    if super::busy_poll::churned(p) {
        notes.push(
            "connections came and went during sampling: those opened and closed between two \
             samples were not seen, so the traffic counted is a lower bound and busy_poll is \
             not judged"
                .to_string(),
        );
    }
    if let Some(why) = &p.ctxt_switches_incomplete {
        notes.push(format!(
            "voluntary context switches undercounted ({why}): CPU per sleep unknown, busy_poll \
             not judged"
        ));
    }
    ProcessSummary {
        pid: p.pid,
        name: super::interval::process_name(p),
        cpu: cpu(p, data_in, data_out),
        sockets,
        peers: peers(p),
        notes,
    }
}
