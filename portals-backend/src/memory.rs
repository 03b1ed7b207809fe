//! Memory regions: the bytes that list entries expose to remote peers and that memory
//! descriptors send from and receive into.
//!
//! A Portals engine writes into target memory while the application may read it, and the
//! application may write into a buffer the engine is sending from. To keep that sound without
//! `unsafe`, a [`Region`] stores its bytes as relaxed atomic 64-bit words: any interleaving of
//! engine and application accesses is a well-defined (if possibly torn, exactly as on real RDMA
//! hardware) result, never undefined behaviour. Ordering between a deposit and the application's
//! read of it is provided by the event or counter that announces the deposit (both are published
//! under the interface's lock, which is a release/acquire pair).
//!
//! Byte `k` of the region is byte `k % 8` of word `k / 8` in little-endian order, on every host,
//! so the layout seen through [`Region::read`] and [`Region::write`] is the plain byte layout.
//!
//! On a little-endian host that is also the layout in memory, which lets the UDP layer hand a
//! [`RegionSpan`] to the kernel by address (a put from an `IN_PLACE` descriptor,
//! [`crate::types::MdOptions::IN_PLACE`]): the kernel reads the words as raw memory, like a NIC
//! would, and no Rust reference to them is ever formed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// An access outside a region's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "region access of {len} bytes at offset {offset} is outside the region of {region_len} bytes"
)]
pub struct OutOfBounds {
    /// First byte of the access.
    pub offset: u64,
    /// Length of the access.
    pub len: u64,
    /// Length of the region.
    pub region_len: u64,
}

impl OutOfBounds {
    /// Checks that `[offset, offset + len)` lies inside `0..region_len`.
    pub fn check(offset: u64, len: u64, region_len: u64) -> Result<(), OutOfBounds> {
        match offset.checked_add(len) {
            Some(end) if end <= region_len => Ok(()),
            _ => Err(OutOfBounds {
                offset,
                len,
                region_len,
            }),
        }
    }
}

/// A shared, fixed-size, zero-initialised block of bytes that the engine and the application
/// may both access at any time. Cloning a `Region` clones a reference to the same bytes.
#[derive(Clone)]
pub struct Region {
    inner: Arc<RegionInner>,
}

struct RegionInner {
    memory: Box<dyn Memory>,
    len: usize,
    /// What events report as the address of byte 0 ([`Region::origin`]).
    origin: u64,
}

/// Storage behind a [`Region`]: a run of 64-bit atomic words. The heap (the default) is one;
/// a shared-memory mapping that processes of one host cross-map (crate `rgasnet-pshm`) is
/// another, so that the engine deposits straight into memory a node peer can read.
pub trait Memory: Send + Sync {
    /// The words. Must return the same slice (same address and length) on every call.
    fn words(&self) -> &[AtomicU64];

    /// Optional bulk copy of `src` to byte `offset` (already checked to lie inside the
    /// memory), for storage that can do better than the word loop; `false` means "not done,
    /// use the word loop". Called only for copies of at least [`BULK_COPY_MIN`] bytes.
    fn write_bytes(&self, offset: usize, src: &[u8]) -> bool {
        let _ = (offset, src);
        false
    }

    /// Optional bulk copy from byte `offset` into `dst`; see [`Memory::write_bytes`].
    fn read_bytes(&self, offset: usize, dst: &mut [u8]) -> bool {
        let _ = (offset, dst);
        false
    }

    /// Optional bulk append of `len` bytes from byte `offset` (already checked) to `out`,
    /// without zeroing room for them first; see [`Memory::write_bytes`].
    fn append_bytes(&self, offset: usize, len: usize, out: &mut Vec<u8>) -> bool {
        let _ = (offset, len, out);
        false
    }

    /// Optional: calls `f` once with the `len` bytes at byte `offset` (already checked) seen
    /// in place, for storage that can lend a plain byte view of itself; storage that cannot
    /// does not call `f` (the caller then copies). Called only for views of at least
    /// [`BULK_COPY_MIN`] bytes. The bulk copies' concurrency contract holds for the whole
    /// call: nobody writes those bytes while the view is lent (an AM receive block lends a
    /// delivered message, which no deposit touches until the block is posted again).
    fn lend_bytes(&self, offset: usize, len: usize, f: &mut dyn FnMut(&[u8])) {
        let _ = (offset, len, f);
    }

