//! [`LibNi`]: an NI of a Portals 4 library behind the native engine's handle types and calls.
//!
//! This is the layer a `ref` engine stands on: the conduit and the extended API hold
//! [`EqHandle`]s, [`MdHandle`]s and [`MeHandle`]s, describe memory as
//! [`Region`](crate::memory::Region)s ([`MdSpec`], [`MeSpec`], [`LeSpec`]) and read the engine's
//! [`Event`]s; `LibNi` takes and gives exactly those, so that the same caller code runs over
//! the native engine's [`crate::interface::Ni`] or over a library. Its calls have the `Ni`
//! calls' names and meanings; where a native call is an rgasnet extension, `LibNi` offers its
//! standard equivalent or says it has none:
//!
//! - [`AckReq::Confirmed`] and its kin ask the library for the standard acknowledgement they
//!   stand in for (`PTL_ACK_REQ`, `PTL_CT_ACK_REQ`): the initiator sees the same ACK events.
//! - [`LibNi::me_prepend`] appends (Portals 4 has no prepend; only which entry fills first
//!   changes), and [`LibNi::me_rewind`] never rewinds (`Ok(false)`, which callers already
//!   take as "not now"): a drained locally managed entry is unlinked and appended again.
//!
//! **Events.** A target-side event names its list entry through the `user_ptr` the library
//! hands back. `LibNi` gives the library the entry's handle there and translates back: the
//! event carries the caller's `user_ptr`, and its `start` is the offset in the entry's region
//! where the data landed (the native engine's convention), not the library's address. An
//! entry's slot is freed when its `AUTO_UNLINK` event is taken or it is unlinked.
//!
//! **Memory.** An MD or entry holds its span of the region for as long as it exists; the
//! library reads and writes it on its own (see [`super::memory`]). A put's source bytes must
//! stay unchanged until its SEND event (or its ACK): the library does not copy them when the
//! call returns, as the native engine does.
//!
//! The library is initialized once per process ([`library`]) and never finalized: the
//! reference implementation cannot be initialized again.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use portals4_sys as ffi;

use super::flags::{entry_bits, from_entry, md_option_bits, pt_bits, standard_ack};
use super::memory::LibMemory;
use super::ops::{ack_code, event, phys, process, RefLibrary, CT_NONE, EQ_NONE};
use super::{check, limits_of, open_ni};
use crate::engine::{
    CtHandle, EqGet, EqHandle, GetArgs, LeHandle, LeSpec, MdHandle, MdSpec, MeHandle, MeSpec,
    PutArgs,
};
use crate::error::{PtlError, PtlResult};
use crate::handle::Slab;
use crate::memory::{Region, RegionSpan};
use crate::types::{
    Addressing, CtEvent, Event, EventKind, ListKind, MeOptions, NiKind, NiLimits, PhysId,
    ProcessId, PtIndex, PtOptions,
};

/// The library of this process, initialized on first use and kept for the process's life.
static LIBRARY: OnceLock<Result<RefLibrary, String>> = OnceLock::new();

/// Initializes the Portals library once per process (`PtlInit`); later calls return the same
/// outcome.
pub fn library() -> PtlResult<&'static RefLibrary> {
    LIBRARY
        .get_or_init(|| RefLibrary::init().map_err(|e| e.to_string()))
        .as_ref()
        .map_err(|reason| PtlError::Fail {
            call: "PtlInit",
            reason: reason.clone(),
        })
}

/// Owner ids of `LibNi` tables: a range of their own, so that a native handle given to a
/// `LibNi` (or one of another `LibNi`) is refused as foreign.
static NEXT_OWNER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0x8000_0001);

/// Most objects of one kind per NI (the library's own limits apply too).
const TABLE_LIMIT: usize = 1 << 16;

/// `PTL_TIME_FOREVER`.
const TIME_FOREVER: u32 = u32::MAX;

struct LibEq {
    h: ffi::ptl_handle_eq_t,
}

struct LibCt {
    h: ffi::ptl_handle_ct_t,
}

