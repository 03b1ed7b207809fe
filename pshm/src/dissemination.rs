//! The node barrier as a dissemination barrier: in round `r` of a barrier, member `i` writes
//! the barrier's number (its *epoch*) and the names it has merged so far into a slot of member
//! `i + 2^r` (modulo the member count), then waits for its own slot of round `r`, which member
//! `i - 2^r` writes. After `ceil(log2 n)` rounds every member has heard, directly or not, from
//! every other, and holds the merge of every arrival's name.
//!
//! Each slot is a cache line of its receiver's header page that only one member ever writes,
//! so a round costs one line transfer each way and no read-modify-write: two members on two
//! cores complete a barrier in about half a flag ping-pong, where the shared counter
//! ([`crate::barrier`]) needs every arrival's increment of one line in turn. The counter stays
//! in use on a host with more ranks than CPUs, where a rank's rounds would each wait for the
//! scheduler to run the rank before it.
//!
//! Slots come in two sets, by the parity of the epoch: a member's writer can be one barrier
//! ahead of it (it finished barrier `k` and writes its first round of `k + 1`) but never two,
//! since finishing `k + 1` needs this member's own writes of `k + 1`, which it makes only once
//! it has read everything of `k`.
//!
//! Sleeping: a waiter sets its sleep word, re-reads the slot it waits on and sleeps on the
//! slot's epoch word (futex); a writer stores the epoch and, at its next look at the barrier
//! (at the latest when the barrier completes for it), fences and reads the receiver's sleep
//! word, waking it if set. Both sides are `SeqCst` around their store and load (Dekker): one of
//! the two sees the other's write. The writer's half is deferred so that the store is not
//! followed at once by a fence of its own; the release of the progress lock after a send is a
//! locked instruction too, though, and still waits for the receiver's line (a profile put
//! most of `arrive`'s time there): an arrival without the lock is the next step.
#![deny(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::barrier::{BarrierName, BarrierTicket};
use crate::layout;
use crate::queue::{futex_wait, futex_wake};
use crate::segment::{as_u32, Mapping};

/// Rounds a dissemination barrier can have (members up to `2^DISS_MAX_ROUNDS`); the layout
/// has one slot per round and parity.
pub(crate) const MAX_ROUNDS: u32 = layout::DISS_MAX_ROUNDS as u32;

/// The rounds a barrier of `members` members takes (`ceil(log2 members)`).
pub(crate) fn rounds_for(members: usize) -> u32 {
    members.max(1).next_power_of_two().trailing_zeros()
}

/// Where this member is in its current barrier.
#[derive(Debug, Default)]
struct Progress {
    /// The barrier this member arrived at last (0: none yet).
    epoch: u32,
    /// Rounds of it completed (`rounds`: done).
    round: u32,
    /// Names merged so far (a [`BarrierName`] word).
    acc: u64,
    /// The slot of the last send, until [`Dissemination::check_wake`] has asked whether its
    /// receiver sleeps: member, epoch, round.
    wake_check: Option<(usize, u32, u32)>,
}

/// This member's side of the dissemination barrier.
pub(crate) struct Dissemination {
    /// Every member's mapping, by member index.
    maps: Vec<Arc<Mapping>>,
    /// This member's index.
    own: usize,
    rounds: u32,
    progress: Mutex<Progress>,
    /// The epoch and the rounds completed (`epoch << 32 | round`), as `progress` has them:
    /// for [`Dissemination::done`] to find out without the lock that nothing has arrived.
    seen: AtomicU64,
    /// `progress.wake_check` is set: the next `done` takes the lock to clear it.
    wake_pending: AtomicBool,
    /// The outcome of the last completed barrier of each parity (a [`BarrierName`] word),
    /// readable without the lock.
    outcome: [AtomicU64; 2],
}

impl Dissemination {
    /// The barrier of the members whose mappings are `maps` (by member index), as member
    /// `own`; `None` if they are too many for the layout's slots.
    pub(crate) fn new(maps: Vec<Arc<Mapping>>, own: usize) -> Option<Dissemination> {
        let rounds = rounds_for(maps.len());
        (rounds <= MAX_ROUNDS && own < maps.len()).then(|| Dissemination {
            maps,
            own,
            rounds,
            progress: Mutex::new(Progress::default()),
            seen: AtomicU64::new(0),
            wake_pending: AtomicBool::new(false),
            outcome: [AtomicU64::new(0), AtomicU64::new(0)],
        })
    }

