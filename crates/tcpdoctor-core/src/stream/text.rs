//! The text of a stream report.

use std::fmt::Write;

use super::{Direction, StreamReport};
use crate::numfmt::{count, num};

/// Bytes per second as a reader wants it: `812 KB/s`, `1.25 GB/s` (decimal units, as
/// throughput is published).
fn per_second(bytes: f64) -> String {
    let units = [("GB/s", 1e9), ("MB/s", 1e6), ("KB/s", 1e3)];
    for (unit, scale) in units {
        if bytes >= scale {
            return format!("{} {unit}", num(bytes / scale));
        }
    }
    format!("{} B/s", num(bytes))
}

pub fn render(r: &StreamReport) -> String {
    let mut out = String::new();
    let s = &r.setup;
    let who = match s.direction {
        Direction::FromServer => "from the server to tcpdoctor",
        Direction::ToServer => "from tcpdoctor to the server",
    };
    let _ = writeln!(
        out,
        "one-way stream {who} at {} ({} framing, {}), {} s measured after a {} s warm-up",
        s.target,
        s.framing,
        count(s.connections, "connection"),
        num(r.seconds),
        num(s.warmup_s)
    );
    let _ = writeln!(
        out,
        "  {} messages/s   {}   ({} messages, {} bytes{})",
        num(r.messages_per_s),
        per_second(r.bytes_per_s),
        r.messages,
        r.bytes,
        r.mean_message_bytes
            .map(|m| format!(", {} bytes per message", num(m)))
            .unwrap_or_default()
    );
    match (&r.segments, &r.segments_unknown) {
        (Some(seg), _) => {
            let _ = writeln!(
                out,
                "  wire: {} data segments, {} per message, {} bytes per segment{}",
                seg.data_segments,
                seg.per_message.map_or("–".into(), num),
                seg.bytes_per_segment.map_or("–".into(), num),
                seg.full_segment
                    .map(|f| format!(" (a full segment holds {f})"))
                    .unwrap_or_default()
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(out, "  wire: no segment count: {why}");
        }
        (None, None) => {}
    }
    if let Some(cpu) = r.server_cpu_s {
        let _ = writeln!(
            out,
            "  server CPU: {} s, {} per message",
            num(cpu),
            r.server_cpu_us_per_message
                .map_or("–".into(), |us| format!("{} µs", num(us)))
        );
    }
    match (&r.calls, &r.calls_unknown) {
        (Some(c), _) => {
            let by: Vec<String> = c
                .by_call
                .iter()
                .map(|b| format!("{} ×{}", b.call, b.count))
                .collect();
            let _ = writeln!(
                out,
                "  server's {} calls on these connections: {}, {} per message{}",
                c.family,
                c.total,
                c.per_message.map_or("–".into(), num),
                if by.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", by.join(", "))
                }
            );
        }
        (None, Some(why)) => {
            let _ = writeln!(out, "  server's calls: not counted: {why}");
        }
        (None, None) => {}
    }
    if let Some(reading) = &r.reading {
        let _ = writeln!(out, "  => {reading}");
    }
    for w in &r.warnings {
        let _ = writeln!(out, "  warning: {w}");
    }
    out
}
