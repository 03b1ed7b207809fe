//! C values of `portals4.h` to the engine's types and back: option bits, enums, process ids,
//! events, limits and return codes. Unknown bits and values are refused (`None`), never
//! guessed.

use portals4_sys as c;
use rgasnet_portals::types::{
    AckReq, Addressing, AtomicOp, AtomicType, CtEvent, Event, EventKind, ListKind, Matching,
    MdOptions, MeOptions, NiFail, NiKind, NiLimits, PhysId, ProcessId, PtOptions, NID_ANY, PID_ANY,
    RANK_ANY,
};
use rgasnet_portals::PtlError;

/// A C return code.
pub type Code = std::os::raw::c_int;

/// `PTL_OK`.
pub const OK: Code = c::ptl_retvals_PTL_OK as Code;
/// `PTL_ARG_INVALID`.
pub const ARG_INVALID: Code = c::ptl_retvals_PTL_ARG_INVALID as Code;
/// `PTL_CT_NONE_REACHED`.
pub const CT_NONE_REACHED: Code = c::ptl_retvals_PTL_CT_NONE_REACHED as Code;
/// `PTL_EQ_DROPPED`.
pub const EQ_DROPPED: Code = c::ptl_retvals_PTL_EQ_DROPPED as Code;
/// `PTL_EQ_EMPTY`.
pub const EQ_EMPTY: Code = c::ptl_retvals_PTL_EQ_EMPTY as Code;
/// `PTL_FAIL`.
pub const FAIL: Code = c::ptl_retvals_PTL_FAIL as Code;
/// `PTL_IN_USE`.
pub const IN_USE: Code = c::ptl_retvals_PTL_IN_USE as Code;
/// `PTL_LIST_TOO_LONG`.
pub const LIST_TOO_LONG: Code = c::ptl_retvals_PTL_LIST_TOO_LONG as Code;
/// `PTL_NO_INIT`.
pub const NO_INIT: Code = c::ptl_retvals_PTL_NO_INIT as Code;
/// `PTL_NO_SPACE`.
pub const NO_SPACE: Code = c::ptl_retvals_PTL_NO_SPACE as Code;
/// `PTL_PID_IN_USE`.
pub const PID_IN_USE: Code = c::ptl_retvals_PTL_PID_IN_USE as Code;
/// `PTL_PT_FULL`.
pub const PT_FULL: Code = c::ptl_retvals_PTL_PT_FULL as Code;
/// `PTL_PT_EQ_NEEDED`.
pub const PT_EQ_NEEDED: Code = c::ptl_retvals_PTL_PT_EQ_NEEDED as Code;
/// `PTL_PT_IN_USE`.
pub const PT_IN_USE: Code = c::ptl_retvals_PTL_PT_IN_USE as Code;
/// `PTL_ABORTED`.
pub const ABORTED: Code = c::ptl_retvals_PTL_ABORTED as Code;

// The header's values that bindgen cannot evaluate (casts): the standard's constants.
/// `PTL_EQ_NONE`.
pub const EQ_NONE: u32 = 0x3fff_ffff;
/// `PTL_CT_NONE`.
pub const CT_NONE: u32 = 0x5fff_ffff;
/// `PTL_INVALID_HANDLE`.
pub const INVALID_HANDLE: u32 = 0xffff_ffff;
/// `PTL_PID_ANY`.
pub const C_PID_ANY: u32 = 0xffff;
/// `PTL_NID_ANY`.
pub const C_NID_ANY: u32 = 0xffff;
/// `PTL_PT_ANY`.
pub const C_PT_ANY: u32 = 0xffff_ffff;
/// `PTL_TIME_FOREVER`.
pub const TIME_FOREVER: u32 = 0xffff_ffff;
/// `PTL_IOVEC` (MD, LE and ME option bit 0).
pub const IOVEC: u32 = 1 << c::mele_options_MELE_IOVEC;

