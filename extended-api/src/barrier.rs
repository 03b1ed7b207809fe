//! Barriers: split-phase notify/wait (named or anonymous, with mismatch detection) over a
//! dissemination algorithm of active messages.
//!
//! In round `k` (of `ceil(log2 n)`) rank `r` sends its accumulated barrier value to rank
//! `r + 2^k` and waits for the value of rank `r - 2^k` (mod `n`). Values merge — the first name
//! seen, and a mismatch flag raised by a rank's `MISMATCH` flag or by two different names — so
//! after the last round every rank holds the merge over all ranks, and a mismatch is reported
//! on every rank. Messages carry the barrier's epoch; a rank is at most one barrier ahead of
//! another, so incoming values are kept by epoch parity and round.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rgasnet::{BarrierName, NodeBarrierTicket};

use rgasnet::AmError;

use crate::error::ExtError;
use crate::ext::{Core, Extended, H_BARRIER};

bitflags::bitflags! {
    /// Flags of `barrier_notify` / `barrier_wait` (GASNet's `GASNET_BARRIERFLAG_*`).
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct BarrierFlags: u32 {
        /// The barrier is anonymous: it matches any name (the id is ignored).
        const ANONYMOUS = 1;
        /// Force a mismatch: every rank's wait reports [`ExtError::BarrierMismatch`].
        const MISMATCH = 2;
    }
}

/// Longest sleep of a node-barrier wait between looks at its messages (see
/// [`rgasnet::Client::node_barrier_pause`]): an AM that arrives meanwhile waits this long.
const NODE_NAP: Duration = Duration::from_micros(200);

/// Most rounds: enough for 2^32 ranks.
const MAX_ROUNDS: usize = 32;
const BIT_NAMED: u32 = 1;
const BIT_MISMATCH: u32 = 2;

/// A barrier value: the name agreed on so far (`None`: all anonymous) and the mismatch flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Value {
    named: Option<u32>,
    mismatch: bool,
}

impl Value {
    fn new(id: u32, flags: BarrierFlags) -> Value {
        Value {
            named: (!flags.contains(BarrierFlags::ANONYMOUS)).then_some(id),
            mismatch: flags.contains(BarrierFlags::MISMATCH),
        }
    }

    fn merge(self, other: Value) -> Value {
        let differ = matches!((self.named, other.named), (Some(a), Some(b)) if a != b);
        Value {
            named: self.named.or(other.named),
            mismatch: self.mismatch || other.mismatch || differ,
        }
    }

    fn encode(self) -> (u32, u32) {
        let mut bits = 0;
        if self.named.is_some() {
            bits |= BIT_NAMED;
        }
        if self.mismatch {
            bits |= BIT_MISMATCH;
        }
        (self.named.unwrap_or(0), bits)
    }

    /// The value as the node barrier merges it.
    fn node_name(self) -> BarrierName {
        BarrierName {
            name: self.named,
            mismatch: self.mismatch,
        }
    }

    fn decode(id: u32, bits: u32) -> Value {
        Value {
            named: (bits & BIT_NAMED != 0).then_some(id),
            mismatch: bits & BIT_MISMATCH != 0,
        }
    }
}

/// Incoming values by epoch parity and round, each with its epoch.
type Inbox = [[Option<(u32, Value)>; MAX_ROUNDS]; 2];

/// The barrier in progress on this rank.
struct Active {
    id: u32,
    flags: BarrierFlags,
    acc: Value,
    /// Rounds whose incoming value has been merged.
    round: u32,
    /// The arrival at the node barrier, when it spans the job (then no messages are sent).
    node: Option<NodeBarrierTicket>,
}

struct Phase {
    epoch: u32,
    active: Option<Active>,
}

/// One rank's barrier state.
pub(crate) struct Barrier {
    rank: u32,
    size: u32,
    rounds: u32,
    /// Incoming values by epoch parity and round, with their epoch.
    inbox: Mutex<Inbox>,
    phase: Mutex<Phase>,
    /// The last epoch whose every round is merged (read inside waits without the lock).
    /// Stored with `Release` after the merged result is written under `phase`'s lock, loaded
    /// with `Acquire`, so a waiter that sees the epoch also sees the result (and mismatch flag)
    /// it then reads.
    complete: AtomicU32,
}