struct LibMd {
    h: ffi::ptl_handle_md_t,
    /// Its options, event queue and counting event (for [`LibNi::put_from`]'s copies).
    options: u32,
    eq: ffi::ptl_handle_eq_t,
    ct: ffi::ptl_handle_ct_t,
    /// The span it covers (for [`LibNi::put_staged`], which writes it).
    region: Region,
    offset: u64,
    length: u64,
    _mem: LibMemory<'static>,
}

/// A match or list entry: the library's handle, the memory it covers, and what its events
/// are translated with.
struct LibEntry {
    h: ffi::ptl_handle_me_t,
    matching: bool,
    /// The library's address of the entry's first byte.
    base: u64,
    /// The caller's `user_ptr`.
    user_ptr: u64,
    _mem: LibMemory<'static>,
}

struct Objects {
    eqs: Slab<LibEq>,
    cts: Slab<LibCt>,
    mds: Slab<LibMd>,
    entries: Slab<LibEntry>,
    /// The MDs of [`LibNi::put_from`]'s copies, with the copies, until the library lets
    /// them go (`PtlMDRelease` no longer answers `PTL_IN_USE`).
    copies: Vec<(ffi::ptl_handle_md_t, Region)>,
}

struct Shared {
    h: ffi::ptl_handle_ni_t,
    kind: NiKind,
    limits: NiLimits,
    objects: Mutex<Objects>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        // SAFETY: `h` was opened by `LibNi::init` and is closed once, here; the library
        // releases the NI's objects with it and touches their memory no more, so the
        // memory the tables hold is freed after this (field drops come after `drop`).
        unsafe { ffi::PtlNIFini(self.h) };
    }
}

/// An NI of a Portals library with the native engine's handles and calls (see the module
/// docs). Cloning is cheap and shares the NI; it is closed when the last clone goes.
#[derive(Clone)]
pub struct LibNi {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for LibNi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LibNi")
            .field("handle", &self.shared.h)
            .field("kind", &self.shared.kind)
            .finish()
    }
}

/// The span of `region` an MD or entry covers, as library memory.
fn lib_memory(
    call: &'static str,
    region: &Region,
    offset: u64,
    length: u64,
) -> PtlResult<(LibMemory<'static>, *mut std::ffi::c_void, u64)> {
    let out_of_range = || PtlError::arg(call, "the span is outside its region");
    let offset = usize::try_from(offset).map_err(|_| out_of_range())?;
    let length = usize::try_from(length).map_err(|_| out_of_range())?;
    let span = RegionSpan::new(region.clone(), offset, length).map_err(|_| out_of_range())?;
    let mem = LibMemory::from(span);
    let (start, len) = mem.start_len(call)?;
    Ok((mem, start, len))
}

impl LibNi {
    /// Opens an NI of `kind` on the library's default interface (`PTL_IFACE_NAME` chooses
    /// it in the reference implementation), initializing the library first if needed. A
    /// logical NI needs its rank map ([`LibNi::set_map`]) before it communicates.
    pub fn init(kind: NiKind) -> PtlResult<LibNi> {
        library()?;
        let (h, lim) = open_ni(kind)?;
        // Relaxed: the counter only has to hand out distinct values.
        let owner = NEXT_OWNER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(LibNi {
            shared: Arc::new(Shared {
                h,
                kind,
                limits: limits_of(&lim),
                objects: Mutex::new(Objects {
                    eqs: Slab::new(owner, "event queue", TABLE_LIMIT),
                    cts: Slab::new(owner, "counting event", TABLE_LIMIT),
                    mds: Slab::new(owner, "memory descriptor", TABLE_LIMIT),
                    entries: Slab::new(owner, "list entry", TABLE_LIMIT),
                    copies: Vec::new(),
                }),
            }),
        })
    }

    fn objects(&self) -> MutexGuard<'_, Objects> {
        // A panic under this lock leaves the tables consistent (each call changes one slot
        // after its library call succeeded): go on with them.
        self.shared
            .objects
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Matching/non-matching, logical/physical.
    pub fn kind(&self) -> NiKind {
        self.shared.kind
    }

    /// The limits the library granted.
    pub fn limits(&self) -> NiLimits {
        self.shared.limits
    }

