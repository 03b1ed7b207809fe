//! The client: joining a job, attaching the segment, and the state every other module works
//! on.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use rgasnet_launcher::Bootstrap;
use rgasnet_portals::engine::{EqHandle, LeSpec, MdHandle, MdSpec, MeHandle, MeSpec};
use rgasnet_portals::pool::RegionPool;
use rgasnet_portals::AnyNi;
use rgasnet_portals::{
    Addressing, ListKind, Matching, MdOptions, MeOptions, NiKind, PhysId, ProcessId, PtOptions,
    Region, UID_ANY,
};

use crate::config::Config;
use crate::error::{AttachError, InitError};
use crate::handlers::{Handler, HandlerTable};
use crate::matchbits::MatchBits;
use crate::net;
use crate::recv::RecvState;
use crate::send::SendState;

/// Portal index of AM headers on the matching NI.
pub const AM_PT: u32 = 7;
/// Portal index of Long AM data on the matching NI.
pub const LONG_DATA_PT: u32 = 8;
/// Portal index of the segment on the non-matching NI (extended API put/get).
pub const RMA_PT: u32 = 9;

/// Largest Medium payload. A maximal Medium with 16 arguments fits one UDP datagram, so it
/// costs one datagram each way.
pub const MAX_MEDIUM: usize = 65_000;
/// Largest Long payload of a request or reply.
pub const MAX_LONG: usize = 16 << 20;
/// Largest AM body: 16 arguments, a Long offset and a maximal Medium payload.
pub(crate) const MAX_BODY: usize = 16 * 4 + 8 + MAX_MEDIUM;

/// The AM limits of this client (`gex_AM_Max*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most 32-bit arguments of any AM.
    pub max_args: usize,
    /// Largest Medium payload (request or reply).
    pub max_medium: usize,
    /// Largest Long request payload.
    pub max_long_request: usize,
    /// Largest Long reply payload.
    pub max_long_reply: usize,
}

/// What attach set up.
pub(crate) struct Attached {
    pub(crate) segment: Region,
    pub(crate) segment_sizes: Vec<u64>,
    pub(crate) handlers: HandlerTable,
    pub(crate) am_eq: EqHandle,
    pub(crate) send: Mutex<SendState>,
    pub(crate) recv: Mutex<RecvState>,
    /// The non-matching NI's list entry over the segment (held for the client's lifetime;
    /// `None` while a segment that comes later is not bound).
    pub(crate) _rma_le: Option<MeHandle>,
    /// The segment [`Client::bind_segment`] served, for an attach with [`SegmentSpec::Later`].
    pub(crate) bound: OnceLock<BoundSegment>,
    /// Each class of send slots, smallest first, and its MD (the regions never change, so
    /// they live outside the lock).
    pub(crate) send_slots: [(Region, MdHandle); crate::send::SLOT_CLASS_COUNT],
    pub(crate) send_eq: EqHandle,
    /// The shared-memory path, when the supernode has other members.
    pub(crate) shm: Option<crate::shm::Shm>,
    /// The interface's event count when a poll last emptied this client's event queues: an
    /// idle poll that finds the count unchanged skips looking at them (see `poll_internal`).
    pub(crate) drained_events: AtomicU64,
    /// Refused AMs waiting in the send state's resend queue. An idle poll must still take
    /// the send path while any wait, or their resends (due after a backoff, with nothing
    /// arriving meanwhile) would never leave: the flood test hung on exactly that.
    pub(crate) resends_queued: AtomicUsize,
    /// Whether the last drain left the send events for the next one (see `drain_network`).
    pub(crate) send_events_deferred: AtomicBool,
    /// Staging regions of Long payloads (bound to the send event queue), kept for the next
    /// Long of their size: a fresh region per Long faulted its pages in (or, on the heap, was
    /// copied word by word) and bound a descriptor every time. Its lock is a leaf, so a
    /// descriptor is bound without the send state's lock held.
    pub(crate) staging: RegionPool<MdHandle>,
}

