//! One interface's protocol stack without I/O: the Portals [`Engine`] on top of the reliable
//! [`Transport`]. Both layers are sans-IO; this glue moves messages between them, loops
//! messages addressed to the interface itself straight back into the engine, and turns a
//! transport's peer failure into failed operations. The UDP driver ([`crate::interface`]) and
//! the simulated-network tests both drive a `Stack`.
//!
//! It hands the engine the transport's delivery confirmations, which complete the puts sent
//! with [`crate::types::AckReq::Confirmed`] (an rgasnet extension; rgasnet's active messages
//! use it): such a put costs its target no ACK message unless the target refuses, fails or
//! truncates it. A confirmation may not overtake such an ACK, so whatever the engine answers
//! a delivered message with is handed to the transport before the transport can write its next
//! acknowledgement ([`Stack::handle_datagram`] pumps when the engine has anything to send), and
//! the ACK is *fenced* ([`crate::message::OutMessage::fenced`]): the initiator confirms
//! nothing on an acknowledgement written after it until the ACK itself has arrived.
//!
//! It also holds back lazy acknowledgements ([`crate::types::PtOptions::LAZY_ACK`], an rgasnet
//! extension): a successful ACK of a put to such a portal waits, at most
//! [`DEFAULT_LAZY_ACK_DELAY`], for another message to the same peer and then leaves in the same
//! datagram. Active messages used them before they moved to confirmed puts (the measurements
//! below are from then): an AM request's ACK rode the reply, and the reply's ACK the
//! requester's next request, instead of costing a datagram of their own.
//!
//! Riding is not free on a round trip's path, though: the ACK costs its sender the framing of
//! a second message and its receiver the decoding and the event before the message behind it,
//! about 0.17 µs a side of an AM Short ping-pong on this project's machine (rdtsc probe; AM
//! puts without ACKs measured 1.44 → 1.34–1.37 × the raw UDP round trip). A message that
//! *answers* one ([`Stack::pump_answer`], for an AM reply) therefore leaves alone, and a lone
//! ACK held for its target follows it in a datagram of its own ([`Stack::release_after_send`]):
//! it reaches the requester while that one runs the reply's handler, off the round trip's
//! path. [`LAZY_RIDE_MIN`] or more ACKs held for the target ride even an answer, so a flood of
//! requests adds no datagrams.
//!
//! Only answers do this. Sending every lone ACK after its message was tried: the AM Short
//! ping-pong gained as much, but the 2-rank barrier went from 3.1 to 5.3 µs and the
//! 65,000-byte AM Medium ping-pong from 1.24–1.30 to 1.36–1.37 ×, because after a message
//! that answers nothing (an AM request, a barrier's notification) the peer may be waiting for
//! its next message, and the ACK's datagram, arriving first, costs it a receive. Sending it
//! at the next idle receive instead was slower than riding.

use std::time::{Duration, Instant};

use crate::engine::Engine;
use crate::message::OutMessage;
use crate::transport::{Transport, TransportError, TransportEvent};
use crate::types::PhysId;

/// How long a lazy ACK ([`crate::types::PtOptions::LAZY_ACK`]) waits at most for another
/// message to the same peer to leave with. Long enough to cover a request/reply round trip
/// (a ping-pong's next request then carries the previous reply's ACK), short enough that a
/// sender's buffers come back soon when no traffic follows.
pub const DEFAULT_LAZY_ACK_DELAY: Duration = Duration::from_micros(100);

/// How many lazy ACKs held for one peer ride even an answer to that peer (see the module
/// docs): a request/reply exchange holds one at a time, a flood several.
pub const LAZY_RIDE_MIN: usize = 2;

/// Engine + transport of one interface.
pub struct Stack {
    /// The Portals semantics.
    pub engine: Engine,
    /// Reliable delivery to other interfaces.
    pub transport: Transport,
    local: PhysId,
    /// Lazy ACKs held back, in the order the engine made them.
    lazy: Vec<(PhysId, Vec<u8>)>,
    /// When the oldest held lazy ACK must leave.
    lazy_deadline: Option<Instant>,
    lazy_delay: Duration,
    /// Where a message to this interface with an in-place body is joined (see `handle_own`).
    own_joined: Vec<u8>,
}

