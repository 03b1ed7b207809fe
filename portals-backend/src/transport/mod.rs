//! Sans-IO reliable, exactly-once, in-order message delivery between interfaces.
//!
//! A [`Transport`] never touches a socket or a clock: datagrams and the current time go in
//! ([`Transport::handle_datagram`], [`Transport::handle_timeout`]), and datagrams, deadlines
//! and events come out ([`Transport::poll_transmit`], [`Transport::poll_timeout`],
//! [`Transport::poll_event`]). The driver (UDP or the simulated network) loops:
//! feed every received datagram, let the layer above react to the events (it may `send`
//! answers), then drain `poll_transmit`, then wait until `poll_timeout` or the next datagram.
//!
//! Per peer, messages are cut into fragments that each get a sequence number. The receiver
//! consumes frames in sequence order (early ones wait in a bounded reorder buffer), which gives
//! in-order, exactly-once delivery and makes reassembly an append. Acks are cumulative with
//! selective ranges; the sender retransmits on a timeout derived from the measured RTT (with
//! exponential backoff) and, earlier, for a frame three sequence numbers behind the largest
//! acknowledged one.
//!
//! **Ack policy.** Acks ride on DATA whenever there is DATA for that peer. A standalone ACK is
//! written by `poll_transmit` when nothing can be sent to the peer and either a gap or
//! duplicate was seen, `ack_every` frames arrived unacknowledged, or `ack_delay` passed. A
//! completed message does not force an ack: a request's answer carries it, and the ack of an
//! answer rides on the application's next request (a real driver transmits right after
//! handling a datagram, before the application has had a chance to send, so acking at once
//! would cost a datagram per round trip). So a request/response exchange costs one datagram
//! each way, and a stream of large messages is acked every `ack_every` frames, which keeps
//! the sender's window open without an ack per datagram.
//!
//! **Narrow windows.** With frames in flight, small new messages wait while less than a
//! quarter of the window is free and more of them are queued than it has room for; they then
//! leave several to a datagram (see `SendState::window_too_narrow`). A sender that outruns its
//! receiver would otherwise settle into one small message per datagram.
//!
//! **Confirmations.** A message sent with a token ([`OutMessage::confirmed_as`]) is reported
//! back ([`TransportEvent::Confirmed`]) once the peer acknowledged it and every *fenced*
//! message ([`OutMessage::fenced`]) the peer had queued to this side before writing that
//! acknowledgement has been delivered here: each ACK frame carries the count of its writer's
//! messages up to the last fenced one. The Portals engine confirms its
//! [`crate::types::AckReq::Confirmed`] puts this way and fences the ACK that refuses one, so a
//! refusal is never overtaken by a confirmation, even when its datagram is lost.
//!
//! **Leaving.** An interface that stops runs a departure handshake first (BYE frames, see
//! `depart`): [`Transport::leave`] and [`Transport::left`].

mod config;
mod depart;
mod peers;
mod recv;
mod rtt;
mod send;
mod settle;
mod timers;

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

use crate::message::{OutMessage, Tail};
use crate::types::PhysId;
use crate::wire::{self, Datagram, Frame, Header, WireError};
pub use config::{
    window_for, TransportConfig, DEFAULT_FRAGMENT_SIZE, DEFAULT_WINDOW, MAX_UDP_PAYLOAD,
    MIN_DATAGRAM,
};
use recv::{Budget, DataOutcome, RecvState};
use rtt::RttEstimator;
use send::SendState;

