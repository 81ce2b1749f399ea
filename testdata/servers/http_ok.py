"""A minimal request/response server for the client tests: reads requests made of a header
ending in an empty line and a Content-Length body, answers each with "OK\r\n" in one write,
TCP_NODELAY on (the server is not the one under test). Usage: python3 http_ok.py PORT"""
import socket
import sys
import threading


def serve(c):
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    while True:
        d = c.recv(65536)
        if not d:
            break
        buf += d
        while b"\r\n\r\n" in buf:
            head, rest = buf.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n"):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if len(rest) < length:
                break
            buf = rest[length:]
            c.sendall(b"OK\r\n")
    c.close()


srv = socket.create_server(("127.0.0.1", int(sys.argv[1])))
print(f"listening on 127.0.0.1:{sys.argv[1]}", flush=True)
while True:
    conn, _ = srv.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