    /// Optional bulk copy of `len` bytes from byte `src_offset` of `src` (another region's
    /// words, already bounds-checked) to byte `offset` of this memory; see
    /// [`Memory::write_bytes`].
    fn copy_from_words(
        &self,
        offset: usize,
        src: &[AtomicU64],
        src_offset: usize,
        len: usize,
    ) -> bool {
        let _ = (offset, src, src_offset, len);
        false
    }
}

/// Copies shorter than this always use the atomic word loop; longer ones may use the storage's
/// bulk copy ([`Memory::write_bytes`]).
pub const BULK_COPY_MIN: usize = 4096;

/// Below this many bytes [`Region::append_to`] appends word by word instead of through a
/// 4 KiB stack buffer (whose zeroing would dominate a small message).
const SHORT_APPEND: usize = 512;

struct HeapMemory(Box<[AtomicU64]>);

impl Memory for HeapMemory {
    fn words(&self) -> &[AtomicU64] {
        &self.0
    }
}

impl std::fmt::Debug for Region {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Region")
            .field("len", &self.inner.len)
            .field("id", &Arc::as_ptr(&self.inner))
            .finish()
    }
}

// Relaxed is enough for every data access: regions carry no synchronisation of their own; the
// happens-before edge between a writer and a reader is the interface lock or the event/counter
// that announces the data (see the module docs).
const DATA: Ordering = Ordering::Relaxed;

impl Region {
    /// A new region of `len` zero bytes.
    pub fn new(len: usize) -> Self {
        let words = len.div_ceil(8);
        let words: Box<[AtomicU64]> = (0..words).map(|_| AtomicU64::new(0)).collect();
        Region {
            inner: Arc::new(RegionInner {
                memory: Box::new(HeapMemory(words)),
                len,
                origin: 0,
            }),
        }
    }

    /// A new region of `len` zero bytes, or `None` when the memory cannot be had (instead of
    /// aborting the process, as [`Region::new`] would).
    pub fn try_new(len: usize) -> Option<Self> {
        let words = len.div_ceil(8);
        let mut v: Vec<AtomicU64> = Vec::new();
        v.try_reserve_exact(words).ok()?;
        v.extend((0..words).map(|_| AtomicU64::new(0)));
        Some(Region {
            inner: Arc::new(RegionInner {
                memory: Box::new(HeapMemory(v.into_boxed_slice())),
                len,
                origin: 0,
            }),
        })
    }

    /// A region of `len` bytes over `memory` (which must hold at least `len.div_ceil(8)`
    /// words; `None` otherwise).
    pub fn with_memory(memory: Box<dyn Memory>, len: usize) -> Option<Self> {
        Self::with_memory_at(memory, len, 0)
    }

    /// As [`Region::with_memory`], with an origin: the number that events report as the
    /// address of the region's byte 0 (their `start` is the origin plus the offset). A C
    /// library over the engine sets it to the C address of the memory, so that events carry
    /// the pointers its callers expect.
    pub fn with_memory_at(memory: Box<dyn Memory>, len: usize, origin: u64) -> Option<Self> {
        if memory.words().len() < len.div_ceil(8) {
            return None;
        }
        Some(Region {
            inner: Arc::new(RegionInner {
                memory,
                len,
                origin,
            }),
        })
    }

    /// What events report as the address of byte 0: 0 unless the region was built with
    /// [`Region::with_memory_at`].
    pub fn origin(&self) -> u64 {
        self.inner.origin
    }

