//! Which `write()` produced which frame: the bytes a traced program wrote on a TCP socket,
//! joined to the sequence ranges of the captured segments that carried them.
//!
//! Rules:
//! 1. Only a socket the tracer saw from its start ([`TracedSocket::from_start`]: accept or
//!    connect returned it) within the trace's window ([`Trace::from_start_in_window`]) is joined:
//!    only then does its count of bytes written start at the stream's first byte. Descriptors of one socket (same inode: `dup`, a fork) are one
//!    stream; their calls are taken in the trace's order.
//! 2. The calls that count are the write family with a result > 0: the result is the bytes
//!    the kernel took (a partial write counts what it returned, not what it asked). They are
//!    numbered #1, #2, … in that order, per socket. `sendmmsg` returns messages, not bytes:
//!    a socket with one is not joined.
//! 3. The capture's connection is the one whose endpoints equal the socket's, in the
//!    direction the socket sends (local → remote; an IPv4-mapped IPv6 address is its IPv4
//!    address), and whose SYN (or SYN-ACK) from the local end gives the stream's ISN. When
//!    the same endpoints carry a later connection (a new ISN), the first connection whose
//!    SYN came before the socket's first write is kept.
//! 4. Cumulative bytes written ↔ sequence offsets: byte `k` of the stream (0 = the first
//!    byte after the SYN) is sequence number ISN + 1 + k, with wrapping arithmetic
//!    ([`SeqNum`]). A segment carrying [o, o + len) carries the bytes of every write whose
//!    range meets it: one segment can carry the end of one write and several whole ones
//!    (Nagle, autocorking and TSO/GSO coalesce; a loopback segment can be 64 KB), and one
//!    write can leave in several segments (the MSS, the window).
//! 5. Bytes carried again (below the highest offset already seen) are a retransmission:
//!    the frame carries the same bytes again and is listed apart from the first
//!    transmission.
//! 6. Bounded memory: at most [`MAX_SEGMENTS`] segments are kept per socket (the
//!    capture's first ones); later writes are left unjoined and the join says so.

use std::net::{IpAddr, SocketAddr};

use crate::syscalls::{CallKind, Trace};
use crate::time::Timestamp;
use crate::wire::Endpoint;

mod pass;
mod words;

pub use pass::{join_capture, Joiner};
pub use words::{describe_frames, describe_resent, describe_writes};

/// Segments kept per joined socket (rule 6).
pub const MAX_SEGMENTS: usize = 50_000;

/// One write-family call that moved bytes, with its place in the socket's stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamWrite {
    /// #k: 1-based over the socket's calls that wrote bytes.
    pub index: u32,
    /// Index into [`Trace::calls`].
    pub call: usize,
    pub kind: CallKind,
    /// The call's entry.
    pub at: Timestamp,
    /// Bytes the kernel took (the call's result).
    pub bytes: u64,
    /// Bytes asked for (-1 unknown): more than `bytes` for a partial write.
    pub asked: i64,
    /// Stream offset of its first byte.
    pub offset: u64,
}

impl StreamWrite {
    pub fn end(&self) -> u64 {
        self.offset + self.bytes
    }
}

/// One captured segment from the socket's end: its payload's place in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SentSegment {
    /// Wireshark `frame.number`.
    pub frame: u64,
    pub ts: Timestamp,
    /// Stream offset of its first payload byte (0 = the first byte after the SYN).
    pub offset: u64,
    pub len: u32,
}

/// A write and the frames that carried its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JoinedWrite {
    pub write: StreamWrite,
    /// Frames that carried its bytes for the first time, in capture order.
    pub frames: Vec<u64>,
    /// Frames that carried some of its bytes again (retransmissions).
    pub resent_in: Vec<u64>,
    /// When its last byte first left (the capture's clock), once it did.
    pub sent_at: Option<Timestamp>,
}

/// A frame and the writes whose bytes it carried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameWrites {
    pub segment: SentSegment,
    /// Some of its bytes had been seen before (rule 5).
    pub retransmission: bool,
    /// The writes it carries, #first..=#last; (0, 0) when its bytes are beyond every write
    /// traced.
    pub first_write: u32,
    pub last_write: u32,
    /// It begins inside `first_write` / ends inside `last_write` (a write split over frames).
    pub starts_mid_write: bool,
    pub ends_mid_write: bool,
}

