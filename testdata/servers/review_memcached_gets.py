# A reviewer's script (copied from /tmp/review-u4/mc.py, unchanged below this header): see
# testdata/captures/unbatched_review_*.expect for the capture it made on this machine.
import socket, time
s = socket.create_connection(("127.0.0.1", 11311))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.sendall(b"set k 0 0 5\r\nhello\r\n"); s.recv(100)
for r in range(200):
    s.sendall(b"get k\r\n" * 16)
    need = 16; buf = b""
    while buf.count(b"END\r\n") < need: buf += s.recv(65536)
# one-by-one pipelined writes
for r in range(50):
    for i in range(16): s.send(b"get k\r\n")
    buf=b""
    while buf.count(b"END\r\n") < 16: buf += s.recv(65536)
print("ok")
