# Sequential client, TCP_NODELAY, one request written one header line per send, waits for the
# whole response before the next request.
import socket, time
c = socket.create_connection(("127.0.0.1", 7070)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
resp_len = len(b"HTTP/1.1 200 OK\r\n") + 10*len(b"X-Header-00: some-value-here\r\n") + 2
for n in range(30):
    lines = [b"GET /item/%d HTTP/1.1\r\n" % n] + [b"X-Req-%02d: value-of-header\r\n" % i for i in range(10)] + [b"\r\n"]
    for l in lines:
        c.send(l)
    got = b""
    while not got.endswith(b"\r\n\r\n"):
        got += c.recv(65536)
    time.sleep(0.005)
c.close()
