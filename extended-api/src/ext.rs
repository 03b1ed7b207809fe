//! The [`Extended`] object: collective attach, the Portals resources every operation shares,
//! range checks, and the one wait loop every blocking call goes through.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rgasnet::{AttachSpec, Category, Client, Handler, MappedSegment, SegmentSpec};
use rgasnet_portals::engine::{Engine, EqGet, EqHandle, MdHandle, MdSpec};
use rgasnet_portals::interface::Interface;
use rgasnet_portals::{AnyNi, EngineView};
use rgasnet_portals::{EventKind, MdOptions, NiFail, Region};

use crate::barrier::Barrier;
use crate::blocking::{BlockingSlots, BLOCKING_SLOTS};
use crate::error::{ExtAttachError, ExtError};
use crate::ops::{Freed, Landing, Ops};
use crate::small::SmallLandings;
use rgasnet_portals::pool::RegionPool;
use rgasnet_portals::proto::{REQUEST_HEADER_LEN, RESPONSE_HEADER_LEN};
use rgasnet_portals::transport::DEFAULT_FRAGMENT_SIZE;

/// Bytes moved by one network put: larger puts are split, so that copying one chunk into
/// its message (and, at the target, out of it) overlaps the transfer of the others. Four
/// datagrams' worth with the header: a blocking 1 MiB put went from about 2.8 to 4.5 GB/s
/// against one 1 MiB message (which was copied whole before its first datagram left). Also
/// the size of a bounce buffer.
pub(crate) const PUT_CHUNK: usize = 4 * DEFAULT_FRAGMENT_SIZE - REQUEST_HEADER_LEN;
/// Bytes moved by one implicit-handle put from the segment, which leaves in place
/// ([`rgasnet_portals::MdOptions::IN_PLACE`]): one datagram's worth with the header. The sender
/// then copies nothing, and the target deposits each datagram straight from its receive buffer
/// (a message of several datagrams is first reassembled, a second copy). 1 MiB `put_nbi_bulk`
/// went from 5.2–5.5 to 6.5–7.5 GB/s against one 4 MiB-bounded message per call.
pub(crate) const SEG_PUT_CHUNK: usize = DEFAULT_FRAGMENT_SIZE - REQUEST_HEADER_LEN;
/// Bytes of explicit-handle puts in flight per rank; more would only queue in the transport
/// while the issuing call, which transmits but does not receive, keeps copying (see
/// [`crate::nbi::NBI_WINDOW_BYTES`]).
pub const NB_WINDOW_BYTES: u64 = 4 << 20;
/// Bytes moved by one network get: larger gets are split into gets whose reply is one
/// datagram. The target answers from its segment in place (the segment's list entry is
/// `IN_PLACE_REPLY`) and the initiator deposits each datagram without reassembling the reply
/// first. Against 4 MiB chunks: blocking 1 MiB get 2.8-3.1 -> 5.9-6.1 GB/s, 4 MiB get_nbi
/// 3.6-4.0 -> 6.0 GB/s.
pub(crate) const GET_CHUNK: usize = DEFAULT_FRAGMENT_SIZE - RESPONSE_HEADER_LEN;
/// Gets up to this size land in a slot of the shared small-landing region.
pub(crate) const SMALL_GET: usize = 4096;
/// Longest a wait blocks in the kernel before it polls the AM layer again (an incoming request
/// wakes it sooner; this bounds the delay of AM acknowledgements and resends).
const POLL_SLICE: Duration = Duration::from_micros(500);
/// The same when node peers may send through shared memory, which does not wake the socket.
const SHM_POLL_SLICE: Duration = Duration::from_micros(50);

/// Reserved AM handler indices of the extended API.
pub(crate) const H_MEMSET_REQ: u8 = 16;
pub(crate) const H_MEMSET_REP: u8 = 17;
pub(crate) const H_BARRIER: u8 = 18;

