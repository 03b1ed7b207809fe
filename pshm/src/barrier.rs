//! The node barrier: a counter and a generation in the supernode leader's object, with
//! split-phase arrival so that the conduit can keep polling while it waits (and combine it
//! with the network barrier across supernodes).
//!
//! Arrival reads the generation *before* incrementing the counter; the last arriver resets
//! the counter and then bumps the generation. Nobody can arrive at barrier `k + 1` before
//! seeing the bump of barrier `k` (it waits for it), and the bump is `Release` after the
//! reset, so every arrival at `k + 1` counts from zero. Generations are compared for
//! inequality, so their wrap-around is harmless.
#![deny(unsafe_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::queue::{futex_wait, futex_wake};
use crate::wait::{spin_until, WaitPolicy};

/// The three shared words of a barrier.
#[derive(Clone, Copy)]
pub(crate) struct BarrierWords<'a> {
    pub(crate) count: &'a AtomicU32,
    pub(crate) generation: &'a AtomicU32,
    pub(crate) sleepers: &'a AtomicU32,
}

/// An arrival at the node barrier, to be completed with `Node::barrier_done` /
/// `Node::barrier_wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a barrier arrival must be waited for"]
pub struct BarrierTicket {
    generation: u32,
}

impl BarrierWords<'_> {
    /// Counts this process in; the barrier completes when `members` have arrived.
    pub(crate) fn arrive(&self, members: u32) -> BarrierTicket {
        // Acquire pairs with the previous barrier's release bump (see module docs).
        let generation = self.generation.load(Ordering::Acquire);
        // AcqRel: the last arriver must see every other arriver's prior writes (they
        // released with their increment) before it publishes completion.
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == members {
            self.count.store(0, Ordering::Relaxed);
            // SeqCst: Dekker with the waiters' `sleepers` increment (see `wait`); it is also
            // a release of the reset above and of everyone's writes before the barrier.
            self.generation.fetch_add(1, Ordering::SeqCst);
            if self.sleepers.load(Ordering::SeqCst) > 0 {
                futex_wake(self.generation, i32::MAX);
            }
        }
        BarrierTicket { generation }
    }

    /// Which of the two value slots a barrier's arrivals use (`layout::W_BARRIER_VALUE`).
    pub(crate) fn parity(ticket: BarrierTicket) -> usize {
        (ticket.generation & 1) as usize
    }

    /// Sleeps on the generation for at most `timeout` unless the barrier of `ticket` has
    /// completed; returns whether it has.
    pub(crate) fn sleep(&self, ticket: BarrierTicket, timeout: Duration) -> bool {
        // SeqCst: Dekker with the last arriver's bump and `sleepers` load (see `arrive`).
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        if self.generation.load(Ordering::SeqCst) == ticket.generation {
            futex_wait(self.generation, ticket.generation, timeout);
        }
        // Relaxed: only the count matters to the waker, and a stale one costs a syscall.
        self.sleepers.fetch_sub(1, Ordering::Relaxed);
        self.done(ticket)
    }

    /// Whether the barrier of `ticket` has completed (every member arrived).
    pub(crate) fn done(&self, ticket: BarrierTicket) -> bool {
        // Acquire: completion makes every member's writes before its arrival visible.
        self.generation.load(Ordering::Acquire) != ticket.generation
    }

    /// Waits (spin, then futex) at most `timeout` for the barrier of `ticket`; returns
    /// whether it completed.
    pub(crate) fn wait(
        &self,
        ticket: BarrierTicket,
        policy: WaitPolicy,
        timeout: Duration,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        if spin_until(policy, || self.done(ticket)) {
            return true;
        }
        loop {
            let now = Instant::now();
            if now >= deadline {
                return self.done(ticket);
            }
            if self.sleep(ticket, deadline - now) {
                return true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;
    use std::sync::Arc;

    struct Words([AtomicU32; 3]);
    impl Words {
        fn b(&self) -> BarrierWords<'_> {
            BarrierWords {
                count: &self.0[0],
                generation: &self.0[1],
                sleepers: &self.0[2],
            }
        }
    }

    #[test]
    fn one_member_completes_at_once() {
        let w = Words(Default::default());
        let t = w.b().arrive(1);
        assert!(w.b().done(t));
        assert_eq!(w.0[0].load(Ordering::Relaxed), 0);
        assert_eq!(w.0[1].load(Ordering::Relaxed), 1);
    }

    #[test]
    fn not_done_until_the_last_arrives() {
        let w = Words(Default::default());
        let t0 = w.b().arrive(3);
        let t1 = w.b().arrive(3);
        assert!(!w.b().done(t0) && !w.b().done(t1));
        assert!(!w.b().wait(t0, WaitPolicy::default(), Duration::ZERO));
        let t2 = w.b().arrive(3);
        assert!(w.b().done(t0) && w.b().done(t1) && w.b().done(t2));
    }

    #[test]
    fn threads_never_pass_a_barrier_early() {
        let (threads, rounds) = if cfg!(miri) { (3u64, 4u64) } else { (4, 2000) };
        let w = Arc::new(Words(Default::default()));
        let counter = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (w, counter) = (Arc::clone(&w), Arc::clone(&counter));
                std::thread::spawn(move || {
                    for round in 0..rounds {
                        counter.fetch_add(1, Ordering::Relaxed);
                        let t = w.b().arrive(threads as u32);
                        assert!(w.b().wait(
                            t,
                            WaitPolicy {
                                spin: Duration::ZERO,
                                yield_cpu: false,
                            },
                            Duration::from_secs(60)
                        ));
                        // Everyone incremented for this round before anyone passed.
                        assert!(counter.load(Ordering::Relaxed) >= (round + 1) * threads);
                        let t = w.b().arrive(threads as u32);
                        assert!(w
                            .b()
                            .wait(t, WaitPolicy::default(), Duration::from_secs(60)));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(counter.load(Ordering::Relaxed), rounds * threads);
    }
}
