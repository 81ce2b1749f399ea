#!/usr/bin/env python3
"""lineclient.py: sequential (or pipelining) client for lineserver.py and aio_lineserver.py.

Connects once, then for i in 1..N sends `GET <i>\\r\\n` with one send() and reads until the
terminator line `.\\r\\n`. Each exchange is timed from just before the send to the moment the
terminator arrives. Prints one line per exchange, a summary (count, median, p90, share of
exchanges >= 30 ms) and the wall time for all N.

--pipeline K sends K requests in one send() and then reads their K responses (the fix for a
round-trip-bound client, PHYSICS §5); each exchange is then timed from the send of its batch.
Sequential (K = 1, the default) over a path with round-trip time R costs at least N x R.

The client itself is well behaved (whole request in one write); whatever latency it measures
comes from the server or from whatever sits between them. It exits by itself: a bounded
number of requests, and a socket timeout so a silent server cannot hang it.
"""

import argparse
import socket
import time

from latency import print_exchange, print_summary

TERMINATOR = b"\r\n.\r\n"


def read_response(sock, pending):
    """Read until the terminator line; return (response, leftover bytes)."""
    buf = pending
    while True:
        # A response may also consist of the terminator alone.
        if buf.startswith(b".\r\n"):
            return buf[:3], buf[3:]
        end = buf.find(TERMINATOR)
        if end >= 0:
            end += len(TERMINATOR)
            return buf[:end], buf[end:]
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("server closed the connection mid-response")
        buf += data


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, default=30, help="number of sequential requests")
    p.add_argument("--timeout", type=float, default=5.0, help="socket timeout (s)")
    p.add_argument("--pipeline", type=int, default=1, metavar="K", help="requests per send (default 1)")
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    args = p.parse_args()

    per_send = max(1, args.pipeline)
    latencies = []
    start = time.perf_counter()
    with socket.create_connection((args.host, args.port), timeout=args.timeout) as sock:
        pending = b""
        for first in range(1, args.count + 1, per_send):
            batch = range(first, min(first + per_send, args.count + 1))
            t0 = time.perf_counter()
            sock.sendall(b"".join(f"GET {i}\r\n".encode() for i in batch))
            for i in batch:
                _, pending = read_response(sock, pending)
                ms = (time.perf_counter() - t0) * 1000.0
                latencies.append(ms)
                print_exchange(i, ms, args.quiet)
    wall_ms = (time.perf_counter() - start) * 1000.0
    print_summary(latencies)
    print(f"wall_ms={wall_ms:.1f} for {args.count} requests, {per_send} per send")


if __name__ == "__main__":
    main()
