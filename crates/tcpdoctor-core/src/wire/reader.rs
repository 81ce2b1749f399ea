//! The streaming reader: one pass, fixed buffer, pcap or pcapng detected from the magic.
//!
//! Captures can be many gigabytes, so nothing here holds more than one record at a time. Bytes
//! are read into one buffer (1 MiB, grown only when a single record is larger, never beyond
//! [`MAX_RECORD`], and only as fast as the record's bytes actually arrive); each [`Frame`] borrows its bytes straight from that buffer, so reading a
//! packet costs one header parse and no allocation. When the unread tail of the buffer is too
//! short for the next record, it is moved to the front and the rest refilled.
//!
//! The format-specific parts live in `pcap.rs` and `pcapng.rs`; both work on [`Buf`] and hand
//! back a [`Record`]: where the packet bytes sit in the buffer and what the header said.

use std::io::{ErrorKind, Read};

use super::pcap::PcapState;
use super::pcapng::NgState;
use super::{CaptureError, CaptureFormat, Frame, LinkType};
use crate::time::Timestamp;

/// Initial buffer size.
const INITIAL_BUF: usize = 1 << 20;

/// The largest single record (pcap record or pcapng block) the reader accepts: 256 MiB.
pub(super) const MAX_RECORD: usize = 256 << 20;

/// A read buffer over a byte stream that tracks file offsets.
pub(super) struct Buf<R> {
    inner: R,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    pos: usize,
    /// End of the valid bytes in `buf`.
    end: usize,
    /// File offset of `buf[0]`.
    base: u64,
    eof: bool,
}

impl<R: Read> Buf<R> {
    fn new(inner: R, size: usize) -> Self {
        Buf {
            inner,
            buf: vec![0; size.max(16)],
            pos: 0,
            end: 0,
            base: 0,
            eof: false,
        }
    }

    /// File offset of the first unconsumed byte.
    pub(super) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// The unconsumed buffered bytes.
    pub(super) fn bytes(&self) -> &[u8] {
        &self.buf[self.pos..self.end]
    }

    /// Makes at least `n` bytes available (`n` ≤ [`MAX_RECORD`] + a little) unless the stream
    /// ends first. Returns how many bytes are available, which is less than `n` only at EOF.
    ///
    /// The buffer grows (doubling) only while data keeps arriving, so a header claiming a
    /// huge record in a tiny file costs at most twice the file, not the claimed size.
    #[inline(always)]
    pub(super) fn fill(&mut self, n: usize) -> Result<usize, CaptureError> {
        if self.end - self.pos >= n {
            return Ok(self.end - self.pos);
        }
        self.refill(n)
    }

    /// [`Buf::fill`] when the buffered bytes are too few: compacts, grows, reads.
    #[inline(never)]
    fn refill(&mut self, n: usize) -> Result<usize, CaptureError> {
        if self.pos + n > self.buf.len() && self.pos > 0 {
            self.buf.copy_within(self.pos..self.end, 0);
            self.base += self.pos as u64;
            self.end -= self.pos;
            self.pos = 0;
        }
        while self.end - self.pos < n && !self.eof {
            if self.end == self.buf.len() {
                // Only reachable with pos == 0 and n > len: one record larger than the buffer.
                let grown = self.buf.len().saturating_mul(2).min(n).max(self.end + 1);
                self.buf.resize(grown, 0);
            }
            match self.inner.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.end += k,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(cause) => {
                    return Err(CaptureError::Io {
                        offset: self.base + self.end as u64,
                        cause,
                    })
                }
            }
        }
        Ok(self.end - self.pos)
    }

    /// Marks `n` buffered bytes as read (`n` ≤ the available bytes).
    pub(super) fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.pos);
        self.pos = (self.pos + n).min(self.end);
    }

    /// Skips `n` bytes without buffering them all; returns how many were skipped (less than
    /// `n` only at EOF). Used for blocks tcpdoctor does not read, however large they are.
    pub(super) fn skip(&mut self, n: u64) -> Result<u64, CaptureError> {
        let mut left = n;
        while left > 0 {
            let want = left.min(self.buf.len() as u64) as usize;
            let got = self.fill(want)?.min(want);
            if got == 0 {
                break;
            }
            self.consume(got);
            left -= got as u64;
        }
        Ok(n - left)
    }
}

