//! The value types of the Portals 4 API: process identifiers, options, operation and event
//! kinds, limits. Names follow the C API (`PTL_ME_OP_PUT` is [`MeOptions::OP_PUT`], ...).

use bitflags::bitflags;

/// Node id: the IPv4 address of the interface, as a big-endian `u32` (`a.b.c.d` → `0xaabbccdd`).
pub type Nid = u32;
/// Process id on a node: the UDP port of the interface.
pub type Pid = u32;
/// Rank in a logical NI's rank map.
pub type Rank = u32;
/// Portals match bits.
pub type MatchBits = u64;
/// User id used for access control on list entries.
pub type Uid = u32;
/// Index of a portal table entry.
pub type PtIndex = u32;

/// Wildcard nid in a match id (`PTL_NID_ANY`).
pub const NID_ANY: Nid = u32::MAX;
/// Wildcard pid in a match id (`PTL_PID_ANY`).
pub const PID_ANY: Pid = u32::MAX;
/// Wildcard rank in a match id (`PTL_RANK_ANY`).
pub const RANK_ANY: Rank = u32::MAX;
/// Wildcard uid on a list entry (`PTL_UID_ANY`).
pub const UID_ANY: Uid = u32::MAX;
/// Ask `pt_alloc` for any free index (`PTL_PT_ANY`).
pub const PT_ANY: PtIndex = u32::MAX;

/// A physical process address: node and process id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PhysId {
    /// Node id (IPv4 address).
    pub nid: Nid,
    /// Process id (UDP port).
    pub pid: Pid,
}

impl PhysId {
    /// The socket address this id names.
    pub fn socket_addr(&self) -> Option<std::net::SocketAddrV4> {
        let port = u16::try_from(self.pid).ok()?;
        Some(std::net::SocketAddrV4::new(
            std::net::Ipv4Addr::from(self.nid),
            port,
        ))
    }

    /// The id of a socket address.
    pub fn from_socket_addr(addr: std::net::SocketAddrV4) -> Self {
        PhysId {
            nid: u32::from(*addr.ip()),
            pid: u32::from(addr.port()),
        }
    }
}

impl std::fmt::Display for PhysId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", std::net::Ipv4Addr::from(self.nid), self.pid)
    }
}

/// A process identifier as used for targets and match ids (`ptl_process_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProcessId {
    /// Physical addressing (nid, pid); either may be a wildcard in a match id.
    Phys(PhysId),
    /// Logical addressing: a rank of the NI's rank map ([`RANK_ANY`] in a match id).
    Rank(Rank),
}

impl ProcessId {
    /// Match any process (for an NI of either addressing mode the engine accepts both forms).
    pub const ANY_PHYS: ProcessId = ProcessId::Phys(PhysId {
        nid: NID_ANY,
        pid: PID_ANY,
    });
    /// Match any rank.
    pub const ANY_RANK: ProcessId = ProcessId::Rank(RANK_ANY);
}

/// How an NI matches incoming operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Matching {
    /// Match entries with match bits (`PTL_NI_MATCHING`).
    Matching,
    /// List entries, first one wins (`PTL_NI_NO_MATCHING`).
    NoMatching,
}

/// How an NI names processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Addressing {
    /// Ranks through a rank map (`PTL_NI_LOGICAL`).
    Logical,
    /// (nid, pid) pairs (`PTL_NI_PHYSICAL`).
    Physical,
}

/// The kind of an NI: one of each of [`Matching`] and [`Addressing`]. A process has at most one
/// NI of each kind per interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NiKind {
    /// Matching or not.
    pub matching: Matching,
    /// Logical or physical.
    pub addressing: Addressing,
}

impl NiKind {
    /// Index 0..4 of this kind, as carried on the wire to pick the target NI.
    pub fn index(&self) -> u8 {
        let m = match self.matching {
            Matching::Matching => 0,
            Matching::NoMatching => 1,
        };
        let a = match self.addressing {
            Addressing::Logical => 0,
            Addressing::Physical => 2,
        };
        m | a
    }

