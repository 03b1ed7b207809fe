//! [`Ni`]: one logical network interface of an [`Interface`], with the Portals calls on its
//! objects. Each call is a thin wrapper that runs the engine's call under the interface's lock
//! and puts what it produced on the wire.

use std::time::Duration;

use super::Interface;
use crate::engine::triggered::TriggeredOp;
use crate::engine::unexpected::{SearchOp, SearchSpec};
use crate::engine::{
    AtomicArgs, CtHandle, EqGet, EqHandle, FetchArgs, GetArgs, LeHandle, LeSpec, LostImmediates,
    MdHandle, MdSpec, MeHandle, MeSpec, NiHandle, PutArgs,
};
use crate::error::{PtlError, PtlResult};
use crate::types::{
    CtEvent, ListKind, NiKind, NiLimits, PhysId, ProcessId, PtIndex, PtOptions, SrIndex, Uid,
};

/// A network interface of one kind (`ptl_handle_ni_t`) with its objects' calls. Cloning is
/// cheap.
#[derive(Clone, Debug)]
pub struct Ni {
    pub(super) iface: Interface,
    pub(super) handle: NiHandle,
    pub(super) kind: NiKind,
    pub(super) limits: NiLimits,
}

impl Ni {
    /// The interface this NI lives on.
    pub fn interface(&self) -> &Interface {
        &self.iface
    }
    /// The engine's handle of this NI (to take its immediate messages, see
    /// [`Interface::progress_holding`]).
    pub fn handle(&self) -> NiHandle {
        self.handle
    }
    /// Sends `payload` as an immediate message to `target` (an rgasnet extension, see
    /// [`crate::engine::immediate`]): `false`, sending nothing, while too many to that peer
    /// are unconfirmed, unless `force`.
    pub fn send_immediate(
        &self,
        target: ProcessId,
        payload: &[u8],
        force: bool,
    ) -> PtlResult<bool> {
        self.iface
            .with_engine(|e| e.send_immediate(self.handle, target, payload, force))
    }
    /// Immediate messages sent and not yet confirmed.
    pub fn immediates_unconfirmed(&self) -> u64 {
        self.iface.lock().stack.engine.immediates_unconfirmed()
    }
    /// The immediate messages lost with failed peers since the last call.
    pub fn take_lost_immediates(&self) -> PtlResult<Vec<LostImmediates>> {
        self.iface.with_engine(|e| Ok(e.take_lost_immediates()))
    }
    /// Matching/non-matching, logical/physical.
    pub fn kind(&self) -> NiKind {
        self.kind
    }
    /// The limits granted at init.
    pub fn limits(&self) -> NiLimits {
        self.limits
    }
    /// Closes the NI (`PtlNIFini`).
    pub fn fini(self) -> PtlResult<()> {
        let h = self.handle;
        self.iface.with_engine(|e| e.ni_fini(h))
    }
    /// Sets the rank map of a logical NI (`PtlSetMap`).
    pub fn set_map(&self, map: &[PhysId]) -> PtlResult<()> {
        self.iface.with_engine(|e| e.set_map(self.handle, map))
    }
    /// The rank map (`PtlGetMap`).
    pub fn get_map(&self) -> PtlResult<Vec<PhysId>> {
        self.iface
            .with_engine(|e| e.get_map(self.handle).map(<[PhysId]>::to_vec))
    }
    /// This process's id on the NI: its rank (logical) or physical id (`PtlGetId`).
    pub fn get_id(&self) -> PtlResult<ProcessId> {
        self.iface.with_engine(|e| e.get_id(self.handle))
    }
    /// The physical id (`PtlGetPhysId`).
    pub fn get_phys_id(&self) -> PtlResult<PhysId> {
        self.iface.with_engine(|e| e.get_phys_id(self.handle))
    }
    /// The user id (`PtlGetUid`).
    pub fn get_uid(&self) -> PtlResult<Uid> {
        self.iface.with_engine(|e| e.get_uid(self.handle))
    }
    /// A status register (`PtlNIStatus`).
    pub fn status(&self, sr: SrIndex) -> PtlResult<u64> {
        self.iface.with_engine(|e| e.ni_status(self.handle, sr))
    }

