/*
 * http_wwr_client.c: an HTTP/1.1 keep-alive client that writes each POST as two send() calls,
 * headers then body, and then reads the response: write-write-read (PHYSICS §3). Its peer is
 * go_httpserver.go (any HTTP/1.1 server that answers once it has the whole body will do).
 *
 * Default, THE PATHOLOGY: a plain C socket (Nagle ON). The header block (~110 B) leaves at
 * once; the body (--body bytes, default 100) is small and the header is unacknowledged, so
 * Nagle holds it. The server cannot answer without the body and delays its ACK of the header
 * (~40 ms Linux ato, once the connection is past quick-ack mode). The ACK releases the body,
 * the response follows. Expect nagle_delayed_ack client_to_server.
 *
 * --fixed, the twin: the same header and body in one writev() (one segment).
 *
 * Prints one line per exchange and a summary in the format of specimens/latency.py.
 * Bounded: --count requests on one connection, 5 s socket timeouts.
 *
 * Build: cc -O2 -Wall -o http_wwr_client http_wwr_client.c
 * Run:   ./http_wwr_client --port PORT [--count 40] [--body 100] [--fixed]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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

static int send_all(int fd, const char *p, size_t len) {
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

/* Read one HTTP response (headers, then Content-Length bytes). Returns the status or -1. */
static int read_response(int fd) {
    char buf[8192];
    size_t have = 0;
    char *end = NULL;
    while (!end) {
        if (have == sizeof buf - 1) return -1;
        ssize_t n = recv(fd, buf + have, sizeof buf - 1 - have, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        have += (size_t)n;
        buf[have] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) return -1;
    long clen = -1;
    for (char *h = strstr(buf, "\r\n"); h && h < end; h = strstr(h + 2, "\r\n")) {
        if (strncasecmp(h + 2, "Content-Length:", 15) == 0) clen = strtol(h + 17, NULL, 10);
    }
    if (clen < 0 || clen > 1 << 20) return -1;
    size_t body_have = have - (size_t)(end + 4 - buf);
    while ((long)body_have < clen) {
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return -1;
        body_have += (size_t)n;
    }
    return status;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(const double *v, int n, int q) { /* nearest rank, as latency.py */
    int rank = (n * q + 99) / 100;
    if (rank < 1) rank = 1;
    return v[rank - 1];
}

int main(int argc, char **argv) {
    int port = 0, count = 40, body_len = 100, fixed = 0;
    static const struct option opts[] = {
        {"port", required_argument, 0, 'p'}, {"count", required_argument, 0, 'n'},
        {"body", required_argument, 0, 'b'}, {"fixed", no_argument, 0, 'f'}, {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "p:n:b:f", opts, NULL)) != -1) {
        switch (c) {
        case 'p': port = atoi(optarg); break;
        case 'n': count = atoi(optarg); break;
        case 'b': body_len = atoi(optarg); break;
        case 'f': fixed = 1; break;
        default: fprintf(stderr, "usage: %s --port PORT [--count N] [--body B] [--fixed]\n", argv[0]); return 2;
        }
    }
    if (port <= 0 || port > 65535 || count <= 0 || count > 10000 || body_len <= 0 || body_len > 4096) {
        fprintf(stderr, "bad arguments\n");
        return 2;
    }
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) { perror("socket"); return 1; }
    struct timeval tv = {.tv_sec = 5, .tv_usec = 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) { perror("connect"); return 1; }

    char hdr[512], body[4096];
    double *lat = malloc(sizeof(double) * (size_t)count);
    if (!lat) return 1;
    for (int i = 0; i < count; i++) {
        memset(body, 'a' + i % 26, (size_t)body_len);
        int hl = snprintf(hdr, sizeof hdr,
                          "POST /echo HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/octet-stream\r\n"
                          "Content-Length: %d\r\n\r\n", port, body_len);
        double t0 = now_ms();
        if (fixed) {
            struct iovec iov[2] = {{hdr, (size_t)hl}, {body, (size_t)body_len}};
            if (writev(fd, iov, 2) != hl + body_len) { perror("writev"); return 1; }
        } else {
            if (send_all(fd, hdr, (size_t)hl) < 0) { perror("send header"); return 1; }
            if (send_all(fd, body, (size_t)body_len) < 0) { perror("send body"); return 1; }
        }
        int st = read_response(fd);
        if (st != 200) { fprintf(stderr, "bad response (status %d): %s\n", st, strerror(errno)); return 1; }
        lat[i] = now_ms() - t0;
        printf("exchange %d %.3f ms\n", i + 1, lat[i]);
    }
    close(fd);
    qsort(lat, (size_t)count, sizeof lat[0], cmp_double);
    int stalled = 0;
    for (int i = 0; i < count; i++) stalled += lat[i] >= STALL_MS;
    printf("summary count=%d median_ms=%.2f p90_ms=%.2f max_ms=%.2f stalled=%d stalled_share=%.2f "
           "(stalled = >= %.0f ms)\n",
           count, percentile(lat, count, 50), percentile(lat, count, 90), lat[count - 1], stalled,
           (double)stalled / count, STALL_MS);
    free(lat);
    return 0;
}
