#!/usr/bin/env python3
"""wan_perline_server: a line-protocol server that writes every response LINE
with its own send(), Nagle left ON (no TCP_NODELAY, no TCP_CORK).

This is the bug PHYSICS.md section 3 describes ("server writes a response one
line per syscall"): the first line leaves at once, the rest is held by Nagle
until the client's delayed ACK for the first line comes back.

Protocol (one request per line, CRLF):
  GET <i>   -> --lines lines of text, then ".\r\n"        (default 8 + 1 sends)
  SET <i>   -> "OK <i>\r\n" then ".\r\n"                  (2 sends)
  QUIT      -> connection closed
Prints "LISTENING <addr>:<port>" when ready; serves --max-conns connections
one after another, then exits; never runs longer than --deadline seconds.
"""
import argparse
import socket
import sys
import time


def response_lines(verb, arg, nlines):
    if verb == "GET":
        return ["item %s line %d: %s\r\n" % (arg, k, "x" * 16) for k in range(1, nlines + 1)] + [".\r\n"]
    if verb == "SET":
        return ["OK %s\r\n" % arg, ".\r\n"]
    return ["ERR unknown command\r\n", ".\r\n"]


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
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            words = line.decode("ascii", "replace").strip().split()
            if not words:
                continue
            if words[0].upper() == "QUIT":
                return requests, sends
            requests += 1
            for text in response_lines(words[0].upper(), " ".join(words[1:]), nlines):
                conn.sendall(text.encode())       # one syscall per line: the bug
                sends += 1
    return requests, sends


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, default=7070)
    p.add_argument("--lines", type=int, default=8, help="text lines per GET response (default 8)")
    p.add_argument("--max-conns", type=int, default=1)
    p.add_argument("--deadline", type=float, default=120.0, help="seconds before giving up")
    a = p.parse_args()
    deadline = time.monotonic() + a.deadline
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)   # Nagle ON: no TCP_NODELAY
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.host, a.port))
    srv.listen(16)
    print("LISTENING %s:%d perline nagle=on" % (a.host, a.port), flush=True)
    for _ in range(a.max_conns):
        srv.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            conn, peer = srv.accept()
        except socket.timeout:
            print("deadline reached", flush=True)
            break
        with conn:
            requests, sends = serve(conn, a.lines, deadline)
        print("served %s:%d requests=%d sends=%d" % (peer[0], peer[1], requests, sends), flush=True)
    srv.close()


if __name__ == "__main__":
    sys.exit(main())
