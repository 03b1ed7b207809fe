//! What rgasnet's shared-memory queues cost an AM round trip before the conduit's layers: two
//! threads attach to one node as ranks 0 and 1 of `rgasnet-pshm` and ping-pong a Short (one
//! argument) through the real rings, rank 0 by `try_send_request` and rank 1 by
//! `try_send_reply`, each polling its own inbox. Next to it, in the same run, the raw flag
//! and two-line ping-pongs of `rgasnet_pshm::baseline`, the floors that `testam`'s
//! shared-memory target lines divide by, and its ring ping-pong: two lines that move to the
//! next cell of a ring per message, the floor for any queue built as a ring of cells.
//!
//! ```text
//! cargo run --release -p rgasnet-bench --example queue_floor -- [RUNS] [CELLS]
//! ```
//!
//! Runs `RUNS` rounds (default 7); each round runs every floor and the queue once, 100,000
//! round trips each, in turn, so that this VM's changes of speed hit them alike. The ring
//! ping-pong has `CELLS` cells per ring (default `RING_CELLS`, as many as a queue has; 1 makes
//! it the two-line ping-pong with a position for a flag). Prints each
//! one's median over the rounds, and the median over the rounds of the queue's and the ring's
//! ratios to the two-line floor and of the queue's to the ring. The queue ping-pong has no
//! handler table, token, checks or statistics: what is left between it and `testam`'s AM Short
//! is the conduit.

use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use rgasnet_pshm::baseline::{
    median, shm_flag_pingpong, shm_ring_pingpong, shm_two_line_pingpong, RING_CELLS,
};
use rgasnet_pshm::{AmMessage, Body, Node, NodeConfig, Receiver};

/// Round trips per run (as many again warm up first).
const TRIPS: u32 = 100_000;
/// A wait longer than this means the other thread failed.
const TIMEOUT: Duration = Duration::from_secs(30);

fn main() -> Result<()> {
    let runs: u32 = match std::env::args().nth(1) {
        None => 7,
        Some(a) => match a.parse() {
            Ok(n) if n > 0 => n,
            _ => bail!("RUNS must be a positive integer, not {a:?}"),
        },
    };
    let cells: usize = match std::env::args().nth(2) {
        None => RING_CELLS,
        Some(a) => match a.parse() {
            Ok(n) if n > 0 => n,
            _ => bail!("CELLS must be a positive integer, not {a:?}"),
        },
    };
    let mut rounds: Vec<[Duration; 4]> = Vec::with_capacity(runs as usize);
    for _ in 0..runs {
        let flag = shm_flag_pingpong(TRIPS, 1).context("flag ping-pong")?;
        let two = shm_two_line_pingpong(TRIPS, 1).context("two-line ping-pong")?;
        let ring = shm_ring_pingpong(cells, TRIPS, 1).context("ring ping-pong")?;
        let queue = queue_pingpong(1)?;
        let queue = *queue.first().ok_or_else(|| anyhow!("no queue run"))?;
        rounds.push([flag, two, ring, queue]);
    }
    let ns = |d: Duration| d.as_secs_f64() * 1e9;
    let column = |i: usize| -> Result<f64> {
        let mut v: Vec<Duration> = rounds.iter().map(|r| r[i]).collect();
        median(&mut v).map(ns).ok_or_else(|| anyhow!("no run"))
    };
    let ratio = |num: usize, den: usize| -> Result<f64> {
        let mut v: Vec<f64> = rounds.iter().map(|r| ns(r[num]) / ns(r[den])).collect();
        median(&mut v).ok_or_else(|| anyhow!("no run"))
    };
    println!("flag ping-pong: {:.1} ns", column(0)?);
    println!("two-line ping-pong: {:.1} ns", column(1)?);
    println!(
        "ring ping-pong ({cells} cells per ring): {:.1} ns = {:.3} x two-line",
        column(2)?,
        ratio(2, 1)?
    );
    println!(
        "queue ping-pong (Short, 1 argument): {:.1} ns = {:.3} x two-line = {:.3} x ring",
        column(3)?,
        ratio(3, 1)?,
        ratio(3, 2)?
    );
    Ok(())
}

