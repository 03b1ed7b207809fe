//! The unexpected list of a portal table entry. An operation that lands in an entry of the
//! overflow list leaves its header here (unless the entry says
//! [`MeOptions::UNEXPECTED_HDR_DISABLE`]); the data stays in the overflow entry's memory.
//! Two things take headers off again, oldest first:
//!
//! - an entry appended to the priority list that matches one: a `*_OVERFLOW` event tells the
//!   application where the data lies (counted on the entry's CT with
//!   [`MeOptions::EVENT_CT_OVERFLOW`]); a use-once entry takes one header and is unlinked, a
//!   persistent one takes every header it matches;
//! - a search ([`Engine::search`], `PtlMESearch`/`PtlLESearch`): [`SearchOp::Only`] reports
//!   each matching header with a `SEARCH` event and leaves it, [`SearchOp::Delete`] reports it
//!   with its `*_OVERFLOW` event and removes it. A use-once search stops at the first match.
//!   Each header found counts a success on the search's CT; a search that ends without a
//!   match (nothing found, or a persistent search after its last) counts a failure, and
//!   one that found nothing posts a `SEARCH` event with [`NiFail::NoMatch`].

use super::events::blank;
use super::objects::{CtHandle, MeHandle, NiHandle};
use super::target::{id_matches, permits};
use super::Engine;
use crate::error::PtlResult;
use crate::proto::{OpKind, RequestHeader};
use crate::types::{
    AtomicOp, AtomicType, Event, EventKind, ListKind, MatchBits, Matching, MeOptions, NiFail,
    PhysId, ProcessId, PtIndex, Uid, UID_ANY,
};

/// What an operation that landed in an overflow entry left on the unexpected list.
#[derive(Debug, Clone, Copy)]
pub struct UnexpectedHeader {
    op: OpKind,
    from: PhysId,
    initiator: ProcessId,
    uid: Uid,
    match_bits: MatchBits,
    hdr_data: u64,
    rlength: u64,
    mlength: u64,
    /// Offset in the overflow entry.
    remote_offset: u64,
    /// Where the data lies (the event address of the overflow entry's bytes).
    start: u64,
    atomic: Option<(AtomicOp, AtomicType)>,
}

/// What a search does with the headers it finds (`ptl_search_op_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchOp {
    /// `PTL_SEARCH_ONLY`: report them, leave them.
    Only,
    /// `PTL_SEARCH_DELETE`: report them and take them off the list.
    Delete,
}

/// The matching criteria of a search (those of an ME or LE; an LE matches any header).
#[derive(Debug, Clone, Copy)]
pub struct SearchSpec {
    /// Counts found headers (successes) and an unsuccessful end (a failure), with
    /// [`MeOptions::EVENT_CT_OVERFLOW`].
    pub ct: Option<CtHandle>,
    /// Only headers of this user (or any, [`UID_ANY`]).
    pub uid: Uid,
    /// `OP_PUT`/`OP_GET` (which operations), `USE_ONCE`, `EVENT_CT_OVERFLOW`.
    pub options: crate::types::MeOptions,
    /// Only headers from this initiator (matching NIs).
    pub match_id: ProcessId,
    /// Match bits (matching NIs).
    pub match_bits: MatchBits,
    /// Bits to ignore (matching NIs).
    pub ignore_bits: MatchBits,
}

/// The `*_OVERFLOW` event kind of an operation.
fn overflow_kind(op: OpKind) -> EventKind {
    match op {
        OpKind::Put => EventKind::PutOverflow,
        OpKind::Get => EventKind::GetOverflow,
        OpKind::Atomic => EventKind::AtomicOverflow,
        OpKind::FetchAtomic | OpKind::Swap => EventKind::FetchAtomicOverflow,
    }
}

