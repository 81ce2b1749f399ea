//! `--check`: a threshold on one figure, in every scenario or in one (`p99<5ms`,
//! `stalls==0@proxy-nagle`, `throughput>=1000`), evaluated into a pass or a named failure.
//!
//! A check never passes on a figure nobody measured:
//! 1. A scenario that measured no exchange (a server that never answers, closes at once, or
//!    fails every exchange): every check there *cannot be evaluated*, and fails.
//! 2. `stalls` is what the capture's analysis attributes to TCP timers; a scenario without an
//!    analysed capture (a Unix socket directly, no permission to capture) cannot evaluate it.
//! 3. `cpu` needs the server's CPU (`--server`), `chunks` a hop: the same.
//! 4. A check naming a scenario that did not run fails.

use serde::Serialize;

use super::ScenarioResult;
use crate::numfmt::{count, num};
use crate::stats::round3;
use crate::units::parse_duration;

/// A figure a check can name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    P50,
    P99,
    Mean,
    Max,
    Throughput,
    /// Turns a TCP timer held, from the capture's findings.
    Stalls,
    /// Exchanges that took 30 ms or more, by the driver's clock.
    Over30ms,
    /// Errors and timeouts together.
    Errors,
    Timeouts,
    ServerCpu,
    Chunks,
}

const METRICS: &str = "p50, p99, mean, max (durations), throughput (req/s), stalls (requests \
                       and responses a TCP timer held, from the capture), over30ms (exchanges \
                       ≥ 30 ms by the clock), errors (errors and timeouts), timeouts, cpu \
                       (server CPU per request, a duration), chunks (server→client chunks per \
                       exchange)";

impl Metric {
    fn parse(s: &str) -> Option<Metric> {
        Some(match s {
            "p50" | "median" => Metric::P50,
            "p99" => Metric::P99,
            "mean" => Metric::Mean,
            "max" => Metric::Max,
            "throughput" | "rps" => Metric::Throughput,
            "stalls" => Metric::Stalls,
            "over30ms" | "stalls_30ms" => Metric::Over30ms,
            "errors" => Metric::Errors,
            "timeouts" => Metric::Timeouts,
            "cpu" => Metric::ServerCpu,
            "chunks" => Metric::Chunks,
            _ => return None,
        })
    }

    fn is_duration(self) -> bool {
        matches!(
            self,
            Metric::P50 | Metric::P99 | Metric::Mean | Metric::Max | Metric::ServerCpu
        )
    }

    /// The value in the scenario, in the unit checks compare (ms for durations), or why it
    /// cannot be evaluated there.
    fn value(self, s: &ScenarioResult) -> Result<f64, String> {
        let f = &s.figures;
        if f.exchanges == 0 {
            return Err(format!(
                "no exchange was measured in this scenario ({}, {})",
                count(f.errors, "error"),
                count(f.timeouts, "timeout")
            ));
        }
        Ok(match self {
            Metric::P50 => f.p50_ms,
            Metric::P99 => f.p99_ms,
            Metric::Mean => f.mean_ms,
            Metric::Max => f.max_ms,
            Metric::Throughput => f.throughput_rps,
            Metric::Stalls => match f.stalls {
                Some(n) => n as f64,
                None => {
                    return Err(format!(
                        "stalls come from the capture's analysis, and this scenario has none \
                         ({})",
                        s.capture_note
                            .as_deref()
                            .unwrap_or("its capture could not be analysed")
                    ))
                }
            },
            Metric::Over30ms => f.stalls_30ms as f64,
            Metric::Errors => (f.errors + f.timeouts) as f64,
            Metric::Timeouts => f.timeouts as f64,
            Metric::ServerCpu => match f.server_cpu_per_request_us {
                Some(us) => us / 1000.0,
                None => {
                    return Err(
                        "the server's CPU was not measured (run starts no server without \
                         --server)"
                            .into(),
                    )
                }
            },
            Metric::Chunks => match f.s2c_chunks_per_exchange {
                Some(c) => c,
                None => {
                    return Err(
                        "chunks are counted by a hop, and this scenario has none (use proxy, \
                         proxy-nagle or wan:D)"
                            .into(),
                    )
                }
            },
        })
    }
}

/// A comparison operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
}

impl Op {
    fn holds(self, actual: f64, limit: f64) -> bool {
        match self {
            Op::Lt => actual < limit,
            Op::Le => actual <= limit,
            Op::Gt => actual > limit,
            Op::Ge => actual >= limit,
            Op::Eq => actual == limit,
        }
    }
}

/// A parsed `--check`.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub text: String,
    pub metric: Metric,
    pub op: Op,
    /// In ms for durations, else as written.
    pub limit: f64,
    /// Only this scenario, when given (`…@proxy`).
    pub scenario: Option<String>,
}

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckStatus {
    Passed,
    Failed,
    /// The figure was not measured in the scenario (or over nothing): a failure too.
    CannotEvaluate,
}

