/* forkthreads.c: forks and threads, each writing on its own TCP socket, to prove a tracer
 * follows both. The process listens on 127.0.0.1:0 and forks PROCS children; each child
 * starts THREADS threads (pthreads); each thread connects and write()s WRITES 8-byte messages,
 * then closes. The parent accepts every connection, reads each to its end, and checks the
 * total: PROCS * THREADS sockets, each with exactly WRITES write calls and 1 connect.
 * Usage: forkthreads [PROCS [THREADS [WRITES]]]   (default 3 4 10). Exits 0 when all bytes
 * arrived and every child exited 0; prints "forkthreads: N connections, B bytes". */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static struct sockaddr_in addr;
static int writes = 10;

static void *writer(void *arg) {
    (void)arg;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (struct sockaddr *)&addr, sizeof addr)) return (void *)1;
    for (int i = 0; i < writes; i++)
        if (write(s, "message\n", 8) != 8) return (void *)1;
    close(s);
    return NULL;
}

static int child(int threads) {
    pthread_t t[64];
    int bad = 0;
    for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, writer, NULL);
    for (int i = 0; i < threads; i++) {
        void *r;
        pthread_join(t[i], &r);
        bad |= r != NULL;
    }
    return bad;
}

int main(int argc, char **argv) {
    int procs = argc > 1 ? atoi(argv[1]) : 3, threads = argc > 2 ? atoi(argv[2]) : 4;
    if (argc > 3) writes = atoi(argv[3]);
    if (threads > 64) threads = 64;
    int s = socket(AF_INET, SOCK_STREAM, 0), bad = 0;
    socklen_t len = sizeof addr;
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&addr, sizeof addr) || listen(s, 128) ||
        getsockname(s, (struct sockaddr *)&addr, &len)) {
        perror("listen");
        return 1;
    }
    for (int p = 0; p < procs; p++)
        if (fork() == 0) _exit(child(threads));
    long bytes = 0;
    char buf[4096];
    for (int i = 0; i < procs * threads; i++) {
        int c = accept(s, NULL, NULL);
        ssize_t r;
        while ((r = read(c, buf, sizeof buf)) > 0) bytes += r;
        close(c);
    }
    for (int p = 0; p < procs; p++) {
        int st = 0;
        wait(&st);
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    printf("forkthreads: %d connections, %ld bytes\n", procs * threads, bytes);
    return !bad && bytes == 8L * writes * procs * threads ? 0 : 1;
}
