//! A one-line progress display on stderr, for people watching a long run on a terminal.
//!
//! Drawn only when stderr is a terminal and the run has lasted (or will last) more than a
//! couple of seconds; never when piped, so logs and CI output stay clean.

use std::io::Write;
use std::time::Duration;

/// Runs shorter than this draw nothing.
pub const AFTER: Duration = Duration::from_secs(2);

pub struct Progress {
    enabled: bool,
    drawn: bool,
    last_count: u64,
    last_at: Duration,
    rate: f64,
}

impl Progress {
    pub fn new(enabled: bool) -> Progress {
        Progress {
            enabled,
            drawn: false,
            last_count: 0,
            last_at: Duration::ZERO,
            rate: 0.0,
        }
    }

    /// `fraction`: how far the run is (0..=1), when known.
    pub fn draw(&mut self, label: &str, elapsed: Duration, count: u64, fraction: Option<f64>) {
        if !self.enabled || elapsed < AFTER {
            return;
        }
        let dt = elapsed.saturating_sub(self.last_at).as_secs_f64();
        if dt < 0.2 {
            return;
        }
        self.rate = count.saturating_sub(self.last_count) as f64 / dt;
        self.last_count = count;
        self.last_at = elapsed;
        let bar = match fraction {
            Some(f) => {
                let f = f.clamp(0.0, 1.0);
                let full = (f * 30.0).round() as usize;
                format!(
                    "[{}{}] {:>3.0}%",
                    "#".repeat(full),
                    ".".repeat(30 - full),
                    f * 100.0
                )
            }
            None => String::new(),
        };
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r\x1b[K{label} {bar} {count} exchanges, {:.0} req/s, {:.0} s",
            self.rate,
            elapsed.as_secs_f64()
        );
        let _ = err.flush();
        self.drawn = true;
    }

    pub fn clear(&mut self) {
        if self.drawn {
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[K");
            let _ = err.flush();
            self.drawn = false;
        }
    }
}