    /// The physical id (`PtlGetPhysId`).
    pub fn get_phys_id(&self) -> PtlResult<PhysId> {
        let mut id = ffi::ptl_process_t::default();
        // SAFETY: the NI is open while `shared` lives; `id` is a valid out-pointer.
        check("PtlGetPhysId", unsafe {
            ffi::PtlGetPhysId(self.shared.h, &mut id)
        })?;
        // SAFETY: PtlGetPhysId fills the physical member.
        let p = unsafe { id.phys };
        Ok(PhysId {
            nid: p.nid,
            pid: p.pid,
        })
    }

    /// This process's id on the NI: its rank (logical) or physical id (`PtlGetId`).
    pub fn get_id(&self) -> PtlResult<ProcessId> {
        let mut id = ffi::ptl_process_t::default();
        // SAFETY: the NI is open; valid out-pointer.
        check("PtlGetId", unsafe { ffi::PtlGetId(self.shared.h, &mut id) })?;
        Ok(match self.shared.kind.addressing {
            // SAFETY: a logical NI's id is its rank.
            Addressing::Logical => ProcessId::Rank(unsafe { id.rank }),
            Addressing::Physical => {
                // SAFETY: a physical NI's id is its physical id.
                let p = unsafe { id.phys };
                ProcessId::Phys(PhysId {
                    nid: p.nid,
                    pid: p.pid,
                })
            }
        })
    }

    /// Sets the rank map of a logical NI (`PtlSetMap`).
    pub fn set_map(&self, map: &[PhysId]) -> PtlResult<()> {
        let ids: Vec<ffi::ptl_process_t> = map.iter().map(|p| phys(*p)).collect();
        // SAFETY: the NI is open; `ids` holds `map.len()` entries for the call.
        check("PtlSetMap", unsafe {
            ffi::PtlSetMap(self.shared.h, ids.len() as u64, ids.as_ptr())
        })
    }

    /// Allocates an event queue of `count` events (`PtlEQAlloc`).
    pub fn eq_alloc(&self, count: usize) -> PtlResult<EqHandle> {
        let mut h = ffi::ptl_handle_eq_t::default();
        // SAFETY: the NI is open; valid out-pointer.
        check("PtlEQAlloc", unsafe {
            ffi::PtlEQAlloc(self.shared.h, count as u64, &mut h)
        })?;
        let mut o = self.objects();
        match o.eqs.insert("PtlEQAlloc", LibEq { h }) {
            Ok(eq) => Ok(eq.retype()),
            Err(e) => {
                // SAFETY: allocated just above, freed once.
                unsafe { ffi::PtlEQFree(h) };
                Err(e)
            }
        }
    }

    /// Frees an event queue (`PtlEQFree`).
    pub fn eq_free(&self, eq: EqHandle) -> PtlResult<()> {
        let mut o = self.objects();
        let h = o.eqs.get("PtlEQFree", eq.retype())?.h;
        // SAFETY: `h` is a live EQ of this NI.
        check("PtlEQFree", unsafe { ffi::PtlEQFree(h) })?;
        o.eqs.remove("PtlEQFree", eq.retype()).map(drop)
    }

    fn eq_raw(&self, call: &'static str, eq: EqHandle) -> PtlResult<ffi::ptl_handle_eq_t> {
        Ok(self.objects().eqs.get(call, eq.retype())?.h)
    }

    fn ct_raw(&self, call: &'static str, ct: Option<CtHandle>) -> PtlResult<ffi::ptl_handle_ct_t> {
        match ct {
            None => Ok(CT_NONE),
            Some(ct) => Ok(self.objects().cts.get(call, ct.retype())?.h),
        }
    }

    /// Takes the next event without waiting (`PtlEQGet`).
    pub fn eq_get(&self, eq: EqHandle) -> PtlResult<EqGet> {
        let h = self.eq_raw("PtlEQGet", eq)?;
        let mut ev = ffi::ptl_event_t::default();
        // SAFETY: a live EQ of this NI; valid out-pointer.
        let rc = unsafe { ffi::PtlEQGet(h, &mut ev) };
        self.taken("PtlEQGet", rc, &ev)
    }

    /// [`LibNi::eq_get`], also saying whether more events may wait: the library cannot say
    /// without taking one, so "more" is whether this call took one.
    pub fn eq_take_more(&self, eq: EqHandle) -> PtlResult<(EqGet, bool)> {
        let got = self.eq_get(eq)?;
        let more = !matches!(got, EqGet::Empty);
        Ok((got, more))
    }

