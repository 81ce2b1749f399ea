//! The Linux cooked header v2 (`LINKTYPE_LINUX_SLL2`) written in front of each packet of a
//! capture on all interfaces at once (`tcpdoctor capture -i any`).
//!
//! Why a cooked header: interfaces differ in their link headers (Ethernet, none on a tun,
//! zeroed MACs on loopback), so a capture on every interface asks the kernel for packets that
//! start at the network header and says, for each, what the kernel told about it instead: the
//! protocol, the interface, its hardware type, the direction and the link-layer source address.
//! SLL2 rather than SLL because it names the interface (tshark: `sll.ifindex`). Rules:
//! 1. Twenty bytes, big-endian: protocol (2), reserved zero (2), interface index (4), ARPHRD
//!    hardware type (2), packet type (1), address length (1), address (8, zero-padded).
//! 2. An address longer than 8 bytes is cut to 8; its length still says how long it was, as
//!    libpcap writes it.
//! 3. The record's wire length is the packet's plus the header's.

/// `LINKTYPE_LINUX_SLL2`.
pub const LINKTYPE_LINUX_SLL2: u32 = 276;
/// Bytes of the SLL2 header.
pub const SLL2_HEADER: usize = 20;

/// What the kernel said about a packet it delivered cooked (`struct sockaddr_ll`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CookedHeader {
    /// The EtherType (`ETH_P_*`), in host order.
    pub protocol: u16,
    pub ifindex: u32,
    /// `ARPHRD_*`.
    pub hatype: u16,
    /// `PACKET_HOST`, `PACKET_OUTGOING`, …
    pub pkttype: u8,
    pub addr_len: u8,
    pub addr: [u8; 8],
}

impl CookedHeader {
    /// The SLL2 header for this packet.
    pub fn sll2(&self) -> [u8; SLL2_HEADER] {
        let mut h = [0u8; SLL2_HEADER];
        h[0..2].copy_from_slice(&self.protocol.to_be_bytes());
        h[4..8].copy_from_slice(&self.ifindex.to_be_bytes());
        h[8..10].copy_from_slice(&self.hatype.to_be_bytes());
        h[10] = self.pkttype;
        h[11] = self.addr_len;
        h[12..20].copy_from_slice(&self.addr);
        h
    }

    /// `packet` (starting at its network header) behind the SLL2 header, into `out`.
    pub fn frame_into(&self, packet: &[u8], out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&self.sll2());
        out.extend_from_slice(packet);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Timestamp;
    use crate::wire::write::{ipv4_tcp_packet, PcapWriter};
    use crate::wire::{decode_tcp, CaptureReader, Decoded, LinkType};

    #[test]
    fn header_fields_sit_where_libpcap_puts_them() {
        let h = CookedHeader {
            protocol: 0x86dd,
            ifindex: 0x0102_0304,
            hatype: 772,
            pkttype: 4,
            addr_len: 6,
            addr: [0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0, 0],
        }
        .sll2();
        assert_eq!(
            h,
            [0x86, 0xdd, 0, 0, 1, 2, 3, 4, 0x03, 0x04, 4, 6, 0xa, 0xb, 0xc, 0xd, 0xe, 0xf, 0, 0]
        );
    }

    #[test]
    fn cooked_packets_read_back_as_tcp() {
        let ip = ipv4_tcp_packet(
            "127.0.0.1:40000".parse().unwrap(),
            "127.0.0.1:6379".parse().unwrap(),
            11,
            22,
            0x18,
            512,
            None,
            b"PING\r\n",
            6,
        );
        let cooked = CookedHeader {
            protocol: 0x0800,
            ifindex: 1,
            hatype: 772,
            pkttype: 0,
            addr_len: 6,
            addr: [0; 8],
        };
        let mut frame = Vec::new();
        cooked.frame_into(&ip, &mut frame);
        let mut w = PcapWriter::with_link_type(Vec::new(), 256, LINKTYPE_LINUX_SLL2).unwrap();
        let len = (ip.len() + SLL2_HEADER) as u32;
        w.write_packet(Timestamp(5), &frame, len).unwrap();
        let bytes = w.into_inner();

        let mut r = CaptureReader::new(&bytes[..]).unwrap();
        let f = r.next_frame().unwrap().unwrap();
        assert_eq!(f.link, LinkType::LinuxSll2);
        assert_eq!(f.orig_len, len);
        match decode_tcp(f.link, f.data, f.orig_len) {
            Decoded::Tcp(s, _) => {
                assert_eq!((s.src.port, s.dst.port), (40000, 6379));
                assert_eq!((s.seq, s.ack, s.payload_len), (11, 22, 6));
            }
            other => panic!("not TCP: {other:?}"),
        }
        assert!(r.next_frame().unwrap().is_none());
    }
}
