//! The path to a Portals 4 library (feature `ref-impl`): Sandia's reference implementation, or
//! a vendor's `libportals` with the same API, through `portals4-sys`. This is the FFI module of
//! that path, where its `unsafe` lives.
//!
//! [`probe`] opens a network interface of the library, reads its physical id and negotiated
//! limits, and closes it again: the check that the library links, initializes and runs here.
//! [`ops`] is the foundation of a `ref` engine behind the [`crate::interface`] API: the
//! library's NIs, event queues, portal table entries, list entries and memory descriptors as
//! owned Rust values, with put and get, and its events as the engine's [`crate::types::Event`].

use portals4_sys as ffi;

use crate::error::{PtlError, PtlResult};
use crate::types::{Addressing, Matching, NiKind, NiLimits, PhysId};

mod flags;
pub mod memory;
pub mod ni;
pub mod ops;

// Values of portals4.h macros that bindgen cannot evaluate (casts, enum shifts); they are the
// standard's constants.
/// `PTL_IFACE_DEFAULT`: the library's default interface (`PTL_IFACE_NAME` picks it in the
/// reference implementation).
pub(crate) const IFACE_DEFAULT: ffi::ptl_interface_t = 0xffff_ffff;
/// `PTL_PID_ANY`: let the library choose the process id.
pub(crate) const PID_ANY: ffi::ptl_pid_t = 0xffff;
/// `PTL_NI_MATCHING`, `PTL_NI_NO_MATCHING`, `PTL_NI_LOGICAL`, `PTL_NI_PHYSICAL`.
const NI_MATCHING: u32 = 1 << 0;
const NI_NO_MATCHING: u32 = 1 << 1;
const NI_LOGICAL: u32 = 1 << 2;
const NI_PHYSICAL: u32 = 1 << 3;

/// What [`probe`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefProbe {
    /// The NI's physical id.
    pub id: PhysId,
    /// The limits the library granted.
    pub limits: NiLimits,
    /// The library's feature bits (`PTL_TARGET_BIND_INACCESSIBLE`, `PTL_TOTAL_DATA_ORDERING`,
    /// `PTL_COHERENT_ATOMIC`).
    pub features: u32,
}

/// The standard's name of a return code.
pub(crate) fn retval_name(rc: std::os::raw::c_int) -> &'static str {
    const NAMES: [&str; 16] = [
        "PTL_OK",
        "PTL_ARG_INVALID",
        "PTL_CT_NONE_REACHED",
        "PTL_EQ_DROPPED",
        "PTL_EQ_EMPTY",
        "PTL_FAIL",
        "PTL_IGNORED",
        "PTL_IN_USE",
        "PTL_LIST_TOO_LONG",
        "PTL_NO_INIT",
        "PTL_NO_SPACE",
        "PTL_PID_IN_USE",
        "PTL_PT_FULL",
        "PTL_PT_EQ_NEEDED",
        "PTL_PT_IN_USE",
        "PTL_ABORTED",
    ];
    usize::try_from(rc)
        .ok()
        .and_then(|i| NAMES.get(i))
        .copied()
        .unwrap_or("an unknown code")
}

pub(crate) fn check(call: &'static str, rc: std::os::raw::c_int) -> PtlResult<()> {
    if rc == ffi::ptl_retvals_PTL_OK as std::os::raw::c_int {
        Ok(())
    } else {
        Err(PtlError::Fail {
            call,
            reason: format!("the Portals library returned {} ({rc})", retval_name(rc)),
        })
    }
}

pub(crate) fn options(kind: NiKind) -> u32 {
    (match kind.matching {
        Matching::Matching => NI_MATCHING,
        Matching::NoMatching => NI_NO_MATCHING,
    }) | match kind.addressing {
        Addressing::Logical => NI_LOGICAL,
        Addressing::Physical => NI_PHYSICAL,
    }
}

pub(crate) fn count(v: std::os::raw::c_int) -> u32 {
    u32::try_from(v).unwrap_or(0)
}

/// Initializes the library, opens an NI of each of `kinds` in turn on its default interface,
/// reads its physical id and limits, closes it, and finalizes the library. Only physical NIs
/// can be opened without a rank map.
///
/// The reference implementation cannot be initialized again once finalized (its `PtlInit`
/// then returns `PTL_FAIL`): a process probes once, with every kind it needs.
pub fn probe(kinds: &[NiKind]) -> PtlResult<Vec<RefProbe>> {
    if kinds.iter().any(|k| k.addressing == Addressing::Logical) {
        return Err(PtlError::arg(
            "refimpl::probe",
            "a logical NI needs a rank map first; probe a physical one",
        ));
    }
    // SAFETY: PtlInit takes no arguments; it is paired with PtlFini below on every path.
    check("PtlInit", unsafe { ffi::PtlInit() })?;
    let result = kinds.iter().map(|k| probe_ni(*k)).collect();
    // SAFETY: balances the successful PtlInit above.
    unsafe { ffi::PtlFini() };
    result
}

/// Opens an NI of `kind` on the default interface with the library's default limits: its
/// handle and the limits granted. The library must be initialized.
fn open_ni(kind: NiKind) -> PtlResult<(ffi::ptl_handle_ni_t, ffi::ptl_ni_limits_t)> {
    let mut ni = ffi::ptl_handle_ni_t::default();
    let mut lim = ffi::ptl_ni_limits_t::default();
    // SAFETY: no desired limits (null), valid out-pointers for the actual limits and the
    // handle; the callers hold the library initialized.
    check("PtlNIInit", unsafe {
        ffi::PtlNIInit(
            IFACE_DEFAULT,
            options(kind),
            PID_ANY,
            std::ptr::null(),
            &mut lim,
            &mut ni,
        )
    })?;
    Ok((ni, lim))
}

fn probe_ni(kind: NiKind) -> PtlResult<RefProbe> {
    let (ni, lim) = open_ni(kind)?;
    let mut id = ffi::ptl_process_t::default();
    // SAFETY: `ni` was just opened; `id` is a valid out-pointer.
    let got = check("PtlGetPhysId", unsafe { ffi::PtlGetPhysId(ni, &mut id) });
    // SAFETY: closes the NI opened above, once.
    let closed = check("PtlNIFini", unsafe { ffi::PtlNIFini(ni) });
    got?;
    closed?;
    // SAFETY: PtlGetPhysId filled the physical member of the union.
    let phys = unsafe { id.phys };
    Ok(RefProbe {
        features: lim.features,
        id: PhysId {
            nid: phys.nid,
            pid: phys.pid,
        },
        limits: limits_of(&lim),
    })
}

/// The engine's form of the limits a library granted.
pub(crate) fn limits_of(lim: &ffi::ptl_ni_limits_t) -> NiLimits {
    NiLimits {
        max_entries: count(lim.max_entries),
        max_unexpected_headers: count(lim.max_unexpected_headers),
        max_mds: count(lim.max_mds),
        max_cts: count(lim.max_cts),
        max_eqs: count(lim.max_eqs),
        max_pt_index: count(lim.max_pt_index),
        max_iovecs: count(lim.max_iovecs),
        max_list_size: count(lim.max_list_size),
        max_triggered_ops: count(lim.max_triggered_ops),
        max_msg_size: lim.max_msg_size,
        max_atomic_size: lim.max_atomic_size,
        max_fetch_atomic_size: lim.max_fetch_atomic_size,
        max_waw_ordered_size: lim.max_waw_ordered_size,
        max_war_ordered_size: lim.max_war_ordered_size,
        max_volatile_size: lim.max_volatile_size,
    }
}
