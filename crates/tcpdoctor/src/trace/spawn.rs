//! Starting a program traced from its first instruction.
//!
//! 1. A dedicated thread spawns the program (the thread that forks is the one the kernel lets
//!    trace it). In the child, before exec: `PTRACE_TRACEME`, then the seccomp filter. The exec
//!    then stops the program (SIGTRAP) before its first instruction; the tracer sets its options
//!    there — `PTRACE_O_TRACESECCOMP` (the filter's stops), fork/vfork/clone/exec following,
//!    `PTRACE_O_EXITKILL` (see [`super::filter`] rule 3) — and lets it run.
//! 2. At each trapped call's entry (a seccomp stop) the tracer reads the registers and resumes
//!    with PTRACE_SYSCALL, which stops the program once more at that call's exit, where the
//!    result is read; then PTRACE_CONT, so nothing else stops it.
//! 3. Tasks created by fork, vfork and clone are traced from birth with the same options and
//!    inherit the filter. Signals are passed on as they arrive.
//! 4. When tracing is refused — ptrace (Yama's ptrace_scope, a container's own seccomp policy)
//!    or the filter — the program is started again without it and the reason is returned.
//! 5. The hook execs the program itself, after installing the filter, and exits with the
//!    errno when that fails: std's own exec would report the failure by a `write` the filter
//!    traps, which fails (ENOSYS: the tracer has not yet asked for seccomp stops), and the
//!    child would abort into a signal stop while the tracer thread still waits in `spawn`
//!    for its report — a hang. No stop before the exec's SIGTRAP means no exec happened.

use std::ffi::{CString, OsStr, OsString};
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Instant;

use nix::errno::Errno;
use nix::sys::ptrace::{self, Options};
use nix::sys::signal::Signal;
use nix::sys::wait::{waitpid, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use tcpdoctor_core::syscalls::TraceStatus;

use super::record::{self, Recorder};
use super::{ended_how, filter, Shared, Tracer};

/// A program started by [`spawn`].
pub enum Spawned {
    Traced(Tracer),
    /// Tracing was not possible (the reason); the program runs untraced.
    Untraced(Child, String),
}

/// Errors the child reports from before exec, chosen among errnos exec itself never returns,
/// so they cannot be mistaken for the program failing to start.
const PTRACE_REFUSED: i32 = libc::ECHRNG;
const FILTER_REFUSED: i32 = libc::EL2HLT;

/// Why tracing cannot work on this machine, before trying.
fn refused_up_front() -> Option<String> {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope").ok()?;
    (scope.trim() == "3")
        .then(|| "ptrace is disabled on this machine (kernel.yama.ptrace_scope = 3)".to_string())
}

/// Why the child's PTRACE_TRACEME was refused, as well as it can be told from here.
fn ptrace_refusal() -> String {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let seccomp = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Seccomp:").map(|v| v.trim().to_string()))
        })
        .unwrap_or_default();
    match (scope.as_str(), seccomp.as_str()) {
        ("2", _) => "ptrace was refused: kernel.yama.ptrace_scope = 2 (admin only)".into(),
        (_, "2") => "ptrace was refused: tcpdoctor runs under a seccomp policy (a container's) that forbids it".into(),
        _ => "ptrace was refused (a container or security module forbids it)".into(),
    }
}

