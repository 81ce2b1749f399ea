//! Classic pcap: both byte orders, microsecond and nanosecond timestamps.
//!
//! A pcap file is a 24-byte global header (magic, version, snap length, link type) followed by
//! records of a 16-byte header (seconds, micro- or nanoseconds, captured length, original
//! length) and the captured bytes. The magic tells both the byte order of every later field
//! (the writer's native order) and the timestamp resolution: `a1b2c3d4` for microseconds,
//! `a1b23c4d` for nanoseconds (`tcpdump --time-stamp-precision=nano`).
//!
//! The captured length of a record is the only thing that tells where the next record starts,
//! so it is checked before anything is buffered: more than 256 MiB, or more than both the snap
//! length and 256 KiB (libpcap's own sanity bound), means the file is garbage, not that a
//! large buffer should be allocated.

use std::io::Read;

use super::reader::{Buf, Record, MAX_RECORD};
use super::{CaptureError, LinkType};
use crate::time::Timestamp;

/// Size of the global header.
const FILE_HEADER: usize = 24;
/// Size of a record header.
const RECORD_HEADER: usize = 16;
/// libpcap's largest snap length: captured lengths up to this are accepted whatever the
/// header's snap length says (some writers put a smaller one there).
const LIBPCAP_MAX_SNAPLEN: u32 = 262_144;

/// Reads a `u16` at `at` in the given byte order; 0 if out of range (callers check lengths).
pub(super) fn u16_at(b: &[u8], at: usize, big: bool) -> u16 {
    match b.get(at..at + 2).and_then(|s| <[u8; 2]>::try_from(s).ok()) {
        Some(a) if big => u16::from_be_bytes(a),
        Some(a) => u16::from_le_bytes(a),
        None => 0,
    }
}

/// Reads a `u32` at `at` in the given byte order; 0 if out of range (callers check lengths).
pub(super) fn u32_at(b: &[u8], at: usize, big: bool) -> u32 {
    match b.get(at..at + 4).and_then(|s| <[u8; 4]>::try_from(s).ok()) {
        Some(a) if big => u32::from_be_bytes(a),
        Some(a) => u32::from_le_bytes(a),
        None => 0,
    }
}

/// What the global header said.
#[derive(Clone, Copy, Debug)]
pub(super) struct PcapState {
    big: bool,
    nanos: bool,
    snaplen: u32,
    link: LinkType,
}

impl PcapState {
    /// Recognises the four pcap magics (two byte orders × two resolutions).
    pub(super) fn from_magic(magic: [u8; 4]) -> Option<PcapState> {
        let (big, nanos) = match magic {
            [0xd4, 0xc3, 0xb2, 0xa1] => (false, false),
            [0xa1, 0xb2, 0xc3, 0xd4] => (true, false),
            [0x4d, 0x3c, 0xb2, 0xa1] => (false, true),
            [0xa1, 0xb2, 0x3c, 0x4d] => (true, true),
            _ => return None,
        };
        Some(PcapState {
            big,
            nanos,
            snaplen: 0,
            link: LinkType::Other(0),
        })
    }

    /// Reads the global header (the magic has been recognised); refuses unsupported links.
    pub(super) fn read_header<R: Read>(mut self, buf: &mut Buf<R>) -> Result<Self, CaptureError> {
        let avail = buf.fill(FILE_HEADER)?;
        if avail < FILE_HEADER {
            return Err(CaptureError::Truncated {
                what: "pcap file header",
                offset: 0,
                needed: FILE_HEADER as u64,
                available: avail as u64,
            });
        }
        let h = &buf.bytes()[..FILE_HEADER];
        let major = u16_at(h, 4, self.big);
        let minor = u16_at(h, 6, self.big);
        if major != 2 {
            return Err(CaptureError::Malformed {
                what: "pcap file header",
                offset: 4,
                detail: format!("version {major}.{minor} (expected 2.x)"),
            });
        }
        self.snaplen = u32_at(h, 16, self.big);
        // The upper bits of the link-type field carry FCS information, not the type.
        let code = u32_at(h, 20, self.big) & 0x03ff_ffff;
        self.link = LinkType::from_code(code);
        if !self.link.is_supported() {
            return Err(CaptureError::UnsupportedLinkType {
                link_type: code,
                name: LinkType::code_name(code),
                offset: 20,
            });
        }
        buf.consume(FILE_HEADER);
        Ok(self)
    }

