//! Bookkeeping kept off the round trip's path.
//!
//! Applying a peer's acknowledgement (freeing acknowledged frames, an RTT sample, loss
//! detection) and recomputing a peer's timer cost about as much as the rest of handling a
//! small request. Neither is needed to answer the request or to send the next one while the
//! window has room, so both are deferred: an ack that arrives while the window is open is
//! kept with its arrival time, and a peer whose deadlines changed is listed as *unsettled*.
//! [`Transport::settle`] does the work after the datagrams of a transmit pass have left (the
//! driver's last `poll_transmit` call of the pass runs after its send system calls), and
//! `handle_timeout` does it first thing; `poll_timeout` reports unsettled work as due at once,
//! so a driver that waits never sleeps on stale timers.
//!
//! What may not wait is applied at once: an ack that arrives while the window is full or a
//! retransmission is queued (sending depends on it), and a deferred ack when a second one
//! arrives or when the peer's window closes before a transmit.
//!
//! A transport about to stop settles the other way round: it releases every ack it holds
//! back ([`Transport::ack_now`]) and asks whether its own messages are all acknowledged
//! ([`Transport::all_acknowledged`]).

use std::time::Instant;

use super::{Peer, Transport, TransportStats};
use crate::types::PhysId;
use crate::wire::AckView;

/// An acknowledgement kept for later: only acks without selective ranges are deferred (those
/// with ranges report loss or reordering, which is worth acting on at once), so four words
/// and the arrival time hold it.
#[derive(Debug, Clone, Copy)]
pub(super) struct DeferredAck {
    cumulative: u64,
    largest: u64,
    ack_delay_us: u32,
    fence: u64,
    at: Instant,
}

impl DeferredAck {
    /// `ack`, received at `at`, if it can be deferred.
    pub(super) fn of(ack: &AckView<'_>, at: Instant) -> Option<DeferredAck> {
        (!ack.has_ranges()).then_some(DeferredAck {
            cumulative: ack.cumulative,
            largest: ack.largest,
            ack_delay_us: ack.ack_delay_us,
            fence: ack.fence,
            at,
        })
    }
}

/// Applies acks: counts what they revealed, for [`TransportStats`] (kept apart so that acks
/// can be applied while the stats are borrowed by a delivery closure), and keeps the buffers
/// of the messages they release for reuse.
pub(super) struct AckTally<'a> {
    bogus: u64,
    fast_lost: u64,
    spare: &'a mut Vec<Vec<u8>>,
}

impl<'a> AckTally<'a> {
    /// A tally whose released buffers go to `spare`.
    pub(super) fn new(spare: &'a mut Vec<Vec<u8>>) -> Self {
        AckTally {
            bogus: 0,
            fast_lost: 0,
            spare,
        }
    }

    /// Applies `ack`, received at `at`, to `peer`'s send state.
    pub(super) fn apply(&mut self, peer: &mut Peer, ack: &AckView<'_>, at: Instant) {
        let out = peer.send.on_ack(at, ack, self.spare);
        self.bogus += u64::from(out.bogus);
        self.fast_lost += out.fast_lost;
    }

    /// Applies a deferred ack.
    pub(super) fn apply_deferred(&mut self, peer: &mut Peer, d: DeferredAck) {
        let ack = AckView::new(d.cumulative, d.largest, d.ack_delay_us, d.fence);
        self.apply(peer, &ack, d.at);
    }

    /// Applies `ack`, received at `at`, after any ack deferred before it, or defers it.
    pub(super) fn apply_or_defer(
        &mut self,
        peer: &mut Peer,
        ack: &AckView<'_>,
        at: Instant,
        window: usize,
    ) {
        let deferred = if peer.send.ack_can_wait(window, ack.cumulative) {
            DeferredAck::of(ack, at)
        } else {
            None
        };
        if let Some(old) = peer.deferred_ack.take() {
            self.apply_deferred(peer, old);
        }
        match deferred {
            Some(d) => peer.deferred_ack = Some(d),
            None => self.apply(peer, ack, at),
        }
    }

    /// Adds the counts to `stats`.
    pub(super) fn record(self, stats: &mut TransportStats) {
        stats.bogus_acks += self.bogus;
        stats.fast_losses += self.fast_lost;
    }
}

