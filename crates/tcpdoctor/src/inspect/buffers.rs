//! Whether a socket's buffer size was set by hand (`SO_SNDBUF`/`SO_RCVBUF`, which turns the
//! kernel's autotuning off for that buffer) or left to the kernel — said only with evidence.
//!
//! The kernel keeps the "set by hand" bit (`SOCK_SNDBUF_LOCK`) to itself, and keeps no history
//! of the sysctls the socket lived under (they may have changed since it opened), so the rules
//! read what it does show, in this order:
//! 1. The size changed while sampled: autotuning (a size set by hand never changes).
//! 2. Above what `setsockopt` may ask for (2 × `net.core.wmem_max`/`rmem_max`; the kernel
//!    doubles the request): autotuned (`SO_SNDBUFFORCE`, which needs CAP_NET_ADMIN, and a
//!    `net.core` maximum lowered since the call are the exceptions, and the evidence says so).
//! 3. Above the autotuner's ceiling (`net.ipv4.tcp_wmem`/`tcp_rmem` max, in the socket's
//!    namespace): unknown — set by hand, or grown by autotuning while the ceiling was higher.
//! 4. A send buffer of an established socket below 2 × 10 segments × MSS (what
//!    `tcp_sndbuf_expand` gives every autotuned connection once the handshake is done,
//!    whatever `tcp_wmem`'s default), capped at the ceiling, while TCP is not under memory
//!    pressure and has not been since boot (`TCPMemoryPressures` 0: pressure is the one
//!    thing that shrinks an autotuned buffer): fixed, the evidence naming what the kernel
//!    cannot show (a `tcp_wmem` max lower than that when the connection opened, a cgroup's
//!    socket memory pressure). With
//!    pressure not ruled out, or a buffer below only the default size (`tcp_wmem`/`tcp_rmem`
//!    middle value, which a later sysctl may have raised): unknown, with the reasons.
//! 5. Otherwise: unknown, with the range it sits in.

use tcpdoctor_core::inspect::BufferSetting;

/// Which buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffer {
    Send,
    Receive,
}

impl Buffer {
    fn option(self) -> &'static str {
        match self {
            Buffer::Send => "SO_SNDBUF",
            Buffer::Receive => "SO_RCVBUF",
        }
    }

    fn autotune_sysctl(self) -> &'static str {
        match self {
            Buffer::Send => "net.ipv4.tcp_wmem",
            Buffer::Receive => "net.ipv4.tcp_rmem",
        }
    }

    fn max_sysctl(self) -> &'static str {
        match self {
            Buffer::Send => "net.core.wmem_max",
            Buffer::Receive => "net.core.rmem_max",
        }
    }
}

/// The kernel's settings the rules compare with, as read in the socket's namespace.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// `tcp_wmem`/`tcp_rmem`: min, default, max.
    pub autotune: Option<[u64; 3]>,
    /// `net.core.wmem_max`/`rmem_max`.
    pub core_max: Option<u64>,
}

/// What was seen of one buffer of one socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    pub first: u64,
    pub smallest: u64,
    pub largest: u64,
    pub last: u64,
    /// The socket is a listener (it never autotunes: its children do).
    pub listener: bool,
    /// The send MSS once the handshake is done (0 before, or unknown).
    pub mss: u32,
    /// Whether TCP memory was under pressure (`None`: could not tell).
    pub pressure: Option<bool>,
}

