//! The `syscalls` block of traces shaped like real programs: counts under strace's labels,
//! writes per response, TCP_NODELAY set or never, and the text a person reads.

use std::time::Duration;

use super::*;
use crate::syscalls::fixtures::{asyncio_per_line, real_work_server, siocoutq_spinner, Tb};
use crate::syscalls::{render_text, sockopt, CallKind, TraceStatus};

fn server_socket(r: &SyscallsReport) -> &SocketCalls {
    r.sockets
        .iter()
        .find(|s| s.remote.is_some())
        .expect("a connected socket")
}

#[test]
fn an_asyncio_server_writing_one_line_per_call_shows_fourteen_writes_per_response() {
    let r = summarize(&asyncio_per_line(200, 14), Some(200));
    let s = server_socket(&r);
    assert_eq!(s.counts["sendto"], 2800);
    // 200 requests and the end of the stream.
    assert_eq!(s.counts["recvfrom"], 201);
    assert_eq!(s.counts["setsockopt(TCP_NODELAY)"], 1);
    assert_eq!(s.counts["close"], 1);
    assert_eq!((s.writes, s.bytes_written), (2800, 2800 * 9));
    assert_eq!((s.reads, s.bytes_read), (200, 1000));
    let d = s.writes_per_response.expect("responses");
    assert_eq!((d.count, d.p50, d.p90, d.max), (200, 14.0, 14.0, 14.0));
    assert_eq!(s.opened_by, Some("accept"));
    assert!(s.nodelay.set && s.nodelay.value == Some(1) && !s.nodelay.from_listener);
    assert_eq!(s.nodelay.calls, 1);
    assert!(s.nodelay.at_ms.is_some_and(|t| t > 0.0 && t < 1.0));
    // The listener is kept with its accepts; the second found nobody waiting.
    let l = r
        .sockets
        .iter()
        .find(|s| s.remote.is_none())
        .expect("listener");
    assert_eq!(l.counts["accept"], 2);
    assert_eq!(l.counts["accept=EAGAIN"], 1);
    assert!(l.writes_per_response.is_none());
    // Readiness waits are the process's, not a socket's.
    assert_eq!(r.processes[0].counts["epoll_wait"], 202);
    assert!(!s.counts.contains_key("epoll_wait"));
    // The same server with one write per response.
    let one = summarize(&asyncio_per_line(50, 1), None);
    let d = server_socket(&one).writes_per_response.expect("responses");
    assert_eq!((d.count, d.p50, d.max), (50, 1.0, 1.0));
}

#[test]
fn a_client_writing_header_and_body_separately_shows_two_writes_per_request() {
    // Perl's HTTP::Tiny: connect, write the header, write the body, read the response.
    let mut t = Tb::new("perl");
    t.socket(3, "127.0.0.1:40000", Some("127.0.0.1:8080"));
    t.call(CallKind::Connect, 3, 0, 0, -1);
    for _ in 0..10 {
        t.write(CallKind::Write, 3, 120);
        t.write(CallKind::Write, 3, 64);
        t.idle(Duration::from_millis(40));
        t.read(CallKind::Read, 3, 300);
    }
    let r = summarize(&t.trace, Some(10));
    let s = &r.sockets[0];
    let d = s.writes_per_response.expect("requests");
    assert_eq!((d.count, d.p50, d.max), (10, 2.0, 2.0));
    assert_eq!(s.opened_by, Some("connect"));
    assert!(!s.nodelay.set, "HTTP::Tiny never sets TCP_NODELAY");
    let text = render_text(&r);
    assert!(
        text.contains("writes per request: p50 2, p90 2, max 2 over 10 requests"),
        "{text}"
    );
    assert!(text.contains("TCP_NODELAY never set (Nagle on)"), "{text}");
}

#[test]
fn a_siocoutq_spinner_shows_its_polls_and_the_queue_it_found() {
    let r = summarize(&siocoutq_spinner(30, 500), Some(30));
    let s = server_socket(&r);
    assert_eq!(s.counts["ioctl(SIOCOUTQ)"], 30 * 501);
    assert_eq!(
        s.siocoutq.expect("polled"),
        QueuePolls {
            calls: 30 * 501,
            non_empty: 30 * 500
        }
    );
    let d = s.writes_per_response.expect("responses");
    assert_eq!((d.count, d.p50), (30, 2.0));
    let text = render_text(&r);
    assert!(
        text.contains("ioctl(SIOCOUTQ) 15,030, write 60, read 31"),
        "{text}"
    );
    assert!(
        text.contains("SIOCOUTQ found the send queue non-empty 15,000 of 15,030 times"),
        "{text}"
    );
    assert!(
        text.contains("  polling: ioctl(SIOCOUTQ) 15,000 times in"),
        "{text}"
    );
    // The server that does the same CPU's worth of work instead makes no such call.
    let w = summarize(&real_work_server(30, Duration::from_millis(10)), Some(30));
    assert!(server_socket(&w).siocoutq.is_none());
    assert!(
        render_text(&w).contains("  no polling: "),
        "{}",
        render_text(&w)
    );
}

