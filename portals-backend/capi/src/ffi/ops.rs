//! Data movement (put, get, atomics), and the calls the engine does not offer yet
//! (triggered operations, searches), which fail with a code instead of being absent.

use super::*;

/// The NI, engine MD and local offset for an operation on `length` bytes at `local_offset`
/// of an MD. A window binds a piece over just those bytes (and releases the pieces of
/// earlier operations that completed).
fn md_of(
    md_handle: u32,
    local_offset: u64,
    length: u64,
) -> Result<(Ni, rgasnet_portals::engine::MdHandle, u64), Code> {
    {
        let lib = lib_read()?;
        let o = lib.mds.get(md_handle).ok_or(ARG_INVALID)?;
        if let MdRef::Bound(h) = o.h {
            return Ok((ni_for(&lib, md_handle)?, h, local_offset));
        }
    }
    let mut lib = lib_write()?;
    let o = lib.mds.get(md_handle).ok_or(ARG_INVALID)?;
    let ni = ni_for(&lib, md_handle)?;
    let MdRef::Window(w) = o.h else {
        return Err(ARG_INVALID);
    };
    let win = lib
        .windows
        .get_mut(w)
        .and_then(Option::as_mut)
        .ok_or(ARG_INVALID)?;
    win.pieces.retain(|p| ni.md_release(*p).is_err());
    let end = local_offset.checked_add(length).ok_or(ARG_INVALID)?;
    if end > win.length {
        return Err(ARG_INVALID);
    }
    let addr = usize::try_from(local_offset)
        .ok()
        .and_then(|off| win.start.checked_add(off))
        .ok_or(ARG_INVALID)?;
    let (region, offset) = region_over(addr as *mut c_void, length)?;
    let spec = MdSpec {
        region,
        offset,
        length,
        options: win.options,
        eq: win.eq,
        ct: win.ct,
    };
    let piece = ni.md_bind(spec).map_err(fail)?;
    win.pieces.push(piece);
    Ok((ni, piece, 0))
}

/// Runs `op` on the NI and engine MD of a bound MD (one that is not a window) while the
/// library's state is read-locked; `None` for a window, which needs a piece bound first
/// ([`md_of`]). Put and get take this path: it spares them the NI's clone, whose reference
/// count (two atomic read-modify-writes on a line that the kernel's network path has usually
/// evicted since the last call) sat on the path of every round trip: the C ping-pong went
/// from 1.249-1.256 to 1.225-1.230 x raw UDP (three alternating sets of 30). Nothing under
/// `op` takes the state lock again (the engine knows nothing of it) and `op` does not block
/// (a put or get only queues and sends), so a writer (an object made or freed in another
/// thread) waits at most for the call.
fn with_bound_md<T>(
    md_handle: u32,
    op: impl FnOnce(&Ni, rgasnet_portals::engine::MdHandle) -> Result<T, Code>,
) -> Result<Option<T>, Code> {
    let lib = lib_read()?;
    let o = lib.mds.get(md_handle).ok_or(ARG_INVALID)?;
    let MdRef::Bound(md) = o.h else {
        return Ok(None);
    };
    let ni = lib.ni(table::ni_of(md_handle)).ok_or(ARG_INVALID)?;
    op(ni, md).map(Some)
}

/// Runs `op` on the NI, engine MD and local offset of an operation on `length` bytes at
/// `local_offset` of an MD: for a bound MD under the library's read lock
/// ([`with_bound_md`]), for a window after binding a piece over those bytes ([`md_of`]).
fn on_md<T>(
    md_handle: u32,
    local_offset: u64,
    length: u64,
    op: impl Fn(&Ni, rgasnet_portals::engine::MdHandle, u64) -> Result<T, Code>,
) -> Result<T, Code> {
    if let Some(done) = with_bound_md(md_handle, |ni, md| op(ni, md, local_offset))? {
        return Ok(done);
    }
    let (ni, md, local_offset) = md_of(md_handle, local_offset, length)?;
    op(&ni, md, local_offset)
}

/// The target of an operation: `target_id` as `ni` addresses, and the portal table entry,
/// match bits and offset there.
fn remote_addr(
    ni: &Ni,
    target_id: c::ptl_process_t,
    (pt_index, match_bits, remote_offset): (u32, u64, u64),
) -> RemoteAddr {
    RemoteAddr {
        target: target(ni, target_id),
        pt_index,
        match_bits,
        remote_offset,
    }
}

