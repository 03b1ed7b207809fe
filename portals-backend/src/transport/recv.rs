//! The receiving half of a peer: duplicate suppression, the reorder buffer, reassembly and
//! acknowledgement generation.
//!
//! Frames are consumed strictly in sequence order; a frame that arrives early is stashed until
//! the gap before it fills. Because the fragments of a message carry consecutive sequence
//! numbers, in-order consumption makes reassembly an append.
//!
//! Memory is bounded by a [`Budget`] shared by all peers. A stashed frame is charged its
//! payload, except the first fragment of a message, which is charged the whole message up
//! front: when it is later consumed, its assembly buffer is already paid for, so consuming in
//! order never needs new memory once a frame has been accepted. Stashing is refused while it
//! would leave less than one maximal message of room, so an in-order message can always start
//! once the assemblies in progress (which never stall for memory) have completed.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::wire::{self, DataFrame, SackRange};

/// Bytes of reassembly memory in use across all peers, and its bound.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    pub(crate) used: usize,
    pub(crate) limit: usize,
    /// Room kept free of stashed frames for in-order progress (the largest message).
    pub(crate) reserve: usize,
    /// Highest `used` ever seen.
    pub(crate) high_water: usize,
    /// The buffer of the last completed reassembly, kept (emptied) for the next one: a large
    /// message's buffer would otherwise be a fresh allocation of its size, each page of which
    /// the kernel faults in and zeroes again. Not charged: it holds no message.
    pub(crate) spare: Vec<u8>,
}

/// Largest reassembly buffer kept as [`Budget::spare`].
const SPARE_MAX: usize = 16 << 20;

impl Budget {
    fn try_charge(&mut self, n: usize, keep_reserve: bool) -> bool {
        let cap = if keep_reserve {
            self.limit.saturating_sub(self.reserve)
        } else {
            self.limit
        };
        match self.used.checked_add(n) {
            Some(total) if total <= cap => {
                self.used = total;
                self.high_water = self.high_water.max(total);
                true
            }
            _ => false,
        }
    }

    fn release(&mut self, n: usize) {
        self.used = self.used.saturating_sub(n);
    }

    /// An empty buffer with room for `len` bytes: the kept spare when it has any.
    fn assembly_buffer(&mut self, len: usize) -> Vec<u8> {
        let mut buf = std::mem::take(&mut self.spare);
        buf.clear();
        buf.reserve(len);
        buf
    }

    /// Keeps `buf` as the spare if it is the larger one and not too large.
    fn keep(&mut self, buf: Vec<u8>) {
        if buf.capacity() <= SPARE_MAX && buf.capacity() > self.spare.capacity() {
            self.spare = buf;
        }
    }
}

struct Stashed {
    total: u32,
    offset: u32,
    payload: Vec<u8>,
    charge: usize,
}

struct Assembly {
    buf: Vec<u8>,
    total: usize,
    charge: usize,
}

/// What became of one DATA frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataOutcome {
    /// Consumed (and possibly more stashed frames after it).
    Accepted,
    /// Already received.
    Duplicate,
    /// Beyond the receive window.
    OutOfWindow,
    /// No reassembly memory: dropped unacknowledged, the sender will retransmit.
    NoMemory,
    /// The message is larger than `max_message`: dropped.
    TooLarge,
    /// Inconsistent with the message being assembled (offset or total): dropped.
    Inconsistent,
}

pub(crate) struct RecvState {
    /// Next sequence number expected; everything below was consumed.
    cum: u64,
    stash: BTreeMap<u64, Stashed>,
    /// Received ranges above `cum`, start -> end (exclusive), merged.
    ranges: BTreeMap<u64, u64>,
    assembly: Option<Assembly>,
    largest: Option<u64>,
    largest_at: Instant,
    pub(crate) ack_pending: bool,
    /// Ack-eliciting frames received since the last ack.
    unacked_frames: u32,
    /// Something happened that the sender should hear about at once (a gap or a duplicate).
    /// A completed message is not such a thing: the layer above usually answers it at once
    /// (an engine request gets its response, which carries the ack), and a response needs no
    /// ack before the application's next request carries one or `ack_delay` passes. Acking
    /// every completed message at once cost a datagram per round trip.
    ack_now: bool,
    /// The layer above said that the sender waits on this ack to complete an operation (a
    /// confirmed acknowledgement, [`crate::types::AckReq::ConfirmedAck`]): it leaves when
    /// this process goes idle ([`super::Transport::release_soon_acks`]), not after
    /// `ack_delay`, unless data to the sender carries it first.
    pub(crate) ack_soon: bool,
    pub(crate) ack_deadline: Option<Instant>,
    /// Messages delivered so far (messages end in order, so this is also the index of the
    /// next one): what a delivery confirmation waits for (see the transport). A message
    /// dropped as inconsistent, which only a broken peer sends, is not counted: that peer's
    /// confirmations then stop, as its operations would wait for a peer that never answers.
    pub(crate) delivered: u64,
}

