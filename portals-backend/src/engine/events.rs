//! Posting full events to EQs and counting on CTs, shared by the initiator and target sides.

use super::objects::{CtHandle, EqHandle};
use super::Engine;
use crate::types::{Event, EventKind, ListKind, NiFail, ProcessId};

impl Engine {
    /// Posts `ev` to `eq`. A full EQ loses the event but remembers the loss, so the next
    /// `eq_get` reports `Dropped` (never silent). Returns whether the event was stored.
    pub(super) fn post(&mut self, eq: EqHandle, ev: Event) -> bool {
        let Ok(q) = self.eqs.get_mut("post", eq) else {
            // The EQ was freed: refcounts prevent this while a PT or MD uses it.
            return false;
        };
        if q.events.len() >= q.capacity {
            q.dropped = true;
            self.stats.eq_overflows += 1;
            return false;
        }
        q.events.push_back(ev);
        self.stats.events_posted += 1;
        true
    }

    /// Counts one operation on `ct`: a success adds `bytes` (byte counting) or 1, a failure
    /// adds 1 to the failure count.
    pub(super) fn count(&mut self, ct: CtHandle, ok: bool, bytes: Option<u64>) {
        if let Ok(c) = self.cts.get_mut("count", ct) {
            self.stats.counts += 1;
            if ok {
                c.value.success = c.value.success.wrapping_add(bytes.unwrap_or(1));
            } else {
                c.value.failure = c.value.failure.wrapping_add(1);
            }
            if !c.triggers.is_empty() {
                self.ct_changed(ct);
            }
        }
    }
}

/// An event with every field zero / neutral except its kind; callers fill what applies.
pub(super) fn blank(kind: EventKind) -> Event {
    Event {
        kind,
        start: 0,
        user_ptr: 0,
        hdr_data: 0,
        match_bits: 0,
        rlength: 0,
        mlength: 0,
        remote_offset: 0,
        initiator: ProcessId::ANY_PHYS,
        uid: 0,
        pt_index: 0,
        list: ListKind::Priority,
        ni_fail: NiFail::Ok,
        atomic_op: None,
        atomic_type: None,
    }
}
