//! The driver: a [`Stack`] behind a mutex, a datagram [`Link`] (a UDP socket in production) and
//! the clock. This is the API applications call. Progress happens inside the caller's calls:
//! every operation flushes what it produced onto the wire, and every wait receives, runs
//! timers and transmits until its condition holds — spinning while datagrams arrive, then
//! blocking in the kernel so that an idle process does not burn a core. Optionally a
//! background thread ([`InterfaceConfig::background_progress`]) makes progress for a process
//! that has stopped calling in, so that its peers still get their acknowledgements.
//!
//! Several threads may use one interface at once: each call takes the lock only for the
//! engine work it needs, and waiting threads take turns making progress.

use std::io;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::engine::{Engine, EqGet, EqHandle, PutArgs};
use crate::error::{PtlError, PtlResult};
pub use crate::link::Link;
use crate::message::{Staged, Tail};
use crate::stack::Stack;
use crate::transport::{Transport, TransportConfig};
use crate::types::{NiKind, NiLimits, PhysId, Uid};

mod ni;
mod progress;
mod train;
pub use ni::Ni;

/// How an interface is built.
#[derive(Debug, Clone)]
pub struct InterfaceConfig {
    /// Transport settings (job key, datagram size, retransmission, peer timeout).
    pub transport: TransportConfig,
    /// The user id the processes of this interface act as.
    pub uid: Uid,
    /// How long a wait spins (receiving without blocking) before it blocks in the kernel, or
    /// before it starts yielding the CPU between rounds when a longer
    /// [poll budget](Interface::set_polling) is set.
    pub spin: Duration,
    /// Background progress: when the application has not called into the interface for this
    /// long, a helper thread makes one round of progress for it (timers, held acknowledgements,
    /// receiving, transmitting), as a NIC would. Without it a process that computes or blocks
    /// elsewhere would leave its peers' messages unacknowledged until they declare it dead.
    /// `None` disables it (drivers that call in continuously, tests of the bare mechanism).
    pub background_progress: Option<Duration>,
}

/// The default [`InterfaceConfig::background_progress`] period. Background progress is for
/// liveness (acknowledgements a busy process owes its peers), not latency: a longer period
/// costs a peer a little waiting only while this process is away, and each wake-up takes a
/// core from a spinning rank on a small machine.
pub const DEFAULT_BACKGROUND_PROGRESS: Duration = Duration::from_millis(10);

/// Largest datagram the driver receives.
const RECV_BUF: usize = 65_536;
/// Datagrams handled per receive batch before the stack is pumped.
const RECV_BATCH: usize = 64;
/// Most immediate messages one [`Interface::progress_holding`] round hands out.
pub const IMMEDIATE_TAKE_MAX: usize = 64;
/// Longest a blocked wait sleeps before it looks again (other threads may have changed state
/// without a datagram arriving).
const MAX_BLOCK: Duration = Duration::from_millis(5);

/// Longest spin or poll budget [`Interface::set_polling`] takes (a longer one is cut to this).
pub const MAX_POLL_BUDGET: Duration = Duration::from_secs(10);

/// How much older than its pass the clock reading a send pass runs on may be before the
/// pass's times are corrected (see [`State::clock`]). Within it, a frame's retransmission
/// timer and its peer's silence clock start up to this much early (the retransmission
/// timeout is at least 5 ms, the peer timeout seconds), and a round-trip sample grows by as
/// much (the timeout stays at its floor).
const SEND_CLOCK_SLACK: Duration = Duration::from_micros(200);

static NEXT_INTERFACE_ID: AtomicU32 = AtomicU32::new(1);

/// What one [`Interface::progress_holding`] round saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HoldingRound {
    /// Whether any datagram arrived.
    pub received: bool,
    /// The engine's count of events posted so far, on every queue
    /// (`EngineStats::events_posted`): a consumer that emptied its queues
    /// when the count was `n` has nothing new to take while it is still `n`.
    pub events_posted: u64,
    /// Whether something waits to be transmitted ([`Interface::flush`] has work).
    pub pending_transmit: bool,
    /// The engine's count of immediate messages lost with failed peers so far
    /// (`EngineStats::immediates_lost`; see [`crate::engine::Engine::take_lost_immediates`]).
    pub immediates_lost: u64,
}