/// Errors of the transport's API.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// `send`: the message exceeds `max_message`.
    #[error("send: message of {len} bytes exceeds max_message {max}")]
    TooLarge {
        /// Message length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// `send`: the peer was declared failed (silent past the peer timeout, or restarted).
    #[error("send: peer {peer} has failed")]
    PeerFailed {
        /// The peer.
        peer: PhysId,
    },
    /// `Transport::new`: a configuration value is unusable.
    #[error("transport config: {field}: {reason}")]
    InvalidConfig {
        /// The field.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// `Transport::new`: incarnation 0 is reserved for "unknown".
    #[error("transport incarnation must be non-zero")]
    ZeroIncarnation,
}

/// Something the layer above must learn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TransportEvent {
    /// A whole message arrived (in order, exactly once).
    Delivered {
        /// The sender.
        from: PhysId,
        /// The message bytes.
        message: Vec<u8>,
    },
    /// The peer stayed silent past the peer timeout with data outstanding, or restarted. Its
    /// queued messages were dropped and later `send`s to it fail. Reported once per peer.
    PeerFailed {
        /// The peer.
        peer: PhysId,
    },
    /// A message sent with a confirmation token ([`OutMessage::confirmed_as`]) is confirmed:
    /// the peer acknowledged it, and every fenced message ([`OutMessage::fenced`]) the peer
    /// had queued to this interface when it wrote that acknowledgement has been delivered
    /// here (so a refusal that the peer's layer above answered it with arrived first).
    /// Reported once per message, in the order the messages were sent, and never for a
    /// message to a peer that failed.
    Confirmed {
        /// The peer the message went to.
        peer: PhysId,
        /// The message's token.
        token: u64,
    },
}

/// Counters for diagnostics and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransportStats {
    /// Datagrams handed to `handle_datagram`.
    pub datagrams_in: u64,
    /// Datagrams produced by `poll_transmit`.
    pub datagrams_out: u64,
    /// Bytes handed in.
    pub bytes_in: u64,
    /// Bytes produced.
    pub bytes_out: u64,
    /// DATA frames written, first transmissions and retransmissions.
    pub data_frames_sent: u64,
    /// DATA frames written again.
    pub retransmits: u64,
    /// Frames declared lost by the reorder threshold (fast retransmit).
    pub fast_losses: u64,
    /// Retransmission timer expirations that queued frames.
    pub rto_expirations: u64,
    /// Datagrams that carried only an ack.
    pub standalone_acks: u64,
    /// Acks that rode on a DATA datagram.
    pub piggybacked_acks: u64,
    /// Messages accepted by `send`.
    pub messages_sent: u64,
    /// Messages delivered.
    pub messages_delivered: u64,
    /// DATA frames received again (already consumed or stashed) and suppressed.
    pub duplicates: u64,
    /// Dropped: wrong magic.
    pub dropped_bad_magic: u64,
    /// Dropped: unsupported version.
    pub dropped_bad_version: u64,
    /// Dropped: another job's key.
    pub dropped_foreign_job: u64,
    /// Dropped: malformed (truncated, bad lengths, unknown frame, bad ranges, zero incarnation).
    pub dropped_malformed: u64,
    /// Dropped: addressed to an earlier incarnation of this transport, or from a peer that is
    /// marked failed.
    pub dropped_stale: u64,
    /// DATA frames dropped: beyond the receive window.
    pub dropped_out_of_window: u64,
    /// DATA frames dropped: no reassembly memory (the sender retransmits).
    pub dropped_no_memory: u64,
    /// DATA frames dropped: message larger than `max_message`.
    pub dropped_too_large: u64,
    /// DATA frames dropped: inconsistent with the message being reassembled.
    pub dropped_inconsistent: u64,
    /// Acks naming sequence numbers never sent (ignored).
    pub bogus_acks: u64,
    /// Peers declared failed.
    pub peers_failed: u64,
    /// Peers seen with a new incarnation (a restart; also counted in `peers_failed`).
    pub peer_restarts: u64,
    /// Peers that said their program ended or that they are leaving (see
    /// [`Transport::peer_ended`]), each counted once.
    pub peers_leaving: u64,
    /// Highest reassembly/reorder memory in use, bytes.
    pub reassembly_high_water: usize,
    /// Most frames ever in one peer's send window.
    pub max_in_window: usize,
}

