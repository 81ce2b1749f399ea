//! /proc/PID/stat, read the one way `run` (CPU of the server's group) and `bench` (is the
//! watched server still alive?) both need.

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
    use super::{parse_stat, process_gone};

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
