//! From a captured frame to a [`TcpSegment`].

use super::{LinkType, TcpSegment};

/// What one frame turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decoded {
    Tcp(TcpSegment),
    /// IP but not TCP, or not IP at all (ARP, …), or a non-first IP fragment.
    NotTcp,
    /// Too few captured bytes to read the IP and TCP headers up to the data offset.
    Truncated,
    /// The frame's link type is not one tcpdoctor decodes.
    UnsupportedLink,
}

/// Decodes the link, IP and TCP headers of one frame. Never panics.
pub fn decode_tcp(link: LinkType, data: &[u8], orig_len: u32) -> Decoded {
    let _ = (link, data, orig_len);
    Decoded::NotTcp
}
