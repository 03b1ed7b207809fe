//! Byte layout of a rank's shared-memory object.
//!
//! ```text
//! offset 0      header page (4 KiB): identity words, doorbell, node barrier, ring heads/tails,
//!               each hot word on its own 64-byte line so that producers, the consumer and the
//!               barrier do not false-share
//! 4 KiB         request ring: `queue_cells` cells of 64 bytes
//!   ...         reply ring:   `queue_cells` cells of 64 bytes
//! page-aligned  the segment: `segment_len` bytes, rounded up to a page
//! ```
//!
//! Every process of a host computes the same layout from the same two numbers (queue cells,
//! segment length), which the creator writes into the header so that an opener can check
//! them against the object's real size before touching anything.
#![deny(unsafe_code)]

use crate::error::SetupError;
use crate::message::{HEADER_BYTES, MAX_ARGS, MAX_MEDIUM};

/// Alignment of the rings and the segment inside the object.
pub(crate) const PAGE: usize = 4096;
/// Bytes of one ring cell: one cache line, so that a small message is one line transfer.
pub(crate) const CELL_BYTES: usize = 64;
/// 64-bit words in one cell.
pub(crate) const CELL_WORDS: usize = CELL_BYTES / 8;

/// First word of a valid object ("RGPSHM" + layout version 1).
pub(crate) const MAGIC: u64 = u64::from_le_bytes(*b"RGPSHM\x00\x01");

// Word indices inside the header page. One 64-byte line = 8 words.
pub(crate) const W_MAGIC: usize = 0;
pub(crate) const W_JOB_KEY: usize = 1;
pub(crate) const W_RANK: usize = 2;
pub(crate) const W_SEGMENT_LEN: usize = 3;
pub(crate) const W_QUEUE_CELLS: usize = 4;
pub(crate) const W_OBJECT_LEN: usize = 5;
/// Which node barrier the supernode uses, as its leader (lowest rank) decided at attach:
/// [`BARRIER_COUNTER`] or [`BARRIER_DISSEMINATION`]. Only the leader's object's is read.
pub(crate) const W_BARRIER_MODE: usize = 6;
/// The shared counter (`barrier`).
pub(crate) const BARRIER_COUNTER: u64 = 0;
/// The dissemination barrier (`dissemination`).
pub(crate) const BARRIER_DISSEMINATION: u64 = 1;
/// The dissemination barrier's radix (members each writes to per round, plus one), as the
/// leader decided at attach; only the leader's object's is read.
pub(crate) const W_BARRIER_RADIX: usize = 7;
/// Doorbell futex word (used through its 32-bit view only).
pub(crate) const W_DOORBELL: usize = 8;
/// Node barrier arrival counter (32-bit view only); only the leader's object's is used.
pub(crate) const W_BARRIER_COUNT: usize = 16;
/// Node barrier generation, the futex word (32-bit view only).
pub(crate) const W_BARRIER_GEN: usize = 24;
/// The name the node barrier's arrivals agreed on so far, by the parity of its generation
/// (see `barrier::BarrierName`); on the generation's line, which a waiter fetches anyway when
/// the barrier completes. Only the leader's object's are used.
pub(crate) const W_BARRIER_NAME: [usize; 2] = [W_BARRIER_GEN + 1, W_BARRIER_GEN + 2];
/// Number of barrier waiters asleep on the generation futex (32-bit view only).
pub(crate) const W_BARRIER_SLEEPERS: usize = 32;
pub(crate) const W_REQ_TAIL: usize = 40;
pub(crate) const W_REQ_HEAD: usize = 48;
pub(crate) const W_REP_TAIL: usize = 56;
pub(crate) const W_REP_HEAD: usize = 64;
/// Non-zero once the rank has ended its program ([`crate::Node::mark_left`]).
pub(crate) const W_LEFT: usize = 72;
/// The value this rank brought to the node barrier ([`crate::Node::barrier_arrive_with`]), by
/// the parity of the barrier's generation: a rank can be one barrier ahead of a peer that is
/// still reading the values of the last one, never two.
pub(crate) const W_BARRIER_VALUE: [usize; 2] = [80, 88];
/// Non-zero while this rank sleeps on a dissemination slot (32-bit view only).
pub(crate) const W_DISS_SLEEP: usize = 96;
/// The last dissemination barrier this rank completed (its epoch; 32-bit view only): a
/// rank that ended its program after completing a barrier has done its part of it.
pub(crate) const W_DISS_DONE: usize = 104;
/// Dissemination slots per parity: the rest of the header page, one line each. A barrier of
/// radix `k` uses `k - 1` per round (see `dissemination`).
pub(crate) const DISS_SLOTS_PER_PARITY: usize = (PAGE / 8 - W_DISS_SLOTS) / 8 / 2;
// 256 members at radix 7 or 8 take 17 slots (6 + 6 + 5, 7 + 7 + 3), no radix up to 8 more.
const _: () = assert!(DISS_SLOTS_PER_PARITY >= 17);
/// First word of the dissemination slots: one line per parity and slot, the line's first
/// word the epoch (32-bit view only), its second the names merged so far.
pub(crate) const W_DISS_SLOTS: usize = 128;

