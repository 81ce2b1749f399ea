//! The tables of the page: scenarios side by side, before/after comparisons, demo cases and
//! checks.

use super::escape::{dur_ms, esc, num, path};
use crate::run::{CheckResult, CheckStatus, Comparison, DemoCase, ScenarioResult};

fn tick(ok: bool) -> &'static str {
    if ok {
        "<span class=\"yes\">✓</span>"
    } else {
        "<span class=\"no\">✗</span>"
    }
}

/// One column per scenario, one row per figure.
pub fn scenario_table(scenarios: &[ScenarioResult]) -> String {
    let mut out = String::from("<div class=\"scroll\"><table class=\"side\"><thead><tr><th></th>");
    for s in scenarios {
        out.push_str(&format!("<th class=\"num\">{}</th>", esc(&s.name)));
    }
    out.push_str("</tr></thead><tbody>\n");
    let row = |out: &mut String, label: &str, cells: Vec<String>| {
        out.push_str(&format!("<tr><th>{label}</th>"));
        for c in cells {
            out.push_str(&c);
        }
        out.push_str("</tr>\n");
    };
    let cells = |f: &dyn Fn(&ScenarioResult) -> String| -> Vec<String> {
        scenarios
            .iter()
            .map(|s| format!("<td class=\"num\">{}</td>", f(s)))
            .collect()
    };
    row(
        &mut out,
        "path",
        scenarios
            .iter()
            .map(|s| format!("<td class=\"path\">{}</td>", esc(&s.path)))
            .collect(),
    );
    row(
        &mut out,
        "exchanges",
        cells(&|s| s.figures.exchanges.to_string()),
    );
    // Over no exchange there is no latency and no throughput, not a zero.
    let measured = |s: &ScenarioResult, text: String| {
        if s.measured() {
            text
        } else {
            "–".into()
        }
    };
    row(
        &mut out,
        "throughput",
        cells(&|s| measured(s, format!("{} req/s", num(s.figures.throughput_rps)))),
    );
    if scenarios.iter().any(|s| s.repeat.is_some()) {
        row(
            &mut out,
            "runs (pooled)",
            scenarios
                .iter()
                .map(|s| match &s.repeat {
                    Some(r) => format!("<td class=\"path\">{}</td>", esc(&r.describe())),
                    None => "<td class=\"num\">1</td>".into(),
                })
                .collect(),
        );
    }
    row(
        &mut out,
        "mean",
        cells(&|s| measured(s, dur_ms(s.figures.mean_ms))),
    );
    row(
        &mut out,
        "median (p50)",
        cells(&|s| measured(s, dur_ms(s.figures.p50_ms))),
    );
    row(
        &mut out,
        "p99",
        cells(&|s| measured(s, dur_ms(s.figures.p99_ms))),
    );
    row(
        &mut out,
        "max",
        cells(&|s| measured(s, dur_ms(s.figures.max_ms))),
    );
    if scenarios
        .iter()
        .any(|s| s.figures.send_late_p99_us.is_some())
    {
        row(
            &mut out,
            "driver's send lateness<br><span class=\"muted small\">p50 / p99 (open loop)</span>",
            cells(
                &|s| match (s.figures.send_late_p50_us, s.figures.send_late_p99_us) {
                    (Some(a), Some(b)) => format!("{} / {} µs", num(a), num(b)),
                    _ => "–".into(),
                },
            ),
        );
    }
    let mut steps: Vec<&str> = Vec::new();
    for s in scenarios {
        for st in &s.figures.steps {
            if !steps.contains(&st.name.as_str()) {
                steps.push(&st.name);
            }
        }
    }
    for name in steps {
        row(
            &mut out,
            &format!(
                "step <code>{}</code><br><span class=\"muted small\">mean / p50 / p99</span>",
                esc(name)
            ),
            scenarios
                .iter()
                .map(|s| match s.figures.steps.iter().find(|x| x.name == name) {
                    // Three figures that may wrap between them, never inside one.
                    Some(x) => format!(
                        "<td class=\"num wrap\"><span>{}</span> / <span>{}</span> / <span>{}</span></td>",
                        dur_ms(x.mean_ms),
                        dur_ms(x.p50_ms),
                        dur_ms(x.p99_ms)
                    ),
                    None => "<td class=\"num\">–</td>".into(),
                })
                .collect(),
        );
    }
    row(
        &mut out,
        "exchanges ≥ 30 ms",
        cells(&|s| s.figures.stalls_30ms.to_string()),
    );
    row(
        &mut out,
        "stalls<br><span class=\"muted small\">held by a TCP timer</span>",
        scenarios
            .iter()
            .map(|s| match s.figures.stalls {
                Some(n) => {
                    let class = if n > 0 { "num bad" } else { "num" };
                    format!("<td class=\"{class}\">{n}</td>")
                }
                None => "<td class=\"num\">–</td>".into(),
            })
            .collect(),
    );
    let failed = |n: u64| {
        let class = if n > 0 { "num bad" } else { "num" };
        format!("<td class=\"{class}\">{n}</td>")
    };
    row(
        &mut out,
        "errors",
        scenarios.iter().map(|s| failed(s.figures.errors)).collect(),
    );
    row(
        &mut out,
        "timeouts",
        scenarios
            .iter()
            .map(|s| failed(s.figures.timeouts))
            .collect(),
    );
    if scenarios.iter().any(|s| s.failures().is_some()) {
        row(
            &mut out,
            "failed exchanges",
            scenarios
                .iter()
                .map(|s| match s.failures() {
                    Some(f) => format!("<td class=\"path\">{}</td>", esc(&f)),
                    None => "<td class=\"num\">–</td>".into(),
                })
                .collect(),
        );
    }
    if scenarios.iter().any(|s| s.figures.reconnects > 0) {
        row(
            &mut out,
            "reconnects<br><span class=\"muted small\">closed by the server, no error</span>",
            cells(&|s| s.figures.reconnects.to_string()),
        );
    }
    row(
        &mut out,
        "server→client chunks per exchange",
        cells(&|s| s.figures.s2c_chunks_per_exchange.map_or("–".into(), num)),
    );
    row(
        &mut out,
        "server CPU per request",
        cells(&|s| {
            s.figures
                .server_cpu_per_request_us
                .map_or("–".into(), |us| format!("{} µs", num(us)))
        }),
    );
    row(
        &mut out,
        "server CPU",
        scenarios
            .iter()
            .map(|s| match &s.server_cpu {
                Some(c) => format!("<td class=\"path\">{}</td>", esc(&c.describe())),
                None => "<td class=\"num\">–</td>".into(),
            })
            .collect(),
    );
    row(
        &mut out,
        "server's TCP_NODELAY",
        scenarios
            .iter()
            .map(|s| match &s.server_sockets {
                Some(k) => format!("<td class=\"path\">{}</td>", esc(&k.nodelay_cell())),
                None => "<td class=\"num\">–</td>".into(),
            })
            .collect(),
    );
    row(
        &mut out,
        "capture",
        scenarios
            .iter()
            .map(|s| match (&s.capture, &s.capture_note) {
                (Some(c), _) => format!(
                    "<td class=\"path\"><code>{}</code><br><span class=\"muted small\">{}</span>{}</td>",
                    path(&c.file),
                    esc(&c.source),
                    capture_notes(&c.summary)
                ),
                (None, Some(n)) => format!("<td class=\"path muted\">{}</td>", esc(n)),
                (None, None) => "<td class=\"num\">–</td>".into(),
            })
            .collect(),
    );
    row(
        &mut out,
        "findings",
        scenarios
            .iter()
            .map(|s| {
                if s.findings.is_empty() {
                    return "<td class=\"path\"><span class=\"yes\">none</span></td>".into();
                }
                let kinds: Vec<String> = s
                    .findings_by_kind()
                    .iter()
                    .map(|f| {
                        format!(
                            "<span class=\"sev {}\">{}</span>",
                            f.severity.as_str(),
                            esc(f.kind.as_str())
                        )
                    })
                    .collect();
                format!("<td class=\"path\">{}</td>", kinds.join(" "))
            })
            .collect(),
    );
    out.push_str("</tbody></table></div>\n");
    out
}

