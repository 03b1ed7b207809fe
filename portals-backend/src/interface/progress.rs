//! How an interface makes progress: one round of it ([`Interface::progress_until`]: timers,
//! a batch of receives, transmits, and what a wait that goes on can do at once), and the waits
//! built on rounds ([`Interface::wait_for`]: spin, poll, then block in the kernel).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::{
    duration_ns, io_err, HoldingRound, Interface, State, IMMEDIATE_TAKE_MAX, MAX_BLOCK,
    MAX_POLL_BUDGET, RECV_BATCH,
};
use crate::engine::{Engine, ImmediateBatch, NiHandle};
use crate::error::PtlResult;
use crate::types::PhysId;

/// What a waiter can observe of the engine: events posted, operations counted, immediate
/// messages received. A message that leaves all three unchanged is answered by nobody local.
#[inline(always)]
fn observable(engine: &Engine) -> (u64, u64, u64) {
    let s = engine.stats();
    (s.events_posted, s.counts, s.immediates_received)
}

impl Interface {
    /// One round of progress: run timers, receive what is waiting (up to a batch), transmit.
    /// Returns whether any datagram arrived.
    pub(super) fn progress_locked(&self, st: &mut State) -> PtlResult<bool> {
        let mut received = false;
        self.progress_until(st, &mut received, true, &mut |_| Ok(None::<()>), None)?;
        Ok(received)
    }

