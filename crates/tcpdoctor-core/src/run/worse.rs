//! `--fail-on-worse[=FIGURES]`: the comparison with a baseline as a CI gate.
//!
//! Rules:
//! 1. The gate reads the before/after tables ([`Comparison`]) of each scenario against the
//!    same scenario of the baseline; it computes nothing of its own, so the table a reviewer
//!    reads and the gate agree row for row.
//! 2. A figure fails the run when its row is marked WORSE: beyond the noise of the two
//!    measurements for timings, beyond the counts' own chance for counts (`noise.rs`). A
//!    change within the noise is "no change" and passes: two runs of the same build pass.
//! 3. Without a list, every row of every table is gated ([`ALL`]). With a list, only those
//!    figures. Either way each gated figure must have been compared: a row missing on one
//!    side of a table (`stalls` without a capture, `cpu` without a server started by `run`),
//!    a named figure that no table has at all, or a scenario of this run that the baseline
//!    does not have, fails the run as "not compared" — a gate never passes what it did not
//!    measure.

use serde::Serialize;

use super::Comparison;

/// The list that means every figure of the table.
pub const ALL: &str = "all";

/// The figures `--fail-on-worse` can name; a step's own p50 is `STEP.p50`.
pub const FIGURES: [&str; 9] = [
    "throughput",
    "mean",
    "p50",
    "p99",
    "stalls",
    "chunks",
    "cpu",
    "errors",
    "timeouts",
];

/// Checks one name of `--fail-on-worse`'s list.
pub fn parse_figure(name: &str) -> Result<String, String> {
    let name = name.trim();
    if FIGURES.contains(&name) || name == ALL {
        return Ok(name.to_string());
    }
    if let Some(step) = name.strip_suffix(".p50") {
        if !step.is_empty() {
            return Ok(name.to_string());
        }
    }
    Err(format!(
        "unknown figure `{name}`: one of {}, or STEP.p50 (a script step's p50); none means \
         every figure",
        FIGURES.join(", ")
    ))
}

/// A figure marked WORSE in a scenario's comparison with the baseline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorseFigure {
    pub scenario: String,
    /// As `--fail-on-worse` names it (`p50`, `stalls`).
    pub figure: String,
    /// As the table shows it (`p50`, `server CPU per request`).
    pub metric: String,
    pub unit: String,
    pub before: f64,
    pub after: f64,
    /// after / before (absent when before is 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
}

impl WorseFigure {
    /// `p50 in direct: 0.21 → 96.8 ms (461×), WORSE than the baseline beyond the noise`.
    pub fn describe(&self) -> String {
        let unit = if self.unit.is_empty() {
            String::new()
        } else {
            format!(" {}", self.unit)
        };
        let ratio = self
            .ratio
            .map(|r| format!(" ({}×)", crate::numfmt::num(r)))
            .unwrap_or_default();
        format!(
            "{} in {}: {} → {}{unit}{ratio}, WORSE than the baseline beyond the noise \
             (--fail-on-worse)",
            self.metric,
            self.scenario,
            crate::numfmt::num(self.before),
            crate::numfmt::num(self.after),
        )
    }
}

/// What the gate found.
#[derive(Debug, Default)]
pub struct Verdict {
    pub worse: Vec<WorseFigure>,
    /// Every reason the gate fails: the WORSE figures, and named figures not compared.
    pub reasons: Vec<String>,
}

