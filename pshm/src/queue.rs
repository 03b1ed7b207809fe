//! Lock-free multi-producer single-consumer ring of active-message records in shared memory,
//! and the futex calls that sleeping waiters use.
//!
//! # Design
//!
//! The ring is `cap` cells of 64 bytes (`cap` a power of two) plus two counters on their own
//! cache lines: `tail`, the next free position, advanced by producers with a CAS, and `head`,
//! the first position the consumer has not released, written only by the consumer. Positions
//! are 64-bit and never wrap in practice (2^62 cells: the two top bits of `tail` are flags);
//! position `p` lives in cell `p % cap`.
//!
//! A record (see `message`) covers `n` consecutive cells. A producer reserves `[t, t + n)` by
//! moving `tail` from `t` to `t + n`, writes the record, and commits it by storing `t + 1` into
//! the record's first word, the *marker*. A record never wraps around the end of the ring: if
//! it would, the producer also reserves the cells up to the end and commits them as a *pad*
//! record that the consumer skips, so every payload is contiguous and can be lent to the
//! handler in place, without a copy. Small messages (a Short with up to 8 arguments, or up to
//! 32 bytes of Medium payload with no arguments) are one cell, i.e. one cache line.
//!
//! # Why rings, and the cost they set
//!
//! A round trip through two rings moves four cache lines between the cores: each side writes
//! a cell that the other was polling, so the line must come back to the writer before the
//! reader can fetch it. Measured on this project's 2-core VM with two bare processes: 280–300
//! ns against 120–140 ns for a flag ping-pong on one line, i.e. about 2.2×, with no software at
//! all (GASNet's smp-conduit measures the same ratio). A one-line mailbox per pair that carries
//! the request and, in place, its reply matches the flag only if the reply is written within a
//! few ns of reading the request; with 20–40 ns of handler in between, the polling peer pulls
//! the line back and it costs 220–360 ns. Built into the conduit, it did not move the AM round
//! trip and made ReqReq slower (an extra completion write), so the rings stay.
//!
//! # Invariants
//!
//! 1. `head <= tail` and `tail - head <= cap`: producers only reserve cells the consumer has
//!    released, so cells in `[head, tail)` are never handed out twice.
//! 2. Outside the records in `[head, tail)`, the first word of cell `i` is 0 or a *stale
//!    marker* `p + 1` of an earlier record that started at position `p ≡ i (mod cap)`, so
//!    `p + 1 <= head + 1 - cap` for the position `head` that will next use the cell. (Memory
//!    starts zeroed; a released record's first cell keeps its marker, and the consumer zeroes
//!    the first word of every other cell of a released record, which payload overwrote.)
//!    Hence the word the consumer reads at its head is `head + 1` (committed), 0 or stale (not
//!    committed yet); anything else is corruption. A one-cell message is thus released
//!    without writing to its cache line, which would cost a coherence round trip.
//! 3. Between reservation and commit, the cells of a record are written only by the producer
//!    that reserved them; between commit and release, they are read only by the consumer.
//!
//! # Sleeping receivers
//!
//! Bit 63 of `tail` ([`SLEEP_BIT`]) is the receiver's "I am going to sleep" flag (positions
//! never reach 2^62). Putting it in the word every producer already CASes makes the
//! announcement and the producers' reservations totally ordered without any fence on the
//! producer side: either the receiver's `fetch_or` sees a reservation it has not consumed
//! (and does not sleep), or a producer's CAS sees the bit, clears it, and rings the doorbell
//! after its commit. See `wait` for the doorbell itself.
//!
//! # Closing
//!
//! A receiver that ends its program closes its rings: it sets bit 62 of `tail` ([`CLOSED_BIT`])
//! with a `fetch_or`, whose result is the last position any producer reserved. A producer that
//! sees the bit fails with `SendError::Closed` instead of reserving, so nothing can arrive after
//! the receiver's last look; the receiver runs the handlers of everything up to that position
//! (waiting for reservations still being written) before it goes. Again one word orders the two
//! sides: a reservation's CAS either precedes the `fetch_or` (and is in the range it returns) or
//! fails on the changed word and sees the bit.
//!
//! # Orderings
//!
//! - Producer, `tail` CAS: `Acquire` on success, pairing with the receiver's `Release`
//!   `fetch_or` of the sleep bit, so a producer that sees the bit also sees the doorbell's
//!   `SLEEPING` that the receiver stored before it. Positions themselves publish no data.
//! - Producer, `head` load: `Acquire`, pairing with the consumer's `Release` store of `head`,
//!   so the consumer's reads (and zeroing) of released cells happen before the producer
//!   overwrites them. The process-local cache of `head` is read `Acquire` and updated
//!   `AcqRel` so the same chain holds for other threads of the process that use the cache.
//! - Producer, marker store: `Release`, publishing the record (header, args, payload and, for
//!   a Long, the data the sender wrote into the segment before).
//! - Consumer, marker load: `Acquire`, pairing with the producer's marker store, so the whole
//!   record is visible.
//! - Consumer, sleep-bit `fetch_or`: `AcqRel` (`Release` above; `Acquire` is harmless and
//!   keeps the read of the tail ordered after the receiver's earlier checks). Clearing the bit
//!   after waking is `Relaxed`: it only avoids a needless wake-up syscall.
//! - Consumer, `head` store: `Release` (see above); its zeroing stores are `Relaxed` and are
//!   ordered before that release.
//! - Header and argument words are `Relaxed` atomics: the marker orders them.

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{RecvError, SendError};
use crate::segment::Mapping;