/// The first word of dissemination slot `slot` (`< DISS_SLOTS_PER_PARITY`) for barriers of
/// `parity`.
pub(crate) const fn diss_slot(parity: usize, slot: usize) -> usize {
    W_DISS_SLOTS + (parity * DISS_SLOTS_PER_PARITY + slot) * 8
}

/// Cells that the largest record needs (header, 16 args, maximal Medium payload).
pub(crate) const MAX_RECORD_CELLS: usize =
    (HEADER_BYTES + MAX_ARGS * 4 + MAX_MEDIUM).div_ceil(CELL_BYTES);

/// Smallest ring: a record that does not fit before the end of the ring is preceded by a pad
/// of at most `MAX_RECORD_CELLS - 1` cells, so pad + record must always fit in an empty ring.
pub const MIN_QUEUE_CELLS: usize = (2 * MAX_RECORD_CELLS).next_power_of_two();
const _: () = assert!(MIN_QUEUE_CELLS >= 2 * MAX_RECORD_CELLS - 1);

/// Where everything lives in one object, in 64-bit words from the start of the mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    /// Cells per ring (a power of two).
    pub queue_cells: usize,
    /// Usable segment bytes.
    pub segment_len: usize,
    /// First word of the request ring's cells.
    pub req_cells: usize,
    /// First word of the reply ring's cells.
    pub rep_cells: usize,
    /// First word of the segment.
    pub segment: usize,
    /// Total object length in bytes.
    pub object_len: usize,
}

impl Layout {
    /// The layout for `queue_cells` cells per ring and a segment of `segment_len` bytes.
    pub(crate) fn new(queue_cells: usize, segment_len: usize) -> Result<Layout, SetupError> {
        if !queue_cells.is_power_of_two() || queue_cells < MIN_QUEUE_CELLS {
            return Err(SetupError::Config(format!(
                "queue cells must be a power of two of at least {MIN_QUEUE_CELLS}, got {queue_cells}"
            )));
        }
        let too_big = || {
            SetupError::Config(format!(
                "segment of {segment_len} bytes with {queue_cells} queue cells overflows the address space"
            ))
        };
        let ring_bytes = queue_cells.checked_mul(CELL_BYTES).ok_or_else(too_big)?;
        let req = PAGE;
        let rep = req.checked_add(ring_bytes).ok_or_else(too_big)?;
        let seg = rep
            .checked_add(ring_bytes)
            .and_then(|e| e.checked_next_multiple_of(PAGE))
            .ok_or_else(too_big)?;
        let seg_rounded = segment_len
            .checked_next_multiple_of(PAGE)
            .ok_or_else(too_big)?;
        let object_len = seg.checked_add(seg_rounded).ok_or_else(too_big)?;
        // mmap and off_t take signed lengths.
        if i64::try_from(object_len).is_err() {
            return Err(too_big());
        }
        Ok(Layout {
            queue_cells,
            segment_len,
            req_cells: req / 8,
            rep_cells: rep / 8,
            segment: seg / 8,
            object_len,
        })
    }

