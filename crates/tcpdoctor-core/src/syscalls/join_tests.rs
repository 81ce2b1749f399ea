//! The join of written bytes to frames, on hand-built traces shaped like the kernel's
//! behaviour: coalesced writes, a write split over segments, retransmissions, partial writes.

use std::net::SocketAddr;

use super::join::{describe_frames, describe_resent, join_segments, Joiner, SentSegment};
use super::{Call, CallKind, Trace, TraceStatus, TracedSocket};
use crate::time::Timestamp;
use crate::wire::{Endpoint, TcpFlags, TcpOptions, TcpSegment};

pub(super) const T0: u64 = 1_700_000_000_000_000_000;

pub(super) fn us(n: u64) -> Timestamp {
    Timestamp(T0 + n * 1_000)
}

pub(super) fn socket(local: &str, remote: &str, from_start: bool) -> TracedSocket {
    TracedSocket {
        pid: 100,
        fd: 5,
        inode: 4242,
        local: Some(local.parse().unwrap()),
        remote: Some(remote.parse().unwrap()),
        first_seen: us(0),
        from_start,
    }
}

pub(super) fn call(at_us: u64, kind: CallKind, asked: i64, ret: i64, socket: u32) -> Call {
    Call {
        at: us(at_us),
        took_ns: 2_000,
        pid: 100,
        tid: 100,
        kind,
        fd: 5,
        ret,
        arg: asked,
        value: -1,
        socket: Some(socket),
    }
}

/// `n`-byte writes at the given microseconds, on socket 0.
pub(super) fn trace(sockets: Vec<TracedSocket>, calls: Vec<Call>) -> Trace {
    Trace {
        setup: Vec::new(),
        status: TraceStatus::Traced,
        processes: Vec::new(),
        sockets,
        calls,
        dropped: 0,
        traced_calls: 0,
        tracer_ns: 0,
        started: us(0),
        ended: us(1_000_000),
    }
}

fn seg(frame: u64, at_us: u64, offset: u64, len: u32) -> SentSegment {
    SentSegment {
        frame,
        ts: us(at_us),
        offset,
        len,
    }
}

fn writes(sizes: &[(u64, i64)]) -> Trace {
    let calls = sizes
        .iter()
        .map(|&(at, n)| call(at, CallKind::Write, n, n, 0))
        .collect();
    trace(
        vec![socket("127.0.0.1:7000", "127.0.0.1:50000", true)],
        calls,
    )
}

fn joined(t: &Trace, segments: &[SentSegment]) -> super::join::SocketJoin {
    let w = super::join::stream_writes(t, &[0]).unwrap();
    let (writes, frames) = join_segments(w, segments);
    super::join::SocketJoin {
        sockets: vec![0],
        local: None,
        remote: None,
        writes,
        frames,
        not_joined: None,
        notes: Vec::new(),
    }
}

#[test]
fn one_segment_carries_several_coalesced_writes() {
    // Autocorking / Nagle: three writes 4 µs apart leave as one 82-byte segment.
    let t = writes(&[(10, 12), (14, 35), (18, 35)]);
    let j = joined(&t, &[seg(41, 30, 0, 82)]);
    let f = j.frame(41).unwrap();
    assert_eq!((f.first_write, f.last_write), (1, 3));
    assert!(!f.starts_mid_write && !f.ends_mid_write && !f.retransmission);
    assert!(j.writes.iter().all(|w| w.frames == vec![41]));
    assert_eq!(
        describe_frames(&j, &[41]).unwrap(),
        "frame 41 carries the bytes of write() calls #1, #2, #3 (12, 35, 35 bytes, 4 µs apart)"
    );
}

#[test]
fn one_write_per_frame_reads_as_the_issue_says() {
    let t = writes(&[(0, 100), (10, 12), (14, 35), (18, 35)]);
    let j = joined(
        &t,
        &[
            seg(40, 5, 0, 100),
            seg(41, 12, 100, 12),
            seg(43, 16, 112, 35),
            seg(45, 20, 147, 35),
        ],
    );
    assert_eq!(
        describe_frames(&j, &[41, 43, 45]).unwrap(),
        "frames 41, 43, 45 carry the bytes of write() calls #2, #3, #4 (12, 35, 35 bytes, \
         4 µs apart)"
    );
    // A frame the join does not hold says nothing.
    assert_eq!(describe_frames(&j, &[99]), None);
}

