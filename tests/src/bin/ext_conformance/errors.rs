//! Mode `errors`: misuse is a typed error at the caller, and a blocking call inside a handler
//! is refused with `InHandler` (the probe handlers).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use rgasnet::{Category, Handler};
use rgasnet_extended::{ExtError, Extended, NiFail};

use crate::{compare, e2s, Res};

const PROBE: u8 = 128;
const PROBE_REPLY: u8 = 129;

/// The probe handlers: the request handler tries a blocking put, a poll, a blocking get, a
/// blocking put from the segment and a blocking memset (each must fail with `InHandler`, on
/// every path) and replies with the count; the reply stores count + 1 in `probe`.
pub(crate) fn probe_handlers(ext: Arc<OnceLock<Extended>>, probe: Arc<AtomicU32>) -> Vec<Handler> {
    let req = Handler::new("probe", Category::Short, move |t, _, _| {
        let Some(ext) = ext.get() else { return };
        let mut refused = 0;
        if let Err(ExtError::InHandler { call: "put" }) = ext.put(t.source(), 0, &[1]) {
            refused += 1;
        }
        if let Err(ExtError::InHandler { call: "poll" }) = ext.poll() {
            refused += 1;
        }
        let mut b = [0u8; 4];
        if let Err(ExtError::InHandler { call: "get" }) = ext.get(&mut b, t.source(), 0) {
            refused += 1;
        }
        // A node peer's segment form completes at once, and is refused all the same.
        if let Err(ExtError::InHandler {
            call: "put_from_segment",
        }) = ext.put_from_segment(t.source(), 0, 0, 8)
        {
            refused += 1;
        }
        if let Err(ExtError::InHandler { .. }) = ext.memset(t.source(), 0, 0, 8) {
            refused += 1;
        }
        let _ = t.reply_short(PROBE_REPLY, &[refused]);
    })
    .at(PROBE);
    let rep = Handler::new("probe reply", Category::Short, move |_, a, _| {
        probe.store(a.first().copied().unwrap_or(0) + 1, Ordering::Release);
    })
    .at(PROBE_REPLY);
    vec![req, rep]
}

/// Expects the target's refusal of an access outside its list entry.
fn segv(r: Result<(), ExtError>, peer: u32, what: &str) -> Res {
    match r {
        Err(ExtError::Remote {
            rank,
            fail: NiFail::Segv,
            ..
        }) if rank == peer => Ok(()),
        other => Err(format!(
            "{what}: expected Remote Segv from {peer}, got {other:?}"
        )),
    }
}

pub(crate) fn errors(ext: &Extended, probe: &AtomicU32) -> Res {
    let me = ext.rank();
    let n = ext.size();
    let peer = (me + 1) % n;
    let seg = ext.segment_size(peer).unwrap();
    let mut buf = [0u8; 16];
    let outside = |r: Result<(), ExtError>, call: &str, off: u64, len: u64| match r {
        Err(ExtError::OutsideSegment {
            call: c,
            rank,
            offset,
            len: l,
            segment,
        }) if c == call && rank == peer && offset == off && l == len && segment == seg => Ok(()),
        other => Err(format!(
            "{call} at {off}+{len}: expected OutsideSegment, got {other:?}"
        )),
    };
    outside(ext.put(peer, seg - 8, &buf), "put", seg - 8, 16)?;
    outside(ext.get(&mut buf, peer, seg), "get", seg, 16)?;
    let r = ext.put_nb(peer, u64::MAX, &buf).map(drop);
    outside(r, "put_nb", u64::MAX, 16)?;
    let r = ext.get_nb(&mut buf, peer, seg - 1).map(drop);
    outside(r, "get_nb", seg - 1, 16)?;
    outside(ext.put_val(peer, seg - 3, 7, 4), "put_val", seg - 3, 4)?;
    let r = ext.get_val(peer, seg - 1, 2).map(drop);
    outside(r, "get_val", seg - 1, 2)?;
    let mut b2 = [0u8; 2];
    let mut nbi = ext.nbi();
    outside(nbi.put_nbi(peer, seg, &[1]), "put_nbi", seg, 1)?;
    outside(nbi.get_nbi(&mut b2, peer, seg - 1), "get_nbi", seg - 1, 2)?;
    nbi.sync_nbi_all().map_err(e2s("sync after refused ops"))?;
    drop(nbi);
    match ext.put(n, 0, &buf) {
        Err(ExtError::BadRank {
            call: "put",
            rank,
            size,
        }) if rank == n && size == n => {}
        other => return Err(format!("bad rank: {other:?}")),
    }
    for bad in [0usize, 9] {
        match ext.put_val(peer, 0, 1, bad) {
            Err(ExtError::BadValueSize {
                call: "put_val",
                len,
            }) if len == bad => {}
            other => return Err(format!("put_val of {bad} bytes: {other:?}")),
        }
    }
    match ext.put_from_segment(peer, 0, ext.segment().len() as u64 - 4, 8) {
        Err(ExtError::OutsideLocalSegment {
            call: "put_from_segment",
            len: 8,
            ..
        }) => {}
        other => return Err(format!("local range past the segment: {other:?}")),
    }
    // The very last bytes and an empty range at the end are inside.
    ext.put(peer, seg - 16, &[0x5a; 16])
        .map_err(e2s("put at the end"))?;
    ext.put(peer, seg, &[])
        .map_err(e2s("empty put at the end"))?;
    ext.get(&mut buf, peer, seg - 16)
        .map_err(e2s("get at the end"))?;
    compare("last bytes", &buf, &[0x5a; 16])?;
    // Past the initiator's check, the target's list entry refuses an access that starts past
    // its end (NI_SEGV) and its memory stays untouched; one that straddles the end is
    // truncated by Portals and reported as the same failure.
    ext.barrier().map_err(e2s("barrier"))?;
    let ff = [0xff; 16];
    segv(
        ext.put_unchecked_for_tests(peer, seg + 8, &ff),
        peer,
        "target-side bounds on put",
    )?;
    let mut got = [0x11u8; 16];
    let r = ext.get_unchecked_for_tests(&mut got, peer, seg + 1);
    segv(r, peer, "target-side bounds on get")?;
    compare("destination of a refused get", &got, &[0x11; 16])?;
    ext.get(&mut buf, peer, seg - 16)
        .map_err(e2s("get after refusal"))?;
    compare("target after a refused put", &buf, &[0x5a; 16])?;
    let r = ext.get_unchecked_for_tests(&mut got, peer, seg - 8);
    segv(r, peer, "get straddling the end")?;
    segv(
        ext.put_unchecked_for_tests(peer, seg - 8, &ff),
        peer,
        "put straddling the end",
    )?;
    // Waiting inside an AM handler is refused: the peer's handler tries a blocking put, a
    // poll and a blocking get, and replies with how many were refused with InHandler.
    ext.client()
        .am_request_short(peer, PROBE, &[])
        .map_err(|e| format!("probe request: {e}"))?;
    while probe.load(Ordering::Acquire) == 0 {
        ext.poll().map_err(e2s("poll for the probe reply"))?;
    }
    let refused = probe.load(Ordering::Acquire) - 1;
    if refused != 5 {
        return Err(format!(
            "{refused} of 5 waits inside a handler were refused with InHandler"
        ));
    }
    println!("rank {me}: errors ok");
    Ok(())
}
