//! Resource calls: portal table entries, event queues, counting events, memory descriptors and
//! match/list entries.

use std::collections::VecDeque;

use super::events::blank;
use super::objects::{
    CtHandle, CtState, EntryState, EqGet, EqHandle, EqState, LeSpec, MdHandle, MdSpec, MdState,
    MeHandle, MeSpec, NiHandle, PtState,
};
use super::{Engine, MAX_EQ_COUNT};
use crate::error::{PtlError, PtlResult};
use crate::memory::Region;
use crate::types::{
    CtEvent, EventKind, ListKind, Matching, MeOptions, ProcessId, PtIndex, PtOptions, PT_ANY,
};

fn check_range(call: &'static str, region: &Region, offset: u64, length: u64) -> PtlResult<()> {
    region
        .check(offset, length)
        .map_err(|e| PtlError::arg(call, e.to_string()))
}

impl Engine {
    fn check_eq(&self, call: &'static str, ni: NiHandle, eq: EqHandle) -> PtlResult<()> {
        if self.eqs.get(call, eq)?.ni != ni {
            return Err(PtlError::arg(call, "the EQ belongs to another NI"));
        }
        Ok(())
    }

    pub(super) fn check_ct(&self, call: &'static str, ni: NiHandle, ct: CtHandle) -> PtlResult<()> {
        if self.cts.get(call, ct)?.ni != ni {
            return Err(PtlError::arg(call, "the CT belongs to another NI"));
        }
        Ok(())
    }

    fn eq_ref(&mut self, eq: Option<EqHandle>, delta: i32) {
        if let Some(q) = eq.and_then(|h| self.eqs.get_mut("ref", h).ok()) {
            q.refs = q.refs.saturating_add_signed(delta);
        }
    }

    /// Counts a flow-controlled PT of `eq` in or out of its [`EqState::flow_reserve`] as the
    /// PT becomes enabled or stops being so (`options` are the PT's: only `FLOWCTRL` ones
    /// count).
    pub(super) fn flow_reserve(&mut self, eq: Option<EqHandle>, options: PtOptions, delta: i32) {
        if !options.contains(PtOptions::FLOWCTRL) {
            return;
        }
        if let Some(q) = eq.and_then(|h| self.eqs.get_mut("flow reserve", h).ok()) {
            q.flow_reserve = q.flow_reserve.saturating_add_signed(delta);
        }
    }

    fn ct_ref(&mut self, ct: Option<CtHandle>, delta: i32) {
        if let Some(c) = ct.and_then(|h| self.cts.get_mut("ref", h).ok()) {
            c.refs = c.refs.saturating_add_signed(delta);
        }
    }

    // ---------------------------------------------------------------- portal table entries

    /// Allocates a portal table entry at `index` (or the lowest free one for [`PT_ANY`]) with
    /// `options` and an optional EQ (required by FLOWCTRL).
    pub fn pt_alloc(
        &mut self,
        ni: NiHandle,
        options: PtOptions,
        eq: Option<EqHandle>,
        index: PtIndex,
    ) -> PtlResult<PtIndex> {
        const CALL: &str = "pt_alloc";
        if let Some(eq) = eq {
            self.check_eq(CALL, ni, eq)?;
        } else if options.contains(PtOptions::FLOWCTRL) {
            return Err(PtlError::PtEqNeeded);
        }
        let state = self.ni_mut(CALL, ni)?;
        let index = if index == PT_ANY {
            state
                .pts
                .iter()
                .position(Option::is_none)
                .ok_or(PtlError::PtFull)? as PtIndex
        } else {
            let max = state.limits.max_pt_index;
            let slot = state.pts.get(index as usize).ok_or_else(|| {
                PtlError::arg(CALL, format!("index {index} is above max_pt_index {max}"))
            })?;
            if slot.is_some() {
                return Err(PtlError::PtInUse(index));
            }
            index
        };
        let enabled = !options.contains(PtOptions::ALLOC_DISABLED);
        state.pts[index as usize] = Some(PtState {
            options,
            eq,
            enabled,
            priority: Vec::new(),
            overflow: Vec::new(),
            unexpected: std::collections::VecDeque::new(),
        });
        self.eq_ref(eq, 1);
        if enabled {
            self.flow_reserve(eq, options, 1);
        }
        Ok(index)
    }

    pub(super) fn pt_mut(
        &mut self,
        call: &'static str,
        ni: NiHandle,
        index: PtIndex,
    ) -> PtlResult<&mut PtState> {
        self.ni_mut(call, ni)?
            .pts
            .get_mut(index as usize)
            .and_then(Option::as_mut)
            .ok_or_else(|| PtlError::arg(call, format!("portal index {index} is not allocated")))
    }