/// Starts `cmd` traced (rule 1), or untraced with the reason (rule 4).
pub fn spawn(mut cmd: Command) -> io::Result<Spawned> {
    if let Some(why) = refused_up_front() {
        return Ok(Spawned::Untraced(cmd.spawn()?, why));
    }
    let shared = Arc::new(Mutex::new(Shared {
        window_start: record::now(),
        ..Shared::default()
    }));
    // Rule 4: cleared before the command is spawned again untraced (the hook stays on the
    // command; the forked child sees the flag as it was at the fork).
    let tracing = Arc::new(AtomicBool::new(true));
    let prog = filter::program();
    let hook_tracing = Arc::clone(&tracing);
    let exec = Exec::of(&cmd)?;
    // SAFETY: the hook runs in the forked child before exec; it only reads a flag and makes
    // system calls (ptrace, prctl, seccomp, execve, _exit); it allocates nothing.
    unsafe {
        cmd.pre_exec(move || {
            if !hook_tracing.load(Ordering::Relaxed) {
                return Ok(());
            }
            if libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) != 0 {
                return Err(io::Error::from_raw_os_error(PTRACE_REFUSED));
            }
            if filter::install(&prog).is_err() {
                return Err(io::Error::from_raw_os_error(FILTER_REFUSED));
            }
            exec.run()
        });
    }
    let (tx, rx) = mpsc::channel::<Result<u32, (io::Error, Command)>>();
    let thread_shared = Arc::clone(&shared);
    let thread = std::thread::Builder::new()
        .name("tcpdoctor-tracer".into())
        .spawn(move || {
            // `done` is set however the thread ends, a panic included: the callers poll it.
            let _done = Done(Arc::clone(&thread_shared));
            match cmd.spawn() {
                Ok(child) => {
                    let pid = Pid::from_raw(child.id() as i32);
                    // The child is reaped by the tracer, never through `child`.
                    drop(child);
                    match exec_stop(pid) {
                        Ok(first) => {
                            // The command's stdio (a pipe's or a socket's end given to the
                            // program) must not be held open here for the program's life.
                            drop(cmd);
                            let _ = tx.send(Ok(pid.as_raw() as u32));
                            trace_loop(pid, &thread_shared, first);
                        }
                        Err(e) => {
                            let _ = tx.send(Err((e, cmd)));
                        }
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err((e, cmd)));
                }
            }
        })?;
    match rx.recv() {
        Ok(Ok(pid)) => Ok(Spawned::Traced(Tracer {
            pid,
            status: TraceStatus::Traced,
            shared,
            thread: Some(thread),
        })),
        Ok(Err((e, mut cmd))) => {
            let _ = thread.join();
            let why = match e.raw_os_error() {
                Some(PTRACE_REFUSED) => ptrace_refusal(),
                Some(FILTER_REFUSED) => {
                    "the seccomp filter was refused (a kernel without seccomp filters)".into()
                }
                _ => return Err(e),
            };
            tracing.store(false, Ordering::Relaxed);
            Ok(Spawned::Untraced(cmd.spawn()?, why))
        }
        Err(_) => Err(io::Error::other(
            "the tracer thread ended before starting the program",
        )),
    }
}

/// Sets [`Shared::done`] when the tracer thread ends, however it ends.
struct Done(Arc<Mutex<Shared>>);

impl Drop for Done {
    fn drop(&mut self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).done = true;
    }
}

/// The program's exec, done by the pre-exec hook itself (rule 5): its argument and
/// environment vectors, made before the fork (the child may not allocate). The C strings'
/// buffers do not move when the vectors are moved into the hook, so the pointer arrays
/// (kept as addresses: raw pointers are not `Send`) stay valid. std does not expose a
/// command's `env_clear()` or `arg0()`: a command made with them would lose them here.
struct Exec {
    _strings: Vec<CString>,
    argv: Vec<usize>,
    /// The environment when the command changes it (as std does after the hooks); else the
    /// inherited one.
    envp: Option<Vec<usize>>,
}

impl Exec {
    fn of(cmd: &Command) -> io::Result<Exec> {
        let c = |s: &OsStr| {
            CString::new(s.as_bytes()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "a NUL byte in the command")
            })
        };
        let mut strings = vec![c(cmd.get_program())?];
        for a in cmd.get_args() {
            strings.push(c(a)?);
        }
        let argc = strings.len();
        let env_changed = cmd.get_envs().next().is_some();
        if env_changed {
            let mut env: std::collections::BTreeMap<OsString, OsString> =
                std::env::vars_os().collect();
            for (k, v) in cmd.get_envs() {
                match v {
                    Some(v) => env.insert(k.to_owned(), v.to_owned()),
                    None => env.remove(k),
                };
            }
            for (k, v) in env {
                let mut kv = k;
                kv.push("=");
                kv.push(v);
                strings.push(c(&kv)?);
            }
        }
        let ptrs: Vec<usize> = strings.iter().map(|s| s.as_ptr() as usize).collect();
        let mut argv = ptrs[..argc].to_vec();
        argv.push(0);
        let envp = env_changed.then(|| {
            let mut e = ptrs[argc..].to_vec();
            e.push(0);
            e
        });
        Ok(Exec {
            _strings: strings,
            argv,
            envp,
        })
    }

    /// In the child: exec the program; on failure exit with the errno as status, before any
    /// trapped call (`exec_stop` reads it back).
    fn run(&self) -> io::Result<()> {
        extern "C" {
            static mut environ: *const *const libc::c_char;
        }
        // SAFETY: the vectors are NULL-terminated arrays of pointers to live C strings; the
        // child is single-threaded, so setting `environ` (as std itself does) is sound.
        unsafe {
            if let Some(e) = &self.envp {
                environ = e.as_ptr() as *const *const libc::c_char;
            }
            let argv = self.argv.as_ptr() as *const *const libc::c_char;
            libc::execvp(*argv, argv);
            libc::_exit(*libc::__errno_location());
        }
    }
}

