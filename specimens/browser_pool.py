#!/usr/bin/env python3
"""browser_pool: a real browser's HTTP/1.1 connection pool against a real web server.

    python3 browser_pool.py server [--port 7070] [--images 120]   # nginx, prints LISTENING
    python3 browser_pool.py client HOST PORT                     # headless Chromium

The server writes a page of N small images into a temporary directory and serves it with
nginx (keep-alive on, one worker). The client loads the page in headless Chromium, which
opens up to six keep-alive connections to the host and sends one request at a time on each
(HTTP/1.1 browsers do not pipeline). Over a WAN path every image therefore costs one round
trip on its connection: round-trip bound, with the requests already spread over parallel
connections, where the fix is multiplexing (HTTP/2) or fewer requests, not pipelining.

The client prints "summary images=<n loaded> total_ms=<page load wall time>".
"""
import argparse
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib


def png(r, g, b):
    """An 8x8 one-colour PNG (about 80 bytes)."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    raw = b"".join(b"\x00" + bytes([r, g, b]) * 8 for _ in range(8))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8, 8, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


NGINX_CONF = """worker_processes 1;
daemon off;
pid {root}/nginx.pid;
error_log stderr warn;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {root}/tmp;
  proxy_temp_path {root}/tmp;
  fastcgi_temp_path {root}/tmp;
  uwsgi_temp_path {root}/tmp;
  scgi_temp_path {root}/tmp;
  types {{ text/html html; image/png png; }}
  keepalive_requests 1000;
  server {{ listen {port}; root {root}/www; }}
}}
"""


def server(a):
    root = tempfile.mkdtemp(prefix="browser_pool.")
    os.chmod(root, 0o755)  # nginx workers run as an unprivileged user
    try:
        os.makedirs(root + "/www/img")
        os.makedirs(root + "/tmp")
        for i in range(a.images):
            with open("%s/www/img/i%03d.png" % (root, i), "wb") as f:
                f.write(png(i * 7 % 256, i * 13 % 256, i * 29 % 256))
        with open(root + "/www/index.html", "w") as f:
            f.write("<!doctype html><html><body>"
                    + "".join('<img src="/img/i%03d.png">' % i for i in range(a.images))
                    + "</body></html>\n")
        with open(root + "/nginx.conf", "w") as f:
            f.write(NGINX_CONF.format(root=root, port=a.port))
        nginx = subprocess.Popen(["nginx", "-p", root, "-c", root + "/nginx.conf"])
        deadline = time.monotonic() + 10
        import socket
        while True:
            try:
                socket.create_connection(("127.0.0.1", a.port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or nginx.poll() is not None:
                    sys.exit("nginx did not start")
                time.sleep(0.02)
        print("LISTENING 0.0.0.0:%d nginx, %d images" % (a.port, a.images), flush=True)
        try:
            nginx.wait(timeout=a.deadline)
        except subprocess.TimeoutExpired:
            pass
        finally:
            nginx.terminate()
            nginx.wait()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def client(a):
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        sys.exit("chromium not found")
    profile = tempfile.mkdtemp(prefix="browser_pool.profile.")
    try:
        t0 = time.perf_counter()
        dom = subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu",
                              "--no-first-run", "--user-data-dir=" + profile, "--dump-dom",
                              "http://%s:%d/" % (a.host, a.port)],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             timeout=a.deadline, check=True).stdout
        total = (time.perf_counter() - t0) * 1e3
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    print("summary images=%d total_ms=%.1f" % (dom.count("<img"), total), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="role", required=True)
    s = sub.add_parser("server")
    s.add_argument("--port", type=int, default=7070)
    s.add_argument("--images", type=int, default=120)
    s.add_argument("--deadline", type=float, default=120.0)
    c = sub.add_parser("client")
    c.add_argument("host")
    c.add_argument("port", type=int)
    c.add_argument("--deadline", type=float, default=60.0)
    a = p.parse_args()
    server(a) if a.role == "server" else client(a)


if __name__ == "__main__":
    main()
