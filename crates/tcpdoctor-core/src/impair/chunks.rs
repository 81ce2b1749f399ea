//! Write boundaries: how the bytes a forwarder read are cut into the writes it makes.
//!
//! Rules:
//! 1. `preserve`: one write per chunk read — the faithful middlebox, and the one that
//!    re-creates a per-line server's many small writes on its outbound leg.
//! 2. `coalesce`: everything queued when the writer is ready leaves as one write.
//! 3. `split:N`: bytes leave in writes of at most N bytes, turning a healthy peer into a
//!    fragmenting one.

use std::collections::VecDeque;

use super::{Poll, Stage};
use crate::time::Timestamp;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkMode {
    Preserve,
    Coalesce,
    Split(usize),
}

impl std::str::FromStr for ChunkMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "preserve" => Ok(ChunkMode::Preserve),
            "coalesce" => Ok(ChunkMode::Coalesce),
            _ => match s.strip_prefix("split:").map(str::parse::<usize>) {
                Some(Ok(n)) if n > 0 => Ok(ChunkMode::Split(n)),
                _ => Err(format!(
                    "`{s}` is not a chunk mode (expected preserve, coalesce or split:N with N ≥ 1)"
                )),
            },
        }
    }
}

pub struct Chunker {
    mode: ChunkMode,
    queue: VecDeque<Vec<u8>>,
    bytes: usize,
}

impl Chunker {
    pub fn new(mode: ChunkMode) -> Chunker {
        Chunker {
            mode,
            queue: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl Stage for Chunker {
    fn push(&mut self, data: Vec<u8>, _now: Timestamp) {
        if data.is_empty() {
            return;
        }
        self.bytes += data.len();
        self.queue.push_back(data);
    }

    fn poll(&mut self, _now: Timestamp) -> Poll {
        if self.queue.is_empty() {
            return Poll::Idle;
        }
        let out = match self.mode {
            ChunkMode::Preserve => self.queue.pop_front().unwrap_or_default(),
            ChunkMode::Coalesce => {
                let mut all = Vec::with_capacity(self.bytes);
                for c in self.queue.drain(..) {
                    all.extend_from_slice(&c);
                }
                all
            }
            ChunkMode::Split(n) => {
                let Some(front) = self.queue.front_mut() else {
                    return Poll::Idle;
                };
                if front.len() <= n {
                    self.queue.pop_front().unwrap_or_default()
                } else {
                    let rest = front.split_off(n);
                    std::mem::replace(front, rest)
                }
            }
        };
        self.bytes -= out.len();
        Poll::Emit(out)
    }

    fn queued(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(c: &mut Chunker) -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        while let Poll::Emit(d) = c.poll(Timestamp::ZERO) {
            v.push(d);
        }
        v
    }

    #[test]
    fn modes() {
        for (mode, want) in [
            (ChunkMode::Preserve, vec![b"abc".to_vec(), b"de".to_vec()]),
            (ChunkMode::Coalesce, vec![b"abcde".to_vec()]),
            (
                ChunkMode::Split(2),
                vec![b"ab".to_vec(), b"c".to_vec(), b"de".to_vec()],
            ),
        ] {
            let mut c = Chunker::new(mode);
            c.push(b"abc".to_vec(), Timestamp::ZERO);
            c.push(b"de".to_vec(), Timestamp::ZERO);
            assert_eq!(drain(&mut c), want, "{mode:?}");
            assert_eq!(c.queued(), 0);
        }
    }

    #[test]
    fn parses() {
        assert_eq!("split:8".parse(), Ok(ChunkMode::Split(8)));
        assert_eq!("coalesce".parse(), Ok(ChunkMode::Coalesce));
        assert!("split:0".parse::<ChunkMode>().is_err());
        assert!("chunky".parse::<ChunkMode>().is_err());
    }
}