    /// Waits up to `timeout` (forever with `None`) for the next event (`PtlEQPoll`);
    /// `EqEmpty` if none came.
    pub fn eq_wait(&self, eq: EqHandle, timeout: Option<Duration>) -> PtlResult<EqGet> {
        let h = self.eq_raw("PtlEQPoll", eq)?;
        let mut ev = ffi::ptl_event_t::default();
        let mut which = 0;
        // SAFETY: one live EQ of this NI; valid out-pointers. The table's lock is not held
        // while the call waits.
        let rc = unsafe { ffi::PtlEQPoll(&h, 1, millis(timeout), &mut ev, &mut which) };
        match self.taken("PtlEQPoll", rc, &ev)? {
            EqGet::Empty => Err(PtlError::EqEmpty),
            got => Ok(got),
        }
    }

    /// The engine's form of what `PtlEQGet` / `PtlEQPoll` returned.
    fn taken(&self, call: &'static str, rc: i32, ev: &ffi::ptl_event_t) -> PtlResult<EqGet> {
        if rc == ffi::ptl_retvals_PTL_EQ_EMPTY as i32 {
            return Ok(EqGet::Empty);
        }
        let dropped = rc == ffi::ptl_retvals_PTL_EQ_DROPPED as i32;
        if !dropped {
            check(call, rc)?;
        }
        let ev = self.translate(event(ev, self.shared.kind.addressing)?);
        Ok(if dropped {
            EqGet::Dropped(ev)
        } else {
            EqGet::Event(ev)
        })
    }

    /// A library event in the engine's terms (see the module docs): the caller's `user_ptr`
    /// and the offset in the entry's region for an entry's event; the entry forgotten with
    /// its `AUTO_UNLINK`.
    fn translate(&self, mut ev: Event) -> Event {
        if !from_entry(ev.kind) {
            return ev;
        }
        let mut o = self.objects();
        let Some(h) = o.entries.handle_from_bits(ev.user_ptr) else {
            return ev;
        };
        let Ok(entry) = o.entries.get("PtlEQGet", h) else {
            return ev;
        };
        ev.user_ptr = entry.user_ptr;
        ev.start = ev.start.wrapping_sub(entry.base);
        if ev.kind == EventKind::AutoUnlink {
            let _ = o.entries.remove("PtlEQGet", h);
        }
        ev
    }

    /// Allocates a counting event (`PtlCTAlloc`).
    pub fn ct_alloc(&self) -> PtlResult<CtHandle> {
        let mut h = ffi::ptl_handle_ct_t::default();
        // SAFETY: the NI is open; valid out-pointer.
        check("PtlCTAlloc", unsafe {
            ffi::PtlCTAlloc(self.shared.h, &mut h)
        })?;
        let mut o = self.objects();
        match o.cts.insert("PtlCTAlloc", LibCt { h }) {
            Ok(ct) => Ok(ct.retype()),
            Err(e) => {
                // SAFETY: allocated just above, freed once.
                unsafe { ffi::PtlCTFree(h) };
                Err(e)
            }
        }
    }

    /// Frees a counting event (`PtlCTFree`).
    pub fn ct_free(&self, ct: CtHandle) -> PtlResult<()> {
        let mut o = self.objects();
        let h = o.cts.get("PtlCTFree", ct.retype())?.h;
        // SAFETY: `h` is a live CT of this NI.
        check("PtlCTFree", unsafe { ffi::PtlCTFree(h) })?;
        o.cts.remove("PtlCTFree", ct.retype()).map(drop)
    }

    /// Reads a counting event (`PtlCTGet`).
    pub fn ct_get(&self, ct: CtHandle) -> PtlResult<CtEvent> {
        let h = self.ct_raw("PtlCTGet", Some(ct))?;
        let mut v = ffi::ptl_ct_event_t::default();
        // SAFETY: a live CT of this NI; valid out-pointer.
        check("PtlCTGet", unsafe { ffi::PtlCTGet(h, &mut v) })?;
        Ok(CtEvent {
            success: v.success,
            failure: v.failure,
        })
    }

