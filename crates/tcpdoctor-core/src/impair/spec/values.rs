//! One option's value as text, both ways: parsing what a user wrote, printing the canonical form
//! (the largest unit that divides exactly, so printing then parsing gives the same value).

use std::time::Duration;

use super::parse::fail;
use super::{SpecError, MAX_DELAY};
use crate::impair::{LossModel, Probability};
use crate::units::parse_duration;

pub(super) fn duration(tok: &str, value: &str) -> Result<Duration, SpecError> {
    let d = parse_duration(value).map_err(|e| SpecError {
        part: tok.into(),
        reason: e.to_string(),
    })?;
    if d > MAX_DELAY {
        return fail(tok, "at most 10s");
    }
    Ok(d)
}

fn percent(tok: &str, example: &str, value: &str) -> Result<Probability, SpecError> {
    if !value.ends_with('%') {
        return fail(tok, format!("give a percentage, e.g. {example}"));
    }
    Probability::parse_percent(value).map_err(|reason| SpecError {
        part: tok.into(),
        reason,
    })
}

/// `R%`, `R%:burst=B`, `gemodel:P%:R%[:BAD%[:GOOD%]]`.
pub(super) fn loss(tok: &str, v: &str) -> Result<LossModel, SpecError> {
    if let Some(ge) = v.strip_prefix("gemodel:") {
        let p: Vec<&str> = ge.split(':').collect();
        if !(2..=4).contains(&p.len()) {
            return fail(
                tok,
                "write loss=gemodel:P%:R%[:LOSS_IN_BAD%[:LOSS_IN_GOOD%]], e.g. loss=gemodel:1%:25%",
            );
        }
        let get = |i: usize, default: Probability| {
            p.get(i)
                .map_or(Ok(default), |x| percent(tok, "loss=gemodel:1%:25%", x))
        };
        return Ok(LossModel::GilbertElliott {
            p: get(0, Probability::ZERO)?,
            r: get(1, Probability::ZERO)?,
            loss_bad: get(2, Probability::ONE)?,
            loss_good: get(3, Probability::ZERO)?,
        });
    }
    let (rate, burst) = match v.split_once(':') {
        Some((r, b)) => (r, Some(b)),
        None => (v, None),
    };
    let rate = percent(tok, "loss=1%", rate)?;
    let Some(burst) = burst else {
        return Ok(LossModel::Random { rate });
    };
    let Some(burst) = burst
        .strip_prefix("burst=")
        .and_then(|b| b.parse::<u32>().ok())
        .filter(|b| (1..=10_000).contains(b))
    else {
        return fail(
            tok,
            "write the mean burst length in packets, 1 to 10000, e.g. loss=1%:burst=3",
        );
    };
    // p = R/(B(1-R)) must stay a probability: R ≤ B/(B+1).
    if u64::from(rate.millionths()) * (u64::from(burst) + 1) > 1_000_000 * u64::from(burst) {
        return fail(
            tok,
            format!(
                "bursts of {burst} packets allow at most {} loss",
                Probability::from_millionths(
                    (1_000_000 * u64::from(burst) / (u64::from(burst) + 1)) as u32
                )
            ),
        );
    }
    Ok(LossModel::Bursty { rate, burst })
}

/// `n` in the first of `units` (value, suffix) that divides it exactly.
fn exact(n: u64, units: &[(u64, &str)], smallest: &str) -> String {
    match units.iter().find(|(u, _)| n != 0 && n.is_multiple_of(*u)) {
        Some((u, suffix)) => format!("{}{suffix}", n / u),
        None => format!("{n}{smallest}"),
    }
}

/// `15ms`, `1500us`, `2s`, `0ms`.
pub(super) fn fmt_duration_exact(d: Duration) -> String {
    let ns = d.as_nanos().min(u128::from(u64::MAX)) as u64;
    match ns {
        0 => "0ms".into(),
        _ => exact(
            ns,
            &[(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")],
            "ns",
        ),
    }
}

/// `10mbit`, `1500kbit`, `1gbit`.
pub(super) fn fmt_rate(bps: u64) -> String {
    exact(
        bps,
        &[
            (1_000_000_000, "gbit"),
            (1_000_000, "mbit"),
            (1_000, "kbit"),
        ],
        "bps",
    )
}

/// Decimal before binary: `125KB`, `64KiB`, `1500`.
pub(super) fn fmt_size(bytes: u64) -> String {
    exact(
        bytes,
        &[
            (1_000_000, "MB"),
            (1 << 20, "MiB"),
            (1_000, "KB"),
            (1 << 10, "KiB"),
        ],
        "",
    )
}

pub(super) fn fmt_loss(m: &LossModel) -> Option<String> {
    match *m {
        LossModel::None => None,
        LossModel::Random { rate } => Some(rate.to_string()),
        LossModel::Bursty { rate, burst } => Some(format!("{rate}:burst={burst}")),
        LossModel::GilbertElliott {
            p,
            r,
            loss_bad,
            loss_good,
        } => Some(format!("gemodel:{p}:{r}:{loss_bad}:{loss_good}")),
    }
}
