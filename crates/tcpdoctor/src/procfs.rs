//! /proc/PID/stat and /proc/PID/task/*/schedstat, read the one way `run` (CPU of the server's
//! tree) and `bench` (is the watched server still alive?) both need.

/// The fields of /proc/PID/stat that tcpdoctor reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    pub state: char,
    pub ppid: i64,
    pub pgrp: i64,
    /// Clock ticks in user and system mode.
    pub utime: u64,
    pub stime: u64,
}

/// Process `pid`'s stat line, parsed; None when it is gone (or the line is unreadable).
pub fn stat(pid: i32) -> Option<Stat> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Whether process `pid` has exited: no longer in /proc, or a zombie waiting to be reaped.
pub fn process_gone(pid: i32) -> bool {
    stat(pid).is_none_or(|s| matches!(s.state, 'Z' | 'X'))
}

/// Whether process `pid` is being traced (`TracerPid` of /proc/PID/status is not 0); false
/// when it is gone. Such a process must be waited for by its tracer alone: a `waitpid` on it
/// from any other thread of the tracer's process is given the tracer's stops (the kernel
/// reports a tracee's stops to every thread of its tracer's process, and to its real parent
/// when that is a thread of the same process), and a stop taken so is never resumed.
pub fn traced(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| parse_tracer(&s))
        .is_some_and(|t| t != 0)
}

fn parse_tracer(status: &str) -> Option<i64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("TracerPid:"))?
        .trim()
        .parse()
        .ok()
}

/// Time on CPU of process `pid` (all its threads), in nanoseconds: the kernel's process CPU
/// clock (`clock_getcpuclockid` + `clock_gettime`), which is exact at the instant of the read —
/// it includes the slice a running thread is in and the threads that already exited, and needs
/// no permission. Where that clock cannot be read, the sum of /proc/PID/task/TID/schedstat
/// (the scheduler's `sum_exec_runtime`: without exited threads, and behind by up to one
/// scheduler tick for a thread on a CPU). None when neither can be read (the process is gone).
pub fn cpu_ns(pid: i32) -> Option<u64> {
    process_clock_ns(pid).or_else(|| schedstat_ns(pid))
}

fn process_clock_ns(pid: i32) -> Option<u64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: clock_getcpuclockid writes the clock id; clock_gettime writes the timespec.
    if unsafe { libc::clock_getcpuclockid(pid, &mut clock) } != 0 {
        return None;
    }
    let mut ts: libc::timespec = unsafe { std::mem::zeroed() };
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

fn schedstat_ns(pid: i32) -> Option<u64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut total = None;
    for t in tasks.flatten() {
        let path = t.path().join("schedstat");
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        if let Some(ns) = parse_schedstat(&text) {
            *total.get_or_insert(0u64) += ns;
        }
    }
    total
}

/// Voluntary context switches of each thread of process `pid` (`voluntary_ctxt_switches` of
/// /proc/PID/task/TID/status: a thread gave up the CPU to sleep), by thread id. Empty when
/// the process is gone.
pub fn voluntary_switches(pid: i32) -> Vec<(i32, u64)> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| {
            let tid = t.file_name().to_str()?.parse().ok()?;
            let text = std::fs::read_to_string(t.path().join("status")).ok()?;
            Some((tid, parse_voluntary(&text)?))
        })
        .collect()
}

fn parse_voluntary(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))?
        .trim()
        .parse()
        .ok()
}

/// Thread `tid` of process `pid`: its time on a CPU and its time waiting on a run queue,
/// ready to run but not on a CPU (the scheduler's `sum_exec_runtime` and `run_delay`, the
/// first two fields of /proc/PID/task/TID/schedstat), in nanoseconds; None when it is gone.
pub fn thread_schedstat(pid: i32, tid: i32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    let mut f = text.split_whitespace();
    Some((f.next()?.parse().ok()?, f.next()?.parse().ok()?))
}

/// The thread ids of process `pid`.
pub fn threads(pid: i32) -> Vec<i32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|t| t.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// `RUN_NS WAIT_NS SLICES`: the time on CPU.
fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// A /proc/PID/stat line; the command name may hold spaces and parentheses, so fields are
/// counted from the last `)`.
fn parse_stat(stat: &str) -> Option<Stat> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state(0) ppid(1) pgrp(2) session(3) tty(4) tpgid(5) flags(6) minflt(7)
    // cminflt(8) majflt(9) cmajflt(10) utime(11) stime(12).
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        utime: f.get(11)?.parse().ok()?,
        stime: f.get(12)?.parse().ok()?,
    })
}

#[cfg(test)]
mod tests {
    use super::{
        cpu_ns, parse_schedstat, parse_stat, parse_tracer, parse_voluntary, process_clock_ns,
        process_gone, schedstat_ns, traced, voluntary_switches,
    };

