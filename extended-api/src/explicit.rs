//! Blocking and explicit-handle (`nb`) put and get, value forms, and the waits on handles.
//!
//! Every explicit network operation reports one full event (ACK for a put, REPLY for a get) to
//! the shared event queue, tagged with its cell. Whichever thread is waiting drains the queue;
//! a handle's owner sees its cell complete, copies a get's landing into its buffer and frees
//! the cell.
//!
//! Completion guarantees (the same for every put form): the source bytes are copied out before
//! the call returns, so the source buffer may be overwritten as soon as any put call returns
//! (local completion at return). A blocking put returns once the target acknowledged the data:
//! it is visible to the target and to any later get (remote completion). A handle's wait gives
//! remote completion of a put and, for a get, the data in the destination buffer.

use rgasnet_portals::engine::{GetArgs, MdHandle, PutArgs, RemoteAddr};
use rgasnet_portals::{AckReq, NiFail, ProcessId};

use crate::error::ExtError;
use crate::ext::{Extended, Shared, GET_CHUNK, PUT_CHUNK, SEG_PUT_CHUNK, SMALL_GET};
pub use crate::handle::NbHandle;
use crate::handle::{Dest, Kind};
use crate::ops::{Freed, Landing};

impl Shared {
    /// Issues the network puts of an explicit put of `src` (through `put_md`) reporting to
    /// cell `cell`. The caller allocated the cell with one completion per chunk.
    fn issue_put_chunks(
        &self,
        call: &'static str,
        rank: u32,
        offset: u64,
        src: &[u8],
        cell: u32,
    ) -> Result<(), ExtError> {
        let n = src.len().div_ceil(PUT_CHUNK).max(1) as u32;
        let mut issued = 0u32;
        let r = (0..n).try_for_each(|i| {
            let lo = i as usize * PUT_CHUNK;
            let chunk = &src[lo..src.len().min(lo + PUT_CHUNK)];
            self.acquire_put_bytes(call, chunk.len() as u64)?;
            if let Err(e) = self.acquire_credit(call) {
                self.release_put_bytes(chunk.len() as u64);
                return Err(e);
            }
            // The chunk goes from `src` into the message (`put_from`): the descriptor only
            // reports the ACK, so the bytes are copied once, not twice.
            let r = self.ni.put_from(
                &put_args(self.put_md, 0, chunk.len(), rank, offset + lo as u64, cell),
                chunk,
            );
            if let Err(source) = r {
                self.credits
                    .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
                self.release_put_bytes(chunk.len() as u64);
                return Err(ExtError::Portals { call, source });
            }
            issued += 1;
            Ok(())
        });
        if r.is_err() {
            // The chunks never issued will never complete: account for them so the cell can
            // finish once the issued ones have.
            self.core.ops.complete(
                u64::from(cell),
                n - issued,
                rgasnet_portals::NiFail::Dropped,
            );
        }
        r
    }