    /// The kind of a wire index; `None` for an index above 3.
    pub fn from_index(index: u8) -> Option<Self> {
        if index > 3 {
            return None;
        }
        Some(NiKind {
            matching: if index & 1 == 0 {
                Matching::Matching
            } else {
                Matching::NoMatching
            },
            addressing: if index & 2 == 0 {
                Addressing::Logical
            } else {
                Addressing::Physical
            },
        })
    }
}

/// NI limits (`ptl_ni_limits_t`): asked for at init (desired) and granted (actual).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NiLimits {
    /// Maximum number of list entries (ME/LE) at once.
    pub max_entries: u32,
    /// Maximum unexpected headers (kept for API parity; the engine has no unexpected list).
    pub max_unexpected_headers: u32,
    /// Maximum number of memory descriptors.
    pub max_mds: u32,
    /// Maximum number of counting events.
    pub max_cts: u32,
    /// Maximum number of event queues.
    pub max_eqs: u32,
    /// Largest portal table index (at least 63).
    pub max_pt_index: u32,
    /// Maximum iovecs (unused: the engine has no IOVEC MDs).
    pub max_iovecs: u32,
    /// Maximum length of a list on one PT.
    pub max_list_size: u32,
    /// Maximum number of triggered operations waiting at once.
    pub max_triggered_ops: u32,
    /// Largest put/get in bytes.
    pub max_msg_size: u64,
    /// Largest atomic operation in bytes.
    pub max_atomic_size: u64,
    /// Largest fetch-atomic or swap in bytes.
    pub max_fetch_atomic_size: u64,
    /// Size up to which puts/gets from one initiator to one target are ordered.
    pub max_waw_ordered_size: u64,
    /// Size up to which write-after-read is ordered.
    pub max_war_ordered_size: u64,
    /// Size up to which a volatile MD may be reused as soon as put returns.
    pub max_volatile_size: u64,
}

impl Default for NiLimits {
    fn default() -> Self {
        NiLimits {
            max_entries: 1 << 16,
            max_unexpected_headers: 1 << 16,
            max_mds: 1 << 16,
            max_cts: 1 << 16,
            max_eqs: 1 << 10,
            max_pt_index: 63,
            max_iovecs: 0,
            max_list_size: 1 << 16,
            max_triggered_ops: 1024,
            max_msg_size: 1 << 30,
            max_atomic_size: 1 << 16,
            max_fetch_atomic_size: 1 << 16,
            max_waw_ordered_size: 1 << 30,
            max_war_ordered_size: 1 << 30,
            max_volatile_size: 1 << 30,
        }
    }
}

/// NI status registers (`PtlNIStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SrIndex {
    /// Messages dropped at this NI (no matching entry, disabled PT, ...).
    DropCount,
    /// Operations refused for permissions (uid, OP_PUT/OP_GET).
    PermissionViolations,
    /// Operations refused as invalid (bounds, atomic size, ...).
    OperationViolations,
}

bitflags! {
    /// Options of a portal table entry (`PTL_PT_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct PtOptions: u32 {
        /// Hint: entries on this PT are mostly USE_ONCE.
        const ONLY_USE_ONCE = 1 << 0;
        /// Flow control: disable the PT instead of dropping when resources run out.
        const FLOWCTRL = 1 << 1;
        /// Hint: entries on this PT truncate.
        const ONLY_TRUNCATE = 1 << 2;
        /// Matching need not preserve order.
        const MATCH_UNORDERED = 1 << 3;
        /// Allocate the PT disabled.
        const ALLOC_DISABLED = 1 << 4;
        /// rgasnet extension, not in Portals 4: the initiators of puts to this PT do not wait
        /// for their acknowledgements (an AM sender only frees a send buffer with it), so a
        /// successful ACK may be held back for a short while ([`crate::stack::Stack`]'s lazy
        /// delay) and leave in the same datagram as the next message to that initiator.
        /// Refusals are never delayed.
        const LAZY_ACK = 1 << 16;
        /// rgasnet extension: a put or get that starts past the end of the entry it matched
        /// succeeds with nothing moved (`mlength` 0), as in the Portals 4 reference
        /// implementation, instead of failing with `NI_SEGV` (rgasnet's own RMA portal keeps
        /// the failure: it reports an access outside a segment). The C library sets it.
        const PAST_END_EMPTY = 1 << 17;
    }
}

