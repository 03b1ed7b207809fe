//! Typed, validated handles: a slot index plus a generation, checked on every use so that a
//! stale, freed or foreign handle is an error value, never undefined behaviour or a panic.

use std::marker::PhantomData;

use crate::error::PtlError;

/// A typed handle to an object of kind `T` in a [`Slab`].
pub struct Handle<T> {
    owner: u32,
    index: u32,
    generation: u32,
    _kind: PhantomData<fn() -> T>,
}

impl<T> Handle<T> {
    /// The slot index (for diagnostics and for encoding into 64-bit wire tokens).
    pub fn index(&self) -> u32 {
        self.index
    }
    /// The generation of the slot when the handle was issued.
    pub fn generation(&self) -> u32 {
        self.generation
    }
    /// The id of the slab (NI/interface) that issued it.
    pub fn owner(&self) -> u32 {
        self.owner
    }
    /// Packs the handle into a `u64` (index and generation; the owner is not included).
    pub fn to_bits(&self) -> u64 {
        (u64::from(self.generation) << 32) | u64::from(self.index)
    }
    /// The same handle typed as a handle of `U`: for a table that stands in for another
    /// kind's (a Portals library's objects behind the native engine's handle types). Its
    /// owner, index and generation still check it against the table that issued it.
    #[cfg_attr(not(feature = "ref-impl"), allow(dead_code))]
    pub(crate) fn retype<U>(self) -> Handle<U> {
        Handle {
            owner: self.owner,
            index: self.index,
            generation: self.generation,
            _kind: PhantomData,
        }
    }
}

// Manual impls: derive would require `T: Clone` etc.
impl<T> Clone for Handle<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for Handle<T> {}
impl<T> PartialEq for Handle<T> {
    fn eq(&self, o: &Self) -> bool {
        self.owner == o.owner && self.index == o.index && self.generation == o.generation
    }
}
impl<T> Eq for Handle<T> {}
impl<T> std::hash::Hash for Handle<T> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.owner, self.index, self.generation).hash(state);
    }
}
impl<T> std::fmt::Debug for Handle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Handle<{}>({}:{}#{})",
            std::any::type_name::<T>()
                .rsplit("::")
                .next()
                .unwrap_or("?"),
            self.owner,
            self.index,
            self.generation
        )
    }
}

struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// A table of objects addressed by [`Handle`]s, with generation checks and a capacity limit.
pub struct Slab<T> {
    owner: u32,
    kind: &'static str,
    limit: usize,
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    live: usize,
}

impl<T> Slab<T> {
    /// An empty table for objects named `kind` (used in errors), owned by `owner`, holding at
    /// most `limit` objects at once.
    pub fn new(owner: u32, kind: &'static str, limit: usize) -> Self {
        Slab {
            owner,
            kind,
            limit,
            slots: Vec::new(),
            free: Vec::new(),
            live: 0,
        }
    }

    /// Number of live objects.
    pub fn len(&self) -> usize {
        self.live
    }

    /// Whether no object is live.
    pub fn is_empty(&self) -> bool {
        self.live == 0
    }

    /// Stores `value` and returns its handle, or `NoSpace` at the limit.
    pub fn insert(&mut self, call: &'static str, value: T) -> Result<Handle<T>, PtlError> {
        if self.live >= self.limit {
            return Err(PtlError::NoSpace {
                call,
                what: self.kind,
                limit: self.limit as u64,
            });
        }
        let index = match self.free.pop() {
            Some(i) => {
                let slot = &mut self.slots[i as usize];
                slot.value = Some(value);
                i
            }
            None => {
                self.slots.push(Slot {
                    generation: 0,
                    value: Some(value),
                });
                (self.slots.len() - 1) as u32
            }
        };
        self.live += 1;
        Ok(Handle {
            owner: self.owner,
            index,
            generation: self.slots[index as usize].generation,
            _kind: PhantomData,
        })
    }

