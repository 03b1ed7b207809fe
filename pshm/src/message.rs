//! What an active message looks like on a shared-memory queue, and the record header codec.
//!
//! A record starts at a cell boundary with four 64-bit words, then the arguments packed two
//! per word, then (Medium) the payload, all contiguous across as many cells as needed:
//!
//! ```text
//! word 0  marker: position + 1 once committed, 0 while free or being written
//! word 1  kind u8 | category u8 | handler u8 | argc u8 | source rank u32   (bit 0 upwards)
//! word 2  cells u32 | length u32   (Medium, carried Long: payload bytes; Long: bytes already
//!         in the segment)
//! word 3  Long: offset of the data in the receiver's segment; otherwise 0
//! word 4  args[0], args[1] (two u32s in native byte order, viewed in place), ...
//!         payload (Medium, carried Long), starting on the next 8-byte boundary
//! ```
//!
//! A carried Long (category code 3) is a Long whose payload travels inline, as a Medium's
//! does, for the receiver to write into its own segment: for a small payload that saves the
//! cache lines of the receiver's segment travelling to the sender and back.
#![deny(unsafe_code)]

/// Most 32-bit arguments an active message carries.
pub const MAX_ARGS: usize = 16;
/// Largest Medium payload a queue carries inline (at least the conduit's 65,000 bytes).
pub const MAX_MEDIUM: usize = 65_536;
/// Bytes of the fixed record header (marker, meta, lengths, Long offset).
pub(crate) const HEADER_BYTES: usize = 32;

/// Record kinds (low byte of word 1).
pub(crate) const KIND_MESSAGE: u8 = 1;
/// A pad fills the cells up to the end of the ring when a record would wrap around it, so that
/// every message's bytes are contiguous and can be lent to the handler without a copy.
pub(crate) const KIND_PAD: u8 = 2;

/// Category code of a carried Long on the wire (see the module docs).
pub(crate) const LONG_CARRIED_CODE: u8 = 3;

/// Which of the three GASNet message kinds a message is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AmCategory {
    /// Arguments only.
    Short,
    /// Arguments plus a payload carried inline in the queue.
    Medium,
    /// Arguments plus a payload in the receiver's segment: copied there by the sender, or
    /// (a carried Long) inline in the record for the receiver to write there.
    Long,
}

impl AmCategory {
    pub(crate) fn code(self) -> u8 {
        match self {
            AmCategory::Short => 0,
            AmCategory::Medium => 1,
            AmCategory::Long => 2,
        }
    }

    pub(crate) fn from_code(code: u8) -> Option<AmCategory> {
        match code {
            0 => Some(AmCategory::Short),
            1 => Some(AmCategory::Medium),
            2 => Some(AmCategory::Long),
            _ => None,
        }
    }
}

/// The category-specific part of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// No payload.
    Short,
    /// A payload carried inline (at most [`MAX_MEDIUM`] bytes).
    Medium(&'a [u8]),
    /// `len` bytes at `offset` in the receiver's segment, written by the sender before it
    /// enqueued the message (so they are visible once the message is).
    Long {
        /// Offset of the data in the receiver's segment.
        offset: u64,
        /// Length of the data.
        len: u32,
    },
    /// A Long whose payload is carried inline (at most [`MAX_MEDIUM`] bytes): the receiver
    /// writes it at `offset` in its own segment before the handler runs.
    LongCarried {
        /// Where the data goes in the receiver's segment.
        offset: u64,
        /// The data.
        payload: &'a [u8],
    },
}

impl Body<'_> {
    /// The category of this body.
    pub fn category(&self) -> AmCategory {
        match self {
            Body::Short => AmCategory::Short,
            Body::Medium(_) => AmCategory::Medium,
            Body::Long { .. } | Body::LongCarried { .. } => AmCategory::Long,
        }
    }

    /// The category code written in the record.
    pub(crate) fn code(&self) -> u8 {
        match self {
            Body::LongCarried { .. } => LONG_CARRIED_CODE,
            other => other.category().code(),
        }
    }

    /// Bytes carried inside the queue record.
    pub(crate) fn inline_len(&self) -> usize {
        match self {
            Body::Medium(p) | Body::LongCarried { payload: p, .. } => p.len(),
            _ => 0,
        }
    }
}

