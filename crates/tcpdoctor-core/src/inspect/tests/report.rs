use super::builder::*;
use crate::inspect::{diagnose, render_text, InspectReport};
use crate::report::FindingKind;

/// A Nagle-on per-line server caught holding replies, spinning between them, with a pool to a
/// backend used unevenly, and a socket closed during sampling.
fn report() -> InspectReport {
    let mut closed = SocketBuilder::accepted(8, 40008)
        .traffic(50, 10, 2, 14, 1, |_, _| {})
        .build();
    closed.closed = true;
    let mut p = process(vec![
        listener(3),
        SocketBuilder::accepted(5, 40000)
            .traffic(301, 10, 1, 14, 1, |i, s| {
                if i % 5 == 4 {
                    s.unacked = 1;
                    s.notsent_bytes = 136;
                }
            })
            .build(),
        closed,
        SocketBuilder::connected(10, 50010, "[::1]:6379")
            .options(|o| o.nodelay = Some(true))
            .traffic(2, 3000, 450, 100, 450, |_, _| {})
            .build(),
        SocketBuilder::connected(11, 50011, "[::1]:6379")
            .options(|o| o.nodelay = Some(true))
            .traffic(2, 3000, 10, 100, 10, |_, _| {})
            .build(),
    ]);
    p.last = Some(counters(3000, 2900, 300));
    diagnose(observation(vec![p]))
}

#[test]
fn findings_are_sorted_as_analyze_sorts_them() {
    let r = report();
    let kinds: Vec<FindingKind> = r.findings.iter().map(|f| f.kind).collect();
    assert_eq!(
        kinds,
        [
            FindingKind::BusyPoll,
            FindingKind::NagleDelayedAck,
            FindingKind::PoolImbalance
        ],
        "{:#?}",
        r.findings
    );
}

#[test]
fn the_json_report_carries_the_model() {
    let r = report();
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["tool"]["name"], "tcpdoctor");
    assert_eq!(v["findings"][1]["kind"], "nagle_delayed_ack");
    assert_eq!(v["findings"][1]["file"], "pid 4242 (specimen)");
    assert_eq!(v["findings"][2]["kind"], "pool_imbalance");
    assert_eq!(v["findings"][2]["server"], "[::1]:6379");
    let p = &v["processes"][0];
    assert_eq!(p["name"], "pid 4242 (specimen)");
    assert_eq!(p["cpu"]["cpu_share"], 0.967);
    assert_eq!(p["cpu"]["data_segs_in"], 300 + 49 + 460);
    assert!(p["cpu"]["syscalls_counted"]
        .as_str()
        .unwrap()
        .contains("ioctl and epoll calls are not counted"));
    // Review item 11: recv/send on a socket are not counted either (a recv/sendall server
    // shows 0 read and 0 write syscalls).
    assert!(p["cpu"]["syscalls_counted"]
        .as_str()
        .unwrap()
        .contains("recv/send"));
    assert_eq!(p["sockets"][1]["held_samples"], 60);
    assert_eq!(p["sockets"][1]["state"], "ESTAB");
    assert_eq!(p["sockets"][2]["state"], "closed");
    assert_eq!(p["sockets"][0]["state"], "LISTEN");
    assert_eq!(p["peers"][0]["peer"], "[::1]:6379");
    assert_eq!(p["peers"][0]["connections"], 2);
    assert_eq!(p["peers"][1]["role"], "accepted");
    assert_eq!(p["peers"][1]["connections"], 2);
    let sock = &v["observation"]["processes"][0]["sockets"][1];
    assert_eq!(sock["options"]["sndbuf"]["setting"], "autotuned");
    assert_eq!(sock["role"], "accepted");
    assert_eq!(sock["local"], "127.0.0.1:7000");
}

#[test]
fn the_json_report_matches_its_schema() {
    let schema: serde_json::Value = serde_json::from_str(include_str!(
        "../../../../../schema/inspect-report.schema.json"
    ))
    .unwrap();
    let mut r = report();
    // The refused-options path too: nulls and `unknown` settings.
    let why = "kernel.yama.ptrace_scope = 1";
    r.observation.processes[0].options_refused = Some(why.into());
    r.observation.processes[0].sockets[1].options = unknown_options(why);
    r.observation.processes[0].netns = None;
    let v = serde_json::to_value(&r).unwrap();
    let mut errors = Vec::new();
    super::schema_check::check(&schema, &schema, &v, "$", &mut errors);
    assert!(errors.is_empty(), "{errors:#?}");
    // The check catches a renamed field.
    let mut renamed = v.clone();
    let f = renamed["findings"][0].as_object_mut().unwrap();
    let verdict = f.remove("verdict").unwrap();
    f.insert("verdit".into(), verdict);
    let mut errors = Vec::new();
    super::schema_check::check(&schema, &schema, &renamed, "$", &mut errors);
    assert!(errors.len() >= 2, "{errors:#?}");
}

