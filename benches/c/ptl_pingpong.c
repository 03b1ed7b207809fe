/* Portals 4 ping-pong between two ranks: rank 0 puts N bytes (with a counting ack) into rank
 * 1's list entry, rank 1 waits for the arrival on its counting event and puts the same size
 * back; the round trip is the time per iteration (lines "A:"). The same sizes as put +
 * acknowledgement (lines "B:"): rank 0 puts and waits for the ack on its counting event, while
 * rank 1's program only waits (for all the arrivals at once), so the answer is the library's
 * own. Sizes 8 B to 1 MiB. A raw UDP ping-pong of 8 bytes between the same two processes
 * (busy-polling, over loopback) is the baseline ("raw:"); at 8 bytes the three are measured in
 * ten interleaved slices, so that they see the same machine (a VM's speed drifts from second
 * to second). Written against the standard portals4.h and PMI-1 only, so that one source
 * builds against any libportals (rgasnet's, the reference implementation).
 *
 *   ptl_pingpong [ITERS] [MAX_BYTES]
 *
 * ITERS round trips per size up to 4 KiB (default 2000; fewer above), sizes up to MAX_BYTES
 * (default 1 MiB).
 *
 * Output: testsmall's line shape ("... us ave. (put pingpong rtt)", "... us ave. (put+ack
 * rtt)") and a "raw:" line. With benches/c/hop_shim.c preloaded, rank 1 also prints a "hops:"
 * line: where the library's time goes in one hop of the 8-byte ping-pong (from the datagram's
 * arrival to the wait's return, from the put call to its send call, from the send call's end
 * to the put's return), next to the same parts of the raw UDP ping-pong. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#define _POSIX_C_SOURCE 200809L
#include <portals4.h>
#include <portals4/pmi.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        int rc_ = (call);                                                             \
        if (rc_ != PTL_OK) {                                                          \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, rc_); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

enum { MAX_SIZE = 1 << 20 };

static int rank, size;
static char kvs[256];

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void kvs_put(const char *key, const char *value) {
    if (PMI_KVS_Put(kvs, key, value) != PMI_SUCCESS || PMI_KVS_Commit(kvs) != PMI_SUCCESS) {
        fprintf(stderr, "PMI_KVS_Put %s failed\n", key);
        exit(1);
    }
}

static void kvs_get(const char *key, char *value, int len) {
    if (PMI_KVS_Get(kvs, key, value, len) != PMI_SUCCESS) {
        fprintf(stderr, "PMI_KVS_Get %s failed\n", key);
        exit(1);
    }
}

/* The per-hop split (see the top): the shim's clock readings when it is preloaded, and sums
 * of the three parts, in microseconds, for the library ([0]) and raw UDP ([1]). */
static struct {
    const double *send_begin, *send_end, *recv_end;
    double wake[2], to_send[2], send_to_return[2];
    long n[2];
} hop;

static void hop_open(void) {
    hop.send_begin = dlsym(RTLD_DEFAULT, "hop_shim_send_begin");
    hop.send_end = dlsym(RTLD_DEFAULT, "hop_shim_send_end");
    hop.recv_end = dlsym(RTLD_DEFAULT, "hop_shim_recv_end");
    if (hop.send_begin == NULL || hop.send_end == NULL) hop.recv_end = NULL;
}

/* Adds one hop of path `k` (0 library, 1 raw): the wait ended at `woke` on the datagram the
 * shim saw arrive at `arrival`, and the answering send call returned at `done`. */
static void hop_add(int k, double arrival, double woke, double done) {
    hop.wake[k] += woke - arrival;
    hop.to_send[k] += *hop.send_begin - woke;
    hop.send_to_return[k] += done - *hop.send_end;
    hop.n[k]++;
}

