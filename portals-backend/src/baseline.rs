//! Raw UDP baselines: what plain sockets achieve on this machine, measured with the same
//! [`UdpEndpoint`] and waiting strategy as the engine, so the engine's overhead can be stated
//! as a ratio. Nothing here prints; callers format (see `BENCH-FORMAT.md`).
//!
//! Each measurement has a server/receiver half and a client/sender half that can run in two
//! processes, plus a convenience that runs both halves in two threads of this process.
//!
//! **Stream flow control.** The receiver acknowledges every whole message with one 4-byte
//! datagram; the sender keeps at most `window` messages unacknowledged (default 2: one being
//! drained by the receiver while the next is already in its socket buffer). With 1 MiB
//! messages that is 2 MiB in flight, well inside the 8 MiB socket buffers, so loopback does
//! not drop; raw UDP has no retransmission, so a loss would surface as a `Timeout` error.

use std::time::{Duration, Instant};

use crate::types::PhysId;
use crate::udp::{UdpConfig, UdpEndpoint, UdpError, DEFAULT_SPIN};

/// Largest UDP payload over IPv4.
const MAX_DATAGRAM: usize = 65_507;
/// Stream datagram header: message index and offset, u32 little-endian each.
const STREAM_HDR: usize = 8;

/// Errors of the baselines.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BaselineError {
    /// A socket error.
    #[error(transparent)]
    Udp(#[from] UdpError),
    /// Nothing arrived in time (raw UDP does not retransmit: a lost datagram ends here).
    #[error("{what}: nothing received within {after:?}")]
    Timeout {
        /// What was awaited.
        what: &'static str,
        /// How long.
        after: Duration,
    },
    /// A datagram that does not belong to the measurement.
    #[error("{what}: unexpected datagram: {detail}")]
    Unexpected {
        /// Which measurement.
        what: &'static str,
        /// What was wrong.
        detail: String,
    },
    /// Parameters out of range.
    #[error("invalid baseline parameter {name}: {reason}")]
    InvalidArg {
        /// The parameter.
        name: &'static str,
        /// Why.
        reason: String,
    },
    /// A helper thread panicked.
    #[error("baseline {0} thread panicked")]
    ThreadPanicked(&'static str),
}

/// How long a half waits for any one datagram before giving up.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// The median of `samples` (sorted in place); `None` when empty.
pub fn median(samples: &mut [Duration]) -> Option<Duration> {
    samples.sort_unstable();
    samples.get(samples.len() / 2).copied()
}

fn recv_within(
    ep: &UdpEndpoint,
    buf: &mut [u8],
    timeout: Duration,
    what: &'static str,
) -> Result<(usize, PhysId), BaselineError> {
    ep.recv_wait(buf, Some(Instant::now() + timeout), DEFAULT_SPIN)?
        .ok_or(BaselineError::Timeout {
            what,
            after: timeout,
        })
}

fn check_size(size: usize, min: usize) -> Result<(), BaselineError> {
    if !(min..=MAX_DATAGRAM).contains(&size) {
        return Err(BaselineError::InvalidArg {
            name: "size",
            reason: format!("{size} is outside {min}..={MAX_DATAGRAM}"),
        });
    }
    Ok(())
}

/// Ping-pong server half: echoes `iters` datagrams of `size` bytes back to whoever sent them.
pub fn pingpong_server(
    ep: &UdpEndpoint,
    size: usize,
    iters: usize,
    timeout: Duration,
) -> Result<(), BaselineError> {
    check_size(size, 0)?;
    let mut buf = vec![0u8; MAX_DATAGRAM];
    for _ in 0..iters {
        let (n, from) = recv_within(ep, &mut buf, timeout, "pingpong server")?;
        if n != size {
            return Err(BaselineError::Unexpected {
                what: "pingpong server",
                detail: format!("{n} bytes from {from}, expected {size}"),
            });
        }
        ep.send_to(buf.get(..n).unwrap_or_default(), from)?;
    }
    Ok(())
}

/// Ping-pong client half: `iters` round trips of `size`-byte datagrams to `server`; returns
/// each round-trip time. Datagrams of 8 bytes or more carry the iteration number, checked on
/// return.
pub fn pingpong_client(
    ep: &UdpEndpoint,
    server: PhysId,
    size: usize,
    iters: usize,
    timeout: Duration,
) -> Result<Vec<Duration>, BaselineError> {
    check_size(size, 0)?;
    let mut out = vec![0xA5u8; size];
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut rtts = Vec::with_capacity(iters);
    for i in 0..iters {
        if let Some(stamp) = out.get_mut(..8) {
            stamp.copy_from_slice(&(i as u64).to_le_bytes());
        }
        let t = Instant::now();
        ep.send_to(&out, server)?;
        let (n, from) = recv_within(ep, &mut buf, timeout, "pingpong client")?;
        let elapsed = t.elapsed();
        if from != server || buf.get(..n) != Some(&out[..]) {
            return Err(BaselineError::Unexpected {
                what: "pingpong client",
                detail: format!("{n} bytes from {from} in round {i} do not echo the ping"),
            });
        }
        rtts.push(elapsed);
    }
    Ok(rtts)
}

/// Median round-trip time of `iters` ping-pongs of `size` bytes between two loopback
/// endpoints in two threads (after `iters / 10` warm-up rounds that are not counted).
pub fn udp_pingpong_rtt(size: usize, iters: usize) -> Result<Duration, BaselineError> {
    check_size(size, 0)?;
    let server = UdpEndpoint::bind(&UdpConfig::default())?;
    let client = UdpEndpoint::bind(&UdpConfig::default())?;
    let server_id = server.local_id();
    let warmup = iters / 10;
    let total = warmup + iters;
    let handle = std::thread::spawn(move || pingpong_server(&server, size, total, DEFAULT_TIMEOUT));
    let client_result = pingpong_client(&client, server_id, size, total, DEFAULT_TIMEOUT);
    let server_result = handle
        .join()
        .map_err(|_| BaselineError::ThreadPanicked("pingpong server"))?;
    let mut rtts = client_result?;
    server_result?;
    let measured = rtts.get_mut(warmup..).unwrap_or_default();
    median(measured).ok_or(BaselineError::InvalidArg {
        name: "iters",
        reason: "must be at least 1".into(),
    })
}

/// Parameters of a stream measurement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamParams {
    /// Bytes per message.
    pub msg_size: usize,
    /// Bytes per datagram, header included (use the transport's `max_datagram`).
    pub datagram_size: usize,
    /// Messages to send.
    pub count: usize,
    /// Most messages unacknowledged at once.
    pub window: usize,
    /// Longest wait for any one datagram.
    pub timeout: Duration,
}

