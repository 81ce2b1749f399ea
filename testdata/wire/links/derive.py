#!/usr/bin/env python3
"""Writes the *_from_aruba.pcap captures: the 802.11 frames of aruba_gre_zero_window.pcap (real
frames an Aruba access point tunnelled to its controller), taken out of their Ethernet, VLAN,
IPv4 and GRE headers and written under the monitor-mode link types, with the radio header
each puts before the frame. The 802.11 frames and their timestamps are unchanged; only the
radio headers are written here. Takes the first 100 frames. Run from this folder.

radiotap_amsdu_from_aruba.pcap packs the same 100 frames' packets into A-MSDUs, 3, 2, 1, 3,
2, 1, ... packets each: the first frame's 802.11 header with the QoS A-MSDU bit set, then
one subframe per packet (the frame's destination and source addresses, the length, its
LLC/SNAP and packet unchanged), padded to 4 bytes but the last, at the first frame's
timestamp."""
import struct

SRC = "aruba_gre_zero_window.pcap"
FRAMES = 100


def records(path):
    b = open(path, "rb").read()
    assert b[:4] == b"\xd4\xc3\xb2\xa1", "little-endian microsecond pcap"
    off = 24
    while off < len(b):
        sec, usec, incl, orig = struct.unpack_from("<IIII", b, off)
        yield sec, usec, b[off + 16 : off + 16 + incl], orig
        off += 16 + incl


def wlan_of(frame):
    """The 802.11 frame inside Ethernet, one VLAN tag, IPv4 and a 4-byte GRE header."""
    assert frame[12:14] == b"\x81\x00" and frame[16:18] == b"\x08\x00"
    ip = 18
    ihl = (frame[ip] & 0x0F) * 4
    assert frame[ip + 9] == 47
    gre = ip + ihl
    assert frame[gre : gre + 2] == b"\x00\x00" and frame[gre + 2 : gre + 4] == b"\x82\x00"
    return frame[gre + 4 :]


def radiotap(seq):
    # present: TSFT, Flags, Rate, Channel, dBm antenna signal
    present = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5)
    body = struct.pack("<IQBBHHb", present, seq * 1000, 0x00, 0x6C, 5180, 0x0140, -52)
    body += b"\x00"  # pad to a multiple of 2
    return struct.pack("<BBH", 0, 0, 4 + len(body)) + body


def ppi(_):
    return struct.pack("<BBHI", 0, 0, 8, 105)


def prism(_):
    h = struct.pack("<II", 0x44, 144) + b"wlan0".ljust(16, b"\x00")
    for did in range(10):  # DIDs: did, status, length, data
        h += struct.pack("<IHHI", 0x1041 + did * 0x1000, 0, 4, 0)
    assert len(h) == 144
    return h


def avs(seq):
    # AVS v1 (big-endian): magic, length 64, MAC time, host time, PHY type, channel,
    # data rate, antenna, priority, SSI type, SSI signal, SSI noise, preamble, encoding
    return struct.pack(
        ">IIQQIIIIIIiiII", 0x80211001, 64, seq, seq, 1, 36, 540, 0, 0, 1, -52, -95, 0, 1
    )


def write(path, linktype, header):
    with open(path, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, linktype))
        for i, (sec, usec, frame, orig) in enumerate(records(SRC)):
            if i == FRAMES:
                break
            w = header(i) + wlan_of(frame)
            extra = orig - len(frame)
            out.write(struct.pack("<IIII", sec, usec, len(w), len(w) + extra))
            out.write(w)


def addresses(frame):
    """Destination and source of an 802.11 data frame, by its To DS / From DS bits."""
    a1, a2, a3 = frame[4:10], frame[10:16], frame[16:22]
    ds = frame[1] & 3
    assert ds in (1, 2), "to or from the distribution system"
    return (a3, a2) if ds == 1 else (a1, a3)


def write_amsdu(path):
    frames = []
    for i, (sec, usec, frame, orig) in enumerate(records(SRC)):
        if i == FRAMES:
            break
        w = wlan_of(frame)
        assert orig == len(frame), "whole frames only"
        assert w[0] >> 4 == 8 and w[1] & 3 != 3 and w[1] & 0x80 == 0, "QoS data, 3 addresses"
        frames.append((sec, usec, w))
    with open(path, "wb") as out:
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 127))
        i, n = 0, 0
        while i < len(frames):
            group = frames[i : i + [3, 2, 1][n % 3]]
            i, n = i + len(group), n + 1
            sec, usec, first = group[0]
            head = bytearray(first[:26])
            head[24] |= 0x80  # QoS control: A-MSDU present
            body = b""
            for k, (_, _, w) in enumerate(group):
                da, sa = addresses(w)
                packet = w[26:]
                sub = da + sa + struct.pack(">H", len(packet)) + packet
                if k + 1 < len(group):
                    sub += b"\x00" * (-len(sub) % 4)
                body += sub
            rec = radiotap(n - 1) + bytes(head) + body
            out.write(struct.pack("<IIII", sec, usec, len(rec), len(rec)))
            out.write(rec)


def nothing(_):
    return b""


write("wlan_from_aruba.pcap", 105, nothing)
write("radiotap_from_aruba.pcap", 127, radiotap)
write("ppi_from_aruba.pcap", 192, ppi)
write("prism_from_aruba.pcap", 119, prism)
write("avs_from_aruba.pcap", 163, avs)
write_amsdu("radiotap_amsdu_from_aruba.pcap")
