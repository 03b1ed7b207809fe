//! Setting up a supernode (create, cross-map, unlink) and the per-rank API the conduit uses:
//! peers' segments as [`Region`]s, sending AMs to node peers, receiving from this rank's own
//! queues, waiting, and the node barrier.
#![deny(unsafe_code)]

use std::error::Error as StdError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rgasnet_portals::Region;

use crate::dissemination::Dissemination;
use crate::error::{RecvError, SendError, SetupError};
use crate::layout::{self, Layout, MIN_QUEUE_CELLS};
use crate::message::AmMessage;
use crate::queue::{Received, RingPlace};
use crate::segment::{self, as_u32, MappedSegment, Mapping, SegmentMemory};
use crate::wait::{self, WaitPolicy};

#[path = "node_barrier.rs"]
mod node_barrier;
pub use node_barrier::{BarrierKind, BarrierWaiting};

/// What [`Node::attach`] needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    /// The job's key (part of every object name, so jobs never collide).
    pub job_key: u64,
    /// This process's rank.
    pub rank: u32,
    /// The ranks of this supernode in ascending order, including `rank`.
    pub members: Vec<u32>,
    /// Bytes of this rank's segment (peers may have other sizes; each object records its own).
    pub segment_len: usize,
    /// Cells of 64 bytes per queue, a power of two of at least [`MIN_QUEUE_CELLS`].
    pub queue_cells: usize,
    /// Spinning before sleeping in [`Receiver::wait`] and [`Node::barrier_wait`].
    pub wait: WaitPolicy,
    /// Which node barrier the supernode uses; only the leader's (lowest rank's) choice
    /// counts, so that every member runs the same one.
    pub barrier: BarrierKind,
    /// The dissemination barrier's radix, `2..=`[`crate::dissemination::MAX_RADIX`] (members
    /// each member writes to per round, plus one); the leader's counts, as for `barrier`.
    pub barrier_radix: u32,
}

impl NodeConfig {
    /// A configuration with the smallest queues and the default wait policy.
    pub fn new(job_key: u64, rank: u32, members: Vec<u32>, segment_len: usize) -> NodeConfig {
        NodeConfig {
            job_key,
            rank,
            members,
            segment_len,
            queue_cells: MIN_QUEUE_CELLS,
            wait: WaitPolicy::default(),
            barrier: BarrierKind::Auto,
            barrier_radix: crate::dissemination::DEFAULT_RADIX,
        }
    }

    /// Bytes of shared memory this rank's object takes.
    pub fn object_len(&self) -> Result<usize, SetupError> {
        Ok(Layout::new(self.queue_cells, self.segment_len)?.object_len)
    }

    fn check(&self) -> Result<(), SetupError> {
        if !self.members.windows(2).all(|w| w[0] < w[1]) {
            return Err(SetupError::Config(format!(
                "supernode members {:?} are not strictly ascending",
                self.members
            )));
        }
        if self.members.binary_search(&self.rank).is_err() {
            return Err(SetupError::Config(format!(
                "rank {} is not among the supernode members {:?}",
                self.rank, self.members
            )));
        }
        let max = crate::dissemination::MAX_RADIX;
        if !(2..=max).contains(&self.barrier_radix) {
            return Err(SetupError::Config(format!(
                "the dissemination barrier's radix must be 2 to {max}, got {}",
                self.barrier_radix
            )));
        }
        Ok(())
    }
}

/// The two queues of a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Queue {
    Request,
    Reply,
}

/// Locates queue `which` of an object laid out as `layout` (checked against the mapping's size
/// when it was opened, so this fails only on a bug).
fn place(mapping: &Arc<Mapping>, layout: &Layout, which: Queue) -> Result<RingPlace, SetupError> {
    let (tail, head, cells, name) = match which {
        Queue::Request => (
            layout::W_REQ_TAIL,
            layout::W_REQ_HEAD,
            layout.req_cells,
            "request",
        ),
        Queue::Reply => (
            layout::W_REP_TAIL,
            layout::W_REP_HEAD,
            layout.rep_cells,
            "reply",
        ),
    };
    RingPlace::locate(
        Arc::clone(mapping),
        tail,
        head,
        cells,
        layout.ring_words(),
        name,
    )
    .ok_or_else(|| SetupError::Config(format!("the {name} queue lies outside its object")))
}

