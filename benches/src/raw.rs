//! Raw baselines of this machine, measured in the same run as the benchmark: plain UDP between
//! the job's ranks 0 and 1 (ping-pong of 8 and 65,000 bytes, a stream of 1 MiB messages in
//! datagrams of the engine's size), and in jobs on the shared-memory path the flag ping-pong
//! through shared memory, the same with the answer on a second cache line, and memcpy
//! bandwidth (`rgasnet_pshm::baseline`).
//!
//! The two ranks bind a socket each (the engine's `UdpEndpoint`, same buffers), exchange
//! addresses through the bootstrap allgather, and run a busy-polling ping-pong (the AM layer
//! polls without sleeping, so the reference must not sleep either) and the stream halves of
//! `rgasnet_portals::baseline`. Ranks above 1 take part in the collectives only.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use rgasnet::Client;
use rgasnet_launcher::{Bootstrap, BootstrapError};
use rgasnet_portals::baseline::{self, BaselineError, StreamParams};
use rgasnet_portals::transport::TransportConfig;
use rgasnet_portals::udp::{UdpConfig, UdpEndpoint, UdpError};
use rgasnet_portals::PhysId;

use crate::record::Record;
use crate::stats::median_duration;

/// Sizes of the raw ping-pongs: the AM Short reference and the maximal Medium.
pub const PINGPONG_SIZES: [usize; 2] = [8, 65_000];
/// Message size of the raw stream.
pub const STREAM_MSG: usize = 1 << 20;
/// Copy size of the memcpy baseline.
pub const MEMCPY_SIZE: usize = 1 << 20;
/// Round trips per clock reading of the shared-memory flag ping-pong, and of the AM ping-pong
/// that is compared with it (testam): the figure is the median of the averages of such
/// batches on both sides, so that the scheduler's interruptions on a shared machine, which a
/// long run would average in, are ignored the same way on both sides of the ratio.
pub const SHM_BATCH: u64 = 10;
/// Batches of the flag ping-pong (about 2 ms in all).
const SHM_BATCHES: u32 = 3000;

