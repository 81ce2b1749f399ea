//! Test-only builders: packets (Ethernet, IPv4, IPv6, TCP) and capture files (pcap, pcapng)
//! assembled byte by byte, so each test states exactly what is on the wire.

/// A pcap file: `records` are (seconds, fraction, captured bytes, original length if larger).
pub(crate) fn pcap(
    big: bool,
    nanos: bool,
    link: u32,
    snaplen: u32,
    records: &[(u32, u32, &[u8], Option<u32>)],
) -> Vec<u8> {
    let w32 = |v: &mut Vec<u8>, x: u32| {
        v.extend(if big {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        })
    };
    let w16 = |v: &mut Vec<u8>, x: u16| {
        v.extend(if big {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        })
    };
    let mut v = Vec::new();
    w32(&mut v, if nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 });
    w16(&mut v, 2);
    w16(&mut v, 4);
    w32(&mut v, 0);
    w32(&mut v, 0);
    w32(&mut v, snaplen);
    w32(&mut v, link);
    for &(sec, frac, data, orig) in records {
        w32(&mut v, sec);
        w32(&mut v, frac);
        w32(&mut v, data.len() as u32);
        w32(&mut v, orig.unwrap_or(data.len() as u32));
        v.extend_from_slice(data);
    }
    v
}

/// A pcapng file being written; each section has its own byte order.
pub(crate) struct Ng {
    pub big: bool,
    pub out: Vec<u8>,
}

impl Ng {
    /// A file starting with a section header in the given byte order.
    pub fn new(big: bool) -> Ng {
        let mut ng = Ng {
            big,
            out: Vec::new(),
        };
        ng.shb(big);
        ng
    }

    pub fn u16b(&self, x: u16) -> [u8; 2] {
        if self.big {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        }
    }

    pub fn u32b(&self, x: u32) -> [u8; 4] {
        if self.big {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        }
    }

    /// Appends a block: type, length, body padded to 4, length.
    pub fn block(&mut self, btype: u32, body: &[u8]) -> &mut Ng {
        let padded = body.len().div_ceil(4) * 4;
        let len = (12 + padded) as u32;
        let (t, l) = (self.u32b(btype), self.u32b(len));
        self.out.extend(t);
        self.out.extend(l);
        self.out.extend_from_slice(body);
        self.out.resize(self.out.len() + padded - body.len(), 0);
        self.out.extend(l);
        self
    }

    /// Starts a new section.
    pub fn shb(&mut self, big: bool) -> &mut Ng {
        self.big = big;
        let mut body = Vec::new();
        body.extend(self.u32b(0x1a2b_3c4d));
        body.extend(self.u16b(1));
        body.extend(self.u16b(0));
        body.extend([0xff; 8]);
        // shb_userappl option, then end of options.
        body.extend(self.u16b(4));
        body.extend(self.u16b(4));
        body.extend(b"test");
        body.extend([0; 4]);
        self.block(0x0a0d_0d0a, &body)
    }

    /// An interface: link type, snap length and options (code, value).
    pub fn idb(&mut self, link: u16, snaplen: u32, opts: &[(u16, &[u8])]) -> &mut Ng {
        let mut body = Vec::new();
        body.extend(self.u16b(link));
        body.extend([0, 0]);
        body.extend(self.u32b(snaplen));
        body.extend(self.options(opts));
        self.block(1, &body)
    }

    pub fn options(&self, opts: &[(u16, &[u8])]) -> Vec<u8> {
        let mut v = Vec::new();
        for (code, val) in opts {
            v.extend(self.u16b(*code));
            v.extend(self.u16b(val.len() as u16));
            v.extend_from_slice(val);
            v.resize(v.len().div_ceil(4) * 4, 0);
        }
        if !opts.is_empty() {
            v.extend([0; 4]);
        }
        v
    }

    pub fn epb(&mut self, iface: u32, ts: u64, data: &[u8], orig: Option<u32>) -> &mut Ng {
        let mut body = Vec::new();
        body.extend(self.u32b(iface));
        body.extend(self.u32b((ts >> 32) as u32));
        body.extend(self.u32b(ts as u32));
        body.extend(self.u32b(data.len() as u32));
        body.extend(self.u32b(orig.unwrap_or(data.len() as u32)));
        body.extend_from_slice(data);
        body.resize(body.len().div_ceil(4) * 4, 0);
        body.extend(self.options(&[(1, b"a comment")]));
        self.block(6, &body)
    }

