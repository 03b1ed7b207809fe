//! Leaving a job without losing what this rank sent.
//!
//! A put leaves this process only when the transport's window to its target has room, and it
//! is resent until acknowledged; a refused active message is resent after the target's flow
//! control recovers. A rank that returns from `main` right after sending (its arrival at the
//! last barrier, the tail of a flood) may therefore still hold messages that its peers wait
//! for, and its peers may wait for acknowledgements it holds back to ride on later traffic.
//! [`Client::quiesce`] polls until everything this rank sent is acknowledged (an active
//! message by its Portals ACK, which also reports a refusal to resend), sends every
//! acknowledgement it held back, and lingers until its peers have been quiet for
//! [`LINGER_QUIET`], answering what still comes (a retransmission whose ack was lost). The
//! client's state runs it when its last handle goes away, bounded by `RGASNET_PEER_TIMEOUT`.
//!
//! **Leaving.** A quiet spell does not prove that no peer still retransmits to this rank: a
//! peer whose datagrams were lost waits out a backed-off timer (tens of milliseconds to
//! seconds) before it tries again. So the end of a rank also runs the transport's departure
//! handshake before it lingers: it tells every peer it is leaving and waits until each
//! confirms that it has nothing unacknowledged to this rank, is leaving itself, or failed
//! ([`rgasnet_portals::transport::Transport::leave`]). Only the end does: a peer takes the
//! announcement as final.
//!
//! **At the main thread's end.** Handlers that hold a clone of the client (or of a layer
//! above it, as the extended API's do) keep its state alive for good, and a process that ends
//! with `std::process::exit` drops nothing. So a client made on the main thread is also
//! quiesced when that thread's locals are destroyed, which glibc does as the process exits
//! (after `main` returns, or in `exit`), unless it was dropped before. GASNet conduits do the
//! same from an `atexit` hook for a program that returns from `main` without `gasnet_exit`.
//! The ends that stop the whole job on purpose ([`Client::exit`], a fatal error) skip it:
//! the job is over, and the thread that ends it may hold the client's locks.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use crate::client::{Attached, Client, Inner};
use crate::error::AmError;
use crate::recv::in_handler;
use crate::shm::Shm;

/// How long the peers must have sent nothing before a quiesced rank may leave: twice the
/// transport's smallest retransmission timeout, so that a datagram whose ack was lost comes
/// back once while this rank still answers.
pub const LINGER_QUIET: Duration = Duration::from_millis(10);

/// How long the wait for acknowledgements spins before it sleeps between polls: a peer that
/// answers at all answers within it, and one that does not (it computes, or died) is waited
/// for without burning a core.
const SPIN: Duration = Duration::from_millis(10);

/// The nap between polls once waiting no longer spins, and while lingering.
const NAP: Duration = Duration::from_micros(100);

impl Client {
    /// Waits, polling, until everything this rank sent over the network has been
    /// acknowledged by its target, then sends the acknowledgements it holds back and lingers
    /// until the peers are quiet (see the module docs). Handlers keep running meanwhile.
    ///
    /// Dropping the last handle of the client does this too (bounded by
    /// `RGASNET_PEER_TIMEOUT`, with a warning on standard error if it runs out); call it
    /// yourself when handlers hold clones of the client (the state is then never dropped) or
    /// to bound the wait differently. An error says how many active messages were still
    /// unacknowledged when `timeout` ran out.
    pub fn quiesce(&self, timeout: Duration) -> Result<(), AmError> {
        if in_handler() {
            return Err(AmError::InHandler { call: "quiesce" });
        }
        self.inner.quiesce(timeout, false)
    }
}

impl Inner {
    /// [`Client::quiesce`]; `leaving` also runs the departure handshake (the rank's end).
    pub(crate) fn quiesce(&self, timeout: Duration, leaving: bool) -> Result<(), AmError> {
        let Some(att) = self.attached.get() else {
            return Ok(());
        };
        let start = Instant::now();
        let mut handed_over = Ok(());
        if leaving {
            if let Some(shm) = att.shm.as_ref() {
                // A hand-over that runs out of time is reported, after the rest of the end
                // still runs: node peers must see this rank leave, network peers its answer.
                handed_over = self.hand_over_shm(shm, start, timeout);
                // Everything this rank sent to node peers is in their queues now.
                shm.node.mark_left();
            }
        }
        if !self.net_peers {
            // Shared-memory messages are in the target's queue once sent.
            return handed_over;
        }
        let network = self.quiesce_network(att, start, timeout, leaving);
        handed_over.and(network)
    }

