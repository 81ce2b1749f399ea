//! The report of `tcpdoctor run` / `tcpdoctor demo` as one self-contained HTML page: inline CSS
//! and inline SVG, no script, nothing fetched, so it can be attached to a CI job, mailed, or
//! opened years later. It reads the [`RunReport`] and lays it out; it computes nothing the
//! text and JSON renderers would not show too.
//!
//! Every string from the model is escaped: scenario names, the server's command line,
//! verdicts and file names come from users and from the traffic.
//!
//! # Layout
//! - `mod.rs`: the page, its sections and its style sheet.
//! - `tables.rs`: scenarios side by side, comparisons, demo cases, checks.
//! - `svg.rs`: latency histograms on one shared log axis, chunk-size bars.
//! - `timeline.rs`: one stalled exchange as client and server lanes.
//! - `findings.rs`: finding cards.
//! - `escape.rs`: escaping and number formatting.

mod escape;
mod findings;
mod svg;
mod tables;
#[cfg(test)]
mod tests;
mod timeline;

use crate::numfmt::count;
use escape::esc;

use super::{GateResult, RunReport, ScenarioResult};
use crate::report::{Finding, FindingKind};

const STYLE: &str = include_str!("style.css");

/// The whole page.
pub fn render_html(report: &RunReport) -> String {
    let s = &report.settings;
    let mut out = String::with_capacity(64 * 1024);
    out.push_str(&format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>tcpdoctor {}: {} — {}</title>\n<style>\n{STYLE}</style>\n</head>\n<body>\n<main>\n",
        esc(&s.command),
        esc(&s.target),
        report.result.as_str()
    ));
    out.push_str(&header(report));
    out.push_str(&nav(report));
    section(&mut out, "scenarios", "Scenarios side by side", &{
        tables::scenario_table(&report.scenarios)
    });
    if !report.comparisons.is_empty() {
        let body: String = report.comparisons.iter().map(tables::comparison).collect();
        section(&mut out, "comparisons", "Before and after", &body);
    }
    if report
        .scenarios
        .iter()
        .any(|s| !s.latency_histogram.is_empty())
    {
        let body = format!(
            "<p class=\"muted\">Exchange latency, one bar per 1-2-5 step on a log scale. Every \
             histogram uses the same axis: a healthy exchange sits near 0.1 ms, one held by a \
             delayed ACK near 40 ms. Bars from 20 ms up are red; the dashed line marks 30 ms, \
             the threshold of the <i>exchanges ≥ 30 ms</i> row.</p>\n{}",
            svg::latency_histograms(&report.scenarios)
        );
        section(&mut out, "latency", "Latency histograms", &body);
    }
    if let Some((scenario, finding)) = stalled_example(&report.scenarios) {
        section(&mut out, "timeline", "One stalled exchange", &{
            timeline_section(scenario, finding)
        });
    }
    if report.scenarios.iter().any(|s| s.chunks.is_some()) {
        section(
            &mut out,
            "chunks",
            "How the server wrote",
            &chunks(&report.scenarios),
        );
    }
    section(&mut out, "findings", "Findings", &{
        findings::findings(&report.scenarios)
    });
    if !report.checks.is_empty() {
        section(
            &mut out,
            "checks",
            "Checks",
            &tables::checks(&report.checks),
        );
    }
    out.push_str(&format!(
        "<footer>{} {} · schema {} · open the captures named above in Wireshark to see the \
         same frames</footer>\n</main>\n</body>\n</html>\n",
        esc(&report.tool.name),
        esc(&report.tool.version),
        report.schema_version
    ));
    out
}

fn section(out: &mut String, id: &str, title: &str, body: &str) {
    out.push_str(&format!(
        "<section id=\"{id}\">\n<h2>{title}</h2>\n{body}</section>\n"
    ));
}