    #[test]
    fn a_traced_child_is_traced_a_plain_one_is_not() {
        assert_eq!(
            parse_tracer("Name:\tx\nTracerPid:\t4321\nUid:\t0\n"),
            Some(4321)
        );
        let mut plain = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("sleep");
        assert!(!traced(plain.id() as i32));
        let mut cmd = std::process::Command::new("sleep");
        cmd.arg("30");
        match crate::trace::spawn(cmd).expect("spawn traced") {
            crate::trace::Spawned::Traced(t) => {
                let pid = t.id() as i32;
                assert!(traced(pid), "a program tcpdoctor traces");
                // SAFETY: kill(2) on our own child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                t.finish(std::time::Duration::from_secs(5));
            }
            crate::trace::Spawned::Untraced(mut c, why) => {
                let _ = c.kill();
                let _ = c.wait();
                eprintln!("SKIPPED: tracing is not possible here: {why}");
            }
        }
        let _ = plain.kill();
        let _ = plain.wait();
        assert!(!traced(plain.id() as i32), "a reaped process is gone");
    }

    #[test]
    fn voluntary_switches_count_sleeps() {
        let status = "Name:\tx\nvoluntary_ctxt_switches:\t17\nnonvoluntary_ctxt_switches:\t3\n";
        assert_eq!(parse_voluntary(status), Some(17));
        assert_eq!(parse_voluntary("Name:\tx\n"), None);
        let me = std::process::id() as i32;
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        // This thread's own count (other test threads come and go).
        let mine = || {
            voluntary_switches(me)
                .into_iter()
                .find(|(t, _)| *t == tid)
                .map(|(_, n)| n)
                .expect("this thread is listed")
        };
        let before = mine();
        for _ in 0..5 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(
            mine() >= before + 5,
            "five sleeps are five voluntary switches"
        );
    }

    #[test]
    fn schedstat_counts_nanoseconds() {
        assert_eq!(parse_schedstat("123456789 42 7\n"), Some(123_456_789));
        assert_eq!(parse_schedstat(""), None);
        let me = std::process::id() as i32;
        let before = cpu_ns(me).expect("our own schedstat");
        // A thread spins 3 ms, then sleeps (a running thread's count is brought up to date
        // when it leaves the CPU, as a server's between requests is), while we read.
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let (exit_tx, exit_rx) = std::sync::mpsc::channel::<()>();
        let spinner = std::thread::spawn(move || {
            let start = std::time::Instant::now();
            let mut x = 0u64;
            while start.elapsed() < std::time::Duration::from_millis(3) {
                x = x.wrapping_mul(31).wrapping_add(1);
            }
            std::hint::black_box(x);
            let _ = done_tx.send(());
            let _ = exit_rx.recv();
        });
        done_rx.recv().expect("spun");
        std::thread::sleep(std::time::Duration::from_millis(1));
        let after = cpu_ns(me).expect("our own schedstat");
        let _ = exit_tx.send(());
        spinner.join().expect("spinner");
        assert!(after > before, "3 ms of spinning shows, below a 10 ms tick");
    }

    /// The process clock counts a thread that already exited (schedstat forgets it: a
    /// thread-per-connection server would lose each connection's time when it closes).
    #[test]
    fn the_process_clock_keeps_exited_threads() {
        let me = std::process::id() as i32;
        let clock_before = process_clock_ns(me).expect("our own process clock");
        std::thread::spawn(|| {
            let start = std::time::Instant::now();
            let mut x = 0u64;
            while start.elapsed() < std::time::Duration::from_millis(20) {
                x = x.wrapping_mul(31).wrapping_add(1);
            }
            std::hint::black_box(x);
        })
        .join()
        .expect("spinner");
        let clock_after = process_clock_ns(me).expect("our own process clock");
        assert!(
            clock_after - clock_before >= 15_000_000,
            "20 ms spun by an exited thread: {} ns",
            clock_after - clock_before
        );
        assert!(schedstat_ns(me).is_some(), "the fallback reads too");
        let mut gone = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = gone.id() as i32;
        gone.wait().expect("reaped");
        assert!(
            process_clock_ns(pid).is_none(),
            "a reaped process has no clock"
        );
    }

    #[test]
    fn stat_lines_with_odd_names() {
        let s = "1234 (my (odd) srv) S 1 1234 1234 0 -1 4194560 100 0 0 0 57 13 0 0 20 0 1 0";
        let st = parse_stat(s).expect("parsed");
        assert_eq!((st.state, st.pgrp, st.utime, st.stime), ('S', 1234, 57, 13));
        assert_eq!(st.ppid, 1);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn a_live_process_is_not_gone_an_exited_one_is() {
        assert!(!process_gone(std::process::id() as i32));
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("spawn true");
        let pid = child.id() as i32;
        // Wait for it to exit without reaping it (WNOWAIT): it stays a zombie.
        // SAFETY: waitid fills a zeroed siginfo_t we own, for our own child.
        let r = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(
                libc::P_PID,
                pid as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOWAIT,
            )
        };
        assert_eq!(r, 0, "waitid: {}", std::io::Error::last_os_error());
        assert!(process_gone(pid), "an exited child (zombie) counts as gone");
        child.wait().expect("reap");
        assert!(process_gone(pid), "a reaped child is gone");
    }
}
