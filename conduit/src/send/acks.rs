//! The acknowledgements of AM puts: each frees its send slot, or, when the target's flow
//! control refused the message, queues a resend after a backoff; and what a sender waiting for
//! them says or does when they do not come (the stall warning, and over a Portals library the
//! end of the job once `RGASNET_PEER_TIMEOUT` passes).

use std::cmp::Reverse;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rgasnet_portals::engine::EqGet;
use rgasnet_portals::{EventKind, NiFail};

use super::{backoff, lock, release_slot, SendState};
use crate::client::Inner;
use crate::error::AmError;
use crate::stall::StallClock;
use crate::stats::Counters;

impl Inner {
    /// Takes every acknowledgement waiting on the send EQ and resends what is due.
    pub(crate) fn process_send_events(&self, call: &'static str) -> Result<(), AmError> {
        let att = self.attached(call)?;
        let mut more = true;
        while more {
            let (got, rest) = self
                .am_ni
                .eq_take_more(att.send_eq)
                .map_err(|source| AmError::Portals { call, source })?;
            more = rest;
            let ev = match got {
                EqGet::Empty => break,
                EqGet::Event(ev) => ev,
                EqGet::Dropped(_) => self.fatal(
                    "acknowledgements were lost (send event queue overflow); raise GASNET_AM_EVENT_QUEUE_LENGTH",
                ),
            };
            if ev.kind != EventKind::Ack {
                continue;
            }
            let mut s = lock(&att.send);
            let Some(fl) = s.inflight.get_mut(&ev.user_ptr) else {
                continue;
            };
            // Acknowledged or refused, a put is off the wire (counted over a library only).
            let len = fl.args.length;
            let off_wire = |s: &mut SendState| {
                if self.over_library() {
                    s.off_wire(len);
                }
            };
            match ev.ni_fail {
                NiFail::Ok => {
                    let fl = s.inflight.remove(&ev.user_ptr);
                    off_wire(&mut s);
                    release_slot(&mut s, ev.user_ptr);
                    drop(s);
                    if let Some(fl) = fl {
                        // Its only operation completed: its memory is not in use.
                        self.give_back(att, fl.own);
                    }
                }
                NiFail::PtDisabled => {
                    fl.attempts += 1;
                    let at = Instant::now() + backoff(fl.attempts);
                    off_wire(&mut s);
                    s.queue_resend(att, at, ev.user_ptr);
                }
                NiFail::Undeliverable => {
                    let dest = fl.dest;
                    drop(s);
                    self.fatal(&format!(
                        "rank {dest} is unreachable: no answer within RGASNET_PEER_TIMEOUT ({} s); it has probably died",
                        self.config.peer_timeout_secs
                    ))
                }
                other => {
                    // The put's own length and portal: an acknowledgement carries no rlength
                    // (a library may leave it 0).
                    let (dest, bytes, pt) = (fl.dest, fl.args.length, fl.args.remote.pt_index);
                    drop(s);
                    self.fatal(&format!(
                        "rank {dest} refused an active message with {other:?} (pt {pt}, {bytes} bytes)"
                    ))
                }
            }
        }
        if self.over_library() {
            self.check_unacknowledged(att);
        }
        // Resends that are due (the clock is read only when one is queued).
        // Relaxed: counted under the send lock; a stale zero defers a resend to the next call.
        if att.resends_queued.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        let now = Instant::now();
        loop {
            let put = {
                let mut s = lock(&att.send);
                let user_ptr = match s.resend.peek() {
                    Some(Reverse((at, user_ptr))) if *at <= now => *user_ptr,
                    _ => break,
                };
                let Some(fl) = s.inflight.get(&user_ptr) else {
                    // Forgotten meanwhile (nothing to send).
                    s.resend.pop();
                    // Relaxed: as in `SendState::queue_resend`.
                    att.resends_queued.fetch_sub(1, Ordering::Relaxed);
                    continue;
                };
                let (args, dest, attempts) = (fl.args, fl.dest, fl.attempts);
                if self.over_library() {
                    // Within the bounds on the wire, as a first start is; it waits else.
                    if !self.wire_room(&s, args.length) {
                        break;
                    }
                    s.on_wire(args.length);
                }
                s.resend.pop();
                // Relaxed: as in `SendState::queue_resend`.
                att.resends_queued.fetch_sub(1, Ordering::Relaxed);
                let started = self.ack_clock();
                if let Some(fl) = s.inflight.get_mut(&user_ptr) {
                    fl.started = started;
                }
                (args, dest, attempts)
            };
            let (args, dest, attempts) = put;
            let sent = self.am_ni.put(&args);
            // `attempts == 0`: its first start, queued past the bounds on the wire
            // (`Inner::launch`); else a resend after a refusal.
            if attempts > 0 {
                Counters::bump(&self.stats.resends);
                // The refusal held the departure handshake with `dest` (a leaving peer waits
                // for this message); the transport holds the new send itself now.
                if let Some(&peer) = self.peers.get(dest as usize) {
                    self.am_ni.refusal_resent(peer);
                }
            }
            if let Err(source) = sent {
                if self.over_library() {
                    lock(&att.send).off_wire(args.length);
                }
                if attempts == 0 {
                    // Never started: nothing uses its memory.
                    self.forget_unstarted(att, args.user_ptr);
                }
                return Err(AmError::Portals { call, source });
            }
            if attempts == 0 {
                Counters::bump(&self.stats.sent);
            }
        }
        Ok(())
    }