static void hop_report(void) {
    if (hop.recv_end == NULL || rank != 1 || hop.n[0] == 0 || hop.n[1] == 0) return;
    printf("hops: rank 1, 8 byte ping-pong, us per hop, library (raw udp): arrival -> wait "
           "returns %.3f (%.3f), send call made %.3f (%.3f), send call -> call returns %.3f "
           "(%.3f); %ld (%ld) hops\n",
           hop.wake[0] / hop.n[0], hop.wake[1] / hop.n[1], hop.to_send[0] / hop.n[0],
           hop.to_send[1] / hop.n[1], hop.send_to_return[0] / hop.n[0],
           hop.send_to_return[1] / hop.n[1], hop.n[0], hop.n[1]);
    fflush(stdout);
}

/* The raw baseline: an 8-byte UDP ping-pong over loopback, both sides busy-polling. */
static int udp_fd = -1;
static struct sockaddr_in udp_peer;

static void udp_open(void) {
    struct sockaddr_in me;
    socklen_t len = sizeof me;
    char key[32], value[32];
    udp_fd = socket(AF_INET, SOCK_DGRAM, 0);
    memset(&me, 0, sizeof me);
    me.sin_family = AF_INET;
    me.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (udp_fd < 0 || bind(udp_fd, (struct sockaddr *)&me, sizeof me) != 0 ||
        getsockname(udp_fd, (struct sockaddr *)&me, &len) != 0) {
        perror("udp baseline socket");
        exit(1);
    }
    snprintf(key, sizeof key, "udp-%d", rank);
    snprintf(value, sizeof value, "%u", (unsigned)ntohs(me.sin_port));
    kvs_put(key, value);
    PMI_Barrier();
    snprintf(key, sizeof key, "udp-%d", 1 - rank);
    kvs_get(key, value, sizeof value);
    udp_peer = me;
    udp_peer.sin_port = htons((unsigned short)atoi(value));
}

/* m raw round trips; their time in microseconds. */
static double udp_chunk(int m) {
    char buf[8] = {0};
    double t0 = now_us();
    for (int i = 0; i < m; i++) {
        if (rank == 0) {
            sendto(udp_fd, buf, sizeof buf, 0, (struct sockaddr *)&udp_peer, sizeof udp_peer);
        }
        while (recv(udp_fd, buf, sizeof buf, MSG_DONTWAIT) < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                perror("recv");
                exit(1);
            }
        }
        if (rank == 1) {
            /* The clock is read only for the per-hop split: the baseline stays bare. */
            double arrival = 0, woke = 0;
            if (hop.recv_end != NULL) arrival = *hop.recv_end, woke = now_us();
            sendto(udp_fd, buf, sizeof buf, 0, (struct sockaddr *)&udp_peer, sizeof udp_peer);
            if (hop.recv_end != NULL) hop_add(1, arrival, woke, now_us());
        }
    }
    return now_us() - t0;
}

static void wait_ct(ptl_handle_ct_t ct, ptl_size_t target) {
    ptl_ct_event_t v;
    CHECK(PtlCTWait(ct, target, &v));
    if (v.failure != 0) {
        fprintf(stderr, "rank %d: %lu failed operations\n", rank, (unsigned long)v.failure);
        exit(1);
    }
}

/* What the measurements share: the handles and the running counts of the two CTs. */
struct pp {
    ptl_handle_md_t md;
    ptl_process_t peer;
    ptl_pt_index_t pt;
    ptl_handle_ct_t recv_ct, ack_ct;
    ptl_size_t arrived, sent;
};

/* m ping-pong round trips of s bytes; their time in microseconds on rank 0. */
static double pingpong(struct pp *p, int s, int m) {
    double t0 = now_us();
    for (int i = 0; i < m; i++) {
        if (rank == 0) {
            CHECK(PtlPut(p->md, 0, (ptl_size_t)s, PTL_CT_ACK_REQ, p->peer, p->pt, 0, 0, NULL, 0));
            p->sent++;
            wait_ct(p->recv_ct, ++p->arrived);
        } else {
            wait_ct(p->recv_ct, ++p->arrived);
            double arrival = 0, woke = 0;
            if (hop.recv_end != NULL && s == 8) arrival = *hop.recv_end, woke = now_us();
            CHECK(PtlPut(p->md, 0, (ptl_size_t)s, PTL_CT_ACK_REQ, p->peer, p->pt, 0, 0, NULL, 0));
            if (woke != 0) hop_add(0, arrival, woke, now_us());
            p->sent++;
        }
    }
    return now_us() - t0;
}

