//! Tunnels carried by IP: finding the packet inside.
//!
//! Captures taken on a hypervisor, a mirror port or a router often hold the traffic of
//! interest wrapped in another packet. The rule, applied to an IP packet that is not TCP:
//! 1. IP protocol 4 or 41 (IP-in-IP, 6in4, 4in6, 6in6): the payload is an IPv4 or IPv6
//!    packet. Protocol 137 (MPLS-in-IP): an MPLS label stack (see `link.rs`).
//! 2. IP protocol 47, GRE (RFC 2784/2890): 4 bytes of flags and protocol type, then 4 bytes
//!    each for the checksum, key and sequence number the flags announce (a source route,
//!    RFC 1701's R bit, is not followed). Version 1 (PPTP) carries PPP. The protocol type is
//!    an ethertype (IPv4, IPv6, VLAN, MPLS), or 0x6558 for a whole Ethernet frame
//!    (transparent bridging, NVGRE), 0x88be for ERSPAN type I (no header: the GRE sequence
//!    bit is clear) and II (an 8-byte header), 0x22eb for ERSPAN type III (12 bytes, 8 more
//!    with its O bit), 0x883e for a WCCP redirect (IPv4, after a 4-byte header unless the
//!    IPv4 starts right away), 0x880b for PPP, and 0x8200 to 0x9000 in steps of 0x10 for
//!    an Aruba access point's 802.11 frames (as Wireshark and Zeek decode them; see `wlan.rs`;
//!    an encrypted or management frame inside is counted as such, not as the tunnel's).
//! 3. UDP to or from a tunnel's registered port (the destination port is tried first):
//!    4789 and Linux's old 8472, VXLAN (8-byte header with the I flag set, then Ethernet);
//!    4790, VXLAN-GPE (its next-protocol field: IPv4, IPv6, Ethernet or MPLS); 6081, Geneve
//!    (version 0, 8 bytes plus the options it counts, then its protocol type, as GRE's);
//!    4754, GRE-in-UDP (RFC 8086); 6635, MPLS-in-UDP. A datagram on such a port whose header
//!    does not fit stays UDP.
//! 4. The packet inside is decoded like a top-level one (its Ethernet header, VLAN tags, MPLS
//!    labels and IP header), bounded by the end of the packet around it (and by the UDP
//!    length, as Wireshark does); its TCP payload length comes from its own IP header. A tunnel inside it is followed again, up to
//!    [`MAX_DEPTH`] tunnels deep.
//! 5. A TCP segment is reported with the outermost tunnel crossed; a tunnel that holds no
//!    TCP (ARP in VXLAN, UDP in GRE) or nests too deep counts as that tunnel's non-TCP packet.
//!
//! Only IP packets that are not TCP get here, and only UDP to the ports above and the IP
//! protocols above are looked into, so a plain TCP packet pays nothing for any of this.

use super::ip::{
    self, IpInfo, PROTO_GRE, PROTO_IPIP, PROTO_IPV6, PROTO_MPLS, PROTO_TCP, PROTO_UDP,
};
use super::link::{be16, by_ethertype, ethernet, mpls, ppp, IpAt, NoIp, L3};
use super::tcp::{tcp, Amsdu, Decoded, NotTcp, Peeled};
use super::wlan::wlan;

/// How many tunnels deep tcpdoctor looks for TCP.
pub const MAX_DEPTH: usize = 4;

/// An encapsulation tcpdoctor looks through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tunnel {
    /// GRE, including PPTP's and WCCP redirects.
    Gre,
    /// ERSPAN (mirrored Ethernet frames in GRE), types I to III.
    Erspan,
    /// VXLAN, also VXLAN-GPE.
    Vxlan,
    Geneve,
    /// MPLS label stacks: on Ethernet, in GRE, in IP or in UDP.
    Mpls,
    /// PPPoE sessions.
    Pppoe,
    /// IP directly in IP: IPv4 or IPv6 in IPv4 or IPv6.
    IpInIp,
}

impl Tunnel {
    pub const ALL: [Tunnel; 7] = [
        Tunnel::Gre,
        Tunnel::Erspan,
        Tunnel::Vxlan,
        Tunnel::Geneve,
        Tunnel::Mpls,
        Tunnel::Pppoe,
        Tunnel::IpInIp,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tunnel::Gre => "GRE",
            Tunnel::Erspan => "ERSPAN",
            Tunnel::Vxlan => "VXLAN",
            Tunnel::Geneve => "Geneve",
            Tunnel::Mpls => "MPLS",
            Tunnel::Pppoe => "PPPoE",
            Tunnel::IpInIp => "IP-in-IP",
        }
    }
}

impl std::fmt::Display for Tunnel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the payload of an IP packet turned out to be.
enum Step {
    /// Not a tunnel tcpdoctor knows.
    NotATunnel,
    /// A tunnel, and where the IP header inside it starts.
    Inner(Tunnel, IpAt),
    /// A tunnel whose inner packet has no IP header (or too few bytes captured for it).
    NoIp(Tunnel, NoIp),
}

