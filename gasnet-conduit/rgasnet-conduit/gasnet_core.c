/*
 * rgasnet-conduit: the GASNet-EX core over the rgasnet C ABI.
 *
 * Job start-up, bootstrap collectives, active messages, the segment hook,
 * handler-safe locks and exit all map onto rgasnet's C interface
 * (<rgasnet.h>, librgasnet_capi). Ranks of one neighborhood talk through
 * GASNet's PSHM layer when it is configured; rgasnet carries everything else.
 * Part of the rgasnet project (MIT OR Apache-2.0); see README.
 */

#include <gasnet_internal.h>
#include <gasnet_core_internal.h>
#include <gasnet_am.h>

#include <rgasnet.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

GASNETI_IDENT(gasnetc_IdentString_Version, "$GASNetCoreLibraryVersion: " GASNET_CORE_VERSION_STR " $");
GASNETI_IDENT(gasnetc_IdentString_Name,    "$GASNetCoreLibraryName: " GASNET_CORE_NAME_STR " $");

gex_AM_Entry_t *gasnetc_handler = NULL;

uintptr_t *gasnetc_rg_seg_base = NULL;
uintptr_t *gasnetc_rg_seg_size = NULL;

/* Set once rgasnet_init() succeeded: rgasnet_exit() is usable from then on. */
static volatile int gasnetc_rg_up = 0;

/* What a handler of an AM that came through rgasnet gets as its gex_Token_t:
 * the address of one of these, on the dispatching thread's stack. Its first
 * member is a pointer, so the address is 8-byte aligned and bit 0 (the mark
 * of GASNet's neighborhood tokens) is clear. */
typedef struct {
  const rgasnet_token *rg_token;  /* valid during the handler call only */
  gex_Rank_t           srcrank;   /* job rank of the sender */
  gex_AM_Index_t       index;     /* handler index */
  uint8_t              is_req;
  uint8_t              is_long;
} gasnetc_token_t;

/* ------------------------------------------------------------------------ */
/* rgasnet return codes */

static const char *gasnetc_rg_code_name(int rc) {
  switch (rc) {
    case RGASNET_OK:                 return "RGASNET_OK";
    case RGASNET_ERR_BAD_ARG:        return "RGASNET_ERR_BAD_ARG";
    case RGASNET_ERR_NOT_INIT:       return "RGASNET_ERR_NOT_INIT";
    case RGASNET_ERR_RESOURCE:       return "RGASNET_ERR_RESOURCE";
    case RGASNET_ERR_BAD_RANK:       return "RGASNET_ERR_BAD_RANK";
    case RGASNET_ERR_BAD_HANDLER:    return "RGASNET_ERR_BAD_HANDLER";
    case RGASNET_ERR_TOO_LARGE:      return "RGASNET_ERR_TOO_LARGE";
    case RGASNET_ERR_OUT_OF_SEGMENT: return "RGASNET_ERR_OUT_OF_SEGMENT";
    case RGASNET_ERR_PEER:           return "RGASNET_ERR_PEER";
    case RGASNET_ERR_IN_HANDLER:     return "RGASNET_ERR_IN_HANDLER";
    case RGASNET_ERR_NOT_READY:      return "RGASNET_ERR_NOT_READY";
    case RGASNET_ERR_BOOTSTRAP:      return "RGASNET_ERR_BOOTSTRAP";
    case RGASNET_ERR_INTERNAL:       return "RGASNET_ERR_INTERNAL";
    default:                         return "unknown rgasnet code";
  }
}

static int gasnetc_rg_to_gasnet(int rc) {
  switch (rc) {
    case RGASNET_OK:
      return GASNET_OK;
    case RGASNET_ERR_BAD_ARG:
    case RGASNET_ERR_BAD_RANK:
    case RGASNET_ERR_BAD_HANDLER:
    case RGASNET_ERR_TOO_LARGE:
    case RGASNET_ERR_OUT_OF_SEGMENT:
    case RGASNET_ERR_IN_HANDLER:
      return GASNET_ERR_BAD_ARG;
    case RGASNET_ERR_NOT_INIT:
      return GASNET_ERR_NOT_INIT;
    case RGASNET_ERR_NOT_READY:
      return GASNET_ERR_NOT_READY;
    default:
      return GASNET_ERR_RESOURCE;
  }
}

extern int gasnetc_rg_error(const char *what, int rc) {
  int err = gasnetc_rg_to_gasnet(rc);
  if (err != GASNET_OK && gasneti_VerboseErrors) {
    gasneti_console_message("WARNING",
        "rgasnet-conduit: %s failed, returning %s: %s (%d): %s",
        what, gasnet_ErrorName(err), gasnetc_rg_code_name(rc), rc,
        rgasnet_last_error());
  }
  return err;
}

/* Start-up failures that cannot be returned to the caller. */
static void gasnetc_rg_fatal(const char *what, int rc) GASNETI_NORETURN;
GASNETI_NORETURNP(gasnetc_rg_fatal)
static void gasnetc_rg_fatal(const char *what, int rc) {
  gasneti_fatalerror("rgasnet-conduit: %s failed: %s (%d): %s",
                     what, gasnetc_rg_code_name(rc), rc, rgasnet_last_error());
}

