//! Triggered operations: each `PtlTriggered*` builds its operation as the plain call would
//! and hands it to the engine to hold on the trigger CT ([`rgasnet_portals::engine::triggered`]).

use super::ops::{atomic_args, fetch_args, get_args, owned, put_args};
use super::*;
use rgasnet_portals::engine::triggered::TriggeredOp;

/// The trigger CT, which must belong to `ni`.
fn trigger_ct(ni: &Ni, trig_ct_handle: u32) -> Result<rgasnet_portals::engine::CtHandle, Code> {
    let lib = lib_read()?;
    let o = lib.cts.get(trig_ct_handle).ok_or(ARG_INVALID)?;
    if lib.ni(o.ni).map(Ni::handle) != Some(ni.handle()) {
        return Err(ARG_INVALID);
    }
    Ok(o.h)
}

fn hold(ni: &Ni, trig_ct_handle: u32, threshold: u64, op: TriggeredOp) -> R {
    let ct = trigger_ct(ni, trig_ct_handle)?;
    ni.trigger(ct, threshold, op).map_err(fail)
}

/// `PtlPut` once the trigger CT counts `threshold` successes.
#[no_mangle]
pub extern "C" fn PtlTriggeredPut(
    md_handle: c::ptl_handle_md_t,
    local_offset: c::ptl_size_t,
    length: c::ptl_size_t,
    ack_req: c::ptl_ack_req_t,
    target_id: c::ptl_process_t,
    pt_index: c::ptl_pt_index_t,
    match_bits: c::ptl_match_bits_t,
    remote_offset: c::ptl_size_t,
    user_ptr: *mut c_void,
    hdr_data: c::ptl_hdr_data_t,
    trig_ct_handle: c::ptl_handle_ct_t,
    threshold: c::ptl_size_t,
) -> c_int {
    guard("PtlTriggeredPut", || {
        let remote = (pt_index, match_bits, remote_offset);
        let (ni, args) = put_args(
            md_handle,
            local_offset,
            length,
            ack_req,
            target_id,
            remote,
            user_ptr,
            hdr_data,
            owned,
        )?;
        hold(&ni, trig_ct_handle, threshold, TriggeredOp::Put(args))
    })
}

/// `PtlGet` once the trigger CT counts `threshold` successes.
#[no_mangle]
pub extern "C" fn PtlTriggeredGet(
    md_handle: c::ptl_handle_md_t,
    local_offset: c::ptl_size_t,
    length: c::ptl_size_t,
    target_id: c::ptl_process_t,
    pt_index: c::ptl_pt_index_t,
    match_bits: c::ptl_match_bits_t,
    remote_offset: c::ptl_size_t,
    user_ptr: *mut c_void,
    trig_ct_handle: c::ptl_handle_ct_t,
    threshold: c::ptl_size_t,
) -> c_int {
    guard("PtlTriggeredGet", || {
        let remote = (pt_index, match_bits, remote_offset);
        let (ni, args) = get_args(
            md_handle,
            local_offset,
            length,
            target_id,
            remote,
            user_ptr,
            owned,
        )?;
        hold(&ni, trig_ct_handle, threshold, TriggeredOp::Get(args))
    })
}

/// `PtlAtomic` once the trigger CT counts `threshold` successes.
#[no_mangle]
pub extern "C" fn PtlTriggeredAtomic(
    md_handle: c::ptl_handle_md_t,
    local_offset: c::ptl_size_t,
    length: c::ptl_size_t,
    ack_req: c::ptl_ack_req_t,
    target_id: c::ptl_process_t,
    pt_index: c::ptl_pt_index_t,
    match_bits: c::ptl_match_bits_t,
    remote_offset: c::ptl_size_t,
    user_ptr: *mut c_void,
    hdr_data: c::ptl_hdr_data_t,
    operation: c::ptl_op_t,
    datatype: c::ptl_datatype_t,
    trig_ct_handle: c::ptl_handle_ct_t,
    threshold: c::ptl_size_t,
) -> c_int {
    guard("PtlTriggeredAtomic", || {
        let remote = (pt_index, match_bits, remote_offset);
        let (ni, args) = atomic_args(
            md_handle,
            local_offset,
            length,
            ack_req,
            target_id,
            remote,
            user_ptr,
            hdr_data,
            operation,
            datatype,
        )?;
        hold(&ni, trig_ct_handle, threshold, TriggeredOp::Atomic(args))
    })
}

