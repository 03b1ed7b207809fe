/*
 * rgasnet-conduit: the GASNet-EX extended API.
 *
 * Put/get with explicit (nb) and implicit (nbi) events go through rgasnet's
 * one-sided RMA (rgasnet_put_nb / rgasnet_get_nb) whenever the remote range
 * lies in the segment the target bound in rgasnet; the handles rgasnet
 * returns are kept in a list and completed from gasnetc_AMPoll(). Remote
 * ranges outside that segment (GASNet's aux segment, for one) take GASNet's
 * AM-based reference put/get. Self and PSHM-mapped peers never get here:
 * gasnetex.h copies to them directly.
 *
 * Everything else (barriers, VIS, collectives, remote atomics) is GASNet's
 * reference code, included below. Part of the rgasnet project; see README.
 */

#include <gasnet_coll_internal.h> /* needed by the reference barrier */
#include <gasnet_internal.h>
#include <gasnet_extended_internal.h>
#include <gasnet_core_internal.h>

#include <rgasnet.h>

/* generic thread-data management, shared by every extended API */
#include "gasnet_extended_common.c"

/* ------------------------------------------------------------------------ */
/* Start-up */

static void gasnete_check_config(void) {
  gasneti_check_config_postattach();
  gasnete_check_config_amref();
  gasneti_static_assert(sizeof(gasnete_eop_t) >= sizeof(void *));
  gasneti_static_assert(sizeof(rgasnet_handle) == sizeof(uint64_t));
}

extern void gasnete_init(void) {
  static int done = 0;
  GASNETI_TRACE_PRINTF(C, ("gasnete_init()"));
  gasneti_assert(!done);
  done = 1;
  (void)done;

  gasnete_check_config();
  gasneti_assert_uint(gasneti_nodes, >=, 1);
  gasneti_assert_uint(gasneti_mynode, <, gasneti_nodes);

  /* this thread's GASNet thread data: with a thread limit of one it must be
     created here; otherwise looking it up creates it */
#if GASNETI_MAX_THREADS > 1
  (void)_gasneti_mythread_slow();
#else
  (void)gasnete_new_threaddata();
#endif

  gasnete_barrier_init();
  gasnete_coll_init_subsystem();
  gasnete_vis_init();
}

/* ------------------------------------------------------------------------ */
/* GASNet's AM-based put/get (built as gasnete_amref_*: the fallback) */

#include "gasnet_extended_amref.c"

/* ------------------------------------------------------------------------ */
/* Outstanding rgasnet RMA handles */

typedef struct {
  rgasnet_handle handle;
  gasnete_op_t  *op;     /* the eop of an nb call, or the iop of an nbi call */
  int            isget;
} gasnete_rg_pending_t;

/* oldest first; taken whole by the thread that runs gasnete_rg_progress() */
static gasneti_mutex_t gasnete_rg_lock = GASNETI_MUTEX_INITIALIZER;
static gasnete_rg_pending_t *gasnete_rg_list = NULL;
static size_t gasnete_rg_count = 0;
static size_t gasnete_rg_cap = 0;
static gasneti_weakatomic_t gasnete_rg_outstanding = gasneti_weakatomic_init(0);

/* how many not-yet-complete handles one progress call tests before it stops
   (handles to one target tend to complete in order) */
#ifndef GASNETE_RG_TEST_MISSES
#define GASNETE_RG_TEST_MISSES 16
#endif

static void gasnete_rg_track(rgasnet_handle handle, gasnete_op_t *op, int isget) {
  (void)&gasnete_rg_lock; /* (the lock compiles away in builds without threads) */
  gasneti_mutex_lock(&gasnete_rg_lock);
  if (gasnete_rg_count == gasnete_rg_cap) {
    size_t cap = gasnete_rg_cap ? 2 * gasnete_rg_cap : 64;
    gasnete_rg_list = gasneti_realloc(gasnete_rg_list, cap * sizeof(gasnete_rg_pending_t));
    gasnete_rg_cap = cap;
  }
  gasnete_rg_pending_t *p = &gasnete_rg_list[gasnete_rg_count++];
  p->handle = handle;
  p->op = op;
  p->isget = isget;
  gasneti_weakatomic_increment(&gasnete_rg_outstanding, 0);
  gasneti_mutex_unlock(&gasnete_rg_lock);
}

