/* A preloaded library (LD_PRELOAD) that timestamps a process's datagram system calls, so that
 * a benchmark can split the time of one hop of a ping-pong into the library's parts: from a
 * datagram's arrival (the receive call that returned it) to the wait that returns on it, and
 * from the put call to its send call. It wraps sendto, sendmsg, recvfrom, recv and recvmsg,
 * calling the C library's own through dlsym(RTLD_NEXT), and keeps the last times in the
 * variables below, which benchmarks/c/ptl_pingpong.c finds with dlsym(RTLD_DEFAULT) (it prints
 * its "hops:" line only when they exist). A measuring tool: each wrapped call costs two clock
 * readings more. Single-threaded use: the variables are plain globals.
 *
 *   cc -std=c11 -O2 -shared -fPIC hop_shim.c -o libhop_shim.so -ldl
 *   LD_PRELOAD=./libhop_shim.so rgasnetrun -n 2 ./ptl_pingpong 4000 8 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <sys/socket.h>
#include <time.h>

#include "preload.h"

/* Microseconds on CLOCK_MONOTONIC: when the last send call began and ended, and when the
 * last receive call that returned data ended. */
double hop_shim_send_begin, hop_shim_send_end, hop_shim_recv_end;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
               socklen_t tolen) {
    REAL(ssize_t, "sendto", int, const void *, size_t, int, const struct sockaddr *, socklen_t);
    hop_shim_send_begin = now_us();
    ssize_t r = real_(fd, buf, len, flags, to, tolen);
    hop_shim_send_end = now_us();
    return r;
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
    REAL(ssize_t, "sendmsg", int, const struct msghdr *, int);
    hop_shim_send_begin = now_us();
    ssize_t r = real_(fd, msg, flags);
    hop_shim_send_end = now_us();
    return r;
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
                 socklen_t *fromlen) {
    REAL(ssize_t, "recvfrom", int, void *, size_t, int, struct sockaddr *, socklen_t *);
    ssize_t r = real_(fd, buf, len, flags, from, fromlen);
    if (r > 0) hop_shim_recv_end = now_us();
    return r;
}

ssize_t recv(int fd, void *buf, size_t len, int flags) {
    REAL(ssize_t, "recv", int, void *, size_t, int);
    ssize_t r = real_(fd, buf, len, flags);
    if (r > 0) hop_shim_recv_end = now_us();
    return r;
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags) {
    REAL(ssize_t, "recvmsg", int, struct msghdr *, int);
    ssize_t r = real_(fd, msg, flags);
    if (r > 0) hop_shim_recv_end = now_us();
    return r;
}