#[test]
fn an_accepted_socket_inherits_tcp_nodelay_from_its_listener() {
    let mut t = Tb::new("server");
    t.socket(3, "127.0.0.1:7000", None);
    t.set(3, sockopt::IPPROTO_TCP, sockopt::TCP_NODELAY, 1);
    t.call(CallKind::Accept, 3, 4, 0, -1);
    t.socket(4, "127.0.0.1:7000", Some("127.0.0.1:50000"));
    t.read(CallKind::Read, 4, 5).write(CallKind::Write, 4, 10);
    // Set on the listener only after this accept: the next socket does not inherit it.
    let r = summarize(&t.trace, None);
    let s = server_socket(&r);
    assert!(s.nodelay.set && s.nodelay.from_listener && s.nodelay.calls == 0);
    assert!(render_text(&r).contains("TCP_NODELAY 1, inherited from the listener"));
    let mut t = Tb::new("server");
    t.socket(3, "127.0.0.1:7000", None);
    t.call(CallKind::Accept, 3, 4, 0, -1);
    t.socket(4, "127.0.0.1:7000", Some("127.0.0.1:50000"));
    t.set(3, sockopt::IPPROTO_TCP, sockopt::TCP_NODELAY, 1);
    t.read(CallKind::Read, 4, 5);
    assert!(!server_socket(&summarize(&t.trace, None)).nodelay.set);
}

#[test]
fn errno_and_empty_waits_get_their_own_labels() {
    let mut t = Tb::new("loop");
    t.socket(5, "127.0.0.1:7000", Some("127.0.0.1:50000"));
    t.again(CallKind::Recvfrom, 5).again(CallKind::Recvfrom, 5);
    t.read(CallKind::Recvfrom, 5, 10);
    t.wait(CallKind::EpollWait, 0, 0)
        .wait(CallKind::EpollWait, 0, 1);
    t.wait(CallKind::EpollWait, 10, 0);
    t.call(
        CallKind::Ioctl,
        5,
        0,
        crate::syscalls::ioctl::SIOCINQ as i64,
        0,
    );
    t.call(
        CallKind::Getsockopt,
        5,
        0,
        (sockopt::SOL_SOCKET << 32 | sockopt::SO_ERROR) as i64,
        0,
    );
    // A write on a pipe: the process's.
    t.write(CallKind::Write, 1, 20);
    let r = summarize(&t.trace, None);
    let s = &r.sockets[0];
    assert_eq!(s.counts["recvfrom"], 3);
    assert_eq!(s.counts["recvfrom=EAGAIN"], 2);
    assert_eq!(s.counts["ioctl(FIONREAD)"], 1);
    assert_eq!(s.counts["getsockopt(SO_ERROR)"], 1);
    let p = &r.processes[0].counts;
    assert_eq!(p["epoll_wait"], 3);
    // Only the zero-timeout wait that found nothing; a 10 ms wait that timed out slept.
    assert_eq!(p["epoll_wait(timeout 0)=0"], 1);
    assert_eq!(p["write"], 1);
    assert_eq!(s.writes, 0, "the pipe's write is not the socket's");
}

#[test]
fn a_reused_descriptor_is_two_sockets() {
    let mut t = Tb::new("client");
    for port in [8001, 8002] {
        t.socket(3, "127.0.0.1:40000", Some(&format!("127.0.0.1:{port}")));
        t.call(CallKind::Connect, 3, 0, 0, -1);
        t.write(CallKind::Write, 3, 10).read(CallKind::Read, 3, 10);
        t.call(CallKind::Close, 3, 0, 0, -1);
    }
    let r = summarize(&t.trace, None);
    assert_eq!(r.sockets.len(), 2);
    assert!(r.sockets.iter().all(|s| s.counts["close"] == 1));
}

