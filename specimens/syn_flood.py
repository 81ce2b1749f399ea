"""SYN flood on loopback: 40 SYNs from a raw socket to a listening port, 5 ms apart.

The kernel answers each with a SYN-ACK and, having no socket for the raw sender's port, the
sender's kernel resets it: no handshake completes, no request is carried. Run as root while a
capture runs (specimens/record.sh style):

    tcpdump -i lo -s 128 -w syn_flood_no_handshake.pcap 'tcp port PORT' &
    python3 specimens/syn_flood.py PORT
"""
import random, socket, struct, sys, time

def csum(b):
    if len(b) % 2: b += b"\0"
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xFFFF); s += s >> 16
    return ~s & 0xFFFF

def syn(src, sport, dst, dport, seq):
    tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, 0, 5 << 4, 0x02, 64240, 0, 0)
    pseudo = socket.inet_aton(src) + socket.inet_aton(dst) + struct.pack("!BBH", 0, 6, len(tcp))
    c = csum(pseudo + tcp)
    return tcp[:16] + struct.pack("!H", c) + tcp[18:]


port = int(sys.argv[1])
lst = socket.socket()
lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
lst.bind(("127.0.0.1", port))
lst.listen(128)
raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
for i in range(40):
    pkt = syn("127.0.0.1", 20000 + i, "127.0.0.1", port, random.getrandbits(32))
    raw.sendto(pkt, ("127.0.0.1", 0))
    time.sleep(0.005)
time.sleep(0.2)
