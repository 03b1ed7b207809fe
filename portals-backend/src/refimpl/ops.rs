//! Portals objects of a Portals 4 library as owned Rust values: the library ([`RefLibrary`]),
//! an NI ([`RefNi`]), event queues, portal table entries, list entries over library-visible
//! memory ([`RefBuffer`]), memory descriptors, and put/get. Each object is released when
//! dropped; each call's return code becomes a [`PtlError`] that names the call and the code.
//!
//! Memory the library reaches is a [`LibMemory`]: a [`RefBuffer`] or a span of a
//! [`crate::memory::Region`], which the library reads and writes on its own (a progress
//! thread, a NIC) while an MD or entry covers it (see [`super::memory`]).

use std::time::Duration;

use portals4_sys as ffi;

pub use super::memory::{LibMemory, RefBuffer};
use super::{check, limits_of, open_ni, PID_ANY};
use crate::error::{PtlError, PtlResult};
use crate::types::{
    AckReq, Addressing, CtEvent, Event, EventKind, ListKind, MatchBits, MdOptions, MeOptions,
    NiFail, NiKind, NiLimits, PhysId, ProcessId, PtIndex, PtOptions, RANK_ANY,
};

// portals4.h's handle constants (casts bindgen does not evaluate).
pub(super) const EQ_NONE: ffi::ptl_handle_eq_t = 0x3fff_ffff;
pub(super) const CT_NONE: ffi::ptl_handle_ct_t = 0x5fff_ffff;
const UID_ANY: ffi::ptl_uid_t = 0xffff_ffff;
const PT_ANY: ffi::ptl_pt_index_t = 0xffff_ffff;
const NID_ANY: ffi::ptl_nid_t = 0xffff;

/// The library, initialized (`PtlInit`) for as long as this value lives (`PtlFini` on drop).
/// The reference implementation cannot be initialized again once finalized: a process keeps
/// one for its whole run.
#[derive(Debug)]
pub struct RefLibrary(());

impl RefLibrary {
    /// `PtlInit`.
    pub fn init() -> PtlResult<RefLibrary> {
        // SAFETY: PtlInit takes no arguments; the value's drop balances it.
        check("PtlInit", unsafe { ffi::PtlInit() })?;
        Ok(RefLibrary(()))
    }
}

impl Drop for RefLibrary {
    fn drop(&mut self) {
        // SAFETY: balances the PtlInit of `init`; the objects borrow the library, so none
        // outlives it.
        unsafe { ffi::PtlFini() };
    }
}

/// An NI of the library (`PtlNIFini` on drop).
#[derive(Debug)]
pub struct RefNi<'lib> {
    _lib: &'lib RefLibrary,
    h: ffi::ptl_handle_ni_t,
    kind: NiKind,
    limits: NiLimits,
}

/// An event queue (`PtlEQFree` on drop).
#[derive(Debug)]
pub struct RefEq<'ni> {
    _ni: &'ni RefNi<'ni>,
    h: ffi::ptl_handle_eq_t,
    addressing: Addressing,
}

/// A counting event (`PtlCTFree` on drop).
#[derive(Debug)]
pub struct RefCt<'ni> {
    _ni: &'ni RefNi<'ni>,
    h: ffi::ptl_handle_ct_t,
}

/// A match entry over a buffer (`PtlMEUnlink` on drop).
#[derive(Debug)]
pub struct RefMe<'a> {
    _mem: LibMemory<'a>,
    h: ffi::ptl_handle_me_t,
}

/// A memory descriptor over a buffer (`PtlMDRelease` on drop).
#[derive(Debug)]
pub struct RefMd<'a> {
    _mem: LibMemory<'a>,
    h: ffi::ptl_handle_md_t,
}

/// A list entry over a buffer (`PtlLEUnlink` on drop).
#[derive(Debug)]
pub struct RefLe<'a> {
    _mem: LibMemory<'a>,
    h: ffi::ptl_handle_le_t,
}