/* ------------------------------------------------------------------------ */
/* bootstrap collectives over rgasnet's job bootstrap (all ranks, same len) */

static void gasnetc_bootstrapBarrier(void) {
  int32_t rc = rgasnet_boot_barrier();
  if (rc != RGASNET_OK) gasnetc_rg_fatal("rgasnet_boot_barrier()", rc);
}

static void gasnetc_bootstrapExchange(void *src, size_t len, void *dest) {
  int32_t rc = rgasnet_boot_allgather(src, len, dest);
  if (rc != RGASNET_OK) gasnetc_rg_fatal("rgasnet_boot_allgather()", rc);
}

#if GASNET_PSHM
/* Broadcast within each neighborhood: every neighborhood has its own root,
 * so one rooted broadcast will not do. Everybody contributes len bytes to an
 * allgather and keeps the block of its own root. */
static void gasnetc_bootstrapNbrhdBroadcast(void *src, size_t len, void *dest, int rootnode) {
  uint8_t *all = gasneti_malloc(len * gasneti_nodes + 1);
  void *mine = src;
  void *zeros = NULL;
  if ((gex_Rank_t)rootnode != gasneti_mynode || !src) {
    /* a non-root's contribution is never read: send zeros */
    zeros = gasneti_calloc(1, len + 1);
    mine = zeros;
  }
  gasnetc_bootstrapExchange(mine, len, all);
  memcpy(dest, all + (size_t)rootnode * len, len);
  if (zeros) gasneti_free(zeros);
  gasneti_free(all);
}
#endif

/* ------------------------------------------------------------------------ */
/* AM dispatch: rgasnet calls this for every AM, from inside rgasnet_poll()
 * or another rgasnet call that polls. */

static void gasnetc_dispatch(void *ctx, const rgasnet_token *rg_token, uint8_t handler,
                             int32_t category, const uint32_t *args, uint32_t nargs,
                             void *payload, size_t nbytes) {
  (void)ctx;
  uint32_t src = 0;
  int32_t is_req = 0;
  int32_t rc = rgasnet_token_source(rg_token, &src);
  if (rc == RGASNET_OK) rc = rgasnet_token_is_request(rg_token, &is_req);
  if (rc != RGASNET_OK) gasnetc_rg_fatal("token query in AM dispatch", rc);
  if_pf (!gasnetc_handler)
    gasneti_fatalerror("rgasnet-conduit: AM (handler %u) from rank %u arrived before the "
                       "handler table exists", (unsigned)handler, (unsigned)src);
  if_pf (nargs > GASNETC_RGASNET_MAX_ARGS)
    gasneti_fatalerror("rgasnet-conduit: AM with %u arguments from rank %u", (unsigned)nargs,
                       (unsigned)src);

  gasnetc_token_t tok;
  tok.rg_token = rg_token;
  tok.srcrank  = (gex_Rank_t)src;
  tok.index    = (gex_AM_Index_t)handler;
  tok.is_req   = is_req ? 1 : 0;
  tok.is_long  = (category == RGASNET_AM_LONG);
  gex_Token_t token = (gex_Token_t)&tok;
  gasneti_assert(!gasnetc_token_in_nbrhd(token));

  const gex_AM_Entry_t *entry = &gasnetc_handler[handler];
  gex_AM_Fn_t fn = entry->gex_fnptr;
  int isReq = tok.is_req;
  int numargs = (int)nargs;

  switch (category) {
    case RGASNET_AM_SHORT:
      gasneti_amtbl_check(entry, numargs, gasneti_Short, isReq);
      GASNETI_RUN_HANDLER_SHORT(isReq, handler, fn, token, args, numargs);
      break;
    case RGASNET_AM_MEDIUM:
      gasneti_amtbl_check(entry, numargs, gasneti_Medium, isReq);
      GASNETI_RUN_HANDLER_MEDIUM(isReq, handler, fn, token, args, numargs, payload, nbytes);
      break;
    case RGASNET_AM_LONG:
      gasneti_amtbl_check(entry, numargs, gasneti_Long, isReq);
      GASNETI_RUN_HANDLER_LONG(isReq, handler, fn, token, args, numargs, payload, nbytes);
      break;
    default:
      gasneti_fatalerror("rgasnet-conduit: AM of unknown category %d from rank %u",
                         (int)category, (unsigned)src);
  }
}

/* ------------------------------------------------------------------------ */
/* Initialization */

static void gasnetc_check_config(void) {
  gasneti_check_config_preinit();

  gasneti_static_assert(GASNETC_RGASNET_MAX_ARGS == 16);
  gasneti_static_assert(sizeof(gex_AM_Arg_t) == sizeof(uint32_t));
  gasneti_static_assert(sizeof(gex_AM_Index_t) == sizeof(uint8_t));
  gasneti_static_assert(_Alignof(gasnetc_token_t) >= 2);
  /* handler indices of GASNet's core, extended and client tables must not
     collide with the ones rgasnet keeps for itself */
  gasneti_static_assert(RGASNET_RESERVED_LAST < 60);
}

