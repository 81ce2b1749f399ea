"""One end of a one-way stream of u32be-length-prefixed messages, for `tcpdoctor stream`:
listens on 127.0.0.1:PORT (or on the Unix socket PATH, when it starts with /), serves each
connection on a thread of its own.
  send-each     sends 100-byte messages (a 4-byte length, 96 bytes of body), each with its own
                send() call, TCP_NODELAY on: a system call and, mostly, a segment per message
  send-batched  the same messages, 655 at a time in one send() call (about 64 KiB)
  read-parts    reads each message with two recv() calls: its length, then its body
  read-bulk     reads whatever the socket holds, 256 KiB at most per recv() call, and cuts
                the messages from that buffer
Usage: python3 stream_peer.py PORT|PATH MODE"""
import socket
import struct
import sys
import threading

BODY = bytes(range(97, 97 + 26)) * 4
MESSAGE = struct.pack(">I", 96) + BODY[:96]


def send_each(conn):
    if conn.family != socket.AF_UNIX:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while True:
        conn.sendall(MESSAGE)


def send_batched(conn):
    batch = MESSAGE * 655
    while True:
        conn.sendall(batch)


def recv_exactly(conn, n):
    got = b""
    while len(got) < n:
        part = conn.recv(n - len(got))
        if not part:
            raise ConnectionError("closed")
        got += part
    return got


def read_parts(conn):
    while True:
        (length,) = struct.unpack(">I", recv_exactly(conn, 4))
        recv_exactly(conn, length)


def read_bulk(conn):
    buf = b""
    while True:
        part = conn.recv(256 * 1024)
        if not part:
            return
        buf += part
        at = 0
        while len(buf) - at >= 4:
            (length,) = struct.unpack_from(">I", buf, at)
            if len(buf) - at < 4 + length:
                break
            at += 4 + length
        buf = buf[at:]


MODES = {
    "send-each": send_each,
    "send-batched": send_batched,
    "read-parts": read_parts,
    "read-bulk": read_bulk,
}


def serve(conn, mode):
    try:
        MODES[mode](conn)
    except (ConnectionError, OSError):
        pass
    finally:
        conn.close()


def main(where, mode):
    if where.startswith("/"):
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(where)
        listener.listen(16)
    else:
        listener = socket.create_server(("127.0.0.1", int(where)))
    print(f"listening on {where}", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn, mode), daemon=True).start()


if len(sys.argv) != 3 or sys.argv[2] not in MODES:
    sys.exit(__doc__)
main(sys.argv[1], sys.argv[2])
