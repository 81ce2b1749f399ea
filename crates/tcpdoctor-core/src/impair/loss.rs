//! Packet loss: which packets of one direction the line drops, decided packet by packet, seeded.
//!
//! Rules:
//! 1. Packets are numbered 1, 2, 3… in the order they reach this direction of the line. A packet
//!    whose number is in the drop list (`drop=8,9`) is dropped whatever the model says: the way
//!    to force a precise pattern, e.g. the last segment of a response and its retransmission.
//! 2. [`LossModel::Random`]: each packet is lost with probability `rate`, independently
//!    (Bernoulli). `loss=1%` is this model.
//! 3. [`LossModel::GilbertElliott`]: a two-state chain, Good and Bad, starting in Good. For each
//!    packet the chain first moves (Good→Bad with probability `p`, Bad→Good with `r`), then the
//!    packet is lost with probability `loss_good` (= 1−k, usually 0) in Good or `loss_bad`
//!    (= 1−h, usually 1) in Bad — the order and parameters of Linux netem's `loss gemodel`.
//!    Over many packets the chain is in Bad a fraction `π_B = p / (p + r)` of the time, so the
//!    mean loss rate is `π_G·loss_good + π_B·loss_bad`. With `loss_good = 0, loss_bad = 1` every
//!    Bad packet is lost and losses come in bursts of mean length `1 / r` packets.
//! 4. [`LossModel::Bursty`] (`loss=1%:burst=3`) is that simple Gilbert chain chosen from what a
//!    user knows, a mean loss rate `R` and a mean burst length `B` packets: `r = 1/B`,
//!    `p = R·r / (1 − R)`, so `π_B = R`. A valid pair needs `p ≤ 1`, i.e. `R ≤ B / (B + 1)`.
//! 5. Every packet draws the same number of random values whatever happens to it (one for
//!    `Random`, two for the chains, even for a packet the drop list takes), so one seed gives
//!    one pattern, run after run, and adding a drop list never shifts the random losses.

use super::{Probability, SplitMix64};

/// How packets are lost at random (rules 2–4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum LossModel {
    #[default]
    None,
    Random {
        rate: Probability,
    },
    Bursty {
        rate: Probability,
        burst: u32,
    },
    GilbertElliott {
        p: Probability,
        r: Probability,
        loss_bad: Probability,
        loss_good: Probability,
    },
}

/// A probability as a threshold on a 64-bit draw: lost when `draw < threshold` (2^64 = certain).
#[derive(Clone, Copy, Debug)]
struct Chance(u128);

impl Chance {
    fn new(prob: f64) -> Chance {
        Chance((prob.clamp(0.0, 1.0) * 18_446_744_073_709_551_616.0) as u128)
    }

    fn hits(self, rng: &mut SplitMix64) -> bool {
        u128::from(rng.next_u64()) < self.0
    }
}

#[derive(Clone, Copy, Debug)]
enum Chain {
    None,
    Random(Chance),
    GilbertElliott {
        to_bad: Chance,
        to_good: Chance,
        loss_good: Chance,
        loss_bad: Chance,
        bad: bool,
    },
}

/// One direction's loss decisions.
#[derive(Clone, Debug)]
pub struct Loss {
    chain: Chain,
    rng: SplitMix64,
    drop: Vec<u64>,
    next_drop: usize,
    seen: u64,
}

impl Loss {
    /// `drop` lists 1-based packet numbers (any order, duplicates ignored).
    pub fn new(model: LossModel, drop: &[u64], seed: u64) -> Loss {
        let ge = |p: f64, r: f64, loss_bad: f64, loss_good: f64| Chain::GilbertElliott {
            to_bad: Chance::new(p),
            to_good: Chance::new(r),
            loss_good: Chance::new(loss_good),
            loss_bad: Chance::new(loss_bad),
            bad: false,
        };
        let chain = match model {
            LossModel::None => Chain::None,
            LossModel::Random { rate } => Chain::Random(Chance::new(rate.as_f64())),
            LossModel::Bursty { rate, burst } => {
                let (rate, r) = (rate.as_f64(), 1.0 / f64::from(burst.max(1)));
                let p = if rate >= 1.0 {
                    1.0
                } else {
                    rate * r / (1.0 - rate)
                };
                ge(p, r, 1.0, 0.0)
            }
            LossModel::GilbertElliott {
                p,
                r,
                loss_bad,
                loss_good,
            } => ge(
                p.as_f64(),
                r.as_f64(),
                loss_bad.as_f64(),
                loss_good.as_f64(),
            ),
        };
        let mut drop = drop.to_vec();
        drop.sort_unstable();
        drop.dedup();
        Loss {
            chain,
            rng: SplitMix64::new(seed),
            drop,
            next_drop: 0,
            seen: 0,
        }
    }

