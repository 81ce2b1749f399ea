"""A CPython asyncio line server that answers every request line with "+OK\r\n", listening on
127.0.0.1:PORT. asyncio sets TCP_NODELAY on the sockets of loop.create_server(host, port), so
whatever is written leaves at once:
  per-message  one transport.write() per answer: the answers to the lines of one read leave as
               one segment each (tcpdoctor's unbatched_messages, server→client)
  batched      the answers to all the lines of one read gathered and written with one call
Usage: python3 answer_lines.py PORT per-message|batched"""
import asyncio
import sys


class Answer(asyncio.Protocol):
    def __init__(self, batched):
        self.batched, self.buf = batched, b""

    def connection_made(self, transport):
        self.transport = transport

    def data_received(self, data):
        self.buf += data
        *lines, self.buf = self.buf.split(b"\n")
        if self.batched:
            if lines:
                self.transport.write(b"+OK\r\n" * len(lines))
        else:
            for _ in lines:
                self.transport.write(b"+OK\r\n")


async def main(port, batched):
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Answer(batched), "127.0.0.1", port)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


if len(sys.argv) != 3 or sys.argv[2] not in ("per-message", "batched"):
    sys.exit(__doc__)
asyncio.run(main(int(sys.argv[1]), sys.argv[2] == "batched"))
