//! The fallback reader: each socket through a duplicate of the process's descriptor, for a
//! process in a network namespace we may not enter. The duplicate gives what socket
//! diagnostics would (endpoints, `tcp_info`, congestion control, buffer sizes) and is closed
//! at once, as in [`super::options`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use super::diag::DiagSocket;
use super::options::Pidfd;

/// Reads every socket of `fds` (inode → descriptor) that is TCP; the uid is the process's.
pub fn read(pidfd: &Pidfd, fds: &BTreeMap<u64, i32>, uid: u32, at_ns: u64) -> Vec<DiagSocket> {
    let mut out = Vec::new();
    for (&inode, &fd) in fds {
        let Ok(dup) = pidfd.dup(fd) else { continue };
        if let Some(s) = describe(dup.as_fd(), inode, uid, at_ns) {
            out.push(s);
        }
        drop(dup);
    }
    out
}

fn describe(fd: BorrowedFd<'_>, inode: u64, uid: u32, at_ns: u64) -> Option<DiagSocket> {
    let sock = socket2::SockRef::from(&fd);
    if sock.r#type().ok()? != socket2::Type::STREAM {
        return None;
    }
    let local = sock.local_addr().ok()?.as_socket()?;
    // Not TCP (a Unix socket has no TCP_INFO).
    let info = super::tcp_info::getsockopt(fd).ok()?;
    let sample = super::tcp_info::parse(&info, at_ns);
    let remote = sock
        .peer_addr()
        .ok()
        .and_then(|a| a.as_socket())
        .unwrap_or_else(|| SocketAddr::new(local.ip(), 0));
    Some(DiagSocket {
        inode,
        uid,
        state: sample.state,
        local,
        remote,
        sample: Some(sample),
        congestion: congestion(fd),
        sndbuf: sock
            .send_buffer_size()
            .ok()
            .and_then(|v| u32::try_from(v).ok()),
        rcvbuf: sock
            .recv_buffer_size()
            .ok()
            .and_then(|v| u32::try_from(v).ok()),
    })
}

fn congestion(fd: BorrowedFd<'_>) -> Option<String> {
    let mut buf = [0u8; 32];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `buf`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if r != 0 {
        return None;
    }
    let name = buf[..len as usize].split(|&c| c == 0).next()?;
    Some(String::from_utf8_lossy(name).into_owned())
}
