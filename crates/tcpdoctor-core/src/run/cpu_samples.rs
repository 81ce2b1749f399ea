//! The server's CPU sampled along the driver's timeline: what `busy_poll` rests on.
//!
//! The shell (`run/cpu_sampler.rs`) reads the server's process CPU clocks at a fine interval
//! and, at each read, whether the driver had a request out whose answer had not begun (the
//! server owed work) and whether that changed since the last read. Each interval between two
//! reads is then *working* (the server owed an answer the whole time), *waiting* (it owed
//! none and sent nothing the whole time, between exchanges), *mid-answer* (the same, but the
//! rest of an answer it had begun was still due: held in its socket for an ACK, or still
//! being computed — which of the two the capture tells, so the rule decides whether this time
//! counts as waiting) or *mixed* (the phase changed, or answer bytes arrived, within it; not
//! used). This module sums them, in time order, into what the rule compares.

/// What the driver's state was during one sampled interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Some request was out with its answer not begun, throughout.
    Working,
    /// No request was out at all, and no answer bytes arrived, throughout: between exchanges.
    Waiting,
    /// No request was out with its answer not begun, and no answer bytes arrived, throughout,
    /// but an answer had begun and was not complete: its rest was due.
    MidAnswer,
    /// The phase changed, or answer bytes arrived, within the interval.
    Mixed,
}

/// One interval between two reads of the server's CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuInterval {
    pub wall_ns: u64,
    /// CPU time of the server's processes (all threads) in the interval.
    pub cpu_ns: u64,
    /// Time its threads spent ready to run but waiting for a CPU (other work had it): with
    /// `cpu_ns`, the time they did not sleep, whatever else the machine was doing.
    pub ready_ns: u64,
    pub phase: Phase,
}

/// The server's CPU along the run, as the shell sampled it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CpuSamples {
    /// In time order.
    pub intervals: Vec<CpuInterval>,
    /// Voluntary context switches of the server's threads over the sampled time (a thread
    /// gives up the CPU to sleep: in `epoll_wait`, `read`, `nanosleep`, a futex); None when
    /// they could not be read.
    pub voluntary_switches: Option<u64>,
    /// How the samples were read, for the finding's `rests_on`.
    pub counters: String,
}

/// CPU and wall time of a set of intervals.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Spent {
    pub wall_ns: u64,
    pub cpu_ns: u64,
    pub ready_ns: u64,
}

impl Spent {
    fn add(&mut self, i: &CpuInterval) {
        self.wall_ns += i.wall_ns;
        self.cpu_ns += i.cpu_ns;
        self.ready_ns += i.ready_ns;
    }

    fn per_wall(&self, ns: u64) -> f64 {
        if self.wall_ns == 0 {
            0.0
        } else {
            ns as f64 / self.wall_ns as f64
        }
    }

    /// CPU per wall time: the share of one core (more than 1 with several threads busy).
    pub fn share(&self) -> f64 {
        self.per_wall(self.cpu_ns)
    }

    /// On a CPU or ready to run, per wall time: the share of the time a thread did not sleep
    /// (near 1 for a loop that never sleeps, however busy the machine; more than 1 with
    /// several threads awake).
    pub fn awake_share(&self) -> f64 {
        self.per_wall(self.cpu_ns + self.ready_ns)
    }
}

/// The samples summed by phase, the waiting time also in two halves of equal wall time.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Phases {
    pub working: Spent,
    /// Between exchanges, and mid-answer time when it counts as waiting.
    pub waiting: Spent,
    /// Mid-answer time that does not count as waiting (nothing shows the rest was held for
    /// an ACK: the server may have been computing it).
    pub mid_answer: Spent,
    pub mixed: Spent,
    /// The first and the second half of the waiting time, in time order.
    pub waiting_halves: [Spent; 2],
}

/// The intervals at the end of a gap in the middle of an answer that say whether the server
/// was waiting through it ([`CpuSamples::phases`]).
pub const GAP_END: usize = 2;

impl CpuSamples {
    /// Sums the intervals by phase. With `mid_answer_waits` (the rest of the answers was held
    /// for the client's ACK), a gap in the middle of an answer (consecutive mid-answer
    /// intervals) counts as waiting when the server was still awake at its end — its last
    /// [`GAP_END`] intervals awake at least `awake_at_end` of their time: a spinner spins until
    /// the ACK lets the rest go; a server that computed the rest, wrote it (Nagle held it) and
    /// went back to `read` sleeps there, and its computing was work.
    pub fn phases(&self, mid_answer_waits: bool, awake_at_end: f64) -> Phases {
        let counts = self.waiting_mask(mid_answer_waits, awake_at_end);
        let mut p = Phases::default();
        for (i, waits) in self.intervals.iter().zip(&counts) {
            match i.phase {
                Phase::Working => p.working.add(i),
                _ if *waits => p.waiting.add(i),
                Phase::MidAnswer => p.mid_answer.add(i),
                _ => p.mixed.add(i),
            }
        }
        let half = p.waiting.wall_ns / 2;
        let mut seen = 0;
        let waiting = self.intervals.iter().zip(&counts).filter(|(_, w)| **w);
        for (i, _) in waiting {
            let h = usize::from(seen >= half && seen > 0);
            p.waiting_halves[h].add(i);
            seen += i.wall_ns;
        }
        p
    }
}

