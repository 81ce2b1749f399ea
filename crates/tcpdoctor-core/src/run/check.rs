//! `--check`: a threshold on one figure, in every scenario or in one (`p99<5ms`,
//! `stalls==0@proxy-nagle`, `throughput>=1000`), evaluated into a pass or a named failure.

use serde::Serialize;

use super::ScenarioResult;
use crate::numfmt::num;
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
    Stalls,
    Errors,
    ServerCpu,
    Chunks,
}

const METRICS: &str = "p50, p99, mean, max (durations), throughput (req/s), stalls (exchanges \
                       ≥ 30 ms), errors, cpu (server CPU per request, a duration), chunks \
                       (server→client chunks per exchange)";

impl Metric {
    fn parse(s: &str) -> Option<Metric> {
        Some(match s {
            "p50" | "median" => Metric::P50,
            "p99" => Metric::P99,
            "mean" => Metric::Mean,
            "max" => Metric::Max,
            "throughput" | "rps" => Metric::Throughput,
            "stalls" => Metric::Stalls,
            "errors" => Metric::Errors,
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

    /// The value in the scenario, in the unit checks compare (ms for durations).
    fn value(self, s: &ScenarioResult) -> Option<f64> {
        let f = &s.figures;
        Some(match self {
            Metric::P50 => f.p50_ms,
            Metric::P99 => f.p99_ms,
            Metric::Mean => f.mean_ms,
            Metric::Max => f.max_ms,
            Metric::Throughput => f.throughput_rps,
            Metric::Stalls => f.stalls_30ms as f64,
            Metric::Errors => f.errors as f64,
            Metric::ServerCpu => f.server_cpu_per_request_us? / 1000.0,
            Metric::Chunks => f.s2c_chunks_per_exchange?,
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
    pub passed: bool,
    /// What a person reads: `p99 = 41.2 ms, limit < 5 ms`.
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
                message: format!("no scenario named `{name}` ran"),
            }];
        }
        chosen
            .into_iter()
            .map(|s| match self.metric.value(s) {
                Some(v) => {
                    let passed = self.op.holds(v, self.limit);
                    CheckResult {
                        check: self.text.clone(),
                        scenario: s.name.clone(),
                        actual: Some(round3(v)),
                        passed,
                        message: format!(
                            "{} = {}, limit {}",
                            self.name(),
                            self.show(v),
                            self.show_limit()
                        ),
                    }
                }
                None => CheckResult {
                    check: self.text.clone(),
                    scenario: s.name.clone(),
                    actual: None,
                    passed: false,
                    message: format!("{} was not measured in this scenario", self.name()),
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
            Metric::Stalls => "exchanges ≥ 30 ms",
            Metric::Errors => "errors",
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