/// Waits for the traced child's first stop, the SIGTRAP of its exec (rule 5): an exit before
/// it is the exec failing, its status the errno. A stop for another signal is one that came
/// before the exec (Ctrl-C, a SIGTERM to the group): returned, to be passed on.
fn exec_stop(pid: Pid) -> io::Result<Option<Signal>> {
    let flags = WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD;
    loop {
        return match waitpid(pid, Some(flags)) {
            Ok(WaitStatus::Stopped(_, Signal::SIGTRAP)) => Ok(None),
            Ok(WaitStatus::Stopped(_, sig)) => Ok(Some(sig)),
            Ok(WaitStatus::Exited(_, errno)) => Err(io::Error::from_raw_os_error(errno)),
            Ok(s) => Err(io::Error::other(format!(
                "the program ended before it started: {}",
                ended_how(&s)
            ))),
            Err(Errno::EINTR) => continue,
            Err(e) => Err(io::Error::other(format!(
                "waiting for the traced program: {e}"
            ))),
        };
    }
}

fn raw_status(s: &WaitStatus) -> Option<i32> {
    match *s {
        WaitStatus::Exited(_, code) => Some((code & 0xff) << 8),
        WaitStatus::Signaled(_, sig, core) => Some(sig as i32 | if core { 0x80 } else { 0 }),
        _ => None,
    }
}

