//! The text report of `run` and `demo`: the side-by-side table an investigator pastes into a
//! pull request, then the findings, the comparisons and the checks.

use std::fmt::Write;

use super::{CheckStatus, Comparison, GateResult, RunReport, ScenarioResult};
use crate::numfmt::count;
pub(super) use crate::numfmt::num;
use crate::report::text::finding;

/// Renders the report for a terminal or a pull-request comment.
pub fn render_run_text(r: &RunReport) -> String {
    let mut out = String::new();
    let s = &r.settings;
    let per = if s.repeat > 1 {
        format!(
            "per run, {} runs per scenario (figures pool them)",
            s.repeat
        )
    } else {
        "per scenario".to_string()
    };
    if r.cases.is_empty() {
        let _ = writeln!(
            out,
            "tcpdoctor {}: {} with script `{}`, {} {per} over {}",
            s.command,
            s.target,
            s.script,
            count(s.requests, "exchange"),
            count(s.connections, "connection")
        );
    } else {
        demo_header(&mut out, r);
    }
    if let Some(cmd) = &s.server {
        let _ = writeln!(out, "server: {cmd}");
    }
    let _ = writeln!(out, "files: {}", s.output_dir);
    for c in &r.cases {
        let mark = match (c.reproduced, c.fixed) {
            (true, true) => "reproduced and fixed",
            (true, false) => "reproduced, NOT fixed by the twin",
            (false, _) => "NOT reproduced",
        };
        let _ = writeln!(out, "\n== {} — {mark}", c.title);
        let _ = writeln!(
            out,
            "   {}; {} per scenario",
            c.setup,
            count(c.requests, "exchange")
        );
        let _ = writeln!(out, "   diagnosis ({}): {}", c.expected, c.diagnosis);
        case_findings(&mut out, r, c);
        let _ = writeln!(out, "   fix: {}", c.fix);
        if let Some(cmp) = r
            .comparisons
            .iter()
            .find(|x| x.before == c.before && x.after == c.after)
        {
            comparison(&mut out, cmp, "   ");
        }
    }
    if r.cases.is_empty() {
        table(&mut out, &r.scenarios);
    }
    for sc in &r.scenarios {
        scenario_details(&mut out, sc, r.cases.is_empty());
    }
    if r.cases.is_empty() {
        for c in &r.comparisons {
            let _ = writeln!(out, "\n{}", c.title);
            comparison(&mut out, c, "  ");
        }
    }
    if !r.checks.is_empty() {
        let _ = writeln!(out, "\nChecks:");
        for c in &r.checks {
            let _ = writeln!(
                out,
                "  {} {:<24} {:<14} {}",
                match c.status {
                    CheckStatus::Passed => "pass",
                    CheckStatus::Failed | CheckStatus::CannotEvaluate => "FAIL",
                },
                c.check,
                c.scenario,
                c.message
            );
        }
    }
    if !r.failed_on.is_empty() {
        let _ = writeln!(
            out,
            "\nFound what --fail-on names: {}",
            r.failed_on.join(", ")
        );
    }
    if !r.worse.is_empty() {
        let _ = writeln!(out, "\nWORSE than the baseline (--fail-on-worse):");
        for w in &r.worse {
            let _ = writeln!(out, "  {}", w.describe());
        }
    }
    if r.cases.is_empty() {
        let _ = write!(
            out,
            "\nGate: {}",
            if r.gate.is_empty() {
                "none asked (no --check, no --fail-on, no --fail-on-worse)".to_string()
            } else {
                r.gate.describe()
            }
        );
    }
    let _ = writeln!(
        out,
        "\n{}",
        match r.result {
            GateResult::Passed => "Result: passed",
            GateResult::NotGated =>
                "Result: not gated: nothing was asked to pass or fail (exit 0; --check, \
                 --fail-on or --fail-on-worse make a gate)",
            GateResult::Failed => "Result: FAILED (exit 1)",
            GateResult::Interrupted => "Result: INTERRUPTED (exit 1)",
        }
    );
    for why in &r.reasons {
        let _ = writeln!(out, "  - {why}");
    }
    if r.result == GateResult::NotGated {
        for hint in ungated_hints(r) {
            let _ = writeln!(out, "  - {hint}");
        }
    }
    out
}

