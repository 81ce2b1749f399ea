//! A sub-millisecond sleep for delayed and paced chunks.
//!
//! tokio's timer wheel has a resolution of one millisecond, so a `--delay 200us` chunk would
//! leave up to 1 ms late and every round trip through the proxy would grow by up to 2 ms more
//! than asked. A `timerfd` is an hrtimer: it expires on time, but the thread it wakes may take
//! tens of microseconds to run, so it is armed a little early (rules below). One is created
//! per impaired direction, on its first wait.
//!
//! Dropping a `sleep_until` future (another `select!` branch won) leaves the timer armed;
//! the next call re-arms it, which also clears any expiry that was not read.
//!
//! Rules:
//! 1. The timerfd is armed `lead` before the deadline; the rest is spent yielding to the
//!    runtime (which keeps polling sockets) until the clock reads the deadline. Never early.
//! 2. `lead` is how late the process's timers have lately woken, on average (one value for
//!    the process: the lateness is the CPUs', not a connection's): each wake-up moves it 1/8 of
//!    the way to that wake-up's lateness (itself capped at [`MAX_LEAD`]). A wait shorter than
//!    the lead spins all the way and counts as lateness 0, so a lead too long for the waits at
//!    hand decays until the timerfd is used (and measured) again.
//! 3. Why: a thread waking from idle is late by the CPU's wake-up cost, not by timer slack (a
//!    timerfd has none). On a VM whose idle vCPU halts that is 20–55 µs at the median, more
//!    the longer it slept, and every delayed chunk left that late (issue 3). Where wake-ups
//!    are prompt, the lead (and the spin) shrinks to almost nothing; the cap bounds the spin
//!    when a busy CPU wakes us very late.
//! 4. A timer made [`Timer::awake`] arms that much earlier again: it wakes (late by about the
//!    lead, so about `awake` before the deadline) and yields until the deadline.
//!    The benchmark's open loop does this before each slot (`bench --spin`), so its CPU is
//!    awake when the request leaves and when the answer comes. A wait shorter than lead +
//!    awake but not than the lead leaves the lead as it is (rule 2 is about the lead alone).
//! 5. The yielding of rules 1 and 4 is marked as spin for the thread (`crate::spin`): the
//!    benchmark counts it apart from its work. The proxy's marks are never settled (it
//!    counts no spin) and cost a thread-local check per yield.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// The most a sleep spins before its deadline: bounds the CPU a wait can burn.
pub const MAX_LEAD: Duration = Duration::from_micros(250);

/// The most a timer can be asked to stay awake before each deadline (rule 4).
pub const MAX_AWAKE: Duration = Duration::from_millis(1);

/// The lead every timer of the process learns and uses (rule 2): the lateness is the
/// machine's (its CPUs' wake-up cost), so a new connection starts with what earlier ones
/// learnt instead of from zero.
static LEAD_NS: AtomicU64 = AtomicU64::new(0);

pub struct Timer {
    fd: AsyncFd<OwnedFd>,
    /// How early to arm, in ns (rule 2).
    lead_ns: &'static AtomicU64,
    /// The instant the timerfd is armed for and has not yet been read as expired: a wait for
    /// the same instant (the previous one was dropped when a read won the select) does not
    /// re-arm it, which saves a system call per chunk read while a chunk waits.
    armed_for: std::sync::Mutex<Option<Instant>>,
    /// Rule 4: how much earlier than the lead the timerfd is armed.
    awake: Duration,
}

/// The next lead after a wake-up `late` behind the instant the timer was armed for (rule 2).
fn next_lead(lead: Duration, late: Duration) -> Duration {
    (lead * 7 + late.min(MAX_LEAD)) / 8
}

impl Timer {
    pub fn new() -> io::Result<Timer> {
        Timer::with_lead(&LEAD_NS)
    }

    /// A timer that wakes `awake` earlier than [`Timer::new`]'s would, and yields from then to
    /// each deadline (rule 4).
    pub fn awake(awake: Duration) -> io::Result<Timer> {
        let mut t = Timer::new()?;
        t.awake = awake.min(MAX_AWAKE);
        Ok(t)
    }

    /// A timer learning into `lead_ns` (tests: their own, not the process's).
    fn with_lead(lead_ns: &'static AtomicU64) -> io::Result<Timer> {
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
        Ok(Timer {
            fd,
            lead_ns,
            armed_for: std::sync::Mutex::new(None),
            awake: Duration::ZERO,
        })
    }

    /// Returns at `deadline` (at once if it has passed), never before. The yielding is marked
    /// as spin (rule 5), settled by the task's next poll.
    pub async fn sleep_until(&self, deadline: Instant) -> io::Result<()> {
        let lead = Duration::from_nanos(self.lead_ns.load(Ordering::Relaxed));
        let left = deadline.saturating_duration_since(Instant::now());
        let wake = deadline.checked_sub(lead + self.awake).unwrap_or(deadline);
        let late = if self.sleep_on_fd(wake).await? {
            Some(Instant::now().saturating_duration_since(wake))
        } else if left < lead {
            // Rule 2: a wait shorter than the lead says the lead may be too long.
            Some(Duration::ZERO)
        } else {
            // Shorter than the lead and the awake time together, not than the lead: it says
            // nothing of the wake-ups.
            None
        };
        if let Some(late) = late {
            let lead = next_lead(lead, late);
            self.lead_ns
                .store(lead.as_nanos() as u64, Ordering::Relaxed);
        }
        while Instant::now() < deadline {
            crate::spin::yielding();
            tokio::task::yield_now().await;
        }
        Ok(())
    }

