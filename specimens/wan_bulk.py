#!/usr/bin/env python3
"""wan_bulk: a bulk responder and its client, for loss tests.

  wan_bulk.py server [--port P] [--sndbuf B]
                                        answers "BULK <n>\r\n" with n bytes,
                                        written with ONE sendall (multi-segment);
                                        --sndbuf sets SO_SNDBUF on each accepted
                                        socket (0 = kernel default, autotuned)
  wan_bulk.py client HOST PORT --count K --bytes N [--rcvbuf B]
                                        K sequential requests, timing each;
                                        --rcvbuf sets SO_RCVBUF before connect()

The response is n-5 bytes of filler followed by "\r\n.\r\n". The client prints
"exchange <i> ms <latency>" and a summary line like wan_client.py.
"""
import argparse
import socket
import sys
import time

from wan_client import read_response, summarize


def server(a):
    deadline = time.monotonic() + a.deadline
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((a.host, a.port))
    srv.listen(16)
    print("LISTENING %s:%d bulk" % (a.host, a.port), flush=True)
    for _ in range(a.max_conns):
        srv.settimeout(max(0.1, deadline - time.monotonic()))
        try:
            conn, peer = srv.accept()
        except socket.timeout:
            print("deadline reached", flush=True)
            break
        requests = 0
        if a.sndbuf:
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, a.sndbuf)
        print("so_sndbuf requested=%d effective=%d" % (
            a.sndbuf, conn.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)), flush=True)
        with conn:
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            buf = b""
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
                    words = line.split()
                    if len(words) == 2 and words[0] == b"BULK":
                        n = max(5, int(words[1]))
                        body = bytes(65 + (k % 26) for k in range(n - 5)) + b"\r\n.\r\n"
                        conn.sendall(body)
                        requests += 1
        print("served %s:%d requests=%d" % (peer[0], peer[1], requests), flush=True)
    srv.close()


def client(a):
    deadline = time.monotonic() + a.deadline
    t_conn = time.perf_counter()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if a.rcvbuf:
        # Before connect(): the window scale in the SYN is chosen from it.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, a.rcvbuf)
    print("so_rcvbuf requested=%d effective=%d" % (
        a.rcvbuf, sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)), flush=True)
    sock.settimeout(10)
    sock.connect((a.host, a.port))
    print("connected ms %.3f" % ((time.perf_counter() - t_conn) * 1e3), flush=True)
    buf = b""
    lat = []
    t_start = time.perf_counter()
    for i in range(1, a.count + 1):
        t0 = time.perf_counter()
        sock.sendall(b"BULK %d\r\n" % a.bytes)
        resp, buf = read_response(sock, buf, deadline)
        if len(resp) != a.bytes:
            raise SystemExit("short response: %d bytes" % len(resp))
        ms = (time.perf_counter() - t0) * 1e3
        lat.append(ms)
        print("exchange %d ms %.3f" % (i, ms), flush=True)
    total = (time.perf_counter() - t_start) * 1e3
    sock.close()
    print(summarize(lat, total, a.stall_ms), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("--host", default="0.0.0.0")
    s.add_argument("--port", type=int, default=7070)
    s.add_argument("--max-conns", type=int, default=1)
    s.add_argument("--deadline", type=float, default=120.0)
    s.add_argument("--sndbuf", type=int, default=0,
                   help="SO_SNDBUF for accepted sockets (0: leave autotuning on)")
    c = sub.add_parser("client")
    c.add_argument("host")
    c.add_argument("port", type=int)
    c.add_argument("--count", type=int, default=5)
    c.add_argument("--bytes", type=int, default=5000)
    c.add_argument("--stall-ms", type=float, default=150.0)
    c.add_argument("--deadline", type=float, default=60.0)
    c.add_argument("--rcvbuf", type=int, default=0,
                   help="SO_RCVBUF set before connect() (0: leave autotuning on)")
    a = p.parse_args()
    return server(a) if a.role == "server" else client(a)


if __name__ == "__main__":
    sys.exit(main())