    /// Frees a portal table entry; `IN_USE` while entries are attached.
    pub fn pt_free(&mut self, ni: NiHandle, index: PtIndex) -> PtlResult<()> {
        let pt = self.pt_mut("pt_free", ni, index)?;
        if !pt.priority.is_empty() || !pt.overflow.is_empty() {
            return Err(PtlError::InUse {
                call: "pt_free",
                what: "portal table entry with attached entries",
            });
        }
        // Headers still on the unexpected list go with the PT (their data lay in overflow
        // entries, which are gone already).
        let (eq, options, enabled) = (pt.eq, pt.options, pt.enabled);
        self.ni_mut("pt_free", ni)?.pts[index as usize] = None;
        self.eq_ref(eq, -1);
        if enabled {
            self.flow_reserve(eq, options, -1);
        }
        Ok(())
    }

    /// Enables a portal table entry (after flow control disabled it, or `ALLOC_DISABLED`).
    pub fn pt_enable(&mut self, ni: NiHandle, index: PtIndex) -> PtlResult<()> {
        self.pt_set_enabled("pt_enable", ni, index, true)
    }

    /// Disables a portal table entry: arriving operations are refused with `NI_PT_DISABLED`.
    pub fn pt_disable(&mut self, ni: NiHandle, index: PtIndex) -> PtlResult<()> {
        self.pt_set_enabled("pt_disable", ni, index, false)
    }

    /// Enables or disables a PT, keeping its EQ's [`EqState::flow_reserve`] in step.
    pub(super) fn pt_set_enabled(
        &mut self,
        call: &'static str,
        ni: NiHandle,
        index: PtIndex,
        enabled: bool,
    ) -> PtlResult<()> {
        let pt = self.pt_mut(call, ni, index)?;
        let was = std::mem::replace(&mut pt.enabled, enabled);
        let (eq, options) = (pt.eq, pt.options);
        if was != enabled {
            self.flow_reserve(eq, options, if enabled { 1 } else { -1 });
        }
        Ok(())
    }

    /// Whether a portal table entry is enabled.
    pub fn pt_is_enabled(&self, ni: NiHandle, index: PtIndex) -> PtlResult<bool> {
        self.ni("pt_is_enabled", ni)?
            .pts
            .get(index as usize)
            .and_then(Option::as_ref)
            .map(|pt| pt.enabled)
            .ok_or_else(|| {
                PtlError::arg(
                    "pt_is_enabled",
                    format!("portal index {index} is not allocated"),
                )
            })
    }

    // ---------------------------------------------------------------- event queues

    /// Allocates an event queue holding up to `count` events (1..=[`MAX_EQ_COUNT`]).
    pub fn eq_alloc(&mut self, ni: NiHandle, count: usize) -> PtlResult<EqHandle> {
        const CALL: &str = "eq_alloc";
        if count == 0 || count > MAX_EQ_COUNT {
            return Err(PtlError::arg(
                CALL,
                format!("count {count} is outside 1..={MAX_EQ_COUNT}"),
            ));
        }
        let state = self.ni(CALL, ni)?;
        if state.n_eqs >= state.limits.max_eqs {
            return Err(PtlError::NoSpace {
                call: CALL,
                what: "EQ",
                limit: u64::from(state.limits.max_eqs),
            });
        }
        let h = self.eqs.insert(
            CALL,
            EqState {
                ni,
                capacity: count,
                events: VecDeque::with_capacity(count.min(4096)),
                dropped: false,
                refs: 0,
                flow_reserve: 0,
            },
        )?;
        self.ni_mut(CALL, ni)?.n_eqs += 1;
        Ok(h)
    }

    /// Frees an event queue; `IN_USE` while a PT or MD posts to it.
    pub fn eq_free(&mut self, eq: EqHandle) -> PtlResult<()> {
        let q = self.eqs.get("eq_free", eq)?;
        if q.refs > 0 {
            return Err(PtlError::InUse {
                call: "eq_free",
                what: "event queue referenced by a PT or MD",
            });
        }
        let q = self.eqs.remove("eq_free", eq)?;
        if let Ok(n) = self.ni_mut("eq_free", q.ni) {
            n.n_eqs -= 1;
        }
        Ok(())
    }

