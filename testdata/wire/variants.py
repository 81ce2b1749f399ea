#!/usr/bin/env python3
"""Derives the capture variants editcap cannot write from the real tcpdump captures here.

    python3 variants.py          (run in testdata/wire after capture.py)

- lo_be.pcap         lo_nano.pcap rewritten big-endian (nanosecond magic a1b23c4d)
- null.pcap          lo_eth.pcap with the Ethernet header replaced by a NULL header
                     (AF_INET in little-endian host order), LINKTYPE_NULL
- loop.pcap          the same with a LOOP header (network order), LINKTYPE_LOOP
- v6_ext.pcap        lo_eth.pcap with every IPv4 header replaced by IPv6 (::1, ::2) and,
                     on every other packet, a hop-by-hop and a destination-options header
                     (TCP checksums are not fixed up; nothing here checks them)
- multi.pcapng       two sections: big-endian (Ethernet, ns resolution, lo_nano.pcap
                     frames, with a name resolution block and a custom block to skip) then
                     little-endian (an unused interface of an unsupported link type, then
                     SLL2 at µs resolution carrying any_sll2.pcap's frames)

The expected values for every file come from tshark (see expected.sh), so tshark checks
these conversions as much as it checks the reader.
"""

import struct


def read_pcap(path):
    data = open(path, "rb").read()
    magic = data[:4]
    assert magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"), path
    nanos = magic == b"\x4d\x3c\xb2\xa1"
    _, _, _, _, snaplen, link = struct.unpack("<HHiIII", data[4:24])
    recs, off = [], 24
    while off < len(data):
        sec, frac, caplen, orig = struct.unpack("<IIII", data[off : off + 16])
        recs.append((sec, frac, data[off + 16 : off + 16 + caplen], orig))
        off += 16 + caplen
    return nanos, snaplen, link, recs


def write_pcap(path, big, nanos, snaplen, link, recs):
    e = ">" if big else "<"
    out = [struct.pack(e + "IHHiIII", 0xA1B23C4D if nanos else 0xA1B2C3D4, 2, 4, 0, 0, snaplen, link)]
    for sec, frac, data, orig in recs:
        out.append(struct.pack(e + "IIII", sec, frac, len(data), orig) + data)
    open(path, "wb").write(b"".join(out))


def relink(recs, header, chop=14):
    return [(s, f, header + d[chop:], o - chop + len(header)) for s, f, d, o in recs]


def to_v6(recs, with_ext):
    out = []
    for i, (s, f, d, o) in enumerate(recs):
        ip = d[14:]
        ihl = (ip[0] & 15) * 4
        total = struct.unpack("!H", ip[2:4])[0]
        proto = ip[9]
        ext = b""
        nh = proto
        if with_ext and i % 2 == 1:
            # hop-by-hop (8 bytes, PadN) -> destination options (8 bytes, PadN) -> TCP
            ext = bytes([60, 0, 1, 4, 0, 0, 0, 0]) + bytes([proto, 0, 1, 4, 0, 0, 0, 0])
            nh = 0
        plen = total - ihl + len(ext)
        src = b"\0" * 15 + b"\x01"
        dst = b"\0" * 15 + b"\x02"
        v6 = struct.pack("!IHBB", 0x60000000, plen, nh, 64) + src + dst
        eth = d[:12] + b"\x86\xdd"
        pkt = eth + v6 + ext + ip[ihl:]
        out.append((s, f, pkt, o - ihl + 40 + len(ext)))
    return out


class Ng:
    def __init__(self):
        self.out = []

    def block(self, e, btype, body):
        body += b"\0" * (-len(body) % 4)
        n = 12 + len(body)
        self.out.append(struct.pack(e + "II", btype, n) + body + struct.pack(e + "I", n))

    def shb(self, e):
        self.block(e, 0x0A0D0D0A, struct.pack(e + "IHHq", 0x1A2B3C4D, 1, 0, -1))

    def idb(self, e, link, snaplen, tsresol=None):
        opts = b""
        if tsresol is not None:
            opts = struct.pack(e + "HH", 9, 1) + bytes([tsresol, 0, 0, 0]) + b"\0" * 4
        self.block(e, 1, struct.pack(e + "HHI", link, 0, snaplen) + opts)

    def epb(self, e, iface, ticks, data, orig):
        head = struct.pack(e + "IIIII", iface, ticks >> 32, ticks & 0xFFFFFFFF, len(data), orig)
        self.block(e, 6, head + data)


def main():
    nanos, snap, link, nano_recs = read_pcap("lo_nano.pcap")
    assert nanos and link == 1
    write_pcap("lo_be.pcap", True, True, snap, link, nano_recs)

    _, snap, link, eth_recs = read_pcap("lo_eth.pcap")
    write_pcap("null.pcap", False, False, snap, 0, relink(eth_recs, struct.pack("<I", 2)))
    write_pcap("loop.pcap", False, False, snap, 108, relink(eth_recs, struct.pack(">I", 2)))
    write_pcap("v6_ext.pcap", False, False, snap, 1, to_v6(eth_recs, True))

    _, sll2_snap, sll2_link, sll2_recs = read_pcap("any_sll2.pcap")
    assert sll2_link == 276
    ng = Ng()
    ng.shb(">")
    ng.idb(">", 1, snap, tsresol=9)
    ng.block(">", 4, struct.pack(">HH", 1, 8) + bytes([127, 0, 0, 1]) + b"lo\0\0" + b"\0" * 4)
    for i, (s, f, d, o) in enumerate(nano_recs[:12]):
        ng.epb(">", 0, s * 1_000_000_000 + f, d, o)
        if i == 5:
            ng.block(">", 0x40000BAD, struct.pack(">I", 32473) + b"tcpdoctor test custom block")
    ng.shb("<")
    ng.idb("<", 147, 65535)
    ng.idb("<", 276, sll2_snap)
    for s, f, d, o in sll2_recs[:12]:
        ng.epb("<", 1, s * 1_000_000 + f, d, o)
    ng.block("<", 5, struct.pack("<III", 1, 0, 0) + b"\0" * 4)
    open("multi.pcapng", "wb").write(b"".join(ng.out))


if __name__ == "__main__":
    main()
