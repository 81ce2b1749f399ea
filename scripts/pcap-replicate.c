/*
 * pcap-replicate: grow a real pcap capture into a large one whose copies are distinct flows.
 *
 *   cc -O2 -o pcap-replicate scripts/pcap-replicate.c
 *   pcap-replicate SEED.pcap OUT.pcap TARGET_BYTES [GAP_MS]
 *
 * Writes OUT.pcap = the global header of SEED.pcap, then copy 0, 1, 2, ... of SEED's records until
 * the file holds at least TARGET_BYTES (it stops at the first record boundary at or past the
 * target, so the last copy may be partial). Copy k:
 *   - moves the client of every TCP flow to another address: IPv4 client ^= k << 8 (127.0.0.1
 *     becomes 127.0.k.1, 127.(k>>8).(k&255).1 past 255), IPv6 client's last 32 bits ^= k << 16;
 *     the client is the end that sent the SYN (or got the SYN-ACK), else the one with the higher
 *     port. Ports, sequence numbers and payload are left as they were, so each copy is a real
 *     conversation on a tuple of its own;
 *   - fixes the IPv4 header checksum and the TCP checksum incrementally (RFC 1624), so a checksum
 *     that was right stays right and one the capture had as "offloaded" stays as it was;
 *   - shifts every timestamp by k * (span of SEED + GAP_MS), so the copies follow one another.
 * Packets that are not TCP over IPv4/IPv6 (there are none in a `tcp port N` capture) are copied
 * with only their timestamps shifted.
 * Reads pcap in either byte order, µs or ns; link types Ethernet (with 802.1Q tags), raw IP,
 * Linux cooked SLL and SLL2, BSD loopback. pcapng is not read: convert with editcap -F pcap.
 *
 * Prints key=value lines on stdout: seed_packets, seed_flows, copies, packets, flows, bytes,
 * caplen_bytes, wire_bytes, tcp_packets.
 * A flow is a TCP connection: a 4-tuple, and a new one on that tuple when a SYN with a new
 * initial sequence number opens it again.
 */
#define _FILE_OFFSET_BITS 64
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *msg) {
    fprintf(stderr, "pcap-replicate: %s\n", msg);
    exit(2);
}

static int swapped; /* the file's byte order is not ours */

static uint32_t rd32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return swapped ? __builtin_bswap32(v) : v;
}
static void wr32(uint8_t *p, uint32_t v) {
    if (swapped) v = __builtin_bswap32(v);
    memcpy(p, &v, 4);
}
static uint16_t be16(const uint8_t *p) { return (uint16_t)(p[0] << 8 | p[1]); }
static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}
static void put_be16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

/* RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m') for each 16-bit word m that became m'. */
static void csum_fix32(uint8_t *csum, uint32_t old_word32, uint32_t new_word32) {
    uint32_t sum = (uint16_t)~be16(csum);
    sum += (uint16_t)~(old_word32 >> 16);
    sum += (uint16_t)~(old_word32 & 0xffff);
    sum += new_word32 >> 16;
    sum += new_word32 & 0xffff;
    while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
    put_be16(csum, (uint16_t)~sum);
}

/* What to change in one seed record. */
typedef struct {
    uint64_t off;     /* record header offset in the seed file */
    int32_t cli;      /* offset in the record data of the client's 32-bit address word; -1 none */
    int32_t ipcsum;   /* offset of the IPv4 header checksum; -1 none */
    int32_t tcpcsum;  /* offset of the TCP checksum; -1 none (not TCP, or not captured) */
    uint8_t conn_start;
} Rec;

typedef struct {
    uint8_t a[16], b[16]; /* endpoints in canonical order: a < b (address, then port) */
    uint16_t pa, pb;
    uint8_t used, v6, client_known, client_is_a, has_syn;
    uint32_t syn_seq;
} Flow;

static Flow *flows;
static size_t flow_cap;

static uint64_t hash_key(const uint8_t *a, const uint8_t *b, uint16_t pa, uint16_t pb) {
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < 16; i++) h = (h ^ a[i]) * 1099511628211ull;
    for (int i = 0; i < 16; i++) h = (h ^ b[i]) * 1099511628211ull;
    h = (h ^ pa) * 1099511628211ull;
    h = (h ^ pb) * 1099511628211ull;
    return h ^ (h >> 29);
}