/* The compile-time limits of gasnet_core_fwd.h must be within the library's. */
static void gasnetc_check_limits(void) {
  size_t margs = rgasnet_am_max_args();
  size_t mmed  = rgasnet_am_max_medium();
  size_t mlong = rgasnet_am_max_long();
  if (margs < GASNETC_RGASNET_MAX_ARGS || mmed < gex_AM_LUBRequestMedium() ||
      mlong < gex_AM_LUBRequestLong()) {
    gasneti_fatalerror("rgasnet-conduit was built for AM limits args=%d medium=%zu long=%zu, "
                       "but this librgasnet_capi has args=%zu medium=%zu long=%zu: rebuild "
                       "GASNet's rgasnet-conduit against this library",
                       GASNETC_RGASNET_MAX_ARGS, (size_t)gex_AM_LUBRequestMedium(),
                       (size_t)gex_AM_LUBRequestLong(), margs, mmed, mlong);
  }
}

/* This host's identity as rgasnet sees it: the host name and, where Linux
 * has one, the boot id (so that containers sharing a name are told apart
 * only when they are separate kernels). */
static uint64_t gasnetc_host_id(void) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a over the boot id */
  FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    int c;
    while ((c = fgetc(f)) != EOF && c != '\n') {
      h ^= (uint64_t)(unsigned char)c;
      h *= 1099511628211ULL;
    }
    fclose(f);
  }
  return gasneti_hosthash() ^ h;
}

static int gasnetc_init(gex_Client_t *client_p, gex_EP_t *ep_p, gex_TM_t *tm_p,
                        const char *clientName, int *argc, char ***argv, gex_Flags_t flags) {
  gasnetc_check_config();

  if (gasneti_init_done)
    GASNETI_RETURN_ERRR(NOT_INIT, "GASNet already initialized");

  int32_t rc = rgasnet_init();
  if (rc != RGASNET_OK) {
    gasneti_console_message("ERROR",
        "rgasnet-conduit: rgasnet_init() failed: %s (%d): %s\n"
        "  (start rgasnet-conduit programs with gasnetrun_rgasnet -n N prog args,"
        " or rgasnetrun -n N prog args)",
        gasnetc_rg_code_name(rc), rc, rgasnet_last_error());
    return GASNET_ERR_RESOURCE;
  }
  gasnetc_rg_up = 1;

  /* GASNet catches SIGINT, SIGTERM, SIGHUP and SIGQUIT (and clients may rely
     on raising them). rgasnetrun starts ranks with no signal blocked, but a
     rank started some other way (mpirun, a wrapper script) may inherit a mask
     that holds them back: unblock them in this thread, and so in every thread
     the client starts later. */
  {
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGQUIT);
    sigaddset(&sigs, SIGTERM);
    (void)pthread_sigmask(SIG_UNBLOCK, &sigs, NULL);
  }

  gasneti_mynode = (gex_Rank_t)rgasnet_rank();
  gasneti_nodes  = (gex_Rank_t)rgasnet_size();
  if (gasneti_nodes < 1 || gasneti_mynode >= gasneti_nodes)
    gasneti_fatalerror("rgasnet-conduit: rgasnet reports rank %u of %u",
                       (unsigned)gasneti_mynode, (unsigned)gasneti_nodes);
  gasneti_init_done = 1; /* early, so that tracing works from here on */

  gasneti_freezeForDebugger();
  GASNETI_TICKS_INIT();
  gasneti_trace_init(argc, argv);

  gasneti_spawn_verbose = gasneti_getenv_yesno_withdefault("GASNET_SPAWN_VERBOSE", 0);
  if (gasneti_spawn_verbose)
    gasneti_console_message("gasnetc_init", "rgasnet job started: rank %u of %u",
                            (unsigned)gasneti_mynode, (unsigned)gasneti_nodes);

  gasnetc_check_limits();

  rc = rgasnet_am_attach(&gasnetc_dispatch, NULL);
  if (rc != RGASNET_OK) gasnetc_rg_fatal("rgasnet_am_attach()", rc);

  /* hosts and neighborhoods: GASNET_HOST_DETECT defaults to "conduit", the
     host id below; GASNET_SUPERNODE_MAXSIZE bounds the neighborhoods */
  uint64_t host_id = gasnetc_host_id();
  gasneti_nodemapInit(&gasnetc_bootstrapExchange, &host_id, sizeof(host_id), 0);
#if GASNET_PSHM
  gasneti_pshm_init(&gasnetc_bootstrapNbrhdBroadcast, 0);
#endif

  /* More ranks on this host than CPUs: spinning waits would keep the ranks
     they wait for (and rgasnet's own threads) off the CPUs, so waits and
     polls yield instead. GASNET_RGASNET_WAITMODE=spin|block overrides. */
  {
    int cpus = gasneti_cpu_count();
    int crowded = (cpus > 0) && ((int)gasneti_myhost.node_count > cpus);
    const char *mode = gasneti_getenv_withdefault("GASNET_RGASNET_WAITMODE",
                                                  crowded ? "block" : "spin");
    if (!gasneti_strcasecmp(mode, "block")) {
      gasneti_set_waitmode(GASNET_WAIT_BLOCK);
    } else if (gasneti_strcasecmp(mode, "spin")) {
      gasneti_fatalerror("GASNET_RGASNET_WAITMODE='%s': expected 'spin' or 'block'", mode);
    }
  }

  /* the first (and only) client, its endpoint and team */
  {
    gasneti_Client_t client = gasneti_alloc_client(clientName, flags);
    *client_p = gasneti_export_client(client);

    if (gex_EP_Create(ep_p, *client_p, GEX_EP_CAPABILITY_ALL, flags))
      GASNETI_RETURN_ERRR(RESOURCE, "could not create the primordial endpoint");
    gasneti_EP_t ep = gasneti_import_ep(*ep_p);
    gasnetc_handler = ep->_amtbl;

    gasneti_TM_t tm = gasneti_alloc_tm(ep, gasneti_mynode, gasneti_nodes, flags);
    *tm_p = gasneti_export_tm(tm);
  }

  gasnetc_bootstrapBarrier();
  gasneti_attach_done = 1; /* AMs work from here on (generic code uses them) */

  uintptr_t local_limit;
