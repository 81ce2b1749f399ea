use super::builder::*;
use crate::flow::Direction;
use crate::inspect::diagnose;
use crate::inspect::interval::held_by_nagle;
use crate::report::{Finding, FindingKind, Severity};

fn nagle_findings(sockets: Vec<crate::inspect::SocketObservation>) -> Vec<Finding> {
    let r = diagnose(observation(vec![process(sockets)]));
    r.findings
        .into_iter()
        .filter(|f| f.kind == FindingKind::NagleDelayedAck)
        .collect()
}

/// A per-line server: one 14-byte segment out and one request in every 10 ms, and every
/// `every`-th sample catches a 136-byte write waiting behind one unacknowledged segment.
fn per_line_server(fd: i32, port: u16, every: u64) -> SocketBuilder {
    SocketBuilder::accepted(fd, port).traffic(301, 10, 1, 14, 1, move |i, s| {
        if every > 0 && i % every == every - 1 {
            s.unacked = 1;
            s.notsent_bytes = 136;
        }
    })
}

#[test]
fn a_nagle_on_server_caught_holding_replies_is_critical() {
    let f = nagle_findings(vec![listener(3), per_line_server(5, 40000, 5).build()]);
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(f.severity, Severity::Critical);
    assert_eq!(f.file, "pid 4242 (specimen)");
    assert_eq!(f.server, "127.0.0.1:7000");
    assert_eq!(f.direction, Direction::ServerToClient);
    assert_eq!((f.flows_affected, f.flows_total), (1, 1));
    assert_eq!(f.example_flow.id, 5);
    assert_eq!(f.example_flow.client, "127.0.0.1:40000");
    assert!(
        f.verdict.contains("accepted sockets") && f.verdict.contains("TCP_NODELAY off"),
        "{}",
        f.verdict
    );
    assert_eq!(f.evidence.counts["held_samples"], 60);
    assert_eq!(f.evidence.counts["samples"], 301);
    assert!(f.evidence.facts[0].contains("127.0.0.1:7000 -> 127.0.0.1:40000 (fd 5, inode 10005)"));
    assert!(
        f.evidence.facts[1].contains("unacked 1"),
        "{}",
        f.evidence.facts[1]
    );
    assert!(
        f.evidence.facts[1].contains("notsent 136 B"),
        "{}",
        f.evidence.facts[1]
    );
    assert!(f.evidence.rests_on[0].contains("pidfd_getfd"));
    assert!(f.evidence.rests_on[1].contains("sock_diag"));
    assert_eq!(f.evidence.values["mean_write_bytes"], 14.0);
    // 60 of 301 samples over 3 s: about 0.6 s held.
    assert!((f.time_lost_ms - 598.0).abs() < 1.0, "{}", f.time_lost_ms);
}

#[test]
fn a_hold_caught_now_and_then_is_a_warning() {
    let f = nagle_findings(vec![per_line_server(5, 40000, 100).build()]);
    assert_eq!(f[0].severity, Severity::Warning);
    assert_eq!(f[0].evidence.counts["held_samples"], 3);
}

#[test]
fn nagle_on_with_small_writes_never_caught_is_a_risk() {
    // Two segments out per request in: the replies leave in pieces.
    let pieces = SocketBuilder::accepted(5, 40000).traffic(301, 10, 2, 14, 1, |_, _| {});
    let f = nagle_findings(vec![pieces.build()]);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].severity, Severity::Info);
    assert_eq!(f[0].time_lost_ms, 0.0);
    assert!(
        f[0].verdict.contains("a risk, not a measured stall"),
        "{}",
        f[0].verdict
    );
}

/// The fixed twin with Nagle left on: one segment per request, never caught holding. Nagle
/// has nothing to hold there; naming it would fail a `--fail-on nagle_delayed_ack` gate for a
/// server that does not stall.
#[test]
fn nagle_on_with_one_segment_per_reply_and_no_hold_is_not_named() {
    let f = nagle_findings(vec![per_line_server(5, 40000, 0).build()]);
    assert!(f.is_empty(), "{f:#?}");
}

#[test]
fn a_client_with_nagle_on_names_its_server() {
    let s = SocketBuilder::connected(9, 50000, "[::1]:6379")
        .traffic(101, 10, 1, 30, 1, |i, s| {
            if i == 50 {
                s.unacked = 1;
                s.notsent_bytes = 30;
            }
        })
        .build();
    let f = nagle_findings(vec![s]);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].server, "[::1]:6379");
    assert_eq!(f[0].direction, Direction::ClientToServer);
    assert!(
        f[0].verdict.contains("connections to [::1]:6379"),
        "{}",
        f[0].verdict
    );
}

