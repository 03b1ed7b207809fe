//! Implicit-handle operations: the per-thread [`Nbi`] context with `sync_nbi_*`, and access
//! regions ([`AccessRegion`]) whose operations end up behind one [`NbHandle`].
//!
//! Completion is tracked with counting events, not per-operation events: every context owns a
//! counter set — one counting event for puts and one for gets, with memory descriptors that
//! count on them (ACKs on the put counter, REPLYs on the get counter): one for puts from
//! anywhere in memory (whose bytes go straight from the caller's buffer into the message,
//! `Ni::put_from`; the descriptor only counts), a landing buffer, and the own segment. A sync waits until `success + failure` reaches the
//! number of operations issued. Counter sets are pooled and reused once quiet.
//!
//! A get's reply lands in the context's landing buffer (or a buffer of its own when large) and
//! is copied into the destination at the next `sync_nbi_gets`; the destination stays borrowed
//! by the context until then. When the landing buffer is full, the context first syncs the
//! gets it already issued. At most [`NBI_WINDOW`] network operations and [`NBI_WINDOW_BYTES`]
//! bytes of each kind are in flight per context; past it the caller makes progress until
//! enough complete (never fails).
//!
//! The byte bound matters for floods of large operations: the transport has room for only
//! about 4 MB per peer in flight, so an operation issued beyond that is copied into a queued
//! message while nothing receives the acknowledgements that would let the queue drain (an
//! issuing call transmits but does not receive). Thirty-two queued 1 MiB puts serialised the
//! copies and the wire and halved the bandwidth; waiting in the window instead keeps both busy.

use std::collections::VecDeque;

use rgasnet_portals::engine::{CtHandle, GetArgs, MdHandle, MdSpec, PutArgs};
use rgasnet_portals::{AckReq, CtEvent, MdOptions, Region};
use rgasnet_portals::{AnyNi, EngineView};

use crate::error::ExtError;
use crate::explicit::{check_val, remote, NbHandle};
use crate::ext::{lock, Extended, Shared, GET_CHUNK, PUT_CHUNK, SEG_PUT_CHUNK};
use rgasnet_portals::pool::RegionPool;

/// Network operations of one kind in flight per context.
pub const NBI_WINDOW: u64 = 32;
/// Bytes of operations of one kind in flight per context (a larger single operation is
/// still issued, alone). About the transport's per-peer window: more would only queue.
pub const NBI_WINDOW_BYTES: u64 = 4 << 20;
/// Bytes of a context's landing buffer; larger gets land in a buffer of their own.
const NBI_LANDING: usize = 1 << 20;
/// Bytes of own-buffer get landings a context keeps before it syncs its gets.
const NBI_DYNAMIC_MAX: usize = 64 << 20;

/// The counting events and descriptors of one implicit-handle context.
pub(crate) struct CounterSet {
    ct_put: CtHandle,
    ct_get: CtHandle,
    md_put: MdHandle,
    md_seg_put: MdHandle,
    md_get: MdHandle,
    md_seg_get: MdHandle,
    landing: Region,
    /// Landings of gets larger than `landing`, bound to `ct_get` and kept for reuse (a fresh
    /// mapping per get faulted its pages in one by one: see `rgasnet_portals::pool`).
    dynamic: RegionPool<MdHandle>,
}

