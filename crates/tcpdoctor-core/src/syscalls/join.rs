//! Which `write()` produced which frame: the bytes a traced program wrote on a TCP socket,
//! joined to the sequence ranges of the captured segments that carried them.
//!
//! Rules:
//! 1. Only a socket the tracer saw from its start ([`TracedSocket::from_start`]: accept or
//!    connect returned it) is joined: only then does its count of bytes written start at the
//!    stream's first byte. Descriptors of one socket (same inode: `dup`, a fork) are one
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

use std::io::Read;
use std::net::{IpAddr, SocketAddr};

use crate::fxhash::FxHashMap;
use crate::seq::SeqNum;
use crate::syscalls::{CallKind, Trace};
use crate::time::Timestamp;
use crate::units::{fmt_count, fmt_duration};
use crate::wire::{decode_tcp, CaptureError, CaptureReader, Endpoint, LinkType, TcpSegment};

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

/// The connection a socket is joined to, as the pass finds it.
struct Conn {
    /// ISN + 1: the sequence number of stream offset 0.
    base: SeqNum,
    /// Highest stream offset seen so far (unwraps the 32-bit sequence space).
    high: u64,
}

/// One socket to join, while the capture is read.
struct Pending {
    join: SocketJoin,
    writes: Vec<StreamWrite>,
    first_write: Option<Timestamp>,
    conn: Option<Conn>,
    /// A later connection on the same endpoints came: nothing more is this socket's.
    frozen: bool,
    data_before_syn: bool,
    segments: Vec<SentSegment>,
    dropped: u64,
}

impl Pending {
    fn on_segment(&mut self, frame: u64, ts: Timestamp, seg: &TcpSegment) {
        if self.frozen {
            return;
        }
        if seg.flags.syn() {
            let base = SeqNum(seg.seq).plus(1);
            match &self.conn {
                Some(c) if c.base == base => {}
                // Rule 3: a later connection on the same endpoints.
                Some(_) if self.first_write.is_some_and(|w| w < ts) => {
                    self.frozen = true;
                    return;
                }
                _ => {
                    self.conn = Some(Conn { base, high: 0 });
                    self.segments.clear();
                    self.dropped = 0;
                }
            }
        }
        if seg.payload_len == 0 {
            return;
        }
        let Some(conn) = self.conn.as_mut() else {
            self.data_before_syn = true;
            return;
        };
        // A SYN's own data (TCP Fast Open) starts right after the SYN's sequence number.
        let seq = SeqNum(seg.seq).plus(u32::from(seg.flags.syn()));
        let rel = seq.diff(conn.base.plus(conn.high as u32));
        let Some(offset) = conn.high.checked_add_signed(rel) else {
            return;
        };
        conn.high = conn.high.max(offset + u64::from(seg.payload_len));
        if self.segments.len() >= MAX_SEGMENTS {
            self.dropped += 1;
            return;
        }
        self.segments.push(SentSegment {
            frame,
            ts,
            offset,
            len: seg.payload_len,
        });
    }

    fn finish(mut self) -> SocketJoin {
        if self.join.not_joined.is_none() && self.conn.is_none() {
            self.join.not_joined = Some(if self.data_before_syn {
                "the capture has its data but not its SYN (the connection began before the \
                 capture), so its sequence numbers cannot be counted from the first byte"
                    .into()
            } else {
                "no frame of its connection is in the capture".into()
            });
        }
        if self.join.not_joined.is_some() {
            self.join.writes = join_segments(self.writes, &[]).0;
            return self.join;
        }
        let written: u64 = self.writes.last().map_or(0, StreamWrite::end);
        let high = self.conn.as_ref().map_or(0, |c| c.high);
        if self.dropped > 0 {
            let last = self.segments.last().map_or(0, |s| s.frame);
            self.join.notes.push(format!(
                "only its first {} segments were kept (through frame {last}); {} later ones \
                 are not joined",
                fmt_count(MAX_SEGMENTS as u64),
                fmt_count(self.dropped)
            ));
        }
        if high > written {
            self.join.notes.push(format!(
                "the capture carried {} bytes more than its traced calls wrote ({} written): \
                 some writes were not traced (calls beyond the tracer's cap, or a process it \
                 did not follow)",
                fmt_count(high - written),
                fmt_count(written)
            ));
        }
        let (writes, frames) = join_segments(self.writes, &self.segments);
        self.join.writes = writes;
        self.join.frames = frames;
        self.join
    }
}

