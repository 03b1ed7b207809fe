//! Blocking waits without a syscall or a fence on the hot path: spin briefly, then sleep on
//! a futex (the *doorbell*) in the receiver's mapping; a sender makes the wake-up syscall
//! only when the receiver announced it is asleep.
//!
//! The announcement is the sleep bit in the `tail` word of each of the receiver's rings
//! (see `queue`), which every sender CASes anyway:
//!
//! ```text
//! receiver: bell.store(SLEEPING)              sender: CAS tail (clears the bit, Acquire)
//!           idle = fetch_or(tail, BIT) == head         write record, commit marker
//!                  (Release; for every ring)           if the CAS saw the bit: wake(bell)
//!           if idle: futex_wait(bell, SLEEPING)
//!           bell.store(AWAKE); clear the bits
//! ```
//!
//! In the modification order of `tail`, a reservation is either before the receiver's
//! `fetch_or` (which then sees `tail != head` and does not sleep) or after it (so some CAS
//! sees the bit; it acquires the receiver's `SLEEPING`, and its `wake` swaps the bell to
//! `AWAKE` and calls `FUTEX_WAKE`). `futex_wait` only sleeps while the bell still reads
//! `SLEEPING`, so a wake-up that lands before the syscall is not lost.
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
    /// Yield the CPU (`sched_yield`) between checks instead of spinning on it: for a host
    /// with more ranks than CPUs, where the rank being waited for may need this CPU to make
    /// the awaited progress. A futex sleep would cost it a wake-up (tens of µs) per message;
    /// a spin would hold the CPU until the scheduler's slice ends.
    pub yield_cpu: bool,
}

impl Default for WaitPolicy {
    /// 20 µs: two orders of magnitude above a shared-memory round trip, so a reply that is on
    /// its way is caught spinning, and short enough that an idle rank soon stops burning a core.
    fn default() -> Self {
        WaitPolicy {
            spin: Duration::from_micros(20),
            yield_cpu: false,
        }
    }
}

impl WaitPolicy {
    /// The policy of a host with more ranks than CPUs: yield between checks for `budget`,
    /// then sleep.
    pub fn crowded(budget: Duration) -> WaitPolicy {
        WaitPolicy {
            spin: budget,
            yield_cpu: true,
        }
    }
}

/// Waits at most `timeout` for `done()`: spins ([`spin_until`]), then sleeps in naps that end
/// at the deadline (`sleep(nap)` says whether it is done after its nap). Returns whether
/// `done()`.
pub(crate) fn spin_then_sleep(
    policy: WaitPolicy,
    timeout: Duration,
    done: impl Fn() -> bool,
    sleep: impl Fn(Duration) -> bool,
) -> bool {
    let deadline = Instant::now() + timeout;
    if spin_until(policy, &done) {
        return true;
    }
    loop {
        let now = Instant::now();
        if now >= deadline {
            return done();
        }
        if sleep(deadline - now) {
            return true;
        }
    }
}

/// Spins until `ready()` or until `policy.spin` has passed; returns whether `ready()`.
/// The clock is read once per 64 checks (a vDSO call, not a syscall); with
/// [`WaitPolicy::yield_cpu`], once per check, after which the CPU is yielded.
pub(crate) fn spin_until(policy: WaitPolicy, mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    if policy.yield_cpu {
        loop {
            if ready() {
                return true;
            }
            if start.elapsed() >= policy.spin {
                return ready();
            }
            std::thread::yield_now();
        }
    }
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

/// Wakes the owner of `bell`; called by the sender whose reservation cleared a sleep bit,
/// after its commit. The swap makes the syscall happen only if the owner still sleeps.
pub(crate) fn wake(bell: &AtomicU32) {
    // AcqRel: a read-modify-write is all that is needed; the data is ordered by the markers.
    if bell.swap(AWAKE, Ordering::AcqRel) == SLEEPING {
        futex_wake(bell, i32::MAX);
    }
}

/// Sleeps on `bell` for at most `timeout` if `announce()` (which sets the sleep bits and
/// returns whether every ring is idle) says so; then `retract()` clears the bits. One
/// waiter per bell: with several, a wake-up may reach only one of them.
pub(crate) fn sleep(
    bell: &AtomicU32,
    timeout: Duration,
    announce: impl FnOnce() -> bool,
    retract: impl FnOnce(),
) {
    // Relaxed: published to senders by the Release of the `fetch_or` in `announce`.
    bell.store(SLEEPING, Ordering::Relaxed);
    if announce() {
        futex_wait(bell, SLEEPING, timeout);
    }
    // Relaxed: the bell only gates wake-up syscalls; data is ordered by the markers.
    bell.store(AWAKE, Ordering::Relaxed);
    retract();
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn wake_without_sleeper_is_a_no_op_and_a_busy_announce_does_not_sleep() {
        let bell = AtomicU32::new(AWAKE);
        wake(&bell);
        assert_eq!(bell.load(Ordering::Relaxed), AWAKE);
        let retracted = AtomicBool::new(false);
        // Not idle: returns at once although the timeout is an hour.
        sleep(
            &bell,
            Duration::from_secs(3600),
            || false,
            || retracted.store(true, Ordering::Relaxed),
        );
        assert!(retracted.load(Ordering::Relaxed));
        assert_eq!(bell.load(Ordering::Relaxed), AWAKE);
        // Idle and nobody wakes us: the timeout ends the sleep.
        sleep(&bell, Duration::from_millis(1), || true, || {});
        assert_eq!(bell.load(Ordering::Relaxed), AWAKE);
    }

    #[test]
    fn a_sleeper_is_woken_by_wake() {
        let bell = Arc::new(AtomicU32::new(AWAKE));
        let announced = Arc::new(AtomicBool::new(false));
        let (b, a) = (Arc::clone(&bell), Arc::clone(&announced));
        let t = std::thread::spawn(move || {
            // The test fails by hanging for an hour only if the wake-up is lost.
            sleep(
                &b,
                Duration::from_secs(3600),
                || {
                    a.store(true, Ordering::Release);
                    true
                },
                || {},
            );
        });
        while !announced.load(Ordering::Acquire) {
            std::thread::yield_now();
        }
        wake(&bell);
        t.join().unwrap();
    }

    #[test]
    fn spin_until_sees_readiness_and_gives_up() {
        let mut n = 0;
        // A spin budget no machine exhausts in 100 checks (no timing threshold).
        let long = WaitPolicy {
            spin: Duration::from_secs(3600),
            yield_cpu: false,
        };
        assert!(spin_until(long, || {
            n += 1;
            n == 100
        }));
        assert!(!spin_until(
            WaitPolicy {
                spin: Duration::ZERO,
                yield_cpu: false,
            },
            || false
        ));
        // Yielding between checks: the same answers.
        let mut n = 0;
        assert!(spin_until(
            WaitPolicy::crowded(Duration::from_secs(3600)),
            || {
                n += 1;
                n == 100
            }
        ));
        assert_eq!(n, 100);
        assert!(!spin_until(WaitPolicy::crowded(Duration::ZERO), || false));
    }
}