/// A member of the supernode (this rank included) as seen from this process.
struct Peer {
    rank: u32,
    mapping: Arc<Mapping>,
    layout: Layout,
    requests: RingPlace,
    replies: RingPlace,
    /// This process's caches of the peer's queue heads (see `queue`: saves a cache miss per
    /// message while the queue has room).
    request_head: AtomicU64,
    reply_head: AtomicU64,
    segment: Region,
    /// The same bytes as `segment`, for one-word copies without dynamic dispatch.
    direct: MappedSegment,
}

impl Peer {
    fn new(
        rank: u32,
        mapping: Arc<Mapping>,
        layout: Layout,
        name: &str,
    ) -> Result<Peer, SetupError> {
        let direct = MappedSegment::new(
            Arc::clone(&mapping),
            layout.segment,
            layout.segment_len,
            layout::W_LEFT,
        );
        let memory = SegmentMemory {
            mapping: Arc::clone(&mapping),
            first: layout.segment,
            words: layout.segment_words(),
        };
        let segment =
            Region::with_memory(Box::new(memory), layout.segment_len).ok_or_else(|| {
                SetupError::BadObject {
                    object: name.to_owned(),
                    reason: "segment does not fit the object".into(),
                }
            })?;
        Ok(Peer {
            rank,
            requests: place(&mapping, &layout, Queue::Request)?,
            replies: place(&mapping, &layout, Queue::Reply)?,
            mapping,
            layout,
            request_head: AtomicU64::new(0),
            reply_head: AtomicU64::new(0),
            segment,
            direct,
        })
    }

    #[inline(always)]
    fn send(&self, from: u32, which: Queue, msg: &AmMessage<'_>) -> Result<(), SendError> {
        let (place, cache) = match which {
            Queue::Request => (&self.requests, &self.request_head),
            Queue::Reply => (&self.replies, &self.reply_head),
        };
        if place.ring().try_enqueue(cache, from, self.rank, msg)? {
            wait::wake(as_u32(&self.mapping.words()[layout::W_DOORBELL]));
        }
        Ok(())
    }
}

/// This rank's view of its supernode: every member's segment and queues. Shareable between
/// threads; receiving is done through the separate [`Receiver`].
pub struct Node {
    rank: u32,
    members: Vec<u32>,
    /// Parallel to `members`.
    peers: Vec<Peer>,
    /// Index of this rank in `members`/`peers`.
    own: usize,
    /// `peers` index of every rank up to the largest member, `NOT_A_MEMBER` for the others:
    /// routing asks this for every message, and a binary search was a tenth of a send.
    index_of: Vec<u32>,
    wait: WaitPolicy,
    /// The node barrier, when the supernode's leader chose dissemination (see
    /// [`crate::dissemination`]); the shared counter otherwise.
    dissemination: Option<Dissemination>,
}

/// [`Node::index_of`] entry of a rank outside the supernode.
const NOT_A_MEMBER: u32 = u32::MAX;

impl std::fmt::Debug for Node {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Node")
            .field("rank", &self.rank)
            .field("members", &self.members)
            .finish()
    }
}