impl CpuSamples {
    /// Which intervals count as waiting ([`CpuSamples::phases`]).
    fn waiting_mask(&self, mid_answer_waits: bool, awake_at_end: f64) -> Vec<bool> {
        let mut mask: Vec<bool> = self
            .intervals
            .iter()
            .map(|i| i.phase == Phase::Waiting)
            .collect();
        if !mid_answer_waits {
            return mask;
        }
        let mut start = 0;
        while start < self.intervals.len() {
            if self.intervals[start].phase != Phase::MidAnswer {
                start += 1;
                continue;
            }
            let mut end = start;
            while end < self.intervals.len() && self.intervals[end].phase == Phase::MidAnswer {
                end += 1;
            }
            let mut tail = Spent::default();
            for i in &self.intervals[end.saturating_sub(GAP_END).max(start)..end] {
                tail.add(i);
            }
            if tail.awake_share() >= awake_at_end {
                mask[start..end].iter_mut().for_each(|m| *m = true);
            }
            start = end;
        }
        mask
    }
}

/// For tests of what renders a finding: `exchanges` exchanges, each followed by `wait_ms`
/// intervals of 1 ms spent spinning (95% of a core) while owing nothing, one sleep each.
#[cfg(test)]
pub(crate) fn spinning(exchanges: u64, wait_ms: u64) -> CpuSamples {
    let spin = CpuInterval {
        wall_ns: 1_000_000,
        cpu_ns: 950_000,
        ready_ns: 30_000,
        phase: Phase::Waiting,
    };
    CpuSamples {
        intervals: vec![spin; (exchanges * wait_ms) as usize],
        voluntary_switches: Some(exchanges),
        counters: "the test's figures".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(ms: u64, cpu_ms: u64, phase: Phase) -> CpuInterval {
        CpuInterval {
            wall_ns: ms * 1_000_000,
            cpu_ns: cpu_ms * 1_000_000,
            ready_ns: cpu_ms * 100_000,
            phase,
        }
    }

    #[test]
    fn intervals_are_summed_by_phase_and_the_waiting_split_in_halves() {
        let s = CpuSamples {
            intervals: vec![
                iv(1, 1, Phase::Waiting),
                iv(1, 1, Phase::Working),
                iv(1, 1, Phase::Waiting),
                iv(2, 1, Phase::Mixed),
                iv(1, 0, Phase::Waiting),
                iv(1, 0, Phase::Waiting),
            ],
            ..CpuSamples::default()
        };
        let p = s.phases(false, 0.5);
        assert_eq!(p.working.share(), 1.0);
        assert_eq!(p.waiting.share(), 0.5);
        assert_eq!(p.mixed.share(), 0.5);
        assert!((p.waiting.awake_share() - 0.55).abs() < 1e-12);
        assert_eq!(p.waiting_halves[0].share(), 1.0, "front-loaded");
        assert_eq!(p.waiting_halves[1].share(), 0.0);
        assert_eq!(p.waiting_halves[0].wall_ns, 2_000_000);
        assert_eq!(CpuSamples::default().phases(true, 0.5).waiting.share(), 0.0);
    }

    /// Mid-answer time is waiting only when the rest was held for an ACK.
    #[test]
    fn mid_answer_time_counts_only_when_held_for_an_ack() {
        let s = CpuSamples {
            intervals: vec![iv(1, 0, Phase::Waiting), iv(4, 4, Phase::MidAnswer)],
            ..CpuSamples::default()
        };
        let computing = s.phases(false, 0.5);
        assert_eq!(computing.waiting.wall_ns, 1_000_000);
        assert_eq!(computing.mid_answer.cpu_ns, 4_000_000);
        let held = s.phases(true, 0.5);
        assert_eq!(held.waiting.wall_ns, 5_000_000);
        assert_eq!(held.waiting.cpu_ns, 4_000_000);
        assert_eq!(held.mid_answer.wall_ns, 0);
    }

    /// A gap in the middle of an answer, held for the ACK: a spinner is awake to its end and
    /// the gap is waiting; a server that computed for half of it, wrote the rest and slept in
    /// `read` until the ACK let it go is asleep at its end, and its computing was work.
    #[test]
    fn a_gap_counts_as_waiting_only_when_the_server_is_awake_at_its_end() {
        let gap = |awake_to: u64| -> Vec<CpuInterval> {
            let mut v: Vec<CpuInterval> = (0..40u64)
                .map(|k| iv(1, u64::from(k < awake_to), Phase::MidAnswer))
                .collect();
            v.push(iv(1, 0, Phase::Mixed));
            v
        };
        let spinner = CpuSamples {
            intervals: [gap(40), gap(40)].concat(),
            ..CpuSamples::default()
        };
        let p = spinner.phases(true, 0.5);
        assert_eq!(p.waiting.wall_ns, 80_000_000);
        assert!(p.waiting_halves.iter().all(|h| h.awake_share() > 0.9));
        let computing = CpuSamples {
            intervals: [gap(20), gap(20)].concat(),
            ..CpuSamples::default()
        };
        let p = computing.phases(true, 0.5);
        assert_eq!(p.waiting.wall_ns, 0);
        assert_eq!(p.mid_answer.cpu_ns, 40_000_000);
    }
}
