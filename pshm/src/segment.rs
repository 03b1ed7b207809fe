//! Shared-memory objects and their mappings: `shm_open` / `ftruncate` / `mmap` / `shm_unlink`,
//! the free-space check, and the views of a mapping as atomic words.
//!
//! A mapping is only ever seen as `&[AtomicU64]` (and a few words as `AtomicU32` for futexes):
//! other processes write it concurrently, and atomics are the model under which such writes
//! are defined behaviour. Plain byte copies happen only in `queue.rs`, on cells that the ring
//! protocol gives to one process at a time.

use std::num::NonZeroUsize;
use std::os::fd::AsRawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use nix::fcntl::OFlag;
use nix::sys::mman::{self, MapFlags, ProtFlags};
use nix::sys::stat::Mode;

use crate::error::SetupError;

/// The file system that backs POSIX shared memory on Linux.
pub const SHM_DIR: &str = "/dev/shm";

/// The `shm_open` name of `rank`'s object in job `job_key`: `/rgasnet-<16 hex digits>-<rank>`.
pub fn object_name(job_key: u64, rank: u32) -> String {
    format!("/rgasnet-{job_key:016x}-{rank}")
}

/// The prefix (inside [`SHM_DIR`]) shared by every object of job `job_key`.
pub fn job_prefix(job_key: u64) -> String {
    format!("rgasnet-{job_key:016x}-")
}

/// A shared mapping of a whole object (or of anonymous shared memory), unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory that stays valid until `drop`; every access to it goes
// through `words()`, i.e. through atomics (or, in queue.rs, through byte copies that the ring
// protocol makes exclusive). Nothing in it is tied to the creating thread.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared access from several threads is the same as from several processes.
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Creates object `name` of `len` bytes (which must not exist yet), mapped read-write.
    /// On failure nothing is left behind.
    pub(crate) fn create(name: &str, len: usize) -> Result<Mapping, SetupError> {
        let nz = NonZeroUsize::new(len)
            .ok_or_else(|| SetupError::Config(format!("object {name} would have no bytes")))?;
        let size = i64::try_from(len)
            .map_err(|_| SetupError::Config(format!("object {name} of {len} bytes is too big")))?;
        let fd = mman::shm_open(
            name,
            OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_RDWR,
            Mode::S_IRUSR | Mode::S_IWUSR,
        )
        .map_err(|e| SetupError::os("shm_open", name, e))?;
        let mapped = nix::unistd::ftruncate(&fd, size)
            .map_err(|e| SetupError::os("ftruncate", name, e))
            .and_then(|()| Mapping::map(&fd, nz, name));
        if mapped.is_err() {
            // Best effort: the object is ours and useless; the original error matters more.
            let _ = mman::shm_unlink(name);
        }
        mapped
    }

    /// Opens and maps existing object `name` read-write, whatever its size (the caller checks
    /// the header against the size).
    pub(crate) fn open(name: &str) -> Result<Mapping, SetupError> {
        let fd = mman::shm_open(name, OFlag::O_RDWR, Mode::empty())
            .map_err(|e| SetupError::os("shm_open", name, e))?;
        let st =
            nix::sys::stat::fstat(fd.as_raw_fd()).map_err(|e| SetupError::os("fstat", name, e))?;
        let len = usize::try_from(st.st_size)
            .ok()
            .and_then(NonZeroUsize::new)
            .ok_or_else(|| SetupError::BadObject {
                object: name.to_owned(),
                reason: format!("size {} bytes", st.st_size),
            })?;
        Mapping::map(&fd, len, name)
    }

    /// Anonymous shared memory of `len` bytes, inherited by forked children.
    pub(crate) fn anonymous(len: usize) -> Result<Mapping, SetupError> {
        let nz = NonZeroUsize::new(len)
            .ok_or_else(|| SetupError::Config("anonymous mapping of 0 bytes".into()))?;
        // SAFETY: a fresh mapping at an address the kernel picks; it aliases nothing.
        let ptr = unsafe {
            mman::mmap_anonymous(
                None,
                nz,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
            )
        }
        .map_err(|e| SetupError::os("mmap", "anonymous", e))?;
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    fn map(
        fd: &std::os::fd::OwnedFd,
        len: NonZeroUsize,
        name: &str,
    ) -> Result<Mapping, SetupError> {
        // SAFETY: a fresh shared mapping of a file descriptor we own, at an address the kernel
        // picks, so it aliases no Rust object. Its bytes are only accessed as atomics (or as
        // protocol-exclusive byte copies). The fd may be closed afterwards: the mapping keeps
        // the object alive.
        let ptr = unsafe {
            mman::mmap(
                None,
                len,
                ProtFlags::PROT_READ | ProtFlags::PROT_WRITE,
                MapFlags::MAP_SHARED,
                fd,
                0,
            )
        }
        .map_err(|e| SetupError::os("mmap", name, e))?;
        Ok(Mapping {
            ptr: ptr.cast(),
            len: len.get(),
        })
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// The mapping as 64-bit atomic words (a trailing partial word is not included).
    #[inline]
    pub(crate) fn words(&self) -> &[AtomicU64] {
        // SAFETY: `ptr` is page aligned (so aligned for AtomicU64), valid for `len` bytes for as
        // long as `self` lives (unmapped only in drop), and zero-filled or written only through
        // atomics, so every bit pattern is an initialised u64. AtomicU64 has the size and
        // layout of u64, and its interior mutability makes writes by other processes and
        // threads through this shared slice sound.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr().cast::<AtomicU64>(), self.len / 8) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe exactly the mapping created in `map`/`anonymous`; every
        // borrow of it (`words()`) borrows `self`, so none outlives this call.
        // An munmap failure cannot be handled in drop and would only leak address space.
        let _ = unsafe { mman::munmap(self.ptr.cast(), self.len) };
    }
}

/// The first 4 bytes of `word` as an `AtomicU32`, for futex words. A word used this way must
/// never be accessed as a 64-bit atomic (mixed-size atomic accesses are not defined).
pub(crate) fn as_u32(word: &AtomicU64) -> &AtomicU32 {
    // SAFETY: the pointer is valid and 8-aligned (so 4-aligned) for 8 bytes for the lifetime of
    // `word`; AtomicU32 has the layout of u32 and is interior-mutable like AtomicU64, so
    // viewing the first half of the word as one is sound as long as the word is not also used
    // as a 64-bit atomic, which the callers guarantee (see `layout`).
    unsafe { &*word.as_ptr().cast::<AtomicU32>() }
}

/// A supernode member's segment as mapped in this process, for the shortest copies: an
/// aligned 8-byte put or get is one atomic store or load, inlined into the caller, without
/// the [`rgasnet_portals::Region`]'s dynamically dispatched storage. Byte `k` of the segment
/// is byte `k % 8` of word `k / 8` in little-endian order, as in a `Region`, so the two views
/// always agree. Cheap to clone (it shares the mapping).
#[derive(Clone)]
pub struct MappedSegment {
    mapping: Arc<Mapping>,
    /// First word of the segment in the mapping.
    first: usize,
    /// Usable bytes (the segment's length, not rounded up to the page).
    len: usize,
    /// Word of the mapping that is non-zero once the segment's owner ended its program.
    left: usize,
}

impl std::fmt::Debug for MappedSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedSegment")
            .field("len", &self.len)
            .finish()
    }
}

