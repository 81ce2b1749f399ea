//! Runs one child to its end, or declares it hung: no progress — no byte acknowledged or
//! received on its tree's TCP sockets, no character read or written by its processes when
//! they hold Unix stream sockets, no output line — for the hang threshold. A hung run's
//! sockets are read as they are at that moment, then the run is stopped.

use std::process::{Child, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tcpdoctor_core::ab::HungSocket;

use super::tree;

/// How often the tree is looked at.
const TICK: Duration = Duration::from_millis(200);

/// How a watched child ended.
pub struct Watched {
    /// Its exit status, when it ended by itself.
    pub status: Option<ExitStatus>,
    /// Declared hung: the sockets then.
    pub hung: Option<Vec<HungSocket>>,
    pub wall: Duration,
    /// Processes the run left behind (still running once it ended), stopped by us.
    pub leftovers: Vec<String>,
}

/// The time of the last output line, shared with the thread reading the output.
pub type LastLine = Arc<Mutex<Instant>>;

/// How to stop a hung child.
#[derive(Clone, Copy)]
pub enum Stop {
    /// SIGKILL to its whole tree at once.
    Kill,
    /// SIGINT to the child itself first (a `tcpdoctor` child stops what it started), then
    /// SIGKILL to whatever of the tree is left after the grace time.
    Interrupt(Duration),
}

/// Waits for `child`, watching its progress; `lines` when its output lines count too.
pub fn watch(
    child: &mut Child,
    started: Instant,
    hang_after: Duration,
    lines: Option<&LastLine>,
    stop: Stop,
) -> std::io::Result<Watched> {
    // A tcpdoctor child (stopped by SIGINT) is not the program measured: its own I/O is not
    // the program's progress.
    let own_io = matches!(stop, Stop::Kill);
    let root = child.id();
    let mut last_progress = Instant::now();
    let mut last_seen: Option<(u64, u64)> = None;
    let mut last_line = lines.map(|l| *l.lock().unwrap_or_else(|e| e.into_inner()));
    let exit = ExitWait::new(root);
    loop {
        // The wall time is taken when the child ends (its pidfd becomes readable), not at
        // the next look at the tree.
        exit.wait(TICK);
        if let Some(status) = child.try_wait()? {
            let wall = started.elapsed();
            return Ok(Watched {
                status: Some(status),
                hung: None,
                wall,
                leftovers: tree::sweep_leftovers(),
            });
        }
        let pids = tree::descendants(root);
        let (bytes, unix) = tree::bytes_moved(&pids);
        // File and pipe I/O counts only for a tree talking over Unix sockets (nothing else
        // shows their bytes), and never the I/O of a tcpdoctor child itself (its capture file
        // grows with every zero-window probe).
        let io_pids = if own_io { &pids[..] } else { &pids[1..] };
        let chars = if unix { tree::io_chars(io_pids) } else { 0 };
        let now_seen = (bytes, chars);
        if last_seen != Some(now_seen) {
            last_seen = Some(now_seen);
            last_progress = Instant::now();
        }
        if let Some(l) = lines {
            let t = *l.lock().unwrap_or_else(|e| e.into_inner());
            if Some(t) != last_line {
                last_line = Some(t);
                last_progress = Instant::now();
            }
        }
        if crate::capture::stop::interrupted() {
            // Ctrl-C or SIGTERM: the run is stopped as a hung one is, and said not to count.
            let wall = started.elapsed();
            stop_tree(child, &pids, stop);
            tree::sweep_leftovers();
            return Err(std::io::Error::new(
                std::io::ErrorKind::Interrupted,
                format!("interrupted after {:.1} s", wall.as_secs_f64()),
            ));
        }
        if last_progress.elapsed() >= hang_after {
            let sockets = tree::snapshot(&pids);
            let wall = started.elapsed();
            stop_tree(child, &pids, stop);
            return Ok(Watched {
                status: None,
                hung: Some(sockets),
                wall,
                leftovers: tree::sweep_leftovers(),
            });
        }
    }
}

/// Waits for a process's end through its pidfd (readable once it exits); without one (a
/// kernel before 5.3), sleeps the tick.
struct ExitWait(Option<std::os::fd::OwnedFd>);

impl ExitWait {
    fn new(pid: u32) -> ExitWait {
        use std::os::fd::FromRawFd;
        // SAFETY: pidfd_open returns a new descriptor we own, or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        // SAFETY: a descriptor just returned to us and owned by nothing else.
        ExitWait((fd >= 0).then(|| unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }))
    }

    fn wait(&self, at_most: Duration) {
        use std::os::fd::AsRawFd;
        let Some(fd) = &self.0 else {
            std::thread::sleep(at_most);
            return;
        };
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd we own; a signal's EINTR just ends the wait early.
        unsafe { libc::poll(&mut p, 1, at_most.as_millis() as libc::c_int) };
    }
}

fn stop_tree(child: &mut Child, pids: &[u32], stop: Stop) {
    let root = child.id();
    if let Stop::Interrupt(grace) = stop {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(root as i32, libc::SIGINT) };
        let until = Instant::now() + grace;
        while Instant::now() < until {
            if matches!(child.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    // Whatever is left (the tree as it is now, and as it was when declared hung).
    let mut all = tree::descendants(root);
    all.extend_from_slice(pids);
    tree::signal_all(root, &all, libc::SIGKILL);
    let _ = child.wait();
}
