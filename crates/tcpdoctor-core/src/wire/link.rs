//! Link-layer types (LINKTYPE_* values from the pcap registry) and how to find the IP header.

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
