//! One interface's protocol stack without I/O: the Portals [`Engine`] on top of the reliable
//! [`Transport`]. Both layers are sans-IO; this glue moves messages between them, loops
//! messages addressed to the interface itself straight back into the engine, and turns a
//! transport's peer failure into failed operations. The UDP driver ([`crate::interface`]) and
//! the simulated-network tests both drive a `Stack`.

use std::time::Instant;

use crate::engine::Engine;
use crate::transport::{Transport, TransportError, TransportEvent};
use crate::types::PhysId;

/// Engine + transport of one interface.
pub struct Stack {
    /// The Portals semantics.
    pub engine: Engine,
    /// Reliable delivery to other interfaces.
    pub transport: Transport,
    local: PhysId,
}

impl Stack {
    /// Ties an engine and a transport of the same interface together.
    pub fn new(engine: Engine, transport: Transport) -> Self {
        let local = transport.local();
        Stack {
            engine,
            transport,
            local,
        }
    }

    /// The interface's physical id.
    pub fn local(&self) -> PhysId {
        self.local
    }

    /// Moves work between the layers until neither has anything more for the other: the
    /// engine's outgoing messages into the transport (or back into the engine when addressed
    /// to this interface), and the transport's delivered messages and peer failures into the
    /// engine. Call after every API call and after feeding datagrams or timeouts.
    pub fn pump(&mut self, now: Instant) {
        loop {
            let mut progressed = false;
            while let Some((dest, message)) = self.engine.poll_outgoing() {
                progressed = true;
                if dest == self.local {
                    self.engine.handle_message(self.local, &message);
                    continue;
                }
                match self.transport.send(now, dest, message) {
                    Ok(()) => {}
                    Err(TransportError::PeerFailed { .. }) => self.engine.handle_peer_failed(dest),
                    Err(e) => {
                        // A message the transport refuses (too large) cannot be delivered: fail
                        // the operations to that peer rather than lose them silently. The
                        // engine's own limits keep this from happening.
                        tracing::error!(%dest, error = %e, "transport refused a message");
                        self.engine.handle_peer_failed(dest);
                    }
                }
            }
            while let Some(ev) = self.transport.poll_event() {
                progressed = true;
                match ev {
                    TransportEvent::Delivered { from, message } => {
                        self.engine.handle_message(from, &message)
                    }
                    TransportEvent::PeerFailed { peer } => self.engine.handle_peer_failed(peer),
                }
            }
            if !progressed {
                return;
            }
        }
    }

    /// Feeds one received datagram (call [`Stack::pump`] after a batch).
    pub fn handle_datagram(&mut self, now: Instant, from: PhysId, datagram: &[u8]) {
        self.transport.handle_datagram(now, from, datagram);
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
        self.transport.poll_timeout()
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
