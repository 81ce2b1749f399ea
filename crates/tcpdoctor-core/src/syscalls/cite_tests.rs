//! Findings citing the trace: the real analyzer's findings on simulated segments, the same
//! segments joined to a hand-built trace of the program that wrote them.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::cite::cite;
use super::join::Joiner;
use super::sockopt::{IPPROTO_TCP, TCP_NODELAY};
use super::{Call, CallKind, Trace, TraceStatus, TracedSocket};
use crate::analysis::Analyzer;
use crate::flow::{Direction, PacketRef};
use crate::report::{Finding, FindingKind};
use crate::time::Timestamp;
use crate::wire::{Endpoint, TcpFlags, TcpOptions, TcpSegment};

const C2S: Direction = Direction::ClientToServer;
const S2C: Direction = Direction::ServerToClient;

fn ep(port: u16) -> Endpoint {
    Endpoint {
        ip: IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)),
        port,
    }
}

fn at(us: u64) -> Timestamp {
    Timestamp(us * 1_000)
}

/// One connection 127.0.0.1:40000 → 127.0.0.1:7000 on simulated time (µs), fed to the
/// analyzer and kept for the join; and the calls of the traced end.
struct Sim {
    an: Analyzer,
    segments: Vec<(u64, Timestamp, TcpSegment)>,
    seq: [u32; 2],
    calls: Vec<Call>,
}

impl Sim {
    fn new() -> Sim {
        let mut s = Sim {
            an: Analyzer::default(),
            segments: Vec::new(),
            seq: [5000, 90_000],
            calls: Vec::new(),
        };
        let o = TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            ..TcpOptions::default()
        };
        s.raw(C2S, 0, TcpFlags::SYN, 0, o);
        s.raw(S2C, 30, TcpFlags::SYN | TcpFlags::ACK, 0, o);
        s.seq = [5001, 90_001];
        s.raw(C2S, 40, TcpFlags::ACK, 0, TcpOptions::default());
        s
    }

    fn raw(&mut self, dir: Direction, t: u64, flags: u8, len: u32, o: TcpOptions) {
        let (src, dst) = match dir {
            C2S => (ep(40000), ep(7000)),
            S2C => (ep(7000), ep(40000)),
        };
        let i = dir.index();
        let seg = TcpSegment {
            src,
            dst,
            seq: self.seq[i],
            ack: self.seq[1 - i],
            flags: TcpFlags(flags),
            window: 1000,
            payload_len: len,
            options: o,
        };
        self.seq[i] = self.seq[i].wrapping_add(len);
        let frame = self.segments.len() as u64 + 1;
        self.an.on_segment(PacketRef { frame, ts: at(t) }, &seg);
        self.segments.push((frame, at(t), seg));
    }

    fn data(&mut self, dir: Direction, t: u64, len: u32) {
        let flags = TcpFlags::ACK | TcpFlags::PSH;
        self.raw(dir, t, flags, len, TcpOptions::default());
    }

    fn ack(&mut self, dir: Direction, t: u64) {
        self.raw(dir, t, TcpFlags::ACK, 0, TcpOptions::default());
    }

    /// A call of the traced end (socket 0).
    fn call(&mut self, t: u64, kind: CallKind, ret: i64, took_us: u64) {
        self.calls.push(Call {
            at: at(t),
            took_ns: took_us * 1_000,
            pid: 7,
            tid: 7,
            kind,
            fd: 4,
            ret,
            arg: ret,
            value: -1,
            socket: Some(0),
        });
    }

    fn nodelay(&mut self, t: u64) {
        self.calls.push(Call {
            at: at(t),
            took_ns: 1_000,
            pid: 7,
            tid: 7,
            kind: CallKind::Setsockopt,
            fd: 4,
            ret: 0,
            arg: ((IPPROTO_TCP << 32) | TCP_NODELAY) as i64,
            value: 1,
            socket: Some(0),
        });
    }

    /// Findings, cited from the trace of the server's end (or the client's).
    fn cited(self, server_end: bool, status: TraceStatus) -> (Vec<Finding>, usize) {
        self.cited_with(server_end, status, |_| {})
    }

    /// As [`Sim::cited`], with the trace edited before the citing (more sockets, setup).
    fn cited_with(
        self,
        server_end: bool,
        status: TraceStatus,
        edit: impl FnOnce(&mut Trace),
    ) -> (Vec<Finding>, usize) {
        let (l, r): (SocketAddr, SocketAddr) = match server_end {
            true => (
                "127.0.0.1:7000".parse().unwrap(),
                "127.0.0.1:40000".parse().unwrap(),
            ),
            false => (
                "127.0.0.1:40000".parse().unwrap(),
                "127.0.0.1:7000".parse().unwrap(),
            ),
        };
        let mut trace = Trace {
            setup: Vec::new(),
            status,
            processes: Vec::new(),
            sockets: vec![TracedSocket {
                pid: 7,
                fd: 4,
                inode: 1,
                local: Some(l),
                remote: Some(r),
                first_seen: at(35),
                from_start: true,
            }],
            calls: self.calls,
            dropped: 0,
            traced_calls: 0,
            tracer_ns: 0,
            started: at(0),
            ended: at(10_000_000),
        };
        edit(&mut trace);
        let mut j = Joiner::new(&trace);
        for (frame, ts, seg) in &self.segments {
            j.on_segment(*frame, *ts, seg);
        }
        let joins = j.finish();
        let (_, mut findings) = self.an.finish("sim.pcap", "pcap");
        let n = cite(&mut findings, &trace, &joins);
        (findings, n)
    }
}

