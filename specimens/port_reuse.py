"""Port reuse on loopback: a client gives up on unanswered connection attempts and tries again
from the same source port, each attempt a new SYN with its own ISN; the last one is answered.

The server's accept queue is full (listen backlog 0, one connection queued and not accepted),
so its kernel drops the SYNs that arrive (ListenOverflows): the common way SYNs go unanswered.
The server accepts the queued connection before the last attempt. Record it as root in a
private network namespace:

    unshare -n sh -c 'ip link set lo up; tcpdump -i lo -s 128 -U -w port_reuse_new_isn.pcap tcp & \
        sleep 1; python3 specimens/port_reuse.py; sleep 0.5; kill -INT %1; wait'

Each abandoned attempt is one SYN, closed after 300 ms: Linux's first SYN retransmission comes
after 1 s, so no SYN is ever sent twice, and closing a socket in SYN-SENT sends nothing (no RST,
no FIN). The port pair is then reused by a new SYN with a new ISN: a new connection, as tshark
numbers it, not a retransmission of the old SYN.
"""
import socket, sys, time

ATTEMPTS = 3


srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(0)
port = srv.getsockname()[1]
print(f"PORT {port}", flush=True)

probe = socket.socket()
probe.bind(("127.0.0.1", 0))
cport = probe.getsockname()[1]
probe.close()

filler = socket.create_connection(("127.0.0.1", port))  # fills the accept queue
for i in range(ATTEMPTS):
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    c.bind(("127.0.0.1", cport))
    c.settimeout(0.3)
    try:
        c.connect(("127.0.0.1", port))
        sys.exit("attempt %d was answered: the accept queue is not full" % i)
    except socket.timeout:
        print(f"attempt {i}: no answer in 300 ms, closed", flush=True)
    c.close()
    time.sleep(0.1)
queued, _ = srv.accept()  # frees the queue
filler.close()
queued.recv(64)
queued.close()

c = socket.socket()
c.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
c.bind(("127.0.0.1", cport))
t0 = time.monotonic()
c.connect(("127.0.0.1", port))
print(f"attempt {ATTEMPTS}: connected in {(time.monotonic() - t0) * 1e3:.3f} ms", flush=True)
s, _ = srv.accept()
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
for _ in range(3):
    c.sendall(b"PING\r\n")
    assert s.recv(64) == b"PING\r\n"
    s.sendall(b"+PONG\r\n")
    assert c.recv(64) == b"+PONG\r\n"
c.close()
s.recv(64)
s.close()
srv.close()
print("done", flush=True)