    /// Takes the next event: `Dropped` when events were lost before it (`PTL_EQ_DROPPED`).
    pub fn eq_get(&mut self, eq: EqHandle) -> PtlResult<EqGet> {
        let q = self.eqs.get_mut("eq_get", eq)?;
        let got = q.events.pop_front();
        if q.events.is_empty() {
            // An emptied ring starts again at its first slot (`clear` resets the head), so a
            // queue that is drained as it fills keeps writing the same cache lines instead of
            // walking its whole allocation: each new line was a cache miss on the event's
            // path, and pushed useful lines (the socket's among them) out of the cache.
            q.events.clear();
        }
        Ok(match got {
            None => EqGet::Empty,
            Some(ev) if q.dropped => {
                q.dropped = false;
                EqGet::Dropped(ev)
            }
            Some(ev) => EqGet::Event(ev),
        })
    }

    /// Number of events waiting in an EQ.
    pub fn eq_len(&self, eq: EqHandle) -> PtlResult<usize> {
        Ok(self.eqs.get("eq_len", eq)?.events.len())
    }

    // ---------------------------------------------------------------- counting events

    /// Allocates a counting event at {0, 0}.
    pub fn ct_alloc(&mut self, ni: NiHandle) -> PtlResult<CtHandle> {
        const CALL: &str = "ct_alloc";
        let state = self.ni(CALL, ni)?;
        if state.n_cts >= state.limits.max_cts {
            return Err(PtlError::NoSpace {
                call: CALL,
                what: "CT",
                limit: u64::from(state.limits.max_cts),
            });
        }
        let h = self.cts.insert(
            CALL,
            CtState {
                ni,
                value: CtEvent::default(),
                refs: 0,
                triggers: Vec::new(),
            },
        )?;
        self.ni_mut(CALL, ni)?.n_cts += 1;
        Ok(h)
    }

    /// Frees a counting event; `IN_USE` while an MD or entry counts on it.
    pub fn ct_free(&mut self, ct: CtHandle) -> PtlResult<()> {
        if self.cts.get("ct_free", ct)?.refs > 0 {
            return Err(PtlError::InUse {
                call: "ct_free",
                what: "counting event referenced by an MD or entry",
            });
        }
        let c = self.cts.remove("ct_free", ct)?;
        if let Ok(n) = self.ni_mut("ct_free", c.ni) {
            n.n_cts -= 1;
            n.n_triggered = n.n_triggered.saturating_sub(c.triggers.len() as u32);
        }
        Ok(())
    }

    /// The current value of a counting event.
    pub fn ct_get(&self, ct: CtHandle) -> PtlResult<CtEvent> {
        Ok(self.cts.get("ct_get", ct)?.value)
    }

    /// Whether a wait for `threshold` would return: success ≥ threshold or any failure
    /// (`PtlCTWait`'s condition; the driver blocks on it).
    pub fn ct_reached(&self, ct: CtHandle, threshold: u64) -> PtlResult<bool> {
        let v = self.cts.get("ct_reached", ct)?.value;
        Ok(v.success >= threshold || v.failure != 0)
    }

    /// Sets a counting event.
    pub fn ct_set(&mut self, ct: CtHandle, value: CtEvent) -> PtlResult<()> {
        self.cts.get_mut("ct_set", ct)?.value = value;
        self.ct_changed(ct);
        Ok(())
    }

    /// Adds `inc` to a counting event (both fields, wrapping).
    pub fn ct_inc(&mut self, ct: CtHandle, inc: CtEvent) -> PtlResult<()> {
        let c = self.cts.get_mut("ct_inc", ct)?;
        c.value.success = c.value.success.wrapping_add(inc.success);
        c.value.failure = c.value.failure.wrapping_add(inc.failure);
        self.ct_changed(ct);
        Ok(())
    }

    // ---------------------------------------------------------------- memory descriptors

    /// Binds a memory descriptor over `spec.length` bytes of `spec.region` at `spec.offset`.
    pub fn md_bind(&mut self, ni: NiHandle, spec: MdSpec) -> PtlResult<MdHandle> {
        const CALL: &str = "md_bind";
        check_range(CALL, &spec.region, spec.offset, spec.length)?;
        if let Some(eq) = spec.eq {
            self.check_eq(CALL, ni, eq)?;
        }
        if let Some(ct) = spec.ct {
            self.check_ct(CALL, ni, ct)?;
        }
        let state = self.ni(CALL, ni)?;
        if state.n_mds >= state.limits.max_mds {
            return Err(PtlError::NoSpace {
                call: CALL,
                what: "MD",
                limit: u64::from(state.limits.max_mds),
            });
        }
        let (eq, ct) = (spec.eq, spec.ct);
        let h = self.mds.insert(
            CALL,
            MdState {
                ni,
                region: spec.region,
                offset: spec.offset,
                length: spec.length,
                options: spec.options,
                eq,
                ct,
                pending: 0,
            },
        )?;
        self.ni_mut(CALL, ni)?.n_mds += 1;
        self.eq_ref(eq, 1);
        self.ct_ref(ct, 1);
        Ok(h)
    }

