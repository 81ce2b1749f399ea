#!/usr/bin/env python3
"""lineclient.py: sequential client for lineserver.py (and the asyncio per-line server).

Connects once, then for i in 1..N sends `GET <i>\\r\\n` with one send() and reads until the
terminator line `.\\r\\n`. Each exchange is timed from just before the send to the moment the
terminator arrives. Prints one line per exchange and a summary (count, median, p90, share of
exchanges >= 30 ms).

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
    p.add_argument("--quiet", action="store_true", help="print only the summary")
    args = p.parse_args()

    latencies = []
    with socket.create_connection((args.host, args.port), timeout=args.timeout) as sock:
        pending = b""
        for i in range(1, args.count + 1):
            t0 = time.perf_counter()
            sock.sendall(f"GET {i}\r\n".encode())
            _, pending = read_response(sock, pending)
            ms = (time.perf_counter() - t0) * 1000.0
            latencies.append(ms)
            print_exchange(i, ms, args.quiet)
    print_summary(latencies)


if __name__ == "__main__":
    main()
