//! Event queues, counting events, memory descriptors, list and match entries.

use super::*;

// ---------------------------------------------------------------------------------------
// Event queues

/// Allocates an event queue of `count` events.
#[no_mangle]
pub extern "C" fn PtlEQAlloc(
    ni_handle: c::ptl_handle_ni_t,
    count: c::ptl_size_t,
    eq_handle: *mut c::ptl_handle_eq_t,
) -> c_int {
    guard("PtlEQAlloc", || {
        let mut lib = lib_write()?;
        let ni = ni_of_handle(&lib, ni_handle)?;
        if eq_handle.is_null() || count == 0 {
            return Err(ARG_INVALID);
        }
        let count = usize::try_from(count).map_err(|_| ARG_INVALID)?;
        let h = ni.eq_alloc(count).map_err(fail)?;
        let ni_index = table::ni_of(ni_handle);
        match lib.eqs.insert(Obj { ni: ni_index, h }) {
            Some(ch) => out(eq_handle, ch),
            None => {
                let _ = ni.eq_free(h);
                Err(cv::NO_SPACE)
            }
        }
    })
}

/// Frees an event queue.
#[no_mangle]
pub extern "C" fn PtlEQFree(eq_handle: c::ptl_handle_eq_t) -> c_int {
    guard("PtlEQFree", || {
        let mut lib = lib_write()?;
        let o = lib.eqs.get(eq_handle).ok_or(ARG_INVALID)?;
        match ni_for(&lib, eq_handle)?.eq_free(o.h) {
            Ok(()) => {}
            // Still posted to by a PT or MD: freed when they go (see Lib::zombie_eqs).
            Err(PtlError::InUse { .. }) => lib.zombie_eqs.push((o.ni, o.h)),
            Err(e) => return Err(fail(e)),
        }
        lib.eqs.remove(eq_handle);
        Ok(())
    })
}

/// The NI and engine handle of an EQ.
fn eq_of(eq_handle: u32) -> Result<(Ni, rgasnet_portals::engine::EqHandle), Code> {
    let lib = lib_read()?;
    let o = lib.eqs.get(eq_handle).ok_or(ARG_INVALID)?;
    Ok((ni_for(&lib, eq_handle)?, o.h))
}

/// Writes what an EQ read gave: `PTL_OK`, `PTL_EQ_DROPPED` (an event, after a loss) or
/// `PTL_EQ_EMPTY`.
fn deliver(got: EqGet, event: *mut c::ptl_event_t) -> R {
    match got {
        EqGet::Event(ev) => out(event, cv::c_event(&ev)),
        EqGet::Dropped(ev) => {
            out(event, cv::c_event(&ev))?;
            Err(cv::EQ_DROPPED)
        }
        EqGet::Empty => Err(cv::EQ_EMPTY),
    }
}

/// Takes the next event, if any (`PTL_EQ_EMPTY` otherwise).
#[no_mangle]
pub extern "C" fn PtlEQGet(eq_handle: c::ptl_handle_eq_t, event: *mut c::ptl_event_t) -> c_int {
    guard("PtlEQGet", || {
        if event.is_null() {
            return Err(ARG_INVALID);
        }
        let (ni, h) = eq_of(eq_handle)?;
        deliver(ni.eq_get(h).map_err(fail)?, event)
    })
}

/// Waits for the next event.
#[no_mangle]
pub extern "C" fn PtlEQWait(eq_handle: c::ptl_handle_eq_t, event: *mut c::ptl_event_t) -> c_int {
    guard("PtlEQWait", || {
        aborted()?;
        if event.is_null() {
            return Err(ARG_INVALID);
        }
        let (ni, h) = eq_of(eq_handle)?;
        let got = wait_sliced(None, cv::EQ_EMPTY, |slice| {
            match ni.eq_wait(h, Some(slice)) {
                Ok(got) => Ok(Some(got)),
                Err(PtlError::EqEmpty) => Ok(None),
                Err(e) => Err(fail(e)),
            }
        })?;
        deliver(got, event)
    })
}