struct Peer {
    /// The peer's address.
    id: PhysId,
    /// The peer's incarnation, 0 until heard from.
    remote_inc: u64,
    failed: bool,
    send: SendState,
    recv: RecvState,
    in_ready: bool,
    /// The deadline registered in `Transport::timers`.
    timer: Option<Instant>,
    /// An acknowledgement received (with its arrival time) but not yet applied, see `settle`.
    deferred_ack: Option<settle::DeferredAck>,
    /// Listed in `Transport::unsettled`.
    unsettled: bool,
    /// The departure handshake with this peer (see `depart`).
    departure: depart::Departure,
}

impl Peer {
    /// Reports the delivery confirmations that now hold (see [`TransportEvent::Confirmed`]):
    /// call after applying an ack and after delivering messages from the peer.
    #[inline]
    fn emit_confirmed(&mut self, events: &mut VecDeque<TransportEvent>) {
        if self.send.confirms_pending() {
            let peer = self.id;
            self.send.take_confirmed(self.recv.delivered, |token| {
                events.push_back(TransportEvent::Confirmed { peer, token })
            });
        }
    }
}

/// The sans-IO transport of one interface. See the module docs.
pub struct Transport {
    cfg: TransportConfig,
    local: PhysId,
    incarnation: u64,
    frag: usize,
    peers: peers::PeerTable,
    /// Peers (slots) that may have something to transmit, round-robin.
    ready: VecDeque<usize>,
    timers: BTreeSet<(Instant, usize)>,
    events: VecDeque<TransportEvent>,
    /// Peers to tell our incarnation (they addressed an earlier one).
    resets: VecDeque<PhysId>,
    /// BYE frames to send, each in a datagram of its own (see `depart`).
    byes: Vec<(PhysId, wire::Bye)>,
    budget: Budget,
    stats: TransportStats,
    due: Vec<usize>,
    /// Peers (slots) with a deferred ack or a timer to recompute (see `settle`).
    unsettled: Vec<usize>,
    /// When the oldest entry of `unsettled` was added: `poll_timeout` reports it as due.
    unsettled_since: Option<Instant>,
    /// A datagram left since the last settlement: the driver's next `poll_transmit`, which
    /// runs after the send system call, settles.
    sent_since_settle: bool,
    /// The peer whose datagram, just written, left a payload in its message (a gathering
    /// send).
    tail_slot: Option<usize>,
    /// Buffers of acknowledged messages, for the layer above to build new ones in
    /// ([`Transport::spare_buffers`]).
    spare: Vec<Vec<u8>>,
    /// Peers (slots) whose held ack their sender waits on ([`Transport::ack_soon`]).
    soon: Vec<usize>,
}

/// A random non-zero incarnation id.
pub fn random_incarnation() -> u64 {
    loop {
        let v: u64 = rand::random();
        if v != 0 {
            return v;
        }
    }
}

impl Transport {
    /// A transport for the interface `local`; `incarnation` must be unique per instance
    /// (use [`random_incarnation`]).
    pub fn new(
        cfg: TransportConfig,
        local: PhysId,
        incarnation: u64,
        now: Instant,
    ) -> Result<Self, TransportError> {
        cfg.validate()?;
        if incarnation == 0 {
            return Err(TransportError::ZeroIncarnation);
        }
        let _ = now; // Nothing is timed until the first message; kept for API symmetry.
        Ok(Transport {
            frag: cfg.fragment_size(),
            budget: Budget {
                used: 0,
                limit: cfg.max_reassembly_bytes,
                reserve: cfg.max_message,
                high_water: 0,
                spare: Vec::new(),
            },
            cfg,
            local,
            incarnation,
            peers: peers::PeerTable::new(),
            ready: VecDeque::new(),
            timers: BTreeSet::new(),
            events: VecDeque::new(),
            resets: VecDeque::new(),
            byes: Vec::new(),
            stats: TransportStats::default(),
            due: Vec::new(),
            unsettled: Vec::new(),
            unsettled_since: None,
            sent_since_settle: false,
            tail_slot: None,
            spare: Vec::new(),
            soon: Vec::new(),
        })
    }