fn get(f: &[Finding], kind: FindingKind, dir: Direction) -> &Finding {
    f.iter()
        .find(|x| x.kind == kind && x.direction == dir)
        .unwrap_or_else(|| panic!("no {kind} {dir:?}"))
}

fn fact<'a>(f: &'a Finding, needle: &str) -> Option<&'a String> {
    f.evidence.facts.iter().find(|s| s.contains(needle))
}

/// A per-line server (one write per line, 14 lines) with Nagle on: the first line leaves,
/// the rest waits for the client's delayed ACK. `waits`: the server itself writes the rest
/// only once the ACK came (TCP_NODELAY on, a drain loop) — the same packets.
fn per_line_server(waits: bool) -> Sim {
    let mut s = Sim::new();
    if waits {
        s.nodelay(36);
    }
    let mut t = 1_000;
    for _ in 0..10 {
        s.data(C2S, t, 10);
        s.call(t + 20, CallKind::Read, 10, 5);
        s.call(t + 55, CallKind::Write, 12, 3);
        s.data(S2C, t + 60, 12);
        let rest = if waits { t + 40_070 } else { t + 62 };
        for k in 0..13 {
            s.call(rest + k * 2, CallKind::Write, 15, 1);
        }
        s.ack(C2S, t + 40_060);
        s.data(S2C, t + 40_100, 13 * 15);
        t += 41_000;
    }
    s
}