/// An active message to enqueue. The source rank is filled in by the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AmMessage<'a> {
    /// Handler index at the receiver.
    pub handler: u8,
    /// Up to [`MAX_ARGS`] arguments.
    pub args: &'a [u32],
    /// Category and payload.
    pub body: Body<'a>,
}

/// Offset in bytes of the payload inside a record with `argc` arguments.
pub(crate) fn payload_offset(argc: usize) -> usize {
    HEADER_BYTES + (argc * 4).next_multiple_of(8)
}

/// Cells of 64 bytes that a record with `argc` arguments and `inline` payload bytes needs.
pub(crate) fn cells_for(argc: usize, inline: usize) -> usize {
    (payload_offset(argc) + inline).div_ceil(crate::layout::CELL_BYTES)
}

/// Word 1 of a record.
pub(crate) fn pack_meta(kind: u8, category: u8, handler: u8, argc: u8, source: u32) -> u64 {
    u64::from(kind)
        | u64::from(category) << 8
        | u64::from(handler) << 16
        | u64::from(argc) << 24
        | u64::from(source) << 32
}

/// Fields of word 1: (kind, category, handler, argc, source).
pub(crate) fn unpack_meta(w: u64) -> (u8, u8, u8, u8, u32) {
    (
        w as u8,
        (w >> 8) as u8,
        (w >> 16) as u8,
        (w >> 24) as u8,
        (w >> 32) as u32,
    )
}

/// Word 2 of a record.
pub(crate) fn pack_sizes(cells: u32, len: u32) -> u64 {
    u64::from(cells) | u64::from(len) << 32
}

/// Fields of word 2: (cells, length).
pub(crate) fn unpack_sizes(w: u64) -> (u32, u32) {
    (w as u32, (w >> 32) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meta_and_sizes_round_trip() {
        let w = pack_meta(KIND_MESSAGE, 2, 0xfe, 16, 0xdead_beef);
        assert_eq!(w, 0xdead_beef_10fe_0201);
        assert_eq!(unpack_meta(w), (KIND_MESSAGE, 2, 0xfe, 16, 0xdead_beef));
        let s = pack_sizes(1026, 65_536);
        assert_eq!(s, 0x0001_0000_0000_0402);
        assert_eq!(unpack_sizes(s), (1026, 65_536));
    }

    #[test]
    fn record_sizes() {
        assert_eq!(payload_offset(0), 32);
        assert_eq!(payload_offset(1), 40);
        assert_eq!(payload_offset(2), 40);
        assert_eq!(payload_offset(16), 96);
        // A Short with up to 8 arguments is one cache line.
        assert_eq!(cells_for(8, 0), 1);
        assert_eq!(cells_for(9, 0), 2);
        assert_eq!(cells_for(0, 32), 1);
        assert_eq!(cells_for(0, 33), 2);
        assert_eq!(cells_for(16, MAX_MEDIUM), 1026);
    }

    #[test]
    fn category_codes_round_trip() {
        for c in [AmCategory::Short, AmCategory::Medium, AmCategory::Long] {
            assert_eq!(AmCategory::from_code(c.code()), Some(c));
        }
        assert_eq!(AmCategory::from_code(3), None);
        assert_eq!(Body::Medium(&[1]).category(), AmCategory::Medium);
        assert_eq!(Body::Long { offset: 1, len: 2 }.inline_len(), 0);
        let carried = Body::LongCarried {
            offset: 1,
            payload: &[1, 2, 3],
        };
        assert_eq!(
            (carried.category(), carried.code(), carried.inline_len()),
            (AmCategory::Long, LONG_CARRIED_CODE, 3)
        );
        assert_eq!(AmCategory::from_code(LONG_CARRIED_CODE), None);
    }
}
