//! The sending half of a peer: queued messages, fragmentation, the window of unacknowledged
//! frames, acknowledgement processing, loss detection and retransmission.
//!
//! Messages are kept whole (moved in, never copied) until every fragment is acknowledged; a
//! frame in flight refers to its message by id and byte range, and its bytes are copied only
//! into the outgoing datagram. Sequence numbers are assigned when a fragment first enters the
//! window, so the frames in flight are exactly `[snd_una, next_seq)` and are found by index.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::rtt::RttEstimator;
use crate::message::{OutMessage, Tail};
use crate::wire::{self, AckView};

/// A frame counts as lost once this many higher sequence numbers were acknowledged (the
/// classic duplicate-ack threshold): tolerates mild reordering without waiting for a timeout.
const REORDER_THRESHOLD: u64 = 3;

struct OutMsg {
    data: OutMessage,
    /// Bytes already cut into fragments.
    cut: usize,
    /// Whether every fragment has been given a sequence number.
    fully_cut: bool,
    /// Sequence number of the last fragment once cut.
    last_seq: u64,
}

struct Sent {
    msg_id: u64,
    offset: u32,
    len: u32,
    sent_at: Instant,
    acked: bool,
    retransmitted: bool,
    queued_for_retx: bool,
    fast_retx_done: bool,
}

/// What an incoming ACK changed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AckOutcome {
    /// New frames were acknowledged.
    pub(crate) progress: bool,
    /// The ack referred to sequence numbers never sent (ignored).
    pub(crate) bogus: bool,
    /// Frames declared lost by the reorder threshold.
    pub(crate) fast_lost: u64,
}

pub(crate) struct SendState {
    msgs: VecDeque<OutMsg>,
    /// Id of `msgs.front()`.
    first_msg_id: u64,
    /// Id of the message being cut into fragments (== first_msg_id + msgs.len() when none).
    cut_msg_id: u64,
    inflight: VecDeque<Sent>,
    /// Frames in `inflight` not yet acknowledged (kept so no ack has to scan the window).
    unacked: usize,
    /// Lowest unacknowledged sequence number (the receiver's cumulative ack).
    snd_una: u64,
    next_seq: u64,
    retx: VecDeque<u64>,
    /// Frames below this were already examined for reorder-threshold loss.
    fast_cursor: u64,
    /// Largest sequence number known acknowledged, plus one (0 = none).
    largest_acked_end: u64,
    pub(crate) rtt: RttEstimator,
    pub(crate) backoff: u32,
    pub(crate) rto_deadline: Option<Instant>,
    /// Last time the peer showed it is alive while we had data outstanding.
    pub(crate) last_progress: Instant,
    queued_bytes: usize,
    /// Gathering send: the payload of the datagram's last DATA frame, left in its message
    /// (index in `msgs`, start, length; relative to the message's in-place body when `in_body`)
    /// for the driver to send after the datagram buffer.
    tail: Option<TailRef>,
    /// Acknowledged messages that asked for a delivery confirmation, in order: their token
    /// and how many messages from the peer must have been delivered here before the
    /// confirmation holds (the acknowledging frame's `fence`).
    confirms: VecDeque<(u64, u64)>,
    /// Messages queued up to and including the last fenced one (0: none), this side's
    /// acks' `fence`.
    fence: u64,
    /// Messages in `msgs` whose confirmation the sender's program waits on
    /// ([`OutMessage::is_awaited`]): while there are any, a bare ack is applied as it
    /// arrives (see `Transport::handle_datagram_with`).
    awaited: usize,
}

#[derive(Clone, Copy)]
struct TailRef {
    idx: usize,
    start: usize,
    len: usize,
    in_body: bool,
}

/// New frames of small messages wait while less than 1/`NARROW_WINDOW` of the window is free
/// and more are queued (see [`SendState::window_too_narrow`]).
pub(crate) const NARROW_WINDOW: usize = 4;

/// Messages below this size wait for a wider window (see [`SendState::window_too_narrow`]).
pub(crate) const NARROW_WINDOW_SMALL: usize = 4096;

