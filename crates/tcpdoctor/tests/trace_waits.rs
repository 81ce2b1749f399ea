//! The filter traps a readiness wait only when it does not wait (issue 27; filter.rs rule 4):
//! a CPython program polling an epoll set with timeout 0 is seen doing it every time, the
//! same program's waits that block (1 ms) cost no stop and are not counted.

mod common;

use common::trace::trace_run;

#[test]
fn only_zero_timeout_waits_are_trapped() {
    let test = "trace_waits_zero_timeout";
    if !common::has_python3(test) {
        return;
    }
    let script = "import select\n\
                  e = select.epoll()\n\
                  for _ in range(40): e.poll(0)\n\
                  for _ in range(25): e.poll(0.001)\n";
    let (status, err, report) = trace_run(&["python3", "-c", script]);
    assert!(status.success(), "{err}");
    let report = report.expect("a report");
    let waits: u64 = report["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| p["counts"]["epoll_wait"].as_u64().unwrap_or(0))
        .sum();
    let empty: u64 = report["processes"]
        .as_array()
        .expect("processes")
        .iter()
        .map(|p| p["counts"]["epoll_wait(timeout 0)=0"].as_u64().unwrap_or(0))
        .sum();
    assert_eq!(
        waits, 40,
        "the 40 zero-timeout polls, not the 25 waits: {report:#}"
    );
    assert_eq!(empty, 40, "{report:#}");
}