/// State reached from the AM handlers (created before attach so they can capture it).
pub(crate) struct Core {
    pub(crate) client: Client,
    pub(crate) ops: Ops,
    pub(crate) barrier: Barrier,
}

/// Everything behind an [`Extended`].
pub(crate) struct Shared {
    pub(crate) core: Arc<Core>,
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) segment: Region,
    pub(crate) seg_sizes: Vec<u64>,
    /// Every rank's segment that is mapped in this process (own and supernode peers'), by
    /// rank: the direct-copy path looks here first.
    pub(crate) mapped: Vec<Option<Region>>,
    /// The shared-memory segments among `mapped` (supernode peers', and this rank's own when
    /// it is shared) as raw mapped words, by rank: blocking one-word puts and gets to them are
    /// a single store or load inlined into the caller (issue 6: 8-byte put in a few ns).
    pub(crate) direct: Vec<Option<MappedSegment>>,
    pub(crate) ni: AnyNi,
    /// The native engine's interface (its waits make its progress); `None` over a Portals
    /// library, which makes progress on its own.
    pub(crate) iface: Option<Interface>,
    /// Full events (ACK/REPLY) of explicit operations.
    pub(crate) xeq: EqHandle,
    /// Network operations reporting to `xeq` and not yet drained (bounded by its length).
    /// Every access is `Relaxed`: the counter only bounds how many events can be queued; the
    /// events themselves are published and read under the interface lock, which orders them.
    pub(crate) credits: AtomicUsize,
    pub(crate) credit_cap: usize,
    /// The engine's count of posted events (`EngineView::events_posted`) when `drain` last
    /// found `xeq` empty (`u64::MAX`: never). While the count is unchanged nothing was
    /// posted since, so a wait's round skips the queue: on the native engine every round
    /// of every wait drains, and an empty drain was about a third of an idle round's
    /// instructions. `Relaxed`: read and written only under the interface lock (the
    /// engine borrow `drain` is given), which orders it with the events.
    pub(crate) drained_at: AtomicU64,
    /// Bytes of explicit-handle puts in flight (issued, not yet acknowledged), bounded by
    /// [`NB_WINDOW_BYTES`].
    pub(crate) put_bytes: AtomicU64,
    /// Bytes of explicit-handle gets in flight (issued, reply not yet in), bounded by
    /// [`NB_WINDOW_BYTES`] as puts are: without it, 32 MiB of gets made the target build 32
    /// MiB of replies at once (fresh memory, faulted in) and ran at a third of the speed of
    /// implicit-handle gets, which had a window.
    pub(crate) get_bytes: AtomicU64,
    /// The small-landing slots, in blocks of regions with their descriptors (reporting to
    /// `xeq`).
    pub(crate) small: SmallLandings<MdHandle>,
    /// The own segment as a put source / get destination of explicit operations.
    pub(crate) seg_md: MdHandle,
    /// The segment again, `IN_PLACE`: blocking puts from it (see `SegOp::PutInPlace`).
    pub(crate) seg_put_md: MdHandle,
    /// Landings of explicit gets larger than a small slot, kept bound for reuse.
    pub(crate) landings: RegionPool<MdHandle>,
    /// The descriptor of explicit and blocking puts of the caller's bytes (`Ni::put_from`
    /// copies them straight into the message, so no byte is ever written to its region, and
    /// any number of puts may name it at once): it reports their ACKs to `xeq`.
    pub(crate) put_md: MdHandle,
    /// The slots of blocking single-operation puts and gets.
    pub(crate) blocking: BlockingSlots,
    /// Where blocking gets land: [`SMALL_GET`] bytes per slot, bound as `blocking_md`.
    pub(crate) blocking_landing: Region,
    pub(crate) blocking_md: MdHandle,
    pub(crate) sets: Mutex<Vec<crate::nbi::CounterSet>>,
}

