//! The library's option bits and acknowledgement kinds for the engine's options (see
//! [`super::ni`]): every standard option maps to its `PTL_*` bit; rgasnet's own options are
//! either what a library does anyway (dropped) or refused by name.

use portals4_sys as ffi;

use super::ops::bits;
use crate::error::PtlResult;
use crate::types::{AckReq, EventKind, MdOptions, MeOptions, PtOptions};

/// The library's option bits of a portal table entry. rgasnet's own options are performance
/// hints a library does without (`LAZY_ACK`: it acknowledges as it does;
/// `PAST_END_EMPTY`: the library's own rule for a get past an entry's end applies).
pub(super) fn pt_bits(o: PtOptions) -> PtlResult<u32> {
    let o = o - (PtOptions::LAZY_ACK | PtOptions::PAST_END_EMPTY);
    bits(
        "PtlPTAlloc",
        o,
        &[
            (
                PtOptions::ALLOC_DISABLED,
                1 << ffi::pt_options_PT_ALLOC_DISABLED,
            ),
            (PtOptions::ONLY_USE_ONCE, 1 << ffi::pt_options_ONLY_USE_ONCE),
            (PtOptions::FLOWCTRL, 1 << ffi::pt_options_FLOWCTRL),
            (PtOptions::ONLY_TRUNCATE, 1 << ffi::pt_options_ONLY_TRUNCATE),
            (
                PtOptions::MATCH_UNORDERED,
                1 << ffi::pt_options_MATCH_UNORDERED,
            ),
        ],
    )
}

/// The library's option bits of a list or match entry: every standard `PTL_LE_*` / `PTL_ME_*`
/// option. `IN_PLACE_REPLY` (rgasnet's: answer a get from the entry's memory as it is when
/// sent) is what a library does anyway.
pub(super) fn entry_bits(call: &'static str, o: MeOptions) -> PtlResult<u32> {
    let o = o - MeOptions::IN_PLACE_REPLY;
    use ffi::{
        me_options_ME_MANAGE_LOCAL as MANAGE_LOCAL, me_options_ME_MAY_ALIGN as MAY_ALIGN,
        me_options_ME_NO_TRUNCATE as NO_TRUNCATE,
    };
    bits(
        call,
        o,
        &[
            (MeOptions::OP_PUT, 1 << ffi::mele_options_MELE_OP_PUT),
            (MeOptions::OP_GET, 1 << ffi::mele_options_MELE_OP_GET),
            (MeOptions::USE_ONCE, 1 << ffi::mele_options_MELE_USE_ONCE),
            (
                MeOptions::UNEXPECTED_HDR_DISABLE,
                1 << ffi::mele_options_MELE_UNEXPECTED_HDR_DISABLE,
            ),
            (
                MeOptions::IS_ACCESSIBLE,
                1 << ffi::mele_options_MELE_IS_ACCESSIBLE,
            ),
            (
                MeOptions::EVENT_LINK_DISABLE,
                1 << ffi::mele_options_MELE_EVNT_LINK_DISABLE,
            ),
            (
                MeOptions::EVENT_COMM_DISABLE,
                1 << ffi::mele_options_MELE_EVNT_COMM_DISABLE,
            ),
            (
                MeOptions::EVENT_FLOWCTRL_DISABLE,
                1 << ffi::mele_options_MELE_EVNT_FLOWCTRL_DISABLE,
            ),
            (
                MeOptions::EVENT_SUCCESS_DISABLE,
                1 << ffi::mele_options_MELE_EVNT_SUCCESS_DISABLE,
            ),
            (
                MeOptions::EVENT_OVER_DISABLE,
                1 << ffi::mele_options_MELE_EVNT_OVER_DISABLE,
            ),
            (
                MeOptions::EVENT_UNLINK_DISABLE,
                1 << ffi::mele_options_MELE_EVNT_UNLINK_DISABLE,
            ),
            (
                MeOptions::EVENT_CT_COMM,
                1 << ffi::mele_options_MELE_EVNT_CT_COMM,
            ),
            (
                MeOptions::EVENT_CT_OVERFLOW,
                1 << ffi::mele_options_MELE_EVNT_CT_OVERFLOW,
            ),
            (
                MeOptions::EVENT_CT_BYTES,
                1 << ffi::mele_options_MELE_EVNT_CT_BYTES,
            ),
            (MeOptions::MANAGE_LOCAL, 1 << MANAGE_LOCAL),
            (MeOptions::NO_TRUNCATE, 1 << NO_TRUNCATE),
            (MeOptions::MAY_ALIGN, 1 << MAY_ALIGN),
        ],
    )
}

/// The library's option bits of a memory descriptor. rgasnet's `IN_PLACE` (send from the
/// region itself, not a copy) is what a library does anyway, and `UNRELIABLE` only allows
/// what a reliable library does not need.
pub(super) fn md_option_bits(o: MdOptions) -> PtlResult<u32> {
    let o = o - (MdOptions::IN_PLACE | MdOptions::UNRELIABLE);
    bits(
        "PtlMDBind",
        o,
        &[
            (
                MdOptions::EVENT_CT_SEND,
                1 << ffi::md_options_MD_EVNT_CT_SEND,
            ),
            (
                MdOptions::EVENT_CT_REPLY,
                1 << ffi::md_options_MD_EVNT_CT_REPLY,
            ),
            (MdOptions::EVENT_CT_ACK, 1 << ffi::md_options_MD_EVNT_CT_ACK),
            (
                MdOptions::EVENT_CT_BYTES,
                1 << ffi::mele_options_MELE_EVNT_CT_BYTES,
            ),
            (MdOptions::UNORDERED, 1 << ffi::md_options_MD_UNORDERED),
            (
                MdOptions::EVENT_SUCCESS_DISABLE,
                1 << ffi::md_options_MD_EVNT_SUCCESS_DISABLE,
            ),
            (MdOptions::VOLATILE, 1 << ffi::md_options_MD_VOLATILE),
            (
                MdOptions::EVENT_SEND_DISABLE,
                1 << ffi::md_options_MD_EVNT_SEND_DISABLE,
            ),
        ],
    )
}

/// The standard acknowledgement an rgasnet one stands in for (see the module docs).
pub(super) fn standard_ack(a: AckReq) -> AckReq {
    match a {
        AckReq::Confirmed | AckReq::ConfirmedAck => AckReq::Ack,
        AckReq::ConfirmedCtAck => AckReq::CtAck,
        other => other,
    }
}

/// Whether an event of `kind` comes from a list entry (whose `user_ptr` the library hands
/// back) rather than from an MD.
pub(super) fn from_entry(kind: EventKind) -> bool {
    !matches!(
        kind,
        EventKind::Send | EventKind::Ack | EventKind::Reply | EventKind::PtDisabled
    )
}
