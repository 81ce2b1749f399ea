//! `tcpdoctor ab`'s text report.

use std::fmt::Write as _;

use super::{AbReport, Better, FigureResult, GateResult, Outcome, Side, Verdict};
use crate::numfmt::num;

fn value(v: Option<f64>, unit: &Option<String>) -> String {
    match (v, unit) {
        (None, _) => "—".to_string(),
        (Some(v), Some(u)) => format!("{} {u}", num(v)),
        (Some(v), None) => num(v),
    }
}

fn verdict(f: &FigureResult) -> String {
    match f.verdict {
        Verdict::Faster => "B FASTER".to_string(),
        Verdict::Slower => "B SLOWER".to_string(),
        Verdict::NoDifference => "no difference the noise can show".to_string(),
        Verdict::NotCompared => "not compared".to_string(),
    }
}

/// The report as text (each line ends in a newline).
pub fn render_text(r: &AbReport) -> String {
    let s = &r.settings;
    let mut out = String::new();
    let conf = num(100.0 * s.confidence);
    let _ = writeln!(
        out,
        "tcpdoctor ab ({} mode): {} rounds, order {}",
        s.mode, s.rounds, s.order
    );
    let _ = writeln!(out, "  A: {}", s.a);
    let _ = writeln!(out, "  B: {}", s.b);
    let _ = writeln!(out, "  {}", s.method);
    out.push('\n');
    let _ = writeln!(
        out,
        "{:<30} {:>14} {:>14} {:>8}  {:<20} verdict",
        "figure",
        "A (median)",
        "B (median)",
        "B/A",
        format!("{conf} % interval")
    );
    for f in &r.figures {
        let dir = match f.better {
            Better::Lower => "↓",
            Better::Higher => "↑",
        };
        let ratio = f.ratio.map_or("—".to_string(), |x| format!("{x:.3}"));
        let ci =
            f.ci.map_or("—".to_string(), |[lo, hi]| format!("[{lo:.3}, {hi:.3}]"));
        let _ = writeln!(
            out,
            "{:<30} {:>14} {:>14} {:>8}  {:<20} {} ({} rounds)",
            format!("{} {dir}", f.name),
            value(f.a, &f.unit),
            value(f.b, &f.unit),
            ratio,
            ci,
            verdict(f),
            f.pairs
        );
        for n in &f.notes {
            let _ = writeln!(out, "    note: {n}");
        }
    }
    out.push_str(
        "  (↓: lower is better, ↑: higher is better; A and B are each side's median, B/A the \
         geometric mean of the rounds' own ratios)\n\n",
    );
    let measured = |side: Side| {
        r.runs
            .iter()
            .filter(|x| !x.warmup && x.side == side)
            .count()
    };
    let _ = writeln!(
        out,
        "hangs: A hung in {} of {} runs, B in {} of {}",
        r.hangs.a,
        measured(Side::A),
        r.hangs.b,
        measured(Side::B)
    );
    for run in &r.runs {
        let round = if run.warmup { "warm-up round" } else { "round" };
        match &run.outcome {
            Outcome::Ok => {}
            Outcome::Failed { reason } => {
                let _ = writeln!(
                    out,
                    "  {} {round} {}: failed — {reason}",
                    run.side.letter(),
                    run.round
                );
            }
            Outcome::Hang { after_s, sockets } => {
                let _ = writeln!(
                    out,
                    "  {} {round} {}: HUNG (no progress for {} s); its sockets then:",
                    run.side.letter(),
                    run.round,
                    num(*after_s)
                );
                if sockets.is_empty() {
                    out.push_str("    (none readable)\n");
                }
                for k in sockets.iter().take(12) {
                    let mut parts = Vec::new();
                    if let Some(v) = k.unread_bytes {
                        parts.push(format!("unread {v} B"));
                    }
                    if let Some(v) = k.unsent_bytes {
                        parts.push(format!("unsent {v} B"));
                    }
                    if let Some(v) = k.unacked {
                        parts.push(format!("unacked {v} segs"));
                    }
                    if let Some(v) = k.notsent_bytes {
                        parts.push(format!("not sent {v} B"));
                    }
                    if k.peer_zero_window == Some(true) {
                        parts.push("PEER WINDOW ZERO".to_string());
                    }
                    let _ = writeln!(
                        out,
                        "    {} {} {} {}: {}",
                        k.process,
                        k.pid,
                        k.kind,
                        k.endpoints,
                        parts.join(", ")
                    );
                }
                if sockets.len() > 12 {
                    let _ = writeln!(out, "    … and {} more", sockets.len() - 12);
                }
            }
        }
    }
    for why in &r.why {
        out.push('\n');
        let place = why
            .scenario
            .as_ref()
            .map_or(String::new(), |s| format!(" in {s}"));
        let _ = writeln!(
            out,
            "why{place} (traffic analysed: A {} run(s), B {} run(s)):",
            why.a.runs_analysed, why.b.runs_analysed
        );
        for side in [&why.a, &why.b] {
            let kinds: Vec<String> = side
                .kinds
                .iter()
                .map(|k| format!("{} ({} of {} runs)", k.kind, k.runs, side.runs_analysed))
                .collect();
            let per = side.segments_per_exchange().map_or(String::new(), |x| {
                format!("; {x:.1} TCP segments per {}", side.per)
            });
            let _ = writeln!(
                out,
                "  {}: {}{per}",
                side.side.letter(),
                if side.runs_analysed == 0 {
                    "not analysed".to_string()
                } else if kinds.is_empty() {
                    "no findings".to_string()
                } else {
                    kinds.join(", ")
                }
            );
        }
        let unanalysed: Vec<&str> = [&why.a, &why.b]
            .into_iter()
            .filter(|s| s.runs_analysed == 0)
            .map(|s| s.side.letter())
            .collect();
        if !unanalysed.is_empty() {
            let _ = writeln!(
                out,
                "  not compared: no run of {} was analysed (none completed with a capture)",
                unanalysed.join(" or ")
            );
        } else if why.differences.is_empty() {
            out.push_str("  no difference in the findings or the segments sent\n");
        }
        for d in &why.differences {
            let _ = writeln!(out, "  - {d}");
        }
    }
    if let Some(st) = &r.stream {
        out.push('\n');
        out.push_str("why (one traced stream run per side, not measured):\n");
        for (letter, side) in [("A", &st.a), ("B", &st.b)] {
            let Some(side) = side else {
                let _ = writeln!(out, "  {letter}: its traced run failed");
                continue;
            };
            let calls = match (side.calls_per_message, &side.calls_unknown) {
                (Some(c), _) => format!(
                    "server's {} calls per message {}",
                    side.family.as_deref().unwrap_or("send"),
                    crate::numfmt::num(c)
                ),
                (None, Some(why)) => format!("calls not counted ({why})"),
                (None, None) => "calls not counted".into(),
            };
            let _ = writeln!(out, "  {letter}: {calls} ({})", side.source);
            if let Some(reading) = &side.reading {
                let _ = writeln!(out, "     {reading}");
            }
        }
        for d in &st.differences {
            let _ = writeln!(out, "  - {d}");
        }
    }
    for w in &r.warnings {
        let _ = writeln!(out, "WARNING: {w}");
    }
    out.push('\n');
    match r.result {
        GateResult::NotGated => out.push_str("Result: not gated (no --fail-if-slower)\n"),
        GateResult::Passed => out.push_str("Result: passed\n"),
        GateResult::Failed => {
            out.push_str("Result: FAILED (exit 1)\n");
            for x in &r.reasons {
                let _ = writeln!(out, "  - {x}");
            }
        }
    }
    out
}
