/* Bad AM calls on the rgasnet conduit return GASNet's error (GASNET_ERR_BAD_ARG), with a
 * WARNING saying why, and change nothing: a Medium above the limit, a reserved handler index,
 * a Long outside the target's segments, a Long above the limit, and a Reply Long outside the
 * requester's segment. Calls at the limits then succeed, and put/get still work. Run by
 * scripts/gasnet-ex-tests.sh on every layout; any ERROR line fails it. */
#include <gasnetex.h>
#include <stdio.h>
#include <string.h>

static volatile int got_med = 0, got_long = 0, got_rep = 0;
static void medh(gex_Token_t t, void *buf, size_t n) { (void)t; (void)buf; (void)n; got_med++; }
static void longh(gex_Token_t t, void *buf, size_t n) {
  (void)buf; (void)n; got_long++;
  /* a Reply Long to an address outside the requester's segment must be refused */
  static char junk[64];
  int rc = gex_AM_ReplyLong0(t, 128+2, junk, 8, junk, GEX_EVENT_NOW, 0);
  if (rc != GASNET_ERR_BAD_ARG) printf("ERROR: bad Reply Long returned %s\n", gasnet_ErrorName(rc));
  rc = gex_AM_ReplyShort0(t, 128+2, 0);
  if (rc != GASNET_OK) printf("ERROR: Reply Short returned %s\n", gasnet_ErrorName(rc));
}
static void reph(gex_Token_t t) { (void)t; got_rep++; }

#define CHECK(what, rc, want) do { int _r = (rc); \
  if (_r != (want)) printf("ERROR: rank %u: %s returned %s, expected %s\n", me, what, gasnet_ErrorName(_r), gasnet_ErrorName(want)); \
  else printf("rank %u: %s -> %s (ok)\n", me, what, gasnet_ErrorName(_r)); fflush(stdout); } while (0)

int main(int argc, char **argv) {
  gex_Client_t cl; gex_EP_t ep; gex_TM_t tm; gex_Segment_t seg;
  if (gex_Client_Init(&cl, &ep, &tm, "errors", &argc, &argv, 0)) return 1;
  if (gex_Segment_Attach(&seg, tm, 1 << 20)) return 1;
  gex_AM_Entry_t ht[] = {
    {128+0, (gex_AM_Fn_t)medh,  GEX_FLAG_AM_REQUEST|GEX_FLAG_AM_MEDIUM, 0, NULL, "medh"},
    {128+1, (gex_AM_Fn_t)longh, GEX_FLAG_AM_REQUEST|GEX_FLAG_AM_LONG,   0, NULL, "longh"},
    {128+2, (gex_AM_Fn_t)reph,  GEX_FLAG_AM_REPLY|GEX_FLAG_AM_SHORT, 0, NULL, "reph"},
  };
  if (gex_EP_RegisterHandlers(ep, ht, 3)) return 1;
  gex_Rank_t me = gex_TM_QueryRank(tm), n = gex_TM_QuerySize(tm), peer = (me + 1) % n;
  void *peerseg = NULL; uintptr_t peersz = 0;
  gex_Segment_QueryBound(tm, peer, &peerseg, NULL, &peersz);
  static char buf[1 << 17];
  memset(buf, 1, sizeof(buf));
  gex_Event_t bar = gex_Coll_BarrierNB(tm, 0); gex_Event_Wait(bar);

  CHECK("Medium LUB+1", gex_AM_RequestMedium0(tm, peer, 128, buf, gex_AM_LUBRequestMedium() + 1, GEX_EVENT_NOW, 0), GASNET_ERR_BAD_ARG);
  CHECK("Short to reserved handler 17", gex_AM_RequestShort0(tm, peer, 17, 0), GASNET_ERR_BAD_ARG);
  CHECK("Long to address 0x1000", gex_AM_RequestLong0(tm, peer, 129, buf, 64, (void *)(uintptr_t)0x1000, GEX_EVENT_NOW, 0), GASNET_ERR_BAD_ARG);
  CHECK("Long LUB+1", gex_AM_RequestLong0(tm, peer, 129, buf, gex_AM_LUBRequestLong() + 1, peerseg, GEX_EVENT_NOW, 0), GASNET_ERR_BAD_ARG);
  CHECK("Medium at LUB", gex_AM_RequestMedium0(tm, peer, 128, buf, gex_AM_LUBRequestMedium(), GEX_EVENT_NOW, 0), GASNET_OK);
  CHECK("Long at LUB", gex_AM_RequestLong0(tm, peer, 129, buf, gex_AM_LUBRequestLong(), peerseg, GEX_EVENT_NOW, 0), GASNET_OK);
  GASNET_BLOCKUNTIL(got_med == 1 && got_long == 1 && got_rep == 1);
  /* large put/get through rgasnet RMA, and to the last byte of the segment */
  gex_RMA_PutBlocking(tm, peer, peerseg, buf, sizeof(buf), 0);
  static char back[1 << 17];
  gex_RMA_GetBlocking(tm, back, peer, peerseg, sizeof(back), 0);
  if (memcmp(back, buf, sizeof(buf))) printf("ERROR: put/get mismatch\n");
  gex_RMA_PutBlocking(tm, peer, (char *)peerseg + peersz - 1, buf, 1, 0);
  bar = gex_Coll_BarrierNB(tm, 0); gex_Event_Wait(bar);
  printf("rank %u: done\n", me);
  gasnet_exit(0);
  return 0;
}
