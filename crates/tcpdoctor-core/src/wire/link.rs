//! Link-layer types (LINKTYPE_* values from the pcap registry) and how to find the IP header.
//!
//! tcpdoctor only needs the IP header, so each link layer is reduced to "where does IP start
//! and which version is it": Ethernet with any number of stacked 802.1Q/802.1ad tags, the
//! Linux cooked headers `tcpdump -i any` writes (SLL, 16 bytes, protocol at 14; SLL2, 20
//! bytes, protocol at 0), raw IP, and the BSD/OpenBSD loopback headers (a 4-byte address
//! family, in host order for NULL — either byte order is accepted since the writer's is
//! unknown — and network order for LOOP). Serial links: PPP (LINKTYPE 9) and PPP in HDLC
//! framing (50), an optional `ff 03` then the PPP protocol, or, when the first byte is a Cisco
//! HDLC address (0x0f, 0x8f), Cisco HDLC as Wireshark reads it; Cisco HDLC itself (104): 2
//! bytes of address and control, then an ethertype. Juniper Ethernet (178): Juniper's capture
//! header (`MGC`, flags, extension TLVs), then Ethernet. 802.11 and its radio headers are
//! `wlan.rs`'s, NFLOG and IPNET `host_links.rs`'s.
//!
//! Two encapsulations live between Ethernet and IP and are followed here, by ethertype (the
//! tunnels carried by IP are `tunnel.rs`'s):
//! 1. MPLS (0x8847 unicast, 0x8848 multicast): 4-byte label stack entries up to the one with
//!    the bottom-of-stack bit. MPLS does not say what it carries; like Wireshark, the first
//!    nibble after the stack decides: 4 is IPv4, 6 is IPv6, 0 is a pseudowire control word
//!    followed by an Ethernet frame. Anything else is reported as MPLS without IP.
//! 2. PPPoE session (0x8864): a 6-byte PPPoE header, then the PPP protocol: 0x0021 IPv4,
//!    0x0057 IPv6; anything else (LCP, IPCP, …) is PPPoE without IP. The PPPoE length
//!    bounds the IP packet's, as in Wireshark.

use super::host_links;
use super::tunnel::Tunnel;
use super::wlan::{self, WlanSkip};

/// A capture's link-layer header type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkType {
    /// LINKTYPE_NULL (0): BSD loopback, 4-byte host-order address family.
    Null,
    /// LINKTYPE_ETHERNET (1), with 802.1Q/802.1ad tags.
    Ethernet,
    /// LINKTYPE_RAW (101) and DLT_RAW (12/14 on some systems): the packet starts with IPv4 or IPv6.
    RawIp,
    /// LINKTYPE_LOOP (108): OpenBSD loopback, 4-byte network-order address family.
    Loop,
    /// LINKTYPE_LINUX_SLL (113): `tcpdump -i any` before libpcap 1.10.
    LinuxSll,
    /// LINKTYPE_IPV4 (228).
    Ipv4,
    /// LINKTYPE_IPV6 (229).
    Ipv6,
    /// LINKTYPE_LINUX_SLL2 (276): `tcpdump -i any` with libpcap ≥ 1.10.
    LinuxSll2,
    /// LINKTYPE_PPP (9): PPP, with or without `ff 03`; Cisco HDLC framing is recognised too.
    Ppp,
    /// LINKTYPE_PPP_HDLC (50): PPP in HDLC-like framing.
    PppHdlc,
    /// LINKTYPE_C_HDLC (104): Cisco HDLC.
    CiscoHdlc,
    /// LINKTYPE_IEEE802_11 (105): 802.11 frames without a radio header.
    Ieee80211,
    /// LINKTYPE_IEEE802_11_PRISM (119): Prism monitor header, then 802.11.
    Prism,
    /// LINKTYPE_IEEE802_11_RADIOTAP (127): radiotap header, then 802.11.
    Radiotap,
    /// LINKTYPE_IEEE802_11_AVS (163): AVS monitor header, then 802.11.
    Avs,
    /// LINKTYPE_PPI (192): Per-Packet Information header, then 802.11 or Ethernet.
    Ppi,
    /// LINKTYPE_IPNET (226): Solaris/illumos ipnet.
    Ipnet,
    /// LINKTYPE_NFLOG (239): Linux netfilter log.
    Nflog,
    /// LINKTYPE_JUNIPER_ETHER (178): a Juniper router's capture header, then Ethernet.
    JuniperEther,
    /// Anything else; packets on such a link are skipped (or the file refused if it has no other).
    Other(u32),
}

