//! From a captured frame to a [`TcpSegment`].
//!
//! The frame is peeled layer by layer: the link header (`link.rs`) says where IP starts, the
//! IP header (`ip.rs`) says where TCP starts and how long the segment is on the wire, and the
//! TCP header gives ports, sequence numbers, flags, window and options.
//!
//! Only the 20-byte base TCP header has to be captured. The payload length is the IP
//! segment length minus the TCP data offset — taken from headers, not from the captured
//! bytes, so that snap-length-truncated captures give the same answers as full ones. Options
//! are read only as far as the captured bytes reach; ones cut off are absent. A data offset
//! below 5 words or beyond the IP segment length means the header is garbage: not TCP.

use super::ip::{self, IpInfo, PROTO_ICMP, PROTO_ICMPV6, PROTO_TCP, PROTO_UDP};
use super::link::{locate_ip, IpAt, NoIp};
use super::tunnel::{self, Tunnel};
use super::wlan::{self, WlanSkip};
use super::{Endpoint, LinkType, TcpFlags, TcpOptions, TcpSegment};

/// What one frame turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    /// A TCP segment, and the outermost tunnel it was found in (VXLAN, GRE, MPLS, …), if any.
    Tcp(TcpSegment, Option<Tunnel>),
    /// A frame that holds no TCP segment tcpdoctor can read, and what it is instead.
    NotTcp(NotTcp),
    /// Too few captured bytes to read the link, IP (tunnel) and base TCP headers.
    Truncated,
    /// The frame's link type is not one tcpdoctor decodes.
    UnsupportedLink,
    /// An 802.11 frame without a packet tcpdoctor can read (encrypted, management or
    /// control, aggregated), directly on the link or inside an access point's tunnel.
    Wlan(WlanSkip),
}

impl Decoded {
    /// The TCP segment, if the frame held one (tunnelled or not).
    pub fn tcp(&self) -> Option<&TcpSegment> {
        match self {
            Decoded::Tcp(seg, _) => Some(seg),
            _ => None,
        }
    }

    /// The same outcome for a packet found inside `via`: a non-TCP packet there counts as
    /// the tunnel's.
    pub(super) fn inside(self, via: Option<Tunnel>) -> Decoded {
        match (self, via) {
            (Decoded::NotTcp(_), Some(t)) => Decoded::NotTcp(NotTcp::InTunnel(t)),
            (other, _) => other,
        }
    }
}

/// What a frame without a readable TCP segment holds, as far as tcpdoctor looked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NotTcp {
    /// No IP at all: ARP, LLDP, spanning tree, …
    NotIp,
    Udp,
    /// ICMP or ICMPv6.
    Icmp,
    /// IP carrying something else: IGMP, ESP, OSPF, SCTP, …
    OtherIp,
    /// A non-first IP fragment: its transport header is in another packet.
    Fragment,
    /// Headers that contradict each other: an IP header length below 20 bytes or beyond
    /// the packet, a TCP data offset below 5 words or beyond the segment.
    Malformed,
    /// A tunnel (or MPLS, PPPoE) whose inner packet is not TCP, or is nested deeper than
    /// tcpdoctor follows.
    InTunnel(Tunnel),
}

impl NotTcp {
    fn of_protocol(proto: u8) -> NotTcp {
        match proto {
            PROTO_UDP => NotTcp::Udp,
            PROTO_ICMP | PROTO_ICMPV6 => NotTcp::Icmp,
            _ => NotTcp::OtherIp,
        }
    }
}

impl From<NoIp> for Decoded {
    fn from(no: NoIp) -> Decoded {
        match no {
            NoIp::Truncated => Decoded::Truncated,
            NoIp::NotIp => Decoded::NotTcp(NotTcp::NotIp),
            NoIp::InTunnel(t) => Decoded::NotTcp(NotTcp::InTunnel(t)),
            NoIp::Unsupported => Decoded::UnsupportedLink,
            NoIp::Wlan(w) => Decoded::Wlan(w),
            NoIp::Amsdu(_) => Decoded::Wlan(WlanSkip::Aggregated),
        }
    }
}

