//! The audit's own packet decoder, written apart from `wire::` so that a bug there cannot
//! hide here.
//!
//! It does not parse link layers: it scans the captured bytes for an IP header whose addresses
//! are the two endpoints the finding names (either direction), which works the same under
//! Ethernet, VLANs, Linux cooked captures, raw IP and tunnels. IPv6 extension headers
//! (hop-by-hop, routing, destination options, fragment and AH) are walked, at most
//! [`MAX_EXTENSION_HEADERS`] of them. A first IP fragment (offset 0) carries the TCP header and
//! is decoded, marked [`Segment::fragment`] (its payload length covers that fragment only);
//! later fragments carry no TCP header and are not segments. The IP header an ICMP or ICMPv6
//! error quotes (right after an IP header carrying ICMP and the 8-byte ICMP header) is not a
//! segment of the flow and is passed over.

use std::net::{IpAddr, SocketAddr};

pub const FIN: u8 = 0x01;
pub const SYN: u8 = 0x02;
pub const RST: u8 = 0x04;
pub const ACK: u8 = 0x10;

/// The most IPv6 extension headers walked before the TCP header.
pub const MAX_EXTENSION_HEADERS: usize = 8;

/// One TCP segment as the audit sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Sent by the first endpoint given to [`decode`] (the client).
    pub from_a: bool,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub payload: u32,
    /// The MSS option, if the options were captured and carry one.
    pub mss: Option<u16>,
    /// Whether the timestamp option is present; `None` when the options were not captured.
    pub timestamps: Option<bool>,
    /// A first IP fragment: `payload` counts that fragment's bytes only.
    pub fragment: bool,
}

impl Segment {
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    /// Sequence space this segment occupies (payload, plus one for SYN and for FIN).
    pub fn seq_len(&self) -> u32 {
        self.payload
            .wrapping_add(u32::from(self.has(SYN)))
            .wrapping_add(u32::from(self.has(FIN)))
    }

    /// The sequence number just past this segment.
    pub fn end(&self) -> u32 {
        self.seq.wrapping_add(self.seq_len())
    }

    /// Whether this segment's ACK field acknowledges everything before `seq` (wrapping).
    pub fn acks(&self, seq: u32) -> bool {
        self.has(ACK) && self.ack.wrapping_sub(seq) as i32 >= 0
    }
}

/// Why a frame is not a TCP segment between the expected endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotSegment {
    /// No IP header carrying TCP between the two endpoints (ports included) in the frame.
    Elsewhere,
    /// Found, but cut short or inconsistent: what is wrong.
    Bad(&'static str),
}

/// Finds the TCP segment between `a` and `b` in `frame` (captured bytes, any link layer).
///
/// A frame that holds two segments of the flow (an 802.11 A-MSDU packs several packets in one
/// frame, and the frame number cites them all) does not say which one is meant: `Bad`.
pub fn decode(frame: &[u8], a: SocketAddr, b: SocketAddr) -> Result<Segment, NotSegment> {
    let (found, after) = scan(frame, 0, a, b)?;
    match scan(frame, after, a, b) {
        Ok(_) => Err(NotSegment::Bad(
            "it holds more than one segment of the flow (802.11 A-MSDU subframes)",
        )),
        Err(_) => Ok(found),
    }
}

/// The first segment between `a` and `b` at or after byte `from`, and where to look for the
/// next: past its IP packet (so nothing is scanned twice in a frame of one packet).
fn scan(
    frame: &[u8],
    from: usize,
    a: SocketAddr,
    b: SocketAddr,
) -> Result<(Segment, usize), NotSegment> {
    let mut first_bad = None;
    for off in from..frame.len() {
        let found = match frame[off] >> 4 {
            4 => v4(&frame[off..], a, b),
            6 => v6(&frame[off..], a, b),
            _ => continue,
        };
        if found.is_some() && quoted(frame, off) {
            continue; // The header an ICMP error quotes: not a segment of the flow.
        }
        match found {
            Some(Ok(s)) => {
                let len = match frame[off] >> 4 {
                    4 => be16(frame, off + 2).map(usize::from),
                    _ => be16(frame, off + 4).map(|l| usize::from(l) + 40),
                };
                return Ok((s, off + len.unwrap_or(0).max(20)));
            }
            Some(Err(why)) => {
                first_bad.get_or_insert(why);
            }
            None => {}
        }
    }
    Err(first_bad.map_or(NotSegment::Elsewhere, NotSegment::Bad))
}