static Flow *flow_lookup(const uint8_t *a, const uint8_t *b, uint16_t pa, uint16_t pb, int v6,
                         int *is_new) {
    size_t i = hash_key(a, b, pa, pb) & (flow_cap - 1);
    for (;;) {
        Flow *f = &flows[i];
        if (!f->used) {
            memset(f, 0, sizeof *f);
            f->used = 1;
            memcpy(f->a, a, 16);
            memcpy(f->b, b, 16);
            f->pa = pa;
            f->pb = pb;
            f->v6 = (uint8_t)v6;
            *is_new = 1;
            return f;
        }
        if (f->pa == pa && f->pb == pb && f->v6 == v6 && !memcmp(f->a, a, 16) &&
            !memcmp(f->b, b, 16)) {
            *is_new = 0;
            return f;
        }
        i = (i + 1) & (flow_cap - 1);
    }
}

/* Offset of the network-layer header in a record of this link type, and its ethertype-like kind
 * (4, 6 or 0 = other); -1 when the record is too short. */
static int l3_offset(uint32_t linktype, const uint8_t *d, uint32_t caplen, int *ipver) {
    int off;
    uint16_t et;
    *ipver = 0;
    switch (linktype) {
    case 1: /* Ethernet */
        if (caplen < 14) return -1;
        off = 12;
        et = be16(d + off);
        while ((et == 0x8100 || et == 0x88a8) && (uint32_t)off + 6 <= caplen) {
            off += 4;
            et = be16(d + off);
        }
        off += 2;
        *ipver = et == 0x0800 ? 4 : et == 0x86dd ? 6 : 0;
        return off;
    case 101: /* raw IP */
    case 228: /* raw IPv4 */
    case 229: /* raw IPv6 */
    case 12:
    case 14:
        if (caplen < 1) return -1;
        *ipver = d[0] >> 4;
        return 0;
    case 113: /* Linux cooked SLL */
        if (caplen < 16) return -1;
        et = be16(d + 14);
        *ipver = et == 0x0800 ? 4 : et == 0x86dd ? 6 : 0;
        return 16;
    case 276: /* Linux cooked SLL2 */
        if (caplen < 20) return -1;
        et = be16(d);
        *ipver = et == 0x0800 ? 4 : et == 0x86dd ? 6 : 0;
        return 20;
    case 0: /* BSD loopback: AF in the capturing host's order */
    case 108: {
        if (caplen < 4) return -1;
        uint32_t af;
        memcpy(&af, d, 4);
        if (linktype == 108) af = be32(d);
        else if (af > 0xffff) af = __builtin_bswap32(af);
        *ipver = af == 2 ? 4 : (af == 24 || af == 28 || af == 30) ? 6 : 0;
        return 4;
    }
    default:
        return -1;
    }
}

