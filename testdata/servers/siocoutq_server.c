/* siocoutq_server.c: a line server that, after each reply, polls its send queue with
 * ioctl(SIOCOUTQ) until it is empty — the spinning of Lua/pgbouncer-style event loops
 * (PHYSICS §6). Each reply goes out in two writes ("200 <line>\r\n", then ".\r\n") with Nagle
 * left on, so the second waits for the first one's ACK (the peer's delayed ACK, ~40 ms) and
 * the loop spins for all of it. Its twin work_server.c does real work instead.
 *
 * Usage: siocoutq_server PORT [CONNS]   (PORT 0: the kernel picks; CONNS: serve that many
 * connections one after another, then exit 0; 0 or absent: forever). Prints
 * "listening on 127.0.0.1:PORT pid PID" on stdout when it accepts. */
#include <arpa/inet.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

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

static void serve(int c) {
    char buf[4096], out[4200];
    size_t have = 0;
    for (;;) {
        char *nl;
        while ((nl = memchr(buf, '\n', have)) != NULL) {
            size_t line = (size_t)(nl - buf);
            int n = snprintf(out, sizeof out, "200 %.*s\r\n", (int)line, buf);
            if (send_all(c, out, (size_t)n) || send_all(c, ".\r\n", 3)) return;
            int queued = 1;
            while (queued > 0)
                if (ioctl(c, SIOCOUTQ, &queued) < 0) return;
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
    for (int served = 0; conns == 0 || served < conns; served++) {
        int c = accept(s, NULL, NULL);
        if (c < 0) return 1;
        serve(c);
        close(c);
    }
    return 0;
}