/// The last [`Extended`] handle going away delivers what this rank still has in flight, as
/// the client's own end would: the extended API's handlers hold the client, so the client's
/// state is never dropped by itself while they are registered. The handlers keep it on
/// purpose (a weak reference would break the cycle): while this rank quiesces, a peer's
/// memset request must still be answered, or that peer would wait for its reply forever.
impl Drop for Shared {
    fn drop(&mut self) {
        self.core.client.quiesce_before_exit();
    }
}

/// The extended API of one rank: put/get in blocking, explicit-handle (`nb`) and
/// implicit-handle (`nbi`, access region) forms, value forms, memset and barriers.
///
/// Cheap to clone, `Send + Sync`: any number of threads may issue operations and wait at once.
/// Created collectively by [`Extended::attach`].
#[derive(Clone)]
pub struct Extended {
    pub(crate) sh: Arc<Shared>,
}

impl std::fmt::Debug for Extended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extended")
            .field("rank", &self.sh.rank)
            .field("size", &self.sh.size)
            .finish()
    }
}

impl Extended {
    /// Collective: attaches `client` with a segment of `segment_size` bytes and the client's
    /// `handlers` (indices 128–255, as for [`Client::attach`]), registers the extended API's
    /// own handlers, and sets up its network resources. Returns the object and the client
    /// handlers' indices.
    pub fn attach(
        client: &Client,
        segment_size: u64,
        handlers: Vec<Handler>,
    ) -> Result<(Extended, Vec<u8>), ExtAttachError> {
        let core = new_core(client)?;
        let internal = internal_handlers(&core);
        let indices = client.attach_with_internal(segment_size, internal, handlers)?;
        let ext = Extended::over_segment(core)?;
        Ok((ext, indices))
    }

    /// Collective: attaches `client` as `spec` says, with a segment that comes later
    /// ([`rgasnet::SegmentSpec::Later`]; the spec's own segment is ignored), and registers the
    /// extended API's handlers next to `spec.internal`. Active messages run from here on;
    /// put and get once [`PendingExtended::bind_segment`] served the segment. For a runtime
    /// that allocates its segment itself, after its active messages already run (GASNet-EX,
    /// through the C ABI).
    pub fn attach_later(
        client: &Client,
        mut spec: AttachSpec,
    ) -> Result<(PendingExtended, Vec<u8>), ExtAttachError> {
        let core = new_core(client)?;
        spec.segment = SegmentSpec::Later;
        spec.internal.extend(internal_handlers(&core));
        let indices = client.attach_spec(spec)?;
        Ok((PendingExtended { core }, indices))
    }

    /// The rest of attach, once the client has its segment.
    fn over_segment(core: Arc<Core>) -> Result<Extended, ExtAttachError> {
        let client = &core.client.clone();
        let cap = client.config().extended_event_queue_length;
        let segment = client
            .segment()
            .cloned()
            .ok_or(rgasnet::AttachError::AlreadyAttached)?;
        let seg_sizes = (0..client.size())
            .map(|r| client.segment_size(r).unwrap_or(0))
            .collect();
        let mapped = (0..client.size())
            .map(|r| client.peer_segment(r).cloned())
            .collect();
        // Only where the mapped length is the advertised one, so that the fast path accepts
        // exactly the ranges the general path's check does.
        let direct = (0..client.size())
            .map(|r| {
                let seg = client.mapped_segment(r)?;
                (Some(seg.len() as u64) == client.segment_size(r)).then(|| seg.clone())
            })
            .collect();
        let ni = client.rma_ni().clone();
        let xeq = ni.eq_alloc(cap)?;
        let small = rgasnet::buffer_region(crate::small::BLOCK_LEN);
        let small_md = bind_eq(&ni, &small, xeq)?;
        let small = SmallLandings::new((small, small_md));
        let seg_md = bind_eq(&ni, &segment, xeq)?;
        // Only its length matters (see `put_md`): an untouched mapping costs no memory.
        let put_md = bind_eq(&ni, &rgasnet::buffer_region(PUT_CHUNK), xeq)?;
        let blocking_landing = rgasnet::buffer_region(BLOCKING_SLOTS as usize * SMALL_GET);
        let blocking_md = bind_eq(&ni, &blocking_landing, xeq)?;
        // Blocking puts from the segment wait for their ACK, so they may leave in place.
        let seg_put_md = bind_eq_with(&ni, &segment, xeq, MdOptions::IN_PLACE)?;
        let sh = Shared {
            rank: client.rank(),
            size: client.size(),
            segment,
            seg_sizes,
            mapped,
            direct,
            iface: ni.native_interface().cloned(),
            ni,
            xeq,
            credits: AtomicUsize::new(0),
            credit_cap: cap,
            drained_at: AtomicU64::new(u64::MAX),
            put_bytes: AtomicU64::new(0),
            get_bytes: AtomicU64::new(0),
            small,
            seg_md,
            seg_put_md,
            landings: RegionPool::new(),
            put_md,
            blocking: BlockingSlots::new(),
            blocking_landing,
            blocking_md,
            sets: Mutex::new(Vec::new()),
            core,
        };
        Ok(Extended { sh: Arc::new(sh) })
    }