    /// Allocates a portal table entry (`PtlPTAlloc`).
    pub fn pt_alloc(
        &self,
        options: PtOptions,
        eq: Option<EqHandle>,
        index: PtIndex,
    ) -> PtlResult<PtIndex> {
        self.iface
            .with_engine(|e| e.pt_alloc(self.handle, options, eq, index))
    }
    /// Frees a portal table entry (`PtlPTFree`).
    pub fn pt_free(&self, index: PtIndex) -> PtlResult<()> {
        self.iface.with_engine(|e| e.pt_free(self.handle, index))
    }
    /// Enables a portal table entry (`PtlPTEnable`).
    pub fn pt_enable(&self, index: PtIndex) -> PtlResult<()> {
        self.iface.with_engine(|e| e.pt_enable(self.handle, index))
    }
    /// Disables a portal table entry (`PtlPTDisable`).
    pub fn pt_disable(&self, index: PtIndex) -> PtlResult<()> {
        self.iface.with_engine(|e| e.pt_disable(self.handle, index))
    }

    /// Allocates an event queue of `count` events (`PtlEQAlloc`).
    pub fn eq_alloc(&self, count: usize) -> PtlResult<EqHandle> {
        self.iface.with_engine(|e| e.eq_alloc(self.handle, count))
    }
    /// Frees an event queue (`PtlEQFree`).
    pub fn eq_free(&self, eq: EqHandle) -> PtlResult<()> {
        self.iface.with_engine(|e| e.eq_free(eq))
    }
    /// Takes the next event without waiting (`PtlEQGet`); makes progress first.
    pub fn eq_get(&self, eq: EqHandle) -> PtlResult<EqGet> {
        let mut st = self.iface.lock();
        match st.stack.engine.eq_get(eq)? {
            EqGet::Empty => {}
            got => return Ok(got),
        }
        self.iface.progress_locked(&mut st)?;
        st.stack.engine.eq_get(eq)
    }
    /// Takes the next event without making progress first: for callers that drive progress
    /// themselves ([`Interface::progress`] once, then drain several queues).
    pub fn eq_take(&self, eq: EqHandle) -> PtlResult<EqGet> {
        self.iface.lock().stack.engine.eq_get(eq)
    }
    /// [`Ni::eq_take`], also saying whether more events wait after the one taken: a caller
    /// that drains a queue stops without another look (and another lock) at an empty queue.
    pub fn eq_take_more(&self, eq: EqHandle) -> PtlResult<(EqGet, bool)> {
        let mut st = self.iface.lock();
        let got = st.stack.engine.eq_get(eq)?;
        let more = !matches!(got, EqGet::Empty) && st.stack.engine.eq_len(eq)? > 0;
        Ok((got, more))
    }
    /// Waits for the next event (`PtlEQWait`), or `EqEmpty` after `timeout`.
    pub fn eq_wait(&self, eq: EqHandle, timeout: Option<Duration>) -> PtlResult<EqGet> {
        self.iface.eq_poll(&[eq], timeout).map(|(ev, _)| ev)
    }

