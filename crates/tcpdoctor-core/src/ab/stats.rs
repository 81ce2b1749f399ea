//! The ratio B/A of one figure, its confidence interval, and the verdict.
//!
//! The method (said in every report):
//! 1. Rounds are pairs: round *i* ran A and B back to back (in alternating order,
//!    [`super::order`]), so whatever the machine did during that round fell on both.
//! 2. Each complete round gives d*ᵢ* = ln(B*ᵢ* / A*ᵢ*). Logarithms because a change in speed is
//!    a factor, and so that the interval of B/A is the reciprocal of A/B's: the comparison does
//!    not depend on which side is called A.
//! 3. The interval is Student's t on the mean of the dᵢ with n − 1 degrees of freedom (a paired
//!    t-interval), exponentiated: ratio = exp(mean), CI = exp(mean ± t · sd / √n). A bootstrap
//!    over rounds was not used: with the 5–20 rounds a benchmark affords, percentile
//!    bootstrap intervals are too narrow (they cannot be wider than the rounds' own range),
//!    so an A/A comparison would report differences more often than its confidence says;
//!    the t-interval's width grows as n falls, as it should. Its quantile is exact (the
//!    integer-degrees series of the t distribution, inverted by bisection).
//! 4. The verdict: the interval entirely above 1 or entirely below 1 (B slower or faster by
//!    the figure's own direction), otherwise "no difference the noise can show". Fewer than
//!    [`MIN_PAIRS`] complete rounds: not compared.
//! 5. When there is no verdict and the interval is wider than ±`resolution`, the rounds that
//!    would narrow it to ±`resolution` at the same spread are estimated: n ≈ (t · sd /
//!    ln(1 + resolution))².

use super::{Better, FigureResult, FigureSpec, Outcome, RunRecord, Side, Verdict};

/// Complete rounds (both sides gave the figure) needed for an interval.
pub const MIN_PAIRS: u32 = 3;

/// P(|T| < t) for Student's t with `df` degrees of freedom: the exact finite series for
/// integer degrees of freedom (Abramowitz & Stegun 26.7.3–4), with θ = atan(t / √df).
fn t_central(t: f64, df: u32) -> f64 {
    let v = f64::from(df);
    let theta = (t / v.sqrt()).atan();
    let (s, c) = theta.sin_cos();
    let c2 = c * c;
    if df % 2 == 1 {
        // (2/π)[θ + sinθ (cosθ + (2/3)cos³θ + … + (2·4…(ν−3))/(1·3…(ν−2)) cos^(ν−2)θ)]
        let mut sum = 0.0;
        if df > 1 {
            let mut term = c;
            sum = term;
            for j in 1..=(df - 3) / 2 {
                term *= c2 * f64::from(2 * j) / f64::from(2 * j + 1);
                sum += term;
            }
        }
        2.0 / std::f64::consts::PI * (theta + s * sum)
    } else {
        // sinθ [1 + (1/2)cos²θ + (1·3)/(2·4)cos⁴θ + … + (1·3…(ν−3))/(2·4…(ν−2)) cos^(ν−2)θ]
        let mut term = 1.0;
        let mut sum = 1.0;
        let mut k = 2;
        while k < df {
            term *= c2 * f64::from(k - 1) / f64::from(k);
            sum += term;
            k += 2;
        }
        s * sum
    }
}

/// Student's t quantile at probability `p` (above 0.5) with `df` degrees of freedom: the
/// exact distribution inverted by bisection (to 1e-9 relative), so small rounds get their
/// true width.
pub fn student_t_quantile(p: f64, df: u32) -> f64 {
    if df == 0 {
        return f64::INFINITY;
    }
    let want = (2.0 * p - 1.0).clamp(0.0, 1.0 - 1e-15);
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while t_central(hi, df) < want && hi < 1e12 {
        hi *= 2.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if t_central(mid, df) < want {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo <= 1e-9 * hi {
            break;
        }
    }
    hi
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// The measured value of `name` in a run that ended well, when positive (a ratio needs it).
fn value(r: &RunRecord, name: &str) -> Option<f64> {
    if r.warmup || r.outcome != Outcome::Ok {
        return None;
    }
    r.figures
        .get(name)
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// Compares `spec` over `runs` (any order; warm-up runs and runs that hung or failed are
/// left out, and a round counts only when both its runs gave the figure).
pub fn compare_figure(
    spec: &FigureSpec,
    runs: &[RunRecord],
    confidence: f64,
    resolution: f64,
) -> FigureResult {
    let side_values = |side: Side| -> Vec<f64> {
        runs.iter()
            .filter(|r| r.side == side)
            .filter_map(|r| value(r, &spec.name))
            .collect()
    };
    let mut out = FigureResult {
        name: spec.name.clone(),
        better: spec.better,
        unit: spec.unit.clone(),
        a: median(side_values(Side::A)),
        b: median(side_values(Side::B)),
        ratio: None,
        ci: None,
        verdict: Verdict::NotCompared,
        pairs: 0,
        rounds_needed: None,
        notes: Vec::new(),
    };
    let mut rounds: Vec<u32> = runs.iter().filter(|r| !r.warmup).map(|r| r.round).collect();
    rounds.sort_unstable();
    rounds.dedup();
    let in_round = |round: u32, side: Side| {
        runs.iter()
            .filter(|r| r.round == round && r.side == side && !r.warmup)
            .find_map(|r| value(r, &spec.name))
    };
    let d: Vec<f64> = rounds
        .iter()
        .filter_map(|&i| Some((in_round(i, Side::B)? / in_round(i, Side::A)?).ln()))
        .collect();
    out.pairs = d.len() as u32;
    if out.pairs < MIN_PAIRS {
        out.notes.push(format!(
            "{} complete round(s) (both sides gave {}): an interval needs {MIN_PAIRS}",
            out.pairs, spec.name
        ));
        return out;
    }
    let n = d.len() as f64;
    let mean = d.iter().sum::<f64>() / n;
    let sd = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let t = student_t_quantile(0.5 + confidence / 2.0, out.pairs - 1);
    let half = t * sd / n.sqrt();
    let (lo, hi) = ((mean - half).exp(), (mean + half).exp());
    out.ratio = Some(mean.exp());
    out.ci = Some([lo, hi]);
    let b_higher = lo > 1.0;
    let b_lower = hi < 1.0;
    out.verdict = match (b_higher, b_lower, spec.better) {
        (true, _, Better::Lower) | (_, true, Better::Higher) => Verdict::Slower,
        (true, _, Better::Higher) | (_, true, Better::Lower) => Verdict::Faster,
        _ => Verdict::NoDifference,
    };
    let want = (1.0 + resolution).ln();
    if out.verdict == Verdict::NoDifference && half > want && want > 0.0 {
        let needed = ((t * sd / want).powi(2)).ceil().max(n + 1.0);
        out.rounds_needed = Some(needed.min(f64::from(u32::MAX)) as u32);
        out.notes.push(format!(
            "the rounds spread by ±{:.1} % (one standard deviation of B/A): with {} rounds \
             only a difference beyond ±{:.1} % can show; about {} rounds would show ±{:.0} %",
            100.0 * (sd.exp() - 1.0),
            out.pairs,
            100.0 * (half.exp() - 1.0),
            needed,
            100.0 * resolution
        ));
    }
    out
}
