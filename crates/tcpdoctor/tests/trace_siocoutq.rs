//! The mechanism of a busy server, seen in its system calls: a C server that polls
//! ioctl(SIOCOUTQ) after each reply until its send queue drains (testdata/servers/
//! siocoutq_server.c) makes many such calls per request under `tcpdoctor trace`; its twin that
//! does real work of about the same cost instead (work_server.c) makes none. Both reply in two
//! writes with Nagle on, so the second write waits for the client's delayed ACK.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::trace::{compile, sockets, traced_server, wait_bounded};
use serde_json::Value;

const REQUESTS: usize = 10;

/// Serves REQUESTS requests on one connection under `tcpdoctor trace` (the server exits after
/// it); the report.
fn traced_requests(server: &str, extra: &[&str]) -> Value {
    let prog = compile(server);
    let mut args = vec!["0", "1"];
    args.extend_from_slice(extra);
    let mut traced = traced_server(&prog, &args);
    let mut conn = BufReader::new(TcpStream::connect(traced.addr).expect("connect"));
    for i in 0..REQUESTS {
        conn.get_mut()
            .write_all(format!("req{i}\n").as_bytes())
            .expect("send");
        let mut head = String::new();
        conn.read_line(&mut head).expect("read");
        assert_eq!(head, format!("200 req{i}\r\n"));
        let mut end = String::new();
        conn.read_line(&mut end).expect("read");
        assert_eq!(end, ".\r\n");
    }
    drop(conn);
    let status = wait_bounded(&mut traced.tcpdoctor, Duration::from_secs(60), server);
    assert!(status.success(), "{server}: {status:?}");
    serde_json::from_slice(&std::fs::read(&traced.report).expect("report")).expect("JSON")
}

/// (SIOCOUTQ ioctls, sends) on the server's one accepted connection.
fn polls_and_sends(report: &Value) -> (u64, u64) {
    let socks = sockets(report);
    let conn: Vec<_> = socks.iter().filter(|s| s.remote.is_some()).collect();
    assert_eq!(conn.len(), 1, "one accepted connection: {socks:#?}");
    let c = conn[0];
    // "ioctl(SIOCOUTQ)" once the report names requests; "ioctl" before (the servers make no
    // other ioctl).
    let polls = c.counts.get("ioctl(SIOCOUTQ)").copied().unwrap_or(0)
        + c.counts.get("ioctl").copied().unwrap_or(0);
    (polls, c.count("sendto"))
}

#[test]
fn the_siocoutq_spinner_polls_many_times_per_request_and_the_working_twin_never() {
    let spinner = traced_requests("siocoutq_server", &[]);
    let (polls, sends) = polls_and_sends(&spinner);
    assert_eq!(sends, 2 * REQUESTS as u64, "two writes per reply");
    assert!(
        polls >= 10 * REQUESTS as u64,
        "the spinner polled SIOCOUTQ {polls} times for {REQUESTS} requests: {spinner:#}"
    );

    let worker = traced_requests("work_server", &[]);
    let (polls, sends) = polls_and_sends(&worker);
    assert_eq!(sends, 2 * REQUESTS as u64, "two writes per reply");
    assert_eq!(polls, 0, "the working server polled: {worker:#}");
}