impl LinkType {
    pub fn from_code(code: u32) -> LinkType {
        match code {
            0 => LinkType::Null,
            1 => LinkType::Ethernet,
            12 | 14 | 101 => LinkType::RawIp,
            108 => LinkType::Loop,
            113 => LinkType::LinuxSll,
            228 => LinkType::Ipv4,
            229 => LinkType::Ipv6,
            276 => LinkType::LinuxSll2,
            9 => LinkType::Ppp,
            50 => LinkType::PppHdlc,
            104 => LinkType::CiscoHdlc,
            105 => LinkType::Ieee80211,
            119 => LinkType::Prism,
            127 => LinkType::Radiotap,
            163 => LinkType::Avs,
            192 => LinkType::Ppi,
            226 => LinkType::Ipnet,
            239 => LinkType::Nflog,
            178 => LinkType::JuniperEther,
            other => LinkType::Other(other),
        }
    }

    pub fn is_supported(self) -> bool {
        !matches!(self, LinkType::Other(_))
    }

    pub fn name(self) -> &'static str {
        match self {
            LinkType::Null => "NULL (BSD loopback)",
            LinkType::Ethernet => "Ethernet",
            LinkType::RawIp => "raw IP",
            LinkType::Loop => "LOOP (OpenBSD loopback)",
            LinkType::LinuxSll => "Linux cooked (SLL)",
            LinkType::Ipv4 => "raw IPv4",
            LinkType::Ipv6 => "raw IPv6",
            LinkType::LinuxSll2 => "Linux cooked v2 (SLL2)",
            LinkType::Ppp => "PPP",
            LinkType::PppHdlc => "PPP in HDLC framing",
            LinkType::CiscoHdlc => "Cisco HDLC",
            LinkType::Ieee80211 => "IEEE 802.11",
            LinkType::Prism => "802.11 with Prism header",
            LinkType::Radiotap => "802.11 radiotap",
            LinkType::Avs => "802.11 with AVS header",
            LinkType::Ppi => "PPI",
            LinkType::Ipnet => "Solaris IPNET",
            LinkType::Nflog => "Linux NFLOG",
            LinkType::JuniperEther => "Juniper Ethernet",
            LinkType::Other(_) => "unknown",
        }
    }
}

/// The name, and for a link type tcpdoctor does not decode, its code too.
impl std::fmt::Display for LinkType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            LinkType::Other(code) => match LinkType::code_name(code) {
                "unknown" => write!(f, "{code} (not decoded)"),
                name => write!(f, "{name} ({code}, not decoded)"),
            },
            known => f.write_str(known.name()),
        }
    }
}

impl LinkType {
    /// A readable name for a link-type code, including common ones tcpdoctor does not decode
    /// (for error messages).
    pub fn code_name(code: u32) -> &'static str {
        match LinkType::from_code(code) {
            LinkType::Other(_) => match code {
                6 => "IEEE 802.5 Token Ring",
                147..=162 => "user-defined",
                189 | 220 => "USB (Linux)",
                201 => "Bluetooth HCI H4",
                215 => "IEEE 802.15.4",
                249 => "USBPcap",
                253 => "Linux netlink",
                _ => "unknown",
            },
            known => known.name(),
        }
    }
}

/// Which IP version the link layer announced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum L3 {
    V4,
    V6,
    /// Raw IP: the version nibble decides.
    Either,
}

/// Where an IP header starts, which version to expect, and the encapsulation crossed on
/// the way there (MPLS, PPPoE), if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct IpAt {
    pub off: usize,
    pub l3: L3,
    pub via: Option<Tunnel>,
    /// Where a layer below with a length field (PPPoE, UDP) says the packet ends at the
    /// latest; `usize::MAX` when none does. As in Wireshark, it bounds the IP length.
    pub end: usize,
}

impl IpAt {
    pub(super) fn new(off: usize, l3: L3) -> IpAt {
        IpAt {
            off,
            l3,
            via: None,
            end: usize::MAX,
        }
    }

    /// The same, ending no later than `end`.
    pub(super) fn ending_by(self, end: usize) -> IpAt {
        IpAt {
            end: self.end.min(end),
            ..self
        }
    }
}

/// Why no IP header was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NoIp {
    /// Too few captured bytes for the link header.
    Truncated,
    /// Not IP (ARP, LLC, …).
    NotIp,
    /// An encapsulation (MPLS, PPPoE, …) that does not hold IP.
    InTunnel(Tunnel),
    /// A link type tcpdoctor does not decode.
    Unsupported,
    /// An 802.11 frame without a readable packet: encrypted, no data, a bad A-MSDU subframe.
    Wlan(WlanSkip),
    /// An 802.11 A-MSDU whose first subframe starts at this offset (`wlan.rs`).
    Amsdu(usize),
}

