//! Measures the PSHM paths against this machine's raw baselines, with two processes (this
//! program re-executes itself as rank 1):
//!
//! ```sh
//! cargo run --release -p rgasnet-pshm --example measure
//! ```
//!
//! Prints the raw baselines, the AM request/reply round trip through the shared-memory
//! queues, the node barrier (arrive, then spin until done: the floor of a conduit barrier on
//! one host), an 8-byte write into the peer's mapped segment, and 1 MiB copies into it.
use std::hint::black_box;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rgasnet_pshm::baseline::{self, median};
use rgasnet_pshm::{AmMessage, BarrierKind, Body, Node, NodeConfig};

const CHILD: &str = "RGASNET_PSHM_MEASURE_CHILD";
const RUNS: usize = 5;
const RTT_ITERS: u32 = 20_000;
const MIB: usize = 1 << 20;
const STOP: u8 = 0;
const PING: u8 = 1;
/// Asks rank 1 to run `args[0]` node barriers.
const BARRIERS: u8 = 2;
const BARRIER_ITERS: u32 = 200_000;

fn main() -> Result<()> {
    if let Ok(key) = std::env::var(CHILD) {
        return child(key.parse().context("bad job key")?);
    }
    let flag_rtt = baseline::shm_flag_pingpong(RTT_ITERS, RUNS as u32)?;
    println!("{}", baseline::pingpong_line(flag_rtt));
    let memcpy = baseline::memcpy_bandwidth(MIB, RUNS as u32)?;
    println!("{}", baseline::memcpy_line(MIB, memcpy));

    let key: u64 = rand::random();
    let mut peer = Command::new(std::env::current_exe()?)
        .env(CHILD, key.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut to_peer = peer.stdin.take().context("stdin")?;
    let mut from_peer = BufReader::new(peer.stdout.take().context("stdout")?);
    // Bootstrap barrier over the pipes: exchange one line each way.
    let barrier = || -> std::io::Result<()> {
        writeln!(to_peer, "b")?;
        let mut l = String::new();
        from_peer.read_line(&mut l)?;
        Ok(())
    };
    let mut config = NodeConfig::new(key, 0, vec![0, 1], 2 * MIB);
    if let Ok(v) = std::env::var("RGASNET_PSHM_BARRIER") {
        config.barrier = BarrierKind::parse(&v)
            .context("RGASNET_PSHM_BARRIER: auto, counter or dissemination")?;
    }
    let (node, mut rx) = Node::attach(config, barrier)?;

    // Software cost of one Short: enqueue to self and dequeue, no cache line crosses cores.
    let own = AmMessage {
        handler: PING,
        args: &[7],
        body: Body::Short,
    };
    let n = 1_000_000u32;
    let mut samples = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        for _ in 0..n {
            node.try_send_request(0, &own)?;
            let m = rx.requests.try_recv()?.context("own message lost")?;
            black_box(m.args());
        }
        samples.push(t.elapsed().as_secs_f64() * 1e9 / f64::from(n));
    }
    println!(
        "pshm: am short enqueue+dequeue in one process {:.1} ns",
        median(&mut samples).unwrap_or(0.0)
    );

    // AM Short request -> reply round trip.
    let ping = AmMessage {
        handler: PING,
        args: &[7],
        body: Body::Short,
    };
    let mut samples = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        for _ in 0..RTT_ITERS {
            while node.try_send_request(1, &ping).is_err() {}
            loop {
                if let Some(m) = rx.replies.try_recv()? {
                    black_box(m.args());
                    break;
                }
                // As in the flag baseline: a polling loop without PAUSE starves an SMT sibling.
                std::hint::spin_loop();
            }
        }
        samples.push(t.elapsed() / RTT_ITERS);
    }
    let rtt = median(&mut samples).context("no samples")?;
    println!(
        "pshm: am short request/reply rtt {:.3} us ({:.2} x the flag ping-pong)",
        rtt.as_secs_f64() * 1e6,
        rtt.as_secs_f64() / flag_rtt.as_secs_f64()
    );

    // The node barrier, both ranks arriving and spinning until it completes.
    let mut samples = Vec::new();
    for _ in 0..RUNS {
        let ask = AmMessage {
            handler: BARRIERS,
            args: &[BARRIER_ITERS],
            body: Body::Short,
        };
        while node.try_send_request(1, &ask).is_err() {}
        let t = Instant::now();
        run_barriers(&node, BARRIER_ITERS);
        samples.push(t.elapsed() / BARRIER_ITERS);
    }
    let barrier = median(&mut samples).context("no samples")?;
    println!(
        "pshm: node barrier ({}), 2 ranks {:.3} us ({:.2} x the flag ping-pong)",
        if node.barrier_disseminates() {
            "dissemination"
        } else {
            "counter"
        },
        barrier.as_secs_f64() * 1e6,
        barrier.as_secs_f64() / flag_rtt.as_secs_f64()
    );

    let seg = node.segment(1).context("peer segment")?;
    // 8-byte write into the peer's segment, and into a heap Region for comparison (same copy
    // code, no shared mapping).
    let heap = rgasnet_portals::Region::new(2 * MIB);
    for (what, region) in [("peer", seg), ("heap", &heap)] {
        println!(
            "pshm: 8 byte write to {what} region {:.2} ns",
            write8_ns(region)?
        );
    }

    // 1 MiB copies into and out of the peer's segment.
    let src: Vec<u8> = (0..MIB).map(|i| i as u8).collect();
    let mut dst = vec![0u8; MIB];
    let reps = 64;
    let mut w = Vec::new();
    let mut r = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        for _ in 0..reps {
            seg.write(0, black_box(&src))?;
        }
        w.push((MIB * reps) as f64 / t.elapsed().as_secs_f64() / 1e6);
        let t = Instant::now();
        for _ in 0..reps {
            seg.read(0, black_box(&mut dst))?;
        }
        r.push((MIB * reps) as f64 / t.elapsed().as_secs_f64() / 1e6);
    }
    if dst != src {
        bail!("1 MiB read back differs");
    }
    let (w, r) = (median(&mut w).unwrap_or(0.0), median(&mut r).unwrap_or(0.0));
    println!(
        "pshm: 1 MiB write to peer region {w:.1} MB/s ({:.0}% of memcpy)",
        100.0 * w / memcpy
    );
    println!(
        "pshm: 1 MiB read from peer region {r:.1} MB/s ({:.0}% of memcpy)",
        100.0 * r / memcpy
    );
    let mut h = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        for _ in 0..reps {
            heap.write(0, black_box(&src))?;
        }
        h.push((MIB * reps) as f64 / t.elapsed().as_secs_f64() / 1e6);
    }
    let h = median(&mut h).unwrap_or(0.0);
    println!(
        "pshm: 1 MiB write to heap region {h:.1} MB/s ({:.0}% of memcpy)",
        100.0 * h / memcpy
    );

    let stop = AmMessage {
        handler: STOP,
        args: &[],
        body: Body::Short,
    };
    while node.try_send_request(1, &stop).is_err() {}
    let deadline = Instant::now() + Duration::from_secs(10);
    while peer.try_wait()?.is_none() {
        if Instant::now() > deadline {
            peer.kill()?;
            bail!("peer did not exit");
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

/// Median time of an aligned 8-byte `Region::write`.
fn write8_ns(region: &rgasnet_portals::Region) -> Result<f64> {
    let n = 10_000_000u32;
    let mut samples = Vec::new();
    for _ in 0..RUNS {
        let t = Instant::now();
        for i in 0..n {
            region.write(
                ((i as usize) & 0xff) * 8,
                black_box(&u64::from(i).to_le_bytes()),
            )?;
        }
        samples.push(t.elapsed().as_secs_f64() * 1e9 / f64::from(n));
    }
    median(&mut samples).context("no samples")
}

/// `n` node barriers: arrive, then spin until every member has arrived.
fn run_barriers(node: &Node, n: u32) {
    for _ in 0..n {
        let ticket = node.barrier_arrive();
        while !node.barrier_done(ticket) {
            std::hint::spin_loop();
        }
    }
}

/// Rank 1: answers every PING request with a reply until STOP; runs the barriers BARRIERS
/// asks for.
fn child(key: u64) -> Result<()> {
    let stdin = std::io::stdin();
    let barrier = || -> std::io::Result<()> {
        let mut out = std::io::stdout().lock();
        writeln!(out, "b")?;
        out.flush()?;
        let mut l = String::new();
        if stdin.lock().read_line(&mut l)? == 0 {
            return Err(std::io::Error::other("parent gone"));
        }
        Ok(())
    };
    let (node, mut rx) = Node::attach(NodeConfig::new(key, 1, vec![0, 1], 2 * MIB), barrier)?;
    let pong = AmMessage {
        handler: PING,
        args: &[8],
        body: Body::Short,
    };
    loop {
        let Some(m) = rx.requests.try_recv()? else {
            // Spin like a polling rank; sleep only when idle for long.
            if !rx.wait(Duration::from_secs(30)) {
                bail!("idle for 30 s");
            }
            continue;
        };
        if m.handler() == STOP {
            return Ok(());
        }
        if m.handler() == BARRIERS {
            let n = m.args().first().copied().unwrap_or(0);
            drop(m);
            run_barriers(&node, n);
            continue;
        }
        let src = m.source();
        drop(m);
        while node.try_send_reply(src, &pong).is_err() {}
    }
}
