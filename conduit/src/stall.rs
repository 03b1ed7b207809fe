//! Timing of long waits for the stall warning (`RGASNET_STALL_WARNING`).
//!
//! A wait that may never end (a send waiting for room at a target that does not poll, a
//! barrier waiting for a rank that never arrives) says so once on standard error. The waits
//! themselves are hot loops, so the timing must cost nothing while they are short.

use std::time::{Duration, Instant};

/// Checks made between two clock reads.
const CHECKS_PER_READ: u32 = 256;

/// Times one wait without reading the clock on every check: the clock is first read at the
/// 256th check (when timing starts) and then every 256 checks, so a short wait never reads it.
/// [`StallClock::check`] reports, once, how long the wait had lasted when it passed the limit.
#[derive(Debug, Clone)]
pub struct StallClock {
    limit: Duration,
    checks: u32,
    since: Option<Instant>,
    done: bool,
}

impl StallClock {
    /// A clock for a wait that should be reported after `limit_secs` seconds (0: never).
    pub fn new(limit_secs: u64) -> StallClock {
        StallClock {
            limit: Duration::from_secs(limit_secs),
            checks: 0,
            since: None,
            done: limit_secs == 0,
        }
    }

    /// Called on every round of the wait: `Some(waited)` the first time the wait has lasted
    /// the limit, `None` otherwise (and always after that).
    pub fn check(&mut self) -> Option<Duration> {
        if self.done {
            return None;
        }
        self.checks = self.checks.wrapping_add(1);
        if self.checks % CHECKS_PER_READ != 0 {
            return None;
        }
        let waited = self.since.get_or_insert_with(Instant::now).elapsed();
        if waited < self.limit {
            return None;
        }
        self.done = true;
        Some(waited)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_never_reports() {
        let mut c = StallClock::new(0);
        assert!((0..10 * CHECKS_PER_READ).all(|_| c.check().is_none()));
    }

    #[test]
    fn reports_once_after_the_limit_and_reads_the_clock_only_every_batch() {
        let mut c = StallClock::new(1);
        // Short waits never start timing.
        for _ in 0..CHECKS_PER_READ - 1 {
            assert_eq!(c.check(), None);
        }
        assert!(c.since.is_none());
        assert_eq!(c.check(), None, "timing starts at the 256th check");
        assert!(c.since.is_some());
        // Pretend the wait began long ago.
        c.since = Instant::now().checked_sub(Duration::from_secs(2));
        let reported: Vec<Duration> = (0..3 * CHECKS_PER_READ).filter_map(|_| c.check()).collect();
        assert_eq!(reported.len(), 1);
        assert!(reported[0] >= Duration::from_secs(2));
    }
}