impl CounterSet {
    fn new(ni: &AnyNi, segment: &Region) -> Result<CounterSet, rgasnet_portals::PtlError> {
        let ct_put = ni.ct_alloc()?;
        let ct_get = ni.ct_alloc()?;
        let bind = |region: &Region, ct, opt| {
            ni.md_bind(MdSpec {
                region: region.clone(),
                offset: 0,
                length: region.len() as u64,
                options: MdOptions::EVENT_SEND_DISABLE | opt,
                eq: None,
                ct: Some(ct),
            })
        };
        // Never read or written (puts carry their bytes, `put_from`): it gives the put
        // descriptor the length of the largest chunk, which bounds what one put may carry.
        let put_span = Region::new(PUT_CHUNK);
        let landing = rgasnet::buffer_region(NBI_LANDING);
        Ok(CounterSet {
            md_put: bind(&put_span, ct_put, MdOptions::EVENT_CT_ACK)?,
            // Sent from the segment in place (no copy into the message): the caller keeps
            // the bytes unchanged until the sync (`put_nbi_from_segment`'s contract), which
            // waits for every ACK.
            md_seg_put: bind(
                segment,
                ct_put,
                MdOptions::EVENT_CT_ACK | MdOptions::IN_PLACE,
            )?,
            md_get: bind(&landing, ct_get, MdOptions::EVENT_CT_REPLY)?,
            md_seg_get: bind(segment, ct_get, MdOptions::EVENT_CT_REPLY)?,
            ct_put,
            ct_get,
            landing,
            dynamic: RegionPool::new(),
        })
    }

    /// A landing for a get of `len` bytes beyond `landing`: a kept one, or a new one bound to
    /// `ct_get`.
    fn dynamic_landing(
        &self,
        ni: &AnyNi,
        len: usize,
    ) -> Result<(Region, MdHandle), rgasnet_portals::PtlError> {
        self.dynamic.take_or_make(len, |cap| {
            let region = rgasnet::buffer_region(cap);
            let md = ni.md_bind(MdSpec {
                region: region.clone(),
                offset: 0,
                length: region.len() as u64,
                options: MdOptions::EVENT_SEND_DISABLE | MdOptions::EVENT_CT_REPLY,
                eq: None,
                ct: Some(self.ct_get),
            })?;
            Ok((region, md))
        })
    }
}

/// Issued/completed accounting of one counter.
#[derive(Default)]
struct Track {
    issued: u64,
    /// `success + failure` last read.
    done: u64,
    /// Failures already reported.
    failures_seen: u64,
    /// Bytes issued so far.
    bytes: u64,
    /// `bytes` after each operation from the `retired`-th on, in issue order.
    ends: VecDeque<u64>,
    /// Operations dropped from `ends` (known complete).
    retired: u64,
    /// `bytes` after the last retired operation.
    retired_bytes: u64,
}

impl Track {
    /// Records one issued operation of `len` bytes.
    fn issue(&mut self, len: u64) {
        self.issued += 1;
        self.bytes += len;
        self.ends.push_back(self.bytes);
    }

    /// Whether an operation of `len` bytes may be issued once `done` have completed.
    /// Completions are counted, not identified: the bytes in flight are estimated as if
    /// operations completed in issue order (exact for one peer, whose transport is in order).
    fn admits(&self, done: u64, len: u64) -> bool {
        let n = self.issued.saturating_sub(done);
        if n == 0 {
            return true;
        }
        if n >= NBI_WINDOW {
            return false;
        }
        let end_done = match done.checked_sub(self.retired + 1) {
            None => self.retired_bytes,
            Some(i) => usize::try_from(i)
                .ok()
                .and_then(|i| self.ends.get(i).copied())
                .unwrap_or(self.bytes),
        };
        self.bytes - end_done + len <= NBI_WINDOW_BYTES
    }

    /// Forgets the byte ends of operations known complete.
    fn retire(&mut self) {
        while self.retired < self.done {
            match self.ends.pop_front() {
                Some(e) => self.retired_bytes = e,
                None => break,
            }
            self.retired += 1;
        }
    }
}

enum GetSrc {
    Landing(usize),
    Dynamic { region: Region, md: MdHandle },
}

struct PendingGet<'a> {
    dest: &'a mut [u8],
    src: GetSrc,
}

