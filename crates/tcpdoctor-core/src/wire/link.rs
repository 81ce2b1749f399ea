//! Link-layer types (LINKTYPE_* values from the pcap registry) and how to find the IP header.
//!
//! tcpdoctor only needs the IP header, so each link layer is reduced to "where does IP start
//! and which version is it": Ethernet with any number of stacked 802.1Q/802.1ad tags, the
//! Linux cooked headers `tcpdump -i any` writes (SLL, 16 bytes, protocol at 14; SLL2, 20
//! bytes, protocol at 0), raw IP, and the BSD/OpenBSD loopback headers (a 4-byte address
//! family, in host order for NULL — either byte order is accepted since the writer's is
//! unknown — and network order for LOOP).

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
            LinkType::Other(_) => "unknown",
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
                9 => "PPP",
                50 => "PPP in HDLC framing",
                105 => "IEEE 802.11",
                119 => "Prism 802.11",
                127 => "802.11 radiotap",
                147..=162 => "user-defined",
                189 | 220 => "USB (Linux)",
                192 => "PPI",
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

/// Why no IP header was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum NoIp {
    /// Too few captured bytes for the link header.
    Truncated,
    /// Not IP (ARP, LLC, …).
    NotIp,
    /// A link type tcpdoctor does not decode.
    Unsupported,
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
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

/// Follows an ethertype whose payload starts at `off`, through any VLAN tags (each a 2-byte
/// TCI and the next 2-byte ethertype).
fn by_ethertype(data: &[u8], mut ethertype: u16, mut off: usize) -> Result<(usize, L3), NoIp> {
    loop {
        match ethertype {
            ETHERTYPE_IPV4 => return Ok((off, L3::V4)),
            ETHERTYPE_IPV6 => return Ok((off, L3::V6)),
            ETHERTYPE_VLAN | ETHERTYPE_QINQ | ETHERTYPE_QINQ_OLD | ETHERTYPE_QINQ_OLD2 => {
                ethertype = be16(data, off + 2).ok_or(NoIp::Truncated)?;
                off += 4;
            }
            _ => return Err(NoIp::NotIp),
        }
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
pub(super) fn locate_ip(link: LinkType, data: &[u8]) -> Result<(usize, L3), NoIp> {
    match link {
        LinkType::Ethernet => by_ethertype(data, be16(data, 12).ok_or(NoIp::Truncated)?, 14),
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
        LinkType::RawIp => Ok((0, L3::Either)),
        LinkType::Ipv4 => Ok((0, L3::V4)),
        LinkType::Ipv6 => Ok((0, L3::V6)),
        LinkType::Null => {
            let raw = be32(data, 0).ok_or(NoIp::Truncated)?;
            // Host order of an unknown host: a family is small, so whichever reading fits
            // in 16 bits is the right one.
            let af = if raw & 0xffff_0000 != 0 {
                raw.swap_bytes()
            } else {
                raw
            };
            Ok((4, af_to_l3(af)?))
        }
        LinkType::Loop => Ok((4, af_to_l3(be32(data, 0).ok_or(NoIp::Truncated)?)?)),
        LinkType::Other(_) => Err(NoIp::Unsupported),
    }
}
