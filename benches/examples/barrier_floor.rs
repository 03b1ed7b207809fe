//! What a shared-memory barrier among `RANKS` processes costs this machine before any barrier
//! software runs: `rgasnet_pshm::baseline::shm_counter_barrier`, a bare counter barrier among
//! this process and forked children, waiting by `sched_yield` on a host with more ranks than
//! CPUs (as rgasnet's node barrier and GASNet's smp-conduit then do) and by spinning
//! otherwise. `testbarrier`'s figure at the same rank count, on shared memory, divided by
//! this one, is what the barrier's software adds to the scheduler's and the cache's cost.
//!
//! ```text
//! cargo run --release -p rgasnet-bench --example barrier_floor -- RANKS [ITERATIONS] [RUNS]
//! ```
//!
//! Prints the median time per barrier over `RUNS` runs (default 5) of `ITERATIONS` barriers
//! (default 100,000), in µs.

use anyhow::{bail, Context, Result};
use rgasnet_pshm::baseline::shm_counter_barrier;

/// The positional argument `index`, or `default` when absent; a positive integer.
fn count_arg(index: usize, name: &str, default: Option<u32>) -> Result<u32> {
    match (std::env::args().nth(index), default) {
        (None, Some(d)) => Ok(d),
        (None, None) => bail!("usage: barrier_floor RANKS [ITERATIONS] [RUNS]"),
        (Some(a), _) => match a.parse() {
            Ok(n) if n > 0 => Ok(n),
            _ => bail!("{name} must be a positive integer, not {a:?}"),
        },
    }
}

fn main() -> Result<()> {
    let ranks = count_arg(1, "RANKS", None)?;
    let iterations = count_arg(2, "ITERATIONS", Some(100_000))?;
    let runs = count_arg(3, "RUNS", Some(5))?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let crowded = ranks as usize > cpus;
    let per_barrier = shm_counter_barrier(ranks, crowded, iterations, runs)
        .with_context(|| format!("the counter barrier among {ranks} processes"))?;
    println!(
        "counter-barrier floor, {ranks} ranks on {cpus} CPUs ({}): {:.3} us",
        if crowded { "yield" } else { "spin" },
        per_barrier.as_secs_f64() * 1e6
    );
    Ok(())
}