    /// Sets a counting event (`PtlCTSet`).
    pub fn ct_set(&self, ct: CtHandle, value: CtEvent) -> PtlResult<()> {
        let h = self.ct_raw("PtlCTSet", Some(ct))?;
        let v = ffi::ptl_ct_event_t {
            success: value.success,
            failure: value.failure,
        };
        // SAFETY: a live CT of this NI.
        check("PtlCTSet", unsafe { ffi::PtlCTSet(h, v) })
    }

    /// Waits until `success >= threshold` or `failure > 0` (`PtlCTPoll`);
    /// `CtNoneReached` after `timeout` (forever with `None`).
    pub fn ct_wait(
        &self,
        ct: CtHandle,
        threshold: u64,
        timeout: Option<Duration>,
    ) -> PtlResult<CtEvent> {
        let h = self.ct_raw("PtlCTPoll", Some(ct))?;
        let mut v = ffi::ptl_ct_event_t::default();
        let mut which = 0;
        // SAFETY: one live CT of this NI and its threshold; valid out-pointers. The table's
        // lock is not held while the call waits.
        let rc = unsafe { ffi::PtlCTPoll(&h, &threshold, 1, millis(timeout), &mut v, &mut which) };
        if rc == ffi::ptl_retvals_PTL_CT_NONE_REACHED as i32 {
            return Err(PtlError::CtNoneReached);
        }
        check("PtlCTPoll", rc)?;
        Ok(CtEvent {
            success: v.success,
            failure: v.failure,
        })
    }

    /// Allocates a portal table entry (`PtlPTAlloc`) at `index` (the lowest free one with
    /// [`crate::types::PT_ANY`]), its events on `eq`.
    pub fn pt_alloc(
        &self,
        options: PtOptions,
        eq: Option<EqHandle>,
        index: PtIndex,
    ) -> PtlResult<PtIndex> {
        let opts = pt_bits(options)?;
        let eq = match eq {
            Some(eq) => self.eq_raw("PtlPTAlloc", eq)?,
            None => EQ_NONE,
        };
        let mut got = 0;
        // SAFETY: the NI is open; `eq` is one of its live EQs or EQ_NONE; valid out-pointer.
        check("PtlPTAlloc", unsafe {
            ffi::PtlPTAlloc(self.shared.h, opts, eq, index, &mut got)
        })?;
        Ok(got)
    }

    /// Frees a portal table entry (`PtlPTFree`).
    pub fn pt_free(&self, index: PtIndex) -> PtlResult<()> {
        // SAFETY: the NI is open; the library checks the index.
        check("PtlPTFree", unsafe { ffi::PtlPTFree(self.shared.h, index) })
    }

    /// Enables a portal table entry (`PtlPTEnable`).
    pub fn pt_enable(&self, index: PtIndex) -> PtlResult<()> {
        // SAFETY: as for `pt_free`.
        check("PtlPTEnable", unsafe {
            ffi::PtlPTEnable(self.shared.h, index)
        })
    }

    /// Disables a portal table entry (`PtlPTDisable`).
    pub fn pt_disable(&self, index: PtIndex) -> PtlResult<()> {
        // SAFETY: as for `pt_free`.
        check("PtlPTDisable", unsafe {
            ffi::PtlPTDisable(self.shared.h, index)
        })
    }

    /// Binds a memory descriptor over a span of a region (`PtlMDBind`).
    pub fn md_bind(&self, spec: MdSpec) -> PtlResult<MdHandle> {
        let (mem, start, length) = lib_memory("PtlMDBind", &spec.region, spec.offset, spec.length)?;
        let eq = match spec.eq {
            Some(eq) => self.eq_raw("PtlMDBind", eq)?,
            None => EQ_NONE,
        };
        let md = ffi::ptl_md_t {
            start,
            length,
            options: md_option_bits(spec.options)?,
            eq_handle: eq,
            ct_handle: self.ct_raw("PtlMDBind", spec.ct)?,
        };
        let mut h = ffi::ptl_handle_md_t::default();
        // SAFETY: the MD covers `mem`, which its table slot keeps alive until the MD is
        // released or the NI closed, and which Rust reaches only through copies or atomic
        // words (see `LibMemory`); valid pointers.
        check("PtlMDBind", unsafe {
            ffi::PtlMDBind(self.shared.h, &md, &mut h)
        })?;
        let mut o = self.objects();
        let slot = LibMd {
            h,
            options: md.options,
            eq: md.eq_handle,
            ct: md.ct_handle,
            region: spec.region,
            offset: spec.offset,
            length: spec.length,
            _mem: mem,
        };
        match o.mds.insert("PtlMDBind", slot) {
            Ok(md) => Ok(md.retype()),
            Err(e) => {
                // SAFETY: bound just above, released once.
                unsafe { ffi::PtlMDRelease(h) };
                Err(e)
            }
        }
    }

