//! The architecture's registers at a stop, read through `nix` (PTRACE_GETREGS on x86-64,
//! PTRACE_GETREGSET NT_PRSTATUS on aarch64): the call number and arguments at entry, the
//! result at exit.

use nix::sys::ptrace;
use nix::unistd::Pid;

/// A call as its entry stop shows it.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    pub nr: i64,
    pub args: [u64; 6],
}

#[cfg(target_arch = "x86_64")]
pub fn entry(tid: Pid) -> nix::Result<Entry> {
    let r = ptrace::getregs(tid)?;
    Ok(Entry {
        nr: r.orig_rax as i64,
        args: [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9],
    })
}

#[cfg(target_arch = "x86_64")]
pub fn result(tid: Pid) -> nix::Result<i64> {
    Ok(ptrace::getregs(tid)?.rax as i64)
}

#[cfg(target_arch = "aarch64")]
pub fn entry(tid: Pid) -> nix::Result<Entry> {
    let r = ptrace::getregs(tid)?;
    Ok(Entry {
        nr: r.regs[8] as i64,
        args: [
            r.regs[0], r.regs[1], r.regs[2], r.regs[3], r.regs[4], r.regs[5],
        ],
    })
}

#[cfg(target_arch = "aarch64")]
pub fn result(tid: Pid) -> nix::Result<i64> {
    Ok(ptrace::getregs(tid)?.regs[0] as i64)
}

/// Reads `N` bytes of the tracee's memory at `addr` (one process_vm_readv).
pub fn peek<const N: usize>(pid: Pid, addr: u64) -> Option<[u8; N]> {
    if addr == 0 {
        return None;
    }
    let mut buf = [0u8; N];
    let local = [std::io::IoSliceMut::new(&mut buf)];
    let remote = [nix::sys::uio::RemoteIoVec {
        base: addr as usize,
        len: N,
    }];
    match nix::sys::uio::process_vm_readv(pid, &mut { local }, &remote) {
        Ok(n) if n == N => Some(buf),
        _ => None,
    }
}

/// A C `int` of the tracee's memory.
pub fn peek_int(pid: Pid, addr: u64) -> Option<i64> {
    peek::<4>(pid, addr).map(|b| i64::from(i32::from_ne_bytes(b)))
}

/// A `struct timespec` / `struct timeval` of the tracee's memory, as milliseconds
/// (`micros`: the second field counts microseconds). None for a NULL pointer (forever).
pub fn peek_time_ms(pid: Pid, addr: u64, micros: bool) -> Option<i64> {
    let b = peek::<16>(pid, addr)?;
    let s = i64::from_ne_bytes(b[..8].try_into().ok()?);
    let frac = i64::from_ne_bytes(b[8..].try_into().ok()?);
    let div = if micros { 1_000 } else { 1_000_000 };
    Some(s.saturating_mul(1000).saturating_add(frac / div))
}

/// Whether the clone the stopped `parent` is in (a PTRACE_EVENT_CLONE stop) makes a thread:
/// CLONE_THREAD in clone's flags (its first argument) or clone3's `clone_args.flags`.
pub fn clone_makes_thread(parent: Pid) -> bool {
    let Ok(e) = entry(parent) else {
        return false;
    };
    let flags = if e.nr == libc::SYS_clone3 {
        peek::<8>(parent, e.args[0]).map_or(0, u64::from_ne_bytes)
    } else {
        e.args[0]
    };
    flags & libc::CLONE_THREAD as u64 != 0
}
