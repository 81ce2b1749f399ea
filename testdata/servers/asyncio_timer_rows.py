"""A CPython asyncio line server that writes each reply row on a 1 ms timer (a server pacing
its rows, or waiting for each from a backend): it wakes ~once per millisecond per reply and
sleeps in between. Timer wake-ups, not a spin. Usage: python3 asyncio_timer_rows.py PORT"""
import asyncio
import sys


async def serve(reader, writer):
    while True:
        line = await reader.readline()
        if not line:
            break
        for i in range(12):
            writer.write(b"%03d %s row\r\n" % (200 + i, line.strip()))
            await asyncio.sleep(0.001)
        writer.write(b".\r\n")
        await writer.drain()
    writer.close()


async def main(port):
    server = await asyncio.start_server(serve, "127.0.0.1", port)
    print(f"listening on 127.0.0.1:{port}", flush=True)
    async with server:
        await server.serve_forever()


asyncio.run(main(int(sys.argv[1])))