/// One packet record located by a format parser; its bytes are at `data_start..data_end` of
/// the buffer's unconsumed bytes *before* `consume` is called for the record.
pub(super) struct Record {
    pub offset: u64,
    /// Start of the packet bytes relative to the record start.
    pub data_start: usize,
    pub data_len: usize,
    /// Total size of the record in the file (consumed after the frame is handed out).
    pub record_len: usize,
    pub ts: Timestamp,
    pub link: LinkType,
    pub orig_len: u32,
    pub interface: u32,
    /// Non-packet records Wireshark numbers as frames, skipped just before this one.
    pub skipped: u64,
}

enum State {
    Pcap(PcapState),
    Pcapng(NgState),
}

/// Streams [`Frame`]s out of a pcap or pcapng byte stream.
pub struct CaptureReader<R> {
    buf: Buf<R>,
    format: CaptureFormat,
    state: State,
    frames: u64,
    /// Bytes of the record handed out last, consumed on the next call.
    pending: usize,
}

impl<R: Read> CaptureReader<R> {
    /// Reads the file header and detects the format.
    ///
    /// For pcap, a link type tcpdoctor cannot decode is refused here. For pcapng the first
    /// section header is read; link types are per interface and checked per frame.
    pub fn new(inner: R) -> Result<Self, CaptureError> {
        Self::with_buffer_size(inner, INITIAL_BUF)
    }

    /// Like [`CaptureReader::new`] with an initial buffer of `size` bytes (at least 16; grown
    /// for any larger record). Small sizes exercise the refill paths in tests and fuzzing.
    pub fn with_buffer_size(inner: R, size: usize) -> Result<Self, CaptureError> {
        let mut buf = Buf::new(inner, size);
        let avail = buf.fill(4)?;
        if avail == 0 {
            return Err(CaptureError::Empty);
        }
        let magic: [u8; 4] = match buf.bytes().get(..4).and_then(|b| b.try_into().ok()) {
            Some(m) => m,
            None => {
                return Err(CaptureError::NotACapture {
                    magic: buf.bytes().to_vec(),
                })
            }
        };
        let (format, state) = if let Some(st) = PcapState::from_magic(magic) {
            (CaptureFormat::Pcap, State::Pcap(st.read_header(&mut buf)?))
        } else if NgState::is_magic(magic) {
            let mut st = NgState::default();
            st.read_first_section(&mut buf)?;
            (CaptureFormat::Pcapng, State::Pcapng(st))
        } else {
            return Err(CaptureError::NotACapture {
                magic: magic.to_vec(),
            });
        };
        Ok(CaptureReader {
            buf,
            format,
            state,
            frames: 0,
            pending: 0,
        })
    }

    pub fn format(&self) -> CaptureFormat {
        self.format
    }

