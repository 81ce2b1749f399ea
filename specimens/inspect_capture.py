#!/usr/bin/env python3
"""inspect_capture.py: an independent look at a capture through tshark, used to check that a
recording shows the physics before writing its .expect file. Not part of tcpdoctor and not
a model for it: it only counts the textbook signatures from PHYSICS.md so a human can compare.

    specimens/inspect_capture.py testdata/captures/nagle_perline_server.pcap [...]

Per TCP connection (client = sender of the SYN) and direction it prints:
  data segments, payload bytes, median payload, segments per turn (a turn = consecutive data
  segments in one direction), and
  stalls: the §3 signature: A->B data, then >= 30 ms with no packet on the connection, then a
          pure ACK from B covering all of A's bytes, then A->B data within 1 ms of that ACK.
  zero-window episodes of the receiver of that direction (from a window-0 advertisement to the
  next non-zero one) and how many lasted >= 10 ms; tshark's retransmission count.
"""

import statistics
import subprocess
import sys
from collections import defaultdict

FIELDS = [
    "frame.number", "frame.time_relative", "tcp.stream", "tcp.srcport", "tcp.dstport",
    "tcp.seq", "tcp.ack", "tcp.len", "tcp.flags.syn", "tcp.flags.ack", "tcp.flags.fin",
    "tcp.flags.reset", "tcp.window_size", "tcp.analysis.retransmission",
]
STALL_GAP = 0.030
FOLLOW = 0.001


def flag(v):
    return v in ("1", "True", "true")


def read_packets(path):
    cmd = ["tshark", "-r", path, "-Y", "tcp", "-T", "fields", "-E", "occurrence=f"]
    for f in FIELDS:
        cmd += ["-e", f]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    pkts = []
    for line in out.splitlines():
        v = dict(zip(FIELDS, line.split("\t")))
        pkts.append({
            "no": int(v["frame.number"]), "t": float(v["frame.time_relative"]),
            "stream": int(v["tcp.stream"]), "src": int(v["tcp.srcport"]), "dst": int(v["tcp.dstport"]),
            "seq": int(v["tcp.seq"] or 0), "ack": int(v["tcp.ack"] or 0), "len": int(v["tcp.len"] or 0),
            "syn": flag(v["tcp.flags.syn"]), "ackf": flag(v["tcp.flags.ack"]),
            "fin": flag(v["tcp.flags.fin"]), "rst": flag(v["tcp.flags.reset"]),
            "win": int(v["tcp.window_size"] or 0), "retrans": v["tcp.analysis.retransmission"] != "",
        })
    return pkts


def inspect(path):
    pkts = read_packets(path)
    streams = defaultdict(list)
    for p in pkts:
        streams[p["stream"]].append(p)
    print(f"== {path}: {len(pkts)} TCP packets, {len(streams)} connections, "
          f"{pkts[-1]['t'] if pkts else 0:.3f} s")
    totals = defaultdict(lambda: defaultdict(int))
    for sid, ps in streams.items():
        syn = next((p for p in ps if p["syn"] and not p["ackf"]), None)
        client = syn["src"] if syn else max(ps[0]["src"], ps[0]["dst"])
        name = lambda p: "client_to_server" if p["src"] == client else "server_to_client"
        per_dir = defaultdict(lambda: {"segs": [], "turns": [], "stalls": [], "zw": [], "retrans": 0})
        sent_end = {}  # src port -> highest seq end sent
        zw_start = {}
        turn_dir, turn_len = None, 0
        for k, p in enumerate(ps):
            d = name(p)
            if p["len"] > 0:
                per_dir[d]["segs"].append(p["len"])
                sent_end[p["src"]] = max(sent_end.get(p["src"], 0), p["seq"] + p["len"])
                if p["retrans"]:
                    per_dir[d]["retrans"] += 1
                if turn_dir == d:
                    turn_len += 1
                else:
                    if turn_dir:
                        per_dir[turn_dir]["turns"].append(turn_len)
                    turn_dir, turn_len = d, 1
            # Zero window advertised by p's sender stalls the opposite direction.
            stalled = "server_to_client" if d == "client_to_server" else "client_to_server"
            if not p["syn"] and not p["rst"]:
                if p["win"] == 0 and p["src"] not in zw_start:
                    zw_start[p["src"]] = p
                elif p["win"] > 0 and p["src"] in zw_start:
                    z = zw_start.pop(p["src"])
                    per_dir[stalled]["zw"].append((p["t"] - z["t"], z["no"]))
            # Stall signature: pure ACK after silence, covering the peer's data, data follows.
            if k >= 2 and p["len"] == 0 and p["ackf"] and not (p["syn"] or p["fin"] or p["rst"]):
                prev, nxt = ps[k - 1], ps[k + 1] if k + 1 < len(ps) else None
                peer = p["dst"]
                if (p["t"] - prev["t"] >= STALL_GAP and prev["src"] == peer and prev["len"] > 0
                        and p["ack"] == sent_end.get(peer) and nxt and nxt["src"] == peer
                        and nxt["len"] > 0 and nxt["t"] - p["t"] <= FOLLOW):
                    per_dir[name(prev)]["stalls"].append((p["t"] - prev["t"], prev["no"], p["no"], nxt["no"]))
        if turn_dir:
            per_dir[turn_dir]["turns"].append(turn_len)
        for d in ("client_to_server", "server_to_client"):
            s = per_dir[d]
            if not s["segs"]:
                continue
            for key in ("segs", "stalls", "retrans"):
                totals[d][key] += len(s[key]) if key != "retrans" else s[key]
            totals[d]["zw_long"] += sum(1 for dur, _ in s["zw"] if dur >= 0.010)
            if len(streams) > 12 and sid >= 3:
                continue  # many connections: show the first three, total the rest
            line = (f"  conn {sid} ports {client}<->{ps[0]['dst'] if ps[0]['src'] == client else ps[0]['src']} {d}: "
                    f"{len(s['segs'])} data segs, {sum(s['segs'])} B, median payload "
                    f"{statistics.median(s['segs']):.0f} B, segs/turn median "
                    f"{statistics.median(s['turns']) if s['turns'] else 0:.0f} max {max(s['turns'], default=0)}, "
                    f"stalls {len(s['stalls'])}")
            if s["stalls"]:
                gaps = sorted(g for g, *_ in s["stalls"])
                ex = s["stalls"][len(s["stalls"]) // 2]
                line += (f" (gap median {statistics.median(gaps) * 1000:.1f} ms; e.g. data #{ex[1]}, "
                         f"ACK #{ex[2]} after {ex[0] * 1000:.1f} ms, data #{ex[3]})")
            if s["zw"]:
                durs = sorted(dur for dur, _ in s["zw"])
                line += (f", zero-window episodes {len(durs)} (>=10 ms: "
                         f"{sum(1 for x in durs if x >= 0.010)}; median {statistics.median(durs) * 1000:.1f} ms, "
                         f"max {durs[-1] * 1000:.1f} ms; first at #{s['zw'][0][1]})")
            if s["retrans"]:
                line += f", retransmissions {s['retrans']}"
            print(line)
    for d, t in totals.items():
        print(f"  total {d}: {t['segs']} data segs, stalls {t['stalls']}, "
              f"zero-window >=10 ms {t['zw_long']}, retransmissions {t['retrans']}")


if __name__ == "__main__":
    for path in sys.argv[1:]:
        inspect(path)
