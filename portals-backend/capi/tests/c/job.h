/* Helpers of rgasnet's libportals C tests: checks, and a job's rank map through PMI-1. */
#ifndef RGASNET_PTL_TEST_JOB_H
#define RGASNET_PTL_TEST_JOB_H

#include <portals4.h>
#include <pmi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A Portals call that must succeed. */
#define CHECK(call)                                                                   \
    do {                                                                              \
        int rc_ = (call);                                                             \
        if (rc_ != PTL_OK) {                                                          \
            fprintf(stderr, "%s:%d: %s returned %d\n", __FILE__, __LINE__, #call, rc_); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

/* A call that must return `want`. */
#define EXPECT_RC(call, want)                                                          \
    do {                                                                               \
        int rc_ = (call);                                                              \
        if (rc_ != (want)) {                                                           \
            fprintf(stderr, "%s:%d: %s returned %d, expected %s (%d)\n", __FILE__,     \
                    __LINE__, #call, rc_, #want, (int)(want));                         \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

/* A condition that must hold. */
#define EXPECT(cond)                                                                   \
    do {                                                                               \
        if (!(cond)) {                                                                 \
            fprintf(stderr, "%s:%d: expected %s\n", __FILE__, __LINE__, #cond);        \
            exit(1);                                                                   \
        }                                                                              \
    } while (0)

static int job_rank;
static int job_size;

/* Joins the job (PMI-1). */
static inline void job_init(void) {
    int spawned = 0;
    if (PMI_Init(&spawned) != PMI_SUCCESS || PMI_Get_rank(&job_rank) != PMI_SUCCESS ||
        PMI_Get_size(&job_size) != PMI_SUCCESS) {
        fprintf(stderr, "PMI-1 initialization failed\n");
        exit(1);
    }
}

/* Every rank's physical id on `ni`, by rank (collective); the caller frees it. */
static inline ptl_process_t *job_map(ptl_handle_ni_t ni) {
    char kvs[256], key[64], value[64];
    ptl_process_t me, *map;
    int r;
    CHECK(PtlGetPhysId(ni, &me));
    if (PMI_KVS_Get_my_name(kvs, sizeof kvs) != PMI_SUCCESS) exit(1);
    snprintf(key, sizeof key, "ptl-test-%d", job_rank);
    snprintf(value, sizeof value, "%u:%u", (unsigned)me.phys.nid, (unsigned)me.phys.pid);
    if (PMI_KVS_Put(kvs, key, value) != PMI_SUCCESS || PMI_KVS_Commit(kvs) != PMI_SUCCESS ||
        PMI_Barrier() != PMI_SUCCESS) {
        fprintf(stderr, "PMI key exchange failed\n");
        exit(1);
    }
    map = calloc((size_t)job_size, sizeof *map);
    EXPECT(map != NULL);
    for (r = 0; r < job_size; r++) {
        unsigned nid, pid;
        snprintf(key, sizeof key, "ptl-test-%d", r);
        if (PMI_KVS_Get(kvs, key, value, sizeof value) != PMI_SUCCESS ||
            sscanf(value, "%u:%u", &nid, &pid) != 2) {
            fprintf(stderr, "no physical id for rank %d\n", r);
            exit(1);
        }
        map[r].phys.nid = nid;
        map[r].phys.pid = pid;
    }
    return map;
}

/* Waits for the next event on `eq`. */
static inline ptl_event_t job_event(ptl_handle_eq_t eq) {
    ptl_event_t ev;
    CHECK(PtlEQWait(eq, &ev));
    return ev;
}

#endif
