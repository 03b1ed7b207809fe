//! The tunables of a [`Transport`](super::Transport) and the datagram sizes they imply.

use std::time::Duration;

use super::TransportError;
use crate::wire;

/// Tunables of a [`Transport`](super::Transport). Every process of a job should use the same values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportConfig {
    /// The job key every datagram carries; datagrams with another key are dropped.
    pub job_key: u64,
    /// Largest datagram written, headers included (at most 65 507, the UDP limit).
    pub max_datagram: usize,
    /// Most frames in flight (unacknowledged span of sequence numbers) per peer; also the
    /// receive window, so it bounds the reorder buffer.
    pub window: usize,
    /// Frames beyond the cumulative acknowledgement a receiver accepts from a peer, if more
    /// than `window`: a peer on a link of smaller datagrams keeps more (smaller) frames in
    /// flight ([`TransportConfig::for_datagram`]), and a job whose hosts' MTUs differ must
    /// accept the largest window any of them sends. Reorder memory stays bounded by
    /// `max_reassembly_bytes`.
    pub recv_window: usize,
    /// Retransmission timeout before any RTT sample.
    pub initial_rto: Duration,
    /// Lower clamp of the retransmission timeout.
    pub min_rto: Duration,
    /// Upper clamp of the retransmission timeout (and of its backoff).
    pub max_rto: Duration,
    /// A peer silent this long while data for it is unacknowledged is declared failed.
    pub peer_timeout: Duration,
    /// Bound on reassembly and reorder memory across all peers (at least `max_message`).
    pub max_reassembly_bytes: usize,
    /// Largest message accepted by `send` and by the receiver (at most `u32::MAX`).
    pub max_message: usize,
    /// Longest an acknowledgement may be held back waiting for data to ride on.
    pub ack_delay: Duration,
    /// Acknowledge at least every this many received frames.
    pub ack_every: u32,
}

impl Default for TransportConfig {
    fn default() -> Self {
        let max_message = (64 << 20) + 4096;
        TransportConfig {
            job_key: 0,
            max_datagram: MAX_UDP_PAYLOAD,
            // 64 × 65 000 bytes ≈ 4 MB in flight: fits the socket buffers the UDP layer asks for.
            window: DEFAULT_WINDOW,
            recv_window: window_for(crate::udp_offload::datagram_for_mtu(crate::udp::MIN_MTU)),
            initial_rto: Duration::from_millis(20),
            // A full window (about 4 MB) takes most of a millisecond to drain on one host, and
            // a busy receiver more: with 1 ms, a stream's timer fired while its acks were
            // merely late and resent the window (about 800 needless frames per testlarge
            // run, 120 with 5 ms). Real losses are mostly repaired sooner, by the reorder
            // threshold.
            min_rto: Duration::from_millis(5),
            max_rto: Duration::from_secs(2),
            peer_timeout: Duration::from_secs(30),
            max_reassembly_bytes: 2 * max_message,
            max_message,
            ack_delay: Duration::from_micros(200),
            ack_every: 8,
        }
    }
}

/// Frames in flight per peer with the largest datagrams.
pub const DEFAULT_WINDOW: usize = 64;

/// The window (in frames) that keeps as many bytes in flight with datagrams of `max_datagram`
/// bytes as [`DEFAULT_WINDOW`] frames of the largest datagrams do (about 4 MB, which the
/// socket buffers hold).
pub fn window_for(max_datagram: usize) -> usize {
    (DEFAULT_WINDOW * MAX_UDP_PAYLOAD)
        .div_ceil(max_datagram.max(MIN_DATAGRAM))
        .min(1 << 20)
}

/// The smallest `max_datagram` that leaves room for one payload byte next to a full ack.
pub const MIN_DATAGRAM: usize =
    wire::HEADER_LEN + wire::ACK_FRAME_MAX + wire::DATA_FRAME_OVERHEAD + 1;
/// The largest UDP payload over IPv4.
pub const MAX_UDP_PAYLOAD: usize = 65_507;

/// Payload bytes per fragment with the default `max_datagram` ([`TransportConfig::fragment_size`]
/// of the default configuration). Layers above size their large messages in multiples of it so
/// that no datagram goes out nearly empty.
pub const DEFAULT_FRAGMENT_SIZE: usize =
    MAX_UDP_PAYLOAD - (wire::HEADER_LEN + wire::ACK_FRAME_MAX + wire::DATA_FRAME_OVERHEAD);

impl TransportConfig {
    /// The defaults for a link whose datagrams carry at most `max_datagram` bytes without IP
    /// fragmentation (see [`crate::udp::UdpEndpoint::max_datagram`]): frames of that size,
    /// a window that keeps the default's bytes in flight, and an acknowledgement per as many
    /// bytes as the default's.
    pub fn for_datagram(max_datagram: usize) -> TransportConfig {
        let d = TransportConfig::default();
        let max_datagram = max_datagram.clamp(MIN_DATAGRAM, MAX_UDP_PAYLOAD);
        let scale = (MAX_UDP_PAYLOAD / max_datagram).max(1);
        TransportConfig {
            max_datagram,
            window: window_for(max_datagram),
            ack_every: d.ack_every.saturating_mul(scale as u32),
            ..d
        }
    }

    /// The receive window: how many frames beyond the cumulative acknowledgement are taken.
    pub fn accepted_window(&self) -> usize {
        self.window.max(self.recv_window)
    }

    /// Checks the values for consistency.
    pub fn validate(&self) -> Result<(), TransportError> {
        let bad = |field: &'static str, reason: String| {
            Err(TransportError::InvalidConfig { field, reason })
        };
        if !(MIN_DATAGRAM..=MAX_UDP_PAYLOAD).contains(&self.max_datagram) {
            return bad(
                "max_datagram",
                format!(
                    "{} is outside {MIN_DATAGRAM}..={MAX_UDP_PAYLOAD}",
                    self.max_datagram
                ),
            );
        }
        if self.window == 0 || self.window > 1 << 20 {
            return bad("window", format!("{} is outside 1..=1048576", self.window));
        }
        if self.recv_window > 1 << 20 {
            return bad(
                "recv_window",
                format!("{} is above 1048576", self.recv_window),
            );
        }
        if self.min_rto.is_zero() || self.min_rto > self.max_rto {
            return bad(
                "min_rto",
                format!(
                    "{:?} must be non-zero and <= max_rto {:?}",
                    self.min_rto, self.max_rto
                ),
            );
        }
        if self.initial_rto.is_zero() {
            return bad("initial_rto", "must be non-zero".into());
        }
        if self.peer_timeout.is_zero() {
            return bad("peer_timeout", "must be non-zero".into());
        }
        if self.max_message > u32::MAX as usize {
            return bad(
                "max_message",
                format!("{} exceeds the wire limit {}", self.max_message, u32::MAX),
            );
        }
        if self.max_reassembly_bytes < self.max_message {
            return bad(
                "max_reassembly_bytes",
                format!(
                    "{} is below max_message {}: a largest message could never be reassembled",
                    self.max_reassembly_bytes, self.max_message
                ),
            );
        }
        if self.ack_every == 0 {
            return bad("ack_every", "must be at least 1".into());
        }
        Ok(())
    }

    /// Payload bytes per fragment: what is left of a datagram after the header, a full ack and
    /// a DATA frame header, so a fragment (first send or retransmission) always fits.
    pub fn fragment_size(&self) -> usize {
        self.max_datagram
            .saturating_sub(wire::HEADER_LEN + wire::ACK_FRAME_MAX + wire::DATA_FRAME_OVERHEAD)
            .max(1)
    }
}
