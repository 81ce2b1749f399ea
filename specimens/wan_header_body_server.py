#!/usr/bin/env python3
"""wan_header_body_server: answers each request with a small header write, then a
body write a little larger than one MSS, Nagle left ON (no TCP_NODELAY).

This is PHYSICS.md sec. 9, "Nagle without delayed ACK: one RTT per message".
The header (20 bytes) leaves at once (nothing in flight). The body (one full
segment + --tail bytes) leaves as one full segment; its sub-MSS tail is held by
Nagle because the small header is still unacknowledged (Linux's Minshall check,
tcp_mss_split_point). The client has now received more than one full segment,
so it ACKs at once -- no delayed-ACK timer -- and the tail leaves when that ACK
reaches the server: every response costs 2 RTT instead of 1.

  --fixed    the fix: header and body built in user space, ONE sendall()
             (Nagle still on: the whole response leaves at once, 1448 + 80)
  --nodelay  the other fix: two writes as in the bug, TCP_NODELAY set

Protocol (one request per line, CRLF), compatible with wan_client.py:
  GET <i>  -> header "HDR <i> LEN <n>", space-padded to 20 bytes with its CRLF, then n
              bytes of body: lines of filler ending with "\r\n.\r\n"
  QUIT     -> connection closed
The body size is --body-bytes, or (default) the connection's full segment as the
kernel reports it (TCP_MAXSEG on the accepted socket: 1448 on a 1500-byte MTU
with timestamps) plus --tail. Prints "LISTENING <addr>:<port>" when ready and
"mss <n> body <n>" per connection; serves --max-conns connections, then exits.
"""
import argparse
import socket
import sys
import time

HEADER_BYTES = 20


def header(i, n):
    h = ("%-18s\r\n" % ("HDR %d LEN %d" % (i, n))).encode()
    assert len(h) == HEADER_BYTES, h
    return h


def body(i, n):
    """n bytes of printable filler in 64-byte lines, ending with "\r\n.\r\n"."""
    assert n >= 5
    fill = bytearray()
    k = 0
    while len(fill) < n - 5:
        line = ("%06d body line %03d " % (i, k)).encode()
        line += b"x" * max(0, 62 - len(line)) + b"\r\n"
        fill += line
        k += 1
    fill = bytes(fill[: n - 5])
    if fill.endswith(b"\r"):          # never let the terminator start early
        fill = fill[:-1] + b"y"
    return fill + b"\r\n.\r\n"


def serve(conn, a, deadline):
    conn.settimeout(max(0.1, deadline - time.monotonic()))
    mss = conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG)
    n = a.body_bytes or (mss + a.tail)
    print("mss %d body %d header %d fixed=%d nodelay=%d" % (
        mss, n, HEADER_BYTES, a.fixed, a.nodelay), flush=True)
    if a.nodelay:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    requests = sends = 0
    while time.monotonic() < deadline:
        try:
            data = conn.recv(65536)
        except socket.timeout:
            break
        if not data:
            break
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            words = line.decode("ascii", "replace").strip().split()
            if not words:
                continue
            if words[0].upper() == "QUIT":
                return requests, sends
            requests += 1
            try:
                i = int(words[1]) if len(words) > 1 else requests
            except ValueError:
                i = requests
            h, b = header(i, n), body(i, n)
            if a.fixed:
                conn.sendall(h + b)          # the fix: one write per response
                sends += 1
            else:
                conn.sendall(h)              # the bug: header ...
                conn.sendall(b)              # ... then body, Nagle on
                sends += 2
    return requests, sends


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=7070)
    p.add_argument("--fixed", action="store_true", help="header + body in one sendall()")
    p.add_argument("--nodelay", action="store_true", help="set TCP_NODELAY on each connection")
    p.add_argument("--tail", type=int, default=60,
                   help="body = one full segment (TCP_MAXSEG) + TAIL bytes (default 60)")
    p.add_argument("--body-bytes", type=int, default=0, help="fixed body size (overrides --tail)")
    p.add_argument("--max-conns", type=int, default=1)
    p.add_argument("--deadline", type=float, default=120.0, help="seconds before giving up")
    a = p.parse_args()
    deadline = time.monotonic() + a.deadline
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)   # Nagle ON unless --nodelay
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.host, a.port))
    srv.listen(16)
    mode = "fixed" if a.fixed else "header-body"
    print("LISTENING %s:%d %s nagle=%s" % (a.host, a.port, mode, "off" if a.nodelay else "on"),
          flush=True)
    for _ in range(a.max_conns):
        srv.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            conn, peer = srv.accept()
        except socket.timeout:
            print("deadline reached", flush=True)
            break
        with conn:
            requests, sends = serve(conn, a, deadline)
        print("served %s:%d requests=%d sends=%d" % (peer[0], peer[1], requests, sends), flush=True)
    srv.close()


if __name__ == "__main__":
    sys.exit(main())