impl Node {
    /// Creates this rank's object, maps every member's, and unlinks this rank's object once
    /// every member has mapped it. `barrier` must be a barrier over exactly the supernode's
    /// members (or a superset, e.g. the whole job); it is called twice.
    ///
    /// Checks the free space of `/dev/shm` before creating anything. If this rank fails,
    /// its object is unlinked before the error is returned; a rank killed during setup may
    /// leave its object behind ([`crate::remove_job_objects`] removes it).
    pub fn attach<F, E>(config: NodeConfig, mut barrier: F) -> Result<(Node, Receiver), SetupError>
    where
        F: FnMut() -> Result<(), E>,
        E: Into<Box<dyn StdError + Send + Sync>>,
    {
        config.check()?;
        let layout = Layout::new(config.queue_cells, config.segment_len)?;
        let name = segment::object_name(config.job_key, config.rank);
        segment::check_space(&name, layout.object_len as u64)?;
        let own = Arc::new(Mapping::create(&name, layout.object_len)?);
        let guard = UnlinkGuard(Some(name.clone()));
        write_header(&own, &config, &layout);
        barrier().map_err(|e| SetupError::Barrier {
            step: "after creating the objects",
            source: e.into(),
        })?;
        let mut peers = Vec::with_capacity(config.members.len());
        for &rank in &config.members {
            if rank == config.rank {
                peers.push(Peer::new(rank, Arc::clone(&own), layout, &name)?);
            } else {
                let peer_name = segment::object_name(config.job_key, rank);
                let mapping = Arc::new(Mapping::open(&peer_name)?);
                let peer_layout = check_header(&mapping, &peer_name, config.job_key, rank)?;
                peers.push(Peer::new(rank, mapping, peer_layout, &peer_name)?);
            }
        }
        for p in &peers {
            prefault_queues(&p.mapping, &p.layout);
        }
        barrier().map_err(|e| SetupError::Barrier {
            step: "after mapping the objects",
            source: e.into(),
        })?;
        guard.unlink()?;
        let receiver = Receiver {
            requests: Inbox::new(&own, &layout, Queue::Request)?,
            replies: Inbox::new(&own, &layout, Queue::Reply)?,
            mapping: own,
            wait: config.wait,
        };
        let own = config
            .members
            .binary_search(&config.rank)
            .map_err(|_| SetupError::Config("rank left the supernode members".into()))?;
        let top = config.members.last().map_or(0, |&r| r as usize + 1);
        let mut index_of = vec![NOT_A_MEMBER; top];
        for (i, &r) in config.members.iter().enumerate() {
            index_of[r as usize] = i as u32;
        }
        // The leader's choice, written before the first bootstrap barrier. Relaxed: the
        // bootstrap barriers order it (as they order the header's other fields).
        let leader_word = |w: usize| {
            peers
                .first()
                .and_then(|p| p.mapping.words().get(w))
                .map(|w| w.load(Ordering::Relaxed))
        };
        // A radix the layout cannot serve leaves every member on the counter alike.
        let radix = leader_word(layout::W_BARRIER_RADIX)
            .and_then(|r| u32::try_from(r).ok())
            .unwrap_or(0);
        let dissemination = match leader_word(layout::W_BARRIER_MODE) {
            Some(layout::BARRIER_DISSEMINATION) => Dissemination::new(
                peers.iter().map(|p| Arc::clone(&p.mapping)).collect(),
                own,
                radix,
            ),
            _ => None,
        };
        let node = Node {
            own,
            index_of,
            rank: config.rank,
            members: config.members,
            peers,
            wait: config.wait,
            dissemination,
        };
        Ok((node, receiver))
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// The supernode's ranks, ascending.
    pub fn members(&self) -> &[u32] {
        &self.members
    }

    #[inline]
    fn peer(&self, rank: u32) -> Option<&Peer> {
        let i = *self.index_of.get(rank as usize)?;
        // `NOT_A_MEMBER` is past the end of `peers`.
        self.peers.get(i as usize)
    }

    /// Marks this rank as having ended its program (its end calls it), so that node peers
    /// waiting for it can fail instead of waiting forever ([`Node::has_left`]).
    pub fn mark_left(&self) {
        if let Some(word) = self
            .peer(self.rank)
            .and_then(|p| p.mapping.words().get(layout::W_LEFT))
        {
            // Release: whatever this rank enqueued before is visible to a peer that sees the
            // mark (its load is `Acquire`).
            word.store(1, Ordering::Release);
        }
    }

    /// Whether node peer `rank` has ended its program ([`Node::mark_left`]); `false` for a
    /// rank outside the supernode.
    pub fn has_left(&self, rank: u32) -> bool {
        self.peer(rank)
            .and_then(|p| p.mapping.words().get(layout::W_LEFT))
            // Acquire: pairs with `mark_left`'s store, so a poll after this sees every message
            // the rank enqueued before it left.
            .is_some_and(|word| word.load(Ordering::Acquire) != 0)
    }

    /// `rank`'s segment, mapped in this process (load/store and copies go straight to the
    /// shared memory); `None` if `rank` is not in the supernode.
    #[inline]
    pub fn segment(&self, rank: u32) -> Option<&Region> {
        self.peer(rank).map(|p| &p.segment)
    }

    /// `rank`'s segment as a [`MappedSegment`] (the same bytes as [`Node::segment`]) for
    /// one-word puts and gets inlined into the caller; `None` if `rank` is not in the
    /// supernode.
    #[inline]
    pub fn mapped_segment(&self, rank: u32) -> Option<&MappedSegment> {
        self.peer(rank).map(|p| &p.direct)
    }

    /// Enqueues a request for `dest` (which may be this rank). For a Long, copy the data into
    /// `dest`'s segment first: the enqueue publishes it. Never blocks: `SendError::Full`
    /// means poll this rank's queues and retry.
    #[inline]
    pub fn try_send_request(&self, dest: u32, msg: &AmMessage<'_>) -> Result<(), SendError> {
        self.peer(dest)
            .ok_or(SendError::NotAPeer { rank: dest })?
            .send(self.rank, Queue::Request, msg)
    }

    /// Enqueues a reply for `dest`; replies have their own queue, so they never wait behind
    /// requests. On `SendError::Full`, drain this rank's reply queue and retry.
    #[inline]
    pub fn try_send_reply(&self, dest: u32, msg: &AmMessage<'_>) -> Result<(), SendError> {
        self.peer(dest)
            .ok_or(SendError::NotAPeer { rank: dest })?
            .send(self.rank, Queue::Reply, msg)
    }

    /// Whether a message seems to wait in this rank's queues, without being their consumer:
    /// two loads per queue (the shared `head` word and the marker of the cell it names), no
    /// lock and no write. A poller checks this before taking the [`Receiver`] so that an idle
    /// poll costs no atomic read-modify-write. It is a hint: another thread consuming at the
    /// same time can make it stale either way, and the consumer re-reads the marker with
    /// `Acquire` before it touches the record.
    #[inline]
    pub fn has_incoming(&self) -> bool {
        let Some(own) = self.peers.get(self.own) else {
            return false;
        };
        [&own.replies, &own.requests].into_iter().any(|place| {
            let r = place.ring();
            // Relaxed: a hint (see above); the consumer's own copy of `head` is the truth.
            r.committed_at(r.head.load(Ordering::Relaxed))
        })
    }
}

/// One of this rank's two queues, as its single consumer.
pub struct Inbox {
    place: RingPlace,
    which: Queue,
    /// Consumer's copy of `head` (only this process writes the shared one).
    head: u64,
    /// Set by [`Receiver::close`]: the end of what producers reserved before the close.
    closed_at: Option<u64>,
}

impl std::fmt::Debug for Inbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbox")
            .field("queue", &self.which)
            .field("head", &self.head)
            .finish()
    }
}