extern void gasnete_rg_progress(void) {
  if (gasneti_weakatomic_read(&gasnete_rg_outstanding, 0) == 0) return;

  /* take the list, so that rgasnet_test() (which polls, and may run
     handlers) is never called with the lock held */
  gasneti_mutex_lock(&gasnete_rg_lock);
  gasnete_rg_pending_t *list = gasnete_rg_list;
  size_t count = gasnete_rg_count;
  size_t cap = gasnete_rg_cap;
  gasnete_rg_list = NULL;
  gasnete_rg_count = gasnete_rg_cap = 0;
  gasneti_mutex_unlock(&gasnete_rg_lock);
  if (!list) return;

  size_t kept = 0, misses = 0, completed = 0;
  for (size_t i = 0; i < count; i++) {
    if (misses >= GASNETE_RG_TEST_MISSES) {
      list[kept++] = list[i];
      continue;
    }
    int32_t rc = rgasnet_test(list[i].handle);
    if (rc == RGASNET_OK) {
      if (list[i].isget) gasneti_sync_writes();
      gasnete_op_markdone(list[i].op, list[i].isget);
      completed++;
    } else if (rc == RGASNET_ERR_NOT_READY) {
      list[kept++] = list[i];
      misses++;
    } else {
      gasneti_fatalerror("rgasnet-conduit: a %s through rgasnet failed: code %d: %s",
                         list[i].isget ? "get" : "put", (int)rc, rgasnet_last_error());
    }
  }
  if (completed)
    gasneti_weakatomic_subtract(&gasnete_rg_outstanding, (gasneti_weakatomic_val_t)completed, 0);

  /* put back what is left, ahead of what other threads added meanwhile */
  gasneti_mutex_lock(&gasnete_rg_lock);
  if (gasnete_rg_count == 0) {
    if (gasnete_rg_list) gasneti_free(gasnete_rg_list);
    gasnete_rg_list = list;
    gasnete_rg_count = kept;
    gasnete_rg_cap = cap;
  } else {
    size_t total = kept + gasnete_rg_count;
    if (total > cap) {
      cap = total;
      list = gasneti_realloc(list, cap * sizeof(gasnete_rg_pending_t));
    }
    memcpy(list + kept, gasnete_rg_list, gasnete_rg_count * sizeof(gasnete_rg_pending_t));
    gasneti_free(gasnete_rg_list);
    gasnete_rg_list = list;
    gasnete_rg_count = total;
    gasnete_rg_cap = cap;
  }
  gasneti_mutex_unlock(&gasnete_rg_lock);
}

/* An rgasnet RMA call failed. A remote range rgasnet will not serve goes to
 * the AM-based path (return 0); anything else ends the job, since a put or
 * get has no way to return an error. */