/// How many looks of a barrier wait pass between two checks of whether the rank it waits
/// for has ended its program (each check takes the interface's lock).
const LOOKS_PER_PARTNER_CHECK: u32 = 256;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// [`lock`] without waiting: `None` only while another thread holds the lock. A lock poisoned
/// by a handler that panicked is taken like any other: each update of the phase is one step.
fn try_lock<T>(m: &Mutex<T>) -> Option<std::sync::MutexGuard<'_, T>> {
    match m.try_lock() {
        Ok(g) => Some(g),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

impl Barrier {
    pub(crate) fn new(rank: u32, size: u32) -> Barrier {
        let rounds = if size <= 1 {
            0
        } else {
            u32::BITS - (size - 1).leading_zeros()
        };
        Barrier {
            rank,
            size,
            rounds,
            inbox: Mutex::new([[None; MAX_ROUNDS]; 2]),
            phase: Mutex::new(Phase {
                epoch: 0,
                active: None,
            }),
            complete: AtomicU32::new(0),
        }
    }

    fn partner_to(&self, round: u32) -> u32 {
        ((u64::from(self.rank) + (1u64 << round)) % u64::from(self.size)) as u32
    }

    fn partner_from(&self, round: u32) -> u32 {
        let n = u64::from(self.size);
        ((u64::from(self.rank) + n - (1u64 << round) % n) % n) as u32
    }

    /// Handler of a barrier message `[epoch, round, id, bits]` from `source`.
    pub(crate) fn handle(&self, source: u32, a: &[u32]) {
        let [epoch, round, id, bits] = a else {
            return;
        };
        if *round >= self.rounds || source != self.partner_from(*round) {
            eprintln!(
                "rgasnet: rank {}: ignoring a barrier message from rank {source} for round {round} (not a partner in this job's {} rounds)",
                self.rank, self.rounds
            );
            return;
        }
        let mut inbox = lock(&self.inbox);
        let slot = &mut inbox[(*epoch & 1) as usize][*round as usize];
        if slot.is_some() {
            eprintln!(
                "rgasnet: rank {}: duplicate barrier message from rank {source} (epoch {epoch}, round {round}) ignored",
                self.rank
            );
            return;
        }
        *slot = Some((*epoch, Value::decode(*id, *bits)));
    }

    /// Sends this rank's value for `round` of `epoch`.
    fn send(
        &self,
        core: &Core,
        call: &'static str,
        epoch: u32,
        round: u32,
        v: Value,
    ) -> Result<(), ExtError> {
        let (id, bits) = v.encode();
        core.client
            .am_request_short(self.partner_to(round), H_BARRIER, &[epoch, round, id, bits])
            .map_err(|e| match e {
                // The partner ended its program before this rank's barrier reached it.
                AmError::PeerLeft { rank, .. } => ExtError::BarrierPeerLeft { call, rank, epoch },
                e => ExtError::from_am(call, e),
            })
    }

    /// Merges every value that has arrived for the barrier in progress and sends the next
    /// rounds. Skipped if another thread is in a barrier call (it advances itself).
    pub(crate) fn advance(&self, core: &Core, call: &'static str) -> Result<(), ExtError> {
        let Some(mut ph) = try_lock(&self.phase) else {
            return Ok(());
        };
        self.advance_locked(core, call, &mut ph)
    }

    fn advance_locked(
        &self,
        core: &Core,
        call: &'static str,
        ph: &mut Phase,
    ) -> Result<(), ExtError> {
        let epoch = ph.epoch;
        let Some(a) = &mut ph.active else {
            return Ok(());
        };
        while a.round < self.rounds {
            let got = lock(&self.inbox)[(epoch & 1) as usize][a.round as usize].take();
            let Some((e, v)) = got else {
                return Ok(());
            };
            if e != epoch {
                eprintln!(
                    "rgasnet: fatal error on rank {}: barrier message of epoch {e} while in epoch {epoch} (ranks called different numbers of barriers)",
                    self.rank
                );
                core.client.exit(1)
            }
            a.acc = a.acc.merge(v);
            a.round += 1;
            if a.round < self.rounds {
                self.send(core, call, epoch, a.round, a.acc)?;
            }
        }
        self.complete.store(epoch, Ordering::Release);
        Ok(())
    }

    fn notify(&self, core: &Core, id: u32, flags: BarrierFlags) -> Result<(), ExtError> {
        let mut ph = lock(&self.phase);
        if ph.active.is_some() {
            return Err(ExtError::BarrierAlreadyNotified);
        }
        ph.epoch = ph.epoch.wrapping_add(1);
        let acc = Value::new(id, flags);
        // Every rank of the job on this memory node: the node barrier, the values with it.
        let node = if self.rounds == 0 {
            None
        } else {
            core.client
                .node_barrier_arrive(acc.node_name(), u64::from(ph.epoch))
        };
        ph.active = Some(Active {
            id,
            flags,
            acc,
            round: 0,
            node,
        });
        if self.rounds == 0 {
            self.complete.store(ph.epoch, Ordering::Release);
            return Ok(());
        }
        if node.is_some() {
            return Ok(());
        }
        let epoch = ph.epoch;
        if let Err(e) = self.send(core, "barrier_notify", epoch, 0, acc) {
            // Nothing was sent: the barrier did not start, so notify may be called again.
            ph.active = None;
            ph.epoch = ph.epoch.wrapping_sub(1);
            return Err(e);
        }
        // Values of this epoch may already be here (faster ranks).
        self.advance_locked(core, "barrier_notify", &mut ph)
    }

    /// Checks that a barrier is in progress with these arguments; returns its epoch and its
    /// node-barrier arrival, if it uses the node barrier.
    fn check(
        &self,
        call: &'static str,
        id: u32,
        flags: BarrierFlags,
    ) -> Result<(u32, Option<NodeBarrierTicket>), ExtError> {
        let ph = lock(&self.phase);
        let Some(a) = &ph.active else {
            return Err(ExtError::BarrierNotNotified { call });
        };
        let same_name = a.flags.contains(BarrierFlags::ANONYMOUS) || a.id == id;
        if a.flags != flags || !same_name {
            return Err(ExtError::BarrierWaitArgs {
                call,
                notify_id: a.id,
                notify_flags: a.flags.bits(),
                wait_id: id,
                wait_flags: flags.bits(),
            });
        }
        Ok((ph.epoch, a.node))
    }

    /// Ends the completed node barrier of `ticket` and reports its outcome (as
    /// [`Barrier::finish`]), from the name its arrivals agreed on: one lock, no message.
    fn node_finish(
        &self,
        core: &Core,
        call: &'static str,
        ticket: NodeBarrierTicket,
    ) -> Result<(), ExtError> {
        let agreed = core.client.node_barrier_name(ticket);
        let mut ph = lock(&self.phase);
        let epoch = ph.epoch;
        let Some(a) = ph.active.take() else {
            return Err(ExtError::BarrierNotNotified { call });
        };
        self.complete.store(epoch, Ordering::Release);
        let outcome = a.acc.merge(Value {
            named: agreed.name,
            mismatch: agreed.mismatch,
        });
        if outcome.mismatch {
            return Err(ExtError::BarrierMismatch { call });
        }
        Ok(())
    }

    /// Whether `rank` has arrived at the node barrier of `ticket` (epoch `epoch`): each rank
    /// brings its epoch as the barrier's value. A hint while the barrier is incomplete.
    fn node_arrived(core: &Core, ticket: NodeBarrierTicket, epoch: u32, rank: u32) -> bool {
        core.client.node_barrier_value(ticket, rank) == Some(u64::from(epoch))
    }

    /// A rank that ended its program without doing its part of the node barrier of `ticket`
    /// (arriving; with the dissemination barrier, also forwarding in its later rounds): it
    /// never will (what it wrote before it ended is visible once its end is).
    fn node_absent(&self, core: &Core, epoch: u32, ticket: NodeBarrierTicket) -> Option<u32> {
        (0..self.size).find(|&r| {
            r != self.rank
                && core.client.has_ended(r)
                && !core
                    .client
                    .node_barrier_finished(ticket, r)
                    .unwrap_or_else(|| Self::node_arrived(core, ticket, epoch, r))
        })
    }

    /// Waits for the node barrier of `ticket`, running AM handlers meanwhile; fails naming a
    /// rank that ended its program without arriving.
    fn node_wait(
        &self,
        core: &Core,
        call: &'static str,
        epoch: u32,
        ticket: NodeBarrierTicket,
    ) -> Result<(), ExtError> {
        let client = &core.client;
        let limit = client.config().stall_warning_secs;
        let mut clock = rgasnet::StallClock::new(limit);
        let mut waiting = rgasnet::BarrierWaiting::default();
        let mut looks: u32 = 0;
        while !client.node_barrier_done(ticket) {
            if client.shm_pending() {
                // Handlers run in every wait; their traffic restarts the spin.
                if client.poll().map_err(|e| ExtError::from_am(call, e))? > 0 {
                    waiting.restart();
                }
            }
            if client.node_barrier_pause(ticket, &mut waiting, NODE_NAP) {
                continue;
            }
            if let Some(waited) = clock.check() {
                let missing: Vec<String> = (0..self.size)
                    .filter(|&r| !Self::node_arrived(core, ticket, epoch, r))
                    .map(|r| r.to_string())
                    .collect();
                self.warn_stall_with(
                    call,
                    waited,
                    limit,
                    epoch,
                    &format!(
                        "the shared-memory barrier: no word yet from rank {}",
                        missing.join(", ")
                    ),
                );
            }
            looks = looks.wrapping_add(1);
            if looks % LOOKS_PER_PARTNER_CHECK == 0 {
                if let Some(rank) = self.node_absent(core, epoch, ticket) {
                    return Err(ExtError::BarrierPeerLeft { call, rank, epoch });
                }
            }
        }
        Ok(())
    }

    fn is_complete(&self, epoch: u32) -> bool {
        self.complete.load(Ordering::Acquire) == epoch
    }

    /// The barrier this rank waits in and the rank it waits for in its current round, if that
    /// rank has ended its program (see [`rgasnet::Client::has_left`]).
    fn partner_left(&self, core: &Core) -> Option<(u32, u32)> {
        let ph = try_lock(&self.phase)?;
        let round = ph.active.as_ref()?.round;
        let partner = (round < self.rounds).then(|| self.partner_from(round))?;
        core.client.has_left(partner).then_some((partner, ph.epoch))
    }

    /// Says on stderr that this rank has waited `waited` in the barrier, and for whom: a rank
    /// that never reaches the barrier holds every other, and without a word the job would
    /// just hang.
    #[cold]
    fn warn_stall(&self, call: &'static str, waited: Duration, limit: u64) {
        let (epoch, round) = match try_lock(&self.phase) {
            Some(ph) => (ph.epoch, ph.active.as_ref().map(|a| a.round)),
            None => return,
        };
        let waiting_for = match round {
            Some(k) if k < self.rounds => format!(
                "round {} of {}: no word yet from rank {}",
                k + 1,
                self.rounds,
                self.partner_from(k)
            ),
            _ => "its last round".to_string(),
        };
        self.warn_stall_with(call, waited, limit, epoch, &waiting_for);
    }

    /// The stall warning, waiting for what `waiting_for` says.
    #[cold]
    fn warn_stall_with(
        &self,
        call: &'static str,
        waited: Duration,
        limit: u64,
        epoch: u32,
        waiting_for: &str,
    ) {
        eprintln!(
            "rgasnet: warning: rank {}: {call} has waited {:.0} s in barrier {epoch} ({waiting_for}). Every rank must call the barrier (and the same number of barriers) for it to complete; still waiting. RGASNET_STALL_WARNING={limit} sets when this is said (0: never).",
            self.rank,
            waited.as_secs_f64()
        );
    }

    /// Ends the completed barrier and reports its outcome.
    fn finish(&self, call: &'static str) -> Result<(), ExtError> {
        let mut ph = lock(&self.phase);
        match ph.active.take() {
            Some(a) if a.acc.mismatch => Err(ExtError::BarrierMismatch { call }),
            Some(_) => Ok(()),
            None => Err(ExtError::BarrierNotNotified { call }),
        }
    }
}

impl Extended {
    /// First half of a split-phase barrier: signals arrival with `id` (ignored with
    /// [`BarrierFlags::ANONYMOUS`]). Does not wait. Called by one thread per rank.
    pub fn barrier_notify(&self, id: u32, flags: BarrierFlags) -> Result<(), ExtError> {
        self.sh.core.barrier.notify(&self.sh.core, id, flags)
    }

    /// Second half: waits (making progress) until every rank has notified. `id` and `flags`
    /// must be those given to `barrier_notify`. Every rank gets
    /// [`ExtError::BarrierMismatch`] if names differed or a rank flagged a mismatch.
    pub fn barrier_wait(&self, id: u32, flags: BarrierFlags) -> Result<(), ExtError> {
        let call = "barrier_wait";
        let b = &self.sh.core.barrier;
        let (epoch, node) = b.check(call, id, flags)?;
        if let Some(ticket) = node {
            crate::explicit::not_in_handler(call)?;
            b.node_wait(&self.sh.core, call, epoch, ticket)?;
            return b.node_finish(&self.sh.core, call, ticket);
        }
        // A barrier that takes long says so once (RGASNET_STALL_WARNING); the clock costs a
        // fast barrier nothing (reading it once per barrier cost the 2-rank barrier 3 %).
        let limit = self.sh.core.client.config().stall_warning_secs;
        let mut clock = rgasnet::StallClock::new(limit);
        let mut looks: u32 = 0;
        while !b.is_complete(epoch) {
            // Every so many looks the wait steps out (the check runs under the interface's
            // lock) to ask whether the rank it waits for has ended its program.
            let mut ask = false;
            self.sh.wait_for_peers(call, |_, _| {
                if b.is_complete(epoch) {
                    return Ok(true);
                }
                if let Some(waited) = clock.check() {
                    b.warn_stall(call, waited, limit);
                }
                looks = looks.wrapping_add(1);
                ask = looks % LOOKS_PER_PARTNER_CHECK == 0;
                Ok(ask)
            })?;
            if ask && b.partner_left(&self.sh.core).is_some() {
                // What it sent before it left came first (in order over the network, enqueued
                // before its mark on shared memory): take that in and merge it, then look
                // again. Bounded: a flood from elsewhere must not hold this up.
                for _ in 0..64 {
                    let ran = self
                        .sh
                        .core
                        .client
                        .poll()
                        .map_err(|e| ExtError::from_am(call, e))?;
                    if ran == 0 {
                        break;
                    }
                }
                b.advance(&self.sh.core, call)?;
                if !b.is_complete(epoch) {
                    if let Some((rank, epoch)) = b.partner_left(&self.sh.core) {
                        return Err(ExtError::BarrierPeerLeft { call, rank, epoch });
                    }
                }
            }
        }
        b.finish(call)
    }

    /// Non-blocking wait: polls once and returns `Ok(true)` (barrier complete, or the
    /// mismatch error) or `Ok(false)` (not yet; call again).
    pub fn barrier_try(&self, id: u32, flags: BarrierFlags) -> Result<bool, ExtError> {
        let call = "barrier_try";
        let b = &self.sh.core.barrier;
        let (epoch, node) = b.check(call, id, flags)?;
        if let Some(ticket) = node {
            crate::explicit::not_in_handler(call)?;
            let client = &self.sh.core.client;
            client.poll().map_err(|e| ExtError::from_am(call, e))?;
            if !client.node_barrier_done(ticket) {
                return Ok(false);
            }
            return b.node_finish(&self.sh.core, call, ticket).map(|()| true);
        }
        self.sh
            .wait_until(call, Some(std::time::Duration::ZERO), |_, _| {
                Ok(b.is_complete(epoch))
            })?;
        if !b.is_complete(epoch) {
            return Ok(false);
        }
        b.finish(call).map(|()| true)
    }

    /// Blocking anonymous barrier.
    pub fn barrier(&self) -> Result<(), ExtError> {
        self.barrier_notify(0, BarrierFlags::ANONYMOUS)?;
        self.barrier_wait(0, BarrierFlags::ANONYMOUS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_rules() {
        let anon = Value::new(7, BarrierFlags::ANONYMOUS);
        let a = Value::new(1, BarrierFlags::empty());
        let b = Value::new(2, BarrierFlags::empty());
        let m = Value::new(1, BarrierFlags::MISMATCH);
        assert_eq!(anon.named, None);
        assert_eq!(anon.merge(a), a);
        assert_eq!(a.merge(anon), a);
        assert_eq!(a.merge(a), a);
        assert!(a.merge(b).mismatch);
        assert!(anon.merge(m).mismatch);
        assert!(!anon.merge(anon).mismatch);
        for v in [anon, a, b, m, a.merge(b)] {
            let (id, bits) = v.encode();
            assert_eq!(Value::decode(id, bits), v);
        }
    }

    #[test]
    fn rounds_and_partners() {
        assert_eq!(Barrier::new(0, 1).rounds, 0);
        assert_eq!(Barrier::new(0, 2).rounds, 1);
        assert_eq!(Barrier::new(0, 3).rounds, 2);
        assert_eq!(Barrier::new(0, 4).rounds, 2);
        assert_eq!(Barrier::new(0, 5).rounds, 3);
        let b = Barrier::new(1, 5);
        assert_eq!(b.partner_to(0), 2);
        assert_eq!(b.partner_to(2), 0);
        assert_eq!(b.partner_from(0), 0);
        assert_eq!(b.partner_from(1), 4);
        assert_eq!(b.partner_from(2), 2);
        // Sending to r + 2^k and receiving from r - 2^k pair up across ranks.
        for n in 2..9u32 {
            for r in 0..n {
                let me = Barrier::new(r, n);
                for k in 0..me.rounds {
                    let to = me.partner_to(k);
                    assert_eq!(Barrier::new(to, n).partner_from(k), r);
                }
            }
        }
    }
}
