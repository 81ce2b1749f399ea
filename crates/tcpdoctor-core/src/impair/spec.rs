//! The path definition: what a `wan:` scenario asks of the delay line, as one value.
//!
//! Rules:
//! 1. A path has two directions, client→server (`c2s`) and server→client (`s2c`), each with
//!    its own delay, jitter, loss, drop list and bottleneck; the MTU and the seed are the
//!    path's. Syntax and defaults: `docs/wan.md`, "Path definition".
//! 2. The canonical text ([`fmt::Display`]) is what a saved report records: it states every
//!    choice the line makes, defaults resolved (a rate always shows its queue), and parsing it
//!    back gives the same [`PathSpec`]. Two runs are comparable only if their texts are equal.
//! 3. Parsing never panics; an error names the option that is wrong and how to write it
//!    ([`SpecError`]: `loss=1: give a percentage, e.g. loss=1%`).
//! 4. Each direction draws its random numbers from its own streams, derived from the seed
//!    ([`PathSpec::seeds`]): loss and jitter never share one, so adding jitter does not move
//!    which packets are lost, and the two directions never mirror each other.

mod parse;
#[cfg(test)]
mod tests;
mod values;

use std::fmt;
use std::time::Duration;

use super::{LossModel, SplitMix64};
use crate::flow::Direction;

/// The longest delay or jitter a path accepts.
pub const MAX_DELAY: Duration = Duration::from_secs(10);

/// A bottleneck: the link rate and its buffer (see [`super::queue`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RateSpec {
    pub bits_per_sec: u64,
    /// Buffer limit in bytes; [`super::queue::default_limit`] unless the user chose one.
    pub queue: u64,
}

/// One direction of the path.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct DirectionSpec {
    pub delay: Duration,
    /// Each packet's delay is `delay ± jitter`, uniform, never below zero.
    pub jitter: Duration,
    /// Let jitter reorder packets (off: a packet never overtakes the one ahead).
    pub reorder: bool,
    pub loss: LossModel,
    /// 1-based packet numbers this direction drops, sorted, without duplicates.
    pub drop: Vec<u64>,
    pub rate: Option<RateSpec>,
}

/// A whole path definition.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct PathSpec {
    pub c2s: DirectionSpec,
    pub s2c: DirectionSpec,
    /// Packets larger than this are dropped and counted; `None`: the line checks nothing (the
    /// devices' own MTU applies).
    pub mtu: Option<u32>,
    pub seed: u64,
}

/// A path definition that cannot be used, naming the option at fault.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{part}: {reason}")]
pub struct SpecError {
    /// The offending option as written (`loss=1`), or the whole definition.
    pub part: String,
    pub reason: String,
}

/// The seeds one direction's impairments draw from (rule 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectionSeeds {
    pub loss: u64,
    pub jitter: u64,
}

impl DirectionSpec {
    /// Only a delay: what `wan:15ms` gives each direction.
    pub fn delay(delay: Duration) -> DirectionSpec {
        DirectionSpec {
            delay,
            ..DirectionSpec::default()
        }
    }

    /// Draws random numbers: jitter or a loss model (a drop list is not random).
    pub fn is_random(&self) -> bool {
        !self.jitter.is_zero() || self.loss != LossModel::None
    }
}

impl PathSpec {
    /// The same delay each way and nothing else.
    pub fn symmetric(delay: Duration) -> PathSpec {
        PathSpec {
            c2s: DirectionSpec::delay(delay),
            s2c: DirectionSpec::delay(delay),
            ..PathSpec::default()
        }
    }

    /// Parses `wan:15ms,loss=1%` (the `wan:` prefix is optional).
    pub fn parse(text: &str) -> Result<PathSpec, SpecError> {
        parse::parse(text)
    }

    pub fn direction(&self, dir: Direction) -> &DirectionSpec {
        match dir {
            Direction::ClientToServer => &self.c2s,
            Direction::ServerToClient => &self.s2c,
        }
    }

