#!/usr/bin/env python3
"""drain_wait_server.py: a line server with TCP_NODELAY on that waits for its send queue to
drain after the first piece of each reply (PHYSICS §9, "A spinner spins only while it waits").

Each reply is a header line, written alone; the server then polls SIOCOUTQ until the kernel
says every byte it sent was acknowledged, and writes the rest in one call. Nagle is off, so
nothing holds the bytes in the kernel: the program itself waits for the peer's ACK — which is
the peer's delayed ACK (~40 ms on Linux) when the header arrived alone. On the wire this looks
like the Nagle + delayed-ACK stall; the socket's options tell them apart.

Request: one line (`LIST` or anything) ended by CRLF or LF. Reply: `--lines` lines and a `.`
line. Prints `PORT <n>` when listening; serves until killed or --idle-timeout seconds without
a connection.
"""

import argparse
import fcntl
import socket
import struct
import termios
import threading
import time


def unsent_or_unacked(sock):
    """Bytes in the send queue not yet acknowledged (SIOCOUTQ, the same ioctl as TIOCOUTQ)."""
    raw = fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0")
    return struct.unpack("i", raw)[0]


def serve(conn, lines):
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    n = 0
    with conn:
        while True:
            data = conn.recv(4096)
            if not data:
                return
            buf += data
            while b"\n" in buf:
                _, buf = buf.split(b"\n", 1)
                n += 1
                conn.sendall(f"reply {n}: {lines} lines follow\r\n".encode())
                while unsent_or_unacked(conn) > 0:
                    time.sleep(0.0002)
                rest = "".join(f"attr-{k}: value-{n}-{k}\r\n" for k in range(1, lines + 1))
                conn.sendall((rest + ".\r\n").encode())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--lines", type=int, default=4)
    p.add_argument("--idle-timeout", type=float, default=60.0)
    args = p.parse_args()
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", args.port))
    srv.listen(64)
    srv.settimeout(args.idle_timeout)
    print(f"PORT {srv.getsockname()[1]}", flush=True)
    while True:
        try:
            conn, _ = srv.accept()
        except socket.timeout:
            return
        threading.Thread(target=serve, args=(conn, args.lines), daemon=True).start()


if __name__ == "__main__":
    main()
