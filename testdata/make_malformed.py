#!/usr/bin/env python3
"""Writes the malformed-capture corpus in testdata/malformed/ from the real captures in
testdata/wire/. Each file is broken in one specific way; EXPECTED (written by hand, checked
by crates/tcpdoctor-core/tests/wire_malformed.rs) names the error each must produce, and
EXPECTED_WARNINGS the warning of those that merely end mid-record (analysed up to the cut)."""

import os
import random
import struct

here = os.path.dirname(os.path.abspath(__file__))
pcap = open(os.path.join(here, "wire/lo_eth.pcap"), "rb").read()
ng = open(os.path.join(here, "wire/lo_eth.pcapng"), "rb").read()
out = os.path.join(here, "malformed")


def put(name, data):
    open(os.path.join(out, name), "wb").write(data)


def first_record_end(p):
    caplen = struct.unpack("<I", p[24 + 8 : 24 + 12])[0]
    return 24 + 16 + caplen


def blocks(b):
    """(offset, type, length) of each pcapng block (little-endian file)."""
    off, res = 0, []
    while off < len(b):
        t, n = struct.unpack("<II", b[off : off + 8])
        res.append((off, t, n))
        off += n
    return res


rec1 = first_record_end(pcap)
put("not_a_capture.txt", b"GET / HTTP/1.1\r\nHost: example\r\n\r\n")
put("empty.pcap", b"")
put("three_bytes.pcap", pcap[:3])
put("truncated_global_header.pcap", pcap[:10])
put("truncated_record_header.pcap", pcap[: rec1 + 7])
put("truncated_record_body.pcap", pcap[: rec1 - 20])
put("absurd_caplen.pcap", pcap[:32] + struct.pack("<I", 0x7FFFFFFF) + pcap[36:])
small_snap = pcap[:16] + struct.pack("<I", 96) + pcap[20:]
put("caplen_over_snaplen.pcap", small_snap[:32] + struct.pack("<I", 400_000) + small_snap[36:])
put("unsupported_link.pcap", pcap[:20] + struct.pack("<I", 201) + pcap[24:])
put("bad_version.pcap", pcap[:4] + struct.pack("<HH", 1, 0) + pcap[8:])
rng = random.Random(7)
put("random_with_magic.pcap", pcap[:4] + bytes(rng.randrange(256) for _ in range(300)))
put("random_after_header.pcap", pcap[:24] + bytes(rng.randrange(256) for _ in range(300)))

bl = blocks(ng)
epb = [b for b in bl if b[1] == 6]
off, _, n = epb[0]
put("pcapng_length_not_multiple_of_4.pcapng", ng[: off + 4] + struct.pack("<I", n + 2) + ng[off + 8 :])
put("pcapng_trailing_length_mismatch.pcapng", ng[: off + n - 4] + struct.pack("<I", n + 4) + ng[off + n :])
put("pcapng_undefined_interface.pcapng", ng[: off + 8] + struct.pack("<I", 2) + ng[off + 12 :])
off2, _, n2 = epb[3]
put("pcapng_truncated_block.pcapng", ng[: off2 + n2 // 2])
put("pcapng_caplen_overruns_block.pcapng", ng[: off + 20] + struct.pack("<I", n) + ng[off + 24 :])
put("pcapng_bad_byte_order_magic.pcapng", ng[:8] + b"\x11\x22\x33\x44" + ng[12:])
put("pcapng_truncated_section_header.pcapng", ng[:20])
put("pcapng_epb_before_idb.pcapng", ng[: bl[1][0]] + ng[off:])
put("pcapng_absurd_block_length.pcapng", ng[: off + 4] + struct.pack("<I", 0x7FFFFFF0) + ng[off + 8 :])
