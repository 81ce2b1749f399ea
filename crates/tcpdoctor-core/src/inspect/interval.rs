//! What changed over the sampled interval, per socket: the deltas every rule and the summary
//! read, and how a socket is named in evidence.
//!
//! 1. A socket's interval runs from its first `tcp_info` sample to its last (a socket closed
//!    during sampling ends at its last sample; one opened during it starts at its first).
//! 2. The kernel's segment counters are 32-bit and wrap: deltas are taken modulo 2³² (and a
//!    32-bit difference of half the range or more is taken as a counter that went backwards:
//!    0, see [`wrap32`]). Byte and time counters are 64-bit; a counter that went backwards (a
//!    different socket reusing the inode) gives 0, never a huge number.
//! 3. A socket sampled once (`inspect --duration 0`, or a socket seen only at the last
//!    sample) has no interval: its lifetime counters stand in for the deltas, and every
//!    sentence built on them says "since the socket opened" ([`SocketInterval::over`]).
//! 4. A socket is named `local -> remote (fd N, inode I)`: what `ls -l /proc/PID/fd` and
//!    `ss -tnpe` show, so a person can find it again.

use crate::flow::Direction;
use crate::report::FlowRef;

use super::{ProcessObservation, SocketObservation, SocketRole, TcpSample};

/// `TCP_ESTABLISHED` and `TCP_CLOSE_WAIT` in the kernel's `tcp_states`: the states in which a
/// socket still sends data (the peer's FIN stops only the peer's data).
pub const ESTABLISHED: u8 = 1;
pub const CLOSE_WAIT: u8 = 8;

/// One socket over the interval.
#[derive(Clone, Copy, Debug)]
pub struct SocketInterval<'a> {
    pub sock: &'a SocketObservation,
    pub first: &'a TcpSample,
    pub last: &'a TcpSample,
    pub span_ns: u64,
    /// One sample: the deltas are the counters since the socket was created.
    pub lifetime: bool,
    pub data_segs_out: u64,
    pub data_segs_in: u64,
    pub segs_out: u64,
    pub segs_in: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub bytes_retrans: u64,
    pub retrans: u64,
    pub busy_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
}

/// `last - first` of a 32-bit counter, modulo 2³² (it wraps). A difference of half the range
/// or more is a counter that went backwards (the inode reused by a new socket whose counters
/// restarted), not 2 billion segments in one interval: 0, as for the 64-bit counters.
pub fn wrap32(first: u32, last: u32) -> u64 {
    let d = last.wrapping_sub(first);
    if d >= 1 << 31 {
        0
    } else {
        u64::from(d)
    }
}

