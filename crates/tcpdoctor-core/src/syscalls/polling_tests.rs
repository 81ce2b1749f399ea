//! The polling rule both ways: a SIOCOUTQ spinner, a zero-timeout event loop and an EAGAIN
//! loop named with their numbers; a server doing real work, asyncio and libuv's one empty wait
//! per turn not; too little, or a trace that did not see everything, says nothing.

use std::time::Duration;

use super::*;
use crate::syscalls::fixtures::{asyncio_per_line, real_work_server, siocoutq_spinner, Tb};

#[test]
fn a_siocoutq_spinner_is_polling_with_its_numbers() {
    // 30 requests, each reply's tail held ~40 ms for the client's delayed ACK, polled 1,600
    // times meanwhile.
    let t = siocoutq_spinner(30, 1600);
    let m = polling(&t, 30, Duration::from_secs(3)).expect("polling");
    assert_eq!(m.label, "ioctl(SIOCOUTQ)");
    assert_eq!((m.calls, m.per_request), (48_000, 1600.0));
    assert_eq!(
        m.sentence,
        "ioctl(SIOCOUTQ) 48,000 times in 3 s, 1,600 per request, while its send queue was \
         non-empty"
    );
    assert!(m.others.is_empty());
    assert!(real_work(&t, 30, Duration::from_secs(3)).is_none());
    assert!(matches!(
        verdict(&t, 30, Duration::from_secs(3)),
        Some(TraceVerdict::Polling(_))
    ));
}

#[test]
fn a_server_doing_real_work_of_the_same_cpu_is_not() {
    // 40 ms of computing per request, the spinner's 40 ms of polling: the CPU is the same,
    // the calls are three per request.
    let t = real_work_server(30, Duration::from_millis(40));
    let wall = t.ended.since(t.started);
    assert!(polling(&t, 30, wall).is_none());
    let w = real_work(&t, 30, wall).expect("the trace covered the run");
    assert_eq!((w.polls, w.calls), (0, 63));
    assert_eq!(w.calls_per_request, 2.1);
    assert!(
        w.sentence.starts_with(
            "the trace saw every trapped call for 1.2 s (63 calls, 2.1 per request): 0 of \
             them polls that found nothing changed, 0 per request (a poller makes at least 20)"
        ),
        "{}",
        w.sentence
    );
}

#[test]
fn event_loops_ask_a_few_questions_per_request_and_are_not_polling() {
    let t = asyncio_per_line(200, 14);
    let wall = t.ended.since(t.started);
    assert!(polling(&t, 200, wall).is_none());
    assert!(real_work(&t, 200, wall).is_some());
    // libuv (Node.js): one epoll_pwait(…, 0) = 0 per turn of its loop, measured 1 per request.
    let mut t = Tb::new("node");
    t.socket(20, "127.0.0.1:8000", Some("127.0.0.1:50000"));
    for _ in 0..200 {
        t.wait(CallKind::EpollWait, -1, 1)
            .read(CallKind::Read, 20, 5);
        t.write(CallKind::Write, 20, 100)
            .wait(CallKind::EpollWait, 0, 0);
        t.again(CallKind::Read, 20);
    }
    let wall = t.trace.ended.since(t.trace.started);
    assert!(polling(&t.trace, 200, wall).is_none());
    assert_eq!(real_work(&t.trace, 200, wall).expect("covered").polls, 400);
}

/// An event loop given a zero timeout: "anything?" — no — 700 times per request.
#[test]
fn a_zero_timeout_event_loop_is_polling() {
    let mut t = Tb::new("spin-loop");
    t.step = Duration::from_micros(1);
    t.socket(7, "127.0.0.1:8000", Some("127.0.0.1:50000"));
    for _ in 0..300 {
        for _ in 0..700 {
            t.wait(CallKind::EpollWait, 0, 0);
        }
        t.wait(CallKind::EpollWait, 0, 1)
            .read(CallKind::Recvfrom, 7, 5);
        t.write(CallKind::Sendto, 7, 50);
    }
    let m = polling(&t.trace, 300, Duration::from_secs(3)).expect("polling");
    assert_eq!(m.label, "epoll_wait(timeout 0)=0");
    assert_eq!(
        m.sentence,
        "epoll_wait with timeout 0 returned nothing 210,000 times in 3 s, 700 per request"
    );
}

