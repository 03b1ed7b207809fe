//! The handle of an explicit-handle (`nb`) operation or of an access region ([`NbHandle`]):
//! what it waits for, and how a completed get's bytes reach the caller's buffer.

use std::sync::atomic::AtomicU64;

use rgasnet_portals::{EngineView, NiFail};

use crate::error::ExtError;
use crate::explicit::not_in_handler;
use crate::ext::Shared;
use crate::nbi::Group;
use crate::ops::{Freed, Landing};

/// Where a completed get's bytes go.
pub(crate) enum Dest<'a> {
    /// Nothing to copy (a put, or a get that landed in its destination directly).
    None,
    /// The caller's buffer, borrowed until completion.
    Buf(&'a mut [u8]),
}

pub(crate) enum Kind<'a> {
    /// Completed (or already reported).
    Done,
    /// One explicit operation.
    Op {
        cell: u32,
        rank: u32,
        call: &'static str,
        dest: Dest<'a>,
        /// The slab's completion count before the operation was issued, moved on by each look
        /// that found it incomplete ([`crate::ops::Ops::is_done_since`]): until the count
        /// moves past it, the operation has not completed, and a poll need not take the
        /// slab's lock to know it.
        seen: AtomicU64,
    },
    /// An access region's operations.
    Group(Box<Group<'a>>),
}

/// The handle of an explicit-handle (`nb`) operation or of an access region. It keeps a get's
/// destination buffer borrowed until completion. Complete it with [`NbHandle::wait`],
/// [`NbHandle::try_wait`] or [`crate::Extended::wait_all`] / [`crate::Extended::wait_some`]. Dropping an
/// incomplete handle abandons it: the operation still completes, its result is discarded
/// (an access region's handle instead waits for its operations when dropped).
#[must_use = "an nb operation is complete only once its handle is waited for"]
pub struct NbHandle<'a> {
    pub(crate) sh: &'a Shared,
    pub(crate) kind: Kind<'a>,
}

impl std::fmt::Debug for NbHandle<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let k = match &self.kind {
            Kind::Done => "done",
            Kind::Op { .. } => "operation",
            Kind::Group(_) => "access region",
        };
        f.debug_struct("NbHandle").field("kind", &k).finish()
    }
}

impl<'a> NbHandle<'a> {
    pub(crate) fn done(sh: &'a Shared) -> Self {
        NbHandle {
            sh,
            kind: Kind::Done,
        }
    }

    pub(crate) fn op(sh: &'a Shared, cell: u32, rank: u32, call: &'static str) -> Self {
        NbHandle {
            sh,
            kind: Kind::Op {
                cell,
                rank,
                call,
                dest: Dest::None,
                seen: AtomicU64::new(sh.core.ops.completions()),
            },
        }
    }

    pub(crate) fn group(sh: &'a Shared, g: Group<'a>) -> Self {
        NbHandle {
            sh,
            kind: Kind::Group(Box::new(g)),
        }
    }

