"""A CPython asyncio client that sends many small independent messages to one peer: COUNT lines
"SET kNNNN vNNNN…\n" of SIZE bytes (default 200 of 40), pipelined (it does not wait for an
answer before sending the next), then reads one answer line per message and exits.
  (default)  one transport.write() per message, with `await asyncio.sleep(0)` between them: with
             TCP_NODELAY on (asyncio sets it on TCP transports; set again here) each message
             leaves as its own segment: a syscall, a packet and a slot of the congestion window
             each (tcpdoctor's unbatched_messages)
  --batched  the same messages gathered and written with one transport.writelines()
  --rounds R --lead-us N
             R rounds of COUNT messages, each round's first message written N µs (busy wait)
             before the others, the next round only after every answer of this one: over a
             path longer than N µs each way the server answers the first message before the
             rest reach it, and its answer's ACK number falls inside the round's burst
It connects to HOST:PORT, retrying for at most 5 s while the server starts.
Usage: python3 unbatched_client.py HOST:PORT [--batched] [--count N] [--size BYTES]
           [--rounds R] [--lead-us N]"""
import argparse
import asyncio
import socket
import sys
import time


class Answers(asyncio.Protocol):
    def __init__(self, expected, done):
        self.expected, self.done, self.lines = expected, done, 0

    def connection_made(self, transport):
        self.transport = transport

    def expect(self, expected, done):
        self.expected, self.done = expected, done
        self.check()

    def data_received(self, data):
        self.lines += data.count(b"\n")
        self.check()

    def check(self):
        if self.lines >= self.expected and not self.done.done():
            self.done.set_result(self.lines)

    def connection_lost(self, exc):
        if not self.done.done():
            self.done.set_exception(ConnectionError(f"closed after {self.lines} answers"))


def messages(count, size):
    out = []
    for i in range(count):
        head = b"SET k%04d v%04d" % (i, i)
        out.append(head + b"x" * max(0, size - len(head) - 1) + b"\n")
    return out


async def main(host, port, batched, count, size, rounds, lead_us):
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    for _ in range(500):
        try:
            transport, proto = await loop.create_connection(
                lambda: Answers(count, done), host, port
            )
            break
        except OSError:
            await asyncio.sleep(0.01)
    else:
        sys.exit("the server never listened")
    transport.get_extra_info("socket").setsockopt(
        socket.IPPROTO_TCP, socket.TCP_NODELAY, 1
    )
    msgs = messages(count, size)
    for r in range(rounds):
        if r > 0:
            done = loop.create_future()
            proto.expect(count * (r + 1), done)
        if batched:
            transport.writelines(msgs)
        else:
            for i, m in enumerate(msgs):
                transport.write(m)
                if i == 0 and lead_us:
                    until = time.perf_counter() + lead_us / 1e6
                    while time.perf_counter() < until:
                        pass
                await asyncio.sleep(0)
        answers = await asyncio.wait_for(done, 30)
    transport.close()
    print(f"sent={count * rounds} answers={answers} batched={batched}", flush=True)


p = argparse.ArgumentParser(usage=__doc__)
p.add_argument("target")
p.add_argument("--batched", action="store_true")
p.add_argument("--count", type=int, default=200)
p.add_argument("--size", type=int, default=40)
p.add_argument("--rounds", type=int, default=1)
p.add_argument("--lead-us", type=int, default=0)
a = p.parse_args()
h, _, pt = a.target.rpartition(":")
asyncio.run(main(h, int(pt), a.batched, a.count, a.size, a.rounds, a.lead_us))
