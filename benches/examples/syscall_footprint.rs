//! How much slower the kernel's UDP send gets when the process touched more memory since its
//! last system call: a raw ping-pong between two threads on loopback in which each side writes
//! one byte per cache line of a private buffer of `N` KiB (a stand-in for a user-space
//! protocol path) between receiving a datagram and sending the next.
//!
//! ```text
//! cargo run --release -p rgasnet-bench --example syscall_footprint -- [KIB ...]
//! ```
//!
//! Prints, for each `N` (default 0 16 32 64 128 256), the median round trip, the median time
//! the client's `sendto` took, the median time of its touch pass, and the round trip less two
//! such passes (one per side): what the kernel and the loopback took. The `sendto` and last
//! columns are the point: the same calls on the same sockets, with only the cache contents
//! before them changed. It is why shrinking the bytes and the code an AM's round trip touches
//! speeds up its system calls as well as its own instructions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use rgasnet_portals::types::PhysId;
use rgasnet_portals::udp::{UdpConfig, UdpEndpoint};

/// Timed round trips per size (after as many untimed ones).
const TRIPS: usize = 20_000;
/// A receive that takes longer than this ends the run with an error.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Bytes per cache line.
const LINE: usize = 64;

/// Writes one byte per cache line of `buf`, so that every line is in the cache, modified.
fn touch(buf: &mut [u8]) {
    for line in buf.chunks_mut(LINE) {
        line[0] = line[0].wrapping_add(1);
    }
    std::hint::black_box(&buf);
}

/// Receives one datagram, busy-polling (never sleeping in the kernel) until `TIMEOUT`.
fn recv(ep: &UdpEndpoint, buf: &mut [u8]) -> Result<PhysId> {
    let (_, from) = ep
        .recv_wait(buf, Some(Instant::now() + TIMEOUT), TIMEOUT)?
        .ok_or_else(|| anyhow!("no datagram within {TIMEOUT:?}"))?;
    Ok(from)
}

fn median(v: &mut [Duration]) -> f64 {
    v.sort_unstable();
    v.get(v.len() / 2).map_or(0.0, |d| d.as_nanos() as f64)
}

/// (median round trip, median client `sendto`, median client touch pass) in ns.
fn run(kib: usize) -> Result<(f64, f64, f64)> {
    let server = Arc::new(UdpEndpoint::bind(&UdpConfig::default())?);
    let client = UdpEndpoint::bind(&UdpConfig::default())?;
    let server_id = server.local_id();
    let echo = std::thread::spawn({
        let server = server.clone();
        move || -> Result<()> {
            let mut scratch = vec![0u8; kib * 1024];
            let mut buf = vec![0u8; 2048];
            for _ in 0..2 * TRIPS {
                let from = recv(&server, &mut buf)?;
                touch(&mut scratch);
                server.send_to(&buf[..8], from)?;
            }
            Ok(())
        }
    });
    let mut scratch = vec![0u8; kib * 1024];
    let mut buf = vec![0u8; 2048];
    let (mut rtt, mut send, mut pass) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..2 * TRIPS {
        let start = Instant::now();
        touch(&mut scratch);
        let touched = Instant::now();
        client.send_to(&(i as u64).to_le_bytes(), server_id)?;
        let sent = Instant::now();
        recv(&client, &mut buf)?;
        if i >= TRIPS {
            rtt.push(start.elapsed());
            send.push(sent - touched);
            pass.push(touched - start);
        }
    }
    echo.join()
        .map_err(|_| anyhow!("the echo thread panicked"))??;
    Ok((median(&mut rtt), median(&mut send), median(&mut pass)))
}

fn main() -> Result<()> {
    let sizes: Vec<usize> = match std::env::args().skip(1).collect::<Vec<_>>() {
        args if args.is_empty() => vec![0, 16, 32, 64, 128, 256],
        args => args
            .iter()
            .map(|a| {
                a.parse()
                    .with_context(|| format!("KiB must be a number, not {a:?}"))
            })
            .collect::<Result<_>>()?,
    };
    println!(
        "{:>8} {:>12} {:>12} {:>12} {:>16}",
        "KiB", "rtt ns", "sendto ns", "touch ns", "rtt-2*touch ns"
    );
    for kib in sizes {
        let (rtt, send, pass) = run(kib)?;
        let kernel = rtt - 2.0 * pass;
        println!("{kib:>8} {rtt:>12.0} {send:>12.0} {pass:>12.0} {kernel:>16.0}");
    }
    Ok(())
}
