//! Reusable registered buffers: regions kept together with the memory descriptor bound over
//! them, in power-of-two size classes.
//!
//! Operations that need registered memory of their own for a moment — a get's landing, the
//! staging copy of a large active message's payload — should not map fresh memory each time:
//! a new anonymous mapping faults its pages in one by one as data arrives, and unmapping it
//! flushes the TLB, which made a blocking 64 KiB get four times slower than a 64 KiB put. A
//! [`RegionPool`] keeps such regions, bound, for the next operation of their size class. The
//! pool only keeps books; its users make the regions and bind (and release) the descriptors.

use std::sync::Mutex;

use crate::memory::Region;

/// Capacity of the smallest class.
const MIN_CLASS: usize = 8 << 10;
/// Capacity of the largest class (the largest Long active message); larger regions are made
/// to measure and never kept.
const MAX_CLASS: usize = 16 << 20;
/// Number of classes: powers of two from [`MIN_CLASS`] to [`MAX_CLASS`].
const CLASSES: usize = (MAX_CLASS.trailing_zeros() - MIN_CLASS.trailing_zeros() + 1) as usize;
/// Regions kept per class: a blocking operation needs one, a flood of Long active messages as
/// many as the conduit lets be in flight (16 MiB of 1 MiB payloads: 16). With 4, a flood of
/// 1 MiB Longs mapped (and faulted in) a fresh region for most messages.
const PER_CLASS: usize = 32;
/// Bytes of kept regions at most, so that an idle process pins little memory (two regions of
/// the largest class).
const MAX_KEPT_BYTES: usize = 32 << 20;

/// The capacity of the region to make for `len` bytes: its class, or `len` itself beyond the
/// largest class (such regions are never kept).
pub fn capacity(len: usize) -> usize {
    if len > MAX_CLASS {
        len
    } else {
        len.next_power_of_two().max(MIN_CLASS)
    }
}

/// Index of the class of capacity `cap`, if it is one.
fn class_of(cap: usize) -> Option<usize> {
    (cap.is_power_of_two() && (MIN_CLASS..=MAX_CLASS).contains(&cap))
        .then(|| (cap.trailing_zeros() - MIN_CLASS.trailing_zeros()) as usize)
}

/// Kept regions, each of its class's capacity, with the descriptor `D` bound over it (a memory
/// descriptor handle; generic so that the bookkeeping is tested on its own). Shareable
/// between threads; its lock is a leaf (taken with no other held by the pool).
pub struct RegionPool<D> {
    inner: Mutex<Kept<D>>,
}

struct Kept<D> {
    classes: [Vec<(Region, D)>; CLASSES],
    bytes: usize,
}

impl<D> Default for RegionPool<D> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D> RegionPool<D> {
    /// An empty pool.
    pub fn new() -> RegionPool<D> {
        RegionPool {
            inner: Mutex::new(Kept {
                classes: std::array::from_fn(|_| Vec::new()),
                bytes: 0,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Kept<D>> {
        // Every update is a single step: a poisoned lock still guards consistent lists.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A kept region (and its descriptor) for `len` bytes, if one of its class is free.
    pub fn take(&self, len: usize) -> Option<(Region, D)> {
        let class = class_of(capacity(len))?;
        let mut k = self.lock();
        let got = k.classes[class].pop()?;
        k.bytes -= got.0.len();
        Some(got)
    }

    /// A kept region for `len` bytes, or else a new one from `make`, which is given the
    /// capacity to allocate (the class's, so that the region can be kept afterwards) and
    /// binds its descriptor.
    pub fn take_or_make<E>(
        &self,
        len: usize,
        make: impl FnOnce(usize) -> Result<(Region, D), E>,
    ) -> Result<(Region, D), E> {
        match self.take(len) {
            Some(kept) => Ok(kept),
            None => make(capacity(len)),
        }
    }

    /// Keeps a region whose operation completed (its descriptor is idle); hands it back when it
    /// is not of a class or the pool is full, for the caller to release.
    pub fn give(&self, region: Region, md: D) -> Option<(Region, D)> {
        let cap = region.len();
        let Some(class) = class_of(cap) else {
            return Some((region, md));
        };
        let mut k = self.lock();
        if k.classes[class].len() >= PER_CLASS || k.bytes + cap > MAX_KEPT_BYTES {
            return Some((region, md));
        }
        k.bytes += cap;
        k.classes[class].push((region, md));
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capacities_are_classes_up_to_the_largest() {
        assert_eq!(capacity(4097), 8 << 10);
        assert_eq!(capacity(8 << 10), 8 << 10);
        assert_eq!(capacity((8 << 10) + 1), 16 << 10);
        assert_eq!(capacity(3 << 20), 4 << 20);
        assert_eq!(capacity(16 << 20), 16 << 20);
        assert_eq!(capacity((16 << 20) + 1), (16 << 20) + 1);
        assert_eq!(class_of(8 << 10), Some(0));
        assert_eq!(class_of(16 << 20), Some(CLASSES - 1));
        assert_eq!(class_of(12 << 10), None);
        assert_eq!(class_of(32 << 20), None);
    }

    #[test]
    fn regions_are_reused_by_class_within_bounds() {
        let pool = RegionPool::<u64>::new();
        let md = |i: u64| i;
        assert!(pool.take(10_000).is_none());
        // Nothing kept: `make` is asked for the class's capacity.
        let made = pool.take_or_make(10_000, |cap| Ok::<_, ()>((Region::new(cap), md(7))));
        let (r, m) = made.unwrap();
        assert_eq!((r.len(), m), (16 << 10, md(7)));
        // A 16 KiB region serves any need of 8 KiB + 1 to 16 KiB, and only those.
        assert!(pool.give(Region::new(16 << 10), md(1)).is_none());
        assert!(pool.take(8 << 10).is_none());
        let (r, m) = pool
            .take_or_make(12_000, |_| Err("kept, so make is not called"))
            .unwrap();
        assert_eq!((r.len(), m), (16 << 10, md(1)));
        // Odd sizes and full classes are handed back.
        assert!(pool.give(Region::new(12 << 10), md(2)).is_some());
        for i in 0..PER_CLASS as u64 {
            assert!(pool.give(Region::new(8 << 10), md(10 + i)).is_none());
        }
        assert!(pool.give(Region::new(8 << 10), md(99)).is_some());
        // The byte bound (32 MiB): with PER_CLASS regions of 8 KiB kept (at most 256 KiB), one
        // 16 MiB region and three of 4 MiB fit, a fourth not.
        assert!(pool.give(Region::new(16 << 20), md(20)).is_none());
        for i in 0..3 {
            assert!(pool.give(Region::new(4 << 20), md(21 + i)).is_none());
        }
        assert!(pool.give(Region::new(4 << 20), md(30)).is_some());
        assert!(pool.take(3 << 20).is_some());
        assert!(
            pool.give(Region::new(4 << 20), md(31)).is_none(),
            "taking made room"
        );
    }
}
