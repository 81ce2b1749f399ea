#!/usr/bin/env python3
"""lineserver.py: a request/response server over a line protocol (PHYSICS §3, §4).

Protocol: the client sends `GET <i>\\r\\n`; the server answers with `--lines` short lines
(`attr-3: value-<i>-3\\r\\n`) and a terminator line `.\\r\\n`, like an SMTP/NNTP/Zino reply.

Modes (the pathology each shows, and how its fixed twin differs):
  perline          THE STALL SERVER. Each line goes out with its own send() on a plain socket
                   (Nagle ON, the default for Python's socket module). The first line leaves at
                   once; the rest are held by Nagle until the client ACKs the first line, and the
                   client, waiting for the rest of the reply, delays that ACK by ~40 ms (Linux
                   ato). Shows nagle_delayed_ack + fragmented_writes, server_to_client.
  fixed (--fixed)  The fixed twin: the whole response is built in user space and sent with one
                   sendall(). Same bytes, one segment, no stall. Requests that arrive together
                   (a pipelining client) get all their responses in that one sendall(), the way
                   an event-loop server flushes its output buffer once per read.
  think            A slow server that is NOT a Nagle stall: sleeps --think-ms (40 ms) and then
                   answers in ONE send. Latency looks like a stall, the packets do not: no data
                   is held, the 40 ms gap sits between the request and the whole reply.
  perline-nodelay  Fragmented writes without the stall: one send() per line with TCP_NODELAY
                   set, so every line is its own small segment but nothing waits for an ACK.

Connections are served one at a time. The server prints `PORT <n>` when listening (bind
port 0 by default) and exits by itself after --max-conns connections, after --idle-timeout
seconds without a new connection or request, or at --deadline seconds, whichever comes first.
"""

import argparse
import socket
import time

from latency import announce_port, note

MODES = ("perline", "fixed", "think", "perline-nodelay")


def response_lines(i, n_lines):
    lines = [f"attr-{k}: value-{i}-{k}\r\n".encode() for k in range(1, n_lines + 1)]
    lines.append(b".\r\n")
    return lines


def serve_connection(conn, args, deadline):
    if args.mode == "perline-nodelay":
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.settimeout(args.idle_timeout)
    buf = b""
    served = 0
    while time.monotonic() < deadline:
        try:
            data = conn.recv(4096)
        except socket.timeout:
            break
        if not data:
            break
        buf += data
        out = []  # --fixed: everything owed for this read, sent once
        while b"\r\n" in buf:
            line, buf = buf.split(b"\r\n", 1)
            parts = line.split()
            i = parts[1].decode() if len(parts) > 1 else "?"
            lines = response_lines(i, args.lines)
            if args.mode in ("perline", "perline-nodelay"):
                for piece in lines:
                    conn.sendall(piece)
            elif args.mode == "think":
                time.sleep(args.think_ms / 1000.0)
                conn.sendall(b"".join(lines))
            else:
                out.extend(lines)
            served += 1
        if out:
            conn.sendall(b"".join(out))
    return served


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0, help="port to listen on (0 = any free port)")
    p.add_argument("--mode", choices=MODES, default="perline")
    p.add_argument("--fixed", action="store_true", help="same as --mode fixed")
    p.add_argument("--lines", type=int, default=8, help="lines per response before the terminator")
    p.add_argument("--think-ms", type=float, default=40.0, help="think time in --mode think")
    p.add_argument("--max-conns", type=int, default=1, help="exit after serving this many connections")
    p.add_argument("--idle-timeout", type=float, default=5.0, help="exit after this long without activity (s)")
    p.add_argument("--deadline", type=float, default=120.0, help="exit after this long in any case (s)")
    args = p.parse_args()
    if args.fixed:
        args.mode = "fixed"

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
        with conn:
            requests += serve_connection(conn, args, deadline)
        conns += 1
    note(f"lineserver mode={args.mode} served {requests} requests on {conns} connections")


if __name__ == "__main__":
    main()
