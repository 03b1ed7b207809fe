//! The 32-bit handles of the C API and the tables behind them.
//!
//! A handle is `kind (3 bits) | NI (2 bits) | generation (11 bits) | slot (16 bits)`: the
//! kind says which table, the NI which of the process's four NIs owns the object (what
//! `PtlNIHandle` answers), and the generation tells a freed and reused slot from the handle
//! that named it before. Every use checks all four, so a stale, foreign or made-up handle is
//! `PTL_ARG_INVALID`, never another object. The standard's `PTL_EQ_NONE` (0x3fffffff) and
//! `PTL_CT_NONE` (0x5fffffff) are never issued: their kinds are not those of EQs and CTs, and
//! slot 0xffff is never used.

/// The kind of an NI handle.
pub const KIND_NI: u32 = 1;
/// The kind of an EQ handle.
pub const KIND_EQ: u32 = 2;
/// The kind of a CT handle.
pub const KIND_CT: u32 = 3;
/// The kind of an MD handle.
pub const KIND_MD: u32 = 4;
/// The kind of an ME handle.
pub const KIND_ME: u32 = 5;
/// The kind of an LE handle.
pub const KIND_LE: u32 = 6;

const KIND_SHIFT: u32 = 29;
const NI_SHIFT: u32 = 27;
const GEN_SHIFT: u32 = 16;
const GEN_MASK: u32 = 0x7ff;
const SLOT_MASK: u32 = 0xffff;
/// Slots per table: slot 0xffff stays unused (see the module docs).
const MAX_SLOTS: usize = 0xffff;

/// The kind of a handle.
pub fn kind_of(h: u32) -> u32 {
    h >> KIND_SHIFT
}

/// The NI (0..=3) a handle names.
pub fn ni_of(h: u32) -> usize {
    ((h >> NI_SHIFT) & 3) as usize
}

/// The handle of NI `ni`.
pub fn ni_handle(ni: usize) -> u32 {
    (KIND_NI << KIND_SHIFT) | (((ni & 3) as u32) << NI_SHIFT)
}

/// An object of the engine and the NI it belongs to.
#[derive(Debug, Clone, Copy)]
pub struct Obj<H> {
    /// The NI index (0..=3).
    pub ni: usize,
    /// The engine's handle.
    pub h: H,
}

struct Slot<T> {
    generation: u32,
    item: Option<T>,
}

/// The objects of one kind, addressed by C handles.
pub struct Table<T> {
    kind: u32,
    slots: Vec<Slot<Obj<T>>>,
    free: Vec<u32>,
}

impl<T: Copy> Table<T> {
    /// An empty table of handles of `kind`.
    pub const fn new(kind: u32) -> Self {
        Table {
            kind,
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    /// Stores `obj`; its handle, or `None` when the table is full.
    pub fn insert(&mut self, obj: Obj<T>) -> Option<u32> {
        let slot = match self.free.pop() {
            Some(s) => s,
            None if self.slots.len() < MAX_SLOTS => {
                self.slots.push(Slot {
                    generation: 0,
                    item: None,
                });
                (self.slots.len() - 1) as u32
            }
            None => return None,
        };
        let s = &mut self.slots[slot as usize];
        s.item = Some(obj);
        Some(
            (self.kind << KIND_SHIFT)
                | (((obj.ni & 3) as u32) << NI_SHIFT)
                | ((s.generation & GEN_MASK) << GEN_SHIFT)
                | slot,
        )
    }

    /// The slot of `h`, if `h` names a live object of this table.
    fn slot(&self, h: u32) -> Option<usize> {
        if kind_of(h) != self.kind {
            return None;
        }
        let slot = (h & SLOT_MASK) as usize;
        let s = self.slots.get(slot)?;
        let obj = s.item.as_ref()?;
        let live = (s.generation & GEN_MASK) == ((h >> GEN_SHIFT) & GEN_MASK) && obj.ni == ni_of(h);
        live.then_some(slot)
    }

    /// The object `h` names.
    pub fn get(&self, h: u32) -> Option<Obj<T>> {
        self.slot(h).and_then(|s| self.slots[s].item)
    }

    /// Removes the object `h` names; its slot's next handle has another generation.
    pub fn remove(&mut self, h: u32) -> Option<Obj<T>> {
        let slot = self.slot(h)?;
        let s = &mut self.slots[slot];
        s.generation = s.generation.wrapping_add(1);
        self.free.push(slot as u32);
        s.item.take()
    }

    /// Whether every slot is in use.
    pub fn full(&self) -> bool {
        self.free.is_empty() && self.slots.len() >= MAX_SLOTS
    }

    /// Frees every object for which `dead` says so (entries the engine unlinked by itself).
    pub fn sweep(&mut self, mut dead: impl FnMut(&Obj<T>) -> bool) {
        for (i, s) in self.slots.iter_mut().enumerate() {
            if s.item.as_ref().is_some_and(&mut dead) {
                s.item = None;
                s.generation = s.generation.wrapping_add(1);
                self.free.push(i as u32);
            }
        }
    }

    /// Every live object with its handle.
    pub fn handles(&self) -> Vec<(u32, Obj<T>)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                s.item.map(|o| {
                    (
                        (self.kind << KIND_SHIFT)
                            | (((o.ni & 3) as u32) << NI_SHIFT)
                            | ((s.generation & GEN_MASK) << GEN_SHIFT)
                            | i as u32,
                        o,
                    )
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_checked_for_kind_ni_generation_and_slot() {
        let mut t: Table<u8> = Table::new(KIND_EQ);
        let a = t.insert(Obj { ni: 2, h: 7 }).expect("room");
        assert_eq!(kind_of(a), KIND_EQ);
        assert_eq!(ni_of(a), 2);
        assert_eq!(t.get(a).map(|o| o.h), Some(7));
        // Another kind, another NI, a made-up slot: refused.
        assert!(t.get(a ^ (1 << KIND_SHIFT)).is_none());
        assert!(t.get(a ^ (1 << NI_SHIFT)).is_none());
        assert!(t.get(a + 1).is_none());
        // Freed, then reused: the old handle stays dead.
        assert_eq!(t.remove(a).map(|o| o.h), Some(7));
        assert!(t.get(a).is_none());
        let b = t.insert(Obj { ni: 2, h: 9 }).expect("room");
        assert_eq!(b & SLOT_MASK, a & SLOT_MASK);
        assert_ne!(a, b);
        assert!(t.get(a).is_none());
        assert_eq!(t.get(b).map(|o| o.h), Some(9));
    }

    #[test]
    fn the_none_handles_are_never_valid() {
        let mut eqs: Table<u8> = Table::new(KIND_EQ);
        let mut cts: Table<u8> = Table::new(KIND_CT);
        for _ in 0..100 {
            eqs.insert(Obj { ni: 3, h: 0 });
            cts.insert(Obj { ni: 3, h: 0 });
        }
        assert!(eqs.get(0x3fff_ffff).is_none());
        assert!(cts.get(0x5fff_ffff).is_none());
        assert!(eqs.get(0xffff_ffff).is_none());
    }

    #[test]
    fn sweep_frees_what_the_engine_dropped() {
        let mut t: Table<u8> = Table::new(KIND_ME);
        let hs: Vec<u32> = (0..4)
            .map(|i| t.insert(Obj { ni: 0, h: i }).expect("room"))
            .collect();
        t.sweep(|o| o.h % 2 == 0);
        assert!(t.get(hs[0]).is_none());
        assert!(t.get(hs[1]).is_some());
        assert_eq!(t.handles().len(), 2);
    }
}