/// Waits up to `timeout` ms for an event on any of `size` EQs; `*which` is its index.
#[no_mangle]
pub extern "C" fn PtlEQPoll(
    eq_handles: *const c::ptl_handle_eq_t,
    size: c_uint,
    timeout: c::ptl_time_t,
    event: *mut c::ptl_event_t,
    which: *mut c_uint,
) -> c_int {
    guard("PtlEQPoll", || {
        aborted()?;
        if eq_handles.is_null() || size == 0 || event.is_null() || which.is_null() {
            return Err(ARG_INVALID);
        }
        let mut eqs = Vec::with_capacity(size as usize);
        let mut ni = None;
        for &handle in array(eq_handles, size as usize)? {
            let (n, h) = eq_of(handle)?;
            ni.get_or_insert(n);
            eqs.push(h);
        }
        let ni = ni.ok_or(ARG_INVALID)?;
        let iface = ni.interface().clone();
        let (got, i) = wait_sliced(timeout_of(timeout), cv::EQ_EMPTY, |slice| {
            match iface.eq_poll(&eqs, Some(slice)) {
                Ok(r) => Ok(Some(r)),
                Err(PtlError::EqEmpty) => Ok(None),
                Err(e) => Err(fail(e)),
            }
        })?;
        out(which, i as c_uint)?;
        deliver(got, event)
    })
}

// ---------------------------------------------------------------------------------------
// Counting events

/// Allocates a counting event (0 successes, 0 failures).
#[no_mangle]
pub extern "C" fn PtlCTAlloc(
    ni_handle: c::ptl_handle_ni_t,
    ct_handle: *mut c::ptl_handle_ct_t,
) -> c_int {
    guard("PtlCTAlloc", || {
        let mut lib = lib_write()?;
        let ni = ni_of_handle(&lib, ni_handle)?;
        if ct_handle.is_null() {
            return Err(ARG_INVALID);
        }
        let h = ni.ct_alloc().map_err(fail)?;
        match lib.cts.insert(Obj {
            ni: table::ni_of(ni_handle),
            h,
        }) {
            Some(ch) => out(ct_handle, ch),
            None => {
                let _ = ni.ct_free(h);
                Err(cv::NO_SPACE)
            }
        }
    })
}

/// Frees a counting event.
#[no_mangle]
pub extern "C" fn PtlCTFree(ct_handle: c::ptl_handle_ct_t) -> c_int {
    guard("PtlCTFree", || {
        let mut lib = lib_write()?;
        let o = lib.cts.get(ct_handle).ok_or(ARG_INVALID)?;
        match ni_for(&lib, ct_handle)?.ct_free(o.h) {
            Ok(()) => {}
            // Still counted on by an MD or entry: freed when they go (see Lib::zombie_cts).
            Err(PtlError::InUse { .. }) => lib.zombie_cts.push((o.ni, o.h)),
            Err(e) => return Err(fail(e)),
        }
        lib.cts.remove(ct_handle);
        Ok(())
    })
}

/// The NI and engine handle of a CT.
pub(super) fn ct_of(ct_handle: u32) -> Result<(Ni, rgasnet_portals::engine::CtHandle), Code> {
    let lib = lib_read()?;
    let o = lib.cts.get(ct_handle).ok_or(ARG_INVALID)?;
    Ok((ni_for(&lib, ct_handle)?, o.h))
}

/// Reads a counting event.
#[no_mangle]
pub extern "C" fn PtlCTGet(ct_handle: c::ptl_handle_ct_t, event: *mut c::ptl_ct_event_t) -> c_int {
    guard("PtlCTGet", || {
        let (ni, h) = ct_of(ct_handle)?;
        out(event, cv::c_ct(ni.ct_get(h).map_err(fail)?))
    })
}

/// Waits until the success count reaches `test` or a failure is counted.
#[no_mangle]
pub extern "C" fn PtlCTWait(
    ct_handle: c::ptl_handle_ct_t,
    test: c::ptl_size_t,
    event: *mut c::ptl_ct_event_t,
) -> c_int {
    guard("PtlCTWait", || {
        aborted()?;
        if event.is_null() {
            return Err(ARG_INVALID);
        }
        let (ni, h) = ct_of(ct_handle)?;
        let v = wait_sliced(None, cv::CT_NONE_REACHED, |slice| {
            match ni.ct_wait(h, test, Some(slice)) {
                Ok(v) => Ok(Some(v)),
                Err(PtlError::CtNoneReached) => Ok(None),
                Err(e) => Err(fail(e)),
            }
        })?;
        out(event, cv::c_ct(v))
    })
}