    /// The round trip the path adds before any jitter, queueing or serialisation.
    pub fn base_rtt(&self) -> Duration {
        self.c2s.delay + self.s2c.delay
    }

    /// Anything beyond a fixed delay: then the line must work packet by packet (a shell that
    /// reads GSO super-packets segments them first), since loss, a bottleneck, an MTU, jitter
    /// and packet numbers all apply to the packets a real path would carry.
    pub fn needs_per_packet(&self) -> bool {
        let more = |d: &DirectionSpec| *d != DirectionSpec::delay(d.delay);
        self.mtu.is_some() || more(&self.c2s) || more(&self.s2c)
    }

    /// Rule 4: independent streams per direction and per impairment.
    pub fn seeds(&self, dir: Direction) -> DirectionSeeds {
        let mut g = SplitMix64::new(
            self.seed ^ (dir.index() as u64 + 1).wrapping_mul(0xA076_1D64_78BD_642F),
        );
        DirectionSeeds {
            loss: g.next_u64(),
            jitter: g.next_u64(),
        }
    }

    /// Whether `token`, one comma-separated piece of a longer list, continues a path
    /// definition rather than starting a new item: `--scenarios direct,wan:15ms,loss=1%,proxy`
    /// splits on commas into `direct`, `wan:15ms,loss=1%` and `proxy`. An option has an `=`, is
    /// `reorder`, or is a number continuing a `drop=` list; a scenario name is none of these.
    pub fn continues(token: &str) -> bool {
        let t = token.trim();
        t.contains('=')
            || t == "reorder"
            || (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
    }
}

impl std::str::FromStr for PathSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        PathSpec::parse(s)
    }
}

impl fmt::Display for PathSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b) = (&self.c2s, &self.s2c);
        let mut parts: Vec<String> = Vec::new();
        if a.delay == b.delay {
            parts.push(values::fmt_duration_exact(a.delay));
        } else {
            parts.push(format!("c2s={}", values::fmt_duration_exact(a.delay)));
            parts.push(format!("s2c={}", values::fmt_duration_exact(b.delay)));
        }
        // Each option once if both directions agree, else once per direction that has it.
        let mut both = |key: &str, x: Option<String>, y: Option<String>| {
            if x == y {
                parts.extend(x.map(|v| format!("{key}={v}")));
            } else {
                parts.extend(x.map(|v| format!("{key}=c2s:{v}")));
                parts.extend(y.map(|v| format!("{key}=s2c:{v}")));
            }
        };
        let jitter =
            |d: &DirectionSpec| (!d.jitter.is_zero()).then(|| values::fmt_duration_exact(d.jitter));
        both("jitter", jitter(a), jitter(b));
        let loss = |d: &DirectionSpec| values::fmt_loss(&d.loss);
        both("loss", loss(a), loss(b));
        let rate = |d: &DirectionSpec| d.rate.map(|r| values::fmt_rate(r.bits_per_sec));
        both("rate", rate(a), rate(b));
        let queue = |d: &DirectionSpec| d.rate.map(|r| values::fmt_size(r.queue));
        both("queue", queue(a), queue(b));
        let drop = |d: &DirectionSpec| {
            (!d.drop.is_empty()).then(|| {
                let n: Vec<String> = d.drop.iter().map(u64::to_string).collect();
                n.join(",")
            })
        };
        both("drop", drop(a), drop(b));
        match (a.reorder, b.reorder) {
            (true, true) => parts.push("reorder".into()),
            (true, false) => parts.push("reorder=c2s".into()),
            (false, true) => parts.push("reorder=s2c".into()),
            (false, false) => {}
        }
        if let Some(mtu) = self.mtu {
            parts.push(format!("mtu={mtu}"));
        }
        if self.seed != 0 || a.is_random() || b.is_random() {
            parts.push(format!("seed={}", self.seed));
        }
        write!(f, "wan:{}", parts.join(","))
    }
}