/// The C code of an engine error.
pub fn code(e: &PtlError) -> Code {
    match e {
        PtlError::ArgInvalid { .. } | PtlError::InvalidHandle { .. } => ARG_INVALID,
        PtlError::CtNoneReached => CT_NONE_REACHED,
        PtlError::EqEmpty => EQ_EMPTY,
        PtlError::InUse { .. } | PtlError::NiKindInUse(_) => IN_USE,
        PtlError::ListTooLong { .. } => LIST_TOO_LONG,
        PtlError::NoSpace { .. } => NO_SPACE,
        PtlError::PtFull => PT_FULL,
        PtlError::PtInUse(_) => PT_IN_USE,
        PtlError::PtEqNeeded => PT_EQ_NEEDED,
        PtlError::Aborted => ABORTED,
        _ => FAIL,
    }
}

/// Maps the set bits of `bits` through `table`; `None` if a bit is not in it.
fn map_bits<F: Copy + std::ops::BitOr<Output = F>>(
    bits: u32,
    none: F,
    table: &[(u32, F)],
) -> Option<F> {
    let mut left = bits;
    let mut out = none;
    for (bit, flag) in table {
        if bits & bit != 0 {
            out = out | *flag;
            left &= !bit;
        }
    }
    (left == 0).then_some(out)
}

/// `PtlNIInit`'s options.
pub fn ni_kind(options: u32) -> Option<NiKind> {
    let (m, nm) = (
        1 << c::ni_types_NI_T_MATCHING,
        1 << c::ni_types_NI_T_NMATCHING,
    );
    let (l, p) = (
        1 << c::ni_types_NI_T_LOGICAL,
        1 << c::ni_types_NI_T_PHYSICAL,
    );
    if options & !(m | nm | l | p) != 0 {
        return None;
    }
    let matching = match (options & m != 0, options & nm != 0) {
        (true, false) => Matching::Matching,
        (false, true) => Matching::NoMatching,
        _ => return None,
    };
    let addressing = match (options & l != 0, options & p != 0) {
        (true, false) => Addressing::Logical,
        (false, true) => Addressing::Physical,
        _ => return None,
    };
    Some(NiKind {
        matching,
        addressing,
    })
}

/// `PtlPTAlloc`'s options.
pub fn pt_options(options: u32) -> Option<PtOptions> {
    map_bits(
        options,
        PtOptions::empty(),
        &[
            (1 << c::pt_options_ONLY_USE_ONCE, PtOptions::ONLY_USE_ONCE),
            (1 << c::pt_options_FLOWCTRL, PtOptions::FLOWCTRL),
            (1 << c::pt_options_ONLY_TRUNCATE, PtOptions::ONLY_TRUNCATE),
            (
                1 << c::pt_options_MATCH_UNORDERED,
                PtOptions::MATCH_UNORDERED,
            ),
            (
                1 << c::pt_options_PT_ALLOC_DISABLED,
                PtOptions::ALLOC_DISABLED,
            ),
        ],
    )
}

/// An MD's options (without `PTL_IOVEC`, which the caller handles).
pub fn md_options(options: u32) -> Option<MdOptions> {
    map_bits(
        options,
        MdOptions::empty(),
        &[
            (1 << c::md_options_MD_EVNT_CT_SEND, MdOptions::EVENT_CT_SEND),
            (
                1 << c::md_options_MD_EVNT_CT_REPLY,
                MdOptions::EVENT_CT_REPLY,
            ),
            (1 << c::md_options_MD_EVNT_CT_ACK, MdOptions::EVENT_CT_ACK),
            (
                1 << c::mele_options_MELE_EVNT_CT_BYTES,
                MdOptions::EVENT_CT_BYTES,
            ),
            (1 << c::md_options_MD_UNORDERED, MdOptions::UNORDERED),
            (
                1 << c::md_options_MD_EVNT_SUCCESS_DISABLE,
                MdOptions::EVENT_SUCCESS_DISABLE,
            ),
            (1 << c::md_options_MD_VOLATILE, MdOptions::VOLATILE),
            (
                1 << c::md_options_MD_EVNT_SEND_DISABLE,
                MdOptions::EVENT_SEND_DISABLE,
            ),
            (1 << c::md_options_MD_UNRELIABLE, MdOptions::UNRELIABLE),
        ],
    )
}