/// The second pass over a capture: joins the traced sockets' writes to the frames that
/// carried them. Feed it every frame (or decoded segment) in capture order, then
/// [`Joiner::finish`].
pub struct Joiner {
    pending: Vec<Pending>,
    /// (local, remote) → the pending sockets sending that way.
    by_key: FxHashMap<(Endpoint, Endpoint), Vec<usize>>,
}

impl Joiner {
    /// One socket per inode of `trace.sockets` (rule 1), its writes numbered (rule 2).
    pub fn new(trace: &Trace) -> Joiner {
        let mut groups: Vec<Vec<u32>> = Vec::new();
        for (i, s) in trace.sockets.iter().enumerate() {
            let same = groups.iter_mut().find(|g| {
                let first = &trace.sockets[g[0] as usize];
                s.inode != 0 && first.inode == s.inode
            });
            match same {
                Some(g) => g.push(i as u32),
                None => groups.push(vec![i as u32]),
            }
        }
        let mut pending = Vec::new();
        let mut by_key: FxHashMap<(Endpoint, Endpoint), Vec<usize>> = FxHashMap::default();
        for sockets in groups {
            let s = &trace.sockets[sockets[0] as usize];
            let (writes, mut why) = match stream_writes(trace, &sockets) {
                // Nothing written, nothing to join (a listener, a socket only read from).
                Ok(w) if w.is_empty() => continue,
                Ok(w) => (w, None),
                Err(e) => (Vec::new(), Some(e)),
            };
            let (local, remote) = (s.local.map(endpoint), s.remote.map(endpoint));
            if !trace.sockets[sockets[0] as usize].from_start {
                why = Some(format!(
                    "the tracer first saw it mid-connection (fd {} of pid {}): the bytes it \
                     counts do not start at the stream's first byte",
                    s.fd, s.pid
                ));
            } else if local.is_none() || remote.is_none() {
                why = Some("its endpoints are not known (a listener, or never connected)".into());
            }
            if why.is_none() {
                if let (Some(l), Some(r)) = (local, remote) {
                    by_key.entry((l, r)).or_default().push(pending.len());
                }
            }
            pending.push(Pending {
                first_write: writes.first().map(|w| w.at),
                writes,
                join: SocketJoin {
                    sockets,
                    local,
                    remote,
                    writes: Vec::new(),
                    frames: Vec::new(),
                    not_joined: why,
                    notes: Vec::new(),
                },
                conn: None,
                frozen: false,
                data_before_syn: false,
                segments: Vec::new(),
                dropped: 0,
            });
        }
        Joiner { pending, by_key }
    }

    /// Whether any socket can be joined: when not, the shell need not read the capture.
    pub fn wants_capture(&self) -> bool {
        !self.by_key.is_empty()
    }

    /// One captured frame (Wireshark's 1-based `frame.number`).
    pub fn on_frame(&mut self, frame: u64, ts: Timestamp, link: LinkType, data: &[u8], orig: u32) {
        if let Some(seg) = decode_tcp(link, data, orig).tcp() {
            self.on_segment(frame, ts, seg);
        }
    }

    /// One decoded segment.
    pub fn on_segment(&mut self, frame: u64, ts: Timestamp, seg: &TcpSegment) {
        if let Some(ids) = self.by_key.get(&(seg.src, seg.dst)) {
            for &i in ids {
                self.pending[i].on_segment(frame, ts, seg);
            }
        }
    }

    pub fn finish(self) -> Vec<SocketJoin> {
        self.pending.into_iter().map(Pending::finish).collect()
    }
}