#[test]
fn one_write_split_over_segments_and_the_end_of_one_with_the_next() {
    // 3,000 bytes at MSS 1448: 1448 + 1448 + 104, the last segment coalesced with the next
    // 50-byte write.
    let t = writes(&[(0, 3000), (3, 50)]);
    let j = joined(
        &t,
        &[
            seg(10, 5, 0, 1448),
            seg(12, 5, 1448, 1448),
            seg(14, 9, 2896, 154),
        ],
    );
    assert_eq!(j.writes[0].frames, vec![10, 12, 14]);
    assert_eq!(j.writes[1].frames, vec![14]);
    let f12 = j.frame(12).unwrap();
    assert!(f12.starts_mid_write && f12.ends_mid_write);
    let f14 = j.frame(14).unwrap();
    assert_eq!((f14.first_write, f14.last_write), (1, 2));
    assert!(f14.starts_mid_write && !f14.ends_mid_write);
    assert_eq!(j.writes[0].sent_at, Some(us(9)));
    assert_eq!(
        describe_frames(&j, &[14]).unwrap(),
        "frame 14 carries the bytes of write() calls #1, #2 (3,000, 50 bytes, 3 µs apart)"
    );
}

#[test]
fn a_retransmission_is_listed_apart() {
    let t = writes(&[(0, 12), (100, 20)]);
    // Frame 5 first, frame 9 resends it (RTO), frame 11 carries the retransmitted 12 bytes
    // and the new 20 (a retransmission that also carries new bytes).
    let j = joined(
        &t,
        &[
            seg(5, 1, 0, 12),
            seg(9, 200_000, 0, 12),
            seg(11, 400_000, 0, 32),
        ],
    );
    assert_eq!(j.writes[0].frames, vec![5]);
    assert_eq!(j.writes[0].resent_in, vec![9, 11]);
    assert_eq!(j.writes[1].frames, vec![11]);
    assert!(j.writes[1].resent_in.is_empty());
    assert!(j.frame(9).unwrap().retransmission);
    assert!(!j.frame(5).unwrap().retransmission);
    // The pure retransmission names no first transmission; frame 11 names write #2 only.
    assert_eq!(describe_frames(&j, &[9]), None);
    assert_eq!(
        describe_frames(&j, &[9, 11]).unwrap(),
        "frame 11 carries the bytes of write() call #2 (20 bytes)"
    );
    assert_eq!(
        describe_resent(&j, &[9]),
        vec!["frame 9 carries the bytes of write() call #1 (12 bytes) again (a retransmission)"]
    );
}

#[test]
fn a_partial_write_counts_what_it_returned() {
    // Asked 1000, the send buffer took 600; the program writes the other 400 next; a failed
    // call (EAGAIN) in between wrote nothing and is not numbered.
    let t = trace(
        vec![socket("127.0.0.1:7000", "127.0.0.1:50000", true)],
        vec![
            call(0, CallKind::Write, 1000, 600, 0),
            call(5, CallKind::Write, 400, -11, 0),
            call(9, CallKind::Writev, 400, 400, 0),
        ],
    );
    let j = joined(&t, &[seg(3, 1, 0, 600), seg(4, 12, 600, 400)]);
    assert_eq!(j.writes.len(), 2);
    assert_eq!(j.writes[1].write.offset, 600);
    assert_eq!(j.writes[1].write.index, 2);
    assert_eq!(j.writes[0].frames, vec![3]);
    assert_eq!(j.writes[1].frames, vec![4]);
    assert_eq!(
        describe_frames(&j, &[3, 4]).unwrap(),
        "frames 3, 4 carry the bytes of calls write() #1, writev() #2 (600, 400 bytes, 9 µs \
         apart; partial: #1 took 600 of 1000)"
    );
}

fn tcp(src: &str, dst: &str, seq: u32, flags: u8, len: u32) -> TcpSegment {
    let (s, d): (SocketAddr, SocketAddr) = (src.parse().unwrap(), dst.parse().unwrap());
    TcpSegment {
        src: Endpoint {
            ip: s.ip(),
            port: s.port(),
        },
        dst: Endpoint {
            ip: d.ip(),
            port: d.port(),
        },
        seq,
        ack: 1,
        flags: TcpFlags(flags),
        window: 512,
        payload_len: len,
        options: TcpOptions::default(),
    }
}

const SRV: &str = "127.0.0.1:7000";
const CLI: &str = "127.0.0.1:50000";

