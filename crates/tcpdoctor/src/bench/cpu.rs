//! The driver's own CPU time (getrusage, all threads): a load generator that burns more CPU per
//! request than the server it drives measures itself, not the server.

use std::time::Duration;

/// How [`CpuTimes::now`] reads the driver's CPU, for the findings that rest on it.
pub const COUNTERS: &str = "getrusage(RUSAGE_SELF) user + system time of the driver (all its \
    threads) over the scenario, divided by its exchanges";

/// User and system CPU time of this process so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: Duration,
    pub system: Duration,
}

impl CpuTimes {
    pub fn now() -> CpuTimes {
        // SAFETY: getrusage writes into the zeroed struct we own; RUSAGE_SELF is always valid.
        let ru = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            if libc::getrusage(libc::RUSAGE_SELF, &mut ru) != 0 {
                return CpuTimes::default();
            }
            ru
        };
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec.max(0) as u64)
                + Duration::from_micros(t.tv_usec.max(0) as u64)
        };
        CpuTimes {
            user: tv(ru.ru_utime),
            system: tv(ru.ru_stime),
        }
    }

    pub fn since(self, earlier: CpuTimes) -> CpuTimes {
        CpuTimes {
            user: self.user.saturating_sub(earlier.user),
            system: self.system.saturating_sub(earlier.system),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burning_cpu_shows_up() {
        let a = CpuTimes::now();
        let mut x = 0u64;
        let start = std::time::Instant::now();
        while start.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let d = CpuTimes::now().since(a);
        assert!(d.user + d.system > Duration::ZERO, "{d:?}");
    }
}
