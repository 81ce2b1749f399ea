//! Entering a private network namespace as any user: a user namespace first (so no privilege
//! is needed), then the network and PID namespaces inside it.
//!
//! Rules:
//! 1. `unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWPID)` in a single-threaded process (the
//!    kernel refuses a new user namespace to a multi-threaded one).
//! 2. The user's own uid and gid are mapped to themselves (`setgroups` denied first, as the
//!    kernel requires of an unprivileged writer), so commands run as the user they always run
//!    as; tcpdoctor keeps the namespace's capabilities until it execs nothing, the commands
//!    lose them when they are exec'd.
//! 3. Loopback comes up with SIOCSIFFLAGS; nothing else exists in the namespace, so nothing
//!    the commands send can leave it and nothing from the host is seen.
//! 4. When user namespaces are turned off, the error names the sysctl that does it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use anyhow::{bail, Context};

fn read_sysctl(path: &str) -> Option<i64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Why a user namespace could not be created, naming the setting responsible if one is.
fn userns_error(e: io::Error) -> anyhow::Error {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let hint = if !root && read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == Some(0) {
        "user namespaces are disabled for unprivileged users: sysctl \
         kernel.unprivileged_userns_clone=0 (set it to 1, or capture as root with `tcpdoctor \
         capture`)"
            .to_string()
    } else if read_sysctl("/proc/sys/user/max_user_namespaces") == Some(0) {
        "user namespaces are disabled: sysctl user.max_user_namespaces=0 (set it above 0, or \
         capture as root with `tcpdoctor capture`)"
            .to_string()
    } else if !root
        && read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == Some(1)
    {
        "AppArmor restricts user namespaces: sysctl kernel.apparmor_restrict_unprivileged_userns=1 \
         (set it to 0, or capture as root with `tcpdoctor capture`)"
            .to_string()
    } else if e.raw_os_error() == Some(libc::ENOSPC) {
        "the limit on user namespaces is reached: sysctl user.max_user_namespaces".to_string()
    } else {
        "user namespaces may be disabled (sysctl user.max_user_namespaces, \
         kernel.unprivileged_userns_clone) or blocked by a container's seccomp profile"
            .to_string()
    };
    anyhow::anyhow!("cannot create a user namespace ({e}): {hint}")
}

/// Moves this process into new user, network and PID namespaces (the PID namespace applies
/// to the children it forks from now on).
pub fn enter() -> anyhow::Result<()> {
    enter_with(libc::CLONE_NEWUSER | libc::CLONE_NEWNET | libc::CLONE_NEWPID)
}

/// Moves this process into new user and network namespaces only: `run` starts and stops
/// several servers in turn, and in a PID namespace the end of the first would end them all.
pub fn enter_net() -> anyhow::Result<()> {
    enter_with(libc::CLONE_NEWUSER | libc::CLONE_NEWNET)
}

/// Moves this process into a new network namespace only, as root: no user namespace, so the
/// commands keep the real uids and groups (a server that switches user, as nginx's workers
/// do, still can). Falls back to [`enter_net`] for any other user.
pub fn enter_net_as_root() -> anyhow::Result<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return enter_net();
    }
    // SAFETY: unshare(2) with a namespace flag only.
    if unsafe { libc::unshare(libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error()).context("creating a network namespace");
    }
    loopback_up()
}

fn enter_with(flags: libc::c_int) -> anyhow::Result<()> {
    // SAFETY: getuid/getgid have no preconditions.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    // SAFETY: unshare(2) with namespace flags only.
    if unsafe { libc::unshare(flags) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINVAL) && threads() > 1 {
            bail!("internal error: the sandbox must be entered before any thread starts");
        }
        return Err(userns_error(e));
    }
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text)
            .with_context(|| format!("writing /proc/self/{file} in the new user namespace"))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {uid} 1\n"))?;
    write("gid_map", format!("{gid} {gid} 1\n"))?;
    loopback_up()
}

fn threads() -> usize {
    std::fs::read_dir("/proc/self/task").map_or(1, |d| d.count())
}

/// Brings `lo` up in the current network namespace.
pub fn loopback_up() -> anyhow::Result<()> {
    // SAFETY: plain socket(2).
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error()).context("bringing up lo");
    }
    // SAFETY: a fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    // SAFETY: ifreq is plain data.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    ifr.ifr_name[0] = b'l' as libc::c_char;
    ifr.ifr_name[1] = b'o' as libc::c_char;
    // SAFETY: SIOCGIFFLAGS/SIOCSIFFLAGS read and write the flags member of `ifr`.
    unsafe {
        if libc::ioctl(fd.as_raw_fd(), libc::SIOCGIFFLAGS as _, &mut ifr) != 0 {
            return Err(io::Error::last_os_error()).context("reading lo's flags");
        }
        ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(fd.as_raw_fd(), libc::SIOCSIFFLAGS as _, &ifr) != 0 {
            return Err(io::Error::last_os_error()).context("bringing up lo");
        }
    }
    Ok(())
}