#[test]
fn a_nagle_stall_names_the_writes_the_kernel_held() {
    let (f, n) = per_line_server(false).cited(true, TraceStatus::Traced);
    assert_eq!(
        n, 2,
        "nagle_delayed_ack and fragmented_writes, both server → client"
    );
    let nagle = get(&f, FindingKind::NagleDelayedAck, S2C);
    let per = &nagle.evidence.distributions["writes_per_response"];
    assert_eq!((per.p50, per.max, per.count), (14.0, 14.0, 10));
    assert!(fact(nagle, "the server made 14 write() calls per response").is_some());
    assert!(
        fact(
            nagle,
            "never set TCP_NODELAY on its 1 traced socket: Nagle was on"
        )
        .is_some(),
        "{:#?}",
        nagle.evidence.facts
    );
    // Frames 5 (12 bytes) and 7 (195 bytes) of the first exchange: writes #1 and #2–#14.
    assert_eq!(nagle.evidence.frames, vec![5, 6, 7]);
    let joined = fact(nagle, "frame 5 carries").expect("the quoted frames joined");
    assert_eq!(
        joined,
        "frame 5 carries the bytes of write() call #1 (12 bytes); frame 7 carries the bytes of \
         write() calls #2–#14 (13 calls, 195 bytes in all, 2 µs apart)"
    );
    let held = fact(nagle, "the kernel held them (Nagle)").expect("held before the ACK");
    assert!(held.contains("write() calls #2–#14"), "{held}");
    assert!(fact(nagle, "contradicts").is_none());
    assert!(nagle.verdict.contains("Nagle's algorithm holds"));
    // The marks for the HTML: each write, on the timeline's clock (frame 4, the request, is
    // at 0 ms; write #1 55 µs later).
    assert_eq!(nagle.evidence.writes.len(), 14);
    let w1 = &nagle.evidence.writes[0];
    assert_eq!((w1.index, w1.bytes, w1.frames.clone()), (1, 12, vec![5]));
    assert!((w1.t_ms - 0.055).abs() < 1e-9, "{}", w1.t_ms);
    assert_eq!(nagle.evidence.writes[13].frames, vec![7]);
    assert!(nagle.evidence.rests_on[0].contains("the server's system calls"));
}

/// A server whose listener (bound to 0.0.0.0) got TCP_NODELAY at start-up, before the
/// scenario's window: the accepted socket inherited it, so "never set … Nagle was on" would
/// be false. The setting comes from `Trace::setup`, the listener from its port.
#[test]
fn tcp_nodelay_set_on_a_wildcard_listener_before_the_window_is_inherited() {
    let listener_set = |t: &mut Trace| {
        t.sockets.push(TracedSocket {
            pid: 7,
            fd: 3,
            inode: 2,
            local: Some("0.0.0.0:7000".parse().unwrap()),
            remote: None,
            first_seen: at(0),
            from_start: false,
        });
        t.started = at(20);
        t.setup.push(Call {
            at: at(5),
            took_ns: 1_000,
            pid: 7,
            tid: 7,
            kind: CallKind::Setsockopt,
            fd: 3,
            ret: 0,
            arg: ((IPPROTO_TCP << 32) | TCP_NODELAY) as i64,
            value: 1,
            socket: Some(1),
        });
    };
    let (f, _) = per_line_server(false).cited_with(true, TraceStatus::Traced, listener_set);
    let nagle = get(&f, FindingKind::NagleDelayedAck, S2C);
    assert!(
        fact(nagle, "never set TCP_NODELAY").is_none(),
        "{:#?}",
        nagle.evidence.facts
    );
    let set = fact(nagle, "the server set TCP_NODELAY").expect("the listener's setting");
    assert!(
        set.contains("before the trace window began")
            && set.contains("on its listening socket (accepted sockets inherit it)")
            && set.contains("on for every traced socket (1) at the end"),
        "{set}"
    );
    assert!(fact(nagle, "TCP_NODELAY was on for the example's socket").is_some());
    // The same listener without the setting: never set, Nagle on — and the listener named.
    let (f, _) = per_line_server(false).cited_with(true, TraceStatus::Traced, |t| {
        listener_set(t);
        t.setup.clear();
    });
    let nagle = get(&f, FindingKind::NagleDelayedAck, S2C);
    assert!(
        fact(
            nagle,
            "never set TCP_NODELAY on its 1 traced socket nor on its listening socket"
        )
        .is_some(),
        "{:#?}",
        nagle.evidence.facts
    );
}