/// The C bits of `value` through `table`; an error naming `call` if `value` has a flag the
/// table does not map.
pub(super) fn bits<F>(call: &'static str, value: F, table: &[(F, u32)]) -> PtlResult<u32>
where
    F: Copy + std::fmt::Debug + std::ops::BitOr<Output = F> + PartialEq + FlagSet,
{
    let mut covered = F::empty();
    let mut out = 0;
    for (flag, bit) in table {
        covered = covered | *flag;
        if value.has(*flag) {
            out |= bit;
        }
    }
    if !covered.has(value) {
        return Err(PtlError::arg(
            call,
            format!("options {value:?} are not offered here"),
        ));
    }
    Ok(out)
}

/// The two option sets' common operations (`bitflags` types).
pub(super) trait FlagSet {
    fn empty() -> Self;
    fn has(&self, other: Self) -> bool;
}

impl FlagSet for MeOptions {
    fn empty() -> Self {
        MeOptions::empty()
    }
    fn has(&self, other: Self) -> bool {
        self.contains(other)
    }
}

impl FlagSet for PtOptions {
    fn empty() -> Self {
        PtOptions::empty()
    }
    fn has(&self, other: Self) -> bool {
        self.contains(other)
    }
}

impl FlagSet for MdOptions {
    fn empty() -> Self {
        MdOptions::empty()
    }
    fn has(&self, other: Self) -> bool {
        self.contains(other)
    }
}

fn le_bits(o: MeOptions) -> PtlResult<u32> {
    bits(
        "PtlLEAppend",
        o,
        &[
            (MeOptions::OP_PUT, 1 << ffi::mele_options_MELE_OP_PUT),
            (MeOptions::OP_GET, 1 << ffi::mele_options_MELE_OP_GET),
            (MeOptions::USE_ONCE, 1 << ffi::mele_options_MELE_USE_ONCE),
            (
                MeOptions::EVENT_LINK_DISABLE,
                1 << ffi::mele_options_MELE_EVNT_LINK_DISABLE,
            ),
            (
                MeOptions::EVENT_COMM_DISABLE,
                1 << ffi::mele_options_MELE_EVNT_COMM_DISABLE,
            ),
            (
                MeOptions::EVENT_SUCCESS_DISABLE,
                1 << ffi::mele_options_MELE_EVNT_SUCCESS_DISABLE,
            ),
            (
                MeOptions::EVENT_UNLINK_DISABLE,
                1 << ffi::mele_options_MELE_EVNT_UNLINK_DISABLE,
            ),
            (
                MeOptions::EVENT_CT_COMM,
                1 << ffi::mele_options_MELE_EVNT_CT_COMM,
            ),
        ],
    )
}

pub(super) fn md_bits(o: MdOptions) -> PtlResult<u32> {
    bits(
        "PtlMDBind",
        o,
        &[
            (
                MdOptions::EVENT_SUCCESS_DISABLE,
                1 << ffi::md_options_MD_EVNT_SUCCESS_DISABLE,
            ),
            (
                MdOptions::EVENT_SEND_DISABLE,
                1 << ffi::md_options_MD_EVNT_SEND_DISABLE,
            ),
            (
                MdOptions::EVENT_CT_SEND,
                1 << ffi::md_options_MD_EVNT_CT_SEND,
            ),
            (
                MdOptions::EVENT_CT_REPLY,
                1 << ffi::md_options_MD_EVNT_CT_REPLY,
            ),
            (MdOptions::EVENT_CT_ACK, 1 << ffi::md_options_MD_EVNT_CT_ACK),
        ],
    )
}

pub(super) fn ack_code(a: AckReq) -> PtlResult<ffi::ptl_ack_req_t> {
    Ok(match a {
        AckReq::None => ffi::PTL_NO_ACK_REQ,
        AckReq::Ack => ffi::PTL_ACK_REQ,
        AckReq::CtAck => ffi::PTL_CT_ACK_REQ,
        AckReq::OcAck => ffi::PTL_OC_ACK_REQ,
        other => {
            return Err(PtlError::arg(
                "PtlPut",
                format!("{other:?} is an rgasnet extension a Portals library does not have"),
            ))
        }
    } as ffi::ptl_ack_req_t)
}

pub(super) fn phys(p: PhysId) -> ffi::ptl_process_t {
    ffi::ptl_process_t {
        phys: ffi::ptl_process_t__bindgen_ty_1 {
            nid: p.nid,
            pid: p.pid,
        },
    }
}

/// The C form of a process id (a rank on a logical NI, a physical id on a physical one).
pub(super) fn process(p: ProcessId) -> ffi::ptl_process_t {
    match p {
        ProcessId::Rank(r) => ffi::ptl_process_t { rank: r },
        ProcessId::Phys(id) => phys(id),
    }
}

/// The engine's form of a library event on an NI of `addressing`.
pub(super) fn event(e: &ffi::ptl_event_t, addressing: Addressing) -> PtlResult<Event> {
    const KINDS: [EventKind; 16] = [
        EventKind::Get,
        EventKind::GetOverflow,
        EventKind::Put,
        EventKind::PutOverflow,
        EventKind::Atomic,
        EventKind::AtomicOverflow,
        EventKind::FetchAtomic,
        EventKind::FetchAtomicOverflow,
        EventKind::Reply,
        EventKind::Send,
        EventKind::Ack,
        EventKind::PtDisabled,
        EventKind::Link,
        EventKind::AutoUnlink,
        EventKind::AutoFree,
        EventKind::Search,
    ];
    let bad = |what: &str, v: u8| PtlError::Fail {
        call: "PtlEQGet",
        reason: format!("the library reported an unknown {what} {v}"),
    };
    let kind = *KINDS
        .get(usize::from(e.type_))
        .ok_or_else(|| bad("event type", e.type_))?;
    let ni_fail = *NiFail::ALL
        .get(usize::from(e.ni_fail_type))
        .ok_or_else(|| bad("failure type", e.ni_fail_type))?;
    let initiator = match addressing {
        // SAFETY: on a logical NI the library fills the `rank` member of the initiator.
        Addressing::Logical => ProcessId::Rank(unsafe { e.initiator.rank }),
        Addressing::Physical => {
            // SAFETY: on a physical NI the library fills the `phys` member.
            let p = unsafe { e.initiator.phys };
            ProcessId::Phys(PhysId {
                nid: p.nid,
                pid: p.pid,
            })
        }
    };
    Ok(Event {
        kind,
        start: e.start as u64,
        user_ptr: e.user_ptr as u64,
        hdr_data: e.hdr_data,
        match_bits: e.match_bits,
        rlength: e.rlength,
        mlength: e.mlength,
        remote_offset: e.remote_offset,
        initiator,
        uid: e.uid,
        pt_index: e.pt_index,
        list: if u32::from(e.ptl_list) == ffi::PTL_OVERFLOW_LIST {
            ListKind::Overflow
        } else {
            ListKind::Priority
        },
        ni_fail,
        atomic_op: None,
        atomic_type: None,
    })
}

impl<'lib> RefNi<'lib> {
    /// Opens an NI of `kind` on the library's default interface (`PTL_IFACE_NAME` picks it
    /// in the reference implementation). A logical NI needs its rank map
    /// ([`RefNi::set_map`]) before it communicates.
    pub fn init(lib: &'lib RefLibrary, kind: NiKind) -> PtlResult<RefNi<'lib>> {
        // The library is initialized while `lib` lives.
        let (h, lim) = open_ni(kind)?;
        let limits = limits_of(&lim);
        Ok(RefNi {
            _lib: lib,
            h,
            kind,
            limits,
        })
    }

    /// The NI's kind.
    pub fn kind(&self) -> NiKind {
        self.kind
    }

    /// The limits the library granted.
    pub fn limits(&self) -> NiLimits {
        self.limits
    }

    /// `PtlGetPhysId`.
    pub fn phys_id(&self) -> PtlResult<PhysId> {
        let mut id = ffi::ptl_process_t::default();
        // SAFETY: `h` is open; `id` is a valid out-pointer.
        check("PtlGetPhysId", unsafe {
            ffi::PtlGetPhysId(self.h, &mut id)
        })?;
        // SAFETY: PtlGetPhysId filled the physical member.
        let p = unsafe { id.phys };
        Ok(PhysId {
            nid: p.nid,
            pid: p.pid,
        })
    }

    /// `PtlEQAlloc` of `count` events.
    pub fn eq_alloc(&'lib self, count: u64) -> PtlResult<RefEq<'lib>> {
        let mut h = ffi::ptl_handle_eq_t::default();
        // SAFETY: `h` is an open NI; valid out-pointer.
        check("PtlEQAlloc", unsafe {
            ffi::PtlEQAlloc(self.h, count, &mut h)
        })?;
        Ok(RefEq {
            _ni: self,
            h,
            addressing: self.kind.addressing,
        })
    }

    /// `PtlPTAlloc` at `index` (or the lowest free with [`crate::types::PT_ANY`]).
    pub fn pt_alloc(
        &self,
        opts: PtOptions,
        eq: Option<&RefEq<'_>>,
        index: PtIndex,
    ) -> PtlResult<PtIndex> {
        if !opts.is_empty() {
            return Err(PtlError::arg(
                "PtlPTAlloc",
                "no portal table options here yet",
            ));
        }
        let req = if index == crate::types::PT_ANY {
            PT_ANY
        } else {
            index
        };
        let mut got = 0;
        // SAFETY: `h` is open; the EQ (if any) belongs to it and lives; valid out-pointer.
        check("PtlPTAlloc", unsafe {
            ffi::PtlPTAlloc(self.h, 0, eq.map_or(EQ_NONE, |q| q.h), req, &mut got)
        })?;
        Ok(got)
    }

    /// `PtlPTFree`.
    pub fn pt_free(&self, index: PtIndex) -> PtlResult<()> {
        // SAFETY: `h` is open.
        check("PtlPTFree", unsafe { ffi::PtlPTFree(self.h, index) })
    }

    /// `PtlMDBind` over all of `buf`, posting to `eq`.
    pub fn md_bind<'a>(
        &self,
        mem: impl Into<LibMemory<'a>>,
        opts: MdOptions,
        eq: Option<&RefEq<'_>>,
    ) -> PtlResult<RefMd<'a>> {
        self.md_bind_counted(mem, opts, eq, None)
    }

    /// `PtlLEAppend` over all of `buf` on the priority list of `pt`, for any user.
    pub fn le_append<'a>(
        &self,
        pt: PtIndex,
        mem: impl Into<LibMemory<'a>>,
        opts: MeOptions,
        user_ptr: u64,
    ) -> PtlResult<RefLe<'a>> {
        let mem = mem.into();
        let (start, length) = mem.start_len("PtlLEAppend")?;
        let le = ffi::ptl_le_t {
            start,
            length,
            ct_handle: CT_NONE,
            uid: UID_ANY,
            options: le_bits(opts)?,
        };
        let mut h = ffi::ptl_handle_le_t::default();
        // SAFETY: as for `md_bind`; `user_ptr` is an opaque value the library hands back.
        check("PtlLEAppend", unsafe {
            ffi::PtlLEAppend(
                self.h,
                pt,
                &le,
                ffi::PTL_PRIORITY_LIST as u8,
                user_ptr as usize as *mut _,
                &mut h,
            )
        })?;
        Ok(RefLe { _mem: mem, h })
    }

    /// `PtlPut` of `length` bytes at `local_offset` of `md` to `remote_offset` of the entry
    /// that `target`'s portal `to.0` matches with bits `to.1`.
    #[allow(clippy::too_many_arguments)]
    pub fn put(
        &self,
        md: &RefMd<'_>,
        local_offset: u64,
        length: u64,
        ack: AckReq,
        target: ProcessId,
        to: (PtIndex, MatchBits),
        remote_offset: u64,
        user_ptr: u64,
        hdr_data: u64,
    ) -> PtlResult<()> {
        let ack = ack_code(ack)?;
        // SAFETY: `md` is bound and lives; the library checks the range against it.
        check("PtlPut", unsafe {
            ffi::PtlPut(
                md.h,
                local_offset,
                length,
                ack,
                process(target),
                to.0,
                to.1,
                remote_offset,
                user_ptr as usize as *mut _,
                hdr_data,
            )
        })
    }

    /// `PtlGet` of `length` bytes from `remote_offset` of `target`'s entry into `md`.
    #[allow(clippy::too_many_arguments)]
    pub fn get(
        &self,
        md: &RefMd<'_>,
        local_offset: u64,
        length: u64,
        target: ProcessId,
        to: (PtIndex, MatchBits),
        remote_offset: u64,
        user_ptr: u64,
    ) -> PtlResult<()> {
        // SAFETY: as for `put`.
        check("PtlGet", unsafe {
            ffi::PtlGet(
                md.h,
                local_offset,
                length,
                process(target),
                to.0,
                to.1,
                remote_offset,
                user_ptr as usize as *mut _,
            )
        })
    }

    /// `PtlSetMap`: the physical id of every rank of a logical NI.
    pub fn set_map(&self, map: &[PhysId]) -> PtlResult<()> {
        let ids: Vec<ffi::ptl_process_t> = map.iter().map(|p| phys(*p)).collect();
        // SAFETY: `h` is open; `ids` holds `map.len()` entries for the call.
        check("PtlSetMap", unsafe {
            ffi::PtlSetMap(self.h, ids.len() as u64, ids.as_ptr())
        })
    }

    /// `PtlGetId`: this process's rank (logical NI) or physical id.
    pub fn id(&self) -> PtlResult<ProcessId> {
        let mut id = ffi::ptl_process_t::default();
        // SAFETY: `h` is open; valid out-pointer.
        check("PtlGetId", unsafe { ffi::PtlGetId(self.h, &mut id) })?;
        Ok(match self.kind.addressing {
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

    /// `PtlCTAlloc`.
    pub fn ct_alloc(&'lib self) -> PtlResult<RefCt<'lib>> {
        let mut h = ffi::ptl_handle_ct_t::default();
        // SAFETY: `h` is an open NI; valid out-pointer.
        check("PtlCTAlloc", unsafe { ffi::PtlCTAlloc(self.h, &mut h) })?;
        Ok(RefCt { _ni: self, h })
    }

    /// `PtlMEAppend` over all of `buf` on the priority list of `pt` (matching NIs), for any
    /// initiator and user, matching `bits` outside `ignore`, counting on `ct` if given.
    #[allow(clippy::too_many_arguments)]
    pub fn me_append<'a>(
        &self,
        pt: PtIndex,
        mem: impl Into<LibMemory<'a>>,
        opts: MeOptions,
        bits: MatchBits,
        ignore: MatchBits,
        ct: Option<&RefCt<'_>>,
        user_ptr: u64,
    ) -> PtlResult<RefMe<'a>> {
        let any = match self.kind.addressing {
            Addressing::Logical => ffi::ptl_process_t { rank: RANK_ANY },
            Addressing::Physical => phys(PhysId {
                nid: NID_ANY,
                pid: PID_ANY,
            }),
        };
        let mem = mem.into();
        let (start, length) = mem.start_len("PtlMEAppend")?;
        let me = ffi::ptl_me_t {
            start,
            length,
            ct_handle: ct.map_or(CT_NONE, |c| c.h),
            uid: UID_ANY,
            options: le_bits(opts)?,
            match_id: any,
            match_bits: bits,
            ignore_bits: ignore,
            min_free: 0,
        };
        let mut h = ffi::ptl_handle_me_t::default();
        // SAFETY: as for `le_append`.
        check("PtlMEAppend", unsafe {
            ffi::PtlMEAppend(
                self.h,
                pt,
                &me,
                ffi::PTL_PRIORITY_LIST as u8,
                user_ptr as usize as *mut _,
                &mut h,
            )
        })?;
        Ok(RefMe { _mem: mem, h })
    }

    /// `PtlMDBind` over all of `buf`, posting to `eq` and counting on `ct`.
    pub fn md_bind_counted<'a>(
        &self,
        mem: impl Into<LibMemory<'a>>,
        opts: MdOptions,
        eq: Option<&RefEq<'_>>,
        ct: Option<&RefCt<'_>>,
    ) -> PtlResult<RefMd<'a>> {
        let mem = mem.into();
        let (start, length) = mem.start_len("PtlMDBind")?;
        let md = ffi::ptl_md_t {
            start,
            length,
            options: md_bits(opts)?,
            eq_handle: eq.map_or(EQ_NONE, |q| q.h),
            ct_handle: ct.map_or(CT_NONE, |c| c.h),
        };
        let mut h = ffi::ptl_handle_md_t::default();
        // SAFETY: the MD covers `mem`, which the returned value keeps alive (a borrowed
        // buffer or a held region) and which Rust reaches only through copies or atomic
        // words (see `LibMemory`); valid pointers.
        check("PtlMDBind", unsafe { ffi::PtlMDBind(self.h, &md, &mut h) })?;
        Ok(RefMd { _mem: mem, h })
    }
}

