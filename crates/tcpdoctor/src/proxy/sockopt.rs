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
    let r = unsafe { libc::ioctl(fd, SIOCOUTQNSD as _, &mut n as *mut libc::c_int) };
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

/// A pipe for `splice(2)`: socket → pipe → socket, with no copy through user space.
pub struct Pipe {
    r: std::os::fd::OwnedFd,
    w: std::os::fd::OwnedFd,
    /// Buffer slots the pipe has (one page each): a splice into an empty pipe stops short of
    /// what the socket holds only when it has used them all.
    slots: usize,
}

/// Largest chunk moved per splice: the pipe's capacity.
const PIPE_SIZE: libc::c_int = 1 << 20;

impl Pipe {
    pub fn new() -> io::Result<Pipe> {
        use std::os::fd::FromRawFd;
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two fds into the array we own.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: both fds were just created and are owned by nobody else.
        let (r, w) = unsafe {
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        // A bigger pipe moves more per call; refused above /proc/sys/fs/pipe-max-size, fine.
        // SAFETY: F_SETPIPE_SZ and F_GETPIPE_SZ on a pipe we own.
        let size = unsafe {
            libc::fcntl(fds[1], libc::F_SETPIPE_SZ, PIPE_SIZE);
            libc::fcntl(fds[1], libc::F_GETPIPE_SZ)
        };
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as usize;
        let slots = (size.max(0) as usize / page).max(1);
        Ok(Pipe { r, w, slots })
    }

    /// Whether a fill of `n` bytes into this (empty) pipe must have emptied the socket: it
    /// moved less than asked, and fewer bytes than the pipe has slots, so the pipe was not
    /// full (each slot holds at least one byte).
    pub fn drained_socket(&self, n: usize) -> bool {
        n < self.slots && n < PIPE_SIZE as usize
    }

    /// Moves what `fd` has to read into the (empty) pipe; 0 at EOF.
    pub fn fill_from(&self, fd: RawFd) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        splice(fd, self.w.as_raw_fd(), PIPE_SIZE as usize)
    }

    /// Copies `data` into the (empty) pipe: the part of a copied chunk the receiver could not
    /// take yet, queued ahead of anything spliced later.
    pub fn fill_with(&self, data: &[u8]) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        // SAFETY: writes from a slice we borrow into a pipe we own.
        let r = unsafe { libc::write(self.w.as_raw_fd(), data.as_ptr().cast(), data.len()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        if r as usize != data.len() {
            return Err(io::Error::other(format!(
                "the pipe took {r} of {} bytes",
                data.len()
            )));
        }
        Ok(())
    }

    /// Moves up to `n` bytes from the pipe into `fd`.
    pub fn drain_to(&self, fd: RawFd, n: usize) -> io::Result<usize> {
        use std::os::fd::AsRawFd;
        splice(self.r.as_raw_fd(), fd, n)
    }
}

fn splice(from: RawFd, to: RawFd, n: usize) -> io::Result<usize> {
    // SAFETY: plain fds owned by the caller; null offsets (both are pipes or sockets).
    let r = unsafe {
        libc::splice(
            from,
            std::ptr::null_mut(),
            to,
            std::ptr::null_mut(),
            n,
            libc::SPLICE_F_MOVE | libc::SPLICE_F_NONBLOCK,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r as usize)
}
