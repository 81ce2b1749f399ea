use super::builder::*;
use crate::flow::Direction;
use crate::inspect::{diagnose, BufferSetting, SocketObservation};
use crate::report::{Finding, FindingKind, Severity};

fn window_findings(sockets: Vec<SocketObservation>) -> Vec<Finding> {
    diagnose(observation(vec![process(sockets)]))
        .findings
        .into_iter()
        .filter(|f| f.kind == FindingKind::WindowLimited)
        .collect()
}

/// A bulk sender busy all the time, `sndbuf_ms`/`rwnd_ms` of every 10 ms limited.
fn bulk(fd: i32, sndbuf_ms: u64, rwnd_ms: u64) -> crate::inspect::SocketObservation {
    SocketBuilder::accepted(fd, 40000 + fd as u16)
        .traffic(301, 10, 40, LOOPBACK_MSS as u64, 1, |i, s| {
            s.busy_us = i * 10_000;
            s.sndbuf_limited_us = i * sndbuf_ms * 1000;
            s.rwnd_limited_us = i * rwnd_ms * 1000;
            s.unacked = 10;
            s.snd_wnd_bytes = Some(65536);
            s.min_rtt_us = 15_000;
            s.delivery_rate_bps = 32_000_000;
        })
        .build()
}

#[test]
fn a_fixed_send_buffer_that_limits_the_flow_is_named() {
    let mut s = bulk(5, 6, 0);
    s.options.sndbuf_bytes = Some(16384);
    s.options.sndbuf = BufferSetting::Fixed {
        evidence: "SOCK_SNDBUF_LOCK set: SO_SNDBUF was set by the application".into(),
    };
    let f = window_findings(vec![listener(3), s]);
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(f.severity, Severity::Critical, "60% of the busy time");
    assert_eq!(f.direction, Direction::ServerToClient);
    assert!(
        f.verdict.contains("send buffer (SO_SNDBUF)"),
        "{}",
        f.verdict
    );
    assert!(f.verdict.contains("60%"), "{}", f.verdict);
    assert!(
        f.evidence.facts[1].contains("fixed by the application"),
        "{:?}",
        f.evidence.facts
    );
    assert!(
        f.evidence.facts[0]
            .contains("tcpi_sndbuf_limited counted 1.8 s of 3 s of tcpi_busy_time in 3 s"),
        "{}",
        f.evidence.facts[0]
    );
    assert_eq!(f.evidence.values["sndbuf_bytes"], 16384.0);
    // 32 Mbit/s (4 MB/s) × 15 ms = 60 kB per round trip, more than twice the buffer.
    assert_eq!(f.evidence.values["delivered_per_rtt_bytes"], 60000.0);
    assert_eq!(f.evidence.values["delivery_rate_bytes_per_s"], 4e6);
    assert!(
        f.evidence
            .facts
            .iter()
            .any(|x| x.contains("delivered 32 Mbit/s at a min RTT of 15 ms")),
        "{:?}",
        f.evidence.facts
    );
    assert_eq!(f.evidence.values["size_to_set_bytes"], 60000.0);
    assert!(f.fix.contains("SO_SNDBUF"), "{}", f.fix);
    assert_eq!(f.time_lost_ms, 900.0);
}

#[test]
fn the_peers_receive_window_is_named_as_such() {
    let f = window_findings(vec![bulk(5, 0, 3)]);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].severity, Severity::Warning, "30% of the busy time");
    assert!(
        f[0].verdict.contains("client's receive window"),
        "{}",
        f[0].verdict
    );
    assert_eq!(f[0].evidence.values["peer_window_bytes"], 65536.0);
    assert_eq!(f[0].evidence.values["size_to_set_bytes"], 131072.0);
}

