//! The pass over the capture: each traced socket's connection found by its endpoints and
//! ISN (rule 3), its segments placed in the stream (rules 4 and 6).

use std::io::Read;

use super::MAX_SEGMENTS;
use super::{endpoint, join_segments, stream_writes, SentSegment, SocketJoin, StreamWrite};
use crate::fxhash::FxHashMap;
use crate::seq::SeqNum;
use crate::syscalls::Trace;
use crate::time::Timestamp;
use crate::units::fmt_count;
use crate::wire::{decode_frame, CaptureError, CaptureReader, Endpoint, LinkType, TcpSegment};

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
        let whole = trace.from_start_in_window();
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
            if !s.from_start {
                why = Some(format!(
                    "the tracer first saw it mid-connection (fd {} of pid {}): the bytes it \
                     counts do not start at the stream's first byte",
                    s.fd, s.pid
                ));
            } else if !whole[sockets[0] as usize] {
                why = Some(format!(
                    "its connection began before this trace window (fd {} of pid {}): the \
                     bytes written before the window are not in it",
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
        for decoded in decode_frame(link, data, orig) {
            if let Some(seg) = decoded.tcp() {
                self.on_segment(frame, ts, seg);
            }
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
