#!/usr/bin/env python3
"""aio_lineserver.py: the same line protocol as lineserver.py, served by asyncio, one
transport.write() per line (PHYSICS §1, §3 middlebox variant).

asyncio sets TCP_NODELAY on every TCP socket it creates, so each line leaves at once as its
own small segment: fragmented writes, but no stall when a client connects directly (the
server prints the TCP_NODELAY value it found on each accepted socket to stderr). Put
nagle_forwarder.py --nagle on between it and the client and the client sees ~40 ms stalls;
--nagle off is the fixed twin. The server is the same in both cases, which is the point: both
endpoints are "correct" and the hop in the middle decides.

--nagle on clears TCP_NODELAY again on each accepted socket (asyncio's default is off):
the per-line server whose own Nagle holds the lines after the first until its peer's delayed
ACK — behind a transparent hop (Nagle off on both its legs) the hop only passes that on.

Prints `PORT <n>` when listening; exits after --max-conns connections have closed, or after
--idle-timeout seconds without a request, or at --deadline.
"""

import argparse
import asyncio
import socket

from latency import announce_port, note


class PerLine(asyncio.Protocol):
    def __init__(self, server):
        self.server = server
        self.buf = b""
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        sock = transport.get_extra_info("socket")
        if self.server.nagle:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
        nodelay = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
        how = "cleared by --nagle on" if self.server.nagle else "set by asyncio"
        note(f"aio_lineserver: accepted, TCP_NODELAY={nodelay} ({how})")
        self.server.touch()

    def data_received(self, data):
        self.server.touch()
        self.buf += data
        while b"\r\n" in self.buf:
            line, self.buf = self.buf.split(b"\r\n", 1)
            parts = line.split()
            i = parts[1].decode() if len(parts) > 1 else "?"
            for k in range(1, self.server.lines + 1):
                self.transport.write(f"attr-{k}: value-{i}-{k}\r\n".encode())
            self.transport.write(b".\r\n")
            self.server.requests += 1

    def connection_lost(self, exc):
        self.server.closed += 1
        self.server.touch()


class Server:
    def __init__(self, args):
        self.lines = args.lines
        self.nagle = args.nagle == "on"
        self.max_conns = args.max_conns
        self.idle_timeout = args.idle_timeout
        self.requests = 0
        self.closed = 0
        self.activity = asyncio.Event()

    def touch(self):
        self.activity.set()

    async def wait_until_done(self):
        while self.closed < self.max_conns:
            self.activity.clear()
            try:
                await asyncio.wait_for(self.activity.wait(), self.idle_timeout)
            except asyncio.TimeoutError:
                return


async def run(args):
    state = Server(args)
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(lambda: PerLine(state), "127.0.0.1", args.port)
    announce_port(srv.sockets[0])
    try:
        await asyncio.wait_for(state.wait_until_done(), args.deadline)
    except asyncio.TimeoutError:
        pass
    srv.close()
    await srv.wait_closed()
    note(f"aio_lineserver served {state.requests} requests on {state.closed} connections")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--lines", type=int, default=8)
    p.add_argument("--nagle", choices=["on", "off"], default="off")
    p.add_argument("--max-conns", type=int, default=1)
    p.add_argument("--idle-timeout", type=float, default=5.0)
    p.add_argument("--deadline", type=float, default=120.0)
    asyncio.run(run(p.parse_args()))


if __name__ == "__main__":
    main()
