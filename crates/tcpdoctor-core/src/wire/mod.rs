//! Capture files and the headers inside them.
//!
//! [`CaptureReader`] streams records out of a pcap or pcapng file in one pass, with a fixed
//! buffer: memory does not grow with the file. [`decode_tcp`] turns one captured frame into a
//! [`TcpSegment`], reading the payload length from the IP header so that captures truncated by
//! a snap length (`tcpdump -s 96`) are analysed as well as full ones; [`decode_frame`] gives
//! every packet of a frame that holds several (an 802.11 A-MSDU).
//!
//! Nothing here panics on untrusted bytes: every error names the byte offset where the file
//! stopped making sense.

pub mod capture_point;
pub mod gso;
mod host_links;
mod ip;
mod link;
mod pcap;
mod pcapng;
pub mod readdress;
mod reader;
mod tcp;
#[cfg(test)]
pub(crate) mod testutil;
mod tunnel;
mod wlan;
pub mod write;
pub mod write_cooked;
pub mod write_pcapng;

use std::net::IpAddr;

use crate::time::Timestamp;

pub use link::LinkType;
pub use reader::CaptureReader;
pub use tcp::{decode_frame, decode_tcp, Decoded, NotTcp, Packets};
pub use tunnel::{Tunnel, MAX_DEPTH};
pub use wlan::WlanSkip;

/// Which container format a capture file uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureFormat {
    Pcap,
    Pcapng,
}

impl CaptureFormat {
    pub fn name(self) -> &'static str {
        match self {
            CaptureFormat::Pcap => "pcap",
            CaptureFormat::Pcapng => "pcapng",
        }
    }
}

/// One captured record, borrowed from the reader's buffer until the next call.
#[derive(Debug)]
pub struct Frame<'a> {
    /// 1-based position among the file's packet records: Wireshark's `frame.number`.
    pub number: u64,
    pub ts: Timestamp,
    pub link: LinkType,
    /// The captured bytes (possibly shorter than the packet on the wire).
    pub data: &'a [u8],
    /// The packet's length on the wire.
    pub orig_len: u32,
    /// pcapng interface id (0 for pcap).
    pub interface: u32,
    /// Byte offset of this record in the file.
    pub offset: u64,
}

/// An IP address and port: one end of a TCP connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    pub ip: IpAddr,
    pub port: u16,
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ip {
            IpAddr::V4(ip) => write!(f, "{ip}:{}", self.port),
            IpAddr::V6(ip) => write!(f, "[{ip}]:{}", self.port),
        }
    }
}

/// TCP header flags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpFlags(pub u8);

impl TcpFlags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
    pub const URG: u8 = 0x20;

    pub fn fin(self) -> bool {
        self.0 & Self::FIN != 0
    }
    pub fn syn(self) -> bool {
        self.0 & Self::SYN != 0
    }
    pub fn rst(self) -> bool {
        self.0 & Self::RST != 0
    }
    pub fn psh(self) -> bool {
        self.0 & Self::PSH != 0
    }
    pub fn ack(self) -> bool {
        self.0 & Self::ACK != 0
    }
}

impl std::fmt::Display for TcpFlags {
    /// tcpdump style: `S`, `S.`, `P.`, `F.`, `R`, `.`
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut s = String::new();
        for (bit, c) in [
            (Self::SYN, 'S'),
            (Self::FIN, 'F'),
            (Self::RST, 'R'),
            (Self::PSH, 'P'),
            (Self::URG, 'U'),
        ] {
            if self.0 & bit != 0 {
                s.push(c);
            }
        }
        if self.ack() {
            s.push('.');
        }
        if s.is_empty() {
            s.push_str("none");
        }
        f.write_str(&s)
    }
}

/// The TCP options tcpdoctor uses. Options cut off by the snap length are simply absent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpOptions {
    pub mss: Option<u16>,
    pub window_scale: Option<u8>,
    pub sack_permitted: bool,
    /// Number of SACK blocks in this segment (0 when none).
    pub sack_blocks: u8,
    /// (TSval, TSecr)
    pub timestamp: Option<(u32, u32)>,
}

/// One TCP segment as seen on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TcpSegment {
    pub src: Endpoint,
    pub dst: Endpoint,
    pub seq: u32,
    pub ack: u32,
    pub flags: TcpFlags,
    /// The raw (unscaled) window field.
    pub window: u16,
    /// Payload length from the IP header (not from the captured bytes).
    pub payload_len: u32,
    pub options: TcpOptions,
}

/// Why a capture file cannot be read. Every variant names the byte offset.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error("not a pcap or pcapng file (first bytes {magic:02x?}; at byte 0)")]
    NotACapture { magic: Vec<u8> },
    #[error("file is empty (at byte 0)")]
    Empty,
    #[error("truncated {what} at byte {offset}: needed {needed} bytes, {available} left")]
    Truncated {
        what: &'static str,
        offset: u64,
        needed: u64,
        available: u64,
    },
    #[error("malformed {what} at byte {offset}: {detail}")]
    Malformed {
        what: &'static str,
        offset: u64,
        detail: String,
    },
    #[error("unsupported link type {link_type} ({name}) at byte {offset}")]
    UnsupportedLinkType {
        link_type: u32,
        name: &'static str,
        offset: u64,
    },
    /// The cause is part of the message (not a `source`), so a caller printing the error
    /// chain does not say it twice.
    #[error("read error at byte {offset}: {cause}")]
    Io { offset: u64, cause: std::io::Error },
}

impl CaptureError {
    /// Whether the bytes simply ran out inside a record: what a capture cut short looks like
    /// (tcpdump killed mid-write, a copy interrupted). The reader says `Truncated` only when
    /// the stream ended, never for a length it does not believe (that is `Malformed`), so
    /// from [`CaptureReader::next_frame`] this means every earlier record was complete.
    pub fn is_cut_short(&self) -> bool {
        matches!(self, CaptureError::Truncated { .. })
    }
}