/// Bit of `tail` that says the receiver is going to sleep (see the module docs).
pub(crate) const SLEEP_BIT: u64 = 1 << 63;

/// Bit of `tail` that says the receiver closed the ring: it ended its program, and takes in
/// only what was reserved before (see the module docs).
pub(crate) const CLOSED_BIT: u64 = 1 << 62;

/// The position part of `tail`.
const POSITION: u64 = !(SLEEP_BIT | CLOSED_BIT);
use crate::layout::{CELL_BYTES, CELL_WORDS};
use crate::message::{
    cells_for, pack_meta, pack_sizes, payload_offset, unpack_meta, unpack_sizes, AmCategory,
    AmMessage, Body, HEADER_BYTES, KIND_MESSAGE, KIND_PAD, LONG_CARRIED_CODE, MAX_ARGS, MAX_MEDIUM,
};

// The lock that shares a process's consumer side between its threads: part of this module
// (which holds the crate's unsafe code with `segment`), in a file of its own.
#[path = "poll_lock.rs"]
mod poll_lock;
pub use poll_lock::{PollGuard, PollLock};

/// Where one ring lives inside a mapping, located and bounds-checked once, so that building
/// its [`Ring`] view per message costs a few loads instead of re-slicing the mapping (which
/// showed up as a tenth of the instructions of a shared-memory round trip).
pub(crate) struct RingPlace {
    /// Keeps the memory the pointers below point into mapped (never read otherwise).
    _mapping: Arc<Mapping>,
    tail: NonNull<AtomicU64>,
    head: NonNull<AtomicU64>,
    cells: NonNull<AtomicU64>,
    /// Words of the cells (`cap * CELL_WORDS`).
    cell_words: usize,
    name: &'static str,
}

// SAFETY: the pointers point into `_mapping`, which is `Send + Sync` and kept alive by the
// `Arc`; everything is reached through atomics (or the ring protocol's exclusive byte copies),
// as through `Mapping::words` itself.
unsafe impl Send for RingPlace {}
// SAFETY: as above.
unsafe impl Sync for RingPlace {}

impl RingPlace {
    /// Locates the ring whose `tail` and `head` are the words of those indices of `mapping`
    /// and whose cells are the `cell_words` words from index `first`; `None` if any of that
    /// lies outside the mapping.
    pub(crate) fn locate(
        mapping: Arc<Mapping>,
        tail: usize,
        head: usize,
        first: usize,
        cell_words: usize,
        name: &'static str,
    ) -> Option<RingPlace> {
        let words = mapping.words();
        let tail = NonNull::from(words.get(tail)?);
        let head = NonNull::from(words.get(head)?);
        let cells = words.get(first..first.checked_add(cell_words)?)?;
        let cells = NonNull::from(cells.first()?);
        Some(RingPlace {
            tail,
            head,
            cells,
            cell_words,
            name,
            _mapping: mapping,
        })
    }

