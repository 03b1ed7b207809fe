//! The node barrier as [`Node`] offers it: which barrier a supernode runs ([`BarrierKind`]:
//! the shared counter of [`crate::barrier`] or the dissemination barrier of
//! [`crate::dissemination`]), split-phase arrival, and the waits.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::Node;
use crate::barrier::{BarrierName, BarrierTicket, BarrierWords};
use crate::layout;
use crate::segment::as_u32;
use crate::wait::{self, WaitPolicy, WaitStage};

/// Which node barrier a supernode uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BarrierKind {
    /// Dissemination, unless the host has more ranks than CPUs ([`crate::WaitPolicy::yield_cpu`])
    /// or the supernode more members than its slots serve (then the counter).
    #[default]
    Auto,
    /// The shared counter: one atomic increment per arrival on one line; the waiters of a
    /// crowded host each need to run only once.
    Counter,
    /// Dissemination: `ceil(log2 n)` rounds of one line written per member and round (falls
    /// back to the counter beyond 256 members).
    Dissemination,
}

impl std::fmt::Display for BarrierKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            BarrierKind::Auto => "auto",
            BarrierKind::Counter => "counter",
            BarrierKind::Dissemination => "dissemination",
        })
    }
}

impl BarrierKind {
    /// The kind `RGASNET_PSHM_BARRIER`'s value names (`auto`, `counter`, `dissemination`).
    pub fn parse(value: &str) -> Option<BarrierKind> {
        match value.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Some(BarrierKind::Auto),
            "counter" => Some(BarrierKind::Counter),
            "dissemination" | "dissem" => Some(BarrierKind::Dissemination),
            _ => None,
        }
    }
}

/// How long one wait for a node barrier has lasted ([`Node::barrier_pause`]), measured
/// without a clock read per step.
#[derive(Debug, Clone, Default)]
pub struct BarrierWaiting {
    steps: u32,
    since: Option<Instant>,
    /// What the last clock read said the wait does (`None`: no read yet).
    stage: Option<WaitStage>,
}

impl BarrierWaiting {
    /// Steps between two clock reads.
    pub const CHECKS_PER_READ: u32 = 64;

    /// Starts the wait over (the caller's own traffic restarts the spin).
    pub fn restart(&mut self) {
        *self = BarrierWaiting::default();
    }

    /// Counts a step; what the wait does at it under `policy` (as of the last clock read,
    /// which the first batch of steps makes).
    fn stage(&mut self, policy: &WaitPolicy) -> WaitStage {
        self.steps = self.steps.wrapping_add(1);
        if self.steps % Self::CHECKS_PER_READ == 0 {
            let waited = self.since.get_or_insert_with(Instant::now).elapsed();
            self.stage = Some(policy.stage(waited));
        }
        *self
            .stage
            .get_or_insert_with(|| policy.stage(Duration::ZERO))
    }
}