pub(super) fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const ETHERTYPE_QINQ_OLD: u16 = 0x9100;
const ETHERTYPE_QINQ_OLD2: u16 = 0x9200;
const ETHERTYPE_MPLS: u16 = 0x8847;
const ETHERTYPE_MPLS_MULTICAST: u16 = 0x8848;
const ETHERTYPE_PPPOE_SESSION: u16 = 0x8864;

/// An Ethernet frame starting at `start`. Plain IPv4, by far the most common, is answered
/// here without a call.
#[inline(always)]
pub(super) fn ethernet(data: &[u8], start: usize) -> Result<IpAt, NoIp> {
    match be16(data, start + 12) {
        Some(ETHERTYPE_IPV4) => Ok(IpAt::new(start + 14, L3::V4)),
        Some(ethertype) => by_ethertype(data, ethertype, start + 14),
        None => Err(NoIp::Truncated),
    }
}

/// Follows an ethertype whose payload starts at `off`, through any VLAN tags (each a 2-byte
/// TCI and the next 2-byte ethertype), an MPLS label stack or a PPPoE session header.
pub(super) fn by_ethertype(data: &[u8], mut ethertype: u16, mut off: usize) -> Result<IpAt, NoIp> {
    loop {
        match ethertype {
            ETHERTYPE_IPV4 => return Ok(IpAt::new(off, L3::V4)),
            ETHERTYPE_IPV6 => return Ok(IpAt::new(off, L3::V6)),
            ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD | ETHERTYPE_QINQ_OLD2 => {
                ethertype = be16(data, off + 2).ok_or(NoIp::Truncated)?;
                off += 4;
            }
            ETHERTYPE_MPLS | ETHERTYPE_MPLS_MULTICAST => return mpls(data, off),
            ETHERTYPE_PPPOE_SESSION => return pppoe(data, off),
            _ => return Err(NoIp::NotIp),
        }
    }
}

/// More MPLS labels than this in one stack is taken as garbage (real stacks hold a few).
const MAX_MPLS_LABELS: usize = 16;

/// An MPLS label stack at `off`, and what its payload's first nibble says it is.
#[inline(never)]
pub(super) fn mpls(data: &[u8], mut off: usize) -> Result<IpAt, NoIp> {
    let inside = |at: Result<IpAt, NoIp>| match at {
        Ok(at) => Ok(IpAt {
            via: Some(Tunnel::Mpls),
            ..at
        }),
        Err(NoIp::Truncated) => Err(NoIp::Truncated),
        Err(_) => Err(NoIp::InTunnel(Tunnel::Mpls)),
    };
    for _ in 0..MAX_MPLS_LABELS {
        let entry = be32(data, off).ok_or(NoIp::Truncated)?;
        off += 4;
        if entry & 0x100 == 0 {
            continue;
        }
        return inside(match data.get(off).ok_or(NoIp::Truncated)? >> 4 {
            4 => Ok(IpAt::new(off, L3::V4)),
            6 => Ok(IpAt::new(off, L3::V6)),
            0 => ethernet(data, off + 4),
            _ => Err(NoIp::NotIp),
        });
    }
    Err(NoIp::InTunnel(Tunnel::Mpls))
}

/// A PPPoE session header at `off` (version/type, code, session id, length), then PPP.
#[inline(never)]
fn pppoe(data: &[u8], off: usize) -> Result<IpAt, NoIp> {
    let len = usize::from(be16(data, off + 4).ok_or(NoIp::Truncated)?);
    match ppp(data, off + 6) {
        Ok(at) => Ok(IpAt {
            via: Some(Tunnel::Pppoe),
            ..at.ending_by(off + 6 + len)
        }),
        Err(NoIp::Truncated) => Err(NoIp::Truncated),
        Err(_) => Err(NoIp::InTunnel(Tunnel::Pppoe)),
    }
}

const JUNIPER_MAGIC: [u8; 3] = *b"MGC";
const JUNIPER_NO_L2: u8 = 0x02;
const JUNIPER_EXT: u8 = 0x80;

/// A Juniper capture header: the magic `MGC`, a flags byte, with the extension flag a 2-byte
/// length of the extension TLVs that follow; then an Ethernet frame, or with the no-L2 flag
/// 4 bytes of protocol and the IP packet, whose version nibble decides (as tcpdump does).
fn juniper_ether(data: &[u8]) -> Result<IpAt, NoIp> {
    let head = data.get(..4).ok_or(NoIp::Truncated)?;
    if head[..3] != JUNIPER_MAGIC {
        return Err(NoIp::NotIp);
    }
    let flags = head[3];
    let mut off = 4;
    if flags & JUNIPER_EXT != 0 {
        off += 2 + usize::from(be16(data, 4).ok_or(NoIp::Truncated)?);
    }
    if flags & JUNIPER_NO_L2 != 0 {
        return Ok(IpAt::new(off + 4, L3::Either));
    }
    ethernet(data, off)
}