    /// Allocates a counting event (`PtlCTAlloc`).
    pub fn ct_alloc(&self) -> PtlResult<CtHandle> {
        self.iface.with_engine(|e| e.ct_alloc(self.handle))
    }
    /// Frees a counting event (`PtlCTFree`).
    pub fn ct_free(&self, ct: CtHandle) -> PtlResult<()> {
        self.iface.with_engine(|e| e.ct_free(ct))
    }
    /// Reads a counting event (`PtlCTGet`); makes progress first.
    pub fn ct_get(&self, ct: CtHandle) -> PtlResult<CtEvent> {
        let mut st = self.iface.lock();
        self.iface.progress_locked(&mut st)?;
        st.stack.engine.ct_get(ct)
    }
    /// Sets a counting event (`PtlCTSet`).
    pub fn ct_set(&self, ct: CtHandle, value: CtEvent) -> PtlResult<()> {
        self.iface.with_engine(|e| e.ct_set(ct, value))
    }
    /// Increments a counting event (`PtlCTInc`).
    pub fn ct_inc(&self, ct: CtHandle, inc: CtEvent) -> PtlResult<()> {
        self.iface.with_engine(|e| e.ct_inc(ct, inc))
    }
    /// Waits until `success >= threshold` or `failure > 0` (`PtlCTWait`); `CtNoneReached`
    /// after `timeout`.
    pub fn ct_wait(
        &self,
        ct: CtHandle,
        threshold: u64,
        timeout: Option<Duration>,
    ) -> PtlResult<CtEvent> {
        let r = self.iface.wait_for(timeout, |e| {
            let v = e.ct_get(ct)?;
            Ok((v.success >= threshold || v.failure > 0).then_some(v))
        })?;
        r.ok_or(PtlError::CtNoneReached)
    }
    /// Waits on several counting events (`PtlCTPoll`): the value and index of the first that
    /// reached its threshold.
    pub fn ct_poll(
        &self,
        cts: &[CtHandle],
        thresholds: &[u64],
        timeout: Option<Duration>,
    ) -> PtlResult<(CtEvent, usize)> {
        if cts.len() != thresholds.len() || cts.is_empty() {
            return Err(PtlError::arg(
                "ct_poll",
                "needs one threshold per counting event, and at least one",
            ));
        }
        let r = self.iface.wait_for(timeout, |e| {
            for (i, (ct, thr)) in cts.iter().zip(thresholds).enumerate() {
                let v = e.ct_get(*ct)?;
                if v.success >= *thr || v.failure > 0 {
                    return Ok(Some((v, i)));
                }
            }
            Ok(None)
        })?;
        r.ok_or(PtlError::CtNoneReached)
    }

    /// Binds a memory descriptor (`PtlMDBind`).
    pub fn md_bind(&self, spec: MdSpec) -> PtlResult<MdHandle> {
        self.iface.with_engine(|e| e.md_bind(self.handle, spec))
    }
    /// Releases a memory descriptor (`PtlMDRelease`); `IN_USE` while operations wait on it.
    pub fn md_release(&self, md: MdHandle) -> PtlResult<()> {
        self.iface.with_engine(|e| e.md_release(md))
    }
    /// Appends a match entry (`PtlMEAppend`).
    pub fn me_append(
        &self,
        pt_index: PtIndex,
        spec: MeSpec,
        list: ListKind,
        user_ptr: u64,
    ) -> PtlResult<MeHandle> {
        self.iface
            .with_engine(|e| e.me_append(self.handle, pt_index, spec, list, user_ptr))
    }
    /// Puts a match entry at the head of its list ([`crate::engine::Engine::me_prepend`], an rgasnet
    /// extension).
    pub fn me_prepend(
        &self,
        pt_index: PtIndex,
        spec: MeSpec,
        list: ListKind,
        user_ptr: u64,
    ) -> PtlResult<MeHandle> {
        self.iface
            .with_engine(|e| e.me_prepend(self.handle, pt_index, spec, list, user_ptr))
    }
    /// Rewinds a drained `MANAGE_LOCAL` entry ([`crate::engine::Engine::me_rewind`], an rgasnet extension).
    pub fn me_rewind(&self, me: MeHandle, eq: EqHandle) -> PtlResult<bool> {
        self.iface.with_engine(|e| e.me_rewind(me, eq))
    }
    /// Appends a list entry (`PtlLEAppend`).
    pub fn le_append(
        &self,
        pt_index: PtIndex,
        spec: LeSpec,
        list: ListKind,
        user_ptr: u64,
    ) -> PtlResult<LeHandle> {
        self.iface
            .with_engine(|e| e.le_append(self.handle, pt_index, spec, list, user_ptr))
    }
    /// Holds `op` until `ct` counts `threshold` successes (`PtlTriggered*`; see
    /// [`crate::engine::triggered`]).
    pub fn trigger(&self, ct: CtHandle, threshold: u64, op: TriggeredOp) -> PtlResult<()> {
        self.iface.with_engine(|e| e.trigger(ct, threshold, op))
    }
    /// Drops the operations waiting on `ct` (`PtlCTCancelTriggered`).
    pub fn ct_cancel_triggered(&self, ct: CtHandle) -> PtlResult<()> {
        self.iface.with_engine(|e| e.ct_cancel_triggered(ct))
    }
    /// Searches the unexpected list of `pt_index` (`PtlMESearch`, `PtlLESearch`; see
    /// [`crate::engine::unexpected`]).
    pub fn search(
        &self,
        pt_index: PtIndex,
        spec: SearchSpec,
        op: SearchOp,
        user_ptr: u64,
    ) -> PtlResult<()> {
        self.iface
            .with_engine(|e| e.search(self.handle, pt_index, spec, op, user_ptr))
    }
    /// Whether a match or list entry is still linked (neither unlinked nor auto-unlinked).
    pub fn entry_linked(&self, me: MeHandle) -> bool {
        self.iface.lock().stack.engine.entry_linked(me)
    }
    /// Unlinks a match entry (`PtlMEUnlink`).
    pub fn me_unlink(&self, me: MeHandle) -> PtlResult<()> {
        self.iface.with_engine(|e| e.me_unlink(me))
    }
    /// Unlinks a list entry (`PtlLEUnlink`).
    pub fn le_unlink(&self, le: LeHandle) -> PtlResult<()> {
        self.iface.with_engine(|e| e.le_unlink(le))
    }

