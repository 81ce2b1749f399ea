import socket, sys, time
mode = sys.argv[1]
c = socket.create_connection(("127.0.0.1", 8080)); c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
req = b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
for k in range(10):
    if mode == "onewrite": c.send(req*16)
    else:
        for i in range(16): c.send(req)
    got = b""
    while got.count(b"ok\n") < 16: got += c.recv(65536)
    time.sleep(0.003)
c.close()