/// Runs `op` on the NI and the arguments of a put (see [`on_md`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn put_args<T>(
    md_handle: u32,
    local_offset: u64,
    length: u64,
    ack_req: c::ptl_ack_req_t,
    target_id: c::ptl_process_t,
    remote: (u32, u64, u64),
    user_ptr: *mut c_void,
    hdr_data: u64,
    op: impl Fn(&Ni, PutArgs) -> Result<T, Code>,
) -> Result<T, Code> {
    let ack_req = cv::ack_req(ack_req).ok_or(ARG_INVALID)?;
    on_md(md_handle, local_offset, length, |ni, md, local_offset| {
        let args = PutArgs {
            md,
            local_offset,
            length,
            ack_req,
            remote: remote_addr(ni, target_id, remote),
            user_ptr: user_ptr as u64,
            hdr_data,
        };
        op(ni, args)
    })
}

/// An NI of the caller's own, and the arguments, for an operation kept past the call (a
/// triggered one) or completed out of the library's lock.
pub(super) fn owned<A>(ni: &Ni, args: A) -> Result<(Ni, A), Code> {
    Ok((ni.clone(), args))
}

/// Sends `length` bytes at `local_offset` of an MD to a target's portal table entry.
#[no_mangle]
pub extern "C" fn PtlPut(
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
) -> c_int {
    guard("PtlPut", || {
        let remote = (pt_index, match_bits, remote_offset);
        put_args(
            md_handle,
            local_offset,
            length,
            ack_req,
            target_id,
            remote,
            user_ptr,
            hdr_data,
            |ni, args| ni.put(&args).map_err(fail),
        )
    })
}

/// Runs `op` on the NI and the arguments of a get (see [`on_md`]).
pub(super) fn get_args<T>(
    md_handle: u32,
    local_offset: u64,
    length: u64,
    target_id: c::ptl_process_t,
    remote: (u32, u64, u64),
    user_ptr: *mut c_void,
    op: impl Fn(&Ni, GetArgs) -> Result<T, Code>,
) -> Result<T, Code> {
    on_md(md_handle, local_offset, length, |ni, md, local_offset| {
        let args = GetArgs {
            md,
            local_offset,
            length,
            remote: remote_addr(ni, target_id, remote),
            user_ptr: user_ptr as u64,
        };
        op(ni, args)
    })
}

/// Fetches `length` bytes from a target's portal table entry into an MD.
#[no_mangle]
pub extern "C" fn PtlGet(
    md_handle: c::ptl_handle_md_t,
    local_offset: c::ptl_size_t,
    length: c::ptl_size_t,
    target_id: c::ptl_process_t,
    pt_index: c::ptl_pt_index_t,
    match_bits: c::ptl_match_bits_t,
    remote_offset: c::ptl_size_t,
    user_ptr: *mut c_void,
) -> c_int {
    guard("PtlGet", || {
        let remote = (pt_index, match_bits, remote_offset);
        get_args(
            md_handle,
            local_offset,
            length,
            target_id,
            remote,
            user_ptr,
            |ni, args| ni.get(&args).map_err(fail),
        )
    })
}

#[allow(clippy::too_many_arguments)]
pub(super) fn atomic_args(
    md_handle: u32,
    local_offset: u64,
    length: u64,
    ack_req: c::ptl_ack_req_t,
    target_id: c::ptl_process_t,
    (pt_index, match_bits, remote_offset): (u32, u64, u64),
    user_ptr: *mut c_void,
    hdr_data: u64,
    operation: c::ptl_op_t,
    datatype: c::ptl_datatype_t,
) -> Result<(Ni, AtomicArgs), Code> {
    let (ni, args) = put_args(
        md_handle,
        local_offset,
        length,
        ack_req,
        target_id,
        (pt_index, match_bits, remote_offset),
        user_ptr,
        hdr_data,
        owned,
    )?;
    let a = AtomicArgs {
        md: args.md,
        local_offset: args.local_offset,
        length,
        ack_req: args.ack_req,
        remote: args.remote,
        user_ptr: args.user_ptr,
        hdr_data,
        op: cv::atomic_op(operation).ok_or(ARG_INVALID)?,
        datatype: cv::datatype(datatype).ok_or(ARG_INVALID)?,
    };
    Ok((ni, a))
}

/// An atomic operation on a target's memory with an MD's data as the operand.
#[no_mangle]
pub extern "C" fn PtlAtomic(
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
) -> c_int {
    guard("PtlAtomic", || {
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
        ni.atomic(&args).map_err(fail)
    })
}

