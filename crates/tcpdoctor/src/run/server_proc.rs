//! The server's first process, started plain or traced (`crate::trace`): one handle for its
//! pid and exit status either way. A traced process is reaped by its tracer thread only (a
//! `waitpid` from any other thread could take the tracer's stops), so its status is read
//! from the tracer.

use std::io;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use tcpdoctor_core::syscalls::{Trace, TraceStatus};

use crate::trace::Tracer;

/// Something whose exit can be polled and waited for.
pub trait Waitable {
    fn id(&self) -> u32;
    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>>;
    /// Waits for the exit (the caller has sent SIGKILL).
    fn wait_killed(&mut self);
}

impl Waitable for Child {
    fn id(&self) -> u32 {
        Child::id(self)
    }
    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        Child::try_wait(self)
    }
    fn wait_killed(&mut self) {
        let _ = self.wait();
    }
}

pub enum Proc {
    /// Not traced: `--no-trace` (Off) or tracing was refused (Unavailable, with why).
    Plain(Child, TraceStatus),
    Traced(Tracer),
}

impl Waitable for Proc {
    fn id(&self) -> u32 {
        match self {
            Proc::Plain(c, _) => c.id(),
            Proc::Traced(t) => t.id(),
        }
    }
    fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match self {
            Proc::Plain(c, _) => c.try_wait(),
            Proc::Traced(t) => Ok(t.try_wait()),
        }
    }
    fn wait_killed(&mut self) {
        match self {
            Proc::Plain(c, _) => {
                let _ = c.wait();
            }
            Proc::Traced(t) => {
                // SIGKILL cannot be held up by a tracer: bounded wait for the reap.
                let start = Instant::now();
                while t.try_wait().is_none() && start.elapsed() < Duration::from_secs(2) {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        }
    }
}

impl Proc {
    /// The calls traced since the last window, or why there are none.
    pub fn take_trace(&self) -> Trace {
        match self {
            Proc::Plain(_, status) => Trace::not_traced(status.clone()),
            Proc::Traced(t) => t.take(),
        }
    }
}
