/* pingpong.c: a deterministic client and server in one program, for counting system calls.
 * The process listens on 127.0.0.1:0 and forks a client; the client sets TCP_NODELAY,
 * connects and makes ROUNDS round trips (send() a 16-byte request, recv() the 16-byte reply);
 * the server accepts, sets TCP_NODELAY, and per request recv()s it, asks ioctl(FIONREAD)
 * once, and write()s the reply. One message per call in lock step, so on loopback every call
 * moves a whole message and the counts are exact, run after run:
 *   client: 1 setsockopt, 1 connect, ROUNDS sendto, ROUNDS recvfrom
 *   server: 1 accept, 1 setsockopt, ROUNDS + 1 recvfrom (the last sees the close),
 *           ROUNDS ioctl, ROUNDS write
 * Usage: pingpong [ROUNDS]   (default 100). Exits 0 when every reply came back right; prints
 * "pingpong: N round trips in U us" (the server's time from accept to the client's close, read
 * from the vDSO clock: no system call). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MSG 16

static int client(struct sockaddr_in *a, long rounds) {
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    char req[32], rep[MSG];
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(s, (struct sockaddr *)a, sizeof *a)) return 1;
    for (long i = 0; i < rounds; i++) {
        snprintf(req, sizeof req, "req %010ld\n", i % 10000000000L);
        if (send(s, req, MSG, 0) != MSG) return 1;
        if (recv(s, rep, MSG, MSG_WAITALL) != MSG || memcmp(rep, "rep", 3) ||
            memcmp(rep + 3, req + 3, MSG - 3))
            return 1;
    }
    close(s);
    return 0;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 100, served = 0;
    int s = socket(AF_INET, SOCK_STREAM, 0), one = 1, st = 0;
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a) || listen(s, 1) ||
        getsockname(s, (struct sockaddr *)&a, &len)) {
        perror("listen");
        return 1;
    }
    pid_t kid = fork();
    if (kid == 0) _exit(client(&a, rounds));
    int c = accept(s, NULL, NULL);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    char buf[MSG];
    for (;;) {
        int avail = 0;
        ssize_t r = recv(c, buf, MSG, MSG_WAITALL);
        if (r != MSG) break;
        ioctl(c, FIONREAD, &avail);
        memcpy(buf, "rep", 3);
        if (write(c, buf, MSG) != MSG) break;
        served++;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    close(c);
    waitpid(kid, &st, 0);
    printf("pingpong: %ld round trips in %.0f us\n", served,
           (t1.tv_sec - t0.tv_sec) * 1e6 + (t1.tv_nsec - t0.tv_nsec) / 1e3);
    return served == rounds && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
}
