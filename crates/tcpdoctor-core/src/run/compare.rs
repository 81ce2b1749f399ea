//! Before/after tables: the figures of two scenarios (or of a baseline and today) side by side,
//! with the ratio a reviewer looks at first.

use serde::Serialize;

use super::Figures;

/// One metric, before and after.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ComparisonRow {
    pub metric: String,
    /// The unit the values are in (`ms`, `req/s`, `µs`, ``).
    pub unit: String,
    /// A count (exchanges, errors) is written as a JSON integer.
    #[serde(serialize_with = "crate::numfmt::whole_as_int")]
    pub before: Option<f64>,
    #[serde(serialize_with = "crate::numfmt::whole_as_int")]
    pub after: Option<f64>,
    /// after / before, when both exist and before is not 0.
    pub ratio: Option<f64>,
    /// Whether the change is an improvement (None when unchanged or not comparable).
    pub better: Option<bool>,
}

/// A before/after table.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub title: String,
    pub before: String,
    pub after: String,
    pub rows: Vec<ComparisonRow>,
}

impl Comparison {
    /// Compares `after` with `before`, metric by metric; steps are matched by name.
    pub fn of(title: &str, before: (&str, &Figures), after: (&str, &Figures)) -> Comparison {
        let (b, a) = (before.1, after.1);
        let mut rows = vec![
            row(
                "throughput",
                "req/s",
                Some(b.throughput_rps),
                Some(a.throughput_rps),
                true,
            ),
            row("mean", "ms", Some(b.mean_ms), Some(a.mean_ms), false),
            row("p50", "ms", Some(b.p50_ms), Some(a.p50_ms), false),
            row("p99", "ms", Some(b.p99_ms), Some(a.p99_ms), false),
            row(
                "exchanges ≥ 30 ms",
                "",
                Some(b.stalls_30ms as f64),
                Some(a.stalls_30ms as f64),
                false,
            ),
        ];
        for step in &a.steps {
            if let Some(bs) = b.steps.iter().find(|s| s.name == step.name) {
                if a.steps.len() > 1 {
                    let name = format!("{} p50", step.name);
                    rows.push(row(&name, "ms", Some(bs.p50_ms), Some(step.p50_ms), false));
                }
            }
        }
        if b.s2c_chunks_per_exchange.is_some() || a.s2c_chunks_per_exchange.is_some() {
            rows.push(row(
                "server→client chunks per exchange",
                "",
                b.s2c_chunks_per_exchange,
                a.s2c_chunks_per_exchange,
                false,
            ));
        }
        if b.server_cpu_per_request_us.is_some() || a.server_cpu_per_request_us.is_some() {
            rows.push(row(
                "server CPU per request",
                "µs",
                b.server_cpu_per_request_us,
                a.server_cpu_per_request_us,
                false,
            ));
        }
        rows.push(row(
            "errors",
            "",
            Some(b.errors as f64),
            Some(a.errors as f64),
            false,
        ));
        Comparison {
            title: title.to_string(),
            before: before.0.to_string(),
            after: after.0.to_string(),
            rows,
        }
    }

    pub fn row(&self, metric: &str) -> Option<&ComparisonRow> {
        self.rows.iter().find(|r| r.metric == metric)
    }
}

fn row(
    metric: &str,
    unit: &str,
    before: Option<f64>,
    after: Option<f64>,
    higher_is_better: bool,
) -> ComparisonRow {
    let ratio = match (before, after) {
        (Some(b), Some(a)) if b != 0.0 => Some(crate::numfmt::sig3(a / b)),
        _ => None,
    };
    let better = match (before, after) {
        // Within 1% is no change: noise, or rounding.
        (Some(b), Some(a)) if (a - b).abs() > 0.01 * a.abs().max(b.abs()) => {
            Some((a > b) == higher_is_better)
        }
        _ => None,
    };
    ComparisonRow {
        metric: metric.to_string(),
        unit: unit.to_string(),
        before,
        after,
        ratio,
        better,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(rps: f64, p50: f64, stalls: u64) -> Figures {
        Figures {
            exchanges: 100,
            throughput_rps: rps,
            mean_ms: p50,
            p50_ms: p50,
            p99_ms: p50 * 2.0,
            max_ms: p50 * 3.0,
            stalls_30ms: stalls,
            ..Figures::default()
        }
    }

    #[test]
    fn ratios_and_directions() {
        let c = Comparison::of(
            "fix",
            ("before", &figures(25.0, 40.0, 100)),
            ("after", &figures(5000.0, 0.2, 0)),
        );
        let t = c.row("throughput").unwrap();
        assert_eq!(t.ratio, Some(200.0));
        assert_eq!(t.better, Some(true));
        let p = c.row("p50").unwrap();
        assert_eq!(p.ratio, Some(0.005));
        assert_eq!(p.better, Some(true));
        let s = c.row("exchanges ≥ 30 ms").unwrap();
        assert_eq!((s.ratio, s.better), (Some(0.0), Some(true)));
        let e = c.row("errors").unwrap();
        assert_eq!((e.ratio, e.better), (None, None));
        assert!(c.row("server CPU per request").is_none());
    }

    #[test]
    fn a_regression_is_marked_worse() {
        let c = Comparison::of(
            "x",
            ("before", &figures(5000.0, 0.2, 0)),
            ("after", &figures(25.0, 40.0, 100)),
        );
        assert_eq!(c.row("throughput").unwrap().better, Some(false));
        assert_eq!(c.row("p99").unwrap().better, Some(false));
    }
}
