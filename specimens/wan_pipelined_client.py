#!/usr/bin/env python3
"""wan_pipelined_client: the pipelined twin of wan_client.py.

Same N commands, but all requests are written at once (one send), then all N
responses are read. The fix for a round-trip-bound protocol (PHYSICS.md sec. 5):
the whole batch costs a few RTTs instead of N.

Prints "response <i> ms <time since the batch was sent>" per response and
  summary count=N total_ms=.. (exchanges are not separable, so no per-command latency)

--window K: a sliding window instead of one batch, as pipelining client libraries keep one:
K requests written at once, then one new request written as each response arrives, so K are
always in flight (TCP_NODELAY, as such libraries set it). --spacing-ms S writes the first K
requests S ms apart (requests arriving from an application at a rate) instead of at once; the
window then keeps that spacing, and each response arrives alone. Each request is then answered about
one round trip after it was written, but a response arrives every RTT/K: at the client's end
one request and the next response are less than a round trip apart, overlapped exchanges,
not sequential ones. Prints "response <i> ms <since its request was written>".
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
    p.add_argument("--window", type=int, default=0,
                   help="keep K requests in flight (a sliding window) instead of one batch")
    p.add_argument("--spacing-ms", type=float, default=0.0,
                   help="with --window: write the first K requests this far apart")
    a = p.parse_args()
    if a.window:
        return windowed(a)
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


def windowed(a):
    deadline = time.monotonic() + a.deadline
    t_conn = time.perf_counter()
    sock = socket.create_connection((a.host, a.port), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    print("connected ms %.3f" % ((time.perf_counter() - t_conn) * 1e3), flush=True)
    req = lambda i: ("%s %d\r\n" % (a.verb, i)).encode()
    first = min(a.window, a.count)
    t0 = time.perf_counter()
    sent_at = {}
    if a.spacing_ms > 0:
        for i in range(1, first + 1):
            time.sleep(max(0.0, t0 + (i - 1) * a.spacing_ms / 1e3 - time.perf_counter()))
            sock.sendall(req(i))
            sent_at[i] = time.perf_counter()
    else:
        sent_at = {i: t0 for i in range(1, first + 1)}
        sock.sendall(b"".join(req(i) for i in range(1, first + 1)))
    nxt, buf, lat = first + 1, b"", []
    for i in range(1, a.count + 1):
        _, buf = read_response(sock, buf, deadline)
        now = time.perf_counter()
        if nxt <= a.count:
            sock.sendall(req(nxt))
            sent_at[nxt] = time.perf_counter()
            nxt += 1
        lat.append((now - sent_at[i]) * 1e3)
        print("response %d ms %.3f" % (i, lat[-1]), flush=True)
    total = (time.perf_counter() - t0) * 1e3
    sock.close()
    print("summary count=%d window=%d total_ms=%.1f per_command_ms=%.2f median_ms=%.2f" % (
        a.count, a.window, total, total / a.count, sorted(lat)[len(lat) // 2]), flush=True)


if __name__ == "__main__":
    sys.exit(main())
