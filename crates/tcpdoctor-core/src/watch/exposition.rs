//! The Prometheus text exposition (format 0.0.4) of a [`Ledger`]: `# HELP` and `# TYPE` for
//! every family, units in the names (`_seconds_total`, `_bytes_total`), label values escaped.

use std::fmt::Write;

use super::{KindTotals, Ledger, Port, SeriesKey, Totals};

/// One per-series family: name, type, help, and its value in a series.
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    /// `None`: the series has no row in this family (a counter its kernel does not report).
    value: fn(&Totals) -> Option<f64>,
}

const US: f64 = 1e-6;

const FAMILIES: &[Family] = &[
    Family {
        name: "tcpdoctor_tcp_busy_seconds_total",
        kind: "counter",
        help: "Time the connections had data in flight (the kernel's tcpi_busy_time).",
        value: |t| Some(t.busy_us as f64 * US),
    },
    Family {
        name: "tcpdoctor_tcp_send_buffer_limited_seconds_total",
        kind: "counter",
        help: "Time the connections could not send because the send buffer was full \
               (tcpi_sndbuf_limited): a fixed SO_SNDBUF too small for the path.",
        value: |t| Some(t.sndbuf_limited_us as f64 * US),
    },
    Family {
        name: "tcpdoctor_tcp_receive_window_limited_seconds_total",
        kind: "counter",
        help: "Time the connections could not send because the peer's receive window was \
               full (tcpi_rwnd_limited): a slow reader or a small receive buffer at the peer.",
        value: |t| Some(t.rwnd_limited_us as f64 * US),
    },
    Family {
        name: "tcpdoctor_tcp_retransmitted_segments_total",
        kind: "counter",
        help: "Segments retransmitted (tcpi_total_retrans).",
        value: |t| Some(t.retransmitted_segments as f64),
    },
    Family {
        name: "tcpdoctor_tcp_retransmission_timeouts_total",
        kind: "counter",
        help: "Retransmission timeouts, SYN and SYN-ACK ones included (tcpi_total_rto, Linux \
               6.7 and later; no series where the kernel does not report it).",
        value: |t| t.retransmission_timeouts.map(|n| n as f64),
    },
    Family {
        name: "tcpdoctor_tcp_sent_bytes_total",
        kind: "counter",
        help: "Bytes sent (tcpi_bytes_sent, retransmissions included).",
        value: |t| Some(t.bytes_sent as f64),
    },
    Family {
        name: "tcpdoctor_tcp_received_bytes_total",
        kind: "counter",
        help: "Bytes received (tcpi_bytes_received).",
        value: |t| Some(t.bytes_received as f64),
    },
    Family {
        name: "tcpdoctor_tcp_connections_opened_total",
        kind: "counter",
        help: "Connections first seen since the exporter started.",
        value: |t| Some(t.opened as f64),
    },
    Family {
        name: "tcpdoctor_tcp_connections",
        kind: "gauge",
        help: "Established connections at the last sample.",
        value: |t| Some(t.established as f64),
    },
];