/// An LE's (`me == false`) or ME's options (without `PTL_IOVEC`).
pub fn entry_options(options: u32, me: bool) -> Option<MeOptions> {
    let common = [
        (1 << c::mele_options_MELE_OP_PUT, MeOptions::OP_PUT),
        (1 << c::mele_options_MELE_OP_GET, MeOptions::OP_GET),
        (1 << c::mele_options_MELE_USE_ONCE, MeOptions::USE_ONCE),
        (
            1 << c::mele_options_MELE_UNEXPECTED_HDR_DISABLE,
            MeOptions::UNEXPECTED_HDR_DISABLE,
        ),
        (
            1 << c::mele_options_MELE_IS_ACCESSIBLE,
            MeOptions::IS_ACCESSIBLE,
        ),
        (
            1 << c::mele_options_MELE_EVNT_LINK_DISABLE,
            MeOptions::EVENT_LINK_DISABLE,
        ),
        (
            1 << c::mele_options_MELE_EVNT_COMM_DISABLE,
            MeOptions::EVENT_COMM_DISABLE,
        ),
        (
            1 << c::mele_options_MELE_EVNT_FLOWCTRL_DISABLE,
            MeOptions::EVENT_FLOWCTRL_DISABLE,
        ),
        (
            1 << c::mele_options_MELE_EVNT_SUCCESS_DISABLE,
            MeOptions::EVENT_SUCCESS_DISABLE,
        ),
        (
            1 << c::mele_options_MELE_EVNT_OVER_DISABLE,
            MeOptions::EVENT_OVER_DISABLE,
        ),
        (
            1 << c::mele_options_MELE_EVNT_UNLINK_DISABLE,
            MeOptions::EVENT_UNLINK_DISABLE,
        ),
        (
            1 << c::mele_options_MELE_EVNT_CT_COMM,
            MeOptions::EVENT_CT_COMM,
        ),
        (
            1 << c::mele_options_MELE_EVNT_CT_OVERFLOW,
            MeOptions::EVENT_CT_OVERFLOW,
        ),
        (
            1 << c::mele_options_MELE_EVNT_CT_BYTES,
            MeOptions::EVENT_CT_BYTES,
        ),
    ];
    if !me {
        return map_bits(options, MeOptions::empty(), &common);
    }
    let only_me = [
        (1 << c::me_options_ME_MANAGE_LOCAL, MeOptions::MANAGE_LOCAL),
        (1 << c::me_options_ME_NO_TRUNCATE, MeOptions::NO_TRUNCATE),
        (1 << c::me_options_ME_MAY_ALIGN, MeOptions::MAY_ALIGN),
        // The engine keeps no unexpected headers, so there is no rlength of one to add.
        (
            1 << c::me_options_ME_LOCAL_INC_UH_RLENGTH,
            MeOptions::empty(),
        ),
    ];
    let all: Vec<(u32, MeOptions)> = common.iter().chain(only_me.iter()).copied().collect();
    map_bits(options, MeOptions::empty(), &all)
}

/// `ptl_ack_req_t`. Full and counting acknowledgements use the engine's confirmed forms:
/// the same events and counts, but a success rides on the transport's acknowledgement
/// instead of a message of its own (the target still sends one for a truncation, a failure
/// or a deposit elsewhere than asked).
pub fn ack_req(v: u8) -> Option<AckReq> {
    match u32::from(v) {
        c::PTL_NO_ACK_REQ => Some(AckReq::None),
        c::PTL_ACK_REQ => Some(AckReq::ConfirmedAck),
        c::PTL_CT_ACK_REQ => Some(AckReq::ConfirmedCtAck),
        c::PTL_OC_ACK_REQ => Some(AckReq::OcAck),
        _ => None,
    }
}

/// `ptl_op_t` (in the standard's order, `PTL_MIN` = 0 to `PTL_MSWAP` = 17).
pub fn atomic_op(v: u8) -> Option<AtomicOp> {
    AtomicOp::ALL.get(usize::from(v)).copied()
}

fn op_code(op: AtomicOp) -> u8 {
    AtomicOp::ALL.iter().position(|o| *o == op).unwrap_or(0) as u8
}

const TYPES: [(u32, AtomicType); 10] = [
    (c::PTL_INT8_T, AtomicType::Int8),
    (c::PTL_UINT8_T, AtomicType::Uint8),
    (c::PTL_INT16_T, AtomicType::Int16),
    (c::PTL_UINT16_T, AtomicType::Uint16),
    (c::PTL_INT32_T, AtomicType::Int32),
    (c::PTL_UINT32_T, AtomicType::Uint32),
    (c::PTL_FLOAT, AtomicType::Float),
    (c::PTL_INT64_T, AtomicType::Int64),
    (c::PTL_UINT64_T, AtomicType::Uint64),
    (c::PTL_DOUBLE, AtomicType::Double),
];