/// The implicit-handle state behind [`Nbi`] and [`AccessRegion`].
pub(crate) struct Group<'a> {
    sh: &'a Shared,
    set: Option<CounterSet>,
    puts: Track,
    gets: Track,
    landing_used: usize,
    dynamic_bytes: usize,
    pending: Vec<PendingGet<'a>>,
    /// Memsets (explicit cells) counted as puts: (cell, rank).
    memsets: Vec<(u32, u32)>,
}

fn ct_total(v: CtEvent) -> u64 {
    v.success.wrapping_add(v.failure)
}

impl<'a> Group<'a> {
    fn new(sh: &'a Shared) -> Self {
        Group {
            sh,
            set: None,
            puts: Track::default(),
            gets: Track::default(),
            landing_used: 0,
            dynamic_bytes: 0,
            pending: Vec::new(),
            memsets: Vec::new(),
        }
    }

    fn set(&mut self, call: &'static str) -> Result<&CounterSet, ExtError> {
        match &mut self.set {
            Some(s) => Ok(s),
            slot @ None => {
                let s = match lock(&self.sh.sets).pop() {
                    Some(s) => s,
                    None => CounterSet::new(&self.sh.ni, &self.sh.segment)
                        .map_err(ExtError::portals(call))?,
                };
                Ok(slot.insert(s))
            }
        }
    }

    /// Waits until an operation of `len` bytes fits in the window of its kind: fewer than
    /// [`NBI_WINDOW`] operations and at most [`NBI_WINDOW_BYTES`] bytes in flight with it.
    fn window(&mut self, call: &'static str, gets: bool, len: u64) -> Result<(), ExtError> {
        let t = if gets { &self.gets } else { &self.puts };
        if t.admits(t.done, len) {
            return Ok(());
        }
        let Some(set) = &self.set else {
            return Ok(());
        };
        let ct = if gets { set.ct_get } else { set.ct_put };
        let mut seen = t.done;
        self.sh.wait_until(call, None, |e, _| {
            seen = ct_total(e.ct_get(ct).map_err(ExtError::portals(call))?);
            Ok(t.admits(seen, len))
        })?;
        let t = if gets { &mut self.gets } else { &mut self.puts };
        t.done = seen;
        t.retire();
        Ok(())
    }

    pub(crate) fn put(
        &mut self,
        call: &'static str,
        rank: u32,
        offset: u64,
        src: &[u8],
    ) -> Result<(), ExtError> {
        self.sh.check_remote(call, rank, offset, src.len())?;
        if let Some(seg) = self.sh.local_segment(rank) {
            return self
                .sh
                .local_result(call, rank, seg.write(offset as usize, src));
        }
        let n = src.len().div_ceil(PUT_CHUNK).max(1);
        for i in 0..n {
            let lo = i * PUT_CHUNK;
            let chunk = &src[lo..src.len().min(lo + PUT_CHUNK)];
            self.window(call, false, chunk.len() as u64)?;
            let set = self.set(call)?;
            // The chunk goes from `src` into the message (`put_from`): the put MD, the size
            // of a chunk, only reports and counts, so the bytes are copied once, not twice.
            let args = PutArgs {
                md: set.md_put,
                local_offset: 0,
                length: chunk.len() as u64,
                ack_req: AckReq::CtAck,
                remote: remote(rank, offset + lo as u64),
                user_ptr: 0,
                hdr_data: 0,
            };
            self.sh
                .ni
                .put_from(&args, chunk)
                .map_err(ExtError::portals(call))?;
            self.puts.issue(chunk.len() as u64);
        }
        Ok(())
    }

