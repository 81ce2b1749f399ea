#!/usr/bin/env python3
"""slow_reader.py: zero window from a slow reader (PHYSICS §8), and its fixed twin.

    slow_reader.py server [--port 0] [--bytes N]     streams N bytes, 64 KiB per send(), then closes
    slow_reader.py client --port P [--fixed]         reads them

Default client, THE PATHOLOGY: a small receive buffer (SO_RCVBUF 8 KiB, set before connect so
the window is clamped from the handshake on) and a slow application: it reads 2 KiB, then
sleeps 60 ms, and again. The buffer fills, the client advertises a zero window, and the server,
which has plenty queued, stalls until the next read opens the window a little. The capture
shows the client's window at 0 for tens of ms, over and over: zero_window, and the data
stalled is server_to_client.

--fixed, the twin: default buffer, reads of 256 KiB as fast as it can. A bulk transfer that
the network (here: loopback) limits, not the reader; if the window ever touches zero it is
for microseconds.

The client prints bytes read, elapsed time and throughput. Both sides are bounded: the
server sends --bytes and closes (or gives up on a 10 s send timeout), the client stops at
EOF or at its own --deadline.
"""

import argparse
import socket
import time

from latency import announce_port, note


def run_server(args):
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", args.port))
    lst.listen(4)
    lst.settimeout(args.idle_timeout)
    announce_port(lst)
    try:
        conn, _ = lst.accept()
    except socket.timeout:
        note("slow_reader server: no client")
        return
    conn.settimeout(10.0)
    block = bytes(range(256)) * 256  # 64 KiB
    sent = 0
    t0 = time.perf_counter()
    with conn:
        try:
            while sent < args.bytes:
                n = min(len(block), args.bytes - sent)
                conn.sendall(block[:n])
                sent += n
        except OSError as e:
            note(f"slow_reader server: stopped: {e}")
    note(f"slow_reader server sent {sent} bytes in {time.perf_counter() - t0:.3f} s")


def run_client(args):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if args.fixed:
        read_size, pause = 256 * 1024, 0.0
    else:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, args.rcvbuf)
        read_size, pause = args.read_size, args.sleep_ms / 1000.0
    sock.settimeout(5.0)
    sock.connect((args.host, args.port))
    rcvbuf = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    deadline = time.monotonic() + args.deadline
    total = reads = 0
    t0 = time.perf_counter()
    with sock:
        while time.monotonic() < deadline:
            data = sock.recv(read_size)
            if not data:
                break
            total += len(data)
            reads += 1
            if pause:
                time.sleep(pause)
    elapsed = time.perf_counter() - t0
    mode = "fixed (fast reader)" if args.fixed else f"slow reader ({read_size} B every {args.sleep_ms:g} ms)"
    print(f"summary mode={mode!r} so_rcvbuf={rcvbuf} bytes={total} reads={reads} "
          f"elapsed_s={elapsed:.3f} throughput_kib_s={total / 1024 / elapsed:.1f}", flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("--port", type=int, default=0)
    s.add_argument("--bytes", type=int, default=256 * 1024)
    s.add_argument("--idle-timeout", type=float, default=10.0)
    c = sub.add_parser("client")
    c.add_argument("--host", default="127.0.0.1")
    c.add_argument("--port", type=int, required=True)
    c.add_argument("--fixed", action="store_true", help="read as fast as possible, default buffer")
    c.add_argument("--rcvbuf", type=int, default=8192, help="SO_RCVBUF to request (slow mode)")
    c.add_argument("--read-size", type=int, default=2048, help="bytes per read (slow mode)")
    c.add_argument("--sleep-ms", type=float, default=60.0, help="pause after each read (slow mode)")
    c.add_argument("--deadline", type=float, default=30.0)
    args = p.parse_args()
    (run_server if args.role == "server" else run_client)(args)


if __name__ == "__main__":
    main()