/// Decodes the link, IP (and tunnel) and TCP headers of one frame. Never panics.
///
/// `orig_len` is the frame's length on the wire (used when an IP length field is zero, as in
/// TSO captures, and to clamp IP lengths the frame cannot hold).
///
/// One answer per frame: an 802.11 A-MSDU, which holds several packets, is
/// `Decoded::Wlan(WlanSkip::Aggregated)` here. [`decode_frame`] gives each of its packets.
pub fn decode_tcp(link: LinkType, data: &[u8], orig_len: u32) -> Decoded {
    peel(link, data, orig_len).unwrap_or(Decoded::Wlan(WlanSkip::Aggregated))
}

/// Every packet one frame holds, decoded: one for nearly every frame, one per subframe for
/// an 802.11 A-MSDU (see `wlan.rs`), all of them the frame's (Wireshark cites the frame).
/// Never panics, and allocates nothing.
#[inline]
pub fn decode_frame(link: LinkType, data: &[u8], orig_len: u32) -> Packets<'_> {
    Packets {
        data,
        next: match peel(link, data, orig_len) {
            Ok(one) => Next::One(one),
            Err(amsdu) => Next::Subframe(amsdu, true),
        },
    }
}

/// The packets of one frame ([`decode_frame`]).
#[derive(Debug, Clone)]
pub struct Packets<'a> {
    data: &'a [u8],
    next: Next,
}

#[derive(Debug, Clone, Copy)]
enum Next {
    One(Decoded),
    /// The A-MSDU subframe to decode next; `true` for the first.
    Subframe(Amsdu, bool),
    Done,
}

impl Iterator for Packets<'_> {
    type Item = Decoded;

    #[inline]
    fn next(&mut self) -> Option<Decoded> {
        match std::mem::replace(&mut self.next, Next::Done) {
            Next::One(one) => Some(one),
            Next::Done => None,
            Next::Subframe(amsdu, first) => self.subframe(amsdu, first),
        }
    }
}

impl Packets<'_> {
    /// Whether the frame is an 802.11 A-MSDU (before its first subframe is taken).
    #[inline]
    pub fn is_amsdu(&self) -> bool {
        matches!(self.next, Next::Subframe(_, true))
    }

    /// Decodes the subframe `a` points at and moves to the next.
    #[inline(never)]
    fn subframe(&mut self, a: Amsdu, first: bool) -> Option<Decoded> {
        let data = self.data;
        let (body, stop) = match wlan::subframe(data, a.off, a.end) {
            Ok(Some(sub)) => sub,
            // An A-MSDU without a single subframe still counts, as malformed.
            Ok(None) if first => return Some(Decoded::Wlan(WlanSkip::BadSubframe)),
            Ok(None) => return None,
            Err(no) => return Some(Decoded::from(no).inside(a.via)),
        };
        let next = wlan::next_subframe(a.off, stop);
        self.next = Next::Subframe(Amsdu { off: next, ..a }, false);
        let at = match wlan::llc(data, body) {
            Ok(at) => at,
            Err(no) => return Some(Decoded::from(no).inside(a.via)),
        };
        let via = a.via.or(at.via);
        let decoded = match from_ip(data, IpAt { via, ..at }, stop.min(at.end)) {
            Ok(d) => d,
            // An A-MSDU in a tunnel inside a subframe is not split again.
            Err(_) => Decoded::Wlan(WlanSkip::Aggregated),
        };
        Some(decoded)
    }
}

/// An 802.11 A-MSDU found in a frame, not split yet: where its first subframe starts, where
/// the frame (or the packet around it, for a tunnelled one) ends, the outermost tunnel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Amsdu {
    off: usize,
    end: usize,
    via: Option<Tunnel>,
}

impl Amsdu {
    pub(super) fn new(off: usize, end: usize, via: Option<Tunnel>) -> Amsdu {
        Amsdu { off, end, via }
    }
}

