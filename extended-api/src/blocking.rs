//! The slots of blocking puts and gets that are one network operation: a put of up to
//! [`crate::ext::PUT_CHUNK`] bytes or a get of up to [`crate::ext::SMALL_GET`] bytes to a rank
//! off this node.
//!
//! Such a call waits for its own completion before it returns, so it needs none of an explicit
//! operation's bookkeeping: no cell in the slab (`crate::ops`, taken, completed, looked at and
//! freed under its lock, four locks per operation), no handle, no byte window. It takes a slot
//! here with one compare-and-swap, names the slot in its operation's `user_ptr` (the cell
//! number with [`SLOT_BIT`] set), and the event queue's drain records the outcome in the slot.
//! A get lands in the slot's own [`crate::ext::SMALL_GET`] bytes of a region bound once. That
//! took 10 of the initiator's 32 locked instructions per 8-byte put or get and 0.02-0.03 µs of
//! its turnaround (issue 26, `benches/perf/network-turnaround.md`).
//!
//! When every slot is taken (more threads in blocking calls than [`BLOCKING_SLOTS`]), a call
//! takes the explicit-handle path instead.

use std::sync::atomic::{AtomicU32, Ordering};

use rgasnet_portals::NiFail;

use crate::error::ExtError;
use crate::explicit::{get_args, put_args};
use crate::ext::{Shared, PUT_CHUNK, SMALL_GET};

/// Slots: blocking calls in flight at once (one per thread in one) before calls fall back to
/// the explicit-handle path.
pub(crate) const BLOCKING_SLOTS: u32 = 64;

/// The bit of an operation's cell number (the low 32 bits of its `user_ptr`) that says the
/// number below it is a blocking slot. The slab's cells never reach it: 2^31 cells would take
/// over 60 GiB.
pub(crate) const SLOT_BIT: u32 = 1 << 31;

/// No call holds the slot.
const FREE: u32 = 0;
/// A call's operation is in flight.
const BUSY: u32 = 1;
/// The call gave up waiting (an error) while its operation was in flight: the completion
/// frees the slot, so that a late reply cannot land in a slot another call took.
const ABANDONED: u32 = 2;
/// Completed: `DONE + n` for the failure type of code `n` ([`NiFail::ALL`]).
const DONE: u32 = 3;

/// The cell number that names `slot` in an operation's `user_ptr`.
pub(crate) fn cell_of(slot: u32) -> u32 {
    SLOT_BIT | slot
}

/// The slot a completed operation's cell number names, if it names one.
pub(crate) fn slot_of(cell: u64) -> Option<u32> {
    let cell = u32::try_from(cell).ok()?;
    (cell & SLOT_BIT != 0).then_some(cell & !SLOT_BIT)
}

/// The states of the slots. Every transition is one atomic step, so any thread may take a slot
/// while the drain (under the interface lock) completes another.
pub(crate) struct BlockingSlots {
    states: Box<[AtomicU32]>,
}

impl BlockingSlots {
    /// [`BLOCKING_SLOTS`] free slots.
    pub(crate) fn new() -> BlockingSlots {
        BlockingSlots {
            states: (0..BLOCKING_SLOTS).map(|_| AtomicU32::new(FREE)).collect(),
        }
    }

    /// Takes a free slot; `None` when every slot is taken.
    pub(crate) fn take(&self) -> Option<u32> {
        self.states.iter().enumerate().find_map(|(i, s)| {
            // A look before the locked compare-exchange: a thread that passes busy slots does
            // not lock each one. Relaxed: only a hint, the exchange decides. Acquire: pairs
            // with the Release in `free`, so that the previous owner's copy out of the landing
            // happens before this call's reply can land there.
            (s.load(Ordering::Relaxed) == FREE
                && s.compare_exchange(FREE, BUSY, Ordering::Acquire, Ordering::Relaxed)
                    .is_ok())
            .then_some(i as u32)
        })
    }

    /// Gives back a slot whose operation was never issued.
    pub(crate) fn release(&self, slot: u32) {
        if let Some(s) = self.states.get(slot as usize) {
            // Relaxed: nothing was issued, so nothing is published.
            s.store(FREE, Ordering::Relaxed);
        }
    }

    /// Records the completion of `slot`'s operation with `fail` (the drain, under the
    /// interface lock). An abandoned slot becomes free; a slot in another state (which no
    /// operation names) is left as it is.
    pub(crate) fn complete(&self, slot: u32, fail: NiFail) {
        let Some(s) = self.states.get(slot as usize) else {
            return;
        };
        let code = u32::from(fail.code());
        // Release: the waiter that reads the completed state (Acquire) then reads a get's bytes
        // in the slot's landing, which the engine wrote before it posted the event.
        let _ = s.fetch_update(Ordering::Release, Ordering::Relaxed, |state| match state {
            BUSY => Some(DONE + code),
            ABANDONED => Some(FREE),
            _ => None,
        });
    }

