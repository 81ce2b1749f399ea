#!/usr/bin/env python3
"""churn_client.py: connection churn (PHYSICS §8), against `lineserver.py --fixed`.

Default mode, THE PATHOLOGY: a NEW TCP connection for every request. Each request pays the
three-way handshake before it and the FIN exchange after it, and leaves a TIME_WAIT socket
behind on the client. On loopback each handshake costs little; over a real path it is one
extra RTT per request (plus TLS, if any), and at rate it exhausts ephemeral ports.

--fixed, the twin: one connection, reused for every request (keep-alive).

The requests and responses are the same line protocol as lineclient.py (one send per
request, response read to the `.` terminator). Each exchange is timed including the connect
and the close. Prints one line per exchange and a summary. Bounded: --count requests, socket
timeouts.
"""

import argparse
import socket
import time

from latency import print_exchange, print_summary
from lineclient import read_response


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, default=120)
    p.add_argument("--fixed", action="store_true", help="reuse one connection for all requests")
    p.add_argument("--timeout", type=float, default=5.0)
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args()

    latencies = []
    addr = (args.host, args.port)
    if args.fixed:
        with socket.create_connection(addr, timeout=args.timeout) as sock:
            pending = b""
            for i in range(1, args.count + 1):
                t0 = time.perf_counter()
                sock.sendall(f"GET {i}\r\n".encode())
                _, pending = read_response(sock, pending)
                latencies.append((time.perf_counter() - t0) * 1000.0)
                print_exchange(i, latencies[-1], args.quiet)
    else:
        for i in range(1, args.count + 1):
            t0 = time.perf_counter()
            with socket.create_connection(addr, timeout=args.timeout) as sock:
                sock.sendall(f"GET {i}\r\n".encode())
                read_response(sock, b"")
            latencies.append((time.perf_counter() - t0) * 1000.0)
            print_exchange(i, latencies[-1], args.quiet)
    print_summary(latencies)


if __name__ == "__main__":
    main()