    /// The client this API runs on.
    pub fn client(&self) -> &Client {
        &self.sh.core.client
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.sh.rank
    }

    /// Number of ranks.
    pub fn size(&self) -> u32 {
        self.sh.size
    }

    /// This rank's segment (what other ranks put into and get from).
    pub fn segment(&self) -> &Region {
        &self.sh.segment
    }

    /// The size of `rank`'s segment (`None` for a rank outside the job).
    pub fn segment_size(&self, rank: u32) -> Option<u64> {
        self.sh.seg_sizes.get(rank as usize).copied()
    }

    /// Explicit network operations issued and not yet completed (bounded by
    /// `GASNET_EXTENDED_EVENT_QUEUE_LENGTH`).
    pub fn in_flight(&self) -> usize {
        self.sh.credits.load(Ordering::Relaxed)
    }

    /// Makes progress once without blocking: drains completions and runs pending AM
    /// handlers. Errors with [`ExtError::InHandler`] inside a handler.
    pub fn poll(&self) -> Result<(), ExtError> {
        crate::explicit::not_in_handler("poll")?;
        self.sh
            .wait_until("poll", Some(Duration::ZERO), |_, _| Ok(true))
    }
}

/// An extended API attached with [`Extended::attach_later`]: its handlers run, its segment
/// is not served yet.
pub struct PendingExtended {
    core: Arc<Core>,
}

impl std::fmt::Debug for PendingExtended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingExtended")
            .field("rank", &self.core.client.rank())
            .finish()
    }
}

impl PendingExtended {
    /// The client this API runs on.
    pub fn client(&self) -> &Client {
        &self.core.client
    }

    /// Collective: serves `segment` (see [`Client::bind_segment`]) and completes the extended
    /// API over it.
    pub fn bind_segment(self, segment: Region) -> Result<Extended, ExtAttachError> {
        self.core.client.bind_segment(segment)?;
        Extended::over_segment(self.core)
    }
}

/// The state the extended API's handlers reach, after checking the configuration.
fn new_core(client: &Client) -> Result<Arc<Core>, ExtAttachError> {
    let cap = client.config().extended_event_queue_length;
    if cap < 16 {
        return Err(ExtAttachError::EventQueueTooShort(cap));
    }
    Ok(Arc::new(Core {
        client: client.clone(),
        ops: Ops::new(crate::small::SLOTS_PER_BLOCK),
        barrier: Barrier::new(client.rank(), client.size()),
    }))
}

/// Binds a descriptor over all of `region` that reports full events (not SENDs) to `eq`.
pub(crate) fn bind_eq(
    ni: &AnyNi,
    region: &Region,
    eq: EqHandle,
) -> Result<MdHandle, rgasnet_portals::PtlError> {
    bind_eq_with(ni, region, eq, MdOptions::empty())
}