/// Looks inside `outer`, an IP packet that is not TCP, found inside `via` (MPLS, PPPoE) if
/// anything. `None` when it is no tunnel at all: the caller counts it by its protocol.
/// An 802.11 A-MSDU inside (an Aruba access point's GRE) comes back unsplit: `Err`.
#[inline(never)]
pub(super) fn decapsulate(data: &[u8], outer: &IpInfo, mut via: Option<Tunnel>) -> Option<Peeled> {
    let in_tunnel = |t| Ok(Decoded::NotTcp(NotTcp::InTunnel(t)));
    let mut ip = *outer;
    for _ in 0..MAX_DEPTH {
        let (tunnel, at) = match step(data, &ip) {
            Step::Inner(t, at) => (t, at),
            Step::NotATunnel => return via.map(in_tunnel),
            Step::NoIp(_, NoIp::Truncated) => return Some(Ok(Decoded::Truncated)),
            Step::NoIp(_, NoIp::Wlan(w)) => return Some(Ok(Decoded::Wlan(w))),
            Step::NoIp(t, NoIp::Amsdu(off)) => {
                let via = Some(via.unwrap_or(t));
                return Some(Err(Amsdu::new(off, ip.end(), via)));
            }
            Step::NoIp(t, _) => return Some(in_tunnel(via.unwrap_or(t))),
        };
        let via = *via.get_or_insert(tunnel);
        ip = match ip::at(data, at.off, at.l3, ip.end().min(at.end)) {
            Ok(inner) => inner,
            Err(d) => return Some(Ok(d.inside(Some(via)))),
        };
        if ip.proto == PROTO_TCP {
            return Some(Ok(tcp(data, &ip, Some(via))));
        }
    }
    via.map(in_tunnel)
}

/// The tunnel, if any, that the payload of `ip` is.
fn step(data: &[u8], ip: &IpInfo) -> Step {
    let off = ip.l4_off;
    match ip.proto {
        PROTO_IPIP => Step::Inner(Tunnel::IpInIp, IpAt::new(off, L3::V4)),
        PROTO_IPV6 => Step::Inner(Tunnel::IpInIp, IpAt::new(off, L3::V6)),
        PROTO_GRE => gre(data, off),
        PROTO_MPLS => found(Tunnel::Mpls, mpls(data, off)),
        PROTO_UDP => udp(data, off),
        _ => Step::NotATunnel,
    }
}

fn found(tunnel: Tunnel, at: Result<IpAt, NoIp>) -> Step {
    match at {
        Ok(at) => Step::Inner(tunnel, at),
        Err(no) => Step::NoIp(tunnel, no),
    }
}

const GRE_CHECKSUM: u16 = 0x8000;
const GRE_ROUTING: u16 = 0x4000;
const GRE_KEY: u16 = 0x2000;
const GRE_SEQ: u16 = 0x1000;
/// PPTP's acknowledgment number (version 1 only).
const GRE_ACK: u16 = 0x0080;

const GRE_ETHERNET: u16 = 0x6558;
const GRE_ERSPAN_2: u16 = 0x88be;
const GRE_ERSPAN_3: u16 = 0x22eb;
const GRE_WCCP: u16 = 0x883e;
const GRE_PPP: u16 = 0x880b;
/// Aruba's 802.11-in-GRE protocol types: 0x8200, 0x8210, …, 0x9000.
const GRE_ARUBA: std::ops::RangeInclusive<u16> = 0x8200..=0x9000;

/// A GRE header at `off`.
fn gre(data: &[u8], off: usize) -> Step {
    let (Some(flags), Some(proto)) = (be16(data, off), be16(data, off + 2)) else {
        return Step::NoIp(Tunnel::Gre, NoIp::Truncated);
    };
    let has = |bit: u16| usize::from(flags & bit != 0) * 4;
    let payload = match flags & 7 {
        0 if flags & GRE_ROUTING == 0 => off + 4 + has(GRE_CHECKSUM) + has(GRE_KEY) + has(GRE_SEQ),
        1 if proto == GRE_PPP => off + 4 + 4 + has(GRE_SEQ) + has(GRE_ACK),
        _ => return Step::NoIp(Tunnel::Gre, NoIp::NotIp),
    };
    match proto {
        GRE_ETHERNET => found(Tunnel::Gre, ethernet(data, payload)),
        GRE_ERSPAN_2 => {
            // Type I has no ERSPAN header and no GRE sequence number; type II has both.
            let header = if flags & GRE_SEQ != 0 { 8 } else { 0 };
            found(Tunnel::Erspan, ethernet(data, payload + header))
        }
        GRE_ERSPAN_3 => match data.get(payload + 11) {
            Some(b) => {
                let header = if b & 1 != 0 { 12 + 8 } else { 12 };
                found(Tunnel::Erspan, ethernet(data, payload + header))
            }
            None => Step::NoIp(Tunnel::Erspan, NoIp::Truncated),
        },
        GRE_WCCP => match data.get(payload) {
            Some(b) if b >> 4 == 4 => Step::Inner(Tunnel::Gre, IpAt::new(payload, L3::V4)),
            Some(_) => Step::Inner(Tunnel::Gre, IpAt::new(payload + 4, L3::V4)),
            None => Step::NoIp(Tunnel::Gre, NoIp::Truncated),
        },
        GRE_PPP => found(Tunnel::Gre, ppp(data, payload)),
        aruba if GRE_ARUBA.contains(&aruba) && aruba & 0xf == 0 => {
            found(Tunnel::Gre, wlan(data, payload, false))
        }
        ethertype => found(Tunnel::Gre, by_ethertype(data, ethertype, payload)),
    }
}