/* m puts of s bytes, each waited for until acknowledged; their time in microseconds on rank
 * 0. Rank 1's program only waits (for all the arrivals at once): the acks are the library's
 * to send meanwhile. A last put asks for no ack, so that no measured ack waits for rank 1's
 * next call into the library. */
static double put_ack(struct pp *p, int s, int m) {
    double t0 = now_us(), t = 0;
    if (rank == 1) {
        p->arrived += (ptl_size_t)m + 1;
        wait_ct(p->recv_ct, p->arrived);
        return 0;
    }
    for (int i = 0; i < m; i++) {
        CHECK(PtlPut(p->md, 0, (ptl_size_t)s, PTL_CT_ACK_REQ, p->peer, p->pt, 0, 0, NULL, 0));
        wait_ct(p->ack_ct, ++p->sent);
    }
    t = now_us() - t0;
    CHECK(PtlPut(p->md, 0, (ptl_size_t)s, PTL_NO_ACK_REQ, p->peer, p->pt, 0, 0, NULL, 0));
    return t;
}

/* Prints (on rank 0) the two figures of size s: n round trips each, in ping and acked us. */
static void report(int s, int n, double ping, double acked) {
    if (rank != 0) return;
    printf("A:  0 - %10d byte : %7d iters, latency %10.0f us total, %9.3f us ave. "
           "(put pingpong rtt)\n",
           s, n, ping, ping / n);
    printf("B:  0 - %10d byte : %7d iters, latency %10.0f us total, %9.3f us ave. "
           "(put+ack rtt)\n",
           s, n, acked, acked / n);
    fflush(stdout);
}