/// Rules 2 and 3 over the baseline tables in `comparisons` (those with a scenario), for a run
/// of the scenarios named `ran`.
pub fn evaluate(comparisons: &[Comparison], figures: &[String], ran: &[String]) -> Verdict {
    let all = figures.is_empty() || figures.iter().any(|f| f == ALL);
    let tables: Vec<&Comparison> = comparisons
        .iter()
        .filter(|c| !c.scenario.is_empty())
        .collect();
    let mut v = Verdict::default();
    for c in &tables {
        for r in &c.rows {
            if !(all || figures.contains(&r.figure)) {
                continue;
            }
            match (r.before, r.after, r.better) {
                (Some(before), Some(after), Some(false)) => {
                    let w = WorseFigure {
                        scenario: c.scenario.clone(),
                        figure: r.figure.clone(),
                        metric: r.metric.clone(),
                        unit: r.unit.clone(),
                        before,
                        after,
                        ratio: r.ratio,
                    };
                    v.reasons.push(w.describe());
                    v.worse.push(w);
                }
                (Some(_), Some(_), _) => {}
                (before, _, _) => v.reasons.push(format!(
                    "{} in {}: not compared, not measured {} (--fail-on-worse needs it on both \
                     sides; name the figures to gate with --fail-on-worse=FIGURES)",
                    r.metric,
                    c.scenario,
                    if before.is_none() {
                        "in the baseline"
                    } else {
                        "in this run"
                    },
                )),
            }
        }
    }
    if !tables.is_empty() {
        for s in ran {
            if !tables.iter().any(|c| &c.scenario == s) {
                v.reasons.push(format!(
                    "{s}: not in the baseline, so --fail-on-worse compared nothing there (save \
                     a baseline of these scenarios with --save)"
                ));
            }
        }
    }
    if tables.is_empty() {
        v.reasons.push(
            "--fail-on-worse: no scenario was compared with the baseline, so nothing could \
             pass"
                .to_string(),
        );
    } else if !all {
        for f in figures {
            if !tables.iter().any(|c| c.rows.iter().any(|r| &r.figure == f)) {
                v.reasons.push(format!(
                    "{f}: not compared in any scenario (not measured on either side), so \
                     --fail-on-worse {f} cannot pass"
                ));
            }
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Figures;

    fn figures(p50: f64, stalls: Option<u64>) -> Figures {
        Figures {
            exchanges: 200,
            throughput_rps: 1000.0 / p50,
            mean_ms: p50,
            p50_ms: p50,
            p99_ms: p50 * 2.0,
            max_ms: p50 * 3.0,
            stalls,
            ..Figures::default()
        }
    }

    fn table(before: &Figures, after: &Figures) -> Comparison {
        let mut c = Comparison::of("direct: b → now", ("b", before), ("now", after));
        c.scenario = "direct".into();
        c
    }

    #[test]
    fn a_worse_figure_fails_and_is_named() {
        let t = table(&figures(0.2, Some(0)), &figures(92.0, Some(200)));
        let ran = ["direct".to_string()];
        let v = evaluate(std::slice::from_ref(&t), &[ALL.to_string()], &ran);
        let names: Vec<&str> = v.worse.iter().map(|w| w.figure.as_str()).collect();
        assert!(
            names.contains(&"p50") && names.contains(&"stalls"),
            "{names:?}"
        );
        assert!(v
            .reasons
            .iter()
            .any(|r| r.starts_with("p50 in direct: 0.2 → 92 ms (460×)")));
        // Only the figures asked for.
        let v = evaluate(&[t], &["errors".to_string()], &ran);
        assert!(
            v.worse.is_empty() && v.reasons.is_empty(),
            "{:?}",
            v.reasons
        );
    }

    #[test]
    fn the_same_figures_pass() {
        let t = table(&figures(1.0, Some(3)), &figures(1.0, Some(4)));
        let v = evaluate(&[t], &[ALL.to_string()], &["direct".to_string()]);
        assert!(v.reasons.is_empty(), "{:?}", v.reasons);
    }

    /// A named figure missing on a side, or in every table, or no table at all: not passed.
    #[test]
    fn what_was_not_compared_does_not_pass() {
        let t = table(&figures(1.0, None), &figures(1.0, Some(0)));
        let ran = ["direct".to_string()];
        let v = evaluate(std::slice::from_ref(&t), &["stalls".to_string()], &ran);
        assert_eq!(v.reasons.len(), 1, "{:?}", v.reasons);
        assert!(v.reasons[0].contains("not measured in the baseline"));
        // `all` does not pass over it either.
        let v = evaluate(std::slice::from_ref(&t), &[ALL.to_string()], &ran);
        assert_eq!(v.reasons.len(), 1, "{:?}", v.reasons);
        let v = evaluate(&[t], &["cpu".to_string()], &ran);
        assert!(v.reasons[0].starts_with("cpu: not compared in any scenario"));
        let v = evaluate(&[], &[ALL.to_string()], &ran);
        assert!(v.reasons[0].contains("no scenario was compared"));
        // A scenario the baseline lacks was not compared.
        let t = table(&figures(1.0, Some(0)), &figures(1.0, Some(0)));
        let both = ["direct".to_string(), "proxy-nagle".to_string()];
        let v = evaluate(std::slice::from_ref(&t), &[ALL.to_string()], &both);
        assert_eq!(v.reasons.len(), 1, "{:?}", v.reasons);
        assert!(v.reasons[0].starts_with("proxy-nagle: not in the baseline"));
    }

    #[test]
    fn figure_names() {
        assert_eq!(parse_figure(" p99"), Ok("p99".to_string()));
        assert_eq!(parse_figure("login.p50"), Ok("login.p50".to_string()));
        assert!(parse_figure("p95")
            .unwrap_err()
            .contains("unknown figure `p95`"));
        assert!(parse_figure(".p50").is_err());
    }
}
