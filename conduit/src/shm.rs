//! The shared-memory path to the ranks of this rank's supernode (`rgasnet-pshm`): setting it
//! up at attach, sending active messages through the peers' queues, and draining this rank's
//! own queues in `poll()`.
//!
//! Routing order for every destination: a supernode member (this rank included) goes through
//! shared memory; any other rank through the Portals network layer.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use rgasnet_portals::Region;
use rgasnet_pshm::{AmCategory, AmMessage, Body, Node, NodeConfig, PollLock, Receiver, SendError};

use crate::client::{Attached, Inner};
use crate::error::{AmError, AttachError};
use crate::handlers::Category;
use crate::matchbits::Direction;
use crate::recv::{in_handler, Tally};
use crate::stats::Counters;

/// Messages taken from each shared-memory queue per `poll()`.
const SHM_BATCH: usize = 64;

/// Largest Long payload that travels inline in the queue record (a carried Long), for the
/// receiver to write into its own segment. Written by the sender into the receiver's segment,
/// a small Long also moves the segment's cache line to the sender and back: an 8-byte Long
/// round trip took 0.667 µs against a Short's 0.366; carried, 0.394 against 0.373, as a
/// Medium's (`scripts/ab-am-sizes.sh OLD NEW pshm 21 3000`, 2026-12-02). Up to 256 bytes
/// carrying wins; at 512 bytes the two ways are level, the second copy (record, then segment)
/// costing what the lines save.
const SHM_LONG_CARRY_MAX: usize = 512;

/// This rank's membership in a supernode of more than one rank.
pub(crate) struct Shm {
    pub(crate) node: Node,
    /// This rank's queues as their consumer, taken by whichever thread polls (see
    /// [`PollLock`]: its release is a plain store, where a mutex's is a locked exchange).
    pub(crate) rx: PollLock<Receiver>,
    /// Replies that handlers could not enqueue (the peer's reply queue was full), sent in
    /// order by the next polls. A handler may not wait: the peer may itself be inside a
    /// handler that waits for room in this rank's queue, which only this rank's poll makes.
    deferred: Mutex<VecDeque<DeferredReply>>,
    /// Whether `deferred` may hold anything: a look without the lock for idle polls.
    /// Relaxed: it is a hint; the queue itself is only read and written under its lock.
    has_deferred: AtomicBool,
}

/// A reply waiting in [`Shm::deferred`], owning its arguments and payload.
struct DeferredReply {
    dest: u32,
    handler: u8,
    args: Vec<u32>,
    body: OwnedBody,
}

enum OwnedBody {
    Short,
    Medium(Vec<u8>),
    /// The payload is already in the destination's segment; only the header waits.
    Long {
        offset: u64,
        len: u32,
    },
    /// A small Long's payload, for the destination to write into its segment.
    LongCarried {
        offset: u64,
        payload: Vec<u8>,
    },
}

impl Shm {
    /// Whether `poll()` has shared-memory work: a message waiting in this rank's queues or a
    /// deferred reply to send. A hint without locks (see `Node::has_incoming`).
    pub(crate) fn pending(&self) -> bool {
        // Relaxed: a hint, as the queue heads are.
        self.node.has_incoming() || self.has_deferred.load(Ordering::Relaxed)
    }

    /// Replies waiting for room in a node peer's queue (see `deferred`).
    pub(crate) fn deferred_replies(&self) -> usize {
        crate::send::lock(&self.deferred).len()
    }
}

impl DeferredReply {
    fn message(&self) -> AmMessage<'_> {
        AmMessage {
            handler: self.handler,
            args: &self.args,
            body: match &self.body {
                OwnedBody::Short => Body::Short,
                OwnedBody::Medium(p) => Body::Medium(p),
                OwnedBody::Long { offset, len } => Body::Long {
                    offset: *offset,
                    len: *len,
                },
                OwnedBody::LongCarried { offset, payload } => Body::LongCarried {
                    offset: *offset,
                    payload,
                },
            },
        }
    }
}