bitflags! {
    /// Options of a match or list entry (`PTL_ME_*` / `PTL_LE_*`; the ME-only ones are
    /// refused on an LE).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct MeOptions: u32 {
        /// Puts (and atomics) may target this entry.
        const OP_PUT = 1 << 0;
        /// Gets (and fetch-atomics' fetch half) may target this entry.
        const OP_GET = 1 << 1;
        /// Unlink after one match.
        const USE_ONCE = 1 << 2;
        /// Do not keep headers of unexpected messages (no effect: there is no unexpected list).
        const UNEXPECTED_HDR_DISABLE = 1 << 3;
        /// The entry's memory may be read by the application while linked.
        const IS_ACCESSIBLE = 1 << 4;
        /// No LINK event when appended.
        const EVENT_LINK_DISABLE = 1 << 5;
        /// No communication events (PUT, GET, ATOMIC, ...).
        const EVENT_COMM_DISABLE = 1 << 6;
        /// No PT_DISABLED event caused by this entry.
        const EVENT_FLOWCTRL_DISABLE = 1 << 7;
        /// No events for successful operations.
        const EVENT_SUCCESS_DISABLE = 1 << 8;
        /// No *_OVERFLOW events.
        const EVENT_OVER_DISABLE = 1 << 9;
        /// No AUTO_UNLINK event.
        const EVENT_UNLINK_DISABLE = 1 << 10;
        /// Count communication events on the entry's CT.
        const EVENT_CT_COMM = 1 << 11;
        /// Count overflow events on the entry's CT.
        const EVENT_CT_OVERFLOW = 1 << 12;
        /// Count bytes instead of events on the entry's CT.
        const EVENT_CT_BYTES = 1 << 13;
        /// ME only: the target manages the offset; unlink when less than `min_free` remains.
        const MANAGE_LOCAL = 1 << 14;
        /// ME only: do not match an operation that would be truncated.
        const NO_TRUNCATE = 1 << 15;
        /// ME only: the target may align deposits (no effect in this engine).
        const MAY_ALIGN = 1 << 16;
        /// rgasnet extension: a get of at least [`IN_PLACE_MIN`] bytes from this entry is
        /// answered from the entry's region in place: each datagram of the reply carries the
        /// bytes in memory when it is sent (a retransmission reads them again), not a copy
        /// taken when the get matched. Writes to those bytes while the get is in flight may
        /// show in its reply, as with RDMA hardware; a GET event at the target does not mean
        /// the bytes were read.
        const IN_PLACE_REPLY = 1 << 17;
    }
}

impl MeOptions {
    /// The options only a match entry may carry.
    pub const ME_ONLY: MeOptions = MeOptions::MANAGE_LOCAL
        .union(MeOptions::NO_TRUNCATE)
        .union(MeOptions::MAY_ALIGN);
}

bitflags! {
    /// Options of a memory descriptor (`PTL_MD_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct MdOptions: u32 {
        /// Count SEND events on the MD's CT.
        const EVENT_CT_SEND = 1 << 0;
        /// Count REPLY events on the MD's CT.
        const EVENT_CT_REPLY = 1 << 1;
        /// Count ACK events on the MD's CT.
        const EVENT_CT_ACK = 1 << 2;
        /// Count bytes instead of events.
        const EVENT_CT_BYTES = 1 << 3;
        /// Operations from this MD need not be ordered.
        const UNORDERED = 1 << 4;
        /// No events for successful operations.
        const EVENT_SUCCESS_DISABLE = 1 << 5;
        /// The MD may be reused as soon as the operation call returns.
        const VOLATILE = 1 << 6;
        /// No SEND events.
        const EVENT_SEND_DISABLE = 1 << 7;
        /// Unreliable delivery allowed (ignored: the engine is always reliable).
        const UNRELIABLE = 1 << 8;
        /// rgasnet extension: a put from this MD of at least [`IN_PLACE_MIN`] bytes that asks
        /// for an acknowledgement is sent from the MD's region itself, not from a copy taken
        /// when the put starts. The owner keeps those bytes unchanged until the put's ACK (a
        /// change before it may reach the target, as with RDMA hardware). The SEND event still
        /// comes when the put starts and means only that it was issued. Puts without an ACK,
        /// and smaller ones, are copied as usual.
        const IN_PLACE = 1 << 9;
    }
}