    fn lock(&self) -> MutexGuard<'_, Progress> {
        // The state is plain numbers, consistent after every statement that a panic could
        // interrupt; a poisoned lock is still usable.
        self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The slot of `round` for barriers of `epoch`'s parity in member `member`'s page: its
    /// epoch word (32-bit view only) and its name word.
    fn slot(&self, member: usize, epoch: u32, round: u32) -> Option<(&AtomicU64, &AtomicU64)> {
        let base = layout::diss_slot(epoch as usize & 1, round as usize);
        let words = self.maps.get(member)?.words();
        Some((words.get(base)?, words.get(base + 1)?))
    }

    /// Writes this member's round `round` of `epoch` into its partner's slot. Whether the
    /// partner sleeps is asked later ([`Dissemination::check_wake`], at this member's next
    /// look at the barrier), not with a fence right after the store (see the module docs).
    fn send(&self, p: &mut Progress, round: u32) {
        self.check_wake(p);
        let n = self.maps.len();
        let to = (self.own + (1usize << round)) % n;
        let Some((tag, name)) = self.slot(to, p.epoch, round) else {
            return;
        };
        // Relaxed: published by the epoch's store below.
        name.store(p.acc, Ordering::Relaxed);
        // Release: of the name, and of everything this member wrote before arriving.
        as_u32(tag).store(p.epoch, Ordering::Release);
        p.wake_check = Some((to, p.epoch, round));
        // Relaxed: a hint that sends `done` to the lock, which orders the rest.
        self.wake_pending.store(true, Ordering::Relaxed);
    }

    /// The second half of [`Dissemination::send`]: wakes the partner of the last send if it
    /// sleeps. The fence makes this Dekker with the sleeper (see the module docs): either the
    /// sleeper's re-read of its slot saw the epoch, or this load sees its sleep word.
    fn check_wake(&self, p: &mut Progress) {
        let Some((to, epoch, round)) = p.wake_check.take() else {
            return;
        };
        std::sync::atomic::fence(Ordering::SeqCst);
        let sleeping = self.maps[to]
            .words()
            .get(layout::W_DISS_SLEEP)
            .is_some_and(|w| as_u32(w).load(Ordering::SeqCst) != 0);
        if sleeping {
            if let Some((tag, _)) = self.slot(to, epoch, round) {
                futex_wake(as_u32(tag), i32::MAX);
            }
        }
        // Relaxed: see `send`.
        self.wake_pending.store(false, Ordering::Relaxed);
    }

    /// Arrives at the next barrier with `name`, and `value` (see `Node::barrier_arrive_with`)
    /// stored first into this member's value word of the barrier's parity, so that a member
    /// that sees this arrival sees the value.
    pub(crate) fn arrive(&self, name: BarrierName, value: Option<u64>) -> BarrierTicket {
        let mut p = self.lock();
        p.epoch = p.epoch.wrapping_add(1);
        if p.epoch == 0 {
            // Slots start out zero: epoch 0 would look arrived.
            p.epoch = 1;
        }
        p.round = 0;
        p.acc = name.to_word();
        if let Some(v) = value {
            let slot = layout::W_BARRIER_VALUE[p.epoch as usize & 1];
            if let Some(w) = self.maps[self.own].words().get(slot) {
                // Relaxed: released by this arrival's first slot write.
                w.store(v, Ordering::Relaxed);
            }
        }
        let ticket = BarrierTicket::of(p.epoch);
        if self.rounds == 0 {
            self.finish(&p);
            return ticket;
        }
        self.send(&mut p, 0);
        self.advance(&mut p);
        ticket
    }

    /// Takes in every round that has arrived, sending the next; returns whether the barrier
    /// is complete.
    fn advance(&self, p: &mut Progress) -> bool {
        let done = self.take_rounds(p);
        if done {
            // The caller may not look at this barrier again before its next: the receiver
            // of the last round must not sleep on until then.
            self.check_wake(p);
        }
        // Release: a thread that sees the barrier complete through `seen` (Acquire, in
        // `done`) sees what the rounds' Acquire loads made visible.
        self.seen.store(
            u64::from(p.epoch) << 32 | u64::from(p.round),
            Ordering::Release,
        );
        done
    }