/// Sets up shared memory for the supernode `members` (which includes `rank`) and returns this
/// rank's segment (shared when the supernode has several members) and the shared-memory state.
/// Every rank of the job calls the bootstrap barrier exactly twice here.
pub(crate) fn attach(
    inner: &Inner,
    members: &[u32],
    segment_len: usize,
) -> Result<(Region, Option<Shm>), AttachError> {
    if members.len() <= 1 {
        // Match the two barriers that supernode members run while they cross-map.
        inner.boot.barrier()?;
        inner.boot.barrier()?;
        // A private mapping: puts land in it and gets read it with memcpy (as on the shared
        // path), not with the word loop of a heap region.
        let segment = match rgasnet_pshm::fast_region(segment_len) {
            Ok(r) => r,
            Err(_) => Region::try_new(segment_len).ok_or(AttachError::SegmentAlloc {
                requested: segment_len as u64,
            })?,
        };
        return Ok((segment, None));
    }
    let mut config = NodeConfig::new(
        inner.boot.job_key(),
        inner.rank,
        members.to_vec(),
        segment_len,
    );
    config.wait = if inner.polling.crowded {
        // More ranks than CPUs: a waiting rank yields to the ones it waits for.
        rgasnet_pshm::WaitPolicy::crowded(inner.polling.budget)
    } else {
        // A CPU for every rank: spin, then yield until the budget is spent, as network waits
        // do (RGASNET_WAIT_POLL_US). A wait that sleeps at the spin's end costs its barrier a
        // futex wake-up per dissemination round whenever one rank is late by more than the
        // spin (its vCPU preempted, say): 16 ranks on 16 cores measured 1.5-12.6 µs per
        // barrier against smp-conduit's 0.95-1.1, which never sleeps.
        rgasnet_pshm::WaitPolicy::roomy(inner.polling.spin, inner.polling.budget)
    };
    config.barrier = inner.config.pshm_barrier;
    config.barrier_radix = inner.config.pshm_barrier_radix;
    let (node, rx) = Node::attach(config, || inner.boot.barrier())?;
    let segment = node
        .segment(inner.rank)
        .cloned()
        .ok_or(AttachError::Internal("own shared segment missing"))?;
    Ok((
        segment,
        Some(Shm {
            node,
            rx: PollLock::new(rx),
            deferred: Mutex::new(VecDeque::new()),
            has_deferred: AtomicBool::new(false),
        }),
    ))
}

impl crate::Client {
    /// `rank`'s segment when it is a supernode peer's (or this rank's own) shared segment, as
    /// a [`rgasnet_pshm::MappedSegment`]: the same bytes as [`crate::Client::peer_segment`],
    /// for one-word puts and gets that compile to a single load or store (refused once `rank`
    /// ended its program: [`rgasnet_pshm::MappedSegment::owner_left`]). `None` without shared
    /// memory, for other ranks, and before attach.
    pub fn mapped_segment(&self, rank: u32) -> Option<&rgasnet_pshm::MappedSegment> {
        let a = self.inner.attached.get()?;
        a.shm.as_ref()?.node.mapped_segment(rank)
    }
}

impl Inner {
    /// For a rank reached through shared memory, whether it has left (its end marked it,
    /// see `Node::mark_left`); `None` for any other rank (one indexed lookup).
    pub(crate) fn node_peer_left(&self, rank: u32) -> Option<bool> {
        let att = self.attached.get()?;
        self.shm_route(att, rank).map(|shm| shm.node.has_left(rank))
    }