struct State {
    stack: Stack,
    rx: Vec<u8>,
    tx: Vec<u8>,
    /// Datagrams of the current transmit pass gathered for one system call, on a link that
    /// sends trains ([`Link::sends_trains`]).
    train: train::Train,
    /// Calls into the interface so far (under the lock, so a plain counter): the background
    /// thread acts only when it has not moved for a whole period.
    calls: u64,
    /// The last clock reading: that of the last progress round (which a spinning waiter
    /// reuses instead of reading the clock again: its deadlines are microseconds to seconds
    /// away), or the one after the last send pass (see [`State::clock`]). Every reading the
    /// interface takes is kept here ([`State::read_clock`]), so no time the transport was
    /// given is later than it: a pass that runs on it never sees time go backwards.
    round_start: Instant,
    /// When the last datagram arrived (any call's): the poll budget of a wait
    /// ([`Interface::set_polling`]) runs from here, so that a caller that waits in slices
    /// still blocks once the budget has passed in silence.
    last_received: Instant,
}

struct Inner {
    local: PhysId,
    link: Box<dyn Link>,
    state: Mutex<State>,
    /// How long a wait spins, in nanoseconds ([`Interface::set_polling`]).
    spin_ns: AtomicU64,
    /// How long a wait polls after the last datagram before it blocks in the kernel, in
    /// nanoseconds (at least the spin): past the spin each round yields the CPU first
    /// ([`Interface::set_polling`]).
    poll_budget_ns: AtomicU64,
    waiters: AtomicUsize,
    /// The transport's count of peers that said their program ended or that they are
    /// leaving, mirrored after each datagram so that [`Interface::departures`] needs no lock.
    departures: AtomicU64,
}

/// One network interface: the native engine on a datagram link. Cloning is cheap and shares
/// the interface.
#[derive(Clone)]
pub struct Interface {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Interface {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interface")
            .field("local", &self.inner.local)
            .finish()
    }
}

fn io_err(call: &'static str) -> impl FnOnce(io::Error) -> PtlError {
    move |source| PtlError::Io { call, source }
}

impl State {
    /// Reads the clock, and keeps the reading as the last one ([`State::clock`]).
    fn read_clock(&mut self) -> Instant {
        let now = Instant::now();
        self.round_start = now;
        now
    }

    /// The clock reading an operation's send pass (pump and transmit) runs on: the last one
    /// taken, not a new one. Nothing the pass puts on the wire depends on the time (only the
    /// transport's timers and round-trip samples do), so the reading that would cost 20–45
    /// ns before the `sendto` is taken after it instead ([`State::clock_after_send`]), while
    /// the datagram is on its way; in a ping-pong that is a round trip's largest single
    /// saving on the send path (#28: 1.254 → 1.240 × raw UDP, benches/perf/libportals.md).
    fn clock(&self) -> Instant {
        self.round_start
    }

    /// Ends a send pass that ran on `stale` ([`State::clock`]): reads the clock for the next
    /// one, and when `stale` was more than [`SEND_CLOCK_SLACK`] old (the program computed
    /// between its calls), moves the times the pass stamped with it to the new reading
    /// ([`crate::transport::Transport::restamp`]), so that no timer starts early by the
    /// time the program spent outside the library.
    fn clock_after_send(&mut self, stale: Instant) {
        let fresh = self.read_clock();
        if fresh.saturating_duration_since(stale) > SEND_CLOCK_SLACK {
            self.stack.transport.restamp(stale, fresh);
        }
    }
}