/// Smallest fragment worth a gathering send: below it, copying into the datagram is cheaper
/// than a second I/O vector, and packing several small frames into one datagram matters more.
pub(crate) const GATHER_MIN: usize = 4096;

impl SendState {
    pub(crate) fn new(rtt: RttEstimator, now: Instant) -> Self {
        SendState {
            msgs: VecDeque::new(),
            first_msg_id: 0,
            cut_msg_id: 0,
            inflight: VecDeque::new(),
            unacked: 0,
            snd_una: 0,
            next_seq: 0,
            retx: VecDeque::new(),
            fast_cursor: 0,
            largest_acked_end: 0,
            rtt,
            backoff: 0,
            rto_deadline: None,
            last_progress: now,
            queued_bytes: 0,
            tail: None,
            confirms: VecDeque::new(),
            fence: 0,
            awaited: 0,
        }
    }

    /// The `fence` of this side's acks: messages queued to the peer up to and including the
    /// last fenced one.
    pub(crate) fn fence(&self) -> u64 {
        self.fence
    }

    /// Hands `confirmed` the token of every acknowledged message whose confirmation holds
    /// now that `delivered` messages from the peer were delivered here, oldest first.
    pub(crate) fn take_confirmed(&mut self, delivered: u64, mut confirmed: impl FnMut(u64)) {
        while let Some(&(token, needed)) = self.confirms.front() {
            if needed > delivered {
                break;
            }
            self.confirms.pop_front();
            confirmed(token);
        }
    }

    /// Whether a queued or unacknowledged message's confirmation is waited on by the
    /// sender's program ([`OutMessage::is_awaited`]).
    pub(crate) fn confirmation_awaited(&self) -> bool {
        self.awaited > 0
    }

    /// Whether an acknowledged message still waits for its confirmation.
    pub(crate) fn confirms_pending(&self) -> bool {
        !self.confirms.is_empty()
    }

    /// Whether anything is queued or unacknowledged.
    pub(crate) fn outstanding(&self) -> bool {
        !self.msgs.is_empty()
    }

    /// Number of frames in `[snd_una, next_seq)`, acknowledged selectively or not.
    pub(crate) fn in_window(&self) -> usize {
        self.inflight.len()
    }

    /// Bytes of messages held (queued or in flight).
    pub(crate) fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// Moves the times a send pass wrote at `stale` (frames sent, the retransmission timer
    /// it armed, the start of the silence clock) to `fresh`: the pass ran on a clock reading
    /// that turned out older than the pass (see `Transport::restamp`). Times equal to `stale`
    /// written before the pass move too, later by `fresh - stale`: a timer that much late,
    /// never early. O(frames in flight), for a rare path.
    pub(crate) fn restamp(&mut self, stale: Instant, fresh: Instant) {
        let mut moved = false;
        for sent in self.inflight.iter_mut().filter(|s| s.sent_at == stale) {
            sent.sent_at = fresh;
            moved = true;
        }
        let armed_at_stale = Some(stale + self.rtt.rto(self.backoff));
        if moved && self.rto_deadline == armed_at_stale {
            self.rto_deadline = Some(fresh + self.rtt.rto(self.backoff));
        }
        if self.last_progress == stale {
            self.last_progress = fresh;
        }
    }

    pub(crate) fn push(&mut self, now: Instant, data: OutMessage) {
        if !self.outstanding() {
            // The peer-silence clock starts when there is something to be silent about.
            self.last_progress = now;
        }
        self.queued_bytes += data.len();
        if data.is_fence() {
            // Message ids count from 0: this one's is the number queued before it.
            self.fence = self.first_msg_id + self.msgs.len() as u64 + 1;
        }
        self.awaited += usize::from(data.is_awaited());
        self.msgs.push_back(OutMsg {
            data,
            cut: 0,
            fully_cut: false,
            last_seq: 0,
        });
    }

