#!/usr/bin/env python3
"""wan_fixed_server: the fixed twin of wan_perline_server.py.

Same protocol and byte-for-byte the same responses, Nagle still ON (no
TCP_NODELAY), but every response is built in user space and written with ONE
send(). The fix recommended first in PHYSICS.md section 3. When several
requests arrive in one read (a pipelining client), their responses are
concatenated and written with one send() too, so nothing small is ever left
behind a small unacknowledged segment.

--nodelay sets TCP_NODELAY as well: for a client that keeps several requests in flight
arriving one by one, each answer then leaves as soon as it is written, instead of waiting
behind the previous, unacknowledged one.
"""
import argparse
import socket
import sys
import time

from wan_perline_server import response_lines


def serve(conn, nlines, deadline):
    conn.settimeout(max(0.1, deadline - time.monotonic()))
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
        out = []
        quit_seen = False
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            words = line.decode("ascii", "replace").strip().split()
            if not words:
                continue
            if words[0].upper() == "QUIT":
                quit_seen = True
                break
            requests += 1
            out.extend(response_lines(words[0].upper(), " ".join(words[1:]), nlines))
        if out:
            conn.sendall("".join(out).encode())    # one syscall per read batch
            sends += 1
        if quit_seen:
            break
    return requests, sends


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=7070)
    p.add_argument("--lines", type=int, default=8, help="text lines per GET response (default 8)")
    p.add_argument("--max-conns", type=int, default=1)
    p.add_argument("--deadline", type=float, default=120.0, help="seconds before giving up")
    p.add_argument("--nodelay", action="store_true", help="set TCP_NODELAY on each connection")
    a = p.parse_args()
    deadline = time.monotonic() + a.deadline
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)   # Nagle ON, like the buggy twin
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.host, a.port))
    srv.listen(16)
    print("LISTENING %s:%d fixed nagle=%s" % (a.host, a.port, "off" if a.nodelay else "on"),
          flush=True)
    for _ in range(a.max_conns):
        srv.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            conn, peer = srv.accept()
        except socket.timeout:
            print("deadline reached", flush=True)
            break
        if a.nodelay:
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            requests, sends = serve(conn, a.lines, deadline)
        print("served %s:%d requests=%d sends=%d" % (peer[0], peer[1], requests, sends), flush=True)
    srv.close()


if __name__ == "__main__":
    sys.exit(main())