    pub(crate) fn put_from_segment(
        &mut self,
        call: &'static str,
        rank: u32,
        offset: u64,
        local_offset: u64,
        len: u64,
    ) -> Result<(), ExtError> {
        self.sh.check_local(call, local_offset, len)?;
        self.sh.check_remote(call, rank, offset, len as usize)?;
        if let Some(seg) = self.sh.local_segment(rank) {
            let r = seg.copy_from(
                offset as usize,
                &self.sh.segment,
                local_offset as usize,
                len as usize,
            );
            return self.sh.local_result(call, rank, r);
        }
        let step = SEG_PUT_CHUNK as u64;
        let n = len.div_ceil(step).max(1);
        for i in 0..n {
            let lo = i * step;
            let chunk = (len - lo).min(step);
            self.window(call, false, chunk)?;
            let set = self.set(call)?;
            let args = PutArgs {
                md: set.md_seg_put,
                local_offset: local_offset + lo,
                length: chunk,
                ack_req: AckReq::CtAck,
                remote: remote(rank, offset + lo),
                user_ptr: 0,
                hdr_data: 0,
            };
            self.sh.ni.put(&args).map_err(ExtError::portals(call))?;
            self.puts.issue(chunk);
        }
        Ok(())
    }

    fn issue_gets(
        &mut self,
        call: &'static str,
        md: impl Fn(&CounterSet) -> MdHandle,
        base: u64,
        len: u64,
        rank: u32,
        offset: u64,
    ) -> Result<(), ExtError> {
        let n = len.div_ceil(GET_CHUNK as u64).max(1);
        for i in 0..n {
            let lo = i * GET_CHUNK as u64;
            let chunk = (len - lo).min(GET_CHUNK as u64);
            self.window(call, true, chunk)?;
            let set = self.set(call)?;
            let args = GetArgs {
                md: md(set),
                local_offset: base + lo,
                length: chunk,
                remote: remote(rank, offset + lo),
                user_ptr: 0,
            };
            self.sh.ni.get(&args).map_err(ExtError::portals(call))?;
            self.gets.issue(chunk);
        }
        Ok(())
    }

    pub(crate) fn get(
        &mut self,
        call: &'static str,
        dest: &'a mut [u8],
        rank: u32,
        offset: u64,
    ) -> Result<(), ExtError> {
        self.sh.check_remote(call, rank, offset, dest.len())?;
        if let Some(seg) = self.sh.local_segment(rank) {
            return self
                .sh
                .local_result(call, rank, seg.read(offset as usize, dest));
        }
        let len = dest.len();
        let src = if len <= NBI_LANDING {
            if self.landing_used + len > NBI_LANDING {
                self.sync_gets(call)?;
            }
            let at = self.landing_used;
            self.landing_used += len.next_multiple_of(8);
            self.issue_gets(call, |s| s.md_get, at as u64, len as u64, rank, offset)?;
            GetSrc::Landing(at)
        } else {
            if self.dynamic_bytes > 0 && self.dynamic_bytes + len > NBI_DYNAMIC_MAX {
                self.sync_gets(call)?;
            }
            let ni = &self.sh.ni;
            let (region, md) = self
                .set(call)?
                .dynamic_landing(ni, len)
                .map_err(ExtError::portals(call))?;
            // The landing's own size (a pooled one is rounded up to its class), so that the
            // bound holds the memory the landings take.
            self.dynamic_bytes += region.len();
            let r = self.issue_gets(call, |_| md, 0, len as u64, rank, offset);
            // Registered before the result is looked at, so that a sync releases it.
            self.pending.push(PendingGet {
                dest,
                src: GetSrc::Dynamic { region, md },
            });
            return r;
        };
        self.pending.push(PendingGet { dest, src });
        Ok(())
    }

    pub(crate) fn get_to_segment(
        &mut self,
        call: &'static str,
        local_offset: u64,
        rank: u32,
        offset: u64,
        len: u64,
    ) -> Result<(), ExtError> {
        self.sh.check_local(call, local_offset, len)?;
        self.sh.check_remote(call, rank, offset, len as usize)?;
        if let Some(seg) = self.sh.local_segment(rank) {
            let r = self.sh.segment.copy_from(
                local_offset as usize,
                seg,
                offset as usize,
                len as usize,
            );
            return self.sh.local_result(call, rank, r);
        }
        self.issue_gets(call, |s| s.md_seg_get, local_offset, len, rank, offset)
    }

