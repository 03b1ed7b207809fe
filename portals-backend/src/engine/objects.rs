//! The objects an engine keeps (NIs, portal table entries, list entries, MDs, EQs, CTs), the
//! specifications the API takes to create them, and the argument structs of data movement.

use std::collections::VecDeque;

use crate::handle::Handle;
use crate::memory::Region;
use crate::types::{
    AckReq, AtomicOp, AtomicType, CtEvent, Event, ListKind, MatchBits, MdOptions, MeOptions,
    NiKind, NiLimits, PhysId, ProcessId, PtIndex, PtOptions, Rank, Uid,
};

/// Handle to a network interface.
pub type NiHandle = Handle<NiState>;
/// Handle to an event queue.
pub type EqHandle = Handle<EqState>;
/// Handle to a counting event.
pub type CtHandle = Handle<CtState>;
/// Handle to a memory descriptor.
pub type MdHandle = Handle<MdState>;
/// Handle to a match entry (matching NI) or list entry (non-matching NI).
pub type MeHandle = Handle<EntryState>;
/// Handle to a list entry: the same type as [`MeHandle`], one entry type serves both.
pub type LeHandle = MeHandle;

/// Index of each status register in [`NiState`]'s register array.
pub(crate) const SR_DROP: usize = 0;
pub(crate) const SR_PERM: usize = 1;
pub(crate) const SR_OP: usize = 2;

/// A network interface's state (opaque; reached through an [`NiHandle`]).
pub struct NiState {
    pub(crate) kind: NiKind,
    pub(crate) limits: NiLimits,
    /// Rank map of a logical NI, once `set_map` was called.
    pub(crate) map: Option<Vec<PhysId>>,
    /// This interface's rank in `map`.
    pub(crate) my_rank: Option<Rank>,
    /// Portal table, `max_pt_index + 1` slots.
    pub(crate) pts: Vec<Option<PtState>>,
    /// DROP_COUNT, PERMISSION_VIOLATIONS, OPERATION_VIOLATIONS.
    pub(crate) status: [u64; 3],
    pub(crate) n_entries: u32,
    pub(crate) n_mds: u32,
    pub(crate) n_cts: u32,
    pub(crate) n_eqs: u32,
    /// Triggered operations waiting on this NI's CTs.
    pub(crate) n_triggered: u32,
}

/// A portal table entry.
pub(crate) struct PtState {
    pub(crate) options: PtOptions,
    pub(crate) eq: Option<EqHandle>,
    pub(crate) enabled: bool,
    pub(crate) priority: Vec<MeHandle>,
    pub(crate) overflow: Vec<MeHandle>,
    /// Headers of operations that landed in overflow-list entries, oldest first, until an
    /// appended priority entry or a search takes them ([`super::unexpected`]).
    pub(crate) unexpected: VecDeque<super::unexpected::UnexpectedHeader>,
}

impl PtState {
    pub(crate) fn list(&self, list: ListKind) -> &Vec<MeHandle> {
        match list {
            ListKind::Priority => &self.priority,
            ListKind::Overflow => &self.overflow,
        }
    }
    pub(crate) fn list_mut(&mut self, list: ListKind) -> &mut Vec<MeHandle> {
        match list {
            ListKind::Priority => &mut self.priority,
            ListKind::Overflow => &mut self.overflow,
        }
    }
}

/// An event queue's state (opaque; reached through an [`EqHandle`]).
pub struct EqState {
    pub(crate) ni: NiHandle,
    pub(crate) capacity: usize,
    pub(crate) events: VecDeque<Event>,
    /// Set when an event could not be stored; reported by the next `eq_get`.
    pub(crate) dropped: bool,
    /// PTs and MDs that post to this EQ (it cannot be freed while any does).
    pub(crate) refs: u32,
    /// Enabled flow-controlled PTs that post to this EQ. Each may still have to post its
    /// `PT_DISABLED`, so flow control keeps this many slots free: with one slot kept for all,
    /// two PTs sharing an EQ (the conduit's AM and Long-data portals) overflowed it when both
    /// ran out of room, and the second PT's event was lost.
    pub(crate) flow_reserve: u32,
}

impl EqState {
    pub(crate) fn free_slots(&self) -> usize {
        self.capacity.saturating_sub(self.events.len())
    }
}

