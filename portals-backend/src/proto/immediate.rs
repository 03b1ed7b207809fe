//! Immediate messages: an rgasnet extension beside Portals. An immediate message carries a few
//! bytes from one logical NI to the same kind of NI at another rank, with the transport's
//! guarantees (reliable, exactly once, in order) and nothing else: it matches no list entry,
//! lands in no memory region and posts no event. The receiving engine queues it for its
//! owner to take ([`crate::engine::Engine::take_immediates`]).
//!
//! Layout (6-byte header):
//!
//! ```text
//!  0 tag (0x90)  1 target NI kind index (0..=3)  2 initiator rank u32  6 payload
//! ```

use super::{u32_at, ProtoError};
use crate::types::{NiKind, Rank};

/// The tag of an immediate message.
pub(super) const TAG_IMMEDIATE: u8 = 0x90;
/// Length of an immediate message's header.
pub const IMMEDIATE_HEADER_LEN: usize = 6;
/// Longest payload of an immediate message: an AM Medium of 512 bytes with 16 arguments and
/// its 4-byte header fits (and with it every AM Short).
pub const MAX_IMMEDIATE: usize = 584;

/// A decoded immediate message, borrowing its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Immediate<'a> {
    /// The kind of NI it is for.
    pub ni_kind: NiKind,
    /// The sender's rank on that NI.
    pub initiator_rank: Rank,
    /// At most [`MAX_IMMEDIATE`] bytes.
    pub payload: &'a [u8],
}

/// Encodes an immediate message into `buf` (cleared first; its allocation is reused).
pub fn encode_immediate_into(
    mut buf: Vec<u8>,
    ni_kind: NiKind,
    initiator_rank: Rank,
    payload: &[u8],
) -> Result<Vec<u8>, ProtoError> {
    if payload.len() > MAX_IMMEDIATE {
        return Err(ProtoError::ImmediateTooLarge(payload.len()));
    }
    let mut head = [0u8; IMMEDIATE_HEADER_LEN];
    head[0] = TAG_IMMEDIATE;
    head[1] = ni_kind.index();
    head[2..6].copy_from_slice(&initiator_rank.to_le_bytes());
    buf.clear();
    buf.extend_from_slice(&head);
    buf.extend_from_slice(payload);
    Ok(buf)
}

/// Decodes an immediate message (its tag already read).
pub(super) fn decode_immediate(b: &[u8]) -> Result<Immediate<'_>, ProtoError> {
    if b.len() < IMMEDIATE_HEADER_LEN {
        return Err(ProtoError::Truncated {
            need: IMMEDIATE_HEADER_LEN,
            have: b.len(),
        });
    }
    let ni_kind = NiKind::from_index(b[1]).ok_or(ProtoError::BadNiKind(b[1]))?;
    let payload = &b[IMMEDIATE_HEADER_LEN..];
    if payload.len() > MAX_IMMEDIATE {
        return Err(ProtoError::ImmediateTooLarge(payload.len()));
    }
    Ok(Immediate {
        ni_kind,
        initiator_rank: u32_at(b, 2),
        payload,
    })
}
