//! Immediate messages (an rgasnet extension beside Portals, see [`crate::proto::immediate`]):
//! a few bytes from a logical NI to the same kind of NI at another rank, reliable and in order,
//! that match nothing, land in no region and post no event. The receiving engine queues them
//! until the NI's owner takes them ([`Engine::take_immediates`]); an AM layer uses them for its
//! smallest messages, whose round trip the Portals path (descriptor, matching, event queue)
//! would otherwise dominate.
//!
//! Bounds, so that nothing is lost and nothing grows without limit:
//! - **Sender**: at most [`IMMEDIATE_OUTSTANDING_MAX`] unconfirmed immediates per peer; past
//!   that [`Engine::send_immediate`] sends nothing and says so, and the caller makes progress
//!   and tries again (a caller that cannot wait, such as an AM handler replying, may force).
//! - **Receiver**: past [`IMMEDIATE_BACKLOG_MAX`] queued immediates the driver stops reading
//!   datagrams ([`Engine::immediate_backlog_full`]) until the owner takes some; the transport's
//!   retransmission covers whatever the socket drops meanwhile.
//! - **Failure**: immediates still unconfirmed when their peer is declared failed are counted
//!   as lost ([`Engine::take_lost_immediates`]), for the owner to report.

use std::collections::VecDeque;

use super::{Engine, NiHandle};
use crate::error::{PtlError, PtlResult};
use crate::message::OutMessage;
use crate::proto::{self, Immediate, MAX_IMMEDIATE};
use crate::types::{Addressing, PhysId, ProcessId, Rank};

/// Most unconfirmed immediates an engine keeps in flight to one peer.
pub const IMMEDIATE_OUTSTANDING_MAX: u32 = 1024;
/// Received immediates waiting to be taken past which a driver stops reading datagrams.
pub const IMMEDIATE_BACKLOG_MAX: usize = 4096;
/// Marks a transport confirmation token as an immediate's (operation ids stay far below it).
pub(super) const IMMEDIATE_TOKEN: u64 = 1 << 60;

/// A received immediate message waiting in the engine; its bytes wait, in order, in the
/// engine's byte queue (so a message costs its own length, not the largest one's, each time it
/// is queued and taken).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Queued {
    ni: NiHandle,
    source: Rank,
    len: u16,
}

/// Immediate messages taken by [`Engine::take_immediates`]: who sent each and its bytes, the
/// payloads back to back in one buffer. Kept and [`ImmediateBatch::clear`]ed between takes, it
/// allocates nothing in the steady state.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ImmediateBatch {
    /// NI, sender, and the end of its payload in `bytes`.
    entries: Vec<(NiHandle, Rank, usize)>,
    bytes: Vec<u8>,
}

/// One message of an [`ImmediateBatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImmediateMsg<'a> {
    /// The NI it arrived on.
    pub ni: NiHandle,
    /// The sender's rank.
    pub source: Rank,
    /// Its bytes.
    pub payload: &'a [u8],
}

impl ImmediateBatch {
    /// An empty batch with room for `n` messages.
    pub fn with_capacity(n: usize) -> ImmediateBatch {
        ImmediateBatch {
            entries: Vec::with_capacity(n),
            bytes: Vec::with_capacity(n * 16),
        }
    }

    /// Messages in the batch.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the batch holds no message.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Empties the batch, keeping its memory.
    pub fn clear(&mut self) {
        self.entries.clear();
        self.bytes.clear();
    }

    /// The messages, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = ImmediateMsg<'_>> + '_ {
        let mut start = 0;
        self.entries.iter().map(move |&(ni, source, end)| {
            let payload = self.bytes.get(start..end).unwrap_or_default();
            start = end;
            ImmediateMsg {
                ni,
                source,
                payload,
            }
        })
    }

    /// Adds a message whose `len` bytes are the first of `from`, removing them there.
    fn push_front_of(&mut self, m: Queued, from: &mut VecDeque<u8>) {
        move_front(from, usize::from(m.len), &mut self.bytes);
        self.entries.push((m.ni, m.source, self.bytes.len()));
    }
}

/// Moves the first `len` bytes of `from` to the end of `to`.
fn move_front(from: &mut VecDeque<u8>, len: usize, to: &mut Vec<u8>) {
    let len = len.min(from.len());
    let (a, b) = from.as_slices();
    let first = len.min(a.len());
    to.extend_from_slice(&a[..first]);
    to.extend_from_slice(&b[..len - first]);
    from.drain(..len);
}

/// Immediates lost with a failed peer: its rank on the NI they were sent on, and how many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostImmediates {
    /// The failed peer.
    pub peer: PhysId,
    /// Immediates to it that were never confirmed.
    pub count: u64,
}

