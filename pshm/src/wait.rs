//! Blocking waits without a syscall or a fence on the hot path: spin briefly (then yield the
//! CPU between checks for the rest of the poll budget, see [`WaitPolicy`]), then sleep on a
//! futex (the *doorbell*) in the receiver's mapping; a sender makes the wake-up syscall only
//! when the receiver announced it is asleep.
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

/// How a waiter polls before it sleeps: it spins for [`WaitPolicy::spin`], then yields the CPU
/// between checks until [`WaitPolicy::poll`] has passed, then sleeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitPolicy {
    /// Spin (re-checking without a syscall) for this long at the start of a wait. Ignored with
    /// [`WaitPolicy::yield_cpu`].
    pub spin: Duration,
    /// Poll in all, spin included, for this long before sleeping; past `spin`, each check is
    /// followed by a yield of the CPU (`sched_yield`). A wait that outlasts the spin was not
    /// about to end, but a sleep would cost its end a wake-up (tens of µs where a CPU went
    /// idle, and on a dissemination barrier one per round), while a yield returns at once on a
    /// CPU that nothing else wants. Zero (or less than `spin`): sleep once the spin is over.
    pub poll: Duration,
    /// Yield the CPU between checks from the start of a wait instead of spinning on it: for a
    /// host with more ranks than CPUs, where the rank being waited for may need this CPU to
    /// make the awaited progress. A futex sleep would cost it a wake-up (tens of µs) per
    /// message; a spin would hold the CPU until the scheduler's slice ends.
    pub yield_cpu: bool,
}

/// What a wait does at its next step ([`WaitPolicy::stage`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitStage {
    /// Check again after a spin hint.
    Spin,
    /// Check again after yielding the CPU.
    Yield,
    /// Sleep until woken (or a nap ends).
    Sleep,
}

impl Default for WaitPolicy {
    /// A 20 µs spin, then sleep: two orders of magnitude above a shared-memory round trip, so
    /// a reply that is on its way is caught spinning, and short enough that an idle rank soon
    /// stops burning a core.
    fn default() -> Self {
        WaitPolicy::roomy(Duration::from_micros(20), Duration::ZERO)
    }
}

impl WaitPolicy {
    /// The policy of a host with a CPU for every rank: spin for `spin`, then yield between
    /// checks until `poll` has passed, then sleep.
    pub fn roomy(spin: Duration, poll: Duration) -> WaitPolicy {
        WaitPolicy {
            spin,
            poll,
            yield_cpu: false,
        }
    }

    /// The policy of a host with more ranks than CPUs: yield between checks for `budget`,
    /// then sleep.
    pub fn crowded(budget: Duration) -> WaitPolicy {
        WaitPolicy {
            spin: Duration::ZERO,
            poll: budget,
            yield_cpu: true,
        }
    }

    /// What a wait that has lasted `waited` does next.
    pub fn stage(&self, waited: Duration) -> WaitStage {
        if !self.yield_cpu && waited < self.spin {
            WaitStage::Spin
        } else if waited < self.poll {
            WaitStage::Yield
        } else {
            WaitStage::Sleep
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

/// Polls until `ready()` or until the policy's spin and yields are over (see
/// [`WaitPolicy::stage`]); returns whether `ready()`. While spinning the clock is read once
/// per 64 checks (a vDSO call, not a syscall); while yielding, once per check, after which the
/// CPU is yielded.
pub(crate) fn spin_until(policy: WaitPolicy, mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        match policy.stage(start.elapsed()) {
            WaitStage::Spin => {
                for _ in 0..64 {
                    if ready() {
                        return true;
                    }
                    std::hint::spin_loop();
                }
            }
            WaitStage::Yield => {
                if ready() {
                    return true;
                }
                std::thread::yield_now();
            }
            WaitStage::Sleep => return ready(),
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
    fn a_wait_spins_then_yields_then_sleeps() {
        let us = Duration::from_micros;
        let roomy = WaitPolicy::roomy(us(20), us(1000));
        assert_eq!(roomy.stage(Duration::ZERO), WaitStage::Spin);
        assert_eq!(roomy.stage(us(19)), WaitStage::Spin);
        assert_eq!(roomy.stage(us(20)), WaitStage::Yield);
        assert_eq!(roomy.stage(us(999)), WaitStage::Yield);
        assert_eq!(roomy.stage(us(1000)), WaitStage::Sleep);
        // No polling past the spin (the default): sleep once it is over.
        let default = WaitPolicy::default();
        assert_eq!(default.stage(us(19)), WaitStage::Spin);
        assert_eq!(default.stage(us(20)), WaitStage::Sleep);
        // A poll shorter than the spin ends nothing early: the spin is still spun.
        assert_eq!(
            WaitPolicy::roomy(us(20), us(5)).stage(us(10)),
            WaitStage::Spin
        );
        // A crowded host yields from the start.
        let crowded = WaitPolicy::crowded(us(1000));
        assert_eq!(crowded.stage(Duration::ZERO), WaitStage::Yield);
        assert_eq!(crowded.stage(us(1000)), WaitStage::Sleep);
    }

    #[test]
    fn spin_until_sees_readiness_and_gives_up() {
        let mut n = 0;
        // A spin budget no machine exhausts in 100 checks (no timing threshold).
        let long = WaitPolicy::roomy(Duration::from_secs(3600), Duration::ZERO);
        assert!(spin_until(long, || {
            n += 1;
            n == 100
        }));
        assert!(!spin_until(
            WaitPolicy::roomy(Duration::ZERO, Duration::ZERO),
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
        // Spin over at once, then yields until ready: the same answers.
        let mut n = 0;
        assert!(spin_until(
            WaitPolicy::roomy(Duration::ZERO, Duration::from_secs(3600)),
            || {
                n += 1;
                n == 100
            }
        ));
        assert_eq!(n, 100);
    }
}