#if HAVE_MMAP
  {
    uint64_t shared_limit = gasneti_sharedLimit();
    uint64_t aux_total = (uint64_t)gasneti_myhost.node_count * gasneti_auxseg_preinit();
    if (shared_limit <= aux_total)
      gasneti_fatalerror("rgasnet-conduit: the per-host memory limit (%" PRIu64 " bytes) leaves "
                         "no room for the %u aux segments of this host (%" PRIu64 " bytes)",
                         shared_limit, (unsigned)gasneti_myhost.node_count, aux_total);
    local_limit = gasneti_segmentLimit((uintptr_t)-1, shared_limit - aux_total, NULL, NULL);
  }
#else
  local_limit = (uintptr_t)-1;
#endif

  /* GASNet's aux segment: Long AMs (barriers, collectives) land there too */
  gasnet_seginfo_t aux = gasneti_auxsegAttach((uintptr_t)-1, &gasnetc_bootstrapExchange);
  if (aux.addr && aux.size) {
    rc = rgasnet_am_serve_memory(aux.addr, aux.size);
    if (rc != RGASNET_OK) gasnetc_rg_fatal("rgasnet_am_serve_memory(aux segment)", rc);
  }

  gasneti_segmentInit(local_limit, &gasnetc_bootstrapExchange, flags);

  return GASNET_OK;
}

/* ------------------------------------------------------------------------ */
/* Handler registration: refuse the indices rgasnet keeps for itself. */

extern int gasnetc_amregister(gex_AM_Index_t index, gex_AM_Entry_t *entry) {
  (void)entry;
  if (index >= RGASNET_RESERVED_FIRST && index <= RGASNET_RESERVED_LAST) {
    if (gasneti_VerboseErrors)
      gasneti_console_message("WARNING", "rgasnet-conduit: handler index %u is reserved by "
                              "rgasnet (%d..%d)", (unsigned)index, RGASNET_RESERVED_FIRST,
                              RGASNET_RESERVED_LAST);
    return GASNET_ERR_BAD_ARG;
  }
  return GASNET_OK;
}

/* ------------------------------------------------------------------------ */
/* Any segment bound to an endpoint: Longs (and so GASNet's AM-based put/get,
 * which serves segments rgasnet's RMA does not) may land in it. Not
 * collective; the primordial segment is also bound for RMA by the attach hook. */

extern int gasnetc_ep_bindsegment_hook(gasneti_EP_t i_ep, gasneti_Segment_t i_segment,
                                       gex_Flags_t flags) {
  (void)i_ep;
  (void)flags;
  if (i_segment->_size == 0) return GASNET_OK;
  int32_t rc = rgasnet_am_serve_memory(i_segment->_addr, (size_t)i_segment->_size);
  if (rc != RGASNET_OK) return gasnetc_rg_error("rgasnet_am_serve_memory(bound segment)", rc);
  return GASNET_OK;
}

/* ------------------------------------------------------------------------ */
/* Segment: hand the attached client segment to rgasnet (collective), then
 * learn every rank's segment for the put/get range checks. */

extern int gasnetc_segment_attach_hook(gex_Segment_t e_segment, gex_TM_t e_tm) {
  (void)e_tm;
  void *addr = gex_Segment_QueryAddr(e_segment);
  uintptr_t size = gex_Segment_QuerySize(e_segment);

  int32_t rc = rgasnet_segment_bind(addr, (size_t)size);
  if (rc != RGASNET_OK) return gasnetc_rg_error("rgasnet_segment_bind()", rc);

  uintptr_t *base = gasneti_malloc(gasneti_nodes * sizeof(uintptr_t));
  uintptr_t *len  = gasneti_malloc(gasneti_nodes * sizeof(uintptr_t));
  for (gex_Rank_t r = 0; r < gasneti_nodes; r++) {
    uint64_t a = 0, l = 0;
    rc = rgasnet_segment_query(r, &a, &l);
    if (rc != RGASNET_OK) {
      gasneti_free(base);
      gasneti_free(len);
      return gasnetc_rg_error("rgasnet_segment_query()", rc);
    }
    base[r] = (uintptr_t)a;
    len[r]  = (uintptr_t)l;
  }
  gasneti_leak(base);
  gasneti_leak(len);
  gasnetc_rg_seg_size = len;
  gasneti_sync_writes();
  gasnetc_rg_seg_base = base;
  return GASNET_OK;
}

/* ------------------------------------------------------------------------ */
/* Primary attach (also reached from the legacy gasnet_attach()) */