#[test]
fn nodelay_on_or_corked_is_not_nagle() {
    let on = per_line_server(5, 40000, 5).options(|o| o.nodelay = Some(true));
    assert!(nagle_findings(vec![on.build()]).is_empty());
    let corked = per_line_server(5, 40000, 5).options(|o| o.cork = Some(true));
    assert!(nagle_findings(vec![corked.build()]).is_empty());
}

#[test]
fn nodelay_unknown_is_said_not_guessed() {
    let why = "kernel.yama.ptrace_scope = 1: pidfd_getfd needs ptrace access";
    let s = per_line_server(5, 40000, 5).options(|o| *o = unknown_options(why));
    let mut p = process(vec![s.build()]);
    p.options_refused = Some(why.into());
    let r = diagnose(observation(vec![p]));
    assert!(r.findings.is_empty(), "{:#?}", r.findings);
    let notes = &r.processes[0].notes;
    assert!(
        notes
            .iter()
            .any(|n| n.contains("Nagle could not be checked on 1 socket")),
        "{notes:?}"
    );
    assert!(
        notes
            .iter()
            .any(|n| n == &format!("socket options unknown: {why}")),
        "{notes:?}"
    );
    // What needs no ptrace is still there: the held writes tcp_info showed.
    assert_eq!(r.processes[0].sockets[0].held_samples, 60);
}

#[test]
fn a_bulk_sender_held_by_its_window_is_not_nagle() {
    // Full segments, the congestion window full, more than an MSS waiting.
    let bulk = SocketBuilder::accepted(5, 40000)
        .traffic(301, 10, 40, LOOPBACK_MSS as u64, 1, |_, s| {
            s.unacked = 10;
            s.snd_cwnd = 10;
            s.notsent_bytes = 200_000;
        })
        .build();
    assert!(nagle_findings(vec![bulk]).is_empty());
    let mut s = sample(0);
    s.unacked = 10;
    s.snd_cwnd = 10;
    s.notsent_bytes = 100;
    assert!(!held_by_nagle(&s), "window full: not Nagle");
    s.snd_cwnd = 20;
    assert!(held_by_nagle(&s));
    s.notsent_bytes = LOOPBACK_MSS;
    assert!(
        !held_by_nagle(&s),
        "a full segment waiting is not held by Nagle"
    );
    s.notsent_bytes = 100;
    s.unacked = 0;
    assert!(!held_by_nagle(&s), "nothing in flight: Nagle sends at once");
    s.unacked = 1;
    s.state = 10;
    assert!(!held_by_nagle(&s), "a listener holds nothing");
}

#[test]
fn a_stream_one_way_is_not_request_response() {
    let s = SocketBuilder::accepted(5, 40000)
        .traffic(301, 10, 1, 14, 0, |i, s| {
            if i % 5 == 4 {
                s.unacked = 1;
                s.notsent_bytes = 136;
            }
        })
        .build();
    assert!(nagle_findings(vec![s]).is_empty());
}

#[test]
fn sockets_of_one_server_make_one_finding() {
    let f = nagle_findings(vec![
        listener(3),
        per_line_server(5, 40000, 5).build(),
        // Never caught, but its replies leave in pieces (two segments per request).
        SocketBuilder::accepted(6, 40001)
            .traffic(301, 10, 2, 14, 1, |_, _| {})
            .build(),
        per_line_server(7, 40002, 0)
            .options(|o| o.nodelay = Some(true))
            .build(),
    ]);
    assert_eq!(f.len(), 1);
    assert_eq!((f[0].flows_affected, f[0].flows_total), (2, 3));
    assert_eq!(f[0].example_flow.id, 5, "the socket caught holding");
    assert_eq!(f[0].evidence.counts["sockets_caught_holding"], 1);
    assert_eq!(f[0].severity, Severity::Warning, "60 of 602 samples");
}

#[test]
fn one_sample_is_judged_on_the_sockets_lifetime_counters() {
    // `inspect` without --duration: one sample, cumulative counters since the socket opened.
    let mut s = sample(0);
    s.data_segs_out = 500;
    s.bytes_sent = 500 * 14;
    s.data_segs_in = 500;
    s.unacked = 1;
    s.notsent_bytes = 136;
    let mut sock = SocketBuilder::accepted(5, 40000).build();
    sock.samples.push(s);
    let r = diagnose(observation(vec![process(vec![sock])]));
    let f: Vec<&Finding> = r
        .findings
        .iter()
        .filter(|f| f.kind == FindingKind::NagleDelayedAck)
        .collect();
    assert_eq!(f.len(), 1, "{:#?}", r.findings);
    // Caught in the one sample, but one sample is no share: a warning, not critical.
    assert_eq!(f[0].severity, Severity::Warning);
    assert!(
        f[0].evidence.facts[2].contains("since the socket opened"),
        "{}",
        f[0].evidence.facts[2]
    );
    assert!(r.processes[0].sockets[0].lifetime);
    assert_eq!(r.processes[0].sockets[0].data_segs_out, 500);
}

