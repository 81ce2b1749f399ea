//! Process limits a network tool should not trip over.

/// Raises the soft limit on open files to the hard limit and returns the new soft limit.
///
/// Each proxied connection holds two sockets (and an impaired one a timer per direction), so
/// the usual soft limit of 1024 would cap a proxy or a load driver at a few hundred
/// connections while the hard limit allows far more — the same step haproxy and nginx take.
pub fn raise_fd_limit() -> std::io::Result<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the struct we own.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    if r.rlim_cur < r.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: r.rlim_max,
            rlim_max: r.rlim_max,
        };
        // SAFETY: setrlimit reads one rlimit from the struct we own.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        r = raised;
    }
    Ok(r.rlim_cur)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_soft_limit_ends_at_the_hard_limit() {
        let soft = super::raise_fd_limit().expect("getrlimit works");
        let mut r = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
        assert_eq!(soft, r.rlim_cur);
        assert_eq!(r.rlim_cur, r.rlim_max);
    }
}