/// One check in one scenario.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckResult {
    pub check: String,
    pub scenario: String,
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "crate::numfmt::whole_as_int"
    )]
    pub actual: Option<f64>,
    /// True only for [`CheckStatus::Passed`].
    pub passed: bool,
    pub status: CheckStatus,
    /// What a person reads: `p99 = 41.2 ms, limit < 5 ms`, or `cannot evaluate: …`.
    pub message: String,
}

impl Check {
    pub fn parse(text: &str) -> Result<Check, String> {
        let t: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let (expr, scenario) = match t.split_once('@') {
            Some((e, s)) if !s.is_empty() => (e.to_string(), Some(s.to_string())),
            Some(_) => return Err(format!("check `{text}`: no scenario after `@`")),
            None => (t.clone(), None),
        };
        let ops = [
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("==", Op::Eq),
            ("<", Op::Lt),
            (">", Op::Gt),
            ("=", Op::Eq),
        ];
        let Some((at, sym, op)) = ops
            .iter()
            .filter_map(|(sym, op)| expr.find(sym).map(|i| (i, *sym, *op)))
            .min_by_key(|(i, sym, _)| (*i, std::cmp::Reverse(sym.len())))
        else {
            return Err(format!(
                "check `{text}`: no comparison (write e.g. `p99<5ms`, `stalls==0`, \
                 `throughput>=1000@direct`)"
            ));
        };
        let (name, value) = (&expr[..at], &expr[at + sym.len()..]);
        let metric = Metric::parse(name).ok_or_else(|| {
            format!("check `{text}`: unknown figure `{name}` (expected one of: {METRICS})")
        })?;
        let limit = if metric.is_duration() {
            parse_duration(value)
                .map_err(|e| format!("check `{text}`: {e}"))?
                .as_secs_f64()
                * 1000.0
        } else {
            let v = value.trim_end_matches("/s").trim_end_matches("rps");
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| format!("check `{text}`: `{value}` is not a number"))?
        };
        Ok(Check {
            text: text.trim().to_string(),
            metric,
            op,
            limit,
            scenario,
        })
    }

    /// One result per scenario the check applies to; a check naming a scenario that did not
    /// run fails, so a typo cannot pass silently.
    pub fn evaluate(&self, scenarios: &[ScenarioResult]) -> Vec<CheckResult> {
        let chosen: Vec<&ScenarioResult> = scenarios
            .iter()
            .filter(|s| self.scenario.as_ref().is_none_or(|n| *n == s.name))
            .collect();
        if chosen.is_empty() {
            let name = self.scenario.clone().unwrap_or_default();
            return vec![CheckResult {
                check: self.text.clone(),
                scenario: name.clone(),
                actual: None,
                passed: false,
                status: CheckStatus::CannotEvaluate,
                message: format!("cannot evaluate: no scenario named `{name}` ran"),
            }];
        }
        chosen
            .into_iter()
            .map(|s| match self.metric.value(s) {
                Ok(v) => {
                    let passed = self.op.holds(v, self.limit);
                    CheckResult {
                        check: self.text.clone(),
                        scenario: s.name.clone(),
                        actual: Some(round3(v)),
                        passed,
                        status: if passed {
                            CheckStatus::Passed
                        } else {
                            CheckStatus::Failed
                        },
                        message: format!(
                            "{} = {}, limit {}",
                            self.name(),
                            self.show(v),
                            self.show_limit()
                        ),
                    }
                }
                Err(why) => CheckResult {
                    check: self.text.clone(),
                    scenario: s.name.clone(),
                    actual: None,
                    passed: false,
                    status: CheckStatus::CannotEvaluate,
                    message: format!("cannot evaluate {}: {why}", self.name()),
                },
            })
            .collect()
    }

    fn name(&self) -> &'static str {
        match self.metric {
            Metric::P50 => "p50",
            Metric::P99 => "p99",
            Metric::Mean => "mean",
            Metric::Max => "max",
            Metric::Throughput => "throughput",
            Metric::Stalls => "stalls (turns a TCP timer held)",
            Metric::Over30ms => "exchanges ≥ 30 ms",
            Metric::Errors => "errors + timeouts",
            Metric::Timeouts => "timeouts",
            Metric::ServerCpu => "server CPU per request",
            Metric::Chunks => "server→client chunks per exchange",
        }
    }

    fn show(&self, v: f64) -> String {
        match self.metric {
            m if m.is_duration() => format!("{} ms", num(v)),
            Metric::Throughput => format!("{} req/s", num(v)),
            _ => num(v),
        }
    }

    fn show_limit(&self) -> String {
        let op = match self.op {
            Op::Lt => "<",
            Op::Le => "≤",
            Op::Gt => ">",
            Op::Ge => "≥",
            Op::Eq => "=",
        };
        format!("{op} {}", self.show(self.limit))
    }
}