    /// This interface's id.
    pub fn local(&self) -> PhysId {
        self.local
    }

    /// Whether a message of `len` bytes leaves as one fragment whose payload is gathered from
    /// the message ([`Transport::poll_transmit_gather`] returns it as the datagram's tail)
    /// instead of being copied into the datagram.
    pub fn gathers_whole(&self, len: usize) -> bool {
        len <= self.frag && len >= send::GATHER_MIN
    }

    /// This instance's incarnation.
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// The configuration.
    pub fn config(&self) -> &TransportConfig {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> &TransportStats {
        &self.stats
    }

    /// Whether `peer` was declared failed.
    pub fn is_failed(&self, peer: PhysId) -> bool {
        self.peers.by_id(peer).is_some_and(|p| p.failed)
    }

    /// The smoothed RTT to `peer`, once measured.
    pub fn srtt(&self, peer: PhysId) -> Option<Duration> {
        self.peers.by_id(peer).and_then(|p| p.send.rtt.srtt())
    }

    /// Bytes of messages queued or unacknowledged for `peer`.
    pub fn queued_bytes(&self, peer: PhysId) -> usize {
        self.peers.by_id(peer).map_or(0, |p| p.send.queued_bytes())
    }

    fn new_peer(cfg: &TransportConfig, id: PhysId, now: Instant) -> Peer {
        let rtt = RttEstimator::new(cfg.initial_rto, cfg.min_rto, cfg.max_rto, cfg.ack_delay);
        Peer {
            id,
            remote_inc: 0,
            failed: false,
            send: SendState::new(rtt, now),
            recv: RecvState::new(now),
            in_ready: false,
            timer: None,
            deferred_ack: None,
            unsettled: false,
            departure: depart::Departure::default(),
        }
    }

    /// Queues `message` for reliable delivery to `dest`. The message is moved, not copied (an
    /// in-place body is read from its region whenever a fragment of it is sent).
    pub fn send(
        &mut self,
        now: Instant,
        dest: PhysId,
        message: impl Into<OutMessage>,
    ) -> Result<(), TransportError> {
        let message = message.into();
        if message.len() > self.cfg.max_message {
            return Err(TransportError::TooLarge {
                len: message.len(),
                max: self.cfg.max_message,
            });
        }
        let cfg = &self.cfg;
        let slot = self
            .peers
            .slot_or_insert(dest, || Self::new_peer(cfg, dest, now));
        let Some(peer) = self.peers.get_mut(slot) else {
            return Err(TransportError::PeerFailed { peer: dest });
        };
        if peer.failed {
            return Err(TransportError::PeerFailed { peer: dest });
        }
        peer.send.push(now, message);
        peer.departure.sent_to();
        self.stats.messages_sent += 1;
        // No timer changes until frames leave: the peer is ready, and `poll_transmit`
        // reschedules it after writing them (a timer lookup per message saved).
        if !peer.in_ready {
            peer.in_ready = true;
            self.ready.push_back(slot);
        }
        Ok(())
    }

    fn mark_ready(&mut self, slot: usize) {
        if let Some(peer) = self.peers.get_mut(slot) {
            if !peer.in_ready && !peer.failed {
                peer.in_ready = true;
                self.ready.push_back(slot);
            }
        }
    }

    /// Processes one received datagram from `from`. Bad datagrams are counted and dropped;
    /// delivered messages become [`TransportEvent::Delivered`] events (copied out of the
    /// datagram).
    pub fn handle_datagram(&mut self, now: Instant, from: PhysId, datagram: &[u8]) {
        let mut queued = Vec::new();
        let before = self.events.len();
        self.handle_datagram_with(now, from, datagram, &mut |_, m| queued.push(m.to_vec()));
        // The datagram's messages go before the confirmations it produced: a fenced message
        // (a refusal) must reach the layer above ahead of the confirmation it overrides.
        let produced: Vec<TransportEvent> = self.events.drain(before..).collect();
        for message in queued {
            self.events
                .push_back(TransportEvent::Delivered { from, message });
        }
        self.events.extend(produced);
    }

    /// [`Transport::handle_datagram`] that hands each delivered message to `sink` as it
    /// completes, borrowed from the datagram (or the reassembly buffer): no copy and no
    /// allocation per message. Messages reach `sink` in order, exactly once.
    pub fn handle_datagram_with(
        &mut self,
        now: Instant,
        from: PhysId,
        datagram: &[u8],
        sink: &mut impl FnMut(PhysId, &[u8]),
    ) {
        self.stats.datagrams_in += 1;
        self.stats.bytes_in += datagram.len() as u64;
        let dg = match Datagram::parse(datagram, self.cfg.job_key) {
            Ok(dg) => dg,
            Err(e) => {
                self.count_wire_error(&e);
                return;
            }
        };
        let cfg = &self.cfg;
        let slot = self
            .peers
            .slot_or_insert(from, || Self::new_peer(cfg, from, now));
        let Some(peer) = self.peers.get_mut(slot) else {
            return;
        };
        if peer.failed {
            self.stats.dropped_stale += 1;
            return;
        }
        let src = dg.header.src_incarnation;
        if peer.remote_inc == 0 {
            peer.remote_inc = src;
        } else if peer.remote_inc != src {
            // A new process at the same address: the old one is gone, with whatever it had
            // not yet delivered. Reported as a failure of the old peer.
            self.stats.peer_restarts += 1;
            self.stats.dropped_stale += 1;
            self.fail_peer(slot, now);
            return;
        }
        let dst = dg.header.dst_incarnation;
        if dst != 0 && dst != self.incarnation {
            // Meant for an earlier incarnation of this interface: tell the sender who we are
            // now, so it fails its state for the old one instead of retransmitting forever.
            self.stats.dropped_stale += 1;
            if !self.resets.contains(&from) && self.resets.len() < 1024 {
                self.resets.push_back(from);
            }
            return;
        }
        let window = self.cfg.window;
        let accepted = self.cfg.accepted_window();
        let max_message = self.cfg.max_message;
        let ack_delay = self.cfg.ack_delay;
        let stats = &mut self.stats;
        let budget = &mut self.budget;
        let byes = &mut self.byes;
        let mut newly_leaving = false;
        let mut had_data = false;
        let mut tally = settle::AckTally::new(&mut self.spare);
        let mut deliver = |message: &[u8]| {
            stats.messages_delivered += 1;
            sink(from, message);
        };
        for frame in dg.frames() {
            let Ok(frame) = frame else { break };
            match frame {
                Frame::Ack(ack) => {
                    // Applied later, after this interface's answer has left (`settle`), unless
                    // sending may depend on it.
                    tally.apply_or_defer(peer, &ack, now, window);
                }
                Frame::Data(data) => {
                    had_data = true;
                    let outcome = peer.recv.on_data(
                        now,
                        &data,
                        accepted,
                        max_message,
                        ack_delay,
                        budget,
                        &mut deliver,
                    );
                    match outcome {
                        DataOutcome::Accepted => {}
                        DataOutcome::Duplicate => stats.duplicates += 1,
                        DataOutcome::OutOfWindow => stats.dropped_out_of_window += 1,
                        DataOutcome::NoMemory => stats.dropped_no_memory += 1,
                        DataOutcome::TooLarge => stats.dropped_too_large += 1,
                        DataOutcome::Inconsistent => stats.dropped_inconsistent += 1,
                    }
                }
                Frame::Bye(bye) => {
                    newly_leaving |= depart::on_bye(peer, bye, byes);
                }
            }
        }
        if !had_data && peer.send.confirmation_awaited() {
            // A bare ack while the program waits on a confirmation it may bring (a put with
            // a confirmed acknowledgement, `OutMessage::mark_awaited`): applied now, so that
            // the wait ends on this datagram instead of after the driver's next, usually
            // empty, receive. An ack that came with data stays deferred: the data is what a
            // ping-pong waits for, and its answer leaves first.
            if let Some(d) = peer.deferred_ack.take() {
                tally.apply_deferred(peer, d);
            }
        }
        tally.record(&mut self.stats);
        peer.emit_confirmed(&mut self.events);
        self.stats.peers_leaving += u64::from(newly_leaving);
        self.stats.reassembly_high_water = self.budget.high_water;
        // Ready only for an ack that is due now (or data): a pending ack that may wait rides
        // the next data to this peer or leaves at its timer, and a driver's transmit pass
        // between now and then finds nothing to do instead of re-arming the timer.
        let wants_tx = peer.recv.ack_due(now, self.cfg.ack_every) || peer.send.has_sendable(window);
        let list = !peer.unsettled;
        peer.unsettled = true;
        if list {
            self.unsettled.push(slot);
        }
        self.unsettled_since.get_or_insert(now);
        if wants_tx && !peer.in_ready {
            peer.in_ready = true;
            self.ready.push_back(slot);
        }
    }

    fn count_wire_error(&mut self, e: &WireError) {
        let s = &mut self.stats;
        match e {
            WireError::BadMagic(_) => s.dropped_bad_magic += 1,
            WireError::BadVersion(_) => s.dropped_bad_version += 1,
            WireError::ForeignJob { .. } => s.dropped_foreign_job += 1,
            _ => s.dropped_malformed += 1,
        }
    }

    /// Writes the next datagram to send into `out` (cleared first) and returns its
    /// destination, or `None` when nothing is to be sent now.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PhysId> {
        self.poll_transmit_inner(now, out, false)
    }