/// Shared state behind a [`Client`].
pub(crate) struct Inner {
    pub(crate) boot: Bootstrap,
    pub(crate) config: Config,
    pub(crate) rank: u32,
    pub(crate) size: u32,
    pub(crate) am_ni: AnyNi,
    pub(crate) rma_ni: AnyNi,
    pub(crate) peers: Vec<PhysId>,
    /// The ranks sharing memory with this one (this rank included; only itself without PSHM).
    pub(crate) supernode: Vec<u32>,
    /// Whether any rank, this one included, is reached over the network (outside a shared
    /// supernode). When none is, `poll` never touches the network layer.
    pub(crate) net_peers: bool,
    /// How this rank's waits poll (its host crowded or not).
    pub(crate) polling: crate::config::Polling,
    pub(crate) attached: OnceLock<Attached>,
    pub(crate) stats: crate::stats::Counters,
    /// Operations the send path keeps unacknowledged at once: `RGASNET_PORTALS_MAX_INFLIGHT`
    /// over a Portals library, unbounded (`usize::MAX`) on the native engine.
    pub(crate) inflight_cap: usize,
}

/// A process's membership in an rgasnet job. Cheap to clone; `Send + Sync`, so any number of
/// threads may send, poll and wait at once.
#[derive(Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("rank", &self.inner.rank)
            .field("size", &self.inner.size)
            .finish()
    }
}

impl Client {
    /// Joins the job this process was started in (by `rgasnetrun`, or by `mpirun` in a build
    /// with the `mpi` feature): reads the configuration, bootstraps, brings up the network
    /// interface and learns every rank's address.
    pub fn init() -> Result<Client, InitError> {
        Client::init_with_config(Config::from_env()?)
    }