impl Interface {
    /// An interface on `link`.
    pub fn new(cfg: InterfaceConfig, link: Box<dyn Link>) -> PtlResult<Interface> {
        let local = link.local_id();
        // Relaxed: the id only has to be unique, which the atomic increment guarantees.
        let id = NEXT_INTERFACE_ID.fetch_add(1, Ordering::Relaxed);
        let now = Instant::now();
        let transport = Transport::new(
            cfg.transport,
            local,
            crate::transport::random_incarnation(),
            now,
        )
        .map_err(|e| PtlError::arg("Interface::new", e.to_string()))?;
        let engine = Engine::new(local, cfg.uid, id);
        let iface = Interface {
            inner: Arc::new(Inner {
                local,
                link,
                state: Mutex::new(State {
                    stack: Stack::new(engine, transport),
                    rx: vec![0u8; RECV_BUF],
                    tx: Vec::with_capacity(RECV_BUF),
                    train: train::Train::new(),
                    calls: 0,
                    round_start: now,
                    last_received: now,
                }),
                spin_ns: AtomicU64::new(duration_ns(cfg.spin)),
                poll_budget_ns: AtomicU64::new(duration_ns(cfg.spin)),
                waiters: AtomicUsize::new(0),
                departures: AtomicU64::new(0),
            }),
        };
        if let Some(period) = cfg.background_progress {
            iface.start_background_progress(period)?;
        }
        Ok(iface)
    }

    /// Starts background progress (see [`InterfaceConfig::background_progress`]) for an
    /// interface built without it, e.g. once its owner knows it has remote peers at all. The
    /// thread holds only a weak reference, so it ends after the interface is dropped.
    pub fn start_background_progress(&self, period: Duration) -> PtlResult<()> {
        let weak = Arc::downgrade(&self.inner);
        std::thread::Builder::new()
            .name(format!("rgasnet-progress-{}", self.inner.local))
            .spawn(move || {
                let mut seen = u64::MAX;
                loop {
                    std::thread::sleep(period);
                    let Some(inner) = weak.upgrade() else { return };
                    let iface = Interface { inner };
                    seen = iface.background_round(seen);
                }
            })
            .map(|_| ())
            .map_err(|e| PtlError::Io {
                call: "Interface::new (background progress thread)",
                source: e,
            })
    }

