/*
 * rgasnet-conduit: private core declarations (never installed).
 *
 * Generic GASNet sources include this file too, so it must not depend on the
 * rgasnet C header: everything here uses plain C and GASNet types.
 * Part of the rgasnet project; see README.
 */

#ifndef _GASNET_CORE_INTERNAL_H
#define _GASNET_CORE_INTERNAL_H

#include <gasnet_internal.h>

/* The handler table of the (single) endpoint, set once it exists. */
extern gex_AM_Entry_t *gasnetc_handler;

/* Every rank's segment as bound in rgasnet (rgasnet_segment_bind), indexed by
 * job rank; NULL until the client segment has been attached. */
extern uintptr_t *gasnetc_rg_seg_base;
extern uintptr_t *gasnetc_rg_seg_size;

/* Whether [addr, addr+len) lies in the segment jobrank bound in rgasnet, so
 * that rgasnet's put/get can reach it. */
GASNETI_INLINE(gasnetc_rg_in_segment)
int gasnetc_rg_in_segment(gex_Rank_t jobrank, const void *addr, size_t len) {
  uintptr_t *base = gasnetc_rg_seg_base;
  if (!base) return 0;
  uintptr_t a = (uintptr_t)addr;
  uintptr_t b = base[jobrank];
  uintptr_t sz = gasnetc_rg_seg_size[jobrank];
  return (a >= b) && (len <= sz) && (a - b <= sz - len);
}

/* Maps an rgasnet return code to a GASNET_ERR_* value and, when GASNet's
 * verbose errors are on, prints what rgasnet said (rgasnet_last_error()). */
extern int gasnetc_rg_error(const char *what, int rgasnet_rc);

/* Completion of outstanding rgasnet RMA handles (gasnet_extended.c):
 * gasnete_rg_progress() is called from every gasnetc_AMPoll(). */
extern void gasnete_rg_progress(void);

/* Event queues of this conduit use GASNet's default (weak atomic) counters,
 * and local completion of puts is synchronous (rgasnet's put_nb returns once
 * the source may be reused), so GASNETE_HAVE_LC stays undefined. */

#endif