    /// The ring, for as long as `self` is borrowed.
    #[inline]
    pub(crate) fn ring(&self) -> Ring<'_> {
        // SAFETY: `locate` checked that the pointers and `cell_words` words from `cells` lie
        // inside `_mapping`, which `self` keeps mapped for the borrow's lifetime; the words are
        // initialised AtomicU64s (see `Mapping::words`).
        unsafe {
            Ring {
                tail: self.tail.as_ref(),
                head: self.head.as_ref(),
                cells: std::slice::from_raw_parts(self.cells.as_ptr(), self.cell_words),
                name: self.name,
            }
        }
    }
}

/// A view of one ring inside a mapping.
#[derive(Clone, Copy)]
pub(crate) struct Ring<'a> {
    pub(crate) tail: &'a AtomicU64,
    pub(crate) head: &'a AtomicU64,
    /// `cap * CELL_WORDS` words.
    pub(crate) cells: &'a [AtomicU64],
    /// `"request"` or `"reply"`, for errors.
    pub(crate) name: &'static str,
}

impl<'a> Ring<'a> {
    #[inline]
    fn cap(&self) -> u64 {
        (self.cells.len() / CELL_WORDS) as u64
    }

    #[inline]
    fn word(&self, cell: u64, word: usize) -> &'a AtomicU64 {
        &self.cells[cell as usize * CELL_WORDS + word]
    }

    /// The words of cell `cell` (one bounds check for all of them).
    #[inline]
    fn cell(&self, cell: u64) -> &'a [AtomicU64; CELL_WORDS] {
        let first = cell as usize * CELL_WORDS;
        match self.cells[first..first + CELL_WORDS].try_into() {
            Ok(c) => c,
            // The slice has exactly CELL_WORDS words.
            Err(_) => unreachable!("a cell is CELL_WORDS words"),
        }
    }

    /// Enqueues `msg` from `source`; `cached_head` is the sender process's cache of `head`.
    /// Returns `Full` instead of waiting when there is no room, and `Ok(true)` when the
    /// receiver announced it sleeps, i.e. the caller must ring its doorbell.
    #[inline]
    pub(crate) fn try_enqueue(
        &self,
        cached_head: &AtomicU64,
        source: u32,
        dest: u32,
        msg: &AmMessage<'_>,
    ) -> Result<bool, SendError> {
        let argc = msg.args.len();
        if argc > MAX_ARGS {
            return Err(SendError::TooManyArgs {
                argc,
                max: MAX_ARGS,
            });
        }
        let (len, offset) = match msg.body {
            Body::Short => (0, 0),
            Body::Medium(p) | Body::LongCarried { payload: p, .. } if p.len() > MAX_MEDIUM => {
                return Err(SendError::PayloadTooLarge {
                    len: p.len(),
                    max: MAX_MEDIUM,
                })
            }
            Body::Medium(p) => (p.len() as u32, 0),
            Body::Long { offset, len } => (len, offset),
            Body::LongCarried { offset, payload } => (payload.len() as u32, offset),
        };
        let n = cells_for(argc, msg.body.inline_len()) as u64;
        let (t, pad, wake) = self.reserve(cached_head, n, dest)?;
        let pos = t + pad;
        let mask = self.cap() - 1;
        let cell = self.cell(pos & mask);
        let meta = pack_meta(
            KIND_MESSAGE,
            msg.body.code(),
            msg.handler,
            argc as u8,
            source,
        );
        cell[1].store(meta, Ordering::Relaxed);
        cell[2].store(pack_sizes(n as u32, len), Ordering::Relaxed);
        cell[3].store(offset, Ordering::Relaxed);
        if argc > 0 {
            self.write_args(pos & mask, msg.args);
        }
        if let Body::Medium(p) | Body::LongCarried { payload: p, .. } = msg.body {
            if !p.is_empty() {
                let first = (pos & mask) as usize * CELL_WORDS + payload_offset(argc) / 8;
                copy_in(&self.cells[first..first + p.len().div_ceil(8)], p);
            }
        }
        cell[0].store(pos + 1, Ordering::Release);
        Ok(wake)
    }

    /// Reserves `n` cells (plus a pad before them if they would wrap); returns the first
    /// position, the pad's length (already committed) and whether the receiver sleeps.
    #[inline]
    fn reserve(
        &self,
        cached_head: &AtomicU64,
        n: u64,
        dest: u32,
    ) -> Result<(u64, u64, bool), SendError> {
        let cap = self.cap();
        let mask = cap - 1;
        let (t, pad, wake) = loop {
            let raw = self.tail.load(Ordering::Relaxed);
            if raw & CLOSED_BIT != 0 {
                return Err(SendError::Closed {
                    dest,
                    queue: self.name,
                });
            }
            let t = raw & POSITION;
            let idx = t & mask;
            let pad = if idx + n > cap { cap - idx } else { 0 };
            let end = t + pad + n;
            let head = cached_head.load(Ordering::Acquire);
            if end - head.min(t) > cap {
                match self.refresh_head(cached_head, t, end, dest)? {
                    Refreshed::Room => {}
                    Refreshed::Stale => continue,
                }
            }
            if self
                .tail
                .compare_exchange_weak(raw, end, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
            {
                // The new value has the sleep bit clear: this producer takes on the wake-up.
                break (t, pad, raw & SLEEP_BIT != 0);
            }
        };
        if pad > 0 {
            self.write_pad(t, pad, mask);
        }
        Ok((t, pad, wake))
    }

    /// The cached head said the ring may be full: reads the real one (a cache miss, once per
    /// lap at most while the consumer keeps up).
    #[cold]
    fn refresh_head(
        &self,
        cached_head: &AtomicU64,
        t: u64,
        end: u64,
        dest: u32,
    ) -> Result<Refreshed, SendError> {
        let head = self.head.load(Ordering::Acquire);
        cached_head.fetch_max(head, Ordering::AcqRel);
        if head > t {
            // `t` is stale: the consumer is already past it. Reload.
            std::hint::spin_loop();
            return Ok(Refreshed::Stale);
        }
        if end - head > self.cap() {
            return Err(SendError::Full {
                dest,
                queue: self.name,
            });
        }
        Ok(Refreshed::Room)
    }

    #[cold]
    fn write_pad(&self, t: u64, pad: u64, mask: u64) {
        let cell = self.cell(t & mask);
        cell[1].store(pack_meta(KIND_PAD, 0, 0, 0, 0), Ordering::Relaxed);
        cell[2].store(pack_sizes(pad as u32, 0), Ordering::Relaxed);
        cell[0].store(t + 1, Ordering::Release);
    }

    fn write_args(&self, cell: u64, args: &[u32]) {
        let first = cell as usize * CELL_WORDS + ARGS_WORD;
        let words = &self.cells[first..first + args.len().div_ceil(2)];
        for (w, pair) in words.iter().zip(args.chunks(2)) {
            w.store(pack_arg_pair(pair), Ordering::Relaxed);
        }
    }

    /// Whether a committed record waits at `head`.
    #[inline]
    pub(crate) fn committed_at(&self, head: u64) -> bool {
        self.word(head & (self.cap() - 1), 0)
            .load(Ordering::Acquire)
            == head + 1
    }

    /// The receiver announces it is going to sleep; returns whether the ring is idle (nothing
    /// reserved beyond `head`). If it is not, the receiver must not sleep: a record is
    /// committed or about to be, and its producer may not have seen the bit.
    pub(crate) fn announce_sleep(&self, head: u64) -> bool {
        self.tail.fetch_or(SLEEP_BIT, Ordering::AcqRel) & POSITION == head
    }

    /// The receiver closes the ring (see the module docs); returns the end of what was reserved
    /// before, which the receiver must still take in.
    pub(crate) fn close(&self) -> u64 {
        // AcqRel: in the total order of `tail`'s read-modify-writes, as the producers' CAS;
        // the records themselves are published by their markers.
        self.tail.fetch_or(CLOSED_BIT, Ordering::AcqRel) & POSITION
    }

    /// The receiver is awake again: later producers need not ring.
    pub(crate) fn retract_sleep(&self) {
        self.tail.fetch_and(!SLEEP_BIT, Ordering::Relaxed);
    }

    /// Takes the next message at `*head` (the consumer's local copy of `head`), skipping pads.
    ///
    /// Always inlined: called out of line (as `#[inline]` left it in a caller of another
    /// crate, `queue_floor`), the poll pays a call and the large `Result<Option<Received>>`
    /// returned through memory on every look, which measured 3-8 % of a bare queue round trip
    /// (`queue_floor`, 10 alternating pairs). The conduit's `poll_shm` already inlined it.
    #[inline(always)]
    pub(crate) fn try_dequeue<'c>(
        self,
        head: &'c mut u64,
    ) -> Result<Option<Received<'c>>, RecvError>
    where
        'a: 'c,
    {
        let mask = self.cap() - 1;
        loop {
            let h = *head;
            let idx = h & mask;
            let cell = self.cell(idx);
            let marker = cell[0].load(Ordering::Acquire);
            if marker != h + 1 {
                // Not committed yet: zero or a stale marker (invariant 2).
                let stale = marker
                    .checked_sub(1)
                    .is_some_and(|p| p < h && p & mask == idx);
                if marker == 0 || stale {
                    return Ok(None);
                }
                return Err(self.corrupt(h, Bad::Marker(marker)));
            }
            let (kind, cat, handler, argc, source) = unpack_meta(cell[1].load(Ordering::Relaxed));
            let (n, len) = unpack_sizes(cell[2].load(Ordering::Relaxed));
            let n = u64::from(n);
            if n == 0 || idx + n > mask + 1 {
                return Err(self.corrupt(h, Bad::Cells(n, idx)));
            }
            if kind == KIND_PAD {
                if idx + n != mask + 1 {
                    return Err(self.corrupt(h, Bad::Pad(n)));
                }
                // Only the pad's first cell was written, and its marker may stay (invariant 2).
                *head = h + n;
                self.head.store(*head, Ordering::Release);
                continue;
            }
            let carried = cat == LONG_CARRIED_CODE;
            let category = match (kind, AmCategory::from_code(cat)) {
                (KIND_MESSAGE, Some(c)) => c,
                (KIND_MESSAGE, None) if carried => AmCategory::Long,
                (KIND_MESSAGE, None) => return Err(self.corrupt(h, Bad::Category(cat))),
                _ => return Err(self.corrupt(h, Bad::Kind(kind))),
            };
            let argc = usize::from(argc);
            let inline = match category {
                AmCategory::Medium => len as usize,
                AmCategory::Long if carried => len as usize,
                AmCategory::Short if len != 0 => {
                    return Err(self.corrupt(h, Bad::Length(category, len)))
                }
                _ => 0,
            };
            if argc > MAX_ARGS {
                return Err(self.corrupt(h, Bad::Args(argc)));
            }
            if inline > MAX_MEDIUM {
                return Err(self.corrupt(h, Bad::Length(category, len)));
            }
            if cells_for(argc, inline) as u64 != n {
                return Err(self.corrupt(h, Bad::Size(n, argc, inline)));
            }
            // The arguments and the payload stay in the cells: `Received` lends them in place
            // (copying 64 bytes of arguments into the returned value cost a store-forwarding
            // stall per message).
            let cells = &self.cells[idx as usize * CELL_WORDS..(idx + n) as usize * CELL_WORDS];
            return Ok(Some(Received {
                cells,
                ring_head: self.head,
                head,
                source,
                handler,
                category,
                carried,
                argc: argc as u8,
                len,
                offset: cell[3].load(Ordering::Relaxed),
            }));
        }
    }

    /// The error for a bad record at `position`, built out of line (it formats).
    #[cold]
    #[inline(never)]
    fn corrupt(&self, position: u64, bad: Bad) -> RecvError {
        let reason = match bad {
            Bad::Marker(m) => format!("marker {m:#x}, expected {:#x}", position + 1),
            Bad::Cells(n, idx) => format!("record of {n} cells at cell {idx} of {}", self.cap()),
            Bad::Pad(n) => format!("pad of {n} cells does not end the ring"),
            Bad::Kind(k) => format!("record kind {k}"),
            Bad::Category(c) => format!("category code {c}"),
            Bad::Args(argc) => format!("{argc} arguments"),
            Bad::Length(c, len) => format!("{c:?} with length {len}"),
            Bad::Size(n, argc, inline) => {
                format!("{n} cells for {argc} arguments and {inline} payload bytes")
            }
        };
        RecvError::Corrupt {
            queue: self.name,
            position,
            reason,
        }
    }
}