const PORT_VXLAN: u16 = 4789;
const PORT_VXLAN_LINUX: u16 = 8472;
const PORT_VXLAN_GPE: u16 = 4790;
const PORT_GENEVE: u16 = 6081;
const PORT_GRE: u16 = 4754;
const PORT_MPLS: u16 = 6635;

/// A UDP header at `off`: a tunnel if either port is a tunnel's. Its length, unless zero
/// (as in GSO super-packets), bounds the packet inside.
fn udp(data: &[u8], off: usize) -> Step {
    let (Some(src), Some(dst)) = (be16(data, off), be16(data, off + 2)) else {
        return Step::NotATunnel;
    };
    let len = be16(data, off + 4).unwrap_or(0);
    let payload = off + 8;
    let step = match by_port(data, dst, payload) {
        Step::NotATunnel => by_port(data, src, payload),
        step => step,
    };
    match step {
        Step::Inner(t, at) if len >= 8 => Step::Inner(t, at.ending_by(off + usize::from(len))),
        step => step,
    }
}

fn by_port(data: &[u8], port: u16, p: usize) -> Step {
    match port {
        PORT_VXLAN | PORT_VXLAN_LINUX => vxlan(data, p),
        PORT_VXLAN_GPE => vxlan_gpe(data, p),
        PORT_GENEVE => geneve(data, p),
        PORT_GRE => gre(data, p),
        PORT_MPLS => found(Tunnel::Mpls, mpls(data, p)),
        _ => Step::NotATunnel,
    }
}

/// A VXLAN header at `p`: flags (the I flag, 0x08, says the VNI is valid), 3 reserved
/// bytes, the 24-bit VNI and a reserved byte; then an Ethernet frame.
fn vxlan(data: &[u8], p: usize) -> Step {
    match data.get(p) {
        Some(flags) if flags & 0x08 != 0 => found(Tunnel::Vxlan, ethernet(data, p + 8)),
        Some(_) => Step::NotATunnel,
        None => Step::NoIp(Tunnel::Vxlan, NoIp::Truncated),
    }
}

/// A VXLAN-GPE header at `p`: like VXLAN, but with the P flag (0x04) byte 3 names the
/// payload: 1 IPv4, 2 IPv6, 3 Ethernet, 5 MPLS (4, NSH, is not followed).
fn vxlan_gpe(data: &[u8], p: usize) -> Step {
    let (Some(&flags), Some(&next)) = (data.get(p), data.get(p + 3)) else {
        return Step::NoIp(Tunnel::Vxlan, NoIp::Truncated);
    };
    if flags & 0x30 != 0 {
        return Step::NotATunnel; // a version other than 0
    }
    let inner = p + 8;
    match (flags & 0x04 != 0, next) {
        (false, _) | (true, 3) => found(Tunnel::Vxlan, ethernet(data, inner)),
        (true, 1) => Step::Inner(Tunnel::Vxlan, IpAt::new(inner, L3::V4)),
        (true, 2) => Step::Inner(Tunnel::Vxlan, IpAt::new(inner, L3::V6)),
        (true, 5) => found(Tunnel::Vxlan, mpls(data, inner)),
        _ => Step::NoIp(Tunnel::Vxlan, NoIp::NotIp),
    }
}

/// A Geneve header at `p`: version (2 bits) and options length in 4-byte words (6 bits),
/// flags, the protocol type, the VNI; the options; then the payload.
fn geneve(data: &[u8], p: usize) -> Step {
    let (Some(&first), Some(proto)) = (data.get(p), be16(data, p + 2)) else {
        return Step::NoIp(Tunnel::Geneve, NoIp::Truncated);
    };
    if first >> 6 != 0 {
        return Step::NotATunnel;
    }
    let payload = p + 8 + usize::from(first & 0x3f) * 4;
    match proto {
        GRE_ETHERNET => found(Tunnel::Geneve, ethernet(data, payload)),
        ethertype => found(Tunnel::Geneve, by_ethertype(data, ethertype, payload)),
    }
}

#[cfg(test)]
#[path = "tunnel_tests.rs"]
mod tests;