impl<'a> SocketInterval<'a> {
    /// `None` for a socket the kernel gave no sample of.
    pub fn of(sock: &'a SocketObservation) -> Option<SocketInterval<'a>> {
        let last = sock.samples.last()?;
        let lifetime = sock.samples.len() == 1;
        let first = if lifetime {
            &LIFETIME_START
        } else {
            sock.samples.first()?
        };
        Some(SocketInterval {
            sock,
            first,
            last,
            span_ns: if lifetime {
                0
            } else {
                last.at_ns.saturating_sub(first.at_ns)
            },
            lifetime,
            data_segs_out: wrap32(first.data_segs_out, last.data_segs_out),
            data_segs_in: wrap32(first.data_segs_in, last.data_segs_in),
            segs_out: wrap32(first.segs_out, last.segs_out),
            segs_in: wrap32(first.segs_in, last.segs_in),
            bytes_sent: last.bytes_sent.saturating_sub(first.bytes_sent),
            bytes_received: last.bytes_received.saturating_sub(first.bytes_received),
            bytes_retrans: last.bytes_retrans.saturating_sub(first.bytes_retrans),
            retrans: wrap32(first.total_retrans, last.total_retrans),
            busy_us: last.busy_us.saturating_sub(first.busy_us),
            rwnd_limited_us: last.rwnd_limited_us.saturating_sub(first.rwnd_limited_us),
            sndbuf_limited_us: last
                .sndbuf_limited_us
                .saturating_sub(first.sndbuf_limited_us),
        })
    }

    /// Mean payload of the data segments this socket sent in the interval (retransmissions
    /// included: `tcpi_bytes_sent` and `tcpi_data_segs_out` both count them).
    pub fn mean_write_bytes(&self) -> Option<f64> {
        (self.data_segs_out > 0).then(|| self.bytes_sent as f64 / self.data_segs_out as f64)
    }

    /// Samples taken of this socket: what the sampler read, repeats of an idle socket
    /// included ([`SocketObservation::samples_taken`]); the stored ones when not known.
    pub fn samples_taken(&self) -> u64 {
        let stored = self.sock.samples.len() as u64;
        if self.sock.samples_taken > 0 {
            self.sock.samples_taken.max(stored)
        } else {
            stored
        }
    }

    /// Samples taken that caught a write held by Nagle (see [`held_by_nagle`]); counted in
    /// the stored samples when the samples taken are not known.
    pub fn held_samples(&self) -> u64 {
        if self.sock.samples_taken > 0 {
            return self.sock.held_taken;
        }
        self.sock
            .samples
            .iter()
            .filter(|s| held_by_nagle(s))
            .count() as u64
    }

    /// The sampling period achieved on this socket, for evidence: `150 samples every 20 ms`.
    pub fn sampled(&self) -> String {
        sampled(
            usize::try_from(self.samples_taken()).unwrap_or(usize::MAX),
            self.span_ns,
        )
    }

    pub fn span_ms(&self) -> f64 {
        self.span_ns as f64 / 1e6
    }

    /// Over what the deltas were counted: `in 3 s`, or `since the socket opened`.
    pub fn over(&self) -> String {
        if self.lifetime {
            "since the socket opened (one sample: its lifetime counters)".to_string()
        } else {
            format!("in {}", crate::numfmt::dur_ms(self.span_ms()))
        }
    }
}

/// Where a socket's counters start: zero, when it was created.
static LIFETIME_START: TcpSample = TcpSample {
    at_ns: 0,
    state: 0,
    rtt_us: 0,
    rttvar_us: 0,
    min_rtt_us: 0,
    ato_us: 0,
    snd_mss: 0,
    rcv_mss: 0,
    snd_cwnd: 0,
    unacked: 0,
    notsent_bytes: 0,
    total_retrans: 0,
    segs_out: 0,
    segs_in: 0,
    data_segs_out: 0,
    data_segs_in: 0,
    bytes_acked: 0,
    bytes_received: 0,
    bytes_sent: 0,
    bytes_retrans: 0,
    delivery_rate_bps: 0,
    pacing_rate_bps: 0,
    busy_us: 0,
    rwnd_limited_us: 0,
    sndbuf_limited_us: 0,
    snd_wnd_bytes: None,
    total_rto: None,
};

/// A write held back the way Nagle holds one, caught in the act (PHYSICS §1 and §9): data in
/// flight and not yet acknowledged (`unacked > 0`), fewer bytes waiting than one segment's
/// worth (`0 < notsent < snd_mss`: a full segment would leave), room in the congestion window
/// (`unacked < snd_cwnd`: a bulk sender held by its window is not held by Nagle), and, when
/// the kernel reports the peer's window (`tcpi_snd_wnd`, 5.4+), room in it for the waiting
/// bytes (in flight + not sent ≤ the window: else `tcp_snd_wnd_test` holds them, not Nagle).
/// `snd_mss` is the kernel's current MSS for this socket, the options it carries on every
/// segment (timestamps) already taken off.
///
/// Consistent with Nagle's hold, not a proof of it: the kernel's `tcp_nagle_check` holds a
/// sub-MSS segment only while the last *small* segment sent is unacknowledged (Minshall's
/// variant: `snd_sml`, which `tcp_info` does not show), and pacing (`SO_MAX_PACING_RATE`, the
/// `fq` qdisc, BBR) or autocorking (earlier data still in the host's queues) hold a sub-MSS
/// write the same way for a moment.
pub fn held_by_nagle(s: &TcpSample) -> bool {
    (s.state == ESTABLISHED || s.state == CLOSE_WAIT)
        && s.unacked > 0
        && s.notsent_bytes > 0
        && s.notsent_bytes < s.snd_mss
        && s.unacked < s.snd_cwnd
        && s.snd_wnd_bytes.is_none_or(|wnd| {
            in_flight_bytes(s).saturating_add(u64::from(s.notsent_bytes)) <= u64::from(wnd)
        })
}

/// Bytes sent and not yet acknowledged (`snd_nxt − snd_una`), from the byte counters: sent
/// once (`tcpi_bytes_sent` less `tcpi_bytes_retrans`) less acknowledged (`tcpi_bytes_acked`,
/// which counts the SYN as one).
pub fn in_flight_bytes(s: &TcpSample) -> u64 {
    s.bytes_sent
        .saturating_sub(s.bytes_retrans)
        .saturating_sub(s.bytes_acked.saturating_sub(1))
}

/// What a finding's `rests_on` says about where `tcp_info` came from.
pub fn tcp_info_source(p: &ProcessObservation) -> String {
    match &p.tcp_info_via {
        Some(via) => format!("tcp_info by {via}"),
        None => "tcp_info over netlink sock_diag".to_string(),
    }
}

/// What a finding's `rests_on` says about how `options` of the socket at `fd` were read.
pub fn options_source(options: &str, fd: i32) -> String {
    if fd >= 0 {
        format!(
            "{options} read with getsockopt on a pidfd_getfd duplicate of fd {fd} (closed at once)"
        )
    } else {
        format!("{options} as the reader gave them: no descriptor of the process is known for this socket")
    }
}

/// What a finding's `rests_on` says about how the sockets were found to be the process's.
pub fn sockets_source(p: &ProcessObservation) -> String {
    match &p.sockets_via {
        Some(via) => format!("sockets attributed to the process as {via}"),
        None => "sockets matched to the process through /proc/PID/fd socket inodes".to_string(),
    }
}

/// How a finding names the process: `pid 4242 (redis-server)`.
pub fn process_name(p: &ProcessObservation) -> String {
    format!("pid {} ({})", p.pid, p.comm)
}

/// `local -> remote (fd N, inode I)`, or `(no descriptor known, inode I)`.
pub fn socket_label(s: &SocketObservation) -> String {
    format!(
        "{} -> {} ({}, inode {})",
        s.local,
        s.remote,
        fd_name(s.fd),
        s.inode
    )
}

/// `fd 7`, or `no descriptor known` for a socket attributed without one (fd -1).
pub fn fd_name(fd: i32) -> String {
    if fd >= 0 {
        format!("fd {fd}")
    } else {
        "no descriptor known".to_string()
    }
}

/// The server end of the socket's connection: the local endpoint of a listener or an accepted
/// socket, the remote one of a connected socket.
pub fn server_of(s: &SocketObservation) -> String {
    match s.role {
        SocketRole::Listener | SocketRole::Accepted => s.local.to_string(),
        SocketRole::Connected => s.remote.to_string(),
    }
}

/// The client end: the remote endpoint of an accepted socket, the local one of a connected
/// socket, `*` for a listener (as `ss` prints its peer).
pub fn client_of(s: &SocketObservation) -> String {
    match s.role {
        SocketRole::Listener => "*".to_string(),
        SocketRole::Accepted => s.remote.to_string(),
        SocketRole::Connected => s.local.to_string(),
    }
}

/// Which way this socket's own writes move.
pub fn sending_direction(s: &SocketObservation) -> Direction {
    match s.role {
        SocketRole::Connected => Direction::ClientToServer,
        SocketRole::Listener | SocketRole::Accepted => Direction::ServerToClient,
    }
}

/// The socket as a finding's `example_flow`: its `id` is the file descriptor number (0 when
/// none is known).
pub fn flow_ref(s: &SocketObservation) -> FlowRef {
    FlowRef {
        id: u64::try_from(s.fd).unwrap_or(0),
        client: client_of(s),
        server: server_of(s),
    }
}

/// The role as people say it.
pub fn role_name(role: SocketRole) -> &'static str {
    match role {
        SocketRole::Listener => "listening",
        SocketRole::Accepted => "accepted",
        SocketRole::Connected => "connected",
    }
}

