//! Writing captures: a pcap writer and a synthetic TCP/IPv4 connection that turns "these bytes
//! went this way at this time" into segments Wireshark, tshark and `tcpdoctor analyze` read.
//!
//! Rules:
//! 1. The file is classic pcap, nanosecond resolution. Synthetic packets use link type raw IP
//!    (101): no fake MAC addresses, and every reader since libpcap 0.9 opens it. A live capture
//!    states its interface's real link type ([`PcapWriter::with_link_type`]).
//! 2. A [`SyntheticTcp`] connection starts with a three-way handshake announcing
//!    [`SYNTHETIC_MSS`] (loopback's MSS), so the analyzer knows the MSS and the roles.
//! 3. Data is cut into segments of at most the MSS; each carries the ACK of everything the peer
//!    sent so far and PSH on the last segment of a write. A pure ACK is written only when the
//!    caller observed one ([`SyntheticTcp::ack`]); nothing is invented.
//! 4. Payload bytes are kept up to a snap length ([`SyntheticTcp::new`]); the IP header always
//!    states the full length, so analysis needs no payload (like `tcpdump -s 128`).
//! 5. Sequence numbers start at fixed ISNs and wrap like real ones.
//! 6. By default a side acknowledges everything the other side sent so far; a caller that
//!    models a capture point far from one side ([`super::capture_point`]) may say instead how
//!    far that side has acknowledged ([`SyntheticTcp::set_acknowledged`]) and when each packet
//!    of the handshake passed ([`SyntheticTcp::with_handshake`]).

use std::io::{self, Write};
use std::net::SocketAddrV4;

use super::TcpFlags;
use crate::time::Timestamp;

/// Link type written: `LINKTYPE_RAW` (each packet starts with an IP header).
pub const LINKTYPE_RAW: u32 = 101;
/// `LINKTYPE_ETHERNET`: Ethernet, and Linux loopback (an Ethernet header with zeroed MACs).
pub const LINKTYPE_ETHERNET: u32 = 1;
/// The MSS announced in synthetic handshakes: loopback's (65535 − 40 − 12 of timestamps).
pub const SYNTHETIC_MSS: u16 = 65_483;

const IPV4_HEADER: usize = 20;
const TCP_HEADER: usize = 20;

/// A streaming pcap writer (nanosecond timestamps, raw IP).
pub struct PcapWriter<W: Write> {
    out: W,
    snaplen: u32,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header. `snaplen` is the largest number of bytes kept per packet.
    pub fn new(out: W, snaplen: u32) -> io::Result<Self> {
        Self::with_link_type(out, snaplen, LINKTYPE_RAW)
    }