impl MappedSegment {
    /// The segment of `len` bytes starting at word `first` of `mapping` (checked by the
    /// caller against the mapping's size, as for the `Region` over the same words), whose
    /// owner marks word `left` when it ends its program.
    pub(crate) fn new(
        mapping: Arc<Mapping>,
        first: usize,
        len: usize,
        left: usize,
    ) -> MappedSegment {
        MappedSegment {
            mapping,
            first,
            len,
            left,
        }
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the segment has no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the segment's owner has ended its program: nothing reads the segment any more,
    /// so a put into it would be lost and a get would read what it left behind.
    #[inline]
    pub fn owner_left(&self) -> bool {
        self.left_in(self.mapping.words())
    }

    /// [`MappedSegment::owner_left`], reading the mark from `words` (the mapping's).
    #[inline]
    fn left_in(&self, words: &[AtomicU64]) -> bool {
        // Relaxed: a refusal, not a handshake; no data of the owner is read after it (the
        // caller's general path reads the same word with `Acquire` before it reports).
        words
            .get(self.left)
            .is_some_and(|w| w.load(Ordering::Relaxed) != 0)
    }

    /// The word holding bytes `[offset, offset + 8)` when `offset` is 8-aligned, the range
    /// lies inside the segment and the owner is still there (see [`MappedSegment::owner_left`]).
    #[inline]
    fn word_at(&self, offset: u64) -> Option<&AtomicU64> {
        if offset % 8 != 0 || offset.checked_add(8)? > self.len as u64 {
            return None;
        }
        // One look-up of the mapping's words for the mark and the word.
        let words = self.mapping.words();
        if self.left_in(words) {
            return None;
        }
        words.get(self.first + (offset / 8) as usize)
    }

    /// Writes `src` at `offset` if it is one aligned word inside the segment (a single
    /// `Relaxed` store, as `Region::write` does: the put's visibility to the owner is ordered
    /// by the synchronisation that follows it, a barrier or an AM). Returns `false`, having
    /// written nothing, for any other shape or range: the caller takes the general path,
    /// which copies other shapes and reports range errors and an owner that left.
    #[inline]
    pub fn try_write_word(&self, offset: u64, src: &[u8]) -> bool {
        let (Ok(bytes), Some(w)) = (<[u8; 8]>::try_from(src), self.word_at(offset)) else {
            return false;
        };
        w.store(u64::from_le_bytes(bytes), Ordering::Relaxed);
        true
    }

    /// Reads one aligned word at `offset` into `dst` (8 bytes), like
    /// [`MappedSegment::try_write_word`]; `false` (nothing read) for any other shape, or an
    /// owner that left.
    #[inline]
    pub fn try_read_word(&self, offset: u64, dst: &mut [u8]) -> bool {
        let (Ok(out), Some(w)) = (<&mut [u8; 8]>::try_from(dst), self.word_at(offset)) else {
            return false;
        };
        // Relaxed: as `Region::read`; ordering comes from the synchronisation before the get.
        *out = w.load(Ordering::Relaxed).to_le_bytes();
        true
    }
}

/// The segment part of a rank's object, as storage for an [`rgasnet_portals::Region`].
pub(crate) struct SegmentMemory {
    pub(crate) mapping: Arc<Mapping>,
    /// First word of the segment in the mapping.
    pub(crate) first: usize,
    /// Words of the segment.
    pub(crate) words: usize,
}

impl SegmentMemory {
    /// The segment's words (see [`plain_memory!`]): always the same slice, in bounds, and
    /// mapped while `self` lives (it holds the mapping).
    fn plain_words(&self) -> &[AtomicU64] {
        // `first + words` was checked against the mapping when this was built (node.rs), so
        // the slice is always the same and in bounds; `get` keeps this panic-free regardless.
        self.mapping
            .words()
            .get(self.first..self.first + self.words)
            .unwrap_or(&[])
    }
}

/// The words of `words` holding `[offset, offset + len)`, if the range lies inside them and
/// the bytes may be copied as plain memory (little-endian hosts: the Region's byte order is
/// the memory's own).
fn bulk_range(words: &[AtomicU64], offset: usize, len: usize) -> Option<&[AtomicU64]> {
    let inside = offset
        .checked_add(len)
        .is_some_and(|end| end <= words.len() * 8);
    (cfg!(target_endian = "little") && inside).then_some(words)
}

/// Implements [`rgasnet_portals::memory::Memory`] for storage that is plain memory of this
/// process, through its `plain_words()` (always the same slice, valid while the value lives),
/// with bulk copies as `memcpy`: shared segments and external memory alike.
macro_rules! plain_memory {
    ($t:ty) => {
        impl rgasnet_portals::memory::Memory for $t {
            fn words(&self) -> &[AtomicU64] {
                self.plain_words()
            }

            // Bulk copies as plain memcpy: the word loop reaches a third to a half of memcpy's speed,
            // and a put to a node peer is exactly a memcpy in GASNet. The Region's byte order (byte k
            // is byte k % 8 of word k / 8, little-endian) is the memory's own order only on
            // little-endian hosts, so elsewhere the word loop stays in charge.
            //
            // Concurrency contract (GASNet's): two ranks' conflicting accesses to the same bytes
            // without synchronisation between them are a program error whose result is unspecified.
            // Copies of at least `BULK_COPY_MIN` bytes are plain copies in this module for speed;
            // everything else stays atomic.
            fn write_bytes(&self, offset: usize, src: &[u8]) -> bool {
                let Some(words) = bulk_range(self.plain_words(), offset, src.len()) else {
                    return false;
                };
                // SAFETY: `[offset, offset + src.len())` lies inside the mapped words (checked just
                // above), which stay valid while `self` lives (see `plain_words`). The words are `AtomicU64`, whose
                // `UnsafeCell` allows writing through a pointer derived from a shared reference.
                // `src` may itself be a view of this mapping (`lend_bytes`: a Long handler that sends
                // its payload on to its own rank), so the copy is a memmove, correct for overlapping
                // ranges. Racing accesses to the same bytes are excluded by the contract above.
                unsafe {
                    let dst = words.as_ptr().cast::<u8>().cast_mut().add(offset);
                    std::ptr::copy(src.as_ptr(), dst, src.len());
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
                if cfg!(target_endian = "big") {
                    return false;
                }
                let words = self.plain_words();
                let fits =
                    |n: usize, at: usize| at.checked_add(len).is_some_and(|end| end <= n * 8);
                if !fits(words.len(), offset) || !fits(src.len(), src_offset) {
                    return false;
                }
                // SAFETY: both ranges lie inside their word slices (checked just above), which are
                // valid for the duration of the call; writing through the destination pointer is
                // allowed by `AtomicU64`'s `UnsafeCell`. `copy` (memmove) is used because the two
                // ranges may be in the same segment and overlap. Racing accesses to the same bytes
                // are excluded by the contract above.
                unsafe {
                    let from = src.as_ptr().cast::<u8>().add(src_offset);
                    let to = words.as_ptr().cast::<u8>().cast_mut().add(offset);
                    std::ptr::copy(from, to, len);
                }
                true
            }

            fn append_bytes(&self, offset: usize, len: usize, out: &mut Vec<u8>) -> bool {
                let Some(words) = bulk_range(self.plain_words(), offset, len) else {
                    return false;
                };
                out.reserve(len);
                let start = out.len();
                // SAFETY: the source range lies inside the mapped words (checked above) and every byte
                // of the mapping is initialised; `reserve` made room for `len` more bytes after
                // `start` in `out`'s own allocation, which cannot overlap the mapping. After the copy
                // those bytes are initialised, so the new length is sound. Racing writes to the same
                // source bytes are excluded by the contract above.
                unsafe {
                    let src = words.as_ptr().cast::<u8>().add(offset);
                    std::ptr::copy_nonoverlapping(src, out.as_mut_ptr().add(start), len);
                    out.set_len(start + len);
                }
                true
            }

            fn lend_bytes(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8])) {
                let Some(words) = bulk_range(self.plain_words(), offset, len) else {
                    return;
                };
                // SAFETY: the range lies inside the mapped words (checked above), which stay valid
                // while `self` is borrowed (the view does not outlive this call), and every byte of
                // the mapping is initialised. The bytes are `AtomicU64` storage, so a shared byte view
                // is sound only while nobody writes them: that is the contract above, which
                // `Memory::lend_bytes` extends to the whole call. The conduit lends a delivered AM
                // from a receive block, which no deposit touches until the conduit posts or rewinds
                // the block again, and a Long payload in the segment, which GASNet's contract leaves
                // the program not to write while its handler runs.
                let view = unsafe {
                    std::slice::from_raw_parts(words.as_ptr().cast::<u8>().add(offset), len)
                };
                f(view);
            }

            fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> bool {
                let Some(words) = bulk_range(self.plain_words(), offset, dst.len()) else {
                    return false;
                };
                // SAFETY: the source range lies inside the mapped words (checked above) and every byte
                // of the mapping is initialised (zero-filled by ftruncate, written since); `dst` is an
                // exclusive Rust slice, so the ranges cannot overlap. Racing writes to the same bytes
                // are excluded by the contract above.
                unsafe {
                    let src = words.as_ptr().cast::<u8>().add(offset);
                    std::ptr::copy_nonoverlapping(src, dst.as_mut_ptr(), dst.len());
                }
                true
            }
        }
    };
}

