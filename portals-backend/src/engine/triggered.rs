//! Triggered operations (`PtlTriggered*`): an operation held on a counting event until the
//! CT's success count reaches a threshold, then started as if just called. Operations on one
//! CT with the same threshold start in the order they were issued. One whose threshold the
//! CT has already reached starts at once. A CT change that releases operations releases them
//! before the call that changed it returns, and the operations they start may release more
//! (a chain of triggered CT increments runs to its end); the work list keeps that iterative.
//!
//! Each NI holds at most `max_triggered_ops` waiting operations; one more is
//! [`PtlError::NoSpace`]. An operation whose objects went away before it started (a
//! released MD) fails when it starts, as a call on them would, and is dropped.

use super::objects::{AtomicArgs, CtHandle, FetchArgs, GetArgs, NiHandle, PutArgs};
use super::Engine;
use crate::error::{PtlError, PtlResult};
use crate::types::CtEvent;

/// A fetch-atomic or swap held for later: its arguments with the operand (a swap's compare
/// or mask value) owned.
#[derive(Debug, Clone)]
pub struct HeldFetch {
    /// The arguments; their `operand` is ignored (empty).
    pub args: FetchArgs<'static>,
    /// The operand.
    pub operand: Vec<u8>,
}

impl HeldFetch {
    /// The arguments with the operand in place.
    pub fn args(&self) -> FetchArgs<'_> {
        FetchArgs {
            operand: &self.operand,
            ..self.args
        }
    }
}

/// An operation waiting on a counting event.
#[derive(Debug, Clone)]
pub enum TriggeredOp {
    /// `PtlTriggeredPut`.
    Put(PutArgs),
    /// `PtlTriggeredGet`.
    Get(GetArgs),
    /// `PtlTriggeredAtomic`.
    Atomic(AtomicArgs),
    /// `PtlTriggeredFetchAtomic`.
    FetchAtomic(HeldFetch),
    /// `PtlTriggeredSwap`.
    Swap(HeldFetch),
    /// `PtlTriggeredCTInc`: adds to a CT.
    CtInc(CtHandle, CtEvent),
    /// `PtlTriggeredCTSet`: sets a CT.
    CtSet(CtHandle, CtEvent),
}

/// A held operation and the count that releases it.
#[derive(Debug, Clone)]
pub(crate) struct Trigger {
    pub(crate) threshold: u64,
    pub(crate) op: TriggeredOp,
}

impl Engine {
    /// Holds `op` on `ct` until its success count reaches `threshold` (starts it now if it
    /// has).
    pub fn trigger(&mut self, ct: CtHandle, threshold: u64, op: TriggeredOp) -> PtlResult<()> {
        const CALL: &str = "triggered operation";
        let c = self.cts.get(CALL, ct)?;
        let ni = c.ni;
        if c.value.success >= threshold {
            return self.start_triggered(op);
        }
        let n = self.ni(CALL, ni)?;
        if n.n_triggered >= n.limits.max_triggered_ops {
            return Err(PtlError::NoSpace {
                call: CALL,
                what: "triggered operation",
                limit: u64::from(n.limits.max_triggered_ops),
            });
        }
        self.ni_mut(CALL, ni)?.n_triggered += 1;
        // Kept sorted by threshold; equal thresholds stay in issue order.
        let list = &mut self.cts.get_mut(CALL, ct)?.triggers;
        let at = list.partition_point(|t| t.threshold <= threshold);
        list.insert(at, Trigger { threshold, op });
        Ok(())
    }

    /// Drops every operation waiting on `ct` (`PtlCTCancelTriggered`).
    pub fn ct_cancel_triggered(&mut self, ct: CtHandle) -> PtlResult<()> {
        let c = self.cts.get_mut("ct_cancel_triggered", ct)?;
        let n = c.triggers.len() as u32;
        c.triggers.clear();
        let ni = c.ni;
        self.release_triggered_slots(ni, n);
        Ok(())
    }

    fn release_triggered_slots(&mut self, ni: NiHandle, n: u32) {
        if let Ok(state) = self.ni_mut("triggered", ni) {
            state.n_triggered = state.n_triggered.saturating_sub(n);
        }
    }

    /// `ct` changed: starts what it released, and what those release in turn.
    pub(super) fn ct_changed(&mut self, ct: CtHandle) {
        self.trigger_work.push(ct);
        if self.triggering {
            return;
        }
        self.triggering = true;
        while let Some(ct) = self.trigger_work.pop() {
            let Ok(c) = self.cts.get_mut("triggered", ct) else {
                continue;
            };
            let success = c.value.success;
            let ready = c.triggers.partition_point(|t| t.threshold <= success);
            if ready == 0 {
                continue;
            }
            let released: Vec<Trigger> = c.triggers.drain(..ready).collect();
            let ni = c.ni;
            self.release_triggered_slots(ni, released.len() as u32);
            for t in released {
                // A failure to start (an MD released meanwhile) is the operation's end:
                // nothing is waiting for its return code.
                let _ = self.start_triggered(t.op);
            }
        }
        self.triggering = false;
    }

    fn start_triggered(&mut self, op: TriggeredOp) -> PtlResult<()> {
        match op {
            TriggeredOp::Put(a) => self.put(&a),
            TriggeredOp::Get(a) => self.get(&a),
            TriggeredOp::Atomic(a) => self.atomic(&a),
            TriggeredOp::FetchAtomic(f) => self.fetch_atomic(&f.args()),
            TriggeredOp::Swap(f) => self.swap(&f.args()),
            TriggeredOp::CtInc(ct, v) => self.ct_inc(ct, v),
            TriggeredOp::CtSet(ct, v) => self.ct_set(ct, v),
        }
    }
}