    /// One tick of the background thread: progress only if nobody called in since the last
    /// tick (`seen` is the call count then) and the lock is free; returns the count to
    /// compare with next time.
    fn background_round(&self, seen: u64) -> u64 {
        let mut st = match self.inner.state.try_lock() {
            Ok(st) => st,
            Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) => return seen,
        };
        // A waiter blocked in the kernel makes its own progress (it wakes on datagrams and on
        // the next timer); taking its datagrams here would leave it asleep until its timeout.
        // Relaxed: a hint, re-read every tick.
        if st.calls != seen || self.inner.waiters.load(Ordering::Relaxed) > 0 {
            return st.calls;
        }
        let mut received = false;
        // A failing round (socket error) is retried next tick; the application sees the
        // error itself on its next call.
        let _ = self.progress_until(&mut st, &mut received, true, &mut |_| Ok(None::<()>), None);
        st.calls
    }

    /// The physical id (address) of this interface.
    pub fn phys_id(&self) -> PhysId {
        self.inner.local
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while the lock was held leaves the engine in an unknown state; the data it
        // guards is still memory-safe, so continue rather than poison every later call.
        let mut st = self.inner.state.lock().unwrap_or_else(|p| p.into_inner());
        st.calls = st.calls.wrapping_add(1);
        st
    }

    /// Runs `f` on the engine, then puts whatever it produced on the wire.
    fn with_engine<T>(&self, f: impl FnOnce(&mut Engine) -> PtlResult<T>) -> PtlResult<T> {
        self.with_engine_as(false, f)
    }

    /// [`Interface::with_engine`]; with `answering`, for a call that put an answer
    /// ([`Ni::put_answer`](crate::interface::ni::Ni::put_answer)): the answer leaves without a
    /// lone lazy ACK for its target, which follows in a datagram of its own
    /// ([`Stack::pump_answer`]).
    fn with_engine_as<T>(
        &self,
        answering: bool,
        f: impl FnOnce(&mut Engine) -> PtlResult<T>,
    ) -> PtlResult<T> {
        let mut st = self.lock();
        let r = f(&mut st.stack.engine);
        let now = st.clock();
        if !answering {
            st.stack.pump(now);
            self.transmit(&mut st, now);
            st.clock_after_send(now);
            return r;
        }
        let answered = st.stack.pump_answer(now);
        self.transmit(&mut st, now);
        if answered.is_some_and(|peer| st.stack.release_after_send(now, peer)) {
            self.transmit(&mut st, now);
        }
        st.clock_after_send(now);
        r
    }

    /// Sends every datagram the transport has ready; a large fragment goes from its message
    /// to the socket without a copy into `tx` (a gathering send).
    fn transmit(&self, st: &mut State, now: Instant) {
        self.transmit_staged(st, now, None);
    }

    /// [`Interface::transmit`], taking a fragment of the `staged` span from its pieces.
    fn transmit_staged(&self, st: &mut State, now: Instant, staged: Option<&Staged<'_>>) {
        let State {
            stack, tx, train, ..
        } = st;
        if !stack.transport.wants_transmit() {
            // The common case of an idle poll: spare the empty pass.
            return;
        }
        let link = &*self.inner.link;
        let trains = link.sends_trains();
        while let Some((dest, tail)) = stack.transport.poll_transmit_gather(now, tx) {
            let tail = match (tail, staged) {
                (Tail::Span { span, from, len }, Some(s)) => {
                    s.stand_in(span, from, len).unwrap_or(tail)
                }
                _ => tail,
            };
            if trains {
                train.push(link, tx, tail, dest);
            } else {
                self.send_datagram(tx, tail, dest);
            }
        }
        train.flush(link);
        // The pass ends by applying the acks it held back (see the transport's `settle`),
        // which may confirm deliveries: their operations complete now, while this pass's
        // datagrams are on their way, instead of in the round that receives the answer.
        if stack.transport.has_events() {
            stack.pump(now);
        }
    }

    /// [`Ni::put_staged`].
    fn put_staged(&self, args: &PutArgs, parts: [&[u8]; 2]) -> PtlResult<()> {
        const CALL: &str = "put_staged";
        if parts[0].len() + parts[1].len() != args.length as usize {
            return Err(PtlError::arg(
                CALL,
                format!(
                    "{} + {} bytes staged for a put of {}",
                    parts[0].len(),
                    parts[1].len(),
                    args.length
                ),
            ));
        }
        let mut st = self.lock();
        let (region, offset, in_place) = st.stack.engine.put_source(args)?;
        let staged = Staged {
            region: &region,
            offset,
            parts,
        };
        let written = |s: &Staged<'_>| s.write().map_err(|e| PtlError::arg(CALL, e.to_string()));
        if !in_place {
            // The engine copies the MD's bytes into the message: they must be there first.
            written(&staged)?;
        }
        st.stack.engine.put(args)?;
        let now = st.clock();
        // The pieces can stand in only for a message that leaves whole, now, in one gathered
        // datagram to another interface: any other fragment, or a message to this interface
        // (joined from the region while pumping), reads the region, so it is written first.
        let local = st.stack.local();
        let whole = in_place
            && st.stack.engine.last_outgoing().is_some_and(|(peer, m)| {
                peer != local
                    && st.stack.transport.gathers_whole(m.len())
                    && m.body().is_some_and(|span| {
                        span.region().same_as(&region)
                            && span.offset() == offset
                            && span.len() == staged.len()
                    })
            });
        if in_place && !whole {
            written(&staged)?;
        }
        st.stack.pump(now);
        self.transmit_staged(&mut st, now, whole.then_some(&staged));
        st.clock_after_send(now);
        if whole {
            // After the datagram left (or was queued behind a closed window): a
            // retransmission, or a first transmission that had to wait, reads the region.
            written(&staged)?;
        }
        Ok(())
    }

    fn send_datagram(&self, head: &[u8], tail: Tail<'_>, dest: PhysId) {
        if let Err(e) = self.inner.link.send_gather(head, tail, dest) {
            // Socket buffer full for too long, unreachable port, ...: the transport's
            // retransmission and peer timeout decide what this means.
            tracing::debug!(%dest, error = %e, "send_to failed");
        }
    }

    /// Transmits everything queued (after [`Interface::progress_holding`]).
    pub fn flush(&self) {
        let mut st = self.lock();
        if !st.stack.engine.has_outgoing() && !st.stack.transport.has_ready() {
            // Nothing queued: spare an idle poll the clock read and the empty passes.
            return;
        }
        let now = st.read_clock();
        st.stack.pump(now);
        self.transmit(&mut st, now);
    }

    /// Sends every acknowledgement held back for later (lazy ACKs, the transport's delayed
    /// acks) now. For an interface about to stop: its peers need those to finish.
    pub fn flush_acknowledgements(&self) {
        let mut st = self.lock();
        let now = st.read_clock();
        st.stack.release_held(now);
        st.stack.pump(now);
        self.transmit(&mut st, now);
    }

    /// Whether everything this interface sent has been delivered ([`Stack::all_acknowledged`]).
    pub fn all_acknowledged(&self) -> bool {
        self.lock().stack.all_acknowledged()
    }

    /// Tells the peers that this interface is leaving and sends what that makes due (see
    /// [`Stack::leave`]): call it repeatedly, once [`Interface::all_acknowledged`], until
    /// [`Interface::left`].
    pub fn leave(&self) {
        let mut st = self.lock();
        let now = st.read_clock();
        st.stack.leave(now);
        self.transmit(&mut st, now);
    }

    /// Tells every peer that the program ended ([`Transport::announce_end`]); call it
    /// repeatedly while waiting to [`Interface::leave`].
    pub fn announce_end(&self) {
        let mut st = self.lock();
        let now = st.read_clock();
        st.stack.announce_end(now);
        self.transmit(&mut st, now);
    }

    /// An operation that `peer` refused (`NI_PT_DISABLED`) was sent again, or given up:
    /// releases the hold its refusal put on the departure handshake ([`Stack::refusal_resent`]).
    /// Call it once per refusal, after the new send.
    pub fn refusal_resent(&self, peer: PhysId) {
        self.lock().stack.refusal_resent(peer);
    }

    /// Whether `peer` said it is leaving, everything it sent having arrived
    /// ([`Transport::peer_left`]).
    pub fn peer_left(&self, peer: PhysId) -> bool {
        self.lock().stack.transport.peer_left(peer)
    }

    /// Whether `peer` said its program ended ([`Transport::peer_ended`]); what it sent may
    /// still be on its way.
    pub fn peer_ended(&self, peer: PhysId) -> bool {
        self.lock().stack.transport.peer_ended(peer)
    }

    /// How many peers have said their program ended or that they are leaving, without taking
    /// the interface's lock: a gate that lets a hot path skip [`Interface::peer_ended`] and
    /// [`Interface::peer_left`] (and their lock) while the count is zero. It is updated as
    /// the datagram that says so is handled, so it may lag by a datagram being handled on
    /// another thread.
    pub fn departures(&self) -> u64 {
        // Relaxed: a hint; `peer_left` under the lock is the truth.
        self.inner.departures.load(Ordering::Relaxed)
    }

    /// Whether every peer said it is done with this interface ([`Stack::left`]).
    pub fn left(&self) -> bool {
        self.lock().stack.left()
    }

    /// Opens the NI of `kind` on this interface.
    pub fn ni_init(&self, kind: NiKind, desired: Option<NiLimits>) -> PtlResult<Ni> {
        let (handle, limits) = self.with_engine(|e| e.ni_init(kind, desired))?;
        Ok(Ni {
            iface: self.clone(),
            handle,
            kind,
            limits,
        })
    }

    /// Waits for an event on any of `eqs` (`PtlEQPoll`): the event and the index of its EQ, or
    /// `EqEmpty` after `timeout`.
    pub fn eq_poll(
        &self,
        eqs: &[EqHandle],
        timeout: Option<Duration>,
    ) -> PtlResult<(EqGet, usize)> {
        let r = self.wait_for(timeout, |e| {
            for (i, eq) in eqs.iter().enumerate() {
                match e.eq_get(*eq)? {
                    EqGet::Empty => {}
                    got => return Ok(Some((got, i))),
                }
            }
            Ok(None)
        })?;
        r.ok_or(PtlError::EqEmpty)
    }

    /// Counters of the transport (datagrams, retransmissions, drops by reason).
    pub fn transport_stats(&self) -> crate::transport::TransportStats {
        self.lock().stack.transport.stats().clone()
    }

    /// Counters of the engine (malformed messages, EQ overflows, ...).
    pub fn engine_stats(&self) -> crate::engine::EngineStats {
        *self.lock().stack.engine.stats()
    }
}

// Applications share one interface between threads: keep both handles Send + Sync (a field
// that is not would break this at compile time, not in a user's program).
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Interface>();
    assert_send_sync::<Ni>();
};

/// `d` in nanoseconds, saturating (a budget of centuries is as good as forever).
fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
