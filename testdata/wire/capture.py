#!/usr/bin/env python3
"""Records a small real capture of 127.0.0.1 traffic with tcpdump.

    sudo python3 capture.py OUT.pcap [tcpdump args...]   e.g.  -i lo   -i any -y LINUX_SLL

A server on 127.0.0.1 (port chosen by the kernel) and a client exchange a few request /
response rounds of various sizes, one bulk transfer (`--bulk N` bytes, to show snap-length
truncation), and one connection is reset (SO_LINGER 0). tcpdump is filtered on the server
port so nothing else on the machine ends up in the file. All traffic stays on 127.0.0.1.
"""

import socket
import struct
import subprocess
import sys
import threading
import time


def serve(listener, stop):
    listener.settimeout(0.2)
    while not stop.is_set():
        try:
            conn, _ = listener.accept()
        except socket.timeout:
            continue
        with conn:
            try:
                while True:
                    head = conn.recv(8)
                    if not head:
                        break
                    want, = struct.unpack("!Q", head.ljust(8, b"\0"))
                    conn.sendall(b"r" * want)
            except ConnectionResetError:
                pass


def recv_exact(sock, n):
    got = 0
    while got < n:
        chunk = sock.recv(min(65536, n - got))
        if not chunk:
            break
        got += len(chunk)


def client(port, bulk):
    with socket.create_connection(("127.0.0.1", port)) as s:
        for size in [10, 300, 1500, 4000, 0, 7]:
            s.sendall(struct.pack("!Q", size))
            recv_exact(s, size)
            time.sleep(0.01)
        if bulk:
            s.sendall(struct.pack("!Q", bulk))
            recv_exact(s, bulk)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(struct.pack("!Q", 100))
    recv_exact(s, 100)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def main():
    args = sys.argv[1:]
    bulk = 0
    if "--bulk" in args:
        i = args.index("--bulk")
        bulk = int(args[i + 1])
        del args[i : i + 2]
    out, tcpdump_args = args[0], args[1:]
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    dump = subprocess.Popen(
        ["tcpdump", "-U", "-Z", "root", "-w", out, *tcpdump_args, f"tcp port {port}"],
        stderr=subprocess.PIPE,
    )
    # Wait until tcpdump says it is listening.
    dump.stderr.readline()
    time.sleep(0.5)
    stop = threading.Event()
    t = threading.Thread(target=serve, args=(listener, stop))
    t.start()
    client(port, bulk)
    time.sleep(0.5)
    stop.set()
    t.join()
    dump.terminate()
    dump.wait()


if __name__ == "__main__":
    main()
