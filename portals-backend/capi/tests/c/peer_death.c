/* A peer that ends without PtlFini: an acknowledged put to it fails with
 * PTL_NI_UNDELIVERABLE within RGASNET_PEER_TIMEOUT (plus the retry schedule's slack), and
 * nothing hangs. Rank 1 prints its UDP port and leaves at once; the runner checks that the
 * port is free afterwards. */
#define _POSIX_C_SOURCE 200809L
#include "job.h"

#include <time.h>
#include <unistd.h>

static void sleep_ms(long ms) {
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(void) {
    ptl_handle_ni_t ni;
    ptl_handle_eq_t eq;
    ptl_pt_index_t pt;
    ptl_process_t *map;
    const char *timeout_env = getenv("RGASNET_PEER_TIMEOUT");
    double timeout = timeout_env ? atof(timeout_env) : 30.0;

    CHECK(PtlInit());
    job_init();
    EXPECT(job_size == 2);
    CHECK(PtlNIInit(PTL_IFACE_DEFAULT, PTL_NI_NO_MATCHING | PTL_NI_LOGICAL, PTL_PID_ANY, NULL,
                    NULL, &ni));
    map = job_map(ni);
    CHECK(PtlSetMap(ni, (ptl_size_t)job_size, map));
    CHECK(PtlEQAlloc(ni, 16, &eq));
    CHECK(PtlPTAlloc(ni, 0, eq, 0, &pt));
    if (job_rank == 1) {
        printf("peer_death: rank 1 port %u leaves without PtlFini\n", (unsigned)map[1].phys.pid);
        fflush(stdout);
        PMI_Barrier();
        _exit(0);
    } else {
        ptl_md_t md;
        ptl_handle_md_t mdh;
        ptl_process_t peer;
        ptl_event_t ev;
        char data[8] = "goodbye";
        double t0, waited;
        PMI_Barrier();
        sleep_ms(200);
        memset(&md, 0, sizeof md);
        md.start = data;
        md.length = sizeof data;
        md.eq_handle = eq;
        md.ct_handle = PTL_CT_NONE;
        CHECK(PtlMDBind(ni, &md, &mdh));
        peer.rank = 1;
        t0 = now_s();
        CHECK(PtlPut(mdh, 0, sizeof data, PTL_ACK_REQ, peer, 0, 0, 0, NULL, 0));
        do {
            ev = job_event(eq);
        } while (ev.type == PTL_EVENT_SEND);
        waited = now_s() - t0;
        printf("peer_death: event %d, ni_fail %d after %.2f s (peer timeout %.0f s)\n", ev.type,
               ev.ni_fail_type, waited, timeout);
        EXPECT(ev.type == PTL_EVENT_ACK);
        EXPECT(ev.ni_fail_type == PTL_NI_UNDELIVERABLE);
        EXPECT(waited < timeout + 5.0);
        CHECK(PtlMDRelease(mdh));
        CHECK(PtlPTFree(ni, pt));
        CHECK(PtlEQFree(eq));
        CHECK(PtlNIFini(ni));
        PtlFini();
    }
    free(map);
    return 0;
}
