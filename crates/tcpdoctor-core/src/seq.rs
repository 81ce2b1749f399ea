//! TCP sequence numbers: 32-bit, wrapping. Never compare them with `<` on raw `u32`s.

use std::cmp::Ordering;
use std::fmt;

/// A TCP sequence (or acknowledgment) number with RFC 793 / RFC 1982 serial arithmetic:
/// `a < b` when `b` is less than 2³¹ ahead of `a`, modulo 2³².
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct SeqNum(pub u32);

impl SeqNum {
    /// `self + n`, wrapping.
    pub fn plus(self, n: u32) -> SeqNum {
        SeqNum(self.0.wrapping_add(n))
    }

    /// Signed distance from `other` to `self` (`self - other`), valid within ±2³¹.
    pub fn diff(self, other: SeqNum) -> i64 {
        self.0.wrapping_sub(other.0) as i32 as i64
    }

    pub fn max(self, other: SeqNum) -> SeqNum {
        if self.diff(other) >= 0 {
            self
        } else {
            other
        }
    }
}

impl PartialOrd for SeqNum {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.diff(*other).cmp(&0))
    }
}

impl fmt::Display for SeqNum {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compares_across_wrap() {
        let a = SeqNum(u32::MAX - 10);
        let b = a.plus(20);
        assert_eq!(b.0, 9);
        assert!(a < b);
        assert!(b > a);
        assert_eq!(b.diff(a), 20);
        assert_eq!(a.diff(b), -20);
        assert_eq!(a.max(b), b);
    }

    #[test]
    fn equal_is_not_less() {
        let a = SeqNum(5);
        assert_eq!(a.partial_cmp(&a), Some(std::cmp::Ordering::Equal));
        assert_eq!(a.diff(a), 0);
    }
}
