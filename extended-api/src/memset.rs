//! Remote memset over active messages: the request carries (offset, length, byte, cell), the
//! target fills its own segment and replies with the cell and a status. The operation
//! completes through the same cells as explicit puts and gets.

use rgasnet::{AmError, Token};
use rgasnet_portals::NiFail;

use crate::error::ExtError;
use crate::explicit::NbHandle;
use crate::ext::{Core, Extended, Shared, H_MEMSET_REP, H_MEMSET_REQ};
use crate::ops::Landing;

const STATUS_OK: u32 = 0;
const STATUS_OUTSIDE: u32 = 1;

fn split(v: u64) -> (u32, u32) {
    (v as u32, (v >> 32) as u32)
}

fn join(lo: u32, hi: u32) -> u64 {
    u64::from(lo) | (u64::from(hi) << 32)
}

/// Target side: fill, then reply. The range was checked at the initiator; it is checked again
/// here against this rank's own segment (the initiator could have a stale or forged view).
pub(crate) fn handle_request(core: &Core, t: &Token<'_>, a: &[u32]) {
    let [off_lo, off_hi, len_lo, len_hi, byte, cell] = a else {
        // The handler is registered for exactly six arguments; the AM layer enforces it.
        return;
    };
    let offset = join(*off_lo, *off_hi);
    let len = join(*len_lo, *len_hi);
    let status = match (
        core.client.segment(),
        usize::try_from(offset),
        usize::try_from(len),
    ) {
        (Some(seg), Ok(o), Ok(l)) if seg.fill(o, l, *byte as u8).is_ok() => STATUS_OK,
        _ => STATUS_OUTSIDE,
    };
    match t.reply_short(H_MEMSET_REP, &[*cell, status]) {
        Ok(()) => {}
        // The initiator ended its program without waiting for the memset: nobody waits
        // for the answer.
        Err(AmError::PeerLeft { .. }) => {}
        // The initiator would wait forever: nothing sensible remains but to stop the job.
        Err(e) => {
            eprintln!(
                "rgasnet: fatal error on rank {}: cannot answer rank {}'s memset: {e}",
                core.client.rank(),
                t.source()
            );
            core.client.exit(1)
        }
    }
}

/// Initiator side: the reply completes the cell.
pub(crate) fn handle_reply(core: &Core, a: &[u32]) {
    let [cell, status] = a else {
        return;
    };
    let fail = if *status == STATUS_OK {
        NiFail::Ok
    } else {
        NiFail::Segv
    };
    // A memset cell never has a landing, so nothing can need releasing.
    let _ = core.ops.complete(u64::from(*cell), 1, fail);
}

impl Shared {
    /// Checks and starts a memset; `None` if it completed at once (own segment).
    pub(crate) fn memset_issue(
        &self,
        call: &'static str,
        rank: u32,
        offset: u64,
        byte: u8,
        len: u64,
    ) -> Result<Option<u32>, ExtError> {
        let ulen = usize::try_from(len).map_err(|_| ExtError::OutsideSegment {
            call,
            rank,
            offset,
            len,
            segment: self.seg_sizes.get(rank as usize).copied().unwrap_or(0),
        })?;
        self.check_remote(call, rank, offset, ulen)?;
        if let Some(seg) = self.local_segment(rank) {
            self.local_result(call, rank, seg.fill(offset as usize, ulen, byte))?;
            return Ok(None);
        }
        let cell = self.core.ops.alloc(1, Landing::None);
        let (ol, oh) = split(offset);
        let (ll, lh) = split(len);
        let args = [ol, oh, ll, lh, u32::from(byte), cell];
        if let Err(e) = self.core.client.am_request_short(rank, H_MEMSET_REQ, &args) {
            let _ = self.core.ops.complete(u64::from(cell), 1, NiFail::Dropped);
            let _ = self.core.ops.orphan(cell);
            return Err(ExtError::from_am(call, e));
        }
        Ok(Some(cell))
    }
}

impl Extended {
    /// Blocking memset: sets `len` bytes at (`rank`, `offset`) to `byte`; on return the target
    /// holds the bytes.
    pub fn memset(&self, rank: u32, offset: u64, byte: u8, len: u64) -> Result<(), ExtError> {
        crate::explicit::not_in_handler("memset")?;
        self.memset_nb_impl("memset", rank, offset, byte, len)?
            .wait()
    }

    /// Explicit-handle memset.
    pub fn memset_nb(
        &self,
        rank: u32,
        offset: u64,
        byte: u8,
        len: u64,
    ) -> Result<NbHandle<'_>, ExtError> {
        self.memset_nb_impl("memset_nb", rank, offset, byte, len)
    }

    fn memset_nb_impl(
        &self,
        call: &'static str,
        rank: u32,
        offset: u64,
        byte: u8,
        len: u64,
    ) -> Result<NbHandle<'_>, ExtError> {
        Ok(match self.sh.memset_issue(call, rank, offset, byte, len)? {
            None => NbHandle::done(&self.sh),
            Some(cell) => NbHandle::op(&self.sh, cell, rank, call),
        })
    }
}
