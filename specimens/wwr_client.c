/*
 * wwr_client.c: the write-write-read client (PHYSICS §3, "client writes a request as
 * header + body, then reads").
 *
 * Protocol (served by wwr_server.py): a request is a 4-byte big-endian body length followed by
 * the body; the server replies only once it holds the whole request, with a 4-byte length and
 * a reply body, in one write.
 *
 * Default mode, THE PATHOLOGY: the request goes out as two send() calls, header then body, on
 * a plain socket (Nagle ON, the C default). The header leaves at once (nothing unacknowledged);
 * the body is small and the header is not yet ACKed, so Nagle holds it. The server has nothing
 * to say until the body arrives, so it delays its ACK (~40 ms, Linux ato). Then the ACK goes
 * out, the body follows within microseconds, and the reply comes. Every request pays ~40 ms:
 * nagle_delayed_ack, client_to_server.
 *
 * --fixed, the twin: the same header and body go out with one writev(), i.e. one segment.
 *
 * Prints one line per exchange and a summary line in the same format as the Python specimens.
 * Bounded: --count requests, 5 s receive timeout.
 *
 * Build: cc -O2 -Wall -o wwr_client wwr_client.c
 * Run:   ./wwr_client --port PORT --count 30 [--body 100] [--fixed]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define STALL_MS 30.0

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000.0 + ts.tv_nsec / 1e6;
}

static int send_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = send(fd, p, len, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int recv_all(int fd, void *buf, size_t len) {
    char *p = buf;
    while (len > 0) {
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Nearest-rank percentile of a sorted array, q in 0..100 (same rule as latency.py). */
static double percentile(const double *v, int n, int q) {
    int rank = (n * q + 99) / 100;
    if (rank < 1) rank = 1;
    return v[rank - 1];
}

static void usage(const char *argv0) {
    fprintf(stderr, "usage: %s --port PORT [--count N] [--body BYTES] [--fixed] [--quiet]\n", argv0);
    exit(2);
}

int main(int argc, char **argv) {
    int port = 0, count = 30, body_len = 100, fixed = 0, quiet = 0;
    static const struct option opts[] = {
        {"port", required_argument, 0, 'p'}, {"count", required_argument, 0, 'n'},
        {"body", required_argument, 0, 'b'}, {"fixed", no_argument, 0, 'f'},
        {"quiet", no_argument, 0, 'q'},      {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "p:n:b:fq", opts, NULL)) != -1) {
        switch (c) {
        case 'p': port = atoi(optarg); break;
        case 'n': count = atoi(optarg); break;
        case 'b': body_len = atoi(optarg); break;
        case 'f': fixed = 1; break;
        case 'q': quiet = 1; break;
        default: usage(argv[0]);
        }
    }
    if (port <= 0 || port > 65535 || count <= 0 || count > 100000 || body_len <= 0 || body_len > 65536)
        usage(argv[0]);

    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) { perror("socket"); return 1; }
    struct timeval tv = {.tv_sec = 5, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) { perror("connect"); return 1; }

    char *body = malloc((size_t)body_len);
    double *lat = malloc(sizeof(double) * (size_t)count);
    if (!body || !lat) { perror("malloc"); return 1; }
    uint32_t hdr = htonl((uint32_t)body_len);

    for (int i = 0; i < count; i++) {
        memset(body, 'a' + i % 26, (size_t)body_len);
        double t0 = now_ms();
        if (fixed) {
            struct iovec iov[2] = {{&hdr, sizeof hdr}, {body, (size_t)body_len}};
            ssize_t want = (ssize_t)(sizeof hdr + (size_t)body_len);
            if (writev(fd, iov, 2) != want) { perror("writev"); return 1; }
        } else {
            if (send_all(fd, &hdr, sizeof hdr) < 0) { perror("send header"); return 1; }
            if (send_all(fd, body, (size_t)body_len) < 0) { perror("send body"); return 1; }
        }
        uint32_t rlen_be;
        if (recv_all(fd, &rlen_be, sizeof rlen_be) < 0) { fprintf(stderr, "reply header: %s\n", strerror(errno)); return 1; }
        uint32_t rlen = ntohl(rlen_be);
        if (rlen > 1u << 20) { fprintf(stderr, "reply too long: %u\n", rlen); return 1; }
        char *reply = malloc(rlen ? rlen : 1);
        if (!reply || recv_all(fd, reply, rlen) < 0) { fprintf(stderr, "reply body: %s\n", strerror(errno)); return 1; }
        free(reply);
        lat[i] = now_ms() - t0;
        if (!quiet) printf("exchange %d %.3f ms\n", i + 1, lat[i]);
    }
    close(fd);

    qsort(lat, (size_t)count, sizeof lat[0], cmp_double);
    int stalled = 0;
    for (int i = 0; i < count; i++) stalled += lat[i] >= STALL_MS;
    printf("summary count=%d median_ms=%.2f p90_ms=%.2f max_ms=%.2f stalled=%d stalled_share=%.2f "
           "(stalled = >= %.0f ms)\n",
           count, percentile(lat, count, 50), percentile(lat, count, 90), lat[count - 1], stalled,
           (double)stalled / count, STALL_MS);
    free(body);
    free(lat);
    return 0;
}
