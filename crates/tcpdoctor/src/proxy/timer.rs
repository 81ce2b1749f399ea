//! A sub-millisecond sleep for delayed and paced chunks.
//!
//! tokio's timer wheel has a resolution of one millisecond, so a `--delay 200us` chunk would
//! leave up to 1 ms late and every round trip through the proxy would grow by up to 2 ms more
//! than asked. A `timerfd` is an hrtimer: armed with the exact remaining time, it wakes the task
//! within tens of microseconds. One is created per impaired direction, on its first wait.
//!
//! Dropping a `sleep_until` future (another `select!` branch won) leaves the timer armed;
//! the next call re-arms it, which also clears any expiry that was not read.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Instant;

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

pub struct Timer {
    fd: AsyncFd<OwnedFd>,
}

impl Timer {
    pub fn new() -> io::Result<Timer> {
        // SAFETY: timerfd_create takes no pointers; a non-negative result is a new fd we own.
        let raw = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` was just returned by timerfd_create and is owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: the AsyncFd owns `fd`, so it stays open and the same for the AsyncFd's life.
        let fd = unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(|e| e.into_parts().1)?;
        Ok(Timer { fd })
    }

    /// Returns at `deadline` (at once if it has passed).
    pub async fn sleep_until(&self, deadline: Instant) -> io::Result<()> {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Ok(());
        };
        if left.is_zero() {
            return Ok(());
        }
        self.arm(left)?;
        loop {
            let mut ready = self.fd.readable().await?;
            let mut expirations = [0u8; 8];
            let read = ready.try_io(|fd| {
                // SAFETY: reads 8 bytes into a local array of 8 bytes from a timerfd we own.
                let n = unsafe {
                    libc::read(
                        fd.get_ref().as_raw_fd(),
                        expirations.as_mut_ptr().cast(),
                        expirations.len(),
                    )
                };
                if n < 0 {
                    Err(io::Error::last_os_error())
                } else {
                    Ok(())
                }
            });
            match read {
                Ok(Ok(())) => return Ok(()),
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }

    fn arm(&self, left: std::time::Duration) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: left.as_secs() as libc::time_t,
                tv_nsec: libc::c_long::from(left.subsec_nanos() as i32),
            },
        };
        // SAFETY: `spec` is a valid itimerspec on the stack; the old value is not asked for.
        let r = unsafe {
            libc::timerfd_settime(
                self.fd.get_ref().as_raw_fd(),
                0,
                &spec,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn never_returns_before_the_deadline() {
        let timer = super::Timer::new().unwrap();
        for us in [0u64, 50, 300, 1200, 2500] {
            let deadline = Instant::now() + Duration::from_micros(us);
            timer.sleep_until(deadline).await.unwrap();
            assert!(Instant::now() >= deadline, "returned early for {us} µs");
        }
    }

    /// A sleep dropped half-way (another branch of a select won) leaves the timer armed; the
    /// next sleep must wait for its own deadline, not return on the stale expiry.
    #[tokio::test]
    async fn a_dropped_sleep_does_not_cut_the_next_one_short() {
        let timer = super::Timer::new().unwrap();
        tokio::select! {
            biased;
            _ = timer.sleep_until(Instant::now() + Duration::from_micros(200)) => {
                panic!("a 200 µs sleep finished at its first poll")
            }
            _ = std::future::ready(()) => {}
        }
        std::thread::sleep(Duration::from_millis(1)); // the old expiry is now pending
        let deadline = Instant::now() + Duration::from_millis(3);
        timer.sleep_until(deadline).await.unwrap();
        assert!(Instant::now() >= deadline);
    }
}
