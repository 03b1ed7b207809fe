//! The `extern "C"` functions of `portals4.h`. Each one catches panics (a panic is
//! `PTL_FAIL`, never an unwind into C), checks its pointers and handles, converts its
//! arguments and calls the engine. This module holds the crate's `unsafe`: reading the
//! caller's structs and unions, writing its out-pointers, and viewing its memory as regions.

use std::ffi::{c_int, c_uint, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use portals4_sys as c;
use rgasnet_portals::engine::triggered::HeldFetch;
use rgasnet_portals::engine::unexpected::{SearchOp, SearchSpec};
use rgasnet_portals::engine::{
    AtomicArgs, EqGet, FetchArgs, GetArgs, LeSpec, MdSpec, MeSpec, PutArgs, RemoteAddr,
};
use rgasnet_portals::interface::Ni;
use rgasnet_portals::types::{Addressing, CtEvent, ListKind, ProcessId, SrIndex};
use rgasnet_portals::{PtlError, Region};
use rgasnet_pshm::ExternalMemory;

use crate::convert::{self as cv, Code, ARG_INVALID, FAIL, NO_INIT, OK};
use crate::state::{self, Lib, MdRef, OpenError, Window};
use crate::table::{self, Obj};

pub mod objects;
pub mod ops;
pub mod triggered;

/// Set by `PtlAbort`: every wait returns `PTL_ABORTED`.
static ABORTED: AtomicBool = AtomicBool::new(false);
/// How often a long wait looks at [`ABORTED`].
const ABORT_CHECK: Duration = Duration::from_millis(20);

type R = Result<(), Code>;

/// Runs `f`, turning a panic into `PTL_FAIL` (with a line on stderr).
fn guard(call: &str, f: impl FnOnce() -> R) -> Code {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => OK,
        Ok(Err(code)) => code,
        Err(_) => {
            eprintln!("{call}: internal error (a panic in rgasnet's libportals)");
            FAIL
        }
    }
}

/// The C code of an engine error.
fn fail(e: PtlError) -> Code {
    cv::code(&e)
}

/// Writes `v` through `p`; `PTL_ARG_INVALID` if `p` is null.
fn out<T>(p: *mut T, v: T) -> R {
    if p.is_null() {
        return Err(ARG_INVALID);
    }
    // SAFETY: non-null (checked); the API's contract: `p` points to a writable `T`.
    unsafe { p.write(v) };
    Ok(())
}

/// Reads `*p`; `PTL_ARG_INVALID` if `p` is null.
fn read<T: Copy>(p: *const T) -> Result<T, Code> {
    if p.is_null() {
        return Err(ARG_INVALID);
    }
    // SAFETY: non-null (checked); the API's contract: `p` points to a readable `T`.
    Ok(unsafe { p.read() })
}

/// The caller's array of `n` elements at `p` (`PTL_ARG_INVALID` if `p` is null).
fn array<'a, T>(p: *const T, n: usize) -> Result<&'a [T], Code> {
    if p.is_null() {
        return Err(ARG_INVALID);
    }
    // SAFETY: non-null (checked); the API's contract: `p` points to `n` readable elements
    // that outlive the call (the slice does not leave it).
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// Copies `v` to the caller's array at `p` (`PTL_ARG_INVALID` if `p` is null and `v` is not
/// empty).
fn write_array<T: Copy>(p: *mut T, v: &[T]) -> R {
    if v.is_empty() {
        return Ok(());
    }
    if p.is_null() {
        return Err(ARG_INVALID);
    }
    // SAFETY: non-null (checked); the API's contract: `p` has room for the `v.len()`
    // elements the caller said it has (the callers never write more); `v` is Rust memory
    // that cannot overlap it.
    unsafe { std::ptr::copy_nonoverlapping(v.as_ptr(), p, v.len()) };
    Ok(())
}

/// The library, which must be initialized.
fn lib_read() -> Result<std::sync::RwLockReadGuard<'static, Lib>, Code> {
    let lib = state::read();
    if lib.init == 0 {
        return Err(NO_INIT);
    }
    Ok(lib)
}

