//! A socket's options, read from the live socket through a duplicate of the process's
//! descriptor (`pidfd_open` + `pidfd_getfd`), closed as soon as they are read: a duplicate
//! held any longer would keep the socket open after the process closed it (its peer would
//! see no FIN).
//!
//! `pidfd_getfd` needs the right to ptrace the process (`PTRACE_MODE_ATTACH`): the process's
//! own user (unless Yama's `ptrace_scope` says otherwise) or CAP_SYS_PTRACE. When it is
//! refused the options stay unknown and [`refusal`] says which setting refused them.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// What `getsockopt` said, each `None` when that one call failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawOptions {
    pub nodelay: Option<bool>,
    pub cork: Option<bool>,
    pub sndbuf: Option<u64>,
    pub rcvbuf: Option<u64>,
    pub notsent_lowat: Option<u64>,
    pub keepalive: Option<bool>,
}

/// A pidfd of the process: it names the process itself, not a PID a new process may reuse.
pub struct Pidfd(OwnedFd);

impl Pidfd {
    pub fn open(pid: u32) -> io::Result<Pidfd> {
        // SAFETY: pidfd_open(2) takes a pid and flags and returns a new descriptor.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor the kernel just gave us.
        Ok(Pidfd(unsafe { OwnedFd::from_raw_fd(fd as i32) }))
    }

    /// A duplicate of the process's descriptor `fd` (close it soon: see the module doc).
    pub fn dup(&self, fd: i32) -> io::Result<OwnedFd> {
        // SAFETY: pidfd_getfd(2) returns a new descriptor in our table, owned at once.
        let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, self.0.as_raw_fd(), fd, 0) };
        if got < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: as above.
        Ok(unsafe { OwnedFd::from_raw_fd(got as i32) })
    }
}

/// Reads the options of the process's descriptor `fd`, which must still be socket `inode`
/// (a descriptor number is reused once closed); the duplicate is closed before this
/// returns. `Err` when the duplicate itself was refused (EPERM), the descriptor is gone, or
/// it now holds something else (NotFound).
pub fn read(pidfd: &Pidfd, fd: i32, inode: u64) -> io::Result<RawOptions> {
    let dup = pidfd.dup(fd)?;
    let same = std::fs::File::from(dup.try_clone()?)
        .metadata()
        .is_ok_and(|m| std::os::unix::fs::MetadataExt::ino(&m) == inode);
    let opts = same.then(|| read_from(dup.as_fd()));
    drop(dup);
    opts.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the descriptor was reused"))
}

impl Pidfd {
    /// Whether the process has exited (its pidfd is readable then): unlike /proc/PID, never
    /// fooled by a new process given the same PID.
    pub fn exited(&self) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack, zero timeout.
        unsafe { libc::poll(&mut pfd, 1, 0) == 1 }
    }
}

/// Reads the options of a socket we hold.
pub fn read_from(fd: BorrowedFd<'_>) -> RawOptions {
    let flag = |level, name| int_opt(fd, level, name).map(|v| v != 0);
    let size = |level, name| int_opt(fd, level, name).and_then(|v| u64::try_from(v).ok());
    RawOptions {
        nodelay: flag(libc::IPPROTO_TCP, libc::TCP_NODELAY),
        cork: flag(libc::IPPROTO_TCP, libc::TCP_CORK),
        sndbuf: size(libc::SOL_SOCKET, libc::SO_SNDBUF),
        rcvbuf: size(libc::SOL_SOCKET, libc::SO_RCVBUF),
        notsent_lowat: size(libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT),
        keepalive: flag(libc::SOL_SOCKET, libc::SO_KEEPALIVE),
    }
}

fn int_opt(fd: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int) -> Option<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the kernel writes at most one c_int into `v`.
    let r = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(v)
}