#[test]
fn a_nonblocking_recv_retried_on_eagain_is_polling_and_every_mechanism_is_quoted() {
    let mut t = Tb::new("retry");
    t.socket(7, "127.0.0.1:8000", Some("127.0.0.1:50000"));
    for _ in 0..50 {
        for _ in 0..30 {
            t.again(CallKind::Recvfrom, 7);
        }
        for _ in 0..5 {
            t.again(CallKind::Sendto, 7);
        }
        t.read(CallKind::Recvfrom, 7, 5)
            .write(CallKind::Sendto, 7, 5);
    }
    let m = polling(&t.trace, 50, Duration::from_millis(500)).expect("polling");
    assert_eq!(m.label, "recvfrom=EAGAIN");
    assert_eq!((m.polls, m.polls_per_request), (1750, 35.0));
    assert!(m.sentence.starts_with(
        "recvfrom returned EAGAIN (nothing to read) 1,500 times in 500 ms, 30 per request"
    ));
    assert_eq!(
        m.others,
        ["sendto returned EAGAIN (send buffer full) 250 times in 500 ms, 5 per request"]
    );
}

#[test]
fn the_threshold_both_ways() {
    let wall = Duration::from_secs(1);
    // 19 polls per request is a busy event loop; 20 is a poller.
    let t = siocoutq_spinner(100, 19);
    assert!(polling(&t, 100, wall).is_none());
    // …but, with its last SIOCOUTQ (the queue found empty), 20 questions per request: not
    // real work either (rule 5); 18 polls and the last one are.
    assert!(real_work(&t, 100, t.ended.since(t.started)).is_none());
    let t = siocoutq_spinner(100, 18);
    assert!(real_work(&t, 100, t.ended.since(t.started)).is_some());
    assert!(polling(&siocoutq_spinner(100, 20), 100, wall).is_some());
    // Too few polls in all to name (5 requests), and too many to call it real work.
    let t = siocoutq_spinner(5, 30);
    assert!(polling(&t, 5, wall).is_none());
    assert!(verdict(&t, 5, t.ended.since(t.started)).is_none());
    // No request, nothing to say.
    assert!(verdict(&t, 0, wall).is_none());
}

#[test]
fn a_trace_that_did_not_see_everything_never_says_real_work() {
    let t = real_work_server(30, Duration::from_millis(40));
    let wall = t.ended.since(t.started);
    // The trace ended early (the server exited, the tracer was stopped).
    assert!(real_work(&t, 30, wall * 2).is_none());
    // Calls the tracer dropped might have been polls.
    let mut dropped = t.clone();
    dropped.dropped = 600;
    assert!(real_work(&dropped, 30, wall).is_none());
    // Not traced at all.
    let mut off = t.clone();
    off.status = TraceStatus::Unavailable {
        reason: "seccomp unavailable".into(),
    };
    assert!(verdict(&off, 30, wall).is_none());
    // Attached to a running process: every call stops it, the trace is complete.
    let mut attached = t;
    attached.status = TraceStatus::Attached;
    assert!(real_work(&attached, 30, wall).is_some());
}

#[test]
fn a_wait_that_sleeps_is_not_a_poll() {
    // A timer loop: epoll_wait(…, 1 ms) = 0 forty times per request, each a real sleep.
    let mut t = Tb::new("timers");
    t.socket(7, "127.0.0.1:8000", Some("127.0.0.1:50000"));
    for _ in 0..100 {
        for _ in 0..40 {
            t.wait(CallKind::EpollWait, 1, 0);
        }
        t.read(CallKind::Read, 7, 5).write(CallKind::Write, 7, 5);
    }
    let wall = t.trace.ended.since(t.trace.started);
    assert!(polling(&t.trace, 100, wall).is_none());
    assert_eq!(real_work(&t.trace, 100, wall).expect("covered").polls, 0);
}

/// A server traced for its whole life, judged per scenario: the spinning scenario's slice is
/// polling, the working one's is not; a slice past the trace's end covers too little to say.
#[test]
fn a_whole_life_trace_is_judged_per_scenario() {
    let mut t = siocoutq_spinner(50, 100);
    let work = real_work_server(50, Duration::from_millis(2));
    let gap = t.ended.since(work.started) + Duration::from_secs(1);
    let split = t.ended.plus(Duration::from_millis(500));
    for c in &work.calls {
        let mut c = c.clone();
        c.at = c.at.plus(gap);
        t.calls.push(c);
    }
    t.ended = work.ended.plus(gap);
    t.traced_calls = t.calls.len() as u64;
    let first = t.between(t.started, split);
    let second = t.between(split, t.ended);
    assert_eq!(first.calls.len() + second.calls.len(), t.calls.len());
    let apportioned = first.tracer_ns + second.tracer_ns;
    assert!(
        apportioned.abs_diff(t.tracer_ns) <= 1,
        "the tracer's time apportioned: {apportioned} of {}",
        t.tracer_ns
    );
    let wall = |x: &Trace| x.ended.since(x.started);
    assert!(matches!(
        verdict(&first, 50, wall(&first)),
        Some(TraceVerdict::Polling(_))
    ));
    assert!(matches!(
        verdict(&second, 50, wall(&second)),
        Some(TraceVerdict::RealWork(_))
    ));
    // A scenario that ran on for as long again after the trace ended.
    let late = t.between(split, t.ended.plus(wall(&second)));
    assert!(real_work(&late, 50, wall(&second) * 2).is_none());
}

