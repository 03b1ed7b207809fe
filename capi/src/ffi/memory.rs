//! Memory the C caller owns, served as a segment.

use std::ptr::NonNull;
use std::sync::atomic::AtomicU64;

use rgasnet_portals::memory::{Memory, BULK_COPY_MIN};

/// Process memory the C caller owns, served as a segment: 8-byte aligned, a whole number of
/// words.
pub(super) struct CMemory {
    pub(super) base: NonNull<AtomicU64>,
    pub(super) words: usize,
}

// SAFETY: the memory is plain process memory (shared by all threads anyway); every access
// through `words()` is atomic, and the bulk copies follow the same contract as rgasnet's
// shared-memory segments: the engine and the program never write the same bytes at once.
unsafe impl Send for CMemory {}
// SAFETY: as for Send.
unsafe impl Sync for CMemory {}

impl Memory for CMemory {
    fn words(&self) -> &[AtomicU64] {
        // SAFETY: `base` is non-null and 8-byte aligned, and `words * 8` bytes from it are
        // memory the C caller keeps mapped for the job's lifetime (rgasnet_segment_bind's
        // contract); AtomicU64 has the layout of u64, and all access through it is atomic.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.words) }
    }

    fn write_bytes(&self, offset: usize, src: &[u8]) -> bool {
        if !self.bulk_ok(offset, src.len()) {
            return false;
        }
        // SAFETY: the caller (Region) checked `offset + src.len()` against the length, which
        // is within the mapping; `src` is an engine buffer, not this memory.
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.as_ptr(),
                self.base.as_ptr().cast::<u8>().add(offset),
                src.len(),
            )
        };
        true
    }

    fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> bool {
        if !self.bulk_ok(offset, dst.len()) {
            return false;
        }
        // SAFETY: as for write_bytes, in the other direction.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.as_ptr().cast::<u8>().add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
        true
    }

    fn append_bytes(&self, offset: usize, len: usize, out: &mut Vec<u8>) -> bool {
        if !self.bulk_ok(offset, len) {
            return false;
        }
        out.reserve(len);
        let at = out.len();
        // SAFETY: `len` bytes were reserved past `at`; the source range was checked by the
        // caller; the bytes are initialised by the copy before the length covers them.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.as_ptr().cast::<u8>().add(offset),
                out.as_mut_ptr().add(at),
                len,
            );
            out.set_len(at + len);
        }
        true
    }

    fn copy_from_words(
        &self,
        offset: usize,
        src: &[AtomicU64],
        src_offset: usize,
        len: usize,
    ) -> bool {
        let src_fits = src_offset
            .checked_add(len)
            .is_some_and(|end| end <= src.len() * 8);
        if !self.bulk_ok(offset, len) || !src_fits {
            return false;
        }
        // SAFETY: both ranges lie inside their memory (checked above), valid for this call;
        // writing through the destination is what the C caller's segment is for, and the
        // source is `AtomicU64` storage (an `UnsafeCell`). `copy` (memmove): the source may be
        // this very segment. Racing accesses to the same bytes are excluded by the contract
        // on `Send`/`Sync` above.
        unsafe {
            let from = src.as_ptr().cast::<u8>().add(src_offset);
            let to = self.base.as_ptr().cast::<u8>().add(offset);
            std::ptr::copy(from, to, len);
        }
        true
    }
}

impl CMemory {
    /// Whether a bulk copy of `len` bytes at `offset` may be a plain `memcpy`: inside the
    /// memory, and on a little-endian host (where the region's byte layout, little-endian
    /// words, is the memory's own).
    fn bulk_ok(&self, offset: usize, len: usize) -> bool {
        cfg!(target_endian = "little")
            && offset
                .checked_add(len)
                .is_some_and(|end| end <= self.words * 8)
    }
}

const _: () = assert!(BULK_COPY_MIN > 0);
