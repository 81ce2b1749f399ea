"""A line-protocol client for the sandbox tests: connects to 127.0.0.1:PORT (retrying while the
server starts, at most 5 s), sends N requests "qI\n" one at a time and reads each answer up to
its "." line. Usage: python3 line_client.py PORT N"""
import socket
import sys
import time

port, n = int(sys.argv[1]), int(sys.argv[2])
for _ in range(500):
    try:
        s = socket.create_connection(("127.0.0.1", port))
        break
    except OSError:
        time.sleep(0.01)
else:
    sys.exit("the server never listened")
for i in range(n):
    s.send(b"q%d\n" % i)
    got = b""
    while not got.endswith(b".\r\n"):
        d = s.recv(65536)
        if not d:
            sys.exit("the server closed the connection")
        got += d
s.close()