/// The exposition of `ledger`, with `version` in the build-info gauge.
pub fn render(ledger: &Ledger, version: &str) -> String {
    let mut out = String::new();
    head(
        &mut out,
        "tcpdoctor_build_info",
        "gauge",
        "tcpdoctor's version (always 1).",
    );
    let _ = writeln!(
        out,
        "tcpdoctor_build_info{{version=\"{}\"}} 1",
        escape(version)
    );
    for f in FAMILIES {
        head(&mut out, f.name, f.kind, f.help);
        for (key, t) in ledger.series() {
            if let Some(v) = (f.value)(t) {
                let _ = writeln!(out, "{}{} {}", f.name, labels(key), number(v));
            }
        }
    }
    kinds(&mut out, ledger);
    let h = &ledger.health;
    let own: [(&str, &str, &str, f64); 8] = [
        (
            "tcpdoctor_watch_samples_total",
            "counter",
            "Samples taken.",
            h.samples as f64,
        ),
        (
            "tcpdoctor_watch_sample_errors_total",
            "counter",
            "Samples that failed (socket diagnostics refused or broken).",
            h.sample_errors as f64,
        ),
        (
            "tcpdoctor_watch_sample_duration_seconds",
            "gauge",
            "Wall time of the last sample.",
            h.sample_seconds,
        ),
        (
            "tcpdoctor_watch_sample_cpu_seconds",
            "gauge",
            "CPU time (user and system) of the last sample.",
            h.sample_cpu_seconds,
        ),
        (
            "tcpdoctor_watch_sockets",
            "gauge",
            "TCP sockets the last sample saw.",
            h.sockets as f64,
        ),
        (
            "tcpdoctor_watch_unattributed_sockets",
            "gauge",
            "Sockets of the last sample whose process could not be told (another user's \
             process, without the privilege to read its descriptors): not in any series.",
            h.unattributed as f64,
        ),
        (
            "tcpdoctor_watch_series_dropped_total",
            "counter",
            "Socket samples left out because the series cap (--max-series) was reached.",
            h.series_dropped as f64,
        ),
        (
            "tcpdoctor_watch_series_expired_total",
            "counter",
            "Series removed after their process had no socket for 5 minutes.",
            h.series_expired as f64,
        ),
    ];
    for (name, kind, help, value) in own {
        head(&mut out, name, kind, help);
        let _ = writeln!(out, "{name} {}", number(value));
    }
    head(
        &mut out,
        "tcpdoctor_watch_series",
        "gauge",
        "Series exported (at most --max-series).",
    );
    let _ = writeln!(out, "tcpdoctor_watch_series {}", ledger.series().count());
    head(
        &mut out,
        "tcpdoctor_watch_burst_samples_total",
        "counter",
        "Fast samples of candidate connections taken between host samples (to catch writes \
         held by Nagle).",
    );
    let _ = writeln!(
        out,
        "tcpdoctor_watch_burst_samples_total {}",
        h.burst_samples
    );
    head(
        &mut out,
        "tcpdoctor_watch_burst_cpu_seconds",
        "gauge",
        "CPU time (user and system) of the last interval's fast samples.",
    );
    let _ = writeln!(
        out,
        "tcpdoctor_watch_burst_cpu_seconds {}",
        number(h.burst_cpu_seconds)
    );
    head(
        &mut out,
        "tcpdoctor_watch_options_unreadable_sockets",
        "gauge",
        "Connections of the last interval that a finding kind needed the options of \
         (TCP_NODELAY, TCP_CORK) and whose process refused them (another user's process: \
         needs root or CAP_SYS_PTRACE): not judged.",
    );
    for (process, n) in &h.options_unreadable {
        let _ = writeln!(
            out,
            "tcpdoctor_watch_options_unreadable_sockets{{process=\"{}\"}} {n}",
            escape(process)
        );
    }
    out
}

/// A finding-kind family: name, type, help, and its value in a kind's totals.
type KindFamily = (
    &'static str,
    &'static str,
    &'static str,
    fn(&KindTotals) -> f64,
);

/// The finding-kind families: one row per series and kind it ever showed.
fn kinds(out: &mut String, ledger: &Ledger) {
    let families: [KindFamily; 2] = [
        (
            "tcpdoctor_finding_lost_seconds_total",
            "counter",
            "Time lost to each finding kind, as inspect's rule estimates it \
             (nagle_delayed_ack: the share of fast samples that caught a write held by Nagle \
             times the time sampled; busy_poll: CPU seconds above the traffic's budget). \
             docs/<kind>.md explains each kind.",
            |k| k.lost_seconds,
        ),
        (
            "tcpdoctor_finding_sockets",
            "gauge",
            "Connections the finding kind named in the last interval (0 once it is no longer \
             found).",
            |k| k.sockets as f64,
        ),
    ];
    for (name, kind, help, value) in families {
        head(out, name, kind, help);
        for (key, t) in ledger.series() {
            for (k, totals) in &t.kinds {
                let _ = writeln!(
                    out,
                    "{name}{{kind=\"{}\",{} {}",
                    k.as_str(),
                    &labels(key)[1..],
                    number(value(totals))
                );
            }
        }
    }
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {}", help.replace('\\', "\\\\"));
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn labels(key: &SeriesKey) -> String {
    let port = match key.port {
        Port::Listen(p) => p.to_string(),
        Port::Client => "client".to_owned(),
    };
    format!("{{process=\"{}\",port=\"{}\"}}", escape(&key.process), port)
}

/// A label value as the format wants it: `\`, `"` and newlines escaped.
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A sample value: integers without a fraction, others with what they need.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}