impl Engine {
    /// Sends `payload` (at most [`MAX_IMMEDIATE`] bytes) as an immediate message to `target` on
    /// the logical NI `ni`. Returns `false`, sending nothing, when [`IMMEDIATE_OUTSTANDING_MAX`]
    /// immediates to that peer are unconfirmed, unless `force`. A message to this interface
    /// itself is queued for taking at once, or refused the same way while the backlog is full.
    pub fn send_immediate(
        &mut self,
        ni: NiHandle,
        target: ProcessId,
        payload: &[u8],
        force: bool,
    ) -> PtlResult<bool> {
        const CALL: &str = "send_immediate";
        let (peer, my_rank) = self.resolve(CALL, ni, target)?;
        let kind = self.ni(CALL, ni)?.kind;
        if kind.addressing != Addressing::Logical {
            return Err(PtlError::arg(CALL, "immediate messages need a logical NI"));
        }
        if payload.len() > MAX_IMMEDIATE {
            return Err(PtlError::arg(
                CALL,
                format!(
                    "{} bytes exceed the {MAX_IMMEDIATE} an immediate message carries",
                    payload.len()
                ),
            ));
        }
        if peer == self.local {
            // Bounded by this engine's own backlog, which only its owner's taking drains.
            if self.immediate_backlog_full() && !force {
                return Ok(false);
            }
            self.queue_immediate(ni, my_rank, payload);
            return Ok(true);
        }
        let outstanding = self.immediates_outstanding.entry(peer).or_insert(0);
        if *outstanding >= IMMEDIATE_OUTSTANDING_MAX && !force {
            return Ok(false);
        }
        *outstanding += 1;
        let buf = self.message_buffer();
        let bytes = proto::encode_immediate_into(buf, kind, my_rank, payload)
            .map_err(|e| PtlError::arg(CALL, e.to_string()))?;
        self.outgoing
            .push_back((peer, OutMessage::from(bytes).confirmed_as(IMMEDIATE_TOKEN)));
        self.stats.immediates_sent += 1;
        Ok(true)
    }

    /// A received immediate: queued for its NI's owner if it comes from the rank it claims.
    pub(super) fn handle_immediate(&mut self, from: PhysId, m: &Immediate<'_>) {
        let Some(ni) = self.by_kind[m.ni_kind.index() as usize] else {
            self.stats.no_ni += 1;
            return;
        };
        let Ok(state) = self.nis.get("immediate", ni) else {
            self.stats.no_ni += 1;
            return;
        };
        let from_rank = state.map.as_ref().and_then(|map| {
            (state.kind.addressing == Addressing::Logical
                && map.get(m.initiator_rank as usize) == Some(&from))
            .then_some(m.initiator_rank)
        });
        let Some(source) = from_rank else {
            self.stats.bad_initiator += 1;
            return;
        };
        self.queue_immediate(ni, source, m.payload);
    }

    fn queue_immediate(&mut self, ni: NiHandle, source: Rank, payload: &[u8]) {
        let payload = &payload[..payload.len().min(MAX_IMMEDIATE)];
        self.immediates.push_back(Queued {
            ni,
            source,
            // At most MAX_IMMEDIATE, checked by the decoder and by `send_immediate`.
            len: payload.len() as u16,
        });
        self.immediate_bytes.extend(payload);
        self.stats.immediates_received += 1;
    }

    /// Moves up to `max` received immediates of `ni` into `out` (after what it holds), oldest
    /// first. Those of other NIs stay queued.
    pub fn take_immediates(&mut self, ni: NiHandle, out: &mut ImmediateBatch, max: usize) {
        let mut taken = 0;
        // Usually every queued immediate is for the one NI that uses them.
        while taken < max && self.immediates.front().is_some_and(|m| m.ni == ni) {
            if let Some(m) = self.immediates.pop_front() {
                out.push_front_of(m, &mut self.immediate_bytes);
                taken += 1;
            }
        }
        if taken < max && self.immediates.iter().any(|m| m.ni == ni) {
            let mut kept = VecDeque::with_capacity(self.immediates.len());
            let mut kept_bytes = Vec::new();
            let mut bytes = std::mem::take(&mut self.immediate_bytes);
            for m in self.immediates.drain(..) {
                if m.ni == ni && taken < max {
                    out.push_front_of(m, &mut bytes);
                    taken += 1;
                } else {
                    move_front(&mut bytes, usize::from(m.len), &mut kept_bytes);
                    kept.push_back(m);
                }
            }
            self.immediates = kept;
            self.immediate_bytes = kept_bytes.into();
        }
        if self.immediates.is_empty() {
            // Start again at the rings' first slots (see `eq_get`).
            self.immediates.clear();
            self.immediate_bytes.clear();
        }
    }

    /// Received immediates waiting to be taken.
    pub fn immediates_waiting(&self) -> usize {
        self.immediates.len()
    }

    /// Immediates sent and not yet confirmed, to every peer.
    pub fn immediates_unconfirmed(&self) -> u64 {
        self.immediates_outstanding
            .values()
            .map(|&n| u64::from(n))
            .sum()
    }

    /// Whether a driver should stop reading datagrams until immediates are taken.
    pub fn immediate_backlog_full(&self) -> bool {
        self.immediates.len() >= IMMEDIATE_BACKLOG_MAX
    }

    /// The transport confirmed an immediate to `peer`.
    pub(super) fn immediate_confirmed(&mut self, peer: PhysId) {
        if let Some(n) = self.immediates_outstanding.get_mut(&peer) {
            *n = n.saturating_sub(1);
        }
    }

    /// `peer` was declared failed: its unconfirmed immediates are lost.
    pub(super) fn immediates_failed(&mut self, peer: PhysId) {
        if let Some(count) = self.immediates_outstanding.remove(&peer) {
            if count > 0 {
                self.stats.immediates_lost += u64::from(count);
                self.lost_immediates.push(LostImmediates {
                    peer,
                    count: u64::from(count),
                });
            }
        }
    }

    /// The immediates lost with failed peers since the last call (see the module docs).
    pub fn take_lost_immediates(&mut self) -> Vec<LostImmediates> {
        std::mem::take(&mut self.lost_immediates)
    }
}