extern int gasnetc_attach_primary(gex_Flags_t flags) {
  (void)flags;
  /* everybody got here (a rank that exits before attach ends the job
     through rgasnet_exit, so nobody waits here forever) */
  gasnetc_bootstrapBarrier();

  gasneti_registerSignalHandlers(gasneti_defaultSignalHandler);
  gasneti_registerExitHandler(gasnetc_exit);

  gasneti_attach_done = 1;
  gasnetc_bootstrapBarrier();

  GASNETI_TRACE_PRINTF(C, ("gasnetc_attach_primary(): primary attach complete"));

  gasnete_init();
  gasneti_nodemapFini();

  gasnetc_bootstrapBarrier();
  return GASNET_OK;
}

extern int gasnetc_Client_Init(gex_Client_t *client_p, gex_EP_t *ep_p, gex_TM_t *tm_p,
                               const char *clientName, int *argc, char ***argv,
                               gex_Flags_t flags) {
  gasneti_assert(client_p);
  gasneti_assert(ep_p);
  gasneti_assert(tm_p);
  gasneti_assert(clientName);

  if (gasneti_init_done)
    gasneti_fatalerror("rgasnet-conduit supports one client per process");

  int retval = gasnetc_init(client_p, ep_p, tm_p, clientName, argc, argv, flags);
  if (retval != GASNET_OK) GASNETI_RETURN(retval);

  GASNETI_TRACE_PRINTF(O, ("gex_Client_Init: name='%s' argc_p=%p argv_p=%p flags=%d",
                           clientName, (void *)argc, (void *)argv, flags));

  if (flags & GASNETI_FLAG_INIT_LEGACY) {
    gasneti_attach_done = 0; /* gasnet_attach() will come */
  } else {
    if (gasnetc_attach_primary(flags) != GASNET_OK)
      GASNETI_RETURN_ERRR(RESOURCE, "primary attach failed");
    gasnet_barrier(0, GASNET_BARRIERFLAG_UNNAMED);
  }
  return GASNET_OK;
}

/* ------------------------------------------------------------------------ */
/* Exit: one thread goes through, flushes, and has rgasnet end every rank of
 * the job (through the launcher) with this code. Never returns. */

static volatile int gasnetc_exiting = 0;
static _Thread_local int gasnetc_exiting_here = 0;

extern void gasnetc_fatalsignal_callback(int sig) {
  (void)sig;
  /* a fault while the job is going down is a teardown artefact, not news */
  if (gasnetc_exiting) gasneti_killmyprocess(1);
}

extern void gasnetc_exit(int exitcode) {
  /* From here on the job is ending: the signals rgasnetrun uses to stop the
     other ranks (and a SIGQUIT re-raised by GASNet's handler) must not start
     a second exit or a "Caught a signal" report. */
  gasneti_reghandler(SIGQUIT, SIG_IGN);
  gasneti_reghandler(SIGTERM, SIG_IGN);
  gasneti_reghandler(SIGINT,  SIG_IGN);
  gasneti_reghandler(SIGHUP,  SIG_IGN);

  if (gasnetc_exiting_here) {
    /* re-entered on this thread (e.g. an exit handler run from inside
       rgasnet_exit): leave now */
    gasneti_killmyprocess(exitcode);
  }
  gasnetc_exiting_here = 1;

  {
    static gasneti_mutex_t exit_lock = GASNETI_MUTEX_INITIALIZER;
    (void)&exit_lock; /* (the lock compiles away in builds without threads) */
    gasneti_mutex_lock(&exit_lock); /* later threads wait here until the process ends */
  }
  gasnetc_exiting = 1;
  gasneti_sync_writes();

  if (gasneti_spawn_verbose)
    gasneti_console_message("EXIT STATE", "gasnet_exit(%i)", exitcode);
  else
    GASNETI_TRACE_PRINTF(C, ("gasnet_exit(%i)", exitcode));

  gasneti_flush_streams();
  gasneti_trace_finish();

  if (gasnetc_rg_up) {
    rgasnet_exit((int32_t)exitcode);
    /* not reached: rgasnet_exit() does not return */
  }
  gasneti_killmyprocess(exitcode);
}

/* ------------------------------------------------------------------------ */
/* Token queries */

extern gex_TI_t gasnetc_Token_Info(gex_Token_t token, gex_Token_Info_t *info, gex_TI_t mask) {
  gasneti_assert(token);
  gasneti_assert(info);

  if (gasnetc_token_in_nbrhd(token))
    return gasnetc_nbrhd_Token_Info(token, info, mask);

  const gasnetc_token_t *tok = (const gasnetc_token_t *)token;
  info->gex_srcrank = tok->srcrank;
  info->gex_ep      = gasneti_THUNK_EP;
  info->gex_entry   = gasneti_import_ep(gasneti_THUNK_EP)->_amtbl + tok->index;
  info->gex_is_req  = tok->is_req;
  info->gex_is_long = tok->is_long;
  gex_TI_t result = GEX_TI_SRCRANK | GEX_TI_EP | GEX_TI_ENTRY | GEX_TI_IS_REQ | GEX_TI_IS_LONG;
  return GASNETI_TOKEN_INFO_RETURN(result, info, mask);
}

/* ------------------------------------------------------------------------ */
/* Polling */

