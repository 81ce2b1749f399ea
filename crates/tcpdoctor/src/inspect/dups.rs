//! The fallback reader: each socket through a duplicate of the process's descriptor, for a
//! process in a network namespace we may not enter. The duplicate gives what socket
//! diagnostics would (endpoints, `tcp_info`, congestion control, buffer sizes) and is closed
//! at once, as in [`super::options`].

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

use super::diag::DiagSocket;
use super::options::Pidfd;

/// What one pass over the descriptors gave.
#[derive(Debug, Default)]
pub struct DupRead {
    pub sockets: Vec<DiagSocket>,
    /// A duplicate was refused with EPERM: the one sign that the options are refused too
    /// (descriptors that are only Unix sockets, or closed in between, are not).
    pub refused: bool,
}

/// Reads every socket of `fds` (inode → descriptor) that is TCP; the uid is the process's.
/// A descriptor that no longer holds socket `inode` (closed, its number reused) is skipped.
pub fn read(pidfd: &Pidfd, fds: &BTreeMap<u64, i32>, uid: u32, at_ns: u64) -> DupRead {
    let mut out = DupRead::default();
    for (&inode, &fd) in fds {
        let dup = match pidfd.dup(fd) {
            Ok(d) => d,
            Err(e) => {
                out.refused |= e.raw_os_error() == Some(libc::EPERM);
                continue;
            }
        };
        if inode_of(dup.as_fd()) == Some(inode) {
            if let Some(s) = describe(dup.as_fd(), inode, uid, at_ns) {
                out.sockets.push(s);
            }
        }
        drop(dup);
    }
    out
}

/// The inode `fd` points to (fstat), `None` when it cannot be read.
pub fn inode_of(fd: BorrowedFd<'_>) -> Option<u64> {
    // SAFETY: fstat fills one stat we own; a zeroed stat is a valid value to start from.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is a live descriptor for the duration of the borrow.
    let r = unsafe { libc::fstat(fd.as_raw_fd(), &mut st) };
    #[allow(clippy::useless_conversion)]
    (r == 0).then(|| u64::from(st.st_ino))
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
        cookie: sock.cookie().unwrap_or(0),
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
        unread: None,
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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::net::TcpListener;
    use std::os::fd::AsRawFd;

    use super::{inode_of, read};
    use crate::inspect::options::Pidfd;

    #[test]
    fn a_descriptor_now_holding_another_socket_is_skipped() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let inode = inode_of(std::os::fd::AsFd::as_fd(&l)).expect("fstat");
        let pidfd = Pidfd::open(std::process::id()).expect("our pidfd");
        let fd = l.as_raw_fd();
        let got = read(&pidfd, &BTreeMap::from([(inode, fd)]), 0, 1);
        assert_eq!(got.sockets.len(), 1);
        assert_eq!(got.sockets[0].inode, inode);
        assert!(!got.refused);
        // The same descriptor number listed under another inode: not that socket.
        let got = read(&pidfd, &BTreeMap::from([(inode + 1, fd)]), 0, 1);
        assert!(got.sockets.is_empty(), "{:?}", got.sockets);
        // A descriptor that does not exist: nothing read, and no refusal claimed.
        let got = read(&pidfd, &BTreeMap::from([(inode, 100_000)]), 0, 1);
        assert!(got.sockets.is_empty() && !got.refused);
    }
}