/// A before/after table with ratios; green where the change is an improvement, red where not.
pub fn comparison(c: &Comparison) -> String {
    let mut out = format!(
        "<h3>{}</h3><p class=\"muted\">before <b>{}</b> → after <b>{}</b></p>\n\
         <div class=\"scroll\"><table class=\"compare\"><thead><tr><th>figure</th><th class=\"num\">before</th>\
         <th class=\"num\">after</th><th class=\"num\">after / before</th><th>change</th></tr>\
         </thead><tbody>\n",
        esc(&c.title),
        esc(&c.before),
        esc(&c.after)
    );
    let value = |v: Option<f64>, unit: &str| match v {
        Some(v) if unit.is_empty() => num(v),
        Some(v) => format!("{} {}", num(v), esc(unit)),
        None => "–".into(),
    };
    for r in &c.rows {
        // `better: null` is no verdict: within the noise, or not comparable. Never red.
        let (class, word) = match (r.better, r.before, r.after) {
            (Some(true), ..) => ("better", "better"),
            (Some(false), ..) => ("worse", "worse"),
            (None, Some(_), Some(_)) => ("same", "no change"),
            (None, ..) => ("same", "–"),
        };
        out.push_str(&format!(
            "<tr class=\"{class}\"><th>{}</th><td class=\"num\">{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{}</td><td><span class=\"change {class}\">{word}</span></td></tr>\n",
            esc(&r.metric),
            value(r.before, &r.unit),
            value(r.after, &r.unit),
            r.ratio.map_or("–".into(), |x| format!("×{}", num(x))),
        ));
    }
    out.push_str("</tbody></table></div>\n");
    out.push_str(&format!(
        "<p class=\"muted small\">{}</p>\n",
        esc(&c.method)
    ));
    for w in &c.warnings {
        out.push_str(&format!(
            "<p class=\"baseline-warning\"><b>Warning:</b> {}</p>\n",
            esc(w)
        ));
    }
    out
}

