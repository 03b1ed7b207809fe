//! The landing slots of small explicit gets: blocks of [`SLOTS_PER_BLOCK`] slots of
//! [`SMALL_GET`] bytes, each block a region bound once. A get of up to 4 KiB lands in a free
//! slot and is copied out when its owner sees it complete. When a flood has every slot in
//! flight, one more block is bound (up to [`MAX_BLOCKS`]) instead of each further get mapping,
//! binding and unmapping a landing of its own: GASNet's `testsmall` warm-up (4 000 8-byte
//! GetNBs in flight) paid an `mmap` and a `munmap` for 3 700 of them.

use std::ops::Range;
use std::sync::{Mutex, OnceLock};

use rgasnet_portals::Region;

use crate::ext::{lock, SMALL_GET};

/// Slots per block (one block is bound at start-up).
pub(crate) const SLOTS_PER_BLOCK: u32 = 256;
/// Blocks at most: 4 096 small gets in flight before gets fall back to landings of their own
/// (4 MiB of address space per rank, touched only as far as floods reach).
pub(crate) const MAX_BLOCKS: usize = 16;
/// Bytes of a block.
pub(crate) const BLOCK_LEN: usize = SLOTS_PER_BLOCK as usize * SMALL_GET;

/// The blocks bound so far, each with its descriptor `D` (a memory descriptor handle; generic
/// so that the bookkeeping is tested on its own). Reads take no lock: a block, once set, stays
/// for the life of the extended API.
pub(crate) struct SmallLandings<D> {
    blocks: [OnceLock<(Region, D)>; MAX_BLOCKS],
    /// Blocks bound; growth holds it, so that two threads never bind the same block.
    bound: Mutex<usize>,
}

impl<D: Copy> SmallLandings<D> {
    /// The landings with their first block.
    pub(crate) fn new(first: (Region, D)) -> SmallLandings<D> {
        let blocks: [OnceLock<(Region, D)>; MAX_BLOCKS] = std::array::from_fn(|_| OnceLock::new());
        let _ = blocks[0].set(first);
        SmallLandings {
            blocks,
            bound: Mutex::new(1),
        }
    }

    /// Slot `s`: its block's region and descriptor, and its offset there.
    pub(crate) fn slot(&self, s: u32) -> Option<(&Region, D, usize)> {
        let (region, md) = self.blocks.get((s / SLOTS_PER_BLOCK) as usize)?.get()?;
        Some((region, *md, (s % SLOTS_PER_BLOCK) as usize * SMALL_GET))
    }

    /// Binds one more block made by `make` (given [`BLOCK_LEN`]), unless all
    /// are bound; returns the new slots.
    pub(crate) fn grow<E>(
        &self,
        make: impl FnOnce(usize) -> Result<(Region, D), E>,
    ) -> Result<Option<Range<u32>>, E> {
        let mut bound = lock(&self.bound);
        let Some(cell) = self.blocks.get(*bound) else {
            return Ok(None);
        };
        let block = make(BLOCK_LEN)?;
        let _ = cell.set(block);
        let first = *bound as u32 * SLOTS_PER_BLOCK;
        *bound += 1;
        Ok(Some(first..first + SLOTS_PER_BLOCK))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_grow_to_the_limit_and_slots_map_into_them() {
        let make = |n: u64| move |len: usize| Ok::<_, ()>((Region::new(len), n));
        let l = SmallLandings::new(make(0)(BLOCK_LEN).unwrap());
        let (_, md, off) = l.slot(3).unwrap();
        assert_eq!((md, off), (0, 3 * SMALL_GET));
        assert!(l.slot(SLOTS_PER_BLOCK).is_none(), "not bound yet");
        assert_eq!(l.grow(make(1)), Ok(Some(256..512)));
        let (region, md, off) = l.slot(SLOTS_PER_BLOCK + 1).unwrap();
        assert_eq!((md, off, region.len()), (1, SMALL_GET, 256 * SMALL_GET));
        for n in 2..MAX_BLOCKS as u64 {
            assert!(l.grow(make(n)).unwrap().is_some());
        }
        assert_eq!(l.grow(make(99)), Ok(None));
        assert_eq!(
            l.slot(MAX_BLOCKS as u32 * SLOTS_PER_BLOCK - 1).unwrap().1,
            15
        );
        // A failing `make` binds nothing and leaves the count alone.
        let l = SmallLandings::new(make(0)(BLOCK_LEN).unwrap());
        assert_eq!(
            l.grow(|_| Err::<(Region, u64), _>("no memory")),
            Err("no memory")
        );
        assert_eq!(l.grow(make(1)), Ok(Some(256..512)));
    }
}
