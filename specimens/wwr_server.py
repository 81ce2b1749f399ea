#!/usr/bin/env python3
"""wwr_server.py: the server for wwr_client.c (PHYSICS §3, write-write-read variant).

A request is a 4-byte big-endian length and that many body bytes. The server is correct and
ordinary: it answers only once it holds the whole request (it cannot do otherwise: it needs
the body), and it answers with one sendall() of a 4-byte length plus a 32-byte reply. Nagle
is left at its default; it never matters here, because the reply is one write.

Against the default wwr_client the server delays its ACK of the lone header (it has nothing
to send yet), which is what releases the client's Nagle-held body ~40 ms later. Against
`wwr_client --fixed` the whole request arrives in one segment and the reply is immediate.

Prints `PORT <n>` when listening; exits after --max-conns connections, after --idle-timeout
seconds without activity, or at --deadline.
"""

import argparse
import socket
import struct
import time

from latency import announce_port, note


def recv_exact(conn, n):
    buf = b""
    while len(buf) < n:
        data = conn.recv(n - len(buf))
        if not data:
            return None
        buf += data
    return buf


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--max-conns", type=int, default=1)
    p.add_argument("--idle-timeout", type=float, default=5.0)
    p.add_argument("--deadline", type=float, default=120.0)
    args = p.parse_args()

    deadline = time.monotonic() + args.deadline
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", args.port))
    lst.listen(16)
    lst.settimeout(args.idle_timeout)
    announce_port(lst)

    conns = requests = 0
    while conns < args.max_conns and time.monotonic() < deadline:
        try:
            conn, _ = lst.accept()
        except socket.timeout:
            break
        conn.settimeout(args.idle_timeout)
        with conn:
            while time.monotonic() < deadline:
                try:
                    hdr = recv_exact(conn, 4)
                    if hdr is None:
                        break
                    (length,) = struct.unpack("!I", hdr)
                    if length > 1 << 20 or recv_exact(conn, length) is None:
                        break
                except socket.timeout:
                    break
                reply = b"ok %08d " % requests + b"r" * 20
                conn.sendall(struct.pack("!I", len(reply)) + reply)
                requests += 1
        conns += 1
    note(f"wwr_server served {requests} requests on {conns} connections")


if __name__ == "__main__":
    main()