/// Outcome of [`Ring::refresh_head`] when the ring has room or might.
enum Refreshed {
    /// The reservation fits.
    Room,
    /// The tail read was stale; read it again.
    Stale,
}

/// What is wrong with a record (see [`Ring::corrupt`]).
enum Bad {
    Marker(u64),
    Cells(u64, u64),
    Pad(u64),
    Kind(u8),
    Category(u8),
    Args(usize),
    Length(AmCategory, u32),
    Size(u64, usize, usize),
}

/// A message taken from a queue. Its cells stay reserved for the consumer (the payload is
/// read in place) until this is dropped, which releases them to producers.
pub struct Received<'c> {
    /// The record's cells (header, arguments, inline payload).
    cells: &'c [AtomicU64],
    ring_head: &'c AtomicU64,
    head: &'c mut u64,
    source: u32,
    handler: u8,
    category: AmCategory,
    /// A Long whose payload is inline (category code [`LONG_CARRIED_CODE`]).
    carried: bool,
    argc: u8,
    len: u32,
    offset: u64,
}

impl Received<'_> {
    /// Rank that sent the message.
    #[inline]
    pub fn source(&self) -> u32 {
        self.source
    }

    /// Handler index.
    #[inline]
    pub fn handler(&self) -> u8 {
        self.handler
    }

    /// Category.
    #[inline]
    pub fn category(&self) -> AmCategory {
        self.category
    }

    /// Arguments, borrowed from the queue (valid until `self` is dropped).
    #[inline]
    pub fn args(&self) -> &[u32] {
        let argc = usize::from(self.argc);
        // Checked at dequeue: `argc <= MAX_ARGS` and the record holds its argument words.
        args_view(&self.cells[ARGS_WORD..ARGS_WORD + argc.div_ceil(2)], argc)
    }

    /// The body; a Medium's or carried Long's payload is borrowed from the queue, valid until
    /// `self` is dropped.
    #[inline]
    pub fn body(&self) -> Body<'_> {
        match self.category {
            AmCategory::Short => Body::Short,
            AmCategory::Medium => Body::Medium(self.inline_payload()),
            AmCategory::Long if self.carried => Body::LongCarried {
                offset: self.offset,
                payload: self.inline_payload(),
            },
            AmCategory::Long => Body::Long {
                offset: self.offset,
                len: self.len,
            },
        }
    }

    /// The payload carried in the record.
    #[inline]
    fn inline_payload(&self) -> &[u8] {
        let len = self.len as usize;
        let first = payload_offset(usize::from(self.argc)) / 8;
        // In bounds: the record's cell count was checked against argc and len.
        payload_bytes(&self.cells[first..first + len.div_ceil(8)], len)
    }
}