static int gasnete_rg_rma_failed(const char *what, int32_t rc, gex_Rank_t jobrank,
                                 const void *raddr, size_t nbytes) {
  if (rc == RGASNET_ERR_OUT_OF_SEGMENT) return 0;
  gasneti_fatalerror("rgasnet-conduit: %s to rank %u, remote address %p, %zu bytes failed: "
                     "code %d: %s", what, (unsigned)jobrank, raddr, nbytes, (int)rc,
                     rgasnet_last_error());
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Explicit-event put/get */

extern gex_Event_t gasnete_get_nb(gex_TM_t tm, void *dest, gex_Rank_t rank, void *src,
                                  size_t nbytes, gex_Flags_t flags GASNETI_THREAD_FARG) {
  gasneti_assert(!gasnete_mapped_at(tm, rank, src));
  gex_Rank_t jobrank = gasneti_e_tm_rank_to_jobrank(tm, rank);
  if (gasnetc_rg_in_segment(jobrank, src, nbytes)) {
    rgasnet_handle h = RGASNET_HANDLE_DONE;
    int32_t rc = rgasnet_get_nb(dest, jobrank, (uint64_t)(uintptr_t)src, nbytes, &h);
    if_pt (rc == RGASNET_OK) {
      if (h == RGASNET_HANDLE_DONE) return GEX_EVENT_INVALID;
      gasnete_eop_t *eop = gasnete_eop_new(GASNETI_MYTHREAD);
      gasnete_rg_track(h, (gasnete_op_t *)eop, 1);
      return (gex_Event_t)eop;
    }
    gasnete_rg_rma_failed("rgasnet_get_nb()", rc, jobrank, src, nbytes);
  }
  return gasnete_amref_get_nb(tm, dest, rank, src, nbytes, flags GASNETI_THREAD_PASS);
}

extern gex_Event_t gasnete_put_nb(gex_TM_t tm, gex_Rank_t rank, void *dest, void *src,
                                  size_t nbytes, gex_Event_t *lc_opt,
                                  gex_Flags_t flags GASNETI_THREAD_FARG) {
  gasneti_assert(!gasnete_mapped_at(tm, rank, dest));
  gex_Rank_t jobrank = gasneti_e_tm_rank_to_jobrank(tm, rank);
  if (gasnetc_rg_in_segment(jobrank, dest, nbytes)) {
    rgasnet_handle h = RGASNET_HANDLE_DONE;
    int32_t rc = rgasnet_put_nb(jobrank, (uint64_t)(uintptr_t)dest, src, nbytes, &h);
    if_pt (rc == RGASNET_OK) {
      /* rgasnet_put_nb() returns once src may be reused */
      gasneti_leaf_finish(lc_opt);
      if (h == RGASNET_HANDLE_DONE) return GEX_EVENT_INVALID;
      gasnete_eop_t *eop = gasnete_eop_new(GASNETI_MYTHREAD);
      gasnete_rg_track(h, (gasnete_op_t *)eop, 0);
      return (gex_Event_t)eop;
    }
    gasnete_rg_rma_failed("rgasnet_put_nb()", rc, jobrank, dest, nbytes);
  }
  return gasnete_amref_put_nb(tm, rank, dest, src, nbytes, lc_opt, flags GASNETI_THREAD_PASS);
}

/* ------------------------------------------------------------------------ */
/* Blocking put/get: rgasnet's blocking calls, which poll the network (running the AMs that
 * arrive through it) until the operation completed; ranges rgasnet does not serve wait on
 * the AM-based path. */

extern int gasnete_get(gex_TM_t tm, void *dest, gex_Rank_t rank, void *src, size_t nbytes,
                       gex_Flags_t flags GASNETI_THREAD_FARG) {
  gasneti_assert(!gasnete_mapped_at(tm, rank, src));
  gex_Rank_t jobrank = gasneti_e_tm_rank_to_jobrank(tm, rank);
  if (gasnetc_rg_in_segment(jobrank, src, nbytes)) {
    int32_t rc = rgasnet_get(dest, jobrank, (uint64_t)(uintptr_t)src, nbytes);
    if_pt (rc == RGASNET_OK) {
      gasneti_sync_writes();
      return 0;
    }
    gasnete_rg_rma_failed("rgasnet_get()", rc, jobrank, src, nbytes);
  }
  gasnete_wait(gasnete_amref_get_nb(tm, dest, rank, src, nbytes, flags GASNETI_THREAD_PASS)
               GASNETI_THREAD_PASS);
  return 0;
}

extern int gasnete_put(gex_TM_t tm, gex_Rank_t rank, void *dest, void *src, size_t nbytes,
                       gex_Flags_t flags GASNETI_THREAD_FARG) {
  gasneti_assert(!gasnete_mapped_at(tm, rank, dest));
  gex_Rank_t jobrank = gasneti_e_tm_rank_to_jobrank(tm, rank);
  if (gasnetc_rg_in_segment(jobrank, dest, nbytes)) {
    int32_t rc = rgasnet_put(jobrank, (uint64_t)(uintptr_t)dest, src, nbytes);
    if_pt (rc == RGASNET_OK) return 0;
    gasnete_rg_rma_failed("rgasnet_put()", rc, jobrank, dest, nbytes);
  }
  gasnete_wait(gasnete_amref_put_nb(tm, rank, dest, src, nbytes, GEX_EVENT_DEFER, flags
                                    GASNETI_THREAD_PASS)
               GASNETI_THREAD_PASS);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Implicit-event put/get: counted in the calling thread's current iop (the
 * default one, or that of an open access region) */

extern int gasnete_get_nbi(gex_TM_t tm, void *dest, gex_Rank_t rank, void *src, size_t nbytes,
                           gex_Flags_t flags GASNETI_THREAD_FARG) {
  gasneti_assert(!gasnete_mapped_at(tm, rank, src));
  gex_Rank_t jobrank = gasneti_e_tm_rank_to_jobrank(tm, rank);
  if (gasnetc_rg_in_segment(jobrank, src, nbytes)) {
    rgasnet_handle h = RGASNET_HANDLE_DONE;
    int32_t rc = rgasnet_get_nb(dest, jobrank, (uint64_t)(uintptr_t)src, nbytes, &h);
    if_pt (rc == RGASNET_OK) {
      if (h != RGASNET_HANDLE_DONE) {
        gasnete_iop_t *iop = GASNETI_MYTHREAD->current_iop;
        GASNETE_IOP_CNT_START(iop, get, 1);
        gasnete_rg_track(h, (gasnete_op_t *)iop, 1);
      }
      return 0;
    }
    gasnete_rg_rma_failed("rgasnet_get_nb()", rc, jobrank, src, nbytes);
  }
  return gasnete_amref_get_nbi(tm, dest, rank, src, nbytes, flags GASNETI_THREAD_PASS);
}

extern int gasnete_put_nbi(gex_TM_t tm, gex_Rank_t rank, void *dest, void *src, size_t nbytes,
                           gex_Event_t *lc_opt, gex_Flags_t flags GASNETI_THREAD_FARG) {
  gasneti_assert(!gasnete_mapped_at(tm, rank, dest));
  gex_Rank_t jobrank = gasneti_e_tm_rank_to_jobrank(tm, rank);
  if (gasnetc_rg_in_segment(jobrank, dest, nbytes)) {
    rgasnet_handle h = RGASNET_HANDLE_DONE;
    int32_t rc = rgasnet_put_nb(jobrank, (uint64_t)(uintptr_t)dest, src, nbytes, &h);
    if_pt (rc == RGASNET_OK) {
      /* local completion is synchronous: nothing to count for
         GEX_EVENT_GROUP, nothing to wait for with GEX_EVENT_NOW */
      if (h != RGASNET_HANDLE_DONE) {
        gasnete_iop_t *iop = GASNETI_MYTHREAD->current_iop;
        GASNETE_IOP_CNT_START(iop, put, 1);
        gasnete_rg_track(h, (gasnete_op_t *)iop, 0);
      }
      return 0;
    }
    gasnete_rg_rma_failed("rgasnet_put_nb()", rc, jobrank, dest, nbytes);
  }
  return gasnete_amref_put_nbi(tm, rank, dest, src, nbytes, lc_opt, flags GASNETI_THREAD_PASS);
}

/* ------------------------------------------------------------------------ */
/* GASNet's reference barriers, VIS, collectives and remote atomics */

#define GASNETI_GASNET_EXTENDED_REFBARRIER_C 1
#include "gasnet_extended_refbarrier.c"
#undef GASNETI_GASNET_EXTENDED_REFBARRIER_C

#include "gasnet_refvis.h"
#include "gasnet_refcoll.h"
#include "gasnet_refratomic.h"

/* ------------------------------------------------------------------------ */
/* Extended handler table (indices 64..127) */

static gex_AM_Entry_t const gasnete_handlers[] = {
#ifdef GASNETE_REFBARRIER_HANDLERS
  GASNETE_REFBARRIER_HANDLERS(),
#endif
#ifdef GASNETE_REFVIS_HANDLERS
  GASNETE_REFVIS_HANDLERS()
#endif
#ifdef GASNETE_REFCOLL_HANDLERS
  GASNETE_REFCOLL_HANDLERS()
#endif
#ifdef GASNETE_AMREF_HANDLERS
  GASNETE_AMREF_HANDLERS()
#endif
#ifdef GASNETE_AMRATOMIC_HANDLERS
  GASNETE_AMRATOMIC_HANDLERS()
#endif
  GASNETI_HANDLER_EOT
};

extern gex_AM_Entry_t const *gasnete_get_handlertable(void) {
  return gasnete_handlers;
}