    /// Like [`Transport::poll_transmit`], for a driver that can send a datagram from two
    /// pieces (`sendmsg` with two I/O vectors): the datagram is `out` followed by the returned
    /// tail, which borrows a large fragment's payload straight from its queued message (or from
    /// the region of the message's in-place body) instead of copying it into `out` (the tail is
    /// empty for datagrams without one).
    #[inline]
    pub fn poll_transmit_gather(
        &mut self,
        now: Instant,
        out: &mut Vec<u8>,
    ) -> Option<(PhysId, Tail<'_>)> {
        let to = self.poll_transmit_inner(now, out, true)?;
        let Some(slot) = self.tail_slot.take() else {
            return Some((to, Tail::NONE));
        };
        let Transport { peers, stats, .. } = self;
        let tail = peers
            .get_mut(slot)
            .map_or(Tail::NONE, |p| p.send.take_tail());
        stats.bytes_out += tail.len() as u64;
        Some((to, tail))
    }

    fn poll_transmit_inner(
        &mut self,
        now: Instant,
        out: &mut Vec<u8>,
        gather: bool,
    ) -> Option<PhysId> {
        out.clear();
        if let Some(to) = self.resets.pop_front() {
            // A bare header: it tells the peer this interface's incarnation.
            self.write_header_to(out, to);
            self.count_out(out);
            return Some(to);
        }
        if let Some((to, bye)) = self.byes.pop() {
            self.write_header_to(out, to);
            wire::write_bye(out, bye);
            self.count_out(out);
            return Some(to);
        }
        loop {
            if let Some(id) = self.transmit_ready(now, out, gather) {
                return Some(id);
            }
            // Nothing (more) to send: the datagrams of this pass have left, so the work that
            // was kept off their path is done now, and it may make a peer ready again.
            if !(self.sent_since_settle && self.settle()) {
                return None;
            }
        }
    }

