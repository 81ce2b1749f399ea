//! Rule 6's search for one stretch: for each burst, the first of the peer's data segments whose
//! ACK number falls strictly inside the burst's bytes.
//!
//! Asked burst by burst over the whole stretch, that is a pass over up to [`super::STRETCH_MAX`]
//! segments per burst; on a busy flow with many bursts it was most of `analyze`'s time. A
//! sender's ACK numbers never go back (they are its `rcv_nxt`), so in the usual stretch the
//! peer's ACK numbers, in capture order, are sorted: the segments whose ACK lies inside a
//! burst are then one run of them, and the first is found by a binary search. Where they are
//! not sorted (segments reordered before the capture point, a hostile file) or lie too far
//! apart for serial arithmetic to order them, the search falls back to the pass, so the answer
//! is always the pass's.

use super::Seg;
use crate::flow::Direction;
use crate::seq::SeqNum;

/// Serial arithmetic orders two numbers less than this far apart.
const SERIAL_REACH: i64 = 1 << 31;

/// The peer segments one direction's bursts may quote, indexed when their ACK numbers are
/// sorted.
pub(super) struct AckIndex {
    /// The direction whose bursts this answers for.
    dir: Direction,
    /// Each peer data segment carrying an ACK: its ACK number's distance from the first one's,
    /// and its place in the stretch; `None` when those numbers are not sorted.
    sorted: Option<(SeqNum, Vec<(i64, usize)>)>,
}

impl AckIndex {
    /// The index for bursts of `dir` in `segs`.
    pub(super) fn new(segs: &[Seg], dir: Direction) -> AckIndex {
        AckIndex {
            dir,
            sorted: sorted_acks(segs, dir.reverse()),
        }
    }

    /// Rule 6 for the burst of this index's direction covering `lo..hi` of its stream: the
    /// first peer data segment (in `segs`' order) whose ACK number `a` has `lo < a < hi`.
    pub(super) fn first_inside(&self, segs: &[Seg], lo: SeqNum, hi: SeqNum) -> Option<Seg> {
        let span = hi.diff(lo);
        if let Some((base, acks)) = &self.sorted {
            let from = lo.diff(*base);
            let last = acks.last().map_or(0, |a| a.0);
            // Within reach every ACK's distance from `lo` is its offset minus `from`, with no
            // wrap, and "inside" is an interval of offsets.
            if (0..SERIAL_REACH / 2).contains(&span) && last - from < SERIAL_REACH {
                let i = acks.partition_point(|a| a.0 <= from);
                return acks.get(i).filter(|a| a.0 < from + span).map(|a| segs[a.1]);
            }
        }
        linear(segs, self.dir, lo, hi)
    }
}

/// The pass: what rule 6 says, by definition.
fn linear(segs: &[Seg], dir: Direction, lo: SeqNum, hi: SeqNum) -> Option<Seg> {
    segs.iter()
        .copied()
        .find(|p| p.dir != dir && p.ack.is_some_and(|a| a.diff(lo) > 0 && hi.diff(a) > 0))
}