/// The server's trace read against a capture at the client's end of a 5 ms (one way) path:
/// the delayed ACK passes the capture point 5 ms before it reaches the server. A server whose
/// rest was written 2 ms after the ACK passed the capture — 3 ms before it could have arrived —
/// did not "wait for the ACK"; the trace cannot tell, and says so. Written 6 ms after (the
/// ACK had arrived: 5 ms on, plus 1), it did.
#[test]
fn behind_a_path_a_write_soon_after_the_ack_passed_the_capture_point_is_not_called_a_wait() {
    let sim = |rest_after_ack: u64| {
        let mut s = Sim::new();
        let mut t = 1_000;
        for _ in 0..10 {
            s.data(C2S, t, 10);
            s.call(t + 5_020, CallKind::Read, 10, 5);
            s.call(t + 5_055, CallKind::Write, 12, 3);
            s.data(S2C, t + 10_060, 12);
            s.ack(C2S, t + 50_000);
            for k in 0..13 {
                s.call(t + 50_000 + rest_after_ack + k * 2, CallKind::Write, 15, 1);
            }
            s.data(S2C, t + 60_100, 13 * 15);
            t += 61_000;
        }
        s.cited(true, TraceStatus::Traced).0
    };
    let f = sim(2_000);
    let nagle = get(&f, FindingKind::NagleDelayedAck, S2C);
    assert!(
        fact(nagle, "contradicts a Nagle hold").is_none(),
        "{:#?}",
        nagle.evidence.facts
    );
    let hedged = fact(nagle, "cannot be told from this capture").expect("the trace cannot tell");
    assert!(
        hedged.contains("came 2.0 ms after the delayed ACK (frame")
            && hedged.contains("no sooner than 5.0 ms after its calls"),
        "{hedged}"
    );
    let f = sim(6_000);
    let nagle = get(&f, FindingKind::NagleDelayedAck, S2C);
    assert!(
        fact(nagle, "contradicts a Nagle hold").is_some(),
        "{:#?}",
        nagle.evidence.facts
    );
}

/// Attached to a running server (`inspect --trace`, or a sandbox end attached to): a socket
/// accepted while attached inherits a listener setting made before the attach, unseen. The
/// finding must not say "Nagle was on".
#[test]
fn attached_the_finding_does_not_claim_nagle_was_on() {
    let (f, _) = per_line_server(false).cited(true, TraceStatus::Attached);
    let nagle = get(&f, FindingKind::NagleDelayedAck, S2C);
    assert!(
        fact(nagle, "Nagle was on").is_none(),
        "{:#?}",
        nagle.evidence.facts
    );
    let said = fact(
        nagle,
        "did not set TCP_NODELAY on its 1 traced socket while traced",
    )
    .unwrap_or_else(|| panic!("{:#?}", nagle.evidence.facts));
    assert!(said.contains("is not in it"), "{said}");
}

/// A readiness probe's connection (connected, closed, nothing written) accepted in the same
/// window is not one of "its traced sockets": the counts and TCP_NODELAY's "every socket"
/// speak of the one that served.
#[test]
fn a_probe_connection_that_wrote_nothing_is_not_counted() {
    let (f, _) = per_line_server(false).cited_with(true, TraceStatus::Traced, |t| {
        t.sockets.push(TracedSocket {
            pid: 7,
            fd: 5,
            inode: 3,
            local: Some("127.0.0.1:7000".parse().unwrap()),
            remote: Some("127.0.0.1:39999".parse().unwrap()),
            first_seen: at(10),
            from_start: true,
        });
        t.calls.insert(
            0,
            Call {
                at: at(10),
                took_ns: 1_000,
                pid: 7,
                tid: 7,
                kind: CallKind::Read,
                fd: 5,
                ret: 0,
                arg: 65536,
                value: -1,
                socket: Some(1),
            },
        );
    });
    let nagle = get(&f, FindingKind::NagleDelayedAck, S2C);
    assert!(
        fact(nagle, "over 10 responses on 1 traced socket").is_some()
            && fact(nagle, "never set TCP_NODELAY on its 1 traced socket").is_some(),
        "{:#?}",
        nagle.evidence.facts
    );
}