    /// Whether `dest` is reached through shared memory.
    pub(crate) fn shm_route<'a>(&self, att: &'a Attached, dest: u32) -> Option<&'a Shm> {
        att.shm
            .as_ref()
            .filter(|shm| shm.node.segment(dest).is_some())
    }

    /// Sends a checked AM through `dest`'s shared-memory queue.
    #[allow(clippy::too_many_arguments)]
    #[inline]
    pub(crate) fn send_shm(
        &self,
        call: &'static str,
        shm: &Shm,
        dest: u32,
        direction: Direction,
        category: Category,
        handler: u8,
        args: &[u32],
        payload: &[u8],
        long_offset: Option<u64>,
    ) -> Result<(), AmError> {
        let body = match category {
            Category::Short => Body::Short,
            Category::Medium => Body::Medium(payload),
            Category::Long if payload.len() <= SHM_LONG_CARRY_MAX => Body::LongCarried {
                offset: long_offset.unwrap_or(0),
                payload,
            },
            Category::Long => {
                let offset = long_offset.unwrap_or(0);
                // Checked against the segment size by the caller; the enqueue below publishes
                // the data.
                let Some(seg) = shm.node.segment(dest) else {
                    return Err(AmError::BadRank {
                        call,
                        rank: dest,
                        size: self.size,
                    });
                };
                if seg.write(offset as usize, payload).is_err() {
                    self.fatal("a checked Long payload fell outside a node peer's segment");
                }
                Body::Long {
                    offset,
                    len: payload.len() as u32,
                }
            }
        };
        let msg = AmMessage {
            handler,
            args,
            body,
        };
        if direction == Direction::Reply && shm.has_deferred.load(Ordering::Relaxed) {
            // Earlier replies are still waiting: keep the order.
            self.defer_reply(shm, dest, &msg);
            return Ok(());
        }
        // Started at the first full queue: the common send never reads the configuration.
        let mut watch = None;
        loop {
            let sent = match direction {
                Direction::Request => shm.node.try_send_request(dest, &msg),
                Direction::Reply => shm.node.try_send_reply(dest, &msg),
            };
            match sent {
                Ok(()) => {
                    Counters::bump(&self.stats.sent);
                    return Ok(());
                }
                Err(SendError::Full { .. }) => {
                    if direction == Direction::Reply || in_handler() {
                        // A handler may not wait (see `Shm::deferred`): the next poll sends it.
                        self.defer_reply(shm, dest, &msg);
                        return Ok(());
                    }
                    self.waited(watch.get_or_insert_with(|| self.stall_clock()), call, dest);
                    self.poll_internal(call)?;
                }
                // The destination ended its program and takes nothing more in.
                Err(SendError::Closed { .. }) => {
                    return Err(AmError::PeerLeft { call, rank: dest })
                }
                Err(source) => return Err(AmError::Shm { call, source }),
            }
        }
    }

    fn defer_reply(&self, shm: &Shm, dest: u32, msg: &AmMessage<'_>) {
        let body = match msg.body {
            Body::Short => OwnedBody::Short,
            Body::Medium(p) => OwnedBody::Medium(p.to_vec()),
            Body::Long { offset, len } => OwnedBody::Long { offset, len },
            Body::LongCarried { offset, payload } => OwnedBody::LongCarried {
                offset,
                payload: payload.to_vec(),
            },
        };
        let mut q = crate::send::lock(&shm.deferred);
        q.push_back(DeferredReply {
            dest,
            handler: msg.handler,
            args: msg.args.to_vec(),
            body,
        });
        shm.has_deferred.store(true, Ordering::Relaxed);
        Counters::bump(&self.stats.sent);
    }

    /// Sends the deferred replies that fit now, oldest first; stops at the first that still
    /// finds its queue full (later ones may go to the same peer).
    pub(crate) fn flush_deferred_replies(&self, att: &Attached) {
        let Some(shm) = att.shm.as_ref() else {
            return;
        };
        if !shm.has_deferred.load(Ordering::Relaxed) {
            return;
        }
        let mut q = crate::send::lock(&shm.deferred);
        while let Some(front) = q.front() {
            match shm.node.try_send_reply(front.dest, &front.message()) {
                Ok(()) => {
                    q.pop_front();
                }
                Err(SendError::Full { .. }) => break,
                Err(SendError::Closed { .. }) => {
                    // The requester ended its program without waiting for this reply: no
                    // handler of its would run it.
                    tracing::debug!(dest = front.dest, "reply to a rank that left, dropped");
                    q.pop_front();
                }
                Err(e) => self.fatal(&format!(
                    "a deferred shared-memory reply to rank {} failed: {e}",
                    front.dest
                )),
            }
        }
        shm.has_deferred.store(!q.is_empty(), Ordering::Relaxed);
    }

    /// Runs handlers for messages waiting in this rank's shared-memory queues (replies first).
    /// Another thread already draining them is left to it.
    pub(crate) fn poll_shm(&self, att: &Attached) -> usize {
        let Some(shm) = att.shm.as_ref() else {
            return 0;
        };
        // A look without the lock first, so that an idle poll (the common case while a rank
        // waits for a reply) makes no atomic read-modify-write at all.
        if !shm.node.has_incoming() {
            return 0;
        }
        // A handler that panicked (and was caught around `poll`) released the lock as it
        // unwound, and its message with it: the queues are consistent, so go on.
        let Some(mut rx) = shm.rx.try_lock() else {
            return 0;
        };
        let mut ran = 0;
        for direction in [Direction::Reply, Direction::Request] {
            for _ in 0..SHM_BATCH {
                let inbox = match direction {
                    Direction::Reply => &mut rx.replies,
                    Direction::Request => &mut rx.requests,
                };
                let msg = match inbox.try_recv() {
                    Ok(Some(m)) => m,
                    Ok(None) => break,
                    Err(e) => self.fatal(&format!("shared-memory queue is corrupt: {e}")),
                };
                let (category, long, carried) = match msg.body() {
                    Body::Short => (Category::Short, None, None),
                    Body::Medium(p) => (Category::Medium, None, Some(p)),
                    Body::Long { offset, len } => {
                        (Category::Long, Some((offset, u64::from(len))), None)
                    }
                    Body::LongCarried { offset, payload } => {
                        // Into this rank's segment before the handler runs, as if the sender
                        // had written it there.
                        self.land_long(att, msg.source(), offset, payload);
                        (
                            Category::Long,
                            Some((offset, payload.len() as u64)),
                            Some(payload),
                        )
                    }
                };
                debug_assert_eq!(
                    msg.category(),
                    match category {
                        Category::Short => AmCategory::Short,
                        Category::Medium => AmCategory::Medium,
                        Category::Long => AmCategory::Long,
                    }
                );
                self.dispatch(
                    att,
                    // The receiver's lock is held: its holders alone count these.
                    Tally::Held(&self.stats.handled_shm),
                    msg.source(),
                    direction,
                    category,
                    msg.handler(),
                    msg.args(),
                    long,
                    carried,
                );
                ran += 1;
            }
        }
        ran
    }
}