    /// An explicit put of `src` to (`rank`, `offset`).
    pub(crate) fn put_nb_impl<'a>(
        &'a self,
        call: &'static str,
        rank: u32,
        offset: u64,
        src: &[u8],
    ) -> Result<NbHandle<'a>, ExtError> {
        self.check_remote(call, rank, offset, src.len())?;
        self.put_nb_raw(call, rank, offset, src)
    }

    /// [`Shared::put_nb_impl`] after the range check (or without it, to exercise the target's
    /// own bounds enforcement in tests).
    pub(crate) fn put_nb_raw<'a>(
        &'a self,
        call: &'static str,
        rank: u32,
        offset: u64,
        src: &[u8],
    ) -> Result<NbHandle<'a>, ExtError> {
        if let Some(seg) = self.local_segment(rank) {
            // Checked by the caller, except by the test hook that exercises target bounds.
            self.local_result(call, rank, seg.write(offset as usize, src))?;
            return Ok(NbHandle::done(self));
        }
        let n = src.len().div_ceil(PUT_CHUNK).max(1) as u32;
        let cell = self.core.ops.alloc(n, Landing::None);
        let h = NbHandle::op(self, cell, rank, call);
        self.issue_put_chunks(call, rank, offset, src, cell)?;
        Ok(h)
    }

    /// An explicit get into `dest` from (`rank`, `offset`).
    pub(crate) fn get_nb_impl<'a>(
        &'a self,
        call: &'static str,
        dest: &'a mut [u8],
        rank: u32,
        offset: u64,
    ) -> Result<NbHandle<'a>, ExtError> {
        self.check_remote(call, rank, offset, dest.len())?;
        self.get_nb_raw(call, dest, rank, offset)
    }

    /// [`Shared::get_nb_impl`] after the range check.
    pub(crate) fn get_nb_raw<'a>(
        &'a self,
        call: &'static str,
        dest: &'a mut [u8],
        rank: u32,
        offset: u64,
    ) -> Result<NbHandle<'a>, ExtError> {
        if let Some(seg) = self.local_segment(rank) {
            // Checked by the caller, except by the test hook that exercises target bounds.
            self.local_result(call, rank, seg.read(offset as usize, dest))?;
            return Ok(NbHandle::done(self));
        }
        let len = dest.len();
        let n = len.div_ceil(GET_CHUNK).max(1) as u32;
        if len <= SMALL_GET {
            // The common small get: its cell and a free slot under one lock.
            if let Some((cell, slot)) = self.core.ops.alloc_small(n) {
                if let Some((_, md, base)) = self.small.slot(slot) {
                    return self.issue_get_op(call, dest, rank, offset, cell, md, base);
                }
                // Not reached: a slot is freed only once its block is bound. Should it be,
                // the cell is freed (its slot with it) and the get takes the path below.
                let _ = self.core.ops.complete(u64::from(cell), n, NiFail::Dropped);
                if let Freed::Landing(l) = self.core.ops.orphan(cell) {
                    self.release_landing(l);
                }
            }
        }
        let small = if len <= SMALL_GET {
            self.take_small_slot(call)?
        } else {
            None
        };
        let (landing, md, base) = match small {
            Some((s, md, base)) => (Landing::Small(s), md, base),
            None => {
                // A kept landing of this size's class, or a new one of the class's capacity
                // (kept after the get: see `rgasnet_portals::pool`).
                let (region, md) = self
                    .landings
                    .take_or_make(len, |cap| {
                        let region = rgasnet::buffer_region(cap);
                        let md = crate::ext::bind_eq(&self.ni, &region, self.xeq)?;
                        Ok((region, md))
                    })
                    .map_err(ExtError::portals(call))?;
                (Landing::Dynamic { region, md }, md, 0)
            }
        };
        let cell = self.core.ops.alloc(n, landing);
        self.issue_get_op(call, dest, rank, offset, cell, md, base)
    }

    /// Issues the get of cell `cell` into `dest`, landing at `base` of `md`; returns its
    /// handle.
    #[allow(clippy::too_many_arguments)]
    fn issue_get_op<'a>(
        &'a self,
        call: &'static str,
        dest: &'a mut [u8],
        rank: u32,
        offset: u64,
        cell: u32,
        md: MdHandle,
        base: usize,
    ) -> Result<NbHandle<'a>, ExtError> {
        let len = dest.len();
        let mut h = NbHandle::op(self, cell, rank, call);
        if let Kind::Op { dest: d, .. } = &mut h.kind {
            *d = Dest::Buf(dest);
        }
        self.issue_get_chunks(call, md, base, len, rank, offset, cell)?;
        Ok(h)
    }

    /// A free small landing slot (number, descriptor, offset), binding one more block of them
    /// when every slot is in flight; `None` once all blocks are (the get then takes a landing
    /// of its own).
    fn take_small_slot(
        &self,
        call: &'static str,
    ) -> Result<Option<(u32, MdHandle, usize)>, ExtError> {
        let slot = match self.core.ops.take_small() {
            Some(s) => Some(s),
            None => self
                .small
                .grow(|len| {
                    let region = rgasnet::buffer_region(len);
                    let md = crate::ext::bind_eq(&self.ni, &region, self.xeq)?;
                    Ok((region, md))
                })
                .map_err(ExtError::portals(call))?
                .and_then(|slots| self.core.ops.add_small_and_take(slots)),
        };
        Ok(slot.and_then(|s| self.small.slot(s).map(|(_, md, base)| (s, md, base))))
    }

    /// Issues the network gets of an explicit get landing at `base` of `md`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn issue_get_chunks(
        &self,
        call: &'static str,
        md: MdHandle,
        base: usize,
        len: usize,
        rank: u32,
        offset: u64,
        cell: u32,
    ) -> Result<(), ExtError> {
        let n = len.div_ceil(GET_CHUNK).max(1) as u32;
        let mut done = 0usize;
        for i in 0..n {
            let chunk = (len - done).min(GET_CHUNK);
            let r = self.issue_chunk(call, true, chunk as u64, || {
                self.ni.get(&get_args(
                    md,
                    base + done,
                    chunk,
                    rank,
                    offset + done as u64,
                    cell,
                ))
            });
            if let Err(e) = r {
                self.core
                    .ops
                    .complete(u64::from(cell), n - i, rgasnet_portals::NiFail::Dropped);
                return Err(e);
            }
            done += chunk;
        }
        Ok(())
    }
}