    /// Releases a memory descriptor (`PtlMDRelease`); `InUse` while operations on it are in
    /// flight.
    pub fn md_release(&self, md: MdHandle) -> PtlResult<()> {
        let mut o = self.objects();
        let h = o.mds.get("PtlMDRelease", md.retype())?.h;
        // SAFETY: `h` is a live MD of this NI.
        let rc = unsafe { ffi::PtlMDRelease(h) };
        if rc == ffi::ptl_retvals_PTL_IN_USE as i32 {
            return Err(PtlError::InUse {
                call: "PtlMDRelease",
                what: "the memory descriptor",
            });
        }
        check("PtlMDRelease", rc)?;
        o.mds.remove("PtlMDRelease", md.retype()).map(drop)
    }

    fn md_raw(&self, call: &'static str, md: MdHandle) -> PtlResult<ffi::ptl_handle_md_t> {
        Ok(self.objects().mds.get(call, md.retype())?.h)
    }

    /// Appends a match entry (`PtlMEAppend`).
    pub fn me_append(
        &self,
        pt_index: PtIndex,
        spec: MeSpec,
        list: ListKind,
        user_ptr: u64,
    ) -> PtlResult<MeHandle> {
        self.append_entry(
            "PtlMEAppend",
            pt_index,
            Entry {
                region: &spec.region,
                offset: spec.offset,
                length: spec.length,
                ct: spec.ct,
                uid: spec.uid,
                options: spec.options,
                matching: Some((
                    spec.match_id,
                    spec.match_bits,
                    spec.ignore_bits,
                    spec.min_free,
                )),
            },
            list,
            user_ptr,
        )
    }

    /// [`LibNi::me_append`]: Portals 4 has no prepend (see the module docs).
    pub fn me_prepend(
        &self,
        pt_index: PtIndex,
        spec: MeSpec,
        list: ListKind,
        user_ptr: u64,
    ) -> PtlResult<MeHandle> {
        self.me_append(pt_index, spec, list, user_ptr)
    }

    /// Never rewinds (a library has no such call): `Ok(false)`, after checking the handle.
    pub fn me_rewind(&self, me: MeHandle, _eq: EqHandle) -> PtlResult<bool> {
        self.objects().entries.get("me_rewind", me.retype())?;
        Ok(false)
    }

    /// Appends a list entry (`PtlLEAppend`).
    pub fn le_append(
        &self,
        pt_index: PtIndex,
        spec: LeSpec,
        list: ListKind,
        user_ptr: u64,
    ) -> PtlResult<LeHandle> {
        self.append_entry(
            "PtlLEAppend",
            pt_index,
            Entry {
                region: &spec.region,
                offset: spec.offset,
                length: spec.length,
                ct: spec.ct,
                uid: spec.uid,
                options: spec.options,
                matching: None,
            },
            list,
            user_ptr,
        )
    }

