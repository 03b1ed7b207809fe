/*
 * rgasnet-conduit: early ("forward") definitions of the core.
 *
 * gasnetex.h pulls this file in before anything else of the conduit. It names
 * the conduit, says which optional GASNet-EX features the core provides and
 * which generic hooks it implements. Part of the rgasnet project
 * (MIT OR Apache-2.0); see README in this directory.
 */

#ifndef _IN_GASNETEX_H
  #error gasnet_core_fwd.h is internal: include gasnetex.h instead
#endif

#ifndef _GASNET_CORE_FWD_H
#define _GASNET_CORE_FWD_H

/* ---- identity ---------------------------------------------------------- */
#define GASNET_CORE_VERSION      0.1
#define GASNET_CORE_VERSION_STR  _STRINGIFY(GASNET_CORE_VERSION)
#define GASNET_CORE_NAME         RGASNET
#define GASNET_CORE_NAME_STR     _STRINGIFY(GASNET_CORE_NAME)
#define GASNET_CONDUIT_NAME      GASNET_CORE_NAME
#define GASNET_CONDUIT_NAME_STR  _STRINGIFY(GASNET_CONDUIT_NAME)
#define GASNET_CONDUIT_RGASNET   1

/* ---- shared memory ----------------------------------------------------- */
/* Processes of one host talk through GASNet's own PSHM layer whenever it was
 * configured in; rgasnet (whose shared-memory path is off inside its C ABI)
 * carries only the traffic between different neighborhoods. */
#if GASNETI_PSHM_ENABLED
  #define GASNET_PSHM 1
#endif

/* Segments are mapped wherever mmap puts them: no common virtual address. */
#define GASNET_ALIGNED_SEGMENTS 0

/* ---- handler table and tokens ------------------------------------------ */
/* gasnetc_amregister() is called for every handler registered, so that the
 * indices rgasnet keeps for itself can be refused up front. */
#define GASNETC_AMREGISTER 1

#define GASNET_SUPPORTS_TI_SRCRANK 1
#define GASNET_SUPPORTS_TI_EP      1
#define GASNET_SUPPORTS_TI_ENTRY   1
#define GASNET_SUPPORTS_TI_IS_REQ  1
#define GASNET_SUPPORTS_TI_IS_LONG 1

/* Compile-time AM limits (the values of the rgasnet C ABI; checked against
 * the library at start-up). GASNETC_MAX_ARGS_NBRHD sizes arrays in generic
 * code, so these must be constants. */
#define GASNETC_RGASNET_MAX_ARGS    16
#define GASNETC_RGASNET_MAX_MEDIUM  65000
#define GASNETC_RGASNET_MAX_LONG    64984

/* ---- segment hooks ----------------------------------------------------- */
/* The client segment is handed to rgasnet (rgasnet_segment_bind) once GASNet
 * has mapped and exchanged it. */
#define GASNETC_SEGMENT_ATTACH_HOOK 1
/* every segment bound to an endpoint (gex_EP_BindSegment, client-allocated ones included)
   becomes memory that AM Longs, and so the AM-based put/get, may land in */
#define GASNETC_EP_BINDSEGMENT_HOOK 1

/* ---- statistics and signals -------------------------------------------- */
#define GASNETC_CONDUIT_STATS(CNT,VAL,TIME)

#define GASNETC_FATALSIGNAL_CALLBACK(sig) gasnetc_fatalsignal_callback(sig)
extern void gasnetc_fatalsignal_callback(int _sig);

#endif