    pub(crate) fn memset(
        &mut self,
        call: &'static str,
        rank: u32,
        offset: u64,
        byte: u8,
        len: u64,
    ) -> Result<(), ExtError> {
        if let Some(cell) = self.sh.memset_issue(call, rank, offset, byte, len)? {
            self.memsets.push((cell, rank));
        }
        Ok(())
    }

    /// Whether every operation issued so far has completed (under the engine lock).
    pub(crate) fn ready(&self, e: &mut dyn EngineView) -> bool {
        self.puts_ready(e) && self.gets_ready(e)
    }

    fn puts_ready(&self, e: &mut dyn EngineView) -> bool {
        let memsets = self
            .memsets
            .iter()
            .all(|(c, _)| self.sh.core.ops.is_done(*c));
        memsets
            && match &self.set {
                None => true,
                Some(s) => e
                    .ct_get(s.ct_put)
                    .is_ok_and(|v| ct_total(v) >= self.puts.issued),
            }
    }

    fn gets_ready(&self, e: &mut dyn EngineView) -> bool {
        match &self.set {
            None => true,
            Some(s) => e
                .ct_get(s.ct_get)
                .is_ok_and(|v| ct_total(v) >= self.gets.issued),
        }
    }

    /// Reads a counter (engine lock) and reports failures not reported before.
    fn settle(&mut self, call: &'static str, gets: bool) -> Result<(), ExtError> {
        let Some(set) = &self.set else {
            return Ok(());
        };
        let v = self
            .sh
            .ni
            .ct_get(if gets { set.ct_get } else { set.ct_put })
            .map_err(ExtError::portals(call))?;
        let t = if gets { &mut self.gets } else { &mut self.puts };
        t.done = ct_total(v);
        t.retire();
        if v.failure > t.failures_seen {
            let failures = v.failure - t.failures_seen;
            t.failures_seen = v.failure;
            return Err(ExtError::NbiFailed { call, failures });
        }
        Ok(())
    }

    /// Once the puts are known complete: finishes the memsets and reports failures.
    fn finish_puts(&mut self, call: &'static str) -> Result<(), ExtError> {
        let mut first = Ok(());
        for (cell, rank) in self.memsets.drain(..) {
            if let Some(f) = self.sh.core.ops.finish(cell) {
                let r = Shared::fail_result(call, rank, f.fail);
                if first.is_ok() {
                    first = r;
                }
            }
        }
        let r = self.settle(call, false);
        first.and(r)
    }

    /// Once the gets are known complete: copies every landing into its destination.
    fn finish_gets(&mut self, call: &'static str) -> Result<(), ExtError> {
        let r = self.settle(call, true);
        let landing = self.set.as_ref().map(|s| s.landing.clone());
        for p in self.pending.drain(..) {
            match p.src {
                GetSrc::Landing(at) => {
                    if let Some(l) = &landing {
                        let _ = l.read(at, p.dest);
                    }
                }
                GetSrc::Dynamic { region, md } => {
                    let _ = region.read(0, p.dest);
                    // Its operations completed, so the descriptor is not in use: kept for
                    // the next large get, or released.
                    let back = match &self.set {
                        Some(s) => s.dynamic.give(region, md),
                        None => Some((region, md)),
                    };
                    if let Some((_, md)) = back {
                        let _ = self.sh.ni.md_release(md);
                    }
                }
            }
        }
        self.landing_used = 0;
        self.dynamic_bytes = 0;
        r
    }

    pub(crate) fn sync_puts(&mut self, call: &'static str) -> Result<(), ExtError> {
        let me = &*self;
        self.sh
            .wait_until(call, None, |e, _| Ok(me.puts_ready(e)))?;
        self.finish_puts(call)
    }

    pub(crate) fn sync_gets(&mut self, call: &'static str) -> Result<(), ExtError> {
        let me = &*self;
        self.sh
            .wait_until(call, None, |e, _| Ok(me.gets_ready(e)))?;
        self.finish_gets(call)
    }