    fn append_entry(
        &self,
        call: &'static str,
        pt_index: PtIndex,
        e: Entry<'_>,
        list: ListKind,
        user_ptr: u64,
    ) -> PtlResult<MeHandle> {
        let (mem, start, length) = lib_memory(call, e.region, e.offset, e.length)?;
        let options = entry_bits(call, e.options)?;
        let ct_handle = self.ct_raw(call, e.ct)?;
        let list = match list {
            ListKind::Priority => ffi::PTL_PRIORITY_LIST,
            ListKind::Overflow => ffi::PTL_OVERFLOW_LIST,
        } as ffi::ptl_list_t;
        let mut o = self.objects();
        // The slot first: its handle is the `user_ptr` the library hands back with the
        // entry's events.
        let slot = o.entries.insert(
            call,
            LibEntry {
                h: 0,
                matching: e.matching.is_some(),
                base: start as u64,
                user_ptr,
                _mem: mem,
            },
        )?;
        let token = slot.to_bits() as usize as *mut std::ffi::c_void;
        let mut h = ffi::ptl_handle_me_t::default();
        let rc = match e.matching {
            Some((match_id, match_bits, ignore_bits, min_free)) => {
                let me = ffi::ptl_me_t {
                    start,
                    length,
                    ct_handle,
                    uid: e.uid,
                    options,
                    match_id: process(match_id),
                    match_bits,
                    ignore_bits,
                    min_free,
                };
                // SAFETY: the NI is open; the entry covers `mem`, which its slot keeps alive
                // until the entry is unlinked (see `LibMemory`); `token` is an opaque value
                // the library hands back; valid pointers.
                unsafe { ffi::PtlMEAppend(self.shared.h, pt_index, &me, list, token, &mut h) }
            }
            None => {
                let le = ffi::ptl_le_t {
                    start,
                    length,
                    ct_handle,
                    uid: e.uid,
                    options,
                };
                // SAFETY: as above.
                unsafe { ffi::PtlLEAppend(self.shared.h, pt_index, &le, list, token, &mut h) }
            }
        };
        if let Err(err) = check(call, rc) {
            let _ = o.entries.remove(call, slot);
            return Err(err);
        }
        o.entries.get_mut(call, slot)?.h = h;
        Ok(slot.retype())
    }

    /// Unlinks a match entry (`PtlMEUnlink`).
    pub fn me_unlink(&self, me: MeHandle) -> PtlResult<()> {
        self.unlink("PtlMEUnlink", me)
    }

    /// Unlinks a list entry (`PtlLEUnlink`).
    pub fn le_unlink(&self, le: LeHandle) -> PtlResult<()> {
        self.unlink("PtlLEUnlink", le)
    }

    fn unlink(&self, call: &'static str, entry: MeHandle) -> PtlResult<()> {
        let mut o = self.objects();
        let e = o.entries.get(call, entry.retype())?;
        let (h, matching) = (e.h, e.matching);
        // SAFETY: `h` is a live entry of this NI, of the kind the call unlinks.
        let rc = unsafe {
            if matching {
                ffi::PtlMEUnlink(h)
            } else {
                ffi::PtlLEUnlink(h)
            }
        };
        if rc == ffi::ptl_retvals_PTL_IN_USE as i32 {
            return Err(PtlError::InUse {
                call,
                what: "the list entry",
            });
        }
        check(call, rc)?;
        o.entries.remove(call, entry.retype()).map(drop)
    }

    /// `PtlPut` (an rgasnet acknowledgement asks for its standard one).
    pub fn put(&self, args: &PutArgs) -> PtlResult<()> {
        let md = self.md_raw("PtlPut", args.md)?;
        let ack = ack_code(standard_ack(args.ack_req))?;
        Self::put_raw(md, args.local_offset, ack, args)
    }

    /// `PtlPut` of `args` (but its MD and offset) from `md`, a live MD of this NI.
    fn put_raw(
        md: ffi::ptl_handle_md_t,
        local_offset: u64,
        ack: ffi::ptl_ack_req_t,
        args: &PutArgs,
    ) -> PtlResult<()> {
        let r = &args.remote;
        // SAFETY: the callers pass a live MD of this NI; the library checks the range
        // against it.
        check("PtlPut", unsafe {
            ffi::PtlPut(
                md,
                local_offset,
                args.length,
                ack,
                process(r.target),
                r.pt_index,
                r.match_bits,
                r.remote_offset,
                args.user_ptr as usize as *mut _,
                args.hdr_data,
            )
        })
    }

