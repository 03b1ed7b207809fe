//! Bookkeeping of explicit operations (`nb` handles, blocking calls, memsets): a slab of
//! cells, one per operation, that the event-queue drain and the memset reply handler update,
//! and the small landing slots that get replies land in.
//!
//! A cell lives from issue until its owner has seen it complete — or, if the owner dropped its
//! handle first ("orphaned" it), until the last of its network operations completes. Cells are
//! never freed while an operation can still name them, so a late event cannot hit a reused
//! cell.

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
}

impl Ops {
    pub(crate) fn new(small_slots: u32) -> Ops {
        Ops {
            slab: Mutex::new(Slab {
                cells: Vec::new(),
                free: Vec::new(),
                small_free: (0..small_slots).rev().collect(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slab> {
        // Every update below is a single step, so a panic elsewhere cannot leave the slab
        // half-changed: keep going rather than poison every later operation.
        self.slab.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new cell expecting `remaining` completions.
    pub(crate) fn alloc(&self, remaining: u32, landing: Landing) -> u32 {
        let cell = Cell {
            remaining,
            fail: None,
            orphan: false,
            landing,
        };
        let mut s = self.lock();
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
        cell.remaining = cell.remaining.saturating_sub(n);
        if fail != NiFail::Ok && cell.fail.is_none() {
            cell.fail = Some(fail);
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
    pub(crate) fn finish(&self, id: u32) -> Option<Finished> {
        let mut s = self.lock();
        match s.cells.get_mut(id as usize) {
            Some(slot @ Some(_)) if slot.as_ref().is_some_and(|c| c.remaining == 0) => {
                let cell = slot.take()?;
                s.free.push(id);
                Some(Finished {
                    fail: cell.fail,
                    landing: cell.landing,
                })
            }
            _ => None,
        }
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
}
