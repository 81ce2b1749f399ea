//! The seccomp filter that makes only the calls that matter stop the traced program.
//!
//! 1. A classic-BPF program over `seccomp_data`: on this machine's architecture, the call
//!    numbers of [`trapped`] return `SECCOMP_RET_TRACE` (a `PTRACE_EVENT_SECCOMP` stop for the
//!    tracer); every other call — and any call made under another architecture's ABI (a 32-bit
//!    `int 0x80` on x86-64) — returns `SECCOMP_RET_ALLOW` and runs at full speed, as
//!    `strace --seccomp-bpf` does.
//! 2. Written here rather than with `seccompiler`: that crate answers a call of a foreign
//!    architecture with `SECCOMP_RET_KILL_PROCESS`, and a tracer must never kill the program it
//!    watches. The program is a dozen lines of BPF; the tests run it in a real child.
//! 3. What a TRACE filter implies once installed: with no tracer attached (or one that has not
//!    asked for `PTRACE_O_TRACESECCOMP`) every trapped call fails with ENOSYS. The filter cannot
//!    be removed, so the tracer stays with the program for its life, and the program is started
//!    with `PTRACE_O_EXITKILL`: if tcpdoctor dies, the kernel kills the program rather than
//!    leaving it running with every socket call failing.
//! 4. `epoll_wait`, `epoll_pwait` and `poll` stop the program only when their timeout is 0 —
//!    a wait that does not wait, the poll of a busy loop — checked in the filter itself; a
//!    wait that blocks is the program doing the right thing and costs no stop (an event loop
//!    makes one or more per request). Waits whose timeout is behind a pointer (`ppoll`,
//!    `pselect6`, `select`, `epoll_pwait2`) are all trapped and their timeout read.

use std::io;

use tcpdoctor_core::syscalls::CallKind;

/// (call number, kind) of the trapped calls both architectures have (the generic table).
const GENERIC: &[(libc::c_long, CallKind)] = &[
    (libc::SYS_write, CallKind::Write),
    (libc::SYS_writev, CallKind::Writev),
    (libc::SYS_pwritev, CallKind::Pwritev),
    (libc::SYS_sendto, CallKind::Sendto),
    (libc::SYS_sendmsg, CallKind::Sendmsg),
    (libc::SYS_sendmmsg, CallKind::Sendmmsg),
    (libc::SYS_sendfile, CallKind::Sendfile),
    (libc::SYS_read, CallKind::Read),
    (libc::SYS_readv, CallKind::Readv),
    (libc::SYS_recvfrom, CallKind::Recvfrom),
    (libc::SYS_recvmsg, CallKind::Recvmsg),
    (libc::SYS_recvmmsg, CallKind::Recvmmsg),
    (libc::SYS_setsockopt, CallKind::Setsockopt),
    (libc::SYS_getsockopt, CallKind::Getsockopt),
    (libc::SYS_ioctl, CallKind::Ioctl),
    (libc::SYS_epoll_pwait, CallKind::EpollWait),
    (libc::SYS_epoll_pwait2, CallKind::EpollWait),
    (libc::SYS_ppoll, CallKind::Poll),
    (libc::SYS_pselect6, CallKind::Select),
    (libc::SYS_shutdown, CallKind::Shutdown),
    (libc::SYS_close, CallKind::Close),
    (libc::SYS_close_range, CallKind::Close),
    (libc::SYS_connect, CallKind::Connect),
    (libc::SYS_accept, CallKind::Accept),
    (libc::SYS_accept4, CallKind::Accept),
    (libc::SYS_dup3, CallKind::Dup),
];

/// The older calls x86-64 keeps beside the generic table (aarch64 has none of them).
#[cfg(target_arch = "x86_64")]
const LEGACY: &[(libc::c_long, CallKind)] = &[
    (libc::SYS_epoll_wait, CallKind::EpollWait),
    (libc::SYS_poll, CallKind::Poll),
    (libc::SYS_select, CallKind::Select),
    (libc::SYS_dup2, CallKind::Dup),
];
#[cfg(target_arch = "aarch64")]
const LEGACY: &[(libc::c_long, CallKind)] = &[];

/// (call number, kind) of every trapped call on this architecture.
pub fn trapped() -> impl Iterator<Item = &'static (libc::c_long, CallKind)> {
    GENERIC.iter().chain(LEGACY)
}

/// Readiness waits trapped only when they do not wait (rule 4): (call number, index of the
/// argument holding the timeout as an `int` in milliseconds).
#[cfg(target_arch = "x86_64")]
pub const ONLY_ZERO_TIMEOUT: &[(libc::c_long, u32)] = &[
    (libc::SYS_epoll_wait, 3),
    (libc::SYS_epoll_pwait, 3),
    (libc::SYS_poll, 2),
];
#[cfg(target_arch = "aarch64")]
pub const ONLY_ZERO_TIMEOUT: &[(libc::c_long, u32)] = &[(libc::SYS_epoll_pwait, 3)];

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 62 | 0x8000_0000 | 0x4000_0000; // EM_X86_64, 64-bit, little-endian
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 183 | 0x8000_0000 | 0x4000_0000; // EM_AARCH64, 64-bit, little-endian

