/*
 * rgasnet-conduit: public core header.
 *
 * Initialization and exit entry points, handler-safe locks and the AM size
 * limits a client sees. Part of the rgasnet project; see README.
 */

#ifndef _IN_GASNETEX_H
  #error gasnet_core.h is internal: include gasnetex.h instead
#endif

#ifndef _GASNET_CORE_H
#define _GASNET_CORE_H

#include <gasnet_core_help.h>

/* ---- start-up and exit ------------------------------------------------- */

extern void gasnetc_exit(int _exitcode) GASNETI_NORETURN;
GASNETI_NORETURNP(gasnetc_exit)
#define gasnet_exit gasnetc_exit

/* rgasnet_init() needs no command line: gasnet_init(NULL,NULL) is fine. */
#define GASNET_NULL_ARGV_OK 1

/* gasnetex.h renames gex_Client_Init to a build-specific symbol that lands
 * on this definition. */
extern int gasnetc_Client_Init(gex_Client_t *_client_p, gex_EP_t *_ep_p,
                               gex_TM_t *_tm_p, const char *_clientName,
                               int *_argc, char ***_argv, gex_Flags_t _flags);

/* ---- handler-safe locks ------------------------------------------------ */
/* Always real mutexes: cheap (a no-op mutex in builds without threads) and
 * the same code in every thread mode. */
typedef struct {
  gasneti_mutex_t lock;
} gex_HSL_t;

#define GEX_HSL_INITIALIZER { GASNETI_MUTEX_INITIALIZER }

extern void gasnetc_hsl_init   (gex_HSL_t *_hsl);
extern void gasnetc_hsl_destroy(gex_HSL_t *_hsl);
extern void gasnetc_hsl_lock   (gex_HSL_t *_hsl);
extern void gasnetc_hsl_unlock (gex_HSL_t *_hsl);
extern int  gasnetc_hsl_trylock(gex_HSL_t *_hsl) GASNETI_WARN_UNUSED_RESULT;

#define gex_HSL_Init    gasnetc_hsl_init
#define gex_HSL_Destroy gasnetc_hsl_destroy
#define gex_HSL_Lock    gasnetc_hsl_lock
#define gex_HSL_Unlock  gasnetc_hsl_unlock
#define gex_HSL_Trylock gasnetc_hsl_trylock

/* ---- AM size limits ---------------------------------------------------- */
/* Every AM may go either through rgasnet or through GASNet's neighborhood
 * (PSHM/loopback) path, so each limit is the smaller of the two. */
#define GASNETC_RGASNET_MEDIUM_LUB                                        \
        ((size_t)(GASNETC_RGASNET_MAX_MEDIUM < GASNETC_MAX_MEDIUM_NBRHD_DFLT \
                  ? GASNETC_RGASNET_MAX_MEDIUM : GASNETC_MAX_MEDIUM_NBRHD_DFLT))

#define gex_AM_MaxArgs()            ((unsigned int)GASNETC_RGASNET_MAX_ARGS)
#define gex_AM_LUBRequestMedium()   GASNETC_RGASNET_MEDIUM_LUB
#define gex_AM_LUBReplyMedium()     GASNETC_RGASNET_MEDIUM_LUB
#define gex_AM_LUBRequestLong()     ((size_t)GASNETC_RGASNET_MAX_LONG)
#define gex_AM_LUBReplyLong()       ((size_t)GASNETC_RGASNET_MAX_LONG)

#define gasnetc_AM_MaxRequestMedium(tm,rank,lc_opt,flags,nargs)  \
        (GASNETI_UNUSED_ARGS5(tm,rank,lc_opt,flags,nargs), gex_AM_LUBRequestMedium())
#define gasnetc_AM_MaxReplyMedium(tm,rank,lc_opt,flags,nargs)    \
        (GASNETI_UNUSED_ARGS5(tm,rank,lc_opt,flags,nargs), gex_AM_LUBReplyMedium())
#define gasnetc_Token_MaxReplyMedium(token,lc_opt,flags,nargs)   \
        (GASNETI_UNUSED_ARGS4(token,lc_opt,flags,nargs), gex_AM_LUBReplyMedium())

/* With GEX_FLAG_AM_PREPARE_LEAST_ALLOC a Prepare that lets GASNet allocate
 * the buffer is bounded by the reference NP-AM buffer size instead. */
#define gasnetc_AM_MaxRequestLong(tm,rank,lc_opt,flags,nargs)    \
        (GASNETI_UNUSED_ARGS4(tm,rank,lc_opt,nargs),             \
         (((flags) & GEX_FLAG_AM_PREPARE_LEAST_ALLOC)            \
            ? (size_t)GASNETC_REF_NPAM_MAX_ALLOC : gex_AM_LUBRequestLong()))
#define gasnetc_AM_MaxReplyLong(tm,rank,lc_opt,flags,nargs)      \
        (GASNETI_UNUSED_ARGS4(tm,rank,lc_opt,nargs),             \
         (((flags) & GEX_FLAG_AM_PREPARE_LEAST_ALLOC)            \
            ? (size_t)GASNETC_REF_NPAM_MAX_ALLOC : gex_AM_LUBReplyLong()))
#define gasnetc_Token_MaxReplyLong(token,lc_opt,flags,nargs)     \
        (GASNETI_UNUSED_ARGS3(token,lc_opt,nargs),               \
         (((flags) & GEX_FLAG_AM_PREPARE_LEAST_ALLOC)            \
            ? (size_t)GASNETC_REF_NPAM_MAX_ALLOC : gex_AM_LUBReplyLong()))

/* ---- polling ----------------------------------------------------------- */
#define GASNET_BLOCKUNTIL(cond) gasneti_polluntil(cond)

#endif

#include <gasnet_ammacros.h>