#[test]
fn status_overhead_and_json_shape() {
    let r = summarize(&asyncio_per_line(10, 3), Some(10));
    assert_eq!(r.overhead.traced_calls, 57);
    assert_eq!(r.overhead.per_call_us, Some(3.0));
    let v = serde_json::to_value(&r).expect("json");
    assert_eq!(v["status"]["state"], "traced");
    assert_eq!(v["sockets"][1]["counts"]["sendto"], 30);
    assert_eq!(v["sockets"][1]["writes_per_response"]["p50"], 3.0);
    assert_eq!(v["sockets"][1]["nodelay"]["set"], true);
    assert_eq!(v["polling"]["verdict"], "real_work");
    assert!(v["sockets"][0].get("remote").is_none());
    let text = render_text(&r);
    let head = text.lines().next().expect("a line");
    assert!(
        head.starts_with("syscalls: traced from its start, 57 trapped calls in "),
        "{head}"
    );
    assert!(
        head.ends_with("(1 process, 171 µs by the tracer, 3 µs per call)"),
        "{head}"
    );

    let off = summarize(&Trace::not_traced(TraceStatus::Off), Some(10));
    assert!(render_text(&off).starts_with("syscalls: not traced (off: --no-trace"));
    assert!(off.polling.is_none(), "nothing traced says nothing");
    let why = "ptrace refused: kernel.yama.ptrace_scope is 3";
    let u = summarize(
        &Trace::not_traced(TraceStatus::Unavailable { reason: why.into() }),
        None,
    );
    assert_eq!(render_text(&u), format!("syscalls: not traced — {why}\n"));
    let v = serde_json::to_value(&u).expect("json");
    assert_eq!(v["status"]["state"], "unavailable");
    assert_eq!(v["status"]["reason"], why);
}

/// A listener's TCP_NODELAY set at start-up (before the window: `Trace::setup`) is inherited
/// by the sockets accepted in the window, and the listener shows it without a time.
#[test]
fn a_listener_setting_made_before_the_window_is_inherited() {
    let mut t = Tb::new("server");
    t.socket(3, "0.0.0.0:7000", None);
    t.set(3, sockopt::IPPROTO_TCP, sockopt::TCP_NODELAY, 1);
    t.call(CallKind::Accept, 3, 4, 0, -1);
    t.socket(4, "127.0.0.1:7000", Some("127.0.0.1:50000"));
    t.read(CallKind::Read, 4, 5).write(CallKind::Write, 4, 10);
    let accept_at = t.trace.calls[1].at;
    let window = t.trace.between(accept_at, t.trace.ended);
    assert_eq!(
        window.setup.len(),
        1,
        "the listener's setsockopt is kept as setup"
    );
    let r = summarize(&window, None);
    let s = server_socket(&r);
    assert!(s.nodelay.set && s.nodelay.from_listener && s.nodelay.value == Some(1));
    let l = r
        .sockets
        .iter()
        .find(|s| s.remote.is_none())
        .expect("listener");
    assert!(l.nodelay.set && l.nodelay.before_window && l.nodelay.at_ms.is_none());
    let text = render_text(&r);
    assert!(
        text.contains("TCP_NODELAY 1, inherited from the listener"),
        "{text}"
    );
    assert!(
        text.contains("TCP_NODELAY set to 1 before the traced window"),
        "{text}"
    );
    // Without the setting before the window: not set.
    let mut bare = window.clone();
    bare.setup.clear();
    assert!(!server_socket(&summarize(&bare, None)).nodelay.set);
}

/// Attached to a running server (`inspect --trace`): the listener's options were set before
/// the attach and a socket accepted while attached inherits them unseen, so "never set (Nagle
/// on)" is not known — only "not set while traced".
#[test]
fn attached_a_socket_accepted_while_traced_is_not_said_to_have_nagle_on() {
    let mut t = Tb::new("server");
    t.socket(3, "127.0.0.1:7000", None);
    t.call(CallKind::Accept, 3, 4, 0, -1);
    t.socket(4, "127.0.0.1:7000", Some("127.0.0.1:50000"));
    t.read(CallKind::Read, 4, 5).write(CallKind::Write, 4, 10);
    let traced = render_text(&summarize(&t.trace, None));
    assert!(
        traced.contains("TCP_NODELAY never set (Nagle on)"),
        "{traced}"
    );
    t.trace.status = TraceStatus::Attached;
    let attached = render_text(&summarize(&t.trace, None));
    assert!(!attached.contains("Nagle on"), "{attached}");
    assert!(
        attached.contains("TCP_NODELAY not set while traced"),
        "{attached}"
    );
}