/// What a gate would have caught in a run that asked for none: WORSE rows of the baseline
/// tables and critical findings, each with the flag that gates it.
fn ungated_hints(r: &RunReport) -> Vec<String> {
    let mut hints = Vec::new();
    // What --fail-on-worse would have marked: its own evaluation, not a second copy of it.
    let ran: Vec<String> = r.scenarios.iter().map(|s| s.name.clone()).collect();
    let worse: Vec<String> = super::worse::evaluate(&r.comparisons, &[], &ran)
        .worse
        .iter()
        .map(|w| format!("{} in {}", w.metric, w.scenario))
        .collect();
    if !worse.is_empty() {
        hints.push(format!(
            "not gated, but WORSE than the baseline: {} (--fail-on-worse fails the run on these)",
            worse.join(", ")
        ));
    }
    let mut critical: Vec<String> = Vec::new();
    for s in &r.scenarios {
        for f in &s.findings {
            let k = f.kind.as_str().to_string();
            if f.severity == crate::report::Severity::Critical && !critical.contains(&k) {
                critical.push(k);
            }
        }
    }
    if !critical.is_empty() {
        hints.push(format!(
            "not gated, but critical findings: {} (--fail-on {} fails the run on them)",
            critical.join(", "),
            critical.join(",")
        ));
    }
    hints
}

/// What the demo ran: how many cases, how many exchanges each, how long it all took.
fn demo_header(out: &mut String, r: &RunReport) {
    let s = &r.settings;
    let per_case: Vec<String> = r.cases.iter().map(|c| c.requests.to_string()).collect();
    let _ = writeln!(
        out,
        "tcpdoctor {}: {}, each a scenario and its fixed twin, on {}",
        s.command,
        count(r.cases.len() as u64, "case"),
        s.target
    );
    let _ = writeln!(
        out,
        "exchanges per scenario, case by case: {}; over {}{}",
        per_case.join(", "),
        count(s.connections, "connection"),
        r.elapsed_s
            .map(|t| format!("; {} s in all", num(t)))
            .unwrap_or_default()
    );
}

/// Every finding of a demo case: the one its diagnosis quotes is named above, the others of
/// the scenario that shows the pathology and all of its fixed twin's are listed here.
fn case_findings(out: &mut String, r: &RunReport, c: &super::DemoCase) {
    for (name, before) in [(&c.before, true), (&c.after, false)] {
        let Some(sc) = r.scenarios.iter().find(|s| &s.name == name) else {
            continue;
        };
        let quoted = sc.findings.iter().position(|f| f.kind == c.expected);
        let listed: Vec<&crate::report::Finding> = sc
            .findings
            .iter()
            .enumerate()
            .filter(|(i, _)| !(before && Some(*i) == quoted))
            .map(|(_, f)| f)
            .collect();
        let label = if before && quoted.is_some() {
            format!("also found in {name}")
        } else {
            format!("found in {name}")
        };
        if listed.is_empty() {
            if !(before && quoted.is_some()) {
                let _ = writeln!(out, "   {label}: nothing");
            }
            continue;
        }
        let _ = writeln!(out, "   {label}:");
        for f in listed {
            let _ = writeln!(
                out,
                "     {} ({}, {}): {}",
                f.kind,
                f.severity.as_str(),
                f.direction.as_str(),
                f.verdict
            );
        }
    }
}

/// One column per scenario, one row per figure.
/// The widest a scenario's column is, in characters (a longer name is cut with `…`).
const SCENARIO_COLUMN: usize = 32;