impl Drop for RefNi<'_> {
    fn drop(&mut self) {
        // SAFETY: `h` was opened by `init` and is closed once; the objects of the NI borrow
        // it, so none outlives it.
        unsafe { ffi::PtlNIFini(self.h) };
    }
}

impl RefEq<'_> {
    /// The next event, waiting up to `timeout` (`None` if none came).
    pub fn wait(&self, timeout: Duration) -> PtlResult<Option<Event>> {
        let mut ev = ffi::ptl_event_t::default();
        let mut which = 0;
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX - 1);
        // SAFETY: one valid EQ handle, valid out-pointers.
        let rc = unsafe { ffi::PtlEQPoll(&self.h, 1, ms, &mut ev, &mut which) };
        if rc == ffi::ptl_retvals_PTL_EQ_EMPTY as std::os::raw::c_int {
            return Ok(None);
        }
        check("PtlEQPoll", rc)?;
        event(&ev, self.addressing).map(Some)
    }
}

impl RefCt<'_> {
    /// Waits up to `timeout` for `threshold` successes or a failure; the count then (`None` if
    /// neither came).
    pub fn wait(&self, threshold: u64, timeout: Duration) -> PtlResult<Option<CtEvent>> {
        let mut ev = ffi::ptl_ct_event_t::default();
        let mut which = 0;
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX - 1);
        // SAFETY: one valid CT handle and threshold, valid out-pointers.
        let rc = unsafe { ffi::PtlCTPoll(&self.h, &threshold, 1, ms, &mut ev, &mut which) };
        if rc == ffi::ptl_retvals_PTL_CT_NONE_REACHED as std::os::raw::c_int {
            return Ok(None);
        }
        check("PtlCTPoll", rc)?;
        Ok(Some(CtEvent {
            success: ev.success,
            failure: ev.failure,
        }))
    }
}

impl Drop for RefCt<'_> {
    fn drop(&mut self) {
        // SAFETY: `h` was allocated by `ct_alloc` and is freed once.
        unsafe { ffi::PtlCTFree(self.h) };
    }
}

impl Drop for RefMe<'_> {
    fn drop(&mut self) {
        // SAFETY: `h` was appended by `me_append` and is unlinked once.
        unsafe { ffi::PtlMEUnlink(self.h) };
    }
}

impl Drop for RefEq<'_> {
    fn drop(&mut self) {
        // SAFETY: `h` was allocated by `eq_alloc` and is freed once.
        unsafe { ffi::PtlEQFree(self.h) };
    }
}

impl Drop for RefMd<'_> {
    fn drop(&mut self) {
        // SAFETY: `h` was bound by `md_bind` and is released once.
        unsafe { ffi::PtlMDRelease(self.h) };
    }
}

impl Drop for RefLe<'_> {
    fn drop(&mut self) {
        // SAFETY: `h` was appended by `le_append` and is unlinked once (an entry the
        // library unlinked by itself answers with an error, which changes nothing).
        unsafe { ffi::PtlLEUnlink(self.h) };
    }
}