fn lib_write() -> Result<std::sync::RwLockWriteGuard<'static, Lib>, Code> {
    let lib = state::write();
    if lib.init == 0 {
        return Err(NO_INIT);
    }
    Ok(lib)
}

/// The NI a handle of any kind names.
fn ni_for(lib: &Lib, h: u32) -> Result<Ni, Code> {
    lib.ni(table::ni_of(h)).cloned().ok_or(ARG_INVALID)
}

/// The NI an NI handle names.
fn ni_of_handle(lib: &Lib, h: u32) -> Result<Ni, Code> {
    if table::kind_of(h) != table::KIND_NI || h != table::ni_handle(table::ni_of(h)) {
        return Err(ARG_INVALID);
    }
    ni_for(lib, h)
}

/// A region over the caller's `length` bytes at `start`, and the offset of `start` in it.
/// The region covers the 8-byte words around the bytes (the engine's unit) and reports the
/// words' address as its origin, so events carry C addresses.
fn region_over(start: *mut c_void, length: u64) -> Result<(Region, u64), Code> {
    let len = usize::try_from(length).map_err(|_| ARG_INVALID)?;
    let addr = start as usize;
    if len == 0 {
        // No bytes, but events still report the caller's address.
        // SAFETY: an empty memory (null, no words) reaches nothing.
        let empty = unsafe { ExternalMemory::new(std::ptr::null_mut(), 0) }.ok_or(ARG_INVALID)?;
        let region = Region::with_memory_at(Box::new(empty), 0, addr as u64).ok_or(ARG_INVALID)?;
        return Ok((region, 0));
    }
    if start.is_null() {
        return Err(ARG_INVALID);
    }
    let end = addr.checked_add(len).ok_or(ARG_INVALID)?;
    let base = addr & !7;
    let words_end = end.checked_next_multiple_of(8).ok_or(ARG_INVALID)?;
    // SAFETY: the Portals contract for MDs, LEs and MEs: the caller's `length` bytes at
    // `start` stay mapped and are reached by the program only through C pointers until the
    // object is released or unlinked. The region widens them to whole 8-byte words, which
    // lie in the same pages; the engine writes only the bytes an operation targets (partial
    // words are merged), so the neighbours are read but never changed.
    let memory =
        unsafe { ExternalMemory::new(base as *mut u8, words_end - base) }.ok_or(ARG_INVALID)?;
    let region = Region::with_memory_at(Box::new(memory), words_end - base, base as u64)
        .ok_or(ARG_INVALID)?;
    Ok((region, (addr - base) as u64))
}

/// A process id argument, read as the NI's addressing says.
fn target(ni: &Ni, id: c::ptl_process_t) -> ProcessId {
    match ni.kind().addressing {
        // SAFETY: on a logical NI the caller filled the `rank` member.
        Addressing::Logical => cv::process(Addressing::Logical, unsafe { id.rank }, 0, 0),
        Addressing::Physical => {
            // SAFETY: on a physical NI the caller filled the `phys` member.
            let p = unsafe { id.phys };
            cv::process(Addressing::Physical, 0, p.nid, p.pid)
        }
    }
}

fn eq_opt(lib: &Lib, ni: usize, h: u32) -> Result<Option<rgasnet_portals::engine::EqHandle>, Code> {
    if h == cv::EQ_NONE {
        return Ok(None);
    }
    match lib.eqs.get(h) {
        Some(o) if o.ni == ni => Ok(Some(o.h)),
        _ => Err(ARG_INVALID),
    }
}

fn ct_opt(lib: &Lib, ni: usize, h: u32) -> Result<Option<rgasnet_portals::engine::CtHandle>, Code> {
    if h == cv::CT_NONE {
        return Ok(None);
    }
    match lib.cts.get(h) {
        Some(o) if o.ni == ni => Ok(Some(o.h)),
        _ => Err(ARG_INVALID),
    }
}