#[test]
fn the_text_report_lays_out_sockets_options_and_findings() {
    let mut r = report();
    let why = "kernel.yama.ptrace_scope = 1: pidfd_getfd needs ptrace access";
    r.observation.processes[0].options_refused = Some(why.into());
    r.observation.processes[0].sockets[3].options = unknown_options(why);
    let r = diagnose(r.observation);
    let t = render_text(&r);
    assert!(
        t.starts_with("pid 4242 (specimen): specimen --port 7000\n"),
        "{t}"
    );
    assert!(t.contains("CPU 2.9 s (96.7% of one core)"), "{t}");
    assert!(t.contains("ioctl and epoll calls are not counted"), "{t}");
    assert_eq!(
        t.matches(why).count(),
        1,
        "the reason once per process:\n{t}"
    );
    assert!(
        t.contains("to [::1]:6379: 2 connections (busiest 98% of 920 data segments)"),
        "{t}"
    );
    for col in [
        "fd",
        "rtt/var",
        "ato",
        "unacked",
        "notsent",
        "nodelay",
        "sndbuf",
        "keepalive",
    ] {
        assert!(t.contains(col), "{col}:\n{t}");
    }
    let line = |fd: &str, what: &str| {
        t.lines()
            .filter(|l| l.trim_start().starts_with(&format!("{fd} ")))
            .any(|l| l.contains(what))
    };
    assert!(line("5", "127.0.0.1:7000"), "{t}");
    assert!(line("5", "40 ms"), "{t}");
    assert!(line("5", "16 KiB autotuned"), "{t}");
    assert!(line("5", "a write held in 60 of 301 samples"), "{t}");
    assert!(line("10", "unknown"), "{t}");
    assert!(line("8", "closed"), "{t}");
    assert!(t.contains("[CRITICAL] busy_poll"), "{t}");
    assert!(
        t.contains("[CRITICAL] nagle_delayed_ack  server→client  server 127.0.0.1:7000"),
        "{t}"
    );
    assert!(
        t.contains("rests on: TCP_NODELAY and TCP_CORK read with getsockopt"),
        "{t}"
    );
    assert!(t.contains("server 127.0.0.1:7000  (2 of 2 sockets)"), "{t}");
    assert!(
        t.contains("example: socket fd 5 (127.0.0.1:40000 → 127.0.0.1:7000)"),
        "{t}"
    );
    assert!(t.contains("(from process accounting)"), "{t}");
}

#[test]
fn a_process_without_sockets_or_findings_says_so() {
    let mut p = process(Vec::new());
    p.exited = true;
    let r = diagnose(observation(vec![p]));
    let t = render_text(&r);
    assert!(t.contains("no TCP sockets"), "{t}");
    assert!(t.contains("exited before sampling ended"), "{t}");
    assert!(t.contains("No findings"), "{t}");
}

/// What the kernel or a racing reader can hand over: counters that wrap or go backwards, time
/// that goes backwards, zeros where a divisor is expected, a socket without samples.
#[test]
fn hostile_observations_never_panic_and_stay_valid_json() {
    let schema: serde_json::Value = serde_json::from_str(include_str!(
        "../../../../../schema/inspect-report.schema.json"
    ))
    .unwrap();
    let extreme = |fd: i32| {
        SocketBuilder::connected(fd, 50000 + fd as u16, "127.0.0.1:6379")
            .traffic(3, 10, 1, 14, 1, |i, s| {
                if i == 1 {
                    s.data_segs_out = u32::MAX;
                    s.total_retrans = u32::MAX;
                    s.bytes_sent = u64::MAX;
                    s.busy_us = u64::MAX;
                    s.sndbuf_limited_us = u64::MAX;
                    s.rwnd_limited_us = u64::MAX;
                    s.delivery_rate_bps = u64::MAX;
                    s.min_rtt_us = u32::MAX;
                    s.at_ns = 0;
                }
                if i == 2 {
                    s.snd_mss = 0;
                    s.snd_cwnd = 0;
                    s.unacked = u32::MAX;
                    s.notsent_bytes = u32::MAX;
                    s.busy_us = u64::MAX;
                    s.sndbuf_limited_us = u64::MAX;
                }
            })
            .options(|o| o.sndbuf_bytes = Some(u64::MAX))
            .build()
    };
    let mut empty = SocketBuilder::accepted(7, 40000).build();
    empty.samples.clear();
    let mut p = process(vec![extreme(5), extreme(6), empty]);
    p.first = Some(counters(3000, u64::MAX / MS, u64::MAX));
    p.last = Some(counters(1000, 0, 0));
    let mut q = process(vec![extreme(8), extreme(9)]);
    q.first = Some(counters(0, 0, 0));
    q.last = Some(counters(1, u64::MAX / MS, 0));
    let r = diagnose(observation(vec![p, q]));
    let _ = render_text(&r);
    let v = serde_json::to_value(&r).unwrap();
    let mut errors = Vec::new();
    super::schema_check::check(&schema, &schema, &v, "$", &mut errors);
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn a_socket_attributed_without_a_descriptor_is_named_by_its_inode() {
    let mut sock = SocketBuilder::accepted(5, 40000)
        .traffic(301, 10, 1, 14, 1, |i, s| {
            if i % 5 == 4 {
                s.unacked = 1;
                s.notsent_bytes = 136;
            }
        })
        .build();
    sock.fd = -1;
    let mut p = process(vec![sock]);
    p.sockets_via = Some("every socket of uid 1001 in its network namespace".into());
    let r = diagnose(observation(vec![p]));
    let f = &r.findings[0];
    assert_eq!(f.example_flow.id, 0);
    assert!(
        f.evidence.facts[0].contains("(no descriptor known, inode 10005)"),
        "{}",
        f.evidence.facts[0]
    );
    let t = render_text(&r);
    assert!(
        t.contains("example: socket (no descriptor known) (127.0.0.1:40000"),
        "{t}"
    );
    assert!(!t.contains("-1"), "{t}");
    let schema: serde_json::Value = serde_json::from_str(include_str!(
        "../../../../../schema/inspect-report.schema.json"
    ))
    .unwrap();
    let mut errors = Vec::new();
    let v = serde_json::to_value(&r).unwrap();
    super::schema_check::check(&schema, &schema, &v, "$", &mut errors);
    assert!(errors.is_empty(), "{errors:#?}");
}
