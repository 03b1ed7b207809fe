//! The departure handshake of an interface that stops.
//!
//! A process that leaves a job must not go while a peer still retransmits to it: the peer
//! would retransmit, with backoff, until its peer timeout. Lingering until the peers are quiet
//! does not tell a quiet peer from one waiting out a backed-off retransmission timer. So the
//! leaving transport asks instead: [`Transport::leave`] sends every peer a BYE `Leaving` (once
//! everything this transport sent has been acknowledged), and repeats it every `min_rto`. A
//! peer answers `Clear` once it has nothing unacknowledged to the leaving one. The leaving
//! transport has [`Transport::left`] when every peer answered `Clear`, said `Leaving` itself
//! (it went with nothing of its own unacknowledged, and may be gone), or failed. A peer that
//! said `Leaving` is sent `Clear` in turn: it waits for one of the two from every peer.
//!
//! Two things make "nothing unacknowledged" more than the transport's own queue:
//! - A message the peer refused (`NI_PT_DISABLED`) that the layer above will send again is
//!   counted by [`Transport::hold`] until [`Transport::release`]; while any is held, the peer
//!   is not told `Clear`, so it stays to take the message in.
//! - A peer that said `Leaving` and was then sent something answers it (an acknowledgement of
//!   the engine's at least), which it must get acknowledged: its `Leaving` no longer counts,
//!   and it is asked again until it answers `Clear`.
//!
//! The `Leaving` waits until everything the transport sent is acknowledged, which a peer that
//! keeps sending to it (each message answered by an acknowledgement of the engine's) can put
//! off indefinitely. So a transport whose program ended first says so with a BYE `Ended`
//! ([`Transport::announce_end`]), a hint repeated a few times against loss; both kinds make
//! [`Transport::peer_ended`] hold, so that the peer's user stops sending to it. Only the
//! `Leaving` makes [`Transport::peer_left`] hold: it travels after everything the transport
//! sent was acknowledged, so a peer that sees it has received all of that, which a wait for
//! the leaving side relies on (an `Ended` can overtake data that is being retransmitted).
//!
//! The last answer of any handshake can be lost; the leaving side then still lingers for a few
//! of the peer's retry intervals to answer repeats, and the peer's timeout bounds the rest.

use std::time::Instant;

use super::{Peer, Transport};
use crate::types::PhysId;
use crate::wire::Bye;

/// How many times [`Transport::announce_end`] tells a peer: a hint, repeated against loss.
const END_ANNOUNCEMENTS: u8 = 3;

/// Where the departure handshake stands with one peer.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Departure {
    /// The peer said it is leaving.
    pub(super) peer_leaving: bool,
    /// The peer said its program ended (it may still have data on its way).
    peer_ended: bool,
    /// How many times, and when last, this transport told the peer its program ended.
    end_told: (u8, Option<Instant>),
    /// Messages to the peer that the layer above will send again (it refused them), which
    /// count as unacknowledged ([`Transport::hold`]).
    holds: u32,
    /// A message was sent to the peer after it said `Leaving`: it will answer (an
    /// acknowledgement of the engine's at least), so its `Leaving` no longer says it has
    /// nothing unacknowledged here, and only its `Clear` does.
    sent_after_leaving: bool,
    /// The peer said it has nothing unacknowledged to this transport.
    pub(super) cleared: bool,
    /// When this transport last told the peer it is leaving.
    asked: Option<Instant>,
}

impl Departure {
    /// Whether this transport may leave as far as this peer goes.
    fn done(&self) -> bool {
        self.cleared || (self.peer_leaving && !self.sent_after_leaving)
    }

    /// Notes a message sent to the peer (see `sent_after_leaving`).
    #[inline]
    pub(super) fn sent_to(&mut self) {
        if self.peer_leaving {
            self.sent_after_leaving = true;
        }
    }
}

/// Acts on a BYE from `peer`: notes it, and answers a `Leaving` with `Clear` (queued on
/// `answers`) if nothing sent to the peer waits for its acknowledgement. Otherwise the peer
/// asks again later, and is answered once its acknowledgements have come. Returns whether
/// the peer said for the first time that its program ended (`Ended` or `Leaving`).
pub(super) fn on_bye(peer: &mut Peer, bye: Bye, answers: &mut Vec<(PhysId, Bye)>) -> bool {
    let d = &mut peer.departure;
    let known = d.peer_ended || d.peer_leaving;
    match bye {
        Bye::Leaving => {
            d.peer_leaving = true;
            if !peer.send.outstanding() && d.holds == 0 {
                answers.push((peer.id, Bye::Clear));
            }
        }
        Bye::Clear => d.cleared = true,
        Bye::Ended => d.peer_ended = true,
    }
    !known && (d.peer_ended || d.peer_leaving)
}