/// `runs` timed runs of the ping-pong through the queues, each the mean of [`TRIPS`] round
/// trips.
fn queue_pingpong(runs: u32) -> Result<Vec<Duration>> {
    // A job key of its own (it names the shared-memory objects): this process and the time.
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let key = (u64::from(std::process::id()) << 32) ^ nanos;
    let gate = std::sync::Barrier::new(2);
    let (timings, answered) = thread::scope(|s| {
        let gate = &gate;
        let attach = move |rank: u32| {
            Node::attach(NodeConfig::new(key, rank, vec![0, 1], 0), || {
                gate.wait();
                Ok::<(), std::io::Error>(())
            })
        };
        let responder = s.spawn(move || -> Result<u64> {
            let (node, rx) = attach(1).context("rank 1 attaches")?;
            answer(&node, rx, u64::from(TRIPS) * u64::from(runs + 1))
        });
        let initiator = s.spawn(move || -> Result<Vec<Duration>> {
            let (node, rx) = attach(0).context("rank 0 attaches")?;
            ask(&node, rx, runs)
        });
        (initiator.join(), responder.join())
    });
    let timings = timings.map_err(|_| anyhow!("rank 0 panicked"))??;
    let answered = answered.map_err(|_| anyhow!("rank 1 panicked"))??;
    if answered != u64::from(TRIPS) * u64::from(runs + 1) {
        bail!("rank 1 answered {answered} requests");
    }
    Ok(timings)
}

/// Rank 0: a warm-up run, then `runs` timed ones; every reply must carry its request's number.
fn ask(node: &Node, mut rx: Receiver, runs: u32) -> Result<Vec<Duration>> {
    let mut sent: u32 = 0;
    let mut round_trip = |rx: &mut Receiver| -> Result<()> {
        sent = sent.wrapping_add(1);
        let args = [sent];
        let msg = AmMessage {
            handler: 1,
            args: &args,
            body: Body::Short,
        };
        node.try_send_request(1, &msg)
            .map_err(|e| anyhow!("request: {e}"))?;
        let start = Instant::now();
        let mut spins = 0u32;
        loop {
            if let Some(m) = rx.replies.try_recv().map_err(|e| anyhow!("{e}"))? {
                if m.args() != [sent] {
                    bail!("reply {:?} to request {sent}", m.args());
                }
                return Ok(());
            }
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins % 65_536 == 0 && start.elapsed() > TIMEOUT {
                bail!("no reply to request {sent} in {TIMEOUT:?}");
            }
        }
    };
    for _ in 0..TRIPS {
        round_trip(&mut rx)?;
    }
    let mut out = Vec::with_capacity(runs as usize);
    for _ in 0..runs {
        let t = Instant::now();
        for _ in 0..TRIPS {
            round_trip(&mut rx)?;
        }
        out.push(t.elapsed() / TRIPS);
    }
    Ok(out)
}

/// Rank 1: answers `total` requests, each with a reply carrying the request's argument.
fn answer(node: &Node, mut rx: Receiver, total: u64) -> Result<u64> {
    let mut answered = 0u64;
    // Started by the first idle batch of spins, so that no clock is read per request.
    let mut idle_since: Option<Instant> = None;
    let mut spins = 0u32;
    while answered < total {
        let Some(m) = rx.requests.try_recv().map_err(|e| anyhow!("{e}"))? else {
            std::hint::spin_loop();
            spins = spins.wrapping_add(1);
            if spins % 65_536 == 0
                && idle_since.get_or_insert_with(Instant::now).elapsed() > TIMEOUT
            {
                bail!("no request after {answered} in {TIMEOUT:?}");
            }
            continue;
        };
        let args = [m.args().first().copied().unwrap_or(0)];
        let reply = AmMessage {
            handler: 2,
            args: &args,
            body: Body::Short,
        };
        // As the conduit does: the reply leaves before the request's cells are released.
        node.try_send_reply(m.source(), &reply)
            .map_err(|e| anyhow!("reply: {e}"))?;
        drop(m);
        answered += 1;
        idle_since = None;
    }
    Ok(answered)
}