/// Whether the IP header at `off` is the one an ICMP or ICMPv6 error quotes: an IP header
/// carrying ICMP ends 8 bytes (the ICMP header) before it.
fn quoted(frame: &[u8], off: usize) -> bool {
    let v4 = (20..=60).step_by(4).any(|ihl: usize| {
        off.checked_sub(8 + ihl)
            .and_then(|start| frame.get(start..start + 20))
            .is_some_and(|h| usize::from(h[0]) == (0x40 | (ihl / 4)) && h[9] == 1)
    });
    let v6 = || {
        let Some(last) = off.checked_sub(48) else {
            return false;
        };
        (last.saturating_sub(MAX_EXTENSION_HEADERS * 2048)..=last).any(|start| {
            frame[start] >> 4 == 6
                && matches!(v6_walk(&frame[start..]), Some(Ok((58, at, _))) if start + at + 8 == off)
        })
    };
    v4 || v6()
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// The ways (`true`: a → b) the addresses and the TCP ports at the start of `l4` fit; both when
/// the two ends share an address (loopback).
fn directions(src: &[u8], dst: &[u8], l4: &[u8], a: SocketAddr, b: SocketAddr) -> Option<bool> {
    let is = |bytes: &[u8], ip: IpAddr| match ip {
        IpAddr::V4(v) => bytes == v.octets(),
        IpAddr::V6(v) => bytes == v.octets(),
    };
    let (sport, dport) = (be16(l4, 0)?, be16(l4, 2)?);
    let fits = |from: SocketAddr, to: SocketAddr| {
        is(src, from.ip()) && is(dst, to.ip()) && sport == from.port() && dport == to.port()
    };
    if fits(a, b) {
        Some(true)
    } else if fits(b, a) {
        Some(false)
    } else {
        None
    }
}

type Found = Option<Result<Segment, &'static str>>;

fn v4(ip: &[u8], a: SocketAddr, b: SocketAddr) -> Found {
    if !(a.is_ipv4() && b.is_ipv4()) || ip.len() < 20 {
        return None;
    }
    let ihl = usize::from(ip[0] & 0x0f) * 4;
    if ihl < 20 || ip[9] != 6 {
        return None;
    }
    let total = usize::from(be16(ip, 2)?);
    let frag = be16(ip, 6)?;
    if frag & 0x1fff != 0 {
        return None; // A later fragment: no TCP header here.
    }
    let l4 = ip.get(ihl..)?;
    let from_a = directions(&ip[12..16], &ip[16..20], l4, a, b)?;
    let found = tcp_fields(l4, from_a);
    Some(found.and_then(|mut s| {
        s.fragment = frag & 0x2000 != 0;
        if total == 0 {
            return Err("IPv4 total length 0 (segmentation offload)");
        }
        let doff = usize::from(l4[12] >> 4) * 4;
        s.payload = total
            .checked_sub(ihl + doff)
            .ok_or("IPv4 total length shorter than its headers")? as u32;
        Ok(s)
    }))
}

/// Where the IPv6 extension headers after the fixed header end: the next header's protocol,
/// the offset (from the start of `ip`) of its header, and whether a fragment header (of a
/// first fragment) was passed. `None` for a later fragment; `Err` when the headers are cut short
/// or too many.
fn v6_walk(ip: &[u8]) -> Option<Result<(u8, usize, bool), &'static str>> {
    let mut next = *ip.get(6)?;
    let mut at = 40;
    let mut fragment = false;
    for _ in 0..MAX_EXTENSION_HEADERS {
        let len = match next {
            0 | 43 | 60 | 51 | 44 => match ip.get(at..at + 8) {
                Some(h) => match next {
                    51 => (usize::from(h[1]) + 2) * 4,
                    44 => {
                        if u16::from_be_bytes([h[2], h[3]]) & 0xfff8 != 0 {
                            return None; // A later fragment: no TCP header here.
                        }
                        fragment = true;
                        8
                    }
                    _ => (usize::from(h[1]) + 1) * 8,
                },
                None => return Some(Err("IPv6 extension headers cut short by the capture")),
            },
            _ => return Some(Ok((next, at, fragment))),
        };
        next = ip[at];
        at += len;
    }
    match next {
        0 | 43 | 60 | 51 | 44 => Some(Err("too many IPv6 extension headers")),
        _ => Some(Ok((next, at, fragment))),
    }
}

