//! Observations built in code: a process, its sockets and their samples, with the numbers a
//! test cares about and plain defaults for the rest.

use std::net::SocketAddr;

use crate::inspect::{
    BufferSetting, Observation, ProcessCounters, ProcessObservation, SocketObservation,
    SocketOptions, SocketRole, TcpSample,
};

pub const MS: u64 = 1_000_000;
/// Loopback's MSS with timestamps taken off.
pub const LOOPBACK_MSS: u32 = 65483;

pub fn addr(s: &str) -> SocketAddr {
    s.parse().expect("test address")
}

/// Options of a socket left to the kernel's defaults (Nagle on).
pub fn default_options() -> SocketOptions {
    SocketOptions {
        nodelay: Some(false),
        cork: Some(false),
        sndbuf_bytes: Some(16384),
        rcvbuf_bytes: Some(131072),
        sndbuf: BufferSetting::Autotuned {
            evidence: "SOCK_SNDBUF_LOCK not set".into(),
        },
        rcvbuf: BufferSetting::Autotuned {
            evidence: "SOCK_RCVBUF_LOCK not set".into(),
        },
        notsent_lowat_bytes: Some(0),
        keepalive: Some(false),
    }
}

/// Options the kernel refused to give.
pub fn unknown_options(why: &str) -> SocketOptions {
    SocketOptions {
        nodelay: None,
        cork: None,
        sndbuf_bytes: None,
        rcvbuf_bytes: None,
        sndbuf: BufferSetting::Unknown { why: why.into() },
        rcvbuf: BufferSetting::Unknown { why: why.into() },
        notsent_lowat_bytes: None,
        keepalive: None,
    }
}

/// An idle established socket's sample at `t_ms`.
pub fn sample(t_ms: u64) -> TcpSample {
    TcpSample {
        at_ns: t_ms * MS,
        state: 1,
        rtt_us: 50,
        rttvar_us: 20,
        min_rtt_us: 20,
        ato_us: 40_000,
        snd_mss: LOOPBACK_MSS,
        rcv_mss: 536,
        snd_cwnd: 10,
        ..TcpSample::default()
    }
}

/// A socket whose counters grow linearly over `n` samples taken every `every_ms`: each sample
/// adds `segs_out`/`segs_in` data segments of `write_bytes` each way; `each` can shape
/// every sample after that (index, sample).
pub struct SocketBuilder {
    pub sock: SocketObservation,
}

impl SocketBuilder {
    pub fn new(fd: i32, local: &str, remote: &str, role: SocketRole) -> SocketBuilder {
        SocketBuilder {
            sock: SocketObservation {
                inode: 10_000 + fd as u64,
                fd,
                local: addr(local),
                remote: addr(remote),
                role,
                congestion: Some("cubic".into()),
                options: default_options(),
                options_before_data: false,
                samples: Vec::new(),
                samples_taken: 0,
                held_taken: 0,
                closed: false,
            },
        }
    }

    pub fn accepted(fd: i32, client_port: u16) -> SocketBuilder {
        SocketBuilder::new(
            fd,
            "127.0.0.1:7000",
            &format!("127.0.0.1:{client_port}"),
            SocketRole::Accepted,
        )
    }

    pub fn connected(fd: i32, local_port: u16, server: &str) -> SocketBuilder {
        SocketBuilder::new(
            fd,
            &format!("127.0.0.1:{local_port}"),
            server,
            SocketRole::Connected,
        )
    }

    pub fn options(mut self, f: impl FnOnce(&mut SocketOptions)) -> SocketBuilder {
        f(&mut self.sock.options);
        self
    }

    /// `n` samples every `every_ms`, each adding `segs_out` data segments of `write_bytes` and
    /// `segs_in` data segments of 20 bytes; `shape(i, sample)` adjusts each.
    pub fn traffic(
        mut self,
        n: u64,
        every_ms: u64,
        segs_out: u32,
        write_bytes: u64,
        segs_in: u32,
        mut shape: impl FnMut(u64, &mut TcpSample),
    ) -> SocketBuilder {
        for i in 0..n {
            let mut s = sample(i * every_ms);
            let k = i as u32;
            s.data_segs_out = k * segs_out;
            s.segs_out = k * (segs_out + segs_in);
            s.bytes_sent = u64::from(k * segs_out) * write_bytes;
            s.bytes_acked = s.bytes_sent;
            s.data_segs_in = k * segs_in;
            s.segs_in = k * (segs_out + segs_in);
            s.bytes_received = u64::from(k * segs_in) * 20;
            shape(i, &mut s);
            self.sock.samples.push(s);
        }
        self
    }

    pub fn build(self) -> SocketObservation {
        self.sock
    }
}

pub fn listener(fd: i32) -> SocketObservation {
    let mut s = SocketBuilder::new(fd, "127.0.0.1:7000", "0.0.0.0:0", SocketRole::Listener).sock;
    let mut t = sample(0);
    t.state = 10;
    s.samples.push(t);
    s
}

pub fn counters(t_ms: u64, cpu_ms: u64, voluntary: u64) -> ProcessCounters {
    ProcessCounters {
        at_ns: t_ms * MS,
        cpu_ns: cpu_ms * MS,
        voluntary_ctxt_switches: voluntary,
        nonvoluntary_ctxt_switches: 0,
        syscr: Some(voluntary),
        syscw: Some(voluntary),
        // Four fifths in the kernel: a loop of system calls (busy_poll's rule 4).
        user_ticks: Some(cpu_ms / 50),
        system_ticks: Some(cpu_ms * 4 / 50),
    }
}

pub fn process(sockets: Vec<SocketObservation>) -> ProcessObservation {
    ProcessObservation {
        pid: 4242,
        comm: "specimen".into(),
        cmdline: "specimen --port 7000".into(),
        netns: Some(4026531840),
        first: Some(counters(0, 0, 0)),
        last: Some(counters(3000, 30, 600)),
        options_refused: None,
        exited: false,
        tcp_info_via: None,
        sockets_via: None,
        ctxt_switches_incomplete: None,
        sockets,
    }
}

pub fn observation(processes: Vec<ProcessObservation>) -> Observation {
    Observation {
        started_ns: 0,
        ended_ns: 3000 * MS,
        interval_ns: 10 * MS,
        processes,
    }
}