/// Rules 1–3: the wait loop, until every traced task is gone. `first`: a signal the program
/// received before its exec, passed on with the first resume.
fn trace_loop(root: Pid, shared: &Arc<Mutex<Shared>>, first: Option<Signal>) {
    let lock = || shared.lock().unwrap_or_else(|p| p.into_inner());
    let mut rec = Recorder::new(Arc::clone(shared));
    let flags = WaitPidFlag::__WALL | WaitPidFlag::__WNOTHREAD;
    // The exec's SIGTRAP was seen by `exec_stop`: the program has not run an instruction yet
    // (or a signal stopped it before its exec: the exec, once the signal is passed on, stops
    // it as PTRACE_EVENT_EXEC).
    let opts = Options::PTRACE_O_TRACESECCOMP
        | Options::PTRACE_O_TRACEFORK
        | Options::PTRACE_O_TRACEVFORK
        | Options::PTRACE_O_TRACECLONE
        | Options::PTRACE_O_TRACEEXEC
        | Options::PTRACE_O_EXITKILL
        | Options::PTRACE_O_TRACESYSGOOD;
    if let Err(e) = ptrace::setoptions(root, opts) {
        // Without PTRACE_O_TRACESECCOMP every trapped call would fail with ENOSYS: the
        // program cannot run correctly, so it is ended rather than left half-broken.
        lock().error = Some(format!(
            "setting the tracer's options failed ({e}); the program was stopped"
        ));
        let _ = nix::sys::signal::kill(root, Signal::SIGKILL);
        let _ = ptrace::cont(root, None);
        if let Ok(s) = waitpid(root, Some(flags)) {
            lock().root_status = raw_status(&s);
        }
        return;
    }
    rec.task(root.as_raw() as u32);
    let mut live: std::collections::HashSet<i32> = [root.as_raw()].into();
    // Tasks whose first (attach) SIGSTOP has not been seen yet.
    let mut newborn: std::collections::HashSet<i32> = Default::default();
    let _ = ptrace::cont(root, first);
    while !live.is_empty() {
        let status = match waitpid(None, Some(flags)) {
            Ok(s) => s,
            Err(Errno::EINTR) => continue,
            Err(_) => break,
        };
        let t0 = Instant::now();
        match status {
            WaitStatus::Exited(p, _) | WaitStatus::Signaled(p, _, _) => {
                live.remove(&p.as_raw());
                newborn.remove(&p.as_raw());
                rec.ended(p.as_raw() as u32, ended_how(&status));
                if p == root {
                    lock().root_status = raw_status(&status);
                }
                continue;
            }
            WaitStatus::PtraceEvent(p, _, ev) => {
                if ev == libc::PTRACE_EVENT_SECCOMP {
                    if rec.entry(p).is_ok() {
                        let _ = ptrace::syscall(p, None);
                    } else {
                        let _ = ptrace::cont(p, None);
                    }
                } else {
                    if matches!(
                        ev,
                        libc::PTRACE_EVENT_FORK
                            | libc::PTRACE_EVENT_VFORK
                            | libc::PTRACE_EVENT_CLONE
                    ) {
                        if let Ok(new) = ptrace::getevent(p) {
                            if live.insert(new as i32) {
                                newborn.insert(new as i32);
                            }
                            let thread = ev == libc::PTRACE_EVENT_CLONE
                                && super::regs::clone_makes_thread(p);
                            rec.born(p, new as u32, thread);
                        }
                    } else if ev == libc::PTRACE_EVENT_EXEC {
                        // A thread that exec'd took over the leader's id; the former id is gone.
                        if let Ok(former) = ptrace::getevent(p) {
                            if former as i32 != p.as_raw() {
                                live.remove(&(former as i32));
                                rec.ended(former as u32, "exec'd".into());
                            }
                        }
                        rec.exec(p.as_raw() as u32);
                    }
                    let _ = ptrace::cont(p, None);
                }
            }
            WaitStatus::PtraceSyscall(p) => {
                if rec.in_call(p.as_raw() as u32) {
                    let _ = rec.exit(p);
                }
                let _ = ptrace::cont(p, None);
            }
            WaitStatus::Stopped(p, sig) => {
                let raw = p.as_raw();
                if live.insert(raw) {
                    // Seen before its parent's fork event: a new task's attach stop.
                    rec.task(raw as u32);
                    let _ = ptrace::cont(p, None);
                } else if sig == Signal::SIGSTOP && newborn.remove(&raw) {
                    let _ = ptrace::cont(p, None);
                } else if ptrace::getsiginfo(p).is_err() {
                    // A group-stop (no signal to deliver): resume it as strace does.
                    let _ = ptrace::cont(p, None);
                } else {
                    let _ = ptrace::cont(p, Some(sig));
                }
            }
            _ => {}
        }
        lock().tracer_ns += t0.elapsed().as_nanos() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_of(make: impl Fn() -> Command + Send + Sync + 'static) -> Option<i32> {
        match spawn(make()).expect("spawn") {
            Spawned::Traced(t) => {
                let s = loop {
                    if let Some(s) = t.try_wait() {
                        break s;
                    }
                    std::thread::sleep(std::time::Duration::from_millis(2));
                };
                t.finish(std::time::Duration::from_secs(5));
                s.code()
            }
            Spawned::Untraced(mut c, _) => c.wait().expect("wait").code(),
        }
    }

    #[test]
    fn the_hooks_own_exec_passes_the_commands_environment_and_arguments() {
        let code = status_of(|| {
            let mut c = Command::new("sh");
            c.args([
                "-c",
                "test \"$TD_SET\" = yes && test -z \"$HOME\" && test \"$0\" = a0",
            ])
            .arg("a0")
            .env("TD_SET", "yes")
            .env_remove("HOME");
            c
        });
        assert_eq!(code, Some(0));
        let code = status_of(|| {
            let mut c = Command::new("sh");
            c.args(["-c", "test \"$TD_SET\" = yes"]);
            c
        });
        assert_eq!(code, Some(1), "no TD_SET in an unchanged environment");
    }

    /// The program's stdout is a pipe; it closes it and keeps running: the reader sees the
    /// end of the pipe then (the tracer thread held the command, and so the pipe's write end,
    /// for the program's whole life).
    #[test]
    fn the_tracer_keeps_no_end_of_the_programs_stdio_open() {
        use std::io::Read;
        use std::os::fd::AsRawFd;
        let (out_r, out_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
        let (in_r, in_w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
        let mut cmd = Command::new("sh");
        // Closes its stdout, then waits for its stdin to end.
        cmd.args(["-c", "exec >&-; read x"])
            .stdout(std::process::Stdio::from(out_w))
            .stdin(std::process::Stdio::from(in_r));
        let t = match spawn(cmd).expect("spawn") {
            Spawned::Traced(t) => t,
            Spawned::Untraced(mut c, why) => {
                drop(in_w);
                let _ = c.wait();
                eprintln!("SKIPPED: tracing is not possible here: {why}");
                return;
            }
        };
        // Bounded: 10 s for the end of the pipe; the program runs until `in_w` is closed.
        let mut fds = [libc::pollfd {
            fd: out_r.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        }];
        // SAFETY: one pollfd we own.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 1, 10_000) };
        let mut rest = Vec::new();
        let eof = ready == 1 && std::fs::File::from(out_r).read_to_end(&mut rest).is_ok();
        let running = t.try_wait().is_none();
        drop(in_w);
        t.finish(std::time::Duration::from_secs(5));
        assert!(
            eof && rest.is_empty(),
            "the pipe ended while the program ran"
        );
        assert!(running, "it was still running then");
    }

    #[test]
    fn an_exec_that_fails_is_an_error_not_a_hang() {
        let dir = std::env::temp_dir().join(format!("td-spawn-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let file = dir.join("not-executable");
        std::fs::write(&file, "#!/bin/sh\n").expect("write");
        let f = file.clone();
        let got = spawn(Command::new(&f));
        let _ = std::fs::remove_dir_all(&dir);
        match got {
            Err(e) => assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{e}"),
            Ok(_) => panic!("a non-executable file started"),
        }
    }
}
