"""A CPython line server that, after each reply, polls its send queue (SIOCOUTQ) until it is
empty, as the busy event loops of PHYSICS §6 do. The reply goes out in two writes with Nagle
on, so the second waits for the first one's ACK — the driver's delayed ACK, ~40 ms — and the
loop spins for all of it. Usage: python3 siocoutq_spinner.py PORT [trust]
(`trust`: the same writes, then on to the next request: the kernel sends the queue)."""
import fcntl
import socket
import struct
import sys
import termios
import threading

TRUST = len(sys.argv) > 2 and sys.argv[2] == "trust"


def queued(sock):
    return struct.unpack("i", fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]


def serve(conn):
    f = conn.makefile("rb")
    with conn:
        for line in f:
            head = b"200 " + line.strip() + b"\r\n"
            conn.sendall(head)
            conn.sendall(b".\r\n")
            while not TRUST and queued(conn) > 0:
                pass


def main(port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(128)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    while True:
        conn, _ = s.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


main(int(sys.argv[1]))