    fn has_new(&self, window: usize) -> bool {
        self.inflight.len() < window && self.cut_index() < self.msgs.len()
    }

    fn cut_index(&self) -> usize {
        // Cannot underflow: cut_msg_id >= first_msg_id always (messages leave the front only
        // after being fully cut).
        (self.cut_msg_id - self.first_msg_id) as usize
    }

    /// Whether new frames may go out without first applying an acknowledgement: nothing is
    /// waiting for retransmission (which an ack might show to be needless) and the window has
    /// room (which an ack would only widen).
    pub(crate) fn window_open(&self, window: usize) -> bool {
        self.retx.is_empty() && self.inflight.len() < window
    }

    /// Whether an acknowledgement of every frame below `cumulative` can wait (see `settle`):
    /// it covers every frame sent (the answer of a round trip does), the window is open and
    /// nothing queued waits to be cut into frames. A stream's acks trail its frames and are
    /// applied at once: a deferred one would keep its frames in the window, which measurably
    /// slowed a stream of puts.
    pub(crate) fn ack_can_wait(&self, window: usize, cumulative: u64) -> bool {
        cumulative >= self.next_seq
            && self.window_open(window)
            && self.cut_index() >= self.msgs.len()
    }

    /// Whether a DATA frame could be sent now: a retransmission, or a new frame that the window
    /// has room for and that need not wait for it to open further
    /// ([`SendState::window_too_narrow`]).
    pub(crate) fn has_sendable(&self, window: usize) -> bool {
        !self.retx.is_empty() || (self.has_new(window) && !self.window_too_narrow(window))
    }

    /// Silly-window avoidance: new frames wait while frames are in flight, less than
    /// 1/[`NARROW_WINDOW`] of the window is free, more messages are queued than it has room
    /// for, and the next is small. The acks on their way (every frame in flight is
    /// acknowledged, or retransmitted and then acknowledged) open the window further, and the
    /// waiting messages then leave together, several to a datagram.
    ///
    /// Without it a sender that outruns its receiver falls into one small message per
    /// datagram: each ack frees one slot, which one frame fills at once, and the receiver,
    /// paying a receive system call per message, stays the bottleneck. Measured on an AM flood
    /// with replies (`testam`'s flood ReqRep), which fell into that state in some runs and
    /// not others. A message of [`NARROW_WINDOW_SMALL`] bytes or more fills much of a
    /// datagram by itself and never waits; nor does anything while nothing is in flight (a
    /// round trip's request).
    #[inline]
    fn window_too_narrow(&self, window: usize) -> bool {
        // Checked first, in this order: a round trip's message finds nothing in flight.
        let in_flight = self.inflight.len();
        if in_flight == 0 || (window - in_flight.min(window)) * NARROW_WINDOW >= window {
            return false;
        }
        let free = window - in_flight;
        let next = self.cut_index();
        if self.msgs.len().saturating_sub(next) <= free {
            return false;
        }
        self.msgs
            .get(next)
            .is_some_and(|m| m.data.len() - m.cut < NARROW_WINDOW_SMALL)
    }