impl StreamParams {
    /// `count` messages of `msg_size` in datagrams of `datagram_size`, window 2.
    pub fn new(msg_size: usize, datagram_size: usize, count: usize) -> Self {
        StreamParams {
            msg_size,
            datagram_size,
            count,
            window: 2,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    fn check(&self) -> Result<(), BaselineError> {
        check_size(self.datagram_size, STREAM_HDR + 1)?;
        let bad = |name, reason: String| Err(BaselineError::InvalidArg { name, reason });
        if self.msg_size == 0 || self.msg_size > u32::MAX as usize {
            return bad(
                "msg_size",
                format!("{} is outside 1..=u32::MAX", self.msg_size),
            );
        }
        if self.count < 2 {
            return bad(
                "count",
                format!("{} is below 2 (rates need an interval)", self.count),
            );
        }
        if self.window == 0 {
            return bad("window", "must be at least 1".into());
        }
        Ok(())
    }
}

/// Stream receiver half: receives `count` messages and acknowledges each. Returns the sender.
pub fn stream_receiver(ep: &UdpEndpoint, p: &StreamParams) -> Result<PhysId, BaselineError> {
    p.check()?;
    let what = "stream receiver";
    let mut buf = vec![0u8; MAX_DATAGRAM];
    let mut sender: Option<PhysId> = None;
    let mut got = 0usize;
    let mut msg = 0u32;
    while (msg as usize) < p.count {
        let (n, from) = recv_within(ep, &mut buf, p.timeout, what)?;
        let unexpected = |detail: String| BaselineError::Unexpected { what, detail };
        if *sender.get_or_insert(from) != from {
            return Err(unexpected(format!("datagram from a second sender {from}")));
        }
        let (Some(hdr), Some(data)) = (buf.get(..STREAM_HDR), buf.get(STREAM_HDR..n)) else {
            return Err(unexpected(format!(
                "{n}-byte datagram is shorter than its header"
            )));
        };
        let idx = u32::from_le_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        let off = u32::from_le_bytes([hdr[4], hdr[5], hdr[6], hdr[7]]) as usize;
        if idx != msg || off != got || got + data.len() > p.msg_size {
            return Err(unexpected(format!(
                "message {idx} offset {off} (+{}), expected message {msg} offset {got} \
                 (a datagram was lost or reordered)",
                data.len()
            )));
        }
        got += data.len();
        if got == p.msg_size {
            ep.send_to(&msg.to_le_bytes(), from)?;
            msg += 1;
            got = 0;
        }
    }
    sender.ok_or(BaselineError::InvalidArg {
        name: "count",
        reason: "no message received".into(),
    })
}

/// Stream sender half: sends `count` messages to `receiver` with at most `window`
/// unacknowledged. Returns the intervals between consecutive acknowledgements (the first ack,
/// which includes start-up, is not counted).
pub fn stream_sender(
    ep: &UdpEndpoint,
    receiver: PhysId,
    p: &StreamParams,
) -> Result<Vec<Duration>, BaselineError> {
    p.check()?;
    let what = "stream sender";
    let message: Vec<u8> = (0..p.msg_size).map(|i| (i % 253) as u8).collect();
    let chunk = p.datagram_size - STREAM_HDR;
    let mut dg = Vec::with_capacity(p.datagram_size);
    let mut ack = [0u8; 16];
    let mut intervals = Vec::with_capacity(p.count);
    let (mut next, mut acked) = (0usize, 0usize);
    let mut last_ack: Option<Instant> = None;
    while acked < p.count {
        while next < p.count && next - acked < p.window {
            for (k, part) in message.chunks(chunk).enumerate() {
                dg.clear();
                dg.extend_from_slice(&(next as u32).to_le_bytes());
                dg.extend_from_slice(&((k * chunk) as u32).to_le_bytes());
                dg.extend_from_slice(part);
                ep.send_to(&dg, receiver)?;
            }
            next += 1;
        }
        let (n, from) = recv_within(ep, &mut ack, p.timeout, what)?;
        let idx = ack
            .get(..4)
            .filter(|_| n == 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize);
        if from != receiver || idx != Some(acked) {
            return Err(BaselineError::Unexpected {
                what,
                detail: format!("{n}-byte datagram from {from}, expected ack of message {acked}"),
            });
        }
        let now = Instant::now();
        if let Some(prev) = last_ack {
            intervals.push(now - prev);
        }
        last_ack = Some(now);
        acked += 1;
    }
    Ok(intervals)
}

/// Raw streaming bandwidth in bytes per second between two loopback endpoints in two
/// threads: `msg_size` divided by the median interval between message acknowledgements.
pub fn udp_stream_bandwidth(
    msg_size: usize,
    datagram_size: usize,
    count: usize,
) -> Result<f64, BaselineError> {
    let p = StreamParams::new(msg_size, datagram_size, count);
    p.check()?;
    let rx = UdpEndpoint::bind(&UdpConfig::default())?;
    let tx = UdpEndpoint::bind(&UdpConfig::default())?;
    let rx_id = rx.local_id();
    let handle = std::thread::spawn(move || stream_receiver(&rx, &p));
    let sent = stream_sender(&tx, rx_id, &p);
    let received = handle
        .join()
        .map_err(|_| BaselineError::ThreadPanicked("stream receiver"))?;
    let mut intervals = sent?;
    received?;
    let med = median(&mut intervals).ok_or(BaselineError::InvalidArg {
        name: "count",
        reason: "too few messages for an interval".into(),
    })?;
    Ok(msg_size as f64 / med.as_secs_f64().max(1e-9))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_samples() {
        let ms = Duration::from_millis;
        assert_eq!(median(&mut []), None);
        assert_eq!(median(&mut [ms(3), ms(1), ms(2)]), Some(ms(2)));
        assert_eq!(median(&mut [ms(4), ms(1), ms(3), ms(2)]), Some(ms(3)));
    }

    #[test]
    fn pingpong_runs_and_checks_echo() {
        let rtt = udp_pingpong_rtt(8, 200).unwrap();
        assert!(rtt > Duration::ZERO);
        let rtt = udp_pingpong_rtt(65_000, 20).unwrap();
        assert!(rtt > Duration::ZERO);
    }

    #[test]
    fn stream_runs_and_reports_a_rate() {
        let bw = udp_stream_bandwidth(1 << 20, 65_000, 8).unwrap();
        assert!(bw.is_finite() && bw > 0.0);
    }

    #[test]
    fn bad_parameters_are_typed() {
        assert!(matches!(
            udp_pingpong_rtt(70_000, 1),
            Err(BaselineError::InvalidArg { name: "size", .. })
        ));
        assert!(matches!(
            udp_stream_bandwidth(1 << 20, 4, 8),
            Err(BaselineError::InvalidArg { name: "size", .. })
        ));
        assert!(matches!(
            udp_stream_bandwidth(1 << 20, 65_000, 1),
            Err(BaselineError::InvalidArg { name: "count", .. })
        ));
    }

    #[test]
    fn client_times_out_without_server() {
        let lonely = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
        let client = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
        let r = pingpong_client(&client, lonely.local_id(), 8, 1, Duration::from_millis(20));
        assert!(matches!(
            r,
            Err(BaselineError::Timeout {
                what: "pingpong client",
                ..
            })
        ));
    }
}
