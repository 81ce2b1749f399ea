/*
 * nfq_delay.c: a fixed one-way delay for chosen loopback packets, via an NFQUEUE.
 *
 * Loopback has no path: RTTs are tens of microseconds, so round-trip-bound clients (PHYSICS §5)
 * and the "ACK delay plus one RTT" form of the Nagle stall (§3) cannot show on it. This kernel
 * has no netem, so record.sh sends the packets of ONE direction of a specimen's connection
 * (those from the server's port, on their way into the loopback receive path) to this queue:
 *
 *     iptables-legacy -t raw -A PREROUTING -i lo -p tcp --sport PORT \
 *         -j NFQUEUE --queue-num Q --queue-bypass
 *
 * and this program hands each one back to the kernel (NF_ACCEPT) --delay-ms after it arrived,
 * in arrival order. TCP on both ends sees a real path with that RTT: the handshake, every ACK
 * clock and every timer runs on it. tcpdump on lo sees packets as they are sent, before the
 * queue, so the capture is the one you would take at the server's end of a WAN link.
 *
 * Prints `READY` once the queue is bound. On SIGINT/SIGTERM it drains: it goes on delaying
 * packets as before and exits once it has held nothing for two delays, so a connection's
 * closing packets keep the path's timing. At --deadline it releases whatever it holds and
 * exits in any case.
 *
 * Build: cc -O2 -Wall -o nfq_delay nfq_delay.c -lnetfilter_queue   (libnetfilter-queue-dev)
 * Run (root): ./nfq_delay --queue Q --delay-ms 30 [--deadline 60]
 */
#include <arpa/inet.h> /* before linux/netfilter.h, which would pull in linux/in.h */
#include <errno.h>
#include <getopt.h>
#include <libnetfilter_queue/libnetfilter_queue.h>
#include <linux/netfilter.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_HELD 65536 /* packets held at once; far above what a specimen has in flight */

struct held {
    uint32_t id;
    double release_ms;
};

static struct held ring[MAX_HELD];
static size_t head, count;
static double delay_ms = 30.0;
static volatile sig_atomic_t draining;
static double last_arrival_ms;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static int on_packet(struct nfq_q_handle *qh, struct nfgenmsg *msg, struct nfq_data *nfa, void *data) {
    (void)msg;
    (void)data;
    struct nfqnl_msg_packet_hdr *ph = nfq_get_msg_packet_hdr(nfa);
    if (!ph) return 0;
    uint32_t id = ntohl(ph->packet_id);
    last_arrival_ms = now_ms();
    if (count == MAX_HELD) /* cannot hold it: let it through at once rather than lose it */
        return nfq_set_verdict(qh, id, NF_ACCEPT, 0, NULL);
    ring[(head + count) % MAX_HELD] = (struct held){id, now_ms() + delay_ms};
    count++;
    return 0;
}

static void release_due(struct nfq_q_handle *qh, int all) {
    double now = now_ms();
    while (count > 0 && (all || ring[head].release_ms <= now)) {
        nfq_set_verdict(qh, ring[head].id, NF_ACCEPT, 0, NULL);
        head = (head + 1) % MAX_HELD;
        count--;
    }
}

static void on_signal(int sig) {
    (void)sig;
    draining = 1;
}

int main(int argc, char **argv) {
    int queue = -1;
    double deadline_s = 60.0;
    static const struct option opts[] = {
        {"queue", required_argument, 0, 'q'},
        {"delay-ms", required_argument, 0, 'd'},
        {"deadline", required_argument, 0, 't'},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "q:d:t:", opts, NULL)) != -1) {
        switch (c) {
        case 'q': queue = atoi(optarg); break;
        case 'd': delay_ms = atof(optarg); break;
        case 't': deadline_s = atof(optarg); break;
        default: goto usage;
        }
    }
    if (queue < 0 || queue > 65535 || delay_ms < 0 || delay_ms > 10000 || deadline_s <= 0) {
    usage:
        fprintf(stderr, "usage: %s --queue N --delay-ms MS [--deadline S]\n", argv[0]);
        return 2;
    }

    struct nfq_handle *h = nfq_open();
    if (!h) { perror("nfq_open (needs root)"); return 1; }
    struct nfq_q_handle *qh = nfq_create_queue(h, (uint16_t)queue, on_packet, NULL);
    if (!qh) { perror("nfq_create_queue"); nfq_close(h); return 1; }
    if (nfq_set_mode(qh, NFQNL_COPY_META, 0) < 0) { perror("nfq_set_mode"); return 1; }
    nfq_set_queue_maxlen(qh, MAX_HELD);

    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);

    int fd = nfq_fd(h);
    char buf[4096] __attribute__((aligned));
    double end = now_ms() + deadline_s * 1000.0;
    unsigned long total = 0;
    printf("READY\n");
    fflush(stdout);

    while (now_ms() < end) {
        if (draining && count == 0 && now_ms() - last_arrival_ms > 2 * delay_ms) break;
        /* Sleep until the next release is due (poll() counts whole ms, so a packet may
         * leave up to ~1 ms late: path jitter) or a packet arrives. */
        int timeout = 50;
        if (count > 0) {
            double wait = ring[head].release_ms - now_ms();
            timeout = wait <= 0 ? 0 : wait >= 50 ? 50 : (int)wait + 1;
        }
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, timeout);
        if (r < 0 && errno != EINTR) { perror("poll"); break; }
        if (r > 0 && (pfd.revents & POLLIN)) {
            ssize_t n = recv(fd, buf, sizeof buf, 0);
            if (n > 0) {
                nfq_handle_packet(h, buf, (int)n);
                total++;
            } else if (n < 0 && errno == ENOBUFS) {
                fprintf(stderr, "nfq_delay: queue overrun (ENOBUFS)\n");
            }
        }
        release_due(qh, 0);
    }
    release_due(qh, 1);
    nfq_destroy_queue(qh);
    nfq_close(h);
    fprintf(stderr, "nfq_delay: delayed %lu packets by %.1f ms on queue %d\n", total, delay_ms, queue);
    return 0;
}