extern int gasnetc_AMPoll(GASNETI_THREAD_FARG_ALONE) {
  GASNETI_CHECKATTACH();
#if GASNET_PSHM
  gasneti_AMPSHMPoll(0 GASNETI_THREAD_PASS);
#endif
  int retval = GASNET_OK;
  /* With the whole job in one neighborhood rgasnet carries no AM or RMA of
     ours; it is still polled now and then for its own housekeeping. */
  static unsigned int skip = 0;
  if (gasneti_mysupernode.grp_count > 1 || !(0x3ff & skip++)) {
    int32_t rc = rgasnet_poll();
    if_pf (rc != RGASNET_OK) retval = gasnetc_rg_error("rgasnet_poll()", rc);
  }
  gasnete_rg_progress();
  /* In GASNET_WAIT_BLOCK mode (set above for a crowded host) a poll lets the
     other processes of the host run: some of GASNet's waits spin on
     gasnet_AMPoll() alone, without yielding themselves. */
  if_pf (gasneti_wait_mode != GASNET_WAIT_SPIN) gasneti_sched_yield();
  return retval;
}

/* ------------------------------------------------------------------------ */
/* Argument checks shared by Requests and Replies (on every path, so that
 * an AM is refused the same way whether it would have gone through rgasnet
 * or through PSHM/loopback) */

static int gasnetc_too_large(const char *kind, size_t nbytes, size_t limit) {
  if (gasneti_VerboseErrors)
    gasneti_console_message("WARNING", "rgasnet-conduit: %s of %zu bytes exceeds the limit of "
                            "%zu bytes, returning GASNET_ERR_BAD_ARG", kind, nbytes, limit);
  return GASNET_ERR_BAD_ARG;
}

static int gasnetc_bad_am(const char *kind, const char *why, unsigned a, unsigned b) {
  if (gasneti_VerboseErrors) {
    char msg[160];
    snprintf(msg, sizeof(msg), why, a, b);
    gasneti_console_message("WARNING", "rgasnet-conduit: %s refused (%s), returning "
                            "GASNET_ERR_BAD_ARG", kind, msg);
  }
  return GASNET_ERR_BAD_ARG;
}

/* 0 if the AM may go, else a GASNet error. target_tm/target_rank name the
 * rank whose segment a Long payload lands in. */
GASNETI_INLINE(gasnetc_check_am)
int gasnetc_check_am(const char *kind, gasneti_category_t category, gex_AM_Index_t handler,
                     size_t nbytes, size_t limit, const void *dest, gex_TM_t target_tm,
                     gex_Rank_t target_rank, int numargs) {
  if_pf (handler >= RGASNET_RESERVED_FIRST && handler <= RGASNET_RESERVED_LAST)
    return gasnetc_bad_am(kind, "handler index %u is reserved by rgasnet (16..%u)",
                          (unsigned)handler, (unsigned)RGASNET_RESERVED_LAST);
  if_pf (numargs < 0 || numargs > GASNETC_RGASNET_MAX_ARGS)
    return gasnetc_bad_am(kind, "%u arguments, at most %u", (unsigned)numargs,
                          (unsigned)GASNETC_RGASNET_MAX_ARGS);
  if (category != gasneti_Short && nbytes > limit)
    return gasnetc_too_large(kind, nbytes, limit);
  if (category == gasneti_Long && nbytes &&
      !gasneti_in_fullsegment(target_tm, target_rank, dest, nbytes))
    return gasnetc_bad_am(kind, "destination range of %u bytes is outside the segments of rank %u",
                          (unsigned)nbytes, (unsigned)target_rank);
  return 0;
}

/* ------------------------------------------------------------------------ */
/* Requests */

GASNETI_INLINE(gasnetc_request)
int gasnetc_request(gasneti_category_t category, gex_TM_t tm, gex_Rank_t rank,
                    gex_AM_Index_t handler, void *src, size_t nbytes, void *dest,
                    gex_Event_t *lc_opt, gex_Flags_t flags, int numargs, va_list argptr
                    GASNETI_THREAD_FARG) {
  int retval;
  if_pf (rank >= gex_TM_QuerySize(tm))
    return gasnetc_bad_am("AM Request", "rank %u of a team of %u", (unsigned)rank,
                          (unsigned)gex_TM_QuerySize(tm));
  retval = gasnetc_check_am("AM Request", category, handler, nbytes,
                            (category == gasneti_Medium) ? gex_AM_LUBRequestMedium()
                                                         : gex_AM_LUBRequestLong(),
                            dest, tm, rank, numargs);
  if_pf (retval) return retval;

  gex_Rank_t jobrank = gasneti_e_tm_rank_to_jobrank(tm, rank);
  if (GASNETI_NBRHD_JOBRANK_IS_LOCAL(jobrank)) {
    GASNETC_IMMEDIATE_MAYBE_POLL(flags);
    retval = gasnetc_nbrhd_RequestGeneric(category, jobrank, handler, src, (int)nbytes, dest,
                                          flags, numargs, argptr GASNETI_THREAD_PASS);
  } else {
    uint32_t args[GASNETC_RGASNET_MAX_ARGS];
    for (int i = 0; i < numargs; i++) args[i] = (uint32_t)va_arg(argptr, gex_AM_Arg_t);
    int32_t rc;
    switch (category) {
      case gasneti_Short:
        rc = rgasnet_am_request_short(jobrank, handler, args, (uint32_t)numargs);
        break;
      case gasneti_Medium:
        rc = rgasnet_am_request_medium(jobrank, handler, args, (uint32_t)numargs, src, nbytes);
        break;
      default:
        rc = rgasnet_am_request_long(jobrank, handler, args, (uint32_t)numargs, src, nbytes,
                                     (uint64_t)(uintptr_t)dest);
        break;
    }
    retval = (rc == RGASNET_OK) ? GASNET_OK : gasnetc_rg_error("AM Request", rc);
  }
  /* both paths are done with the payload on return */
  if (lc_opt) gasneti_leaf_finish(lc_opt);
  return retval;
}