/// Waits up to `timeout` ms until one of `size` counting events reaches its test.
#[no_mangle]
pub extern "C" fn PtlCTPoll(
    ct_handles: *const c::ptl_handle_ct_t,
    tests: *const c::ptl_size_t,
    size: c_uint,
    timeout: c::ptl_time_t,
    event: *mut c::ptl_ct_event_t,
    which: *mut c_uint,
) -> c_int {
    guard("PtlCTPoll", || {
        aborted()?;
        if ct_handles.is_null()
            || tests.is_null()
            || size == 0
            || event.is_null()
            || which.is_null()
        {
            return Err(ARG_INVALID);
        }
        let mut cts = Vec::with_capacity(size as usize);
        let mut thresholds = Vec::with_capacity(size as usize);
        let mut ni = None;
        let handles = array(ct_handles, size as usize)?;
        let tests = array(tests, size as usize)?;
        for (&ct, &test) in handles.iter().zip(tests) {
            let (n, h) = ct_of(ct)?;
            ni.get_or_insert(n);
            cts.push(h);
            thresholds.push(test);
        }
        let ni = ni.ok_or(ARG_INVALID)?;
        let (v, i) = wait_sliced(timeout_of(timeout), cv::CT_NONE_REACHED, |slice| {
            match ni.ct_poll(&cts, &thresholds, Some(slice)) {
                Ok(r) => Ok(Some(r)),
                Err(PtlError::CtNoneReached) => Ok(None),
                Err(e) => Err(fail(e)),
            }
        })?;
        out(which, i as c_uint)?;
        out(event, cv::c_ct(v))
    })
}

/// Sets a counting event.
#[no_mangle]
pub extern "C" fn PtlCTSet(ct_handle: c::ptl_handle_ct_t, new_ct: c::ptl_ct_event_t) -> c_int {
    guard("PtlCTSet", || {
        let (ni, h) = ct_of(ct_handle)?;
        let v = CtEvent {
            success: new_ct.success,
            failure: new_ct.failure,
        };
        ni.ct_set(h, v).map_err(fail)
    })
}

/// Adds to a counting event.
#[no_mangle]
pub extern "C" fn PtlCTInc(ct_handle: c::ptl_handle_ct_t, increment: c::ptl_ct_event_t) -> c_int {
    guard("PtlCTInc", || {
        let (ni, h) = ct_of(ct_handle)?;
        let v = CtEvent {
            success: increment.success,
            failure: increment.failure,
        };
        ni.ct_inc(h, v).map_err(fail)
    })
}

// ---------------------------------------------------------------------------------------
// Memory descriptors

/// How long `PtlMDRelease` waits for the operations still pending on an MD.
const MD_RELEASE_WAIT: Duration = Duration::from_secs(1);

/// Binds a memory descriptor over the caller's memory (a window when it is longer than
/// [`state::WINDOW_MIN`]).
#[no_mangle]
pub extern "C" fn PtlMDBind(
    ni_handle: c::ptl_handle_ni_t,
    md: *const c::ptl_md_t,
    md_handle: *mut c::ptl_handle_md_t,
) -> c_int {
    guard("PtlMDBind", || {
        let d = read(md)?;
        if md_handle.is_null() || d.options & cv::IOVEC != 0 {
            // The engine has no scatter/gather MDs (max_iovecs is 0).
            return Err(ARG_INVALID);
        }
        let mut lib = lib_write()?;
        let ni = ni_of_handle(&lib, ni_handle)?;
        let ni_index = table::ni_of(ni_handle);
        let options = cv::md_options(d.options).ok_or(ARG_INVALID)?;
        let eq = eq_opt(&lib, ni_index, d.eq_handle)?;
        let ct = ct_opt(&lib, ni_index, d.ct_handle)?;
        let md_ref = if d.length >= state::WINDOW_MIN {
            let (empty, _) = region_over(std::ptr::null_mut(), 0)?;
            let anchor = ni
                .md_bind(MdSpec {
                    region: empty,
                    offset: 0,
                    length: 0,
                    options,
                    eq,
                    ct,
                })
                .map_err(fail)?;
            MdRef::Window(lib.add_window(Window {
                start: d.start as usize,
                length: d.length,
                options,
                eq,
                ct,
                pieces: Vec::new(),
                anchor,
            }))
        } else {
            let (region, offset) = region_over(d.start, d.length)?;
            let spec = MdSpec {
                region,
                offset,
                length: d.length,
                options,
                eq,
                ct,
            };
            MdRef::Bound(ni.md_bind(spec).map_err(fail)?)
        };
        match lib.mds.insert(Obj {
            ni: ni_index,
            h: md_ref,
        }) {
            Some(ch) => out(md_handle, ch),
            None => {
                release_now(&mut lib, &ni, md_ref);
                Err(cv::NO_SPACE)
            }
        }
    })
}

