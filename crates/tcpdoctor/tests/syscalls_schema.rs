//! The run report's `syscalls` block against schema/run-report.schema.json, until a traced
//! `run` can produce one end to end: a scenario whose server polled SIOCOUTQ, one whose
//! server worked, one that could not be traced. The schema is strict: a field it does not
//! know fails it.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use tcpdoctor_core::bench::{LatencyHistogram, RunMeasurements, RunResult};
use tcpdoctor_core::run::{log_buckets, Figures, RunReport, RunSettings, ScenarioResult};
use tcpdoctor_core::syscalls::{
    ioctl, sockopt, summarize, Call, CallKind, Trace, TraceStatus, TracedProcess, TracedSocket,
};
use tcpdoctor_core::time::Timestamp;

fn scenario(name: &str) -> ScenarioResult {
    let mut m = RunMeasurements {
        measured: Duration::from_secs(1),
        elapsed: Duration::from_secs(1),
        per_step: vec![LatencyHistogram::default()],
        ..Default::default()
    };
    for _ in 0..30 {
        m.overall.record(Duration::from_millis(41));
        m.per_step[0].record(Duration::from_millis(41));
    }
    let bench = RunResult::new(1, &["line".to_string()], &m);
    ScenarioResult {
        name: name.to_string(),
        definition: name.to_string(),
        path: "driver → server".to_string(),
        figures: Figures::of(&bench, &m.overall),
        latency_histogram: log_buckets(&m.overall),
        bench,
        repeat: None,
        capture: None,
        capture_note: Some("no capture".into()),
        server_end: None,
        chunks: None,
        server_cpu: None,
        server_sockets: None,
        syscalls: None,
        findings: Vec::new(),
    }
}

/// A server on 127.0.0.1:7000 serving 30 requests; `polls` SIOCOUTQ polls after each reply.
fn server_trace(polls: u64) -> Trace {
    let addr = |s: &str| -> Option<SocketAddr> { s.parse().ok() };
    let t0 = Timestamp(1_700_000_000_000_000_000);
    let mut calls = Vec::new();
    let mut at = t0;
    let mut push = |kind: CallKind, fd: i32, ret: i64, arg: i64, value: i64, socket| {
        calls.push(Call {
            at,
            took_ns: 1_000,
            pid: 100,
            tid: 100,
            kind,
            fd,
            ret,
            arg,
            value,
            socket,
        });
        at = at.plus(Duration::from_micros(20));
    };
    let nodelay = (sockopt::IPPROTO_TCP << 32 | sockopt::TCP_NODELAY) as i64;
    push(CallKind::Setsockopt, 3, 0, nodelay, 1, Some(0));
    push(CallKind::Accept, 3, 4, 0, -1, Some(0));
    for _ in 0..30 {
        push(CallKind::Read, 4, 6, 4096, -1, Some(1));
        push(CallKind::Write, 4, 20, 20, -1, Some(1));
        push(CallKind::Write, 4, 3, 3, -1, Some(1));
        for _ in 0..polls {
            push(CallKind::Ioctl, 4, 0, ioctl::SIOCOUTQ as i64, 3, Some(1));
        }
        push(CallKind::EpollWait, 5, 0, 0, -1, None);
    }
    let n = calls.len() as u64;
    let socket = |fd: i32, remote: Option<SocketAddr>| TracedSocket {
        pid: 100,
        fd,
        inode: 1000 + fd as u64,
        local: addr("127.0.0.1:7000"),
        remote,
        first_seen: t0,
        from_start: true,
    };
    Trace {
        setup: Vec::new(),
        status: TraceStatus::Traced,
        processes: vec![TracedProcess {
            pid: 100,
            name: "server".into(),
            threads: 2,
            ended: Some("exited 0".into()),
        }],
        sockets: vec![socket(3, None), socket(4, addr("127.0.0.1:50000"))],
        calls,
        dropped: 0,
        traced_calls: n,
        tracer_ns: n * 4_000,
        started: t0,
        ended: at,
    }
}

fn report() -> serde_json::Value {
    let mut polling = scenario("spin");
    polling.syscalls = Some(summarize(&server_trace(1000), Some(30)));
    let mut work = scenario("work");
    work.syscalls = Some(summarize(&server_trace(0), Some(30)));
    let mut refused = scenario("refused");
    refused.syscalls = Some(summarize(
        &Trace::not_traced(TraceStatus::Unavailable {
            reason: "ptrace refused (kernel.yama.ptrace_scope = 3)".into(),
        }),
        Some(30),
    ));
    let settings = RunSettings {
        command: "run".into(),
        target: "127.0.0.1:7000".into(),
        script: "line".into(),
        script_digest: None,
        server: Some("./server".into()),
        scenarios: vec!["spin".into(), "work".into(), "refused".into()],
        requests: 30,
        repeat: 1,
        connections: 1,
        pipeline: 1,
        output_dir: "out".into(),
    };
    let r = RunReport::new(settings, vec![polling, work, refused]);
    serde_json::to_value(&r).expect("json")
}

fn violations(v: &serde_json::Value) -> Vec<String> {
    let text = std::fs::read_to_string(common::repo().join("schema/run-report.schema.json"))
        .expect("schema");
    let schema: serde_json::Value = serde_json::from_str(&text).expect("schema is JSON");
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    validator.iter_errors(v).map(|e| e.to_string()).collect()
}

#[test]
fn the_syscalls_block_validates_against_the_run_schema() {
    let v = report();
    common::validate_with("run-report.schema.json", &v);
    let s = &v["scenarios"];
    assert_eq!(s[0]["syscalls"]["polling"]["verdict"], "polling");
    assert_eq!(s[0]["syscalls"]["polling"]["label"], "ioctl(SIOCOUTQ)");
    assert_eq!(
        s[0]["syscalls"]["sockets"][1]["counts"]["ioctl(SIOCOUTQ)"],
        30_000
    );
    assert_eq!(
        s[0]["syscalls"]["sockets"][1]["nodelay"]["from_listener"],
        true
    );
    assert_eq!(
        s[0]["syscalls"]["sockets"][1]["writes_per_response"]["p50"],
        2.0
    );
    assert_eq!(s[1]["syscalls"]["polling"]["verdict"], "real_work");
    assert_eq!(s[2]["syscalls"]["status"]["state"], "unavailable");
    assert!(s[2]["syscalls"].get("polling").is_none());
}

#[test]
fn the_schema_refuses_what_it_does_not_know() {
    let mut v = report();
    v["scenarios"][0]["syscalls"]["sockets"][1]["counts"]["write"] = (-1).into();
    v["scenarios"][1]["syscalls"]["sockets"][1]["nodelay"]["sometimes"] = true.into();
    v["scenarios"][2]["syscalls"]["status"] = serde_json::json!({"state": "unavailable"});
    let errors = violations(&v);
    assert_eq!(errors.len(), 3, "{errors:#?}");
}
