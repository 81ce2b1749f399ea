//! GSO super-packets from a TUN device with offloads (`IFF_VNET_HDR`, `TUNSETOFFLOAD`): the
//! `virtio_net_hdr` in front of each packet, completing a partial checksum, and segmenting a
//! TCP super-packet into the packets the kernel would have put on the wire.
//!
//! Rules:
//! 1. The header is the 10-byte `virtio_net_hdr` (no `num_buffers`), little-endian (the shell
//!    asks the device for little-endian with `TUNSETVNETLE`).
//! 2. `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the transport checksum field, `csum_offset` bytes after
//!    `csum_start`, holds the pseudo-header sum only (not complemented); the checksum is
//!    completed by summing from `csum_start` to the end of the IP packet and storing the
//!    complement there ([`complete_checksum`]). A UDP checksum that comes out 0 is sent as
//!    0xffff (RFC 768).
//! 3. Segmenting (TCP over IPv4, or IPv6 without extension headers): the payload after the TCP
//!    header is cut into `gso_size` pieces; each segment gets the IP and TCP headers of the
//!    super-packet with: the IP length, the IPv4 id incremented per segment (Linux's GSO does
//!    the same), the TCP sequence number advanced by the bytes before it, FIN and PSH only on
//!    the last segment, CWR only on the first, and both checksums computed whole. Options are
//!    copied to every segment; the urgent pointer is copied as it is (nothing here sends urgent
//!    data).
//! 4. A packet that is not a super-packet (`gso_type` NONE) is one segment: itself, with its
//!    checksum completed when the header says it is partial.
//! 5. Nothing panics on bad input: a header or packet that does not add up is a [`GsoError`].
//! 6. The other way ([`Merge`]): segments that a super-packet was cut into, and that arrive
//!    together, are merged back into one for the receiving device, as a NIC's GRO would.

use std::fmt;

/// Bytes of the `virtio_net_hdr` in front of every packet (rule 1).
pub const VNET_HDR_LEN: usize = 10;

/// `flags`: the transport checksum is partial (rule 2).
pub const F_NEEDS_CSUM: u8 = 1;
/// `gso_type` values (`linux/virtio_net.h`).
pub const GSO_NONE: u8 = 0;
pub const GSO_TCPV4: u8 = 1;
pub const GSO_UDP: u8 = 3;
pub const GSO_TCPV6: u8 = 4;
/// `gso_type` flag: the super-packet carries ECN (CWR set on its first segment).
pub const GSO_ECN: u8 = 0x80;

/// A `virtio_net_hdr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    /// Length of the headers (IP + transport); a hint, not relied on here.
    pub hdr_len: u16,
    /// Payload bytes per segment (the MSS) of a super-packet.
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    /// A plain packet: no offload, checksums complete.
    pub const PLAIN: VnetHdr = VnetHdr {
        flags: 0,
        gso_type: GSO_NONE,
        hdr_len: 0,
        gso_size: 0,
        csum_start: 0,
        csum_offset: 0,
    };

    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        let b: &[u8; VNET_HDR_LEN] = b.get(..VNET_HDR_LEN)?.try_into().ok()?;
        let u = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u(2),
            gso_size: u(4),
            csum_start: u(6),
            csum_offset: u(8),
        })
    }

    pub fn to_bytes(self) -> [u8; VNET_HDR_LEN] {
        let mut b = [0u8; VNET_HDR_LEN];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// Whether the packet behind this header is a super-packet the kernel would segment.
    pub fn is_gso(&self) -> bool {
        self.gso_type & !GSO_ECN != GSO_NONE
    }

    pub fn needs_csum(&self) -> bool {
        self.flags & F_NEEDS_CSUM != 0
    }
}

/// Why a packet could not be completed or segmented.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GsoError {
    /// The packet ends before a header it needs.
    Truncated,
    /// Neither IPv4 nor IPv6, or an IP header that does not add up.
    BadIp,
    /// A super-packet of a kind this module does not segment (UDP fragmentation offload, IPv6
    /// extension headers, a transport other than TCP).
    Unsupported(&'static str),
    /// `csum_start`/`csum_offset` point outside the packet, or `gso_size` is 0.
    BadHeader,
}

impl fmt::Display for GsoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GsoError::Truncated => write!(f, "packet cut short"),
            GsoError::BadIp => write!(f, "not a valid IPv4 or IPv6 packet"),
            GsoError::Unsupported(what) => write!(f, "cannot segment {what}"),
            GsoError::BadHeader => write!(f, "virtio_net_hdr does not fit the packet"),
        }
    }
}

impl std::error::Error for GsoError {}

