//! Counters of the AM layer, readable by applications and tests.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters (relaxed atomics: they are statistics, never used for synchronisation).
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) sent: AtomicU64,
    /// Handlers run for messages from the network.
    pub(crate) handled: AtomicU64,
    /// Handlers run for messages from shared memory. Only the holder of the shared-memory
    /// receiver's lock writes it, so it is bumped with [`Counters::bump_held`].
    pub(crate) handled_shm: AtomicU64,
    pub(crate) resends: AtomicU64,
    pub(crate) recoveries: AtomicU64,
    pub(crate) blocks_reposted: AtomicU64,
    pub(crate) blocks_rewound: AtomicU64,
}

impl Counters {
    pub(crate) fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// [`Counters::bump`] for a counter that only the holder of one lock writes: a plain load
    /// and store, not a locked add (which waits for every earlier store of the thread, on the
    /// way from a reply's handler to the program's next request). The lock's release and
    /// the next holder's acquire order the writers, so no count is lost.
    pub(crate) fn bump_held(c: &AtomicU64) {
        c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> AmStats {
        AmStats {
            sent: self.sent.load(Ordering::Relaxed),
            handled: self
                .handled
                .load(Ordering::Relaxed)
                .wrapping_add(self.handled_shm.load(Ordering::Relaxed)),
            resends: self.resends.load(Ordering::Relaxed),
            flow_control_recoveries: self.recoveries.load(Ordering::Relaxed),
            blocks_reposted: self.blocks_reposted.load(Ordering::Relaxed),
            blocks_rewound: self.blocks_rewound.load(Ordering::Relaxed),
        }
    }
}

/// A snapshot of the AM layer's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AmStats {
    /// AM and Long-data puts issued (first attempts).
    pub sent: u64,
    /// Handlers run on this rank.
    pub handled: u64,
    /// Puts sent again after the target refused them (flow control).
    pub resends: u64,
    /// Times this rank's AM portal was disabled by flow control and re-enabled.
    pub flow_control_recoveries: u64,
    /// AM receive blocks re-posted after they filled up.
    pub blocks_reposted: u64,
    /// Drained AM receive blocks rewound to their start (so that traffic stays in cache).
    pub blocks_rewound: u64,
}