impl Inbox {
    fn new(mapping: &Arc<Mapping>, layout: &Layout, which: Queue) -> Result<Inbox, SetupError> {
        Ok(Inbox {
            place: place(mapping, layout, which)?,
            which,
            head: 0,
            closed_at: None,
        })
    }

    /// Takes the next message, if any. Its cells are released when the returned value is
    /// dropped, so drop it promptly (after running the handler).
    #[inline]
    pub fn try_recv(&mut self) -> Result<Option<Received<'_>>, RecvError> {
        self.place.ring().try_dequeue(&mut self.head)
    }

    /// Whether a message is waiting.
    pub fn has_pending(&self) -> bool {
        self.place.ring().committed_at(self.head)
    }

    /// Closes the queue (once); see [`Receiver::close`].
    fn close(&mut self) {
        if self.closed_at.is_none() {
            self.closed_at = Some(self.place.ring().close());
        }
    }

    /// Whether the queue is closed and everything reserved before was taken.
    fn drained(&self) -> bool {
        self.closed_at.is_some_and(|end| self.head >= end)
    }
}

/// The receiving side of this rank: its request and reply queues.
pub struct Receiver {
    /// Requests from node peers.
    pub requests: Inbox,
    /// Replies from node peers.
    pub replies: Inbox,
    mapping: Arc<Mapping>,
    wait: WaitPolicy,
}

