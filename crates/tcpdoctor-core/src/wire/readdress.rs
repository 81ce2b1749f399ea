//! Rewriting an IPv4 packet's source or destination address in place, for the WAN delay line:
//! a server listening on 127.0.0.1 in the far namespace is reached at the path's far address
//! without netfilter, by the line changing the address on the way in and back on the way out.
//!
//! Rules:
//! 1. Only IPv4 with a whole header is touched; anything else is left as it is (`false`).
//! 2. The IP header checksum and, for the first fragment of TCP and UDP, the transport checksum
//!    (its pseudo-header covers both addresses) are updated incrementally (RFC 1624:
//!    `HC' = ~(~HC + ~m + m')`), so a packet that was correct stays correct and one that was
//!    not stays wrong by the same amount. A UDP checksum of 0 (none) stays 0.
//! 3. A transport header cut short (a truncated packet) keeps its bytes; only the IP header
//!    changes.
//! 4. A packet whose transport checksum is *partial* (from a TUN device with offloads, its
//!    `virtio_net_hdr` saying `NEEDS_CSUM`: the field holds the pseudo-header sum, not its
//!    complement, and the receiver's kernel completes nothing) is rewritten with
//!    [`set_ipv4_addr_partial`]: the field is updated as a sum (`F' = F + ~m + m'`), so the
//!    checksum completed later is the one over the new pseudo-header.

/// Which address to rewrite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    Source,
    Destination,
}

/// The IPv4 address in `field`, if `pkt` is IPv4 with a whole header.
pub fn ipv4_addr(pkt: &[u8], field: Field) -> Option<[u8; 4]> {
    let at = offset(pkt, field)?;
    pkt.get(at..at + 4)?.try_into().ok()
}

/// Sets `field` to `new`, fixing the checksums (rule 2). Returns whether the packet changed.
pub fn set_ipv4_addr(pkt: &mut [u8], field: Field, new: [u8; 4]) -> bool {
    set(pkt, field, new, false)
}

/// [`set_ipv4_addr`] for a packet whose transport checksum is partial (rule 4).
pub fn set_ipv4_addr_partial(pkt: &mut [u8], field: Field, new: [u8; 4]) -> bool {
    set(pkt, field, new, true)
}

fn set(pkt: &mut [u8], field: Field, new: [u8; 4], partial: bool) -> bool {
    let Some(at) = offset(pkt, field) else {
        return false;
    };
    let old: [u8; 4] = match pkt[at..at + 4].try_into() {
        Ok(a) => a,
        Err(_) => return false,
    };
    if old == new {
        return false;
    }
    pkt[at..at + 4].copy_from_slice(&new);
    adjust(pkt, 10, &old, &new);
    let ihl = usize::from(pkt[0] & 0x0f) * 4;
    let first_fragment = u16::from_be_bytes([pkt[6], pkt[7]]) & 0x1fff == 0;
    if first_fragment {
        let sum_at = match pkt[9] {
            6 => Some(ihl + 16),
            17 => Some(ihl + 6),
            _ => None,
        };
        if let Some(s) = sum_at.filter(|s| s + 2 <= pkt.len()) {
            if partial {
                adjust_sum(pkt, s, &old, &new);
                return true;
            }
            let udp_none = pkt[9] == 17 && pkt[s] == 0 && pkt[s + 1] == 0;
            if !udp_none {
                adjust(pkt, s, &old, &new);
                if pkt[9] == 17 && pkt[s] == 0 && pkt[s + 1] == 0 {
                    // A computed UDP checksum of 0 is sent as all ones (RFC 768).
                    pkt[s] = 0xff;
                    pkt[s + 1] = 0xff;
                }
            }
        }
    }
    true
}

fn offset(pkt: &[u8], field: Field) -> Option<usize> {
    let ihl = usize::from(*pkt.first()? & 0x0f) * 4;
    if pkt[0] >> 4 != 4 || ihl < 20 || pkt.len() < ihl {
        return None;
    }
    Some(match field {
        Field::Source => 12,
        Field::Destination => 16,
    })
}