/// What [`Shared::seg_nb`] does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum SegOp {
    /// A get into the segment.
    Get,
    /// A put whose bytes are copied as it is issued (they may change once the call returns).
    PutCopied,
    /// A put sent from the segment in place, in one-datagram chunks, for a caller that waits
    /// for its completion before the bytes may change.
    PutInPlace,
}

impl Shared {
    /// A put from, or a get into, this rank's own segment, through the segment's descriptors.
    fn seg_nb(
        &self,
        call: &'static str,
        what: SegOp,
        rank: u32,
        offset: u64,
        local_offset: u64,
        len: u64,
    ) -> Result<NbHandle<'_>, ExtError> {
        self.check_local(call, local_offset, len)?;
        self.check_remote(call, rank, offset, len as usize)?;
        let (lo, l) = (local_offset as usize, len as usize);
        let put = what != SegOp::Get;
        if let Some(seg) = self.local_segment(rank) {
            // Both ranges were checked above.
            let copied = if put {
                seg.copy_from(offset as usize, &self.segment, lo, l)
            } else {
                self.segment.copy_from(lo, seg, offset as usize, l)
            };
            self.local_result(call, rank, copied)?;
            return Ok(NbHandle::done(self));
        }
        let (chunk, md) = match what {
            SegOp::Get => (GET_CHUNK, self.seg_md),
            SegOp::PutCopied => (PUT_CHUNK, self.seg_md),
            SegOp::PutInPlace => (SEG_PUT_CHUNK, self.seg_put_md),
        };
        let n = l.div_ceil(chunk).max(1) as u32;
        let cell = self.core.ops.alloc(n, Landing::None);
        let h = NbHandle::op(self, cell, rank, call);
        if !put {
            self.issue_get_chunks(call, md, lo, l, rank, offset, cell)?;
            return Ok(h);
        }
        for i in 0..n {
            let at = i as usize * chunk;
            let this = (l - at).min(chunk);
            let r = self.issue_chunk(call, false, this as u64, || {
                self.ni
                    .put(&put_args(md, lo + at, this, rank, offset + at as u64, cell))
            });
            if let Err(e) = r {
                self.core
                    .ops
                    .complete(u64::from(cell), n - i, rgasnet_portals::NiFail::Dropped);
                if what == SegOp::PutInPlace {
                    // The chunks already issued are sent (and resent) from the segment itself:
                    // the caller may change those bytes once this returns, so wait until they
                    // are acknowledged or failed. Their outcome is the error's to report.
                    let _ = h.wait();
                }
                return Err(e);
            }
        }
        Ok(h)
    }
}

pub(crate) fn put_args(
    md: MdHandle,
    local: usize,
    len: usize,
    rank: u32,
    offset: u64,
    user_ptr: u32,
) -> PutArgs {
    PutArgs {
        md,
        local_offset: local as u64,
        length: len as u64,
        ack_req: AckReq::ConfirmedAck,
        remote: remote(rank, offset),
        user_ptr: chunk_user_ptr(user_ptr, len),
        hdr_data: 0,
    }
}

pub(crate) fn get_args(
    md: MdHandle,
    local: usize,
    len: usize,
    rank: u32,
    offset: u64,
    user_ptr: u32,
) -> GetArgs {
    GetArgs {
        md,
        local_offset: local as u64,
        length: len as u64,
        remote: remote(rank, offset),
        user_ptr: chunk_user_ptr(user_ptr, len),
    }
}