    /// The part of `poll_transmit_inner` that visits the ready peers.
    fn transmit_ready(&mut self, now: Instant, out: &mut Vec<u8>, gather: bool) -> Option<PhysId> {
        let window = self.cfg.window;
        while let Some(slot) = self.ready.pop_front() {
            let Some(peer) = self.peers.get_mut(slot) else {
                continue;
            };
            peer.in_ready = false;
            if peer.failed {
                continue;
            }
            if !peer.send.window_open(window) {
                if let Some(d) = peer.deferred_ack.take() {
                    let mut tally = settle::AckTally::new(&mut self.spare);
                    tally.apply_deferred(peer, d);
                    tally.record(&mut self.stats);
                    peer.emit_confirmed(&mut self.events);
                }
            }
            let has_data = peer.send.has_sendable(window);
            let ack_due = peer.recv.ack_due(now, self.cfg.ack_every);
            if !has_data && !ack_due {
                // A pending ack that is not yet due waits for its timer (or for data).
                self.reschedule(slot);
                continue;
            }
            out.clear();
            wire::write_header(
                out,
                &Header {
                    job_key: self.cfg.job_key,
                    src_incarnation: self.incarnation,
                    dst_incarnation: peer.remote_inc,
                },
            );
            let with_ack = peer.recv.ack_pending;
            if with_ack {
                let fence = peer.send.fence();
                peer.recv.write_ack(now, out, fence);
            }
            let (frames, retransmits) =
                peer.send
                    .write_frames(now, out, self.cfg.max_datagram, self.frag, window, gather);
            if frames == 0 && !with_ack {
                // Only stale retransmission entries were queued.
                out.clear();
                self.reschedule(slot);
                continue;
            }
            self.stats.data_frames_sent += frames as u64;
            self.stats.retransmits += retransmits as u64;
            self.stats.max_in_window = self.stats.max_in_window.max(peer.send.in_window());
            if with_ack {
                if frames == 0 {
                    self.stats.standalone_acks += 1;
                } else {
                    self.stats.piggybacked_acks += 1;
                }
            }
            // Through `peer`, not by id: each lookup by id hashes the address again.
            if peer.send.has_sendable(window) {
                peer.in_ready = true;
                self.ready.push_back(slot);
            }
            // The timer is recomputed after the send (`settle`).
            if !peer.unsettled {
                peer.unsettled = true;
                self.unsettled.push(slot);
            }
            self.unsettled_since.get_or_insert(now);
            self.sent_since_settle = true;
            self.tail_slot = peer.send.has_tail().then_some(slot);
            let id = peer.id;
            self.count_out(out);
            return Some(id);
        }
        None
    }

