//! The transport's timers: each peer's earliest deadline (retransmission, delayed ack, peer
//! silence) is registered in one ordered set, lazily (see `reschedule`), and
//! `handle_timeout` runs what is due; a peer that stays silent past the peer timeout fails.

use std::time::Instant;

use super::recv::RecvState;
use super::rtt::RttEstimator;
use super::send::SendState;
use super::{Transport, TransportEvent};

impl Transport {
    /// Recomputes the peer's earliest deadline and registers it. O(log peers).
    ///
    /// Registration is lazy to keep the timer set out of the per-message path: an entry is
    /// added or moved only when the deadline comes *earlier* than the registered one. A later
    /// or vanished deadline leaves the old entry, which then fires early, finds nothing due
    /// and re-registers. Invariant: at most one entry per peer, equal to `peer.timer`, and no
    /// later than the peer's true earliest deadline.
    pub(super) fn reschedule(&mut self, slot: usize) {
        let Some(peer) = self.peers.get_mut(slot) else {
            return;
        };
        let mut next: Option<Instant> = None;
        let mut consider = |t: Option<Instant>| {
            if let Some(t) = t {
                next = Some(next.map_or(t, |n| n.min(t)));
            }
        };
        if !peer.failed {
            consider(peer.send.rto_deadline);
            if peer.send.outstanding() {
                consider(Some(peer.send.last_progress + self.cfg.peer_timeout));
            }
            // A peer already in the ready queue gets its ack at the next poll_transmit.
            if peer.recv.ack_pending && !peer.in_ready {
                consider(peer.recv.ack_deadline);
            }
        }
        let Some(next) = next else { return };
        match peer.timer {
            Some(registered) if registered <= next => {}
            old => {
                if let Some(old) = old {
                    self.timers.remove(&(old, slot));
                }
                self.timers.insert((next, slot));
                peer.timer = Some(next);
            }
        }
    }

    /// Corrects a send pass that ran on a clock reading (`stale`) older than the pass: what
    /// it stamped at `stale` — frames sent, the retransmission timers it armed, the silence
    /// clocks it started — is moved to `fresh`, read after the pass, so that no frame is
    /// retransmitted early and no peer is declared silent early for the time the reading
    /// was old. (A driver may run a pass on its last reading to keep the clock off a send's
    /// path, and read the clock after the datagrams left.) The ack delay that the pass's
    /// acks reported stays understated by up to `fresh - stale`: their peer's round-trip
    /// sample from them grows by as much, as if the ack had come later. Timers registered
    /// earlier fire early, find nothing due and re-register (see `reschedule`).
    pub(crate) fn restamp(&mut self, stale: Instant, fresh: Instant) {
        if fresh <= stale {
            return;
        }
        for peer in self.peers.all_mut() {
            peer.send.restamp(stale, fresh);
        }
    }

    pub(super) fn fail_peer(&mut self, slot: usize, now: Instant) {
        let Some(peer) = self.peers.get_mut(slot) else {
            return;
        };
        let id = peer.id;
        if peer.failed {
            return;
        }
        peer.failed = true;
        peer.recv.release_all(&mut self.budget);
        // Drop queued and unacknowledged messages with the old send state.
        let rtt = RttEstimator::new(
            self.cfg.initial_rto,
            self.cfg.min_rto,
            self.cfg.max_rto,
            self.cfg.ack_delay,
        );
        peer.send = SendState::new(rtt, now);
        peer.recv = RecvState::new(now);
        self.stats.peers_failed += 1;
        self.events
            .push_back(TransportEvent::PeerFailed { peer: id });
        self.reschedule(slot);
    }

    /// The earliest deadline (retransmission, delayed ack, peer timeout), if any. It may be
    /// earlier than needed (timers are re-armed lazily): `handle_timeout` then does nothing
    /// but re-arm. `poll_transmit` may have work regardless; drivers call it after every input.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let timer = self.timers.first().map(|&(t, _)| t);
        // Unsettled work (see `settle`) is due at once: `handle_timeout` does it.
        match (timer, self.unsettled_since) {
            (Some(t), Some(u)) => Some(t.min(u)),
            (t, u) => t.or(u),
        }
    }

    /// Runs every deadline that is due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.settle();
        let mut due = std::mem::take(&mut self.due);
        due.clear();
        while let Some(&(t, slot)) = self.timers.first() {
            if t > now {
                break;
            }
            self.timers.pop_first();
            if let Some(p) = self.peers.get_mut(slot) {
                if p.timer == Some(t) {
                    p.timer = None;
                }
            }
            due.push(slot);
        }
        for &slot in &due {
            let Some(peer) = self.peers.get_mut(slot) else {
                continue;
            };
            if peer.failed {
                continue;
            }
            if peer.send.outstanding() && peer.send.last_progress + self.cfg.peer_timeout <= now {
                self.fail_peer(slot, now);
                continue;
            }
            let mut wants_tx = false;
            if peer.send.rto_deadline.is_some_and(|d| d <= now) {
                let queued = peer.send.on_rto(now);
                if queued > 0 {
                    self.stats.rto_expirations += 1;
                    wants_tx = true;
                }
            }
            if peer.recv.ack_pending && peer.recv.ack_deadline.is_some_and(|d| d <= now) {
                wants_tx = true;
            }
            if wants_tx {
                self.mark_ready(slot);
            }
            self.reschedule(slot);
        }
        self.due = due;
    }
}
