#!/usr/bin/env python3
"""nagle_forwarder.py: a userspace TCP forwarder that re-emits each chunk it reads with one
send() (PHYSICS §3, "a middlebox re-emits each chunk it reads with Nagle on its outbound leg").

    client --> [listen port]  nagle_forwarder  --> [upstream port] server

The forwarder reads whatever is there (recv of up to 64 KiB) and writes it on the other leg
at once, like many tunnels, sidecars and port-forwarders.

  --nagle on   THE PATHOLOGY. Outbound legs keep Nagle on (plain sockets). When the server
               behind sends a reply as several small writes (aio_lineserver.py, which is fast
               when used directly), the forwarder reads them as several chunks; the first goes
               out, the rest are held by the forwarder's Nagle until the client ACKs, and the
               client delays that ACK ~40 ms. The capture shows the stall on the
               client<->forwarder connection (nagle_delayed_ack server_to_client), while the
               forwarder<->server connection only shows small segments (fragmented_writes).
  --nagle off  The fixed twin: TCP_NODELAY on both outbound legs. Chunks still go out one by
               one (fragmented, as the server wrote them), but nothing waits for an ACK.

Prints `PORT <n>` for the listening port; exits after --max-conns client connections have
finished, after --idle-timeout seconds without traffic, or at --deadline.
"""

import argparse
import selectors
import socket
import time

from latency import announce_port, note


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0, help="listen port (0 = any free port)")
    p.add_argument("--upstream-port", type=int, required=True)
    p.add_argument("--upstream-host", default="127.0.0.1")
    p.add_argument("--nagle", choices=("on", "off"), default="on")
    p.add_argument("--max-conns", type=int, default=1)
    p.add_argument("--idle-timeout", type=float, default=5.0)
    p.add_argument("--deadline", type=float, default=120.0)
    args = p.parse_args()

    deadline = time.monotonic() + args.deadline
    lst = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", args.port))
    lst.listen(16)
    lst.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(lst, selectors.EVENT_READ, None)
    announce_port(lst)

    accepted = finished = chunks = 0
    open_legs = {}  # socket -> peer socket, for legs still readable
    while finished < args.max_conns and time.monotonic() < deadline:
        events = sel.select(timeout=args.idle_timeout)
        if not events:
            break
        for key, _ in events:
            sock = key.fileobj
            if sock is lst:
                client, _ = lst.accept()
                upstream = socket.create_connection((args.upstream_host, args.upstream_port), timeout=5)
                for s in (client, upstream):
                    s.setblocking(True)
                    s.settimeout(5)
                    if args.nagle == "off":
                        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sel.register(s, selectors.EVENT_READ, None)
                open_legs[client] = upstream
                open_legs[upstream] = client
                accepted += 1
                if accepted >= args.max_conns:
                    sel.unregister(lst)
                continue
            peer = open_legs[sock]
            data = sock.recv(65536)
            if data:
                peer.sendall(data)  # one send per chunk read: the forwarder's whole character
                chunks += 1
                continue
            # EOF on this leg: pass the half-close on, stop reading it.
            sel.unregister(sock)
            del open_legs[sock]
            try:
                peer.shutdown(socket.SHUT_WR)
            except OSError:
                pass
            if peer not in open_legs:  # both directions done: the pair is finished
                sock.close()
                peer.close()
                finished += 1
    note(f"nagle_forwarder nagle={args.nagle} forwarded {chunks} chunks for {finished} connections")


if __name__ == "__main__":
    main()
