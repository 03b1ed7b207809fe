//! Blocking waits without a syscall on the hot path: spin briefly, then sleep on a futex in
//! the shared mapping; a sender makes the wake-up syscall only when the receiver announced it
//! is asleep.
//!
//! The handshake is a store-load (Dekker) pattern, which needs `SeqCst` on both sides:
//!
//! ```text
//! sender:   marker.store(SeqCst)        receiver: bell.store(SLEEPING, SeqCst)
//!           bell.load(SeqCst)                     marker.load(SeqCst)  -- re-check
//!                                                 futex_wait(bell, SLEEPING)
//! ```
//!
//! In the single total order of `SeqCst` operations either the receiver's re-check sees the
//! marker (and does not sleep) or the sender's load sees `SLEEPING` (and wakes it); and
//! `futex_wait` only sleeps while the word still reads `SLEEPING`, so a wake-up that lands
//! between the re-check and the syscall is not lost.
#![deny(unsafe_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::queue::{futex_wait, futex_wake};

const AWAKE: u32 = 0;
const SLEEPING: u32 = 1;

/// How long a waiter spins before it sleeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Spin (re-checking) for this long before sleeping. Zero sleeps at once.
    pub spin: Duration,
}

impl Default for WaitPolicy {
    /// 20 µs: two orders of magnitude above a shared-memory round trip, so a reply that is on
    /// its way is caught spinning, and short enough that an idle rank soon stops burning a core.
    fn default() -> Self {
        WaitPolicy {
            spin: Duration::from_micros(20),
        }
    }
}

/// Spins until `ready()` or until `policy.spin` has passed; returns whether `ready()`.
/// The clock is read once per 64 checks (a vDSO call, not a syscall).
pub(crate) fn spin_until(policy: WaitPolicy, mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        for _ in 0..64 {
            if ready() {
                return true;
            }
            std::hint::spin_loop();
        }
        if start.elapsed() >= policy.spin {
            return ready();
        }
    }
}

/// Rings `bell` if its owner sleeps. Call after a `SeqCst` store that publishes work.
pub(crate) fn ring(bell: &AtomicU32) {
    // The load is the hot path: the line stays shared while the receiver is awake. The swap
    // makes exactly one of several concurrent senders pay for the syscall.
    if bell.load(Ordering::SeqCst) == SLEEPING && bell.swap(AWAKE, Ordering::SeqCst) == SLEEPING {
        futex_wake(bell, i32::MAX);
    }
}

/// Sleeps on `bell` for at most `timeout` unless `pending()` (which must load with `SeqCst`)
/// is true after announcing the sleep. Returns `pending()` on wake-up. One waiter per bell:
/// with several, a wake-up may reach only one of them (the others then sleep until timeout).
pub(crate) fn sleep(bell: &AtomicU32, timeout: Duration, pending: impl Fn() -> bool) -> bool {
    bell.store(SLEEPING, Ordering::SeqCst);
    if !pending() {
        futex_wait(bell, SLEEPING, timeout);
    }
    // Relaxed: the flag only gates wake-up syscalls; the data is ordered by the markers.
    bell.store(AWAKE, Ordering::Relaxed);
    pending()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn ring_without_sleeper_is_a_no_op_and_sleep_returns_pending_at_once() {
        let bell = AtomicU32::new(AWAKE);
        ring(&bell);
        assert_eq!(bell.load(Ordering::Relaxed), AWAKE);
        assert!(sleep(&bell, Duration::from_secs(60), || true));
        assert_eq!(bell.load(Ordering::Relaxed), AWAKE);
        assert!(!sleep(&bell, Duration::from_millis(1), || false));
    }

    #[test]
    fn a_sleeper_is_woken_by_ring() {
        let bell = Arc::new(AtomicU32::new(AWAKE));
        let flag = Arc::new(AtomicBool::new(false));
        let (b, f) = (Arc::clone(&bell), Arc::clone(&flag));
        let t = std::thread::spawn(move || {
            // A long timeout: the test fails by hanging for 60 s only if the wake-up is lost.
            while !sleep(&b, Duration::from_secs(60), || f.load(Ordering::SeqCst)) {}
        });
        flag.store(true, Ordering::SeqCst);
        ring(&bell);
        t.join().unwrap();
    }

    #[test]
    fn spin_until_sees_readiness_and_gives_up() {
        let mut n = 0;
        // A spin budget no machine exhausts in 100 checks (no timing threshold).
        let long = WaitPolicy {
            spin: Duration::from_secs(3600),
        };
        assert!(spin_until(long, || {
            n += 1;
            n == 100
        }));
        assert!(!spin_until(
            WaitPolicy {
                spin: Duration::ZERO
            },
            || false
        ));
    }
}
