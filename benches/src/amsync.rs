//! Waiting and synchronising through the AM layer itself, for benchmarks that have only the
//! core API: a poll loop with a deadline, and a barrier made of Short AMs.
//!
//! The bootstrap barrier (TCP through the launcher) would do for synchronisation, but a rank
//! sitting in it does not poll, so acknowledgements and retransmissions for its peer stall; an
//! AM barrier keeps every rank polling until all have arrived.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rgasnet::{AmError, Category, Client, Handler};

/// A wait that did not finish.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SyncError {
    /// An AM call failed.
    #[error("{what}: {source}")]
    Am {
        /// What the benchmark was doing.
        what: String,
        /// The AM layer's error.
        #[source]
        source: AmError,
    },
    /// The condition did not hold in time (a lost peer or a protocol bug, never a slow run:
    /// the deadline is many times any expected duration).
    #[error("{what}: not done after {after:?}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// How long.
        after: Duration,
    },
}

/// Polls `client` until `done()` holds; fails after `timeout`.
pub fn poll_until(
    client: &Client,
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> bool,
) -> Result<(), SyncError> {
    let start = Instant::now();
    let mut spins = 0u32;
    while !done() {
        client.poll().map_err(|source| SyncError::Am {
            what: what.to_string(),
            source,
        })?;
        spins = spins.wrapping_add(1);
        // Reading the clock every poll would add to the latency being measured.
        if spins % 256 == 0 && start.elapsed() > timeout {
            return Err(SyncError::Timeout {
                what: what.to_string(),
                after: timeout,
            });
        }
    }
    Ok(())
}

/// A barrier of Short AMs: every rank tells every other rank it arrived and polls until all
/// others told it. Register [`AmBarrier::handler`] at attach.
#[derive(Debug, Clone)]
pub struct AmBarrier {
    /// Arrivals per epoch parity: a peer can be at most one epoch ahead (it cannot leave
    /// epoch e before this rank arrived in e), so two counters suffice.
    arrived: Arc<[AtomicU64; 2]>,
    epoch: u64,
    index: u8,
    timeout: Duration,
}

impl AmBarrier {
    /// A barrier whose handler will sit at client index `index`; each wait fails after
    /// `timeout`.
    pub fn new(index: u8, timeout: Duration) -> AmBarrier {
        AmBarrier {
            arrived: Arc::new([AtomicU64::new(0), AtomicU64::new(0)]),
            epoch: 0,
            index,
            timeout,
        }
    }

    /// The handler to register at attach.
    pub fn handler(&self) -> Handler {
        let arrived = self.arrived.clone();
        Handler::new("bench_barrier", Category::Short, move |_, args, _| {
            let parity = args.first().map_or(0, |e| (e & 1) as usize);
            arrived[parity].fetch_add(1, Ordering::AcqRel);
        })
        .at(self.index)
        .with_argc(1)
    }

    /// Enters the next barrier epoch and waits for every other rank to enter it.
    pub fn wait(&mut self, client: &Client) -> Result<(), SyncError> {
        self.epoch += 1;
        let parity = (self.epoch & 1) as usize;
        let (me, n) = (client.rank(), client.size());
        for peer in (0..n).filter(|p| *p != me) {
            client
                .am_request_short(peer, self.index, &[self.epoch as u32])
                .map_err(|source| SyncError::Am {
                    what: format!("barrier {}", self.epoch),
                    source,
                })?;
        }
        let want = u64::from(n - 1);
        let counter = &self.arrived[parity];
        poll_until(
            client,
            &format!("barrier {}", self.epoch),
            self.timeout,
            || counter.load(Ordering::Acquire) >= want,
        )?;
        // Consume this epoch's arrivals; the counter is reused two epochs on.
        counter.fetch_sub(want, Ordering::AcqRel);
        Ok(())
    }
}
