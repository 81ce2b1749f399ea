//! The `syscalls` block in a few lines, for `run`'s text report and `inspect --trace`.

use std::fmt::Write as _;

use super::summary::{SocketCalls, SyscallsReport};
use super::TraceStatus;
use crate::numfmt::{count_of, dur_ms, num};
use crate::units::fmt_count;

/// Counts shown per socket or process, most frequent first.
const TOP_COUNTS: usize = 6;
/// Sockets shown, most calls first; the rest are counted.
const TOP_SOCKETS: usize = 4;

/// The report in lines (no indentation; each ends in a newline): the status and its cost, then
/// per traced socket its top counts, writes per response and TCP_NODELAY, then the processes'
/// own calls and what the trace says about polling.
pub fn render_text(r: &SyscallsReport) -> String {
    let mut out = String::new();
    let how = match &r.status {
        TraceStatus::Off => {
            return "syscalls: not traced (off: --no-trace, or `run` saving or comparing a \
                    baseline without --trace)\n"
                .to_string()
        }
        TraceStatus::Unavailable { reason } => {
            return format!("syscalls: not traced — {reason}\n");
        }
        TraceStatus::Traced => "traced from its start",
        TraceStatus::Attached => "attached",
    };
    let o = &r.overhead;
    let _ = writeln!(
        out,
        "syscalls: {how}, {} trapped calls in {} ({}, {} by the tracer{}){}",
        fmt_count(o.traced_calls),
        dur_ms(r.window_s * 1e3),
        count_of(r.processes.len() as u64, "process", "processes"),
        dur_ms(o.tracer_ms),
        o.per_call_us
            .map_or(String::new(), |u| format!(", {} per call", dur_ms(u / 1e3))),
        if r.dropped > 0 {
            format!("; {} not kept (over the cap)", fmt_count(r.dropped))
        } else {
            String::new()
        }
    );
    let mut sockets: Vec<&SocketCalls> = r.sockets.iter().collect();
    sockets.sort_by_key(|s| std::cmp::Reverse(s.counts.values().sum::<u64>()));
    // Attached mid-life: a listener's options set before the attach are inherited unseen.
    let whole_life = r.status == TraceStatus::Traced;
    for s in sockets.iter().take(TOP_SOCKETS) {
        let _ = writeln!(out, "  {}", socket_line(s, whole_life));
    }
    if sockets.len() > TOP_SOCKETS {
        let _ = writeln!(
            out,
            "  … and {} more sockets",
            fmt_count((sockets.len() - TOP_SOCKETS) as u64)
        );
    }
    for p in r.processes.iter().filter(|p| !p.counts.is_empty()) {
        let name = if p.name.is_empty() { "?" } else { &p.name };
        let _ = writeln!(
            out,
            "  {name} (pid {}), on no TCP socket: {}",
            p.pid,
            top(&p.counts)
        );
    }
    if let Some(v) = &r.polling {
        let _ = writeln!(
            out,
            "  {}: {}",
            match v {
                super::TraceVerdict::Polling(_) => "polling",
                super::TraceVerdict::RealWork(_) => "no polling",
            },
            v.sentence()
        );
    }
    out
}

fn top(counts: &std::collections::BTreeMap<String, u64>) -> String {
    let mut v: Vec<(&String, &u64)> = counts.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let mut parts: Vec<String> = v
        .iter()
        .take(TOP_COUNTS)
        .map(|(l, n)| format!("{l} {}", fmt_count(**n)))
        .collect();
    if v.len() > TOP_COUNTS {
        parts.push(format!("{} more labels", v.len() - TOP_COUNTS));
    }
    parts.join(", ")
}

fn socket_line(s: &SocketCalls, whole_life: bool) -> String {
    let ends = match (&s.local, &s.remote) {
        (Some(l), Some(r)) => format!("{l} ↔ {r}"),
        (Some(l), None) => format!("listener {l}"),
        (None, Some(r)) => format!("? ↔ {r}"),
        (None, None) => "?".to_string(),
    };
    let fds = if s.other_fds.is_empty() {
        format!("fd {}", s.fd)
    } else {
        let others: Vec<String> = s.other_fds.iter().map(i32::to_string).collect();
        format!("fds {}, {}", s.fd, others.join(", "))
    };
    let mut line = format!("{ends} (pid {} {fds}): {}", s.pid, top(&s.counts));
    if let Some(d) = &s.writes_per_response {
        let per = if s.opened_by == Some("connect") {
            ("request", "requests")
        } else {
            ("response", "responses")
        };
        let _ = write!(
            line,
            "; writes per {}: p50 {}, p90 {}, max {} over {}",
            per.0,
            num(d.p50),
            num(d.p90),
            num(d.max),
            count_of(d.count, per.0, per.1)
        );
    }
    if let Some(q) = &s.siocoutq {
        let _ = write!(
            line,
            "; SIOCOUTQ found the send queue non-empty {} of {} times",
            fmt_count(q.non_empty),
            fmt_count(q.calls)
        );
    }
    let n = &s.nodelay;
    let nodelay = match (n.set, n.value, n.at_ms) {
        (true, Some(v), _) if n.from_listener => {
            format!("TCP_NODELAY {v}, inherited from the listener")
        }
        (true, Some(v), _) if n.before_window => {
            format!("TCP_NODELAY set to {v} before the traced window")
        }
        (true, Some(v), Some(at)) => format!(
            "TCP_NODELAY set to {v} {} into the traced window",
            dur_ms(at)
        ),
        (true, ..) => "TCP_NODELAY set".to_string(),
        // A listener's own setting matters only through the sockets it accepts.
        (false, ..) if s.remote.is_none() => String::new(),
        (false, ..) if s.from_start && whole_life => "TCP_NODELAY never set (Nagle on)".to_string(),
        (false, ..) => "TCP_NODELAY not set while traced".to_string(),
    };
    if !nodelay.is_empty() {
        let _ = write!(line, "; {nodelay}");
    }
    line
}