/// `PtlFetchAtomic` once the trigger CT counts `threshold` successes.
#[no_mangle]
pub extern "C" fn PtlTriggeredFetchAtomic(
    get_md_handle: c::ptl_handle_md_t,
    local_get_offset: c::ptl_size_t,
    put_md_handle: c::ptl_handle_md_t,
    local_put_offset: c::ptl_size_t,
    length: c::ptl_size_t,
    target_id: c::ptl_process_t,
    pt_index: c::ptl_pt_index_t,
    match_bits: c::ptl_match_bits_t,
    remote_offset: c::ptl_size_t,
    user_ptr: *mut c_void,
    hdr_data: c::ptl_hdr_data_t,
    operation: c::ptl_op_t,
    datatype: c::ptl_datatype_t,
    trig_ct_handle: c::ptl_handle_ct_t,
    threshold: c::ptl_size_t,
) -> c_int {
    guard("PtlTriggeredFetchAtomic", || {
        let (ni, f) = fetch_args(
            get_md_handle,
            local_get_offset,
            put_md_handle,
            local_put_offset,
            length,
            target_id,
            (pt_index, match_bits, remote_offset),
            user_ptr,
            hdr_data,
            std::ptr::null(),
            operation,
            datatype,
        )?;
        hold(&ni, trig_ct_handle, threshold, TriggeredOp::FetchAtomic(f))
    })
}

/// `PtlSwap` once the trigger CT counts `threshold` successes (the operand is copied now).
#[no_mangle]
pub extern "C" fn PtlTriggeredSwap(
    get_md_handle: c::ptl_handle_md_t,
    local_get_offset: c::ptl_size_t,
    put_md_handle: c::ptl_handle_md_t,
    local_put_offset: c::ptl_size_t,
    length: c::ptl_size_t,
    target_id: c::ptl_process_t,
    pt_index: c::ptl_pt_index_t,
    match_bits: c::ptl_match_bits_t,
    remote_offset: c::ptl_size_t,
    user_ptr: *mut c_void,
    hdr_data: c::ptl_hdr_data_t,
    operand: *const c_void,
    operation: c::ptl_op_t,
    datatype: c::ptl_datatype_t,
    trig_ct_handle: c::ptl_handle_ct_t,
    threshold: c::ptl_size_t,
) -> c_int {
    guard("PtlTriggeredSwap", || {
        let (ni, f) = fetch_args(
            get_md_handle,
            local_get_offset,
            put_md_handle,
            local_put_offset,
            length,
            target_id,
            (pt_index, match_bits, remote_offset),
            user_ptr,
            hdr_data,
            operand,
            operation,
            datatype,
        )?;
        hold(&ni, trig_ct_handle, threshold, TriggeredOp::Swap(f))
    })
}

fn ct_op(
    call: &str,
    ct_handle: u32,
    value: c::ptl_ct_event_t,
    trig_ct_handle: u32,
    threshold: u64,
    set: bool,
) -> c_int {
    guard(call, || {
        let (ni, ct) = objects::ct_of(ct_handle)?;
        let v = CtEvent {
            success: value.success,
            failure: value.failure,
        };
        let op = if set {
            TriggeredOp::CtSet(ct, v)
        } else {
            TriggeredOp::CtInc(ct, v)
        };
        hold(&ni, trig_ct_handle, threshold, op)
    })
}

/// `PtlCTInc` once the trigger CT counts `threshold` successes.
#[no_mangle]
pub extern "C" fn PtlTriggeredCTInc(
    ct_handle: c::ptl_handle_ct_t,
    increment: c::ptl_ct_event_t,
    trig_ct_handle: c::ptl_handle_ct_t,
    threshold: c::ptl_size_t,
) -> c_int {
    ct_op(
        "PtlTriggeredCTInc",
        ct_handle,
        increment,
        trig_ct_handle,
        threshold,
        false,
    )
}

/// `PtlCTSet` once the trigger CT counts `threshold` successes.
#[no_mangle]
pub extern "C" fn PtlTriggeredCTSet(
    ct_handle: c::ptl_handle_ct_t,
    new_ct: c::ptl_ct_event_t,
    trig_ct_handle: c::ptl_handle_ct_t,
    threshold: c::ptl_size_t,
) -> c_int {
    ct_op(
        "PtlTriggeredCTSet",
        ct_handle,
        new_ct,
        trig_ct_handle,
        threshold,
        true,
    )
}

/// Drops every operation waiting on a CT.
#[no_mangle]
pub extern "C" fn PtlCTCancelTriggered(ct_handle: c::ptl_handle_ct_t) -> c_int {
    guard("PtlCTCancelTriggered", || {
        let (ni, ct) = objects::ct_of(ct_handle)?;
        ni.ct_cancel_triggered(ct).map_err(fail)
    })
}
