#!/usr/bin/env python3
"""wan_check: sanity-check one WAN reference capture and write its .expect file.

Called by wan-record.sh after each recording. The must/must_not lines below
come from PHYSICS.md and from what the specimens are known to do; the numbers
come from what the client measured. tshark is used only to verify that the
recording shows what it was meant to show (a ≥200 ms wait before an RTO
retransmission, a 1 s SYN retry, the ACK delays of the Nagle stall); when a
check fails, no .expect is written and the exit status is 1.

Usage: wan_check.py NAME --pcap F --client-log F --wanlink-log F --cmd TEXT
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

NEVER = ["must_not connection_churn", "must_not zero_window"]

HEADER_BODY_PHYSICS = [
    "PHYSICS sec. 9, Nagle without delayed ACK: one RTT per message. The server",
    "(wan_header_body_server.py, Nagle on) answers each GET with a 20-byte header send()",
    "and then a body send() of one full segment + 60 bytes (1508 bytes; TCP_MAXSEG 1448 =",
    "SYN MSS 1460 of the TUN's 1500-byte MTU, less 12 bytes of timestamps). The header",
    "leaves at once (nothing in flight); the body's first 1448 bytes leave at once (a full",
    "segment is never held); its 60-byte tail is held by Nagle because the small header",
    "is unacknowledged (Linux tcp_mss_split_point / Minshall check). The client has then",
    "received 1468 bytes, more than one full segment, so it ACKs at once (no delayed-ACK",
    "timer); the tail leaves when that ACK reaches the server. 2 RTT per exchange, not 1.",
    "Exchange 1 differs: the client is still in quickack mode and ACKs the header alone",
    "at once; that ACK already releases the tail (only the small segment must be acked).",
    "The pause's first ACK of everything sent is then not the releasing one (at the server",
    "it follows the tail; at the client it precedes it but acknowledges only the full",
    "segment), so exchange 1 is not a held turn in tcpdoctor's sense: 29 of 30 can be.",
]
HEADER_BODY_OPEN = [
    "nagle_round_trip client_to_server: each request is one 7-byte send() whose predecessor",
    "was acknowledged by the response, so nothing of the client's is ever held.",
    "nagle_delayed_ack: no ACK here waits for a timer (every ACK of a response leaves",
    "within microseconds of the data it acknowledges).",
    "fragmented_writes: neither must nor must_not. The header is a separate write (3",
    "segments where 2 would do) but that is one extra segment per message, not tinygrams.",
    "rtt_bound: neither must nor must_not. The client is strictly sequential (round-trip",
    "bound in the sec. 5 sense), but each exchange costs 2 RTT and the fixable extra round",
    "trip is the Nagle hold; at the client end round trips are only ~50% of the wall time.",
]

# name -> (side, rtt_ms, expectation lines, physics comment lines)
SPECS = {
    "wan15ms_nagle_perline": ("client", 30, [
        "must nagle_delayed_ack server_to_client",
        "must fragmented_writes server_to_client",
        "must_not retransmission_stall",
    ] + NEVER, [
        "Per-line server (one send() per response line, Nagle on). Line 1 leaves at once;",
        "lines 2..9 are held by Nagle (Minshall: a small segment is unacked) until the",
        "client's delayed ACK for line 1 arrives; they then leave as ONE segment. So each",
        "response shows as 2 small segments (33 + 234 bytes), not 9: the per-line writes are",
        "visible as a split response, tinygrams with PSH, median payload far below the MSS.",
        "rtt_bound: neither must nor must_not. The client is strictly sequential, so the",
        "protocol IS round-trip bound (fixing Nagle still leaves N x RTT), but here each",
        "exchange costs 2 RTT + ato, and the dominant, fixable cause is the Nagle stall.",
    ]),
    "wan15ms_nagle_perline_serverside": ("server", 30, [
        "must nagle_delayed_ack server_to_client",
        "must fragmented_writes server_to_client",
        "must_not retransmission_stall",
    ] + NEVER, [
        "Same as wan15ms_nagle_perline, captured at the SERVER (the Nagle sender): the",
        "client's pure ACK arrives RTT + ato after line 1, and the held lines follow it",
        "within microseconds (PHYSICS sec. 3: data follows the ACK at once only at the sender).",
        "rtt_bound: neither must nor must_not (see the client-side twin).",
    ]),
    "wan15ms_fixed": ("client", 30, [
        "must rtt_bound client_to_server",
        "must_not nagle_delayed_ack",
        "must_not fragmented_writes",
        "must_not retransmission_stall",
    ] + NEVER, [
        "Fixed server (whole response in one send(), Nagle still on): each response is one",
        "segment that piggybacks the ACK of the request. No delayed ACK ever releases data.",
        "Each exchange costs one RTT: round-trip bound (PHYSICS sec. 5), not a Nagle stall.",
    ]),
    "wan15ms_rtt_bound": ("client", 30, [
        "must rtt_bound client_to_server",
        "must_not nagle_delayed_ack",
        "must_not fragmented_writes",
        "must_not retransmission_stall",
    ] + NEVER, [
        "Chatty client: many sequential small commands (SET <i> -> 'OK <i>' + '.'), fixed",
        "server. Strictly alternating turns, idle gaps = RTT, wall time ~ commands x RTT.",
    ]),
    "wan15ms_pipelined": ("client", 30, [
        "clean",
    ], [
        "The same commands as wan15ms_rtt_bound, pipelined: all requests in one send(), all",
        "responses written by the fixed server in one send() (one read batch). One request",
        "turn, one response turn: the whole batch costs ~1 RTT after the handshake.",
        "clean = no finding at all, in particular not rtt_bound (and no Nagle stall: nothing",
        "small is ever written behind unacknowledged small data).",
    ]),
    "wan15ms_window4": ("client", 30, [
        "must_not rtt_bound",
        "must_not nagle_delayed_ack",
        "must_not nagle_round_trip",
        "must_not retransmission_stall",
    ] + NEVER, [
        "A sliding-window client (wan_pipelined_client.py --window 4): its first 4 requests",
        "written 7.5 ms apart, then one new request as each response arrives, so 4 are always",
        "in flight; TCP_NODELAY on both ends, the server writes each answer with one send().",
        "Each request is answered one RTT after it was written, but a response arrives every",
        "RTT/4: at the client a request and the next response are ~7.5 ms apart, less than",
        "the 30 ms a sequential exchange needs at least. These exchanges overlap; calling",
        "them sequential, or promising that pipelining saves more than the time measured,",
        "is wrong (issue 11, item 5). rtt_bound: must_not (the client already pipelines).",
    ]),
    "wan15ms_browser_pool": ("client", 30, [
        "must rtt_bound client_to_server",
        "rtt_fix multiplex",
        "must_not nagle_delayed_ack",
        "must_not nagle_round_trip",
        "must_not retransmission_stall",
        "must_not zero_window",
    ], [
        "Headless Chromium loads a page of 120 small images from nginx (browser_pool.py):",
        "HTTP/1.1, so the browser opens six keep-alive connections to the host and sends",
        "one request at a time on each (browsers do not pipeline). Every image costs one",
        "round trip on its connection: round-trip bound, with the requests already spread",
        "over parallel connections. The fix that fits is multiplexing (HTTP/2) or fewer",
        "requests, not pipelining; and the saving cannot exceed the page load's elapsed",
        "time less the round trip the first answer still needs (issue 11, item 5).",
        "connection_churn: neither (six connections for 122 requests is the browser's pool).",
    ]),
    "wan15ms_nagle_header_body_serverside": ("server", 30, [
        "must nagle_round_trip server_to_client",
        "must_not nagle_round_trip client_to_server",
        "must_not nagle_delayed_ack",
        "must_not retransmission_stall",
    ] + NEVER, HEADER_BODY_PHYSICS + [
        "Captured at the SERVER (the Nagle sender): the client's pure ACK arrives one RTT",
        "after the header and the held tail leaves within tens of microseconds of it.",
    ] + HEADER_BODY_OPEN),
    "wan15ms_nagle_header_body_clientside": ("client", 30, [
        "must nagle_round_trip server_to_client",
        "must_not nagle_round_trip client_to_server",
        "must_not nagle_delayed_ack",
        "must_not retransmission_stall",
    ] + NEVER, HEADER_BODY_PHYSICS + [
        "Captured at the CLIENT (the receiver): its pure ACK leaves within microseconds of",
        "the full segment, and the held tail arrives one RTT after that ACK.",
    ] + HEADER_BODY_OPEN),
    "wan15ms_header_body_fixed": ("client", 30, [
        "must rtt_bound client_to_server",
        "must_not nagle_round_trip",
        "must_not nagle_delayed_ack",
        "must_not fragmented_writes",
        "must_not retransmission_stall",
    ] + NEVER, [
        "Fixed twin of wan15ms_nagle_header_body_*: the same server with --fixed builds",
        "header + body in user space and writes them with ONE sendall() (Nagle still on).",
        "Nothing is in flight when the write happens, so the whole 1528-byte response leaves",
        "at once as a full segment and an 80-byte one; the client ACKs both together (more",
        "than one full segment received) and sends the next request. Each exchange costs",
        "one RTT: round-trip bound (PHYSICS sec. 5), nothing held by Nagle.",
    ]),
    "wan_rto_stall": ("server", 4, [
        "must retransmission_stall server_to_client",
        "must_not nagle_delayed_ack",
        "must_not fragmented_writes",
    ] + NEVER, [
        "Bulk responder: each 2000-byte response is one sendall() = 1448 + 552 bytes.",
        "wanlink dropped the 552-byte tail of response 4 AND its first retransmission (the",
        "tail-loss probe, ~2*SRTT later), so only the retransmission timeout (>= 200 ms, the",
        "Linux RTO floor) recovers it. Captured at the sender (server), so the original, the",
        "lost probe and the RTO retransmission are all in the file. The client's delayed ACK",
        "for the first segment is visible but releases nothing: not a Nagle stall.",
        "rtt_bound: neither (only a few sequential exchanges on a 4 ms RTT; the time is the",
        "RTO). The same applies to every loss capture here.",
    ]),
    "wan_tlp_only": ("server", 4, [
        "must_not retransmission_stall",
        "must_not nagle_delayed_ack",
        "must_not fragmented_writes",
    ] + NEVER, [
        "As wan_rto_stall, but only the tail segment itself was dropped, once. Two segments",
        "were in flight, so the probe timeout was 2*SRTT + 2 ms (rounded up to the 4 ms",
        "ticks of this HZ=250 kernel) and the tail-loss probe recovered the tail within",
        "~15 ms. There IS a retransmission in the file, but no stall:",
        "nothing waited anywhere near the 200 ms RTO floor.",
        "Note: had only ONE segment been outstanding (e.g. a 5000-byte response whose 3 full",
        "segments were ACKed at once), Linux adds 200 ms to the probe timeout for a possible",
        "delayed ACK, and even a single tail drop costs >= 200 ms (measured 210-217 ms).",
        "rtt_bound: neither (see wan_rto_stall).",
    ]),
    "wan_syn_retry": ("client", 10, [
        "must retransmission_stall client_to_server",
        "must_not nagle_delayed_ack",
        "must_not fragmented_writes",
    ] + NEVER, [
        "The client's first SYN was dropped; the kernel retried after its initial 1 s RTO.",
        "The stalled segment is a SYN (no payload): the connect() took ~1 s. The exchanges",
        "after it are fast (fixed server). rtt_bound: neither (only 3 exchanges).",
    ]),
}


def fail(msg):
    sys.stderr.write("wan_check: FAILED: %s\n" % msg)
    sys.exit(1)


def tshark_rows(pcap):
    fields = ["frame.number", "frame.time_relative", "ip.src", "tcp.seq", "tcp.ack", "tcp.len",
              "tcp.flags.syn", "tcp.flags.fin", "tcp.srcport"]
    cmd = ["tshark", "-r", pcap, "-o", "tcp.relative_sequence_numbers:TRUE", "-T", "fields"]
    for f in fields:
        cmd += ["-e", f]
    out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         timeout=60, check=True).stdout
    rows = []
    for line in out.splitlines():
        v = line.split("\t")
        rows.append({"n": int(v[0]), "t": float(v[1]), "src": v[2], "seq": int(v[3]),
                     "ack": int(v[4] or 0), "len": int(v[5]), "syn": v[6] in ("1", "True"),
                     "fin": v[7] in ("1", "True"), "sport": int(v[8])})
    return rows


def tshark_retransmissions(pcap):
    out = subprocess.run(["tshark", "-r", pcap, "-o", "tcp.relative_sequence_numbers:TRUE",
                          "-Y", "tcp.analysis.retransmission", "-T", "fields",
                          "-e", "frame.number"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, timeout=60, check=True).stdout
    return [int(x) for x in out.split()]


def link_type(pcap):
    with open(pcap, "rb") as f:
        hdr = f.read(24)
    magic = hdr[:4]
    order = "<" if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1") else ">"
    import struct
    return struct.unpack(order + "I", hdr[20:24])[0] & 0x0FFFFFFF


def nagle_stalls(rows):
    """Per exchange: (ACK delay after first data, data-after-ACK gap)."""
    server = "198.18.0.1"
    out = []
    for i, r in enumerate(rows):
        if r["src"] != server or r["len"] == 0:
            continue
        end = r["seq"] + r["len"]
        # next packet from the client must be a pure ACK of exactly this data,
        # and the next server packet after it must carry data
        nxt = next((x for x in rows[i + 1:] if x["src"] != server), None)
        if nxt is None or nxt["len"] != 0 or nxt["ack"] != end or nxt["fin"]:
            continue
        data = next((x for x in rows[i + 1:] if x["src"] == server and x["n"] > nxt["n"]), None)
        if data is None or data["len"] == 0 or data["seq"] != end:
            continue
        # ... and the client must not have sent anything (a new request) in between:
        # then the ACK is what released the held data
        if any(x["src"] != server and x["len"] > 0 for x in rows if nxt["n"] < x["n"] < data["n"]):
            continue
        out.append((nxt["t"] - r["t"], data["t"] - nxt["t"]))
    return out


def tshark_syn_mss(pcap):
    """{src: MSS announced in its SYN}."""
    out = subprocess.run(["tshark", "-r", pcap, "-Y", "tcp.flags.syn == 1", "-T", "fields",
                          "-e", "ip.src", "-e", "tcp.options.mss_val"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         timeout=60, check=True).stdout
    mss = {}
    for line in out.splitlines():
        v = line.split("\t")
        if len(v) == 2 and v[1]:
            mss[v[0]] = int(v[1].split(",")[0])
    return mss


def header_body_responses(rows, full):
    """Each server response of wan_header_body_server.py, from the packets.

    A response starts with the first server data segment after client data. For each:
    its data segments, and -- when it is the held shape -- (header, full segment, the
    client's first ACK of everything sent, the tail): a small segment, a full one right
    after it, a pure ACK of exactly both, then a sub-MSS tail starting where the full
    segment ended, with no client data in between. When the client ACKed the header
    alone before the tail (quickack mode), that ACK is what released the tail: recorded
    as "header_ack" instead."""
    server = "198.18.0.1"
    responses = []
    cur = None
    for r in rows:
        if r["syn"]:
            continue
        if r["src"] != server:
            if r["len"] > 0:
                cur = None
            elif cur is not None:
                cur["client_acks"].append(r)
            continue
        if r["len"] == 0:
            continue
        if cur is None:
            cur = {"segs": [], "client_acks": []}
            responses.append(cur)
        cur["segs"].append(r)
    out = []
    for resp in responses:
        segs = resp["segs"]
        info = {"segs": segs, "held": None, "first_ack": None}
        if len(segs) >= 1:
            end_all = segs[-1]["seq"] + segs[-1]["len"]
            info["first_ack"] = next((a for a in resp["client_acks"] if a["ack"] >= end_all
                                      and a["n"] > segs[-1]["n"]), None)
        if len(segs) == 3:
            h, f, tail = segs
            f_end = f["seq"] + f["len"]
            ack = next((a for a in resp["client_acks"]
                        if a["ack"] >= f_end and f["n"] < a["n"] < tail["n"]), None)
            hdr_ack = next((a for a in resp["client_acks"]
                            if a["ack"] == h["seq"] + h["len"] and h["n"] < a["n"] < tail["n"]),
                           None)
            shape = (h["len"] < full and f["len"] == full and tail["len"] < full
                     and f["seq"] == h["seq"] + h["len"] and tail["seq"] == f_end
                     and f["t"] - h["t"] < 0.001)
            if shape and hdr_ack is not None:
                # quickack: the header alone was ACKed at once, and that ACK released the
                # tail (at the client end it even precedes the full segment)
                info["header_ack"] = (h, f, hdr_ack, tail)
            elif shape and ack is not None and ack["ack"] == f_end and not ack["fin"]:
                info["held"] = (h, f, ack, tail)
        out.append(info)
    return out


def answers_per_segment(pcap, src):
    """How many answers ('.' line terminators) each data segment from src carries."""
    out = subprocess.run(["tshark", "-r", pcap, "-Y", "ip.src==%s && tcp.len>0" % src,
                          "-T", "fields", "-e", "tcp.payload"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True, timeout=60, check=True).stdout
    counts = []
    for line in out.split():
        b = bytes.fromhex(line.replace(":", ""))
        counts.append(b.count(b"\r\n.\r\n") + (1 if b.startswith(b".\r\n") else 0))
    return counts


def handshake_rtt(rows, side):
    """The RTT the capture point sees in the handshake."""
    syn = next(r for r in rows if r["syn"] and r["src"] == "198.18.0.2")
    synack = next(r for r in rows if r["syn"] and r["src"] == "198.18.0.1")
    ack = next(r for r in rows if r["n"] > synack["n"] and r["src"] == "198.18.0.2")
    if side == "client":
        return synack["t"] - syn["t"], (syn["n"], synack["n"])
    return ack["t"] - synack["t"], (synack["n"], ack["n"])


def ms(x):
    return "%.1f" % (x * 1e3)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name")
    p.add_argument("--pcap", required=True)
    p.add_argument("--client-log", required=True)
    p.add_argument("--wanlink-log", required=True)
    p.add_argument("--cmd", required=True, help="the wanlink command line, for the comment")
    a = p.parse_args()
    if a.name not in SPECS:
        fail("unknown capture %s" % a.name)
    side, rtt_ms, lines, physics = SPECS[a.name]
    client = open(a.client_log).read()
    wan = open(a.wanlink_log).read()
    size = os.path.getsize(a.pcap)
    lt = link_type(a.pcap)
    if lt != 101 and lt != 12:
        fail("link type %d, expected raw IP (101; libpcap may write 12)" % lt)
    if size > 300 * 1024:
        fail("capture is %d bytes (> 300 KB)" % size)
    m = re.search(r"^summary .*$", client, re.M)
    if not m:
        fail("client printed no summary line")
    summary = m.group(0)
    lat = [float(x) for x in re.findall(r"^exchange \d+ ms ([0-9.]+)$", client, re.M)]
    connected = re.search(r"^connected ms ([0-9.]+)$", client, re.M)
    connected = float(connected.group(1)) if connected else None
    kv = dict(x.split("=", 1) for x in summary.split()[1:])
    stalled = int(kv.get("stalled", "0"))
    rows = tshark_rows(a.pcap)
    retrans = tshark_retransmissions(a.pcap)
    syns = [r for r in rows if r["syn"] and r["src"] == "198.18.0.2"]
    if len(syns) < 1 or len({r["src"] for r in rows}) != 2:
        fail("expected one connection between 198.18.0.1 and 198.18.0.2")
    facts = []

    if "header_body" in a.name:
        stalls_at_least = None
        mss = tshark_syn_mss(a.pcap)
        if set(mss) != {"198.18.0.1", "198.18.0.2"}:
            fail("no MSS in both SYNs: %s" % mss)
        full = min(mss.values()) - 12    # timestamps are on (every wan capture)
        if full != 1448:
            fail("full segment %d, expected 1448 (1500-byte MTU, timestamps)" % full)
        rtt, rtt_frames = handshake_rtt(rows, side)
        if abs(rtt - rtt_ms / 1e3) > 0.003:
            fail("handshake RTT %.1f ms, expected ~%d" % (rtt * 1e3, rtt_ms))
        if retrans:
            fail("unexpected retransmissions %s" % retrans)
        resps = header_body_responses(rows, full)
        if len(resps) != len(lat):
            fail("%d server responses in the capture, the client measured %d"
                 % (len(resps), len(lat)))
        facts.append("tshark: SYN MSS %s -> full segment %d (timestamps); handshake RTT %s ms "
                     "(frames %d-%d)" % ("/".join(str(mss[k]) for k in sorted(mss)), full,
                                         ms(rtt), rtt_frames[0], rtt_frames[1]))
        sizes = sorted({tuple(x["len"] for x in r["segs"]) for r in resps})
        facts.append("tshark: %d responses, segment sizes per response %s" % (
            len(resps), " ".join("+".join(str(n) for n in z) for z in sizes)))
        if "fixed" in a.name:
            if stalled != 0 or max(lat) > rtt_ms + 15:
                fail("fixed run should have every exchange ~1 RTT: %s" % summary)
            if any(r["held"] or r.get("header_ack") for r in resps):
                fail("fixed run shows a held tail")
            spread = [r["segs"][-1]["t"] - r["segs"][0]["t"] for r in resps]
            if sizes != [(full, 80)] or max(spread) > 0.001:
                fail("fixed run: responses are not one full + one 80-byte segment back to back")
            r = resps[1]
            facts.append("  every response leaves whole: e.g. exchange 2, frames %d (%d B) and "
                         "%d (%d B) %s ms apart; first ACK of both: frame %d"
                         % (r["segs"][0]["n"], r["segs"][0]["len"], r["segs"][1]["n"],
                            r["segs"][1]["len"], "%.3f" % (spread[1] * 1e3),
                            r["first_ack"]["n"] if r["first_ack"] else -1))
            facts.append("  per-exchange latency median %s ms = 1 RTT" % (
                "%.1f" % statistics.median(lat)))
        else:
            held = [r["held"] for r in resps if r["held"]]
            if stalled < 25 or kv.get("stall_ms") != "45":
                fail("header/body run: only %d of %d exchanges > 45 ms" % (stalled, len(lat)))
            if len(held) < 25:
                fail("header/body run: only %d held tails in the capture" % len(held))
            hold = sorted(t["t"] - f["t"] for h, f, ack, t in held)
            ack_after = sorted(ack["t"] - f["t"] for h, f, ack, t in held)
            tail_after = sorted(t["t"] - ack["t"] for h, f, ack, t in held)
            if not all(0.75 * rtt <= x <= 1.25 * rtt for x in hold):
                fail("a hold is not ~1 RTT: %s" % [ms(x) for x in hold])
            facts.append("tshark: %d of %d responses are header (small) + full segment, then the "
                         "client's pure ACK of exactly both, then the sub-MSS tail" % (
                             len(held), len(resps)))
            facts.append("  hold (full segment -> tail) median %s ms (min %s, max %s); full "
                         "segment -> ACK median %s ms (max %s); ACK -> tail median %s ms "
                         "(min %s, max %s)" % (
                             ms(statistics.median(hold)), ms(hold[0]), ms(hold[-1]),
                             "%.3f" % (statistics.median(ack_after) * 1e3),
                             "%.3f" % (ack_after[-1] * 1e3),
                             "%.3f" % (statistics.median(tail_after) * 1e3),
                             "%.3f" % (tail_after[0] * 1e3), "%.3f" % (tail_after[-1] * 1e3)))
            h, f, ack, t = held[0]
            i = next(k for k, r in enumerate(resps) if r["held"] is held[0]) + 1
            facts.append("  e.g. exchange %d: frame %d header %d B at %s s, frame %d %d B +%s ms,"
                         " frame %d client pure ACK (relative ack %d) +%s ms, frame %d tail %d B +%s ms" % (
                             i, h["n"], h["len"], "%.6f" % h["t"], f["n"], f["len"],
                             "%.3f" % ((f["t"] - h["t"]) * 1e3), ack["n"], ack["ack"],
                             "%.3f" % ((ack["t"] - h["t"]) * 1e3), t["n"], t["len"],
                             "%.3f" % ((t["t"] - h["t"]) * 1e3)))
            qa = [(k + 1, r["header_ack"]) for k, r in enumerate(resps) if r.get("header_ack")]
            for k, (h, f, hack, t) in qa:
                facts.append("  exchange %d (quickack): frame %d ACKs the header alone (relative ack %d) "
                             "+%s ms after it; the tail (frame %d) follows that ACK by %s ms" % (
                                 k, hack["n"], hack["ack"], "%.3f" % ((hack["t"] - h["t"]) * 1e3),
                                 t["n"], "%.3f" % ((t["t"] - hack["t"]) * 1e3)))
            for k, r in enumerate(resps):
                if r["held"] or r.get("header_ack"):
                    continue
                segs = r["segs"]
                facts.append("  exchange %d not of that shape: frames %s, %s B, gaps %s ms" % (
                    k + 1, "/".join(str(x["n"]) for x in segs),
                    "+".join(str(x["len"]) for x in segs),
                    "/".join("%.3f" % ((b["t"] - a["t"]) * 1e3) for a, b in zip(segs, segs[1:]))))
            facts.append("  per-exchange latency median %s ms = 2 RTT (stalled = > 45 ms = "
                         "1.5 RTT)" % ("%.1f" % statistics.median(lat)))
    elif "nagle" in a.name:
        if stalled < 20 or len(lat) < 30 or kv.get("stall_ms") != "80":
            fail("Nagle run: only %d of %d exchanges stalled" % (stalled, len(lat)))
        st = nagle_stalls(rows)
        if len(st) < 20:
            fail("Nagle run: only %d ACK-releases-data patterns in the capture" % len(st))
        ackd = sorted(x[0] for x in st)
        gap = sorted(x[1] for x in st)
        facts.append("tshark: %d exchanges show server data -> silence -> client pure ACK of "
                     "exactly that data" % len(st))
        facts.append("  -> the held data; first-data-to-ACK median %s ms (min %s, max %s), "
                     "ACK-to-held-data median %s ms" % (ms(statistics.median(ackd)), ms(ackd[0]),
                                                       ms(ackd[-1]), ms(statistics.median(gap))))
        facts.append("  (stalled = exchange > 80 ms = 2 RTT + 20 ms: exchange 1 takes 2 RTT, the "
                     "client still in quickack mode ACKs line 1 at once)")
        if side == "client":
            facts.append("  (at the client: the ACK delay is the client's ato; the held data "
                         "arrives one RTT after the ACK leaves)")
        else:
            facts.append("  (at the server: RTT + client ato until the ACK arrives; the held "
                         "data leaves right after it)")
        stalls_at_least = stalled - max(2, stalled // 10)
    elif a.name in ("wan15ms_fixed", "wan15ms_rtt_bound"):
        if stalled != 0 or not lat or max(lat) > rtt_ms + 15:
            fail("RTT-bound run should have every exchange ~1 RTT: %s" % summary)
        if retrans:
            fail("unexpected retransmissions %s" % retrans)
        stalls_at_least = None
    elif a.name == "wan15ms_pipelined":
        total = float(kv["total_ms"])
        if total > 3 * rtt_ms:
            fail("pipelined batch took %.1f ms (> 3 RTT)" % total)
        data_c2s = [r for r in rows if r["src"] == "198.18.0.2" and r["len"] > 0]
        data_s2c = [r for r in rows if r["src"] == "198.18.0.1" and r["len"] > 0]
        facts.append("tshark: %d client data segment(s), %d server data segment(s)"
                     % (len(data_c2s), len(data_s2c)))
        stalls_at_least = None
    elif a.name == "wan15ms_window4":
        if retrans:
            fail("unexpected retransmissions %s" % retrans)
        # from the packets: every request and response segment, and how many requests were
        # in flight (written, not yet answered) when each response arrived
        reqs = [r for r in rows if r["src"] == "198.18.0.2" and r["len"] > 0]
        resps = [r for r in rows if r["src"] == "198.18.0.1" and r["len"] > 0]
        answers = answers_per_segment(a.pcap, "198.18.0.1")
        alone = sum(1 for n in answers if n == 1)
        if len(reqs) != int(kv["count"]) or sum(answers) != int(kv["count"]) \
                or alone < 0.9 * len(answers):
            fail("expected one segment per request and (mostly) per answer: %d requests, "
                 "answers per segment %s" % (len(reqs), answers))
        done = [sum(answers[:i]) for i in range(len(answers))]
        in_flight = [sum(1 for q in reqs if q["t"] < s["t"]) - d for s, d in zip(resps, done)]
        gaps = [next(s["t"] for s in resps if s["t"] > q["t"]) - q["t"]
                for q in reqs if any(s["t"] > q["t"] for s in resps)]
        rtt, rtt_frames = handshake_rtt(rows, side)
        if min(in_flight[4:-3]) < 3 or statistics.median(gaps) > rtt / 2:
            fail("the window did not stay open: in flight %s" % in_flight)
        facts.append("tshark: %d request segments, %d response segments, no retransmission; "
                     "handshake RTT %s ms (frames %d-%d)" % (len(reqs), len(resps), ms(rtt),
                                                             rtt_frames[0], rtt_frames[1]))
        facts.append("  %d of %d response segments carry exactly one answer (the others two: "
                     "two requests reached the server together)" % (alone, len(answers)))
        facts.append("  requests in flight when a response arrives: min %d, median %d, max %d "
                     "(responses 5 to N-3; the window drains at the end)" % (min(in_flight[4:-3]),
                                               statistics.median(in_flight[4:-3]),
                                               max(in_flight[4:-3])))
        facts.append("  request -> next response at the client: median %s ms, max %s ms "
                     "(a sequential exchange takes >= 1 RTT)" % (ms(statistics.median(gaps)),
                                                                 ms(max(gaps))))
        stalls_at_least = None
    elif a.name == "wan15ms_browser_pool":
        if retrans:
            fail("unexpected retransmissions %s" % retrans)
        if int(kv["images"]) < 100:
            fail("the page loaded only %s images" % kv["images"])
        conns = {}
        for r in rows:
            if r["src"] == "198.18.0.2" and r["len"] > 0:
                conns.setdefault(r["sport"], []).append(r)
        per = sorted(len(v) for v in conns.values())
        spans = sorted((v[0]["t"], v[-1]["t"]) for v in conns.values())
        overlap = sum(1 for i, (a0, a1) in enumerate(spans)
                      if any(b0 < a1 and a0 < b1 for j, (b0, b1) in enumerate(spans) if j != i))
        if len(conns) < 2 or overlap < len(conns) - 1:
            fail("expected parallel keep-alive connections: %d, %d overlapping" % (
                len(conns), overlap))
        rtt, rtt_frames = handshake_rtt(rows, side)
        facts.append("tshark: %d connections carrying requests, %d of them overlapping in time; "
                     "request segments per connection %s; no retransmission" % (
                         len(conns), overlap, "/".join(str(n) for n in per)))
        facts.append("  first handshake RTT %s ms (frames %d-%d); page load (client) %s ms"
                     % (ms(rtt), rtt_frames[0], rtt_frames[1], kv["total_ms"]))
        stalls_at_least = None
    elif a.name in ("wan_rto_stall", "wan_tlp_only"):
        if not retrans:
            fail("no retransmission flagged by tshark")
        waits = []
        for n in retrans:
            r = next(x for x in rows if x["n"] == n)
            first = next(x for x in rows if x["src"] == r["src"] and x["seq"] == r["seq"]
                         and x["len"] > 0)
            prev = max((x for x in rows if x["n"] < n), key=lambda x: x["n"])
            waits.append((n, r["t"] - first["t"], r["t"] - prev["t"]))
            facts.append("tshark: frame %d tcp.analysis.retransmission seq=%d len=%d: %s ms after "
                         "the first transmission (frame %d), %s ms of silence before it"
                         % (n, r["seq"], r["len"], ms(r["t"] - first["t"]), first["n"],
                            ms(r["t"] - prev["t"])))
        longest = max(w[1] for w in waits)
        if a.name == "wan_rto_stall":
            if longest < 0.200 or max(w[2] for w in waits) < 0.150 or stalled < 1:
                fail("no >= 200 ms wait before a retransmission")
            stalls_at_least = 1
        else:
            if longest >= 0.100 or stalled != 0:
                fail("TLP run waited %.1f ms" % (longest * 1e3))
            stalls_at_least = None
    elif a.name == "wan_syn_retry":
        if len(syns) < 2 or syns[1]["t"] - syns[0]["t"] < 0.9 or (connected or 0) < 900:
            fail("expected a SYN retry after ~1 s")
        facts.append("tshark: SYN at %s ms, retried SYN at %s ms (+%s ms); the client's connect() "
                     "took %.1f ms" % (ms(syns[0]["t"]), ms(syns[1]["t"]),
                                       ms(syns[1]["t"] - syns[0]["t"]), connected))
        stalls_at_least = None
    else:
        fail("no check for %s" % a.name)

    drops = re.findall(r"^wanlink: (drop .*)$", wan, re.M)
    acc = re.search(r"^wanlink: delay accuracy.*$", wan, re.M)
    cc = re.search(r"tcp cc ([^,\s]+)", wan)
    uname = os.uname()
    out = []
    out.append("# %s.pcap -- recorded by specimens/wan-record.sh with specimens/wanlink.py" % a.name)
    out.append("# link: two network namespaces joined by TUN devices through a userspace "
               "forwarder, %d ms RTT" % rtt_ms)
    out.append("#   (%.1f ms one-way delay each way); server 198.18.0.1 (namespace A), "
               "client 198.18.0.2 (B)" % (rtt_ms / 2))
    out.append("# captured on tun0 at the %s side: LINKTYPE_RAW (101), tcpdump -s 256, "
               "%d bytes" % (side.upper(), size))
    out.append("# kernel %s, TCP congestion control %s, timestamps+SACK on" % (
        uname.release, cc.group(1) if cc else "?"))
    out.append("# command: %s" % a.cmd)
    for d in drops:
        out.append("# wanlink %s" % d)
    if acc:
        out.append("# %s" % acc.group(0).replace("wanlink: ", "wanlink "))
    out.append("# client measured: %s" % summary)
    if connected is not None:
        out.append("#   connect() took %.1f ms" % connected)
    if lat:
        out.append("#   per-exchange ms: %s" % " ".join("%.1f" % x for x in lat))
    for f in facts:
        out.append("# " + f)
    out.append("#")
    for c in physics:
        out.append("# " + c)
    out.append("# connection_churn, zero_window: one connection, receive windows never near "
               "full." if "must_not connection_churn" in lines else "#")
    out.extend(lines)
    if stalls_at_least is not None:
        out.append("stalls_at_least %d" % stalls_at_least)
    out.append("rtt_ms %d" % rtt_ms)
    expect = os.path.splitext(a.pcap)[0] + ".expect"
    with open(expect, "w") as f:
        f.write("\n".join(out) + "\n")
    print("wan_check: %s ok (%d bytes) -> %s" % (a.name, size, os.path.basename(expect)))


if __name__ == "__main__":
    main()