/// An event-driven server streaming large responses to a slow reader: it writes until the send
/// buffer is full, gets one EAGAIN, blocks in a wait the tracer does not trap, and writes again
/// when woken — 30 EAGAIN per request, each alone between progress. It sleeps between them: not
/// polling. (The same count asked again at once, in runs, is.)
#[test]
fn one_eagain_per_full_send_buffer_is_not_polling() {
    let mut t = Tb::new("streamer");
    t.socket(7, "127.0.0.1:8000", Some("127.0.0.1:50000"));
    for _ in 0..50 {
        t.read(CallKind::Recvfrom, 7, 20);
        for _ in 0..30 {
            t.write(CallKind::Sendto, 7, 65_536)
                .again(CallKind::Sendto, 7)
                .idle(Duration::from_millis(2));
        }
    }
    let wall = t.trace.ended.since(t.trace.started);
    assert!(polling(&t.trace, 50, wall).is_none());
    // Every poll is still seen by the converse: too many to call it real work either — the
    // CPU decides.
    assert!(real_work(&t.trace, 50, wall).is_none());
    assert!(verdict(&t.trace, 50, wall).is_none());
    // An edge-triggered drain of a large upload: read until EAGAIN at each wake-up.
    let mut t = Tb::new("drainer");
    t.socket(7, "127.0.0.1:8000", Some("127.0.0.1:50000"));
    for _ in 0..50 {
        for _ in 0..25 {
            t.read(CallKind::Read, 7, 65_536)
                .read(CallKind::Read, 7, 1_000)
                .again(CallKind::Read, 7)
                .idle(Duration::from_millis(1));
        }
        t.write(CallKind::Write, 7, 10);
    }
    let wall = t.trace.ended.since(t.trace.started);
    assert!(polling(&t.trace, 50, wall).is_none());
    // The same EAGAINs asked again at once, four in a row: a poller.
    let mut t = Tb::new("retrier");
    t.socket(7, "127.0.0.1:8000", Some("127.0.0.1:50000"));
    for _ in 0..50 {
        t.read(CallKind::Recvfrom, 7, 20);
        for _ in 0..8 {
            t.write(CallKind::Sendto, 7, 65_536);
            for _ in 0..4 {
                t.again(CallKind::Sendto, 7);
            }
        }
    }
    let wall = t.trace.ended.since(t.trace.started);
    let m = polling(&t.trace, 50, wall).expect("repeated EAGAIN is polling");
    assert_eq!((m.label.as_str(), m.calls), ("sendto=EAGAIN", 1600));
}

/// Polls on a pipe (a worker's result read until it comes) are not "its socket": never named
/// as polling its socket, never taken for real work — the CPU decides.
#[test]
fn a_loop_polling_a_pipe_is_not_named_as_polling_its_socket() {
    let mut t = Tb::new("pipe-poller");
    t.socket(7, "127.0.0.1:8000", Some("127.0.0.1:50000"));
    for _ in 0..50 {
        t.read(CallKind::Read, 7, 20);
        for _ in 0..100 {
            t.again(CallKind::Read, 9); // fd 9: a pipe, no TCP socket
        }
        t.read(CallKind::Read, 9, 8).write(CallKind::Write, 7, 10);
    }
    let wall = t.trace.ended.since(t.trace.started);
    assert!(polling(&t.trace, 50, wall).is_none());
    assert!(real_work(&t.trace, 50, wall).is_none());
}

/// A loop asking `getsockopt(TCP_INFO)` until the peer has acknowledged everything: no call
/// of rule 1, thousands of questions per request. The trace must not call that real work
/// (it would withhold a CPU finding the spinner deserves).
#[test]
fn a_getsockopt_loop_is_never_real_work() {
    let mut t = Tb::new("tcpinfo-spinner");
    t.socket(7, "127.0.0.1:8000", Some("127.0.0.1:50000"));
    for _ in 0..50 {
        t.read(CallKind::Read, 7, 20).write(CallKind::Write, 7, 10);
        for _ in 0..500 {
            t.call(CallKind::Getsockopt, 7, 0, (6 << 32) | 11, -1);
        }
    }
    let wall = t.trace.ended.since(t.trace.started);
    assert!(polling(&t.trace, 50, wall).is_none());
    assert!(real_work(&t.trace, 50, wall).is_none());
    // The real-work server of the same shape, without the loop, is.
    let w = real_work_server(50, Duration::from_millis(1));
    assert!(real_work(&w, 50, w.ended.since(w.started)).is_some());
}