/// Smallest put that an [`MdOptions::IN_PLACE`] MD sends from its region in place: below it, a
/// copy into the message costs less than the second I/O vector of a gathering send.
pub const IN_PLACE_MIN: u64 = 4096;

/// Which list of a PT an entry goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    /// Searched first.
    Priority,
    /// Searched when nothing on the priority list matched.
    Overflow,
}

/// Acknowledgement requested by a put or atomic (`ptl_ack_req_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AckReq {
    /// No acknowledgement.
    None,
    /// A full ACK event (and CT count if the MD asks).
    Ack,
    /// Counts on the MD's CT only, no event.
    CtAck,
    /// Operation completed: counts only, sent as soon as the target accepted the data.
    OcAck,
    /// An rgasnet extension: the initiator gets the full ACK event of [`AckReq::Ack`], but the
    /// target sends an acknowledgement only when it refuses the operation, fails it or
    /// truncates it. A success is confirmed by the transport instead, once the target's
    /// interface acknowledged the message and everything it answered before that (a refusal
    /// among it) has arrived. That saves the target a message, and often a datagram, per
    /// operation. A confirmed success reports `mlength` = `rlength` and the `remote_offset`
    /// the initiator asked for (not where a locally managed entry put the data).
    Confirmed,
    /// An rgasnet extension with exactly the semantics of [`AckReq::Ack`]: like
    /// [`AckReq::Confirmed`], but the target also sends its ACK when the data landed
    /// elsewhere than asked (a locally managed entry), so that every ACK reports the true
    /// `mlength` and `remote_offset`. The C library's `PTL_ACK_REQ`. Since its initiator
    /// waits on the transport's ack, the target holds that ack only while its program may
    /// still answer (a ping-pong's reply carries it): it leaves on its own once the target
    /// goes on waiting or next calls in ([`crate::stack::Stack::release_soon_acks`]), not
    /// after the transport's ack delay.
    ConfirmedAck,
    /// [`AckReq::ConfirmedAck`] for a counting acknowledgement ([`AckReq::CtAck`]: counted on
    /// the MD's CT, no full event). The C library's `PTL_CT_ACK_REQ`; on the wire a
    /// `ConfirmedAck`.
    ConfirmedCtAck,
}

/// Atomic operation (`ptl_op_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum AtomicOp {
    Min,
    Max,
    Sum,
    Prod,
    Lor,
    Land,
    Bor,
    Band,
    Lxor,
    Bxor,
    Swap,
    Cswap,
    CswapNe,
    CswapLe,
    CswapLt,
    CswapGe,
    CswapGt,
    Mswap,
}

impl AtomicOp {
    /// Every operation, in the order of `ptl_op_t`'s values (`PTL_MIN` = 0 to `PTL_MSWAP` =
    /// 17): the position is the standard's code, on the wire and in C.
    pub const ALL: [AtomicOp; 18] = [
        AtomicOp::Min,
        AtomicOp::Max,
        AtomicOp::Sum,
        AtomicOp::Prod,
        AtomicOp::Lor,
        AtomicOp::Land,
        AtomicOp::Bor,
        AtomicOp::Band,
        AtomicOp::Lxor,
        AtomicOp::Bxor,
        AtomicOp::Swap,
        AtomicOp::Cswap,
        AtomicOp::CswapNe,
        AtomicOp::CswapLe,
        AtomicOp::CswapLt,
        AtomicOp::CswapGe,
        AtomicOp::CswapGt,
        AtomicOp::Mswap,
    ];
}

/// Atomic datatype (`ptl_datatype_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum AtomicType {
    Int8,
    Uint8,
    Int16,
    Uint16,
    Int32,
    Uint32,
    Int64,
    Uint64,
    Float,
    Double,
}

impl AtomicType {
    /// Size of one element in bytes.
    pub fn size(&self) -> usize {
        match self {
            AtomicType::Int8 | AtomicType::Uint8 => 1,
            AtomicType::Int16 | AtomicType::Uint16 => 2,
            AtomicType::Int32 | AtomicType::Uint32 | AtomicType::Float => 4,
            AtomicType::Int64 | AtomicType::Uint64 | AtomicType::Double => 8,
        }
    }
}

