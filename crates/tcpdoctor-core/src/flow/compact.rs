//! Optional packet references and RTT samples without an `Option`'s tag (issue 29: every open
//! flow holds a dozen of them, and a capture of a busy server holds hundreds of thousands of
//! open flows).
//!
//! `Option<PacketRef>` is 24 bytes where a [`PacketRef`] is 16: [`MaybePacket`] is 16, frame
//! `u64::MAX` standing for none (frames count packets from 1: no capture reaches that one).
//! `Option<(Duration, [u64; 2])>` is 32 bytes: [`MaybeRtt`] is 24, the time kept as u64
//! nanoseconds (every RTT is a difference of two [`Timestamp`]s, so nothing is lost) and the
//! same frame marking none.

use std::time::Duration;

use super::PacketRef;
use crate::time::{Nanos, Timestamp};

/// The frame number that stands for "none".
const NO_FRAME: u64 = u64::MAX;

/// An `Option<PacketRef>` in 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MaybePacket(PacketRef);

impl Default for MaybePacket {
    fn default() -> MaybePacket {
        MaybePacket::NONE
    }
}

impl MaybePacket {
    pub const NONE: MaybePacket = MaybePacket(PacketRef {
        frame: NO_FRAME,
        ts: Timestamp(0),
    });

    #[inline]
    pub fn some(p: PacketRef) -> MaybePacket {
        debug_assert_ne!(p.frame, NO_FRAME);
        MaybePacket(p)
    }

    #[inline]
    pub fn get(self) -> Option<PacketRef> {
        (self.0.frame != NO_FRAME).then_some(self.0)
    }

    #[inline]
    pub fn is_some(self) -> bool {
        self.0.frame != NO_FRAME
    }

    #[inline]
    pub fn is_none(self) -> bool {
        !self.is_some()
    }

    /// Stores `p` unless one is stored already.
    #[inline]
    pub fn get_or_insert(&mut self, p: PacketRef) {
        if self.is_none() {
            *self = MaybePacket::some(p);
        }
    }
}

impl From<Option<PacketRef>> for MaybePacket {
    #[inline]
    fn from(p: Option<PacketRef>) -> MaybePacket {
        p.map_or(MaybePacket::NONE, MaybePacket::some)
    }
}

/// An `Option<(Duration, [u64; 2])>` (an RTT and the frames it was measured between) in 24
/// bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct MaybeRtt {
    nanos: Nanos,
    frames: [u64; 2],
}

impl Default for MaybeRtt {
    fn default() -> MaybeRtt {
        MaybeRtt::NONE
    }
}

impl MaybeRtt {
    pub const NONE: MaybeRtt = MaybeRtt {
        nanos: Nanos::ZERO,
        frames: [NO_FRAME, 0],
    };

    #[inline]
    pub fn get(self) -> Option<(Duration, [u64; 2])> {
        (self.frames[0] != NO_FRAME).then(|| (self.nanos.get(), self.frames))
    }

    /// The RTT alone, without rebuilding the frames.
    #[inline]
    pub fn nanos(self) -> Option<u64> {
        (self.frames[0] != NO_FRAME).then_some(self.nanos.as_u64())
    }
}

impl From<Option<(Duration, [u64; 2])>> for MaybeRtt {
    #[inline]
    fn from(s: Option<(Duration, [u64; 2])>) -> MaybeRtt {
        match s {
            Some((rtt, frames)) => {
                debug_assert_ne!(frames[0], NO_FRAME);
                MaybeRtt {
                    nanos: Nanos::new(rtt),
                    frames,
                }
            }
            None => MaybeRtt::NONE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_is_smaller_than_an_option() {
        let p = PacketRef {
            frame: 7,
            ts: Timestamp(123),
        };
        let mut m = MaybePacket::default();
        assert_eq!(m.get(), None);
        m.get_or_insert(p);
        m.get_or_insert(PacketRef { frame: 8, ..p });
        assert_eq!(m.get(), Some(p));
        assert_eq!(MaybePacket::from(None).get(), None);
        let zero = PacketRef {
            frame: 0,
            ts: Timestamp(0),
        };
        assert_eq!(MaybePacket::from(Some(zero)).get(), Some(zero));

        let s = (Duration::from_nanos(1_234_567), [3, 9]);
        assert_eq!(MaybeRtt::from(Some(s)).get(), Some(s));
        assert_eq!(MaybeRtt::from(Some(s)).nanos(), Some(1_234_567));
        assert_eq!(MaybeRtt::from(None).get(), None);
        let zero = (Duration::ZERO, [0, 0]);
        assert_eq!(MaybeRtt::from(Some(zero)).get(), Some(zero));

        use std::mem::size_of;
        assert_eq!(size_of::<MaybePacket>(), 16);
        assert_eq!(size_of::<MaybeRtt>(), 24);
    }
}
