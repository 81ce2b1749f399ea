#!/usr/bin/env python3
"""mc_client.py: a small, well-behaved memcached client (text protocol) for a healthy capture.

One connection; for i in 1..N it sends `set k<i> 0 0 <len>\\r\\n<value>\\r\\n` and reads
`STORED`, then `get k<i>\\r\\n` and reads the `VALUE ... END` reply. Every command is built
in user space and sent with ONE sendall() (Nagle left on: it never holds anything, because
nothing is ever written behind unacknowledged data). memcached answers each command with one
sendmsg(). Each set and each get is timed; prints one line per exchange and a summary in the
format of specimens/latency.py. Bounded: N commands, 5 s socket timeout.
"""

import argparse
import os
import socket
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from latency import print_exchange, print_summary  # noqa: E402


def read_until(sock, buf, marker):
    while marker not in buf:
        data = sock.recv(65536)
        if not data:
            raise ConnectionError("memcached closed the connection")
        buf += data
    end = buf.index(marker) + len(marker)
    return buf[:end], buf[end:]


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--count", type=int, default=25, help="set+get pairs")
    p.add_argument("--value-bytes", type=int, default=100)
    args = p.parse_args()

    lat = []
    n = 0
    with socket.create_connection((args.host, args.port), timeout=5.0) as s:
        buf = b""
        for i in range(1, args.count + 1):
            value = (b"v%d-" % i).ljust(args.value_bytes, b"x")
            t0 = time.perf_counter()
            s.sendall(b"set k%d 0 0 %d\r\n%s\r\n" % (i, len(value), value))
            reply, buf = read_until(s, buf, b"\r\n")
            if reply != b"STORED\r\n":
                raise SystemExit("unexpected reply to set: %r" % reply)
            n += 1
            lat.append((time.perf_counter() - t0) * 1000)
            print_exchange(n, lat[-1])
            t0 = time.perf_counter()
            s.sendall(b"get k%d\r\n" % i)
            reply, buf = read_until(s, buf, b"END\r\n")
            if value not in reply:
                raise SystemExit("unexpected reply to get: %r" % reply[:80])
            n += 1
            lat.append((time.perf_counter() - t0) * 1000)
            print_exchange(n, lat[-1])
        s.sendall(b"quit\r\n")
    print_summary(lat)


if __name__ == "__main__":
    main()
