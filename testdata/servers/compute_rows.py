"""A CPython line server that streams each answer: it sends a header line at once, then
computes the rest (about 4 ms of pure user-space arithmetic: no system call, no sleep), then
sends the rest and the terminating line. TCP_NODELAY, blocking reads between requests: it
never polls and never spins, it works. The driver's clock sees the first bytes of each answer,
then a gap with nothing arriving, as it does for a server that spins while Nagle holds the
rest; only a spinner's rest waits in its socket for the client's ACK.
With `nagle` it leaves Nagle on: the rest, written after the computing, is then held until the
client's delayed ACK (~40 ms after the header), and the server sleeps in `read` meanwhile.
Usage: python3 compute_rows.py PORT [ITERATIONS (80000: ~4 ms)] [nagle]"""

import socket
import sys
import threading

ITERATIONS = int(sys.argv[2]) if len(sys.argv) > 2 else 80_000
NAGLE = len(sys.argv) > 3 and sys.argv[3] == "nagle"


def compute():
    x = 0
    for i in range(ITERATIONS):
        x += i * i % 7
    return x


def serve(conn):
    if not NAGLE:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    f = conn.makefile("rb")
    with conn:
        for line in f:
            conn.sendall(b"200 " + line.strip() + b"\r\n")
            n = compute()
            conn.sendall(b"row %d\r\n.\r\n" % n)


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