/// Every finding kind of one scenario, or "none".
fn kinds_in(scenarios: &[ScenarioResult], name: &str) -> String {
    let Some(s) = scenarios.iter().find(|s| s.name == name) else {
        return "–".into();
    };
    if s.findings.is_empty() {
        return "none".into();
    }
    let kinds: Vec<String> = s
        .findings
        .iter()
        .map(|f| {
            format!(
                "<code class=\"sev {}\">{}</code>",
                f.severity.as_str(),
                esc(f.kind.as_str())
            )
        })
        .collect();
    kinds.join(" ")
}

/// The demo's cases: was each pathology reproduced, and did its twin fix it? Every finding of
/// both scenarios is listed by kind, the identifiers `--fail-on` takes.
pub fn cases(cases: &[DemoCase], scenarios: &[ScenarioResult]) -> String {
    let mut out = String::from(
        "<table class=\"cases\"><thead><tr><th>case</th><th>expected</th><th>before → after</th>\
         <th>reproduced</th><th>fixed</th><th>diagnosis</th></tr></thead><tbody>\n",
    );
    for c in cases {
        out.push_str(&format!(
            "<tr><td data-label=\"case\"><b>{}</b><br><span class=\"muted small\">{} ({} per \
             scenario)</span></td>\
             <td data-label=\"expected\"><code>{}</code></td>\
             <td data-label=\"before → after\">{} → {}</td>\
             <td class=\"mark\" data-label=\"reproduced\">{}</td>\
             <td class=\"mark\" data-label=\"fixed\">{}</td>\
             <td data-label=\"diagnosis\"><code>{}</code>: {}<br>\
             <span class=\"small\">found in {}: {}; in {}: {}</span><br>\
             <span class=\"muted small\">fix: {}</span></td></tr>\n",
            esc(&c.title),
            esc(&c.setup),
            crate::numfmt::count(c.requests, "exchange"),
            esc(c.expected.as_str()),
            esc(&c.before),
            esc(&c.after),
            tick(c.reproduced),
            tick(c.fixed),
            esc(c.expected.as_str()),
            esc(&c.diagnosis),
            esc(&c.before),
            kinds_in(scenarios, &c.before),
            esc(&c.after),
            kinds_in(scenarios, &c.after),
            esc(&c.fix)
        ));
    }
    out.push_str("</tbody></table>\n");
    out
}

pub fn checks(checks: &[CheckResult]) -> String {
    let mut out = String::from(
        "<div class=\"scroll\"><table class=\"checks\"><thead><tr><th>check</th><th>scenario</th>\
         <th class=\"num\">actual</th><th>result</th><th>detail</th></tr></thead><tbody>\n",
    );
    for c in checks {
        let (class, word) = match c.status {
            CheckStatus::Passed => ("pass", "pass"),
            CheckStatus::Failed => ("fail", "fail"),
            CheckStatus::CannotEvaluate => ("fail", "cannot evaluate"),
        };
        out.push_str(&format!(
            "<tr><td><code>{}</code></td><td>{}</td><td class=\"num\">{}</td>\
             <td><span class=\"badge {class}\">{word}</span></td><td>{}</td></tr>\n",
            esc(&c.check),
            esc(&c.scenario),
            c.actual.map_or("–".into(), num),
            esc(&c.message)
        ));
    }
    out.push_str("</tbody></table></div>\n");
    out
}

/// How the capture was read (`report::Note`): each line as the text report words it, a
/// warning marked as one.
fn capture_notes(summary: &crate::report::CaptureSummary) -> String {
    summary
        .notes()
        .iter()
        .map(|n| match n.warning {
            true => format!(
                "<br><span class=\"no small\">warning: {}</span>",
                esc(&n.text)
            ),
            false => format!("<br><span class=\"muted small\">{}</span>", esc(&n.text)),
        })
        .collect()
}