    /// Waits on the timerfd until `deadline`; false when it had passed already (no wait).
    async fn sleep_on_fd(&self, deadline: Instant) -> io::Result<bool> {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Ok(false);
        };
        if left.is_zero() {
            return Ok(false);
        }
        let armed = self.armed_for.lock().ok().and_then(|a| *a);
        if armed != Some(deadline) {
            self.arm(left)?;
            if let Ok(mut a) = self.armed_for.lock() {
                *a = Some(deadline);
            }
        }
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
                Ok(Ok(())) => {
                    if let Ok(mut a) = self.armed_for.lock() {
                        *a = None;
                    }
                    return Ok(true);
                }
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
    }

    fn arm(&self, left: Duration) -> io::Result<()> {
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: left.as_secs() as _,
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

    use super::{next_lead, MAX_LEAD};

    fn us(v: u64) -> Duration {
        Duration::from_micros(v)
    }

    #[test]
    fn the_lead_follows_the_average_lateness_and_caps_outliers() {
        assert_eq!(
            next_lead(us(0), us(80)),
            us(10),
            "1/8 of the way per wake-up"
        );
        assert_eq!(
            next_lead(us(80), us(0)),
            us(70),
            "prompt wake-ups shrink it"
        );
        assert_eq!(
            next_lead(us(40), us(40)),
            us(40),
            "steady lateness, steady lead"
        );
        assert_eq!(
            next_lead(us(0), us(5_000)),
            MAX_LEAD / 8,
            "one preempted wake-up counts as MAX_LEAD, no more"
        );
        let mut lead = Duration::ZERO;
        for _ in 0..200 {
            lead = next_lead(lead, us(1_000_000));
        }
        assert!(lead <= MAX_LEAD, "never past the cap: {lead:?}");
        for _ in 0..100 {
            lead = next_lead(lead, Duration::ZERO);
        }
        assert!(
            lead < us(1),
            "where wake-ups are prompt it vanishes: {lead:?}"
        );
    }

    /// A timer that learns into a lead of its own, starting at `lead` (the process-wide one is
    /// shared by tests running at the same time).
    fn own_timer(lead: Duration) -> super::Timer {
        let lead_ns = Box::leak(Box::new(std::sync::atomic::AtomicU64::new(
            lead.as_nanos() as u64
        )));
        super::Timer::with_lead(lead_ns).expect("timerfd")
    }

    /// Rules 4 and 5: an awake timer yields (marked as spin) from `awake` before the deadline;
    /// a plain one, woken by its timerfd at the deadline (lead 0), yields not at all and marks
    /// nothing.
    #[tokio::test]
    async fn an_awake_timer_yields_before_the_deadline_and_marks_it_as_spin() {
        crate::spin::settle();
        let plain = own_timer(Duration::ZERO);
        let deadline = Instant::now() + Duration::from_millis(3);
        plain.sleep_until(deadline).await.expect("timerfd");
        assert!(Instant::now() >= deadline);
        assert_eq!(crate::spin::settle(), Duration::ZERO, "nothing marked");

        let mut awake = own_timer(Duration::ZERO);
        // Woken 10 ms in, 50 ms before the deadline: only a wake-up 50 ms late would leave
        // nothing to yield.
        awake.awake = Duration::from_millis(50);
        let deadline = Instant::now() + Duration::from_millis(60);
        awake.sleep_until(deadline).await.expect("timerfd");
        assert!(Instant::now() >= deadline, "never early");
        assert!(
            crate::spin::settle() > Duration::ZERO,
            "the yields before the deadline were marked"
        );
    }

    /// A wait for the instant the timer is already armed for (the previous wait was dropped
    /// when a read won the select) does not re-arm it, and still ends at that instant.
    #[tokio::test]
    async fn a_second_wait_for_the_same_instant_ends_on_time() {
        let timer = own_timer(Duration::ZERO);
        let deadline = Instant::now() + Duration::from_millis(3);
        tokio::select! {
            biased;
            _ = timer.sleep_until(deadline) => panic!("a 3 ms sleep finished at its first poll"),
            _ = std::future::ready(()) => {}
        }
        assert_eq!(*timer.armed_for.lock().expect("lock"), Some(deadline));
        tokio::time::timeout(Duration::from_secs(5), timer.sleep_until(deadline))
            .await
            .expect("the armed expiry was waited for")
            .expect("timerfd");
        assert!(Instant::now() >= deadline);
        assert_eq!(
            *timer.armed_for.lock().expect("lock"),
            None,
            "read, so disarmed"
        );
    }

    /// Rule 2: waits shorter than the lead (no timerfd, so no lateness seen) shrink it.
    #[tokio::test]
    async fn a_lead_too_long_for_the_waits_decays() {
        let timer = own_timer(MAX_LEAD);
        let lead = |t: &super::Timer| t.lead_ns.load(std::sync::atomic::Ordering::Relaxed);
        for _ in 0..3 {
            let before = lead(&timer);
            timer
                .sleep_until(Instant::now() + Duration::from_micros(20))
                .await
                .unwrap();
            assert!(lead(&timer) < before, "{} ≥ {before}", lead(&timer));
        }
    }

    /// Sleeps shorter and longer than the lead the timer has learnt: none returns early.
    #[tokio::test]
    async fn a_learnt_lead_never_makes_a_sleep_return_early() {
        let timer = own_timer(MAX_LEAD);
        for us in [0u64, 30, 250, 400, 2000, 50, 1000] {
            let deadline = Instant::now() + Duration::from_micros(us);
            timer.sleep_until(deadline).await.unwrap();
            assert!(Instant::now() >= deadline, "returned early for {us} µs");
        }
    }

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
