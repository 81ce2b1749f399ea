#!/usr/bin/env python3
"""wan_pipelined_client: the pipelined twin of wan_client.py.

Same N commands, but all requests are written at once (one send), then all N
responses are read. The fix for a round-trip-bound protocol (PHYSICS.md sec. 5):
the whole batch costs a few RTTs instead of N.

Prints "response <i> ms <time since the batch was sent>" per response and
  summary count=N total_ms=.. (exchanges are not separable, so no per-command latency)
"""
import argparse
import socket
import sys
import time

from wan_client import read_response


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("host")
    p.add_argument("port", type=int)
    p.add_argument("--count", type=int, default=30)
    p.add_argument("--verb", default="GET")
    p.add_argument("--deadline", type=float, default=60.0)
    a = p.parse_args()
    deadline = time.monotonic() + a.deadline
    t_conn = time.perf_counter()
    sock = socket.create_connection((a.host, a.port), timeout=10)
    print("connected ms %.3f" % ((time.perf_counter() - t_conn) * 1e3), flush=True)
    batch = "".join("%s %d\r\n" % (a.verb, i) for i in range(1, a.count + 1)).encode()
    t0 = time.perf_counter()
    sock.sendall(batch)
    buf = b""
    for i in range(1, a.count + 1):
        _, buf = read_response(sock, buf, deadline)
        print("response %d ms %.3f" % (i, (time.perf_counter() - t0) * 1e3), flush=True)
    total = (time.perf_counter() - t0) * 1e3
    sock.close()
    print("summary count=%d total_ms=%.1f per_command_ms=%.2f request_bytes=%d" % (
        a.count, total, total / a.count, len(batch)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