/// A counting event's state (opaque; reached through a [`CtHandle`]).
pub struct CtState {
    pub(crate) ni: NiHandle,
    pub(crate) value: CtEvent,
    /// Operations waiting for the count, by threshold ([`super::triggered`]).
    pub(crate) triggers: Vec<super::triggered::Trigger>,
    /// MDs and entries that count on this CT.
    pub(crate) refs: u32,
}

/// A memory descriptor's state (opaque; reached through an [`MdHandle`]).
pub struct MdState {
    pub(crate) ni: NiHandle,
    pub(crate) region: Region,
    pub(crate) offset: u64,
    pub(crate) length: u64,
    pub(crate) options: MdOptions,
    pub(crate) eq: Option<EqHandle>,
    pub(crate) ct: Option<CtHandle>,
    /// Operations waiting for an ack or reply that will land in / report on this MD.
    pub(crate) pending: u32,
}

/// A match or list entry's state (opaque; reached through an [`MeHandle`]).
pub struct EntryState {
    pub(crate) ni: NiHandle,
    pub(crate) pt_index: PtIndex,
    pub(crate) list: ListKind,
    pub(crate) region: Region,
    pub(crate) offset: u64,
    pub(crate) length: u64,
    pub(crate) ct: Option<CtHandle>,
    pub(crate) uid: Uid,
    pub(crate) options: MeOptions,
    pub(crate) match_id: ProcessId,
    pub(crate) match_bits: MatchBits,
    pub(crate) ignore_bits: MatchBits,
    pub(crate) min_free: u64,
    pub(crate) user_ptr: u64,
    /// Next deposit offset of a MANAGE_LOCAL entry.
    pub(crate) local_offset: u64,
}

/// What `md_bind` binds: `length` bytes of `region` starting at `offset`.
#[derive(Debug, Clone)]
pub struct MdSpec {
    /// The memory.
    pub region: Region,
    /// First byte of the MD in `region`.
    pub offset: u64,
    /// Length of the MD.
    pub length: u64,
    /// Options.
    pub options: MdOptions,
    /// Where initiator events go (none: no full events).
    pub eq: Option<EqHandle>,
    /// Where initiator events are counted.
    pub ct: Option<CtHandle>,
}

/// What `me_append` appends on a matching NI.
#[derive(Debug, Clone)]
pub struct MeSpec {
    /// The memory exposed.
    pub region: Region,
    /// First byte of the entry in `region`.
    pub offset: u64,
    /// Length of the entry.
    pub length: u64,
    /// Counting event for target-side counting.
    pub ct: Option<CtHandle>,
    /// Who may access ([`crate::UID_ANY`]: anyone).
    pub uid: Uid,
    /// Options (OP_PUT/OP_GET, ...).
    pub options: MeOptions,
    /// Which initiators match (wildcards allowed).
    pub match_id: ProcessId,
    /// Match bits.
    pub match_bits: MatchBits,
    /// Bits ignored when matching.
    pub ignore_bits: MatchBits,
    /// MANAGE_LOCAL: unlink once fewer than this many bytes remain.
    pub min_free: u64,
}

/// What `le_append` appends on a non-matching NI (an ME without match fields).
#[derive(Debug, Clone)]
pub struct LeSpec {
    /// The memory exposed.
    pub region: Region,
    /// First byte of the entry in `region`.
    pub offset: u64,
    /// Length of the entry.
    pub length: u64,
    /// Counting event for target-side counting.
    pub ct: Option<CtHandle>,
    /// Who may access ([`crate::UID_ANY`]: anyone).
    pub uid: Uid,
    /// Options (ME-only options are refused).
    pub options: MeOptions,
}

/// Result of `eq_get`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EqGet {
    /// The next event.
    Event(Event),
    /// The next event; earlier events were lost because the EQ was full (`PTL_EQ_DROPPED`).
    Dropped(Event),
    /// No event (`PTL_EQ_EMPTY`).
    Empty,
}

/// Where an operation goes: target process, portal index, match bits and offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteAddr {
    /// Target: a rank on a logical NI, a physical id on a physical NI.
    pub target: ProcessId,
    /// Portal table index at the target.
    pub pt_index: PtIndex,
    /// Match bits (ignored by non-matching NIs).
    pub match_bits: MatchBits,
    /// Offset in the target entry (ignored by MANAGE_LOCAL entries).
    pub remote_offset: u64,
}