    /// [`init`](Self::init) with a configuration the caller read (and perhaps adjusted, as the
    /// C ABI does to keep shared memory to the runtime above it) instead of the environment.
    pub fn init_with_config(config: Config) -> Result<Client, InitError> {
        let boot = Bootstrap::from_env()?;
        if config.verbose_env && boot.rank() == 0 {
            eprint!("{}", config.describe());
        }
        let logical = |matching| NiKind {
            matching,
            addressing: Addressing::Logical,
        };
        let (am_ni, rma_ni) = net::open_nis(
            &config,
            &boot,
            logical(Matching::Matching),
            logical(Matching::NoMatching),
        )?;
        let (peers, hosts) = exchange_addresses(&boot, am_ni.get_phys_id()?)?;
        net::check_reachable(boot.rank(), &peers, &hosts)?;
        am_ni.set_map(&peers)?;
        rma_ni.set_map(&peers)?;
        net::connect_in_turn(&boot, [&am_ni, &rma_ni])?;
        let supernode = supernode_of(&config, &boot, &hosts);
        let polling = net::wait_polling(&config, boot.rank(), &hosts);
        am_ni.set_polling(polling.spin, polling.budget);
        // Shared memory covers a rank (itself included) only in a supernode of several.
        let net_peers = supernode.len() <= 1 || supernode.len() < boot.size() as usize;
        if net_peers {
            // Acknowledgements to remote peers also go out while the application is away.
            // Without remote peers nothing needs it, and its wake-ups would only take the
            // core of a rank spinning on shared memory.
            am_ni.start_background_progress(
                rgasnet_portals::interface::DEFAULT_BACKGROUND_PROGRESS,
            )?;
        }
        let inflight_cap = if am_ni.native().is_some() {
            usize::MAX
        } else {
            config.portals_max_inflight
        };
        let client = Client {
            inner: Arc::new(Inner {
                rank: boot.rank(),
                size: boot.size(),
                boot,
                config,
                am_ni,
                rma_ni,
                peers,
                net_peers,
                polling,
                supernode,
                attached: OnceLock::new(),
                stats: Default::default(),
                inflight_cap,
            }),
        };
        crate::finish::quiesce_at_main_exit(&client.inner);
        Ok(client)
    }

    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.inner.rank
    }

    /// Number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.inner.size
    }

    /// The ranks that share this rank's host.
    pub fn host_ranks(&self) -> &[u32] {
        self.inner.boot.host_ranks()
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The AM limits.
    pub fn limits(&self) -> Limits {
        Limits {
            max_args: crate::matchbits::MAX_ARGS,
            max_medium: MAX_MEDIUM,
            max_long_request: MAX_LONG,
            max_long_reply: MAX_LONG,
        }
    }

    /// The physical addresses of every rank, by rank.
    pub fn peer_addresses(&self) -> &[PhysId] {
        &self.inner.peers
    }

    /// The matching NI (AM traffic) — for layers built on the client.
    pub fn am_ni(&self) -> &AnyNi {
        &self.inner.am_ni
    }

    /// The non-matching NI whose list entry covers the segment (extended API).
    pub fn rma_ni(&self) -> &AnyNi {
        &self.inner.rma_ni
    }

    /// The bootstrap channel (for layers built on the client).
    pub fn bootstrap(&self) -> &Bootstrap {
        &self.inner.boot
    }

    /// Collective: allocates this rank's segment of `segment_size` bytes, registers the
    /// handlers, sets up the AM receive resources, exchanges segment sizes and ends in a
    /// barrier. Returns the handler index of each handler, in the order given.
    pub fn attach(
        &self,
        segment_size: u64,
        handlers: Vec<Handler>,
    ) -> Result<Vec<u8>, AttachError> {
        self.attach_with_internal(segment_size, Vec::new(), handlers)
    }

    /// [`attach`](Self::attach) for layers built on the client (the extended API): `internal`
    /// handlers take fixed indices 0–127, reserved for rgasnet.
    pub fn attach_with_internal(
        &self,
        segment_size: u64,
        internal: Vec<Handler>,
        handlers: Vec<Handler>,
    ) -> Result<Vec<u8>, AttachError> {
        self.attach_spec(AttachSpec {
            segment: SegmentSpec::Allocate(segment_size),
            internal,
            handlers,
            open: None,
        })
    }

    /// The general attach: [`attach_with_internal`](Self::attach_with_internal), plus a
    /// segment that may come later ([`SegmentSpec::Later`], then
    /// [`bind_segment`](Self::bind_segment)) and an open handler for every index nobody
    /// registered. Collective.
    pub fn attach_spec(&self, spec: AttachSpec) -> Result<Vec<u8>, AttachError> {
        let inner = &*self.inner;
        if inner.attached.get().is_some() {
            return Err(AttachError::AlreadyAttached);
        }
        let segment_size = match spec.segment {
            SegmentSpec::Allocate(size) => Some(size),
            SegmentSpec::Later => None,
        };
        let limit = inner.config.max_segsize;
        if let Some(size) = segment_size {
            if size > limit || usize::try_from(size).is_err() {
                return Err(AttachError::SegmentTooLarge {
                    requested: size,
                    limit,
                });
            }
        }
        let mut table = HandlerTable::new();
        crate::internal::register(&mut table);
        table.register_reserved(spec.internal)?;
        let indices = table.register_client(spec.handlers)?;
        if let Some(open) = spec.open {
            table.set_open(open);
        }

        let cfg = &inner.config;
        let page = 4096u64;
        // A segment that comes later is served by `bind_segment`; until then the AM layer
        // has an empty one, and Long AMs of the registered handlers cannot land anywhere.
        let seg_len = segment_size.map_or(0, |size| size.div_ceil(page) * page);
        let (segment, shm) = match segment_size {
            Some(_) => crate::shm::attach(inner, &inner.supernode, seg_len as usize)?,
            None => (Region::new(0), None),
        };

        let am_ni = &inner.am_ni;
        // One EQ for everything that arrives (AM headers, Long data, unlinks, flow control),
        // one for the acknowledgements of what this rank sends.
        let am_eq = am_ni.eq_alloc(cfg.am_event_queue_length)?;
        // Every acknowledgement of what may be in flight must fit.
        let send_eq = am_ni.eq_alloc(crate::send::send_eq_len(
            cfg.am_event_queue_length,
            inner.inflight_cap,
        ))?;
        // AMs are sent with `AckReq::Confirmed`: the target acknowledges only a refusal, and
        // the sender's transport confirms a success.
        let am_pt_options = PtOptions::FLOWCTRL;
        am_ni.pt_alloc(am_pt_options, Some(am_eq), AM_PT)?;
        am_ni.pt_alloc(am_pt_options, Some(am_eq), LONG_DATA_PT)?;

        let mut recv = RecvState::new(cfg.am_num_entries);
        for block in 0..cfg.am_num_entries {
            let region = buffer_region(cfg.am_buffer_size);
            let me = am_ni.me_append(
                AM_PT,
                am_block_spec(&region),
                ListKind::Priority,
                block as u64,
            )?;
            recv.add_block(region, me);
        }
        // Long data lands straight in the segment, at the offset the initiator names.
        am_ni.me_append(
            LONG_DATA_PT,
            MeSpec {
                region: segment.clone(),
                offset: 0,
                length: seg_len,
                ct: None,
                uid: UID_ANY,
                options: MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE,
                match_id: ProcessId::ANY_RANK,
                // LONG_DATA: bit 63 clear, the length in the low bits.
                match_bits: 0,
                ignore_bits: crate::matchbits::MAX_PAYLOAD_LEN,
                min_free: 0,
            },
            ListKind::Priority,
            u64::MAX,
        )?;

        // The segment on the non-matching NI: the target sees nothing unless something fails.
        let rma_ni = &inner.rma_ni;
        let rma_eq = rma_ni.eq_alloc(64)?;
        rma_ni.pt_alloc(PtOptions::empty(), Some(rma_eq), RMA_PT)?;
        let rma_le = match segment_size {
            Some(_) => Some(rma_segment_entry(rma_ni, &segment)?),
            None => None,
        };

        let send = SendState::new();
        // IN_PLACE: a slot stays reserved until its put's ACK (see `send`), so a large AM
        // leaves from the slot itself instead of from a copy in the engine's message.
        let bind = |region: &Region| {
            am_ni.md_bind(MdSpec {
                region: region.clone(),
                offset: 0,
                length: region.len() as u64,
                options: MdOptions::EVENT_SEND_DISABLE | MdOptions::IN_PLACE,
                eq: Some(send_eq),
                ct: None,
            })
        };
        let mut send_slots = Vec::with_capacity(crate::send::SLOT_CLASS_COUNT);
        for region in SendState::slot_regions() {
            let md = bind(&region)?;
            send_slots.push((region, md));
        }
        let send_slots = send_slots
            .try_into()
            .map_err(|_| AttachError::Internal("a send slot class without its MD"))?;

        let segment_sizes = match segment_size {
            Some(_) => self.exchange_segment_sizes(seg_len)?,
            None => vec![0; inner.size as usize],
        };
        let attached = Attached {
            segment,
            segment_sizes,
            handlers: table,
            am_eq,
            send: Mutex::new(send),
            recv: Mutex::new(recv),
            _rma_le: rma_le,
            bound: OnceLock::new(),
            send_slots,
            send_eq,
            shm,
            // No event counted yet, none to take.
            drained_events: AtomicU64::new(0),
            resends_queued: AtomicUsize::new(0),
            send_events_deferred: AtomicBool::new(false),
            staging: RegionPool::new(),
        };
        if inner.attached.set(attached).is_err() {
            return Err(AttachError::AlreadyAttached);
        }
        inner.boot.barrier()?;
        Ok(indices)
    }

    /// The ranks sharing memory with this one, ascending, this rank included (just this rank
    /// when PSHM is off or it has no node peer).
    pub fn supernode(&self) -> &[u32] {
        &self.inner.supernode
    }

    /// `rank`'s segment mapped into this process, for direct loads, stores and copies: this
    /// rank's own segment, or a supernode peer's shared segment; `None` for other ranks (and
    /// before attach).
    pub fn peer_segment(&self, rank: u32) -> Option<&Region> {
        let a = self.inner.attached.get()?;
        if rank == self.inner.rank {
            return Some(a.bound.get().map_or(&a.segment, |b| &b.segment));
        }
        a.shm.as_ref()?.node.segment(rank)
    }

    /// Whether shared memory has work for `poll()`: an active message waiting in this rank's
    /// queues, or a deferred reply to send (cheap: a few loads, no lock). Layers that block on
    /// the network socket check it so that node-local messages wake them too.
    pub fn shm_pending(&self) -> bool {
        self.inner
            .attached
            .get()
            .and_then(|a| a.shm.as_ref())
            .is_some_and(|shm| shm.pending())
    }

    /// Whether some rank of the job is reached over the network (false when every rank shares
    /// memory with this one).
    pub fn has_remote_peers(&self) -> bool {
        self.inner.net_peers
    }

    /// Whether rank `rank` has ended its program: its end said so (over the network, or in
    /// its shared-memory header for a node peer). Lets a wait for that rank fail instead of
    /// waiting forever. Poll once more after it turns `true`: what the rank sent before it
    /// left may still wait to be handled. Cheap while no rank has left: one load over the
    /// network, one load of the rank's shared-memory header for a node peer.
    pub fn has_left(&self, rank: u32) -> bool {
        if let Some(left) = self.inner.node_peer_left(rank) {
            return left;
        }
        let iface = &self.inner.am_ni;
        // The count also covers peers that only said their program ended; `peer_left` waits
        // for the `Leaving`, which comes after everything the rank sent has arrived.
        iface.departures() > 0
            && self
                .inner
                .peers
                .get(rank as usize)
                .is_some_and(|&p| iface.peer_left(p))
    }

    /// Whether rank `rank` has said that its program ended, perhaps before everything it sent
    /// arrived (unlike [`Client::has_left`]): a send to it from now on would never be
    /// handled, and AMs to it fail with [`crate::AmError::PeerLeft`]. Over the network a rank says
    /// so as its end begins; a node peer, once it has taken in what was sent to it (the same
    /// moment as [`Client::has_left`]). Cheap while no rank has ended (see `has_left`).
    pub fn has_ended(&self, rank: u32) -> bool {
        match self.inner.node_peer_left(rank) {
            Some(left) => left,
            None => self.inner.ended_on_network(rank),
        }
    }

    /// Waits at most `timeout` for shared-memory work for `poll()` (see
    /// [`Client::shm_pending`]): spins briefly, then sleeps on the doorbell futex that node
    /// peers ring when they enqueue for a sleeping rank. Returns whether there is work; `false`
    /// at once without node peers. For a waiter that has nothing to expect from the network.
    pub fn wait_shm(&self, timeout: Duration) -> bool {
        let Some(shm) = self.inner.attached.get().and_then(|a| a.shm.as_ref()) else {
            return false;
        };
        if shm.pending() {
            return true;
        }
        match shm.rx.try_lock() {
            Some(rx) => rx.wait(timeout) || shm.pending(),
            // Another thread is draining the queues: let the caller look again.
            None => {
                std::thread::yield_now();
                true
            }
        }
    }

    /// This rank's segment (`None` before attach).
    pub fn segment(&self) -> Option<&Region> {
        let a = self.inner.attached.get()?;
        Some(a.bound.get().map_or(&a.segment, |b| &b.segment))
    }

    /// The size of `rank`'s segment (`None` before attach or for a rank outside the job).
    pub fn segment_size(&self, rank: u32) -> Option<u64> {
        let a = self.inner.attached.get()?;
        let sizes = a.bound.get().map_or(&a.segment_sizes, |b| &b.sizes);
        sizes.get(rank as usize).copied()
    }

    /// Ends the whole job with `code`, from any rank, without the other ranks' cooperation.
    pub fn exit(&self, code: i32) -> ! {
        crate::finish::ending_job();
        self.inner.boot.abort(code)
    }

    /// Counters of what the AM layer did (resends after flow control, recoveries, ...).
    pub fn stats(&self) -> crate::stats::AmStats {
        self.inner.stats.snapshot()
    }
}