    /// The next packet record, or `None` at a clean end of file.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, CaptureError> {
        self.buf.consume(std::mem::take(&mut self.pending));
        let rec = match &mut self.state {
            State::Pcap(st) => st.next_record(&mut self.buf)?,
            State::Pcapng(st) => st.next_record(&mut self.buf)?,
        };
        let Some(rec) = rec else {
            return Ok(None);
        };
        self.frames += rec.skipped + 1;
        self.pending = rec.record_len;
        let bytes = self.buf.bytes();
        let end = (rec.data_start + rec.data_len).min(bytes.len());
        let data = bytes.get(rec.data_start..end).unwrap_or(&[]);
        Ok(Some(Frame {
            number: self.frames,
            ts: rec.ts,
            link: rec.link,
            data,
            orig_len: rec.orig_len,
            interface: rec.interface,
            offset: rec.offset,
        }))
    }

    /// Bytes consumed from the stream so far: the file offset just past the last record
    /// handed out (or the file header). Useful for progress reporting.
    pub fn bytes_read(&self) -> u64 {
        self.buf.offset() + self.pending as u64
    }

    /// The number of the last frame handed out (Wireshark's `frame.number`).
    pub fn frames_read(&self) -> u64 {
        self.frames
    }

    /// The byte stream being read (to ask a decompressor how far it got, say).
    pub fn get_ref(&self) -> &R {
        &self.buf.inner
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that returns at most `chunk` bytes per call and is sometimes interrupted.
    struct Trickle<'a> {
        data: &'a [u8],
        chunk: usize,
        calls: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            self.calls += 1;
            if self.calls == 3 || self.calls == 7 {
                return Err(std::io::Error::new(ErrorKind::Interrupted, "again"));
            }
            let n = self.chunk.min(out.len()).min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn buf_fill_consume_skip_track_offsets() {
        let data: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
        let mut b = Buf::new(
            Trickle {
                data: &data,
                chunk: 7,
                calls: 0,
            },
            INITIAL_BUF,
        );
        assert_eq!(b.fill(10).ok(), Some(14));
        assert_eq!(&b.bytes()[..3], &[0, 1, 2]);
        b.consume(10);
        assert_eq!(b.offset(), 10);
        assert_eq!(b.skip(3000).ok(), Some(3000));
        assert_eq!(b.offset(), 3010);
        assert!(b.fill(4).is_ok());
        assert_eq!(b.bytes()[0], (3010 % 256) as u8);
        assert_eq!(b.skip(10_000).ok(), Some(1990));
        assert_eq!(b.fill(1).ok(), Some(0));
    }

    #[test]
    fn a_huge_claimed_record_in_a_small_file_does_not_allocate_it() {
        let data = vec![1u8; 5000];
        let mut b = Buf::new(&data[..], 64);
        assert_eq!(b.fill(MAX_RECORD).ok(), Some(5000));
        assert!(b.buf.len() <= 2 * 5000 + 64, "{}", b.buf.len());
    }

    #[test]
    fn buf_grows_for_a_large_record() {
        let data = vec![9u8; INITIAL_BUF * 2 + 5];
        let mut b = Buf::new(&data[..], INITIAL_BUF);
        b.fill(100).ok();
        b.consume(50);
        assert_eq!(b.fill(INITIAL_BUF + 10).ok(), Some(INITIAL_BUF + 10));
        assert_eq!(b.offset(), 50);
        assert_eq!(b.bytes().len(), INITIAL_BUF + 10);
        b.consume(INITIAL_BUF + 10);
        assert_eq!(
            b.fill(INITIAL_BUF * 2).ok(),
            Some(data.len() - 60 - INITIAL_BUF)
        );
    }

    type Seen = (u64, u64, Vec<u8>, u32, u64);

    fn read_all<T: Read>(mut r: CaptureReader<T>) -> (Vec<Seen>, String, u64) {
        let mut seen = Vec::new();
        loop {
            match r.next_frame() {
                Ok(Some(f)) => seen.push((f.number, f.ts.0, f.data.to_vec(), f.orig_len, f.offset)),
                Ok(None) => return (seen, String::new(), r.bytes_read()),
                Err(e) => return (seen, e.to_string(), r.bytes_read()),
            }
        }
    }

    #[test]
    fn tiny_buffers_and_trickling_reads_see_the_same_frames() {
        use super::super::testutil::{eth_v4_tcp, pcap, Ng};
        let pkts: Vec<Vec<u8>> = (0..40).map(|i| eth_v4_tcp(i * 37 % 300)).collect();
        let recs: Vec<(u32, u32, &[u8], Option<u32>)> =
            pkts.iter().map(|p| (1, 2, &p[..], None)).collect();
        let mut ng = Ng::new(true);
        ng.idb(1, 0, &[]);
        for (i, p) in pkts.iter().enumerate() {
            ng.block(0xbad, &[0; 40]);
            ng.epb(0, i as u64, p, None);
        }
        let ng = ng.bytes();
        let pc = pcap(false, true, 1, 65535, &recs);
        for file in [pc, ng] {
            let want = read_all(CaptureReader::new(&file[..]).expect("header"));
            assert_eq!(want.0.len(), 40);
            for cut in [file.len(), file.len() - 3] {
                let want = read_all(CaptureReader::new(&file[..cut]).expect("header"));
                for size in [0, 16, 17, 63, 100, 333] {
                    for chunk in [1, 7, 64] {
                        let src = Trickle {
                            data: &file[..cut],
                            chunk,
                            calls: 0,
                        };
                        let got =
                            read_all(CaptureReader::with_buffer_size(src, size).expect("hdr"));
                        assert_eq!(got, want, "size {size} chunk {chunk} cut {cut}");
                    }
                }
            }
        }
    }

    struct Failing;
    impl Read for Failing {
        fn read(&mut self, _: &mut [u8]) -> std::io::Result<usize> {
            Err(std::io::Error::other("disk on fire"))
        }
    }

    #[test]
    fn io_errors_name_the_offset() {
        let err = CaptureReader::new(Failing).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("read error at byte 0: disk on fire"),
            "{err:?}"
        );
    }
}
