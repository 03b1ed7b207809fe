/* A preloaded library (LD_PRELOAD) that measures a process's turnaround: the time from a
 * receive call that returned a small datagram to the next send call of the same thread. In a
 * ping-pong that is the part of each hop spent in user space (the library's processing and
 * the program's own), since the kernel's part of the hop lies inside the two calls. Run on a
 * raw UDP ping-pong (benches/c/udp_size_rtt.c) it is the floor of a hop: a receive, a send
 * and nothing in between. It also counts the receive calls that found nothing and times the
 * waiter's idle polling rounds (from one receive call that found nothing to the next): an
 * arrival waits about half a round to be noticed, so a round longer than raw UDP's lengthens
 * every hop. And it times each send call that ends a turnaround: on loopback the kernel
 * delivers the datagram into the receiver's socket inside that call, so its time is most of
 * the kernel's part of a hop. scripts/turnaround.sh runs both and prints them side by side.
 *
 * At exit it prints one line on standard error:
 *   turnaround: pid P rank K samples N p10 A p50 B p90 C us; receives R empty E; send p50 S us;
 *   idle round p50 D p90 G us; empty receive p50 F us
 * (one line; K: the process's RGASNET_RANK, "-" outside an rgasnet job; an idle round is the
 * receive call that found nothing plus what the waiter does before its next one)
 * and nothing if fewer than 100 turnarounds were seen. Receives of more than
 * TURNAROUND_MAX_BYTES bytes (default 200) start no turnaround (the bulk phases of a
 * benchmark's baselines are not ping-pongs). A measuring tool: each wrapped receive costs two
 * clock readings more and each send that ends a turnaround two, about the same on both sides
 * of a comparison.
 *
 *   cc -std=c11 -Wall -Wextra -O2 -shared -fPIC turnaround_shim.c -o libturnaround_shim.so -ldl
 *   LD_PRELOAD=./libturnaround_shim.so rgasnetrun -n 2 testsmall ... */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "preload.h"

/* Samples kept per kind (later ones are counted but not stored): 8 MiB of floats each. */
enum { MAX_SAMPLES = 2 * 1024 * 1024, MIN_REPORTED = 100 };

static float samples[MAX_SAMPLES];
/* The time of the send calls that ended a turnaround. */
static float send_samples[MAX_SAMPLES];
static atomic_long sends_timed;
/* Idle rounds (receive call to receive call, the first finding nothing) and the receive calls
 * that found nothing. */
static float round_samples[MAX_SAMPLES];
static float empty_samples[MAX_SAMPLES];
static atomic_long rounds_timed, empties_timed;
static atomic_long stored, receives, empty_receives;
static long max_bytes = 200;

/* Per thread: when its last small datagram arrived, and whether a send has followed since. */
static _Thread_local double last_arrival_us;
static _Thread_local int awaiting_send;
/* Per thread: when its last receive call that found nothing started (0: the last one got a
 * datagram, or none yet). */
static _Thread_local double last_empty_start_us;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

__attribute__((constructor)) static void read_limit(void) {
    const char *v = getenv("TURNAROUND_MAX_BYTES");
    if (v != NULL) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*v != '\0' && *end == '\0' && n > 0) {
            max_bytes = n;
        } else {
            fprintf(stderr, "turnaround_shim: TURNAROUND_MAX_BYTES=%s is not a positive number; "
                            "keeping %ld\n", v, max_bytes);
        }
    }
}

static void keep(float *into, atomic_long *count, double value) {
    long i = atomic_fetch_add_explicit(count, 1, memory_order_relaxed);
    if (i < MAX_SAMPLES) {
        into[i] = (float)value;
    }
}

/* Called after a receive call that started at `start` and returned `r`. */
static void arrived(double start, ssize_t r) {
    double end = now_us();
    if (r < 0) {
        atomic_fetch_add_explicit(&empty_receives, 1, memory_order_relaxed);
        keep(empty_samples, &empties_timed, end - start);
        if (last_empty_start_us > 0) {
            keep(round_samples, &rounds_timed, start - last_empty_start_us);
        }
        last_empty_start_us = start;
        return;
    }
    last_empty_start_us = 0;
    if (r > 0 && r <= max_bytes) {
        atomic_fetch_add_explicit(&receives, 1, memory_order_relaxed);
        last_arrival_us = end;
        awaiting_send = 1;
    }
}

/* Called before a send: records the turnaround, if a datagram is awaiting its answer, and
 * returns when the send starts (0 if it ends no turnaround: not timed). */
static double sending(void) {
    if (!awaiting_send) {
        return 0;
    }
    awaiting_send = 0;
    double start = now_us();
    keep(samples, &stored, start - last_arrival_us);
    return start;
}