plain_memory!(SegmentMemory);
plain_memory!(ExternalMemory);

/// Memory another layer of this process owns (a C runtime's segment: GASNet-EX allocates its
/// own), as storage for an [`rgasnet_portals::Region`], with the bulk copies of a shared
/// segment. It does not own the memory: the owner keeps it mapped while any region over it
/// lives.
pub struct ExternalMemory {
    base: NonNull<AtomicU64>,
    words: usize,
}

// SAFETY: the memory is plain process memory, reachable from every thread anyway; every
// access through `words()` is atomic, and the bulk copies follow the concurrency contract of
// `plain_memory!` (GASNet's), as for a shared segment.
unsafe impl Send for ExternalMemory {}
// SAFETY: as for `Send`.
unsafe impl Sync for ExternalMemory {}

impl ExternalMemory {
    /// Storage over the `len` bytes at `base`; `None` unless `base` is 8-byte aligned and
    /// `len` a multiple of 8 (a null `base` is accepted only with `len == 0`).
    ///
    /// # Safety
    ///
    /// `[base, base + len)` must be memory of this process, readable and writable, that stays
    /// mapped for as long as the returned value (and every region over it) lives, and that
    /// nobody accesses as Rust references meanwhile: the program reaches it only through raw
    /// pointers (C), under the concurrency contract of a shared segment.
    pub unsafe fn new(base: *mut u8, len: usize) -> Option<ExternalMemory> {
        if len % 8 != 0 || (base as usize) % 8 != 0 || (base as usize).checked_add(len).is_none() {
            return None;
        }
        let base = match NonNull::new(base.cast::<AtomicU64>()) {
            Some(b) => b,
            None if len == 0 => NonNull::dangling(),
            None => return None,
        };
        Some(ExternalMemory {
            base,
            words: len / 8,
        })
    }

