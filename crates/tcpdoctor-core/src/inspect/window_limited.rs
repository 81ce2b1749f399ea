//! `window_limited` from the kernel's own counters: the flow had data to send and a buffer
//! stopped it.
//!
//! The kernel times three states of every sending socket (`tcp_chrono`, in jiffies, reported
//! in µs by `tcp_info`): busy (data in flight), limited by the peer's receive window
//! (`tcpi_rwnd_limited`: `tcp_write_xmit` stopped because the window was full), and limited by
//! the send buffer (`tcpi_sndbuf_limited`: everything written was already sent and the
//! application could not write more because the buffer was full — the bytes in flight were
//! capped by `SO_SNDBUF`). `tcpi_busy_time` is the sum of the three. PHYSICS §7: the flight is
//! bounded by min(sender `SO_SNDBUF`, receiver `SO_RCVBUF`), so throughput ≈ buffer / RTT.
//!
//! Rule, per socket that is not a listener:
//! 1. Over the interval, the limited time (the larger of the two counters' deltas: that is the
//!    limiter) is at least [`MIN_LIMITED_US`]: 25 ticks at the common `HZ=250`, so the tick
//!    rounding of the counters stays a few percent of it.
//! 2. It is at least [`MIN_SHARE`] of the time the flow was busy (the delta of
//!    `tcpi_busy_time`; the sampled span when the kernel reported none): a fifth of the time
//!    it had something to send, a buffer and not the network decided when it could.
//! 3. One finding per process, role, server endpoint and limiter. **Critical** when the
//!    limiter held the flow at least [`CRITICAL_SHARE`] of its busy time, else **warning**.
//!
//! The finding names the limiter (this process's send buffer, or the peer's receive window),
//! its current size (`SO_SNDBUF` as read from the socket, whether it was fixed by the
//! application; the window the peer last advertised), and the size to set: the bytes the flow
//! delivered per round trip (`tcpi_delivery_rate` × `tcpi_min_rtt`) is what the limited flow
//! achieved, so at least twice the current size, and bandwidth × RTT for the path's real
//! bandwidth. `time_lost_ms` is half the limited time: what one doubling of the buffer saves
//! while the path has room (the estimate `analyze`'s `window_limited` makes).

use std::collections::BTreeMap;

use super::interval::{
    bit_rate, bytes, flow_ref, options_source, process_name, role_name, sending_direction,
    server_of, socket_label, sockets_source, tcp_info_source, SocketInterval,
};
use super::{BufferSetting, ProcessObservation, SocketRole};
use crate::numfmt::dur_ms;
use crate::report::{Evidence, Finding, FindingKind, Severity};
use crate::stats::round3;

pub const MIN_LIMITED_US: u64 = 100_000;
pub const MIN_SHARE: f64 = 0.2;
pub const CRITICAL_SHARE: f64 = 0.5;

/// Which buffer stopped the flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Limiter {
    SendBuffer,
    ReceiveWindow,
}

#[derive(Clone, Copy)]
struct Limited<'a> {
    iv: SocketInterval<'a>,
    limiter: Limiter,
    limited_us: u64,
    busy_us: u64,
    share: f64,
}

fn judge<'a>(iv: SocketInterval<'a>) -> Option<Limited<'a>> {
    if iv.sock.role == SocketRole::Listener {
        return None;
    }
    let (limiter, limited_us) = if iv.sndbuf_limited_us >= iv.rwnd_limited_us {
        (Limiter::SendBuffer, iv.sndbuf_limited_us)
    } else {
        (Limiter::ReceiveWindow, iv.rwnd_limited_us)
    };
    let busy_us = if iv.busy_us > 0 {
        iv.busy_us
    } else {
        iv.span_ns / 1000
    };
    if limited_us < MIN_LIMITED_US || busy_us == 0 {
        return None;
    }
    let share = (limited_us as f64 / busy_us as f64).min(1.0);
    (share >= MIN_SHARE).then_some(Limited {
        iv,
        limiter,
        limited_us,
        busy_us,
        share,
    })
}

pub fn window_limited(p: &ProcessObservation) -> Vec<Finding> {
    let mut totals: BTreeMap<(u8, String), u64> = BTreeMap::new();
    let mut groups: BTreeMap<(u8, String, Limiter), Vec<Limited>> = BTreeMap::new();
    for iv in p.sockets.iter().filter_map(SocketInterval::of) {
        if iv.sock.role == SocketRole::Listener {
            continue;
        }
        let key = (iv.sock.role as u8, server_of(iv.sock));
        *totals.entry(key.clone()).or_default() += 1;
        if let Some(l) = judge(iv) {
            groups.entry((key.0, key.1, l.limiter)).or_default().push(l);
        }
    }
    groups
        .into_iter()
        .map(|((role, server, _), ls)| {
            let total = totals.get(&(role, server)).copied().unwrap_or(0);
            finding(p, &ls, total)
        })
        .collect()
}