    /// [`crate::interface::Ni::put_staged`] over a library: `parts` (the put's bytes, in two
    /// pieces) are written into the MD at the put's offset, then the put starts. The caller
    /// owns those bytes of the MD until the put's acknowledgement, as for any put here.
    pub fn put_staged(&self, args: &PutArgs, parts: [&[u8]; 2]) -> PtlResult<()> {
        const CALL: &str = "put_staged";
        let (region, offset, length) = {
            let o = self.objects();
            let md = o.mds.get(CALL, args.md.retype())?;
            (md.region.clone(), md.offset, md.length)
        };
        let total = (parts[0].len() + parts[1].len()) as u64;
        if total != args.length || args.local_offset.saturating_add(total) > length {
            return Err(PtlError::arg(
                CALL,
                format!(
                    "{total} bytes for a put of {} at {} of a {length}-byte MD",
                    args.length, args.local_offset
                ),
            ));
        }
        let at = (offset + args.local_offset) as usize;
        region
            .write(at, parts[0])
            .and_then(|()| region.write(at + parts[0].len(), parts[1]))
            .map_err(|_| PtlError::arg(CALL, "the MD's span is outside its region"))?;
        self.put(args)
    }

    /// [`crate::interface::Ni::put_from`] over a library: `PtlPut` of `data` as if it were the
    /// MD's bytes at the put's offset. The library reads a put's bytes after the call
    /// returns, so they are copied into a region of their own under an MD with the same
    /// options, event queue and counting event (the put's events and counts are the
    /// caller's); that MD is released once the library no longer uses it, which each call
    /// checks for the copies of earlier ones.
    pub fn put_from(&self, args: &PutArgs, data: &[u8]) -> PtlResult<()> {
        const CALL: &str = "put_from";
        if data.len() as u64 != args.length {
            return Err(PtlError::arg(
                CALL,
                format!("{} bytes for a put of {}", data.len(), args.length),
            ));
        }
        let mut o = self.objects();
        o.copies.retain(|(h, _)| {
            // SAFETY: `h` is an MD of this NI bound below and not yet released; PtlMDRelease
            // refuses (PTL_IN_USE) while the library still uses it.
            let rc = unsafe { ffi::PtlMDRelease(*h) };
            rc != ffi::ptl_retvals_PTL_OK as i32
        });
        // Checked before anything is bound, so that an error leaves nothing behind.
        let ack = ack_code(standard_ack(args.ack_req))?;
        let (options, eq, ct) = {
            let md = o.mds.get(CALL, args.md.retype())?;
            (md.options, md.eq, md.ct)
        };
        let copy = Region::new(data.len());
        copy.write(0, data)
            .map_err(|_| PtlError::arg(CALL, "a copy of the put's bytes"))?;
        let (mem, start, length) = lib_memory(CALL, &copy, 0, data.len() as u64)?;
        let md = ffi::ptl_md_t {
            start,
            length,
            options,
            eq_handle: eq,
            ct_handle: ct,
        };
        let mut h = ffi::ptl_handle_md_t::default();
        // SAFETY: as in `md_bind`: the MD covers `copy`, which `copies` keeps alive (with
        // `mem`'s span of it) until the MD is released.
        check("PtlMDBind", unsafe {
            ffi::PtlMDBind(self.shared.h, &md, &mut h)
        })?;
        drop(mem);
        // The copy is kept (and its MD released later) whether or not the put starts.
        o.copies.push((h, copy));
        Self::put_raw(h, 0, ack, args)
    }

    /// `PtlGet`.
    pub fn get(&self, args: &GetArgs) -> PtlResult<()> {
        let md = self.md_raw("PtlGet", args.md)?;
        let r = &args.remote;
        // SAFETY: as for `put`.
        check("PtlGet", unsafe {
            ffi::PtlGet(
                md,
                args.local_offset,
                args.length,
                process(r.target),
                r.pt_index,
                r.match_bits,
                r.remote_offset,
                args.user_ptr as usize as *mut _,
            )
        })
    }
}

/// What an entry covers and how it matches (`matching`: match id, bits, ignore bits and
/// `min_free` of a match entry; `None` for a list entry).
struct Entry<'a> {
    region: &'a Region,
    offset: u64,
    length: u64,
    ct: Option<CtHandle>,
    uid: u32,
    options: MeOptions,
    matching: Option<(ProcessId, u64, u64, u64)>,
}

/// A wait's timeout in the library's milliseconds.
fn millis(timeout: Option<Duration>) -> u32 {
    match timeout {
        None => TIME_FOREVER,
        Some(t) => u32::try_from(t.as_millis()).unwrap_or(TIME_FOREVER - 1),
    }
}
