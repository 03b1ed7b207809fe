/* Put and get between two ranks at unaligned addresses: the data byte by byte, the bytes
 * around it untouched, and every field of the events on both sides. */
#include "job.h"

#include <stdint.h>

enum { LEN = 17, PT = 3, TARGET_OFFSET = 5 };

int main(void) {
    ptl_handle_ni_t ni;
    ptl_handle_eq_t eq;
    ptl_pt_index_t pt;
    ptl_process_t *map, me;
    unsigned char target[64], source[64], back[64];
    ptl_event_t ev;
    int i;

    CHECK(PtlInit());
    job_init();
    EXPECT(job_size == 2);
    CHECK(PtlNIInit(PTL_IFACE_DEFAULT, PTL_NI_MATCHING | PTL_NI_LOGICAL, PTL_PID_ANY, NULL, NULL,
                    &ni));
    map = job_map(ni);
    CHECK(PtlSetMap(ni, (ptl_size_t)job_size, map));
    CHECK(PtlGetId(ni, &me));
    EXPECT(me.rank == (ptl_rank_t)job_rank);
    CHECK(PtlEQAlloc(ni, 64, &eq));
    CHECK(PtlPTAlloc(ni, 0, eq, PT, &pt));
    EXPECT(pt == PT);

    if (job_rank == 1) {
        ptl_me_t me_desc;
        ptl_handle_me_t meh;
        memset(target, 0xee, sizeof target);
        memset(&me_desc, 0, sizeof me_desc);
        me_desc.start = target + 3; /* unaligned */
        me_desc.length = 40;
        me_desc.ct_handle = PTL_CT_NONE;
        me_desc.uid = PTL_UID_ANY;
        me_desc.options = PTL_ME_OP_PUT | PTL_ME_OP_GET;
        me_desc.match_id.rank = PTL_RANK_ANY;
        me_desc.match_bits = 0x5a5a;
        me_desc.ignore_bits = 0xff00000000000000ULL;
        CHECK(PtlMEAppend(ni, PT, &me_desc, PTL_PRIORITY_LIST, (void *)(uintptr_t)0xbeef, &meh));
        ev = job_event(eq);
        EXPECT(ev.type == PTL_EVENT_LINK && ev.user_ptr == (void *)(uintptr_t)0xbeef);
        PMI_Barrier();
        ev = job_event(eq);
        EXPECT(ev.type == PTL_EVENT_PUT);
        EXPECT(ev.ni_fail_type == PTL_NI_OK);
        EXPECT(ev.start == target + 3 + TARGET_OFFSET);
        EXPECT(ev.user_ptr == (void *)(uintptr_t)0xbeef);
        EXPECT(ev.hdr_data == 0x1122334455667788ULL);
        EXPECT(ev.match_bits == (0x5a5aULL | 0x0100000000000000ULL));
        EXPECT(ev.rlength == LEN && ev.mlength == LEN);
        EXPECT(ev.remote_offset == TARGET_OFFSET);
        EXPECT(ev.initiator.rank == 0);
        EXPECT(ev.pt_index == PT);
        EXPECT(ev.ptl_list == PTL_PRIORITY_LIST);
        for (i = 0; i < (int)sizeof target; i++) {
            int inside = i >= 3 + TARGET_OFFSET && i < 3 + TARGET_OFFSET + LEN;
            unsigned char want = inside ? (unsigned char)(i - 3 - TARGET_OFFSET + 1) : 0xee;
            if (target[i] != want) {
                fprintf(stderr, "target byte %d is %#x, expected %#x\n", i, target[i], want);
                return 1;
            }
        }
        ev = job_event(eq);
        EXPECT(ev.type == PTL_EVENT_GET && ev.mlength == LEN && ev.initiator.rank == 0);
        PMI_Barrier();
        CHECK(PtlMEUnlink(meh));
    } else {
        ptl_md_t md;
        ptl_handle_md_t mdh;
        ptl_process_t peer;
        for (i = 0; i < (int)sizeof source; i++) source[i] = (unsigned char)i;
        memset(back, 0xcc, sizeof back);
        memset(&md, 0, sizeof md);
        md.start = source + 1; /* unaligned: 1, 2, 3, ... */
        md.length = LEN;
        md.eq_handle = eq;
        md.ct_handle = PTL_CT_NONE;
        CHECK(PtlMDBind(ni, &md, &mdh));
        PMI_Barrier();
        peer.rank = 1;
        CHECK(PtlPut(mdh, 0, LEN, PTL_ACK_REQ, peer, PT, 0x0100000000005a5aULL, TARGET_OFFSET,
                     (void *)(uintptr_t)7, 0x1122334455667788ULL));
        ev = job_event(eq);
        EXPECT(ev.type == PTL_EVENT_SEND && ev.ni_fail_type == PTL_NI_OK);
        EXPECT(ev.user_ptr == (void *)(uintptr_t)7);
        ev = job_event(eq);
        EXPECT(ev.type == PTL_EVENT_ACK && ev.ni_fail_type == PTL_NI_OK);
        EXPECT(ev.mlength == LEN && ev.remote_offset == TARGET_OFFSET);
        EXPECT(ev.user_ptr == (void *)(uintptr_t)7);
        CHECK(PtlMDRelease(mdh));
        md.start = back + 5;
        CHECK(PtlMDBind(ni, &md, &mdh));
        CHECK(PtlGet(mdh, 0, LEN, peer, PT, 0x5a5a, TARGET_OFFSET, (void *)(uintptr_t)9));
        ev = job_event(eq);
        EXPECT(ev.type == PTL_EVENT_REPLY && ev.ni_fail_type == PTL_NI_OK);
        EXPECT(ev.start == back + 5 && ev.mlength == LEN && ev.user_ptr == (void *)(uintptr_t)9);
        for (i = 0; i < (int)sizeof back; i++) {
            unsigned char want = (i >= 5 && i < 5 + LEN) ? (unsigned char)(i - 5 + 1) : 0xcc;
            if (back[i] != want) {
                fprintf(stderr, "got byte %d is %#x, expected %#x\n", i, back[i], want);
                return 1;
            }
        }
        PMI_Barrier();
        CHECK(PtlMDRelease(mdh));
    }
    CHECK(PtlPTFree(ni, pt));
    CHECK(PtlEQFree(eq));
    CHECK(PtlNIFini(ni));
    free(map);
    PMI_Finalize();
    PtlFini();
    printf("events: rank %d ok\n", job_rank);
    return 0;
}
