//! A bare AM Short ping-pong between ranks 0 and 1, for profiling the AM path: rank 0 sends a
//! request and polls until its reply has run, `ROUND_TRIPS` times; rank 1 polls until it has
//! answered them all. The loop of each rank is the one function `ping_pong`, so that a
//! profiler can collect exactly it, for instance callgrind's instruction counts per round
//! trip:
//!
//! ```text
//! cargo build --release -p rgasnet-bench --example am_short_profile
//! RGASNET_PSHM=0 target/release/rgasnetrun -n 2 valgrind --tool=callgrind \
//!     --toggle-collect='*ping_pong*' target/release/examples/am_short_profile [ROUND_TRIPS]
//! ```
//!
//! (divide a function's inclusive count by `ROUND_TRIPS`; default 20,000). Without a profiler
//! it prints the median round trip, which is `testam`'s AM Short figure without its baseline.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rgasnet::{Category, Client, Handler, Token};

const PING: u8 = 200;
const PONG: u8 = 201;
/// A wait longer than this means the other rank is gone.
const TIMEOUT: Duration = Duration::from_secs(120);

fn main() -> Result<()> {
    let trips: u64 = match std::env::args().nth(1) {
        None => 20_000,
        Some(a) => match a.parse::<u64>() {
            Ok(n) if n > 0 => n,
            _ => bail!("ROUND_TRIPS must be a positive integer, not {a:?}"),
        },
    };
    let client = Client::init().context("joining the job (start it with rgasnetrun -n 2)")?;
    if client.size() != 2 {
        bail!(
            "am_short_profile runs on exactly 2 ranks, not {}",
            client.size()
        );
    }
    let requests = Arc::new(AtomicU64::new(0));
    let replies = Arc::new(AtomicU64::new(0));
    let handlers = {
        let (requests, replies) = (requests.clone(), replies.clone());
        vec![
            Handler::new("ping", Category::Short, move |t: &Token<'_>, _, _| {
                // A failed reply leaves rank 0 waiting, which its timeout reports.
                if let Err(e) = t.reply_short(PONG, &[]) {
                    eprintln!("am_short_profile: reply: {e}");
                }
                // Relaxed: read only by this rank's polling thread, after the handler ran.
                requests.fetch_add(1, Ordering::Relaxed);
            })
            .at(PING),
            Handler::new("pong", Category::Short, move |_: &Token<'_>, _, _| {
                // Relaxed: as above.
                replies.fetch_add(1, Ordering::Relaxed);
            })
            .at(PONG),
        ]
    };
    client.attach(4096, handlers).context("attach")?;
    let rtts = ping_pong(&client, trips, &requests, &replies)?;
    if let Some(mut rtts) = rtts {
        rtts.sort_unstable();
        let median = rtts.get(rtts.len() / 2).copied().unwrap_or_default();
        println!(
            "AM Short ping-pong: {trips} round trips, median {:.3} us",
            median.as_secs_f64() * 1e6
        );
    }
    Ok(())
}

/// The measured loop: rank 0's round trips (returned), or rank 1's answering.
#[inline(never)]
fn ping_pong(
    client: &Client,
    trips: u64,
    requests: &AtomicU64,
    replies: &AtomicU64,
) -> Result<Option<Vec<Duration>>> {
    if client.rank() == 0 {
        let mut rtts = Vec::with_capacity(trips as usize);
        for done in 1..=trips {
            let t = Instant::now();
            client.am_request_short(1, PING, &[])?;
            wait(client, replies, done)?;
            rtts.push(t.elapsed());
        }
        Ok(Some(rtts))
    } else {
        wait(client, requests, trips)?;
        Ok(None)
    }
}

/// Polls until `count` reaches `target`.
fn wait(client: &Client, count: &AtomicU64, target: u64) -> Result<()> {
    let start = Instant::now();
    // Relaxed: the count is written by handlers that this thread's own poll runs.
    while count.load(Ordering::Relaxed) < target {
        client.poll()?;
        if start.elapsed() > TIMEOUT {
            bail!("no progress for {TIMEOUT:?}: the other rank is gone or stuck");
        }
    }
    Ok(())
}