fn header(report: &RunReport) -> String {
    let s = &report.settings;
    // The badge is about the gate: the checks and --fail-on kinds asked for (for the demo,
    // its cases). With no gate asked for there is nothing to pass — but a run that measured
    // nothing or was interrupted still fails.
    let ok_cases = report
        .cases
        .iter()
        .filter(|c| c.reproduced && c.fixed)
        .count();
    let gate = if report.cases.is_empty() {
        report.gate.describe()
    } else {
        format!(
            "{} of {} reproduced and fixed",
            ok_cases,
            count(report.cases.len() as u64, "case")
        )
    };
    let (class, word) = match report.result {
        GateResult::Interrupted => ("fail", "INTERRUPTED"),
        GateResult::Failed => ("fail", "GATE FAILED"),
        GateResult::Passed => ("pass", "GATE PASSED"),
        GateResult::NotGated => ("none", "NO GATE"),
    };
    let gate = if gate.is_empty() && report.result == GateResult::NotGated {
        "no --check, --fail-on or --fail-on-worse given: nothing to pass or fail".to_string()
    } else if gate.is_empty() {
        "no --check, --fail-on or --fail-on-worse given, and the run itself failed: see below"
            .to_string()
    } else {
        gate
    };
    let mut out = format!(
        "<header class=\"top\">\n<div class=\"title\"><h1>tcpdoctor {}</h1>\
         <span class=\"badge big {class}\">{word}</span><span class=\"gate muted\">{}</span>\
         </div>\n<dl class=\"settings\">",
        esc(&s.command),
        esc(&gate)
    );
    let mut item = |k: &str, v: String| {
        out.push_str(&format!("<dt>{k}</dt><dd>{v}</dd>"));
    };
    item("target", format!("<code>{}</code>", esc(&s.target)));
    if let Some(server) = &s.server {
        item("server", format!("<code>{}</code>", esc(server)));
    }
    item("script", format!("<code>{}</code>", esc(&s.script)));
    item(
        "scenarios",
        s.scenarios
            .iter()
            .map(|n| format!("<code>{}</code>", esc(n)))
            .collect::<Vec<_>>()
            .join(" "),
    );
    let per_scenario = if report.cases.is_empty() {
        count(s.requests, "request")
    } else {
        let per_case: Vec<String> = report
            .cases
            .iter()
            .map(|c| c.requests.to_string())
            .collect();
        format!("{} requests (case by case)", per_case.join(", "))
    };
    item(
        "load",
        format!(
            "{per_scenario} per scenario over {}",
            count(s.connections, "connection")
        ),
    );
    if let Some(t) = report.elapsed_s {
        item("time", format!("{} s", crate::numfmt::num(t)));
    }
    item("output", format!("<code>{}</code>", esc(&s.output_dir)));
    out.push_str("</dl>\n");
    if !report.reasons.is_empty() {
        let items: Vec<String> = report
            .reasons
            .iter()
            .map(|r| format!("<li>{}</li>", esc(r)))
            .collect();
        out.push_str(&format!("<ul class=\"why fail\">{}</ul>\n", items.join("")));
    }
    if !report.cases.is_empty() {
        out.push_str(&format!(
            "<p><b>{ok_cases} of {}</b> reproduced and fixed.</p>\n{}",
            count(report.cases.len() as u64, "case"),
            tables::cases(&report.cases, &report.scenarios)
        ));
    }
    out.push_str("</header>\n");
    out
}

fn nav(report: &RunReport) -> String {
    let mut links = vec![("scenarios", "Scenarios")];
    if !report.comparisons.is_empty() {
        links.push(("comparisons", "Before and after"));
    }
    if report
        .scenarios
        .iter()
        .any(|s| !s.latency_histogram.is_empty())
    {
        links.push(("latency", "Latency"));
    }
    if stalled_example(&report.scenarios).is_some() {
        links.push(("timeline", "Timeline"));
    }
    if report.scenarios.iter().any(|s| s.chunks.is_some()) {
        links.push(("chunks", "Writes"));
    }
    links.push(("findings", "Findings"));
    if !report.checks.is_empty() {
        links.push(("checks", "Checks"));
    }
    let items: Vec<String> = links
        .iter()
        .map(|(id, t)| format!("<a href=\"#{id}\">{t}</a>"))
        .collect();
    format!("<nav>{}</nav>\n", items.join(""))
}

/// The finding whose timeline the page draws: a Nagle stall if there is one, else the first
/// timeline of several packets, else any.
fn stalled_example(scenarios: &[ScenarioResult]) -> Option<(&ScenarioResult, &Finding)> {
    let all = || {
        scenarios
            .iter()
            .flat_map(|s| s.findings.iter().map(move |f| (s, f)))
            .filter(|(_, f)| !f.evidence.timeline.is_empty())
    };
    all()
        .find(|(_, f)| f.kind == FindingKind::NagleDelayedAck)
        .or_else(|| all().find(|(_, f)| f.evidence.timeline.len() > 1))
        .or_else(|| all().next())
}

fn timeline_section(s: &ScenarioResult, f: &Finding) -> String {
    format!(
        "<p class=\"muted\">From the <code>{}</code> finding in scenario <b>{}</b>: flow {} \
         ({} → {}) in <code>{}</code>. Each arrow is one packet as the capture saw it, from \
         its sender's lane to its receiver's, labelled with its Wireshark frame number; the \
         shaded span is the longest silence. Packets microseconds apart are drawn a little \
         apart; the dotted leaders point at their true time.{}</p>\n{}",
        esc(f.kind.as_str()),
        esc(&s.name),
        f.example_flow.id,
        esc(&f.example_flow.client),
        esc(&f.example_flow.server),
        esc(&f.file),
        if f.evidence.writes.is_empty() {
            ""
        } else {
            " The row above the lanes is the program's own system calls (traced): each mark \
             names the write() calls whose bytes the packet below it carried."
        },
        timeline::timeline(&f.evidence.timeline, &f.evidence.writes)
    )
}

fn chunks(scenarios: &[ScenarioResult]) -> String {
    let mut out = String::from(
        "<p class=\"muted\">Server→client chunk sizes as the proxy read them, one chunk per \
         read: a server that writes each response whole shows one size per response; one that \
         writes line by line shows many small chunks.</p>\n<div class=\"chunk-grid\">\n",
    );
    for s in scenarios {
        let Some(c) = &s.chunks else { continue };
        let per = s
            .figures
            .s2c_chunks_per_exchange
            .map(|v| format!(", {} per exchange", escape::num(v)))
            .unwrap_or_default();
        out.push_str(&format!(
            "<figure class=\"chunks\"><figcaption><b>{}</b> <span class=\"muted\">{} \
             server→client chunks{per}; {} client→server</span></figcaption>\n{}</figure>\n",
            esc(&s.name),
            c.s2c_chunks,
            c.c2s_chunks,
            svg::chunk_bars(&s.name, c)
        ));
    }
    out.push_str("</div>\n");
    out
}