    pub(crate) fn sync_all(&mut self) -> Result<(), ExtError> {
        let call = "sync_nbi_all";
        let me = &*self;
        self.sh.wait_until(call, None, |e, _| Ok(me.ready(e)))?;
        let a = self.finish_puts(call);
        let b = self.finish_gets(call);
        a.and(b)
    }

    /// One round of progress, then completes `puts` / `gets` if they are done.
    fn try_sync(&mut self, call: &'static str, puts: bool, gets: bool) -> Result<bool, ExtError> {
        let mut ready = false;
        let me = &*self;
        self.sh
            .wait_until(call, Some(std::time::Duration::ZERO), |e, _| {
                ready = (!puts || me.puts_ready(e)) && (!gets || me.gets_ready(e));
                Ok(ready)
            })?;
        if !ready {
            return Ok(false);
        }
        let a = if puts { self.finish_puts(call) } else { Ok(()) };
        let b = if gets { self.finish_gets(call) } else { Ok(()) };
        a.and(b).map(|()| true)
    }

    pub(crate) fn try_sync_all(&mut self) -> Result<bool, ExtError> {
        self.try_sync("try_sync_nbi_all", true, true)
    }
}

impl Drop for Group<'_> {
    fn drop(&mut self) {
        if self.set.is_none() && self.memsets.is_empty() && self.pending.is_empty() {
            return;
        }
        // Dropping syncs (the destinations are still borrowed, so their data is delivered).
        let r = self.sync_all();
        let quiet = !matches!(
            r,
            Err(ExtError::InHandler { .. } | ExtError::Portals { .. } | ExtError::Am { .. })
        );
        for (cell, _) in self.memsets.drain(..) {
            let _ = self.sh.core.ops.orphan(cell);
        }
        if let Some(set) = self.set.take() {
            // Reused only when nothing is in flight on it; counters restart from zero.
            if quiet
                && self.sh.ni.ct_set(set.ct_put, CtEvent::default()).is_ok()
                && self.sh.ni.ct_set(set.ct_get, CtEvent::default()).is_ok()
            {
                lock(&self.sh.sets).push(set);
            }
        }
    }
}

/// The implicit-handle (`nbi`) context of one thread: operations issued through it complete
/// at its syncs. Create one per thread with [`Extended::nbi`]; get destinations stay borrowed
/// by the context until `sync_nbi_gets`/`sync_nbi_all`. Dropping the context syncs it.
///
/// Completion guarantees: a put's source is copied before `put_nbi` returns (reusable at
/// once); `sync_nbi_puts` gives remote completion; `sync_nbi_gets` fills the destinations.
pub struct Nbi<'a> {
    g: Group<'a>,
}

/// An access region: implicit-handle operations collected behind one explicit handle,
/// returned by [`AccessRegion::end`].
pub struct AccessRegion<'a> {
    g: Group<'a>,
}