    /// When a put starts, for [`Inner::check_unacknowledged`]: now over a Portals library,
    /// `None` (no clock read) on the native engine.
    #[inline]
    pub(super) fn ack_clock(&self) -> Option<Instant> {
        self.over_library().then(Instant::now)
    }

    /// Over a Portals library, ends the job when an AM put has waited `RGASNET_PEER_TIMEOUT`
    /// for its acknowledgement. The library acknowledges on its own progress, whether or not
    /// the target polls (a target out of receive space refuses, and the refusal comes back at
    /// once), so a put that long unacknowledged was lost, with its acknowledgement, by the
    /// library (Sandia's reference implementation does so under load), or its target died or
    /// stopped: waiting on would hang the job silently. A put refused and waiting for its
    /// resend is timed from the resend.
    fn check_unacknowledged(&self, att: &crate::client::Attached) {
        let timeout = Duration::from_secs(self.config.peer_timeout_secs.max(1));
        let lost = {
            let s = lock(&att.send);
            if s.inflight.is_empty() {
                return;
            }
            let now = Instant::now();
            s.inflight.values().find_map(|fl| {
                let waited = now.duration_since(fl.started?);
                (waited >= timeout).then_some((fl.dest, fl.args.length, fl.args.remote.pt_index))
            })
        };
        if let Some((dest, bytes, pt)) = lost {
            self.fatal(&format!(
                "rank {dest} has not acknowledged an active message put ({bytes} bytes to portal {pt}) within RGASNET_PEER_TIMEOUT ({} s): the Portals library lost it or its acknowledgement, or rank {dest} died or stopped; raise RGASNET_PEER_TIMEOUT if rank {dest} is only slow",
                self.config.peer_timeout_secs.max(1)
            ))
        }
    }

    /// A new clock for a send that may wait for room (see [`Inner::waited`]).
    pub(crate) fn stall_clock(&self) -> StallClock {
        StallClock::new(self.config.stall_warning_secs)
    }

    /// Called before each wait for room to send to `dest`: once the wait has lasted
    /// `RGASNET_STALL_WARNING` seconds, says so on standard error, naming the target and what
    /// is outstanding, so that a job whose target never polls does not hang silently. The
    /// send keeps waiting.
    pub(crate) fn waited(&self, clock: &mut StallClock, call: &'static str, dest: u32) {
        if let Some(waited) = clock.check() {
            self.warn_stall(call, dest, waited);
        }
    }

    /// The warning of [`Inner::waited`], with what this rank has outstanding.
    #[cold]
    fn warn_stall(&self, call: &'static str, dest: u32, waited: Duration) {
        let detail = match self.attached.get() {
            Some(att) if self.shm_route(att, dest).is_some() => {
                format!("rank {dest}'s shared-memory queue stays full")
            }
            Some(att) => {
                let s = lock(&att.send);
                let to_dest = s.inflight.values().filter(|f| f.dest == dest).count();
                format!(
                    "{} active messages unacknowledged, {to_dest} of them to rank {dest}; {} refused by flow control or queued for room in flight, waiting to be sent",
                    s.inflight.len(),
                    s.resend.len()
                )
            }
            None => "not attached".to_string(),
        };
        eprintln!(
            "rgasnet: warning: rank {}: {call} to rank {dest} has waited {:.0} s for room to send ({detail}). Rank {dest} must poll (poll() or any blocking rgasnet call) for it to proceed; still waiting. RGASNET_STALL_WARNING={} sets when this is said (0: never).",
            self.rank,
            waited.as_secs_f64(),
            self.config.stall_warning_secs
        );
    }
}
