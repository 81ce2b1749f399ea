//! Link types written by a host's own packet logging rather than by a network interface:
//! Linux NFLOG and Solaris/illumos IPNET.
//!
//! 1. NFLOG (LINKTYPE 239, `tcpdump -i nflog:N`, iptables' NFLOG target): a 4-byte header
//!    (address family: 2 IPv4, 10 IPv6; version; resource id), then TLVs, each a 2-byte
//!    length (header included) and a 2-byte type, padded to 4 bytes. The packet is the TLV of
//!    type 9 (NFULA_PAYLOAD), and its TLV length bounds it. The TLV fields are in the host's
//!    byte order: little-endian is tried first, big-endian when only it fits, as Wireshark
//!    does. A TLV shorter than its own header ends the walk (not IP).
//! 2. IPNET (LINKTYPE 226, `snoop`/`tcpdump` on Solaris `/dev/ipnet`): a 24-byte header whose
//!    second byte is the address family (2 IPv4, 26 IPv6, Solaris's numbers), then the IP packet.

use super::link::{IpAt, NoIp, L3};

const NFULA_PAYLOAD: u16 = 9;
/// More TLVs than this before the payload is garbage (the kernel writes about ten).
const MAX_TLVS: usize = 64;

/// The NFLOG packet: the payload TLV's contents.
pub(super) fn nflog(data: &[u8]) -> Result<IpAt, NoIp> {
    let family = *data.first().ok_or(NoIp::Truncated)?;
    let l3 = match family {
        2 => L3::V4,
        10 => L3::V6,
        _ => L3::Either,
    };
    let mut off = 4;
    for _ in 0..MAX_TLVS {
        let head: [u8; 4] = data
            .get(off..off + 4)
            .and_then(|h| h.try_into().ok())
            .ok_or(NoIp::Truncated)?;
        let left = data.len() - off;
        let le = usize::from(u16::from_le_bytes([head[0], head[1]]));
        let be = usize::from(u16::from_be_bytes([head[0], head[1]]));
        let (len, kind) = if (4..=left).contains(&le) || !(4..=left).contains(&be) {
            (le, u16::from_le_bytes([head[2], head[3]]))
        } else {
            (be, u16::from_be_bytes([head[2], head[3]]))
        };
        if len < 4 {
            return Err(NoIp::NotIp);
        }
        // The type's top bit is NLA_F_NESTED, the next NLA_F_NET_BYTEORDER.
        if kind & 0x3fff == NFULA_PAYLOAD {
            return Ok(IpAt::new(off + 4, l3).ending_by(off + len));
        }
        off += len.next_multiple_of(4);
    }
    Err(NoIp::NotIp)
}

const IPNET_HEADER: usize = 24;

/// The IPNET header and the IP packet after it.
pub(super) fn ipnet(data: &[u8]) -> Result<IpAt, NoIp> {
    if data.len() < IPNET_HEADER {
        return Err(NoIp::Truncated);
    }
    match data[1] {
        2 => Ok(IpAt::new(IPNET_HEADER, L3::V4)),
        26 => Ok(IpAt::new(IPNET_HEADER, L3::V6)),
        _ => Err(NoIp::NotIp),
    }
}