/// Arguments of `put` (`PtlPut`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PutArgs {
    /// Source MD.
    pub md: MdHandle,
    /// Offset of the data in the MD.
    pub local_offset: u64,
    /// Bytes to send.
    pub length: u64,
    /// Acknowledgement wanted.
    pub ack_req: AckReq,
    /// Destination.
    pub remote: RemoteAddr,
    /// Returned in the initiator's events.
    pub user_ptr: u64,
    /// Delivered in the target's event.
    pub hdr_data: u64,
}

/// Arguments of `get` (`PtlGet`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GetArgs {
    /// Destination MD.
    pub md: MdHandle,
    /// Offset in the MD where the data lands.
    pub local_offset: u64,
    /// Bytes to fetch.
    pub length: u64,
    /// Source.
    pub remote: RemoteAddr,
    /// Returned in the initiator's events.
    pub user_ptr: u64,
}

/// Arguments of `atomic` (`PtlAtomic`): a put whose data combines with the target's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicArgs {
    /// Operand MD.
    pub md: MdHandle,
    /// Offset of the operands in the MD.
    pub local_offset: u64,
    /// Bytes (a multiple of the datatype size).
    pub length: u64,
    /// Acknowledgement wanted.
    pub ack_req: AckReq,
    /// Destination.
    pub remote: RemoteAddr,
    /// Returned in the initiator's events.
    pub user_ptr: u64,
    /// Delivered in the target's event.
    pub hdr_data: u64,
    /// Operation (not a swap-family one).
    pub op: AtomicOp,
    /// Datatype.
    pub datatype: AtomicType,
}

/// Arguments of `fetch_atomic` (`PtlFetchAtomic`) and `swap` (`PtlSwap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchArgs<'a> {
    /// MD receiving the target's previous values.
    pub get_md: MdHandle,
    /// Offset in `get_md`.
    pub get_offset: u64,
    /// MD holding the operands.
    pub put_md: MdHandle,
    /// Offset in `put_md`.
    pub put_offset: u64,
    /// Bytes (a multiple of the datatype size).
    pub length: u64,
    /// Destination.
    pub remote: RemoteAddr,
    /// Returned in the initiator's events.
    pub user_ptr: u64,
    /// Delivered in the target's event.
    pub hdr_data: u64,
    /// Swap only: the compare value (CSWAP*) or mask (MSWAP), one element; empty otherwise.
    pub operand: &'a [u8],
    /// Operation.
    pub op: AtomicOp,
    /// Datatype.
    pub datatype: AtomicType,
}

/// Counters of what the engine refused or could not use (for diagnostics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Requests received.
    pub requests: u64,
    /// Responses received.
    pub responses: u64,
    /// Messages that did not decode (ignored).
    pub malformed: u64,
    /// Responses that name no pending operation, come from the wrong peer or are inconsistent
    /// with their request (ignored, or failing the operation when the data cannot be used).
    pub unexpected_responses: u64,
    /// Requests for an NI kind that is not open here.
    pub no_ni: u64,
    /// Requests on a logical NI whose initiator rank disagrees with the rank map.
    pub bad_initiator: u64,
    /// Events lost because their EQ was full.
    pub eq_overflows: u64,
    /// Headers not recorded because an unexpected list was full.
    pub unexpected_dropped: u64,
    /// Events posted to event queues (a driver can tell from it that a message produced work).
    pub events_posted: u64,
    /// Operations counted on counting events (CTs), successes and failures alike: with
    /// [`EngineStats::events_posted`] and [`EngineStats::immediates_received`], what tells a
    /// driver that a message changed something a waiter can observe.
    pub counts: u64,
    /// Operations failed because their peer was declared failed.
    pub undeliverable: u64,
    /// [`crate::types::AckReq::Confirmed`] operations completed by the transport's
    /// confirmation (no ACK message).
    pub confirmed: u64,
    /// Immediate messages sent (see [`crate::engine::immediate`]).
    pub immediates_sent: u64,
    /// Immediate messages received and queued.
    pub immediates_received: u64,
    /// Immediate messages never confirmed because their peer was declared failed.
    pub immediates_lost: u64,
}