/// [`bind_eq`] with `extra` options.
pub(crate) fn bind_eq_with(
    ni: &AnyNi,
    region: &Region,
    eq: EqHandle,
    extra: MdOptions,
) -> Result<MdHandle, rgasnet_portals::PtlError> {
    ni.md_bind(MdSpec {
        region: region.clone(),
        offset: 0,
        length: region.len() as u64,
        options: MdOptions::EVENT_SEND_DISABLE | extra,
        eq: Some(eq),
        ct: None,
    })
}

fn internal_handlers(core: &Arc<Core>) -> Vec<Handler> {
    let c = core.clone();
    let memset_req = Handler::new("rgasnet memset request", Category::Short, move |t, a, _| {
        crate::memset::handle_request(&c, t, a)
    })
    .with_argc(6)
    .at(H_MEMSET_REQ);
    let c = core.clone();
    let memset_rep = Handler::new("rgasnet memset reply", Category::Short, move |_, a, _| {
        crate::memset::handle_reply(&c, a)
    })
    .with_argc(2)
    .at(H_MEMSET_REP);
    let c = core.clone();
    let barrier = Handler::new("rgasnet barrier", Category::Short, move |t, a, _| {
        c.barrier.handle(t.source(), a)
    })
    .with_argc(4)
    .at(H_BARRIER);
    vec![memset_req, memset_rep, barrier]
}

impl Shared {
    /// Checks `rank` and the remote range `[offset, offset + len)` against its segment, and
    /// that `rank` has not ended its program (over the network an access to a rank that is
    /// gone would be retransmitted until the peer timeout).
    pub(crate) fn check_remote(
        &self,
        call: &'static str,
        rank: u32,
        offset: u64,
        len: usize,
    ) -> Result<(), ExtError> {
        let Some(&segment) = self.seg_sizes.get(rank as usize) else {
            return Err(ExtError::BadRank {
                call,
                rank,
                size: self.size,
            });
        };
        let len = len as u64;
        if offset.checked_add(len).is_none_or(|end| end > segment) {
            return Err(ExtError::OutsideSegment {
                call,
                rank,
                offset,
                len,
                segment,
            });
        }
        if self.core.client.has_ended(rank) {
            return Err(ExtError::PeerLeft { call, rank });
        }
        Ok(())
    }

    /// Checks a range of this rank's own segment.
    pub(crate) fn check_local(
        &self,
        call: &'static str,
        offset: u64,
        len: u64,
    ) -> Result<(), ExtError> {
        let segment = self.segment.len() as u64;
        if offset.checked_add(len).is_none_or(|end| end > segment) {
            return Err(ExtError::OutsideLocalSegment {
                call,
                offset,
                len,
                segment,
            });
        }
        Ok(())
    }

    /// `rank`'s segment when it is mapped in this process — this rank's own, or a supernode
    /// peer's shared segment — so that an operation on it is a direct copy.
    pub(crate) fn local_segment(&self, rank: u32) -> Option<&Region> {
        self.mapped.get(rank as usize)?.as_ref()
    }

    /// `rank`'s shared segment for a one-word direct copy (see `direct`).
    #[inline]
    pub(crate) fn direct(&self, rank: u32) -> Option<&MappedSegment> {
        self.direct.get(rank as usize)?.as_ref()
    }

    /// The outcome of a direct copy into or out of a mapped segment, reported like the same
    /// access over the network: outside the segment is the target's `NI_SEGV`.
    pub(crate) fn local_result(
        &self,
        call: &'static str,
        rank: u32,
        r: Result<(), rgasnet_portals::OutOfBounds>,
    ) -> Result<(), ExtError> {
        r.map_err(|_| ExtError::Remote {
            call,
            rank,
            fail: rgasnet_portals::NiFail::Segv,
        })
    }

