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

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::queue::{futex_wait, futex_wake};

/// The shared words of a barrier.
#[derive(Clone, Copy)]
pub(crate) struct BarrierWords<'a> {
    pub(crate) count: &'a AtomicU32,
    pub(crate) generation: &'a AtomicU32,
    pub(crate) sleepers: &'a AtomicU32,
    /// The agreed name of the barriers of even and odd generation ([`BarrierName`]).
    pub(crate) names: [&'a AtomicU64; 2],
}

/// What the arrivals at a node barrier agreed on: GASNet's barrier names. Each arrival brings
/// a name or none (anonymous) and perhaps a mismatch of its own; the barrier's outcome is the
/// first name brought, and a mismatch if any arrival flagged one or two names differ. Kept in
/// one shared word per generation parity, merged by every arrival with atomic operations and
/// read by every member when the barrier completes: no member reads another's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BarrierName {
    /// The name agreed on (`None`: every arrival was anonymous).
    pub name: Option<u32>,
    /// Whether names differed or an arrival flagged a mismatch.
    pub mismatch: bool,
}

const NAME_SET: u64 = 1 << 63;
const NAME_MISMATCH: u64 = 1 << 62;

impl BarrierName {
    /// This arrival as a word of the shared form (see [`BarrierName::merge_words`]).
    pub(crate) fn to_word(self) -> u64 {
        let name = self.name.map_or(0, |n| NAME_SET | u64::from(n));
        name | if self.mismatch { NAME_MISMATCH } else { 0 }
    }

    /// The merge of two words of arrivals (or merges of them): the name either brought, and
    /// a mismatch if either had one or they brought different names. Commutative and
    /// idempotent, so that a dissemination barrier may merge an arrival more than once.
    pub(crate) fn merge_words(a: u64, b: u64) -> u64 {
        let mismatch = (a | b) & NAME_MISMATCH;
        match (a & NAME_SET != 0, b & NAME_SET != 0) {
            (true, true) if a as u32 != b as u32 => a | NAME_MISMATCH,
            (true, _) => a | mismatch,
            (false, true) => b | mismatch,
            (false, false) => mismatch,
        }
    }

    pub(crate) fn from_word(w: u64) -> BarrierName {
        BarrierName {
            name: (w & NAME_SET != 0).then_some(w as u32),
            mismatch: w & NAME_MISMATCH != 0,
        }
    }

    /// Merges this arrival into `word`.
    fn merge_into(self, word: &AtomicU64) {
        // Relaxed: every arrival's merge is ordered before the completion by its own AcqRel
        // increment of the count (see `arrive`); the word needs only to be atomic.
        if self.mismatch {
            word.fetch_or(NAME_MISMATCH, Ordering::Relaxed);
        }
        let Some(name) = self.name else { return };
        let mine = NAME_SET | u64::from(name);
        let mut cur = word.load(Ordering::Relaxed);
        loop {
            if cur & NAME_SET != 0 {
                if cur as u32 != name {
                    word.fetch_or(NAME_MISMATCH, Ordering::Relaxed);
                }
                return;
            }
            match word.compare_exchange_weak(cur, cur | mine, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(now) => cur = now,
            }
        }
    }
}

/// An arrival at the node barrier, to be completed with `Node::barrier_done` /
/// `Node::barrier_wait`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "a barrier arrival must be waited for"]
pub struct BarrierTicket {
    generation: u32,
}

impl BarrierTicket {
    /// The ticket of barrier number `epoch` (a generation, or a dissemination epoch).
    pub(crate) fn of(epoch: u32) -> BarrierTicket {
        BarrierTicket { generation: epoch }
    }

    /// The barrier's number.
    pub(crate) fn epoch(self) -> u32 {
        self.generation
    }
}