macro_rules! nbi_ops {
    ($t:ident) => {
        impl<'a> $t<'a> {
            /// Implicit-handle put of `src` to (`rank`, `offset`). Bounds are checked here
            /// (typed error, nothing sent); the source may be reused on return.
            pub fn put_nbi(&mut self, rank: u32, offset: u64, src: &[u8]) -> Result<(), ExtError> {
                self.g.put("put_nbi", rank, offset, src)
            }

            /// Implicit-handle put of `len` bytes at `local_offset` of this rank's segment
            /// (sent straight from the segment, no copy). The segment bytes must not change
            /// before the sync.
            pub fn put_nbi_from_segment(
                &mut self,
                rank: u32,
                offset: u64,
                local_offset: u64,
                len: u64,
            ) -> Result<(), ExtError> {
                self.g
                    .put_from_segment("put_nbi_from_segment", rank, offset, local_offset, len)
            }

            /// Implicit-handle put of the low `nbytes` (1–8) bytes of `value`, little-endian.
            pub fn put_nbi_val(
                &mut self,
                rank: u32,
                offset: u64,
                value: u64,
                nbytes: usize,
            ) -> Result<(), ExtError> {
                check_val("put_nbi_val", nbytes)?;
                self.g
                    .put("put_nbi_val", rank, offset, &value.to_le_bytes()[..nbytes])
            }

            /// Implicit-handle get into `dest` (borrowed until the gets are synced).
            pub fn get_nbi(
                &mut self,
                dest: &'a mut [u8],
                rank: u32,
                offset: u64,
            ) -> Result<(), ExtError> {
                self.g.get("get_nbi", dest, rank, offset)
            }

            /// Implicit-handle get of `len` bytes into this rank's segment at `local_offset`
            /// (the reply lands there directly).
            pub fn get_nbi_to_segment(
                &mut self,
                local_offset: u64,
                rank: u32,
                offset: u64,
                len: u64,
            ) -> Result<(), ExtError> {
                self.g
                    .get_to_segment("get_nbi_to_segment", local_offset, rank, offset, len)
            }

            /// Implicit-handle memset of `len` bytes at (`rank`, `offset`) to `byte`; counted
            /// with the puts.
            pub fn memset_nbi(
                &mut self,
                rank: u32,
                offset: u64,
                byte: u8,
                len: u64,
            ) -> Result<(), ExtError> {
                self.g.memset("memset_nbi", rank, offset, byte, len)
            }
        }
    };
}

nbi_ops!(Nbi);
nbi_ops!(AccessRegion);

impl<'a> Nbi<'a> {
    /// Waits for every put (and memset) issued through this context.
    pub fn sync_nbi_puts(&mut self) -> Result<(), ExtError> {
        crate::explicit::not_in_handler("sync_nbi_puts")?;
        self.g.sync_puts("sync_nbi_puts")
    }

    /// Waits for every get issued through this context and fills their destinations.
    pub fn sync_nbi_gets(&mut self) -> Result<(), ExtError> {
        crate::explicit::not_in_handler("sync_nbi_gets")?;
        self.g.sync_gets("sync_nbi_gets")
    }

    /// Both syncs; the first error after both.
    pub fn sync_nbi_all(&mut self) -> Result<(), ExtError> {
        crate::explicit::not_in_handler("sync_nbi_all")?;
        self.g.sync_all()
    }

    /// Polls once; `Ok(true)` if every put and memset is complete.
    pub fn try_sync_nbi_puts(&mut self) -> Result<bool, ExtError> {
        self.g.try_sync("try_sync_nbi_puts", true, false)
    }

    /// Polls once; `Ok(true)` if every get is complete (destinations filled).
    pub fn try_sync_nbi_gets(&mut self) -> Result<bool, ExtError> {
        self.g.try_sync("try_sync_nbi_gets", false, true)
    }

    /// Polls once; `Ok(true)` if everything is complete.
    pub fn try_sync_nbi_all(&mut self) -> Result<bool, ExtError> {
        self.g.try_sync("try_sync_nbi_all", true, true)
    }
}

impl<'a> AccessRegion<'a> {
    /// Ends the region: one handle covering every operation issued in it.
    pub fn end(self) -> NbHandle<'a> {
        let sh = self.g.sh;
        NbHandle::group(sh, self.g)
    }
}

impl Extended {
    /// A new implicit-handle context (GASNet's per-thread nbi state). Cheap: its counters are
    /// taken from a pool on first use.
    pub fn nbi(&self) -> Nbi<'_> {
        Nbi {
            g: Group::new(&self.sh),
        }
    }

    /// Begins an access region: the implicit-handle operations issued on it complete together
    /// behind the handle [`AccessRegion::end`] returns.
    pub fn begin_access_region(&self) -> AccessRegion<'_> {
        AccessRegion {
            g: Group::new(&self.sh),
        }
    }
}