/* Called after a send that `sending` returned `start` for. */
static void sent(double start) {
    if (start == 0) {
        return;
    }
    keep(send_samples, &sends_timed, now_us() - start);
}

ssize_t sendto(int fd, const void *buf, size_t len, int flags, const struct sockaddr *to,
               socklen_t tolen) {
    REAL(ssize_t, "sendto", int, const void *, size_t, int, const struct sockaddr *, socklen_t);
    double start = sending();
    ssize_t r = real_(fd, buf, len, flags, to, tolen);
    sent(start);
    return r;
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
    REAL(ssize_t, "sendmsg", int, const struct msghdr *, int);
    double start = sending();
    ssize_t r = real_(fd, msg, flags);
    sent(start);
    return r;
}

ssize_t send(int fd, const void *buf, size_t len, int flags) {
    REAL(ssize_t, "send", int, const void *, size_t, int);
    double start = sending();
    ssize_t r = real_(fd, buf, len, flags);
    sent(start);
    return r;
}

ssize_t recvfrom(int fd, void *buf, size_t len, int flags, struct sockaddr *from,
                 socklen_t *fromlen) {
    REAL(ssize_t, "recvfrom", int, void *, size_t, int, struct sockaddr *, socklen_t *);
    double start = now_us();
    ssize_t r = real_(fd, buf, len, flags, from, fromlen);
    arrived(start, r);
    return r;
}

ssize_t recv(int fd, void *buf, size_t len, int flags) {
    REAL(ssize_t, "recv", int, void *, size_t, int);
    double start = now_us();
    ssize_t r = real_(fd, buf, len, flags);
    arrived(start, r);
    return r;
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags) {
    REAL(ssize_t, "recvmsg", int, struct msghdr *, int);
    double start = now_us();
    ssize_t r = real_(fd, msg, flags);
    arrived(start, r);
    return r;
}

/* rgasnet's engine receives with syscall(SYS_recvfrom) and sends with syscall(SYS_sendto) and
 * syscall(SYS_sendmsg), past the C library's wrappers: seen here too. Every other system
 * call passes through unchanged: six arguments are always forwarded, as the kernel takes
 * them and the C library's own syscall() does. Reading arguments a caller did not pass is
 * undefined in ISO C; on the x86-64 System V ABI, the only one this measuring tool is built
 * for, it reads registers and the overflow area and the kernel ignores what it does not use. */
long syscall(long number, ...) {
    REAL(long, "syscall", long, ...);
    va_list ap;
    va_start(ap, number);
    long a[6];
    for (int i = 0; i < 6; i++) a[i] = va_arg(ap, long);
    va_end(ap);
    int send_call = number == SYS_sendto || number == SYS_sendmsg;
    double start = send_call ? sending() : number == SYS_recvfrom ? now_us() : 0;
    long r = real_(number, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (send_call) {
        sent(start);
    } else if (number == SYS_recvfrom) {
        arrived(start, (ssize_t)r);
    }
    return r;
}

static int by_value(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Sorts the first `count` (at most MAX_SAMPLES) of `from`; returns how many that is. */
static long sorted(float *from, atomic_long *count) {
    long n = atomic_load(count);
    if (n > MAX_SAMPLES) {
        n = MAX_SAMPLES;
    }
    if (n > 0) {
        qsort(from, (size_t)n, sizeof from[0], by_value);
    }
    return n;
}

/* The `pct` percentile of the first `n` of `from`, sorted; 0 if none. */
static double percentile(const float *from, long n, long pct) {
    return n > 0 ? (double)from[n * pct / 100] : 0.0;
}

__attribute__((destructor)) static void report(void) {
    long n = sorted(samples, &stored);
    if (n < MIN_REPORTED) {
        return;
    }
    long sends = sorted(send_samples, &sends_timed);
    long rounds = sorted(round_samples, &rounds_timed);
    long empties = sorted(empty_samples, &empties_timed);
    const char *rank = getenv("RGASNET_RANK");
    fprintf(stderr,
            "turnaround: pid %d rank %s samples %ld p10 %.3f p50 %.3f p90 %.3f us; "
            "receives %ld empty %ld; send p50 %.3f us; idle round p50 %.3f p90 %.3f us; "
            "empty receive p50 %.3f us\n",
            (int)getpid(), rank != NULL ? rank : "-", n, samples[n / 10], samples[n / 2],
            samples[n * 9 / 10], atomic_load(&receives), atomic_load(&empty_receives),
            percentile(send_samples, sends, 50), percentile(round_samples, rounds, 50),
            percentile(round_samples, rounds, 90), percentile(empty_samples, empties, 50));
}