impl Stack {
    /// Ties an engine and a transport of the same interface together.
    pub fn new(engine: Engine, transport: Transport) -> Self {
        let local = transport.local();
        Stack {
            engine,
            transport,
            local,
            lazy: Vec::new(),
            lazy_deadline: None,
            lazy_delay: DEFAULT_LAZY_ACK_DELAY,
            own_joined: Vec::new(),
        }
    }

    /// Sets how long a lazy ACK may wait for company ([`DEFAULT_LAZY_ACK_DELAY`]; zero sends
    /// each at once).
    pub fn set_lazy_ack_delay(&mut self, delay: Duration) {
        self.lazy_delay = delay;
    }

    /// The interface's physical id.
    pub fn local(&self) -> PhysId {
        self.local
    }

    /// Moves work between the layers until neither has anything more for the other: the
    /// engine's outgoing messages into the transport (or back into the engine when addressed
    /// to this interface), and the transport's delivered messages and peer failures into the
    /// engine. Call after every API call and after feeding datagrams or timeouts.
    ///
    /// A lazy ACK is held until another message goes to the same peer (it then leaves first,
    /// in the same datagram) or its delay runs out ([`Stack::poll_timeout`] includes it).
    pub fn pump(&mut self, now: Instant) {
        self.pump_as(now, false);
    }

    /// [`Stack::pump`]; with `answering`, lazy ACKs ride only as [`Stack::pump_answer`] says.
    /// Returns the peer the engine's last outgoing message went to, if it sent any.
    fn pump_as(&mut self, now: Instant, answering: bool) -> Option<PhysId> {
        let mut last = None;
        // Buffers of acknowledged messages go back to the engine to build new ones in.
        if !self.transport.spare_buffers().is_empty() {
            self.engine.stock_buffers(self.transport.spare_buffers());
        }
        // Another pass is needed only when the engine was handed something (a message to
        // itself, a transport event, a failed peer), since only that makes it produce more:
        // handing messages to the transport creates no transport events. The common call —
        // one operation's message, nothing received — is then a single pass.
        loop {
            let mut fed = false;
            while let Some((dest, message)) = self.engine.poll_outgoing() {
                if dest == self.local {
                    self.handle_own(message);
                    fed = true;
                    continue;
                }
                fed |= if answering {
                    self.release_riding(now, dest)
                } else {
                    self.release_lazy(now, Some(dest))
                };
                fed |= self.send(now, dest, message);
                last = Some(dest);
            }
            while let Some((dest, message)) = self.engine.poll_lazy_outgoing() {
                if dest == self.local || self.lazy_delay.is_zero() {
                    fed |= self.release_lazy(now, Some(dest));
                    fed |= self.send(now, dest, message.into());
                    continue;
                }
                if self.lazy.is_empty() {
                    self.lazy_deadline = Some(now + self.lazy_delay);
                }
                self.lazy.push((dest, message));
            }
            if self.lazy_deadline.is_some_and(|d| d <= now) {
                fed |= self.release_lazy(now, None);
            }
            while let Some(ev) = self.transport.poll_event() {
                fed = true;
                match ev {
                    TransportEvent::Delivered { from, message } => {
                        self.engine.handle_message(from, &message)
                    }
                    TransportEvent::PeerFailed { peer } => self.peer_failed(peer),
                    TransportEvent::Confirmed { peer, token } => {
                        self.engine.handle_confirmed(peer, token)
                    }
                }
            }
            if !fed {
                // Messages delivered through transport events, and to this interface itself.
                self.mark_soon_acks();
                return last;
            }
        }
    }

    /// Hands a message to the transport (or back to the engine when it is for this interface).
    /// Returns whether the engine was handed something in turn (the message itself, or the
    /// failure of its peer), which may have made it produce more.
    fn send(&mut self, now: Instant, dest: PhysId, message: OutMessage) -> bool {
        if dest == self.local {
            self.handle_own(message);
            return true;
        }
        match self.transport.send(now, dest, message) {
            Ok(()) => false,
            Err(TransportError::PeerFailed { .. }) => {
                self.peer_failed(dest);
                true
            }
            Err(e) => {
                // A message the transport refuses (too large) cannot be delivered: fail the
                // operations to that peer rather than lose them silently. The engine's own
                // limits keep this from happening.
                tracing::error!(%dest, error = %e, "transport refused a message");
                self.peer_failed(dest);
                true
            }
        }
    }

    /// A confirmed acknowledgement's initiator waits on the transport's ack: it may still
    /// ride on this process's answer, but must not wait out `ack_delay` when none comes (see
    /// [`Stack::release_soon_acks`]).
    fn mark_soon_acks(&mut self) {
        let transport = &mut self.transport;
        self.engine
            .take_silent_confirmations(|peer| transport.ack_soon(peer));
    }

