//! Memory a Portals library reads and writes on its own (its progress thread, a NIC) while an
//! MD or a list entry covers it: a [`RefBuffer`] (heap bytes at a fixed address), or a span of
//! a [`Region`], rgasnet's own memory (a segment, a receive block, shared memory), so that
//! the library serves what the native engine serves without a copy in between. Rust reaches
//! either only through copies or atomic words, never through a reference the library's writes
//! could invalidate, and reads what the library wrote only after the event or count that
//! announces it.

use std::ffi::c_void;
use std::ptr::NonNull;

use crate::error::{PtlError, PtlResult};
use crate::memory::RegionSpan;

/// Heap bytes at a fixed address for the library to read and write.
#[derive(Debug)]
pub struct RefBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the bytes are plain heap memory owned by this value; every access from Rust is a
// copy through the raw pointer (never a reference), so moving or sharing the value between
// threads adds no aliasing.
unsafe impl Send for RefBuffer {}
// SAFETY: as for `Send`.
unsafe impl Sync for RefBuffer {}

impl RefBuffer {
    /// `len` zero bytes (at least one byte is allocated, so the address is never dangling).
    pub fn new(len: usize) -> RefBuffer {
        let boxed: Box<[u8]> = vec![0u8; len.max(1)].into_boxed_slice();
        let ptr = NonNull::from(Box::leak(boxed)).cast::<u8>();
        RefBuffer { ptr, len }
    }

    /// Its length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The address of its first byte (what the library's events report).
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    fn range(&self, offset: usize, len: usize) -> PtlResult<()> {
        match offset.checked_add(len) {
            Some(end) if end <= self.len => Ok(()),
            _ => Err(PtlError::arg(
                "RefBuffer",
                format!("{len} bytes at {offset} exceed the buffer's {}", self.len),
            )),
        }
    }

    /// Copies `src` in at `offset`. Call it only while no operation the library runs writes
    /// those bytes.
    pub fn write(&self, offset: usize, src: &[u8]) -> PtlResult<()> {
        self.range(offset, src.len())?;
        // SAFETY: in bounds (checked); the destination is this value's own allocation, which
        // no Rust reference covers; `src` is another allocation.
        unsafe {
            std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.as_ptr().add(offset), src.len())
        };
        Ok(())
    }

    /// Copies `dst.len()` bytes out from `offset`.
    pub fn read(&self, offset: usize, dst: &mut [u8]) -> PtlResult<()> {
        self.range(offset, dst.len())?;
        // SAFETY: in bounds (checked); see `write`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().add(offset),
                dst.as_mut_ptr(),
                dst.len(),
            )
        };
        Ok(())
    }
}

impl Drop for RefBuffer {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from `Box::leak` of a boxed slice of `len.max(1)` bytes in
        // `new`, and is freed once; the MDs and entries over the buffer borrow it, so none
        // outlives it.
        drop(unsafe {
            Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.ptr.as_ptr(),
                self.len.max(1),
            ))
        });
    }
}

/// What an MD or list entry of the library covers, kept alive (borrowed or held) for as long
/// as the MD or entry exists.
#[derive(Debug)]
pub enum LibMemory<'a> {
    /// A buffer the caller keeps.
    Buffer(&'a RefBuffer),
    /// A span of a [`crate::memory::Region`] (held: the region lives while the MD or entry
    /// does). A region stores its bytes as atomic 64-bit words, whose memory Rust allows to
    /// change behind a shared reference, so the library's writes alias nothing Rust holds.
    Span(RegionSpan),
}

impl<'a> From<&'a RefBuffer> for LibMemory<'a> {
    fn from(b: &'a RefBuffer) -> Self {
        LibMemory::Buffer(b)
    }
}

impl From<RegionSpan> for LibMemory<'static> {
    fn from(s: RegionSpan) -> Self {
        LibMemory::Span(s)
    }
}

impl LibMemory<'_> {
    /// The start address and length to give the library; for `call`'s error, a span this
    /// host cannot lend as plain bytes (a big-endian host lays a region's words out in
    /// another byte order than their bytes).
    pub(crate) fn start_len(&self, call: &'static str) -> PtlResult<(*mut c_void, u64)> {
        match self {
            LibMemory::Buffer(b) => Ok((b.ptr.as_ptr().cast(), b.len as u64)),
            LibMemory::Span(s) => {
                let p = s.raw_bytes(0, s.len()).ok_or_else(|| {
                    PtlError::arg(
                        call,
                        "a region's bytes are not laid out in order on this (big-endian) host",
                    )
                })?;
                // The library writes through it: allowed for atomic words (see `Span`).
                Ok((p.cast_mut().cast(), s.len() as u64))
            }
        }
    }
}
