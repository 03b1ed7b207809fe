/* The raw UDP round trip over loopback as a function of the datagram's size: two processes
 * (a fork) ping-pong one datagram of each size in turn, both busy-polling with non-blocking
 * receives, as benches/c/ptl_pingpong.c's raw baseline does. It shows what the size of the
 * engine's datagrams costs in the kernel alone: on the Linux of rgasnet's development VM a
 * datagram of up to 128 bytes is sent and received about 0.15 us faster per hop than a larger
 * one, which is why the wire format has short forms for a small message and its ack
 * (portals-backend/src/wire). Sizes are visited round-robin, REPEATS times, so that the VM's
 * drift hits every size alike; the median round trip of each size is printed.
 *
 *   cc -std=c11 -Wall -Wextra -O2 benches/c/udp_size_rtt.c -o udp_size_rtt
 *   ./udp_size_rtt [ITERS] [REPEATS] [SIZE...]      (default 20000 7 8 64 96 119 128 132 146)
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { MAX_SIZES = 32, MAX_REPEATS = 101, MAX_DATAGRAM = 1472 };

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

/* A UDP socket bound to an ephemeral loopback port; its address in *addr. */
static int bound_socket(struct sockaddr_in *addr) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) return -1;
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof *addr;
    if (bind(fd, (struct sockaddr *)addr, sizeof *addr) != 0 ||
        getsockname(fd, (struct sockaddr *)addr, &len) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Receives one datagram, busy-polling; 0 on success, -1 on an error or when nothing came for
 * WAIT_US (the other process stopped: neither side spins forever). */
enum { WAIT_US = 5000000 };
static int recv_one(int fd, char *buf) {
    double give_up = 0;
    for (unsigned polls = 1;; polls++) {
        if (recv(fd, buf, MAX_DATAGRAM, MSG_DONTWAIT) >= 0) return 0;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
        if ((polls & 0xfff) == 0) {
            /* The clock only every 4096 polls: it would lengthen every round otherwise. */
            double t = now_us();
            if (give_up == 0) give_up = t + WAIT_US;
            if (t > give_up) {
                errno = ETIMEDOUT;
                return -1;
            }
        }
    }
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 20000;
    int repeats = argc > 2 ? atoi(argv[2]) : 7;
    int sizes[MAX_SIZES] = {8, 64, 96, 119, 128, 132, 146};
    int nsizes = 7;
    if (argc > 3) {
        nsizes = 0;
        for (int i = 3; i < argc && nsizes < MAX_SIZES; i++) sizes[nsizes++] = atoi(argv[i]);
    }
    if (iters <= 0 || repeats <= 0 || repeats > MAX_REPEATS) {
        fprintf(stderr, "usage: %s [ITERS > 0] [REPEATS 1..%d] [SIZE...]\n", argv[0], MAX_REPEATS);
        return 2;
    }
    for (int s = 0; s < nsizes; s++) {
        if (sizes[s] <= 0 || sizes[s] > MAX_DATAGRAM) {
            fprintf(stderr, "size %d is outside 1..%d\n", sizes[s], MAX_DATAGRAM);
            return 2;
        }
    }
    struct sockaddr_in addr[2];
    int fd[2] = {bound_socket(&addr[0]), bound_socket(&addr[1])};
    if (fd[0] < 0 || fd[1] < 0) {
        perror("udp_size_rtt: socket");
        return 1;
    }
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
        perror("udp_size_rtt: fork");
        return 1;
    }
    /* The child goes with its parent (killed by a timeout, say) instead of polling on. */
    if (child == 0 && (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)) return 1;
    int me = child == 0 ? 1 : 0;
    int sock = fd[me];
    const struct sockaddr *peer = (const struct sockaddr *)&addr[1 - me];
    static char buf[MAX_DATAGRAM];
    static double rtt[MAX_SIZES][MAX_REPEATS];
    for (int r = 0; r < repeats; r++) {
        for (int s = 0; s < nsizes; s++) {
            /* A warm-up tenth, then the timed round trips; the child only answers. */
            int warm = iters / 10, total = warm + iters;
            double t0 = 0;
            for (int i = 0; i < total; i++) {
                if (i == warm) t0 = now_us();
                if (me == 0) {
                    if (sendto(sock, buf, (size_t)sizes[s], 0, peer, sizeof addr[0]) < 0 ||
                        recv_one(sock, buf) != 0) {
                        perror("udp_size_rtt");
                        return 1;
                    }
                } else if (recv_one(sock, buf) != 0 ||
                           sendto(sock, buf, (size_t)sizes[s], 0, peer, sizeof addr[0]) < 0) {
                    perror("udp_size_rtt");
                    return 1;
                }
            }
            rtt[s][r] = (now_us() - t0) / iters;
        }
    }
    if (me == 1) return 0;
    waitpid(child, NULL, 0);
    printf("udp_size_rtt: loopback UDP round trip, median of %d runs of %d round trips\n", repeats,
           iters);
    for (int s = 0; s < nsizes; s++) {
        qsort(rtt[s], (size_t)repeats, sizeof rtt[s][0], cmp_double);
        printf("%5d bytes  %.3f us\n", sizes[s], rtt[s][repeats / 2]);
    }
    return 0;
}