#[test]
fn evidence_says_how_the_sockets_and_tcp_info_were_read() {
    let mut p = process(vec![per_line_server(5, 40000, 5).build()]);
    let r = diagnose(observation(vec![p.clone()]));
    let rests = &r.findings[0].evidence.rests_on;
    assert!(
        rests[1].starts_with("tcp_info over netlink sock_diag"),
        "{rests:?}"
    );
    assert!(rests[2].contains("/proc/PID/fd"), "{rests:?}");
    p.tcp_info_via = Some(
        "getsockopt(TCP_INFO) on pidfd_getfd duplicates (its network namespace could not be \
         entered)"
            .into(),
    );
    p.sockets_via = Some("every socket of uid 1001 in its network namespace".into());
    let r = diagnose(observation(vec![p]));
    let rests = &r.findings[0].evidence.rests_on;
    assert!(
        rests[1].starts_with("tcp_info by getsockopt(TCP_INFO) on pidfd_getfd duplicates"),
        "{rests:?}"
    );
    assert!(rests[2].contains("every socket of uid 1001"), "{rests:?}");
    let notes = &r.processes[0].notes;
    assert!(
        notes.iter().any(|n| n.contains("every socket of uid 1001")
            && n.contains("some may belong to another process")),
        "{notes:?}"
    );
}

#[test]
fn shares_count_the_samples_taken_not_the_ones_stored() {
    // A client doing a few exchanges then pausing: 11 distinct samples stored, 6 of them
    // caught holding, but the sampler read the socket 150 times (its idle repeats not
    // stored). 6 of 150 is a warning; 6 of 11 would have been critical.
    let mut s = per_line_server(5, 40000, 2).build();
    s.samples.truncate(11);
    let last = s.samples.last().expect("samples").at_ns;
    assert_eq!(last, 100 * MS);
    s.samples[10].at_ns = 3000 * MS;
    s.samples_taken = 150;
    s.held_taken = 5;
    let f = nagle_findings(vec![s]);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].severity, Severity::Warning);
    assert_eq!(f[0].evidence.counts["samples"], 150);
    assert_eq!(f[0].evidence.counts["held_samples"], 5);
    // 5 of 150 samples over 3 s: 100 ms, not 5/11 of it.
    assert!(
        (f[0].time_lost_ms - 100.0).abs() < 1.0,
        "{}",
        f[0].time_lost_ms
    );
    let every = f[0].evidence.rests_on[1].clone();
    assert!(every.contains("150 samples every 20.1"), "{every}");
}

#[test]
fn nodelay_read_only_before_the_socket_sent_data_is_not_taken_as_its_writes_options() {
    let mut s = per_line_server(5, 40000, 5).build();
    s.options_before_data = true;
    s.closed = true;
    let r = diagnose(observation(vec![process(vec![s])]));
    assert!(
        !r.findings
            .iter()
            .any(|f| f.kind == FindingKind::NagleDelayedAck),
        "{:#?}",
        r.findings
    );
    assert!(
        r.processes[0]
            .notes
            .iter()
            .any(|n| n.contains("only before it sent data")),
        "{:?}",
        r.processes[0].notes
    );
}

/// Review item 5: a sub-MSS write that does not fit the peer's advertised window waits for
/// the window (`tcp_snd_wnd_test`), not for Nagle; when the kernel reports the window, such a
/// sample is not counted as held by Nagle.
#[test]
fn a_write_waiting_for_the_peers_window_is_not_held_by_nagle() {
    let mut s = sample(0);
    s.unacked = 1;
    s.notsent_bytes = 136;
    // 14 bytes in flight: 1014 sent, 1001 acknowledged (the SYN counts as one).
    s.bytes_sent = 1014;
    s.bytes_acked = 1001;
    s.snd_wnd_bytes = Some(65536);
    assert!(held_by_nagle(&s));
    s.snd_wnd_bytes = Some(149);
    assert!(!held_by_nagle(&s), "14 in flight + 136 waiting > 149");
    s.snd_wnd_bytes = Some(150);
    assert!(held_by_nagle(&s), "14 + 136 fit a window of 150");
    s.snd_wnd_bytes = Some(0);
    assert!(!held_by_nagle(&s), "a zero window");
    s.snd_wnd_bytes = None;
    assert!(held_by_nagle(&s), "window unknown (before 5.4): as before");
    // A whole server whose waiting replies met a closed window: no hold counted.
    let sock = SocketBuilder::accepted(5, 40000)
        .traffic(301, 10, 1, 14, 1, |i, s| {
            s.snd_wnd_bytes = Some(0);
            if i % 5 == 4 {
                s.unacked = 1;
                s.notsent_bytes = 136;
            }
        })
        .build();
    let f = nagle_findings(vec![listener(3), sock]);
    assert!(
        f.iter().all(|f| f.evidence.counts["held_samples"] == 0),
        "{f:#?}"
    );
}