/// The `user_ptr` of an explicit put or get chunk: its operation's cell in the low 32 bits,
/// the chunk's length above them. The acknowledgement or reply then says how many bytes were
/// asked for: the specification gives those events `mlength` (what the target took) but no
/// `rlength` (Sandia's reference implementation leaves it 0), and the completion compares the
/// two to report a truncated access and returns the bytes to the budget. A chunk is at most
/// [`crate::ext::PUT_CHUNK`] bytes, far below 2^32.
fn chunk_user_ptr(cell: u32, len: usize) -> u64 {
    u64::from(cell) | (len as u64) << 32
}

/// The cell and the requested length of a chunk's `user_ptr` ([`chunk_user_ptr`]).
pub(crate) fn chunk_of(user_ptr: u64) -> (u64, u64) {
    (user_ptr & u64::from(u32::MAX), user_ptr >> 32)
}

pub(crate) fn remote(rank: u32, offset: u64) -> RemoteAddr {
    RemoteAddr {
        target: ProcessId::Rank(rank),
        pt_index: rgasnet::RMA_PT,
        match_bits: 0,
        remote_offset: offset,
    }
}

/// Checks the size of a value form.
pub(crate) fn check_val(call: &'static str, nbytes: usize) -> Result<(), ExtError> {
    if nbytes == 0 || nbytes > 8 {
        return Err(ExtError::BadValueSize { call, len: nbytes });
    }
    Ok(())
}

impl Extended {
    /// Blocking put of `src` to `rank`'s segment at `offset`. On return the source may be
    /// reused and the data is in the target's segment.
    #[inline]
    pub fn put(&self, rank: u32, offset: u64, src: &[u8]) -> Result<(), ExtError> {
        // An aligned word to a node peer is one store, inlined into the caller; every other
        // case (and every error) goes the general way.
        if let Some(seg) = self.sh.direct(rank) {
            if !rgasnet::in_handler() && seg.try_write_word(offset, src) {
                return Ok(());
            }
        }
        self.put_general(rank, offset, src)
    }

    fn put_general(&self, rank: u32, offset: u64, src: &[u8]) -> Result<(), ExtError> {
        not_in_handler("put")?;
        if let Some(seg) = self.sh.local_segment(rank) {
            // A node peer or this rank: the put is the copy itself, no handle needed.
            self.sh.check_remote("put", rank, offset, src.len())?;
            return self
                .sh
                .local_result("put", rank, seg.write(offset as usize, src));
        }
        self.sh.put_blocking("put", rank, offset, src)
    }

    /// Bulk blocking put: the same guarantees as [`Extended::put`] (GASNet's bulk forms only
    /// relax alignment, which this implementation never requires).
    pub fn put_bulk(&self, rank: u32, offset: u64, src: &[u8]) -> Result<(), ExtError> {
        not_in_handler("put_bulk")?;
        self.sh.put_blocking("put_bulk", rank, offset, src)
    }

    /// Blocking get of `dest.len()` bytes from `rank`'s segment at `offset` into `dest`.
    #[inline]
    pub fn get(&self, dest: &mut [u8], rank: u32, offset: u64) -> Result<(), ExtError> {
        // As in `put`: an aligned word from a node peer is one load.
        if let Some(seg) = self.sh.direct(rank) {
            if !rgasnet::in_handler() && seg.try_read_word(offset, dest) {
                return Ok(());
            }
        }
        self.get_general(dest, rank, offset)
    }

    fn get_general(&self, dest: &mut [u8], rank: u32, offset: u64) -> Result<(), ExtError> {
        not_in_handler("get")?;
        if let Some(seg) = self.sh.local_segment(rank) {
            self.sh.check_remote("get", rank, offset, dest.len())?;
            return self
                .sh
                .local_result("get", rank, seg.read(offset as usize, dest));
        }
        self.sh.get_blocking("get", dest, rank, offset)
    }

    /// Bulk blocking get (same as [`Extended::get`]).
    pub fn get_bulk(&self, dest: &mut [u8], rank: u32, offset: u64) -> Result<(), ExtError> {
        not_in_handler("get_bulk")?;
        self.sh.get_blocking("get_bulk", dest, rank, offset)
    }