    fn call(&self) -> &'static str {
        match &self.kind {
            Kind::Op { call, .. } => call,
            _ => "wait",
        }
    }

    /// Whether the operations are complete (under the engine lock). Its only side effect: an
    /// operation's look that finds it incomplete notes the slab's completion count, so that
    /// the next look needs no lock until the count moves.
    pub(crate) fn ready(&self, e: &mut dyn EngineView) -> bool {
        match &self.kind {
            Kind::Done => true,
            Kind::Op { cell, seen, .. } => self.sh.core.ops.is_done_since(*cell, seen),
            Kind::Group(g) => g.ready(e),
        }
    }

    /// If complete, finishes (copies a get's data out, frees resources) and returns the
    /// result; the handle is then done.
    pub(crate) fn finish(&mut self) -> Option<Result<(), ExtError>> {
        match &mut self.kind {
            Kind::Done => Some(Ok(())),
            Kind::Op {
                cell,
                rank,
                call,
                dest,
                seen,
            } => {
                let (rank, call) = (*rank, *call);
                // A small get's bytes are copied out in the lock that frees its slot, so that
                // the next get cannot take the slot first.
                let f = self
                    .sh
                    .core
                    .ops
                    .finish_since(*cell, seen, |fail, landing| {
                        if let (Landing::Small(_), Dest::Buf(buf)) = (landing, &mut *dest) {
                            if Shared::fail_result(call, rank, fail).is_ok() {
                                copy_out(self.sh, landing, buf);
                            }
                        }
                    })?;
                let dest = std::mem::replace(dest, Dest::None);
                self.kind = Kind::Done;
                let r = Shared::fail_result(call, rank, f.fail);
                if r.is_ok() {
                    if let (Landing::Dynamic { .. }, Dest::Buf(buf)) = (&f.landing, dest) {
                        // Outside every lock: a large get's copy would hold up the other
                        // threads' progress.
                        copy_out(self.sh, &f.landing, buf);
                    }
                }
                self.sh.release_landing(f.landing);
                Some(r)
            }
            Kind::Group(g) => {
                // An access region finishes through its syncs (done in `wait`/`try_wait`).
                let _ = g;
                None
            }
        }
    }

    /// Polls once; returns `Ok(true)` when the operation is complete (and a get's buffer
    /// filled), `Ok(false)` if not yet, or the operation's error (reported once).
    pub fn try_wait(&mut self) -> Result<bool, ExtError> {
        if let Kind::Group(g) = &mut self.kind {
            let done = g.try_sync_all()?;
            if done {
                self.kind = Kind::Done;
            }
            return Ok(done);
        }
        let call = self.call();
        if let Some(r) = self.finish() {
            return r.map(|()| true);
        }
        let me = &*self;
        self.sh.wait_until(
            call,
            Some(std::time::Duration::ZERO),
            |e, _| Ok(me.ready(e)),
        )?;
        match self.finish() {
            Some(r) => r.map(|()| true),
            None => Ok(false),
        }
    }

    /// Waits (making progress) until the operation is complete; returns its error if it failed.
    pub fn wait(mut self) -> Result<(), ExtError> {
        // Every wait is refused inside an AM handler, whatever the path (a handle that is
        // already complete included), so a program behaves the same wherever its ranks run.
        // Dropping `self` abandons the operation, which still completes.
        not_in_handler(self.call())?;
        if let Kind::Group(g) = &mut self.kind {
            let r = g.sync_all();
            self.kind = Kind::Done;
            return r;
        }
        let call = self.call();
        loop {
            if let Some(r) = self.finish() {
                return r;
            }
            let me = &self;
            match (
                self.sh.wait_until(call, None, |e, _| Ok(me.ready(e))),
                &self.kind,
            ) {
                (Ok(()), _) => {}
                // One operation, one rank: named as the native engine names a dead target.
                (Err(ExtError::NoCompletion { .. }), Kind::Op { rank, .. }) => {
                    return Err(ExtError::Remote {
                        call,
                        rank: *rank,
                        fail: NiFail::Undeliverable,
                    })
                }
                (Err(e), _) => return Err(e),
            }
        }
    }
}

impl Drop for NbHandle<'_> {
    fn drop(&mut self) {
        if let Kind::Op { cell, .. } = self.kind {
            if let Freed::Landing(l) = self.sh.core.ops.orphan(cell) {
                self.sh.release_landing(l);
            }
        }
        // A Group drops its own way (it syncs).
    }
}

fn copy_out(sh: &Shared, landing: &Landing, buf: &mut [u8]) {
    // The ranges were sized for `buf` at issue, so these reads are in bounds.
    let _ = match landing {
        Landing::Small(s) => match sh.small.slot(*s) {
            Some((region, _, at)) => region.read(at, buf),
            None => Ok(()),
        },
        Landing::Dynamic { region, .. } => region.read(0, buf),
        Landing::None => Ok(()),
    };
}
