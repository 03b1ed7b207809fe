//! The extended API's errors: one enum for attach, one for every operation after it.

use rgasnet::AmError;
use rgasnet_portals::{NiFail, PtlError};

/// [`crate::Extended::attach`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtAttachError {
    /// The client's collective attach failed (segment size, handlers, bootstrap, ...).
    #[error("attach: {0}")]
    Attach(#[from] rgasnet::AttachError),
    /// Setting up the extended API's Portals resources (event queue, memory descriptors) failed.
    #[error("extended API resources: {0}")]
    Portals(#[from] PtlError),
    /// The configured `GASNET_EXTENDED_EVENT_QUEUE_LENGTH` cannot be used.
    #[error(
        "GASNET_EXTENDED_EVENT_QUEUE_LENGTH={0} is too small; the extended API needs at least 16"
    )]
    EventQueueTooShort(usize),
}

/// A put, get, memset, wait or barrier call failed. Variants that name a `call` say which API
/// call; errors detected before anything was sent say so in their documentation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ExtError {
    /// The rank is not in the job (nothing was sent).
    #[error("{call}: rank {rank} is not in this job of {size} ranks")]
    BadRank {
        /// The call.
        call: &'static str,
        /// Rank asked for.
        rank: u32,
        /// Job size.
        size: u32,
    },
    /// The target ended its program (see `rgasnet::Client::has_ended`): its segment is no
    /// longer in use, and its process may be gone (nothing was sent).
    #[error("{call}: rank {rank} ended its program; its segment can no longer be accessed")]
    PeerLeft {
        /// The call.
        call: &'static str,
        /// The rank that left.
        rank: u32,
    },
    /// The remote range does not lie inside the target's segment (nothing was sent).
    #[error("{call}: {len} bytes at offset {offset} fall outside rank {rank}'s segment of {segment} bytes")]
    OutsideSegment {
        /// The call.
        call: &'static str,
        /// Target rank.
        rank: u32,
        /// Offset asked for.
        offset: u64,
        /// Length asked for.
        len: u64,
        /// The target's segment size.
        segment: u64,
    },
    /// The local segment range of a segment-sourced operation is outside this rank's segment
    /// (nothing was sent).
    #[error("{call}: {len} bytes at offset {offset} fall outside this rank's segment of {segment} bytes")]
    OutsideLocalSegment {
        /// The call.
        call: &'static str,
        /// Local offset.
        offset: u64,
        /// Length.
        len: u64,
        /// This rank's segment size.
        segment: u64,
    },
    /// A value form was asked to move 0 or more than 8 bytes (nothing was sent).
    #[error("{call}: value forms move 1 to 8 bytes, not {len}")]
    BadValueSize {
        /// The call.
        call: &'static str,
        /// Bytes asked for.
        len: usize,
    },
    /// A blocking call, wait or poll was made from inside an active-message handler, where
    /// waiting could deadlock.
    #[error("{call} cannot be called from inside an AM handler")]
    InHandler {
        /// The call.
        call: &'static str,
    },
    /// The target (or the network) failed an operation: `Segv` for an access outside the
    /// target's list entry, `Undeliverable` for a rank that stopped answering, ...
    #[error("{call}: the operation on rank {rank} failed with {fail:?}")]
    Remote {
        /// The call.
        call: &'static str,
        /// Target rank.
        rank: u32,
        /// Why, as the network layer reported it.
        fail: NiFail,
    },
    /// Over a Portals library: nothing this wait needed completed within
    /// `RGASNET_PEER_TIMEOUT`. A library acknowledges and replies on its own progress, so an
    /// operation or its answer was lost (Sandia's reference implementation loses some under
    /// load), or a target died or stopped. A wait for one operation reports
    /// [`ExtError::Remote`] with `NiFail::Undeliverable` and its rank instead.
    #[error("{call}: nothing completed within RGASNET_PEER_TIMEOUT ({secs} s) over the Portals library: an operation or its answer was lost, or a target died or stopped")]
    NoCompletion {
        /// The call.
        call: &'static str,
        /// The bound, in seconds.
        secs: u64,
    },
    /// Implicit-handle operations failed since the last sync (counting events tell how many,
    /// not which; the destinations of failed gets are unspecified).
    #[error("{call}: {failures} implicit-handle operation(s) failed since the last sync")]
    NbiFailed {
        /// The call.
        call: &'static str,
        /// Operations that failed.
        failures: u64,
    },
    /// The barrier's ranks disagreed: named barriers with different ids, or a rank passed
    /// [`crate::BarrierFlags::MISMATCH`]. Every rank of the barrier gets this error.
    #[error("{call}: barrier mismatch (ranks notified different names or flagged a mismatch)")]
    BarrierMismatch {
        /// The call.
        call: &'static str,
    },
    /// The rank this barrier waits for ended its program without doing its part of the
    /// barrier (reaching it; in the shared-memory dissemination barrier, also completing it)
    /// (its end told this rank so): the barrier can never complete.
    #[error("{call}: rank {rank} ended its program without completing barrier {epoch}; every rank must call and wait for the same barriers")]
    BarrierPeerLeft {
        /// The call.
        call: &'static str,
        /// The rank that left.
        rank: u32,
        /// The barrier (its count on this rank).
        epoch: u32,
    },
    /// `barrier_notify` was called again before the barrier was waited for.
    #[error("barrier_notify called while a barrier is still in progress; call barrier_wait first")]
    BarrierAlreadyNotified,
    /// `barrier_wait`/`barrier_try` without a `barrier_notify` before it.
    #[error("{call} without a preceding barrier_notify")]
    BarrierNotNotified {
        /// The call.
        call: &'static str,
    },
    /// `barrier_wait`/`barrier_try` was given another id or flags than its `barrier_notify`.
    #[error("{call}: id {wait_id} / flags {wait_flags:#x} differ from barrier_notify's id {notify_id} / flags {notify_flags:#x}")]
    BarrierWaitArgs {
        /// The call.
        call: &'static str,
        /// Id given to notify.
        notify_id: u32,
        /// Flags given to notify.
        notify_flags: u32,
        /// Id given to wait.
        wait_id: u32,
        /// Flags given to wait.
        wait_flags: u32,
    },
    /// An active message the operation needed (memset, barrier) could not be sent.
    #[error("{call}: {source}")]
    Am {
        /// The call.
        call: &'static str,
        /// The cause.
        #[source]
        source: AmError,
    },
    /// The Portals layer refused a call.
    #[error("{call}: Portals: {source}")]
    Portals {
        /// The call.
        call: &'static str,
        /// The cause.
        #[source]
        source: PtlError,
    },
}

impl ExtError {
    /// Maps an AM-layer error, keeping the "inside a handler" case distinct.
    pub(crate) fn from_am(call: &'static str, e: AmError) -> ExtError {
        match e {
            AmError::InHandler { .. } => ExtError::InHandler { call },
            source => ExtError::Am { call, source },
        }
    }

    /// A closure mapping a Portals error for `call`.
    pub(crate) fn portals(call: &'static str) -> impl FnOnce(PtlError) -> ExtError {
        move |source| ExtError::Portals { call, source }
    }
}