    /// The words (see [`plain_memory!`]).
    fn plain_words(&self) -> &[AtomicU64] {
        // SAFETY: `base` is non-null and 8-aligned, and `words * 8` bytes from it are memory
        // the owner keeps mapped while `self` lives (`new`'s contract); AtomicU64 has the
        // layout of u64, and every access through the slice is atomic or one of the bulk
        // copies of `plain_memory!`.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.words) }
    }
}

/// A [`rgasnet_portals::Region`] of `len` bytes in a fresh anonymous mapping of this process,
/// zero-filled by the kernel page by page, whose bulk copies (of at least
/// [`rgasnet_portals::memory::BULK_COPY_MIN`] bytes) are `memcpy` instead of the word loop of a
/// heap region. The conduit keeps its AM send buffers and receive blocks in such regions: a
/// maximal Medium is copied into a send buffer, out of it into a datagram, into a receive block
/// and out of it again, so the copy speed is the Medium round trip.
pub fn fast_region(len: usize) -> Result<rgasnet_portals::Region, SetupError> {
    let mapped = len.next_multiple_of(8).max(8);
    let mapping = Mapping::anonymous(mapped)?;
    let memory = SegmentMemory {
        mapping: Arc::new(mapping),
        first: 0,
        words: mapped / 8,
    };
    rgasnet_portals::Region::with_memory(Box::new(memory), len).ok_or_else(|| {
        SetupError::Config(format!("a region of {len} bytes does not fit its mapping"))
    })
}