/// The kind of a trapped call number.
pub fn kind_of(nr: i64) -> CallKind {
    trapped()
        .find(|(n, _)| *n == nr)
        .map_or(CallKind::Other, |(_, k)| *k)
}

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

/// The filter program (rules 1 and 4). Built in the parent: the child only installs it.
pub fn program() -> Vec<libc::sock_filter> {
    use libc::{BPF_ABS, BPF_JEQ, BPF_JMP, BPF_K, BPF_LD, BPF_RET, BPF_W};
    let n = trapped().count();
    // Layout: [0] load arch, [1] arch check, [2] load nr, [3..3+n] one test per call,
    // [3+n] ALLOW, [4+n] TRACE, then for each wait of ONLY_ZERO_TIMEOUT a block of four:
    // load its timeout, TRACE when it is 0, else ALLOW (BPF jumps only forward, so each
    // block has its own returns). Jump offsets count from the next instruction.
    let allow = 3 + n;
    let trace = 4 + n;
    let block = |i: usize| trace + 1 + 4 * i;
    let mut p = Vec::with_capacity(trace + 1 + 4 * ONLY_ZERO_TIMEOUT.len());
    p.push(stmt(BPF_LD | BPF_W | BPF_ABS, 4)); // seccomp_data.arch
    p.push(jump(
        BPF_JMP | BPF_JEQ | BPF_K,
        AUDIT_ARCH,
        0,
        (allow - 2) as u8,
    ));
    p.push(stmt(BPF_LD | BPF_W | BPF_ABS, 0)); // seccomp_data.nr
    for (i, (nr, _)) in trapped().enumerate() {
        let at = 3 + i;
        let to = ONLY_ZERO_TIMEOUT
            .iter()
            .position(|(z, _)| z == nr)
            .map_or(trace, block);
        p.push(jump(
            BPF_JMP | BPF_JEQ | BPF_K,
            *nr as u32,
            (to - at - 1) as u8,
            0,
        ));
    }
    p.push(stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ALLOW));
    p.push(stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_TRACE));
    for (_, arg) in ONLY_ZERO_TIMEOUT {
        // seccomp_data.args[arg]'s low 32 bits (little-endian): the int timeout.
        p.push(stmt(BPF_LD | BPF_W | BPF_ABS, 16 + 8 * arg));
        p.push(jump(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1));
        p.push(stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_TRACE));
        p.push(stmt(BPF_RET | BPF_K, libc::SECCOMP_RET_ALLOW));
    }
    p
}

/// Installs `prog` on the calling thread (and what it forks and clones). Async-signal-safe:
/// it runs in the forked child before exec, where nothing may allocate.
pub fn install(prog: &[libc::sock_filter]) -> io::Result<()> {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let fprog = libc::sock_fprog {
        len: prog.len() as u16,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `fprog` points at a valid program that outlives the call (the kernel copies it).
    let rc = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            0,
            &fprog as *const libc::sock_fprog,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_trapped_call_jumps_to_trace_and_the_rest_falls_through_to_allow() {
        let p = program();
        let trace = 4 + trapped().count();
        assert_eq!(p[trace].k, libc::SECCOMP_RET_TRACE);
        assert_eq!(p[trace - 1].k, libc::SECCOMP_RET_ALLOW);
        assert_eq!(
            1 + 1 + usize::from(p[1].jf),
            trace - 1,
            "foreign arch → ALLOW"
        );
        for (i, (nr, _)) in trapped().enumerate() {
            let at = 3 + i;
            assert_eq!(p[at].k, *nr as u32);
            let to = at + 1 + usize::from(p[at].jt);
            match ONLY_ZERO_TIMEOUT.iter().find(|(z, _)| z == nr) {
                None => assert_eq!(to, trace),
                Some((_, arg)) => {
                    // Its block: load the timeout, TRACE on 0, else ALLOW.
                    assert_eq!(p[to].k, 16 + 8 * arg);
                    assert_eq!((p[to + 1].k, p[to + 1].jt, p[to + 1].jf), (0, 0, 1));
                    assert_eq!(p[to + 2].k, libc::SECCOMP_RET_TRACE);
                    assert_eq!(p[to + 3].k, libc::SECCOMP_RET_ALLOW);
                }
            }
            assert_eq!(p[at].jf, 0);
        }
        assert_eq!(p.len(), trace + 1 + 4 * ONLY_ZERO_TIMEOUT.len());
        assert_eq!(kind_of(libc::SYS_sendto), CallKind::Sendto);
        assert_eq!(kind_of(libc::SYS_getpid), CallKind::Other);
    }
}