#[test]
fn a_program_that_waits_for_the_ack_itself_contradicts_nagle() {
    let (f, _) = per_line_server(true).cited(true, TraceStatus::Traced);
    let nagle = get(&f, FindingKind::NagleDelayedAck, S2C);
    let c = fact(nagle, "the trace contradicts a Nagle hold").expect("contradiction stated");
    assert!(
        c.contains("came only 10 µs after the delayed ACK (frame 6)"),
        "{c}"
    );
    assert!(fact(nagle, "TCP_NODELAY was on for the example's socket").is_some());
    let set = fact(nagle, "the server set TCP_NODELAY").unwrap();
    assert!(
        set.contains("on for every traced socket (1) at the end"),
        "{set}"
    );
    assert!(
        set.contains("1 µs after accept returned the socket"),
        "{set}"
    );
    // Every socket had it on before its first write: the verdict no longer says Nagle held.
    assert!(
        nagle.verdict.contains("TCP_NODELAY on"),
        "{}",
        nagle.verdict
    );
    assert!(!nagle.verdict.contains("Nagle's algorithm holds"));
    assert!(fact(nagle, "the kernel held them").is_none());
}

/// Eight 14-byte segments per response (each line ACKed at once, nothing held).
fn fragmented(writes_per_response: u64) -> Sim {
    let mut s = Sim::new();
    let mut t = 1_000;
    for _ in 0..5 {
        s.data(C2S, t, 10);
        s.call(t + 20, CallKind::Read, 10, 5);
        let each = 112 / writes_per_response as i64;
        for k in 0..writes_per_response {
            s.call(t + 40 + k, CallKind::Writev, each, 1);
        }
        for k in 0..8 {
            s.data(S2C, t + 50 + k * 10, 14);
        }
        t += 1_000;
    }
    s
}

#[test]
fn one_write_per_response_contradicts_fragmented_writes() {
    let (f, _) = fragmented(1).cited(true, TraceStatus::Traced);
    let fw = get(&f, FindingKind::FragmentedWrites, S2C);
    assert_eq!(fw.evidence.distributions["writes_per_response"].p50, 1.0);
    let c = fact(fw, "the example's 8 segments carry one call").expect("per-example contradiction");
    assert!(
        c.starts_with("the trace contradicts one write per piece"),
        "{c}"
    );
    assert!(c.contains("writev() call #1 (112 bytes)"), "{c}");
    assert!(fact(fw, "wrote each response with one call (median)").is_some());
}

#[test]
fn one_write_per_segment_supports_fragmented_writes() {
    let (f, _) = fragmented(8).cited(true, TraceStatus::Traced);
    let fw = get(&f, FindingKind::FragmentedWrites, S2C);
    assert_eq!(fw.evidence.distributions["writes_per_response"].p50, 8.0);
    assert!(
        fact(fw, "contradicts").is_none(),
        "{:#?}",
        fw.evidence.facts
    );
    assert!(fact(fw, "the pieces are the server's own writes").is_some());
    assert!(fact(fw, "carry the bytes of writev() calls #1–#8").is_some());
}

/// As many calls as segments, but not one per segment: an 84-byte call cut over six segments,
/// then seven 4-byte calls in the last two. The pieces are not the program's writes one for
/// one, and the finding must not say they are.
#[test]
fn as_many_calls_as_segments_is_not_one_call_per_segment() {
    let mut s = Sim::new();
    let mut t = 1_000;
    for _ in 0..5 {
        s.data(C2S, t, 10);
        s.call(t + 20, CallKind::Read, 10, 5);
        s.call(t + 40, CallKind::Writev, 84, 1);
        for k in 0..7 {
            s.call(t + 41 + k, CallKind::Writev, 4, 1);
        }
        for k in 0..8 {
            s.data(S2C, t + 50 + k * 10, 14);
        }
        t += 1_000;
    }
    let (f, _) = s.cited(true, TraceStatus::Traced);
    let fw = get(&f, FindingKind::FragmentedWrites, S2C);
    assert!(fact(fw, "own writes").is_none(), "{:#?}", fw.evidence.facts);
    let split = fact(fw, "the example's 8 segments carry 8 calls").expect("the calls counted");
    assert!(
        split.contains("8 of the segments carry only part of a call, so the kernel split"),
        "{split}"
    );
}