pub fn setting(buffer: Buffer, seen: Option<Seen>, limits: Limits) -> BufferSetting {
    let opt = buffer.option();
    let Some(s) = seen else {
        return BufferSetting::Unknown {
            why: format!("{opt} could not be read"),
        };
    };
    if s.smallest != s.largest {
        return BufferSetting::Autotuned {
            evidence: format!(
                "{opt} changed from {} to {} bytes while sampled: the kernel's autotuning (a \
                 size set with setsockopt never changes)",
                s.first, s.last
            ),
        };
    }
    let v = s.last;
    let Some([_, default, max]) = limits.autotune else {
        return BufferSetting::Unknown {
            why: format!(
                "{opt} is {v} bytes; {} could not be read in the socket's network namespace",
                buffer.autotune_sysctl()
            ),
        };
    };
    if let Some(core) = limits.core_max.filter(|&c| v > c.saturating_mul(2)) {
        return BufferSetting::Autotuned {
            evidence: format!(
                "{opt} is {v} bytes, more than setsockopt may ask for (2 × {} = {}): the \
                 kernel's autotuning (or {opt}FORCE by a CAP_NET_ADMIN process, or a {} \
                 lowered since the call)",
                buffer.max_sysctl(),
                core.saturating_mul(2),
                buffer.max_sysctl()
            ),
        };
    }
    if v > max {
        return BufferSetting::Unknown {
            why: format!(
                "{opt} is {v} bytes, above {} max {max} that autotuning does not exceed now: \
                 set with setsockopt({opt}, {}), or autotuned while that max was higher (the \
                 kernel keeps no history of the sysctl)",
                buffer.autotune_sysctl(),
                v / 2
            ),
        };
    }
    if s.listener {
        return BufferSetting::Unknown {
            why: format!(
                "{opt} is {v} bytes on a listening socket, which does not autotune; its \
                 accepted sockets say more"
            ),
        };
    }
    let sysctl = buffer.autotune_sysctl();
    let expand = match buffer {
        Buffer::Send if s.mss > 0 => Some((20 * u64::from(s.mss)).min(max)),
        _ => None,
    };
    if let Some(floor) = expand.filter(|&f| v < f) {
        return match s.pressure {
            Some(false) => BufferSetting::Fixed {
                evidence: format!(
                    "{opt} is {v} bytes, below {floor}: the kernel gives every connection it \
                     autotunes 2 × 10 segments × MSS {} once the handshake is done (at most \
                     {sysctl} max {max}), and TCP is not under memory pressure nor has been \
                     since boot (the only thing that shrinks an autotuned buffer): set with \
                     setsockopt({opt}, {}) — unless {sysctl} max was below {v} when the \
                     connection opened, or its cgroup's socket memory pressure shrank it, \
                     which the kernel does not show",
                    s.mss,
                    v / 2
                ),
            },
            _ => BufferSetting::Unknown {
                why: format!(
                    "{opt} is {v} bytes, below {floor}, the least the kernel gives a connection \
                     it autotunes (2 × 10 segments × MSS {}, at most {sysctl} max {max}); set \
                     by hand, unless TCP memory pressure shrank it (now or earlier: could not \
                     rule that out)",
                    s.mss
                ),
            },
        };
    }
    if v < default {
        return BufferSetting::Unknown {
            why: format!(
                "{opt} is {v} bytes, below {default}, the size the kernel starts an autotuned \
                 socket at ({sysctl} default): set by hand, or autotuned under an earlier, \
                 lower default or shrunk by memory pressure (the kernel keeps no history of \
                 either)"
            ),
        };
    }
    let floor = expand.unwrap_or(default).max(default).min(max);
    BufferSetting::Unknown {
        why: format!(
            "{opt} is {v} bytes, within what autotuning gives ({floor} to {max}) and unchanged \
             while sampled: the kernel does not say whether it was set by hand"
        ),
    }
}

/// Whether TCP memory is under pressure: `mem` of the `TCP:` line of /proc/net/sockstat
/// against `net.ipv4.tcp_mem` (pages). Pressure starts above the middle value and ends below
/// the first: only below the first is "not under pressure" certain.
pub fn pressure(sockstat: &str, tcp_mem: &str) -> Option<bool> {
    let line = sockstat.lines().find(|l| l.starts_with("TCP:"))?;
    let mut words = line.split_whitespace();
    let mem: u64 = loop {
        if words.next()? == "mem" {
            break words.next()?.parse().ok()?;
        }
    };
    let low: u64 = tcp_mem.split_whitespace().next()?.parse().ok()?;
    (mem < low).then_some(false)
}

