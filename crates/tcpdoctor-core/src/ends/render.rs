//! The two ends' comparison as text: what each way of the path did, with the frames to check.

use std::fmt::Write;

use super::{EndsReport, OneWay, Spread};
use crate::numfmt::{count, dur_ms};

/// The section `analyze --ends` adds after the per-file report.
pub fn render_ends(r: &EndsReport) -> String {
    let mut out = String::new();
    let [a, b] = &r.files;
    let _ = writeln!(out, "\nTwo ends of one path: {a} and {b}");
    if r.paired == 0 {
        let _ = writeln!(
            out,
            "  No connection appears in both files (pairing by ports and the client's initial \
             sequence number): are they two ends of the same traffic?"
        );
        return out;
    }
    let _ = writeln!(
        out,
        "  {} in both files ({} only in {a}, {} only in {b}).",
        count(r.paired, "connection"),
        r.unpaired[0],
        r.unpaired[1],
    );
    let roles = &r.roles;
    let (client_end, server_end) = match (roles.first_is_client_end, roles.second_is_client_end) {
        (_, 0) => (Some(a.as_str()), Some(b.as_str())),
        (0, _) => (Some(b.as_str()), Some(a.as_str())),
        _ => (None, None),
    };
    match client_end {
        Some(c) if roles.assumed == 0 => {
            let _ = writeln!(out, "  {c} is the client's end (from the handshakes).");
        }
        Some(c) => {
            let _ = writeln!(
                out,
                "  {c} is taken as the client's end: {} without the handshake in both files, \
                 so the order of the files decided.",
                count(roles.assumed, "connection"),
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  {a} is the client's end of {}, {b} of {}.",
                count(roles.first_is_client_end, "connection"),
                count(roles.second_is_client_end, "connection"),
            );
        }
    }
    direction(
        &mut out,
        "client → server",
        &r.client_to_server,
        client_end,
        server_end,
    );
    direction(
        &mut out,
        "server → client",
        &r.server_to_client,
        server_end,
        client_end,
    );
    if let Some(rtt) = r.round_trip_ms {
        let _ = writeln!(
            out,
            "  round trip: {} (the two ways' median delays added; true whatever the clocks)",
            dur_ms(rtt)
        );
    }
    if r.segmentation_differs {
        let d = if r.client_to_server.largest_at_sender != r.client_to_server.largest_at_receiver {
            ("client → server", &r.client_to_server)
        } else {
            ("server → client", &r.server_to_client)
        };
        let _ = writeln!(
            out,
            "  The two files cut the data into packets differently ({}: largest packet {} bytes at \
             the sender's end, {} at the receiver's): one end was captured above an offload \
             (TSO/GSO or GRO), so packets do not pair one for one and the unpaired ones above \
             are not losses. Capture both ends with the offloads off (ethtool -K IFACE tso off \
             gso off gro off) or below them.",
            d.0, d.1.largest_at_sender, d.1.largest_at_receiver
        );
    }
    if r.clocks_differ {
        let _ = writeln!(
            out,
            "  A one-way delay came out negative: the files were not taken on one clock, so the \
             one-way figures include the clocks' offset."
        );
    }
    for (i, n) in r.skipped.iter().enumerate() {
        if *n > 0 {
            let _ = writeln!(
                out,
                "  {} compared only its first {} TCP packets ({} more not compared).",
                r.files[i],
                super::MAX_PACKETS,
                n
            );
        }
    }
    out
}

/// The comparison in one line, for `run`'s scenario block: each way's median delay and losses,
/// the round trip, and how many retransmissions the path made necessary.
pub fn one_line(r: &EndsReport) -> String {
    if r.paired == 0 {
        return "no connection appears in both captures".to_string();
    }
    let way = |name: &str, d: &OneWay| {
        let delay = d.delay_ms.map_or("no delay measured".to_string(), |s| {
            format!("p50 {}", dur_ms(s.p50))
        });
        format!(
            "{name} {delay}, {} of {} lost",
            d.lost,
            count(d.sent, "packet")
        )
    };
    let mut line = format!(
        "{}; {}",
        way("client → server", &r.client_to_server),
        way("server → client", &r.server_to_client)
    );
    if let Some(rtt) = r.round_trip_ms {
        let _ = write!(line, "; round trip {}", dur_ms(rtt));
    }
    let (c, s) = (&r.client_to_server, &r.server_to_client);
    let resent = c.retransmitted + s.retransmitted;
    if resent > 0 {
        let _ = write!(
            line,
            "; {} sent again ({} after a loss, {} had arrived)",
            count(resent, "packet"),
            c.replaced_lost + s.replaced_lost,
            c.needless + s.needless
        );
    }
    line
}

fn direction(
    out: &mut String,
    name: &str,
    d: &OneWay,
    sender_end: Option<&str>,
    receiver_end: Option<&str>,
) {
    let at_sender = sender_end.map_or("at the sender's end".to_string(), |f| format!("in {f}"));
    let mut line = format!(
        "  {name}: {} sent, {} arrived",
        count(d.sent, "packet"),
        d.arrived
    );
    if d.lost > 0 {
        let _ = write!(
            line,
            ", {} lost on the path (frame{} {} {at_sender}{})",
            d.lost,
            if d.lost_frames.len() == 1 { "" } else { "s" },
            list(&d.lost_frames),
            if d.lost as usize > d.lost_frames.len() {
                ", …"
            } else {
                ""
            },
        );
    } else {
        line.push_str(", none lost");
    }
    if d.unaccounted > 0 {
        let _ = write!(
            line,
            ", {} sent too near either capture's edge to tell",
            d.unaccounted
        );
    }
    if d.only_at_receiver > 0 {
        let _ = write!(
            line,
            ", {} seen only at the receiver's end",
            count(d.only_at_receiver, "packet")
        );
    }
    out.push_str(&line);
    out.push('\n');
    if let Some(s) = d.delay_ms {
        let _ = writeln!(out, "    one-way delay {}", spread(&s));
    }
    if d.retransmitted > 0 {
        let at_receiver =
            receiver_end.map_or("at the receiver's end".to_string(), |f| format!("in {f}"));
        let mut line = format!(
            "    {} sent again: {} replaced a packet lost on the path, {} had arrived the first time",
            count(d.retransmitted, "packet"),
            d.replaced_lost,
            d.needless,
        );
        if let Some(n) = d.needless_frames.first() {
            let _ = write!(
                line,
                " (frame {} {at_sender} resends what frame {} {at_receiver} shows arriving: the \
                 acknowledgement was lost or late, or the sender gave up too early)",
                n.resent_frame, n.arrived_frame
            );
        }
        out.push_str(&line);
        out.push('\n');
    }
}

fn spread(s: &Spread) -> String {
    format!(
        "p50 {}, p99 {} (min {}, max {})",
        dur_ms(s.p50),
        dur_ms(s.p99),
        dur_ms(s.min),
        dur_ms(s.max)
    )
}

fn list(frames: &[u64]) -> String {
    frames
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
