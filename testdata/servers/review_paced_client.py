# A reviewer's script (copied from /tmp/review-u2/paced.py, unchanged below this header): see
# testdata/captures/unbatched_review_*.expect for the capture it made on this machine.
import socket, sys, time, os
host, port = os.environ.get("TCPDOCTOR_SERVER_HOST","127.0.0.1"), int(sys.argv[1])
gap = float(sys.argv[2]); n = int(sys.argv[3])
for _ in range(500):
    try:
        s = socket.create_connection((host, port)); break
    except OSError: time.sleep(0.01)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for i in range(n):
    s.send(b"SET k%04d v%04dxxxxxxxxxxxxxxxxxxxxxx\n" % (i, i))
    t = time.perf_counter()
    while time.perf_counter() - t < gap: pass
got = 0
while got < n:
    d = s.recv(65536)
    if not d: break
    got += d.count(b"\n")
print("answers", got)
