//! Bookkeeping of explicit operations (`nb` handles, blocking calls, memsets): a slab of
//! cells, one per operation, that the event-queue drain and the memset reply handler update,
//! and the small landing slots that get replies land in.
//!
//! A cell lives from issue until its owner has seen it complete — or, if the owner dropped its
//! handle first ("orphaned" it), until the last of its network operations completes. Cells are
//! never freed while an operation can still name them, so a late event cannot hit a reused
//! cell.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use rgasnet_portals::engine::MdHandle;
use rgasnet_portals::{NiFail, Region};

/// Where a get's reply lands until the owner copies it out.
#[derive(Debug)]
pub(crate) enum Landing {
    /// Nothing lands (puts, memsets).
    None,
    /// Slot `n` of the shared small-landing region.
    Small(u32),
    /// A landing region and its memory descriptor, kept for reuse (or released) once the get
    /// completed (see `rgasnet_portals::pool`).
    Dynamic {
        /// The bytes.
        region: Region,
        /// Its descriptor.
        md: MdHandle,
    },
}

/// One explicit operation.
#[derive(Debug)]
struct Cell {
    /// Network operations (or memset replies) still to come.
    remaining: u32,
    /// The first failure reported.
    fail: Option<NiFail>,
    /// The owner dropped its handle: free the cell on the last completion.
    orphan: bool,
    landing: Landing,
}

/// What the owner gets back from a completed cell.
pub(crate) struct Finished {
    pub(crate) fail: Option<NiFail>,
    pub(crate) landing: Landing,
}

/// What completing one operation freed (for the caller to release outside the lock).
pub(crate) enum Freed {
    /// Nothing to release.
    Nothing,
    /// An orphaned cell's landing.
    Landing(Landing),
}

#[derive(Default)]
struct Slab {
    cells: Vec<Option<Cell>>,
    free: Vec<u32>,
    small_free: Vec<u32>,
}

/// The slab behind a mutex. Lock order: the interface (engine) lock may be held when this one
/// is taken, never the other way round.
pub(crate) struct Ops {
    slab: Mutex<Slab>,
    /// How many times a cell's last completion was recorded: a waiter that saw the same count
    /// before knows, without the lock, that its cell has not completed since (see
    /// [`Ops::is_done_since`]). Written only under the slab's lock.
    completions: AtomicU64,
}