    /// Like [`PcapWriter::new`] for packets starting with a `link_type` header (`LINKTYPE_*`).
    pub fn with_link_type(mut out: W, snaplen: u32, link_type: u32) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend(0xa1b2_3c4du32.to_le_bytes());
        h.extend(2u16.to_le_bytes());
        h.extend(4u16.to_le_bytes());
        h.extend(0u32.to_le_bytes()); // thiszone
        h.extend(0u32.to_le_bytes()); // sigfigs
        h.extend(snaplen.to_le_bytes());
        h.extend(link_type.to_le_bytes());
        out.write_all(&h)?;
        Ok(PcapWriter { out, snaplen })
    }

    /// Writes one packet; `packet` is cut to the snap length, `orig_len` is its wire length.
    pub fn write_packet(&mut self, ts: Timestamp, packet: &[u8], orig_len: u32) -> io::Result<()> {
        let ns = ts.as_nanos();
        let caplen = packet.len().min(self.snaplen as usize);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((ns / 1_000_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((ns % 1_000_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(caplen as u32).to_le_bytes());
        h[12..16].copy_from_slice(&orig_len.max(caplen as u32).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&packet[..caplen])
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    pub fn into_inner(self) -> W {
        self.out
    }
}

/// One IPv4 + TCP header (20 + 20 bytes, or 24 with an MSS option) followed by `payload`;
/// the IP total length says `payload_len`, which may exceed `payload.len()` (a cut packet).
#[allow(clippy::too_many_arguments)]
pub fn ipv4_tcp_packet(
    src: SocketAddrV4,
    dst: SocketAddrV4,
    seq: u32,
    ack: u32,
    flags: u8,
    window: u16,
    mss: Option<u16>,
    payload: &[u8],
    payload_len: usize,
) -> Vec<u8> {
    let tcp_len = TCP_HEADER + if mss.is_some() { 4 } else { 0 };
    let total = (IPV4_HEADER + tcp_len + payload_len).min(usize::from(u16::MAX));
    let mut p = Vec::with_capacity(IPV4_HEADER + tcp_len + payload.len());
    p.extend([0x45, 0]);
    p.extend((total as u16).to_be_bytes());
    p.extend([0, 0, 0x40, 0]); // id 0, don't fragment
    p.extend([64, 6, 0, 0]); // TTL, TCP, checksum (below)
    p.extend(src.ip().octets());
    p.extend(dst.ip().octets());
    let sum = checksum(&p[..IPV4_HEADER]);
    p[10..12].copy_from_slice(&sum.to_be_bytes());
    p.extend(src.port().to_be_bytes());
    p.extend(dst.port().to_be_bytes());
    p.extend(seq.to_be_bytes());
    p.extend(ack.to_be_bytes());
    p.push(((tcp_len / 4) as u8) << 4);
    p.push(flags);
    p.extend(window.to_be_bytes());
    p.extend([0, 0, 0, 0]); // checksum (not computed: payloads may be cut), urgent pointer
    if let Some(m) = mss {
        p.extend([2, 4]);
        p.extend(m.to_be_bytes());
    }
    p.extend_from_slice(payload);
    p
}

fn checksum(b: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for pair in b.chunks(2) {
        let hi = u32::from(pair[0]) << 8;
        let lo = pair.get(1).map_or(0, |&x| u32::from(x));
        sum += hi | lo;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Which side of a synthetic connection sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

impl Side {
    /// The other end of the connection.
    pub fn other(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// A synthetic TCP connection between `client` and `server`; each method returns the packets
/// (timestamp, bytes, wire length) to write, in order.
pub struct SyntheticTcp {
    client: SocketAddrV4,
    server: SocketAddrV4,
    /// Next sequence number of the client and of the server.
    next: [u32; 2],
    /// What each side acknowledges, when the caller says so; else all the other side sent.
    acked: [Option<u32>; 2],
    snap_payload: usize,
}

/// A packet ready for [`PcapWriter::write_packet`].
pub type Packet = (Timestamp, Vec<u8>, u32);

const WINDOW: u16 = 65_535;

impl SyntheticTcp {
    /// A connection whose handshake happens at `ts`; payloads are kept up to `snap_payload`.
    pub fn new(
        client: SocketAddrV4,
        server: SocketAddrV4,
        ts: Timestamp,
        snap_payload: usize,
    ) -> (SyntheticTcp, Vec<Packet>) {
        Self::with_handshake(client, server, [ts; 3], snap_payload)
    }

    /// Like [`SyntheticTcp::new`], with the SYN, SYN/ACK and ACK passing at their own times.
    pub fn with_handshake(
        client: SocketAddrV4,
        server: SocketAddrV4,
        ts: [Timestamp; 3],
        snap_payload: usize,
    ) -> (SyntheticTcp, Vec<Packet>) {
        let (ci, si) = (1_000u32, 2_000_000u32);
        let c = SyntheticTcp {
            client,
            server,
            next: [ci.wrapping_add(1), si.wrapping_add(1)],
            acked: [None, None],
            snap_payload,
        };
        let m = Some(SYNTHETIC_MSS);
        let pkts = vec![
            c.packet(ts[0], Side::Client, ci, 0, TcpFlags::SYN, m, &[], 0),
            c.packet(
                ts[1],
                Side::Server,
                si,
                ci.wrapping_add(1),
                TcpFlags::SYN | TcpFlags::ACK,
                m,
                &[],
                0,
            ),
            c.packet(
                ts[2],
                Side::Client,
                ci.wrapping_add(1),
                si.wrapping_add(1),
                TcpFlags::ACK,
                None,
                &[],
                0,
            ),
        ];
        (c, pkts)
    }

    /// The sequence number `side` sends next (after everything it has sent).
    pub fn next_seq(&self, side: Side) -> u32 {
        self.next[Self::idx(side)]
    }

    /// From now on, packets from `by` acknowledge up to `ack` (a sequence number of the other
    /// side), instead of everything the other side has sent.
    pub fn set_acknowledged(&mut self, by: Side, ack: u32) {
        self.acked[Self::idx(by)] = Some(ack);
    }

    /// The acknowledgment number `from` sends.
    fn ack_of(&self, from: Side) -> u32 {
        self.acked[Self::idx(from)].unwrap_or(self.next[Self::idx(from.other())])
    }

    fn idx(side: Side) -> usize {
        match side {
            Side::Client => 0,
            Side::Server => 1,
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn packet(
        &self,
        ts: Timestamp,
        from: Side,
        seq: u32,
        ack: u32,
        flags: u8,
        mss: Option<u16>,
        payload: &[u8],
        payload_len: usize,
    ) -> Packet {
        let (src, dst) = match from {
            Side::Client => (self.client, self.server),
            Side::Server => (self.server, self.client),
        };
        let kept = &payload[..payload.len().min(self.snap_payload)];
        let p = ipv4_tcp_packet(src, dst, seq, ack, flags, WINDOW, mss, kept, payload_len);
        let hdr = IPV4_HEADER + TCP_HEADER + if mss.is_some() { 4 } else { 0 };
        (ts, p, (hdr + payload_len) as u32)
    }

    /// `data` sent by `from` at `ts` in one write: segments of at most the MSS.
    pub fn data(&mut self, ts: Timestamp, from: Side, data: &[u8]) -> Vec<Packet> {
        self.data_len(ts, from, data, data.len())
    }

    /// A write of `len` bytes of which only the first ones, `head`, are known (a recorder
    /// that keeps only what the snap length would): segment lengths are the real ones.
    pub fn data_len(&mut self, ts: Timestamp, from: Side, head: &[u8], len: usize) -> Vec<Packet> {
        let me = Self::idx(from);
        let ack = self.ack_of(from);
        let mss = usize::from(SYNTHETIC_MSS);
        let mut out = Vec::new();
        let mut off = 0;
        while off < len {
            let n = (len - off).min(mss);
            let mut flags = TcpFlags::ACK;
            if off + n == len {
                flags |= TcpFlags::PSH;
            }
            let known = head.get(off..(off + n).min(head.len())).unwrap_or(&[]);
            out.push(self.packet(ts, from, self.next[me], ack, flags, None, known, n));
            self.next[me] = self.next[me].wrapping_add(n as u32);
            off += n;
        }
        out
    }

    /// A pure ACK `from` one side of everything the other side has sent.
    pub fn ack(&mut self, ts: Timestamp, from: Side) -> Packet {
        let ack = self.ack_of(from);
        self.packet(
            ts,
            from,
            self.next[Self::idx(from)],
            ack,
            TcpFlags::ACK,
            None,
            &[],
            0,
        )
    }

    /// `from` closes its direction (FIN).
    pub fn fin(&mut self, ts: Timestamp, from: Side) -> Packet {
        let me = Self::idx(from);
        let ack = self.ack_of(from);
        let p = self.packet(
            ts,
            from,
            self.next[me],
            ack,
            TcpFlags::FIN | TcpFlags::ACK,
            None,
            &[],
            0,
        );
        self.next[me] = self.next[me].wrapping_add(1);
        p
    }

    /// `from` resets the connection.
    pub fn rst(&mut self, ts: Timestamp, from: Side) -> Packet {
        let ack = self.ack_of(from);
        self.packet(
            ts,
            from,
            self.next[Self::idx(from)],
            ack,
            TcpFlags::RST | TcpFlags::ACK,
            None,
            &[],
            0,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{decode_tcp, CaptureReader, Decoded};

    fn addr(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    #[test]
    fn reads_back_with_the_capture_reader() {
        let t = |ms: u64| Timestamp(1_000_000_000 + ms * 1_000_000);
        let (mut c, mut pkts) =
            SyntheticTcp::new(addr("10.0.0.2:40000"), addr("10.0.0.1:80"), t(0), 64);
        pkts.extend(c.data(t(1), Side::Client, b"GET\n"));
        pkts.extend(c.data(t(2), Side::Server, &vec![7u8; 70_000]));
        pkts.push(c.ack(t(42), Side::Client));
        pkts.push(c.fin(t(50), Side::Client));
        pkts.push(c.rst(t(51), Side::Server));
        let mut w = PcapWriter::new(Vec::new(), 128).unwrap();
        for (ts, p, len) in &pkts {
            w.write_packet(*ts, p, *len).unwrap();
        }
        let bytes = w.into_inner();

        let mut r = CaptureReader::new(&bytes[..]).unwrap();
        let mut segs = Vec::new();
        while let Some(f) = r.next_frame().unwrap() {
            assert!(f.data.len() <= 104 && f.data.len() <= f.orig_len as usize);
            match decode_tcp(f.link, f.data, f.orig_len) {
                Decoded::Tcp(s, _) => segs.push((f.ts, s)),
                other => panic!("frame {} not TCP: {other:?}", f.number),
            }
        }
        // SYN, SYN-ACK, ACK, request, 2 response segments, ACK, FIN, RST.
        assert_eq!(segs.len(), 9);
        assert!(segs[0].1.flags.syn() && segs[0].1.options.mss == Some(SYNTHETIC_MSS));
        assert_eq!(segs[3].1.payload_len, 4);
        assert!(segs[3].1.flags.psh());
        assert_eq!(segs[4].1.payload_len, u32::from(SYNTHETIC_MSS));
        assert!(!segs[4].1.flags.psh());
        assert_eq!(segs[5].1.payload_len, 70_000 - u32::from(SYNTHETIC_MSS));
        assert_eq!(segs[5].1.seq, segs[4].1.seq.wrapping_add(65_483));
        let ack = &segs[6].1;
        assert_eq!(ack.payload_len, 0);
        assert_eq!(ack.ack, segs[5].1.seq.wrapping_add(segs[5].1.payload_len));
        assert_eq!(segs[6].0, t(42));
        assert!(segs[7].1.flags.fin() && segs[8].1.flags.rst());
        assert_eq!(
            segs[3].1.src,
            crate::wire::Endpoint {
                ip: "10.0.0.2".parse().unwrap(),
                port: 40000
            }
        );
    }

    #[test]
    fn ip_checksum_verifies() {
        let p = ipv4_tcp_packet(
            addr("1.2.3.4:1"),
            addr("5.6.7.8:2"),
            1,
            2,
            0x10,
            100,
            None,
            &[],
            0,
        );
        assert_eq!(checksum(&p[..20]), 0);
    }
}