    /// Releases a memory descriptor; `IN_USE` while an operation waits for an ack or reply
    /// that reports on it.
    pub fn md_release(&mut self, md: MdHandle) -> PtlResult<()> {
        if self.mds.get("md_release", md)?.pending > 0 {
            return Err(PtlError::InUse {
                call: "md_release",
                what: "memory descriptor with operations in flight",
            });
        }
        let m = self.mds.remove("md_release", md)?;
        if let Ok(n) = self.ni_mut("md_release", m.ni) {
            n.n_mds -= 1;
        }
        self.eq_ref(m.eq, -1);
        self.ct_ref(m.ct, -1);
        Ok(())
    }

    // ---------------------------------------------------------------- match / list entries

    /// Appends a match entry to list `list` of portal index `pt_index` on a matching NI.
    pub fn me_append(
        &mut self,
        ni: NiHandle,
        pt_index: PtIndex,
        spec: MeSpec,
        list: ListKind,
        user_ptr: u64,
    ) -> PtlResult<MeHandle> {
        self.me_insert("me_append", ni, pt_index, spec, (list, End::Back), user_ptr)
    }

    /// Like [`Engine::me_append`], but puts the entry at the *head* of its list (an rgasnet
    /// extension; Portals 4 only appends). A receive buffer that comes back after its
    /// auto-unlink is then filled before the entries that waited behind it: messages keep
    /// landing in the same, still cached, memory instead of cycling through every posted
    /// buffer.
    pub fn me_prepend(
        &mut self,
        ni: NiHandle,
        pt_index: PtIndex,
        spec: MeSpec,
        list: ListKind,
        user_ptr: u64,
    ) -> PtlResult<MeHandle> {
        self.me_insert(
            "me_prepend",
            ni,
            pt_index,
            spec,
            (list, End::Front),
            user_ptr,
        )
    }

    fn me_insert(
        &mut self,
        call: &'static str,
        ni: NiHandle,
        pt_index: PtIndex,
        spec: MeSpec,
        (list, end): (ListKind, End),
        user_ptr: u64,
    ) -> PtlResult<MeHandle> {
        if self.ni(call, ni)?.kind.matching != Matching::Matching {
            return Err(PtlError::arg(call, "match entries need a matching NI"));
        }
        let entry = EntryState {
            ni,
            pt_index,
            list,
            region: spec.region,
            offset: spec.offset,
            length: spec.length,
            ct: spec.ct,
            uid: spec.uid,
            options: spec.options,
            match_id: spec.match_id,
            match_bits: spec.match_bits,
            ignore_bits: spec.ignore_bits,
            min_free: spec.min_free,
            user_ptr,
            local_offset: 0,
        };
        self.insert(call, entry, end)
    }

    /// Appends a list entry to list `list` of portal index `pt_index` on a non-matching NI.
    /// ME-only options (MANAGE_LOCAL, NO_TRUNCATE, MAY_ALIGN) are refused.
    pub fn le_append(
        &mut self,
        ni: NiHandle,
        pt_index: PtIndex,
        spec: LeSpec,
        list: ListKind,
        user_ptr: u64,
    ) -> PtlResult<MeHandle> {
        if self.ni("le_append", ni)?.kind.matching != Matching::NoMatching {
            return Err(PtlError::arg(
                "le_append",
                "list entries need a non-matching NI",
            ));
        }
        if spec.options.intersects(MeOptions::ME_ONLY) {
            return Err(PtlError::arg(
                "le_append",
                format!(
                    "options {:?} are only valid on match entries",
                    spec.options & MeOptions::ME_ONLY
                ),
            ));
        }
        let entry = EntryState {
            ni,
            pt_index,
            list,
            region: spec.region,
            offset: spec.offset,
            length: spec.length,
            ct: spec.ct,
            uid: spec.uid,
            options: spec.options,
            match_id: ProcessId::ANY_PHYS,
            match_bits: 0,
            ignore_bits: u64::MAX,
            min_free: 0,
            user_ptr,
            local_offset: 0,
        };
        self.insert("le_append", entry, End::Back)
    }