    /// [`Interface::progress_locked`] that stops early, as soon as `until` holds after a
    /// delivered message, and returns its value.
    ///
    /// Each datagram is handed to the stack and whatever it makes due (the engine's answer to
    /// a request, an ack every `ack_every` frames) goes out before the next `recv`: answers
    /// leave at once, and a stream receiver does not sit on its acks for a whole batch while
    /// the sender's window is closed. A waiter's condition is checked after each delivered
    /// message, so a round trip does not pay another (usually empty) `recv` system call
    /// before its waiter sees the answer. Without a condition (non-blocking calls such as
    /// `eq_get`), everything waiting is taken in, up to the batch, before the application
    /// runs again — as a NIC would have deposited it meanwhile.
    ///
    /// With `transmit` false, what the received messages make due stays queued in the
    /// transport until the next call that transmits (see [`Interface::progress_holding`]).
    ///
    /// `first` is a datagram a lean round of [`Interface::wait_for`] already received into
    /// the receive buffer: the round handles it before it receives more, on the last clock
    /// reading ([`State::clock`]) rather than a new one, which its caller corrects after the
    /// round (see [`Interface::lean_rounds`]).
    pub(super) fn progress_until<T>(
        &self,
        st: &mut State,
        received: &mut bool,
        transmit: bool,
        until: &mut impl FnMut(&mut Engine) -> PtlResult<Option<T>>,
        mut first: Option<Received>,
    ) -> PtlResult<Option<T>> {
        let now = if first.is_some() {
            st.clock()
        } else {
            st.read_clock()
        };
        if st.stack.poll_timeout().is_some_and(|t| t <= now) {
            st.stack.handle_timeout(now);
        }
        if st.stack.has_soon_acks() {
            // The caller's last wait ended on what arrived, and it did not answer (its answer
            // would have carried these acks): their senders wait on them.
            st.stack.release_soon_acks(now);
        }
        let mut got = false;
        for _ in 0..RECV_BATCH {
            let State {
                stack,
                rx,
                last_received,
                ..
            } = &mut *st;
            let next = match first.take() {
                Some(got) => Some(got),
                // Received immediates wait for their owner: read nothing more until it takes
                // some (the transport's retransmission covers what the socket drops).
                None if stack.engine.immediate_backlog_full() => break,
                None => self.inner.link.recv_train(rx).map_err(io_err("progress"))?,
            };
            let Some((len, from, seg)) = next else {
                break;
            };
            *received = true;
            got = true;
            *last_received = now;
            if seg < len {
                // A train the kernel coalesced: every datagram of it is handled before this
                // round may end (none may be dropped on the floor), and `until` is asked
                // until it first holds.
                if let Some(v) = self.take_train(st, now, from, len, seg, transmit, until)? {
                    return Ok(Some(v));
                }
                continue;
            }
            let delivered = stack.transport.stats().messages_delivered;
            // Only a transmitting round asks (a holding round releases such acks below).
            let seen = transmit.then(|| observable(&stack.engine));
            stack.handle_datagram(now, from, rx.get(..len).unwrap_or_default());
            let stats = stack.transport.stats();
            let message = stats.messages_delivered != delivered;
            if !message && stats.peers_leaving != self.inner.departures.load(Ordering::Relaxed) {
                // Relaxed: written under the state lock; a reader that sees the old count
                // asks again on its next call (see `departures`).
                self.inner
                    .departures
                    .store(stats.peers_leaving, Ordering::Relaxed);
            }
            // The stack has already handed the engine's answers to the transport (see
            // `Stack::handle_datagram`); a pump is needed only for what is left.
            if message && (stack.engine.has_outgoing() || stack.transport.has_events()) {
                stack.pump(now);
            }
            if transmit {
                if message && stack.has_soon_acks() && Some(observable(&stack.engine)) == seen {
                    // A message that posted no event, counted nothing and brought no
                    // immediate (a put or get on a list entry without either) is one the
                    // caller will not answer: the ack its sender waits on leaves now, in this
                    // transmit, not after the caller's check — as a holding round does below.
                    // An idle put target measured 0.3-0.4 us more per put without this.
                    stack.release_soon_acks(now);
                }
                self.transmit(st, now);
            }
            if message {
                if let Some(v) = until(&mut st.stack.engine)? {
                    return Ok(Some(v));
                }
                if transmit && st.stack.has_soon_acks() {
                    // The wait goes on past a message whose sender waits on its ack: the ack
                    // leaves now, not after the batch's next (usually empty) `recv`.
                    st.stack.release_soon_acks(now);
                    self.transmit(st, now);
                }
                if !transmit {
                    // Held back only for a caller that may answer; a message it will not
                    // see (a put or get on a list entry without events) is answered now
                    // instead of after the batch's next, usually empty, `recv`: its
                    // engine answer, and the ack its sender waits on (a confirmed
                    // acknowledgement, which no answer of the caller will carry).
                    if st.stack.has_soon_acks() {
                        st.stack.release_soon_acks(now);
                    }
                    self.transmit(st, now);
                }
            } else if st.stack.transport.has_events() {
                // An ack that confirmed a delivery the program waits on (applied as it
                // arrived, see `OutMessage::mark_awaited`): the engine completes the
                // operation now, and the wait may end before the next, usually empty,
                // `recv`.
                st.stack.pump(now);
                if transmit {
                    self.transmit(st, now);
                }
                if let Some(v) = until(&mut st.stack.engine)? {
                    return Ok(Some(v));
                }
            } else if transmit
                && st.stack.awaits_confirmation(from)
                && st.stack.poll_timeout().is_some_and(|t| t <= now)
            {
                // An ack from a peer whose confirmation an operation waits on: applied now (it
                // was held for the end of the round), it may end the wait before the batch's
                // next, usually empty, `recv`.
                st.stack.handle_timeout(now);
                self.transmit(st, now);
                if let Some(v) = until(&mut st.stack.engine)? {
                    return Ok(Some(v));
                }
            }
        }
        // A round that took nothing in has nothing to move unless the engine has outgoing
        // messages: every call that gives the engine work pumps before it returns, and expired
        // timers were handled (and pumped) above. Skipping the empty pump shortens the
        // spinning round, and with it the wait to notice an answer.
        if got || st.stack.engine.has_outgoing() {
            st.stack.pump(now);
        }
        if !transmit {
            return until(&mut st.stack.engine);
        }
        // The transmit pass settles held acks, which may complete what `until` waits for.
        self.transmit(st, now);
        let done = until(&mut st.stack.engine)?;
        if done.is_some() {
            return Ok(done);
        }
        // The wait goes on, so what would wait for the next round is done now, at no cost to
        // an answer: the acks that senders wait on leave (nobody here answers soon; not after
        // the transport's ack delay), and a held ack that arrived is applied (it may complete
        // what this wait waits for: a confirmed acknowledgement).
        let mut more = false;
        if st.stack.has_soon_acks() {
            st.stack.release_soon_acks(now);
            more = true;
        }
        if got && st.stack.poll_timeout().is_some_and(|t| t <= now) {
            st.stack.handle_timeout(now);
            more = true;
        }
        if !more {
            return Ok(None);
        }
        self.transmit(st, now);
        until(&mut st.stack.engine)
    }

    /// Makes progress once without blocking.
    pub fn progress(&self) -> PtlResult<()> {
        let mut st = self.lock();
        self.progress_locked(&mut st).map(|_| ())
    }

