//! The text report of `inspect`: per process a header (CPU against traffic, what could not be
//! read), a table of its sockets' kernel state, a table of their options, then the findings
//! in `analyze`'s layout. Every figure comes from the [`InspectReport`]; nothing is computed
//! here but layout.

use std::fmt::Write;

use super::interval::{bit_rate, bytes, role_name};
use super::{
    BufferSetting, InspectReport, ProcessObservation, ProcessSummary, SocketObservation,
    SocketRole, SocketSummary,
};
use crate::numfmt::{count, dur_ms, num};
use crate::report::Finding;

/// Renders the report for a terminal.
pub fn render_text(report: &InspectReport) -> String {
    let mut out = String::new();
    for (p, s) in report.observation.processes.iter().zip(&report.processes) {
        process(&mut out, p, s);
    }
    for t in &report.syscalls {
        traced(&mut out, t);
    }
    if report.findings.is_empty() {
        out.push_str(
            "\nNo findings: nothing these sockets and counters show costs time the way the known \
             TCP pathologies do.\n",
        );
        return out;
    }
    let _ = writeln!(
        out,
        "\n{} finding{}, most costly first:",
        report.findings.len(),
        if report.findings.len() == 1 { "" } else { "s" }
    );
    let several = report.observation.processes.len() > 1;
    for f in &report.findings {
        finding(&mut out, f, several);
    }
    out
}

/// A finding in `analyze`'s layout, with sockets where `analyze` has flows and the example
/// socket named by its descriptor.
fn finding(out: &mut String, f: &Finding, name_process: bool) {
    crate::report::text::finding_head(out, f, "socket", name_process);
    let e = &f.example_flow;
    if !e.server.is_empty() && e.server != f.file {
        let _ = writeln!(
            out,
            "  example: socket {} ({} → {})",
            // 0 is also "no descriptor known"; the facts name the socket in full either way.
            if e.id > 0 {
                format!("fd {}", e.id)
            } else {
                "(no descriptor known)".to_string()
            },
            e.client,
            e.server
        );
    }
    let _ = writeln!(out, "  fix: {}", f.fix);
}