    fn slot_of(&self, h: Handle<T>) -> Option<usize> {
        if h.owner != self.owner {
            return None;
        }
        let slot = self.slots.get(h.index as usize)?;
        (slot.generation == h.generation && slot.value.is_some()).then_some(h.index as usize)
    }

    fn invalid(&self, call: &'static str) -> PtlError {
        PtlError::InvalidHandle {
            call,
            kind: self.kind,
        }
    }

    /// The object behind `h`.
    pub fn get(&self, call: &'static str, h: Handle<T>) -> Result<&T, PtlError> {
        match self.slot_of(h) {
            Some(i) => self.slots[i]
                .value
                .as_ref()
                .ok_or_else(|| self.invalid(call)),
            None => Err(self.invalid(call)),
        }
    }

    /// The object behind `h`, mutably.
    pub fn get_mut(&mut self, call: &'static str, h: Handle<T>) -> Result<&mut T, PtlError> {
        match self.slot_of(h) {
            Some(i) => {
                let kind = self.kind;
                self.slots[i]
                    .value
                    .as_mut()
                    .ok_or(PtlError::InvalidHandle { call, kind })
            }
            None => Err(self.invalid(call)),
        }
    }

    /// Removes the object behind `h`; its handle (and every copy) becomes stale.
    pub fn remove(&mut self, call: &'static str, h: Handle<T>) -> Result<T, PtlError> {
        let i = self.slot_of(h).ok_or_else(|| self.invalid(call))?;
        let slot = &mut self.slots[i];
        let value = slot.value.take().ok_or(PtlError::InvalidHandle {
            call,
            kind: self.kind,
        })?;
        slot.generation = slot.generation.wrapping_add(1);
        self.free.push(i as u32);
        self.live -= 1;
        Ok(value)
    }

    /// Looks up a handle from its [`Handle::to_bits`] form (for tokens that travel on the wire).
    pub fn handle_from_bits(&self, bits: u64) -> Option<Handle<T>> {
        let h = Handle {
            owner: self.owner,
            index: bits as u32,
            generation: (bits >> 32) as u32,
            _kind: PhantomData,
        };
        self.slot_of(h).map(|_| h)
    }

    /// Iterates over live objects with their handles.
    pub fn iter(&self) -> impl Iterator<Item = (Handle<T>, &T)> {
        let owner = self.owner;
        self.slots.iter().enumerate().filter_map(move |(i, s)| {
            s.value.as_ref().map(|v| {
                (
                    Handle {
                        owner,
                        index: i as u32,
                        generation: s.generation,
                        _kind: PhantomData,
                    },
                    v,
                )
            })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_foreign_and_limit() {
        let mut a: Slab<u32> = Slab::new(1, "thing", 2);
        let mut b: Slab<u32> = Slab::new(2, "thing", 2);
        let h1 = a.insert("t", 10).unwrap();
        let h2 = a.insert("t", 20).unwrap();
        assert!(matches!(
            a.insert("t", 30),
            Err(PtlError::NoSpace { limit: 2, .. })
        ));
        assert_eq!(*a.get("t", h1).unwrap(), 10);
        assert_eq!(a.remove("t", h1).unwrap(), 10);
        assert!(matches!(
            a.get("t", h1),
            Err(PtlError::InvalidHandle { .. })
        ));
        let h3 = a.insert("t", 40).unwrap();
        assert_eq!(h3.index(), h1.index());
        assert!(a.get("t", h1).is_err(), "stale handle of a reused slot");
        assert_eq!(*a.get("t", h3).unwrap(), 40);
        let hb = b.insert("t", 1).unwrap();
        assert!(a.get("t", hb).is_err(), "foreign handle");
        assert_eq!(a.handle_from_bits(h2.to_bits()), Some(h2));
        assert_eq!(a.handle_from_bits(h1.to_bits()), None);
        assert_eq!(a.iter().count(), 2);
    }
}