/// Fails with [`SetupError::NoSpace`] unless [`SHM_DIR`] has at least `needed` free bytes for
/// `object`. Call it before creating anything: an object larger than the free space would be
/// created fine and crash its users with `SIGBUS` when they touch the missing pages.
pub fn check_space(object: &str, needed: u64) -> Result<(), SetupError> {
    check_space_in(SHM_DIR, object, needed)
}

pub(crate) fn check_space_in(dir: &str, object: &str, needed: u64) -> Result<(), SetupError> {
    let st = nix::sys::statvfs::statvfs(dir).map_err(|e| SetupError::os("statvfs", dir, e))?;
    // `fsblkcnt_t` and `c_ulong` are u32 on some targets; the conversions are not useless there.
    #[allow(clippy::useless_conversion)]
    let available = u64::from(st.blocks_available()).saturating_mul(u64::from(st.fragment_size()));
    if available < needed {
        return Err(SetupError::NoSpace {
            object: object.to_owned(),
            path: dir.to_owned(),
            needed,
            available,
        });
    }
    Ok(())
}

/// Unlinks `name`.
pub(crate) fn unlink(name: &str) -> Result<(), SetupError> {
    mman::shm_unlink(name).map_err(|e| SetupError::os("shm_unlink", name, e))
}

/// Unlinks every object of job `job_key` still in [`SHM_DIR`] and returns their names. Setup
/// unlinks its objects as soon as all node peers have mapped them; only a rank killed in the
/// middle of setup can leave one behind, which the launcher can remove with this afterwards.
pub fn remove_job_objects(job_key: u64) -> Result<Vec<String>, SetupError> {
    let prefix = job_prefix(job_key);
    let dir = std::fs::read_dir(SHM_DIR).map_err(|source| SetupError::Os {
        call: "read_dir",
        object: SHM_DIR.into(),
        source,
    })?;
    let mut removed = Vec::new();
    for entry in dir.flatten() {
        let file = entry.file_name();
        let Some(file) = file.to_str() else { continue };
        if file.starts_with(&prefix) {
            let name = format!("/{file}");
            match mman::shm_unlink(name.as_str()) {
                // Another process may have unlinked it since the listing.
                Ok(()) | Err(nix::errno::Errno::ENOENT) => removed.push(name),
                Err(e) => return Err(SetupError::os("shm_unlink", &name, e)),
            }
        }
    }
    removed.sort();
    Ok(removed)
}

