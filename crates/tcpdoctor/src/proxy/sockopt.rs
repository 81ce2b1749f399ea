//! Socket options per leg. Nagle, cork and quickack only mean something on TCP; on a Unix
//! socket they are skipped.

use std::io;
use std::os::fd::{BorrowedFd, RawFd};

use socket2::SockRef;

use super::LegConfig;

/// Applies `leg` to a connected TCP socket.
pub fn apply(fd: RawFd, leg: &LegConfig) -> io::Result<()> {
    with(fd, |s| {
        s.set_nodelay(!leg.nagle)?;
        if let Some(b) = leg.sndbuf {
            s.set_send_buffer_size(b)?;
        }
        if let Some(b) = leg.rcvbuf {
            s.set_recv_buffer_size(b)?;
        }
        if leg.cork {
            s.set_cork(true)?;
        }
        if leg.quickack {
            s.set_quickack(true)?;
        }
        Ok(())
    })
}

/// `TCP_CORK` off then on again: pushes out a partial segment held by the cork.
pub fn uncork(fd: RawFd) -> io::Result<()> {
    with(fd, |s| {
        s.set_cork(false)?;
        s.set_cork(true)
    })
}

/// Re-arms `TCP_QUICKACK` (the kernel clears it by itself).
pub fn quickack(fd: RawFd) -> io::Result<()> {
    with(fd, |s| s.set_quickack(true))
}

/// `SO_LINGER` 0: closing the socket then sends RST instead of FIN.
pub fn linger_zero(fd: RawFd) -> io::Result<()> {
    with(fd, |s| s.set_linger(Some(std::time::Duration::ZERO)))
}

/// Bytes written but not yet sent (held by Nagle, cork or the window): `SIOCOUTQNSD`.
pub fn unsent_bytes(fd: RawFd) -> io::Result<usize> {
    const SIOCOUTQNSD: libc::c_ulong = 0x894B;
    let mut n: libc::c_int = 0;
    // SAFETY: `fd` is an open socket owned by the caller for the duration of the call, and
    // SIOCOUTQNSD writes one c_int through the pointer, which points at a live local.
    let r = unsafe { libc::ioctl(fd, SIOCOUTQNSD, &mut n as *mut libc::c_int) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(n.max(0) as usize)
}

fn with<T>(fd: RawFd, f: impl FnOnce(SockRef<'_>) -> io::Result<T>) -> io::Result<T> {
    // SAFETY: callers pass the fd of a socket they own and keep open during this call.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    f(SockRef::from(&b))
}