    pub fn spb(&mut self, data: &[u8], orig: u32) -> &mut Ng {
        let mut body = self.u32b(orig).to_vec();
        body.extend_from_slice(data);
        self.block(3, &body)
    }

    pub fn pb(&mut self, iface: u16, ts: u64, data: &[u8], orig: Option<u32>) -> &mut Ng {
        let mut body = Vec::new();
        body.extend(self.u16b(iface));
        body.extend(self.u16b(0));
        body.extend(self.u32b((ts >> 32) as u32));
        body.extend(self.u32b(ts as u32));
        body.extend(self.u32b(data.len() as u32));
        body.extend(self.u32b(orig.unwrap_or(data.len() as u32)));
        body.extend_from_slice(data);
        self.block(2, &body)
    }

    pub fn bytes(&self) -> Vec<u8> {
        self.out.clone()
    }
}

/// TCP header fields for [`tcp_hdr`].
#[derive(Clone, Debug)]
pub(crate) struct Tcp {
    pub sport: u16,
    pub dport: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// Raw option bytes; padded with end-of-list to a multiple of 4.
    pub options: Vec<u8>,
}

impl Default for Tcp {
    fn default() -> Self {
        Tcp {
            sport: 1234,
            dport: 80,
            seq: 1000,
            ack: 2000,
            flags: 0x18,
            window: 512,
            options: Vec::new(),
        }
    }
}

pub(crate) fn tcp_hdr(t: &Tcp) -> Vec<u8> {
    let mut opts = t.options.clone();
    opts.resize(opts.len().div_ceil(4) * 4, 0);
    let mut v = Vec::new();
    v.extend(t.sport.to_be_bytes());
    v.extend(t.dport.to_be_bytes());
    v.extend(t.seq.to_be_bytes());
    v.extend(t.ack.to_be_bytes());
    v.push((((20 + opts.len()) / 4) as u8) << 4);
    v.push(t.flags);
    v.extend(t.window.to_be_bytes());
    v.extend([0, 0, 0, 0]);
    v.extend(opts);
    v
}

/// IPv4 10.0.0.1 → 10.0.0.2; `total` overrides the total-length field.
pub(crate) fn ipv4_pkt(
    proto: u8,
    frag: u16,
    total: Option<u16>,
    opts: &[u8],
    l4: &[u8],
) -> Vec<u8> {
    let ihl = 20 + opts.len();
    let tot = total.unwrap_or((ihl + l4.len()) as u16);
    let mut v = vec![0x40 | (ihl / 4) as u8, 0];
    v.extend(tot.to_be_bytes());
    v.extend([0, 1]);
    v.extend(frag.to_be_bytes());
    v.extend([64, proto, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    v.extend_from_slice(opts);
    v.extend_from_slice(l4);
    v
}

/// IPv6 2001:db8::1 → 2001:db8::2 with extension headers `ext` (the first of type `next`);
/// `plen` overrides the payload-length field.
pub(crate) fn ipv6_pkt(next: u8, ext: &[u8], l4: &[u8], plen: Option<u16>) -> Vec<u8> {
    let mut v = vec![0x60, 0, 0, 0];
    v.extend(plen.unwrap_or((ext.len() + l4.len()) as u16).to_be_bytes());
    v.extend([next, 64]);
    let mut a = [0u8; 16];
    a[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    a[15] = 1;
    v.extend(a);
    a[15] = 2;
    v.extend(a);
    v.extend_from_slice(ext);
    v.extend_from_slice(l4);
    v
}

/// An Ethernet frame with the given VLAN tag types (outermost first).
pub(crate) fn eth(ethertype: u16, vlans: &[u16], payload: &[u8]) -> Vec<u8> {
    let mut v = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];
    for (i, tpid) in vlans.iter().enumerate() {
        v.extend(tpid.to_be_bytes());
        v.extend((100 + i as u16).to_be_bytes());
    }
    v.extend(ethertype.to_be_bytes());
    v.extend_from_slice(payload);
    v
}

/// Ethernet + IPv4 + 20-byte TCP header + `n` payload bytes.
pub(crate) fn eth_v4_tcp(n: usize) -> Vec<u8> {
    let mut seg = tcp_hdr(&Tcp::default());
    seg.resize(seg.len() + n, 0x61);
    eth(0x0800, &[], &ipv4_pkt(6, 0, None, &[], &seg))
}
