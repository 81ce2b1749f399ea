//! The counts of `tcpdoctor trace` cross-checked against strace on the same deterministic
//! programs (testdata/servers/pingpong.c, forkthreads.c): for every call both can see, the
//! calls made on TCP sockets are the same number, exactly — and equal to what the program's
//! own structure says they must be. strace is the independent witness: it skips without it
//! unless TCPDOCTOR_REQUIRE_TOOLS is set (.ci/run installs strace).

mod common;

use std::collections::BTreeMap;

use common::trace::{compile, strace_available, strace_tcp_counts, total, trace_run};

/// The calls compared (strace's names; `accept4` is counted as `accept`).
const CALLS: &[&str] = &[
    "write",
    "sendto",
    "recvfrom",
    "ioctl",
    "accept",
    "accept4",
    "connect",
    "setsockopt",
];

fn traced_counts(command: &[&str]) -> BTreeMap<String, u64> {
    let (status, stderr, report) = trace_run(command);
    assert!(status.success(), "{command:?} traced: {status:?} {stderr}");
    let report = report.unwrap_or_else(|| panic!("no report; stderr: {stderr}"));
    CALLS
        .iter()
        .filter(|c| **c != "accept4")
        .map(|c| (c.to_string(), total(&report, c)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

#[test]
fn pingpong_counts_equal_strace_and_the_programs_own_structure() {
    let test = "pingpong_counts_equal_strace_and_the_programs_own_structure";
    let prog = compile("pingpong");
    let rounds = 300u64;
    let command = [prog.to_str().unwrap(), "300"];
    let ours = traced_counts(&command);
    // What the program must do (its header comment): client + server.
    let expected: BTreeMap<String, u64> = [
        ("setsockopt", 2),
        ("connect", 1),
        ("accept", 1),
        ("sendto", rounds),
        ("recvfrom", rounds + rounds + 1),
        ("ioctl", rounds),
        ("write", rounds),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    assert_eq!(ours, expected, "tcpdoctor trace's counts on TCP sockets");
    if !strace_available(test) {
        return;
    }
    let theirs = strace_tcp_counts(&command, CALLS);
    assert_eq!(
        ours, theirs,
        "tcpdoctor trace vs strace -f on the same program"
    );
}

#[test]
fn forks_and_threads_counts_equal_strace() {
    let test = "forks_and_threads_counts_equal_strace";
    let prog = compile("forkthreads");
    let command = [prog.to_str().unwrap(), "3", "4", "25"];
    let ours = traced_counts(&command);
    assert_eq!(ours.get("write"), Some(&(3 * 4 * 25)), "{ours:?}");
    assert_eq!(ours.get("connect"), Some(&12), "{ours:?}");
    assert_eq!(ours.get("accept"), Some(&12), "{ours:?}");
    if !strace_available(test) {
        return;
    }
    // The server's read(2) calls are not compared (how the kernel coalesces the writers'
    // bytes decides their number): `read` is not in CALLS.
    let theirs = strace_tcp_counts(&command, CALLS);
    assert_eq!(
        ours, theirs,
        "tcpdoctor trace vs strace -f on the same program"
    );
}