    /// Appends the header of a datagram to `to`.
    fn write_header_to(&self, out: &mut Vec<u8>, to: PhysId) {
        let dst_incarnation = self.peers.by_id(to).map_or(0, |p| p.remote_inc);
        wire::write_header(
            out,
            &Header {
                job_key: self.cfg.job_key,
                src_incarnation: self.incarnation,
                dst_incarnation,
            },
        );
    }

    fn count_out(&mut self, out: &[u8]) {
        self.stats.datagrams_out += 1;
        self.stats.bytes_out += out.len() as u64;
    }

    /// Whether a peer may have a datagram to send now ([`Transport::poll_transmit`] would
    /// look at it); `false` means a transmit call would find nothing.
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty() || !self.resets.is_empty() || !self.byes.is_empty()
    }

    /// Buffers of messages the peers acknowledged, emptied and kept for reuse: a layer that
    /// builds messages takes them from here instead of allocating (small ones only, a bounded
    /// number).
    pub fn spare_buffers(&mut self) -> &mut Vec<Vec<u8>> {
        &mut self.spare
    }

    /// Whether a [`Transport::poll_transmit`] pass has anything to do: a datagram to write,
    /// or the bookkeeping that follows the datagrams of the last pass (see `settle`). `false`
    /// lets a driver skip the pass.
    pub fn wants_transmit(&self) -> bool {
        self.has_ready() || self.sent_since_settle
    }

    /// The next event for the layer above.
    pub fn poll_event(&mut self) -> Option<TransportEvent> {
        self.events.pop_front()
    }

    /// Whether [`Transport::poll_event`] has anything.
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }
}

#[cfg(test)]
mod narrow_window_tests;
#[cfg(test)]
mod restamp_tests;
#[cfg(test)]
mod tests;