    /// Reserves room for one more event on `xeq`, waiting (and making progress) while
    /// `GASNET_EXTENDED_EVENT_QUEUE_LENGTH` operations are outstanding.
    pub(crate) fn acquire_credit(&self, call: &'static str) -> Result<(), ExtError> {
        loop {
            let c = self.credits.load(Ordering::Relaxed);
            if c < self.credit_cap {
                if self
                    .credits
                    .compare_exchange_weak(c, c + 1, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    return Ok(());
                }
                continue;
            }
            self.wait_until(call, None, |_, sh| {
                Ok(sh.credits.load(Ordering::Relaxed) < sh.credit_cap)
            })?;
        }
    }

    /// Reserves `len` bytes of the explicit-put window, waiting (and making progress) while
    /// [`NB_WINDOW_BYTES`] are in flight; a single larger chunk goes alone.
    pub(crate) fn acquire_put_bytes(&self, call: &'static str, len: u64) -> Result<(), ExtError> {
        self.acquire_window(call, |sh| &sh.put_bytes, len)
    }

    /// Returns `len` bytes to the explicit-put window.
    pub(crate) fn release_put_bytes(&self, len: u64) {
        release_window(&self.put_bytes, len)
    }

    /// Returns `len` bytes to the explicit-get window.
    pub(crate) fn release_get_bytes(&self, len: u64) {
        release_window(&self.get_bytes, len)
    }

    /// Issues one chunk of `len` bytes of an explicit put (`get` false) or get: reserves its
    /// bytes of that window and an event-queue credit, then runs `issue`; gives both back if
    /// it fails.
    pub(crate) fn issue_chunk(
        &self,
        call: &'static str,
        get: bool,
        len: u64,
        issue: impl FnOnce() -> Result<(), rgasnet_portals::PtlError>,
    ) -> Result<(), ExtError> {
        let window: fn(&Shared) -> &AtomicU64 = if get {
            |sh| &sh.get_bytes
        } else {
            |sh| &sh.put_bytes
        };
        self.acquire_window(call, window, len)?;
        let r = self.acquire_credit(call).and_then(|()| {
            issue().map_err(|source| {
                // Relaxed: see the `credits` field.
                self.credits.fetch_sub(1, Ordering::Relaxed);
                ExtError::Portals { call, source }
            })
        });
        if r.is_err() {
            release_window(window(self), len);
        }
        r
    }

    /// Reserves `len` bytes of the window `window` picks, waiting (and making progress) while
    /// [`NB_WINDOW_BYTES`] are in flight; a single larger chunk goes alone.
    fn acquire_window(
        &self,
        call: &'static str,
        window: impl Fn(&Shared) -> &AtomicU64,
        len: u64,
    ) -> Result<(), ExtError> {
        let fits = |b: u64| b == 0 || b + len <= NB_WINDOW_BYTES;
        loop {
            // Relaxed: a count of bytes, synchronised by nothing but itself.
            let w = window(self);
            let b = w.load(Ordering::Relaxed);
            if fits(b) {
                if w.compare_exchange_weak(b, b + len, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    return Ok(());
                }
                continue;
            }
            self.wait_until(call, None, |_, sh| {
                Ok(fits(window(sh).load(Ordering::Relaxed)))
            })?;
        }
    }