impl std::fmt::Debug for Received<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Received")
            .field("source", &self.source)
            .field("handler", &self.handler)
            .field("args", &self.args())
            .field("body", &self.body())
            .finish()
    }
}

impl Drop for Received<'_> {
    #[inline]
    fn drop(&mut self) {
        // Invariant 2: the first cell keeps its (now stale) marker; the first words of the
        // others held payload and must not look like markers when the cells are reused.
        for cell in self.cells.chunks_exact(CELL_WORDS).skip(1) {
            cell[0].store(0, Ordering::Relaxed);
        }
        *self.head += (self.cells.len() / CELL_WORDS) as u64;
        self.ring_head.store(*self.head, Ordering::Release);
    }
}

/// Copies `src` into the bytes of `dst` (which must hold at least `src.len()` bytes).
fn copy_in(dst: &[AtomicU64], src: &[u8]) {
    assert!(dst.len() * 8 >= src.len(), "payload copy out of bounds");
    // SAFETY: `dst` is valid for `dst.len() * 8 >= src.len()` bytes; writing through it is
    // allowed because AtomicU64 is interior-mutable. The cells belong to this producer alone
    // between its reservation and its commit (invariant 3), so no other access races with
    // these plain writes; the commit's marker store orders them before the consumer's reads.
    // `src` is a separate Rust borrow and cannot overlap a slice of atomics we write.
    unsafe {
        std::ptr::copy_nonoverlapping(
            src.as_ptr(),
            dst.as_ptr().cast::<u8>().cast_mut(),
            src.len(),
        );
    }
}