    /// The outcome of `slot`'s operation once it completed; `None` while it is in flight.
    pub(crate) fn outcome(&self, slot: u32) -> Option<NiFail> {
        // Acquire: pairs with the Release in `complete` (see there).
        let state = self.states.get(slot as usize)?.load(Ordering::Acquire);
        let code = state.checked_sub(DONE)?;
        NiFail::ALL.get(code as usize).copied()
    }

    /// Frees a completed slot, once its owner has taken the outcome (and a get's bytes).
    pub(crate) fn free(&self, slot: u32) {
        if let Some(s) = self.states.get(slot as usize) {
            // Release: the owner's copy out of the landing happens before the next call that
            // takes the slot (its Acquire in `take`) lets a reply land there.
            s.store(FREE, Ordering::Release);
        }
    }

    /// The owner gives up waiting: a completed slot is freed now, one in flight when its
    /// operation completes.
    pub(crate) fn abandon(&self, slot: u32) {
        if let Some(s) = self.states.get(slot as usize) {
            // Relaxed: the owner reads nothing more from the slot.
            let _ = s.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |state| match state {
                BUSY => Some(ABANDONED),
                FREE | ABANDONED => None,
                _ => Some(FREE),
            });
        }
    }
}

impl Shared {
    /// A blocking put of `src` to (`rank`, `offset`): in a slot when it is one network
    /// operation, otherwise as an explicit put and its wait. Returns once the target
    /// acknowledged it.
    pub(crate) fn put_blocking(
        &self,
        call: &'static str,
        rank: u32,
        offset: u64,
        src: &[u8],
    ) -> Result<(), ExtError> {
        self.check_remote(call, rank, offset, src.len())?;
        if src.len() <= PUT_CHUNK && self.local_segment(rank).is_none() {
            if let Some(slot) = self.blocking.take() {
                return self.put_in_slot(call, rank, offset, src, slot);
            }
        }
        self.put_nb_raw(call, rank, offset, src)?.wait()
    }

    /// A blocking get of `dest.len()` bytes from (`rank`, `offset`): in a slot when it is
    /// one network operation that fits the slot's landing, otherwise as an explicit get and
    /// its wait.
    pub(crate) fn get_blocking(
        &self,
        call: &'static str,
        dest: &mut [u8],
        rank: u32,
        offset: u64,
    ) -> Result<(), ExtError> {
        self.check_remote(call, rank, offset, dest.len())?;
        if dest.len() <= SMALL_GET && self.local_segment(rank).is_none() {
            if let Some(slot) = self.blocking.take() {
                return self.get_in_slot(call, dest, rank, offset, slot);
            }
        }
        self.get_nb_raw(call, dest, rank, offset)?.wait()
    }

    fn put_in_slot(
        &self,
        call: &'static str,
        rank: u32,
        offset: u64,
        src: &[u8],
        slot: u32,
    ) -> Result<(), ExtError> {
        let args = put_args(self.put_md, 0, src.len(), rank, offset, cell_of(slot));
        self.issue_in_slot(call, slot, || self.ni.put_from(&args, src))?;
        let fail = self.wait_slot(call, rank, slot)?;
        self.blocking.free(slot);
        Shared::fail_result(call, rank, Some(fail))
    }

    fn get_in_slot(
        &self,
        call: &'static str,
        dest: &mut [u8],
        rank: u32,
        offset: u64,
        slot: u32,
    ) -> Result<(), ExtError> {
        let base = slot as usize * SMALL_GET;
        let args = get_args(
            self.blocking_md,
            base,
            dest.len(),
            rank,
            offset,
            cell_of(slot),
        );
        self.issue_in_slot(call, slot, || self.ni.get(&args))?;
        let fail = self.wait_slot(call, rank, slot)?;
        let r = Shared::fail_result(call, rank, Some(fail)).and_then(|()| {
            // In bounds: the landing holds `SMALL_GET` bytes per slot.
            self.blocking_landing
                .read(base, dest)
                .map_err(|_| ExtError::Remote {
                    call,
                    rank,
                    fail: NiFail::Segv,
                })
        });
        // Only now: the next call that takes the slot may let a reply land in it.
        self.blocking.free(slot);
        r
    }

