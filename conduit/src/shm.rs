//! The shared-memory path to the ranks of this rank's supernode (`rgasnet-pshm`): setting it
//! up at attach, sending active messages through the peers' queues, and draining this rank's
//! own queues in `poll()`.
//!
//! Routing order for every destination: a supernode member (this rank included) goes through
//! shared memory; any other rank through the Portals network layer.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use rgasnet_portals::Region;
use rgasnet_pshm::{AmCategory, AmMessage, Body, Node, NodeConfig, Receiver, SendError};

use crate::client::{Attached, Inner};
use crate::error::{AmError, AttachError};
use crate::handlers::Category;
use crate::matchbits::Direction;
use crate::recv::in_handler;
use crate::stats::Counters;

/// Messages taken from each shared-memory queue per `poll()`.
const SHM_BATCH: usize = 64;
/// How long a reply sent from inside a handler waits for room in a full reply queue before the
/// job is stopped (the peer is not draining its replies: it is stuck or dead).
const REPLY_PATIENCE: Duration = Duration::from_secs(30);

/// This rank's membership in a supernode of more than one rank.
pub(crate) struct Shm {
    pub(crate) node: Node,
    pub(crate) rx: Mutex<Receiver>,
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
        let segment = Region::try_new(segment_len).ok_or(AttachError::SegmentAlloc {
            requested: segment_len as u64,
        })?;
        return Ok((segment, None));
    }
    let config = NodeConfig::new(
        inner.boot.job_key(),
        inner.rank,
        members.to_vec(),
        segment_len,
    );
    let (node, rx) = Node::attach(config, || inner.boot.barrier())?;
    let segment = node
        .segment(inner.rank)
        .cloned()
        .ok_or(AttachError::Internal("own shared segment missing"))?;
    Ok((
        segment,
        Some(Shm {
            node,
            rx: Mutex::new(rx),
        }),
    ))
}

impl crate::Client {
    /// `rank`'s segment when it is a supernode peer's (or this rank's own) shared segment, as
    /// a [`rgasnet_pshm::MappedSegment`]: the same bytes as [`crate::Client::peer_segment`],
    /// for one-word puts and gets that compile to a single load or store. `None` without
    /// shared memory, for other ranks, and before attach.
    pub fn mapped_segment(&self, rank: u32) -> Option<&rgasnet_pshm::MappedSegment> {
        let a = self.inner.attached.get()?;
        a.shm.as_ref()?.node.mapped_segment(rank)
    }
}

impl Inner {
    /// Whether `dest` is reached through shared memory.
    pub(crate) fn shm_route<'a>(&self, att: &'a Attached, dest: u32) -> Option<&'a Shm> {
        att.shm
            .as_ref()
            .filter(|shm| shm.node.segment(dest).is_some())
    }

    /// Sends a checked AM through `dest`'s shared-memory queue.
    #[allow(clippy::too_many_arguments)]
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
        // Read the clock only once the queue was found full: a clock read costs more than
        // the whole enqueue on some machines (a VM's TSC read is tens of nanoseconds).
        let mut started: Option<Instant> = None;
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
                    if in_handler() {
                        // A handler may not poll; the peer drains its queue in its own poll.
                        if started.get_or_insert_with(Instant::now).elapsed() > REPLY_PATIENCE {
                            self.fatal(&format!(
                                "rank {dest}'s shared-memory queue stayed full for {} s",
                                REPLY_PATIENCE.as_secs()
                            ));
                        }
                        std::thread::yield_now();
                    } else {
                        self.poll_internal(call)?;
                    }
                }
                Err(source) => return Err(AmError::Shm { call, source }),
            }
        }
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
        let Ok(mut rx) = shm.rx.try_lock() else {
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