    /// The network part of [`Inner::quiesce`], begun at `start`.
    fn quiesce_network(
        &self,
        att: &Attached,
        start: Instant,
        timeout: Duration,
        leaving: bool,
    ) -> Result<(), AmError> {
        const CALL: &str = "quiesce";
        let iface = &self.am_ni;
        // Datagrams received when the held acknowledgements were last flushed (`None`: not
        // flushed since the last wait for delivery), and when that was.
        let mut seen_in = None;
        let mut quiet_since = start;
        loop {
            let ran = self.poll_internal(CALL)?;
            // AMs in send slots, and network Shorts (immediate messages) not yet confirmed.
            let in_flight = crate::send::lock(&att.send).in_flight()
                + self.am_ni.immediates_unconfirmed() as usize;
            let now = Instant::now();
            // Still waiting: for delivery, or (a leaving rank, everything delivered) for the
            // peers to confirm they are done with it. Whatever made the wait (a handler's
            // reply, an ACK held for a request) is flushed and lingered after again.
            let undelivered = in_flight > 0 || !iface.all_acknowledged();
            // `Leaving` promises that this rank sends nothing more, so not while handlers ran
            // this round: more may wait in the queue, and their replies would follow it.
            if leaving && !undelivered && ran == 0 {
                // Also while lingering: a peer that is leaving itself waits for this rank's
                // answer, which `leave` repeats until the peer clears this rank.
                iface.leave();
            } else if leaving && (undelivered || ran > 0) {
                // Peers stop sending to this rank (a peer that keeps doing so would hold up
                // the wait above, each request answered by an acknowledgement, or keep every
                // round running handlers, so that the rank never leaves).
                iface.announce_end();
            }
            if undelivered || (leaving && !iface.left()) {
                seen_in = None;
                let waited = now.duration_since(start);
                if waited >= timeout {
                    return Err(if undelivered {
                        AmError::Unacknowledged {
                            call: CALL,
                            in_flight,
                            waited: timeout,
                        }
                    } else {
                        AmError::Unconfirmed {
                            call: CALL,
                            waited: timeout,
                        }
                    });
                }
                if waited >= SPIN {
                    std::thread::sleep(NAP);
                }
                continue;
            }
            // Answer what came in since the last look.
            let came_in = iface.transport_stats().datagrams_in;
            if seen_in != Some(came_in) {
                seen_in = Some(came_in);
                iface.flush_acknowledgements();
                quiet_since = now;
            }
            if now.duration_since(quiet_since) >= LINGER_QUIET
                || now.duration_since(start) >= timeout
            {
                return Ok(());
            }
            // Lingering costs no core: peers that still talk are answered within a nap.
            std::thread::sleep(NAP);
        }
    }
}

impl Inner {
    /// The shared-memory part of a rank's end: closes this rank's queues, so that node peers'
    /// later sends fail with [`AmError::PeerLeft`] instead of enqueueing what no handler would
    /// run, then runs the handlers of everything enqueued before and gets the replies they
    /// made (and earlier ones waiting for room) into their targets' queues.
    fn hand_over_shm(&self, shm: &Shm, start: Instant, timeout: Duration) -> Result<(), AmError> {
        const CALL: &str = "quiesce";
        shm.rx.lock().close();
        loop {
            self.poll_internal(CALL)?;
            // Another thread polling holds the receiver: it drains for this one.
            let drained = shm.rx.try_lock().is_some_and(|rx| rx.drained());
            let replies = shm.deferred_replies();
            if drained && replies == 0 {
                return Ok(());
            }
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(AmError::Undrained {
                    call: CALL,
                    replies,
                    waited,
                });
            }
            if waited >= SPIN {
                std::thread::sleep(NAP);
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

impl Client {
    /// What the client's end does: [`Client::quiesce`] bounded by `RGASNET_PEER_TIMEOUT`,
    /// saying on standard error what stayed undelivered instead of returning it. For a layer
    /// whose handlers hold the client (the extended API), so that the client's state is never
    /// dropped: call it when that layer's last handle goes away. Does nothing inside a handler
    /// or while the thread panics.
    pub fn quiesce_before_exit(&self) {
        if !in_handler() {
            // Not the departure handshake: the client itself may still be used.
            self.inner.quiesce_before_exit(false);
        }
    }
}

impl Inner {
    fn quiesce_before_exit(&self, leaving: bool) {
        if std::thread::panicking() {
            return;
        }
        let bound = Duration::from_secs(self.config.peer_timeout_secs.max(1));
        if let Err(e) = self.quiesce(bound, leaving) {
            eprintln!(
                "rgasnet: warning: rank {} leaves the job with messages undelivered: {e}",
                self.rank
            );
        }
        if leaving {
            // The rank's end: a PMI server that started it must hear that it ends normally.
            self.boot.finalize();
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.quiesce_before_exit(true);
    }
}

/// Set once this process is ending the whole job on purpose ([`Client::exit`], a fatal
/// error): the main thread's end then quiesces nothing.
static ENDING_JOB: AtomicBool = AtomicBool::new(false);

/// Says that this process is about to end the job (see [`ENDING_JOB`]).
pub(crate) fn ending_job() {
    // Relaxed: read after `exit` by the thread that set it, or by the main thread after
    // `exit` from another thread has begun; a stale `false` there costs a bounded quiesce.
    ENDING_JOB.store(true, Ordering::Relaxed);
}

thread_local! {
    /// The clients made on this (main) thread, quiesced when its locals are destroyed.
    static AT_MAIN_EXIT: MainExit = const {
        MainExit {
            clients: RefCell::new(Vec::new()),
        }
    };
}

/// Quiesces, as the main thread ends, the clients made on it that are still alive then.
struct MainExit {
    clients: RefCell<Vec<Weak<Inner>>>,
}

impl Drop for MainExit {
    fn drop(&mut self) {
        // Relaxed: see `ending_job`. A handler that ended the process holds the receive
        // path's buffers and may not poll.
        if ENDING_JOB.load(Ordering::Relaxed) || in_handler() {
            return;
        }
        for client in self.clients.take() {
            // Dropped clients quiesced when they went; only the ones kept alive are left.
            if let Some(inner) = client.upgrade() {
                inner.quiesce_before_exit(true);
            }
        }
    }
}

/// Has `inner` quiesced when the main thread ends, if this is the main thread. Other threads
/// may end while the client is still in use, and a quiesce there would wait for traffic that
/// never stops.
pub(crate) fn quiesce_at_main_exit(inner: &Arc<Inner>) {
    if std::thread::current().name() != Some("main") {
        return;
    }
    let _ = AT_MAIN_EXIT.try_with(|at_exit| {
        let mut clients = at_exit.clients.borrow_mut();
        clients.retain(|c| c.strong_count() > 0);
        clients.push(Arc::downgrade(inner));
    });
}