/// RFC 1624 incremental update of the checksum at `at` for `old` → `new` (16-bit words).
fn adjust(pkt: &mut [u8], at: usize, old: &[u8; 4], new: &[u8; 4]) {
    let mut sum = u32::from(!u16::from_be_bytes([pkt[at], pkt[at + 1]]));
    for i in [0, 2] {
        sum += u32::from(!u16::from_be_bytes([old[i], old[i + 1]]));
        sum += u32::from(u16::from_be_bytes([new[i], new[i + 1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    pkt[at..at + 2].copy_from_slice(&(!(sum as u16)).to_be_bytes());
}

/// Rule 4: the field at `at` is a folded sum; add `~m + m'` to it.
fn adjust_sum(pkt: &mut [u8], at: usize, old: &[u8; 4], new: &[u8; 4]) {
    let mut sum = u32::from(u16::from_be_bytes([pkt[at], pkt[at + 1]]));
    for i in [0, 2] {
        sum += u32::from(!u16::from_be_bytes([old[i], old[i + 1]]));
        sum += u32::from(u16::from_be_bytes([new[i], new[i + 1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    pkt[at..at + 2].copy_from_slice(&(sum as u16).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ones'-complement sum of `words`, folded and inverted: a correct header sums to 0.
    fn checksum(bytes: &[u8]) -> u16 {
        let mut sum = 0u32;
        for c in bytes.chunks(2) {
            sum += u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        !(sum as u16)
    }

    fn transport_ok(pkt: &[u8]) -> bool {
        let ihl = usize::from(pkt[0] & 0x0f) * 4;
        let len = u16::from_be_bytes([pkt[2], pkt[3]]) as usize;
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&pkt[12..20]);
        pseudo.extend_from_slice(&[0, pkt[9]]);
        pseudo.extend_from_slice(&((len - ihl) as u16).to_be_bytes());
        pseudo.extend_from_slice(&pkt[ihl..len]);
        checksum(&pseudo) == 0
    }

    /// A TCP segment with correct checksums, built here: 198.18.0.2:40000 → 198.18.0.1:7070,
    /// 6 bytes of payload.
    fn tcp_packet() -> Vec<u8> {
        let mut p = vec![
            0x45, 0, 0, 46, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 198, 18, 0, 2, 198, 18, 0, 1,
        ];
        p.extend_from_slice(&40000u16.to_be_bytes());
        p.extend_from_slice(&7070u16.to_be_bytes());
        p.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 1, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
        p.extend_from_slice(b"PING\r\n");
        let h = checksum(&p[..20]);
        p[10..12].copy_from_slice(&h.to_be_bytes());
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&p[12..20]);
        pseudo.extend_from_slice(&[0, 6, 0, 26]);
        pseudo.extend_from_slice(&p[20..]);
        let t = checksum(&pseudo);
        p[36..38].copy_from_slice(&t.to_be_bytes());
        p
    }

    #[test]
    fn both_checksums_stay_right() {
        let mut p = tcp_packet();
        assert_eq!(checksum(&p[..20]), 0);
        assert!(transport_ok(&p));
        assert!(set_ipv4_addr(&mut p, Field::Destination, [127, 0, 0, 1]));
        assert_eq!(ipv4_addr(&p, Field::Destination), Some([127, 0, 0, 1]));
        assert_eq!(checksum(&p[..20]), 0, "IP header checksum");
        assert!(transport_ok(&p), "TCP checksum over the new pseudo-header");
        assert!(set_ipv4_addr(&mut p, Field::Source, [10, 255, 0, 9]));
        assert_eq!(checksum(&p[..20]), 0);
        assert!(transport_ok(&p));
        // And back: the original bytes exactly.
        set_ipv4_addr(&mut p, Field::Destination, [198, 18, 0, 1]);
        set_ipv4_addr(&mut p, Field::Source, [198, 18, 0, 2]);
        assert_eq!(p, tcp_packet());
    }

    #[test]
    fn a_partial_checksum_is_updated_as_a_sum() {
        use crate::wire::gso::{complete_checksum, VnetHdr, F_NEEDS_CSUM};
        // The packet as a device with offloads hands it over: the TCP field holds the
        // pseudo-header sum (26 bytes of TCP).
        let partial = |p: &mut Vec<u8>| {
            let mut pseudo = p[12..20].to_vec();
            pseudo.extend_from_slice(&[0, 6, 0, 26]);
            let s = !checksum(&pseudo);
            p[36..38].copy_from_slice(&s.to_be_bytes());
        };
        let hdr = VnetHdr {
            flags: F_NEEDS_CSUM,
            csum_start: 20,
            csum_offset: 16,
            ..VnetHdr::PLAIN
        };
        let mut p = tcp_packet();
        partial(&mut p);
        assert!(set_ipv4_addr_partial(
            &mut p,
            Field::Destination,
            [127, 0, 0, 1]
        ));
        assert_eq!(checksum(&p[..20]), 0, "IP header checksum");
        let mut want = tcp_packet();
        set_ipv4_addr(&mut want, Field::Destination, [127, 0, 0, 1]);
        let mut want_partial = want.clone();
        partial(&mut want_partial);
        assert_eq!(p, want_partial, "the partial sum over the new addresses");
        complete_checksum(&hdr, &mut p).unwrap();
        assert!(transport_ok(&p));
        assert_eq!(p, want);
        // The plain update would have broken it.
        let mut wrong = tcp_packet();
        partial(&mut wrong);
        set_ipv4_addr(&mut wrong, Field::Destination, [127, 0, 0, 1]);
        complete_checksum(&hdr, &mut wrong).unwrap();
        assert!(!transport_ok(&wrong));
    }

    #[test]
    fn a_udp_packet_without_checksum_keeps_none() {
        let mut p = vec![
            0x45, 0, 0, 30, 0, 0, 0x40, 0, 64, 17, 0, 0, 198, 18, 0, 2, 198, 18, 0, 1,
        ];
        p.extend_from_slice(&[0x9c, 0x40, 0x1b, 0x9e, 0, 10, 0, 0, b'h', b'i']);
        let h = checksum(&p[..20]);
        p[10..12].copy_from_slice(&h.to_be_bytes());
        assert!(set_ipv4_addr(&mut p, Field::Destination, [127, 0, 0, 1]));
        assert_eq!(&p[26..28], &[0, 0]);
        assert_eq!(checksum(&p[..20]), 0);
    }

    #[test]
    fn other_packets_are_left_alone() {
        let mut v6 = vec![0x60; 40];
        assert!(!set_ipv4_addr(&mut v6, Field::Source, [1, 2, 3, 4]));
        let mut short = vec![0x45, 0, 0];
        assert!(!set_ipv4_addr(&mut short, Field::Source, [1, 2, 3, 4]));
        assert!(!set_ipv4_addr(&mut [], Field::Source, [1, 2, 3, 4]));
        // A header cut inside the TCP header: the IP header still changes, nothing panics.
        let mut cut = tcp_packet();
        cut.truncate(30);
        assert!(set_ipv4_addr(&mut cut, Field::Destination, [127, 0, 0, 1]));
        assert_eq!(checksum(&cut[..20]), 0);
    }
}