impl std::fmt::Debug for Receiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Receiver")
            .field("requests", &self.requests)
            .field("replies", &self.replies)
            .finish()
    }
}

impl Receiver {
    /// Closes both queues as this rank ends its program: node peers' later sends fail with
    /// [`SendError::Closed`] instead of enqueueing messages no handler would run. What they
    /// enqueued before is still taken in; [`Receiver::drained`] says when it all was.
    pub fn close(&mut self) {
        self.requests.close();
        self.replies.close();
    }

    /// Whether both queues are closed and every message enqueued before was taken (a sender
    /// between its reservation and its commit is waited for).
    pub fn drained(&self) -> bool {
        self.requests.drained() && self.replies.drained()
    }

    /// Whether either queue has a message.
    pub fn has_pending(&self) -> bool {
        self.replies.has_pending() || self.requests.has_pending()
    }

    /// Waits at most `timeout` for a message: polls as the wait policy says (a spin, then
    /// yields), then sleeps on the doorbell futex, which senders ring only when this rank
    /// announced it sleeps.
    /// Returns whether a message is waiting.
    pub fn wait(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if wait::spin_until(self.wait, || self.has_pending()) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let bell = as_u32(&self.mapping.words()[layout::W_DOORBELL]);
            let (req, rep) = (self.requests.place.ring(), self.replies.place.ring());
            wait::sleep(
                bell,
                left,
                // Both bits are set even if the first ring is busy, so `retract` is uniform.
                || req.announce_sleep(self.requests.head) & rep.announce_sleep(self.replies.head),
                || {
                    req.retract_sleep();
                    rep.retract_sleep();
                },
            );
            if self.has_pending() {
                return true;
            }
            // Not idle but nothing committed (a sender is between reservation and commit),
            // a spurious wake-up, or the timeout: spin again until the deadline.
        }
    }
}

/// Maps this process's page-table entries for the header and both rings of an object now,
/// rather than one minor fault per 4 KiB page (64 cells) during the first lap of each ring
/// (a fault costs several round trips), and brings every line of them into this core's
/// caches. Without the second part, each message of a ring's first lap (4,096 cells, so the
/// first thousands of messages of a job) found its cell in neither core's cache and paid a
/// memory access on both sides: measured, the AM Short round trip of a 1,000-iteration
/// `testam` averaged 0.80–0.86 µs instead of 0.39–0.54 µs with the lines warmed (the
/// steady state). The segment is left alone (it may be large, and only what is used should
/// be resident).
fn prefault_queues(mapping: &Mapping, layout: &Layout) {
    let words = mapping.words();
    let end = layout.segment.min(words.len());
    let mut sum = 0u64;
    for (i, w) in words[..end].iter().enumerate().step_by(layout::CELL_WORDS) {
        if i % (layout::PAGE / 8) == 0 {
            // A read-modify-write (a write fault, so the entry is writable) that keeps the
            // value, so it is harmless even if a peer already uses the word. Relaxed: it
            // publishes nothing.
            w.fetch_add(0, Ordering::Relaxed);
        } else {
            // A load brings the line in (shared); Relaxed: the value is not used.
            sum = sum.wrapping_add(w.load(Ordering::Relaxed));
        }
    }
    // Keeps the loads from being optimised away.
    std::hint::black_box(sum);
}

/// Unlinks the object on drop unless `unlink` was called: an error in setup leaves nothing.
struct UnlinkGuard(Option<String>);