/// Releases what an MD handle stood for, without waiting.
fn release_now(lib: &mut Lib, ni: &Ni, md: MdRef) {
    match md {
        MdRef::Bound(h) => {
            let _ = ni.md_release(h);
        }
        MdRef::Window(w) => {
            if let Some(win) = lib.windows.get_mut(w).and_then(Option::take) {
                for p in win.pieces.into_iter().chain([win.anchor]) {
                    let _ = ni.md_release(p);
                }
            }
        }
    }
}

/// Releases an engine MD, giving acknowledgements and replies still on their way (the
/// program waited for the send, not for them) a short wait: the standard's PTL_IN_USE only
/// if they stay away.
fn release_waiting(ni: &Ni, md: rgasnet_portals::engine::MdHandle) -> R {
    let until = Instant::now() + MD_RELEASE_WAIT;
    loop {
        match ni.md_release(md) {
            Ok(()) => return Ok(()),
            Err(PtlError::InUse { .. }) if Instant::now() < until => {
                ni.interface().progress().map_err(fail)?;
                std::thread::yield_now();
            }
            Err(PtlError::InvalidHandle { .. }) => return Ok(()),
            Err(e) => return Err(fail(e)),
        }
    }
}

/// Releases a memory descriptor (`PTL_IN_USE` while operations on it stay pending).
#[no_mangle]
pub extern "C" fn PtlMDRelease(md_handle: c::ptl_handle_md_t) -> c_int {
    guard("PtlMDRelease", || {
        let (ni, md, pieces) = {
            let lib = lib_read()?;
            let o = lib.mds.get(md_handle).ok_or(ARG_INVALID)?;
            let pieces = match o.h {
                MdRef::Bound(_) => Vec::new(),
                // The pieces, then the anchor that holds the EQ and CT.
                MdRef::Window(w) => lib
                    .windows
                    .get(w)
                    .and_then(Option::as_ref)
                    .map(|win| {
                        let mut all = win.pieces.clone();
                        all.push(win.anchor);
                        all
                    })
                    .unwrap_or_default(),
            };
            (ni_for(&lib, md_handle)?, o.h, pieces)
        };
        match md {
            MdRef::Bound(h) => release_waiting(&ni, h)?,
            MdRef::Window(_) => {
                for p in pieces {
                    release_waiting(&ni, p)?;
                }
            }
        }
        let mut lib = lib_write()?;
        if let MdRef::Window(w) = md {
            if let Some(slot) = lib.windows.get_mut(w) {
                *slot = None;
            }
        }
        lib.mds.remove(md_handle);
        lib.reap();
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------
// List and match entries

fn list_of(ptl_list: c::ptl_list_t) -> Result<ListKind, Code> {
    match u32::from(ptl_list) {
        c::PTL_PRIORITY_LIST => Ok(ListKind::Priority),
        c::PTL_OVERFLOW_LIST => Ok(ListKind::Overflow),
        _ => Err(ARG_INVALID),
    }
}

/// Frees the table slots of entries the engine unlinked by itself (use-once entries that
/// were used), when a table runs out of slots.
fn sweep_entries(lib: &mut Lib, me: bool) {
    let nis: Vec<Option<Ni>> = (0..4).map(|i| lib.ni(i).cloned()).collect();
    let dead = |o: &Obj<rgasnet_portals::engine::MeHandle>| {
        nis[o.ni].as_ref().is_none_or(|ni| !ni.entry_linked(o.h))
    };
    if me {
        lib.mes.sweep(dead);
    } else {
        lib.les.sweep(dead);
    }
}

/// Links an entry: `link` appends it to the engine (given the library, the NI and its
/// index); its handle goes to the ME or LE table.
fn append_entry(
    ni_handle: u32,
    handle_out: *mut u32,
    me: bool,
    link: impl FnOnce(&Lib, &Ni, usize) -> Result<rgasnet_portals::engine::MeHandle, Code>,
) -> R {
    if handle_out.is_null() {
        return Err(ARG_INVALID);
    }
    let mut lib = lib_write()?;
    let ni = ni_of_handle(&lib, ni_handle)?;
    let ni_index = table::ni_of(ni_handle);
    if (me && lib.mes.full()) || (!me && lib.les.full()) {
        sweep_entries(&mut lib, me);
    }
    let h = link(&lib, &ni, ni_index)?;
    let tab = if me { &mut lib.mes } else { &mut lib.les };
    match tab.insert(Obj { ni: ni_index, h }) {
        Some(ch) => out(handle_out, ch),
        None => {
            let _ = if me { ni.me_unlink(h) } else { ni.le_unlink(h) };
            Err(cv::NO_SPACE)
        }
    }
}

/// Appends a list entry (non-matching NIs).
#[no_mangle]
pub extern "C" fn PtlLEAppend(
    ni_handle: c::ptl_handle_ni_t,
    pt_index: c::ptl_pt_index_t,
    le: *const c::ptl_le_t,
    ptl_list: c::ptl_list_t,
    user_ptr: *mut c_void,
    le_handle: *mut c::ptl_handle_le_t,
) -> c_int {
    guard("PtlLEAppend", || {
        let d = read(le)?;
        if d.options & cv::IOVEC != 0 {
            return Err(ARG_INVALID);
        }
        let list = list_of(ptl_list)?;
        append_entry(ni_handle, le_handle, false, |lib, ni, ni_index| {
            let (region, offset) = region_over(d.start, d.length)?;
            let spec = LeSpec {
                region,
                offset,
                length: d.length,
                ct: ct_opt(lib, ni_index, d.ct_handle)?,
                uid: d.uid,
                options: cv::entry_options(d.options, false).ok_or(ARG_INVALID)?,
            };
            ni.le_append(pt_index, spec, list, user_ptr as u64)
                .map_err(fail)
        })
    })
}

/// Appends a match entry (matching NIs).
#[no_mangle]
pub extern "C" fn PtlMEAppend(
    ni_handle: c::ptl_handle_ni_t,
    pt_index: c::ptl_pt_index_t,
    me: *const c::ptl_me_t,
    ptl_list: c::ptl_list_t,
    user_ptr: *mut c_void,
    me_handle: *mut c::ptl_handle_me_t,
) -> c_int {
    guard("PtlMEAppend", || {
        let d = read(me)?;
        if d.options & cv::IOVEC != 0 {
            return Err(ARG_INVALID);
        }
        let list = list_of(ptl_list)?;
        append_entry(ni_handle, me_handle, true, |lib, ni, ni_index| {
            let (region, offset) = region_over(d.start, d.length)?;
            let spec = MeSpec {
                region,
                offset,
                length: d.length,
                ct: ct_opt(lib, ni_index, d.ct_handle)?,
                uid: d.uid,
                options: cv::entry_options(d.options, true).ok_or(ARG_INVALID)?,
                match_id: target(ni, d.match_id),
                match_bits: d.match_bits,
                ignore_bits: d.ignore_bits,
                min_free: d.min_free,
            };
            ni.me_append(pt_index, spec, list, user_ptr as u64)
                .map_err(fail)
        })
    })
}

fn unlink(call: &str, handle: u32, me: bool) -> c_int {
    guard(call, || {
        let mut lib = lib_write()?;
        let tab = if me { &lib.mes } else { &lib.les };
        let o = tab.get(handle).ok_or(ARG_INVALID)?;
        let ni = ni_for(&lib, handle)?;
        let r = if me {
            ni.me_unlink(o.h)
        } else {
            ni.le_unlink(o.h)
        };
        match r {
            Ok(()) => {}
            // Auto-unlinked by the engine: the handle is stale.
            Err(PtlError::InvalidHandle { .. }) => {}
            Err(e) => return Err(fail(e)),
        }
        let stale = !matches!(r, Ok(()));
        if me {
            lib.mes.remove(handle);
        } else {
            lib.les.remove(handle);
        }
        lib.reap();
        if stale {
            Err(ARG_INVALID)
        } else {
            Ok(())
        }
    })
}

/// Unlinks a list entry.
#[no_mangle]
pub extern "C" fn PtlLEUnlink(le_handle: c::ptl_handle_le_t) -> c_int {
    unlink("PtlLEUnlink", le_handle, false)
}

/// Unlinks a match entry.
#[no_mangle]
pub extern "C" fn PtlMEUnlink(me_handle: c::ptl_handle_me_t) -> c_int {
    unlink("PtlMEUnlink", me_handle, true)
}

fn search_op(op: c::ptl_search_op_t) -> Result<SearchOp, Code> {
    match u32::from(op) {
        c::PTL_SEARCH_ONLY => Ok(SearchOp::Only),
        c::PTL_SEARCH_DELETE => Ok(SearchOp::Delete),
        _ => Err(ARG_INVALID),
    }
}

/// Runs a search whose criteria `spec` builds (given the library, the NI and its index).
fn search(
    ni_handle: u32,
    pt_index: u32,
    ptl_search_op: c::ptl_search_op_t,
    user_ptr: *mut c_void,
    spec: impl FnOnce(&Lib, &Ni, usize) -> Result<SearchSpec, Code>,
) -> R {
    let op = search_op(ptl_search_op)?;
    let (ni, spec) = {
        let lib = lib_read()?;
        let ni = ni_of_handle(&lib, ni_handle)?;
        let spec = spec(&lib, &ni, table::ni_of(ni_handle))?;
        (ni, spec)
    };
    ni.search(pt_index, spec, op, user_ptr as u64).map_err(fail)
}

/// Searches the unexpected list of a PT with a list entry's criteria (any header).
#[no_mangle]
pub extern "C" fn PtlLESearch(
    ni_handle: c::ptl_handle_ni_t,
    pt_index: c::ptl_pt_index_t,
    le: *const c::ptl_le_t,
    ptl_search_op: c::ptl_search_op_t,
    user_ptr: *mut c_void,
) -> c_int {
    guard("PtlLESearch", || {
        let d = read(le)?;
        search(
            ni_handle,
            pt_index,
            ptl_search_op,
            user_ptr,
            |lib, _, ni_index| {
                Ok(SearchSpec {
                    ct: ct_opt(lib, ni_index, d.ct_handle)?,
                    uid: d.uid,
                    options: cv::entry_options(d.options & !cv::IOVEC, false).ok_or(ARG_INVALID)?,
                    match_id: ProcessId::ANY_PHYS,
                    match_bits: 0,
                    ignore_bits: u64::MAX,
                })
            },
        )
    })
}

/// Searches the unexpected list of a PT with a match entry's criteria.
#[no_mangle]
pub extern "C" fn PtlMESearch(
    ni_handle: c::ptl_handle_ni_t,
    pt_index: c::ptl_pt_index_t,
    me: *const c::ptl_me_t,
    ptl_search_op: c::ptl_search_op_t,
    user_ptr: *mut c_void,
) -> c_int {
    guard("PtlMESearch", || {
        let d = read(me)?;
        search(
            ni_handle,
            pt_index,
            ptl_search_op,
            user_ptr,
            |lib, ni, ni_index| {
                Ok(SearchSpec {
                    ct: ct_opt(lib, ni_index, d.ct_handle)?,
                    uid: d.uid,
                    options: cv::entry_options(d.options & !cv::IOVEC, true).ok_or(ARG_INVALID)?,
                    match_id: target(ni, d.match_id),
                    match_bits: d.match_bits,
                    ignore_bits: d.ignore_bits,
                })
            },
        )
    })
}