    /// Explicit-handle put. The source is copied before this returns (it may be overwritten at
    /// once); waiting on the handle gives remote completion. Bounds are checked here (typed
    /// error, nothing sent).
    pub fn put_nb(&self, rank: u32, offset: u64, src: &[u8]) -> Result<NbHandle<'_>, ExtError> {
        self.sh.put_nb_impl("put_nb", rank, offset, src)
    }

    /// Explicit-handle get into `dest`, which stays borrowed by the handle; waiting on the
    /// handle fills it.
    pub fn get_nb<'a>(
        &'a self,
        dest: &'a mut [u8],
        rank: u32,
        offset: u64,
    ) -> Result<NbHandle<'a>, ExtError> {
        self.sh.get_nb_impl("get_nb", dest, rank, offset)
    }

    /// Blocking put of the low `nbytes` (1–8) bytes of `value`, little-endian.
    pub fn put_val(
        &self,
        rank: u32,
        offset: u64,
        value: u64,
        nbytes: usize,
    ) -> Result<(), ExtError> {
        not_in_handler("put_val")?;
        check_val("put_val", nbytes)?;
        let bytes = value.to_le_bytes();
        self.sh
            .put_blocking("put_val", rank, offset, &bytes[..nbytes])
    }

    /// Explicit-handle form of [`Extended::put_val`].
    pub fn put_nb_val(
        &self,
        rank: u32,
        offset: u64,
        value: u64,
        nbytes: usize,
    ) -> Result<NbHandle<'_>, ExtError> {
        check_val("put_nb_val", nbytes)?;
        let bytes = value.to_le_bytes();
        self.sh
            .put_nb_impl("put_nb_val", rank, offset, &bytes[..nbytes])
    }

    /// Blocking get of `nbytes` (1–8) bytes, returned as the low bytes of a little-endian
    /// value.
    pub fn get_val(&self, rank: u32, offset: u64, nbytes: usize) -> Result<u64, ExtError> {
        not_in_handler("get_val")?;
        check_val("get_val", nbytes)?;
        let mut bytes = [0u8; 8];
        self.sh
            .get_blocking("get_val", &mut bytes[..nbytes], rank, offset)?;
        Ok(u64::from_le_bytes(bytes))
    }

    /// Explicit-handle put of `len` bytes at `local_offset` of this rank's segment, sent
    /// straight from the segment (no bounce copy). The bytes are read when the network put is
    /// issued, before this returns, so they may change afterwards.
    pub fn put_nb_from_segment(
        &self,
        rank: u32,
        offset: u64,
        local_offset: u64,
        len: u64,
    ) -> Result<NbHandle<'_>, ExtError> {
        self.sh.seg_nb(
            "put_nb_from_segment",
            SegOp::PutCopied,
            rank,
            offset,
            local_offset,
            len,
        )
    }

    /// Explicit-handle bulk put of `len` bytes at `local_offset` of this rank's segment, sent
    /// from the segment in place, as GASNet's bulk puts are: nothing is copied when it is
    /// issued, so the caller keeps those bytes unchanged until the handle completes (a change
    /// before then may reach the target, as with RDMA hardware; dropping the handle does not
    /// end the transfer). This is what a flood of large explicit puts needs: a copy per put
    /// would halve its bandwidth. [`Extended::put_nb_from_segment`] copies instead.
    pub fn put_nb_bulk_from_segment(
        &self,
        rank: u32,
        offset: u64,
        local_offset: u64,
        len: u64,
    ) -> Result<NbHandle<'_>, ExtError> {
        self.sh.seg_nb(
            "put_nb_bulk_from_segment",
            SegOp::PutInPlace,
            rank,
            offset,
            local_offset,
            len,
        )
    }

    /// Blocking form of [`Extended::put_nb_from_segment`]. Since it returns only once the
    /// target has the bytes, they are sent from the segment in place (no copy at all).
    pub fn put_from_segment(
        &self,
        rank: u32,
        offset: u64,
        local_offset: u64,
        len: u64,
    ) -> Result<(), ExtError> {
        not_in_handler("put_from_segment")?;
        self.sh
            .seg_nb(
                "put_from_segment",
                SegOp::PutInPlace,
                rank,
                offset,
                local_offset,
                len,
            )?
            .wait()
    }

    /// Explicit-handle get of `len` bytes from (`rank`, `offset`) into this rank's segment at
    /// `local_offset`: the reply lands there directly (no copy).
    pub fn get_nb_to_segment(
        &self,
        local_offset: u64,
        rank: u32,
        offset: u64,
        len: u64,
    ) -> Result<NbHandle<'_>, ExtError> {
        self.sh.seg_nb(
            "get_nb_to_segment",
            SegOp::Get,
            rank,
            offset,
            local_offset,
            len,
        )
    }

    /// Blocking form of [`Extended::get_nb_to_segment`].
    pub fn get_to_segment(
        &self,
        local_offset: u64,
        rank: u32,
        offset: u64,
        len: u64,
    ) -> Result<(), ExtError> {
        not_in_handler("get_to_segment")?;
        self.sh
            .seg_nb(
                "get_to_segment",
                SegOp::Get,
                rank,
                offset,
                local_offset,
                len,
            )?
            .wait()
    }

    /// Test hook: a blocking put to another rank that skips the initiator's range check, so
    /// that the target's own bounds enforcement (the list entry, `NI_SEGV`) can be exercised.
    /// Not for applications.
    #[doc(hidden)]
    pub fn put_unchecked_for_tests(
        &self,
        rank: u32,
        offset: u64,
        src: &[u8],
    ) -> Result<(), ExtError> {
        let call = "put_unchecked_for_tests";
        self.sh.check_remote(call, rank, 0, 0)?;
        if rank == self.sh.rank {
            return Err(ExtError::BadRank {
                call,
                rank,
                size: self.sh.size,
            });
        }
        self.sh.put_nb_raw(call, rank, offset, src)?.wait()
    }

    /// Test hook: the get counterpart of [`Extended::put_unchecked_for_tests`].
    #[doc(hidden)]
    pub fn get_unchecked_for_tests(
        &self,
        dest: &mut [u8],
        rank: u32,
        offset: u64,
    ) -> Result<(), ExtError> {
        let call = "get_unchecked_for_tests";
        self.sh.check_remote(call, rank, 0, 0)?;
        if rank == self.sh.rank {
            return Err(ExtError::BadRank {
                call,
                rank,
                size: self.sh.size,
            });
        }
        self.sh.get_nb_raw(call, dest, rank, offset)?.wait()
    }

    /// Waits for every handle; returns the first error after all have completed.
    pub fn wait_all(&self, handles: Vec<NbHandle<'_>>) -> Result<(), ExtError> {
        let mut first = Ok(());
        for h in handles {
            let r = h.wait();
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Polls once and completes every handle that is done; returns `Ok(true)` if all are.
    /// Completed handles are removed from `handles`; an error is reported after removal.
    pub fn try_wait_all(&self, handles: &mut Vec<NbHandle<'_>>) -> Result<bool, ExtError> {
        self.poll()?;
        let r = reap(handles);
        r.map(|_| handles.is_empty())
    }

    /// Waits until at least one handle is complete (or `handles` is empty), completes and
    /// removes every complete one, and returns how many were removed (or the first error
    /// among them).
    pub fn wait_some(&self, handles: &mut Vec<NbHandle<'_>>) -> Result<usize, ExtError> {
        if handles.is_empty() {
            return Ok(0);
        }
        loop {
            let n_before = handles.len();
            reap(handles)?;
            if handles.len() < n_before {
                return Ok(n_before - handles.len());
            }
            let hs = &*handles;
            self.sh
                .wait_until("wait_some", None, |e, _| Ok(hs.iter().any(|h| h.ready(e))))?;
            // Access regions complete through their syncs, which `ready` cannot run.
            for h in handles.iter_mut() {
                if matches!(h.kind, Kind::Group(_)) {
                    h.try_wait()?;
                }
            }
        }
    }
}

/// Completes and removes the handles that are done; the first error after all removals.
fn reap(handles: &mut Vec<NbHandle<'_>>) -> Result<(), ExtError> {
    let mut first = Ok(());
    let mut i = 0;
    while i < handles.len() {
        let r = match &handles[i].kind {
            Kind::Group(_) => None,
            _ => handles[i].finish(),
        };
        let done = matches!(handles[i].kind, Kind::Done);
        if let Some(Err(e)) = r {
            if first.is_ok() {
                first = Err(e);
            }
        }
        if done {
            let _completed = handles.swap_remove(i);
        } else {
            i += 1;
        }
    }
    first
}

/// Blocking calls are refused inside AM handlers on every path — including the direct copies to
/// node peers, which would not need to wait — so that a program behaves the same whatever the
/// placement of its ranks.
pub(crate) fn not_in_handler(call: &'static str) -> Result<(), ExtError> {
    if rgasnet::in_handler() {
        return Err(ExtError::InHandler { call });
    }
    Ok(())
}