fn header_matches(spec: &SearchSpec, matching: bool, hdr: &UnexpectedHeader) -> bool {
    let rank = match hdr.initiator {
        ProcessId::Rank(r) => Some(r),
        ProcessId::Phys(_) => None,
    };
    (!matching
        || (id_matches(spec.match_id, hdr.from, rank)
            && (hdr.match_bits ^ spec.match_bits) & !spec.ignore_bits == 0))
        && permits(spec.options, hdr.op)
        && (spec.uid == UID_ANY || spec.uid == hdr.uid)
}

impl Engine {
    /// Records the header of an operation that landed at `offset` of an overflow entry
    /// (`start`: the event address of its data). Matching refuses an arrival that would not
    /// find room (the NI's `max_unexpected_headers`): disabled by flow control, or dropped;
    /// the check here only guards that bound.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn record_unexpected(
        &mut self,
        ni: NiHandle,
        h: &RequestHeader,
        initiator: ProcessId,
        from: PhysId,
        start: u64,
        mlength: u64,
        offset: u64,
    ) {
        let Ok(limit) = self
            .ni("unexpected", ni)
            .map(|n| n.limits.max_unexpected_headers)
        else {
            return;
        };
        let Ok(pt) = self.pt_mut("unexpected", ni, h.pt_index) else {
            return;
        };
        if pt.unexpected.len() >= limit as usize {
            self.stats.unexpected_dropped += 1;
            return;
        }
        pt.unexpected.push_back(UnexpectedHeader {
            op: h.op,
            from,
            initiator,
            uid: h.uid,
            match_bits: h.match_bits,
            hdr_data: h.hdr_data,
            rlength: h.rlength,
            mlength,
            remote_offset: offset,
            start,
            atomic: h.atomic,
        });
    }

    /// The headers of PT `pt_index` that `spec` matches, oldest first (only the first when
    /// `first_only`), taken off the list when `remove`.
    fn find_unexpected(
        &mut self,
        ni: NiHandle,
        pt_index: PtIndex,
        spec: &SearchSpec,
        first_only: bool,
        remove: bool,
    ) -> PtlResult<Vec<UnexpectedHeader>> {
        let matching = self.ni("search", ni)?.kind.matching == Matching::Matching;
        let pt = self.pt_mut("search", ni, pt_index)?;
        let mut found = Vec::new();
        let mut i = 0;
        while i < pt.unexpected.len() {
            let hdr = pt.unexpected[i];
            if header_matches(spec, matching, &hdr) {
                found.push(hdr);
                if remove {
                    pt.unexpected.remove(i);
                } else {
                    i += 1;
                }
                if first_only {
                    break;
                }
            } else {
                i += 1;
            }
        }
        Ok(found)
    }

    /// An event reporting `hdr`.
    fn header_event(
        kind: EventKind,
        hdr: &UnexpectedHeader,
        pt_index: PtIndex,
        user_ptr: u64,
    ) -> Event {
        let mut ev = blank(kind);
        ev.start = hdr.start;
        ev.user_ptr = user_ptr;
        ev.hdr_data = hdr.hdr_data;
        ev.match_bits = hdr.match_bits;
        ev.rlength = hdr.rlength;
        ev.mlength = hdr.mlength;
        ev.remote_offset = hdr.remote_offset;
        ev.initiator = hdr.initiator;
        ev.uid = hdr.uid;
        ev.pt_index = pt_index;
        ev.list = ListKind::Overflow;
        ev.atomic_op = hdr.atomic.map(|a| a.0);
        ev.atomic_type = hdr.atomic.map(|a| a.1);
        ev
    }

    /// Takes the headers a just-linked priority entry matches (see the module docs).
    pub(super) fn take_unexpected_for(&mut self, me: MeHandle) {
        let Ok(e) = self.entries.get("append", me) else {
            return;
        };
        let (ni, pt_index, user_ptr, options, ct) = (e.ni, e.pt_index, e.user_ptr, e.options, e.ct);
        let spec = SearchSpec {
            ct,
            uid: e.uid,
            options,
            match_id: e.match_id,
            match_bits: e.match_bits,
            ignore_bits: e.ignore_bits,
        };
        let Ok(pt) = self.pt_mut("append", ni, pt_index) else {
            return;
        };
        if pt.unexpected.is_empty() {
            return;
        }
        let eq = pt.eq;
        let use_once = options.contains(MeOptions::USE_ONCE);
        let Ok(found) = self.find_unexpected(ni, pt_index, &spec, use_once, true) else {
            return;
        };
        let quiet =
            options.intersects(MeOptions::EVENT_OVER_DISABLE | MeOptions::EVENT_SUCCESS_DISABLE);
        for hdr in &found {
            if let (Some(eq), false) = (eq, quiet) {
                let ev = Self::header_event(overflow_kind(hdr.op), hdr, pt_index, user_ptr);
                self.post(eq, ev);
            }
            if let (Some(ct), true) = (ct, options.contains(MeOptions::EVENT_CT_OVERFLOW)) {
                let bytes = options
                    .contains(MeOptions::EVENT_CT_BYTES)
                    .then_some(hdr.mlength);
                self.count(ct, true, bytes);
            }
        }
        if use_once && !found.is_empty() && self.unlink("append", me).is_ok() {
            if let (Some(eq), false) = (eq, options.contains(MeOptions::EVENT_UNLINK_DISABLE)) {
                let mut ev = blank(EventKind::AutoUnlink);
                ev.user_ptr = user_ptr;
                ev.pt_index = pt_index;
                ev.list = ListKind::Priority;
                ev.uid = self.uid;
                self.post(eq, ev);
            }
        }
    }

    /// Searches the unexpected list of PT `pt_index` (`PtlMESearch` on a matching NI,
    /// `PtlLESearch` on a non-matching one); see the module docs for what it reports.
    pub fn search(
        &mut self,
        ni: NiHandle,
        pt_index: PtIndex,
        spec: SearchSpec,
        op: SearchOp,
        user_ptr: u64,
    ) -> PtlResult<()> {
        const CALL: &str = "search";
        if let Some(ct) = spec.ct {
            self.check_ct(CALL, ni, ct)?;
        }
        let eq = self.pt_mut(CALL, ni, pt_index)?.eq;
        let use_once = spec.options.contains(MeOptions::USE_ONCE);
        let found = self.find_unexpected(ni, pt_index, &spec, use_once, op == SearchOp::Delete)?;
        let counted = spec
            .ct
            .filter(|_| spec.options.contains(MeOptions::EVENT_CT_OVERFLOW));
        for hdr in &found {
            let kind = match op {
                SearchOp::Only => EventKind::Search,
                SearchOp::Delete => overflow_kind(hdr.op),
            };
            if let Some(eq) = eq {
                let ev = Self::header_event(kind, hdr, pt_index, user_ptr);
                self.post(eq, ev);
            }
            if let Some(ct) = counted {
                let bytes = spec
                    .options
                    .contains(MeOptions::EVENT_CT_BYTES)
                    .then_some(hdr.mlength);
                self.count(ct, true, bytes);
            }
        }
        if found.is_empty() {
            if let Some(eq) = eq {
                let mut ev = blank(EventKind::Search);
                ev.user_ptr = user_ptr;
                ev.pt_index = pt_index;
                ev.ni_fail = NiFail::NoMatch;
                ev.uid = self.uid;
                self.post(eq, ev);
            }
        }
        if found.is_empty() || !use_once {
            if let Some(ct) = counted {
                self.count(ct, false, None);
            }
        }
        Ok(())
    }

    /// The number of headers on PT `pt_index`'s unexpected list.
    pub fn unexpected_len(&mut self, ni: NiHandle, pt_index: PtIndex) -> PtlResult<usize> {
        Ok(self
            .pt_mut("unexpected_len", ni, pt_index)?
            .unexpected
            .len())
    }
}