/// Word of a record where the arguments start (after marker, meta, sizes, Long offset).
const ARGS_WORD: usize = HEADER_BYTES / 8;

/// Word `4 + i` of a record: arguments `2i` and `2i + 1` in native byte order, so that the
/// consumer can view the words as `u32`s in place (both ends run on the same host).
#[inline]
fn pack_arg_pair(pair: &[u32]) -> u64 {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&pair[0].to_ne_bytes());
    if let Some(second) = pair.get(1) {
        b[4..].copy_from_slice(&second.to_ne_bytes());
    }
    u64::from_ne_bytes(b)
}

/// The first `argc` arguments packed two per word by [`pack_arg_pair`], in place.
#[inline]
fn args_view(words: &[AtomicU64], argc: usize) -> &[u32] {
    assert!(words.len() * 2 >= argc, "argument view out of bounds");
    // SAFETY: `words` is valid for `argc * 4 <= words.len() * 8` bytes, initialised, and
    // aligned for u32 (it is aligned for u64). Each word holds two u32s in native byte order
    // (`pack_arg_pair`), so the view reads back exactly the sent arguments. The words belong
    // to a committed record that the borrowed `Received` keeps from being released, so no
    // producer writes them while the slice lives (invariant 3) and plain reads do not race.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u32>(), argc) }
}