/// Processes that ended before the window (a launcher's shell, pyenv's shims at start-up) are
/// not this window's: not listed, not counted in the text.
#[test]
fn processes_that_ended_before_the_window_are_not_listed() {
    let mut t = asyncio_per_line(3, 2);
    for pid in [100, 101, 102] {
        t.processes.push(crate::syscalls::TracedProcess {
            pid,
            name: "bash".into(),
            threads: 1,
            ended: Some("exited 0".into()),
        });
    }
    let r = summarize(&t, None);
    assert_eq!(r.processes.len(), 1, "{:#?}", r.processes);
    assert!(
        render_text(&r).contains("(1 process,"),
        "{}",
        render_text(&r)
    );
    // One that ended after a call in the window is kept.
    let mut c = t.calls[0].clone();
    c.pid = 101;
    c.socket = None;
    t.calls.push(c);
    assert_eq!(summarize(&t, None).processes.len(), 2);
}

/// The listener's setting as it stood at each accept: on for the first, off for the second.
#[test]
fn each_accepted_socket_inherits_the_setting_of_its_moment() {
    let mut t = Tb::new("server");
    t.socket(3, "127.0.0.1:7000", None);
    t.set(3, sockopt::IPPROTO_TCP, sockopt::TCP_NODELAY, 1);
    for (fd, port) in [(4, "50000"), (5, "50001")] {
        t.call(CallKind::Accept, 3, fd, 0, -1);
        t.socket(
            fd as i32,
            "127.0.0.1:7000",
            Some(&format!("127.0.0.1:{port}")),
        );
        t.read(CallKind::Read, fd as i32, 5);
        t.set(3, sockopt::IPPROTO_TCP, sockopt::TCP_NODELAY, 0);
    }
    let r = summarize(&t.trace, None);
    let got: Vec<Option<i64>> = r.sockets[1..].iter().map(|s| s.nodelay.value).collect();
    assert_eq!(got, [Some(1), Some(0)]);
    assert!(r.sockets[1..].iter().all(|s| s.opened_by == Some("accept")));
}

/// A server that reads on one descriptor and writes on a `dup` of it (a Rust `try_clone`
/// reader and writer, tcpdoctor's own specimen): one socket, its responses ended by the reads
/// on the other descriptor (5 writes per response over 3, not 15 over 1), and TCP_NODELAY set
/// through the reading descriptor is the socket's — never "not set" on the writing one.
#[test]
fn two_descriptors_of_one_socket_are_one_socket() {
    let mut t = Tb::new("specimen");
    t.socket(3, "127.0.0.1:7000", None);
    t.call(CallKind::Accept, 3, 4, 0, -1);
    let reader = t.socket(4, "127.0.0.1:7000", Some("127.0.0.1:50000"));
    let writer = t.socket(5, "127.0.0.1:7000", Some("127.0.0.1:50000"));
    let inode = t.trace.sockets[reader as usize].inode;
    t.trace.sockets[writer as usize].inode = inode;
    t.set(4, sockopt::IPPROTO_TCP, sockopt::TCP_NODELAY, 0);
    for _ in 0..3 {
        t.read(CallKind::Recvfrom, 4, 5);
        for _ in 0..5 {
            t.write(CallKind::Sendto, 5, 9);
        }
    }
    let trace = t.trace.clone();
    assert_eq!(trace.canonical(writer), reader);
    assert_eq!(trace.same_socket(writer), [reader, writer]);
    let r = summarize(&trace, Some(3));
    let connected: Vec<&SocketCalls> = r.sockets.iter().filter(|s| s.remote.is_some()).collect();
    assert_eq!(connected.len(), 1, "{connected:#?}");
    let s = connected[0];
    assert_eq!((s.fd, s.other_fds.clone()), (4, vec![5]));
    assert_eq!((s.writes, s.reads), (15, 3));
    let d = s.writes_per_response.expect("responses");
    assert_eq!((d.count, d.p50, d.max), (3, 5.0, 5.0));
    assert!(
        s.nodelay.set && s.nodelay.value == Some(0),
        "{:?}",
        s.nodelay
    );
    assert!(
        render_text(&r).contains("(pid 4242 fds 4, 5)"),
        "{}",
        render_text(&r)
    );
    // The citations' view agrees: three messages of five writes, the setting the socket's.
    use crate::syscalls::cite::calls::{nodelay_history, writes_per_message};
    assert_eq!(writes_per_message(&trace, &[writer]), [5, 5, 5]);
    assert_eq!(writes_per_message(&trace, &[reader, writer]), [5, 5, 5]);
    assert_eq!(nodelay_history(&trace, &[writer]).len(), 1);
}