impl Node {
    fn barrier_words(&self) -> BarrierWords<'_> {
        // The leader (lowest rank) hosts the barrier; `members` is never empty.
        let words = self.peers[0].mapping.words();
        BarrierWords {
            count: as_u32(&words[layout::W_BARRIER_COUNT]),
            generation: as_u32(&words[layout::W_BARRIER_GEN]),
            sleepers: as_u32(&words[layout::W_BARRIER_SLEEPERS]),
            names: [
                &words[layout::W_BARRIER_NAME[0]],
                &words[layout::W_BARRIER_NAME[1]],
            ],
        }
    }

    /// Arrives at the node barrier (split phase: poll with [`Node::barrier_done`]).
    pub fn barrier_arrive(&self) -> BarrierTicket {
        if let Some(d) = &self.dissemination {
            return d.arrive(BarrierName::default(), None);
        }
        self.barrier_words()
            .arrive(self.members.len() as u32, BarrierName::default())
    }

    /// [`Node::barrier_arrive`] bringing a name to agree on ([`Node::barrier_name`]) and
    /// `value`, which every member can read ([`Node::barrier_value`]): for a barrier layer's
    /// diagnostics (which members have arrived), not its outcome.
    pub fn barrier_arrive_with(&self, name: BarrierName, value: u64) -> BarrierTicket {
        if let Some(d) = &self.dissemination {
            return d.arrive(name, Some(value));
        }
        let b = self.barrier_words();
        // Acquire: as in `BarrierWords::arrive`, which reads the generation again (the same
        // value: it cannot move before this rank arrives).
        let parity = (b.generation.load(Ordering::Acquire) & 1) as usize;
        if let Some(word) = self.peers[self.own]
            .mapping
            .words()
            .get(layout::W_BARRIER_VALUE[parity])
        {
            // Relaxed: published by the arrival's AcqRel increment, which the completing
            // bump releases to every member (see the barrier module).
            word.store(value, Ordering::Relaxed);
        }
        b.arrive(self.members.len() as u32, name)
    }

    /// The name the arrivals at the completed barrier of `ticket` agreed on. Only meaningful
    /// once [`Node::barrier_done`] said so, and until this rank arrives again.
    pub fn barrier_name(&self, ticket: BarrierTicket) -> BarrierName {
        match &self.dissemination {
            Some(d) => d.name(ticket),
            None => self.barrier_words().name(ticket),
        }
    }

    /// The value member `index` (its position in the sorted member list) brought to the
    /// barrier of `ticket`, or, while that member has not arrived yet, to the barrier two
    /// before (the slots alternate by generation parity); `None` for an index outside the
    /// supernode. Exact once [`Node::barrier_done`] said so (until this rank arrives again);
    /// before that a hint, which is why a barrier layer's values say which barrier they are
    /// of.
    pub fn barrier_value(&self, ticket: BarrierTicket, index: usize) -> Option<u64> {
        let word = self
            .peers
            .get(index)?
            .mapping
            .words()
            .get(layout::W_BARRIER_VALUE[BarrierWords::parity(ticket)])?;
        // Relaxed: ordered by the Acquire load of the generation that saw completion.
        Some(word.load(Ordering::Relaxed))
    }

    /// Whether member `index` has done its part of the barrier of `ticket`, so that its end
    /// cannot keep the barrier from completing: with the counter, it arrived (its arrival is
    /// all it does, see [`Node::barrier_value`]); with dissemination, it completed the
    /// barrier (it forwards others' arrivals in its later rounds). `None` for an index outside
    /// the supernode, or, with the counter, when only the caller's values can tell.
    pub fn barrier_member_finished(&self, ticket: BarrierTicket, index: usize) -> Option<bool> {
        self.dissemination.as_ref()?.finished(ticket, index)
    }

    /// One step of waiting for the barrier of `ticket` that keeps the caller in control (it
    /// has messages to poll between steps), as the wait policy has it for how long `waiting`
    /// has lasted: a spin hint, a yield of the CPU, or (once the policy's polling is over) a
    /// sleep on the barrier of at most `nap`. The clock is read once per
    /// [`BarrierWaiting::CHECKS_PER_READ`] steps, so a short wait never reads it. Returns
    /// whether the barrier completed.
    pub fn barrier_pause(
        &self,
        ticket: BarrierTicket,
        waiting: &mut BarrierWaiting,
        nap: Duration,
    ) -> bool {
        if self.barrier_done(ticket) {
            return true;
        }
        match waiting.stage(&self.wait) {
            WaitStage::Spin => std::hint::spin_loop(),
            WaitStage::Yield => std::thread::yield_now(),
            WaitStage::Sleep => return self.barrier_sleep(ticket, nap),
        }
        self.barrier_done(ticket)
    }

    /// Sleeps at most `nap` unless the barrier of `ticket` completes; returns whether it has.
    fn barrier_sleep(&self, ticket: BarrierTicket, nap: Duration) -> bool {
        match &self.dissemination {
            Some(d) => d.sleep(ticket, nap),
            None => self.barrier_words().sleep(ticket, nap),
        }
    }

    /// Whether every member has arrived at the barrier of `ticket`.
    pub fn barrier_done(&self, ticket: BarrierTicket) -> bool {
        match &self.dissemination {
            Some(d) => d.done(ticket),
            None => self.barrier_words().done(ticket),
        }
    }

    /// Waits at most `timeout` (spinning, then sleeping) for the barrier of `ticket`; returns
    /// whether it completed.
    pub fn barrier_wait(&self, ticket: BarrierTicket, timeout: Duration) -> bool {
        wait::spin_then_sleep(
            self.wait,
            timeout,
            || self.barrier_done(ticket),
            |nap| self.barrier_sleep(ticket, nap),
        )
    }

    /// Whether the node barrier is the dissemination barrier (not the shared counter).
    pub fn barrier_disseminates(&self) -> bool {
        self.dissemination.is_some()
    }
}
