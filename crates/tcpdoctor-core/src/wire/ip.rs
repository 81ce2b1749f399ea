//! IPv4 and IPv6 headers: what they carry, where it starts and how long it is.
//!
//! The TCP segment length comes from the IP header (IPv4 total length minus the header
//! length; IPv6 payload length minus extension headers), never from the captured bytes:
//! snap-length-truncated captures (`tcpdump -s 96`) keep only the headers, and tcpdoctor must
//! still know how many bytes each segment carried. Like Wireshark, the IP length is clamped to
//! what the packet's end on the wire leaves for it (the frame's original length, or for a
//! tunnelled packet the end of the packet around it), and a zero length (what TSO/GSO
//! super-packets and IPv6 jumbograms carry) falls back to all of that room.
//!
//! Non-first fragments carry no upper-layer header and are reported as fragments; a first
//! fragment is decoded (its payload length covers that fragment only).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use super::link::L3;
use super::tcp::{Decoded, NotTcp};

/// What an IP header says about the packet inside it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct IpInfo {
    pub src: IpAddr,
    pub dst: IpAddr,
    /// The protocol after the IP header and any IPv6 extension headers (6 for TCP).
    pub proto: u8,
    /// Offset of that protocol's header in the frame.
    pub l4_off: usize,
    /// Length of that header plus its payload, from the IP header.
    pub l4_len: u32,
}

impl IpInfo {
    /// Where this packet ends in the frame: the bound for anything tunnelled inside it.
    pub fn end(&self) -> usize {
        self.l4_off.saturating_add(self.l4_len as usize)
    }
}

pub(super) const PROTO_ICMP: u8 = 1;
pub(super) const PROTO_IPIP: u8 = 4;
pub(super) const PROTO_TCP: u8 = 6;
pub(super) const PROTO_UDP: u8 = 17;
pub(super) const PROTO_IPV6: u8 = 41;
pub(super) const PROTO_GRE: u8 = 47;
pub(super) const PROTO_ICMPV6: u8 = 58;
pub(super) const PROTO_MPLS: u8 = 137;

fn be16(b: &[u8], at: usize) -> u16 {
    match b.get(at..at + 2) {
        Some(&[x, y]) => u16::from_be_bytes([x, y]),
        _ => 0,
    }
}

const MALFORMED: Decoded = Decoded::NotTcp(NotTcp::Malformed);

/// The IP header at `off`, of the version the layer below announced; `end` is where the
/// packet ends on the wire (at least where the captured bytes end).
#[inline(always)]
pub(super) fn at(data: &[u8], off: usize, l3: L3, end: usize) -> Result<IpInfo, Decoded> {
    let version = match l3 {
        L3::V4 => 4,
        L3::V6 => 6,
        L3::Either => match data.get(off) {
            Some(b) => b >> 4,
            None => return Err(Decoded::Truncated),
        },
    };
    match version {
        4 => ipv4(data, off, end),
        6 => ipv6(data, off, end),
        _ => Err(Decoded::NotTcp(NotTcp::NotIp)),
    }
}

/// The IPv4 header at `off`.
pub(super) fn ipv4(data: &[u8], off: usize, end: usize) -> Result<IpInfo, Decoded> {
    let h = data.get(off..).unwrap_or(&[]);
    if h.len() < 20 {
        return Err(Decoded::Truncated);
    }
    let ihl = usize::from(h[0] & 0x0f) * 4;
    if h[0] >> 4 != 4 || ihl < 20 {
        return Err(MALFORMED);
    }
    if be16(h, 6) & 0x1fff != 0 {
        return Err(Decoded::NotTcp(NotTcp::Fragment));
    }
    let room = end.saturating_sub(off);
    let total = match usize::from(be16(h, 2)) {
        0 => room,
        n => n.min(room),
    };
    if total < ihl {
        return Err(MALFORMED);
    }
    let src = Ipv4Addr::new(h[12], h[13], h[14], h[15]);
    let dst = Ipv4Addr::new(h[16], h[17], h[18], h[19]);
    Ok(IpInfo {
        src: IpAddr::V4(src),
        dst: IpAddr::V4(dst),
        proto: h[9],
        l4_off: off + ihl,
        l4_len: u32::try_from(total - ihl).unwrap_or(u32::MAX),
    })
}