/// `ptl_datatype_t`; the complex and long double types are not supported (`None`).
pub fn datatype(v: u8) -> Option<AtomicType> {
    TYPES
        .iter()
        .find(|(code, _)| *code == u32::from(v))
        .map(|(_, t)| *t)
}

fn datatype_code(t: AtomicType) -> u8 {
    TYPES
        .iter()
        .find(|(_, x)| *x == t)
        .map_or(0, |(code, _)| *code as u8)
}

/// A C process id on an NI of `addressing` (`rank`, or `nid`/`pid` with their wildcards).
pub fn process(addressing: Addressing, rank: u32, nid: u32, pid: u32) -> ProcessId {
    match addressing {
        Addressing::Logical => ProcessId::Rank(rank),
        Addressing::Physical => ProcessId::Phys(PhysId {
            nid: if nid == C_NID_ANY { NID_ANY } else { nid },
            pid: if pid == C_PID_ANY { PID_ANY } else { pid },
        }),
    }
}

/// The C form of a process id.
pub fn c_process(p: ProcessId) -> c::ptl_process_t {
    match p {
        ProcessId::Rank(r) => c::ptl_process_t { rank: r },
        ProcessId::Phys(id) => c::ptl_process_t {
            phys: c::ptl_process_t__bindgen_ty_1 {
                nid: if id.nid == NID_ANY { C_NID_ANY } else { id.nid },
                pid: if id.pid == PID_ANY { C_PID_ANY } else { id.pid },
            },
        },
    }
}

/// Whether a logical rank is the wildcard.
pub fn is_rank_any(r: u32) -> bool {
    r == RANK_ANY
}

fn event_kind(k: EventKind) -> u8 {
    (match k {
        EventKind::Get => c::PTL_EVENT_GET,
        EventKind::GetOverflow => c::PTL_EVENT_GET_OVERFLOW,
        EventKind::Put => c::PTL_EVENT_PUT,
        EventKind::PutOverflow => c::PTL_EVENT_PUT_OVERFLOW,
        EventKind::Atomic => c::PTL_EVENT_ATOMIC,
        EventKind::AtomicOverflow => c::PTL_EVENT_ATOMIC_OVERFLOW,
        EventKind::FetchAtomic => c::PTL_EVENT_FETCH_ATOMIC,
        EventKind::FetchAtomicOverflow => c::PTL_EVENT_FETCH_ATOMIC_OVERFLOW,
        EventKind::Reply => c::PTL_EVENT_REPLY,
        EventKind::Send => c::PTL_EVENT_SEND,
        EventKind::Ack => c::PTL_EVENT_ACK,
        EventKind::PtDisabled => c::PTL_EVENT_PT_DISABLED,
        EventKind::Link => c::PTL_EVENT_LINK,
        EventKind::AutoUnlink => c::PTL_EVENT_AUTO_UNLINK,
        EventKind::AutoFree => c::PTL_EVENT_AUTO_FREE,
        EventKind::Search => c::PTL_EVENT_SEARCH,
    }) as u8
}

fn ni_fail(f: NiFail) -> u8 {
    f.code()
}

/// The C form of an event (its `start` is already the C address: regions carry it as their
/// origin).
pub fn c_event(e: &Event) -> c::ptl_event_t {
    c::ptl_event_t {
        start: e.start as usize as *mut std::ffi::c_void,
        user_ptr: e.user_ptr as usize as *mut std::ffi::c_void,
        hdr_data: e.hdr_data,
        match_bits: e.match_bits,
        rlength: e.rlength,
        mlength: e.mlength,
        remote_offset: e.remote_offset,
        initiator: c_process(e.initiator),
        uid: e.uid,
        pt_index: e.pt_index,
        type_: event_kind(e.kind),
        ptl_list: match e.list {
            ListKind::Priority => c::PTL_PRIORITY_LIST as u8,
            ListKind::Overflow => c::PTL_OVERFLOW_LIST as u8,
        },
        ni_fail_type: ni_fail(e.ni_fail),
        atomic_operation: e.atomic_op.map_or(0, op_code),
        atomic_type: e.atomic_type.map_or(0, datatype_code),
    }
}

