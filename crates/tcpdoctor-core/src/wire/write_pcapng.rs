//! A pcapng writer for live captures: one section, one interface, nanosecond timestamps.
//!
//! Why pcapng as well as pcap: it names the interface the packets came from and, at the end,
//! carries the kernel's receive and drop counts (an interface statistics block), which
//! Wireshark shows under Capture File Properties. Rules:
//! 1. Section header, then one interface description block with `if_name`, `if_tsresol` = 9
//!    (nanoseconds) and the snap length; every packet is an enhanced packet block on it.
//! 2. [`PcapngWriter::finish`] appends the statistics block (`isb_ifrecv`, `isb_ifdrop`).
//! 3. Little-endian, as written by the host; readers detect the byte order from the header.

use std::io::{self, Write};

use crate::time::Timestamp;

const SHB: u32 = 0x0a0d_0d0a;
const IDB: u32 = 1;
const ISB: u32 = 5;
const EPB: u32 = 6;
const OPT_END: u16 = 0;
const OPT_SHB_USERAPPL: u16 = 4;
const OPT_IF_NAME: u16 = 2;
const OPT_IF_TSRESOL: u16 = 9;
const OPT_ISB_IFRECV: u16 = 4;
const OPT_ISB_IFDROP: u16 = 5;

/// A streaming pcapng writer.
pub struct PcapngWriter<W: Write> {
    out: W,
    snaplen: u32,
    buf: Vec<u8>,
}

fn option(b: &mut Vec<u8>, code: u16, value: &[u8]) {
    b.extend(code.to_le_bytes());
    b.extend((value.len() as u16).to_le_bytes());
    b.extend(value);
    b.resize(b.len().next_multiple_of(4), 0);
}

/// Frames `body` as a block of `kind`: type, total length, body, total length.
fn block(out: &mut impl Write, kind: u32, body: &[u8]) -> io::Result<()> {
    let total = (12 + body.len()) as u32;
    out.write_all(&kind.to_le_bytes())?;
    out.write_all(&total.to_le_bytes())?;
    out.write_all(body)?;
    out.write_all(&total.to_le_bytes())
}

fn ts_words(ts: Timestamp) -> [u8; 8] {
    let ns = ts.as_nanos();
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&((ns >> 32) as u32).to_le_bytes());
    b[4..].copy_from_slice(&(ns as u32).to_le_bytes());
    b
}

impl<W: Write> PcapngWriter<W> {
    /// Writes the section header and the description of interface `if_name` (`LINKTYPE_*`).
    pub fn new(mut out: W, snaplen: u32, link_type: u32, if_name: &str) -> io::Result<Self> {
        let mut b = Vec::new();
        b.extend(0x1a2b_3c4du32.to_le_bytes());
        b.extend(1u16.to_le_bytes());
        b.extend(0u16.to_le_bytes());
        b.extend((-1i64).to_le_bytes()); // section length: not known in advance
        option(&mut b, OPT_SHB_USERAPPL, b"tcpdoctor");
        option(&mut b, OPT_END, &[]);
        block(&mut out, SHB, &b)?;

        b.clear();
        b.extend((link_type as u16).to_le_bytes());
        b.extend(0u16.to_le_bytes());
        b.extend(snaplen.to_le_bytes());
        option(&mut b, OPT_IF_NAME, if_name.as_bytes());
        option(&mut b, OPT_IF_TSRESOL, &[9]);
        option(&mut b, OPT_END, &[]);
        block(&mut out, IDB, &b)?;
        Ok(PcapngWriter {
            out,
            snaplen,
            buf: Vec::with_capacity(4096),
        })
    }

    /// Writes one packet; `packet` is cut to the snap length, `orig_len` is its wire length.
    pub fn write_packet(&mut self, ts: Timestamp, packet: &[u8], orig_len: u32) -> io::Result<()> {
        let caplen = packet.len().min(self.snaplen as usize);
        let b = &mut self.buf;
        b.clear();
        b.extend(0u32.to_le_bytes());
        b.extend(ts_words(ts));
        b.extend((caplen as u32).to_le_bytes());
        b.extend(orig_len.max(caplen as u32).to_le_bytes());
        b.extend(&packet[..caplen]);
        b.resize(b.len().next_multiple_of(4), 0);
        block(&mut self.out, EPB, b)
    }

    /// Appends the interface statistics (packets the kernel received for this capture and
    /// dropped), flushes, and returns the output.
    pub fn finish(mut self, ts: Timestamp, received: u64, dropped: u64) -> io::Result<W> {
        let mut b = Vec::new();
        b.extend(0u32.to_le_bytes());
        b.extend(ts_words(ts));
        option(&mut b, OPT_ISB_IFRECV, &received.to_le_bytes());
        option(&mut b, OPT_ISB_IFDROP, &dropped.to_le_bytes());
        option(&mut b, OPT_END, &[]);
        block(&mut self.out, ISB, &b)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::write::{ipv4_tcp_packet, LINKTYPE_RAW};
    use crate::wire::{decode_tcp, CaptureFormat, CaptureReader, Decoded};

    #[test]
    fn reads_back_with_nanoseconds_and_cut_packets() {
        let mut w = PcapngWriter::new(Vec::new(), 48, LINKTYPE_RAW, "lo").unwrap();
        let p = ipv4_tcp_packet(
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.1:80".parse().unwrap(),
            7,
            9,
            0x18,
            512,
            None,
            &[b'x'; 30],
            30,
        );
        let t1 = Timestamp(1_700_000_000_123_456_789);
        w.write_packet(t1, &p, p.len() as u32).unwrap();
        w.write_packet(Timestamp(t1.0 + 1), &p[..41], 70).unwrap();
        let bytes = w.finish(Timestamp(t1.0 + 2), 2, 0).unwrap();
        assert_eq!(bytes.len() % 4, 0);

        let mut r = CaptureReader::new(&bytes[..]).unwrap();
        assert_eq!(r.format(), CaptureFormat::Pcapng);
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!((f.ts, f.data.len(), f.orig_len), (t1, 48, 70));
        match decode_tcp(f.link, f.data, f.orig_len) {
            Decoded::Tcp(s, _) => assert_eq!((s.seq, s.payload_len), (7, 30)),
            other => panic!("not TCP: {other:?}"),
        }
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!((f.ts.0, f.data.len(), f.orig_len), (t1.0 + 1, 41, 70));
        assert!(r.next_frame().unwrap().is_none());
    }
}