#[test]
fn the_pass_joins_by_endpoints_across_the_sequence_wrap() {
    // The server's socket as an IPv6 socket sees it: IPv4-mapped addresses.
    let mut s = socket("[::ffff:127.0.0.1]:7000", "[::ffff:127.0.0.1]:50000", true);
    s.inode = 9;
    let t = trace(
        vec![s],
        vec![
            call(100, CallKind::Sendto, 10, 10, 0),
            call(104, CallKind::Sendto, 10, 10, 0),
        ],
    );
    let isn = u32::MAX - 4; // stream offset 5 is sequence number 0
    let mut j = Joiner::new(&t);
    assert!(j.wants_capture());
    let syn_ack = TcpFlags::SYN | TcpFlags::ACK;
    j.on_segment(1, us(1), &tcp(CLI, SRV, 77, TcpFlags::SYN, 0));
    j.on_segment(2, us(2), &tcp(SRV, CLI, isn, syn_ack, 0));
    j.on_segment(3, us(3), &tcp(CLI, SRV, 78, TcpFlags::ACK, 30)); // the request: other way
    j.on_segment(
        4,
        us(101),
        &tcp(SRV, CLI, isn.wrapping_add(1), TcpFlags::ACK, 10),
    );
    j.on_segment(5, us(105), &tcp(SRV, CLI, 6, TcpFlags::ACK, 10));
    let joins = j.finish();
    assert_eq!(joins.len(), 1);
    let sj = &joins[0];
    assert!(sj.is_joined(), "{:?}", sj.not_joined);
    assert_eq!(sj.writes[0].frames, vec![4]);
    assert_eq!(sj.writes[1].frames, vec![5]);
    assert_eq!(sj.frame(5).unwrap().segment.offset, 10);
    assert!(sj.notes.is_empty(), "{:?}", sj.notes);
    assert_eq!(
        describe_frames(sj, &[4, 5]).unwrap(),
        "frames 4, 5 carry the bytes of sendto() calls #1, #2 (10, 10 bytes, 4 µs apart)"
    );
}

#[test]
fn a_later_connection_on_the_same_endpoints_is_not_this_sockets() {
    let t = trace(
        vec![socket(CLI, SRV, true)],
        vec![call(10, CallKind::Write, 5, 5, 0)],
    );
    let mut j = Joiner::new(&t);
    j.on_segment(1, us(1), &tcp(CLI, SRV, 1000, TcpFlags::SYN, 0));
    j.on_segment(2, us(11), &tcp(CLI, SRV, 1001, TcpFlags::ACK, 5));
    // The port is reused by a new connection (new ISN) after this socket's first write.
    j.on_segment(3, us(500), &tcp(CLI, SRV, 9000, TcpFlags::SYN, 0));
    j.on_segment(4, us(510), &tcp(CLI, SRV, 9001, TcpFlags::ACK, 5));
    let sj = &j.finish()[0];
    assert_eq!(sj.writes[0].frames, vec![2]);
    assert_eq!(sj.frames.len(), 1);
    assert!(sj.notes.is_empty());
}

#[test]
fn an_earlier_connection_on_the_same_endpoints_is_replaced() {
    let t = trace(
        vec![socket(CLI, SRV, true)],
        vec![call(600, CallKind::Write, 5, 5, 0)],
    );
    let mut j = Joiner::new(&t);
    j.on_segment(1, us(1), &tcp(CLI, SRV, 1000, TcpFlags::SYN, 0));
    j.on_segment(2, us(11), &tcp(CLI, SRV, 1001, TcpFlags::ACK, 5));
    j.on_segment(3, us(500), &tcp(CLI, SRV, 9000, TcpFlags::SYN, 0));
    j.on_segment(4, us(610), &tcp(CLI, SRV, 9001, TcpFlags::ACK, 5));
    let sj = &j.finish()[0];
    assert_eq!(sj.writes[0].frames, vec![4]);
}

#[test]
fn a_socket_seen_mid_connection_is_not_joined_and_says_why() {
    let t = trace(
        vec![socket(SRV, CLI, false)],
        vec![call(10, CallKind::Write, 5, 5, 0)],
    );
    let mut j = Joiner::new(&t);
    assert!(!j.wants_capture());
    j.on_segment(
        1,
        us(1),
        &tcp(SRV, CLI, 1000, TcpFlags::SYN | TcpFlags::ACK, 0),
    );
    j.on_segment(2, us(11), &tcp(SRV, CLI, 1001, TcpFlags::ACK, 5));
    let sj = &j.finish()[0];
    assert!(!sj.is_joined());
    assert!(
        sj.not_joined.as_deref().unwrap().contains("mid-connection"),
        "{:?}",
        sj.not_joined
    );
    // Its writes are still listed, without frames.
    assert_eq!(sj.writes.len(), 1);
    assert!(sj.writes[0].frames.is_empty());
    assert!(sj.frames.is_empty());
}

