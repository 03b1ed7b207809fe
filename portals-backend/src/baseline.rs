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

use crate::transport::{random_incarnation, Transport, TransportConfig, TransportEvent};
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

/// How a ping-pong half waits for each datagram.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    /// Longest wait for any one datagram before giving up.
    pub timeout: Duration,
    /// How long to busy-poll before blocking in the kernel.
    pub spin: Duration,
}

impl Wait {
    /// The engine's strategy: spin [`DEFAULT_SPIN`], then block; give up after `timeout`.
    pub fn blocking(timeout: Duration) -> Self {
        Self {
            timeout,
            spin: DEFAULT_SPIN,
        }
    }

    /// Busy-poll for the whole `timeout`, never sleeping in the kernel: the reference for
    /// layers that poll without sleeping (the AM benchmarks), since on a loaded machine the
    /// kernel's wake-up latency alone is tens of microseconds.
    pub fn busy(timeout: Duration) -> Self {
        Self {
            timeout,
            spin: timeout,
        }
    }
}

fn recv_within(
    ep: &UdpEndpoint,
    buf: &mut [u8],
    wait: Wait,
    what: &'static str,
) -> Result<(usize, PhysId), BaselineError> {
    ep.recv_wait(buf, Some(Instant::now() + wait.timeout), wait.spin)?
        .ok_or(BaselineError::Timeout {
            what,
            after: wait.timeout,
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
    wait: Wait,
) -> Result<(), BaselineError> {
    check_size(size, 0)?;
    let mut buf = vec![0u8; MAX_DATAGRAM];
    for _ in 0..iters {
        let (n, from) = recv_within(ep, &mut buf, wait, "pingpong server")?;
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
    wait: Wait,
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
        let (n, from) = recv_within(ep, &mut buf, wait, "pingpong client")?;
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
/// endpoints in two threads (after `iters / 10` warm-up rounds that are not counted), each
/// half waiting as `wait` says.
pub fn udp_pingpong_rtt(size: usize, iters: usize, wait: Wait) -> Result<Duration, BaselineError> {
    check_size(size, 0)?;
    let server = UdpEndpoint::bind(&UdpConfig::default())?;
    let client = UdpEndpoint::bind(&UdpConfig::default())?;
    let server_id = server.local_id();
    let warmup = iters / 10;
    let total = warmup + iters;
    let handle = std::thread::spawn(move || pingpong_server(&server, size, total, wait));
    let client_result = pingpong_client(&client, server_id, size, total, wait);
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
        let (n, from) = recv_within(ep, &mut buf, Wait::blocking(p.timeout), what)?;
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
/// unacknowledged. Returns the time each acknowledgement arrived.
pub fn stream_sender(
    ep: &UdpEndpoint,
    receiver: PhysId,
    p: &StreamParams,
) -> Result<Vec<Instant>, BaselineError> {
    p.check()?;
    let what = "stream sender";
    let message: Vec<u8> = (0..p.msg_size).map(|i| (i % 253) as u8).collect();
    let chunk = p.datagram_size - STREAM_HDR;
    let mut dg = Vec::with_capacity(p.datagram_size);
    let mut ack = [0u8; 16];
    let mut stamps = Vec::with_capacity(p.count);
    let (mut next, mut acked) = (0usize, 0usize);
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
        let (n, from) = recv_within(ep, &mut ack, Wait::blocking(p.timeout), what)?;
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
        stamps.push(Instant::now());
        acked += 1;
    }
    Ok(stamps)
}

/// Raw streaming bandwidth in bytes per second between two loopback endpoints in two
/// threads, from the first message acknowledgement to the last (see `rate`).
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
    let stamps = sent?;
    received?;
    rate(msg_size, &stamps)
}

/// A minimal single-threaded driver of a [`Transport`] over a [`UdpEndpoint`], used to compare
/// the transport with the raw baselines above (the engine has its own driver).
struct Driver {
    ep: UdpEndpoint,
    t: Transport,
    rx: Vec<u8>,
    tx: Vec<u8>,
}

/// Job key of the comparison runs.
const BENCH_JOB_KEY: u64 = 0x5eed_0000_0000_0001;

impl Driver {
    fn new() -> Result<Self, BaselineError> {
        let ep = UdpEndpoint::bind(&UdpConfig::default())?;
        let cfg = TransportConfig {
            job_key: BENCH_JOB_KEY,
            ..TransportConfig::default()
        };
        let t = Transport::new(cfg, ep.local_id(), random_incarnation(), Instant::now()).map_err(
            |e| BaselineError::InvalidArg {
                name: "transport config",
                reason: e.to_string(),
            },
        )?;
        Ok(Driver {
            ep,
            t,
            rx: vec![0u8; MAX_DATAGRAM],
            tx: Vec::with_capacity(MAX_DATAGRAM),
        })
    }

    fn flush(&mut self) -> Result<(), BaselineError> {
        while let Some(to) = self.t.poll_transmit(Instant::now(), &mut self.tx) {
            self.ep.send_to(&self.tx, to)?;
        }
        Ok(())
    }

    /// Waits for input until `limit` (or the transport's next deadline), feeds everything
    /// waiting as one batch, and fires due timers. Events are left for the caller.
    fn turn(&mut self, limit: Instant) -> Result<(), BaselineError> {
        let deadline = self.t.poll_timeout().map_or(limit, |d| d.min(limit));
        if let Some((n, from)) = self
            .ep
            .recv_wait(&mut self.rx, Some(deadline), DEFAULT_SPIN)?
        {
            let now = Instant::now();
            self.t
                .handle_datagram(now, from, self.rx.get(..n).unwrap_or_default());
            while let Some((n, from)) = self.ep.recv(&mut self.rx)? {
                self.t
                    .handle_datagram(now, from, self.rx.get(..n).unwrap_or_default());
            }
        }
        let now = Instant::now();
        if self.t.poll_timeout().is_some_and(|d| d <= now) {
            self.t.handle_timeout(now);
        }
        Ok(())
    }

    fn next_message(
        &mut self,
        what: &'static str,
    ) -> Result<Option<(PhysId, Vec<u8>)>, BaselineError> {
        loop {
            return match self.t.poll_event() {
                Some(TransportEvent::Delivered { from, message }) => Ok(Some((from, message))),
                Some(TransportEvent::PeerFailed { peer }) => Err(BaselineError::Unexpected {
                    what,
                    detail: format!("peer {peer} failed"),
                }),
                // The baseline asks for no confirmations; one would have nothing to act on.
                Some(TransportEvent::Confirmed { .. }) => continue,
                None => Ok(None),
            };
        }
    }

    fn send(&mut self, what: &'static str, to: PhysId, msg: Vec<u8>) -> Result<(), BaselineError> {
        self.t
            .send(Instant::now(), to, msg)
            .map_err(|e| BaselineError::Unexpected {
                what,
                detail: e.to_string(),
            })
    }

    /// Runs turns, calling `step` after each, until `step` returns `true`; fails after
    /// [`DEFAULT_TIMEOUT`] without any datagram or message arriving. Transmits after every
    /// step except the last, which the caller flushes.
    fn run_until(
        &mut self,
        what: &'static str,
        mut step: impl FnMut(&mut Driver) -> Result<bool, BaselineError>,
    ) -> Result<(), BaselineError> {
        let mut limit = Instant::now() + DEFAULT_TIMEOUT;
        loop {
            self.turn(limit)?;
            let (progressed, done) = {
                let before = self.t.stats().messages_delivered + self.t.stats().datagrams_in;
                let done = step(self)?;
                let after = self.t.stats().messages_delivered + self.t.stats().datagrams_in;
                (after != before, done)
            };
            if done {
                // Not flushed: an ack owed now should ride on whatever the caller sends next
                // (the caller flushes).
                return Ok(());
            }
            self.flush()?;
            let now = Instant::now();
            if progressed {
                limit = now + DEFAULT_TIMEOUT;
            } else if now >= limit {
                return Err(BaselineError::Timeout {
                    what,
                    after: DEFAULT_TIMEOUT,
                });
            }
        }
    }
}

/// Median round-trip time of `iters` request/response exchanges of `size`-byte messages
/// through two [`Transport`]s over loopback UDP in two threads (after `iters / 10` warm-up
/// rounds): the figure to hold against [`udp_pingpong_rtt`].
pub fn transport_pingpong_rtt(size: usize, iters: usize) -> Result<Duration, BaselineError> {
    let mut server = Driver::new()?;
    let mut client = Driver::new()?;
    let (server_id, client_id) = (server.ep.local_id(), client.ep.local_id());
    let total = iters / 10 + iters;
    let handle = std::thread::spawn(move || -> Result<(), BaselineError> {
        let what = "transport pingpong server";
        let mut echoed = 0;
        // Echo, then stay until the last answer is acknowledged so that a loss is repaired.
        server.run_until(what, |d| {
            while let Some((from, msg)) = d.next_message(what)? {
                d.send(what, from, msg)?;
                echoed += 1;
            }
            Ok(echoed == total && d.t.queued_bytes(client_id) == 0)
        })?;
        server.flush()
    });
    let what = "transport pingpong client";
    let ping = vec![0xA5u8; size];
    let mut rtts = Vec::with_capacity(total);
    let mut result = Ok(());
    for _ in 0..total {
        let t = Instant::now();
        let mut got = false;
        let r = client.send(what, server_id, ping.clone()).and_then(|()| {
            client.flush()?;
            client.run_until(what, |d| {
                if let Some((from, msg)) = d.next_message(what)? {
                    if from != server_id || msg != ping {
                        return Err(BaselineError::Unexpected {
                            what,
                            detail: format!("{} bytes from {from} do not echo the ping", msg.len()),
                        });
                    }
                    got = true;
                }
                Ok(got)
            })
        });
        if let Err(e) = r {
            result = Err(e);
            break;
        }
        rtts.push(t.elapsed());
    }
    // Let the last pong's acknowledgement out so the server can finish: it is not due at
    // once (acks wait for data to ride on, up to `ack_delay`), so keep turning until the
    // server has seen it, bounded.
    let linger = Instant::now() + Duration::from_millis(500);
    while result.is_ok() && !handle.is_finished() && Instant::now() < linger {
        let _ = client.turn(linger).and_then(|()| client.flush());
    }
    let server_result = handle
        .join()
        .map_err(|_| BaselineError::ThreadPanicked("transport pingpong server"))?;
    result?;
    server_result?;
    median(rtts.get_mut(total - iters..).unwrap_or_default()).ok_or(BaselineError::InvalidArg {
        name: "iters",
        reason: "must be at least 1".into(),
    })
}

/// Streaming bandwidth (bytes per second) of `count` messages of `msg_size` bytes through two
/// [`Transport`]s over loopback UDP in two threads, from the first delivery to the last
/// (see `rate`). The figure to hold against [`udp_stream_bandwidth`].
pub fn transport_stream_bandwidth(msg_size: usize, count: usize) -> Result<f64, BaselineError> {
    if count < 2 {
        return Err(BaselineError::InvalidArg {
            name: "count",
            reason: format!("{count} is below 2 (rates need an interval)"),
        });
    }
    let mut tx = Driver::new()?;
    let mut rx = Driver::new()?;
    let rx_id = rx.ep.local_id();
    // Built before timing so that the measurement does not include making the data.
    let messages: Vec<Vec<u8>> = (0..count)
        .map(|k| (0..msg_size).map(|i| ((i + k) % 251) as u8).collect())
        .collect();
    let expected_first = messages.first().cloned().unwrap_or_default();
    let sender = std::thread::spawn(move || -> Result<(), BaselineError> {
        let what = "transport stream sender";
        for m in messages {
            tx.send(what, rx_id, m)?;
        }
        tx.flush()?;
        tx.run_until(what, |d| {
            while d.next_message(what)?.is_some() {}
            Ok(d.t.queued_bytes(rx_id) == 0)
        })
    });
    let what = "transport stream receiver";
    let mut stamps = Vec::with_capacity(count);
    let mut first_ok = true;
    let received = rx.run_until(what, |d| {
        while let Some((_, m)) = d.next_message(what)? {
            if stamps.is_empty() {
                first_ok = m == expected_first;
            }
            if m.len() != msg_size {
                return Err(BaselineError::Unexpected {
                    what,
                    detail: format!("{}-byte message, expected {msg_size}", m.len()),
                });
            }
            stamps.push(Instant::now());
        }
        Ok(stamps.len() == count)
    });
    // Keep acknowledging until the sender has seen everything acknowledged.
    let linger = Instant::now() + Duration::from_millis(200);
    while received.is_ok() && !sender.is_finished() && Instant::now() < linger {
        rx.turn(linger)?;
        rx.flush()?;
    }
    let sent = sender
        .join()
        .map_err(|_| BaselineError::ThreadPanicked("transport stream sender"))?;
    received?;
    sent?;
    if !first_ok {
        return Err(BaselineError::Unexpected {
            what,
            detail: "first message content differs".into(),
        });
    }
    rate(msg_size, &stamps)
}

/// Bytes per second of a stream whose messages of `msg_size` bytes completed at `stamps`:
/// the steady rate from the first completion to the last (deliveries come in bursts, so
/// per-message intervals are not meaningful one by one).
fn rate(msg_size: usize, stamps: &[Instant]) -> Result<f64, BaselineError> {
    let (Some(first), Some(last)) = (stamps.first(), stamps.last()) else {
        return Err(BaselineError::InvalidArg {
            name: "count",
            reason: "no message completed".into(),
        });
    };
    let span = last.duration_since(*first).as_secs_f64().max(1e-9);
    Ok((stamps.len() - 1) as f64 * msg_size as f64 / span)
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
        let blocking = Wait::blocking(DEFAULT_TIMEOUT);
        let rtt = udp_pingpong_rtt(8, 200, blocking).unwrap();
        assert!(rtt > Duration::ZERO);
        let rtt = udp_pingpong_rtt(65_000, 20, blocking).unwrap();
        assert!(rtt > Duration::ZERO);
    }

    #[test]
    fn stream_runs_and_reports_a_rate() {
        let bw = udp_stream_bandwidth(1 << 20, 65_000, 8).unwrap();
        assert!(bw.is_finite() && bw > 0.0);
    }

    #[test]
    fn transport_over_udp_pingpong_and_stream() {
        assert!(transport_pingpong_rtt(8, 100).unwrap() > Duration::ZERO);
        let bw = transport_stream_bandwidth(1 << 20, 6).unwrap();
        assert!(bw.is_finite() && bw > 0.0);
    }

    /// Prints the comparison figures; run with
    /// `cargo test -p rgasnet-portals --release -- --ignored --nocapture compare`.
    #[test]
    #[ignore = "measurement, not a test: run by hand in release mode"]
    fn compare_transport_with_raw_udp() {
        let raw_rtt = udp_pingpong_rtt(8, 20_000, Wait::blocking(DEFAULT_TIMEOUT)).unwrap();
        let tr_rtt = transport_pingpong_rtt(8, 20_000).unwrap();
        let raw_bw = udp_stream_bandwidth(1 << 20, 65_000, 200).unwrap();
        let tr_bw = transport_stream_bandwidth(1 << 20, 200).unwrap();
        println!(
            "raw: udp pingpong 8 byte rtt {:.2} us",
            raw_rtt.as_secs_f64() * 1e6
        );
        println!(
            "transport pingpong 8 byte rtt {:.2} us",
            tr_rtt.as_secs_f64() * 1e6
        );
        println!("raw: udp stream 1048576 byte {:.1} MB/s", raw_bw / 1e6);
        println!("transport stream 1048576 byte {:.1} MB/s", tr_bw / 1e6);
        println!(
            "ratios: rtt {:.3}x, bandwidth {:.1} %",
            tr_rtt.as_secs_f64() / raw_rtt.as_secs_f64(),
            100.0 * tr_bw / raw_bw
        );
    }

    #[test]
    fn bad_parameters_are_typed() {
        assert!(matches!(
            udp_pingpong_rtt(70_000, 1, Wait::busy(DEFAULT_TIMEOUT)),
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
        let r = pingpong_client(
            &client,
            lonely.local_id(),
            8,
            1,
            Wait::blocking(Duration::from_millis(20)),
        );
        assert!(matches!(
            r,
            Err(BaselineError::Timeout {
                what: "pingpong client",
                ..
            })
        ));
    }
}
