//! IEEE 802.11 (Wi-Fi) frames and the radio headers monitor-mode captures put before them.
//!
//! A monitor-mode capture holds every frame on the air: beacons, acknowledgements, frames
//! encrypted with keys tcpdoctor does not have, and the data frames whose payload is the IP
//! traffic. The rule, as Wireshark reads the same frames:
//! 1. The radio header is skipped by its own length: radiotap (LINKTYPE 127, little-endian
//!    length at byte 2; its Flags field, when present, says whether the 802.11 header is
//!    padded to 4 bytes), PPI (192, length at byte 2, the DLT of what follows at byte 4: 802.11
//!    or Ethernet), Prism (119, a fixed 144-byte header) and AVS (163, big-endian length at
//!    byte 4; a Prism capture whose first word is AVS's magic is AVS, as in Wireshark).
//!    A header longer than the captured bytes is a truncated frame.
//! 2. The 802.11 frame control says what the frame is. Management (beacons, probes,
//!    authentication), control (ACK, RTS, block ack) and extension frames, and data frames
//!    without a payload (null function, QoS null), hold no packet: counted as 802.11 frames
//!    without data, never an error.
//! 3. A data frame with the Protected bit is encrypted (WEP, TKIP, CCMP, GCMP): counted as
//!    encrypted and not decoded.
//! 4. The data header is 24 bytes, 30 when both To DS and From DS are set (the fourth
//!    address of a wireless bridge); QoS data frames add 2 bytes of QoS control, and 4 more of
//!    HT control when their Order bit is set.
//! 5. A QoS frame whose A-MSDU bit is set holds several packets in subframes, each a
//!    destination and a source address (6 bytes each), a big-endian length, then LLC/SNAP
//!    and the packet, `length` bytes in all, padded to a multiple of 4 bytes except the last.
//!    As in Wireshark, every subframe is decoded (each its own packet, all citing the frame's
//!    number) while at least a subframe header's 14 bytes are left before the frame ends (the
//!    end of the packet around it for a tunnelled frame; fewer is padding or a frame check
//!    sequence). A subframe whose length runs past the frame ends the walk: it and the rest
//!    are counted as a malformed A-MSDU ([`WlanSkip::BadSubframe`]), after the whole ones were
//!    decoded. An A-MSDU inside a subframe is not split again ([`WlanSkip::Aggregated`]).
//! 6. The payload (of the frame, or of each subframe) is LLC/SNAP: `aa aa 03` and an OUI of 00-00-00 (RFC 1042) or 00-00-f8
//!    (802.1H), then an ethertype, followed like Ethernet's (VLAN, MPLS, PPPoE). Any other
//!    LLC (spanning tree, NetBIOS) is not IP.
//!
//! The same 802.11 frames reach a wired capture inside an access point's GRE tunnel to its
//! controller: Aruba's protocol types 0x8200 to 0x9000 (`tunnel.rs`), as Wireshark and Zeek
//! decode them.

use super::link::{be16, by_ethertype, ethernet, IpAt, NoIp};

/// Why an 802.11 frame holds no packet tcpdoctor can read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WlanSkip {
    /// A data frame with the Protected bit: its payload is encrypted.
    Encrypted,
    /// A management, control or extension frame, or a data frame without payload.
    NoData,
    /// An A-MSDU: several packets aggregated in one frame. [`decode_tcp`](super::decode_tcp)
    /// says this of the whole frame; [`decode_frame`](super::decode_frame) splits it and says
    /// it only of an A-MSDU found inside a subframe, which is not split again.
    Aggregated,
    /// An A-MSDU subframe whose length runs past the end of the frame: it and the subframes
    /// after it are not decoded (those before it were).
    BadSubframe,
}

fn le16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn le32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// A radio header `len` bytes long: the frame after it, or truncated if it does not fit.
fn after(data: &[u8], len: usize) -> Result<usize, NoIp> {
    if len > data.len() {
        Err(NoIp::Truncated)
    } else {
        Ok(len)
    }
}

const RADIOTAP_TSFT: u32 = 1 << 0;
const RADIOTAP_FLAGS: u32 = 1 << 1;
const RADIOTAP_EXT: u32 = 1 << 31;
/// Radiotap Flags: the 802.11 header is padded to a multiple of 4 bytes.
const RADIOTAP_DATA_PAD: u8 = 0x20;
/// More present words than this is garbage (real headers carry a few).
const MAX_PRESENT_WORDS: usize = 16;

/// A radiotap header: version 0, a pad byte, its little-endian length, then the present
/// bitmaps (each with bit 31 saying another follows) and the fields they announce.
pub(super) fn radiotap(data: &[u8]) -> Result<IpAt, NoIp> {
    let (Some(&version), Some(len)) = (data.first(), le16(data, 2)) else {
        return Err(NoIp::Truncated);
    };
    let len = usize::from(len);
    if version != 0 || len < 8 {
        return Err(NoIp::NotIp);
    }
    let start = after(data, len)?;
    let first = le32(data, 4).ok_or(NoIp::Truncated)?;
    let mut off = 4;
    for _ in 0..MAX_PRESENT_WORDS {
        let word = le32(data, off).ok_or(NoIp::Truncated)?;
        off += 4;
        if word & RADIOTAP_EXT == 0 {
            break;
        }
    }
    if first & RADIOTAP_TSFT != 0 {
        off = off.next_multiple_of(8) + 8;
    }
    let flags = match first & RADIOTAP_FLAGS {
        0 => 0,
        _ if off < len => data[off],
        _ => 0,
    };
    wlan(data, start, flags & RADIOTAP_DATA_PAD != 0)
}

