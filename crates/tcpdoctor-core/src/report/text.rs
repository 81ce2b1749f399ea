//! The text report: verdict first, then evidence, then the fix.

use std::fmt::Write;

use super::{CaptureSummary, Finding, Report};
use crate::numfmt::count;

/// Renders the report for a terminal or a pull-request comment.
pub fn render_text(report: &Report) -> String {
    let mut out = findings_text(report);
    if let Some(ends) = &report.ends {
        out.push_str(&crate::ends::render_ends(ends));
    }
    for p in &report.syscalls {
        let _ = writeln!(out, "\nSystem calls of the {}:", p.program);
        for line in crate::syscalls::render_text(&p.calls).lines() {
            let _ = writeln!(out, "   {line}");
        }
    }
    out
}

fn findings_text(report: &Report) -> String {
    let mut out = String::new();
    for c in &report.captures {
        capture(&mut out, c);
    }
    if report.findings.is_empty() && !report.withdrawn.is_empty() {
        out.push_str("\nNo finding survived the evidence audit (see below).\n");
        withdrawn(&mut out, report);
        return out;
    }
    if report.findings.is_empty() && carried_no_data(report) {
        // Not "No findings": a client that never connected is not a healthy one.
        let flows: u64 = report.captures.iter().map(|c| c.flows).sum();
        let _ = writeln!(
            out,
            "\nNothing to judge: no connection in this traffic carried data ({}, not one byte \
             of payload; a client whose connection was refused leaves only its SYN and the \
             reset).",
            count(flows, "connection")
        );
        withdrawn(&mut out, report);
        return out;
    }
    if report.findings.is_empty() {
        out.push_str("\nNo findings: nothing in this traffic costs time the way the known TCP pathologies do.\n");
        withdrawn(&mut out, report);
        return out;
    }
    let _ = writeln!(
        out,
        "\n{} finding{}, most costly first:",
        report.findings.len(),
        if report.findings.len() == 1 { "" } else { "s" }
    );
    for f in &report.findings {
        finding(&mut out, f, report.captures.len() > 1);
    }
    withdrawn(&mut out, report);
    out
}

/// True when every server of every capture is listed and none received or sent a byte.
fn carried_no_data(report: &Report) -> bool {
    report.captures.iter().all(|c| {
        c.servers_omitted == 0
            && c.servers
                .iter()
                .all(|s| s.bytes_to_server == 0 && s.bytes_to_client == 0)
    })
}

/// Findings the evidence audit refuted: one line each and the first reason.
fn withdrawn(out: &mut String, report: &Report) {
    if report.withdrawn.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n{} withdrawn by the evidence audit (its frames do not show what it claimed; please report it):",
        report.withdrawn.len()
    );
    for w in &report.withdrawn {
        let _ = writeln!(
            out,
            "  {} {} {} in {}: {}",
            w.kind,
            w.direction.as_str(),
            w.server,
            w.file,
            w.verdict
        );
        for r in w.reasons.iter().take(3) {
            let _ = writeln!(out, "    - {r}");
        }
        if w.reasons.len() > 3 {
            let _ = writeln!(out, "    - … and {} more", w.reasons.len() - 3);
        }
    }
}

