//! Whether a socket's buffer size was set by hand (`SO_SNDBUF`/`SO_RCVBUF`, which turns the
//! kernel's autotuning off for that buffer) or left to the kernel — said only with evidence.
//!
//! The kernel keeps the "set by hand" bit (`SOCK_SNDBUF_LOCK`) to itself, so the rules read
//! what it does show, in this order:
//! 1. The size changed while sampled: autotuning (a size set by hand never changes).
//! 2. Above the autotuner's ceiling (`net.ipv4.tcp_wmem`/`tcp_rmem` max, in the socket's
//!    namespace): only `setsockopt` reaches it — fixed.
//! 3. Above what `setsockopt` may ask for (2 × `net.core.wmem_max`/`rmem_max`; the kernel
//!    doubles the request): only the kernel set it — autotuned (`SO_SNDBUFFORCE`, which needs
//!    CAP_NET_ADMIN, is the one exception, and the evidence says so).
//! 4. Below the least the kernel gives a connection it autotunes, while TCP is not under
//!    memory pressure (the one thing that shrinks an autotuned buffer): fixed. That floor is
//!    the default size (`tcp_wmem`/`tcp_rmem` middle value), and for a send buffer after the
//!    handshake also 2 × 10 segments × MSS (`tcp_sndbuf_expand`), capped at the ceiling.
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
    if v > max {
        return BufferSetting::Fixed {
            evidence: format!(
                "{opt} is {v} bytes, above {} max {max} that autotuning never exceeds: set with \
                 setsockopt({opt}, {})",
                buffer.autotune_sysctl(),
                v / 2
            ),
        };
    }
    if let Some(core) = limits.core_max.filter(|&c| v > c.saturating_mul(2)) {
        return BufferSetting::Autotuned {
            evidence: format!(
                "{opt} is {v} bytes, more than setsockopt may ask for (2 × {} = {}): the \
                 kernel's autotuning (or {opt}FORCE by a CAP_NET_ADMIN process)",
                buffer.max_sysctl(),
                core.saturating_mul(2)
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
    let floor = match buffer {
        Buffer::Send if s.mss > 0 => default.max(20 * u64::from(s.mss)).min(max),
        _ => default,
    };
    let floor_why = match buffer {
        Buffer::Send if s.mss > 0 => format!(
            "the least the kernel gives a connection it autotunes ({} default {default}, and \
             2 × 10 segments × MSS {} after the handshake, at most {max})",
            buffer.autotune_sysctl(),
            s.mss
        ),
        _ => format!(
            "the size the kernel starts an autotuned socket at ({} default)",
            buffer.autotune_sysctl()
        ),
    };
    if v < floor {
        return match s.pressure {
            Some(false) => BufferSetting::Fixed {
                evidence: format!(
                    "{opt} is {v} bytes, below {floor}, {floor_why}, and TCP is not under \
                     memory pressure (the only thing that shrinks an autotuned buffer): set \
                     with setsockopt({opt}, {})",
                    v / 2
                ),
            },
            _ => BufferSetting::Unknown {
                why: format!(
                    "{opt} is {v} bytes, below {floor}, {floor_why}; set by hand, unless TCP \
                     memory pressure shrank it (could not rule that out)"
                ),
            },
        };
    }
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

/// Reads [`pressure`] from this namespace's view (TCP memory is accounted machine-wide).
pub fn pressure_here() -> Option<bool> {
    let sockstat = std::fs::read_to_string("/proc/net/sockstat").ok()?;
    let tcp_mem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_mem").ok()?;
    pressure(&sockstat, &tcp_mem)
}

#[cfg(test)]
mod tests {
    use super::{pressure, setting, Buffer, Limits, Seen};
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
        assert_eq!(kind(&s(8 << 20)), "fixed", "above tcp_wmem max");
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
        assert_eq!(
            kind(&setting(Buffer::Receive, Some(seen(2304)), LIMITS)),
            "fixed"
        );
        let no_sysctl = Limits::default();
        assert_eq!(
            kind(&setting(Buffer::Send, Some(seen(131_072)), no_sysctl)),
            "unknown"
        );
    }

    #[test]
    fn memory_pressure_only_ruled_out_below_the_low_mark() {
        let sockstat = "sockets: used 17\nTCP: inuse 2 orphan 0 tw 0 alloc 2 mem 299\n";
        assert_eq!(pressure(sockstat, "287898 383867 575796\n"), Some(false));
        assert_eq!(pressure(sockstat, "100 200 300"), None);
        assert_eq!(pressure("garbage", "1 2 3"), None);
    }
}
