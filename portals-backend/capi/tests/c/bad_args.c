/* Bad handles and arguments return PTL_ARG_INVALID (calls before PtlInit PTL_NO_INIT), never
 * a crash; stale handles stay dead after their slot is reused. One rank. */
#include "job.h"

int main(void) {
    ptl_handle_ni_t ni, ni2, owner;
    ptl_handle_eq_t eq, eq2;
    ptl_handle_ct_t ct;
    ptl_handle_md_t md_h;
    ptl_md_t md;
    ptl_event_t ev;
    ptl_ct_event_t cv;
    ptl_process_t self;
    unsigned int which;
    char buf[16];

    EXPECT_RC(PtlNIInit(PTL_IFACE_DEFAULT, PTL_NI_MATCHING | PTL_NI_PHYSICAL, PTL_PID_ANY, NULL,
                        NULL, &ni),
              PTL_NO_INIT);
    CHECK(PtlInit());
    /* Options that name no kind, or two. */
    EXPECT_RC(PtlNIInit(PTL_IFACE_DEFAULT, PTL_NI_MATCHING, PTL_PID_ANY, NULL, NULL, &ni),
              PTL_ARG_INVALID);
    EXPECT_RC(PtlNIInit(PTL_IFACE_DEFAULT, PTL_NI_MATCHING | PTL_NI_NO_MATCHING | PTL_NI_PHYSICAL,
                        PTL_PID_ANY, NULL, NULL, &ni),
              PTL_ARG_INVALID);
    EXPECT_RC(PtlNIInit(PTL_IFACE_DEFAULT, PTL_NI_MATCHING | PTL_NI_PHYSICAL, PTL_PID_ANY, NULL,
                        NULL, NULL),
              PTL_ARG_INVALID);
    CHECK(PtlNIInit(PTL_IFACE_DEFAULT, PTL_NI_MATCHING | PTL_NI_PHYSICAL, PTL_PID_ANY, NULL, NULL,
                    &ni));
    /* The same kind again: the same NI, counted. */
    CHECK(PtlNIInit(PTL_IFACE_DEFAULT, PTL_NI_MATCHING | PTL_NI_PHYSICAL, PTL_PID_ANY, NULL, NULL,
                    &ni2));
    EXPECT(ni2 == ni);
    CHECK(PtlNIFini(ni2));

    /* Made-up handles of every kind. */
    EXPECT_RC(PtlEQGet(0x12345678, &ev), PTL_ARG_INVALID);
    EXPECT_RC(PtlEQGet(PTL_EQ_NONE, &ev), PTL_ARG_INVALID);
    EXPECT_RC(PtlCTGet(PTL_CT_NONE, &cv), PTL_ARG_INVALID);
    EXPECT_RC(PtlCTGet(PTL_INVALID_HANDLE, &cv), PTL_ARG_INVALID);
    EXPECT_RC(PtlMDRelease(0xdeadbeef), PTL_ARG_INVALID);
    EXPECT_RC(PtlMEUnlink(0), PTL_ARG_INVALID);
    EXPECT_RC(PtlLEUnlink(PTL_INVALID_HANDLE), PTL_ARG_INVALID);
    EXPECT_RC(PtlNIFini(ni + 1), PTL_ARG_INVALID);
    self.phys.nid = 0;
    self.phys.pid = 0;
    EXPECT_RC(PtlPut(0x4000beef, 0, 8, PTL_ACK_REQ, self, 0, 0, 0, NULL, 0), PTL_ARG_INVALID);
    EXPECT_RC(PtlGetId(0x20000001, &self), PTL_ARG_INVALID);

    /* NULL pointers and bad values. */
    CHECK(PtlEQAlloc(ni, 8, &eq));
    EXPECT_RC(PtlEQGet(eq, NULL), PTL_ARG_INVALID);
    EXPECT_RC(PtlEQAlloc(ni, 8, NULL), PTL_ARG_INVALID);
    EXPECT_RC(PtlEQPoll(&eq, 0, 0, &ev, &which), PTL_ARG_INVALID);
    EXPECT_RC(PtlEQPoll(NULL, 1, 0, &ev, &which), PTL_ARG_INVALID);
    EXPECT_RC(PtlEQPoll(&eq, 1, 0, &ev, &which), PTL_EQ_EMPTY);
    EXPECT_RC(PtlMDBind(ni, NULL, &md_h), PTL_ARG_INVALID);
    memset(&md, 0, sizeof md);
    md.start = NULL;
    md.length = 8; /* NULL memory that is not empty */
    md.eq_handle = PTL_EQ_NONE;
    md.ct_handle = PTL_CT_NONE;
    EXPECT_RC(PtlMDBind(ni, &md, &md_h), PTL_ARG_INVALID);
    md.start = buf;
    md.options = PTL_IOVEC;
    EXPECT_RC(PtlMDBind(ni, &md, &md_h), PTL_ARG_INVALID);
    md.options = 1u << 30; /* no such option */
    EXPECT_RC(PtlMDBind(ni, &md, &md_h), PTL_ARG_INVALID);
    md.options = 0;
    md.eq_handle = eq + 1; /* an EQ that does not exist */
    EXPECT_RC(PtlMDBind(ni, &md, &md_h), PTL_ARG_INVALID);
    md.eq_handle = eq;
    CHECK(PtlMDBind(ni, &md, &md_h));
    CHECK(PtlGetId(ni, &self));
    EXPECT_RC(PtlPut(md_h, 0, 8, 9 /* no such ack_req */, self, 0, 0, 0, NULL, 0),
              PTL_ARG_INVALID);
    EXPECT_RC(PtlAtomic(md_h, 0, 8, PTL_ACK_REQ, self, 0, 0, 0, NULL, 0, 99, PTL_INT64_T),
              PTL_ARG_INVALID);
    EXPECT_RC(PtlAtomic(md_h, 0, 8, PTL_ACK_REQ, self, 0, 0, 0, NULL, 0, PTL_SUM,
                        PTL_LONG_DOUBLE),
              PTL_ARG_INVALID);

    /* PtlNIHandle finds the owner; a freed handle is dead even after its slot is reused. */
    CHECK(PtlNIHandle(eq, &owner));
    EXPECT(owner == ni);
    CHECK(PtlCTAlloc(ni, &ct));
    CHECK(PtlCTFree(ct));
    EXPECT_RC(PtlCTGet(ct, &cv), PTL_ARG_INVALID);
    EXPECT_RC(PtlCTFree(ct), PTL_ARG_INVALID);
    CHECK(PtlMDRelease(md_h));
    CHECK(PtlEQFree(eq));
    CHECK(PtlEQAlloc(ni, 8, &eq2));
    EXPECT(eq != eq2);
    EXPECT_RC(PtlEQGet(eq, &ev), PTL_ARG_INVALID);
    EXPECT(PtlHandleIsEqual(eq2, eq2) == PTL_OK && PtlHandleIsEqual(eq, eq2) == PTL_FAIL);
    CHECK(PtlEQFree(eq2));

    CHECK(PtlNIFini(ni));
    EXPECT_RC(PtlNIFini(ni), PTL_ARG_INVALID);
    PtlFini();
    EXPECT_RC(PtlEQAlloc(ni, 8, &eq), PTL_NO_INIT);
    printf("bad_args: ok\n");
    return 0;
}
