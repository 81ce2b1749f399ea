//! The order the runs go in: warm-up runs first (discarded), then rounds alternating which
//! side goes first — A B, B A, A B, … (A B B A A B B A …) — so a drift of the machine during the
//! session (a cache warming, a neighbour's load rising) falls on both sides alike and the
//! side that runs second in a round is A as often as B.

use super::Side;

/// One run to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slot {
    /// 1-based within warm-up runs, and within measured rounds.
    pub round: u32,
    pub side: Side,
    pub warmup: bool,
}

/// `warmup` rounds (each A then B; discarded), then `rounds` rounds in A B, B A order.
pub fn order(rounds: u32, warmup: u32) -> Vec<Slot> {
    let mut out = Vec::with_capacity(2 * (rounds + warmup) as usize);
    for round in 1..=warmup {
        for side in [Side::A, Side::B] {
            out.push(Slot {
                round,
                side,
                warmup: true,
            });
        }
    }
    for round in 1..=rounds {
        let sides = if round % 2 == 1 {
            [Side::A, Side::B]
        } else {
            [Side::B, Side::A]
        };
        for side in sides {
            out.push(Slot {
                round,
                side,
                warmup: false,
            });
        }
    }
    out
}

/// The order as letters, e.g. `warm-up A B · A B B A A B`.
pub fn describe(slots: &[Slot]) -> String {
    let warm: Vec<&str> = slots
        .iter()
        .filter(|s| s.warmup)
        .map(|s| s.side.letter())
        .collect();
    let measured: Vec<&str> = slots
        .iter()
        .filter(|s| !s.warmup)
        .map(|s| s.side.letter())
        .collect();
    if warm.is_empty() {
        measured.join(" ")
    } else {
        format!("warm-up {} · {}", warm.join(" "), measured.join(" "))
    }
}