    /// The next record, or `None` at a clean end of file.
    #[inline(always)]
    pub(super) fn next_record<R: Read>(
        &mut self,
        buf: &mut Buf<R>,
    ) -> Result<Option<Record>, CaptureError> {
        let offset = buf.offset();
        let avail = buf.fill(RECORD_HEADER)?;
        if avail == 0 {
            return Ok(None);
        }
        if avail < RECORD_HEADER {
            return Err(CaptureError::Truncated {
                what: "pcap record header",
                offset,
                needed: RECORD_HEADER as u64,
                available: avail as u64,
            });
        }
        // One bounds check for the four fields (`avail` ≥ the header's size).
        let Some(h) = buf.bytes().first_chunk::<RECORD_HEADER>() else {
            return Err(CaptureError::Truncated {
                what: "pcap record header",
                offset,
                needed: RECORD_HEADER as u64,
                available: avail as u64,
            });
        };
        let field = |at: usize| {
            let b = [h[at], h[at + 1], h[at + 2], h[at + 3]];
            if self.big {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let sec = u64::from(field(0));
        let frac = u64::from(field(4));
        let caplen = field(8);
        let orig_len = field(12);
        if caplen as usize > MAX_RECORD {
            return Err(CaptureError::Malformed {
                what: "pcap record header",
                offset,
                detail: format!("captured length {caplen} is absurd (limit {MAX_RECORD})"),
            });
        }
        if caplen > self.snaplen.max(LIBPCAP_MAX_SNAPLEN) {
            return Err(CaptureError::Malformed {
                what: "pcap record header",
                offset,
                detail: format!(
                    "captured length {caplen} exceeds the snap length {}",
                    self.snaplen
                ),
            });
        }
        let total = RECORD_HEADER + caplen as usize;
        let avail = buf.fill(total)?;
        if avail < total {
            return Err(CaptureError::Truncated {
                what: "pcap record",
                offset,
                needed: total as u64,
                available: avail as u64,
            });
        }
        // sec < 2^32 so sec * 1e9 < 2^62: no overflow for either resolution.
        let ns = sec * 1_000_000_000 + if self.nanos { frac } else { frac * 1000 };
        Ok(Some(Record {
            offset,
            data_start: RECORD_HEADER,
            data_len: caplen as usize,
            record_len: total,
            ts: Timestamp(ns),
            link: self.link,
            orig_len,
            interface: 0,
            skipped: 0,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{eth_v4_tcp, pcap};
    use super::super::{CaptureFormat, CaptureReader, LinkType};

    #[test]
    fn both_byte_orders_and_resolutions() {
        let p1 = eth_v4_tcp(100);
        let p2 = eth_v4_tcp(0);
        // (big-endian, nanosecond, expected ns of the first record)
        let cases = [
            (false, false, 1_700_000_000_123_456_000u64),
            (true, false, 1_700_000_000_123_456_000),
            (false, true, 1_700_000_000_000_123_456),
            (true, true, 1_700_000_000_000_123_456),
        ];
        for (big, nanos, want_ns) in cases {
            let frac = 123_456;
            let file = pcap(
                big,
                nanos,
                1,
                65535,
                &[
                    (1_700_000_000, frac, &p1, None),
                    (1_700_000_001, 0, &p2, None),
                ],
            );
            let mut r = CaptureReader::new(&file[..]).expect("header");
            assert_eq!(r.format(), CaptureFormat::Pcap);
            let f = r.next_frame().expect("ok").expect("frame 1");
            assert_eq!((f.number, f.ts.0, f.link), (1, want_ns, LinkType::Ethernet));
            assert_eq!(
                (f.data, f.orig_len, f.offset),
                (&p1[..], p1.len() as u32, 24)
            );
            let f = r.next_frame().expect("ok").expect("frame 2");
            assert_eq!((f.number, f.ts.0), (2, 1_700_000_001_000_000_000));
            assert_eq!(f.offset, 24 + 16 + p1.len() as u64);
            assert!(r.next_frame().expect("clean eof").is_none());
            assert_eq!(r.bytes_read(), file.len() as u64);
            assert!(r.next_frame().expect("still eof").is_none());
        }
    }

    #[test]
    fn snaplen_truncated_record_keeps_orig_len() {
        let p = eth_v4_tcp(1000);
        let file = pcap(
            false,
            false,
            1,
            96,
            &[(1, 0, &p[..96], Some(p.len() as u32))],
        );
        let mut r = CaptureReader::new(&file[..]).expect("header");
        let f = r.next_frame().expect("ok").expect("frame");
        assert_eq!((f.data.len(), f.orig_len), (96, 1054));
    }

    #[test]
    fn header_errors() {
        let good = pcap(false, false, 1, 65535, &[]);
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (vec![], "file is empty"),
            (b"GET / HTTP/1.1\r\n".to_vec(), "not a pcap or pcapng file"),
            (vec![0xd4, 0xc3], "not a pcap or pcapng file"),
            (
                good[..10].to_vec(),
                "truncated pcap file header at byte 0: needed 24 bytes, 10 left",
            ),
            (
                pcap(false, false, 201, 65535, &[]),
                "unsupported link type 201 (Bluetooth HCI H4) at byte 20",
            ),
            (
                pcap(true, false, 147, 65535, &[]),
                "unsupported link type 147",
            ),
            (
                {
                    let mut v = good.clone();
                    v[4] = 1;
                    v
                },
                "malformed pcap file header at byte 4: version 1.4",
            ),
        ];
        for (bytes, want) in cases {
            let err = CaptureReader::new(&bytes[..]).err().map(|e| e.to_string());
            let err = err.unwrap_or_default();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
    }

    #[test]
    fn fcs_bits_in_link_type_are_ignored() {
        let file = pcap(false, false, 1 | 0x1400_0000, 65535, &[]);
        assert!(CaptureReader::new(&file[..]).is_ok());
    }

    #[test]
    fn record_errors() {
        let p = eth_v4_tcp(10);
        let one = pcap(false, false, 1, 65535, &[(1, 0, &p, None)]);
        let huge = {
            let mut v = one.clone();
            v[24 + 8..24 + 12].copy_from_slice(&0x2000_0000u32.to_le_bytes());
            v
        };
        let over_snap = {
            let mut v = pcap(false, false, 1, 96, &[(1, 0, &p, None)]);
            v[24 + 8..24 + 12].copy_from_slice(&300_000u32.to_le_bytes());
            v
        };
        let cases: Vec<(Vec<u8>, &str)> = vec![
            (
                one[..30].to_vec(),
                "truncated pcap record header at byte 24: needed 16 bytes, 6 left",
            ),
            (
                one[..one.len() - 1].to_vec(),
                "truncated pcap record at byte 24: needed 80 bytes, 79 left",
            ),
            (
                huge,
                "malformed pcap record header at byte 24: captured length 536870912 is absurd",
            ),
            (
                over_snap,
                "captured length 300000 exceeds the snap length 96",
            ),
        ];
        for (bytes, want) in cases {
            let mut r = CaptureReader::new(&bytes[..]).expect("header");
            let err = r
                .next_frame()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
    }
}
