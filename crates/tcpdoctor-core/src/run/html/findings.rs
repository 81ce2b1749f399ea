//! Findings as cards: verdict first, then the facts, the frames to open in Wireshark, and the
//! fix.

use super::escape::{dur_ms, esc, num, path};
use super::timeline;
use crate::flow::Direction;
use crate::report::Finding;
use crate::run::ScenarioResult;

/// Every scenario's findings, a scenario without any saying so.
pub fn findings(scenarios: &[ScenarioResult]) -> String {
    let mut out = String::new();
    for s in scenarios {
        out.push_str(&format!(
            "<h3 id=\"findings-{}\">{}</h3>\n",
            anchor(&s.name),
            esc(&s.name)
        ));
        if s.findings.is_empty() {
            let why = match (&s.capture, &s.capture_note) {
                (Some(_), _) => "the capture shows none of the pathologies tcpdoctor knows".into(),
                (None, Some(note)) => format!("no capture ({})", esc(note)),
                (None, None) => "no capture".into(),
            };
            out.push_str(&format!("<p class=\"muted\">No findings: {why}.</p>\n"));
        }
        for f in &s.findings {
            out.push_str(&card(f));
        }
        if let Some(end) = &s.server_end {
            out.push_str(&format!(
                "<p class=\"muted\">At the server's end of the path (<code>{}</code>): {}.</p>\n",
                esc(&end.file),
                if end.findings.is_empty() {
                    "no findings".to_string()
                } else {
                    end.findings
                        .iter()
                        .map(|f| format!("{} ({})", esc(f.kind.as_str()), f.direction.as_str()))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ));
            if let Some(p) = &end.path {
                out.push_str(&format!(
                    "<p class=\"muted\">The path, from both ends: {}.</p>\n",
                    esc(&crate::ends::one_line(p))
                ));
            }
        }
    }
    out
}

/// A scenario name made safe for an `id`.
pub fn anchor(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
}

fn card(f: &Finding) -> String {
    let dir = match f.direction {
        Direction::ClientToServer => "client → server",
        Direction::ServerToClient => "server → client",
    };
    let mut out = format!(
        "<article class=\"card {sev}\"><header><span class=\"sev {sev}\">{}</span> \
         <code class=\"kind\">{}</code> <span class=\"dir\">{dir}</span> \
         <span class=\"muted\">server {}",
        esc(f.severity.as_str()),
        esc(f.kind.as_str()),
        esc(&f.server),
        sev = f.severity.as_str(),
    );
    if f.flows_total > 0 {
        out.push_str(&format!(
            " · {} of {} flow{}",
            f.flows_affected,
            f.flows_total,
            if f.flows_total == 1 { "" } else { "s" }
        ));
    }
    if f.time_lost_ms > 0.0 {
        out.push_str(&format!(" · {} lost", dur_ms(f.time_lost_ms)));
    }
    out.push_str("</span></header>\n");
    out.push_str(&format!("<p class=\"verdict\">{}</p>\n", esc(&f.verdict)));
    if !f.evidence.facts.is_empty() {
        out.push_str("<ul class=\"facts\">");
        for fact in &f.evidence.facts {
            out.push_str(&format!("<li>{}</li>", esc(fact)));
        }
        out.push_str("</ul>\n");
    }
    if !f.evidence.rests_on.is_empty() {
        out.push_str("<ul class=\"rests-on\">");
        for source in &f.evidence.rests_on {
            out.push_str(&format!("<li>rests on: {}</li>", esc(source)));
        }
        out.push_str("</ul>\n");
    }
    if !f.evidence.histogram.is_empty() {
        let bars: Vec<String> = f
            .evidence
            .histogram
            .iter()
            .map(|b| format!("{} × {}", esc(&b.value), b.count))
            .collect();
        out.push_str(&format!(
            "<p class=\"small\"><b>{}</b>: {}</p>\n",
            if f.evidence.histogram_of.is_empty() {
                "histogram".to_string()
            } else {
                esc(&f.evidence.histogram_of)
            },
            bars.join(", ")
        ));
    }
    if !f.evidence.frames.is_empty() {
        let frames: Vec<String> = f.evidence.frames.iter().map(|n| n.to_string()).collect();
        out.push_str(&format!(
            "<p class=\"frames\">Example in <code>{}</code>, flow {} ({} → {}): frames \
             <b>{}</b> — Wireshark filter <code class=\"filter\">frame.number in {{{}}}</code></p>\n",
            path(&f.file),
            f.example_flow.id,
            esc(&f.example_flow.client),
            esc(&f.example_flow.server),
            frames.join(", "),
            frames.join(", ")
        ));
    } else if !f.file.is_empty() {
        out.push_str(&format!(
            "<p class=\"frames muted\">from <code>{}</code></p>\n",
            path(&f.file)
        ));
    }
    if !f.evidence.timeline.is_empty() {
        out.push_str(&timeline::table(&f.evidence.timeline, &f.evidence.writes));
    }
    if !f.evidence.values.is_empty() {
        let values: Vec<String> = f
            .evidence
            .values
            .iter()
            .map(|(k, v)| format!("<code>{}</code> {}", esc(k), num(*v)))
            .collect();
        out.push_str(&format!(
            "<p class=\"values muted small\">{}</p>\n",
            values.join(" · ")
        ));
    }
    out.push_str(&format!(
        "<div class=\"fix\"><b>Fix</b> {}</div>\n</article>\n",
        esc(&f.fix)
    ));
    out
}
