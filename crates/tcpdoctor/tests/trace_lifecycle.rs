//! `tcpdoctor trace` over a traced program's life: forks and threads followed; a program
//! that exits, or is killed, mid-trace (tcpdoctor reports what it saw and exits with the
//! program's status); tcpdoctor itself killed (the program dies with it rather than run on
//! with every trapped call failing); programs that cannot be started (a clear error, exit 2).
//! Every wait is bounded; none is a sleep standing in for readiness.

mod common;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::time::{Duration, Instant};

use common::trace::{
    compile, process_gone, sockets, total, trace_run, traced_server, wait_bounded,
};

/// Sends `line` to the line server and reads its reply, up to the ".\r\n" that ends it.
fn request(conn: &mut BufReader<TcpStream>, line: &str) -> String {
    conn.get_mut()
        .write_all(format!("{line}\n").as_bytes())
        .expect("send the request");
    let mut reply = String::new();
    loop {
        let mut l = String::new();
        assert!(
            conn.read_line(&mut l).expect("read the reply") > 0,
            "closed"
        );
        if l == ".\r\n" {
            return reply;
        }
        reply.push_str(&l);
    }
}

#[test]
fn forks_and_threads_are_followed_each_socket_under_its_own_process() {
    let prog = compile("forkthreads");
    let (status, stderr, report) = trace_run(&[prog.to_str().unwrap(), "3", "4", "10"]);
    assert!(status.success(), "{status:?} {stderr}");
    let report = report.expect("a report");
    let socks = sockets(&report);
    let writers: Vec<_> = socks.iter().filter(|s| s.count("write") > 0).collect();
    // 3 forked processes × 4 threads, each thread on its own socket: 12 sockets of 10 writes.
    assert_eq!(writers.len(), 12, "{socks:#?}");
    assert!(
        writers.iter().all(|s| s.count("write") == 10),
        "{writers:#?}"
    );
    assert!(
        writers.iter().all(|s| s.count("connect") == 1),
        "{writers:#?}"
    );
    let writer_pids: BTreeSet<u32> = writers.iter().map(|s| s.pid).collect();
    assert_eq!(
        writer_pids.len(),
        3,
        "one process per fork: {writer_pids:?}"
    );
    // The parent accepted all 12 and wrote nothing: its sockets are under its own pid.
    let acceptors: BTreeSet<u32> = socks
        .iter()
        .filter(|s| s.count("accept") > 0)
        .map(|s| s.pid)
        .collect();
    assert_eq!(acceptors.len(), 1, "{socks:#?}");
    assert!(acceptors.is_disjoint(&writer_pids));
    assert_eq!(total(&report, "accept"), 12);
}

#[test]
fn a_program_that_exits_mid_trace_is_reported_with_its_exit_status() {
    let test = "a_program_that_exits_mid_trace_is_reported_with_its_exit_status";
    if !common::has_python3(test) {
        return;
    }
    // A thread is blocked in recv (a trapped call that never returns) when the process
    // exits with status 3, after three sends.
    let script = "import os, socket, threading\n\
        l = socket.socket(); l.bind(('127.0.0.1', 0)); l.listen(1)\n\
        c = socket.create_connection(l.getsockname()); s, _ = l.accept()\n\
        threading.Thread(target=lambda: c.recv(1), daemon=True).start()\n\
        for _ in range(3): c.send(b'x')\n\
        os._exit(3)\n";
    let start = Instant::now();
    let (status, stderr, report) = trace_run(&["python3", "-c", script]);
    assert_eq!(status.code(), Some(3), "{stderr}");
    let report = report.unwrap_or_else(|| panic!("no report: {stderr}"));
    assert_eq!(total(&report, "sendto"), 3, "{report:#}");
    assert_eq!(total(&report, "connect"), 1, "{report:#}");
    assert_eq!(total(&report, "accept"), 1, "{report:#}");
    assert!(
        start.elapsed() < Duration::from_secs(60),
        "took {:?}",
        start.elapsed()
    );
}

