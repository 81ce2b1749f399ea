#!/usr/bin/env python3
"""wan_client: N sequential request/response exchanges, timing each.

Sends "<VERB> <i>\r\n", reads the response up to its terminating ".\r\n" line,
then sends the next: one round trip per command at least (PHYSICS.md sec. 5).
Prints one line per exchange and a summary:

  exchange <i> ms <latency>
  summary count=N total_ms=.. median_ms=.. min_ms=.. max_ms=.. stalled=K stall_ms=S
"""
import argparse
import socket
import statistics
import sys
import time


def read_response(sock, buf, deadline):
    """Return (response, rest) once buf holds a line that is exactly '.'."""
    while True:
        if buf.startswith(b".\r\n"):
            return buf[:3], buf[3:]
        i = buf.find(b"\r\n.\r\n")
        if i >= 0:
            return buf[:i + 5], buf[i + 5:]
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no complete response before the deadline")
        sock.settimeout(left)
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("server closed mid-response")
        buf += data


def summarize(lat_ms, total_ms, stall_ms):
    s = sorted(lat_ms)
    stalled = sum(1 for x in s if x > stall_ms)
    return ("summary count=%d total_ms=%.1f median_ms=%.2f min_ms=%.2f max_ms=%.2f "
            "stalled=%d stall_ms=%g" % (len(s), total_ms, statistics.median(s), s[0], s[-1],
                                        stalled, stall_ms))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--count", type=int, default=30)
    p.add_argument("--verb", default="GET")
    p.add_argument("--stall-ms", type=float, default=50.0,
                   help="an exchange slower than this counts as stalled (default 50)")
    p.add_argument("--deadline", type=float, default=60.0)
    a = p.parse_args()
    deadline = time.monotonic() + a.deadline
    t_conn = time.perf_counter()
    sock = socket.create_connection((a.host, a.port), timeout=10)
    print("connected ms %.3f" % ((time.perf_counter() - t_conn) * 1e3), flush=True)
    buf = b""
    lat = []
    t_start = time.perf_counter()
    for i in range(1, a.count + 1):
        t0 = time.perf_counter()
        sock.sendall(("%s %d\r\n" % (a.verb, i)).encode())
        _, buf = read_response(sock, buf, deadline)
        ms = (time.perf_counter() - t0) * 1e3
        lat.append(ms)
        print("exchange %d ms %.3f" % (i, ms), flush=True)
    total = (time.perf_counter() - t_start) * 1e3
    sock.close()
    print(summarize(lat, total, a.stall_ms), flush=True)


if __name__ == "__main__":
    sys.exit(main())