/// The first `len` bytes of `words` (which must hold them) as a byte slice.
#[inline]
fn payload_bytes(words: &[AtomicU64], len: usize) -> &[u8] {
    assert!(words.len() * 8 >= len, "payload view out of bounds");
    // SAFETY: `words` is valid for `len` bytes and initialised. The record is committed (its
    // producer's writes happen before, via the marker's acquire) and is released only when the
    // `Received` that lends this slice is dropped, which the borrow prevents while the slice
    // lives; until then no producer may write these cells (invariant 3), so reading them as
    // plain bytes does not race.
    unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), len) }
}

const _: () = assert!(HEADER_BYTES % 8 == 0 && CELL_BYTES % 8 == 0);

/// Outcome of [`futex_wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FutexWait {
    /// Woken (or spuriously returned); re-check the condition.
    Woken,
    /// The word no longer held the expected value.
    Changed,
    /// The timeout passed.
    TimedOut,
}

/// Sleeps while `*word == expected`, at most `timeout`. Shared (not `FUTEX_PRIVATE`) because
/// the waker may be another process mapping the same memory.
pub(crate) fn futex_wait(word: &AtomicU32, expected: u32, timeout: Duration) -> FutexWait {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: FUTEX_WAIT reads the aligned 32-bit word at `word.as_ptr()` (valid for the call,
    // borrowed) and the timespec on our stack; the other pointer arguments are unused.
    let r = unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
            std::ptr::null::<u32>(),
            0u32,
        )
    };
    if r == 0 {
        return FutexWait::Woken;
    }
    match nix::errno::Errno::last() {
        nix::errno::Errno::EAGAIN => FutexWait::Changed,
        nix::errno::Errno::ETIMEDOUT => FutexWait::TimedOut,
        // EINTR, or a kernel without futexes: callers re-check and retry, so treating it as
        // a wake-up only costs spinning.
        _ => FutexWait::Woken,
    }
}

/// Wakes up to `n` waiters sleeping on `word`, in any process.
pub(crate) fn futex_wake(word: &AtomicU32, n: i32) {
    // SAFETY: FUTEX_WAKE only uses the address of the borrowed word as a key; the other
    // arguments are unused.
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE,
            n,
            std::ptr::null::<libc::timespec>(),
            std::ptr::null::<u32>(),
            0u32,
        );
    }
}

#[cfg(test)]
#[path = "queue_tests.rs"]
mod tests;
