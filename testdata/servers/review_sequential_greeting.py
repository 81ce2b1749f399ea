# A reviewer's script (copied from /tmp/review-u5/alt.py, unchanged below this header): see
# testdata/captures/unbatched_review_*.expect for the capture it made on this machine.
import socket, sys, threading
srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 7075)); srv.listen()
def serve():
    c, _ = srv.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    while True:
        d = c.recv(65536)
        if not d: return
        buf += d
        while b"\n" in buf:
            _, buf = buf.split(b"\n", 1)
            c.send(b"+OK\r\n")
threading.Thread(target=serve, daemon=True).start()
s = socket.create_connection(("127.0.0.1", 7075))
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
s.send(b"HELLO " + b"x" * 93 + b"\n")   # one 100-byte greeting
s.recv(100)
for i in range(300):                      # strictly one request at a time
    s.send(b"GET k%03d\n" % i)             # 10 bytes
    assert s.recv(100) == b"+OK\r\n"
print("done")