/// The ones'-complement sum of `b` as big-endian 16-bit words (an odd last byte padded with
/// zero), folded to 16 bits, not complemented. Summed eight bytes at a time in native order
/// and swapped at the end (the sum is byte-order independent up to a swap, RFC 1071 §2(B)).
pub fn ones_sum(b: &[u8]) -> u16 {
    let mut acc: u64 = 0;
    let mut chunks = b.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        acc += (w & 0xffff_ffff) + (w >> 32);
    }
    let mut native = fold(acc);
    if cfg!(target_endian = "little") {
        native = native.swap_bytes();
    }
    let mut be = u64::from(native);
    let rest = chunks.remainder();
    for c in rest.chunks(2) {
        be += u64::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
    }
    fold(be)
}

fn fold(mut s: u64) -> u16 {
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    s as u16
}

/// Ones'-complement addition of folded sums.
fn add(a: u16, b: u16) -> u16 {
    fold(u64::from(a) + u64::from(b))
}

/// Where the IP packet ends (its own length field), its transport protocol and header length.
struct Ip {
    v6: bool,
    hlen: usize,
    end: usize,
    proto: u8,
}

fn ip(pkt: &[u8]) -> Result<Ip, GsoError> {
    match pkt.first().map(|b| b >> 4) {
        Some(4) => {
            if pkt.len() < 20 {
                return Err(GsoError::Truncated);
            }
            let hlen = usize::from(pkt[0] & 0x0f) * 4;
            let end = usize::from(u16::from_be_bytes([pkt[2], pkt[3]]));
            if hlen < 20 || end < hlen {
                return Err(GsoError::BadIp);
            }
            if pkt.len() < end {
                return Err(GsoError::Truncated);
            }
            Ok(Ip {
                v6: false,
                hlen,
                end,
                proto: pkt[9],
            })
        }
        Some(6) => {
            if pkt.len() < 40 {
                return Err(GsoError::Truncated);
            }
            let end = 40 + usize::from(u16::from_be_bytes([pkt[4], pkt[5]]));
            if pkt.len() < end {
                return Err(GsoError::Truncated);
            }
            Ok(Ip {
                v6: true,
                hlen: 40,
                end,
                proto: pkt[6],
            })
        }
        _ => Err(GsoError::BadIp),
    }
}

/// Completes a partial transport checksum in place (rule 2); a header without
/// `F_NEEDS_CSUM` leaves the packet as it is.
pub fn complete_checksum(hdr: &VnetHdr, pkt: &mut [u8]) -> Result<(), GsoError> {
    if !hdr.needs_csum() {
        return Ok(());
    }
    let i = ip(pkt)?;
    let start = usize::from(hdr.csum_start);
    let at = start + usize::from(hdr.csum_offset);
    if at + 2 > i.end {
        return Err(GsoError::BadHeader);
    }
    let mut sum = !ones_sum(&pkt[start..i.end]);
    if i.proto == 17 && sum == 0 {
        sum = 0xffff;
    }
    pkt[at..at + 2].copy_from_slice(&sum.to_be_bytes());
    Ok(())
}

/// The pseudo-header sum of a packet with addresses taken from `pkt` and a transport length.
fn pseudo_sum(pkt: &[u8], v6: bool, proto: u8, l4_len: usize) -> u16 {
    let addrs = if v6 { &pkt[8..40] } else { &pkt[12..20] };
    let mut s = ones_sum(addrs);
    s = add(s, u16::from(proto));
    if v6 {
        s = add(s, (l4_len >> 16) as u16);
    }
    add(s, l4_len as u16)
}

/// A packet from a device with offloads, cut into the packets the wire carries (rules 3–4).
/// Pure: it reads the packet and writes each segment into a caller's buffer.
pub struct Segmenter<'a> {
    pkt: &'a [u8],
    hdr: VnetHdr,
    /// None: one segment, the packet itself (rule 4).
    tcp: Option<TcpLayout>,
}

#[derive(Clone, Copy)]
struct TcpLayout {
    v6: bool,
    iphl: usize,
    /// IP + TCP header bytes.
    hlen: usize,
    end: usize,
    mss: usize,
    count: usize,
}