/// The ACK numbers of `peer`'s segments as offsets from the first, with their places, when
/// they never go back and all lie within serial reach of the first.
fn sorted_acks(segs: &[Seg], peer: Direction) -> Option<(SeqNum, Vec<(i64, usize)>)> {
    let mut acks: Vec<(i64, usize)> = Vec::new();
    let mut base = None;
    let mut prev: Option<(SeqNum, i64)> = None;
    for (i, s) in segs.iter().enumerate() {
        let Some(a) = s.ack.filter(|_| s.dir == peer) else {
            continue;
        };
        base.get_or_insert(a);
        let offset = match prev {
            None => 0,
            Some((p, at)) => {
                let step = a.diff(p);
                if step < 0 {
                    return None;
                }
                at + step
            }
        };
        if offset >= SERIAL_REACH {
            return None;
        }
        prev = Some((a, offset));
        acks.push((offset, i));
    }
    Some((base.unwrap_or_default(), acks))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message_ends::Cut;
    use crate::time::Timestamp;

    /// A small deterministic generator (xorshift64*): the cases are the same on every run.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    fn seg(i: usize, dir: Direction, seq: u32, len: u32, ack: Option<u32>) -> Seg {
        Seg {
            frame: i as u64 + 1,
            ts: Timestamp::from_nanos(i as u64 * 1000),
            len,
            dir,
            seq: SeqNum(seq),
            ack: ack.map(SeqNum),
            tsval: Some(1),
            cut: Cut::Unknown,
        }
    }

    /// A stretch of both directions: each side's bytes follow on, each ACK number is what the
    /// sender had received (plus, at `disorder`, a reordered or wild one).
    fn stretch(rng: &mut Rng, n: usize, disorder: u64) -> Vec<Seg> {
        let mut next = [rng.next() as u32, rng.next() as u32];
        let mut received = [next[1], next[0]];
        let mut segs = Vec::new();
        for i in 0..n {
            let d = if rng.below(3) == 0 { 1 } else { 0 };
            let dir = [Direction::ClientToServer, Direction::ServerToClient][d];
            let len = 1 + rng.below(600) as u32;
            let peer = 1 - d;
            // What this side had received of the peer's bytes: it moves on, never back.
            let unread = next[peer].wrapping_sub(received[d]);
            received[d] = received[d].wrapping_add(rng.below(u64::from(unread) + 1) as u32);
            let mut ack = received[d];
            if disorder > 0 && rng.below(disorder) == 0 {
                ack = rng.next() as u32;
            }
            let ack = (rng.below(20) != 0).then_some(ack);
            segs.push(seg(i, dir, next[d], len, ack));
            next[d] = next[d].wrapping_add(len);
        }
        segs
    }

    fn check(segs: &[Seg], rng: &mut Rng, queries: usize) -> usize {
        let mut found = 0;
        for dir in [Direction::ClientToServer, Direction::ServerToClient] {
            let index = AckIndex::new(segs, dir);
            let own: Vec<&Seg> = segs.iter().filter(|s| s.dir == dir).collect();
            if own.is_empty() {
                continue;
            }
            for _ in 0..queries {
                // Bursts as `runs` makes them (a run of own segments), and arbitrary ranges.
                let (lo, hi) = if rng.below(4) > 0 {
                    let a = rng.below(own.len() as u64) as usize;
                    let b = (a + rng.below(12) as usize).min(own.len() - 1);
                    (own[a].seq, own[b].seq.plus(own[b].len))
                } else {
                    (SeqNum(rng.next() as u32), SeqNum(rng.next() as u32))
                };
                let fast = index.first_inside(segs, lo, hi).map(|s| s.frame);
                let slow = linear(segs, dir, lo, hi).map(|s| s.frame);
                assert_eq!(fast, slow, "dir {dir:?} lo {lo} hi {hi}");
                found += usize::from(fast.is_some());
            }
        }
        found
    }

    #[test]
    fn the_index_answers_as_the_pass_does() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let (mut indexed, mut found) = (0, 0);
        for round in 0..300 {
            let n = 1 + rng.below(300) as usize;
            let disorder = [0, 0, 0, 50, 5][round % 5];
            let segs = stretch(&mut rng, n, disorder);
            indexed += usize::from(sorted_acks(&segs, Direction::ServerToClient).is_some());
            found += check(&segs, &mut rng, 40);
        }
        // Many queries found a segment (a search that always says "none" would pass otherwise).
        assert!(
            found > 5000,
            "only {found} of 24000 queries found a segment"
        );
        // Most stretches were answered by the index, not the fallback.
        assert!(indexed > 150, "only {indexed} of 300 stretches indexed");
    }

    #[test]
    fn acks_across_the_wrap_are_sorted_and_found() {
        let c = Direction::ClientToServer;
        let s = Direction::ServerToClient;
        let top = u32::MAX - 100;
        let segs = vec![
            seg(0, c, top, 60, Some(7)),
            seg(1, c, top.wrapping_add(60), 60, Some(7)),
            seg(2, c, top.wrapping_add(120), 60, Some(7)),
            seg(3, s, 7, 10, Some(top.wrapping_add(60))),
            seg(4, s, 17, 10, Some(top.wrapping_add(180))),
        ];
        let index = AckIndex::new(&segs, c);
        assert!(index.sorted.is_some());
        let hit = index.first_inside(&segs, SeqNum(top), SeqNum(top.wrapping_add(180)));
        assert_eq!(hit.map(|s| s.frame), Some(4));
        // The ACK at the burst's end is not inside it.
        let hit = index.first_inside(
            &segs,
            SeqNum(top.wrapping_add(60)),
            SeqNum(top.wrapping_add(180)),
        );
        assert_eq!(hit.map(|s| s.frame), None);
    }

    #[test]
    fn an_ack_that_goes_back_falls_back_to_the_pass() {
        let c = Direction::ClientToServer;
        let s = Direction::ServerToClient;
        let segs = vec![
            seg(0, s, 0, 10, Some(500)),
            seg(1, s, 10, 10, Some(150)),
            seg(2, c, 100, 400, Some(20)),
        ];
        let index = AckIndex::new(&segs, c);
        assert!(index.sorted.is_none());
        let hit = index.first_inside(&segs, SeqNum(100), SeqNum(500));
        assert_eq!(hit.map(|s| s.frame), Some(2));
    }
}