    /// Takes in what is waiting (like [`Interface::progress`]) but holds back what that makes
    /// due — the engine's acknowledgements, the transport's acks — until the next call that
    /// transmits: an operation, a wait, or [`Interface::flush`]. A layer that answers what it
    /// receives (an AM handler's reply) then sends the acknowledgement and its answer in one
    /// datagram. It returns as soon as a received message posted an event, so that its
    /// consumer (an AM handler) runs before the next, usually empty, `recv` system call.
    /// Only messages that post an event are held for: what a message without one makes due
    /// (the answer to a put or get on an event-less list entry) leaves at once, since no
    /// consumer will answer it. Returns whether any datagram arrived. The caller must flush
    /// before it stops calling in.
    ///
    /// Immediate messages received for `immediates.0` (up to [`IMMEDIATE_TAKE_MAX`], including
    /// any already waiting) are moved into `immediates.1` under the same lock, and an arriving
    /// one ends the round like an event.
    pub fn progress_holding(
        &self,
        immediates: Option<(NiHandle, &mut ImmediateBatch)>,
    ) -> PtlResult<HoldingRound> {
        let mut st = self.lock();
        let mut received = false;
        let stats = st.stack.engine.stats();
        let before = (stats.events_posted, stats.immediates_received);
        self.progress_until(
            &mut st,
            &mut received,
            false,
            &mut |e| {
                let s = e.stats();
                Ok(((s.events_posted, s.immediates_received) != before).then_some(()))
            },
            None,
        )?;
        if let Some((ni, out)) = immediates {
            if st.stack.engine.immediates_waiting() > 0 {
                st.stack.engine.take_immediates(ni, out, IMMEDIATE_TAKE_MAX);
            }
        }
        let stats = st.stack.engine.stats();
        Ok(HoldingRound {
            received,
            events_posted: stats.events_posted,
            pending_transmit: st.stack.engine.has_outgoing() || st.stack.transport.has_ready(),
            immediates_lost: stats.immediates_lost,
        })
    }

    /// Makes progress until `check` returns `Some`, or `timeout` passes (`None` if it does).
    /// Spins for the configured time, polls on (yielding the CPU between rounds) until the
    /// [poll budget](Interface::set_polling) has passed since the last datagram, then
    /// blocks in the kernel between rounds.
    pub fn wait_for<T>(
        &self,
        timeout: Option<Duration>,
        mut check: impl FnMut(&mut Engine) -> PtlResult<Option<T>>,
    ) -> PtlResult<Option<T>> {
        let start = Instant::now();
        let deadline = timeout.map(|t| start + t);
        // Spinning restarts whenever a datagram arrives: a waiter keeps its core while traffic
        // flows (a put target, a flood) and blocks only after `spin` of silence, or polls on,
        // yielding the CPU between rounds, until the poll budget has passed.
        let (spin, budget) = self.polling();
        let mut spin_until = start + spin;
        let mut poll_until;
        // Relaxed: the waiter count is only a hint for how long a wait may block.
        self.inner.waiters.fetch_add(1, Ordering::Relaxed);
        let _guard = WaiterGuard(&self.inner.waiters);
        let mut first = true;
        loop {
            let (now, next_timer);
            {
                let mut st = self.lock();
                // Every round ends by checking (`progress_until`); only the first needs a look
                // before it (what other threads did between rounds, the next round's end sees).
                if std::mem::take(&mut first) {
                    if let Some(v) = check(&mut st.stack.engine)? {
                        return Ok(Some(v));
                    }
                }
                let mut received = false;
                if let Some(v) =
                    self.progress_until(&mut st, &mut received, true, &mut check, None)?
                {
                    return Ok(Some(v));
                }
                // The round's own clock reading: one clock read per spinning round, not two.
                now = st.round_start;
                if received {
                    spin_until = now + spin;
                }
                poll_until = st.last_received + budget;
                // Only a waiter about to block needs the timers.
                next_timer = if now < poll_until {
                    None
                } else {
                    st.stack.poll_timeout()
                };
            }
            if deadline.is_some_and(|d| now >= d) {
                return Ok(None);
            }
            if now < spin_until {
                // No spin hint between rounds (see `lean_rounds`).
                match self.lean_rounds(&mut check)? {
                    Lean::Done(v) => return Ok(Some(v)),
                    Lean::Received(at) => spin_until = at + spin,
                    Lean::Quiet => {}
                }
                continue;
            }
            if now < poll_until {
                std::thread::yield_now();
                continue;
            }
            // Relaxed: the count is only a hint for how long to sleep.
            let mut block = if self.inner.waiters.load(Ordering::Relaxed) > 1 {
                Duration::from_micros(200)
            } else {
                MAX_BLOCK
            };
            if let Some(t) = next_timer {
                block = block.min(t.saturating_duration_since(now));
            }
            if let Some(d) = deadline {
                block = block.min(d.saturating_duration_since(now));
            }
            self.inner
                .link
                .wait_readable(block)
                .map_err(io_err("wait"))?;
        }
    }