/// `TCPMemoryPressures` of /proc/net/netstat: how many times TCP entered memory pressure
/// since boot (counted in the network namespace of the socket that hit it).
pub fn pressures_since_boot(netstat: &str) -> Option<u64> {
    let mut lines = netstat.lines().filter(|l| l.starts_with("TcpExt:"));
    let names = lines.next()?;
    let values = lines.next()?;
    let at = names
        .split_whitespace()
        .position(|w| w == "TCPMemoryPressures")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// Whether TCP memory is, or has been since boot, under pressure, from this namespace's view
/// (TCP memory is accounted machine-wide): "not" only when [`pressure`] rules it out now and
/// [`pressures_since_boot`] is 0 — an autotuned buffer shrunk earlier stays shrunk.
pub fn pressure_here() -> Option<bool> {
    let sockstat = std::fs::read_to_string("/proc/net/sockstat").ok()?;
    let tcp_mem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_mem").ok()?;
    let netstat = std::fs::read_to_string("/proc/net/netstat").ok()?;
    match (
        pressure(&sockstat, &tcp_mem),
        pressures_since_boot(&netstat),
    ) {
        (Some(false), Some(0)) => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::{pressure, pressures_since_boot, setting, Buffer, Limits, Seen};
    use tcpdoctor_core::inspect::BufferSetting;

    const LIMITS: Limits = Limits {
        autotune: Some([4096, 16384, 4_194_304]),
        core_max: Some(212_992),
    };

    fn seen(v: u64) -> Seen {
        Seen {
            first: v,
            smallest: v,
            largest: v,
            last: v,
            listener: false,
            mss: 65483,
            pressure: Some(false),
        }
    }

    fn kind(b: &BufferSetting) -> &'static str {
        match b {
            BufferSetting::Fixed { .. } => "fixed",
            BufferSetting::Autotuned { .. } => "autotuned",
            BufferSetting::Unknown { .. } => "unknown",
        }
    }

    #[test]
    fn each_rule_with_its_evidence() {
        let s = |v| setting(Buffer::Send, Some(seen(v)), LIMITS);
        // SO_SNDBUF 65536 on an accepted loopback socket: 131072 < 20 × 65483.
        let fixed = s(131_072);
        assert_eq!(kind(&fixed), "fixed", "{fixed:?}");
        assert!(format!("{fixed:?}").contains("setsockopt(SO_SNDBUF, 65536)"));
        // Above tcp_wmem max but within what setsockopt may ask for: unknown (see below).
        let big_core = Limits {
            core_max: Some(16 << 20),
            ..LIMITS
        };
        assert_eq!(
            kind(&setting(Buffer::Send, Some(seen(8 << 20)), big_core)),
            "unknown"
        );
        // 3.9 MB: more than 2 × wmem_max could ask for.
        assert_eq!(kind(&s(3_939_840)), "autotuned");
        let grew = Seen {
            smallest: 16384,
            first: 16384,
            ..seen(3_939_840)
        };
        assert_eq!(
            kind(&setting(Buffer::Send, Some(grew), LIMITS)),
            "autotuned"
        );
        // Below the floor but memory pressure not ruled out: unknown.
        let unsure = Seen {
            pressure: None,
            ..seen(131_072)
        };
        assert_eq!(
            kind(&setting(Buffer::Send, Some(unsure), LIMITS)),
            "unknown"
        );
        // Within range, no core max to compare with: unknown.
        let in_range = Limits {
            core_max: None,
            ..LIMITS
        };
        assert_eq!(
            kind(&setting(Buffer::Send, Some(seen(3_939_840)), in_range)),
            "unknown"
        );
        let listener = Seen {
            listener: true,
            ..seen(16384)
        };
        assert_eq!(
            kind(&setting(Buffer::Send, Some(listener), LIMITS)),
            "unknown"
        );
        assert_eq!(kind(&setting(Buffer::Receive, None, LIMITS)), "unknown");
        // Below the receive default: set by hand, or autotuned under a lower default.
        assert_eq!(
            kind(&setting(Buffer::Receive, Some(seen(2304)), LIMITS)),
            "unknown"
        );
        let no_sysctl = Limits::default();
        assert_eq!(
            kind(&setting(Buffer::Send, Some(seen(131_072)), no_sysctl)),
            "unknown"
        );
    }

    /// Review item 3: sysctls changed after the socket opened, which the kernel keeps no
    /// history of, must not turn an autotuned buffer into "fixed".
    #[test]
    fn a_sysctl_changed_since_the_socket_opened_never_makes_an_autotuned_buffer_fixed() {
        // SO_SNDBUF 3939840, autotuned under tcp_wmem max 4 MiB; max then lowered to 1 MiB.
        let lowered = Limits {
            autotune: Some([4096, 16384, 1 << 20]),
            core_max: Some(212_992),
        };
        let b = setting(Buffer::Send, Some(seen(3_939_840)), lowered);
        assert_eq!(kind(&b), "autotuned", "{b:?}");
        // The same without net.core.wmem_max to rule setsockopt out: unknown, saying why.
        let no_core = Limits {
            core_max: None,
            ..lowered
        };
        let b = setting(Buffer::Send, Some(seen(3_939_840)), no_core);
        assert_eq!(kind(&b), "unknown", "{b:?}");
        assert!(
            format!("{b:?}").contains("while that max was higher"),
            "{b:?}"
        );
        // tcp_wmem default raised to 4 MiB after a socket autotuned to 2.6 MB (above
        // 20 × MSS): below the new default, but not fixed.
        let raised = Limits {
            autotune: Some([4096, 4 << 20, 4 << 20]),
            core_max: Some(16 << 20),
        };
        let b = setting(Buffer::Send, Some(seen(2_626_560)), raised);
        assert_eq!(kind(&b), "unknown", "{b:?}");
        assert!(format!("{b:?}").contains("earlier, lower default"), "{b:?}");
        // tcp_rmem default raised above an autotuned receive buffer that never grew.
        let raised_r = Limits {
            autotune: Some([4096, 262_144, 6 << 20]),
            core_max: Some(16 << 20),
        };
        let b = setting(Buffer::Receive, Some(seen(131_072)), raised_r);
        assert_eq!(kind(&b), "unknown", "{b:?}");
        // Below 20 × MSS, pressure ruled out now and since boot: fixed, the residual
        // assumption stated.
        let b = setting(Buffer::Send, Some(seen(131_072)), raised);
        assert_eq!(kind(&b), "fixed", "{b:?}");
        assert!(format!("{b:?}").contains("unless net.ipv4.tcp_wmem max was below"));
    }

    #[test]
    fn memory_pressure_since_boot_is_read_from_netstat() {
        let netstat = "TcpExt: SyncookiesSent TCPMemoryPressures TCPMemoryPressuresChrono\n\
                       TcpExt: 0 3 120\nIpExt: InNoRoutes\nIpExt: 0\n";
        assert_eq!(pressures_since_boot(netstat), Some(3));
        assert_eq!(pressures_since_boot("TcpExt: A B\nTcpExt: 1 2\n"), None);
        assert_eq!(pressures_since_boot(""), None);
    }

    #[test]
    fn memory_pressure_only_ruled_out_below_the_low_mark() {
        let sockstat = "sockets: used 17\nTCP: inuse 2 orphan 0 tw 0 alloc 2 mem 299\n";
        assert_eq!(pressure(sockstat, "287898 383867 575796\n"), Some(false));
        assert_eq!(pressure(sockstat, "100 200 300"), None);
        assert_eq!(pressure("garbage", "1 2 3"), None);
    }
}