int main(int argc, char **argv) {
    if (argc < 4 || argc > 5) die("usage: pcap-replicate SEED.pcap OUT.pcap TARGET_BYTES [GAP_MS]");
    const char *seed_path = argv[1], *out_path = argv[2];
    uint64_t target = strtoull(argv[3], NULL, 10);
    double gap_ms = argc == 5 ? strtod(argv[4], NULL) : 10.0;

    FILE *in = fopen(seed_path, "rb");
    if (!in) die("cannot open the seed capture");
    if (fseeko(in, 0, SEEK_END)) die("seek");
    uint64_t seed_size = (uint64_t)ftello(in);
    rewind(in);
    uint8_t *seed = malloc(seed_size ? seed_size : 1);
    if (!seed || fread(seed, 1, seed_size, in) != seed_size) die("cannot read the seed capture");
    fclose(in);
    if (seed_size < 24) die("seed is not a pcap file");

    uint32_t magic;
    memcpy(&magic, seed, 4);
    uint64_t ticks_per_s;
    if (magic == 0xa1b2c3d4 || magic == 0xd4c3b2a1) ticks_per_s = 1000000;
    else if (magic == 0xa1b23c4d || magic == 0x4d3cb2a1) ticks_per_s = 1000000000;
    else die("seed is not a pcap file (pcapng? convert it with: editcap -F pcap IN OUT)");
    swapped = magic == 0xd4c3b2a1 || magic == 0x4d3cb2a1;
    uint32_t linktype = rd32(seed + 20) & 0x0fffffff;

    /* Pass 1: index the records; find the flows and their clients. */
    size_t nrec = 0, rec_cap = 1 << 16;
    Rec *recs = malloc(rec_cap * sizeof *recs);
    uint32_t *flow_of = malloc(rec_cap * sizeof *flow_of); /* flow slot, or UINT32_MAX */
    uint8_t *src_is_a = malloc(rec_cap);
    flow_cap = 1 << 16;
    while (flow_cap < seed_size / 40) flow_cap <<= 1; /* ≥ 2× the most records the seed can hold */
    flows = calloc(flow_cap, sizeof *flows);
    if (!recs || !flow_of || !src_is_a || !flows) die("out of memory");

    uint64_t min_t = UINT64_MAX, max_t = 0;
    size_t seed_flows = 0;
    uint64_t pos = 24;
    while (pos + 16 <= seed_size) {
        uint32_t caplen = rd32(seed + pos + 8);
        if (pos + 16 + caplen > seed_size) break; /* cut short: keep the whole records only */
        uint64_t t = (uint64_t)rd32(seed + pos) * ticks_per_s + rd32(seed + pos + 4);
        if (t < min_t) min_t = t;
        if (t > max_t) max_t = t;
        if (nrec == rec_cap) {
            rec_cap *= 2;
            recs = realloc(recs, rec_cap * sizeof *recs);
            flow_of = realloc(flow_of, rec_cap * sizeof *flow_of);
            src_is_a = realloc(src_is_a, rec_cap);
            if (!recs || !flow_of || !src_is_a) die("out of memory");
        }
        Rec *r = &recs[nrec];
        r->off = pos;
        r->cli = r->ipcsum = r->tcpcsum = -1;
        r->conn_start = 0;
        flow_of[nrec] = UINT32_MAX;

        const uint8_t *d = seed + pos + 16;
        int ipver;
        int l3 = l3_offset(linktype, d, caplen, &ipver);
        int src_off = -1, dst_off = -1, tcp = -1, v6 = 0;
        if (l3 >= 0 && ipver == 4 && (uint32_t)l3 + 20 <= caplen) {
            const uint8_t *ip = d + l3;
            int ihl = (ip[0] & 15) * 4;
            int frag = be16(ip + 6) & 0x3fff;
            if (ip[9] == 6 && ihl >= 20 && !frag && (uint32_t)(l3 + ihl + 14) <= caplen) {
                src_off = l3 + 12;
                dst_off = l3 + 16;
                tcp = l3 + ihl;
                r->ipcsum = l3 + 10;
            }
        } else if (l3 >= 0 && ipver == 6 && (uint32_t)l3 + 40 + 14 <= caplen) {
            const uint8_t *ip = d + l3;
            if (ip[6] == 6) {
                src_off = l3 + 8;
                dst_off = l3 + 24;
                tcp = l3 + 40;
                v6 = 1;
            }
        }
        if (tcp >= 0) {
            uint8_t sa[16] = {0}, da[16] = {0};
            int alen = v6 ? 16 : 4;
            memcpy(sa, d + src_off, alen);
            memcpy(da, d + dst_off, alen);
            uint16_t sp = be16(d + tcp), dp = be16(d + tcp + 2);
            uint8_t flags = d[tcp + 13];
            int c = memcmp(sa, da, 16);
            int s_is_a = c < 0 || (c == 0 && sp <= dp);
            int is_new;
            Flow *f = s_is_a ? flow_lookup(sa, da, sp, dp, v6, &is_new)
                             : flow_lookup(da, sa, dp, sp, v6, &is_new);
            if (is_new) {
                seed_flows++;
                r->conn_start = 1;
                if ((size_t)seed_flows * 2 > flow_cap) die("too many flows in the seed");
            }
            int syn = flags & 0x02, ack = flags & 0x10;
            if (syn && !ack) {
                uint32_t isn = be32(d + tcp + 4);
                if (f->has_syn && f->syn_seq != isn && !is_new) {
                    seed_flows++; /* the tuple is opened again: a new connection */
                    r->conn_start = 1;
                }
                f->has_syn = 1;
                f->syn_seq = isn;
                f->client_known = 1;
                f->client_is_a = (uint8_t)s_is_a;
            } else if (syn && ack && !f->client_known) {
                f->client_known = 1;
                f->client_is_a = (uint8_t)!s_is_a;
            }
            flow_of[nrec] = (uint32_t)(f - flows);
            src_is_a[nrec] = (uint8_t)s_is_a;
            /* The source's address word (the last 32 bits of an IPv6 address) for now; pass 2
             * moves to the destination's (4 or 16 bytes on) where the destination is the client. */
            r->cli = v6 ? src_off + 12 : src_off;
            r->tcpcsum = (uint32_t)(tcp + 18) <= caplen ? tcp + 16 : -1;
        }
        nrec++;
        pos += 16 + caplen;
    }
    if (nrec == 0) die("the seed capture has no packets");
    uint64_t seed_end = pos; /* whole records only */

    /* Pass 2: point each TCP record at its client's address word. */
    for (size_t i = 0; i < nrec; i++) {
        if (flow_of[i] == UINT32_MAX) continue;
        Flow *f = &flows[flow_of[i]];
        int client_is_a = f->client_known ? f->client_is_a : (f->pa > f->pb); /* higher port */
        int src_is_client = src_is_a[i] == client_is_a;
        if (!src_is_client) recs[i].cli += f->v6 ? 16 : 4;
    }

    uint64_t span = max_t - min_t;
    uint64_t step = span + (uint64_t)(gap_ms * (double)ticks_per_s / 1000.0 + 0.5);

    FILE *out = fopen(out_path, "wb");
    if (!out) die("cannot create the output file");
    setvbuf(out, NULL, _IOFBF, 1 << 20);
    if (fwrite(seed, 1, 24, out) != 24) die("write failed");
    uint64_t written = 24, packets = 0, flows_out = 0, caplen_bytes = 0, wire_bytes = 0,
             tcp_out = 0;
    uint64_t body = seed_end - 24;
    uint8_t *buf = malloc(body);
    if (!buf) die("out of memory");

    uint32_t copies = 0;
    for (uint32_t k = 0; written < target; k++) {
        if (k > 0xffff) die("more than 65536 copies: use a larger seed");
        memcpy(buf, seed + 24, body);
        uint64_t shift = (uint64_t)k * step;
        uint32_t xor4 = k << 8, xor6 = k << 16;
        size_t i;
        uint64_t end = body;
        for (i = 0; i < nrec; i++) {
            uint64_t ro = recs[i].off - 24;
            uint8_t *h = buf + ro;
            uint32_t caplen = rd32(h + 8);
            if (written + ro >= target) { /* the target is reached before this record */
                end = ro;
                break;
            }
            packets++;
            caplen_bytes += caplen;
            wire_bytes += rd32(h + 12);
            flows_out += recs[i].conn_start;
            if (shift) {
                uint64_t t = (uint64_t)rd32(h) * ticks_per_s + rd32(h + 4) + shift;
                wr32(h, (uint32_t)(t / ticks_per_s));
                wr32(h + 4, (uint32_t)(t % ticks_per_s));
            }
            if (recs[i].cli < 0) continue;
            tcp_out++;
            if (k == 0) continue;
            uint8_t *d = h + 16;
            uint8_t *w = d + recs[i].cli;
            uint32_t old = be32(w);
            uint32_t neu = old ^ (recs[i].ipcsum >= 0 ? xor4 : xor6); /* only IPv4 has ipcsum */
            w[0] = (uint8_t)(neu >> 24);
            w[1] = (uint8_t)(neu >> 16);
            w[2] = (uint8_t)(neu >> 8);
            w[3] = (uint8_t)neu;
            if (recs[i].ipcsum >= 0) csum_fix32(d + recs[i].ipcsum, old, neu);
            if (recs[i].tcpcsum >= 0) csum_fix32(d + recs[i].tcpcsum, old, neu);
        }
        if (fwrite(buf, 1, end, out) != end) die("write failed");
        written += end;
        copies++;
        if (i < nrec) break;
    }
    if (fclose(out)) die("write failed");

    printf("seed_packets=%zu\nseed_flows=%zu\nseed_span_s=%.6f\ncopies=%u\npackets=%llu\n"
           "flows=%llu\ntcp_packets=%llu\nbytes=%llu\ncaplen_bytes=%llu\nwire_bytes=%llu\n",
           nrec, seed_flows, (double)span / (double)ticks_per_s, copies,
           (unsigned long long)packets, (unsigned long long)flows_out,
           (unsigned long long)tcp_out, (unsigned long long)written,
           (unsigned long long)caplen_bytes, (unsigned long long)wire_bytes);
    return 0;
}