extern int gasnetc_AMRequestShortM(gex_TM_t tm, gex_Rank_t rank, gex_AM_Index_t handler,
                                   gex_Flags_t flags GASNETI_THREAD_FARG, int numargs, ...) {
  GASNETI_COMMON_AMREQUESTSHORT(tm, rank, handler, flags, numargs);
  va_list argptr;
  va_start(argptr, numargs);
  int retval = gasnetc_request(gasneti_Short, tm, rank, handler, NULL, 0, NULL, NULL, flags,
                               numargs, argptr GASNETI_THREAD_PASS);
  va_end(argptr);
  return retval;
}

extern int gasnetc_AMRequestMediumV(gex_TM_t tm, gex_Rank_t rank, gex_AM_Index_t handler,
                                    void *source_addr, size_t nbytes, gex_Event_t *lc_opt,
                                    gex_Flags_t flags, int numargs, va_list argptr
                                    GASNETI_THREAD_FARG) {
  return gasnetc_request(gasneti_Medium, tm, rank, handler, source_addr, nbytes, NULL, lc_opt,
                         flags, numargs, argptr GASNETI_THREAD_PASS);
}

extern int gasnetc_AMRequestMediumM(gex_TM_t tm, gex_Rank_t rank, gex_AM_Index_t handler,
                                    void *source_addr, size_t nbytes, gex_Event_t *lc_opt,
                                    gex_Flags_t flags GASNETI_THREAD_FARG, int numargs, ...) {
  GASNETI_COMMON_AMREQUESTMEDIUM(tm, rank, handler, source_addr, nbytes, lc_opt, flags, numargs);
  va_list argptr;
  va_start(argptr, numargs);
  int retval = gasnetc_request(gasneti_Medium, tm, rank, handler, source_addr, nbytes, NULL,
                               lc_opt, flags, numargs, argptr GASNETI_THREAD_PASS);
  va_end(argptr);
  return retval;
}

extern int gasnetc_AMRequestLongV(gex_TM_t tm, gex_Rank_t rank, gex_AM_Index_t handler,
                                  void *source_addr, size_t nbytes, void *dest_addr,
                                  gex_Event_t *lc_opt, gex_Flags_t flags, int numargs,
                                  va_list argptr GASNETI_THREAD_FARG) {
  return gasnetc_request(gasneti_Long, tm, rank, handler, source_addr, nbytes, dest_addr, lc_opt,
                         flags, numargs, argptr GASNETI_THREAD_PASS);
}

extern int gasnetc_AMRequestLongM(gex_TM_t tm, gex_Rank_t rank, gex_AM_Index_t handler,
                                  void *source_addr, size_t nbytes, void *dest_addr,
                                  gex_Event_t *lc_opt, gex_Flags_t flags GASNETI_THREAD_FARG,
                                  int numargs, ...) {
  GASNETI_COMMON_AMREQUESTLONG(tm, rank, handler, source_addr, nbytes, dest_addr, lc_opt, flags,
                               numargs);
  va_list argptr;
  va_start(argptr, numargs);
  int retval = gasnetc_request(gasneti_Long, tm, rank, handler, source_addr, nbytes, dest_addr,
                               lc_opt, flags, numargs, argptr GASNETI_THREAD_PASS);
  va_end(argptr);
  return retval;
}

/* ------------------------------------------------------------------------ */
/* Replies (from inside a request handler) */

GASNETI_INLINE(gasnetc_reply)
int gasnetc_reply(gasneti_category_t category, gex_Token_t token, gex_AM_Index_t handler,
                  void *src, size_t nbytes, void *dest, gex_Event_t *lc_opt, gex_Flags_t flags,
                  int numargs, va_list argptr) {
  int retval;
  gex_Rank_t requester = 0;
  if (category == gasneti_Long && nbytes) {
    gex_Token_Info_t info;
    (void)gasnetc_Token_Info(token, &info, GEX_TI_SRCRANK);
    requester = info.gex_srcrank;
  }
  retval = gasnetc_check_am("AM Reply", category, handler, nbytes,
                            (category == gasneti_Medium) ? gex_AM_LUBReplyMedium()
                                                         : gex_AM_LUBReplyLong(),
                            dest, gasneti_THUNK_TM, requester, numargs);
  if_pf (retval) return retval;

  if (gasnetc_token_in_nbrhd(token)) {
    retval = gasnetc_nbrhd_ReplyGeneric(category, token, handler, src, (int)nbytes, dest, flags,
                                        numargs, argptr);
  } else {
    const gasnetc_token_t *tok = (const gasnetc_token_t *)token;
    uint32_t args[GASNETC_RGASNET_MAX_ARGS];
    for (int i = 0; i < numargs; i++) args[i] = (uint32_t)va_arg(argptr, gex_AM_Arg_t);
    int32_t rc;
    switch (category) {
      case gasneti_Short:
        rc = rgasnet_am_reply_short(tok->rg_token, handler, args, (uint32_t)numargs);
        break;
      case gasneti_Medium:
        rc = rgasnet_am_reply_medium(tok->rg_token, handler, args, (uint32_t)numargs, src, nbytes);
        break;
      default:
        rc = rgasnet_am_reply_long(tok->rg_token, handler, args, (uint32_t)numargs, src, nbytes,
                                   (uint64_t)(uintptr_t)dest);
        break;
    }
    retval = (rc == RGASNET_OK) ? GASNET_OK : gasnetc_rg_error("AM Reply", rc);
  }
  if (lc_opt) gasneti_leaf_finish(lc_opt);
  return retval;
}