/// The whole second pass over a capture the shell opened: every frame through a [`Joiner`].
/// A capture cut short inside its last record is joined up to it (the analysis pass has
/// already warned); any other error is returned. The capture is not read at all when no
/// socket of `trace` can be joined.
pub fn join_capture<R: Read>(
    trace: &Trace,
    reader: &mut CaptureReader<R>,
) -> Result<Vec<SocketJoin>, CaptureError> {
    let mut j = Joiner::new(trace);
    while j.wants_capture() {
        match reader.next_frame() {
            Ok(Some(f)) => j.on_frame(f.number, f.ts, f.link, f.data, f.orig_len),
            Ok(None) => break,
            Err(e) if e.is_cut_short() => break,
            Err(e) => return Err(e),
        }
    }
    Ok(j.finish())
}

/// "frames 41, 43, 45 carry the bytes of write() calls #7, #8, #9 (12, 35, 35 bytes, 4 µs
/// apart)": the writes whose bytes the given frames carried for the first time, in the
/// words of strace. Frames that carry several writes each, or share one, are told frame by
/// frame ("frame 5 carries …; frame 7 carries …") when they are few. None when the join
/// holds none of them.
pub fn describe_frames(join: &SocketJoin, frames: &[u64]) -> Option<String> {
    // Each frame with the writes it carried first.
    let mut per: Vec<(u64, Vec<&JoinedWrite>)> = Vec::new();
    for fw in frames.iter().filter_map(|&n| join.frame(n)) {
        let n = fw.segment.frame;
        let w: Vec<&JoinedWrite> = (fw.first_write.max(1)..=fw.last_write)
            .filter_map(|k| join.write(k))
            .filter(|w| w.frames.contains(&n))
            .collect();
        if !w.is_empty() && !per.iter().any(|(m, _)| *m == n) {
            per.push((n, w));
        }
    }
    let mut all: Vec<&JoinedWrite> = per.iter().flat_map(|(_, w)| w.iter().copied()).collect();
    all.sort_by_key(|w| w.write.index);
    all.dedup_by_key(|w| w.write.index);
    if all.is_empty() {
        return None;
    }
    let one_each = per.len() == all.len() && per.iter().all(|(_, w)| w.len() == 1);
    let carries = |n: usize| if n == 1 { "carries" } else { "carry" };
    if per.len() == 1 || one_each || per.len() > 6 {
        let shown: Vec<u64> = per.iter().map(|(n, _)| *n).collect();
        return Some(format!(
            "{} {} the bytes of {}",
            list(&shown, "frame", "frames"),
            carries(shown.len()),
            describe_writes(&all)
        ));
    }
    // Consecutive frames carrying the same writes (one write split over them) go together.
    let mut groups: Vec<(Vec<u64>, &Vec<&JoinedWrite>)> = Vec::new();
    for (n, w) in &per {
        let same = |g: &Vec<&JoinedWrite>| {
            g.iter()
                .map(|x| x.write.index)
                .eq(w.iter().map(|x| x.write.index))
        };
        match groups.last_mut() {
            Some((frames, g)) if same(g) => frames.push(*n),
            _ => groups.push((vec![*n], w)),
        }
    }
    let parts: Vec<String> = groups
        .iter()
        .map(|(f, w)| {
            let split = match (f.len(), w.len()) {
                (1, _) => String::new(),
                (n, 1) => format!(", one write split over {n} frames"),
                (n, _) => format!(", split over {n} frames"),
            };
            format!(
                "{} {} the bytes of {}{split}",
                list(f, "frame", "frames"),
                carries(f.len()),
                describe_writes(w)
            )
        })
        .collect();
    Some(parts.join("; "))
}