    /// Appends DATA frames to `out` while they fit in `max_len` bytes: retransmissions first,
    /// then new fragments of at most `frag` bytes. Returns the number of frames written and
    /// how many of them were retransmissions. With `gather`, a large fragment's payload is not
    /// copied: its frame is the last, and [`SendState::take_tail`] names the payload.
    pub(crate) fn write_frames(
        &mut self,
        now: Instant,
        out: &mut Vec<u8>,
        max_len: usize,
        frag: usize,
        window: usize,
        gather: bool,
    ) -> (usize, usize) {
        self.tail = None;
        let mut frames = 0;
        let mut retransmits = 0;
        while let Some(&seq) = self.retx.front() {
            let Some(idx) = self.index_of(seq) else {
                self.retx.pop_front();
                continue;
            };
            let Some(sent) = self.inflight.get(idx) else {
                self.retx.pop_front();
                continue;
            };
            if sent.acked {
                self.retx.pop_front();
                continue;
            }
            let need = wire::DATA_FRAME_OVERHEAD + sent.len as usize;
            if out.len() + need > max_len {
                return (frames, retransmits);
            }
            self.retx.pop_front();
            let (msg_id, offset, len) = (sent.msg_id, sent.offset, sent.len);
            self.write_fragment(out, seq, msg_id, offset, len, gather);
            if let Some(sent) = self.inflight.get_mut(idx) {
                sent.sent_at = now;
                sent.retransmitted = true;
                sent.queued_for_retx = false;
            }
            frames += 1;
            retransmits += 1;
            if self.tail.is_some() {
                break;
            }
        }
        while self.tail.is_none() && self.has_new(window) {
            let idx = self.cut_index();
            let Some(msg) = self.msgs.get(idx) else { break };
            let remaining = msg.data.len() - msg.cut;
            let len = remaining.min(frag);
            if out.len() + wire::DATA_FRAME_OVERHEAD + len > max_len {
                break;
            }
            let seq = self.next_seq;
            let offset = msg.cut as u32;
            let msg_id = self.cut_msg_id;
            self.write_fragment(out, seq, msg_id, offset, len as u32, gather);
            if let Some(msg) = self.msgs.get_mut(idx) {
                msg.cut += len;
                if msg.cut == msg.data.len() {
                    msg.fully_cut = true;
                    msg.last_seq = seq;
                    self.cut_msg_id += 1;
                }
            }
            self.inflight.push_back(Sent {
                msg_id,
                offset,
                len: len as u32,
                sent_at: now,
                acked: false,
                retransmitted: false,
                queued_for_retx: false,
                fast_retx_done: false,
            });
            self.unacked += 1;
            self.next_seq += 1;
            frames += 1;
        }
        if frames > 0 && self.rto_deadline.is_none() {
            self.rto_deadline = Some(now + self.rtt.rto(self.backoff));
        }
        (frames, retransmits)
    }

    // Inlined: this is on every small message's path (an out-of-line call measured ~150
    // instructions more per frame); the rarer large and in-place fragments go out of line.
    #[inline(always)]
    fn write_fragment(
        &mut self,
        out: &mut Vec<u8>,
        seq: u64,
        msg_id: u64,
        offset: u32,
        len: u32,
        gather: bool,
    ) {
        let idx = (msg_id - self.first_msg_id) as usize;
        let Some(msg) = self.msgs.get(idx) else {
            return;
        };
        let start = offset as usize;
        if msg.data.body().is_none() && !(gather && len as usize >= GATHER_MIN) {
            // The common small message: all owned bytes, copied into the datagram.
            let bytes = msg
                .data
                .head()
                .get(start..start + len as usize)
                .unwrap_or_default();
            // Messages are limited to `max_message <= u32::MAX` at `send`.
            wire::write_data(out, seq, msg.data.len() as u32, offset, bytes);
            return;
        }
        self.write_large_fragment(out, seq, idx, offset, len, gather);
    }

    /// [`SendState::write_fragment`] of a fragment that is gathered or has in-place bytes.
    #[inline(never)]
    fn write_large_fragment(
        &mut self,
        out: &mut Vec<u8>,
        seq: u64,
        idx: usize,
        offset: u32,
        len: u32,
        gather: bool,
    ) {
        let Some(msg) = self.msgs.get(idx) else {
            return;
        };
        let start = offset as usize;
        // Fragments lie inside their message (cut from it, or recorded when cut), so `split`
        // cannot fail for them.
        let Ok((in_head, in_body)) = msg.data.split(start, len as usize) else {
            return;
        };
        wire::write_data_header(out, seq, msg.data.len() as u32, offset, len);
        if gather && len as usize >= GATHER_MIN {
            // The payload goes to the kernel from the message: a piece in the in-place body
            // straight from its region (the few head bytes before it are copied), otherwise
            // from the head.
            self.tail = Some(match in_body {
                Some((from, n)) => {
                    if let Some((a, b)) = in_head {
                        out.extend_from_slice(&msg.data.head()[a..b]);
                    }
                    TailRef {
                        idx,
                        start: from,
                        len: n,
                        in_body: true,
                    }
                }
                None => TailRef {
                    idx,
                    start,
                    len: len as usize,
                    in_body: false,
                },
            });
            return;
        }
        // Cannot fail: checked by `split` above.
        let _ = msg.data.append_range(start, len as usize, out);
    }