/// A state as `ss` prints it.
pub fn state_name(state: u8) -> &'static str {
    match state {
        1 => "ESTAB",
        2 => "SYN-SENT",
        3 => "SYN-RECV",
        4 => "FIN-WAIT-1",
        5 => "FIN-WAIT-2",
        6 => "TIME-WAIT",
        7 => "UNCONN",
        8 => "CLOSE-WAIT",
        9 => "LAST-ACK",
        10 => "LISTEN",
        11 => "CLOSING",
        12 => "NEW-SYN-RECV",
        _ => "UNKNOWN",
    }
}

/// The sampling period the shell achieved, for evidence: `every 10 ms`. `samples` are the
/// samples taken over `span_ns` (see [`SocketInterval::samples_taken`]), not those stored.
pub fn sampled(samples: usize, span_ns: u64) -> String {
    if samples < 2 {
        return format!("{samples} sample");
    }
    let every_ms = span_ns as f64 / 1e6 / (samples - 1) as f64;
    format!(
        "{samples} samples every {}",
        crate::numfmt::dur_ms(every_ms)
    )
}

/// Bytes as a person reads them: `136 B`, `64 KiB`, `2.5 MiB`.
pub fn bytes(n: u64) -> String {
    const KIB: f64 = 1024.0;
    let v = n as f64;
    if v >= KIB * KIB {
        format!("{} MiB", crate::numfmt::num(v / (KIB * KIB)))
    } else if v >= KIB {
        format!("{} KiB", crate::numfmt::num(v / KIB))
    } else {
        format!("{n} B")
    }
}

/// A rate in bits per second as `ss` prints it and a person reads it: `12.5 Mbit/s`.
pub fn bit_rate(bps: f64) -> String {
    if bps >= 1e9 {
        format!("{} Gbit/s", crate::numfmt::num(bps / 1e9))
    } else if bps >= 1e6 {
        format!("{} Mbit/s", crate::numfmt::num(bps / 1e6))
    } else if bps >= 1e3 {
        format!("{} kbit/s", crate::numfmt::num(bps / 1e3))
    } else {
        format!("{} bit/s", crate::numfmt::num(bps))
    }
}