#[test]
fn a_capture_without_the_syn_cannot_be_joined() {
    let t = trace(
        vec![socket(SRV, CLI, true)],
        vec![call(10, CallKind::Write, 5, 5, 0)],
    );
    let mut j = Joiner::new(&t);
    j.on_segment(2, us(11), &tcp(SRV, CLI, 1001, TcpFlags::ACK, 5));
    let sj = &j.finish()[0];
    assert!(sj.not_joined.as_deref().unwrap().contains("not its SYN"));
    let none = Joiner::new(&t).finish();
    assert!(none[0]
        .not_joined
        .as_deref()
        .unwrap()
        .contains("no frame of its connection"));
}

#[test]
fn more_bytes_on_the_wire_than_traced_is_noted() {
    let t = trace(
        vec![socket(SRV, CLI, true)],
        vec![call(10, CallKind::Write, 5, 5, 0)],
    );
    let mut j = Joiner::new(&t);
    j.on_segment(
        1,
        us(1),
        &tcp(SRV, CLI, 1000, TcpFlags::SYN | TcpFlags::ACK, 0),
    );
    j.on_segment(2, us(11), &tcp(SRV, CLI, 1001, TcpFlags::ACK, 9));
    let sj = &j.finish()[0];
    assert!(sj.is_joined());
    assert!(sj.notes[0].contains("4 bytes more"), "{:?}", sj.notes);
    let f = sj.frame(2).unwrap();
    assert_eq!((f.first_write, f.last_write), (1, 1));
}

#[test]
fn sendmmsg_and_listeners_are_not_joined() {
    let mut listener = socket(SRV, CLI, true);
    listener.remote = None;
    listener.inode = 1;
    let t = trace(
        vec![socket(SRV, CLI, true), listener],
        vec![call(10, CallKind::Sendmmsg, 2, 2, 0)],
    );
    let joins = Joiner::new(&t).finish();
    // The listener wrote nothing: no join at all; the sendmmsg socket says why.
    assert_eq!(joins.len(), 1);
    assert!(joins[0].not_joined.as_deref().unwrap().contains("sendmmsg"));
}

#[test]
fn descriptors_of_one_socket_are_one_stream() {
    let mut dup = socket(SRV, CLI, true);
    dup.fd = 9;
    let t = trace(
        vec![socket(SRV, CLI, true), dup],
        vec![
            call(10, CallKind::Write, 5, 5, 0),
            call(12, CallKind::Write, 7, 7, 1),
        ],
    );
    let mut j = Joiner::new(&t);
    j.on_segment(
        1,
        us(1),
        &tcp(SRV, CLI, 1000, TcpFlags::SYN | TcpFlags::ACK, 0),
    );
    j.on_segment(2, us(20), &tcp(SRV, CLI, 1001, TcpFlags::ACK, 12));
    let joins = j.finish();
    assert_eq!(joins.len(), 1);
    assert_eq!(joins[0].sockets, vec![0, 1]);
    assert_eq!(joins[0].writes[1].write.offset, 5);
    assert_eq!(joins[0].writes[1].frames, vec![2]);
}

#[test]
fn a_capture_file_is_joined_in_one_pass() {
    use crate::wire::write::{PcapWriter, Side, SyntheticTcp};
    use crate::wire::CaptureReader;
    let (c, s) = (
        "127.0.0.1:50000".parse().unwrap(),
        "127.0.0.1:7000".parse().unwrap(),
    );
    let (mut tcp, mut pkts) = SyntheticTcp::new(c, s, us(1), 0);
    pkts.extend(tcp.data(us(10), Side::Client, &[0; 20]));
    // One 100-byte write, then one of 70,000: the second leaves as a full loopback segment
    // and the rest.
    pkts.extend(tcp.data(us(30), Side::Server, &[0; 100]));
    pkts.extend(tcp.data(us(40), Side::Server, &vec![0; 70_000]));
    let mut w = PcapWriter::new(Vec::new(), 128).unwrap();
    for (ts, p, len) in &pkts {
        w.write_packet(*ts, p, *len).unwrap();
    }
    let t = trace(
        vec![socket(SRV, CLI, true)],
        vec![
            call(28, CallKind::Write, 100, 100, 0),
            call(38, CallKind::Write, 70_000, 70_000, 0),
        ],
    );
    let bytes = w.into_inner();
    let mut reader = CaptureReader::new(std::io::Cursor::new(bytes)).unwrap();
    let joins = super::join::join_capture(&t, &mut reader).unwrap();
    let sj = &joins[0];
    assert!(sj.is_joined(), "{:?}", sj.not_joined);
    // Frames: 1-3 handshake, 4 the request, 5 the 100 bytes, 6 and 7 the 70,000.
    assert_eq!(sj.writes[0].frames, vec![5]);
    assert_eq!(sj.writes[1].frames, vec![6, 7]);
    assert_eq!(
        describe_frames(sj, &[5, 6, 7]).unwrap(),
        "frame 5 carries the bytes of write() call #1 (100 bytes); frames 6, 7 carry the bytes \
         of write() call #2 (70,000 bytes), one write split over 2 frames"
    );
}

