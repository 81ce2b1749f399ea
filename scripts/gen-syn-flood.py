#!/usr/bin/env python3
"""Writes a SYN-flood capture (pcap, Ethernet): COUNT connection attempts from distinct
sources (10.0.0.0/8, one SYN each, random ports and ISNs) to one server, 2 us apart.

  gen-syn-flood.py OUT.pcap COUNT [--answered] [--retries]

--answered: the server answers each SYN with a SYN-ACK that is never ACKed (a flood the
server meets with SYN cookies). --retries: each SYN is sent three times, with the same ISN,
at the kernel's retry spacing (0, 1 and 3 s after the first), and with --answered each is
answered by the same SYN-ACK again; records are written in time order. Used by
scripts/bench-syn-flood.sh; kept out of the repository's captures because it is tens of
megabytes.
"""
import heapq
import random
import struct
import sys


def csum(data):
    if len(data) % 2:
        data += b"\0"
    s = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def frame(src, dst, sport, dport, seq, ack, flags):
    # MSS 1460, SACK permitted, window scale 7: what a Linux SYN carries, less timestamps.
    opts = struct.pack("!BBH", 2, 4, 1460) + bytes([1, 3, 3, 7, 4, 2, 1, 1])
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack, (5 + len(opts) // 4) << 4, flags,
                      64240, 0, 0) + opts
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(tcp), 0, 0x4000, 64, 6, 0, src, dst)
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    eth = b"\x02\0\0\0\0\x02" + b"\x02\0\0\0\0\x01" + b"\x08\x00"
    return eth + ip + tcp


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    answered = "--answered" in sys.argv
    retries = "--retries" in sys.argv
    if len(args) != 2:
        sys.exit(__doc__)
    out, count = args[0], int(args[1])
    rnd = random.Random(29)
    server = bytes([192, 0, 2, 1])
    start = 1_700_000_000 * 1_000_000
    # Per attempt: source port, ISN and (answered) the server's ISN, drawn as before.
    attempts = []
    for i in range(count):
        sport = 1024 + rnd.randrange(64000)
        isn = rnd.getrandbits(32)
        server_isn = rnd.getrandbits(32) if answered else 0
        attempts.append((sport, isn, server_isn))
    step = 4 if answered else 2  # µs between attempts, as the records were 2 µs apart

    def sends(offset_us):
        """The records of one round (the first SYNs, or a retry), in time order."""
        for i, (sport, isn, server_isn) in enumerate(attempts):
            src = bytes([10, (i >> 16) & 0xFF, (i >> 8) & 0xFF, i & 0xFF])
            t = start + offset_us + i * step
            yield t, frame(src, server, sport, 80, isn, 0, 0x02)
            if answered:
                yield t + 2, frame(server, src, 80, sport, server_isn,
                                   (isn + 1) & 0xFFFFFFFF, 0x12)

    rounds = [0, 1_000_000, 3_000_000] if retries else [0]
    with open(out, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for t, data in heapq.merge(*(sends(o) for o in rounds), key=lambda r: r[0]):
            f.write(struct.pack("<IIII", t // 1_000_000, t % 1_000_000, len(data), len(data)))
            f.write(data)


main()
