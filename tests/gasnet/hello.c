/* A GASNet-EX hello world written as a user writes one: it includes gasnetex.h, is built with
 * the installed conduit's makefile fragment (tests/gasnet/Makefile) and is launched with
 * gasnetrun_rgasnet. Each rank says hello, then rank 0 gets every rank's id from its segment
 * and checks it. */
#include <gasnetex.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    gex_Client_t client;
    gex_EP_t ep;
    gex_TM_t tm;
    gex_Segment_t seg;
    if (gex_Client_Init(&client, &ep, &tm, "hello", &argc, &argv, 0) != GASNET_OK) return 1;
    if (gex_Segment_Attach(&seg, tm, 1 << 20) != GASNET_OK) return 1;
    gex_Rank_t me = gex_TM_QueryRank(tm), n = gex_TM_QuerySize(tm);
    unsigned long *mine = gex_Segment_QueryAddr(seg);
    *mine = 1000ul + me;
    printf("hello from rank %u of %u\n", (unsigned)me, (unsigned)n);
    fflush(stdout);
    gex_Event_Wait(gex_Coll_BarrierNB(tm, 0));
    if (me == 0) {
        for (gex_Rank_t r = 0; r < n; r++) {
            void *addr = NULL;
            gex_Event_Wait(gex_EP_QueryBoundSegmentNB(tm, r, &addr, NULL, NULL, 0));
            unsigned long v = 0;
            gex_RMA_GetBlocking(tm, &v, r, addr, sizeof v, 0);
            if (v != 1000ul + r) {
                printf("ERROR: rank %u's segment holds %lu\n", (unsigned)r, v);
                gasnet_exit(1);
            }
        }
        printf("hello: every rank answered\n");
        fflush(stdout);
    }
    gex_Event_Wait(gex_Coll_BarrierNB(tm, 0));
    gasnet_exit(0);
    return 0;
}