impl<'a> Segmenter<'a> {
    pub fn new(hdr: VnetHdr, pkt: &'a [u8]) -> Result<Segmenter<'a>, GsoError> {
        if !hdr.is_gso() {
            // Rule 4; the checksum is checked for sanity now, completed in `write`.
            if hdr.needs_csum() {
                let end = ip(pkt)?.end;
                let at = usize::from(hdr.csum_start) + usize::from(hdr.csum_offset);
                if at + 2 > end {
                    return Err(GsoError::BadHeader);
                }
            }
            return Ok(Segmenter {
                pkt,
                hdr,
                tcp: None,
            });
        }
        let i = ip(pkt)?;
        match (hdr.gso_type & !GSO_ECN, i.v6) {
            (GSO_TCPV4, false) | (GSO_TCPV6, true) => {}
            (GSO_UDP, _) => return Err(GsoError::Unsupported("UDP fragmentation offload")),
            (GSO_TCPV4 | GSO_TCPV6, _) => return Err(GsoError::BadHeader),
            _ => return Err(GsoError::Unsupported("an unknown gso_type")),
        }
        if i.proto != 6 {
            return Err(GsoError::Unsupported(if i.v6 {
                "IPv6 with extension headers"
            } else {
                "a transport other than TCP"
            }));
        }
        if i.hlen + 20 > i.end {
            return Err(GsoError::Truncated);
        }
        let thl = usize::from(pkt[i.hlen + 12] >> 4) * 4;
        let hlen = i.hlen + thl;
        if thl < 20 || hlen > i.end {
            return Err(GsoError::BadIp);
        }
        let mss = usize::from(hdr.gso_size);
        if mss == 0 {
            return Err(GsoError::BadHeader);
        }
        let payload = i.end - hlen;
        Ok(Segmenter {
            pkt,
            hdr,
            tcp: Some(TcpLayout {
                v6: i.v6,
                iphl: i.hlen,
                hlen,
                end: i.end,
                mss,
                count: payload.div_ceil(mss).max(1),
            }),
        })
    }

    /// How many packets the wire carries for this one.
    pub fn count(&self) -> usize {
        self.tcp.map_or(1, |t| t.count)
    }

    /// Appends segment `i` (0-based, below [`Segmenter::count`]) to `out`, with checksums
    /// complete.
    pub fn write(&self, i: usize, out: &mut Vec<u8>) {
        let start = out.len();
        let Some(t) = self.tcp else {
            out.extend_from_slice(self.pkt);
            // Checked in `new`: the only error left is none.
            let _ = complete_checksum(&self.hdr, &mut out[start..]);
            return;
        };
        let first = t.hlen + i * t.mss;
        let last = (first + t.mss).min(t.end);
        let first = first.min(last);
        out.extend_from_slice(&self.pkt[..t.hlen]);
        out.extend_from_slice(&self.pkt[first..last]);
        let seg = &mut out[start..];
        let len = seg.len();
        let l4_len = len - t.iphl;
        if t.v6 {
            seg[4..6].copy_from_slice(&(l4_len as u16).to_be_bytes());
        } else {
            seg[2..4].copy_from_slice(&(len as u16).to_be_bytes());
            let id = u16::from_be_bytes([seg[4], seg[5]]).wrapping_add(i as u16);
            seg[4..6].copy_from_slice(&id.to_be_bytes());
            seg[10..12].copy_from_slice(&[0, 0]);
            let sum = !ones_sum(&seg[..t.iphl]);
            seg[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        let th = t.iphl;
        let seq = u32::from_be_bytes([seg[th + 4], seg[th + 5], seg[th + 6], seg[th + 7]])
            .wrapping_add((i * t.mss) as u32);
        seg[th + 4..th + 8].copy_from_slice(&seq.to_be_bytes());
        const FIN: u8 = 0x01;
        const PSH: u8 = 0x08;
        const CWR: u8 = 0x80;
        if i + 1 < t.count {
            seg[th + 13] &= !(FIN | PSH);
        }
        if i > 0 {
            seg[th + 13] &= !CWR;
        }
        seg[th + 16..th + 18].copy_from_slice(&[0, 0]);
        let sum = !add(pseudo_sum(seg, t.v6, 6, l4_len), ones_sum(&seg[th..]));
        seg[th + 16..th + 18].copy_from_slice(&sum.to_be_bytes());
    }
}

/// Consecutive TCP segments of one super-packet merged back into one for a device with
/// offloads: what a receiving NIC's GRO does (rule 6). The merged packet's header asks for GSO
/// (`gso_size` the first segment's payload) and carries a partial checksum (`NEEDS_CSUM`), as
/// the kernel's own super-packets do.
///
/// Rule 6: a segment continues the merge when it is IPv4 TCP of the same connection with the
/// same headers (addresses, ports, ack, window, options: segments cut from one super-packet
/// share them), its sequence number follows, every segment before it filled the first one's
/// size and carried neither PSH nor FIN, its own flags are ACK with at most PSH and FIN, and
/// the merged packet stays within 64 KB. Anything else starts a new one.
pub struct Merge {
    /// The merged packet behind [`VNET_HDR_LEN`] bytes for its header.
    buf: Vec<u8>,
    iphl: usize,
    hlen: usize,
    mss: usize,
    next_seq: u32,
    /// The payload of the last segment merged, and its flags.
    last_len: usize,
    last_flags: u8,
    segments: usize,
}

const TCP_ACK: u8 = 0x10;
const TCP_PSH: u8 = 0x08;
const TCP_FIN: u8 = 0x01;

/// IPv4 TCP with payload: (IP header length, IP + TCP header length, payload length).
fn tcp4_layout(seg: &[u8]) -> Option<(usize, usize, usize)> {
    let i = ip(seg).ok()?;
    if i.v6 || i.proto != 6 || i.end != seg.len() || seg[6] & 0x3f != 0 || seg[7] != 0 {
        return None;
    }
    let thl = usize::from(*seg.get(i.hlen + 12)? >> 4) * 4;
    let hlen = i.hlen + thl;
    (thl >= 20 && hlen < i.end).then_some((i.hlen, hlen, i.end - hlen))
}

fn seq_of(seg: &[u8], iphl: usize) -> u32 {
    u32::from_be_bytes([seg[iphl + 4], seg[iphl + 5], seg[iphl + 6], seg[iphl + 7]])
}

impl Merge {
    /// Starts a merge in `buf` (its contents dropped) from `seg`; gives `buf` back when `seg`
    /// cannot start one (not IPv4 TCP with payload).
    pub fn start(mut buf: Vec<u8>, seg: &[u8]) -> Result<Merge, Vec<u8>> {
        let Some((iphl, hlen, len)) = tcp4_layout(seg) else {
            return Err(buf);
        };
        // ACK, with nothing beyond PSH, FIN and the ECN flags (no SYN, RST or URG).
        if seg[iphl + 13] & !(TCP_PSH | TCP_FIN | 0xc0) != TCP_ACK {
            return Err(buf);
        }
        buf.clear();
        buf.extend_from_slice(&[0; VNET_HDR_LEN]);
        buf.extend_from_slice(seg);
        Ok(Merge {
            buf,
            iphl,
            hlen,
            mss: len,
            next_seq: seq_of(seg, iphl).wrapping_add(len as u32),
            last_len: len,
            last_flags: seg[iphl + 13],
            segments: 1,
        })
    }

    /// Appends `seg` when it continues the merge (rule 6); false, and nothing changed, when not.
    pub fn push(&mut self, seg: &[u8]) -> bool {
        let Some((iphl, hlen, len)) = tcp4_layout(seg) else {
            return false;
        };
        let held = &self.buf[VNET_HDR_LEN..];
        let th = self.iphl;
        let flags = seg[th + 13];
        let same = iphl == self.iphl
            && hlen == self.hlen
            && held[..2] == seg[..2]
            && held[6..10] == seg[6..10]
            && held[12..iphl] == seg[12..iphl]
            && held[th..th + 4] == seg[th..th + 4]
            && held[th + 8..th + 12] == seg[th + 8..th + 12]
            && held[th + 14..th + 16] == seg[th + 14..th + 16]
            && held[th + 18..hlen] == seg[th + 18..hlen];
        let fits = self.last_len == self.mss
            && self.last_flags & (TCP_PSH | TCP_FIN) == 0
            && flags & !(TCP_PSH | TCP_FIN) == TCP_ACK
            && len <= self.mss
            && seq_of(seg, iphl) == self.next_seq
            && held.len() + len <= 65_535;
        if !(same && fits) {
            return false;
        }
        self.buf.extend_from_slice(&seg[hlen..]);
        self.next_seq = self.next_seq.wrapping_add(len as u32);
        self.last_len = len;
        self.last_flags = flags;
        self.segments += 1;
        true
    }

    /// How many segments it holds.
    pub fn segments(&self) -> usize {
        self.segments
    }

    /// The packet to write, behind its header: one segment as it came (a plain header), more
    /// as a super-packet with the first one's IP id, the last one's PSH and FIN, a partial TCP
    /// checksum and a GSO header.
    pub fn finish(mut self) -> Vec<u8> {
        if self.segments == 1 {
            return self.buf;
        }
        let (iphl, hlen) = (self.iphl, self.hlen);
        let p = &mut self.buf[VNET_HDR_LEN..];
        let len = p.len();
        p[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        p[10..12].copy_from_slice(&[0, 0]);
        let sum = !ones_sum(&p[..iphl]);
        p[10..12].copy_from_slice(&sum.to_be_bytes());
        p[iphl + 13] |= self.last_flags & (TCP_PSH | TCP_FIN);
        let partial = pseudo_sum(p, false, 6, len - iphl);
        p[iphl + 16..iphl + 18].copy_from_slice(&partial.to_be_bytes());
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: hlen as u16,
            gso_size: self.mss as u16,
            csum_start: iphl as u16,
            csum_offset: 16,
        };
        self.buf[..VNET_HDR_LEN].copy_from_slice(&hdr.to_bytes());
        self.buf
    }
}

#[cfg(test)]
mod tests;