/// A raw baseline that could not be measured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RawError {
    /// Binding the socket failed.
    #[error("raw baseline: socket: {0}")]
    Socket(#[from] UdpError),
    /// The address exchange or the closing barrier failed.
    #[error("raw baseline: bootstrap: {0}")]
    Bootstrap(#[from] BootstrapError),
    /// A peer published something that is not an address.
    #[error("raw baseline: rank {rank} published {len} bytes, not an 8-byte address")]
    BadAddress {
        /// The rank.
        rank: usize,
        /// Bytes it published.
        len: usize,
    },
    /// The measurement itself failed (a lost datagram shows up as a timeout).
    #[error("raw baseline: {0}")]
    Measure(#[from] BaselineError),
    /// A shared-memory baseline failed.
    #[error("raw shared-memory baseline: {0}")]
    Shm(#[from] rgasnet_pshm::BaselineError),
    /// The TCP stream failed.
    #[error("raw tcp stream: {call}: {source}")]
    Tcp {
        /// The call that failed.
        call: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// What rank 0 measured (other ranks get an empty set).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RawFigures {
    /// Median round trip per ping-pong size, in [`PINGPONG_SIZES`] order.
    pub udp_rtt: Vec<(usize, Duration)>,
    /// Stream bandwidth, bytes per second.
    pub udp_stream_bps: Option<f64>,
    /// TCP stream bandwidth between the same addresses, bytes per second.
    pub tcp_stream_bps: Option<f64>,
    /// Shared-memory flag ping-pong round trip (PSHM jobs only).
    pub shm_rtt: Option<Duration>,
    /// The same ping-pong with the answer on a cache line of its own (PSHM jobs only): the
    /// floor of a round trip through two message queues.
    pub shm_two_line_rtt: Option<Duration>,
    /// memcpy bandwidth of 1 MiB copies, bytes per second (PSHM jobs only).
    pub memcpy_bps: Option<f64>,
}

impl RawFigures {
    /// The median round trip of `size`-byte datagrams, if measured.
    pub fn rtt(&self, size: usize) -> Option<Duration> {
        self.udp_rtt
            .iter()
            .find(|(s, _)| *s == size)
            .map(|(_, d)| *d)
    }

    /// The records to print (`raw: udp pingpong 8 byte rtt X us`, ...).
    pub fn records(&self) -> Vec<Record> {
        let mut v: Vec<Record> = self
            .udp_rtt
            .iter()
            .map(|(s, d)| Record::raw_rtt("udp pingpong rtt", Some(*s as u64), *d))
            .collect();
        if let Some(bw) = self.udp_stream_bps {
            v.push(Record::raw_bandwidth("udp stream", STREAM_MSG as u64, bw));
        }
        if let Some(bw) = self.tcp_stream_bps {
            v.push(Record::raw_bandwidth("tcp stream", STREAM_MSG as u64, bw));
        }
        if let Some(rtt) = self.shm_rtt {
            v.push(Record::raw_rtt("shm flag pingpong rtt", None, rtt));
        }
        if let Some(rtt) = self.shm_two_line_rtt {
            v.push(Record::raw_rtt("shm two-line pingpong rtt", None, rtt));
        }
        if let Some(bw) = self.memcpy_bps {
            v.push(Record::raw_bandwidth("memcpy", MEMCPY_SIZE as u64, bw));
        }
        v
    }
}

/// How much to measure.
#[derive(Debug, Clone, Copy)]
pub struct RawParams {
    /// Timed round trips per ping-pong size (a tenth more are run first as warm-up).
    pub iters: usize,
    /// 1 MiB messages in the stream.
    pub stream_count: usize,
    /// Longest wait for any one datagram.
    pub timeout: Duration,
}

/// Collective over the job: measures the raw UDP baselines between ranks 0 and 1. Every rank
/// must call it at the same point; rank 0 gets the figures. A job of one rank measures
/// nothing.
pub fn udp_baselines(client: &Client, p: &RawParams) -> Result<RawFigures, RawError> {
    let boot = client.bootstrap();
    let ep = UdpEndpoint::bind(&UdpConfig::from_env()?)?;
    let peers = exchange(boot, ep.local_id())?;
    let rank = boot.rank();
    let mut result = if peers.len() < 2 || rank > 1 {
        Ok(RawFigures::default())
    } else if rank == 0 {
        client_half(&ep, peers[1], p)
    } else {
        server_half(&ep, p).map(|()| RawFigures::default())
    };
    // The TCP stream between the same addresses: rank 1 listens and publishes its port in
    // place of its UDP one (every rank takes part in the exchange).
    let ip = Ipv4Addr::from(ep.local_id().nid);
    let listener = match rank {
        1 => Some(crate::raw_tcp::listen(ip)),
        _ => None,
    };
    let port = match &listener {
        Some(Ok((_, port))) => u32::from(*port),
        _ => 0,
    };
    let tcp_peers = exchange(
        boot,
        PhysId {
            nid: ep.local_id().nid,
            pid: port,
        },
    )?;
    if peers.len() >= 2 && result.is_ok() {
        let tcp = match (rank, listener) {
            // Port 0: rank 1 could not listen (its own error says why); a value that is not a
            // port is a bad address, not something to truncate.
            (0, _) => match tcp_peers.get(1).map(|s| (s, u16::try_from(s.pid))) {
                Some((_, Ok(0))) | None => Ok(None),
                Some((server, Ok(port))) => crate::raw_tcp::send_stream(
                    SocketAddrV4::new(Ipv4Addr::from(server.nid), port),
                    p.stream_count,
                    p.timeout,
                )
                .map(Some),
                Some((_, Err(_))) => Err(RawError::BadAddress { rank: 1, len: 8 }),
            },
            (1, Some(Ok((l, _)))) => crate::raw_tcp::serve_stream(l, p.timeout).map(|()| None),
            (1, Some(Err(e))) => Err(e),
            _ => Ok(None),
        };
        match (tcp, &mut result) {
            (Ok(bps), Ok(figs)) => figs.tcp_stream_bps = bps,
            (Err(e), _) => result = Err(e),
            _ => {}
        }
    }
    // Whatever happened, meet again so that the ranks leave together; a failure on either
    // side then surfaces on that side only.
    boot.barrier()?;
    result
}

fn exchange(boot: &Bootstrap, me: PhysId) -> Result<Vec<PhysId>, RawError> {
    let mut blob = [0u8; 8];
    blob[..4].copy_from_slice(&me.nid.to_le_bytes());
    blob[4..].copy_from_slice(&me.pid.to_le_bytes());
    let all = boot.allgather(&blob)?;
    all.iter()
        .enumerate()
        .map(|(rank, b)| match <[u8; 8]>::try_from(b.as_slice()) {
            Ok(a) => Ok(PhysId {
                nid: u32::from_le_bytes([a[0], a[1], a[2], a[3]]),
                pid: u32::from_le_bytes([a[4], a[5], a[6], a[7]]),
            }),
            Err(_) => Err(RawError::BadAddress { rank, len: b.len() }),
        })
        .collect()
}

/// The engine's datagram size, so that the stream moves data in the same units as rgasnet.
fn datagram_size() -> usize {
    TransportConfig::default().max_datagram
}

fn stream_params(p: &RawParams) -> StreamParams {
    let mut sp = StreamParams::new(STREAM_MSG, datagram_size(), p.stream_count);
    sp.timeout = p.timeout;
    sp
}

/// How both halves of the raw ping-pongs wait: busy-polling, as the AM layer polls without
/// sleeping, so the reference must not include the kernel's wake-up latency either.
fn busy(p: &RawParams) -> baseline::Wait {
    baseline::Wait::busy(p.timeout)
}

fn client_half(ep: &UdpEndpoint, server: PhysId, p: &RawParams) -> Result<RawFigures, RawError> {
    let mut figs = RawFigures::default();
    let warmup = p.iters / 10;
    for size in PINGPONG_SIZES {
        let rtts = baseline::pingpong_client(ep, server, size, warmup + p.iters, busy(p))?;
        if let Some(m) = median_duration(rtts.get(warmup..).unwrap_or_default()) {
            figs.udp_rtt.push((size, m));
        }
    }
    let stamps = baseline::stream_sender(ep, server, &stream_params(p))?;
    figs.udp_stream_bps = stream_rate(&stamps);
    Ok(figs)
}

fn server_half(ep: &UdpEndpoint, p: &RawParams) -> Result<(), RawError> {
    let warmup = p.iters / 10;
    for size in PINGPONG_SIZES {
        baseline::pingpong_server(ep, size, warmup + p.iters, busy(p))?;
    }
    baseline::stream_receiver(ep, &stream_params(p))?;
    Ok(())
}

/// Bytes per second from the first acknowledged message to the last (the first interval
/// includes filling the pipe, so it is the start mark, not a sample).
fn stream_rate(stamps: &[Instant]) -> Option<f64> {
    let (first, last) = (stamps.first()?, stamps.last()?);
    let span = last.duration_since(*first).as_secs_f64();
    (span > 0.0).then(|| (stamps.len() - 1) as f64 * STREAM_MSG as f64 / span)
}

/// The raw UDP baselines as every benchmark binary runs them: measured between ranks 0 and 1
/// with the sizes of `opts` and printed through `out` (rank 0). A failure is printed on
/// standard error and leaves the figures empty: the benchmark's own figures are still worth
/// having, and the missing baseline shows as `not measured` in the target lines.
pub fn measure_and_print(
    client: &Client,
    opts: &crate::opts::CommonOpts,
    out: &mut crate::opts::Out,
) -> RawFigures {
    if opts.no_baseline {
        return RawFigures::default();
    }
    let p = RawParams {
        iters: opts.raw_iters as usize,
        stream_count: opts.raw_stream_count as usize,
        timeout: Duration::from_secs(5),
    };
    let mut figs = match udp_baselines(client, &p) {
        Ok(f) => f,
        Err(e) => {
            eprintln!("rank {}: {e}", client.rank());
            RawFigures::default()
        }
    };
    if let Err(e) = shm_baselines(client, &mut figs) {
        eprintln!("rank {}: {e}", client.rank());
    }
    for r in figs.records() {
        out.record(&r);
    }
    figs
}

/// When this job uses the shared-memory path (rank 0 shares its supernode), rank 0 measures
/// the shared-memory flag ping-pong (with a forked partner) and memcpy bandwidth while the
/// other ranks wait in the bootstrap barrier, which blocks instead of spinning: the ping-pong
/// needs both cores.
fn shm_baselines(client: &Client, figs: &mut RawFigures) -> Result<(), RawError> {
    let boot = client.bootstrap();
    let on_pshm = client.supernode().len() > 1;
    let mut result = Ok(());
    if on_pshm && client.rank() == 0 {
        result = (|| {
            figs.shm_rtt = Some(rgasnet_pshm::baseline::shm_flag_pingpong(
                SHM_BATCH as u32,
                SHM_BATCHES,
            )?);
            figs.shm_two_line_rtt = Some(rgasnet_pshm::baseline::shm_two_line_pingpong(
                SHM_BATCH as u32,
                SHM_BATCHES,
            )?);
            figs.memcpy_bps = Some(rgasnet_pshm::baseline::memcpy_bandwidth(MEMCPY_SIZE, 5)? * 1e6);
            Ok(())
        })();
    }
    boot.barrier()?;
    result
}

/// A `target:` line: `measured` against `reference` (same unit), met when the ratio is at
/// most `max_ratio` (times) or, for bandwidths, at least `min_fraction`.
pub fn target_line(
    label: &str,
    measured: f64,
    reference: Option<(&str, f64)>,
    goal: Goal,
) -> String {
    let Some((ref_label, r)) = reference.filter(|(_, r)| *r > 0.0) else {
        return format!("target: {label}: no baseline measured in this run");
    };
    let ratio = measured / r;
    let (met, goal_text) = match goal {
        Goal::AtMost(x) => (ratio <= x, format!("<= {x}")),
        Goal::AtLeast(x) => (ratio >= x, format!(">= {x}")),
    };
    format!(
        "target: {label} {measured:.2} / {ref_label} {r:.2} = {ratio:.3} (target {goal_text}: {})",
        if met { "met" } else { "missed" }
    )
}

/// The `floor:` line under the shared-memory AM target: the two-line ping-pong against the
/// flag ping-pong (both in µs). A round trip through two message queues moves each
/// direction's message on a cache line of its own, so the ratio is what any such AM costs
/// before its software runs.
pub fn floor_line(two_line_us: f64, flag_us: f64) -> String {
    if flag_us <= 0.0 {
        return "floor: no shared-memory flag ping-pong measured in this run".to_string();
    }
    format!(
        "floor: raw shm two-line pingpong rtt us {two_line_us:.2} / raw shm flag pingpong rtt us {flag_us:.2} = {:.3} (a message each way on a cache line of its own, before any software)",
        two_line_us / flag_us
    )
}

/// What a target asks of a ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    /// The ratio must not exceed this (latencies).
    AtMost(f64),
    /// The ratio must reach this (bandwidths).
    AtLeast(f64),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_of_figures() {
        let f = RawFigures {
            udp_rtt: vec![
                (8, Duration::from_nanos(6410)),
                (65_000, Duration::from_micros(13)),
            ],
            udp_stream_bps: Some(9267.0e6),
            tcp_stream_bps: Some(1259.3e6),
            shm_rtt: Some(Duration::from_nanos(110)),
            shm_two_line_rtt: Some(Duration::from_nanos(250)),
            memcpy_bps: Some(42_000.0e6),
        };
        let lines: Vec<String> = f.records().iter().map(|r| r.gasnet_line()).collect();
        assert_eq!(
            lines,
            vec![
                "raw: udp pingpong 8 byte rtt 6.41 us",
                "raw: udp pingpong 65000 byte rtt 13.00 us",
                "raw: udp stream 1048576 byte 9267.0 MB/s",
                "raw: tcp stream 1048576 byte 1259.3 MB/s",
                "raw: shm flag pingpong rtt 0.110 us",
                "raw: shm two-line pingpong rtt 0.250 us",
                "raw: memcpy 1048576 byte 42000.0 MB/s",
            ]
        );
        assert_eq!(f.rtt(8), Some(Duration::from_nanos(6410)));
        assert_eq!(f.rtt(9), None);
    }

    #[test]
    fn stream_rate_counts_intervals() {
        let t0 = Instant::now();
        let stamps = [
            t0,
            t0 + Duration::from_millis(1),
            t0 + Duration::from_millis(2),
        ];
        let r = stream_rate(&stamps).unwrap();
        assert!((r - 2.0 * STREAM_MSG as f64 / 0.002).abs() < 1.0);
        assert_eq!(stream_rate(&[t0]), None);
        assert_eq!(stream_rate(&[]), None);
    }

    #[test]
    fn halves_talk_over_loopback() {
        // Both halves in two threads of this process, as rank 0 and rank 1 would run them.
        let p = RawParams {
            iters: 20,
            stream_count: 3,
            timeout: Duration::from_secs(5),
        };
        let server = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
        let client = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
        let sid = server.local_id();
        let h = std::thread::spawn(move || server_half(&server, &p));
        let figs = client_half(&client, sid, &p).unwrap();
        h.join().unwrap().unwrap();
        assert_eq!(figs.udp_rtt.len(), 2);
        assert_eq!(figs.udp_rtt[0].0, 8);
        assert_eq!(figs.udp_rtt[1].0, 65_000);
        assert!(figs.udp_stream_bps.is_some_and(|b| b > 0.0));
    }

    #[test]
    fn target_lines() {
        assert_eq!(
            target_line("8 byte put latency us", 10.0, Some(("raw udp 8 byte rtt us", 8.0)), Goal::AtMost(1.25)),
            "target: 8 byte put latency us 10.00 / raw udp 8 byte rtt us 8.00 = 1.250 (target <= 1.25: met)"
        );
        assert_eq!(
            target_line("put_nbi 1 MiB MB/s", 700.0, Some(("raw udp stream MB/s", 1000.0)), Goal::AtLeast(0.8)),
            "target: put_nbi 1 MiB MB/s 700.00 / raw udp stream MB/s 1000.00 = 0.700 (target >= 0.8: missed)"
        );
        assert_eq!(
            target_line("x", 1.0, None, Goal::AtMost(1.0)),
            "target: x: no baseline measured in this run"
        );
    }

    #[test]
    fn floor_lines() {
        assert_eq!(
            floor_line(0.29, 0.13),
            "floor: raw shm two-line pingpong rtt us 0.29 / raw shm flag pingpong rtt us 0.13 = 2.231 (a message each way on a cache line of its own, before any software)"
        );
        assert_eq!(
            floor_line(0.29, 0.0),
            "floor: no shared-memory flag ping-pong measured in this run"
        );
    }
}