/// Forks a child that runs `body` on `mapping`'s words and exits; returns its pid.
///
/// The child of a possibly multi-threaded parent may only do async-signal-safe things, so
/// `body` must restrict itself to atomics and the raw system calls of `nix` (no allocation,
/// no locks, no printing); it ends with `_exit`, never returning into the parent's code.
pub(crate) fn fork_child(
    mapping: &Mapping,
    body: fn(&[AtomicU64]) -> i32,
) -> Result<nix::unistd::Pid, SetupError> {
    // SAFETY: in the child we only run `body`, whose contract (above) keeps it to
    // async-signal-safe operations, and then `_exit`, which runs no destructors or atexit
    // handlers of the parent's state.
    match unsafe { nix::unistd::fork() } {
        Ok(nix::unistd::ForkResult::Parent { child }) => Ok(child),
        Ok(nix::unistd::ForkResult::Child) => {
            let code = body(mapping.words());
            // SAFETY: `_exit` is async-signal-safe and never returns.
            unsafe { libc::_exit(code) }
        }
        Err(e) => Err(SetupError::os("fork", "baseline partner", e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_job_unique_and_prefixed() {
        assert_eq!(object_name(0xab, 7), "/rgasnet-00000000000000ab-7");
        assert!(object_name(0xab, 7)[1..].starts_with(&job_prefix(0xab)));
        assert_ne!(object_name(1, 0), object_name(2, 0));
    }

    #[test]
    fn space_error_names_both_sizes() {
        let e = check_space_in(SHM_DIR, "/x", u64::MAX).unwrap_err();
        match &e {
            SetupError::NoSpace {
                needed, available, ..
            } => {
                assert_eq!(*needed, u64::MAX);
                let text = e.to_string();
                assert!(
                    text.contains(&format!("{} bytes needed", u64::MAX)),
                    "{text}"
                );
                assert!(
                    text.contains(&format!("{available} bytes available")),
                    "{text}"
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        check_space_in(SHM_DIR, "/x", 1).unwrap();
        let e = check_space_in("/nonexistent-pshm-dir", "/x", 1).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("statvfs(/nonexistent-pshm-dir) failed"),
            "{e}"
        );
    }

    #[test]
    fn fast_region_lends_large_views_in_place() {
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i * 31 + 7) as u8).collect();
        let r = fast_region(bytes.len()).unwrap();
        r.write(0, &bytes).unwrap();
        for (off, len) in [(0, 4096), (5, 9995), (4096, 4097)] {
            let mut scratch = Vec::new();
            let seen = r
                .with_bytes(off, len, &mut scratch, |b| b.to_vec())
                .unwrap();
            assert_eq!(seen, &bytes[off..off + len], "off {off} len {len}");
            if cfg!(target_endian = "little") {
                assert!(scratch.is_empty(), "seen in place, not copied");
            }
        }
        // Below the bulk threshold the bytes are copied, as every small access is.
        let mut scratch = Vec::new();
        let seen = r.with_bytes(9, 100, &mut scratch, |b| b.to_vec()).unwrap();
        assert_eq!(
            (seen.as_slice(), scratch.as_slice()),
            (&bytes[9..109], &bytes[9..109])
        );
        assert!(r.with_bytes(9999, 4096, &mut scratch, |_| ()).is_err());
    }

    #[test]
    fn create_open_share_bytes_and_exclusive_create() {
        let name = object_name(rand_key(), 0);
        let a = Mapping::create(&name, 8192).unwrap();
        let e = Mapping::create(&name, 8192).unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("shm_open({name}) failed")),
            "{e}"
        );
        let b = Mapping::open(&name).unwrap();
        unlink(&name).unwrap();
        assert_eq!(b.len(), 8192);
        a.words()[5].store(0x1234, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            b.words()[5].load(std::sync::atomic::Ordering::Relaxed),
            0x1234
        );
        as_u32(&a.words()[9]).store(77, std::sync::atomic::Ordering::Relaxed);
        assert_eq!(
            as_u32(&b.words()[9]).load(std::sync::atomic::Ordering::Relaxed),
            77
        );
        let e = Mapping::open(&name).unwrap_err();
        assert!(e.to_string().contains("No such file"), "{e}");
    }

    fn rand_key() -> u64 {
        rand::random()
    }
}
