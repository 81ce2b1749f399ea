#!/usr/bin/env python3
"""An echo server and its client in one process, over 127.0.0.1.

The server echoes every chunk it reads with sendall(). The client sends BYTES and reads the
echo back, either concurrently (a reader thread: never stuck) or all writes first, then the
reads (--write-then-read): once the bytes in flight exceed what the four socket buffers hold,
the server blocks in sendall() (the client is not reading), stops reading, and the client
blocks in sendall() too — a deadlock under backpressure with zero windows both ways.

--sizes 16k,16m with --state FILE takes the size by invocation (the Nth run uses the Nth size,
cyclically), so the same command completes in some runs and hangs in others.
Prints `echoed N bytes in S s (R MB/s)` when done.
"""
import argparse
import os
import socket
import threading
import time

BUF = 64 * 1024


def size(text):
    text = text.strip().lower()
    mult = {"k": 1024, "m": 1024 * 1024}.get(text[-1:], 1)
    return int(text.rstrip("km")) * mult


def serve(listener):
    conn, _ = listener.accept()
    with conn:
        while True:
            data = conn.recv(BUF)
            if not data:
                return
            conn.sendall(data)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1m")
    ap.add_argument("--state")
    ap.add_argument("--write-then-read", action="store_true")
    args = ap.parse_args()
    sizes = [size(s) for s in args.sizes.split(",")]
    n = 0
    if args.state:
        try:
            with open(args.state) as f:
                n = int(f.read().strip() or 0)
        except FileNotFoundError:
            n = 0
        with open(args.state, "w") as f:
            f.write(str(n + 1))
    total = sizes[n % len(sizes)]

    listener = socket.create_server(("127.0.0.1", 0))
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        listener.setsockopt(socket.SOL_SOCKET, opt, BUF)
    threading.Thread(target=serve, args=(listener,), daemon=True).start()
    client = socket.socket()
    for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):
        client.setsockopt(socket.SOL_SOCKET, opt, BUF)
    client.connect(listener.getsockname())
    start = time.monotonic()
    chunk = b"x" * BUF
    got = 0

    def read_all():
        nonlocal got
        while got < total:
            data = client.recv(BUF)
            if not data:
                break
            got += len(data)

    def write_all():
        sent = 0
        while sent < total:
            piece = chunk[: min(BUF, total - sent)]
            client.sendall(piece)
            sent += len(piece)

    if args.write_then_read:
        write_all()
        read_all()
    else:
        reader = threading.Thread(target=read_all)
        reader.start()
        write_all()
        reader.join()
    took = time.monotonic() - start
    print(f"echoed {got} bytes in {took:.3f} s ({got / took / 1e6:.1f} MB/s)", flush=True)
    client.close()
    os._exit(0 if got == total else 1)


if __name__ == "__main__":
    main()
