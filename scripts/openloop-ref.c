/* A reference open-loop client for scripts/bench-driver.sh: one TCP connection to a redis
 * server, PING at a fixed rate, latency measured from each request's intended start (its
 * slot on the schedule), the way wrk2 and oha measure and tcpdoctor bench --rate does.
 *
 *   openloop-ref HOST PORT RATE SECONDS WARMUP_SECONDS [CONNECTIONS]
 *
 * With several connections, each is a thread with RATE / CONNECTIONS of the load, its slots
 * staggered by interval x c / CONNECTIONS (as tcpdoctor's schedule staggers them).
 * Each slot: wait for the previous answer (one request in flight, as tcpdoctor's default
 * --pipeline 1), sleep (clock_nanosleep, timer slack 1 ns) until 60 us before the slot, spin
 * to it, write, read the answer. A late slot is sent at once and keeps its time. Prints one
 * line: "count p50_us p99_us late_p50_us late_p99_us", where late is how long after its slot
 * (or after the previous answer, if that came later) each request was written.
 *
 * Build: cc -O2 -pthread -o openloop-ref openloop-ref.c */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_us(uint64_t *v, size_t n, double q) {
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, cmp);
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return (double)v[i] / 1000.0;
}

struct conn {
    struct sockaddr_in addr;
    uint64_t start, interval, total, skip;
    uint64_t *lat, *late;
    size_t n;
    int failed;
};

static void *drive(void *arg) {
    struct conn *c = arg;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&c->addr, sizeof c->addr) != 0) {
        perror("connect");
        c->failed = 1;
        return NULL;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
    const char req[] = "*1\r\n$4\r\nPING\r\n"; /* answered "+PONG\r\n" (7 bytes) */
    char buf[256];
    uint64_t free_at = c->start;
    for (uint64_t k = 0; k < c->total; k++) {
        uint64_t slot = c->start + k * c->interval;
        uint64_t t = now_ns();
        if (t + 60000 < slot) {
            uint64_t wake = slot - 60000;
            struct timespec ts = {.tv_sec = (time_t)(wake / 1000000000ull),
                                  .tv_nsec = (long)(wake % 1000000000ull)};
            clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        }
        while ((t = now_ns()) < slot) {
        }
        if (write(fd, req, sizeof req - 1) != (ssize_t)(sizeof req - 1)) {
            perror("write");
            c->failed = 1;
            return NULL;
        }
        uint64_t could = slot > free_at ? slot : free_at;
        size_t got = 0;
        while (got < 7) {
            ssize_t r = read(fd, buf + got, sizeof buf - got);
            if (r <= 0) {
                perror("read");
                c->failed = 1;
                return NULL;
            }
            got += (size_t)r;
        }
        uint64_t done = now_ns();
        free_at = done;
        if (k >= c->skip) {
            c->lat[c->n] = done - slot;
            c->late[c->n] = t > could ? t - could : 0;
            c->n++;
        }
    }
    close(fd);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc != 6 && argc != 7) {
        fprintf(stderr, "usage: %s HOST PORT RATE SECONDS WARMUP_SECONDS [CONNECTIONS]\n", argv[0]);
        return 2;
    }
    double rate = atof(argv[3]), secs = atof(argv[4]), warm = atof(argv[5]);
    int conns = argc == 7 ? atoi(argv[6]) : 1;
    if (rate <= 0 || secs <= 0 || warm < 0 || conns < 1 || conns > 256) return 2;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[2]))};
    if (inet_pton(AF_INET, argv[1], &a.sin_addr) != 1) return 2;
    const uint64_t interval = (uint64_t)(1e9 * conns / rate);
    const uint64_t total = (uint64_t)((secs + warm) * rate / conns);
    const uint64_t skip = (uint64_t)(warm * rate / conns);
    uint64_t start = now_ns() + 5000000;
    struct conn *cs = calloc((size_t)conns, sizeof *cs);
    pthread_t *th = calloc((size_t)conns, sizeof *th);
    for (int i = 0; i < conns; i++) {
        cs[i] = (struct conn){.addr = a,
                              .start = start + interval * (uint64_t)i / (uint64_t)conns,
                              .interval = interval,
                              .total = total,
                              .skip = skip,
                              .lat = calloc(total, sizeof(uint64_t)),
                              .late = calloc(total, sizeof(uint64_t))};
        pthread_create(&th[i], NULL, drive, &cs[i]);
    }
    uint64_t *lat = calloc(total * (size_t)conns, sizeof *lat);
    uint64_t *late = calloc(total * (size_t)conns, sizeof *late);
    size_t n = 0;
    for (int i = 0; i < conns; i++) {
        pthread_join(th[i], NULL);
        if (cs[i].failed) return 1;
        memcpy(lat + n, cs[i].lat, cs[i].n * sizeof *lat);
        memcpy(late + n, cs[i].late, cs[i].n * sizeof *late);
        n += cs[i].n;
    }
    double p50 = pct_us(lat, n, 0.5), p99 = pct_us(lat, n, 0.99);
    double l50 = pct_us(late, n, 0.5), l99 = pct_us(late, n, 0.99);
    printf("%zu %.3f %.3f %.3f %.3f\n", n, p50, p99, l50, l99);
    return 0;
}