    /// Takes every event waiting on `xeq` and records it in its cell (under the engine lock,
    /// which the caller holds through `e`).
    pub(crate) fn drain(&self, e: &mut dyn EngineView) -> Result<(), ExtError> {
        let posted = e.events_posted();
        if posted.is_some() && posted == Some(self.drained_at.load(Ordering::Relaxed)) {
            return Ok(());
        }
        loop {
            let ev = match e.eq_get(self.xeq).map_err(ExtError::portals("drain"))? {
                EqGet::Empty => {
                    // The count read before the loop: whatever was posted up to then has
                    // been taken (an event posted since, by a release below, raises the
                    // count past it and is taken next time).
                    if let Some(n) = posted {
                        self.drained_at.store(n, Ordering::Relaxed);
                    }
                    return Ok(());
                }
                EqGet::Event(ev) => ev,
                EqGet::Dropped(_) => {
                    // Unreachable by construction (credits bound what reports to the queue);
                    // operations whose events were lost would never complete.
                    eprintln!(
                        "rgasnet: fatal error on rank {}: extended API completions were lost (event queue overflow)",
                        self.rank
                    );
                    self.core.client.exit(1)
                }
            };
            self.credits.fetch_sub(1, Ordering::Relaxed);
            // The length asked for travels in the user_ptr: these events carry no rlength.
            let (cell, requested) = crate::explicit::chunk_of(ev.user_ptr);
            // A range straddling the end of the target's entry is truncated by Portals (the
            // part inside is moved), one past its end moves nothing: report either as the
            // access outside the entry it is.
            let fail = if ev.ni_fail == NiFail::Ok && ev.mlength < requested {
                NiFail::Segv
            } else {
                ev.ni_fail
            };
            if let Some(slot) = crate::blocking::slot_of(cell) {
                // A blocking call's operation, outside every byte window.
                self.blocking.complete(slot, fail);
                continue;
            }
            match ev.kind {
                // Every acknowledged operation on this queue is an explicit put chunk, every
                // replied one an explicit get chunk.
                EventKind::Ack => self.release_put_bytes(requested),
                EventKind::Reply => self.release_get_bytes(requested),
                _ => {}
            }
            if let Freed::Landing(l) = self.core.ops.complete(cell, 1, fail) {
                self.release_landing_in(e, l);
            }
        }
    }

    /// Releases a landing while the engine lock is held.
    pub(crate) fn release_landing_in(&self, e: &mut dyn EngineView, l: Landing) {
        if let Some(md) = self.landing_unused(l) {
            let _ = e.md_release(md);
        }
    }

    /// Releases a landing (takes the engine lock).
    pub(crate) fn release_landing(&self, l: Landing) {
        if let Some(md) = self.landing_unused(l) {
            let _ = self.ni.md_release(md);
        }
    }

    /// Gives a landing whose operation completed back to where it came from (a small slot,
    /// or the landing pool for the next get of its size); returns the descriptor to release
    /// when the pool does not keep it. Its operation completed, so it cannot be in use.
    fn landing_unused(&self, l: Landing) -> Option<MdHandle> {
        match l {
            Landing::Small(s) => {
                self.core.ops.give_small(s);
                None
            }
            Landing::Dynamic { region, md } => self.landings.give(region, md).map(|(_, md)| md),
            Landing::None => None,
        }
    }

    /// The one wait loop for this rank's own operations: until `done` holds (checked under
    /// the engine lock after draining completions), alternately runs AM handlers
    /// (`client.poll()`, which also reports a call from inside a handler) and makes network
    /// progress, spinning briefly and then blocking in the kernel until a datagram arrives.
    /// `timeout: Some(0)` makes one round and returns. Over a Portals library, which
    /// acknowledges and replies on its own progress, a wait that lasts `RGASNET_PEER_TIMEOUT`
    /// ends in [`ExtError::NoCompletion`] (the native engine reports a dead target itself).
    pub(crate) fn wait_until(
        &self,
        call: &'static str,
        timeout: Option<Duration>,
        done: impl FnMut(&mut dyn EngineView, &Shared) -> Result<bool, ExtError>,
    ) -> Result<(), ExtError> {
        self.wait_rounds(call, timeout, true, done)
    }

    /// [`Shared::wait_until`] for what other ranks must do first (a barrier): as long as it
    /// takes, over a library too.
    pub(crate) fn wait_for_peers(
        &self,
        call: &'static str,
        done: impl FnMut(&mut dyn EngineView, &Shared) -> Result<bool, ExtError>,
    ) -> Result<(), ExtError> {
        self.wait_rounds(call, None, false, done)
    }

