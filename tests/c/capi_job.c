/* A job over rgasnet's C ABI (capi/include/rgasnet.h), run by tests/tests/capi.rs under
 * rgasnetrun: bootstrap collectives, AMs of every category to a C dispatch function, put and
 * get in every form into a segment this program owns, and the errors of bad calls. Every
 * result is checked byte by byte; a failure prints "capi_job FAIL" with the cause and exits 1.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rgasnet.h"

#define SEG_LEN (1u << 20)
#define H_PING 130  /* Short request: replies Short H_PONG with args[0] + 1 */
#define H_PONG 131
#define H_MED 132   /* Medium request: checks the pattern, replies Medium H_MED_REP echoing it */
#define H_MED_REP 133
#define H_LONG 134  /* Long request: checks the bytes at dest, replies Long into the sender */
#define H_LONG_REP 135
#define H_BADREPLY 136 /* Short request: a reply through a reserved index must be refused */

static uint32_t me, n;
static uint8_t *seg;
/* Replies received and requests handled: a rank leaves a phase only when both arrived, since
 * the bootstrap collectives that follow do not poll. */
static volatile int pongs, med_reps, long_reps, bad_reply_checked, pings, med_reqs, long_reqs;
static uint32_t last_pong;

#define CHECK(cond, ...)                                             \
    do {                                                             \
        if (!(cond)) {                                               \
            fprintf(stderr, "capi_job FAIL rank %u line %d: ", me, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                            \
            fprintf(stderr, " (last error: %s)\n", rgasnet_last_error()); \
            exit(1);                                                 \
        }                                                            \
    } while (0)

static uint8_t pattern(uint32_t rank, size_t i) { return (uint8_t)(rank * 31u + i * 7u + 1u); }

static void dispatch(void *ctx, const rgasnet_token *t, uint8_t h, int32_t cat, const uint32_t *args,
                     uint32_t nargs, void *payload, size_t nbytes) {
    (void)ctx;
    uint32_t src = 0;
    int32_t req = -1;
    CHECK(rgasnet_token_source(t, &src) == RGASNET_OK, "token_source");
    CHECK(rgasnet_token_is_request(t, &req) == RGASNET_OK, "token_is_request");
    switch (h) {
    case H_PING: {
        CHECK(cat == RGASNET_AM_SHORT && req == 1 && nargs == 16, "ping cat %d req %d nargs %u", cat, req, nargs);
        for (uint32_t i = 1; i < 16; i++) CHECK(args[i] == i * 1000u + src, "ping arg %u", i);
        uint32_t a[16];
        memcpy(a, args, sizeof a);
        a[0] += 1;
        CHECK(rgasnet_am_reply_short(t, H_PONG, a, 16) == RGASNET_OK, "reply_short");
        CHECK(rgasnet_am_reply_short(t, H_PONG, a, 16) == RGASNET_ERR_BAD_ARG, "second reply refused");
        pings++;
        break;
    }
    case H_PONG:
        CHECK(cat == RGASNET_AM_SHORT && req == 0 && nargs == 16, "pong");
        CHECK(rgasnet_am_reply_short(t, H_PONG, NULL, 0) == RGASNET_ERR_BAD_ARG, "reply from a reply refused");
        last_pong = args[0];
        pongs++;
        break;
    case H_MED: {
        CHECK(cat == RGASNET_AM_MEDIUM && nargs == 1 && nbytes == args[0], "medium %zu vs %u", nbytes, args[0]);
        CHECK(((uintptr_t)payload & 7u) == 0, "medium payload not 8-byte aligned");
        const uint8_t *p = payload;
        for (size_t i = 0; i < nbytes; i++) CHECK(p[i] == pattern(src, i), "medium byte %zu", i);
        CHECK(rgasnet_am_reply_medium(t, H_MED_REP, args, 1, payload, nbytes) == RGASNET_OK, "reply_medium");
        med_reqs++;
        break;
    }
    case H_MED_REP: {
        const uint8_t *p = payload;
        CHECK(cat == RGASNET_AM_MEDIUM && nbytes == args[0], "medium reply");
        for (size_t i = 0; i < nbytes; i++) CHECK(p[i] == pattern(me, i), "medium reply byte %zu", i);
        med_reps++;
        break;
    }
    case H_LONG: {
        /* args: length, offset in my segment where the bytes were asked to land */
        CHECK(cat == RGASNET_AM_LONG && nargs == 2, "long");
        CHECK(payload == seg + args[1] && nbytes == args[0], "long landed at %p, expected %p", payload, (void *)(seg + args[1]));
        for (size_t i = 0; i < nbytes; i++) CHECK(seg[args[1] + i] == pattern(src, i), "long byte %zu", i);
        uint64_t base = 0, len = 0;
        CHECK(rgasnet_segment_query(src, &base, &len) == RGASNET_OK, "query");
        uint32_t a[2] = {args[0], args[1] + SEG_LEN / 2};
        CHECK(rgasnet_am_reply_long(t, H_LONG_REP, a, 2, seg + args[1], nbytes, base + a[1]) == RGASNET_OK, "reply_long");
        long_reqs++;
        break;
    }
    case H_LONG_REP: {
        CHECK(cat == RGASNET_AM_LONG && payload == seg + args[1] && nbytes == args[0], "long reply");
        for (size_t i = 0; i < nbytes; i++) CHECK(seg[args[1] + i] == pattern(me, i), "long reply byte %zu", i);
        long_reps++;
        break;
    }
    case H_BADREPLY:
        CHECK(rgasnet_am_reply_short(t, RGASNET_RESERVED_FIRST, NULL, 0) == RGASNET_ERR_BAD_ARG, "reserved reply");
        uint32_t z[16] = {0};
        CHECK(rgasnet_am_reply_short(t, H_PONG, z, 16) == RGASNET_OK, "reply after a refused one");
        bad_reply_checked++;
        break;
    default:
        CHECK(0, "unexpected handler %u", h);
    }
}

static void wait_for(volatile int *counter, int target) {
    while (*counter < target) CHECK(rgasnet_poll() == RGASNET_OK, "poll");
}

int main(void) {
    CHECK(rgasnet_rank() == 0 && rgasnet_size() == 0, "rank/size before init");
    CHECK(rgasnet_poll() == RGASNET_ERR_NOT_INIT, "poll before init");
    CHECK(strstr(rgasnet_last_error(), "rgasnet_init") != NULL, "message names rgasnet_init");
    CHECK(rgasnet_init() == RGASNET_OK, "init");
    CHECK(rgasnet_init() == RGASNET_OK, "second init");
    me = rgasnet_rank();
    n = rgasnet_size();
    CHECK(n >= 2 && me < n, "size %u", n);

    /* Bootstrap collectives. */
    uint64_t mine = 0x1234000000ull + me, *all = calloc(n, sizeof *all);
    CHECK(rgasnet_boot_allgather(&mine, sizeof mine, all) == RGASNET_OK, "allgather");
    for (uint32_t r = 0; r < n; r++) CHECK(all[r] == 0x1234000000ull + r, "allgather slot %u", r);
    char word[8] = {0};
    if (me == n - 1) memcpy(word, "rgasnet", 8);
    CHECK(rgasnet_boot_broadcast(n - 1, word, sizeof word, word) == RGASNET_OK, "broadcast");
    CHECK(memcmp(word, "rgasnet", 8) == 0, "broadcast data");
    CHECK(rgasnet_boot_broadcast(n, word, 8, word) == RGASNET_ERR_BAD_RANK, "broadcast root out of range");
    CHECK(rgasnet_boot_barrier() == RGASNET_OK, "barrier");

    /* AMs before the segment exists. */
    CHECK(rgasnet_am_request_short(0, H_PING, NULL, 0) == RGASNET_ERR_NOT_INIT, "AM before attach");
    CHECK(rgasnet_am_attach(NULL, NULL) == RGASNET_ERR_BAD_ARG, "NULL dispatch");
    CHECK(rgasnet_am_attach(dispatch, NULL) == RGASNET_OK, "am_attach");
    CHECK(rgasnet_am_max_args() == 16 && rgasnet_am_max_medium() == RGASNET_AM_MAX_MEDIUM && RGASNET_AM_MAX_MEDIUM == 65000 && rgasnet_am_max_long() == RGASNET_AM_MAX_LONG, "limits");
    uint32_t peer = (me + 1) % n;
    uint32_t a[16];
    for (uint32_t i = 0; i < 16; i++) a[i] = i * 1000u + me;
    a[0] = 41;
    CHECK(rgasnet_am_request_short(peer, H_PING, a, 16) == RGASNET_OK, "ping");
    wait_for(&pongs, 1);
    wait_for(&pings, 1);
    CHECK(last_pong == 42, "pong value %u", last_pong);

    /* Errors, nothing sent. */
    CHECK(rgasnet_am_request_short(peer, RGASNET_RESERVED_FIRST, NULL, 0) == RGASNET_ERR_BAD_ARG, "reserved index");
    CHECK(rgasnet_am_request_short(n + 3, H_PING, a, 16) == RGASNET_ERR_BAD_RANK, "bad rank");
    CHECK(rgasnet_am_request_short(peer, H_PING, a, 17) == RGASNET_ERR_TOO_LARGE, "17 args");
    CHECK(rgasnet_am_request_short(peer, H_PING, NULL, 3) == RGASNET_ERR_BAD_ARG, "NULL args");
    static uint8_t big[65008];
    CHECK(rgasnet_am_request_medium(peer, H_MED, a, 1, big, 65001) == RGASNET_ERR_TOO_LARGE, "oversize medium");
    CHECK(strstr(rgasnet_last_error(), "65000") != NULL, "message names the limit: %s", rgasnet_last_error());
    CHECK(rgasnet_am_request_long(peer, H_LONG, a, 2, big, RGASNET_AM_MAX_LONG + 1, 0) == RGASNET_ERR_TOO_LARGE, "oversize long");
    CHECK(rgasnet_am_reply_short((const rgasnet_token *)&a, H_PONG, NULL, 0) == RGASNET_ERR_BAD_ARG, "forged token");
    CHECK(rgasnet_put(peer, 0, big, 8) == RGASNET_ERR_NOT_INIT, "put before segment_bind");

    /* Medium round trips of several sizes. */
    size_t sizes[] = {0, 1, 8, 13, 512, 4096, 65000};
    int expect = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        for (size_t i = 0; i < sizes[k]; i++) big[i] = pattern(me, i);
        uint32_t len = (uint32_t)sizes[k];
        CHECK(rgasnet_am_request_medium(peer, H_MED, &len, 1, big, sizes[k]) == RGASNET_OK, "medium %zu", sizes[k]);
        expect++;
        wait_for(&med_reps, expect);
        wait_for(&med_reqs, expect);
    }

    /* The segment: memory this program owns. */
    CHECK(posix_memalign((void **)&seg, 4096, SEG_LEN) == 0, "posix_memalign");
    memset(seg, 0, SEG_LEN);
    CHECK(rgasnet_segment_bind(seg + 1, 64) == RGASNET_ERR_BAD_ARG, "misaligned segment");
    CHECK(rgasnet_segment_bind(seg, SEG_LEN) == RGASNET_OK, "segment_bind");
    CHECK(rgasnet_segment_bind(seg, SEG_LEN) == RGASNET_ERR_BAD_ARG, "second segment_bind");
    uint64_t *bases = calloc(n, sizeof *bases);
    for (uint32_t r = 0; r < n; r++) {
        uint64_t len = 0;
        CHECK(rgasnet_segment_query(r, &bases[r], &len) == RGASNET_OK && len == SEG_LEN, "query %u", r);
    }
    CHECK(bases[me] == (uint64_t)(uintptr_t)seg, "own base");
    CHECK(rgasnet_segment_query(n, &bases[0], &bases[0]) == RGASNET_ERR_BAD_RANK, "query bad rank");

    /* Long round trip: lands at an offset of the peer's segment, reply lands in mine. */
    size_t lsizes[] = {0, 8, 1000, RGASNET_AM_MAX_LONG};
    for (size_t k = 0; k < sizeof lsizes / sizeof lsizes[0]; k++) {
        for (size_t i = 0; i < lsizes[k]; i++) big[i] = pattern(me, i);
        uint32_t off = 4096u * (uint32_t)(k + 1) + 8u * me;
        uint32_t la[2] = {(uint32_t)lsizes[k], off};
        CHECK(rgasnet_am_request_long(peer, H_LONG, la, 2, big, lsizes[k], bases[peer] + off) == RGASNET_OK, "long %zu", lsizes[k]);
        wait_for(&long_reps, (int)k + 1);
        wait_for(&long_reqs, (int)k + 1);
    }
    CHECK(rgasnet_am_request_short(peer, H_BADREPLY, NULL, 0) == RGASNET_OK, "badreply request");
    wait_for(&pongs, 2);
    wait_for(&bad_reply_checked, 1);
    CHECK(rgasnet_boot_barrier() == RGASNET_OK, "barrier after AMs");

    /* Put/get: each rank owns the slice [me * slice, (me + 1) * slice) of every segment. */
    const size_t slice = 64 * 1024;
    uint8_t *buf = malloc(slice), *back = malloc(slice);
    for (size_t i = 0; i < slice; i++) buf[i] = pattern(me, i);
    uint64_t at = bases[peer] + me * slice;
    CHECK(rgasnet_put(peer, at, buf, 8) == RGASNET_OK, "put 8");
    CHECK(rgasnet_put(peer, at, buf, slice) == RGASNET_OK, "put slice");
    memset(back, 0, slice);
    CHECK(rgasnet_get(back, peer, at, slice) == RGASNET_OK, "get slice");
    CHECK(memcmp(back, buf, slice) == 0, "blocking put/get data");
    /* From and into this rank's own segment (sent in place, landing directly). */
    uint8_t *lsrc = seg + SEG_LEN - 3 * slice, *ldst = seg + SEG_LEN - 2 * slice;
    for (size_t i = 0; i < slice; i++) lsrc[i] = pattern(me + 21, i);
    CHECK(rgasnet_put(peer, at, lsrc, slice) == RGASNET_OK, "put from the segment");
    memset(ldst, 0, slice);
    CHECK(rgasnet_get(ldst, peer, at, slice) == RGASNET_OK, "get into the segment");
    for (size_t i = 0; i < slice; i++) CHECK(ldst[i] == pattern(me + 21, i), "segment put/get byte %zu", i);
    /* nb */
    rgasnet_handle hp = 0, hg = 0;
    for (size_t i = 0; i < slice; i++) buf[i] = pattern(me + 7, i);
    CHECK(rgasnet_put_nb(peer, at, buf, slice, &hp) == RGASNET_OK, "put_nb");
    memset(buf, 0xee, slice); /* the source may be reused on return */
    CHECK(rgasnet_wait(hp) == RGASNET_OK, "wait put_nb");
    CHECK(rgasnet_wait(hp) == RGASNET_ERR_BAD_ARG, "a completed handle is refused");
    CHECK(rgasnet_test(0x77700000005ull) == RGASNET_ERR_BAD_ARG, "forged handle");
    memset(back, 0, slice);
    CHECK(rgasnet_get_nb(back, peer, at, slice, &hg) == RGASNET_OK, "get_nb");
    int rc;
    while ((rc = rgasnet_test(hg)) == RGASNET_ERR_NOT_READY) {}
    CHECK(rc == RGASNET_OK, "test get_nb");
    for (size_t i = 0; i < slice; i++) CHECK(back[i] == pattern(me + 7, i), "nb byte %zu", i);
    /* nbi */
    for (size_t i = 0; i < slice; i++) buf[i] = pattern(me + 13, i);
    for (size_t c = 0; c < slice; c += 4096) CHECK(rgasnet_put_nbi(peer, at + c, buf + c, 4096) == RGASNET_OK, "put_nbi");
    CHECK(rgasnet_sync_nbi(RGASNET_SYNC_PUTS) == RGASNET_OK, "sync puts");
    memset(back, 0, slice);
    for (size_t c = 0; c < slice; c += 8192) CHECK(rgasnet_get_nbi(back + c, peer, at + c, 8192) == RGASNET_OK, "get_nbi");
    while ((rc = rgasnet_try_sync_nbi(RGASNET_SYNC_ALL)) == RGASNET_ERR_NOT_READY) {}
    CHECK(rc == RGASNET_OK, "try_sync");
    for (size_t i = 0; i < slice; i++) CHECK(back[i] == buf[i], "nbi byte %zu: %u, put %u", i, back[i], buf[i]);
    CHECK(rgasnet_sync_nbi(7) == RGASNET_ERR_BAD_ARG, "bad sync kind");
    /* self is a direct copy */
    CHECK(rgasnet_put(me, bases[me] + SEG_LEN - 16, "selfcopy", 8) == RGASNET_OK && memcmp(seg + SEG_LEN - 16, "selfcopy", 8) == 0, "self put");
    /* out of segment */
    CHECK(rgasnet_put(peer, bases[peer] + SEG_LEN - 4, buf, 8) == RGASNET_ERR_OUT_OF_SEGMENT, "put past the end");
    CHECK(rgasnet_get(back, peer, bases[peer] - 8, 8) == RGASNET_ERR_OUT_OF_SEGMENT, "get before the start");
    CHECK(rgasnet_put(peer, at, NULL, 8) == RGASNET_ERR_BAD_ARG, "NULL source");

    CHECK(rgasnet_boot_barrier() == RGASNET_OK, "barrier after RMA");
    /* What the others put into my segment is there. */
    uint32_t from = (me + n - 1) % n;
    for (size_t i = 0; i < slice; i++)
        CHECK(seg[from * slice + i] == pattern(from + 13, i), "peer's data byte %zu", i);
    CHECK(rgasnet_boot_barrier() == RGASNET_OK, "final barrier");
    printf("capi_job: rank %u of %u ok\n", me, n);
    fflush(stdout);
    free(all);
    free(bases);
    free(buf);
    free(back);
    return 0;
}