int main(int argc, char **argv) {
    int spawned = 0, iters = argc > 1 ? atoi(argv[1]) : 2000;
    long max_bytes = argc > 2 ? atol(argv[2]) : MAX_SIZE;
    ptl_handle_ni_t ni;
    ptl_process_t me, *map, peer;
    ptl_pt_index_t pt;
    ptl_handle_ct_t recv_ct, ack_ct;
    ptl_handle_le_t leh;
    ptl_handle_md_t mdh;
    ptl_le_t le;
    ptl_md_t md;
    char key[32], value[64];
    char *recv_buf = calloc(MAX_SIZE, 1), *send_buf = calloc(MAX_SIZE, 1);
    int r;

    if (recv_buf == NULL || send_buf == NULL || iters <= 0) return 2;
    CHECK(PtlInit());
    if (PMI_Init(&spawned) != PMI_SUCCESS || PMI_Get_rank(&rank) != PMI_SUCCESS ||
        PMI_Get_size(&size) != PMI_SUCCESS ||
        PMI_KVS_Get_my_name(kvs, sizeof kvs) != PMI_SUCCESS) {
        fprintf(stderr, "PMI-1 initialization failed\n");
        return 1;
    }
    if (size != 2) {
        fprintf(stderr, "ptl_pingpong runs on 2 ranks, not %d\n", size);
        return 2;
    }
    CHECK(PtlNIInit(PTL_IFACE_DEFAULT, PTL_NI_NO_MATCHING | PTL_NI_LOGICAL, PTL_PID_ANY, NULL,
                    NULL, &ni));
    CHECK(PtlGetPhysId(ni, &me));
    snprintf(key, sizeof key, "ptl-%d", rank);
    snprintf(value, sizeof value, "%u:%u", (unsigned)me.phys.nid, (unsigned)me.phys.pid);
    kvs_put(key, value);
    PMI_Barrier();
    map = calloc(2, sizeof *map);
    for (r = 0; r < 2; r++) {
        unsigned nid, pid;
        snprintf(key, sizeof key, "ptl-%d", r);
        kvs_get(key, value, sizeof value);
        if (sscanf(value, "%u:%u", &nid, &pid) != 2) return 1;
        map[r].phys.nid = nid;
        map[r].phys.pid = pid;
    }
    CHECK(PtlSetMap(ni, 2, map));
    CHECK(PtlPTAlloc(ni, 0, PTL_EQ_NONE, 0, &pt));
    CHECK(PtlCTAlloc(ni, &recv_ct));
    CHECK(PtlCTAlloc(ni, &ack_ct));
    memset(&le, 0, sizeof le);
    le.start = recv_buf;
    le.length = MAX_SIZE;
    le.ct_handle = recv_ct;
    le.uid = PTL_UID_ANY;
    le.options = PTL_LE_OP_PUT | PTL_LE_EVENT_CT_COMM | PTL_LE_EVENT_LINK_DISABLE |
                 PTL_LE_EVENT_SUCCESS_DISABLE;
    CHECK(PtlLEAppend(ni, pt, &le, PTL_PRIORITY_LIST, NULL, &leh));
    memset(&md, 0, sizeof md);
    md.start = send_buf;
    md.length = MAX_SIZE;
    md.options = PTL_MD_EVENT_CT_ACK;
    md.eq_handle = PTL_EQ_NONE;
    md.ct_handle = ack_ct;
    CHECK(PtlMDBind(ni, &md, &mdh));
    PMI_Barrier();
    struct pp st = {.md = mdh, .pt = pt, .recv_ct = recv_ct, .ack_ct = ack_ct};

    peer.rank = (ptl_rank_t)(1 - rank);
    st.peer = peer;
    udp_open();
    hop_open();
    if (rank == 0) printf("ptl_pingpong: 2 ranks, put with a counting ack\n");
    static const int sizes[] = {8, 64, 512, 4096, 32768, 262144, MAX_SIZE};
    enum { CHUNKS = 10 };
    /* 8 bytes: the ping-pong, the put+ack and the raw UDP ping-pong in CHUNKS interleaved
     * slices after one warm-up slice each, so that the three see the same machine (this VM's
     * speed drifts from second to second). Larger sizes: one after the other. Each figure is
     * printed as soon as it is measured. */
    int slice = iters / CHUNKS > 0 ? iters / CHUNKS : 1;
    double raw = 0, ping = 0, acked = 0;
    for (int c = -1; c < CHUNKS; c++) {
        double r = udp_chunk(slice);
        double a = pingpong(&st, 8, slice);
        double b = put_ack(&st, 8, slice);
        if (c >= 0) {
            raw += r;
            ping += a;
            acked += b;
        }
    }
    report(8, slice * CHUNKS, ping, acked);
    hop_report();
    for (unsigned k = 1; k < sizeof sizes / sizeof sizes[0] && sizes[k] <= max_bytes; k++) {
        int n = sizes[k] <= 4096 ? iters : (int)((long)iters * 4096 / sizes[k]);
        if (n < 20) n = 20;
        pingpong(&st, sizes[k], n / 10 + 1);
        ping = pingpong(&st, sizes[k], n);
        put_ack(&st, sizes[k], n / 10 + 1);
        acked = put_ack(&st, sizes[k], n);
        report(sizes[k], n, ping, acked);
    }
    wait_ct(ack_ct, st.sent);
    if (rank == 0) {
        printf("raw: udp pingpong 8 byte rtt %.2f us\n", raw / (slice * CHUNKS));
        fflush(stdout);
    }
    close(udp_fd);
    PMI_Barrier();
    CHECK(PtlMDRelease(mdh));
    CHECK(PtlLEUnlink(leh));
    CHECK(PtlCTFree(ack_ct));
    CHECK(PtlCTFree(recv_ct));
    CHECK(PtlPTFree(ni, pt));
    CHECK(PtlNIFini(ni));
    PMI_Finalize();
    PtlFini();
    free(map);
    free(recv_buf);
    free(send_buf);
    return 0;
}