#[test]
fn a_readdressed_trace_matches_the_capture_on_the_other_side_of_a_nat() {
    use std::net::SocketAddr;
    let inside: SocketAddr = "127.0.0.1:7000".parse().unwrap();
    let outside: SocketAddr = "198.18.0.1:7000".parse().unwrap();
    let mut t = crate::syscalls::Trace::not_traced(crate::syscalls::TraceStatus::Traced);
    t.sockets.push(crate::syscalls::TracedSocket {
        pid: 1,
        fd: 5,
        inode: 9,
        local: Some(inside),
        remote: Some("198.18.0.2:40000".parse().unwrap()),
        first_seen: crate::time::Timestamp(0),
        from_start: true,
    });
    let r = t.readdressed(&[(inside, outside)]);
    assert_eq!(r.sockets[0].local, Some(outside));
    assert_eq!(
        r.sockets[0].remote, t.sockets[0].remote,
        "the peer is not renamed"
    );
    assert_eq!(t.sockets[0].local, Some(inside), "the original is kept");
}

/// A connection accepted in an earlier window of the same trace (`run` takes one per scenario
/// and keeps the sockets whole): this window's writes do not start at its first byte, so it is
/// not joined, and the block does not say its counts start with the stream.
#[test]
fn a_connection_from_an_earlier_window_is_not_joined() {
    use crate::syscalls::fixtures::asyncio_per_line;
    let t = asyncio_per_line(4, 3);
    let mid = t.calls[t.calls.len() / 2].at;
    let late = t.between(mid, t.ended);
    let joins = super::join::Joiner::new(&late).finish();
    let j = joins
        .iter()
        .find(|j| !j.writes.is_empty())
        .expect("the served socket");
    let why = j.not_joined.as_deref().expect("not joined");
    assert!(why.contains("began before this trace window"), "{why}");
    let r = crate::syscalls::summarize(&late, None);
    assert!(r.sockets.iter().all(|s| !s.from_start), "{:#?}", r.sockets);
    // The whole trace joins it (it would, given a capture) and says it saw it from the start.
    let whole = super::join::Joiner::new(&t).finish();
    assert!(whole.iter().all(|j| j
        .not_joined
        .as_deref()
        .is_none_or(|w| w.contains("no frame"))));
    assert!(crate::syscalls::summarize(&t, None)
        .sockets
        .iter()
        .any(|s| s.from_start));
}

/// A blocking `accept` entered before the window began and returned in it (a server waiting
/// for the scenario's first connection): the call is the window's (kept by its exit), so the
/// socket it returned is seen from its start, though `first_seen` (the entry) is earlier.
#[test]
fn a_blocking_accept_entered_before_the_window_is_the_windows() {
    use crate::syscalls::fixtures::asyncio_per_line;
    let mut t = asyncio_per_line(4, 3);
    let accept = t
        .calls
        .iter()
        .position(|c| c.kind == CallKind::Accept && c.ret >= 0)
        .expect("an accept");
    t.calls.drain(..accept);
    // As the tracer records it: the socket first seen at the accept's entry.
    let (at, fd) = (t.calls[0].at, t.calls[0].ret as i32);
    for s in t.sockets.iter_mut().filter(|s| s.fd == fd) {
        s.first_seen = at;
    }
    t.started = at.plus(std::time::Duration::from_micros(1));
    assert!(t.from_start_in_window().iter().any(|&w| w));
    let joins = Joiner::new(&t).finish();
    let j = joins
        .iter()
        .find(|j| !j.writes.is_empty())
        .expect("the served socket");
    assert!(
        j.not_joined
            .as_deref()
            .is_some_and(|w| w.contains("no frame")),
        "joinable (only no capture given): {:?}",
        j.not_joined
    );
    assert!(crate::syscalls::summarize(&t, None)
        .sockets
        .iter()
        .any(|s| s.from_start && s.remote.is_some()));
}
