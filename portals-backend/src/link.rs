//! The datagram link under an interface: the [`Link`] trait the driver sends and receives
//! through, and its production implementation on a UDP socket ([`UdpEndpoint`]). Tests put
//! other links (lossy, counting) under a real interface.

use std::io;
use std::time::Duration;

use crate::message::Tail;
use crate::types::PhysId;
use crate::udp::UdpEndpoint;

/// A datagram socket as the driver needs it. [`crate::udp::UdpEndpoint`] is the real one.
pub trait Link: Send + Sync {
    /// The address peers reach this link at.
    fn local_id(&self) -> PhysId;
    /// Sends one datagram (waiting a bounded time for room in the socket buffer).
    fn send_to(&self, datagram: &[u8], to: PhysId) -> io::Result<()>;
    /// Receives one datagram into `buf` without blocking; `None` when nothing is waiting.
    fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, PhysId)>>;
    /// Blocks until a datagram may be waiting or `timeout` passes (spurious returns allowed).
    fn wait_readable(&self, timeout: Duration) -> io::Result<()>;
    /// Sends one datagram made of `head` followed by `tail`. The default joins them; a link
    /// that can gather (UDP `sendmsg`) saves copying a large payload.
    fn send_gather(&self, head: &[u8], tail: Tail<'_>, to: PhysId) -> io::Result<()> {
        if tail.is_empty() {
            return self.send_to(head, to);
        }
        let mut joined = Vec::with_capacity(head.len() + tail.len());
        joined.extend_from_slice(head);
        tail.append_to(&mut joined);
        self.send_to(&joined, to)
    }
}

impl Link for UdpEndpoint {
    fn local_id(&self) -> PhysId {
        UdpEndpoint::local_id(self)
    }
    fn send_to(&self, datagram: &[u8], to: PhysId) -> io::Result<()> {
        UdpEndpoint::send_to(self, datagram, to).map_err(io::Error::other)
    }
    fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, PhysId)>> {
        UdpEndpoint::recv(self, buf).map_err(io::Error::other)
    }
    fn wait_readable(&self, timeout: Duration) -> io::Result<()> {
        UdpEndpoint::wait_readable(self, Some(timeout))
            .map(|_| ())
            .map_err(io::Error::other)
    }
    fn send_gather(&self, head: &[u8], tail: Tail<'_>, to: PhysId) -> io::Result<()> {
        let sent = match tail {
            Tail::Bytes(bytes) => UdpEndpoint::send_gather(self, head, bytes, to),
            Tail::Pair(a, b) => UdpEndpoint::send_gather_parts(self, [head, a, b], to),
            Tail::Span { span, from, len } => {
                UdpEndpoint::send_gather_span(self, head, span, from, len, to)
            }
        };
        sent.map_err(io::Error::other)
    }
}
