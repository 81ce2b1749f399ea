#!/usr/bin/env python3
"""wanlink: a userspace WAN emulator between two network namespaces.

Two namespaces (tdw-<pid>-a, tdw-<pid>-b) each get a TUN device `tun0`
(IFF_TUN | IFF_NO_PI): A is 198.18.0.1/32, B is 198.18.0.2/32, each with a host
route to the other through its tun0. This one process holds both TUN file
descriptors and forwards IP packets between them with a configurable one-way
delay, optional seeded jitter (never reordering) and deterministic loss rules.
The kernel needs no netem: every packet crosses this process.

It then runs a server command in namespace A (waiting for its readiness line),
optionally a tcpdump on tun0 in one namespace (LINKTYPE_RAW pcap, what people
capture on tunnels), and a client command in namespace B. When the client has
exited and the link has gone idle it stops everything and deletes the
namespaces -- also on error, SIGINT, SIGTERM or SIGHUP.

Directions: s2c = packets the server (A, 198.18.0.1) sends toward the client,
c2s = the opposite. Loss rules (--drop, comma separated):

  s2c:5       drop the 5th s2c packet that carries TCP payload
  s2c:5x2     ... and also the next transmission of the same sequence number
              (its first retransmission, e.g. the tail-loss probe): 2 in all
  c2s:syn:1   drop the 1st c2s packet with SYN set (syn/fin/rst flags counted
              separately; the xK suffix works here too)

Counting is per direction over packets as the sender emitted them, so a
deterministic exchange gives the same drops every run. Python stdlib only;
root required.
"""

import argparse
import ctypes
import errno
import fcntl
import heapq
import os
import random
import re
import select
import signal
import struct
import subprocess
import sys
import time

CLONE_NEWNET = 0x40000000
TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
PR_SET_TIMERSLACK = 29

ADDR_A = "198.18.0.1"   # server side
ADDR_B = "198.18.0.2"   # client side
TUN_NAME = "tun0"

mono = time.monotonic


TICK = 0.020


def wake_timeout(remaining):
    """select() timeout for a packet due in `remaining` seconds.

    Measured on a 2-vCPU VM: a 15 ms select() wakes ~200 us late (sometimes
    ms), a 0.1 ms one ~40 us late. So sleep long only until 1 ms before the due
    time, then in short naps, and spin (timeout 0, still reading the TUNs) for
    the last 150 us. This keeps releases within ~0.05 ms of the due time."""
    if remaining > 0.002:
        return remaining - 0.001
    if remaining > 0.0002:
        return remaining - 0.00015
    return 0.0


def log(msg):
    sys.stderr.write("wanlink: %s\n" % msg)
    sys.stderr.flush()


class Fatal(Exception):
    pass