/// One frame's outcome, an A-MSDU left whole (`Err`).
pub(super) type Peeled = Result<Decoded, Amsdu>;

#[inline(always)]
fn peel(link: LinkType, data: &[u8], orig_len: u32) -> Peeled {
    let wire_end = (orig_len as usize).max(data.len());
    let at = match locate_ip(link, data) {
        Ok(at) => at,
        Err(NoIp::Amsdu(off)) => return Err(Amsdu::new(off, wire_end, None)),
        Err(no) => return Ok(no.into()),
    };
    from_ip(data, at, wire_end.min(at.end))
}

/// The IP packet at `at`, ending by `end`: its TCP segment, or what it is instead.
#[inline(always)]
fn from_ip(data: &[u8], at: IpAt, end: usize) -> Peeled {
    match ip::at(data, at.off, at.l3, end) {
        Ok(ip) if ip.proto == PROTO_TCP => Ok(tcp(data, &ip, at.via)),
        Ok(ip) => match tunnel::decapsulate(data, &ip, at.via) {
            Some(peeled) => peeled,
            None => Ok(Decoded::NotTcp(NotTcp::of_protocol(ip.proto)).inside(at.via)),
        },
        Err(d) => Ok(d.inside(at.via)),
    }
}

/// The TCP header at `ip.l4_off`, of a packet found inside `via` (if tunnelled).
#[inline(always)]
pub(super) fn tcp(data: &[u8], ip: &IpInfo, via: Option<Tunnel>) -> Decoded {
    let t = match data.get(ip.l4_off..) {
        Some(t) if t.len() >= 20 => t,
        _ => return Decoded::Truncated,
    };
    let be16 = |at: usize| u16::from_be_bytes([t[at], t[at + 1]]);
    let be32 = |at: usize| u32::from_be_bytes([t[at], t[at + 1], t[at + 2], t[at + 3]]);
    let hdr_len = u32::from(t[12] >> 4) * 4;
    if hdr_len < 20 || hdr_len > ip.l4_len {
        return Decoded::NotTcp(NotTcp::Malformed).inside(via);
    }
    let opts_end = (hdr_len as usize).min(t.len());
    let seg = TcpSegment {
        src: Endpoint {
            ip: ip.src,
            port: be16(0),
        },
        dst: Endpoint {
            ip: ip.dst,
            port: be16(2),
        },
        seq: be32(4),
        ack: be32(8),
        flags: TcpFlags(t[13]),
        window: be16(14),
        payload_len: ip.l4_len - hdr_len,
        options: options(&t[20..opts_end]),
    };
    Decoded::Tcp(seg, via)
}

const OPT_EOL: u8 = 0;
const OPT_NOP: u8 = 1;
const OPT_MSS: u8 = 2;
const OPT_WSCALE: u8 = 3;
const OPT_SACK_PERM: u8 = 4;
const OPT_SACK: u8 = 5;
const OPT_TIMESTAMP: u8 = 8;