fn v6(ip: &[u8], a: SocketAddr, b: SocketAddr) -> Found {
    if !(a.is_ipv6() && b.is_ipv6()) || ip.len() < 40 {
        return None;
    }
    let plen = usize::from(be16(ip, 4)?);
    let (at, fragment) = match v6_walk(ip)? {
        Ok((6, at, fragment)) => (at, fragment),
        Ok(_) => return None,
        Err(why) => {
            // The ports are behind the headers: only the addresses can say it is this flow.
            let is = |bytes: &[u8], x: SocketAddr| match x.ip() {
                IpAddr::V6(v) => bytes == v.octets(),
                IpAddr::V4(_) => false,
            };
            let (src, dst) = (&ip[8..24], &ip[24..40]);
            return ((is(src, a) && is(dst, b)) || (is(src, b) && is(dst, a))).then_some(Err(why));
        }
    };
    let l4 = ip.get(at..)?;
    let from_a = directions(&ip[8..24], &ip[24..40], l4, a, b)?;
    let found = tcp_fields(l4, from_a);
    Some(found.and_then(|mut s| {
        s.fragment = fragment;
        if plen == 0 {
            return Err("IPv6 payload length 0 (jumbogram or offload)");
        }
        let doff = usize::from(l4[12] >> 4) * 4;
        s.payload = plen
            .checked_sub(at - 40 + doff)
            .ok_or("IPv6 payload length shorter than its headers")? as u32;
        Ok(s)
    }))
}

fn tcp_fields(l4: &[u8], from_a: bool) -> Result<Segment, &'static str> {
    if l4.len() < 20 {
        return Err("TCP header cut short by the capture");
    }
    let doff = usize::from(l4[12] >> 4) * 4;
    if doff < 20 {
        return Err("TCP data offset below 20 bytes");
    }
    let mut s = Segment {
        from_a,
        seq: be32(l4, 4).unwrap_or(0),
        ack: be32(l4, 8).unwrap_or(0),
        flags: l4[13],
        payload: 0,
        mss: None,
        timestamps: None,
        fragment: false,
    };
    if let Some(opts) = l4.get(20..doff) {
        let (mss, ts) = options(opts);
        s.mss = mss;
        s.timestamps = Some(ts);
    }
    Ok(s)
}