    /// Whether the last `write_frames` left a payload for [`SendState::take_tail`].
    pub(crate) fn has_tail(&self) -> bool {
        self.tail.is_some()
    }

    /// The payload the last `write_frames` left for a gathering send (empty if none).
    pub(crate) fn take_tail(&mut self) -> Tail<'_> {
        let Some(t) = self.tail.take() else {
            return Tail::NONE;
        };
        let Some(msg) = self.msgs.get(t.idx) else {
            return Tail::NONE;
        };
        match (t.in_body, msg.data.body()) {
            (true, Some(span)) => Tail::Span {
                span,
                from: t.start,
                len: t.len,
            },
            _ => Tail::Bytes(
                msg.data
                    .head()
                    .get(t.start..t.start + t.len)
                    .unwrap_or_default(),
            ),
        }
    }

    fn index_of(&self, seq: u64) -> Option<usize> {
        if seq < self.snd_una || seq >= self.next_seq {
            return None;
        }
        Some((seq - self.snd_una) as usize)
    }

    /// Processes an acknowledgement.
    pub(crate) fn on_ack(
        &mut self,
        now: Instant,
        ack: &AckView<'_>,
        spare: &mut Vec<Vec<u8>>,
    ) -> AckOutcome {
        let mut outcome = AckOutcome::default();
        let beyond = |s: u64| s > self.next_seq;
        if beyond(ack.cumulative) || ack.ranges().any(|r| beyond(r.end)) {
            outcome.bogus = true;
            return outcome;
        }
        // RTT sample from the largest acknowledged frame, if this ack is the first to cover it
        // and it was sent only once (Karn: a retransmitted frame's ack is ambiguous).
        if let Some(sent) = self
            .index_of(ack.largest)
            .and_then(|i| self.inflight.get(i))
        {
            if !sent.acked && !sent.retransmitted {
                let covered = ack.largest < ack.cumulative
                    || ack
                        .ranges()
                        .any(|r| (r.start..r.end).contains(&ack.largest));
                if covered {
                    let rtt = now.saturating_duration_since(sent.sent_at);
                    let delay = Duration::from_micros(u64::from(ack.ack_delay_us));
                    // A peer claiming more delay than the whole round trip is ignored.
                    self.rtt.sample(rtt.checked_sub(delay).unwrap_or(rtt));
                }
            }
        }
        for r in ack.ranges() {
            let lo = r.start.max(self.snd_una);
            for seq in lo..r.end {
                if let Some(sent) = self.index_of(seq).and_then(|i| self.inflight.get_mut(i)) {
                    if !sent.acked {
                        sent.acked = true;
                        self.unacked -= 1;
                        outcome.progress = true;
                    }
                }
            }
            self.largest_acked_end = self.largest_acked_end.max(r.end);
        }
        if ack.cumulative > self.snd_una {
            outcome.progress = true;
            while self.snd_una < ack.cumulative {
                if let Some(sent) = self.inflight.pop_front() {
                    if !sent.acked {
                        self.unacked -= 1;
                    }
                }
                self.snd_una += 1;
            }
            self.largest_acked_end = self.largest_acked_end.max(ack.cumulative);
            self.release_messages(spare, ack.fence);
        }
        outcome.fast_lost = self.detect_reorder_losses(now);
        if outcome.progress {
            self.backoff = 0;
            self.last_progress = now;
            self.rto_deadline = (self.unacked > 0).then(|| now + self.rtt.rto(0));
        }
        outcome
    }

    /// Frees messages whose every fragment lies below `snd_una`; small buffers go to `spare`
    /// for the next messages (see [`keep_spare`]). A message that asked for a confirmation
    /// waits for it until `peer_fence` messages from the peer (the releasing ack's `fence`)
    /// have been delivered here.
    fn release_messages(&mut self, spare: &mut Vec<Vec<u8>>, peer_fence: u64) {
        while let Some(front) = self.msgs.front() {
            if !(front.fully_cut && front.last_seq < self.snd_una) {
                break;
            }
            self.queued_bytes -= front.data.len();
            if let Some(m) = self.msgs.pop_front() {
                self.awaited -= usize::from(m.data.is_awaited());
                if let Some(token) = m.data.confirm() {
                    self.confirms.push_back((token, peer_fence));
                }
                keep_spare(spare, m.data.into_parts().0);
            }
            self.first_msg_id += 1;
        }
    }

    /// Marks unacknowledged frames at least `REORDER_THRESHOLD` below the largest acked one,
    /// and sent at least 9/8 SRTT ago (so mere reordering is not taken for loss), as lost,
    /// once per frame. Amortised O(1): the cursor only moves forward; it stops at the first
    /// frame too young to judge, which a later ack or the retransmission timer covers.
    fn detect_reorder_losses(&mut self, now: Instant) -> u64 {
        let limit = self.largest_acked_end.saturating_sub(REORDER_THRESHOLD);
        let min_age = self.rtt.srtt().map_or(Duration::ZERO, |s| s * 9 / 8);
        let mut lost = 0;
        self.fast_cursor = self.fast_cursor.max(self.snd_una);
        while self.fast_cursor < limit {
            let seq = self.fast_cursor;
            if let Some(sent) = self.index_of(seq).and_then(|i| self.inflight.get_mut(i)) {
                if !sent.acked && !sent.fast_retx_done && !sent.queued_for_retx {
                    if sent.sent_at + min_age > now {
                        break;
                    }
                    sent.fast_retx_done = true;
                    sent.queued_for_retx = true;
                    self.retx.push_back(seq);
                    lost += 1;
                }
            }
            self.fast_cursor += 1;
        }
        lost
    }

    /// The retransmission timer fired: every unacknowledged frame older than the current
    /// timeout is queued again and the timeout backs off. Returns how many were queued.
    /// O(window), but only once per timeout, never per datagram.
    pub(crate) fn on_rto(&mut self, now: Instant) -> u64 {
        let rto = self.rtt.rto(self.backoff);
        let mut queued = 0;
        let mut earliest: Option<Instant> = None;
        for (i, sent) in self.inflight.iter_mut().enumerate() {
            if sent.acked || sent.queued_for_retx {
                continue;
            }
            if sent.sent_at + rto <= now {
                sent.queued_for_retx = true;
                self.retx.push_back(self.snd_una + i as u64);
                queued += 1;
            } else {
                earliest = Some(earliest.map_or(sent.sent_at, |e| e.min(sent.sent_at)));
            }
        }
        if queued > 0 {
            self.backoff = self.backoff.saturating_add(1);
            self.rto_deadline = Some(now + self.rtt.rto(self.backoff));
        } else {
            // Nothing was old enough (the timer was armed for frames since acknowledged):
            // re-arm for the oldest unacknowledged frame without backing off.
            self.rto_deadline = earliest.map(|t| t + rto);
        }
        queued
    }
}

/// Most message buffers kept for reuse, and the largest capacity kept: enough for the small
/// messages of a round trip to never allocate, without pinning the buffers of large ones.
pub(crate) const SPARE_BUFFERS: usize = 64;
/// See [`SPARE_BUFFERS`].
pub(crate) const SPARE_CAPACITY: usize = 16 * 1024;

/// Keeps `buf` in `spare` for reuse if it is small and there is room.
pub(crate) fn keep_spare(spare: &mut Vec<Vec<u8>>, mut buf: Vec<u8>) {
    if spare.len() < SPARE_BUFFERS && buf.capacity() <= SPARE_CAPACITY {
        buf.clear();
        spare.push(buf);
    }
}