#[test]
fn a_client_write_write_read_names_the_two_calls() {
    let mut s = Sim::new();
    let mut t = 1_000;
    for _ in 0..10 {
        s.call(t - 5, CallKind::Write, 8, 2);
        s.data(C2S, t, 8);
        s.call(t + 7, CallKind::Write, 100, 2);
        s.call(t + 9, CallKind::Read, 50, 40_095);
        s.ack(S2C, t + 40_000);
        s.data(C2S, t + 40_030, 100);
        s.data(S2C, t + 40_100, 50);
        t += 41_000;
    }
    let (f, n) = s.cited(false, TraceStatus::Traced);
    assert!(n >= 1);
    let nagle = get(&f, FindingKind::NagleDelayedAck, C2S);
    let wwr = fact(nagle, "the client wrote the request in two calls").expect("write-write-read");
    assert_eq!(
        wwr,
        "the client wrote the request in two calls: write(… 8 bytes) then write(… 100 bytes) \
         12 µs later; read() returned the first bytes of the answer 40.1 ms after the last \
         write (10 of 10 requests were written in two or more calls before a read)"
    );
    assert!(fact(nagle, "the kernel held them (Nagle)").is_some());
}

/// A non-blocking client (Node's `net`, libuv): it writes the header, looks for an answer
/// (`read` = EAGAIN, at once), writes the body, looks again (EAGAIN), then sleeps in a wait the
/// tracer does not trap until the answer comes and a `read` returns it at once. The request is
/// one message of two writes — the EAGAIN between them does not end it — and the time told is
/// the 40 ms the program went without its answer, not the microseconds `read()` took.
#[test]
fn a_non_blocking_client_write_write_read_is_told_by_when_its_answer_came() {
    let mut s = Sim::new();
    let mut t = 1_000;
    let again = -crate::syscalls::labels::errno::EAGAIN;
    for _ in 0..10 {
        s.call(t - 5, CallKind::Write, 8, 2);
        s.data(C2S, t, 8);
        s.call(t + 3, CallKind::Read, again, 2);
        s.call(t + 7, CallKind::Write, 100, 2);
        s.call(t + 9, CallKind::Read, again, 2);
        s.ack(S2C, t + 40_000);
        s.data(C2S, t + 40_030, 100);
        s.data(S2C, t + 40_100, 50);
        s.call(t + 40_110, CallKind::Read, 50, 3);
        t += 41_000;
    }
    let (f, _) = s.cited(false, TraceStatus::Traced);
    let nagle = get(&f, FindingKind::NagleDelayedAck, C2S);
    let wwr = fact(nagle, "the client wrote the request in two calls")
        .unwrap_or_else(|| panic!("write-write-read: {:#?}", nagle.evidence.facts));
    assert!(
        wwr.contains(
            "write(… 8 bytes) then write(… 100 bytes) 12 µs later; read() returned the first \
             bytes of the answer 40.1 ms after the last write (10 of 10 requests"
        ),
        "{wwr}"
    );
    let per = &nagle.evidence.distributions["writes_per_request"];
    assert_eq!((per.p50, per.count), (2.0, 10));
}

#[test]
fn nothing_is_cited_without_a_trace_or_for_another_end() {
    let (f, n) = per_line_server(false).cited(true, TraceStatus::Off);
    assert_eq!(n, 0);
    assert!(f.iter().all(|f| f.evidence.writes.is_empty()));
    // The client's trace says nothing about the server's writes (and the server's findings
    // are all this capture has).
    let (f, n) = per_line_server(false).cited(false, TraceStatus::Traced);
    assert_eq!(n, 0);
    assert!(f.iter().all(|f| fact(f, "TCP_NODELAY").is_none()));
}
