import socket, ssl, sys, time, threading
mode = sys.argv[1]
def server():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain("c.pem", "k.pem")
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1", 8443)); s.listen(1)
    c, _ = s.accept(); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    t = ctx.wrap_socket(c, server_side=True)
    buf = b""
    while True:
        d = t.recv(65536)
        if not d: break
        buf += d
        while b"\n" in buf:
            l, buf = buf.split(b"\n", 1)
            if mode == "stream":   # one request -> 12 small event records
                for i in range(12): t.send(b"data: event %d of %s\n" % (i, l))
            else:
                t.send(b"ok " + l + b"\n")
threading.Thread(target=server, daemon=True).start(); time.sleep(0.3)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT); ctx.check_hostname = False; ctx.verify_mode = ssl.CERT_NONE
c = socket.create_connection(("127.0.0.1", 8443)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
t = ctx.wrap_socket(c)
for r in range(20):
    if mode == "stream":
        for i in range(12): t.send(b"chunk%02d of one upload " % i)   # one request in 12 records
        t.send(b"\n"); need = 12
    else:
        for i in range(16): t.send(b"GET key%02d\n" % i)
        need = 16
    got = b""
    while got.count(b"\n") < need: got += t.recv(65536)
    time.sleep(0.003)
t.close()
