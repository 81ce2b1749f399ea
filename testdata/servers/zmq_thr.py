"""A one-way ZeroMQ throughput test in the manner of libzmq's local_thr/remote_thr, with
pyzmq: a PULL socket binds (this process), a PUSH socket in a child process connects and sends
COUNT messages of SIZE bytes as fast as ZeroMQ takes them; the receiver prints what libzmq's
local_thr prints:
    message size: 64 [B]
    message count: 100000
    mean throughput: 812345 [msg/s]
    mean throughput: 415.921 [Mb/s]
TRANSPORT: tcp (127.0.0.1, a free port) or ipc (a Unix socket in the temp directory).
Usage: python3 zmq_thr.py tcp|ipc COUNT SIZE"""
import os
import subprocess
import sys
import tempfile
import time

import zmq


def send(endpoint, count, size):
    ctx = zmq.Context()
    push = ctx.socket(zmq.PUSH)
    push.connect(endpoint)
    body = b"x" * size
    for _ in range(count):
        push.send(body)
    push.close(linger=-1)
    ctx.term()


def receive(transport, count, size):
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    if transport == "tcp":
        pull.bind("tcp://127.0.0.1:*")
    else:
        path = os.path.join(tempfile.gettempdir(), f"zmq-thr-{os.getpid()}.sock")
        pull.bind(f"ipc://{path}")
    endpoint = pull.getsockopt_string(zmq.LAST_ENDPOINT)
    sender = subprocess.Popen(
        [sys.executable, __file__, "send", endpoint, str(count), str(size)]
    )
    pull.recv()
    start = time.perf_counter()
    for _ in range(count - 1):
        pull.recv()
    elapsed = max(time.perf_counter() - start, 1e-9)
    sender.wait()
    pull.close()
    ctx.term()
    rate = (count - 1) / elapsed
    print(f"message size: {size} [B]")
    print(f"message count: {count}")
    print(f"mean throughput: {rate:.0f} [msg/s]")
    print(f"mean throughput: {rate * size * 8 / 1e6:.3f} [Mb/s]")


if len(sys.argv) == 5 and sys.argv[1] == "send":
    send(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
elif len(sys.argv) == 4 and sys.argv[1] in ("tcp", "ipc"):
    receive(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
else:
    sys.exit(__doc__)
