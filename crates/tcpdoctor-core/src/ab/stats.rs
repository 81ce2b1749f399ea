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
//!    the t-interval's width grows as n falls, as it should.
//! 4. The verdict: the interval entirely above 1 or entirely below 1 (B slower or faster by
//!    the figure's own direction), otherwise "no difference the noise can show". Fewer than
//!    [`MIN_PAIRS`] complete rounds: not compared.
//! 5. When there is no verdict and the interval is wider than ±`resolution`, the rounds that
//!    would narrow it to ±`resolution` at the same spread are estimated: n ≈ (t · sd /
//!    ln(1 + resolution))².

use super::{Better, FigureResult, FigureSpec, Outcome, RunRecord, Side, Verdict};

/// Complete rounds (both sides gave the figure) needed for an interval.
pub const MIN_PAIRS: u32 = 3;

/// The standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9).
pub fn normal_quantile(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let p = p.clamp(1e-300, 1.0 - 1e-16);
    let low = 0.02425;
    if p < low {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - low {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        -normal_quantile(1.0 - p)
    }
}

/// Student's t quantile at probability `p` with `df` degrees of freedom: exact for 1 and 2,
/// otherwise the Cornish–Fisher expansion to 1/df⁴ (Abramowitz & Stegun 26.7.5), which errs
/// on the wide side at few degrees of freedom (3 df, p = 0.995: 5.95 for 5.84).
pub fn student_t_quantile(p: f64, df: u32) -> f64 {
    match df {
        0 => f64::INFINITY,
        1 => (std::f64::consts::PI * (p - 0.5)).tan(),
        2 => (2.0 * p - 1.0) / (2.0 * p * (1.0 - p)).sqrt(),
        _ => {
            let z = normal_quantile(p);
            let v = f64::from(df);
            let z2 = z * z;
            let g1 = (z2 + 1.0) * z / 4.0;
            let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
            let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
            let g4 =
                ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0;
            z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v)
        }
    }
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