fn setting(b: &BufferSetting) -> String {
    match b {
        BufferSetting::Fixed { evidence } => {
            format!("fixed by the application, which turns autotuning off ({evidence})")
        }
        BufferSetting::Autotuned { evidence } => format!("autotuned by the kernel ({evidence})"),
        BufferSetting::Unknown { why } => format!("fixed or autotuned: unknown ({why})"),
    }
}

fn finding(p: &ProcessObservation, ls: &[Limited], total: u64) -> Finding {
    let ex = *ls
        .iter()
        .max_by_key(|l| l.limited_us)
        .expect("a group with a limited socket");
    let iv = ex.iv;
    let s = iv.sock;
    let limited_us = ls.iter().fold(0u64, |a, l| a.saturating_add(l.limited_us));
    let worst_share = ls.iter().map(|l| l.share).fold(0.0, f64::max);
    let severity = if worst_share >= CRITICAL_SHARE {
        Severity::Critical
    } else {
        Severity::Warning
    };
    let peer = match s.role {
        SocketRole::Accepted => "client",
        _ => "server",
    };
    let min_rtt_ms = f64::from(iv.last.min_rtt_us) / 1e3;
    let delivery_bps = iv.last.delivery_rate_bps as f64;
    let delivery = delivery_bps / 8.0;
    let per_rtt = (delivery * min_rtt_ms / 1e3).round() as u64;
    let (limiter, counter, current, fixed) = match ex.limiter {
        Limiter::SendBuffer => (
            "this process's send buffer (SO_SNDBUF)".to_string(),
            "tcpi_sndbuf_limited",
            s.options.sndbuf_bytes,
            Some(&s.options.sndbuf),
        ),
        Limiter::ReceiveWindow => (
            format!(
                "the {peer}'s receive window (its SO_RCVBUF, or its application reading slowly)"
            ),
            "tcpi_rwnd_limited",
            iv.last.snd_wnd_bytes.map(u64::from),
            None,
        ),
    };
    let verdict = format!(
        "Window-limited: the kernel counted {} of this socket's {} busy sending ({:.0}%) limited \
         by {limiter}",
        dur_ms(ex.limited_us as f64 / 1e3),
        dur_ms(ex.busy_us as f64 / 1e3),
        ex.share * 100.0
    );
    let mut facts = vec![format!(
        "{}: {counter} counted {} of {} of tcpi_busy_time {} ({})",
        socket_label(s),
        dur_ms(ex.limited_us as f64 / 1e3),
        dur_ms(ex.busy_us as f64 / 1e3),
        iv.over(),
        iv.sampled()
    )];
    facts.push(match (ex.limiter, current) {
        (Limiter::SendBuffer, Some(n)) => format!(
            "SO_SNDBUF is {} ({n} B as getsockopt returns it{}), {}",
            bytes(n),
            match fixed {
                Some(BufferSetting::Fixed { .. }) => ", twice what was set",
                Some(BufferSetting::Autotuned { .. }) => "",
                _ => "; twice the request if it was set by hand",
            },
            fixed.map(setting).unwrap_or_default()
        ),
        (Limiter::SendBuffer, None) => format!(
            "SO_SNDBUF could not be read ({})",
            p.options_refused
                .as_deref()
                .unwrap_or("the kernel did not give it")
        ),
        (Limiter::ReceiveWindow, Some(n)) => format!(
            "the {peer} last advertised a window of {} ({n} B); whether its buffer is fixed is \
             the {peer}'s to check",
            bytes(n)
        ),
        (Limiter::ReceiveWindow, None) => format!(
            "the {peer}'s advertised window is not known: this kernel's tcp_info did not report \
             the window (tcpi_snd_wnd, Linux 5.4 and later)"
        ),
    });
    let bdp = if delivery > 0.0 && min_rtt_ms > 0.0 {
        facts.push(format!(
            "delivered {} at a min RTT of {}: {} per round trip — what the limited flow \
             achieved, so the path may carry more",
            bit_rate(delivery_bps),
            dur_ms(min_rtt_ms),
            bytes(per_rtt)
        ));
        Some(per_rtt)
    } else {
        facts.push(
            "the size to set is not computable from this socket: the kernel reported no \
             delivery rate or no min RTT"
                .to_string(),
        );
        None
    };
    if ls.len() > 1 || total > 1 {
        facts.push(format!(
            "{} of {total} {} sockets of this server were limited the same way",
            ls.len(),
            role_name(s.role)
        ));
    }
    facts.retain(|f| !f.is_empty());
    let size = current.map(|c| c.saturating_mul(2)).max(bdp).unwrap_or(0);
    let rtt_for_example = min_rtt_ms.max(1.0);
    let gbit_bdp = (1e9 / 8.0 * rtt_for_example / 1e3) as u64;
    let path = format!(
        "bandwidth × RTT for the path (1 Gbit/s × {} = {})",
        dur_ms(rtt_for_example),
        bytes(gbit_bdp)
    );
    let current_name = match ex.limiter {
        Limiter::SendBuffer => "the current size",
        Limiter::ReceiveWindow => "the window seen",
    };
    let at_least = |why: &str| {
        let twice = current.map_or(0, |c| c.saturating_mul(2));
        match size {
            0 => String::new(),
            _ if twice >= size => {
                format!("at least {} (twice {current_name}{why}), and ", bytes(size))
            }
            _ => format!(
                "at least {} (the bytes the flow delivered per round trip{}), and ",
                bytes(size),
                if twice > 0 {
                    format!(", more than twice {current_name}")
                } else {
                    String::new()
                }
            ),
        }
    };
    let wmem = "net.ipv4.tcp_wmem's maximum (and net.core.wmem_max for a size set by hand)";
    let fix = match (ex.limiter, fixed) {
        (Limiter::SendBuffer, Some(BufferSetting::Fixed { .. })) => format!(
            "Let the kernel size the send buffer: remove the SO_SNDBUF setsockopt (a fixed value \
             turns autotuning off) and check that {wmem} allows bandwidth × RTT; if a fixed \
             size is needed, set {}{path}.",
            at_least("; each doubling roughly doubles throughput until the path is full")
        ),
        (Limiter::SendBuffer, Some(BufferSetting::Autotuned { .. })) => format!(
            "The kernel already sizes this send buffer (autotuned) and stopped at its ceiling: \
             raise {wmem} so autotuning can reach {}{path}.",
            at_least("")
        ),
        (Limiter::SendBuffer, _) => format!(
            "If the application sets SO_SNDBUF, remove that setsockopt (a fixed value turns \
             autotuning off) or set {}{path}; if it does not, raise {wmem} so autotuning can \
             reach that size.",
            at_least("")
        ),
        (Limiter::ReceiveWindow, _) => format!(
            "On the {peer}: do not set SO_RCVBUF (a fixed value turns receive autotuning off), \
             check that net.ipv4.tcp_rmem's maximum (and net.core.rmem_max) allows bandwidth × \
             RTT, or set {}{path} before connect()/listen(), since the window scale is fixed in \
             the SYN; if its application reads slowly, read promptly.",
            at_least("")
        ),
    };
    let mut evidence = Evidence {
        facts,
        rests_on: vec![
            format!(
                "{}: tcpi_busy_time, tcpi_rwnd_limited, tcpi_sndbuf_limited, \
                 tcpi_delivery_rate, tcpi_min_rtt, the peer's window",
                tcp_info_source(p)
            ),
            options_source("SO_SNDBUF", s.fd),
            sockets_source(p),
        ],
        ..Evidence::default()
    };
    evidence
        .counts
        .insert("sockets_limited".into(), ls.len() as u64);
    let v = &mut evidence.values;
    v.insert("limited_ms".into(), round3(ex.limited_us as f64 / 1e3));
    v.insert("busy_ms".into(), round3(ex.busy_us as f64 / 1e3));
    v.insert("limited_share".into(), round3(ex.share));
    v.insert("min_rtt_ms".into(), min_rtt_ms);
    v.insert("delivery_rate_bytes_per_s".into(), delivery);
    if let Some(n) = current {
        let key = match ex.limiter {
            Limiter::SendBuffer => "sndbuf_bytes",
            Limiter::ReceiveWindow => "peer_window_bytes",
        };
        v.insert(key.into(), n as f64);
    }
    if let Some(b) = bdp {
        v.insert("delivered_per_rtt_bytes".into(), b as f64);
    }
    if size > 0 {
        v.insert("size_to_set_bytes".into(), size as f64);
    }
    Finding {
        kind: FindingKind::WindowLimited,
        severity,
        file: process_name(p),
        server: server_of(s),
        direction: sending_direction(s),
        flows_affected: ls.len() as u64,
        flows_total: total,
        example_flow: flow_ref(s),
        verdict,
        time_lost_ms: round3(limited_us as f64 / 1e3 / 2.0),
        evidence,
        fix,
    }
}
