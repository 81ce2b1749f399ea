/* work_server.c: the twin of siocoutq_server.c — the same line protocol and the same two
 * writes per reply with Nagle on — that, instead of polling its send queue, does real work
 * after each reply: a hash loop of ITERS rounds (default 20,000,000, some tens of ms, about
 * what the spinner spends waiting for the delayed ACK) that makes no system call.
 *
 * Usage: work_server PORT [CONNS [ITERS]]. Prints "listening on 127.0.0.1:PORT pid PID". */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static long iters = 20000000;
static volatile uint64_t sink;

static int listen_on(int port) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    socklen_t len = sizeof a;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 16) ||
        getsockname(s, (struct sockaddr *)&a, &len)) {
        perror("listen");
        exit(1);
    }
    printf("listening on 127.0.0.1:%d pid %d\n", ntohs(a.sin_port), (int)getpid());
    fflush(stdout);
    return s;
}

static int send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = send(fd, p, n, 0);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* FNV-1a over a counter: CPU only, no memory traffic to speak of, no system call. */
static void work(const char *seed, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)seed[i]) * 1099511628211ULL;
    for (long i = 0; i < iters; i++) h = (h ^ (uint64_t)i) * 1099511628211ULL;
    sink = h;
}

static void serve(int c) {
    char buf[4096], out[4200];
    size_t have = 0;
    for (;;) {
        char *nl;
        while ((nl = memchr(buf, '\n', have)) != NULL) {
            size_t line = (size_t)(nl - buf);
            int n = snprintf(out, sizeof out, "200 %.*s\r\n", (int)line, buf);
            if (send_all(c, out, (size_t)n) || send_all(c, ".\r\n", 3)) return;
            work(buf, line);
            memmove(buf, nl + 1, have - line - 1);
            have -= line + 1;
        }
        if (have == sizeof buf) return;
        ssize_t r = recv(c, buf + have, sizeof buf - have, 0);
        if (r <= 0) return;
        have += (size_t)r;
    }
}

int main(int argc, char **argv) {
    int s = listen_on(argc > 1 ? atoi(argv[1]) : 0);
    int conns = argc > 2 ? atoi(argv[2]) : 0;
    if (argc > 3) iters = atol(argv[3]);
    for (int served = 0; conns == 0 || served < conns; served++) {
        int c = accept(s, NULL, NULL);
        if (c < 0) return 1;
        serve(c);
        close(c);
    }
    return 0;
}