/// The C form of a counting event.
pub fn c_ct(v: CtEvent) -> c::ptl_ct_event_t {
    c::ptl_ct_event_t {
        success: v.success,
        failure: v.failure,
    }
}

fn clamp(v: u32) -> std::os::raw::c_int {
    std::os::raw::c_int::try_from(v).unwrap_or(std::os::raw::c_int::MAX)
}

/// The C form of an NI's limits.
pub fn c_limits(l: &NiLimits) -> c::ptl_ni_limits_t {
    c::ptl_ni_limits_t {
        max_entries: clamp(l.max_entries),
        max_unexpected_headers: clamp(l.max_unexpected_headers),
        max_mds: clamp(l.max_mds),
        max_cts: clamp(l.max_cts),
        max_eqs: clamp(l.max_eqs),
        max_pt_index: clamp(l.max_pt_index),
        max_iovecs: clamp(l.max_iovecs),
        max_list_size: clamp(l.max_list_size),
        max_triggered_ops: clamp(l.max_triggered_ops),
        max_msg_size: l.max_msg_size,
        max_atomic_size: l.max_atomic_size,
        max_fetch_atomic_size: l.max_fetch_atomic_size,
        max_waw_ordered_size: l.max_waw_ordered_size,
        max_war_ordered_size: l.max_war_ordered_size,
        max_volatile_size: l.max_volatile_size,
        // Data ordering within max_waw_ordered_size, and atomics coherent with the engine's
        // own (there is no other agent on this memory).
        features: (1 << c::ni_features_NI_DATA_ORDERING)
            | (1 << c::ni_features_NI_COHERENT_ATOMICS),
    }
}

/// The engine's form of desired C limits (negative fields: keep the default).
pub fn limits(d: &c::ptl_ni_limits_t) -> NiLimits {
    let mut l = NiLimits::default();
    let take = |v: std::os::raw::c_int, dst: &mut u32| {
        if let Ok(v) = u32::try_from(v) {
            if v > 0 {
                *dst = v;
            }
        }
    };
    take(d.max_entries, &mut l.max_entries);
    take(d.max_unexpected_headers, &mut l.max_unexpected_headers);
    take(d.max_mds, &mut l.max_mds);
    take(d.max_cts, &mut l.max_cts);
    take(d.max_eqs, &mut l.max_eqs);
    take(d.max_pt_index, &mut l.max_pt_index);
    take(d.max_list_size, &mut l.max_list_size);
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_map_bit_for_bit_and_refuse_unknown_bits() {
        let put_get = (1 << c::mele_options_MELE_OP_PUT) | (1 << c::mele_options_MELE_OP_GET);
        assert_eq!(
            entry_options(put_get, false),
            Some(MeOptions::OP_PUT | MeOptions::OP_GET)
        );
        let manage = 1 << c::me_options_ME_MANAGE_LOCAL;
        assert_eq!(entry_options(manage, true), Some(MeOptions::MANAGE_LOCAL));
        assert_eq!(entry_options(manage, false), None);
        assert_eq!(entry_options(1 << 30, true), None);
        assert_eq!(pt_options(1 << 20), None);
        assert_eq!(
            md_options(1 << c::mele_options_MELE_EVNT_CT_BYTES),
            Some(MdOptions::EVENT_CT_BYTES)
        );
    }

    #[test]
    fn ni_options_need_one_of_each_pair() {
        let m = 1 << c::ni_types_NI_T_MATCHING;
        let l = 1 << c::ni_types_NI_T_LOGICAL;
        let p = 1 << c::ni_types_NI_T_PHYSICAL;
        assert!(ni_kind(m | l).is_some());
        assert!(ni_kind(m).is_none());
        assert!(ni_kind(m | l | p).is_none());
    }

    #[test]
    fn atomic_codes_round_trip() {
        for v in 0..18u8 {
            assert_eq!(atomic_op(v).map(op_code), Some(v));
        }
        assert_eq!(atomic_op(18), None);
        for (code, t) in TYPES {
            assert_eq!(datatype(code as u8), Some(t));
        }
        assert_eq!(datatype(c::PTL_DOUBLE_COMPLEX as u8), None);
    }
}