fn capture(out: &mut String, c: &CaptureSummary) {
    let _ = writeln!(out, "{}", c.file);
    let _ = writeln!(
        out,
        "  {}, {}; {}, {}, {}, {} over {}",
        c.format,
        c.link_types.join(" + "),
        count(c.frames, "frame"),
        count(c.tcp_segments, "TCP segment"),
        count(c.flows, "flow"),
        count(c.exchanges, "exchange"),
        crate::units::fmt_duration(std::time::Duration::from_secs_f64(c.duration_ms / 1e3))
    );
    if let Some(t) = &c.truncated {
        let _ = writeln!(out, "  warning: {}", t.message);
    }
    if let Some(line) = c.time_steps_back_line() {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(line) = c.half_open_line() {
        let _ = writeln!(out, "  warning: {line}");
    }
    if let Some(line) = c.decapsulated() {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(line) = c.amsdu_line() {
        let _ = writeln!(out, "  {line}");
    }
    if let Some(a) = &c.audit {
        let _ = write!(
            out,
            "  evidence audit: {} frame{} read again, {} claim{} checked and true",
            a.frames_read,
            if a.frames_read == 1 { "" } else { "s" },
            a.claims_passed,
            if a.claims_passed == 1 { "" } else { "s" },
        );
        if a.claims_unverified > 0 {
            let _ = write!(
                out,
                ", {} not checkable in full (a frame its decoder cannot read, or no SYNs)",
                a.claims_unverified
            );
        }
        let _ = writeln!(out, ", {} withdrawn", a.withdrawn);
    }
    if let Some(line) = c.not_analysed_line() {
        let _ = writeln!(out, "  {line}");
    }
    for s in &c.servers {
        let mut line = format!(
            "  server {}: {}, {}",
            s.server,
            count(s.flows, "flow"),
            count(s.exchanges, "exchange")
        );
        if let Some(l) = &s.exchange_latency_ms {
            let _ = write!(
                line,
                ", latency median {:.2} ms, p90 {:.2} ms, max {:.2} ms",
                l.p50, l.p90, l.max
            );
        }
        if let Some(rtt) = s.rtt_ms {
            let _ = write!(line, ", RTT {rtt:.2} ms");
        }
        let _ = writeln!(out, "{line}");
    }
    if c.servers_omitted > 0 {
        let _ = writeln!(
            out,
            "  … and {} more servers (see --format json)",
            c.servers_omitted
        );
    }
}

/// What every text report prints of a finding before its example: severity, kind, direction
/// and server with the affected `unit`s (`flow` from a capture, `socket` from a live process),
/// where it was found (when `name_file`), the verdict, the facts and what they rest on.
pub(crate) fn finding_head(out: &mut String, f: &Finding, unit: &str, name_file: bool) {
    let traced = f
        .evidence
        .rests_on
        .iter()
        .any(|r| r.starts_with("system calls of the server's processes, traced"));
    let affected = if f.flows_total == 0 && traced {
        "from its traced system calls and process accounting".to_string()
    } else if f.flows_total == 0 {
        "from process accounting".to_string()
    } else {
        format!("{} of {}", f.flows_affected, count(f.flows_total, unit))
    };
    let _ = writeln!(
        out,
        "\n[{}] {}  {}  server {}  ({affected})",
        f.severity.as_str().to_uppercase(),
        f.kind,
        f.direction.arrow(),
        f.server,
    );
    if name_file {
        let _ = writeln!(out, "  in {}", f.file);
    }
    let _ = writeln!(out, "  {}", f.verdict);
    let _ = writeln!(out, "  evidence:");
    for fact in &f.evidence.facts {
        let _ = writeln!(out, "    - {fact}");
    }
    for source in &f.evidence.rests_on {
        let _ = writeln!(out, "    rests on: {source}");
    }
}

pub(crate) fn finding(out: &mut String, f: &Finding, name_file: bool) {
    finding_head(out, f, "flow", name_file);
    if !f.evidence.timeline.is_empty() {
        let _ = writeln!(
            out,
            "    example, flow {} ({} → {}), frames {}:",
            f.example_flow.id,
            f.example_flow.client,
            f.example_flow.server,
            f.evidence
                .frames
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        for t in &f.evidence.timeline {
            let mut line = format!(
                "      frame {:<7} {:>+10.3} ms  {:<14} {}",
                t.frame,
                t.t_ms,
                t.direction.arrow(),
                t.what
            );
            if !t.note.is_empty() {
                let _ = write!(line, "  ← {}", t.note);
            }
            let _ = writeln!(out, "{line}");
        }
    } else if f.example_flow.id > 0 {
        let frames = if f.evidence.frames.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = f.evidence.frames.iter().map(u64::to_string).collect();
            format!(", frame {}", list.join(", "))
        };
        let _ = writeln!(
            out,
            "    example: flow {} ({} → {}){frames}",
            f.example_flow.id, f.example_flow.client, f.example_flow.server
        );
    }
    let _ = writeln!(out, "  fix: {}", f.fix);
}
