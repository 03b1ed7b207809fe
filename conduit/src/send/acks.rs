//! The acknowledgements of AM puts: each frees its send slot, or, when the target's flow
//! control refused the message, queues a resend after a backoff; and what a sender waiting for
//! them says or does when they do not come (the stall warning, and over a Portals library the
//! end of the job once `RGASNET_PEER_TIMEOUT` passes).

use std::cmp::Reverse;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rgasnet_portals::engine::EqGet;
use rgasnet_portals::{EventKind, NiFail};

use super::{backoff, lock, release_slot};
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
            if self.over_library() && matches!(ev.ni_fail, NiFail::Ok | NiFail::PtDisabled) {
                // Off the wire: acknowledged, or refused (and queued for its resend).
                if let Some(len) = s.inflight.get(&ev.user_ptr).map(|fl| fl.args.length) {
                    s.off_wire(len);
                }
            }
            let Some(fl) = s.inflight.get_mut(&ev.user_ptr) else {
                continue;
            };
            match ev.ni_fail {
                NiFail::Ok => {
                    let fl = s.inflight.remove(&ev.user_ptr);
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
                    s.resend.push(Reverse((at, ev.user_ptr)));
                    // Relaxed: written under the send lock; a poll that reads a stale zero
                    // skips the send path for one round only (see `poll_internal`).
                    att.resends_queued.fetch_add(1, Ordering::Relaxed);
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
            self.start_pending(call, att)?;
            self.check_unacknowledged(att);
        }
        // Resends that are due (the clock is read only when one is queued).
        // Relaxed: counted under the send lock; a stale zero defers a resend to the next call.
        if att.resends_queued.load(Ordering::Relaxed) == 0 {
            return Ok(());
        }
        let now = Instant::now();
        loop {
            let args = {
                let mut s = lock(&att.send);
                let user_ptr = match s.resend.peek() {
                    Some(Reverse((at, user_ptr))) if *at <= now => *user_ptr,
                    _ => break,
                };
                if self.over_library() {
                    // Within the bounds on the wire, as a first start is; it waits else.
                    let len = s.inflight.get(&user_ptr).map_or(0, |fl| fl.args.length);
                    if !self.wire_room(&s, len) {
                        break;
                    }
                    s.on_wire(len);
                }
                s.resend.pop();
                // Relaxed: as for the increment above.
                att.resends_queued.fetch_sub(1, Ordering::Relaxed);
                let started = self.ack_clock();
                s.inflight.get_mut(&user_ptr).map(|fl| {
                    fl.started = started;
                    (fl.args, fl.dest)
                })
            };
            let Some((args, dest)) = args else {
                continue;
            };
            Counters::bump(&self.stats.resends);
            let sent = self.am_ni.put(&args);
            // The refusal held the departure handshake with `dest` (a leaving peer waits for
            // this message); the transport holds the new send itself now.
            if let Some(&peer) = self.peers.get(dest as usize) {
                self.am_ni.refusal_resent(peer);
            }
            sent.map_err(|source| AmError::Portals { call, source })?;
        }
        Ok(())
    }

    /// Over a Portals library, starts the puts queued past the bounds on the wire
    /// ([`Inner::launch`]), oldest first, as far as the bounds allow now.
    fn start_pending(
        &self,
        call: &'static str,
        att: &crate::client::Attached,
    ) -> Result<(), AmError> {
        loop {
            let args = {
                let mut s = lock(&att.send);
                let Some(&user_ptr) = s.pending.front() else {
                    return Ok(());
                };
                let Some(len) = s.inflight.get(&user_ptr).map(|fl| fl.args.length) else {
                    s.pending.pop_front();
                    continue;
                };
                if !self.wire_room(&s, len) {
                    return Ok(());
                }
                s.pending.pop_front();
                s.on_wire(len);
                let started = self.ack_clock();
                s.inflight.get_mut(&user_ptr).map(|fl| {
                    fl.started = started;
                    fl.args
                })
            };
            let Some(args) = args else { continue };
            if let Err(source) = self.am_ni.put(&args) {
                // Refused before it started, as in `start_put`: forgotten, its memory back.
                let mut s = lock(&att.send);
                s.off_wire(args.length);
                let fl = s.inflight.remove(&args.user_ptr);
                release_slot(&mut s, args.user_ptr);
                drop(s);
                if let Some(fl) = fl {
                    self.give_back(att, fl.own);
                }
                return Err(AmError::Portals { call, source });
            }
            Counters::bump(&self.stats.sent);
        }
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
                    "{} active messages unacknowledged, {to_dest} of them to rank {dest}; {} refused by flow control and waiting to be resent; {} queued for room in flight",
                    s.inflight.len(),
                    s.resend.len(),
                    s.pending.len()
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