    fn insert(&mut self, call: &'static str, entry: EntryState, end: End) -> PtlResult<MeHandle> {
        let ni = entry.ni;
        check_range(call, &entry.region, entry.offset, entry.length)?;
        if let Some(ct) = entry.ct {
            self.check_ct(call, ni, ct)?;
        }
        let state = self.ni(call, ni)?;
        let limits = state.limits;
        if state.n_entries >= limits.max_entries {
            return Err(PtlError::NoSpace {
                call,
                what: "list entry",
                limit: u64::from(limits.max_entries),
            });
        }
        let (pt_index, list) = (entry.pt_index, entry.list);
        let pt = self.pt_mut(call, ni, pt_index)?;
        if pt.list(list).len() >= limits.max_list_size as usize {
            return Err(PtlError::ListTooLong {
                limit: limits.max_list_size,
            });
        }
        let eq = pt.eq;
        let (ct, options, user_ptr) = (entry.ct, entry.options, entry.user_ptr);
        let h = self.entries.insert(call, entry)?;
        let entries = self.pt_mut(call, ni, pt_index)?.list_mut(list);
        match end {
            End::Back => entries.push(h),
            End::Front => entries.insert(0, h),
        }
        self.ni_mut(call, ni)?.n_entries += 1;
        self.ct_ref(ct, 1);
        if let Some(eq) = eq {
            if !options.contains(MeOptions::EVENT_LINK_DISABLE) {
                let mut ev = blank(EventKind::Link);
                ev.user_ptr = user_ptr;
                ev.pt_index = pt_index;
                ev.list = list;
                ev.uid = self.uid;
                self.post(eq, ev);
            }
        }
        if list == ListKind::Priority {
            self.take_unexpected_for(h);
        }
        Ok(h)
    }

    /// Rewinds a `MANAGE_LOCAL` match entry to the start of its memory (an rgasnet extension:
    /// Portals' locally managed offset only advances), if `eq` holds no event: no message
    /// deposited in the entry is then still to be announced. The caller vouches that it no
    /// longer reads any message it took from the entry. Returns whether it rewound (`false`
    /// while `eq` holds events). A receive buffer whose messages have all been consumed is
    /// thereby filled from its start again, memory still in cache, instead of advancing
    /// through all of it.
    pub fn me_rewind(&mut self, me: MeHandle, eq: EqHandle) -> PtlResult<bool> {
        const CALL: &str = "me_rewind";
        if !self.eqs.get(CALL, eq)?.events.is_empty() {
            return Ok(false);
        }
        let e = self.entries.get_mut(CALL, me)?;
        if !e.options.contains(MeOptions::MANAGE_LOCAL) {
            return Err(PtlError::arg(
                CALL,
                "only a MANAGE_LOCAL entry has a local offset",
            ));
        }
        e.local_offset = 0;
        Ok(true)
    }

    /// Unlinks a match entry (its handle becomes stale). Never `IN_USE`: the engine runs each
    /// target operation to completion inside one call, so no operation is mid-way on it.
    pub fn me_unlink(&mut self, me: MeHandle) -> PtlResult<()> {
        self.unlink("me_unlink", me).map(|_| ())
    }

    /// Whether a match or list entry is still linked (neither unlinked nor auto-unlinked).
    pub fn entry_linked(&self, h: MeHandle) -> bool {
        self.entries.get("entry_linked", h).is_ok()
    }

    /// Unlinks a list entry; see [`Engine::me_unlink`].
    pub fn le_unlink(&mut self, le: MeHandle) -> PtlResult<()> {
        self.unlink("le_unlink", le).map(|_| ())
    }

    /// Removes an entry from its list and from the entry table.
    pub(super) fn unlink(&mut self, call: &'static str, h: MeHandle) -> PtlResult<EntryState> {
        let e = self.entries.remove(call, h)?;
        if let Ok(pt) = self.pt_mut(call, e.ni, e.pt_index) {
            let l = pt.list_mut(e.list);
            if let Some(pos) = l.iter().position(|x| *x == h) {
                l.remove(pos);
            }
        }
        if let Ok(n) = self.ni_mut(call, e.ni) {
            n.n_entries -= 1;
        }
        self.ct_ref(e.ct, -1);
        Ok(e)
    }
}

/// Which end of its list a new entry goes to.
#[derive(Debug, Clone, Copy)]
enum End {
    /// Portals' append.
    Back,
    /// [`Engine::me_prepend`].
    Front,
}