impl RecvState {
    pub(crate) fn new(now: Instant) -> Self {
        RecvState {
            cum: 0,
            stash: BTreeMap::new(),
            ranges: BTreeMap::new(),
            assembly: None,
            largest: None,
            largest_at: now,
            ack_pending: false,
            unacked_frames: 0,
            ack_now: false,
            ack_soon: false,
            ack_deadline: None,
            delivered: 0,
        }
    }

    /// Frees every buffer (peer failed).
    pub(crate) fn release_all(&mut self, budget: &mut Budget) {
        for (_, s) in std::mem::take(&mut self.stash) {
            budget.release(s.charge);
        }
        if let Some(a) = self.assembly.take() {
            budget.release(a.charge);
        }
        self.ranges.clear();
    }

    /// Handles one DATA frame; completed messages are handed to `deliver`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_data(
        &mut self,
        now: Instant,
        frame: &DataFrame<'_>,
        window: usize,
        max_message: usize,
        ack_delay: Duration,
        budget: &mut Budget,
        deliver: &mut impl FnMut(&[u8]),
    ) -> DataOutcome {
        let outcome = self.classify_and_apply(now, frame, window, max_message, budget, deliver);
        match outcome {
            DataOutcome::Accepted
            | DataOutcome::Duplicate
            | DataOutcome::OutOfWindow
            | DataOutcome::Inconsistent => {
                if !self.ack_pending {
                    self.ack_pending = true;
                    self.ack_deadline = Some(now + ack_delay);
                }
                self.unacked_frames = self.unacked_frames.saturating_add(1);
                if outcome != DataOutcome::Accepted {
                    // The sender is retransmitting what we have: our ack was probably lost.
                    self.ack_now = true;
                }
            }
            // Say nothing: the frame was not kept. The sender retransmits after its timeout,
            // by when memory may be free (an oversized message never fits: its sender will
            // declare us failed after the peer timeout, and the drop is counted here).
            DataOutcome::NoMemory | DataOutcome::TooLarge => {}
        }
        outcome
    }

    fn classify_and_apply(
        &mut self,
        now: Instant,
        frame: &DataFrame<'_>,
        window: usize,
        max_message: usize,
        budget: &mut Budget,
        deliver: &mut impl FnMut(&[u8]),
    ) -> DataOutcome {
        let seq = frame.seq;
        if seq < self.cum || self.stash.contains_key(&seq) {
            return DataOutcome::Duplicate;
        }
        if seq - self.cum >= window as u64 {
            return DataOutcome::OutOfWindow;
        }
        if frame.total as usize > max_message {
            return DataOutcome::TooLarge;
        }
        if seq == self.cum {
            let outcome = self.consume(
                frame.total,
                frame.offset,
                Consumed::Fresh(frame.payload),
                budget,
                deliver,
            );
            if outcome != DataOutcome::Accepted {
                return outcome;
            }
            self.note_largest(now, seq);
            self.drain_stash(budget, deliver);
            return DataOutcome::Accepted;
        }
        // Early frame: stash it.
        let charge = if frame.offset == 0 {
            frame.total as usize
        } else {
            frame.payload.len()
        };
        if !budget.try_charge(charge, true) {
            return DataOutcome::NoMemory;
        }
        self.stash.insert(
            seq,
            Stashed {
                total: frame.total,
                offset: frame.offset,
                payload: frame.payload.to_vec(),
                charge,
            },
        );
        self.insert_range(seq);
        self.note_largest(now, seq);
        self.ack_now = true; // a gap: tell the sender now so it can retransmit early
        DataOutcome::Accepted
    }

    fn note_largest(&mut self, now: Instant, seq: u64) {
        if self.largest.is_none_or(|l| seq > l) {
            self.largest = Some(seq);
            self.largest_at = now;
        }
    }

    fn insert_range(&mut self, seq: u64) {
        let end = seq + 1;
        let mut start = seq;
        let mut new_end = end;
        if let Some((&s, &e)) = self.ranges.range(..=seq).next_back() {
            if e == seq {
                start = s;
            }
        }
        if let Some(&e) = self.ranges.get(&end) {
            self.ranges.remove(&end);
            new_end = e;
        }
        self.ranges.insert(start, new_end);
    }

    /// Consumes the frame at `cum`. `payload` is either borrowed from the datagram or a stashed
    /// buffer (already charged).
    fn consume(
        &mut self,
        total: u32,
        offset: u32,
        payload: Consumed<'_>,
        budget: &mut Budget,
        deliver: &mut impl FnMut(&[u8]),
    ) -> DataOutcome {
        let total_len = total as usize;
        match self.assembly.as_mut() {
            None => {
                if offset != 0 {
                    payload.release(budget);
                    self.cum += 1;
                    return DataOutcome::Inconsistent;
                }
                if payload.len() == total_len {
                    payload.release(budget);
                    self.cum += 1;
                    self.delivered += 1;
                    deliver(payload.bytes());
                    return DataOutcome::Accepted;
                }
                // First fragment of a multi-fragment message: it needs the whole message's
                // memory (already charged if it was stashed).
                let charge = match payload.charge() {
                    Some(c) => c,
                    None => {
                        if !budget.try_charge(total_len, false) {
                            return DataOutcome::NoMemory;
                        }
                        total_len
                    }
                };
                let mut buf = budget.assembly_buffer(total_len);
                buf.extend_from_slice(payload.bytes());
                self.assembly = Some(Assembly {
                    buf,
                    total: total_len,
                    charge,
                });
                self.cum += 1;
                DataOutcome::Accepted
            }
            Some(asm) => {
                self.cum += 1;
                if asm.total != total_len || asm.buf.len() != offset as usize {
                    payload.release(budget);
                    // The stream is corrupt for this message: drop what was assembled so the
                    // next message starts clean.
                    if let Some(a) = self.assembly.take() {
                        budget.release(a.charge);
                    }
                    return DataOutcome::Inconsistent;
                }
                asm.buf.extend_from_slice(payload.bytes());
                payload.release(budget);
                if asm.buf.len() == asm.total {
                    if let Some(a) = self.assembly.take() {
                        budget.release(a.charge);
                        self.delivered += 1;
                        deliver(&a.buf);
                        budget.keep(a.buf);
                    }
                }
                DataOutcome::Accepted
            }
        }
    }

    fn drain_stash(&mut self, budget: &mut Budget, deliver: &mut impl FnMut(&[u8])) {
        // The first range starts at `cum` exactly when the gap before it just closed.
        let Some((&start, &end)) = self.ranges.first_key_value() else {
            return;
        };
        if start != self.cum {
            return;
        }
        self.ranges.remove(&start);
        for seq in start..end {
            let Some(s) = self.stash.remove(&seq) else {
                // Cannot happen: ranges mirror the stash. Stop rather than desynchronise.
                break;
            };
            let charge = s.charge;
            let is_first = s.offset == 0 && s.payload.len() != s.total as usize;
            let consumed = if is_first {
                Consumed::StashedFirst(s.payload, charge)
            } else {
                Consumed::Stashed(s.payload, charge)
            };
            // Never NoMemory: stashed frames are paid for (see the module docs).
            self.consume(s.total, s.offset, consumed, budget, deliver);
        }
    }

    /// Whether a standalone ack should go out now.
    pub(crate) fn ack_due(&self, now: Instant, ack_every: u32) -> bool {
        self.ack_pending
            && (self.ack_now
                || self.unacked_frames >= ack_every
                || self.ack_deadline.is_some_and(|d| d <= now))
    }

    /// Appends the ack, with `fence` (see the wire format), to `out` and clears the pending
    /// state.
    pub(crate) fn write_ack(&mut self, now: Instant, out: &mut Vec<u8>, fence: u64) {
        let largest = self.largest.unwrap_or(0);
        let delay = now.saturating_duration_since(self.largest_at);
        let delay_us = u32::try_from(delay.as_micros()).unwrap_or(u32::MAX);
        // Lowest ranges first: they describe the oldest holes, the ones worth repairing.
        let ranges = self
            .ranges
            .iter()
            .map(|(&start, &end)| SackRange { start, end });
        wire::write_ack_from(out, self.cum, largest, delay_us, fence, ranges);
        self.ack_pending = false;
        self.unacked_frames = 0;
        self.ack_now = false;
        self.ack_soon = false;
        self.ack_deadline = None;
    }
}

/// A frame payload being consumed.
enum Consumed<'a> {
    /// Straight from the datagram.
    Fresh(&'a [u8]),
    /// From the stash, a continuation or a whole message, with its charge.
    Stashed(Vec<u8>, usize),
    /// From the stash, the first fragment of a multi-fragment message, charged the whole
    /// message.
    StashedFirst(Vec<u8>, usize),
}

impl Consumed<'_> {
    fn bytes(&self) -> &[u8] {
        match self {
            Consumed::Fresh(b) => b,
            Consumed::Stashed(v, _) | Consumed::StashedFirst(v, _) => v,
        }
    }

    fn len(&self) -> usize {
        self.bytes().len()
    }

    /// The message-sized charge the assembly inherits, for a stashed first fragment.
    fn charge(&self) -> Option<usize> {
        match self {
            Consumed::StashedFirst(_, c) => Some(*c),
            _ => None,
        }
    }

    /// Releases the stash charge of a payload that does not become an assembly.
    fn release(&self, budget: &mut Budget) {
        match self {
            Consumed::Fresh(_) => {}
            Consumed::Stashed(_, c) | Consumed::StashedFirst(_, c) => budget.release(*c),
        }
    }
}