fn process(out: &mut String, p: &ProcessObservation, s: &ProcessSummary) {
    let _ = write!(out, "{}", s.name);
    if !p.cmdline.is_empty() {
        let _ = write!(out, ": {}", p.cmdline);
    }
    out.push('\n');
    if let Some(c) = &s.cpu {
        let _ = write!(
            out,
            "  over {}: CPU {} ({}% of one core), {} and {} context switches per second",
            dur_ms(c.interval_ms),
            dur_ms(c.cpu_ms),
            num(c.cpu_share * 100.0),
            num(c.voluntary_ctxt_switches_per_s) + " voluntary",
            num(c.nonvoluntary_ctxt_switches_per_s) + " involuntary",
        );
        let _ = write!(
            out,
            "; {} in, {} out",
            count(c.data_segs_in, "data segment"),
            count(c.data_segs_out, "data segment")
        );
        if let Some(ns) = c.cpu_ns_per_data_seg_in {
            let _ = write!(out, ", {} of CPU per data segment in", dur_ms(ns / 1e6));
        }
        out.push('\n');
        if c.syscr_per_data_seg_in.is_some() || c.syscw_per_data_seg_out.is_some() {
            let show = |v: Option<f64>| v.map_or("–".to_string(), num);
            let _ = writeln!(
                out,
                "  {} read syscalls per data segment in, {} write syscalls per data segment \
                 out ({})",
                show(c.syscr_per_data_seg_in),
                show(c.syscw_per_data_seg_out),
                c.syscalls_counted
            );
        }
    }
    for n in &s.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    if !s.peers.is_empty() {
        let list: Vec<String> = s
            .peers
            .iter()
            .map(|peer| {
                let who = match peer.role {
                    SocketRole::Accepted => format!("from {}", peer.peer),
                    _ => format!("to {}", peer.peer),
                };
                let mut line = format!("{who}: {}", count(peer.connections, "connection"));
                if let (Some(b), true) = (peer.busiest_share, peer.connections > 1) {
                    let _ = write!(
                        line,
                        " (busiest {:.0}% of {})",
                        b * 100.0,
                        count(peer.data_segments, "data segment")
                    );
                }
                line
            })
            .collect();
        let _ = writeln!(out, "  connections {}", list.join("; "));
    }
    if p.sockets.is_empty() {
        out.push_str("  no TCP sockets\n");
        return;
    }
    let mut state = vec![row(&[
        "fd", "local", "remote", "state", "role", "cc", "rtt/var", "ato", "mss", "cwnd", "unacked",
        "notsent", "retrans", "delivery",
    ])];
    let mut options = vec![row(&[
        "fd",
        "nodelay",
        "cork",
        "sndbuf",
        "rcvbuf",
        "lowat",
        "keepalive",
        "in the interval",
    ])];
    for (sock, sum) in p.sockets.iter().zip(&s.sockets) {
        state.push(state_row(sock, sum));
        options.push(options_row(sock, sum));
    }
    out.push('\n');
    table(out, &state);
    out.push('\n');
    table(out, &options);
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

fn state_row(sock: &SocketObservation, sum: &SocketSummary) -> Vec<String> {
    let mut r = vec![
        fd_cell(sock.fd),
        sock.local.to_string(),
        sock.remote.to_string(),
        sum.state.clone(),
        role_name(sock.role).to_string(),
        sock.congestion.clone().unwrap_or_else(|| "–".into()),
    ];
    match sock.samples.last() {
        Some(t) => r.extend([
            format!(
                "{}/{} ms",
                num(f64::from(t.rtt_us) / 1e3),
                num(f64::from(t.rttvar_us) / 1e3)
            ),
            if t.ato_us > 0 {
                dur_ms(f64::from(t.ato_us) / 1e3)
            } else {
                "–".into()
            },
            t.snd_mss.to_string(),
            t.snd_cwnd.to_string(),
            t.unacked.to_string(),
            t.notsent_bytes.to_string(),
            format!("+{}", sum.retrans),
            if t.delivery_rate_bps > 0 {
                bit_rate(t.delivery_rate_bps as f64)
            } else {
                "–".into()
            },
        ]),
        None => r.extend(std::iter::repeat_n("–".to_string(), 8)),
    }
    r
}

fn fd_cell(fd: i32) -> String {
    if fd >= 0 {
        fd.to_string()
    } else {
        "–".to_string()
    }
}

fn on_off(v: Option<bool>) -> String {
    match v {
        Some(true) => "on".into(),
        Some(false) => "off".into(),
        None => "unknown".into(),
    }
}

fn buffer(size: Option<u64>, setting: &BufferSetting) -> String {
    let how = match setting {
        BufferSetting::Fixed { .. } => "fixed",
        BufferSetting::Autotuned { .. } => "autotuned",
        BufferSetting::Unknown { .. } => "unknown",
    };
    match size {
        Some(n) => format!("{} {how}", bytes(n)),
        None => format!("unknown {how}").replace("unknown unknown", "unknown"),
    }
}

fn options_row(sock: &SocketObservation, sum: &SocketSummary) -> Vec<String> {
    let o = &sock.options;
    let mut traffic = format!(
        "{}{} in / {} out data segments",
        if sum.lifetime { "since open: " } else { "" },
        sum.data_segs_in,
        sum.data_segs_out
    );
    if let Some(m) = sum.mean_write_bytes {
        let _ = write!(traffic, ", {} B per segment sent", num(m));
    }
    if sum.held_samples > 0 {
        let _ = write!(
            traffic,
            ", a write held in {} of {} samples",
            sum.held_samples, sum.samples
        );
    }
    vec![
        fd_cell(sock.fd),
        on_off(o.nodelay),
        on_off(o.cork),
        buffer(o.sndbuf_bytes, &o.sndbuf),
        buffer(o.rcvbuf_bytes, &o.rcvbuf),
        match o.notsent_lowat_bytes {
            Some(0) => "none".into(),
            Some(n) => bytes(n),
            None => "unknown".into(),
        },
        on_off(o.keepalive),
        if sock.role == SocketRole::Listener {
            String::new()
        } else {
            traffic
        },
    ]
}

/// Left-aligned columns, two spaces apart, indented by two.
fn table(out: &mut String, rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|s| s.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for r in rows {
        let mut line = String::from("  ");
        for (c, cell) in r.iter().enumerate() {
            line.push_str(cell);
            if c + 1 < r.len() {
                let pad = widths[c] - cell.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// `--trace`: one process's calls while attached, and what attaching cost.
fn traced(out: &mut String, t: &super::ProcessTrace) {
    let _ = writeln!(
        out,
        "\nSystem calls of pid {} (attached with --trace):",
        t.pid
    );
    if let Some(a) = &t.attach {
        let _ = writeln!(
            out,
            "   every system call stopped it twice while attached: {} over {} thread{}, \
             {} detached at the end",
            count(a.stops / 2, "call"),
            a.threads,
            if a.threads == 1 { "" } else { "s" },
            a.detached
        );
    }
    for line in crate::syscalls::render_text(&t.calls).lines() {
        let _ = writeln!(out, "   {line}");
    }
}