    /// Feeds a message addressed to this interface back into the engine (one with an in-place
    /// body is first joined in a buffer kept for the next).
    fn handle_own(&mut self, message: OutMessage) {
        if message.body().is_none() {
            self.engine.handle_message(self.local, message.head());
            return;
        }
        let mut joined = std::mem::take(&mut self.own_joined);
        joined.clear();
        message.append_all(&mut joined);
        self.engine.handle_message(self.local, &joined);
        self.own_joined = joined;
    }

    fn peer_failed(&mut self, peer: PhysId) {
        self.lazy.retain(|(p, _)| *p != peer);
        if self.lazy.is_empty() {
            self.lazy_deadline = None;
        }
        self.engine.handle_peer_failed(peer);
    }

    /// [`Stack::pump`] after an API call that put an answer (an AM reply): a lone lazy ACK held
    /// for its target stays held, to follow the answer ([`Stack::release_after_send`]) instead
    /// of riding it; [`LAZY_RIDE_MIN`] or more ride. Returns the peer the answer went to (none
    /// when the call sent nothing, or only to this interface itself).
    pub fn pump_answer(&mut self, now: Instant) -> Option<PhysId> {
        self.pump_as(now, true)
    }

    /// Before an answer to `dest` is handed to the transport: the lazy ACKs held for `dest`
    /// go first, into the same datagram, if there are [`LAZY_RIDE_MIN`] or more of them.
    /// Returns whether the engine was handed something in turn (see [`Stack::send`]).
    fn release_riding(&mut self, now: Instant, dest: PhysId) -> bool {
        // Usually none or one is held: no scan.
        if self.lazy.len() < LAZY_RIDE_MIN {
            return false;
        }
        let held = self.lazy.iter().filter(|(p, _)| *p == dest).count();
        held >= LAZY_RIDE_MIN && self.release_lazy(now, Some(dest))
    }

    /// For a driver that has just transmitted an answer to `peer` ([`Stack::pump_answer`]):
    /// hands the lazy ACKs still held for `peer` to the transport, to leave in a datagram of
    /// their own right behind the answer, and pumps. ACKs held for other peers stay held (an
    /// ACK datagram reaching a peer that waits for its next message would cost it a receive).
    /// Returns whether any was held, i.e. whether the driver has another datagram to transmit.
    pub fn release_after_send(&mut self, now: Instant, peer: PhysId) -> bool {
        if !self.lazy.iter().any(|(p, _)| *p == peer) {
            return false;
        }
        self.release_lazy(now, Some(peer));
        self.pump(now);
        true
    }

    /// Sends the held lazy ACKs to `peer` (every peer when `None`), oldest first. Returns
    /// whether the engine was handed something in turn (see [`Stack::send`]).
    fn release_lazy(&mut self, now: Instant, peer: Option<PhysId>) -> bool {
        if self.lazy.is_empty() {
            return false;
        }
        let mut held = std::mem::take(&mut self.lazy);
        let mut kept = Vec::new();
        let mut fed = false;
        for (dest, message) in held.drain(..) {
            if peer.is_none_or(|p| p == dest) {
                fed |= self.send(now, dest, message.into());
            } else {
                kept.push((dest, message));
            }
        }
        // Sending never holds anything new, so `self.lazy` is still empty here. Keep the
        // emptied vector (and its allocation) unless some ACKs stay held.
        self.lazy = if kept.is_empty() { held } else { kept };
        if self.lazy.is_empty() {
            self.lazy_deadline = None;
        }
        fed
    }

    /// Sends every acknowledgement held back, lazy ACKs and the transport's own, with the
    /// next transmit pass (call [`Stack::pump`] and transmit after it): for an interface
    /// about to stop.
    pub fn release_held(&mut self, now: Instant) {
        self.release_lazy(now, None);
        self.transport.ack_now(now);
    }

    /// Whether a message sent to `peer` waits for its delivery confirmation
    /// ([`crate::transport::TransportEvent::Confirmed`]).
    pub fn awaits_confirmation(&self, peer: PhysId) -> bool {
        self.transport.awaits_confirmation(peer)
    }

    /// Whether acks that initiators wait on ([`Transport::ack_soon`]) may still be held.
    pub fn has_soon_acks(&self) -> bool {
        self.transport.has_soon_acks()
    }