impl BarrierWords<'_> {
    /// Counts this process in; the barrier completes when `members` have arrived.
    pub(crate) fn arrive(&self, members: u32, name: BarrierName) -> BarrierTicket {
        // Acquire pairs with the previous barrier's release bump (see module docs).
        let generation = self.generation.load(Ordering::Acquire);
        let parity = (generation & 1) as usize;
        name.merge_into(self.names[parity]);
        // AcqRel: the last arriver must see every other arriver's prior writes (they
        // released with their increment) before it publishes completion.
        if self.count.fetch_add(1, Ordering::AcqRel) + 1 == members {
            self.count.store(0, Ordering::Relaxed);
            // The next barrier's name word was the one before this one's: every member has
            // read it (before arriving here). Relaxed: released by the bump below.
            self.names[parity ^ 1].store(0, Ordering::Relaxed);
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

    /// The agreed name of the completed barrier of `ticket` (meaningful only once
    /// [`BarrierWords::done`] said so, and until this member arrives again).
    pub(crate) fn name(&self, ticket: BarrierTicket) -> BarrierName {
        // Relaxed: ordered by the Acquire load of the generation that saw completion.
        BarrierName::from_word(self.names[Self::parity(ticket)].load(Ordering::Relaxed))
    }

    /// Whether the barrier of `ticket` has completed (every member arrived).
    pub(crate) fn done(&self, ticket: BarrierTicket) -> bool {
        // Acquire: completion makes every member's writes before its arrival visible.
        self.generation.load(Ordering::Acquire) != ticket.generation
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wait::{spin_then_sleep, WaitPolicy};
    use std::sync::Arc;

    /// Waits (spin, then futex) at most `timeout` for the barrier of `ticket`.
    fn wait(
        b: BarrierWords<'_>,
        ticket: BarrierTicket,
        policy: WaitPolicy,
        timeout: Duration,
    ) -> bool {
        spin_then_sleep(
            policy,
            timeout,
            || b.done(ticket),
            |nap| b.sleep(ticket, nap),
        )
    }

    #[derive(Default)]
    struct Words([AtomicU32; 3], [AtomicU64; 2]);
    impl Words {
        fn b(&self) -> BarrierWords<'_> {
            BarrierWords {
                count: &self.0[0],
                generation: &self.0[1],
                sleepers: &self.0[2],
                names: [&self.1[0], &self.1[1]],
            }
        }
    }

    const ANON: BarrierName = BarrierName {
        name: None,
        mismatch: false,
    };

    fn named(n: u32) -> BarrierName {
        BarrierName {
            name: Some(n),
            mismatch: false,
        }
    }

    #[test]
    fn names_agree_differ_and_reset_for_the_barrier_after_next() {
        let w = Words::default();
        // Anonymous and one name: that name, no mismatch.
        let t = w.b().arrive(3, ANON);
        let _ = w.b().arrive(3, named(7));
        let _ = w.b().arrive(3, named(7));
        assert!(w.b().done(t));
        assert_eq!(w.b().name(t), named(7));
        // Two names: a mismatch, the first name kept.
        let t = w.b().arrive(3, named(1));
        let _ = w.b().arrive(3, named(2));
        let _ = w.b().arrive(3, ANON);
        assert_eq!(
            w.b().name(t),
            BarrierName {
                name: Some(1),
                mismatch: true
            }
        );
        // The same parity as the first barrier, reset by the second's last arrival; an
        // arrival's own mismatch flag counts.
        let t = w.b().arrive(3, ANON);
        let _ = w.b().arrive(
            3,
            BarrierName {
                name: None,
                mismatch: true,
            },
        );
        let _ = w.b().arrive(3, ANON);
        assert_eq!(
            w.b().name(t),
            BarrierName {
                name: None,
                mismatch: true
            }
        );
        // And all anonymous after that: nothing left over.
        let t = w.b().arrive(3, ANON);
        let _ = w.b().arrive(3, ANON);
        let _ = w.b().arrive(3, ANON);
        assert_eq!(w.b().name(t), ANON);
    }

    #[test]
    fn merging_words_is_the_shared_word_s_merge_in_any_order() {
        let arrivals = [
            ANON,
            named(7),
            named(9),
            BarrierName {
                name: None,
                mismatch: true,
            },
            BarrierName {
                name: Some(7),
                mismatch: true,
            },
        ];
        for a in arrivals {
            for b in arrivals {
                let (wa, wb) = (a.to_word(), b.to_word());
                let ab = BarrierName::merge_words(wa, wb);
                let ba = BarrierName::merge_words(wb, wa);
                // Commutative up to the name kept beside a mismatch, and idempotent.
                assert_eq!(
                    BarrierName::from_word(ab).mismatch,
                    BarrierName::from_word(ba).mismatch
                );
                if ab & NAME_MISMATCH == 0 {
                    assert_eq!(ab, ba);
                }
                assert_eq!(BarrierName::merge_words(ab, wa), ab);
                assert_eq!(BarrierName::merge_words(ab, ab), ab);
                // The counter's shared word agrees.
                let shared = AtomicU64::new(0);
                a.merge_into(&shared);
                b.merge_into(&shared);
                let via_counter = BarrierName::from_word(shared.load(Ordering::Relaxed));
                let via_words = BarrierName::from_word(ab);
                assert_eq!(via_counter.mismatch, via_words.mismatch, "{a:?} {b:?}");
                if !via_counter.mismatch {
                    assert_eq!(via_counter, via_words, "{a:?} {b:?}");
                }
            }
        }
    }

    #[test]
    fn one_member_completes_at_once() {
        let w = Words::default();
        let t = w.b().arrive(1, ANON);
        assert!(w.b().done(t));
        assert_eq!(w.0[0].load(Ordering::Relaxed), 0);
        assert_eq!(w.0[1].load(Ordering::Relaxed), 1);
    }

    #[test]
    fn not_done_until_the_last_arrives() {
        let w = Words::default();
        let t0 = w.b().arrive(3, ANON);
        let t1 = w.b().arrive(3, ANON);
        assert!(!w.b().done(t0) && !w.b().done(t1));
        assert!(!wait(w.b(), t0, WaitPolicy::default(), Duration::ZERO));
        let t2 = w.b().arrive(3, ANON);
        assert!(w.b().done(t0) && w.b().done(t1) && w.b().done(t2));
    }

    #[test]
    fn threads_never_pass_a_barrier_early() {
        let (threads, rounds) = if cfg!(miri) { (3u64, 4u64) } else { (4, 2000) };
        let w = Arc::new(Words::default());
        let counter = Arc::new(AtomicU64::new(0));
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                let (w, counter) = (Arc::clone(&w), Arc::clone(&counter));
                std::thread::spawn(move || {
                    for round in 0..rounds {
                        counter.fetch_add(1, Ordering::Relaxed);
                        let t = w.b().arrive(threads as u32, ANON);
                        assert!(wait(
                            w.b(),
                            t,
                            WaitPolicy::roomy(Duration::ZERO, Duration::ZERO),
                            Duration::from_secs(60)
                        ));
                        // Everyone incremented for this round before anyone passed.
                        assert!(counter.load(Ordering::Relaxed) >= (round + 1) * threads);
                        let t = w.b().arrive(threads as u32, ANON);
                        assert!(wait(
                            w.b(),
                            t,
                            WaitPolicy::default(),
                            Duration::from_secs(60)
                        ));
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