/// One traced socket, joined or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SocketJoin {
    /// Indices into [`Trace::sockets`] of its descriptors (one unless `dup`ed or inherited).
    pub sockets: Vec<u32>,
    pub local: Option<Endpoint>,
    pub remote: Option<Endpoint>,
    pub writes: Vec<JoinedWrite>,
    pub frames: Vec<FrameWrites>,
    /// Why it is not joined, when it is not (the writes are then listed, without frames).
    pub not_joined: Option<String>,
    /// What limits a join that was made (segments beyond the cap, bytes not traced).
    pub notes: Vec<String>,
}

impl SocketJoin {
    pub fn is_joined(&self) -> bool {
        self.not_joined.is_none()
    }

    /// The frame, when the join holds it.
    pub fn frame(&self, frame: u64) -> Option<&FrameWrites> {
        self.frames.iter().find(|f| f.segment.frame == frame)
    }

    /// Write #`index`.
    pub fn write(&self, index: u32) -> Option<&JoinedWrite> {
        self.writes.get((index as usize).checked_sub(1)?)
    }
}

/// An address as the capture shows it: an IPv4-mapped IPv6 address is its IPv4 address.
pub fn endpoint(addr: SocketAddr) -> Endpoint {
    let ip = match addr.ip() {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    Endpoint {
        ip,
        port: addr.port(),
    }
}

/// The writes of the calls on `sockets`, numbered and placed in the stream (rule 2); an
/// error names a call whose result is not bytes.
pub fn stream_writes(trace: &Trace, sockets: &[u32]) -> Result<Vec<StreamWrite>, String> {
    let mut out = Vec::new();
    let mut offset = 0u64;
    for (i, c) in trace.calls.iter().enumerate() {
        if !c.kind.writes() || !c.socket.is_some_and(|s| sockets.contains(&s)) || c.ret <= 0 {
            continue;
        }
        if c.kind == CallKind::Sendmmsg {
            return Err(
                "it was written with sendmmsg, whose result counts messages, not bytes".into(),
            );
        }
        let bytes = c.ret as u64;
        out.push(StreamWrite {
            index: out.len() as u32 + 1,
            call: i,
            kind: c.kind,
            at: c.at,
            bytes,
            asked: c.arg,
            offset,
        });
        offset += bytes;
    }
    Ok(out)
}

/// Rules 4 and 5: the frames each write's bytes left in, and the writes each frame carried.
/// `segments` in capture order, offsets already relative to the stream's first byte.
pub fn join_segments(
    writes: Vec<StreamWrite>,
    segments: &[SentSegment],
) -> (Vec<JoinedWrite>, Vec<FrameWrites>) {
    let mut joined: Vec<JoinedWrite> = writes
        .into_iter()
        .map(|write| JoinedWrite {
            write,
            frames: Vec::new(),
            resent_in: Vec::new(),
            sent_at: None,
        })
        .collect();
    let mut frames = Vec::with_capacity(segments.len());
    let mut high = 0u64;
    for seg in segments.iter().filter(|s| s.len > 0) {
        let (start, end) = (seg.offset, seg.offset + u64::from(seg.len));
        let first = joined.partition_point(|w| w.write.end() <= start);
        let mut fw = FrameWrites {
            segment: *seg,
            retransmission: start < high,
            first_write: 0,
            last_write: 0,
            starts_mid_write: false,
            ends_mid_write: false,
        };
        for w in joined[first..]
            .iter_mut()
            .take_while(|w| w.write.offset < end)
        {
            if fw.first_write == 0 {
                fw.first_write = w.write.index;
                fw.starts_mid_write = start > w.write.offset;
            }
            fw.last_write = w.write.index;
            fw.ends_mid_write = end < w.write.end();
            // Rule 5: the part below `high` was carried before.
            if w.write.offset < high.min(end) && w.write.end() > start {
                push_once(&mut w.resent_in, seg.frame);
            }
            if w.write.end() > start.max(high) {
                push_once(&mut w.frames, seg.frame);
                if end >= w.write.end() {
                    w.sent_at = Some(seg.ts);
                }
            }
        }
        high = high.max(end);
        frames.push(fw);
    }
    (joined, frames)
}

fn push_once(v: &mut Vec<u64>, frame: u64) {
    if v.last() != Some(&frame) {
        v.push(frame);
    }
}