/// Why the options of another process could not be read, naming the setting that refused
/// them. `yama` is the content of /proc/sys/kernel/yama/ptrace_scope (None: no Yama on this
/// kernel); `same_user` whether the process runs as our user.
pub fn refusal(yama: Option<&str>, same_user: bool, owner: Option<u32>) -> String {
    let scope = yama.map(str::trim);
    let yama_says = match scope {
        Some("1") => Some(
            "kernel.yama.ptrace_scope = 1 (restricted: only a process's ancestors may read its \
             descriptors; run as root, with CAP_SYS_PTRACE, or set ptrace_scope to 0)",
        ),
        Some("2") => Some(
            "kernel.yama.ptrace_scope = 2 (admin-only: reading another process's descriptors \
             needs CAP_SYS_PTRACE; run as root)",
        ),
        Some("3") => Some(
            "kernel.yama.ptrace_scope = 3 (no attach: no process may read another's \
             descriptors until reboot)",
        ),
        _ => None,
    };
    let who = match owner {
        Some(uid) => format!("another user's process (uid {uid})"),
        None => "another user's process".to_owned(),
    };
    match (same_user, yama_says) {
        (true, Some(y)) => y.to_owned(),
        (true, None) => "pidfd_getfd was refused (the process may have changed its \
                         credentials or be undumpable: needs CAP_SYS_PTRACE)"
            .to_owned(),
        (false, Some(y)) => format!("{who}: needs root or CAP_SYS_PTRACE; also {y}"),
        (false, None) => format!("{who}: needs root or CAP_SYS_PTRACE"),
    }
}

/// [`refusal`] with this machine's Yama setting and the process's owner.
pub fn refusal_here(pid: u32) -> String {
    let yama = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok();
    let owner = super::proc::uid(pid);
    // SAFETY: getuid has no preconditions.
    let me = unsafe { libc::getuid() };
    refusal(yama.as_deref(), owner == Some(me), owner)
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::{AsRawFd, IntoRawFd};
    use std::time::Duration;

    use super::{read, refusal, Pidfd};

    #[test]
    fn yama_and_other_users_name_the_setting_that_refused() {
        let r = refusal(Some("1\n"), true, Some(1000));
        assert!(r.starts_with("kernel.yama.ptrace_scope = 1"), "{r}");
        assert!(refusal(Some("2"), true, None).contains("ptrace_scope = 2"));
        assert!(refusal(Some("3"), true, None).contains("until reboot"));
        let other = refusal(None, false, Some(0));
        assert_eq!(
            other,
            "another user's process (uid 0): needs root or CAP_SYS_PTRACE"
        );
        let both = refusal(Some("1"), false, Some(0));
        assert!(both.contains("CAP_SYS_PTRACE") && both.contains("ptrace_scope = 1"));
        // ptrace_scope 0 is classic ptrace: only the owner matters.
        assert!(!refusal(Some("0"), false, Some(7)).contains("yama"));
    }

    #[test]
    fn options_come_from_the_live_socket_and_the_duplicate_does_not_keep_it_open() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut peer = TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
        let (ours, _) = l.accept().expect("accept");
        ours.set_nodelay(true).expect("nodelay");
        let pidfd = Pidfd::open(std::process::id()).expect("pidfd_open");
        let link = std::fs::read_link(format!("/proc/self/fd/{}", ours.as_raw_fd()))
            .expect("our descriptor");
        let inode = super::super::proc::socket_inode(&link.to_string_lossy()).expect("a socket");
        let opts = read(&pidfd, ours.as_raw_fd(), inode).expect("our own options");
        assert!(
            read(&pidfd, ours.as_raw_fd(), inode + 1).is_err(),
            "another inode"
        );
        assert!(!pidfd.exited());
        assert_eq!(opts.nodelay, Some(true));
        assert_eq!((opts.cork, opts.keepalive), (Some(false), Some(false)));
        assert!(opts.sndbuf.is_some_and(|b| b > 0));
        // Close ours: the peer must see EOF now, which it would not if the duplicate lived.
        let raw = ours.into_raw_fd();
        // SAFETY: closes the descriptor we just took out of its owner.
        unsafe { libc::close(raw) };
        peer.set_read_timeout(Some(Duration::from_secs(20)))
            .expect("timeout");
        let mut b = [0u8; 1];
        let n = peer
            .read(&mut b)
            .expect("EOF, not a timeout: a duplicate kept it open");
        assert_eq!(n, 0);
    }
}