impl Transport {
    /// Tells every peer that this transport is leaving, and again to those that have not
    /// cleared it within `min_rto` of the last time. A peer that is leaving itself is told
    /// `Clear` instead: it may have asked while something sent to it was unacknowledged, and
    /// waits for that answer. Call it repeatedly until [`Transport::left`] (and while
    /// lingering), transmitting after each call; call it only once everything sent is
    /// acknowledged ([`Transport::all_acknowledged`]), since a peer takes both kinds as the
    /// promise that nothing of this transport's is still unacknowledged.
    pub fn leave(&mut self, now: Instant) {
        let retry = self.cfg.min_rto;
        for slot in 0..self.peers.all().len() {
            let Some(peer) = self.peers.get_mut(slot) else {
                continue;
            };
            let d = &mut peer.departure;
            if peer.failed || d.cleared || d.asked.is_some_and(|t| now < t + retry) {
                continue;
            }
            if d.peer_leaving && d.holds > 0 {
                // Not `Clear` yet: a message the peer refused is still to be sent again.
                continue;
            }
            d.asked = Some(now);
            // A peer that is leaving is answered `Clear`, unless this transport sent it
            // something since: then it is asked again, and its `Clear` awaited.
            let bye = if d.peer_leaving && !d.sent_after_leaving {
                Bye::Clear
            } else {
                Bye::Leaving
            };
            self.byes.push((peer.id, bye));
        }
    }

    /// Counts a message to `peer` that is not in the transport but will be sent again (the
    /// peer refused it): until [`Transport::release`], this transport does not tell the peer
    /// it has nothing unacknowledged to it, so a leaving peer stays to take it in.
    pub fn hold(&mut self, peer: PhysId) {
        if let Some(p) = self.peers.by_id_mut(peer) {
            p.departure.holds = p.departure.holds.saturating_add(1);
        }
    }

    /// Releases one [`Transport::hold`] on `peer`.
    pub fn release(&mut self, peer: PhysId) {
        if let Some(p) = self.peers.by_id_mut(peer) {
            p.departure.holds = p.departure.holds.saturating_sub(1);
        }
    }

    /// Tells every peer that the program on this transport has ended (BYE `Ended`), so that
    /// its user can refuse new sends to this one at once rather than when the `Leaving` comes,
    /// which waits until everything this transport sent is acknowledged. Each peer is told
    /// three times, `min_rto` apart, over repeated calls; transmit after each.
    pub fn announce_end(&mut self, now: Instant) {
        let retry = self.cfg.min_rto;
        for slot in 0..self.peers.all().len() {
            let Some(peer) = self.peers.get_mut(slot) else {
                continue;
            };
            let (told, last) = &mut peer.departure.end_told;
            if peer.failed || *told >= END_ANNOUNCEMENTS || last.is_some_and(|t| now < t + retry) {
                continue;
            }
            *told += 1;
            *last = Some(now);
            self.byes.push((peer.id, Bye::Ended));
        }
    }

    /// Whether `peer` said its program ended (BYE `Ended` or `Leaving`): it will call nothing
    /// any more (its process may still be lingering). What it sent before may still be on its
    /// way; see [`Transport::peer_left`] for a promise that it is not.
    pub fn peer_ended(&self, peer: PhysId) -> bool {
        self.peers
            .by_id(peer)
            .is_some_and(|p| p.departure.peer_leaving || p.departure.peer_ended)
    }

    /// Whether `peer` said it is leaving (BYE `Leaving`): its program has ended, and
    /// everything it sent here has arrived (it says so only once all of it is acknowledged).
    /// Its process may still be lingering.
    pub fn peer_left(&self, peer: PhysId) -> bool {
        self.peers
            .by_id(peer)
            .is_some_and(|p| p.departure.peer_leaving)
    }

    /// Whether every peer is done with this transport: it answered `Clear`, is leaving itself,
    /// or failed (see the module docs).
    pub fn left(&self) -> bool {
        self.peers
            .all()
            .iter()
            .all(|p| p.failed || p.departure.done())
    }
}

#[cfg(test)]
mod tests;