#[test]
fn a_flow_rarely_limited_is_not_window_limited() {
    // 10% of the busy time.
    assert!(window_findings(vec![bulk(5, 1, 0)]).is_empty());
    // Limited all the time, but for 50 ms in all: below what the tick counters can tell.
    let short = SocketBuilder::accepted(5, 40000)
        .traffic(6, 10, 40, LOOPBACK_MSS as u64, 1, |i, s| {
            s.busy_us = i * 10_000;
            s.sndbuf_limited_us = i * 10_000;
        })
        .build();
    assert!(window_findings(vec![short]).is_empty());
}

#[test]
fn without_delivery_rate_the_size_says_why_it_is_not_computable() {
    let mut s = bulk(5, 6, 0);
    for t in &mut s.samples {
        t.delivery_rate_bps = 0;
    }
    let f = window_findings(vec![s]);
    assert!(f[0]
        .evidence
        .facts
        .iter()
        .any(|x| x.contains("not computable")));
    assert_eq!(f[0].evidence.values["size_to_set_bytes"], 32768.0);
}

#[test]
fn one_sample_is_judged_on_the_sockets_lifetime_counters() {
    let mut s = sample(0);
    s.busy_us = 2_000_000;
    s.rwnd_limited_us = 1_500_000;
    s.snd_wnd_bytes = Some(65536);
    let mut sock = SocketBuilder::connected(9, 50000, "192.0.2.1:443").build();
    sock.samples.push(s);
    let f = window_findings(vec![sock]);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].severity, Severity::Critical);
    assert_eq!(f[0].direction, Direction::ClientToServer);
    assert!(
        f[0].verdict.contains("server's receive window"),
        "{}",
        f[0].verdict
    );
    assert!(
        f[0].evidence.facts[0].contains("since the socket opened"),
        "{}",
        f[0].evidence.facts[0]
    );
}

/// Review item 6: an autotuned send buffer is not "twice what was set", and its fix is not
/// "remove the setsockopt".
#[test]
fn an_autotuned_send_buffer_is_not_told_to_remove_a_setsockopt() {
    let mut s = bulk(5, 6, 0);
    s.options.sndbuf_bytes = Some(4 << 20);
    s.options.sndbuf = BufferSetting::Autotuned {
        evidence: "SO_SNDBUF changed from 16384 to 4194304 bytes while sampled".into(),
    };
    let f = window_findings(vec![s]);
    assert_eq!(f.len(), 1, "{f:#?}");
    let facts = f[0].evidence.facts.join("\n");
    assert!(!facts.contains("what was set"), "{facts}");
    assert!(facts.contains("autotuned by the kernel"), "{facts}");
    assert!(!f[0].fix.contains("remove the SO_SNDBUF"), "{}", f[0].fix);
    assert!(f[0].fix.contains("net.ipv4.tcp_wmem"), "{}", f[0].fix);
    // Unknown: the fix says to remove the setsockopt only if there is one.
    let mut s = bulk(5, 6, 0);
    s.options.sndbuf = BufferSetting::Unknown {
        why: "within what autotuning gives".into(),
    };
    let f = window_findings(vec![s]);
    assert!(
        f[0].fix.contains("If the application sets SO_SNDBUF"),
        "{}",
        f[0].fix
    );
}

/// Review item 6: a kernel that does not report the peer's window (before 5.4) gives no
/// "window of 0 B" and no "set at least 0 B".
#[test]
fn an_unknown_peer_window_is_not_a_window_of_zero() {
    let mut s = bulk(5, 0, 3);
    for t in &mut s.samples {
        t.snd_wnd_bytes = None;
        t.delivery_rate_bps = 0;
    }
    let f = window_findings(vec![s]);
    assert_eq!(f.len(), 1, "{f:#?}");
    let facts = f[0].evidence.facts.join("\n");
    assert!(!facts.contains("0 B"), "{facts}");
    assert!(facts.contains("did not report the window"), "{facts}");
    assert!(!f[0].fix.contains(" 0 B"), "{}", f[0].fix);
    assert!(!f[0].evidence.values.contains_key("peer_window_bytes"));
    assert!(!f[0].evidence.values.contains_key("size_to_set_bytes"));
}