    fn wait_rounds(
        &self,
        call: &'static str,
        timeout: Option<Duration>,
        bounded: bool,
        mut done: impl FnMut(&mut dyn EngineView, &Shared) -> Result<bool, ExtError>,
    ) -> Result<(), ExtError> {
        let once = timeout == Some(Duration::ZERO);
        // Over a library: when this wait first found its condition unmet.
        let mut waiting_since: Option<Instant> = None;
        loop {
            self.core
                .client
                .poll()
                .map_err(|e| ExtError::from_am(call, e))?;
            self.core.barrier.advance(&self.core, call)?;
            let mut failed = None;
            let mut seen = None;
            // With node peers, messages also arrive through shared memory, which does not
            // wake a wait on the socket: look at the queues in the check and block in shorter
            // slices.
            let shm = self.core.client.supernode().len() > 1;
            // With every rank on shared memory nothing arrives on the socket that this wait
            // needs (node puts and gets are copies): one look at the engine, then sleep on the
            // shared-memory doorbell, which a node peer's message does ring.
            let shm_only = shm && !self.core.client.has_remote_peers();
            let slice = if once || shm_only {
                Duration::ZERO
            } else if shm {
                SHM_POLL_SLICE
            } else {
                POLL_SLICE
            };
            let Some(iface) = &self.iface else {
                // Over a Portals library, which makes progress on its own: one look at the
                // queues and counters per round, the AM layer polled in between.
                let check = self
                    .ni
                    .with_library_view(|e| self.drain(e).and_then(|()| done(e, self)));
                match check {
                    Some(Ok(true)) => return Ok(()),
                    Some(Err(x)) => return Err(x),
                    Some(Ok(false)) | None if once => return Ok(()),
                    Some(Ok(false)) | None => {
                        let since = *waiting_since.get_or_insert_with(Instant::now);
                        let secs = self.core.client.config().peer_timeout_secs.max(1);
                        if bounded && since.elapsed() >= Duration::from_secs(secs) {
                            return Err(ExtError::NoCompletion { call, secs });
                        }
                        std::thread::yield_now()
                    }
                }
                continue;
            };
            let r = iface
                .wait_for(Some(slice), |e: &mut Engine| {
                    let check = self.drain(e).and_then(|()| done(e, self));
                    match check {
                        Ok(true) => return Ok(Some(true)),
                        Ok(false) => {}
                        Err(x) => {
                            failed = Some(x);
                            return Ok(Some(true));
                        }
                    }
                    if shm && self.core.client.shm_pending() {
                        return Ok(Some(false));
                    }
                    // A request arrived (an AM, perhaps one this wait depends on): return so
                    // that the AM layer runs its handler. Network Shorts are immediate
                    // messages: any waiting is such a request (and while too many wait, the
                    // interface reads no more datagrams, this wait's answer among them).
                    if e.immediates_waiting() > 0 {
                        return Ok(Some(false));
                    }
                    let requests = e.stats().requests;
                    match seen {
                        None => seen = Some(requests),
                        Some(s) if s != requests => return Ok(Some(false)),
                        Some(_) => {}
                    }
                    Ok(None)
                })
                .map_err(ExtError::portals(call))?;
            if let Some(x) = failed {
                return Err(x);
            }
            if r == Some(true) || once {
                return Ok(());
            }
            if shm_only && r.is_none() {
                self.core.client.wait_shm(SHM_POLL_SLICE);
            }
        }
    }

    /// Maps a cell's failure for `call` on `rank`.
    pub(crate) fn fail_result(
        call: &'static str,
        rank: u32,
        fail: Option<NiFail>,
    ) -> Result<(), ExtError> {
        match fail {
            None | Some(NiFail::Ok) => Ok(()),
            Some(fail) => Err(ExtError::Remote { call, rank, fail }),
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Pools of interchangeable resources: a panic elsewhere cannot leave them inconsistent.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Returns `len` bytes to a window of [`Shared::acquire_window`].
fn release_window(window: &AtomicU64, len: u64) {
    // Relaxed: a count of bytes, synchronised by nothing but itself. Never below zero: every
    // release matches an acquire of the same chunk.
    let _ = window.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
        Some(b.saturating_sub(len))
    });
}