fn timeout_of(ms: c_uint) -> Option<Duration> {
    (ms != cv::TIME_FOREVER).then(|| Duration::from_millis(u64::from(ms)))
}

/// `PTL_ABORTED` once `PtlAbort` was called: checked first by every wait, before its
/// arguments (a wait on a handle freed meanwhile still reports the abort).
fn aborted() -> R {
    // Acquire: pairs with PtlAbort's release store (nothing else is published by it).
    if ABORTED.load(Ordering::Acquire) {
        return Err(cv::ABORTED);
    }
    Ok(())
}

/// Runs `attempt` with slices of `timeout` until it answers, the time is up (`on_timeout`)
/// or `PtlAbort` is called (`PTL_ABORTED`).
fn wait_sliced<T>(
    timeout: Option<Duration>,
    on_timeout: Code,
    mut attempt: impl FnMut(Duration) -> Result<Option<T>, Code>,
) -> Result<T, Code> {
    aborted()?;
    let deadline = timeout.map(|t| Instant::now() + t);
    loop {
        aborted()?;
        let slice = match deadline {
            Some(d) => d.saturating_duration_since(Instant::now()).min(ABORT_CHECK),
            None => ABORT_CHECK,
        };
        if let Some(v) = attempt(slice)? {
            return Ok(v);
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(on_timeout);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Library and NIs

/// Initializes the library (counted: each call needs a `PtlFini`).
#[no_mangle]
pub extern "C" fn PtlInit() -> c_int {
    guard("PtlInit", || {
        let mut lib = state::write();
        lib.init += 1;
        // Release: see wait_sliced.
        ABORTED.store(false, Ordering::Release);
        Ok(())
    })
}

/// Ends the library after the last `PtlInit`: closes every NI still open.
#[no_mangle]
pub extern "C" fn PtlFini() {
    guard("PtlFini", || {
        let mut lib = state::write();
        if lib.init == 0 {
            return Ok(());
        }
        lib.init -= 1;
        if lib.init == 0 {
            lib.close_all();
        }
        Ok(())
    });
}

/// Makes every wait of every thread return `PTL_ABORTED`.
#[no_mangle]
pub extern "C" fn PtlAbort() {
    // Release: see wait_sliced.
    ABORTED.store(true, Ordering::Release);
}

/// Opens an NI of the kind `options` names (or counts one more use of it).
#[no_mangle]
pub extern "C" fn PtlNIInit(
    iface: c::ptl_interface_t,
    options: c_uint,
    pid: c::ptl_pid_t,
    desired: *const c::ptl_ni_limits_t,
    actual: *mut c::ptl_ni_limits_t,
    ni_handle: *mut c::ptl_handle_ni_t,
) -> c_int {
    guard("PtlNIInit", || {
        // One interface per process: the default, or the first (RGASNET_IFACE names it).
        if iface != 0xffff_ffff && iface != 0 {
            return Err(ARG_INVALID);
        }
        let kind = cv::ni_kind(options).ok_or(ARG_INVALID)?;
        if ni_handle.is_null() {
            return Err(ARG_INVALID);
        }
        let desired = if desired.is_null() {
            None
        } else {
            Some(cv::limits(&read(desired)?))
        };
        let pid = (pid != cv::C_PID_ANY).then_some(pid);
        let mut lib = lib_write()?;
        let limits = lib.ni_init(kind, pid, desired).map_err(|e| match e {
            OpenError::PidInUse(_) => cv::PID_IN_USE,
            OpenError::Other(msg) => {
                eprintln!("PtlNIInit: {msg}");
                FAIL
            }
        })?;
        if !actual.is_null() {
            out(actual, cv::c_limits(&limits))?;
        }
        out(ni_handle, table::ni_handle(usize::from(kind.index())))
    })
}

/// Drops one use of an NI; the last closes it and frees its objects.
#[no_mangle]
pub extern "C" fn PtlNIFini(ni_handle: c::ptl_handle_ni_t) -> c_int {
    guard("PtlNIFini", || {
        let mut lib = lib_write()?;
        ni_of_handle(&lib, ni_handle)?;
        if lib.ni_fini(table::ni_of(ni_handle)) {
            Ok(())
        } else {
            Err(ARG_INVALID)
        }
    })
}

/// Reads a status register.
#[no_mangle]
pub extern "C" fn PtlNIStatus(
    ni_handle: c::ptl_handle_ni_t,
    status_register: c::ptl_sr_index_t,
    status: *mut c::ptl_sr_value_t,
) -> c_int {
    guard("PtlNIStatus", || {
        let sr = match status_register {
            c::ptl_sr_index_t_PTL_SR_DROP_COUNT => SrIndex::DropCount,
            c::ptl_sr_index_t_PTL_SR_PERMISSION_VIOLATIONS => SrIndex::PermissionViolations,
            c::ptl_sr_index_t_PTL_SR_OPERATION_VIOLATIONS => SrIndex::OperationViolations,
            _ => return Err(ARG_INVALID),
        };
        let v = ni_of_handle(&*lib_read()?, ni_handle)?
            .status(sr)
            .map_err(fail)?;
        out(status, c_int::try_from(v).unwrap_or(c_int::MAX))
    })
}

/// The NI an object handle belongs to.
#[no_mangle]
pub extern "C" fn PtlNIHandle(
    handle: c::ptl_handle_any_t,
    ni_handle: *mut c::ptl_handle_ni_t,
) -> c_int {
    guard("PtlNIHandle", || {
        let lib = lib_read()?;
        let live = match table::kind_of(handle) {
            table::KIND_NI => handle == table::ni_handle(table::ni_of(handle)),
            table::KIND_EQ => lib.eqs.get(handle).is_some(),
            table::KIND_CT => lib.cts.get(handle).is_some(),
            table::KIND_MD => lib.mds.get(handle).is_some(),
            table::KIND_ME => lib.mes.get(handle).is_some(),
            table::KIND_LE => lib.les.get(handle).is_some(),
            _ => false,
        };
        if !live || lib.ni(table::ni_of(handle)).is_none() {
            return Err(ARG_INVALID);
        }
        out(ni_handle, table::ni_handle(table::ni_of(handle)))
    })
}

/// Sets a logical NI's rank map (physical ids, by rank).
#[no_mangle]
pub extern "C" fn PtlSetMap(
    ni_handle: c::ptl_handle_ni_t,
    map_size: c::ptl_size_t,
    mapping: *const c::ptl_process_t,
) -> c_int {
    guard("PtlSetMap", || {
        let ni = ni_of_handle(&*lib_read()?, ni_handle)?;
        let n = usize::try_from(map_size).map_err(|_| ARG_INVALID)?;
        if n == 0 {
            return Err(ARG_INVALID);
        }
        let map: Vec<rgasnet_portals::types::PhysId> = array(mapping, n)?
            .iter()
            .map(|id| {
                // SAFETY: a rank map holds physical ids (the API's contract).
                let p = unsafe { id.phys };
                rgasnet_portals::types::PhysId {
                    nid: p.nid,
                    pid: p.pid,
                }
            })
            .collect();
        ni.set_map(&map).map_err(fail)
    })
}

/// Copies a logical NI's rank map.
#[no_mangle]
pub extern "C" fn PtlGetMap(
    ni_handle: c::ptl_handle_ni_t,
    map_size: c::ptl_size_t,
    mapping: *mut c::ptl_process_t,
    actual_map_size: *mut c::ptl_size_t,
) -> c_int {
    guard("PtlGetMap", || {
        let ni = ni_of_handle(&*lib_read()?, ni_handle)?;
        let map = ni.get_map().map_err(fail)?;
        out(actual_map_size, map.len() as u64)?;
        let n = usize::try_from(map_size)
            .map_err(|_| ARG_INVALID)?
            .min(map.len());
        let ids: Vec<c::ptl_process_t> = map
            .iter()
            .take(n)
            .map(|id| cv::c_process(ProcessId::Phys(*id)))
            .collect();
        write_array(mapping, &ids)
    })
}

/// The user id of the process.
#[no_mangle]
pub extern "C" fn PtlGetUid(ni_handle: c::ptl_handle_ni_t, uid: *mut c::ptl_uid_t) -> c_int {
    guard("PtlGetUid", || {
        let v = ni_of_handle(&*lib_read()?, ni_handle)?
            .get_uid()
            .map_err(fail)?;
        out(uid, v)
    })
}

/// The process's id on the NI: its rank (logical) or physical id.
#[no_mangle]
pub extern "C" fn PtlGetId(ni_handle: c::ptl_handle_ni_t, id: *mut c::ptl_process_t) -> c_int {
    guard("PtlGetId", || {
        let v = ni_of_handle(&*lib_read()?, ni_handle)?
            .get_id()
            .map_err(fail)?;
        out(id, cv::c_process(v))
    })
}

/// The process's physical id (`nid` = IPv4 address, `pid` = UDP port).
#[no_mangle]
pub extern "C" fn PtlGetPhysId(ni_handle: c::ptl_handle_ni_t, id: *mut c::ptl_process_t) -> c_int {
    guard("PtlGetPhysId", || {
        let v = ni_of_handle(&*lib_read()?, ni_handle)?
            .get_phys_id()
            .map_err(fail)?;
        out(id, cv::c_process(ProcessId::Phys(v)))
    })
}

// ---------------------------------------------------------------------------------------
// Portal table entries

/// Allocates a portal table entry (`PTL_PT_ANY`: the lowest free index).
#[no_mangle]
pub extern "C" fn PtlPTAlloc(
    ni_handle: c::ptl_handle_ni_t,
    options: c_uint,
    eq_handle: c::ptl_handle_eq_t,
    pt_index_req: c::ptl_pt_index_t,
    pt_index: *mut c::ptl_pt_index_t,
) -> c_int {
    guard("PtlPTAlloc", || {
        let lib = lib_read()?;
        let ni = ni_of_handle(&lib, ni_handle)?;
        let opts = cv::pt_options(options).ok_or(ARG_INVALID)?;
        let eq = eq_opt(&lib, table::ni_of(ni_handle), eq_handle)?;
        drop(lib);
        if pt_index.is_null() {
            return Err(ARG_INVALID);
        }
        let req = if pt_index_req == cv::C_PT_ANY {
            rgasnet_portals::types::PT_ANY
        } else {
            pt_index_req
        };
        // The reference implementation's bounds: an access past an entry's end moves nothing.
        let opts = opts | rgasnet_portals::types::PtOptions::PAST_END_EMPTY;
        let got = ni.pt_alloc(opts, eq, req).map_err(fail)?;
        out(pt_index, got)
    })
}

fn pt_call(
    call: &str,
    ni_handle: c::ptl_handle_ni_t,
    f: impl FnOnce(&Ni) -> Result<(), PtlError>,
) -> c_int {
    guard(call, || {
        let ni = ni_of_handle(&*lib_read()?, ni_handle)?;
        f(&ni).map_err(fail)
    })
}

/// Frees a portal table entry.
#[no_mangle]
pub extern "C" fn PtlPTFree(ni_handle: c::ptl_handle_ni_t, pt_index: c::ptl_pt_index_t) -> c_int {
    let rc = pt_call("PtlPTFree", ni_handle, |ni| ni.pt_free(pt_index));
    if rc == OK {
        state::write().reap();
    }
    rc
}

/// Disables a portal table entry.
#[no_mangle]
pub extern "C" fn PtlPTDisable(
    ni_handle: c::ptl_handle_ni_t,
    pt_index: c::ptl_pt_index_t,
) -> c_int {
    pt_call("PtlPTDisable", ni_handle, |ni| ni.pt_disable(pt_index))
}

/// Enables a portal table entry (after flow control disabled it).
#[no_mangle]
pub extern "C" fn PtlPTEnable(ni_handle: c::ptl_handle_ni_t, pt_index: c::ptl_pt_index_t) -> c_int {
    pt_call("PtlPTEnable", ni_handle, |ni| ni.pt_enable(pt_index))
}