/// MSS and whether the timestamp option is present; stops at a malformed option.
fn options(mut o: &[u8]) -> (Option<u16>, bool) {
    let (mut mss, mut ts) = (None, false);
    while let Some(&kind) = o.first() {
        match kind {
            0 => break,
            1 => {
                o = &o[1..];
                continue;
            }
            _ => {}
        }
        let Some(&len) = o.get(1) else { break };
        let len = usize::from(len);
        if len < 2 || len > o.len() {
            break;
        }
        match (kind, len) {
            (2, 4) => mss = be16(o, 2),
            (8, 10) => ts = true,
            _ => {}
        }
        o = &o[len..];
    }
    (mss, ts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::testutil::{eth, ipv4_pkt, ipv6_pkt, tcp_hdr, Tcp};

    fn v4_ends() -> (SocketAddr, SocketAddr) {
        (
            "10.0.0.1:1234".parse().unwrap(),
            "10.0.0.2:80".parse().unwrap(),
        )
    }

    fn seg(options: Vec<u8>, flags: u8, n: usize) -> Vec<u8> {
        let mut v = tcp_hdr(&Tcp {
            options,
            flags,
            ..Tcp::default()
        });
        v.resize(v.len() + n, b'x');
        v
    }

    #[test]
    fn ipv4_in_ethernet_both_ways() {
        let (a, b) = v4_ends();
        let opts = vec![2, 4, 0x05, 0xb4, 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        let f = eth(
            0x0800,
            &[0x8100],
            &ipv4_pkt(6, 0, None, &[], &seg(opts, 0x12, 7)),
        );
        let s = decode(&f, a, b).unwrap();
        assert!(s.from_a && s.has(SYN) && s.has(ACK));
        assert_eq!((s.seq, s.ack, s.payload), (1000, 2000, 7));
        assert_eq!((s.mss, s.timestamps), (Some(1460), Some(true)));
        assert_eq!(s.end(), 1008);
        let s = decode(&f, b, a).unwrap();
        assert!(!s.from_a);
    }

    /// Two packets in one frame, as an 802.11 A-MSDU's subframes hold them: two segments of
    /// the flow make the frame ambiguous; one of the flow beside another flow's is the flow's.
    #[test]
    fn a_frame_with_two_segments_of_the_flow_is_ambiguous() {
        let (a, b) = v4_ends();
        let one = ipv4_pkt(6, 0, None, &[], &seg(vec![], 0x18, 30));
        let two = [&one[..], &[0xd1; 14], &one].concat();
        assert_eq!(
            decode(&two, a, b),
            Err(NotSegment::Bad(
                "it holds more than one segment of the flow (802.11 A-MSDU subframes)"
            ))
        );
        let mut other = one.clone();
        other[19] = 9; // 10.0.0.9: another flow's segment
        let mixed = [&one[..], &[0xd1; 14], &other].concat();
        assert_eq!(decode(&mixed, a, b).map(|s| s.payload), Ok(30));
        let mixed = [&other[..], &[0xd1; 14], &one].concat();
        assert_eq!(decode(&mixed, a, b).map(|s| s.payload), Ok(30));
    }

    #[test]
    fn loopback_ends_share_an_address() {
        let mut seg = seg(vec![], 0x18, 3);
        seg[..4].copy_from_slice(&[0, 80, 0x04, 0xd2]); // 80 → 1234
        let mut f = ipv4_pkt(6, 0, None, &[], &seg);
        f[12..20].copy_from_slice(&[127, 0, 0, 1, 127, 0, 0, 1]);
        let a: SocketAddr = "127.0.0.1:1234".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:80".parse().unwrap();
        assert!(!decode(&f, a, b).unwrap().from_a);
        assert!(decode(&f, b, a).unwrap().from_a);
    }

    #[test]
    fn other_endpoints_are_elsewhere() {
        let f = ipv4_pkt(6, 0, None, &[], &seg(vec![], 0x18, 3));
        let a: SocketAddr = "10.0.0.1:1235".parse().unwrap();
        let b: SocketAddr = "10.0.0.2:80".parse().unwrap();
        assert_eq!(decode(&f, a, b), Err(NotSegment::Elsewhere));
        let c: SocketAddr = "10.0.0.3:80".parse().unwrap();
        assert_eq!(decode(&f, a, c), Err(NotSegment::Elsewhere));
        let v6: SocketAddr = "[2001:db8::2]:80".parse().unwrap();
        assert_eq!(decode(&f, a, v6), Err(NotSegment::Elsewhere));
    }

    #[test]
    fn ipv6_and_payload_from_the_length_field() {
        let a: SocketAddr = "[2001:db8::1]:1234".parse().unwrap();
        let b: SocketAddr = "[2001:db8::2]:80".parse().unwrap();
        // Snapped: the payload is not captured, but the length field says 100 bytes.
        let hdr = seg(vec![], 0x10, 0);
        let f = ipv6_pkt(6, &[], &hdr, Some(120));
        let s = decode(&f, a, b).unwrap();
        assert_eq!(s.payload, 100);
        assert_eq!(s.timestamps, Some(false));
        // Behind a hop-by-hop header: walked, its bytes not counted as payload.
        let f = ipv6_pkt(0, &[6, 0, 1, 4, 0, 0, 0, 0], &hdr, None);
        let s = decode(&f, a, b).unwrap();
        assert_eq!((s.payload, s.fragment), (0, false));
        // Hop-by-hop, then AH (len 1: 12 bytes), then TCP.
        let ext = [51, 0, 1, 4, 0, 0, 0, 0, 6, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        let f = ipv6_pkt(0, &ext, &seg(vec![], 0x18, 5), None);
        assert_eq!(decode(&f, a, b).unwrap().payload, 5);
        // A first fragment is a segment; a later one is not.
        let f = ipv6_pkt(44, &[6, 0, 0, 1, 0, 0, 0, 7], &seg(vec![], 0x18, 5), None);
        let s = decode(&f, a, b).unwrap();
        assert_eq!((s.payload, s.fragment), (5, true));
        let f = ipv6_pkt(
            44,
            &[6, 0, 0, 0x11, 0, 0, 0, 7],
            &seg(vec![], 0x18, 5),
            None,
        );
        assert_eq!(decode(&f, a, b), Err(NotSegment::Elsewhere));
        // Too many extension headers: named, not guessed at.
        let ext: Vec<u8> = (0..9).flat_map(|_| [60, 0, 0, 0, 0, 0, 0, 0]).collect();
        let f = ipv6_pkt(60, &ext, &hdr, None);
        assert!(matches!(decode(&f, a, b), Err(NotSegment::Bad(_))));
    }

    #[test]
    fn inconsistent_headers_are_named() {
        let (a, b) = v4_ends();
        let f = ipv4_pkt(6, 0, Some(30), &[], &seg(vec![], 0x18, 20));
        assert!(matches!(decode(&f, a, b), Err(NotSegment::Bad(_))));
        // A first fragment carries the TCP header; a later one does not.
        let f = ipv4_pkt(6, 0x2000, None, &[], &seg(vec![], 0x18, 20));
        let s = decode(&f, a, b).unwrap();
        assert_eq!((s.payload, s.fragment), (20, true));
        let f = ipv4_pkt(6, 0x2001, None, &[], &seg(vec![], 0x18, 20));
        assert_eq!(decode(&f, a, b), Err(NotSegment::Elsewhere));
        let whole = ipv4_pkt(6, 0, None, &[], &seg(vec![], 0x18, 0));
        assert!(matches!(
            decode(&whole[..30], a, b),
            Err(NotSegment::Bad(_))
        ));
    }

    #[test]
    fn icmp_errors_quote_no_segment() {
        let (a, b) = v4_ends();
        let quoted = ipv4_pkt(6, 0, None, &[], &seg(vec![], 0x18, 0)[..8]);
        let mut icmp = vec![3, 4, 0, 0, 0, 0, 5, 0xdc];
        icmp.extend(&quoted);
        let f = eth(0x0800, &[], &ipv4_pkt(1, 0, None, &[], &icmp));
        assert_eq!(decode(&f, a, b), Err(NotSegment::Elsewhere));
        let whole = ipv4_pkt(6, 0, None, &[], &seg(vec![], 0x18, 0));
        let mut icmp = vec![11, 0, 0, 0, 0, 0, 0, 0];
        icmp.extend(&whole);
        let f = ipv4_pkt(1, 0, None, &[], &icmp);
        assert_eq!(decode(&f, a, b), Err(NotSegment::Elsewhere));
        // ICMPv6, behind a hop-by-hop header.
        let a6: SocketAddr = "[2001:db8::1]:1234".parse().unwrap();
        let b6: SocketAddr = "[2001:db8::2]:80".parse().unwrap();
        let mut icmp = vec![1, 4, 0, 0, 0, 0, 0, 0];
        icmp.extend(ipv6_pkt(6, &[], &seg(vec![], 0x18, 0), None));
        let f = ipv6_pkt(0, &[58, 0, 1, 4, 0, 0, 0, 0], &icmp, None);
        assert_eq!(decode(&f, a6, b6), Err(NotSegment::Elsewhere));
        // The segment itself still decodes.
        assert!(decode(&whole, a, b).is_ok());
    }

    #[test]
    fn wrapping_acknowledgement() {
        let s = Segment {
            from_a: true,
            seq: 0,
            ack: 5,
            flags: ACK,
            payload: 0,
            mss: None,
            timestamps: None,
            fragment: false,
        };
        assert!(s.acks(u32::MAX - 3));
        assert!(s.acks(5));
        assert!(!s.acks(6));
    }

    /// Truncations and byte-flips of valid frames, and pseudo-random garbage: never a panic.
    #[test]
    fn never_panics() {
        let (a, b) = v4_ends();
        let a6: SocketAddr = "[2001:db8::1]:1234".parse().unwrap();
        let b6: SocketAddr = "[2001:db8::2]:80".parse().unwrap();
        let opts = vec![2, 4, 0x05, 0xb4, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2, 3, 0];
        let frames = [
            eth(
                0x0800,
                &[],
                &ipv4_pkt(6, 0, None, &[], &seg(opts.clone(), 2, 5)),
            ),
            ipv6_pkt(6, &[], &seg(opts, 0x18, 9), None),
        ];
        let mut x: u32 = 0x1234_5678;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for f in &frames {
            for cut in 0..=f.len() {
                let _ = decode(&f[..cut], a, b);
                let _ = decode(&f[..cut], a6, b6);
            }
            for _ in 0..2000 {
                let mut g = f.clone();
                let i = rnd() as usize % g.len();
                g[i] = rnd() as u8;
                let _ = decode(&g, a, b);
                let _ = decode(&g, a6, b6);
            }
        }
        for _ in 0..500 {
            let n = rnd() as usize % 200;
            let g: Vec<u8> = (0..n).map(|_| rnd() as u8).collect();
            let _ = decode(&g, a, b);
            let _ = decode(&g, a6, b6);
        }
    }
}
