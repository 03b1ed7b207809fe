//! The node barrier as a dissemination barrier of radix `k` (`NodeConfig::barrier_radix`): in
//! round `r` of a barrier, member `i` writes the barrier's number (its *epoch*) and the names
//! it has merged so far into a slot of each member `i + j·k^r` (modulo the member count `n`,
//! for `j = 1 .. k-1` while `j·k^r < n`), then waits for its own slots of round `r`, which
//! members `i - j·k^r` write. After round `r` a member has heard, directly or not, from the
//! `k^(r+1)` members before it, so after `ceil(log_k n)` rounds from every member, and holds the
//! merge of every arrival's name.
//!
//! Each slot is a cache line of its receiver's header page that only one member ever writes,
//! so a round costs one line transfer each way and no read-modify-write. The `k - 1` writes of
//! a round go out together and their transfers overlap, so a higher radix trades rounds (each
//! a transfer in turn) for lines per round: 16 members take 4 rounds at radix 2 and 2 at radix
//! 4. Two members on two cores complete a barrier in about half a flag ping-pong, where the
//! shared counter ([`crate::barrier`]) needs every arrival's increment of one line in turn. The
//! counter stays in use on a host with more ranks than CPUs, where a rank's rounds would each
//! wait for the scheduler to run the ranks before it.
//!
//! Slots come in two sets, by the parity of the epoch: a member's writer can be one barrier
//! ahead of it (it finished barrier `k` and writes its first round of `k + 1`) but never two,
//! since finishing `k + 1` needs this member's own writes of `k + 1`, which it makes only once
//! it has read everything of `k`.
//!
//! Sleeping: a waiter sets its sleep word, re-reads the first slot of its round not yet
//! written and sleeps on that slot's epoch word (futex); a writer stores the epoch and, at its
//! next look at the barrier (at the latest when the barrier completes for it), fences and reads
//! each receiver's sleep word, waking the slot it wrote if set. Both sides are `SeqCst` around
//! their store and load (Dekker): one of the two sees the other's write. The writer's half is
//! deferred so that the store is not followed at once by a fence of its own; the release of the
//! progress lock after a send is a locked instruction too, though, and still waits for the
//! receiver's line (a profile put most of `arrive`'s time there): an arrival without the lock
//! is the next step.
#![deny(unsafe_code)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::barrier::{BarrierName, BarrierTicket};
use crate::layout;
use crate::queue::{futex_wait, futex_wake};
use crate::segment::{as_u32, Mapping};

/// The largest radix: 256 members at radix 8 need 17 slots of the layout's
/// [`layout::DISS_SLOTS_PER_PARITY`] (any radix up to 8 fits 256 members).
pub const MAX_RADIX: u32 = 8;

/// The radix a supernode uses unless configured: on 16 cores, 16 members took 0.70 µs per
/// barrier at radix 4 (2 rounds) against 0.93 at radix 2 (4 rounds), and radix 8 lost to 4 at 16
/// members too (`benches/perf/waits-and-barriers.md`, stop 54).
pub const DEFAULT_RADIX: u32 = 4;

/// One round of a member's part in a barrier.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Round {
    /// The members it writes to, each with the slot (within a parity) it writes.
    targets: Vec<(usize, usize)>,
    /// Its own slots that the round's writers fill.
    slots: Vec<usize>,
}

/// The rounds of member `own` of `members` at `radix`; `None` for a radix outside
/// `2..=MAX_RADIX` or members too many for the layout's slots.
fn plan(members: usize, own: usize, radix: u32) -> Option<Vec<Round>> {
    if !(2..=MAX_RADIX).contains(&radix) {
        return None;
    }
    let (n, k) = (members.max(1), radix as usize);
    let mut rounds = Vec::new();
    // Members this one has heard from after the rounds so far (itself included).
    let mut span = 1usize;
    let mut next_slot = 0;
    while span < n {
        // j·span < n for j = 1 ..= writers: the rest would only repeat what is known.
        let writers = (k - 1).min(n.div_ceil(span) - 1);
        if next_slot + writers > layout::DISS_SLOTS_PER_PARITY {
            return None;
        }
        rounds.push(Round {
            targets: (1..=writers)
                .map(|j| ((own + j * span) % n, next_slot + j - 1))
                .collect(),
            slots: (next_slot..next_slot + writers).collect(),
        });
        next_slot += writers;
        span = span.saturating_mul(k);
    }
    Some(rounds)
}