    /// Decides the next packet's fate: `true` means drop it.
    pub fn drops_next(&mut self) -> bool {
        self.seen += 1;
        let random = match &mut self.chain {
            Chain::None => false,
            Chain::Random(c) => c.hits(&mut self.rng),
            Chain::GilbertElliott {
                to_bad,
                to_good,
                loss_good,
                loss_bad,
                bad,
            } => {
                let flip = if *bad { to_good } else { to_bad };
                if flip.hits(&mut self.rng) {
                    *bad = !*bad;
                }
                if *bad { loss_bad } else { loss_good }.hits(&mut self.rng)
            }
        };
        // A 0 in a list built by hand can never match: skip past it rather than stall on it.
        while self
            .drop
            .get(self.next_drop)
            .is_some_and(|&n| n < self.seen)
        {
            self.next_drop += 1;
        }
        let listed = self.drop.get(self.next_drop) == Some(&self.seen);
        if listed {
            self.next_drop += 1;
        }
        listed || random
    }

    /// Packets decided so far.
    pub fn seen(&self) -> u64 {
        self.seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pct(s: &str) -> Probability {
        Probability::parse_percent(s).unwrap()
    }

    /// Decisions for `n` packets: (losses, bursts).
    fn run(model: LossModel, drop: &[u64], seed: u64, n: u64) -> (Vec<bool>, u64, u64) {
        let mut l = Loss::new(model, drop, seed);
        let v: Vec<bool> = (0..n).map(|_| l.drops_next()).collect();
        let lost = v.iter().filter(|&&d| d).count() as u64;
        let bursts = v.windows(2).filter(|w| w[1] && !w[0]).count() as u64 + u64::from(v[0]);
        (v, lost, bursts)
    }

    #[test]
    fn random_loss_has_the_asked_rate() {
        let (_, lost, _) = run(LossModel::Random { rate: pct("2%") }, &[], 7, 1_000_000);
        assert!((19_500..=20_500).contains(&lost), "{lost}");
    }

    #[test]
    fn bursty_loss_has_the_asked_rate_and_burst_length() {
        let model = LossModel::Bursty {
            rate: pct("1%"),
            burst: 4,
        };
        let (_, lost, bursts) = run(model, &[], 7, 1_000_000);
        assert!(
            (9_000..=11_000).contains(&lost),
            "mean loss rate 1%: {lost}"
        );
        let mean_burst = lost as f64 / bursts as f64;
        assert!(
            (3.7..=4.3).contains(&mean_burst),
            "mean burst 4: {mean_burst}"
        );
    }

    #[test]
    fn gilbert_elliott_follows_the_stationary_rate() {
        // p = 1%, r = 20%: π_B = 1/21; lost with 50% in Bad and 1% in Good:
        // 0.5/21 + 0.01·20/21 = 3.333…%.
        let model = LossModel::GilbertElliott {
            p: pct("1%"),
            r: pct("20%"),
            loss_bad: pct("50%"),
            loss_good: pct("1%"),
        };
        let (_, lost, _) = run(model, &[], 3, 1_000_000);
        assert!((31_500..=35_200).contains(&lost), "{lost}");
    }

    #[test]
    fn same_seed_same_decisions_and_the_list_does_not_shift_them() {
        let model = LossModel::Bursty {
            rate: pct("5%"),
            burst: 3,
        };
        let (a, ..) = run(model, &[], 11, 10_000);
        assert_eq!(run(model, &[], 11, 10_000).0, a, "replays");
        assert_ne!(
            run(model, &[], 12, 10_000).0,
            a,
            "another seed, another pattern"
        );
        let (b, ..) = run(model, &[9_000, 3, 3], 11, 10_000);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            let listed = i + 1 == 3 || i + 1 == 9_000;
            assert_eq!(*y, *x || listed, "packet {}", i + 1);
        }
    }

    #[test]
    fn the_drop_list_alone_takes_exactly_those_packets() {
        let (v, lost, _) = run(LossModel::None, &[9, 0, 8, 20], 0, 30);
        let taken: Vec<usize> = (0..30).filter(|&i| v[i]).map(|i| i + 1).collect();
        assert_eq!((taken, lost), (vec![8, 9, 20], 3));
        assert!(run(
            LossModel::Random {
                rate: Probability::ONE
            },
            &[],
            0,
            1000
        )
        .0
        .iter()
        .all(|&d| d));
    }
}