fn table(out: &mut String, scenarios: &[ScenarioResult]) {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut add = |name: &str, f: &dyn Fn(&ScenarioResult) -> String| {
        rows.push((name.to_string(), scenarios.iter().map(f).collect()));
    };
    add("exchanges", &|s| s.figures.exchanges.to_string());
    // Over no exchange there is no latency and no throughput, not a zero.
    let measured = |s: &ScenarioResult, v: f64| {
        if s.measured() {
            num(v)
        } else {
            "-".into()
        }
    };
    add("throughput req/s", &|s| {
        measured(s, s.figures.throughput_rps)
    });
    add("mean ms", &|s| measured(s, s.figures.mean_ms));
    add("p50 ms", &|s| measured(s, s.figures.p50_ms));
    add("p99 ms", &|s| measured(s, s.figures.p99_ms));
    if scenarios
        .iter()
        .any(|s| s.figures.send_late_p99_us.is_some())
    {
        add("driver send late µs p50/p99", &|s| match (
            s.figures.send_late_p50_us,
            s.figures.send_late_p99_us,
        ) {
            (Some(a), Some(b)) => format!("{}/{}", num(a), num(b)),
            _ => "-".into(),
        });
    }
    add("exchanges ≥ 30 ms", &|s| {
        s.figures.stalls_30ms.to_string()
    });
    add("stalls (TCP timer)", &|s| {
        s.figures.stalls.map_or("-".into(), |n| n.to_string())
    });
    let steps: Vec<String> = scenarios
        .first()
        .map(|s| s.figures.steps.iter().map(|x| x.name.clone()).collect())
        .unwrap_or_default();
    if steps.len() > 1 {
        for st in &steps {
            add(&format!("{st} p50 ms"), &|s| {
                s.figures
                    .steps
                    .iter()
                    .find(|x| &x.name == st)
                    .map_or("-".into(), |x| num(x.p50_ms))
            });
        }
    }
    add("s→c chunks/exchange", &|s| {
        s.figures.s2c_chunks_per_exchange.map_or("-".into(), num)
    });
    add("server CPU µs/req", &|s| {
        s.figures.server_cpu_per_request_us.map_or("-".into(), num)
    });
    add("errors", &|s| s.figures.errors.to_string());
    add("timeouts", &|s| s.figures.timeouts.to_string());
    if scenarios.iter().any(|s| s.figures.reconnects > 0) {
        add("reconnects", &|s| s.figures.reconnects.to_string());
    }
    let first = rows.iter().map(|r| r.0.chars().count()).max().unwrap_or(0);
    // A scenario's name comes from the command line: cut to a column (numfmt rule 6).
    let names: Vec<_> = scenarios
        .iter()
        .map(|s| crate::numfmt::ellipsize(&s.name, SCENARIO_COLUMN))
        .collect();
    let widths: Vec<usize> = (0..scenarios.len())
        .map(|i| {
            rows.iter()
                .map(|r| r.1[i].chars().count().min(SCENARIO_COLUMN))
                .chain([names[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let _ = write!(out, "\n  {:first$}", "");
    for (name, w) in names.iter().zip(&widths) {
        let _ = write!(out, "  {name:>w$}");
    }
    out.push('\n');
    for (name, cells) in &rows {
        let _ = write!(out, "  {name:first$}");
        for (c, w) in cells.iter().zip(&widths) {
            let _ = write!(out, "  {c:>w$}");
        }
        out.push('\n');
    }
    for s in scenarios {
        if let Some(r) = &s.repeat {
            let _ = writeln!(out, "  spread in {}: {}", s.name, r.describe());
        }
    }
    for s in scenarios {
        let kinds: Vec<&str> = s
            .findings_by_kind()
            .iter()
            .map(|f| f.kind.as_str())
            .collect();
        let _ = writeln!(
            out,
            "  findings in {}: {}",
            s.name,
            if kinds.is_empty() {
                "none".to_string()
            } else {
                kinds.join(", ")
            }
        );
    }
}

fn scenario_details(out: &mut String, s: &ScenarioResult, with_findings: bool) {
    let _ = writeln!(out, "\n-- {}: {}", s.name, s.path);
    match (&s.capture, &s.capture_note) {
        (Some(c), note) => {
            let _ = writeln!(out, "   capture: {} ({})", c.file, c.source);
            if let Some(n) = note {
                let _ = writeln!(out, "   note: {n}");
            }
        }
        (None, Some(n)) => {
            let _ = writeln!(out, "   capture: none — {n}");
        }
        (None, None) => {}
    }
    if let Some(end) = &s.server_end {
        let kinds: Vec<String> = end
            .findings
            .iter()
            .map(|f| format!("{} ({})", f.kind, f.direction.as_str()))
            .collect();
        let _ = writeln!(
            out,
            "   at the server's end ({}): {}",
            end.file,
            if kinds.is_empty() {
                "no findings".to_string()
            } else {
                kinds.join(", ")
            }
        );
        if let Some(p) = &end.path {
            let _ = writeln!(
                out,
                "   the path, from both ends: {}",
                crate::ends::one_line(p)
            );
        }
    }
    // Failed exchanges are not in the latency figures: say how many, and why.
    if let Some(e) = s.failures() {
        let _ = writeln!(out, "   errors: {e}");
    }
    if let Some(cpu) = &s.server_cpu {
        let _ = writeln!(
            out,
            "   {}; {} µs CPU per request",
            cpu.describe(),
            num(cpu.per_request_us)
        );
    }
    if let Some(k) = &s.server_sockets {
        let _ = writeln!(out, "   {}", k.summary_line());
    }
    if let Some(t) = &s.syscalls {
        for line in crate::syscalls::render_text(t).lines() {
            let _ = writeln!(out, "   {line}");
        }
        if let Some(w) = tracing_cost(t, s.figures.mean_ms) {
            let _ = writeln!(out, "   {w}");
        }
    }
    if let Some(c) = &s.chunks {
        let sizes: Vec<String> = c
            .s2c_sizes
            .iter()
            .map(|b| format!("{} B ×{}", b.value, b.count))
            .collect();
        let _ = writeln!(
            out,
            "   server→client chunks as the hop read them: {} ({})",
            c.s2c_chunks,
            sizes.join(", ")
        );
    }
    // The bench's stall view guesses a cause from the clock alone; where a capture was
    // analysed, the findings name it from the packets (over a real path, two round trips of
    // 20 ms sit on the 40 ms timer and the guess would contradict them).
    if s.bench.stall.likely_cause.is_some() && s.capture.is_none() {
        let _ = writeln!(out, "   stall view: {}", s.bench.stall.verdict);
    }
    if with_findings {
        if s.findings.is_empty() {
            let _ = writeln!(out, "   no findings");
        }
        for f in &s.findings {
            let mut text = String::new();
            finding(&mut text, f, false);
            for line in text.lines() {
                let _ = writeln!(out, "   {line}");
            }
        }
    }
}

fn comparison(out: &mut String, c: &Comparison, indent: &str) {
    let _ = writeln!(
        out,
        "{indent}{:<36} {:>18} {:>18} {:>9}",
        "",
        trim(&c.before, 18),
        trim(&c.after, 18),
        "ratio"
    );
    for r in &c.rows {
        let show = |v: Option<f64>| v.map_or("-".to_string(), num);
        let ratio = r.ratio.map_or("-".to_string(), |x| format!("{}×", num(x)));
        let mark = match (r.better, r.before, r.after) {
            (Some(true), ..) => " better",
            (Some(false), ..) => " WORSE",
            (None, Some(_), Some(_)) => " no change",
            (None, ..) => "",
        };
        let name = if r.unit.is_empty() {
            r.metric.clone()
        } else {
            format!("{} ({})", r.metric, r.unit)
        };
        let _ = writeln!(
            out,
            "{indent}{name:<36} {:>18} {:>18} {ratio:>9}{mark}",
            show(r.before),
            show(r.after)
        );
    }
    let _ = writeln!(out, "{indent}({})", c.method);
    for w in &c.warnings {
        let _ = writeln!(out, "{indent}WARNING: {w}");
    }
}

fn trim(s: &str, n: usize) -> String {
    let c: Vec<char> = s.chars().collect();
    if c.len() <= n {
        s.to_string()
    } else {
        let mut t: String = c[c.len() - (n - 1)..].iter().collect();
        t.insert(0, '…');
        t
    }
}

/// The tracer's time per request when it is a tenth of the mean exchange or more: each
/// trapped call stops the server twice, which can change a timing-sensitive verdict (how a
/// pipelining server batches its replies); the run says so rather than let it pass unseen.
pub fn tracing_cost(t: &crate::syscalls::SyscallsReport, mean_ms: f64) -> Option<String> {
    let requests = t.requests.filter(|&n| n > 0)? as f64;
    let per_request_ms = t.overhead.tracer_ms / requests;
    if mean_ms <= 0.0 || per_request_ms < 0.1 * mean_ms {
        return None;
    }
    Some(format!(
        "note: tracing took {} µs of the server's time per request ({:.0}% of the mean \
         exchange, {} ms): timing-sensitive figures and verdicts may differ untraced \
         (compare with --no-trace)",
        num(per_request_ms * 1e3),
        100.0 * per_request_ms / mean_ms,
        num(mean_ms)
    ))
}