const EXT_HOP_BY_HOP: u8 = 0;
const EXT_ROUTING: u8 = 43;
const EXT_FRAGMENT: u8 = 44;
const EXT_AH: u8 = 51;
const EXT_DEST_OPTS: u8 = 60;

/// The IPv6 header at `off`, walking extension headers up to the upper-layer protocol.
pub(super) fn ipv6(data: &[u8], off: usize, end: usize) -> Result<IpInfo, Decoded> {
    let h = data.get(off..).unwrap_or(&[]);
    if h.len() < 40 {
        return Err(Decoded::Truncated);
    }
    if h[0] >> 4 != 6 {
        return Err(MALFORMED);
    }
    let room = end.saturating_sub(off + 40);
    let mut len = match usize::from(be16(h, 4)) {
        0 => room,
        n => n.min(room),
    };
    let mut next = h[6];
    let mut p = 40;
    // Each extension header is at least 8 bytes long, so `p` strictly grows and the walk ends
    // once it leaves the captured bytes.
    while next != PROTO_TCP {
        let ext_len = match next {
            EXT_HOP_BY_HOP | EXT_ROUTING | EXT_DEST_OPTS => {
                (usize::from(*h.get(p + 1).ok_or(Decoded::Truncated)?) + 1) * 8
            }
            EXT_AH => (usize::from(*h.get(p + 1).ok_or(Decoded::Truncated)?) + 2) * 4,
            EXT_FRAGMENT => {
                if h.len() < p + 4 {
                    return Err(Decoded::Truncated);
                }
                if be16(h, p + 2) & 0xfff8 != 0 {
                    return Err(Decoded::NotTcp(NotTcp::Fragment));
                }
                8
            }
            _ => break,
        };
        next = h[p];
        len = len.checked_sub(ext_len).ok_or(MALFORMED)?;
        p += ext_len;
    }
    let mut src = [0u8; 16];
    let mut dst = [0u8; 16];
    src.copy_from_slice(&h[8..24]);
    dst.copy_from_slice(&h[24..40]);
    Ok(IpInfo {
        src: IpAddr::V6(Ipv6Addr::from(src)),
        dst: IpAddr::V6(Ipv6Addr::from(dst)),
        proto: next,
        l4_off: off + p,
        l4_len: u32::try_from(len).unwrap_or(u32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{ipv4_pkt, ipv6_pkt, tcp_hdr, Tcp};
    use super::*;

    /// The protocol, its offset and length found, or why not.
    type Want = Result<(u8, usize, u32), Decoded>;

    const FRAGMENT: Decoded = Decoded::NotTcp(NotTcp::Fragment);

    fn tcp(payload: usize) -> Vec<u8> {
        let mut v = tcp_hdr(&Tcp::default());
        v.resize(v.len() + payload, 0xab);
        v
    }

    #[test]
    fn ipv4_table() {
        let seg = tcp(100);
        let full = ipv4_pkt(6, 0, None, &[], &seg);
        let with_opts = ipv4_pkt(6, 0, None, &[1, 1, 1, 0], &seg);
        let frag_later = ipv4_pkt(6, 185, None, &[], &seg);
        let frag_first = ipv4_pkt(6, 0x2000, None, &[], &seg);
        let udp = ipv4_pkt(17, 0, None, &[], &seg);
        let tso = ipv4_pkt(6, 0, Some(0), &[], &seg);
        let short_total = ipv4_pkt(6, 0, Some(12), &[], &seg);
        let long_total = ipv4_pkt(6, 0, Some(5000), &[], &seg);
        let mut v6 = full.clone();
        v6[0] = 0x65;
        let mut ihl3 = full.clone();
        ihl3[0] = 0x43;
        // (bytes, wire length, expected l4 offset and length or error)
        let cases: Vec<(&[u8], usize, Want)> = vec![
            (&full, full.len(), Ok((6, 20, 120))),
            (&full[..40], full.len(), Ok((6, 20, 120))),
            (&with_opts, with_opts.len(), Ok((6, 24, 120))),
            (&frag_later, frag_later.len(), Err(FRAGMENT)),
            (&frag_first, frag_first.len(), Ok((6, 20, 120))),
            (&udp, udp.len(), Ok((17, 20, 120))),
            (&tso, 20 + 9000, Ok((6, 20, 9000))),
            (&short_total, short_total.len(), Err(MALFORMED)),
            (&long_total, long_total.len(), Ok((6, 20, 120))),
            (&v6, v6.len(), Err(MALFORMED)),
            (&ihl3, ihl3.len(), Err(MALFORMED)),
            (&full[..19], full.len(), Err(Decoded::Truncated)),
            (&[], 0, Err(Decoded::Truncated)),
        ];
        for (i, (bytes, wire, want)) in cases.into_iter().enumerate() {
            let got = ipv4(bytes, 0, wire).map(|ip| (ip.proto, ip.l4_off, ip.l4_len));
            assert_eq!(got, want, "case {i}");
        }
        let ip = ipv4(&full, 0, full.len()).expect("tcp");
        assert_eq!(ip.src.to_string(), "10.0.0.1");
        assert_eq!(ip.dst.to_string(), "10.0.0.2");
    }

    #[test]
    fn ipv6_table() {
        let seg = tcp(100);
        let hbh = [6u8, 0, 1, 4, 0, 0, 0, 0]; // next=TCP, len 0 (8 bytes), PadN
        let route_then_dst = {
            let mut v = vec![60u8, 1, 0, 0, 0, 0, 0, 0]; // routing, 16 bytes
            v.extend([0u8; 8]);
            v.extend([6u8, 0, 1, 4, 0, 0, 0, 0]); // dest opts, 8 bytes
            v
        };
        let frag_first = [6u8, 0, 0x00, 0x01, 0, 0, 0, 1]; // offset 0, M=1
        let frag_later = [6u8, 0, 0x00, 0xb8, 0, 0, 0, 1]; // offset 23
        let ah = {
            let mut v = vec![6u8, 4, 0, 0]; // AH, (4+2)*4 = 24 bytes
            v.extend([0u8; 20]);
            v
        };
        let plain = ipv6_pkt(6, &[], &seg, None);
        let jumbo = ipv6_pkt(6, &[], &seg, Some(0));
        let cases: Vec<(Vec<u8>, usize, Want)> = vec![
            (plain.clone(), plain.len(), Ok((6, 40, 120))),
            (plain[..60].to_vec(), plain.len(), Ok((6, 40, 120))),
            (ipv6_pkt(0, &hbh, &seg, None), 168, Ok((6, 48, 120))),
            (
                ipv6_pkt(43, &route_then_dst, &seg, None),
                184,
                Ok((6, 64, 120)),
            ),
            (ipv6_pkt(44, &frag_first, &seg, None), 168, Ok((6, 48, 120))),
            (ipv6_pkt(44, &frag_later, &seg, None), 168, Err(FRAGMENT)),
            (ipv6_pkt(51, &ah, &seg, None), 184, Ok((6, 64, 120))),
            (ipv6_pkt(17, &[], &seg, None), 160, Ok((17, 40, 120))),
            (ipv6_pkt(59, &[], &seg, None), 160, Ok((59, 40, 120))),
            (jumbo.clone(), 40 + 70_000, Ok((6, 40, 70_000))),
            (
                ipv6_pkt(0, &hbh, &seg, None)[..41].to_vec(),
                168,
                Err(Decoded::Truncated),
            ),
            (ipv6_pkt(6, &[], &seg, Some(10)), 160, Ok((6, 40, 10))),
            (ipv6_pkt(0, &hbh, &seg, Some(4)), 168, Err(MALFORMED)),
            (plain[..39].to_vec(), 160, Err(Decoded::Truncated)),
        ];
        for (i, (bytes, wire, want)) in cases.into_iter().enumerate() {
            let got = ipv6(&bytes, 0, wire).map(|ip| (ip.proto, ip.l4_off, ip.l4_len));
            assert_eq!(got, want, "case {i}");
        }
        let ip = ipv6(&plain, 0, plain.len()).expect("tcp");
        assert_eq!(ip.src.to_string(), "2001:db8::1");
        assert_eq!(ip.dst.to_string(), "2001:db8::2");
    }

    #[test]
    fn ipv6_many_extension_headers_terminate() {
        let mut ext = Vec::new();
        for i in 0..200 {
            ext.extend([if i == 199 { 6 } else { 60 }, 0, 1, 4, 0, 0, 0, 0]);
        }
        let pkt = ipv6_pkt(60, &ext, &tcp(0), None);
        let got = ipv6(&pkt, 0, pkt.len()).map(|ip| (ip.l4_off, ip.l4_len));
        assert_eq!(got, Ok((1640, 20)));
        assert_eq!(ipv6(&pkt[..300], 0, pkt.len()), Err(Decoded::Truncated));
    }
}