    /// `PtlPut`.
    pub fn put(&self, args: &PutArgs) -> PtlResult<()> {
        self.iface.with_engine(|e| e.put(args))
    }
    /// `PtlPut` of a message that answers one from its target, such as an active-message
    /// reply (an rgasnet extension; otherwise [`Ni::put`]). A lone lazy ACK held for the target
    /// ([`crate::types::PtOptions::LAZY_ACK`]) does not ride it but follows it in a datagram of
    /// its own, so that the target takes the answer in first (see [`crate::stack`]).
    pub fn put_answer(&self, args: &PutArgs) -> PtlResult<()> {
        self.iface.with_engine_as(true, |e| e.put(args))
    }
    /// `PtlPut` whose MD bytes `[local_offset, local_offset + length)` are `parts[0]`
    /// followed by `parts[1]` but not written yet (an rgasnet extension). They are written
    /// into the MD's region before this returns, as if the caller had written them first; but
    /// when the put leaves from an [`crate::types::MdOptions::IN_PLACE`] MD in one gathered
    /// datagram, that datagram is sent from `parts` before the region is written, so the
    /// target does not wait for the copy. Retransmissions read the region, as for any
    /// in-place put.
    pub fn put_staged(&self, args: &PutArgs, parts: [&[u8]; 2]) -> PtlResult<()> {
        self.iface.put_staged(args, parts)
    }
    /// `PtlPut` of `data` instead of the MD's bytes ([`crate::engine::Engine::put_from`]).
    pub fn put_from(&self, args: &PutArgs, data: &[u8]) -> PtlResult<()> {
        self.iface.with_engine(|e| e.put_from(args, data))
    }
    /// `PtlGet`.
    pub fn get(&self, args: &GetArgs) -> PtlResult<()> {
        self.iface.with_engine(|e| e.get(args))
    }
    /// `PtlAtomic`.
    pub fn atomic(&self, args: &AtomicArgs) -> PtlResult<()> {
        self.iface.with_engine(|e| e.atomic(args))
    }
    /// `PtlFetchAtomic`.
    pub fn fetch_atomic(&self, args: &FetchArgs<'_>) -> PtlResult<()> {
        self.iface.with_engine(|e| e.fetch_atomic(args))
    }
    /// `PtlSwap`.
    pub fn swap(&self, args: &FetchArgs<'_>) -> PtlResult<()> {
        self.iface.with_engine(|e| e.swap(args))
    }
}