    /// Words of one ring's cells.
    pub(crate) fn ring_words(&self) -> usize {
        self.queue_cells * CELL_WORDS
    }

    /// Words of the segment (whole pages).
    pub(crate) fn segment_words(&self) -> usize {
        (self.object_len / 8) - self.segment
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_words_fit_the_header_page_on_separate_lines() {
        let hot = [
            W_DOORBELL,
            W_BARRIER_COUNT,
            W_BARRIER_GEN,
            W_BARRIER_SLEEPERS,
            W_REQ_TAIL,
            W_REQ_HEAD,
            W_REP_TAIL,
            W_REP_HEAD,
            W_LEFT,
            W_BARRIER_VALUE[0],
            W_BARRIER_VALUE[1],
        ];
        let mut hot = hot.to_vec();
        hot.push(W_DISS_SLEEP);
        hot.push(W_DISS_DONE);
        hot.extend((0..2).flat_map(|p| (0..DISS_SLOTS_PER_PARITY).map(move |s| diss_slot(p, s))));
        let mut lines: Vec<usize> = hot.iter().map(|w| w / 8).collect();
        lines.push(W_MAGIC / 8);
        lines.sort_unstable();
        lines.dedup();
        assert_eq!(lines.len(), hot.len() + 1, "hot words share a cache line");
        assert!(hot.iter().all(|&w| w * 8 < PAGE));
        // The agreed names share the generation's line on purpose.
        assert!(W_BARRIER_NAME.iter().all(|&w| w / 8 == W_BARRIER_GEN / 8));
        for w in [
            W_BARRIER_MODE,
            W_BARRIER_RADIX,
            W_JOB_KEY,
            W_RANK,
            W_SEGMENT_LEN,
            W_QUEUE_CELLS,
            W_OBJECT_LEN,
        ] {
            assert_eq!(w / 8, 0);
        }
    }

    #[test]
    fn layout_places_rings_and_segment_page_aligned() {
        let l = Layout::new(MIN_QUEUE_CELLS, 10_000).unwrap();
        assert_eq!(l.req_cells * 8, PAGE);
        assert_eq!(l.rep_cells * 8, PAGE + MIN_QUEUE_CELLS * CELL_BYTES);
        assert_eq!((l.segment * 8) % PAGE, 0);
        assert_eq!(l.segment * 8, PAGE + 2 * MIN_QUEUE_CELLS * CELL_BYTES);
        assert_eq!(l.object_len, l.segment * 8 + 12_288);
        assert_eq!(l.segment_words(), 12_288 / 8);
        assert_eq!(l.ring_words(), MIN_QUEUE_CELLS * 8);
    }

    #[test]
    fn ring_holds_a_maximal_record_after_a_maximal_pad() {
        assert_eq!(MAX_RECORD_CELLS, (32 + 64 + 65_536usize).div_ceil(64));
    }

    #[test]
    fn bad_sizes_are_config_errors() {
        let e = Layout::new(1000, 0).unwrap_err();
        assert!(e.to_string().contains("power of two"), "{e}");
        let e = Layout::new(MIN_QUEUE_CELLS / 2, 0).unwrap_err();
        assert!(e.to_string().contains(&MIN_QUEUE_CELLS.to_string()), "{e}");
        let e = Layout::new(MIN_QUEUE_CELLS, usize::MAX - 10).unwrap_err();
        assert!(e.to_string().contains("overflows"), "{e}");
        let e = Layout::new(MIN_QUEUE_CELLS, usize::MAX / 2).unwrap_err();
        assert!(e.to_string().contains("overflows"), "{e}");
    }
}