/// A Cisco HDLC frame at `off`: address (0x0f unicast, 0x8f multicast), control, then an
/// ethertype.
fn chdlc(data: &[u8], off: usize) -> Result<IpAt, NoIp> {
    by_ethertype(data, be16(data, off + 2).ok_or(NoIp::Truncated)?, off + 4)
}

/// A frame on a PPP link: Cisco HDLC when it starts with a Cisco HDLC address (as
/// Wireshark reads LINKTYPE_PPP and PPP_HDLC), PPP otherwise.
fn ppp_link(data: &[u8]) -> Result<IpAt, NoIp> {
    match data.first() {
        Some(0x0f | 0x8f) => chdlc(data, 0),
        Some(_) => ppp(data, 0),
        None => Err(NoIp::Truncated),
    }
}

/// A PPP frame at `off`: an optional `ff 03` address and control, then the protocol (one
/// byte when compressed, which an odd first byte tells): 0x21 IPv4, 0x57 IPv6, 0x281 and
/// 0x283 an MPLS label stack (unicast, multicast).
pub(super) fn ppp(data: &[u8], mut off: usize) -> Result<IpAt, NoIp> {
    if data.get(off..off + 2) == Some(&[0xff, 0x03]) {
        off += 2;
    }
    let first = *data.get(off).ok_or(NoIp::Truncated)?;
    let (proto, len) = if first & 1 == 1 {
        (u16::from(first), 1)
    } else {
        (be16(data, off).ok_or(NoIp::Truncated)?, 2)
    };
    match proto {
        0x0021 => Ok(IpAt::new(off + len, L3::V4)),
        0x0057 => Ok(IpAt::new(off + len, L3::V6)),
        0x0281 | 0x0283 => mpls(data, off + len),
        _ => Err(NoIp::NotIp),
    }
}

/// AF_INET is 2 everywhere; AF_INET6 differs by the capturing OS: 10 on Linux, 24 on
/// NetBSD/OpenBSD/BSD/OS, 28 on FreeBSD/DragonFly, 30 on macOS/iOS.
fn af_to_l3(af: u32) -> Result<L3, NoIp> {
    match af {
        2 => Ok(L3::V4),
        10 | 24 | 28 | 30 => Ok(L3::V6),
        _ => Err(NoIp::NotIp),
    }
}

/// Where the IP header starts in `data` and which version the link layer says it is.
pub(super) fn locate_ip(link: LinkType, data: &[u8]) -> Result<IpAt, NoIp> {
    match link {
        LinkType::Ethernet => ethernet(data, 0),
        LinkType::LinuxSll => {
            if data.len() < 16 {
                return Err(NoIp::Truncated);
            }
            by_ethertype(data, be16(data, 14).ok_or(NoIp::Truncated)?, 16)
        }
        LinkType::LinuxSll2 => {
            if data.len() < 20 {
                return Err(NoIp::Truncated);
            }
            by_ethertype(data, be16(data, 0).ok_or(NoIp::Truncated)?, 20)
        }
        LinkType::RawIp => Ok(IpAt::new(0, L3::Either)),
        LinkType::Ipv4 => Ok(IpAt::new(0, L3::V4)),
        LinkType::Ipv6 => Ok(IpAt::new(0, L3::V6)),
        LinkType::Null => {
            let raw = be32(data, 0).ok_or(NoIp::Truncated)?;
            // Host order of an unknown host: a family is small, so whichever reading fits
            // in 16 bits is the right one.
            let af = if raw & 0xffff_0000 != 0 {
                raw.swap_bytes()
            } else {
                raw
            };
            Ok(IpAt::new(4, af_to_l3(af)?))
        }
        LinkType::Loop => Ok(IpAt::new(
            4,
            af_to_l3(be32(data, 0).ok_or(NoIp::Truncated)?)?,
        )),
        LinkType::Ppp | LinkType::PppHdlc => ppp_link(data),
        LinkType::CiscoHdlc => chdlc(data, 0),
        LinkType::Ieee80211 => wlan::wlan(data, 0, false),
        LinkType::Radiotap => wlan::radiotap(data),
        LinkType::Prism => wlan::prism(data),
        LinkType::Avs => wlan::avs(data),
        LinkType::Ppi => wlan::ppi(data),
        LinkType::Nflog => host_links::nflog(data),
        LinkType::Ipnet => host_links::ipnet(data),
        LinkType::JuniperEther => juniper_ether(data),
        LinkType::Other(_) => Err(NoIp::Unsupported),
    }
}