    /// Sends the acks that initiators wait on (the silent successes of confirmed
    /// acknowledgements, [`crate::types::AckReq::ConfirmedAck`]) that no answer carried: call
    /// it when this process goes idle (a wait's round that did not end the wait), then
    /// transmit. Held to that point, an ack still rides on the answer a ping-pong's target
    /// sends as soon as its wait ends, and costs no datagram of its own.
    pub fn release_soon_acks(&mut self, now: Instant) {
        self.transport.release_soon_acks(now);
    }

    /// Whether nothing this interface sent still waits for delivery: no message in the
    /// engine's queues, no lazy ACK held, and every message the transport took acknowledged.
    pub fn all_acknowledged(&self) -> bool {
        !self.engine.has_outgoing() && self.lazy.is_empty() && self.transport.all_acknowledged()
    }

    /// Tells the peers that this interface is leaving (the transport's departure handshake,
    /// [`Transport::leave`]); call it only once [`Stack::all_acknowledged`], and repeatedly
    /// until [`Stack::left`].
    pub fn leave(&mut self, now: Instant) {
        self.transport.leave(now);
    }

    /// Tells every peer the program ended ([`Transport::announce_end`]).
    pub fn announce_end(&mut self, now: Instant) {
        self.transport.announce_end(now);
    }

    /// Whether every peer is done with this interface ([`Transport::left`]).
    pub fn left(&self) -> bool {
        self.transport.left()
    }

    /// Lazy ACKs held back at the moment.
    pub fn lazy_held(&self) -> usize {
        self.lazy.len()
    }

    /// Feeds one received datagram (call [`Stack::pump`] after a batch; messages the engine
    /// answered with are handed to the transport at once).
    ///
    /// Each message the datagram completes goes straight to the engine, borrowed from the
    /// datagram: a deposit is the only copy of its payload on the way in.
    ///
    /// Each operation the peer refused (`NI_PT_DISABLED`) holds this transport's departure
    /// answer to it ([`Transport::hold`]) until [`Stack::refusal_resent`]: the refused message
    /// is as undelivered as one the transport still retransmits, so the peer must not leave.
    pub fn handle_datagram(&mut self, now: Instant, from: PhysId, datagram: &[u8]) {
        let engine = &mut self.engine;
        self.transport
            .handle_datagram_with(now, from, datagram, &mut |from, message| {
                engine.handle_message(from, message)
            });
        let transport = &mut self.transport;
        self.engine.take_refusals(|peer| transport.hold(peer));
        self.mark_soon_acks();
        // What the engine answered (a refusal, say) goes to the transport before any ack of
        // what it answers can be written: a peer's delivery confirmation counts on it
        // (`TransportEvent::Confirmed`). A successful put sends nothing, so this costs the
        // usual datagram one check.
        if self.engine.has_outgoing() {
            self.pump(now);
        }
    }

    /// An operation that `peer` refused was sent again (or given up): releases the hold that
    /// its refusal took ([`Stack::handle_datagram`]). Call it after the new send, which the
    /// transport then holds as outstanding itself.
    pub fn refusal_resent(&mut self, peer: PhysId) {
        self.transport.release(peer);
    }

    /// Runs expired timers, then pumps.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.transport.handle_timeout(now);
        self.pump(now);
    }

    /// The next datagram to put on the wire, written into `out`, and its destination.
    pub fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PhysId> {
        self.transport.poll_transmit(now, out)
    }

    /// The earliest time [`Stack::handle_timeout`] must be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.transport.poll_timeout(), self.lazy_deadline) {
            (Some(t), Some(l)) => Some(t.min(l)),
            (t, l) => t.or(l),
        }
    }
}

/// A stack on the simulated network: datagrams and timers go to the transport, and
/// `after_input` pumps so that delivered requests are answered before the next transmit.
impl crate::sim::SimNode for Stack {
    fn id(&self) -> PhysId {
        self.local
    }
    fn handle_datagram(&mut self, now: Instant, from: PhysId, bytes: &[u8]) {
        Stack::handle_datagram(self, now, from, bytes);
    }
    fn after_input(&mut self, now: Instant) {
        self.pump(now);
    }
    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PhysId> {
        Stack::poll_transmit(self, now, out)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        Stack::poll_timeout(self)
    }
    fn handle_timeout(&mut self, now: Instant) {
        Stack::handle_timeout(self, now);
    }
}