#[test]
fn a_program_killed_mid_trace_is_reported_and_tcpdoctor_exits_128_plus_9() {
    let server = compile("siocoutq_server");
    let mut traced = traced_server(&server, &["0"]);
    let mut conn = BufReader::new(TcpStream::connect(traced.addr).expect("connect"));
    assert_eq!(request(&mut conn, "one"), "200 one\r\n");
    assert_eq!(request(&mut conn, "two"), "200 two\r\n");
    // Once it waits in recv for a third request, the tracer has recorded its last send (it
    // resumes a call's exit stop only after recording it): kill it there.
    wait_until_blocked_in(traced.pid, libc::SYS_recvfrom);
    // SAFETY: kill(2) of the traced server, whose pid it printed.
    assert_eq!(unsafe { libc::kill(traced.pid as i32, libc::SIGKILL) }, 0);
    let status = wait_bounded(
        &mut traced.tcpdoctor,
        Duration::from_secs(30),
        "tcpdoctor trace",
    );
    assert_eq!(status.code(), Some(128 + 9), "{status:?}");
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&traced.report).expect("the report was written"))
            .expect("JSON");
    // Two replies of two writes each, on the one accepted socket.
    assert_eq!(total(&report, "sendto"), 4, "{report:#}");
    assert_eq!(total(&report, "accept"), 1, "{report:#}");
    assert!(total(&report, "recvfrom") >= 2, "{report:#}");
    assert!(total(&report, "ioctl") >= 2, "{report:#}");
}

#[test]
fn killing_tcpdoctor_kills_the_traced_server_instead_of_leaving_it_half_broken() {
    let server = compile("siocoutq_server");
    let mut traced = traced_server(&server, &["0"]);
    // Traced, it serves.
    let mut conn = BufReader::new(TcpStream::connect(traced.addr).expect("connect"));
    assert_eq!(request(&mut conn, "alive"), "200 alive\r\n");
    drop(conn);
    // Wait (bounded) until it is blocked in accept for the next client: a server the kernel
    // left alone there would stay alive — with its next accept failing (ENOSYS).
    wait_until_blocked_in(traced.pid, libc::SYS_accept);
    traced.tcpdoctor.kill().expect("SIGKILL tcpdoctor");
    let _ = traced.tcpdoctor.wait();
    // PTRACE_O_EXITKILL: the kernel kills the server with its tracer. Bounded poll of /proc.
    let start = Instant::now();
    while !process_gone(traced.pid) {
        if start.elapsed() > Duration::from_secs(20) {
            // SAFETY: kill(2) of the server this test started, not to leave it behind.
            unsafe { libc::kill(traced.pid as i32, libc::SIGKILL) };
            panic!(
                "server {} still running 20 s after its tracer died",
                traced.pid
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // Nothing listens on its port any more.
    let err = TcpStream::connect(traced.addr).expect_err("the server's port still accepts");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused, "{err}");
}

/// Waits (bounded, polling /proc/PID/syscall's first field) until task `pid` is blocked in
/// system call `nr`.
fn wait_until_blocked_in(pid: u32, nr: libc::c_long) {
    let start = Instant::now();
    let nr = nr.to_string();
    loop {
        let now = std::fs::read_to_string(format!("/proc/{pid}/syscall")).unwrap_or_default();
        if now.split_whitespace().next() == Some(nr.as_str()) {
            return;
        }
        assert!(
            !process_gone(pid) && start.elapsed() < Duration::from_secs(20),
            "process {pid} never blocked in system call {nr} (now: {now:?})"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_program_that_cannot_be_started_is_a_clear_error_exit_2() {
    let dir = common::Scratch::new("trace-exec");
    let missing = dir.join("no-such-program");
    let not_executable = dir.join("not-executable");
    std::fs::write(&not_executable, "#!/bin/sh\necho ran\n").expect("write");
    std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o644))
        .expect("chmod");
    let bad_interpreter = dir.join("bad-interpreter");
    std::fs::write(&bad_interpreter, "#!/nonexistent/interpreter\n").expect("write");
    std::fs::set_permissions(&bad_interpreter, std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let cases = [
        (&missing, "no such program"),
        (&not_executable, "Permission denied"),
        (&bad_interpreter, "No such file or directory"),
    ];
    for (program, says) in cases {
        let path = program.to_str().unwrap();
        let start = Instant::now();
        let mut child = common::trace::trace_cmd(&dir.join("r.json"), &[path, "arg"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn tcpdoctor");
        let status = wait_bounded(&mut child, Duration::from_secs(30), path);
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .expect("stderr")
            .read_to_string(&mut stderr)
            .expect("read stderr");
        assert_eq!(status.code(), Some(2), "{path}: {status:?} {stderr}");
        assert!(status.signal().is_none());
        assert!(
            stderr.contains(path) && stderr.contains(says) && !stderr.contains("panicked"),
            "{path}: {stderr}"
        );
        assert!(start.elapsed() < Duration::from_secs(30));
    }
    // The same file made executable runs, traced: the error above was the exec's.
    std::fs::set_permissions(&not_executable, std::fs::Permissions::from_mode(0o755))
        .expect("chmod");
    let (status, stderr, _) = trace_run(&[not_executable.to_str().unwrap(), "arg"]);
    assert_eq!(status.code(), Some(0), "{stderr}");
}