/// Whether a dissemination barrier of `members` members at `radix` fits the layout's slots.
pub(crate) fn fits(members: usize, radix: u32) -> bool {
    plan(members, 0, radix).is_some()
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
    /// The epoch and round of the last sends, until [`Dissemination::check_wake`] has asked
    /// whether their receivers sleep.
    wake_check: Option<(u32, u32)>,
}

/// This member's side of the dissemination barrier.
pub(crate) struct Dissemination {
    /// Every member's mapping, by member index.
    maps: Vec<Arc<Mapping>>,
    /// This member's index.
    own: usize,
    /// This member's rounds, in order.
    plan: Vec<Round>,
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
    /// `own`, at `radix`; `None` for a radix outside `2..=MAX_RADIX` or members too many for
    /// the layout's slots.
    pub(crate) fn new(maps: Vec<Arc<Mapping>>, own: usize, radix: u32) -> Option<Dissemination> {
        if own >= maps.len() {
            return None;
        }
        let plan = plan(maps.len(), own, radix)?;
        Some(Dissemination {
            maps,
            own,
            rounds: plan.len() as u32,
            plan,
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

    /// Slot `slot` for barriers of `epoch`'s parity in member `member`'s page: its epoch word
    /// (32-bit view only) and its name word.
    fn slot(&self, member: usize, epoch: u32, slot: usize) -> Option<(&AtomicU64, &AtomicU64)> {
        let base = layout::diss_slot(epoch as usize & 1, slot);
        let words = self.maps.get(member)?.words();
        Some((words.get(base)?, words.get(base + 1)?))
    }

    /// Whether every slot of this member's `round` holds `epoch`. Acquire: pairs with the
    /// writers' Release stores (see `send`), for the names and what they wrote before.
    fn round_arrived(&self, epoch: u32, round: u32, order: Ordering) -> bool {
        self.plan.get(round as usize).is_some_and(|r| {
            r.slots.iter().all(|&s| {
                self.slot(self.own, epoch, s)
                    .is_some_and(|(tag, _)| as_u32(tag).load(order) == epoch)
            })
        })
    }

    /// Writes this member's round `round` of `epoch` into its partners' slots. Whether the
    /// partners sleep is asked later ([`Dissemination::check_wake`], at this member's next look
    /// at the barrier), not with a fence right after the stores (see the module docs).
    fn send(&self, p: &mut Progress, round: u32) {
        self.check_wake(p);
        let Some(r) = self.plan.get(round as usize) else {
            return;
        };
        for &(to, slot) in &r.targets {
            let Some((tag, name)) = self.slot(to, p.epoch, slot) else {
                continue;
            };
            // Relaxed: published by the epoch's store below.
            name.store(p.acc, Ordering::Relaxed);
            // Release: of the name, and of everything this member wrote before arriving.
            as_u32(tag).store(p.epoch, Ordering::Release);
        }
        p.wake_check = Some((p.epoch, round));
        // Relaxed: a hint that sends `done` to the lock, which orders the rest.
        self.wake_pending.store(true, Ordering::Relaxed);
    }

    /// The second half of [`Dissemination::send`]: wakes the partners of the last sends that
    /// sleep. The fence makes this Dekker with each sleeper (see the module docs): either the
    /// sleeper's re-read of its slot saw the epoch, or this load sees its sleep word.
    fn check_wake(&self, p: &mut Progress) {
        let Some((epoch, round)) = p.wake_check.take() else {
            return;
        };
        std::sync::atomic::fence(Ordering::SeqCst);
        for &(to, slot) in self
            .plan
            .get(round as usize)
            .map_or(&[][..], |r| &r.targets)
        {
            let sleeping = self.maps[to]
                .words()
                .get(layout::W_DISS_SLEEP)
                .is_some_and(|w| as_u32(w).load(Ordering::SeqCst) != 0);
            if sleeping {
                if let Some((tag, _)) = self.slot(to, epoch, slot) {
                    futex_wake(as_u32(tag), i32::MAX);
                }
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
            if !self.round_arrived(p.epoch, p.round, Ordering::Acquire) {
                return false;
            }
            for &s in self
                .plan
                .get(p.round as usize)
                .map_or(&[][..], |r| &r.slots)
            {
                if let Some((_, name)) = self.slot(self.own, p.epoch, s) {
                    // Relaxed: ordered by the Acquire load of its epoch in `round_arrived`.
                    p.acc = BarrierName::merge_words(p.acc, name.load(Ordering::Relaxed));
                }
            }
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
        // Relaxed: only a hint; `advance` re-reads the slots with Acquire.
        if quiet && epoch == ticket.epoch() && !self.round_arrived(epoch, round, Ordering::Relaxed)
        {
            return false;
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
        // The first slot of the round not written yet; its writer wakes this member.
        let unwritten = self.plan.get(round as usize).and_then(|r| {
            r.slots.iter().find_map(|&s| {
                let (tag, _) = self.slot(self.own, epoch, s)?;
                // Relaxed: the SeqCst re-read below decides.
                (as_u32(tag).load(Ordering::Relaxed) != epoch).then_some(tag)
            })
        });
        let Some(tag) = unwritten else {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every member's rounds at `radix`, by member.
    fn plans(n: usize, radix: u32) -> Vec<Vec<Round>> {
        (0..n).map(|i| plan(n, i, radix).unwrap()).collect()
    }

    #[test]
    fn every_member_hears_from_every_other_through_slots_written_once() {
        for radix in 2..=MAX_RADIX {
            for n in 1..=40usize {
                let plans = plans(n, radix);
                let rounds = plans[0].len();
                // ceil(log_radix n) rounds, the same for every member.
                assert!(radix.pow(rounds as u32) as usize >= n);
                assert!(rounds == 0 || (radix.pow(rounds as u32 - 1) as usize) < n);
                assert!(plans.iter().all(|p| p.len() == rounds));
                // What each member has heard of (directly or not), round by round.
                let mut heard: Vec<Vec<bool>> =
                    (0..n).map(|i| (0..n).map(|j| i == j).collect()).collect();
                for r in 0..rounds {
                    let before = heard.clone();
                    // Slots of each member written this round: by exactly the members that
                    // read them, each slot by one writer.
                    let mut written = vec![Vec::new(); n];
                    for (from, p) in plans.iter().enumerate() {
                        for &(to, slot) in &p[r].targets {
                            assert_ne!(to, from, "radix {radix}, {n} members: a write to itself");
                            written[to].push(slot);
                            for k in 0..n {
                                heard[to][k] |= before[from][k];
                            }
                        }
                    }
                    for (i, p) in plans.iter().enumerate() {
                        let mut got = written[i].clone();
                        got.sort_unstable();
                        assert_eq!(got, p[r].slots, "radix {radix}, {n} members, round {r}");
                    }
                }
                assert!(
                    heard.iter().all(|h| h.iter().all(|&x| x)),
                    "radix {radix}, {n} members: someone was not heard"
                );
            }
        }
    }

    #[test]
    fn radixes_outside_the_range_and_too_many_members_have_no_plan() {
        for radix in 2..=MAX_RADIX {
            assert!(fits(256, radix), "radix {radix}");
        }
        assert!(!fits(2, 1));
        assert!(!fits(2, MAX_RADIX + 1));
        // Radix 2 has one slot a round: 2^24 members would need more than the 24 lines.
        assert!(fits(1 << layout::DISS_SLOTS_PER_PARITY, 2));
        assert!(!fits((1 << layout::DISS_SLOTS_PER_PARITY) + 1, 2));
        // 16 members: 4 rounds of one slot at radix 2, 2 rounds of three at radix 4.
        let p = plan(16, 5, 4).unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0].targets, vec![(6, 0), (7, 1), (8, 2)]);
        assert_eq!(p[1].targets, vec![(9, 3), (13, 4), (1, 5)]);
        assert_eq!(plan(16, 5, 2).unwrap().len(), 4);
    }
}