/// The arguments shared by fetch-atomic and swap, owning the swap's compare/mask operand.
#[allow(clippy::too_many_arguments)]
pub(super) fn fetch_args(
    get_md_handle: u32,
    local_get_offset: u64,
    put_md_handle: u32,
    local_put_offset: u64,
    length: u64,
    target_id: c::ptl_process_t,
    (pt_index, match_bits, remote_offset): (u32, u64, u64),
    user_ptr: *mut c_void,
    hdr_data: u64,
    operand: *const c_void,
    operation: u8,
    datatype: u8,
) -> Result<(Ni, HeldFetch), Code> {
    let (ni, get_md, local_get_offset) = md_of(get_md_handle, local_get_offset, length)?;
    let (put_ni, put_md, local_put_offset) = md_of(put_md_handle, local_put_offset, length)?;
    if put_ni.handle() != ni.handle() {
        return Err(ARG_INVALID);
    }
    let dt = cv::datatype(datatype).ok_or(ARG_INVALID)?;
    let op = cv::atomic_op(operation).ok_or(ARG_INVALID)?;
    // A plain swap ignores the operand (it may be NULL); the conditional and masked swaps
    // read one element.
    let operand = if op == rgasnet_portals::types::AtomicOp::Swap || operand.is_null() {
        Vec::new()
    } else {
        // SAFETY: non-null (checked); the API's contract: `operand` points to one element
        // of `datatype`, readable for the call (copied here).
        unsafe { std::slice::from_raw_parts(operand.cast::<u8>(), dt.size()) }.to_vec()
    };
    let f = HeldFetch {
        args: FetchArgs {
            get_md,
            get_offset: local_get_offset,
            put_md,
            put_offset: local_put_offset,
            length,
            remote: RemoteAddr {
                target: target(&ni, target_id),
                pt_index,
                match_bits,
                remote_offset,
            },
            user_ptr: user_ptr as u64,
            hdr_data,
            operand: &[],
            op,
            datatype: dt,
        },
        operand,
    };
    Ok((ni, f))
}

fn fetch_now(ni: &Ni, f: &HeldFetch, swap: bool) -> R {
    if swap {
        ni.swap(&f.args()).map_err(fail)
    } else {
        ni.fetch_atomic(&f.args()).map_err(fail)
    }
}

/// An atomic operation that also returns the target's prior value into `get_md`.
#[no_mangle]
pub extern "C" fn PtlFetchAtomic(
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
) -> c_int {
    guard("PtlFetchAtomic", || {
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
        fetch_now(&ni, &f, false)
    })
}

/// A swap (plain, conditional or masked) that returns the target's prior value.
#[no_mangle]
pub extern "C" fn PtlSwap(
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
) -> c_int {
    guard("PtlSwap", || {
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
        fetch_now(&ni, &f, true)
    })
}

/// Atomics are coherent with every other access the engine makes: nothing to wait for.
#[no_mangle]
pub extern "C" fn PtlAtomicSync() -> c_int {
    guard("PtlAtomicSync", || lib_read().map(|_| ()))
}

/// Bundles are a hint; the engine sends as soon as it can either way.
#[no_mangle]
pub extern "C" fn PtlStartBundle(ni_handle: c::ptl_handle_ni_t) -> c_int {
    guard("PtlStartBundle", || {
        ni_of_handle(&*lib_read()?, ni_handle).map(|_| ())
    })
}

/// See [`PtlStartBundle`].
#[no_mangle]
pub extern "C" fn PtlEndBundle(ni_handle: c::ptl_handle_ni_t) -> c_int {
    guard("PtlEndBundle", || {
        ni_of_handle(&*lib_read()?, ni_handle).map(|_| ())
    })
}

/// `PTL_OK` when two handles name the same object, `PTL_FAIL` otherwise.
#[no_mangle]
pub extern "C" fn PtlHandleIsEqual(
    handle1: c::ptl_handle_any_t,
    handle2: c::ptl_handle_any_t,
) -> c_int {
    if handle1 == handle2 {
        OK
    } else {
        FAIL
    }
}

// ---------------------------------------------------------------------------------------
// Not offered by the engine yet: triggered appends and unlinks of match entries.

macro_rules! unsupported {
    ($(#[$doc:meta] $name:ident($($arg:ident: $ty:ty),*) => $code:expr;)*) => {$(
        #[$doc]
        #[no_mangle]
        pub extern "C" fn $name($($arg: $ty),*) -> c_int {
            $(let _ = $arg;)*
            guard(stringify!($name), || lib_read().and(Err($code)))
        }
    )*};
}

unsupported! {
    /// Not supported (no triggered list-entry operations): `PTL_NO_SPACE`.
    PtlTriggeredMEAppend(a: c::ptl_handle_ni_t, b: c::ptl_pt_index_t, c_: *const c::ptl_me_t,
        d: c::ptl_list_t, e: *mut c_void, f: *mut c::ptl_handle_me_t,
        g: c::ptl_handle_ct_t, h: c::ptl_size_t) => cv::NO_SPACE;
    /// Not supported (no triggered list-entry operations): `PTL_NO_SPACE`.
    PtlTriggeredMEUnlink(a: c::ptl_handle_me_t, b: c::ptl_handle_ct_t, c_: c::ptl_size_t)
        => cv::NO_SPACE;
}