    /// Issues `slot`'s operation with a credit of the event queue; on an error, gives both
    /// back (nothing was issued).
    fn issue_in_slot(
        &self,
        call: &'static str,
        slot: u32,
        issue: impl FnOnce() -> Result<(), rgasnet_portals::PtlError>,
    ) -> Result<(), ExtError> {
        if let Err(e) = self.acquire_credit(call) {
            self.blocking.release(slot);
            return Err(e);
        }
        issue().map_err(|source| {
            // Relaxed: see the `credits` field.
            self.credits.fetch_sub(1, Ordering::Relaxed);
            self.blocking.release(slot);
            ExtError::Portals { call, source }
        })
    }

    /// Waits (making progress) until `slot`'s operation completed; returns its failure type.
    /// A wait that ends in an error abandons the slot to its operation's completion.
    fn wait_slot(&self, call: &'static str, rank: u32, slot: u32) -> Result<NiFail, ExtError> {
        loop {
            if let Some(fail) = self.blocking.outcome(slot) {
                return Ok(fail);
            }
            let waited =
                self.wait_until(call, None, |_, sh| Ok(sh.blocking.outcome(slot).is_some()));
            if let Err(e) = waited {
                self.blocking.abandon(slot);
                return Err(match e {
                    // One operation, one rank: named as the native engine names a dead
                    // target (as an explicit handle's wait does).
                    ExtError::NoCompletion { .. } => ExtError::Remote {
                        call,
                        rank,
                        fail: NiFail::Undeliverable,
                    },
                    e => e,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_numbers_name_slots_and_nothing_else() {
        assert_eq!(slot_of(u64::from(cell_of(0))), Some(0));
        assert_eq!(slot_of(u64::from(cell_of(63))), Some(63));
        assert_eq!(slot_of(0), None);
        assert_eq!(slot_of(u64::from(SLOT_BIT - 1)), None);
        // Only the low 32 bits are a cell number.
        assert_eq!(slot_of(1 << 32), None);
    }

    #[test]
    fn a_slot_is_taken_completed_and_freed() {
        let slots = BlockingSlots::new();
        let a = slots.take().unwrap();
        let b = slots.take().unwrap();
        assert_ne!(a, b);
        assert_eq!(slots.outcome(a), None);
        slots.complete(a, NiFail::Segv);
        assert_eq!(slots.outcome(a), Some(NiFail::Segv));
        assert_eq!(slots.outcome(b), None);
        slots.complete(b, NiFail::Ok);
        assert_eq!(slots.outcome(b), Some(NiFail::Ok));
        // A second completion of a completed slot changes nothing.
        slots.complete(b, NiFail::Dropped);
        assert_eq!(slots.outcome(b), Some(NiFail::Ok));
        slots.free(a);
        assert_eq!(slots.outcome(a), None);
        // The lowest free slot is taken first.
        assert_eq!(slots.take(), Some(a));
    }

    #[test]
    fn every_failure_type_survives_the_slot() {
        let slots = BlockingSlots::new();
        for fail in NiFail::ALL {
            let s = slots.take().unwrap();
            slots.complete(s, fail);
            assert_eq!(slots.outcome(s), Some(fail));
            slots.free(s);
        }
    }

    #[test]
    fn all_slots_taken_means_none() {
        let slots = BlockingSlots::new();
        let taken: Vec<u32> = (0..BLOCKING_SLOTS).map(|_| slots.take().unwrap()).collect();
        assert_eq!(taken, (0..BLOCKING_SLOTS).collect::<Vec<_>>());
        assert_eq!(slots.take(), None);
        slots.release(5);
        assert_eq!(slots.take(), Some(5));
        // Out-of-range slots are ignored.
        slots.complete(BLOCKING_SLOTS, NiFail::Ok);
        slots.free(BLOCKING_SLOTS);
        slots.abandon(BLOCKING_SLOTS);
        assert_eq!(slots.outcome(BLOCKING_SLOTS), None);
    }

    #[test]
    fn an_abandoned_slot_is_freed_by_its_completion_only() {
        let slots = BlockingSlots::new();
        let a = slots.take().unwrap();
        slots.abandon(a);
        // Still held: a late reply may land in it.
        assert_ne!(slots.take(), Some(a));
        assert_eq!(slots.outcome(a), None);
        slots.complete(a, NiFail::Undeliverable);
        assert_eq!(slots.outcome(a), None);
        let slots = BlockingSlots::new();
        let b = slots.take().unwrap();
        slots.complete(b, NiFail::Ok);
        // Abandoning a completed slot frees it at once.
        slots.abandon(b);
        assert_eq!(slots.take(), Some(b));
    }
}