extern int gasnetc_AMReplyShortM(gex_Token_t token, gex_AM_Index_t handler, gex_Flags_t flags,
                                 int numargs, ...) {
  GASNETI_COMMON_AMREPLYSHORT(token, handler, flags, numargs);
  va_list argptr;
  va_start(argptr, numargs);
  int retval = gasnetc_reply(gasneti_Short, token, handler, NULL, 0, NULL, NULL, flags, numargs,
                             argptr);
  va_end(argptr);
  return retval;
}

extern int gasnetc_AMReplyMediumV(gex_Token_t token, gex_AM_Index_t handler, void *source_addr,
                                  size_t nbytes, gex_Event_t *lc_opt, gex_Flags_t flags,
                                  int numargs, va_list argptr) {
  return gasnetc_reply(gasneti_Medium, token, handler, source_addr, nbytes, NULL, lc_opt, flags,
                       numargs, argptr);
}

extern int gasnetc_AMReplyMediumM(gex_Token_t token, gex_AM_Index_t handler, void *source_addr,
                                  size_t nbytes, gex_Event_t *lc_opt, gex_Flags_t flags,
                                  int numargs, ...) {
  GASNETI_COMMON_AMREPLYMEDIUM(token, handler, source_addr, nbytes, lc_opt, flags, numargs);
  va_list argptr;
  va_start(argptr, numargs);
  int retval = gasnetc_reply(gasneti_Medium, token, handler, source_addr, nbytes, NULL, lc_opt,
                             flags, numargs, argptr);
  va_end(argptr);
  return retval;
}

extern int gasnetc_AMReplyLongV(gex_Token_t token, gex_AM_Index_t handler, void *source_addr,
                                size_t nbytes, void *dest_addr, gex_Event_t *lc_opt,
                                gex_Flags_t flags, int numargs, va_list argptr) {
  return gasnetc_reply(gasneti_Long, token, handler, source_addr, nbytes, dest_addr, lc_opt, flags,
                       numargs, argptr);
}

extern int gasnetc_AMReplyLongM(gex_Token_t token, gex_AM_Index_t handler, void *source_addr,
                                size_t nbytes, void *dest_addr, gex_Event_t *lc_opt,
                                gex_Flags_t flags, int numargs, ...) {
  GASNETI_COMMON_AMREPLYLONG(token, handler, source_addr, nbytes, dest_addr, lc_opt, flags,
                             numargs);
  va_list argptr;
  va_start(argptr, numargs);
  int retval = gasnetc_reply(gasneti_Long, token, handler, source_addr, nbytes, dest_addr, lc_opt,
                             flags, numargs, argptr);
  va_end(argptr);
  return retval;
}

/* ------------------------------------------------------------------------ */
/* Handler-safe locks */

extern void gasnetc_hsl_init(gex_HSL_t *hsl) {
  GASNETI_CHECKATTACH();
  (void)hsl;
  gasneti_mutex_init(&hsl->lock);
}

extern void gasnetc_hsl_destroy(gex_HSL_t *hsl) {
  GASNETI_CHECKATTACH();
  (void)hsl;
  gasneti_mutex_destroy(&hsl->lock);
}

extern void gasnetc_hsl_lock(gex_HSL_t *hsl) {
  GASNETI_CHECKATTACH();
  (void)hsl;
  gasneti_mutex_lock(&hsl->lock);
}

extern void gasnetc_hsl_unlock(gex_HSL_t *hsl) {
  GASNETI_CHECKATTACH();
  (void)hsl;
  gasneti_mutex_unlock(&hsl->lock);
}

extern int gasnetc_hsl_trylock(gex_HSL_t *hsl) {
  GASNETI_CHECKATTACH();
  (void)hsl;
  return gasneti_mutex_trylock(&hsl->lock) ? GASNET_ERR_NOT_READY : GASNET_OK;
}

/* ------------------------------------------------------------------------ */
/* Core handler table: only GASNet's common handlers (indices 60..63). */

static gex_AM_Entry_t const gasnetc_handlers[] = {
  GASNETC_COMMON_HANDLERS(),
  GASNETI_HANDLER_EOT
};

gex_AM_Entry_t const *gasnetc_get_handlertable(void) {
  return gasnetc_handlers;
}