/// Parses the options tcpdoctor uses; stops at the end-of-list option, at a malformed length
/// or where the captured bytes end.
#[inline(always)]
fn options(mut o: &[u8]) -> TcpOptions {
    // What nearly every segment of a Linux or BSD sender carries: NOP, NOP, timestamps.
    if let [OPT_NOP, OPT_NOP, OPT_TIMESTAMP, 10, a, b, c, d, e, f, g, h] = *o {
        return TcpOptions {
            timestamp: Some((
                u32::from_be_bytes([a, b, c, d]),
                u32::from_be_bytes([e, f, g, h]),
            )),
            ..TcpOptions::default()
        };
    }
    let mut out = TcpOptions::default();
    while let Some(&kind) = o.first() {
        match kind {
            OPT_EOL => break,
            OPT_NOP => {
                o = &o[1..];
                continue;
            }
            _ => {}
        }
        let len = match o.get(1) {
            Some(&l) if l >= 2 && usize::from(l) <= o.len() => usize::from(l),
            _ => break,
        };
        let v = &o[2..len];
        match (kind, v) {
            (OPT_MSS, &[a, b]) => out.mss = Some(u16::from_be_bytes([a, b])),
            (OPT_WSCALE, &[s]) => out.window_scale = Some(s),
            (OPT_SACK_PERM, &[]) => out.sack_permitted = true,
            (OPT_SACK, v) => out.sack_blocks = (v.len() / 8) as u8,
            (OPT_TIMESTAMP, &[a, b, c, d, e, f, g, h]) => {
                out.timestamp = Some((
                    u32::from_be_bytes([a, b, c, d]),
                    u32::from_be_bytes([e, f, g, h]),
                ))
            }
            _ => {}
        }
        o = &o[len..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{eth, ipv4_pkt, ipv6_pkt, tcp_hdr, Tcp};
    use super::*;

    /// The payload length, or the non-TCP outcome.
    type Want = Result<u32, Decoded>;

    const NOT_IP: Decoded = Decoded::NotTcp(NotTcp::NotIp);
    const MALFORMED: Decoded = Decoded::NotTcp(NotTcp::Malformed);

    fn seg(opts: &[u8], payload: usize) -> Vec<u8> {
        let mut v = tcp_hdr(&Tcp {
            options: opts.to_vec(),
            ..Tcp::default()
        });
        v.resize(v.len() + payload, 0x5a);
        v
    }

    fn cat(parts: &[&[u8]]) -> Vec<u8> {
        parts.concat()
    }

    /// The payload length, or the non-TCP outcome.
    fn outcome(link: LinkType, data: &[u8], orig: usize) -> Want {
        match decode_tcp(link, data, orig as u32) {
            Decoded::Tcp(t, _) => Ok(t.payload_len),
            other => Err(other),
        }
    }

    #[test]
    fn link_layers_table() {
        let v4 = ipv4_pkt(6, 0, None, &[], &seg(&[], 100));
        let v6 = ipv6_pkt(6, &[], &seg(&[], 100), None);
        let sll =
            |proto: u16, ip: &[u8]| cat(&[&[0, 0, 0, 1, 0, 6], &[0; 8], &proto.to_be_bytes(), ip]);
        let sll2 = |proto: u16, ip: &[u8]| cat(&[&proto.to_be_bytes(), &[0; 18], ip]);
        let af = |n: u32, big: bool, ip: &[u8]| {
            let b = if big {
                n.to_be_bytes()
            } else {
                n.to_le_bytes()
            };
            cat(&[&b, ip])
        };
        let arp = eth(0x0806, &[], &[0; 28]);
        let cases: Vec<(&str, LinkType, Vec<u8>, Want)> = vec![
            ("eth v4", LinkType::Ethernet, eth(0x0800, &[], &v4), Ok(100)),
            ("eth v6", LinkType::Ethernet, eth(0x86dd, &[], &v6), Ok(100)),
            (
                "802.1Q",
                LinkType::Ethernet,
                eth(0x0800, &[0x8100], &v4),
                Ok(100),
            ),
            (
                "QinQ x3",
                LinkType::Ethernet,
                eth(0x86dd, &[0x88a8, 0x9100, 0x8100], &v6),
                Ok(100),
            ),
            ("arp", LinkType::Ethernet, arp, Err(NOT_IP)),
            (
                "eth short",
                LinkType::Ethernet,
                vec![0; 13],
                Err(Decoded::Truncated),
            ),
            (
                "vlan short",
                LinkType::Ethernet,
                eth(0x0800, &[0x8100], &v4)[..17].to_vec(),
                Err(Decoded::Truncated),
            ),
            ("sll v4", LinkType::LinuxSll, sll(0x0800, &v4), Ok(100)),
            ("sll v6", LinkType::LinuxSll, sll(0x86dd, &v6), Ok(100)),
            (
                "sll vlan",
                LinkType::LinuxSll,
                sll(0x8100, &cat(&[&[0, 5, 0x08, 0x00], &v4])),
                Ok(100),
            ),
            (
                "sll short",
                LinkType::LinuxSll,
                vec![0; 15],
                Err(Decoded::Truncated),
            ),
            ("sll2 v4", LinkType::LinuxSll2, sll2(0x0800, &v4), Ok(100)),
            ("sll2 v6", LinkType::LinuxSll2, sll2(0x86dd, &v6), Ok(100)),
            (
                "sll2 arp",
                LinkType::LinuxSll2,
                sll2(0x0806, &[0; 28]),
                Err(NOT_IP),
            ),
            ("raw v4", LinkType::RawIp, v4.clone(), Ok(100)),
            ("raw v6", LinkType::RawIp, v6.clone(), Ok(100)),
            ("raw v5", LinkType::RawIp, vec![0x50; 40], Err(NOT_IP)),
            (
                "raw empty",
                LinkType::RawIp,
                vec![],
                Err(Decoded::Truncated),
            ),
            ("ipv4", LinkType::Ipv4, v4.clone(), Ok(100)),
            (
                "ipv4 link, v6 bytes",
                LinkType::Ipv4,
                v6.clone(),
                Err(MALFORMED),
            ),
            ("ipv6", LinkType::Ipv6, v6.clone(), Ok(100)),
            ("null le 2", LinkType::Null, af(2, false, &v4), Ok(100)),
            ("null be 2", LinkType::Null, af(2, true, &v4), Ok(100)),
            ("null le 10", LinkType::Null, af(10, false, &v6), Ok(100)),
            ("null be 24", LinkType::Null, af(24, true, &v6), Ok(100)),
            ("null le 28", LinkType::Null, af(28, false, &v6), Ok(100)),
            ("null le 30", LinkType::Null, af(30, false, &v6), Ok(100)),
            ("null af 7", LinkType::Null, af(7, false, &v4), Err(NOT_IP)),
            (
                "null short",
                LinkType::Null,
                vec![2, 0],
                Err(Decoded::Truncated),
            ),
            ("loop 2", LinkType::Loop, af(2, true, &v4), Ok(100)),
            ("loop 24", LinkType::Loop, af(24, true, &v6), Ok(100)),
            ("loop le", LinkType::Loop, af(2, false, &v4), Err(NOT_IP)),
            (
                "other",
                LinkType::Other(105),
                v4.clone(),
                Err(Decoded::UnsupportedLink),
            ),
        ];
        for (name, link, bytes, want) in cases {
            assert_eq!(outcome(link, &bytes, bytes.len()), want, "{name}");
        }
    }

    #[test]
    fn payload_length_comes_from_headers() {
        let full = eth(0x0800, &[], &ipv4_pkt(6, 0, None, &[], &seg(&[], 1448)));
        let v6 = eth(0x86dd, &[], &ipv6_pkt(6, &[], &seg(&[], 1448), None));
        let tso = eth(0x0800, &[], &ipv4_pkt(6, 0, Some(0), &[], &seg(&[], 100)));
        let padded = cat(&[
            &eth(0x0800, &[], &ipv4_pkt(6, 0, None, &[], &seg(&[], 0))),
            &[0; 6],
        ]);
        let eth_ = LinkType::Ethernet;
        // (name, captured bytes, wire length, expected)
        let cases: Vec<(&str, &[u8], usize, Want)> = vec![
            ("full", &full, full.len(), Ok(1448)),
            ("snaplen 96", &full[..96], full.len(), Ok(1448)),
            ("base header only", &full[..54], full.len(), Ok(1448)),
            ("tcp cut", &full[..53], full.len(), Err(Decoded::Truncated)),
            ("ip cut", &full[..30], full.len(), Err(Decoded::Truncated)),
            ("v6 snaplen", &v6[..74], v6.len(), Ok(1448)),
            ("v6 tcp cut", &v6[..73], v6.len(), Err(Decoded::Truncated)),
            ("tso zero length", &tso, 14 + 20 + 20 + 64_000, Ok(64_000)),
            ("tso snaplen", &tso[..60], 14 + 40 + 5000, Ok(5000)),
            ("ethernet padding", &padded, padded.len(), Ok(0)),
            ("orig shorter than ip", &full, 100, Ok(1448)),
            ("orig shorter, cut", &full[..80], 100, Ok(46)),
        ];
        for (name, bytes, wire, want) in cases {
            assert_eq!(outcome(eth_, bytes, wire), want, "{name}");
        }
    }

    #[test]
    fn bad_data_offsets_are_not_tcp() {
        for (doff, ip_total, want) in [
            (4u8, None, Err(MALFORMED)),
            (0, None, Err(MALFORMED)),
            (15, None, Err(MALFORMED)),
            (8, Some(20 + 31), Err(MALFORMED)),
            (8, Some(20 + 32), Ok(0)),
        ] {
            let mut s = seg(&[], 0);
            s[12] = doff << 4;
            s.resize(56, 1);
            let p = ipv4_pkt(6, 0, ip_total, &[], &s);
            assert_eq!(outcome(LinkType::RawIp, &p, p.len()), want, "doff {doff}");
        }
    }

    #[test]
    fn fields_and_options() {
        let syn_opts = [
            2, 4, 0x05, 0xb4, // MSS 1460
            4, 2, // SACK permitted
            8, 10, 0, 0, 0, 7, 0, 0, 0, 9, // TS 7, 9
            1, // NOP
            3, 3, 7, // WS 7
        ];
        let t = Tcp {
            sport: 40000,
            dport: 443,
            seq: 0xdead_beef,
            ack: 17,
            flags: TcpFlags::SYN | TcpFlags::ACK,
            window: 65535,
            options: syn_opts.to_vec(),
        };
        let p = ipv4_pkt(6, 0, None, &[], &tcp_hdr(&t));
        let Decoded::Tcp(s, _) = decode_tcp(LinkType::RawIp, &p, p.len() as u32) else {
            panic!("not tcp")
        };
        assert_eq!(s.src.to_string(), "10.0.0.1:40000");
        assert_eq!(s.dst.to_string(), "10.0.0.2:443");
        assert_eq!(
            (s.seq, s.ack, s.window, s.payload_len),
            (0xdead_beef, 17, 65535, 0)
        );
        assert_eq!(s.flags.to_string(), "S.");
        let want = TcpOptions {
            mss: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            sack_blocks: 0,
            timestamp: Some((7, 9)),
        };
        assert_eq!(s.options, want);
        // Options cut by the snap length: only the complete ones before the cut are read.
        let Decoded::Tcp(s, _) = decode_tcp(LinkType::RawIp, &p[..20 + 20 + 10], p.len() as u32)
        else {
            panic!("not tcp")
        };
        let cut = TcpOptions {
            mss: Some(1460),
            sack_permitted: true,
            ..TcpOptions::default()
        };
        assert_eq!(s.options, cut);
    }

    #[test]
    fn options_table() {
        let sack3 = cat(&[&[1, 1, 5, 26], &[0; 24]]);
        let cases: Vec<(&[u8], TcpOptions)> = vec![
            (&[], TcpOptions::default()),
            (
                &sack3,
                TcpOptions {
                    sack_blocks: 3,
                    ..Default::default()
                },
            ),
            (&[0, 2, 4, 5, 0xb4], TcpOptions::default()),
            (&[2, 4, 5], TcpOptions::default()),
            (&[2, 1, 2, 4, 5, 0xb4], TcpOptions::default()),
            (&[2, 0, 2, 4], TcpOptions::default()),
            (
                &[99, 3, 0, 3, 3, 14],
                TcpOptions {
                    window_scale: Some(14),
                    ..Default::default()
                },
            ),
            (
                &[2, 3, 5, 4, 2],
                TcpOptions {
                    sack_permitted: true,
                    ..Default::default()
                },
            ),
            (&[8, 6, 0, 0, 0, 1], TcpOptions::default()),
            (&[1, 1, 1, 1], TcpOptions::default()),
        ];
        for (i, (bytes, want)) in cases.into_iter().enumerate() {
            assert_eq!(options(bytes), want, "case {i}");
        }
    }
}