    /// Up to [`LEAN_ROUNDS`] rounds of a spinning wait between two full rounds: each takes
    /// the lock, looks at the socket and, if nothing came, asks `check` (what other threads
    /// did meanwhile). A full round also reads the clock, runs the timers, releases held acks
    /// and transmits; while nothing arrives none of that has anything to do (every call that
    /// gives the engine work transmits it, and timers are hundreds of microseconds away), and
    /// it made an idle round about a third longer than the `recvfrom` alone, which is what
    /// an arrival waits for on average, half a round (`benches/perf/network-turnaround.md`).
    /// A datagram that arrives is handled at once by a full round (under the same lock: the
    /// receive buffer is shared).
    fn lean_rounds<T>(
        &self,
        check: &mut impl FnMut(&mut Engine) -> PtlResult<Option<T>>,
    ) -> PtlResult<Lean<T>> {
        for _ in 0..LEAN_ROUNDS {
            let mut st = self.lock();
            let State { stack, rx, .. } = &mut *st;
            if stack.engine.immediate_backlog_full() {
                // Only a full round knows what to do then (it reads nothing).
                return Ok(Lean::Quiet);
            }
            if let Some(got) = self.inner.link.recv_train(rx).map_err(io_err("progress"))? {
                // The arrival is handled on the last clock reading, the full round's before
                // these lean ones (a microsecond old, unless this thread was preempted): a new
                // reading here would sit between the datagram and the waiter's answer, 20-45
                // ns of the round trip. Acks and round-trip samples take the older time (no
                // time already stamped is later: `State::round_start`). What the round queues
                // or sends (its answer) is stamped with it too, and moved to a fresh reading,
                // taken after the send, when the old one was stale
                // (`State::clock_after_send`, as an operation's send pass does).
                let stale = st.clock();
                let sent = |st: &State| {
                    let s = st.stack.transport.stats();
                    (s.messages_sent, s.data_frames_sent)
                };
                let before = sent(&st);
                let mut received = false;
                let done = self.progress_until(&mut st, &mut received, true, check, Some(got));
                if sent(&st) != before {
                    st.clock_after_send(stale);
                }
                return Ok(match done? {
                    Some(v) => Lean::Done(v),
                    None => Lean::Received(st.round_start),
                });
            }
            if let Some(v) = check(&mut st.stack.engine)? {
                return Ok(Lean::Done(v));
            }
            drop(st);
            // No spin hint (`std::hint::spin_loop`) here: every round makes a system call, a
            // far longer pause than the hint's, which only lengthened the round an arrival
            // waits half of (by 0.03-0.05 us on an AMD EPYC VM, `scripts/ab-turnaround.sh`;
            // `benches/perf/network-turnaround.md`). Shared-memory polls, whose rounds are
            // memory reads alone, keep theirs.
        }
        Ok(Lean::Quiet)
    }

    /// Sets how a wait polls: it spins (re-checking without giving up the CPU) for `spin`,
    /// then keeps polling, yielding the CPU (`sched_yield`) before each round, until `budget`
    /// has passed since the last datagram, and then blocks in the kernel. Yielding lets a
    /// process that shares its core with others (the ranks it waits for among them) run,
    /// while a waiter whose answer comes within the budget pays no kernel wake-up (tens of
    /// microseconds on a virtual machine, and the tail of a ping-pong's average). `budget` is
    /// cut to [`MAX_POLL_BUDGET`], and raised to `spin` if shorter. By default both are
    /// [`InterfaceConfig::spin`](super::InterfaceConfig::spin).
    pub fn set_polling(&self, spin: Duration, budget: Duration) {
        let spin = spin.min(MAX_POLL_BUDGET);
        let budget = budget.clamp(spin, MAX_POLL_BUDGET);
        // Relaxed: tuning values read at the start of each wait; no data depends on them.
        self.inner
            .spin_ns
            .store(duration_ns(spin), Ordering::Relaxed);
        self.inner
            .poll_budget_ns
            .store(duration_ns(budget), Ordering::Relaxed);
    }

    /// The spin and the poll budget in force (see [`Interface::set_polling`]).
    pub fn polling(&self) -> (Duration, Duration) {
        // Relaxed: see `set_polling`.
        let load = |a: &AtomicU64| Duration::from_nanos(a.load(Ordering::Relaxed));
        (load(&self.inner.spin_ns), load(&self.inner.poll_budget_ns))
    }
}

/// A datagram received into the receive buffer: its length, sender and bytes per datagram
/// (less than the length for a train the kernel coalesced).
pub(super) type Received = (usize, PhysId, usize);

/// Lean rounds between two full rounds of a spinning wait ([`Interface::lean_rounds`]): with
/// three, timers and held work wait at most three `recvfrom` calls longer (a few
/// microseconds), and three idle rounds in four are lean.
const LEAN_ROUNDS: u32 = 3;

/// How [`Interface::lean_rounds`] ended.
enum Lean<T> {
    /// `check` held.
    Done(T),
    /// A datagram arrived, and the full round that handled it (at this time) did not end
    /// the wait.
    Received(Instant),
    /// Nothing happened, or only a full round may go on.
    Quiet,
}

struct WaiterGuard<'a>(&'a AtomicUsize);
impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        // Relaxed: see `wait_for`; the count is a hint, not a synchronisation point.
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
