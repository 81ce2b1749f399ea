#!/usr/bin/env python3
"""wan-delay-pairs.py: how well a WAN path held its one-way delay, per packet, from two
captures taken at the path's two ends (each on its end's device, with the kernel's own
timestamps: `tcpdump -i tdnear0` in the client's namespace, `tcpdump -i tdfar0` in the
server's), not from the delay line's own clock.

    wan-delay-pairs.py NEAR.pcap FAR.pcap DELAY_US [--server-port 7000]

Packets pair across the two files by what the line does not change: IPv4 id, TCP ports,
sequence and acknowledgement numbers, flags and payload length (the line rewrites the far
end's address, so addresses are not compared); copies identical in all of these pair in order.
A packet client -> server took t_far - t_near, server -> client t_near - t_far; its error is
that minus DELAY_US. Prints one line per direction, then both together (`all`):

    c2s n=812 unpaired=0 signed_p50=+21.3 abs_p50=21.3 abs_p99=95.0 abs_max=310.2 (us)

Reads pcap (micro- or nanosecond) with link type raw IP (101) or Linux cooked (113), IPv4
only; exits 2 on a file it cannot read.
"""
import argparse
import collections
import math
import struct
import sys

LINKTYPE_RAW = 101
LINKTYPE_IPV4 = 228
LINKTYPE_SLL = 113


def fail(msg):
    """Bad input: the message on stderr, exit status 2."""
    print(msg, file=sys.stderr)
    sys.exit(2)


def packets(path):
    """(timestamp ns, IPv4 packet bytes) of each record."""
    try:
        f = open(path, "rb")
    except OSError as e:
        fail(f"wan-delay-pairs.py: {path}: {e.strerror}")
    with f:
        head = f.read(24)
        if len(head) < 24:
            fail(f"wan-delay-pairs.py: {path}: not a pcap file (too short)")
        magic = head[:4]
        if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
            endian = "<"
        elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
            endian = ">"
        else:
            fail(f"wan-delay-pairs.py: {path}: not a pcap file (magic {magic.hex()}; "
                 "write it with tcpdump -w, not pcapng)")
        nano = magic in (b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d")
        link = struct.unpack(endian + "I", head[20:24])[0] & 0x0FFFFFFF
        skip = {LINKTYPE_RAW: 0, LINKTYPE_IPV4: 0, LINKTYPE_SLL: 16}.get(link)
        if skip is None:
            fail(f"wan-delay-pairs.py: {path}: link type {link} (expected raw IP)")
        while True:
            rec = f.read(16)
            if len(rec) < 16:
                return
            sec, frac, incl, _ = struct.unpack(endian + "IIII", rec)
            data = f.read(incl)
            if len(data) < incl:
                return
            yield sec * 1_000_000_000 + (frac if nano else frac * 1000), data[skip:]


def key(p):
    """(direction-free key, source port, destination port) of an IPv4 TCP packet, else None."""
    if len(p) < 20 or p[0] >> 4 != 4 or p[9] != 6:
        return None
    ihl = (p[0] & 15) * 4
    total = struct.unpack(">H", p[2:4])[0]
    ident = struct.unpack(">H", p[4:6])[0]
    t = p[ihl:]
    if len(t) < 20:
        return None
    sport, dport, seq, ack = struct.unpack(">HHII", t[:12])
    off = (t[12] >> 4) * 4
    flags = t[13]
    payload = total - ihl - off
    return (ident, sport, dport, seq, ack, flags, payload), sport, dport


def quantile(v, q):
    """Nearest rank, as bench-wan.sh's quantile()."""
    if not v:
        return float("nan")
    s = sorted(v)
    i = max(1, math.ceil(len(s) * q))
    return s[min(i, len(s)) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("near")
    ap.add_argument("far")
    ap.add_argument("delay_us", type=float)
    ap.add_argument("--server-port", type=int, default=7000)
    a = ap.parse_args()
    far = collections.defaultdict(collections.deque)
    for ts, p in packets(a.far):
        k = key(p)
        if k:
            far[k[0]].append(ts)
    errors = {"c2s": [], "s2c": []}
    unpaired = {"c2s": 0, "s2c": 0}
    for ts, p in packets(a.near):
        k = key(p)
        if not k:
            continue
        way = "c2s" if k[2] == a.server_port else "s2c"
        q = far.get(k[0])
        if not q:
            unpaired[way] += 1
            continue
        t_far = q.popleft()
        took = (t_far - ts) if way == "c2s" else (ts - t_far)
        errors[way].append(took / 1000.0 - a.delay_us)
    report(errors, unpaired)


def report(errors, unpaired):
    """Prints one line per way (c2s, s2c, all) of the errors (µs) and unpaired counts given
    for c2s and s2c: the lines bench-wan.sh reads."""
    errors["all"] = errors["c2s"] + errors["s2c"]
    unpaired["all"] = unpaired["c2s"] + unpaired["s2c"]
    for way in ("c2s", "s2c", "all"):
        e = errors[way]
        mag = [abs(x) for x in e]
        if not e:
            print(f"{way} n=0 unpaired={unpaired[way]}")
            continue
        print(f"{way} n={len(e)} unpaired={unpaired[way]} signed_p50={quantile(e, 0.5):+.1f} "
              f"abs_p50={quantile(mag, 0.5):.1f} abs_p99={quantile(mag, 0.99):.1f} "
              f"abs_max={max(mag):.1f} (us)")


if __name__ == "__main__":
    main()