/// Where the segment of an attach comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SegmentSpec {
    /// rgasnet allocates a segment of this many bytes (rounded up to pages), shared with the
    /// supernode when it has other members.
    Allocate(u64),
    /// The segment is memory the caller owns, served later through
    /// [`Client::bind_segment`]: a runtime that allocates its segment itself (GASNet-EX
    /// does, after its active messages already run). Until then put/get find no segment.
    Later,
}

/// Called for an active message whose handler index nobody registered: the token, the
/// message's category, its arguments and its payload (as a registered handler gets them).
pub type OpenHandlerFn =
    std::sync::Arc<dyn Fn(&crate::Token<'_>, crate::Category, &[u32], &[u8]) + Send + Sync>;

/// Everything [`Client::attach_spec`] sets up.
pub struct AttachSpec {
    /// The segment.
    pub segment: SegmentSpec,
    /// rgasnet's own handlers (fixed indices 0–127), for layers built on the client.
    pub internal: Vec<Handler>,
    /// The client's handlers (indices 128–255).
    pub handlers: Vec<Handler>,
    /// Runs every message to an index without a handler, of any category and argument
    /// count, instead of refusing it (a foreign runtime with its own handler table: the C
    /// ABI). Without it such a send is [`crate::AmError::UnregisteredHandler`].
    pub open: Option<OpenHandlerFn>,
}

/// A segment served after attach ([`Client::bind_segment`]).
pub(crate) struct BoundSegment {
    pub(crate) segment: Region,
    pub(crate) sizes: Vec<u64>,
    /// The list entry that serves it to put/get (held for the client's lifetime).
    pub(crate) _le: MeHandle,
}

impl Client {
    /// Collective, once, after an attach with [`SegmentSpec::Later`]: serves `segment` (memory
    /// the caller owns, wrapped in a [`Region`]) to other ranks' put and get, and exchanges
    /// every rank's segment size. A rank with nothing to serve passes an empty region.
    pub fn bind_segment(&self, segment: Region) -> Result<(), AttachError> {
        let inner = &*self.inner;
        let Some(att) = inner.attached.get() else {
            return Err(AttachError::NotAttached);
        };
        if att._rma_le.is_some() || att.bound.get().is_some() {
            return Err(AttachError::SegmentAlreadyBound);
        }
        let le = rma_segment_entry(&inner.rma_ni, &segment)?;
        let sizes = self.exchange_segment_sizes(segment.len() as u64)?;
        let bound = BoundSegment {
            segment,
            sizes,
            _le: le,
        };
        if att.bound.set(bound).is_err() {
            return Err(AttachError::SegmentAlreadyBound);
        }
        inner.boot.barrier()?;
        Ok(())
    }

    /// Collective: every rank's segment length, by rank.
    fn exchange_segment_sizes(&self, len: u64) -> Result<Vec<u64>, AttachError> {
        let sizes = self.inner.boot.allgather(&len.to_le_bytes())?;
        let mut segment_sizes = Vec::with_capacity(sizes.len());
        for (rank, b) in sizes.iter().enumerate() {
            let arr: [u8; 8] = b
                .as_slice()
                .try_into()
                .map_err(|_| AttachError::BadPeerSegment { rank: rank as u32 })?;
            segment_sizes.push(u64::from_le_bytes(arr));
        }
        Ok(segment_sizes)
    }
}

/// The list entry that serves `segment` to put and get on the non-matching NI: the target
/// sees nothing unless something fails.
fn rma_segment_entry(
    rma_ni: &AnyNi,
    segment: &Region,
) -> Result<MeHandle, rgasnet_portals::PtlError> {
    rma_ni.le_append(
        RMA_PT,
        LeSpec {
            region: segment.clone(),
            offset: 0,
            length: segment.len() as u64,
            ct: None,
            uid: UID_ANY,
            // IN_PLACE_REPLY: a large get is answered from the segment itself, not from a
            // copy in the reply message.
            options: MeOptions::OP_PUT
                | MeOptions::OP_GET
                | MeOptions::EVENT_LINK_DISABLE
                | MeOptions::EVENT_SUCCESS_DISABLE
                | MeOptions::IN_PLACE_REPLY,
        },
        ListKind::Priority,
        0,
    )
}

/// The supernode of this rank: ranks on the same host (hostname and boot id, exchanged through
/// bootstrap), grouped under `GASNET_SUPERNODE_MAXSIZE`; just this rank when PSHM is off.
/// Bytes of a host id in the address exchange (longer ids are cut: they then match only
/// ids cut alike).
const HOST_ID_BYTES: usize = 256;

/// Every rank's network address and host id (`name/boot-id`), by rank: one allgather.
fn exchange_addresses(
    boot: &Bootstrap,
    me: PhysId,
) -> Result<(Vec<PhysId>, Vec<String>), InitError> {
    let id = rgasnet_pshm::host_id()?;
    let mut blob = [0u8; 8 + HOST_ID_BYTES];
    blob[..4].copy_from_slice(&me.nid.to_le_bytes());
    blob[4..8].copy_from_slice(&me.pid.to_le_bytes());
    let n = id.len().min(HOST_ID_BYTES);
    blob[8..8 + n].copy_from_slice(&id.as_bytes()[..n]);
    let all = boot.allgather(&blob)?;
    let mut peers = Vec::with_capacity(all.len());
    let mut hosts = Vec::with_capacity(all.len());
    for (rank, b) in all.iter().enumerate() {
        let (Some(addr), Some(host)) = (b.first_chunk::<8>(), b.get(8..)) else {
            return Err(InitError::BadPeerAddress {
                rank: rank as u32,
                len: b.len(),
            });
        };
        let nid = u32::from_le_bytes([addr[0], addr[1], addr[2], addr[3]]);
        let pid = u32::from_le_bytes([addr[4], addr[5], addr[6], addr[7]]);
        peers.push(PhysId { nid, pid });
        // Ids are compared as text; a malformed (non-UTF-8) one just matches nothing else.
        let end = host.iter().position(|&c| c == 0).unwrap_or(host.len());
        hosts.push(String::from_utf8_lossy(&host[..end]).into_owned());
    }
    Ok((peers, hosts))
}

/// This rank's supernode: the ranks of its host (by host id), split at
/// `GASNET_SUPERNODE_MAXSIZE`; itself alone when PSHM is off.
fn supernode_of(config: &Config, boot: &Bootstrap, hosts: &[String]) -> Vec<u32> {
    if !config.pshm {
        return vec![boot.rank()];
    }
    let groups = rgasnet_pshm::Supernodes::group(hosts, config.supernode_maxsize as usize);
    groups
        .members_of(boot.rank())
        .map(<[u32]>::to_vec)
        .unwrap_or_else(|| vec![boot.rank()])
}

/// The match entry of an AM receive block: headers only (bit 63), packed locally, unlinked when
/// less than one maximal AM fits.
pub(crate) fn am_block_spec(region: &Region) -> MeSpec {
    MeSpec {
        region: region.clone(),
        offset: 0,
        length: region.len() as u64,
        ct: None,
        uid: UID_ANY,
        options: MeOptions::OP_PUT
            | MeOptions::MANAGE_LOCAL
            | MeOptions::MAY_ALIGN
            | MeOptions::EVENT_LINK_DISABLE,
        match_id: ProcessId::ANY_RANK,
        match_bits: MatchBits::AM_RECEIVE_BITS,
        ignore_bits: MatchBits::AM_RECEIVE_IGNORE,
        min_free: MAX_BODY as u64,
    }
}

impl Inner {
    /// Whether this client runs over a Portals library (`RGASNET_PORTALS=ref`), which bounds
    /// what is in flight ([`Inner::inflight_cap`]) and progresses on its own.
    #[inline]
    pub(crate) fn over_library(&self) -> bool {
        self.inflight_cap != usize::MAX
    }

    pub(crate) fn attached(&self, call: &'static str) -> Result<&Attached, crate::error::AmError> {
        // A match, not `ok_or`: an eagerly built error is dropped (a call) on every success.
        match self.attached.get() {
            Some(a) => Ok(a),
            None => Err(crate::error::AmError::NotAttached { call }),
        }
    }

    /// Writes a Long AM's payload into this rank's segment at `offset`, before its handler
    /// runs. A payload that does not fit there ends the job: `source` broke the protocol, and
    /// the handler must not run on memory that never received the data.
    pub(crate) fn land_long(&self, att: &Attached, source: u32, offset: u64, payload: &[u8]) {
        if att.segment.write(offset as usize, payload).is_err() {
            self.fatal(&format!(
                "rank {source} sent a Long AM of {} bytes at offset {offset}, outside this rank's segment",
                payload.len()
            ));
        }
    }

    /// Ends the job after a condition the protocol cannot recover from, naming it.
    pub(crate) fn fatal(&self, msg: &str) -> ! {
        eprintln!("rgasnet: fatal error on rank {}: {msg}", self.rank);
        crate::finish::ending_job();
        self.boot.abort(1)
    }
}

impl Client {
    /// Active messages sent by this rank whose acknowledgement has not arrived yet.
    pub fn in_flight(&self) -> usize {
        self.inner
            .attached
            .get()
            .map_or(0, |a| crate::send::lock(&a.send).in_flight())
    }
}

/// A region of `len` zeroed bytes for communication buffers (AM send slots and receive
/// blocks, bounce and landing buffers of the extended API): an anonymous mapping whose copies
/// of at least [`rgasnet_portals::memory::BULK_COPY_MIN`] bytes are `memcpy`
/// ([`rgasnet_pshm::fast_region`]) instead of the word loop of a heap region, so a large
/// message costs memory bandwidth, not instructions. A heap region if the mapping fails (same
/// behaviour, slower large copies).
pub fn buffer_region(len: usize) -> Region {
    rgasnet_pshm::fast_region(len).unwrap_or_else(|e| {
        tracing::debug!(error = %e, "communication buffers fall back to the heap");
        Region::new(len)
    })
}