    /// A new region holding a copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> Self {
        let region = Region::new(bytes.len());
        // Cannot fail: the region has exactly `bytes.len()` bytes.
        let _ = region.write(0, bytes);
        region
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.inner.len
    }

    /// Whether the region has no bytes.
    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    /// Whether `self` and `other` are the same bytes (clones of one region).
    pub fn same_as(&self, other: &Region) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Checks that `[offset, offset + len)` lies inside the region.
    pub fn check(&self, offset: u64, len: u64) -> Result<(), OutOfBounds> {
        OutOfBounds::check(offset, len, self.inner.len as u64)
    }

    /// Copies `dst.len()` bytes starting at `offset` into `dst`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> Result<(), OutOfBounds> {
        self.check(offset as u64, dst.len() as u64)?;
        if dst.is_empty() {
            // As in `write`: an empty body is common (an AM Short without arguments).
            return Ok(());
        }
        if dst.len() >= BULK_COPY_MIN && self.inner.memory.read_bytes(offset, dst) {
            return Ok(());
        }
        let words = self.inner.memory.words();
        let mut pos = offset;
        let mut out = 0;
        // Leading partial word.
        while out < dst.len() && pos % 8 != 0 {
            dst[out] = byte_of(words[pos / 8].load(DATA), pos % 8);
            pos += 1;
            out += 1;
        }
        // Whole words, zipped so that the loop carries no bounds checks: this loop and the one
        // in `write` are the engine's bulk copies in and out of memory (atomics cannot be
        // copied with memcpy without `unsafe`), so they must run at a load+store per word.
        let n = (dst.len() - out) / 8;
        let (whole, _) = dst[out..].split_at_mut(n * 8);
        for (d, w) in whole.chunks_exact_mut(8).zip(&words[pos / 8..pos / 8 + n]) {
            d.copy_from_slice(&w.load(DATA).to_le_bytes());
        }
        pos += n * 8;
        out += n * 8;
        // Trailing partial word.
        if out < dst.len() {
            let w = words[pos / 8].load(DATA).to_le_bytes();
            let rest = dst.len() - out;
            dst[out..].copy_from_slice(&w[..rest]);
        }
        Ok(())
    }

    /// Copies `src` into the region starting at `offset`.
    ///
    /// Bytes of a partially covered word that lie outside `[offset, offset + src.len())` are
    /// preserved even under concurrent writes to them (merged with a compare-and-swap loop).
    pub fn write(&self, offset: usize, src: &[u8]) -> Result<(), OutOfBounds> {
        self.check(offset as u64, src.len() as u64)?;
        if src.is_empty() {
            // An AM Short without arguments has an empty body: spare the storage call.
            return Ok(());
        }
        if src.len() >= BULK_COPY_MIN && self.inner.memory.write_bytes(offset, src) {
            return Ok(());
        }
        let words = self.inner.memory.words();
        // The commonest small put: one aligned word.
        if let (Ok(b), 0) = (<[u8; 8]>::try_from(src), offset % 8) {
            if let Some(w) = words.get(offset / 8) {
                w.store(u64::from_le_bytes(b), DATA);
                return Ok(());
            }
        }
        let mut pos = offset;
        let mut inp = 0;
        // Leading partial word.
        if pos % 8 != 0 && !src.is_empty() {
            let first = pos % 8;
            let n = (8 - first).min(src.len());
            merge_bytes(&words[pos / 8], first, &src[..n]);
            pos += n;
            inp += n;
        }
        let n = (src.len() - inp) / 8;
        let whole = &src[inp..inp + n * 8];
        for (b, w) in whole.chunks_exact(8).zip(&words[pos / 8..pos / 8 + n]) {
            let mut v = [0u8; 8];
            v.copy_from_slice(b);
            w.store(u64::from_le_bytes(v), DATA);
        }
        pos += n * 8;
        inp += n * 8;
        if inp < src.len() {
            merge_bytes(&words[pos / 8], 0, &src[inp..]);
        }
        Ok(())
    }

    /// Sets `len` bytes starting at `offset` to `byte`.
    pub fn fill(&self, offset: usize, len: usize, byte: u8) -> Result<(), OutOfBounds> {
        self.check(offset as u64, len as u64)?;
        // Chunked so that a large fill needs no large temporary.
        let chunk = [byte; 4096];
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk.len());
            self.write(offset + done, &chunk[..n])?;
            done += n;
        }
        Ok(())
    }

    /// Copies `len` bytes from `src` at `src_offset` into this region at `offset`, without an
    /// intermediate allocation (word by word when the two offsets share their alignment).
    /// The two may be the same region; overlapping ranges are not supported (the result of
    /// an overlapping copy is some interleaving of old and new bytes, never undefined).
    pub fn copy_from(
        &self,
        offset: usize,
        src: &Region,
        src_offset: usize,
        len: usize,
    ) -> Result<(), OutOfBounds> {
        self.check(offset as u64, len as u64)?;
        src.check(src_offset as u64, len as u64)?;
        if len >= BULK_COPY_MIN
            && self
                .inner
                .memory
                .copy_from_words(offset, src.inner.memory.words(), src_offset, len)
        {
            return Ok(());
        }
        let mut done = 0;
        if offset % 8 == src_offset % 8 {
            // Leading bytes up to a word boundary, then whole words, then the tail.
            let head = ((8 - offset % 8) % 8).min(len);
            let mut buf = [0u8; 8];
            src.read(src_offset, &mut buf[..head])?;
            self.write(offset, &buf[..head])?;
            done = head;
            let words = (len - done) / 8;
            let (dw, sw) = (self.inner.memory.words(), src.inner.memory.words());
            let (d0, s0) = ((offset + done) / 8, (src_offset + done) / 8);
            for (d, s) in dw[d0..d0 + words].iter().zip(&sw[s0..s0 + words]) {
                d.store(s.load(DATA), DATA);
            }
            done += words * 8;
        }
        if done < len {
            // Misaligned relative to each other (or the tail): through a stack buffer, made
            // only here because zeroing it costs more than a small aligned copy.
            let mut buf = [0u8; 4096];
            while done < len {
                let n = (len - done).min(buf.len());
                src.read(src_offset + done, &mut buf[..n])?;
                self.write(offset + done, &buf[..n])?;
                done += n;
            }
        }
        Ok(())
    }

    /// Appends `len` bytes starting at `offset` to `out`, without first zeroing room for them
    /// (a message being built for a large put is filled this way, saving a memset pass).
    pub fn append_to(
        &self,
        offset: usize,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), OutOfBounds> {
        self.check(offset as u64, len as u64)?;
        if len == 0 {
            // As in `write`: an empty body is common (an AM Short without arguments).
            return Ok(());
        }
        if len >= BULK_COPY_MIN {
            if self.inner.memory.append_bytes(offset, len, out) {
                return Ok(());
            }
            let start = out.len();
            out.resize(start + len, 0);
            if self.inner.memory.read_bytes(offset, &mut out[start..]) {
                return Ok(());
            }
            out.truncate(start);
        }
        out.reserve(len);
        let words = self.inner.memory.words();
        let (mut pos, end) = (offset, offset + len);
        while pos < end && pos % 8 != 0 {
            out.push(byte_of(words[pos / 8].load(DATA), pos % 8));
            pos += 1;
        }
        if end - pos < SHORT_APPEND {
            // A short run word by word: zeroing a stack buffer would cost more than the copy.
            let whole = (end - pos) / 8;
            for w in &words[pos / 8..pos / 8 + whole] {
                out.extend_from_slice(&w.load(DATA).to_le_bytes());
            }
            pos += whole * 8;
        } else {
            // Whole words through a stack buffer: the tight zipped loop of `read` fills it,
            // and appending it is a memcpy from L1 (per-word appends check capacity every
            // time).
            let mut chunk = [0u8; 4096];
            while end - pos >= 8 {
                let n = ((end - pos) / 8).min(chunk.len() / 8);
                for (d, w) in chunk.chunks_exact_mut(8).zip(&words[pos / 8..pos / 8 + n]) {
                    d.copy_from_slice(&w.load(DATA).to_le_bytes());
                }
                out.extend_from_slice(&chunk[..n * 8]);
                pos += n * 8;
            }
        }
        if pos < end {
            let w = words[pos / 8].load(DATA).to_le_bytes();
            out.extend_from_slice(&w[..end - pos]);
        }
        Ok(())
    }

    /// Calls `f` with the `len` bytes starting at `offset`: seen in place when the region's
    /// storage lends them ([`Memory::lend_bytes`], for at least [`BULK_COPY_MIN`] bytes),
    /// otherwise copied into `scratch` (cleared first) and seen there. `f` is called exactly
    /// once. A large AM payload reaches its handler this way without another copy.
    pub fn with_bytes<R>(
        &self,
        offset: usize,
        len: usize,
        scratch: &mut Vec<u8>,
        mut f: impl FnMut(&[u8]) -> R,
    ) -> Result<R, OutOfBounds> {
        self.check(offset as u64, len as u64)?;
        if len >= BULK_COPY_MIN {
            let mut out = None;
            self.inner
                .memory
                .lend_bytes(offset, len, &mut |bytes| out = Some(f(bytes)));
            // `f` runs at most once (it may be a handler): here, or on the copy below.
            if let Some(r) = out {
                return Ok(r);
            }
        }
        scratch.clear();
        self.append_to(offset, len, scratch)?;
        Ok(f(scratch))
    }

    /// Copies `len` bytes starting at `offset` into a new vector.
    pub fn to_vec(&self, offset: usize, len: usize) -> Result<Vec<u8>, OutOfBounds> {
        let mut v = vec![0u8; len];
        self.read(offset, &mut v)?;
        Ok(v)
    }
}

