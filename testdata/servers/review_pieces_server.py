# Line-based server, TCP_NODELAY, answers a request (ends with blank line) with a multi-line
# response, one write per line (like a naive HTTP/SMTP-ish server).
import socket, sys
mode = sys.argv[1] if len(sys.argv) > 1 else "lines"
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", 7070)); s.listen(5)
c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
buf = b""
while True:
    d = c.recv(65536)
    if not d: break
    buf += d
    while b"\r\n\r\n" in buf:
        req, buf = buf.split(b"\r\n\r\n", 1)
        lines = [b"HTTP/1.1 200 OK\r\n"] + [b"X-Header-%02d: some-value-here\r\n" % i for i in range(10)] + [b"\r\n"]
        for l in lines:
            c.send(l)