def parse_duration(text):
    """'15ms' -> 0.015, '500us' -> 0.0005, '1.5s' -> 1.5, bare number = ms."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*(us|ms|s)?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError("bad duration %r (use e.g. 15ms, 500us, 0.2s)" % text)
    value = float(m.group(1))
    unit = m.group(2) or "ms"
    return value * {"us": 1e-6, "ms": 1e-3, "s": 1.0}[unit]


# --------------------------------------------------------------------------
# Loss rules


class DropRule:
    def __init__(self, spec):
        parts = spec.strip().split(":")
        if len(parts) not in (2, 3) or parts[0] not in ("s2c", "c2s"):
            raise argparse.ArgumentTypeError(
                "bad drop rule %r (want s2c:N, c2s:NxK or c2s:syn:N)" % spec)
        self.spec = spec.strip()
        self.direction = parts[0]
        self.what = parts[1] if len(parts) == 3 else "data"
        if self.what not in ("data", "syn", "fin", "rst"):
            raise argparse.ArgumentTypeError("bad drop class %r in %r" % (self.what, spec))
        m = re.fullmatch(r"([0-9]+)(?:x([0-9]+))?", parts[-1])
        if not m or int(m.group(1)) < 1:
            raise argparse.ArgumentTypeError("bad count in drop rule %r" % spec)
        self.nth = int(m.group(1))
        self.times = int(m.group(2) or 1)
        if self.times < 1:
            raise argparse.ArgumentTypeError("bad repeat in drop rule %r" % spec)
        self.seq = None        # sequence number of the segment being dropped
        self.dropped = 0

    def matches_class(self, tcp):
        if self.what == "data":
            return tcp["payload"] > 0
        return tcp[self.what]

    def decide(self, tcp, count):
        """count: 1-based index of this packet within its class and direction."""
        if self.dropped >= self.times:
            return False
        if self.seq is None:
            if count == self.nth:
                self.seq = tcp["seq"]
                self.dropped = 1
                return True
            return False
        if tcp["seq"] == self.seq:
            self.dropped += 1
            return True
        return False


def parse_tcp(pkt):
    """Minimal IPv4/TCP parse; None when not IPv4/TCP."""
    if len(pkt) < 20 or pkt[0] >> 4 != 4:
        return None
    ihl = (pkt[0] & 0x0F) * 4
    if pkt[9] != 6 or len(pkt) < ihl + 20:
        return None
    total = struct.unpack_from("!H", pkt, 2)[0]
    sport, dport, seq = struct.unpack_from("!HHI", pkt, ihl)
    doff = (pkt[ihl + 12] >> 4) * 4
    flags = pkt[ihl + 13]
    return {
        "sport": sport, "dport": dport, "seq": seq,
        "payload": max(0, total - ihl - doff),
        "fin": bool(flags & 0x01), "syn": bool(flags & 0x02), "rst": bool(flags & 0x04),
    }


# --------------------------------------------------------------------------
# Namespaces and TUN devices

libc = ctypes.CDLL(None, use_errno=True)


def setns(fd):
    if libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, "setns: " + os.strerror(e))


def run(cmd, check=True):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=20)
    if check and r.returncode != 0:
        raise Fatal("%s failed (%d): %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
    return r


def open_tun_in(ns):
    """Enter namespace ns, create tun0 there, come back. Returns the fd."""
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    nsfd = os.open("/run/netns/" + ns, os.O_RDONLY)
    try:
        setns(nsfd)
        try:
            # no IPv6 chatter (router solicitations, MLD) on the emulated link
            for knob in ("all", "default"):
                try:
                    with open("/proc/sys/net/ipv6/conf/%s/disable_ipv6" % knob, "w") as f:
                        f.write("1")
                except OSError:
                    pass
            fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
            ifr = struct.pack("16sH22x", TUN_NAME.encode(), IFF_TUN | IFF_NO_PI)
            fcntl.ioctl(fd, TUNSETIFF, ifr)
        finally:
            setns(home)
    finally:
        os.close(nsfd)
        os.close(home)
    return fd


# --------------------------------------------------------------------------
# Child processes with line-oriented output


class Child:
    def __init__(self, name, argv, echo):
        self.name = name
        self.echo = echo          # callable(line) for each output line
        self.buf = b""
        self.lines = []
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.fd = self.proc.stdout.fileno()
        os.set_blocking(self.fd, False)
        self.eof = False

    def on_readable(self):
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        if not data:
            self.eof = True
            if self.buf:
                self._line(self.buf)
                self.buf = b""
            return
        self.buf += data
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            self._line(line)

    def _line(self, raw):
        line = raw.decode("utf-8", "replace").rstrip("\r")
        self.lines.append(line)
        self.echo(line)

    def running(self):
        return self.proc.poll() is None

    def signal(self, sig):
        if self.running():
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass


# --------------------------------------------------------------------------
# The link


class WanLink:
    def __init__(self, args):
        self.args = args
        self.prefix = "tdw-%d" % os.getpid()
        self.ns_a = self.prefix + "-a"
        self.ns_b = self.prefix + "-b"
        self.namespaces = []
        self.fd_a = self.fd_b = None
        self.children = []
        self.heap = []
        self.serial = 0
        self.rng = random.Random(args.seed)
        self.last_due = {"s2c": 0.0, "c2s": 0.0}
        self.counts = {d: {"data": 0, "syn": 0, "fin": 0, "rst": 0} for d in ("s2c", "c2s")}
        self.stats = {d: {"pkts": 0, "bytes": 0, "dropped": 0, "nontcp": 0} for d in ("s2c", "c2s")}
        self.rules = list(args.drop)
        self.late = []            # release time minus due time, seconds
        self.write_cost = []      # duration of the write() into the TUN, seconds
        self.last_packet = mono()

    # -- setup / teardown -------------------------------------------------
    def setup(self):
        for ns, me, peer in ((self.ns_a, ADDR_A, ADDR_B), (self.ns_b, ADDR_B, ADDR_A)):
            run(["ip", "netns", "add", ns])
            self.namespaces.append(ns)
            fd = open_tun_in(ns)
            if ns == self.ns_a:
                self.fd_a = fd
            else:
                self.fd_b = fd
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
            run(["ip", "-n", ns, "addr", "add", me + "/32", "dev", TUN_NAME])
            run(["ip", "-n", ns, "link", "set", TUN_NAME, "up"])
            run(["ip", "-n", ns, "route", "add", peer + "/32", "dev", TUN_NAME])
            if self.args.cc:
                run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w",
                     "net.ipv4.tcp_congestion_control=" + self.args.cc])
        cc = run(["ip", "netns", "exec", self.ns_a, "sysctl", "-n",
                  "net.ipv4.tcp_congestion_control"], check=False).stdout.strip()
        log("namespaces %s (server %s) and %s (client %s), tcp cc %s, delay %.3f ms one way, "
            "jitter %.3f ms, drops %s" % (self.ns_a, ADDR_A, self.ns_b, ADDR_B, cc,
                                           self.args.delay * 1e3, self.args.jitter * 1e3,
                                           ",".join(r.spec for r in self.rules) or "none"))

    def teardown(self):
        for child in self.children:
            child.signal(signal.SIGTERM)
        for child in self.children:
            try:
                child.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                child.signal(signal.SIGKILL)
                try:
                    child.proc.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    log("could not reap %s (pid %d)" % (child.name, child.proc.pid))
            try:
                child.proc.stdout.close()
            except OSError:
                pass
        for ns in self.namespaces:
            r = run(["ip", "netns", "pids", ns], check=False)
            for pid in r.stdout.split():
                try:
                    os.kill(int(pid), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
        for fd in (self.fd_a, self.fd_b):
            if fd is not None:
                os.close(fd)
        self.fd_a = self.fd_b = None
        for ns in reversed(self.namespaces):
            r = run(["ip", "netns", "del", ns], check=False)
            if r.returncode != 0:
                log("could not delete namespace %s: %s" % (ns, r.stderr.strip()))
        self.namespaces = []

    # -- forwarding ---------------------------------------------------------
    def on_tun(self, fd, now):
        direction = "s2c" if fd == self.fd_a else "c2s"
        out = self.fd_b if fd == self.fd_a else self.fd_a
        for _ in range(256):
            try:
                pkt = os.read(fd, 65536)
            except BlockingIOError:
                return
            except OSError as e:
                if e.errno == errno.EAGAIN:
                    return
                raise
            self.last_packet = now
            st = self.stats[direction]
            tcp = parse_tcp(pkt)
            if tcp is None:
                st["nontcp"] += 1
                if pkt[:1] and pkt[0] >> 4 != 4:
                    continue          # never forward anything but IPv4
            else:
                drop = False
                counts = self.counts[direction]
                for cls in ("data", "syn", "fin", "rst"):
                    if (cls == "data" and tcp["payload"] > 0) or (cls != "data" and tcp[cls]):
                        counts[cls] += 1
                        for rule in self.rules:
                            if rule.direction == direction and rule.what == cls:
                                if rule.decide(tcp, counts[cls]):
                                    drop = True
                if drop:
                    st["dropped"] += 1
                    log("drop %s seq=%d len=%d syn=%d (data #%d, syn #%d) at +%.3f ms" % (
                        direction, tcp["seq"], tcp["payload"], tcp["syn"],
                        counts["data"], counts["syn"], (now - self.t0) * 1e3))
                    continue
            st["pkts"] += 1
            st["bytes"] += len(pkt)
            due = now + self.args.delay
            if self.args.jitter:
                due += self.rng.uniform(0.0, self.args.jitter)
            due = max(due, self.last_due[direction])   # jitter never reorders
            self.last_due[direction] = due
            self.serial += 1
            heapq.heappush(self.heap, (due, self.serial, out, pkt))

    def flush(self, now):
        while self.heap and self.heap[0][0] <= now:
            due, _, out, pkt = heapq.heappop(self.heap)
            t = mono()
            try:
                os.write(out, pkt)
            except OSError as e:
                log("tun write failed: %s" % e)
            self.late.append(t - due)
            self.write_cost.append(mono() - t)

    def pump(self, until, deadline):
        """Forward packets and read child output until until() or deadline."""
        while True:
            now = mono()
            self.flush(now)
            if until():
                return True
            now = mono()
            if now >= deadline:
                return False
            # wake at least every TICK to re-check until() (process exits, idleness)
            timeout = min(deadline - now, TICK)
            if self.heap:
                timeout = min(timeout, wake_timeout(self.heap[0][0] - now))
            fds = [self.fd_a, self.fd_b] + [c.fd for c in self.children if not c.eof]
            ready, _, _ = select.select(fds, [], [], max(0.0, timeout))
            now = mono()
            for fd in ready:
                if fd in (self.fd_a, self.fd_b):
                    self.on_tun(fd, now)
            for child in self.children:
                if not child.eof and child.fd in ready:
                    child.on_readable()

    # -- orchestration ------------------------------------------------------
    def start(self, name, ns, command, echo):
        argv = ["ip", "netns", "exec", ns, "sh", "-c", command]
        child = Child(name, argv, echo)
        self.children.append(child)
        return child

    def wait_line(self, child, pattern, seconds, what):
        rx = re.compile(pattern)
        seen = [0]

        def ready():
            for line in child.lines[seen[0]:]:
                if rx.search(line):
                    return True
            seen[0] = len(child.lines)
            return child.eof and not child.running()

        self.pump(ready, mono() + seconds)
        if not any(rx.search(l) for l in child.lines):
            if child.eof and not child.running():
                raise Fatal("%s exited (status %s) before printing a line matching %r"
                            % (what, child.proc.returncode, pattern))
            raise Fatal("%s did not print a line matching %r within %.0f s" % (what, pattern, seconds))

    def main(self):
        a = self.args
        self.t0 = mono()
        self.setup()
        dump = None
        if a.capture:
            ns = self.ns_a if a.capture_side == "server" else self.ns_b
            cmd = "exec tcpdump -i %s -n -s %d -U --immediate-mode -Z root -w %s" % (
                TUN_NAME, a.snaplen, shquote(os.path.abspath(a.capture)))
            dump = self.start("tcpdump", ns, cmd, lambda l: log("[tcpdump] " + l))
            self.wait_line(dump, r"listening on", 10, "tcpdump")
        server = self.start("server", self.ns_a, a.server, lambda l: log("[server] " + l))
        self.wait_line(server, a.ready, 10, "server")
        t_client = mono()
        client = self.start("client", self.ns_b, a.client, echo_stdout)
        finished = self.pump(lambda: client.eof and not client.running(), t_client + a.timeout)
        if not finished:
            log("client still running after %.0f s: stopping it" % a.timeout)
            client.signal(signal.SIGTERM)
        client_rc = client.proc.wait(timeout=5) if finished else 1
        log("client exited with %s after %.3f s" % (client_rc, mono() - t_client))
        # let the teardown handshake and any retransmissions cross the link:
        # done when nothing is queued and no packet arrived for --idle
        end = mono() + a.drain
        self.pump(lambda: not self.heap and mono() - self.last_packet >= a.idle, end)
        self.pump(lambda: not server.running(), min(end, mono() + 2))
        if dump is not None:
            dump.signal(signal.SIGINT)
            self.pump(lambda: dump.eof and not dump.running(), mono() + 5)
        self.report(dump)
        return client_rc

    def report(self, dump):
        for d in ("c2s", "s2c"):
            st = self.stats[d]
            log("%s: forwarded %d packets (%d bytes), dropped %d, non-TCP %d, "
                "payload packets seen %d" % (d, st["pkts"], st["bytes"], st["dropped"],
                                             st["nontcp"], self.counts[d]["data"]))
        if self.late:
            late = sorted(self.late)
            log("delay accuracy over %d packets: release later than due by median %.1f us, "
                "p99 %.1f us, max %.1f us" % (len(late), late[len(late) // 2] * 1e6,
                                             late[min(len(late) - 1, int(len(late) * 0.99))] * 1e6,
                                             late[-1] * 1e6))
            slow = sum(1 for x in late if x > 0.0005)
            if slow:
                log("%d of %d packets were released more than 0.5 ms late" % (slow, len(late)))
            wc = sorted(self.write_cost)
            log("write() into the TUN took median %.1f us, max %.1f us (the receiving stack "
                "runs inside it)" % (wc[len(wc) // 2] * 1e6, wc[-1] * 1e6))
        for rule in self.rules:
            if rule.dropped < rule.times:
                log("WARNING: drop rule %s matched only %d of %d times" % (
                    rule.spec, rule.dropped, rule.times))
        if dump is not None:
            seen = self.stats["c2s"]["pkts"] + self.stats["s2c"]["pkts"]
            side = self.args.capture_side
            emitted = sum(self.stats[d]["pkts"] + self.stats[d]["dropped"] for d in ("c2s", "s2c"))
            log("capture %s on the %s side; the link carried %d packets (%d emitted incl. drops)"
                % (self.args.capture, side, seen, emitted))


def echo_stdout(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def shquote(s):
    return "'" + s.replace("'", "'\\''") + "'"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--delay", type=parse_duration, default=parse_duration("15ms"),
                   help="one-way delay in each direction (default 15ms)")
    p.add_argument("--jitter", type=parse_duration, default=0.0,
                   help="extra uniform random delay 0..J per packet (no reordering)")
    p.add_argument("--seed", type=int, default=1, help="jitter seed (default 1)")
    p.add_argument("--drop", type=lambda s: [DropRule(x) for x in s.split(",") if x.strip()],
                   default=[], help="loss rules, e.g. s2c:5x2,c2s:syn:1")
    p.add_argument("--server", required=True, help="shell command run in namespace A (%s)" % ADDR_A)
    p.add_argument("--client", required=True, help="shell command run in namespace B (%s)" % ADDR_B)
    p.add_argument("--ready", default=r"LISTENING",
                   help="regex the server prints when ready to accept (default LISTENING)")
    p.add_argument("--capture", metavar="FILE", help="run tcpdump -w FILE on tun0")
    p.add_argument("--capture-side", choices=("client", "server"), default="client")
    p.add_argument("--snaplen", type=int, default=256)
    p.add_argument("--cc", default="",
                   help="set TCP congestion control in both namespaces (default: inherit the "
                        "host's; a non-init namespace may only pick one listed in the host's "
                        "net.ipv4.tcp_allowed_congestion_control)")
    p.add_argument("--timeout", type=float, default=120.0, help="client time limit, seconds")
    p.add_argument("--idle", type=parse_duration, default=parse_duration("300ms"),
                   help="after the client exits, stop once the link was idle this long")
    p.add_argument("--drain", type=parse_duration, default=parse_duration("5s"),
                   help="upper bound on that wait")
    p.add_argument("--rt-prio", type=int, default=10,
                   help="SCHED_FIFO priority of the forwarder (default 10; 0 = normal)")
    args = p.parse_args(argv)
    if os.geteuid() != 0:
        log("must run as root (namespaces, TUN devices, tcpdump)")
        return 2
    # 1 us timer slack so select() wakes close to the due time
    libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    if args.rt_prio:
        # The forwarder mostly sleeps; real-time priority keeps the endpoints it
        # wakes (inside its own write() into the TUN) from delaying it by
        # milliseconds on a small machine. Children fall back to SCHED_OTHER.
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK,
                                  os.sched_param(args.rt_prio))
        except OSError as e:
            log("could not get SCHED_FIFO priority (%s); delays may be less exact" % e)

    link = WanLink(args)

    def on_signal(signum, _frame):
        raise KeyboardInterrupt("signal %d" % signum)

    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, on_signal)
    try:
        return link.main()
    except Fatal as e:
        log("error: %s" % e)
        return 3
    except KeyboardInterrupt as e:
        log("interrupted (%s): tearing down" % (e or "SIGINT"))
        return 130
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        link.teardown()


if __name__ == "__main__":
    sys.exit(main())