/// A checked byte range of a [`Region`], held (with a reference to the region) by a message
/// that is sent from the region in place instead of from a copy
/// ([`crate::types::MdOptions::IN_PLACE`]).
#[derive(Clone, Debug)]
pub struct RegionSpan {
    region: Region,
    offset: usize,
    len: usize,
}

impl RegionSpan {
    /// The bytes `[offset, offset + len)` of `region`, or the bounds error.
    pub fn new(region: Region, offset: usize, len: usize) -> Result<Self, OutOfBounds> {
        region.check(offset as u64, len as u64)?;
        Ok(RegionSpan {
            region,
            offset,
            len,
        })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The region the span lies in.
    pub fn region(&self) -> &Region {
        &self.region
    }

    /// First byte of the span in its region.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Whether the span has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `len` bytes of the span, from byte `from` of it, to `out`.
    pub fn append_to(&self, from: usize, len: usize, out: &mut Vec<u8>) -> Result<(), OutOfBounds> {
        self.sub_check(from, len)?;
        self.region.append_to(self.offset + from, len, out)
    }

    /// The address of byte `from` of the span, for an I/O layer that hands `len` bytes from it
    /// to the kernel (a gathering `sendmsg`), or `None` when `[from, from + len)` is not inside
    /// the span or the host is big-endian (where a region's bytes are not laid out in memory in
    /// their order). The pointer is valid while this span (which keeps the region alive)
    /// lives; the bytes may change concurrently, so it may only be read as raw memory, never
    /// through a Rust reference.
    pub fn raw_bytes(&self, from: usize, len: usize) -> Option<*const u8> {
        if cfg!(target_endian = "big") || self.sub_check(from, len).is_err() {
            return None;
        }
        let words = self.region.inner.memory.words();
        // In bounds: `check` at construction keeps `offset + len` within the region, and a
        // region's memory holds at least `len.div_ceil(8)` words (`Region::with_memory`).
        Some(words.as_ptr().cast::<u8>().wrapping_add(self.offset + from))
    }

    fn sub_check(&self, from: usize, len: usize) -> Result<(), OutOfBounds> {
        OutOfBounds::check(from as u64, len as u64, self.len as u64)
    }
}

fn byte_of(word: u64, index: usize) -> u8 {
    word.to_le_bytes()[index]
}

/// Replaces bytes `first..first + bytes.len()` of `word` (little-endian numbering), keeping the
/// other bytes even if they change concurrently.
fn merge_bytes(word: &AtomicU64, first: usize, bytes: &[u8]) {
    let mut mask = 0u64;
    let mut value = 0u64;
    for (i, b) in bytes.iter().enumerate() {
        let shift = 8 * (first + i);
        mask |= 0xffu64 << shift;
        value |= u64::from(*b) << shift;
    }
    // The closure always returns Some, so fetch_update cannot fail.
    let _ = word.fetch_update(DATA, DATA, |old| Some((old & !mask) | value));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_at_every_alignment() {
        for len in 0..40usize {
            for off in 0..17usize {
                let r = Region::new(64);
                let data: Vec<u8> = (0..len).map(|i| (i * 7 + off) as u8 | 1).collect();
                r.write(off, &data).unwrap();
                let back = r.to_vec(off, len).unwrap();
                assert_eq!(back, data, "len {len} off {off}");
                // Bytes around the write are still zero.
                let all = r.to_vec(0, 64).unwrap();
                assert!(all[..off].iter().all(|&b| b == 0));
                assert!(all[off + len..].iter().all(|&b| b == 0));
            }
        }
    }

    #[test]
    fn copy_between_regions_at_every_alignment() {
        let src = Region::new(200);
        let data: Vec<u8> = (0..200).map(|i| (i * 13 + 1) as u8).collect();
        src.write(0, &data).unwrap();
        for so in 0..9usize {
            for doff in 0..9usize {
                for len in [0usize, 1, 7, 8, 9, 63, 150] {
                    let dst = Region::new(200);
                    dst.copy_from(doff, &src, so, len).unwrap();
                    let got = dst.to_vec(0, 200).unwrap();
                    assert_eq!(&got[doff..doff + len], &data[so..so + len]);
                    assert!(got[..doff].iter().all(|&b| b == 0));
                    assert!(got[doff + len..].iter().all(|&b| b == 0));
                }
            }
        }
        let dst = Region::new(10);
        assert!(dst.copy_from(5, &src, 0, 6).is_err());
        assert!(dst.copy_from(0, &src, 199, 2).is_err());
    }

    #[test]
    fn bounds_are_checked() {
        let r = Region::new(10);
        assert_eq!(
            r.write(8, &[1, 2, 3]),
            Err(OutOfBounds {
                offset: 8,
                len: 3,
                region_len: 10
            })
        );
        let mut buf = [0u8; 1];
        assert!(r.read(10, &mut buf).is_err());
        assert!(r.check(u64::MAX, 2).is_err());
        assert!(r.read(10, &mut []).is_ok());
    }

    #[test]
    fn empty_copies_are_bounds_checked_and_change_nothing() {
        let r = Region::new(10);
        r.write(0, &[9; 10]).unwrap();
        // At the end: in bounds, nothing written, nothing appended.
        assert_eq!(r.write(10, &[]), Ok(()));
        assert_eq!(r.read(10, &mut []), Ok(()));
        let mut out = vec![1u8, 2];
        assert_eq!(r.append_to(10, 0, &mut out), Ok(()));
        assert_eq!(out, [1, 2]);
        // Past the end: the same error as for a non-empty copy, and `out` untouched.
        let past = OutOfBounds {
            offset: 11,
            len: 0,
            region_len: 10,
        };
        assert_eq!(r.write(11, &[]), Err(past));
        assert_eq!(r.read(11, &mut []), Err(past));
        assert_eq!(r.append_to(11, 0, &mut out), Err(past));
        assert_eq!(out, [1, 2]);
        assert_eq!(r.to_vec(0, 10).unwrap(), [9; 10]);
    }

    #[test]
    fn fill_and_clone_share_bytes() {
        let r = Region::new(5000);
        let c = r.clone();
        r.fill(3, 4990, 0xab).unwrap();
        let v = c.to_vec(0, 5000).unwrap();
        assert_eq!(&v[..3], &[0, 0, 0]);
        assert!(v[3..4993].iter().all(|&b| b == 0xab));
        assert!(v[4993..].iter().all(|&b| b == 0));
        assert!(r.same_as(&c));
        assert!(!r.same_as(&Region::new(1)));
    }

    #[test]
    fn append_to_matches_read_at_every_alignment() {
        // Larger than the 4096-byte staging chunk, so the chunk loop runs several times.
        let bytes: Vec<u8> = (0..9000u32).map(|i| (i * 7 + (i >> 8)) as u8).collect();
        let r = Region::from_bytes(&bytes);
        for off in [0, 1, 7, 8, 9, 4095, 4096, 4100] {
            for len in [0, 1, 7, 8, 9, 4095, 4096, 4097, 8192 + 3] {
                if off + len > bytes.len() {
                    continue;
                }
                let mut out = vec![0xee];
                r.append_to(off, len, &mut out).unwrap();
                assert_eq!(out[0], 0xee, "existing bytes kept");
                assert_eq!(&out[1..], &bytes[off..off + len], "off {off} len {len}");
            }
        }
        let mut out = Vec::new();
        assert!(r.append_to(8999, 2, &mut out).is_err());
        assert!(out.is_empty(), "nothing appended on a refused range");
    }

    #[test]
    fn with_bytes_copies_a_heap_region_into_scratch() {
        let bytes: Vec<u8> = (0..9000u32).map(|i| (i * 13 + 5) as u8).collect();
        let r = Region::from_bytes(&bytes);
        for (off, len) in [(0, 0), (3, 10), (1, 4096), (7, 8993)] {
            let mut scratch = vec![0xee; 3];
            let seen = r
                .with_bytes(off, len, &mut scratch, |b| b.to_vec())
                .unwrap();
            assert_eq!(seen, &bytes[off..off + len], "off {off} len {len}");
            // A heap region cannot lend its words, so the bytes went through `scratch`
            // (cleared first).
            assert_eq!(scratch, &bytes[off..off + len]);
        }
        let mut scratch = Vec::new();
        let mut called = false;
        let e = r.with_bytes(8990, 11, &mut scratch, |_| called = true);
        assert_eq!(
            e.unwrap_err().to_string(),
            OutOfBounds::check(8990, 11, 9000).unwrap_err().to_string()
        );
        assert!(!called, "no call on a refused range");
    }
}