impl Transport {
    /// Applies the deferred acks and recomputes the timers of the unsettled peers. Returns
    /// whether that made a peer ready to transmit (an ack opened its window or queued a
    /// retransmission).
    pub(super) fn settle(&mut self) -> bool {
        self.sent_since_settle = false;
        self.unsettled_since = None;
        if self.unsettled.is_empty() {
            return false;
        }
        let window = self.cfg.window;
        let mut list = std::mem::take(&mut self.unsettled);
        let mut readied = false;
        for &slot in &list {
            let Some(peer) = self.peers.get_mut(slot) else {
                continue;
            };
            peer.unsettled = false;
            if let Some(d) = peer.deferred_ack.take() {
                let mut tally = AckTally::new(&mut self.spare);
                tally.apply_deferred(peer, d);
                tally.record(&mut self.stats);
                peer.emit_confirmed(&mut self.events);
                if !peer.in_ready && !peer.failed && peer.send.has_sendable(window) {
                    peer.in_ready = true;
                    self.ready.push_back(slot);
                    readied = true;
                }
            }
            self.reschedule(slot);
        }
        list.clear();
        // Keeps the allocation (no malloc per round trip).
        self.unsettled = list;
        readied
    }

    /// Whether every message given to [`Transport::send`] has been acknowledged by its peer
    /// (or its peer failed): nothing is queued or in flight.
    pub fn all_acknowledged(&self) -> bool {
        self.peers
            .all()
            .iter()
            .all(|p| p.failed || !p.send.outstanding())
    }

    /// Whether a message to `peer` waits for its confirmation
    /// ([`super::TransportEvent::Confirmed`]), which an ack from `peer` may bring.
    pub fn awaits_confirmation(&self, peer: PhysId) -> bool {
        self.peers
            .by_id(peer)
            .is_some_and(|p| !p.failed && p.send.confirms_pending())
    }

    /// Marks the ack held for `peer` (for the message just delivered from it) as one its
    /// sender waits on: the message asked for a confirmed acknowledgement
    /// ([`crate::types::AckReq::ConfirmedAck`]), whose only answer is this ack. It still
    /// rides on the next data to `peer` if this process answers at once (a ping-pong's
    /// reply), but does not wait `ack_delay` for it: [`Transport::release_soon_acks`], which
    /// the driver calls when it goes idle, makes it due.
    pub fn ack_soon(&mut self, peer: PhysId) {
        let Some(slot) = self.peers.find(peer) else {
            return;
        };
        let Some(p) = self.peers.get_mut(slot) else {
            return;
        };
        if p.recv.ack_pending && !p.recv.ack_soon {
            p.recv.ack_soon = true;
            self.soon.push(slot);
        }
    }

    /// Whether [`Transport::ack_soon`] marked acks since the last
    /// [`Transport::release_soon_acks`] (one may have left on data since).
    pub fn has_soon_acks(&self) -> bool {
        !self.soon.is_empty()
    }

    /// Makes every ack marked by [`Transport::ack_soon`] that no data carried yet due now:
    /// the next transmit pass sends it on its own.
    pub fn release_soon_acks(&mut self, now: Instant) {
        for &slot in &self.soon {
            let Some(peer) = self.peers.get_mut(slot) else {
                continue;
            };
            if !std::mem::take(&mut peer.recv.ack_soon) || peer.failed || !peer.recv.ack_pending {
                continue;
            }
            peer.recv.ack_deadline = Some(now);
            if !peer.in_ready {
                peer.in_ready = true;
                self.ready.push_back(slot);
            }
        }
        self.soon.clear();
    }

    /// Makes every acknowledgement held back for data to ride on due now, so that the next
    /// transmit pass sends it: for a process about to stop, whose peers would otherwise
    /// retransmit to it until they time out.
    pub fn ack_now(&mut self, now: Instant) {
        for slot in 0..self.peers.all().len() {
            let Some(peer) = self.peers.get_mut(slot) else {
                continue;
            };
            if peer.failed || !peer.recv.ack_pending {
                continue;
            }
            peer.recv.ack_deadline = Some(now);
            if !peer.in_ready {
                peer.in_ready = true;
                self.ready.push_back(slot);
            }
        }
    }
}