impl UnlinkGuard {
    fn unlink(mut self) -> Result<(), SetupError> {
        match self.0.take() {
            Some(name) => segment::unlink(&name),
            None => Ok(()),
        }
    }
}

impl Drop for UnlinkGuard {
    fn drop(&mut self) {
        if let Some(name) = self.0.take() {
            // Already failing; the first error is the one to report.
            let _ = segment::unlink(&name);
        }
    }
}

fn write_header(own: &Mapping, config: &NodeConfig, layout: &Layout) {
    let w = own.words();
    w[layout::W_JOB_KEY].store(config.job_key, Ordering::Relaxed);
    w[layout::W_RANK].store(u64::from(config.rank), Ordering::Relaxed);
    w[layout::W_SEGMENT_LEN].store(layout.segment_len as u64, Ordering::Relaxed);
    w[layout::W_QUEUE_CELLS].store(layout.queue_cells as u64, Ordering::Relaxed);
    w[layout::W_OBJECT_LEN].store(layout.object_len as u64, Ordering::Relaxed);
    // Read from the leader's object only. The counter on a host with more ranks than CPUs
    // (see `dissemination`), or with more members than the slots serve.
    let disseminate = crate::dissemination::fits(config.members.len(), config.barrier_radix)
        && match config.barrier {
            BarrierKind::Auto => !config.wait.yield_cpu,
            BarrierKind::Counter => false,
            BarrierKind::Dissemination => true,
        };
    let mode = if disseminate {
        layout::BARRIER_DISSEMINATION
    } else {
        layout::BARRIER_COUNTER
    };
    // Relaxed: released with the magic below, and ordered by the bootstrap barrier.
    w[layout::W_BARRIER_MODE].store(mode, Ordering::Relaxed);
    // Relaxed: as the mode's, released with the magic and ordered by the bootstrap barrier.
    w[layout::W_BARRIER_RADIX].store(u64::from(config.barrier_radix), Ordering::Relaxed);
    // Release: a peer that sees the magic sees the fields (the bootstrap barrier orders them
    // too; this keeps the header self-describing without relying on it).
    w[layout::W_MAGIC].store(layout::MAGIC, Ordering::Release);
}

/// Validates a peer's header against what we expect and the mapping's real size; returns the
/// peer's layout.
fn check_header(
    mapping: &Mapping,
    name: &str,
    job_key: u64,
    rank: u32,
) -> Result<Layout, SetupError> {
    let bad = |reason: String| SetupError::BadObject {
        object: name.to_owned(),
        reason,
    };
    let w = mapping.words();
    if mapping.len() < layout::PAGE {
        return Err(bad(format!(
            "{} bytes, less than a header page",
            mapping.len()
        )));
    }
    let magic = w[layout::W_MAGIC].load(Ordering::Acquire);
    if magic != layout::MAGIC {
        return Err(bad(format!("magic {magic:#018x}")));
    }
    let field = |i: usize| w[i].load(Ordering::Relaxed);
    if field(layout::W_JOB_KEY) != job_key || field(layout::W_RANK) != u64::from(rank) {
        return Err(bad(format!(
            "belongs to job {:#x} rank {}",
            field(layout::W_JOB_KEY),
            field(layout::W_RANK)
        )));
    }
    let cells = usize::try_from(field(layout::W_QUEUE_CELLS)).map_err(|e| bad(e.to_string()))?;
    let seg = usize::try_from(field(layout::W_SEGMENT_LEN)).map_err(|e| bad(e.to_string()))?;
    let peer = Layout::new(cells, seg).map_err(|e| bad(e.to_string()))?;
    if field(layout::W_OBJECT_LEN) != peer.object_len as u64 || mapping.len() < peer.object_len {
        return Err(bad(format!(
            "header says {} bytes, layout needs {}, object has {}",
            field(layout::W_OBJECT_LEN),
            peer.object_len,
            mapping.len()
        )));
    }
    Ok(peer)
}

#[cfg(test)]
#[path = "node_tests.rs"]
mod tests;