    fn take_rounds(&self, p: &mut Progress) -> bool {
        while p.round < self.rounds {
            let Some((tag, name)) = self.slot(self.own, p.epoch, p.round) else {
                return false;
            };
            // Acquire: pairs with the writer's SeqCst store (see `send`).
            if as_u32(tag).load(Ordering::Acquire) != p.epoch {
                return false;
            }
            p.acc = BarrierName::merge_words(p.acc, name.load(Ordering::Relaxed));
            p.round += 1;
            if p.round < self.rounds {
                self.send(p, p.round);
            } else {
                self.finish(p);
            }
        }
        true
    }

    /// Records the outcome of the barrier `p` completed.
    fn finish(&self, p: &Progress) {
        // Relaxed: read by this member's own threads after they saw completion under the lock
        // or through `seen`, whose order the lock gives.
        self.outcome[p.epoch as usize & 1].store(p.acc, Ordering::Relaxed);
        if let Some(w) = self.maps[self.own].words().get(layout::W_DISS_DONE) {
            // Release: a member that reads it (see `finished`) after this one's end knows
            // its sends of the barrier were made.
            as_u32(w).store(p.epoch, Ordering::Release);
        }
    }

    /// Whether member `index` has completed the barrier of `ticket` (or a later one): it has
    /// made every send of it. `None` for an index outside the supernode.
    pub(crate) fn finished(&self, ticket: BarrierTicket, index: usize) -> Option<bool> {
        let w = self.maps.get(index)?.words().get(layout::W_DISS_DONE)?;
        // Acquire: see `finish`. Epochs only grow; the wrapping difference orders them.
        let done = as_u32(w).load(Ordering::Acquire);
        Some(done.wrapping_sub(ticket.epoch()) as i32 >= 0 && done != 0)
    }

    /// Whether the barrier of `ticket` has completed (advancing it if it can).
    pub(crate) fn done(&self, ticket: BarrierTicket) -> bool {
        // Without the lock: whether the barrier is known complete, or its slot unchanged.
        // Acquire: see `advance`.
        let seen = self.seen.load(Ordering::Acquire);
        let (epoch, round) = ((seen >> 32) as u32, seen as u32);
        // Relaxed: see `send`.
        let quiet = !self.wake_pending.load(Ordering::Relaxed);
        if quiet && epoch == ticket.epoch() && round >= self.rounds {
            return true;
        }
        if quiet && epoch == ticket.epoch() {
            let arrived = self
                .slot(self.own, epoch, round)
                // Relaxed: only a hint; `advance` re-reads it with Acquire.
                .is_some_and(|(tag, _)| as_u32(tag).load(Ordering::Relaxed) == epoch);
            if !arrived {
                return false;
            }
        }
        let mut p = self.lock();
        self.check_wake(&mut p);
        if p.epoch != ticket.epoch() {
            // An earlier barrier: this member arrived at a later one only after it completed.
            return true;
        }
        self.advance(&mut p)
    }

    /// The names the arrivals at the completed barrier of `ticket` agreed on.
    pub(crate) fn name(&self, ticket: BarrierTicket) -> BarrierName {
        // Relaxed: see `finish`.
        BarrierName::from_word(self.outcome[ticket.epoch() as usize & 1].load(Ordering::Relaxed))
    }

    /// Sleeps at most `timeout` for the slot the barrier of `ticket` waits on; returns
    /// whether the barrier has completed.
    pub(crate) fn sleep(&self, ticket: BarrierTicket, timeout: Duration) -> bool {
        let (epoch, round) = {
            let mut p = self.lock();
            self.check_wake(&mut p);
            if p.epoch != ticket.epoch() || self.advance(&mut p) {
                return true;
            }
            (p.epoch, p.round)
        };
        let Some((tag, _)) = self.slot(self.own, epoch, round) else {
            return self.done(ticket);
        };
        let Some(sleep) = self.maps[self.own].words().get(layout::W_DISS_SLEEP) else {
            return self.done(ticket);
        };
        // SeqCst: Dekker with the writer's epoch store and sleep-word load (see `send`).
        as_u32(sleep).store(1, Ordering::SeqCst);
        let seen = as_u32(tag).load(Ordering::SeqCst);
        if seen != epoch {
            futex_wait(as_u32(tag), seen, timeout);
        }
        // Relaxed: a stale 1 costs a writer one needless wake-up.
        as_u32(sleep).store(0, Ordering::Relaxed);
        self.done(ticket)
    }
}
