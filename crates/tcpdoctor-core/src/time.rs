//! Time as data. The core never reads a clock: every instant comes from the evidence.

use std::fmt;
use std::time::Duration;

/// An instant, in nanoseconds since the Unix epoch (or since any fixed origin a source chooses).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(pub u64);

impl Timestamp {
    pub const ZERO: Timestamp = Timestamp(0);

    pub fn from_nanos(ns: u64) -> Self {
        Timestamp(ns)
    }

    pub fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time elapsed from `earlier` to `self`; zero if `earlier` is later (captures can step back).
    pub fn since(self, earlier: Timestamp) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    pub fn plus(self, d: Duration) -> Timestamp {
        Timestamp(
            self.0
                .saturating_add(d.as_nanos().min(u64::MAX as u128) as u64),
        )
    }

    /// `d` earlier, no earlier than 0.
    pub fn minus(self, d: Duration) -> Timestamp {
        Timestamp(
            self.0
                .saturating_sub(d.as_nanos().min(u64::MAX as u128) as u64),
        )
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{:09}",
            self.0 / 1_000_000_000,
            self.0 % 1_000_000_000
        )
    }
}

/// A duration kept per open flow, in nanoseconds: 8 bytes where a `Duration` takes 16. Each is
/// a difference of two capture timestamps (u64 nanoseconds, [`Timestamp::since`]) or a sum of
/// such over one flow's exchanges, so it holds the `Duration` it was made from exactly (a
/// longer one, past 584 years, is kept as the longest).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Nanos(u64);

impl Nanos {
    pub const ZERO: Nanos = Nanos(0);

    #[inline]
    pub fn new(d: Duration) -> Nanos {
        Nanos(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    }

    #[inline]
    pub fn get(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// The nanoseconds themselves.
    #[inline]
    pub fn as_u64(self) -> u64 {
        self.0
    }

    #[inline]
    pub fn add(&mut self, d: Duration) {
        self.0 = self.0.saturating_add(Nanos::new(d).0);
    }
}