impl Ops {
    pub(crate) fn new(small_slots: u32) -> Ops {
        Ops {
            slab: Mutex::new(Slab {
                cells: Vec::new(),
                free: Vec::new(),
                small_free: (0..small_slots).rev().collect(),
            }),
            completions: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slab> {
        // Every update below is a single step, so a panic elsewhere cannot leave the slab
        // half-changed: keep going rather than poison every later operation.
        self.slab.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new cell expecting `remaining` completions.
    pub(crate) fn alloc(&self, remaining: u32, landing: Landing) -> u32 {
        Self::alloc_in(&mut self.lock(), remaining, landing)
    }

    fn alloc_in(s: &mut Slab, remaining: u32, landing: Landing) -> u32 {
        let cell = Cell {
            remaining,
            fail: None,
            orphan: false,
            landing,
        };
        match s.free.pop() {
            Some(i) => {
                s.cells[i as usize] = Some(cell);
                i
            }
            None => {
                s.cells.push(Some(cell));
                (s.cells.len() - 1) as u32
            }
        }
    }

    /// A new cell expecting `remaining` completions, landing in a free small slot: the cell
    /// and the slot, taken under one lock; `None` (nothing taken) when no slot is free.
    pub(crate) fn alloc_small(&self, remaining: u32) -> Option<(u32, u32)> {
        let mut s = self.lock();
        let slot = s.small_free.pop()?;
        let cell = Self::alloc_in(&mut s, remaining, Landing::Small(slot));
        Some((cell, slot))
    }

    /// Takes a small landing slot, if one is free.
    pub(crate) fn take_small(&self) -> Option<u32> {
        self.lock().small_free.pop()
    }

    /// Returns a small landing slot.
    pub(crate) fn give_small(&self, slot: u32) {
        self.lock().small_free.push(slot);
    }

    /// Adds the slots of a newly bound block and takes one of them.
    pub(crate) fn add_small_and_take(&self, slots: std::ops::Range<u32>) -> Option<u32> {
        let mut s = self.lock();
        s.small_free.extend(slots.rev());
        s.small_free.pop()
    }

    /// Records `n` completions of cell `id` (`fail` if they failed). Unknown ids are ignored
    /// (an event that names no cell cannot be attributed; the engine only reports what we
    /// issued).
    pub(crate) fn complete(&self, id: u64, n: u32, fail: NiFail) -> Freed {
        let mut s = self.lock();
        let Some(Some(cell)) = s.cells.get_mut(id as usize) else {
            return Freed::Nothing;
        };
        let was = cell.remaining;
        cell.remaining = cell.remaining.saturating_sub(n);
        if fail != NiFail::Ok && cell.fail.is_none() {
            cell.fail = Some(fail);
        }
        if was > 0 && cell.remaining == 0 {
            // Under the lock, so a plain increment. Release: a waiter that reads the new
            // count (Acquire) and then takes the lock sees the cell complete.
            let c = self.completions.load(Ordering::Relaxed);
            self.completions.store(c.wrapping_add(1), Ordering::Release);
        }
        if cell.remaining == 0 && cell.orphan {
            let landing = std::mem::replace(&mut cell.landing, Landing::None);
            s.cells[id as usize] = None;
            s.free.push(id as u32);
            return Freed::Landing(landing);
        }
        Freed::Nothing
    }

    /// Whether cell `id` has completed.
    pub(crate) fn is_done(&self, id: u32) -> bool {
        let s = self.lock();
        matches!(s.cells.get(id as usize), Some(Some(c)) if c.remaining == 0)
    }

    /// Frees a completed cell and hands its result to the owner; `None` if not complete yet.
    /// A small landing's slot goes back to the free list with it (the returned landing is then
    /// [`Landing::None`]).
    pub(crate) fn finish(&self, id: u32) -> Option<Finished> {
        Self::take_complete(&mut self.lock(), id, |_, _| ())
    }

    /// [`Ops::finish`] under the slab's lock: `copy` runs on the completed cell's failure and
    /// landing before a small landing's slot is freed, so that the next get cannot take the
    /// slot before its bytes are copied out.
    fn take_complete(
        s: &mut Slab,
        id: u32,
        copy: impl FnOnce(Option<NiFail>, &Landing),
    ) -> Option<Finished> {
        let slot = s.cells.get_mut(id as usize)?;
        if slot.as_ref().is_none_or(|c| c.remaining != 0) {
            return None;
        }
        let cell = slot.take()?;
        s.free.push(id);
        copy(cell.fail, &cell.landing);
        let landing = match cell.landing {
            Landing::Small(slot) => {
                s.small_free.push(slot);
                Landing::None
            }
            other => other,
        };
        Some(Finished {
            fail: cell.fail,
            landing,
        })
    }

    /// The count of cells that completed so far: read before an operation is issued, it moves
    /// when that operation completes (the start of [`Ops::is_done_since`]'s `seen`).
    pub(crate) fn completions(&self) -> u64 {
        // Acquire: pairs with the Release store in `complete`.
        self.completions.load(Ordering::Acquire)
    }

    /// [`Ops::is_done`] for a waiter that polls. `seen` is the completion count of its last
    /// look that found the cell incomplete (or [`Ops::completions`] before the operation was
    /// issued): while no cell has completed since, the answer is no, without the lock. A look
    /// that finds the cell incomplete moves `seen` on; one that finds it complete leaves it,
    /// for [`Ops::finish_since`] to take the cell.
    pub(crate) fn is_done_since(&self, id: u32, seen: &AtomicU64) -> bool {
        let Some(now) = self.moved_since(seen) else {
            return false;
        };
        let done = self.is_done(id);
        if !done {
            // Relaxed: as in `moved_since`.
            seen.store(now, Ordering::Relaxed);
        }
        done
    }

    /// [`Ops::finish`] for a waiter that polls, gated like [`Ops::is_done_since`], with
    /// [`Ops::take_complete`]'s `copy`.
    pub(crate) fn finish_since(
        &self,
        id: u32,
        seen: &AtomicU64,
        copy: impl FnOnce(Option<NiFail>, &Landing),
    ) -> Option<Finished> {
        let now = self.moved_since(seen)?;
        let finished = Self::take_complete(&mut self.lock(), id, copy);
        if finished.is_none() {
            // Relaxed: as in `moved_since`.
            seen.store(now, Ordering::Relaxed);
        }
        finished
    }

    /// The completion count now, if it moved since `seen`; `None` if it did not (no cell
    /// completed since, so the waiter's cell has not either).
    fn moved_since(&self, seen: &AtomicU64) -> Option<u64> {
        let now = self.completions();
        // Relaxed: `seen` is the waiter's own note of a count, ordered by nothing else.
        (seen.load(Ordering::Relaxed) != now).then_some(now)
    }

    /// The owner gives up cell `id`: freed now if complete (its landing returned for
    /// release), otherwise on its last completion.
    pub(crate) fn orphan(&self, id: u32) -> Freed {
        let mut s = self.lock();
        let Some(Some(cell)) = s.cells.get_mut(id as usize) else {
            return Freed::Nothing;
        };
        if cell.remaining == 0 {
            let landing = std::mem::replace(&mut cell.landing, Landing::None);
            s.cells[id as usize] = None;
            s.free.push(id);
            return Freed::Landing(landing);
        }
        cell.orphan = true;
        Freed::Nothing
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cell_lifecycle() {
        let ops = Ops::new(2);
        let a = ops.alloc(2, Landing::None);
        let b = ops.alloc(1, Landing::Small(1));
        assert_ne!(a, b);
        assert!(!ops.is_done(a));
        assert!(ops.finish(a).is_none());
        assert!(matches!(
            ops.complete(a as u64, 1, NiFail::Ok),
            Freed::Nothing
        ));
        assert!(matches!(
            ops.complete(a as u64, 1, NiFail::Segv),
            Freed::Nothing
        ));
        assert!(ops.is_done(a));
        let f = ops.finish(a).unwrap();
        assert_eq!(f.fail, Some(NiFail::Segv));
        // Freed: the id is reused and an unknown id is ignored.
        assert!(!ops.is_done(a));
        assert!(matches!(
            ops.complete(a as u64, 1, NiFail::Ok),
            Freed::Nothing
        ));
        let c = ops.alloc(1, Landing::None);
        assert_eq!(c, a);
        // An orphan is freed by its last completion and hands back its landing.
        assert!(matches!(ops.orphan(b), Freed::Nothing));
        match ops.complete(b as u64, 1, NiFail::Ok) {
            Freed::Landing(Landing::Small(1)) => {}
            _ => panic!("orphan's landing not returned"),
        }
        // Orphaning a completed cell frees it at once.
        ops.complete(c as u64, 1, NiFail::Ok);
        assert!(matches!(ops.orphan(c), Freed::Landing(Landing::None)));
        assert_eq!(ops.take_small(), Some(0));
        ops.give_small(0);
        assert_eq!(ops.take_small(), Some(0));
    }

    #[test]
    fn small_cells_take_and_return_their_slot_in_one_step() {
        let ops = Ops::new(2);
        let (a, sa) = ops.alloc_small(1).unwrap();
        let (b, sb) = ops.alloc_small(1).unwrap();
        assert_ne!(a, b);
        assert_ne!(sa, sb);
        // No slot left: nothing is taken, not even a cell.
        assert!(ops.alloc_small(1).is_none());
        assert_eq!(ops.alloc(1, Landing::None), 2);
        // Finishing a small cell returns its slot with it, after the copy saw its landing.
        let seen = AtomicU64::new(ops.completions());
        ops.complete(u64::from(a), 1, NiFail::Ok);
        let mut copied = None;
        let f = ops
            .finish_since(a, &seen, |fail, l| copied = Some((fail, format!("{l:?}"))))
            .unwrap();
        assert_eq!(copied, Some((None, format!("{:?}", Landing::Small(sa)))));
        assert!(matches!(f.landing, Landing::None));
        assert_eq!(f.fail, None);
        assert_eq!(ops.alloc_small(1), Some((a, sa)));
        // So does the unpolled `finish`.
        ops.complete(u64::from(b), 1, NiFail::Segv);
        let f = ops.finish(b).unwrap();
        assert!(matches!(f.landing, Landing::None));
        assert_eq!(f.fail, Some(NiFail::Segv));
        assert_eq!(ops.alloc_small(1), Some((b, sb)));
    }

    #[test]
    fn a_polling_waiter_locks_only_after_a_completion() {
        let ops = Ops::new(0);
        let a = ops.alloc(2, Landing::None);
        let b = ops.alloc(1, Landing::None);
        let seen = AtomicU64::new(ops.completions());
        let first = seen.load(Ordering::Relaxed);
        assert!(!ops.is_done_since(a, &seen));
        assert!(ops.finish_since(a, &seen, |_, _| ()).is_none());
        // A completion that leaves the cell incomplete moves nothing.
        ops.complete(u64::from(a), 1, NiFail::Ok);
        assert!(!ops.is_done_since(a, &seen));
        assert_eq!(seen.load(Ordering::Relaxed), first);
        // Another cell's completion moves the count: the next look takes the lock, finds `a`
        // incomplete and remembers the new count.
        ops.complete(u64::from(b), 1, NiFail::Ok);
        assert!(!ops.is_done_since(a, &seen));
        assert_ne!(seen.load(Ordering::Relaxed), first);
        // An event for a complete cell moves nothing either.
        let after_b = seen.load(Ordering::Relaxed);
        ops.complete(u64::from(b), 1, NiFail::Ok);
        assert!(ops.finish_since(a, &seen, |_, _| ()).is_none());
        assert_eq!(seen.load(Ordering::Relaxed), after_b);
        // `a` completes: the look that says so leaves `seen` for the finish to take it.
        ops.complete(u64::from(a), 1, NiFail::Segv);
        assert!(ops.is_done_since(a, &seen));
        assert!(ops.is_done_since(a, &seen));
        let mut copies = 0;
        let f = ops.finish_since(a, &seen, |_, _| copies += 1).unwrap();
        assert_eq!(f.fail, Some(NiFail::Segv));
        assert_eq!(copies, 1);
        // Finished: freed, so a later look finds nothing.
        assert!(ops
            .finish_since(a, &AtomicU64::new(u64::MAX), |_, _| ())
            .is_none());
        assert!(ops.finish(b).is_some());
    }
}