/// "write() calls #7, #8, #9 (12, 35, 35 bytes, 4 µs apart)"; a long run of calls is
/// summarised ("write() calls #8–#20 (13 calls, 420 bytes in all, 3–5 µs apart)").
pub fn describe_writes(writes: &[&JoinedWrite]) -> String {
    let Some(first) = writes.first() else {
        return String::new();
    };
    let same_kind = writes.iter().all(|w| w.write.kind == first.write.kind);
    let name = |w: &JoinedWrite| format!("{}()", w.write.kind.name());
    let mut out = match (writes.len(), same_kind) {
        (1, _) => format!("{} call #{}", name(first), first.write.index),
        (n, true) if n > 5 => format!(
            "{} calls #{}–#{}",
            name(first),
            first.write.index,
            writes[n - 1].write.index
        ),
        (_, true) => format!(
            "{} calls {}",
            name(first),
            writes
                .iter()
                .map(|w| format!("#{}", w.write.index))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (_, false) => format!(
            "calls {}",
            writes
                .iter()
                .map(|w| format!("{} #{}", name(w), w.write.index))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let total: u64 = writes.iter().map(|w| w.write.bytes).sum();
    let sizes = if writes.len() > 5 {
        format!("{} calls, {} bytes in all", writes.len(), fmt_count(total))
    } else {
        let s: Vec<String> = writes.iter().map(|w| fmt_count(w.write.bytes)).collect();
        format!("{} bytes", s.join(", "))
    };
    let partial: Vec<String> = writes
        .iter()
        .filter(|w| w.write.asked > w.write.bytes as i64)
        .map(|w| {
            format!(
                "#{} took {} of {}",
                w.write.index, w.write.bytes, w.write.asked
            )
        })
        .collect();
    out.push_str(&format!(" ({sizes}"));
    if let Some(gaps) = gaps(writes) {
        out.push_str(&format!(", {gaps}"));
    }
    if !partial.is_empty() {
        out.push_str(&format!("; partial: {}", partial.join(", ")));
    }
    out.push(')');
    out
}

/// "4 µs apart" or "3–9 µs apart": the gaps between consecutive calls' entries.
fn gaps(writes: &[&JoinedWrite]) -> Option<String> {
    let g: Vec<String> = writes
        .windows(2)
        .map(|w| fmt_duration(w[1].write.at.since(w[0].write.at)))
        .collect();
    let (lo, hi) = writes
        .windows(2)
        .map(|w| w[1].write.at.since(w[0].write.at))
        .fold(None, |acc: Option<(_, _)>, d| match acc {
            None => Some((d, d)),
            Some((lo, hi)) => Some((d.min(lo), d.max(hi))),
        })?;
    let (lo, hi) = (fmt_duration(lo), fmt_duration(hi));
    Some(if g.iter().all(|x| *x == g[0]) || lo == hi {
        format!("{} apart", g[0])
    } else {
        format!("{lo} to {hi} apart")
    })
}

/// "frame 41", "frames 41, 43, 45"; a long list as "20 frames, 41 to 80".
fn list(frames: &[u64], one: &str, many: &str) -> String {
    let nums: Vec<String> = frames.iter().map(u64::to_string).collect();
    match frames.len() {
        1 => format!("{one} {}", nums[0]),
        n if n > 6 => format!("{n} {many}, {} to {},", nums[0], nums[n - 1]),
        _ => format!("{many} {}", nums.join(", ")),
    }
}

/// Retransmissions among `frames`: "frame 50 carries the bytes of write() call #7 again (a
/// retransmission)".
pub fn describe_resent(join: &SocketJoin, frames: &[u64]) -> Vec<String> {
    frames
        .iter()
        .filter_map(|&n| join.frame(n))
        .filter(|fw| fw.retransmission && fw.first_write > 0)
        .map(|fw| {
            let w: Vec<&JoinedWrite> = (fw.first_write..=fw.last_write)
                .filter_map(|k| join.write(k))
                .filter(|w| w.resent_in.contains(&fw.segment.frame))
                .collect();
            format!(
                "frame {} carries the bytes of {} again (a retransmission)",
                fw.segment.frame,
                describe_writes(&w)
            )
        })
        .collect()
}
