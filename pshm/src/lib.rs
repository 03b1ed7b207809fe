//! # rgasnet-pshm — the shared-memory fast path between processes on one host
//!
//! Each rank's segment is a shared-memory object cross-mapped by every process of its
//! supernode; puts and gets to a node peer are copies into the mapped segment, active messages
//! travel through lock-free queues in shared memory (`DESIGN.md` §6).
//!
//! How the conduit uses it:
//!
//! 1. [`host_id`] on every rank, exchanged through bootstrap, grouped with
//!    [`Supernodes::group`] (honouring `GASNET_SUPERNODE_MAXSIZE`).
//! 2. [`Node::attach`] with the supernode's members and the bootstrap barrier: creates this
//!    rank's object (`/rgasnet-<job key>-<rank>`: header, request queue, reply queue,
//!    segment), maps the peers' objects, and unlinks its own once all have mapped it, so
//!    nothing is left in `/dev/shm` whatever happens afterwards.
//! 3. [`Node::segment`] gives each member's segment as an [`rgasnet_portals::Region`]: the
//!    local one can back the Portals list entry (the engine deposits into the shared memory),
//!    peers' ones are written and read directly.
//! 4. [`Node::try_send_request`] / [`Node::try_send_reply`] enqueue an [`AmMessage`];
//!    [`Receiver`] dequeues ([`Inbox::try_recv`]) and sleeps ([`Receiver::wait`]); a
//!    [`PollLock`] shares it between the threads of a process.
//! 5. [`Node::barrier_arrive`] / [`Node::barrier_wait`]: the node barrier (a dissemination
//!    barrier, or a shared counter on a host with more ranks than CPUs: [`BarrierKind`]).
//!
//! ```no_run
//! use rgasnet_pshm::{AmMessage, Body, Node, NodeConfig};
//! # fn bootstrap_barrier() -> Result<(), std::io::Error> { Ok(()) }
//! // Ranks 0 and 1 share a host; this is rank 0 of job 0x1234 with a 1 MiB segment.
//! let (node, mut rx) = Node::attach(NodeConfig::new(0x1234, 0, vec![0, 1], 1 << 20), bootstrap_barrier)?;
//! node.segment(1).unwrap().write(0, b"put into rank 1")?;
//! let msg = AmMessage { handler: 128, args: &[1, 2], body: Body::Medium(b"hello") };
//! node.try_send_request(1, &msg)?;
//! rx.wait(std::time::Duration::from_secs(1));
//! while let Some(reply) = rx.replies.try_recv()? {
//!     println!("reply from {} with args {:?}", reply.source(), reply.args());
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! All `unsafe` code of this crate is in the `segment` module (mapping, views of it as
//! atomics, fork for the baseline) and the `queue` module (payload copies, futex calls, the
//! [`PollLock`]); every other module is `#[deny(unsafe_code)]`.
#![deny(unsafe_op_in_unsafe_fn)]

mod barrier;
pub mod baseline;
mod dissemination;
mod error;
mod host;
mod layout;
mod message;
mod node;
mod queue;
mod segment;
mod wait;

pub use barrier::{BarrierName, BarrierTicket};
pub use dissemination::{DEFAULT_RADIX as DEFAULT_BARRIER_RADIX, MAX_RADIX as MAX_BARRIER_RADIX};
pub use error::{BaselineError, HostError, RecvError, SendError, SetupError};
pub use host::{host_id, Supernodes, BOOT_ID_PATH};
pub use layout::MIN_QUEUE_CELLS;
pub use message::{AmCategory, AmMessage, Body, MAX_ARGS, MAX_MEDIUM};
pub use node::{BarrierKind, BarrierWaiting, Inbox, Node, NodeConfig, Receiver};
pub use queue::{PollGuard, PollLock, Received};
pub use segment::{
    check_space, fast_region, job_prefix, object_name, remove_job_objects, ExternalMemory,
    MappedSegment, SHM_DIR,
};
pub use wait::{WaitPolicy, WaitStage};
