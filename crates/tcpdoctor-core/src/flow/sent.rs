//! The unacknowledged segments one direction remembers (rule 8 of [`super`]), oldest first.
//!
//! Most directions of most flows have at most one segment in flight at a time (a request, a
//! response), so one segment is kept inline and a queue is allocated only when a second one
//! is in flight: an open flow of request/response traffic carries no allocation for this.

use std::collections::VecDeque;

use super::PacketRef;
use crate::seq::SeqNum;

#[derive(Clone, Copy, Debug)]
pub(super) struct SentSegment {
    pub start: SeqNum,
    pub end: SeqNum,
    pub first: PacketRef,
    pub retransmitted: bool,
}

/// A FIFO of [`SentSegment`]s: none, one inline, or a queue once two were in flight at once
/// (kept, with its capacity, from then on: a flow that had two has a bulk direction). The
/// queue is boxed: 32 bytes for every direction of every open flow, not 40.
#[derive(Clone, Debug, Default)]
pub(super) enum SentLog {
    #[default]
    Empty,
    One(SentSegment),
    #[allow(clippy::box_collection)]
    Many(Box<VecDeque<SentSegment>>),
}

impl SentLog {
    pub fn len(&self) -> usize {
        match self {
            SentLog::Empty => 0,
            SentLog::One(_) => 1,
            SentLog::Many(q) => q.len(),
        }
    }

    pub fn front(&self) -> Option<&SentSegment> {
        match self {
            SentLog::Empty => None,
            SentLog::One(s) => Some(s),
            SentLog::Many(q) => q.front(),
        }
    }

    pub fn pop_front(&mut self) -> Option<SentSegment> {
        match self {
            SentLog::Empty => None,
            SentLog::One(s) => {
                let s = *s;
                *self = SentLog::Empty;
                Some(s)
            }
            SentLog::Many(q) => q.pop_front(),
        }
    }

    pub fn push_back(&mut self, s: SentSegment) {
        match self {
            SentLog::Empty => *self = SentLog::One(s),
            SentLog::One(first) => *self = SentLog::Many(Box::new(VecDeque::from([*first, s]))),
            SentLog::Many(q) => q.push_back(s),
        }
    }

    pub fn iter_mut(&mut self) -> std::slice::IterMut<'_, SentSegment> {
        match self {
            SentLog::Empty => [].iter_mut(),
            SentLog::One(s) => std::slice::from_mut(s).iter_mut(),
            SentLog::Many(q) => q.make_contiguous().iter_mut(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;

    fn seg(n: u32) -> SentSegment {
        SentSegment {
            start: SeqNum(n),
            end: SeqNum(n + 1),
            first: PacketRef {
                frame: u64::from(n),
                ts: Timestamp(0),
            },
            retransmitted: false,
        }
    }

    /// The same answers as a plain queue through every shape: empty, one, many, drained.
    #[test]
    fn behaves_as_a_queue() {
        let mut log = SentLog::default();
        let mut q = VecDeque::new();
        let ops: &[Option<u32>] = &[
            Some(1),
            None,
            None,
            Some(2),
            Some(3),
            Some(4),
            None,
            Some(5),
            None,
            None,
            None,
            Some(6),
        ];
        for op in ops {
            match *op {
                Some(n) => {
                    log.push_back(seg(n));
                    q.push_back(seg(n));
                }
                None => {
                    assert_eq!(
                        log.pop_front().map(|s| s.start),
                        q.pop_front().map(|s| s.start)
                    );
                }
            }
            assert_eq!(log.len(), q.len());
            assert_eq!(log.front().map(|s| s.start), q.front().map(|s| s.start));
            let a: Vec<u32> = log.iter_mut().map(|s| s.start.0).collect();
            let b: Vec<u32> = q.iter_mut().map(|s| s.start.0).collect();
            assert_eq!(a, b);
        }
        assert!(
            matches!(log, SentLog::Many(_)),
            "stays a queue once it was one"
        );
    }
}