const PPI_DLT_ETHERNET: u32 = 1;
const PPI_DLT_IEEE802_11: u32 = 105;

/// A PPI header: version, flags, little-endian length, then the DLT of the frame after it.
pub(super) fn ppi(data: &[u8]) -> Result<IpAt, NoIp> {
    let (Some(len), Some(dlt)) = (le16(data, 2), le32(data, 4)) else {
        return Err(NoIp::Truncated);
    };
    let start = after(data, usize::from(len).max(8))?;
    match dlt {
        PPI_DLT_IEEE802_11 => wlan(data, start, false),
        PPI_DLT_ETHERNET => ethernet(data, start),
        _ => Err(NoIp::Unsupported),
    }
}

const PRISM_HEADER: usize = 144;
const AVS_MAGIC_V1: u32 = 0x8021_1001;
const AVS_MAGIC_V2: u32 = 0x8021_1002;

/// A Prism monitor header (144 bytes), or an AVS header if it starts with AVS's magic.
pub(super) fn prism(data: &[u8]) -> Result<IpAt, NoIp> {
    match be32(data, 0) {
        Some(AVS_MAGIC_V1 | AVS_MAGIC_V2) => avs(data),
        Some(_) => wlan(data, after(data, PRISM_HEADER)?, false),
        None => Err(NoIp::Truncated),
    }
}

/// An AVS header: magic and version, then its big-endian length.
pub(super) fn avs(data: &[u8]) -> Result<IpAt, NoIp> {
    let len = be32(data, 4).ok_or(NoIp::Truncated)?;
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if len < 8 {
        return Err(NoIp::NotIp);
    }
    wlan(data, after(data, len)?, false)
}

const TYPE_DATA: u8 = 2;
const SUBTYPE_QOS: u8 = 0x8;
const SUBTYPE_NO_DATA: u8 = 0x4;
const FLAG_TO_DS: u8 = 0x01;
const FLAG_FROM_DS: u8 = 0x02;
const FLAG_PROTECTED: u8 = 0x40;
const FLAG_ORDER: u8 = 0x80;
const QOS_AMSDU: u8 = 0x80;

/// An 802.11 frame at `off` (without radio header); `padded` when radiotap says the header
/// is padded to 4 bytes.
pub(super) fn wlan(data: &[u8], off: usize, padded: bool) -> Result<IpAt, NoIp> {
    let (Some(&fc), Some(&flags)) = (data.get(off), data.get(off + 1)) else {
        return Err(NoIp::Truncated);
    };
    let (version, kind, subtype) = (fc & 3, (fc >> 2) & 3, fc >> 4);
    if version != 0 || kind != TYPE_DATA || subtype & SUBTYPE_NO_DATA != 0 {
        return Err(NoIp::Wlan(WlanSkip::NoData));
    }
    if flags & FLAG_PROTECTED != 0 {
        return Err(NoIp::Wlan(WlanSkip::Encrypted));
    }
    let four_addresses = flags & (FLAG_TO_DS | FLAG_FROM_DS) == FLAG_TO_DS | FLAG_FROM_DS;
    let mut len = if four_addresses { 30 } else { 24 };
    if subtype & SUBTYPE_QOS != 0 {
        let qos = *data.get(off + len).ok_or(NoIp::Truncated)?;
        len += 2;
        if flags & FLAG_ORDER != 0 {
            len += 4;
        }
        if padded {
            len = len.next_multiple_of(4);
        }
        if qos & QOS_AMSDU != 0 {
            return Err(NoIp::Amsdu(off + len));
        }
    } else if padded {
        len = len.next_multiple_of(4);
    }
    llc(data, off + len)
}

/// An A-MSDU subframe header's length: destination, source, length.
pub(super) const SUBFRAME_HEADER: usize = 14;

/// The A-MSDU subframe at `off` in a frame that ends at `end`: where its LLC header starts
/// and where its packet ends, or why it cannot be read. `Ok(None)` when fewer bytes than a
/// subframe header are left (padding, a frame check sequence): no subframe.
pub(super) fn subframe(
    data: &[u8],
    off: usize,
    end: usize,
) -> Result<Option<(usize, usize)>, NoIp> {
    if end.saturating_sub(off) < SUBFRAME_HEADER {
        return Ok(None);
    }
    let len = usize::from(be16(data, off + 12).ok_or(NoIp::Truncated)?);
    let body = off + SUBFRAME_HEADER;
    if body + len > end {
        return Err(NoIp::Wlan(WlanSkip::BadSubframe));
    }
    Ok(Some((body, body + len)))
}

/// Where the subframe after the one at `off` whose packet ends at `stop` starts: subframes
/// are padded to a multiple of 4 bytes.
pub(super) fn next_subframe(off: usize, stop: usize) -> usize {
    off + (stop - off).next_multiple_of(4)
}

/// LLC/SNAP at `off`: `aa aa 03`, an encapsulation OUI, the ethertype.
pub(super) fn llc(data: &[u8], off: usize) -> Result<IpAt, NoIp> {
    let head = data.get(off..off + 6).ok_or(NoIp::Truncated)?;
    match head {
        [0xaa, 0xaa, 0x03, 0, 0, 0 | 0xf8] => {
            by_ethertype(data, be16(data, off + 6).ok_or(NoIp::Truncated)?, off + 8)
        }
        _ => Err(NoIp::NotIp),
    }
}

#[cfg(test)]
#[path = "wlan_tests.rs"]
mod tests;
