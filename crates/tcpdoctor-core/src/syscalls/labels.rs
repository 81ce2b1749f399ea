//! The names a call is counted under, as a user knows them from `strace -c`: the call's name,
//! with the `ioctl` request or the socket option it was about (`ioctl(SIOCOUTQ)`,
//! `setsockopt(TCP_NODELAY)`), and a second, errno-split label for the results that tell a
//! loop from work (`recvfrom=EAGAIN`, `epoll_wait(timeout 0)=0`).
//!
//! Every call is counted once under [`label`]; a call also counted under [`outcome_label`] is
//! one of those, so `recvfrom=EAGAIN` ≤ `recvfrom`.

use super::{ioctl, sockopt, Call, CallKind};

/// Linux errno numbers (the same on x86-64 and aarch64) and their names.
pub mod errno {
    pub const EINTR: i64 = 4;
    pub const EBADF: i64 = 9;
    pub const EAGAIN: i64 = 11;
    pub const EPIPE: i64 = 32;
    pub const ECONNRESET: i64 = 104;
    pub const ENOTCONN: i64 = 107;
    pub const ETIMEDOUT: i64 = 110;
    pub const ECONNREFUSED: i64 = 111;
    pub const EINPROGRESS: i64 = 115;

    /// `EAGAIN`, or `E<n>` for a number not named here.
    pub fn name(n: i64) -> String {
        match n {
            EINTR => "EINTR",
            EBADF => "EBADF",
            EAGAIN => "EAGAIN",
            EPIPE => "EPIPE",
            ECONNRESET => "ECONNRESET",
            ENOTCONN => "ENOTCONN",
            ETIMEDOUT => "ETIMEDOUT",
            ECONNREFUSED => "ECONNREFUSED",
            EINPROGRESS => "EINPROGRESS",
            _ => return format!("E{n}"),
        }
        .to_string()
    }
}

/// The name of an `ioctl` request on a socket; SIOCINQ is FIONREAD (the same number), and
/// strace prints FIONREAD.
pub fn ioctl_name(request: u64) -> String {
    match request {
        ioctl::SIOCOUTQ => "SIOCOUTQ".to_string(),
        ioctl::SIOCINQ => "FIONREAD".to_string(),
        ioctl::SIOCOUTQNSD => "SIOCOUTQNSD".to_string(),
        0x5421 => "FIONBIO".to_string(),
        0x5452 => "FIOASYNC".to_string(),
        r => format!("{r:#x}"),
    }
}

/// The name of a socket option (`TCP_NODELAY`, `SO_ERROR`), or `level:optname` in numbers.
pub fn sockopt_name(level: u64, name: u64) -> String {
    use sockopt::*;
    let known = match (level, name) {
        (IPPROTO_TCP, TCP_NODELAY) => "TCP_NODELAY",
        (IPPROTO_TCP, 2) => "TCP_MAXSEG",
        (IPPROTO_TCP, TCP_CORK) => "TCP_CORK",
        (IPPROTO_TCP, 4) => "TCP_KEEPIDLE",
        (IPPROTO_TCP, 5) => "TCP_KEEPINTVL",
        (IPPROTO_TCP, 6) => "TCP_KEEPCNT",
        (IPPROTO_TCP, 11) => "TCP_INFO",
        (IPPROTO_TCP, TCP_QUICKACK) => "TCP_QUICKACK",
        (IPPROTO_TCP, TCP_NOTSENT_LOWAT) => "TCP_NOTSENT_LOWAT",
        (SOL_SOCKET, 2) => "SO_REUSEADDR",
        (SOL_SOCKET, SO_ERROR) => "SO_ERROR",
        (SOL_SOCKET, SO_SNDBUF) => "SO_SNDBUF",
        (SOL_SOCKET, SO_RCVBUF) => "SO_RCVBUF",
        (SOL_SOCKET, SO_KEEPALIVE) => "SO_KEEPALIVE",
        (SOL_SOCKET, 13) => "SO_LINGER",
        (SOL_SOCKET, 15) => "SO_REUSEPORT",
        _ => return format!("{level}:{name}"),
    };
    known.to_string()
}

/// The label a call is counted under: `write`, `ioctl(SIOCOUTQ)`, `setsockopt(TCP_NODELAY)`.
pub fn label(c: &Call) -> String {
    match c.kind {
        CallKind::Ioctl => format!("ioctl({})", ioctl_name(c.arg as u64)),
        CallKind::Setsockopt | CallKind::Getsockopt => {
            let (level, name) = c.sockopt();
            format!("{}({})", c.kind.name(), sockopt_name(level, name))
        }
        k => k.name().to_string(),
    }
}

/// A zero-timeout readiness wait that found nothing ready: the event loop asked "anything?"
/// and the answer was no.
pub fn empty_zero_wait(c: &Call) -> bool {
    matches!(
        c.kind,
        CallKind::EpollWait | CallKind::Poll | CallKind::Select
    ) && c.arg == 0
        && c.ret == 0
}

/// The second label of a call whose result matters: `recvfrom=EAGAIN` (any failed call, by
/// its errno), `epoll_wait(timeout 0)=0` (see [`empty_zero_wait`]). `None` for the rest.
pub fn outcome_label(c: &Call) -> Option<String> {
    if let Some(e) = c.errno() {
        return Some(format!("{}={}", label(c), errno::name(e)));
    }
    if empty_zero_wait(c) {
        return Some(format!("{}(timeout 0)=0", c.kind.name()));
    }
    None
}

/// The call waits for readiness (it is on no socket, and is counted per process).
pub fn is_wait(kind: CallKind) -> bool {
    matches!(
        kind,
        CallKind::EpollWait | CallKind::Poll | CallKind::Select
    )
}
