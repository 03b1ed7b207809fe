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
    /// Whether [`Link::send_train`] saves system calls: the interface then gathers the
    /// datagrams of a transmit pass to one peer into trains. No by default.
    fn sends_trains(&self) -> bool {
        false
    }
    /// Sends `train`, datagrams of `seg` bytes each (the last may be shorter), to `to`. The
    /// default sends them one by one.
    fn send_train(&self, train: &[u8], seg: usize, to: PhysId) -> io::Result<()> {
        train
            .chunks(seg.max(1))
            .try_for_each(|datagram| self.send_to(datagram, to))
    }
    /// Receives one datagram, or a train of equal datagrams that arrived together (the last
    /// may be shorter), without blocking: `(bytes, sender, bytes per datagram)`. The default
    /// receives one datagram.
    fn recv_train(&self, buf: &mut [u8]) -> io::Result<Option<(usize, PhysId, usize)>> {
        Ok(self.recv(buf)?.map(|(n, from)| (n, from, n)))
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
    fn sends_trains(&self) -> bool {
        UdpEndpoint::sends_trains(self)
    }
    fn send_train(&self, train: &[u8], seg: usize, to: PhysId) -> io::Result<()> {
        UdpEndpoint::send_train(self, train, seg, to).map_err(io::Error::other)
    }
    fn recv_train(&self, buf: &mut [u8]) -> io::Result<Option<(usize, PhysId, usize)>> {
        UdpEndpoint::recv_train(self, buf).map_err(io::Error::other)
    }
}
