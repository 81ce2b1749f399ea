"""A CPython asyncio line server on a socket from socket.create_server(): asyncio sets
TCP_NODELAY only on sockets whose protocol is IPPROTO_TCP, and create_server() makes them with
protocol 0, so Nagle stays on for every accepted socket (the 40 ms stall the Python world keeps
rediscovering). Each request line is answered with ROWS rows and a "." line:
  per-line  one transport.write() per line (ROWS + 1 writes per response)
  whole     the response joined and written once
With "nodelay-listener" the listening socket is bound to 0.0.0.0 and gets TCP_NODELAY before
it listens: every accepted socket inherits it (Linux copies the listener's setting), though
the program never sets it on them.
Usage: python3 asyncio_lines.py PORT per-line|whole [ROWS] [nodelay-listener]"""
import asyncio
import socket
import sys


class Rows(asyncio.Protocol):
    def __init__(self, mode, rows):
        self.mode, self.rows, self.buf = mode, rows, b""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buf += data
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            lines = [b"%03d %s row\r\n" % (200 + i, line.strip()) for i in range(self.rows)]
            lines.append(b".\r\n")
            if self.mode == "whole":
                self.transport.write(b"".join(lines))
            else:
                for l in lines:
                    self.transport.write(l)


async def main(port, mode, rows, nodelay_listener):
    if nodelay_listener:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("0.0.0.0", port))
        sock.listen(128)
    else:
        sock = socket.create_server(("127.0.0.1", port))
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Rows(mode, rows), sock=sock)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


if len(sys.argv) < 3 or sys.argv[2] not in ("per-line", "whole"):
    sys.exit(__doc__)
asyncio.run(
    main(
        int(sys.argv[1]),
        sys.argv[2],
        int(sys.argv[3]) if len(sys.argv) > 3 else 12,
        len(sys.argv) > 4 and sys.argv[4] == "nodelay-listener",
    )
)