/// Kind of a full event (`ptl_event_kind_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum EventKind {
    Get,
    GetOverflow,
    Put,
    PutOverflow,
    Atomic,
    AtomicOverflow,
    FetchAtomic,
    FetchAtomicOverflow,
    Reply,
    Send,
    Ack,
    PtDisabled,
    Link,
    AutoUnlink,
    AutoFree,
    Search,
}

/// Why an operation failed (`ptl_ni_fail_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NiFail {
    /// Success.
    Ok,
    /// The target could not be reached (silent past the peer timeout).
    Undeliverable,
    /// The target dropped the message (no match, no resources).
    Dropped,
    /// The target PT was disabled by flow control: retry after it is re-enabled.
    PtDisabled,
    /// Refused for permissions (uid or OP_PUT/OP_GET).
    PermViolation,
    /// Refused as an invalid operation (e.g. atomic size).
    OpViolation,
    /// No entry matched.
    NoMatch,
    /// The access fell outside the matched entry's memory.
    Segv,
}

impl NiFail {
    /// Every failure type, in the order of `ptl_ni_fail_t`'s values (`PTL_NI_OK` = 0 to
    /// `PTL_NI_SEGV` = 7): the position is the standard's code, on the wire and in C.
    pub const ALL: [NiFail; 8] = [
        NiFail::Ok,
        NiFail::Undeliverable,
        NiFail::Dropped,
        NiFail::PtDisabled,
        NiFail::PermViolation,
        NiFail::OpViolation,
        NiFail::NoMatch,
        NiFail::Segv,
    ];

    /// The standard's code of this failure type (`ptl_ni_fail_t`: `PTL_NI_OK` = 0 to
    /// `PTL_NI_SEGV` = 7), its position in [`NiFail::ALL`]. An exhaustive match, so that a
    /// variant added later cannot silently read as another (a search of `ALL` would need a
    /// fallback, and 0 is success).
    pub const fn code(self) -> u8 {
        match self {
            NiFail::Ok => 0,
            NiFail::Undeliverable => 1,
            NiFail::Dropped => 2,
            NiFail::PtDisabled => 3,
            NiFail::PermViolation => 4,
            NiFail::OpViolation => 5,
            NiFail::NoMatch => 6,
            NiFail::Segv => 7,
        }
    }
}

/// A full event (`ptl_event_t`). Fields that do not apply to a kind are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// Offset in the entry's or MD's [`crate::Region`] where the data landed / came from, plus
    /// the region's [origin](crate::Region::origin) (0 unless the region was given one).
    pub start: u64,
    /// The user pointer of the entry (target events) or of the operation (initiator events).
    pub user_ptr: u64,
    /// Header data sent with a put or atomic.
    pub hdr_data: u64,
    /// Match bits of the operation.
    pub match_bits: MatchBits,
    /// Requested length.
    pub rlength: u64,
    /// Length that actually moved.
    pub mlength: u64,
    /// Offset in the target entry (remote offset, or the local offset of a MANAGE_LOCAL ME).
    pub remote_offset: u64,
    /// The other side: the initiator (target events) or target (initiator events), as a rank on
    /// a logical NI and a physical id on a physical NI.
    pub initiator: ProcessId,
    /// User id of the initiator.
    pub uid: Uid,
    /// Portal index.
    pub pt_index: PtIndex,
    /// List the matching entry was on (target events).
    pub list: ListKind,
    /// Failure type.
    pub ni_fail: NiFail,
    /// Atomic operation, for atomic events.
    pub atomic_op: Option<AtomicOp>,
    /// Atomic datatype, for atomic events.
    pub atomic_type: Option<AtomicType>,
}

/// A counting event's value (`ptl_ct_event_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CtEvent {
    /// Successful events (or bytes).
    pub success: u64,
    /// Failed events.
    pub failure: u64,
}

#[cfg(test)]
mod tests {
    use super::NiFail;

    #[test]
    fn ni_fail_code_is_its_position_in_all() {
        for (position, fail) in NiFail::ALL.iter().enumerate() {
            assert_eq!(usize::from(fail.code()), position, "{fail:?}");
        }
    }
}
