//! Mode `unwind`: a handler that panics, caught around `poll` by the application, leaves the
//! conduit working. A large Medium payload is lent to its handler in place in its receive
//! block; the block is given back (and posted again once unlinked) even when the handler
//! unwinds, so the blocks keep cycling and every later message still arrives, exactly once.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rgasnet::{AmError, Category, Client, Handler};

use crate::State;

/// The handler that panics when its first argument is 1.
pub(crate) const PANICKY: u8 = 142;
/// Large enough to be lent in place (the conduit lends Medium payloads from 4 KiB).
const LEN: usize = 16 << 10;
/// Messages rank 0 sends: with 2 receive blocks of 128 KiB (set by the test), each block
/// fills, unlinks and must be posted again many times over.
const COUNT: u64 = 400;
/// One message in this many asks its handler to panic.
const PANIC_EVERY: u64 = 20;

/// The panicking handler: checks the payload, panics if asked, else counts in `sunk`.
pub(crate) fn handler(st: &Arc<State>) -> Handler {
    let s = st.clone();
    Handler::new("panicky", Category::Medium, move |_, args, payload| {
        if payload.len() != LEN || payload.iter().any(|&b| b != 0x5a) {
            s.fail(format!(
                "panicky: a payload of {} bytes that is not the sender's",
                payload.len()
            ));
        }
        if args.first() == Some(&1) {
            panic!("am_conformance: this handler panics on purpose");
        }
        s.sunk.fetch_add(1, Ordering::Relaxed);
    })
    .at(PANICKY)
}

/// Rank 0 sends [`COUNT`] lent-size Medium requests to rank 1, one in [`PANIC_EVERY`] asking
/// its handler to panic. Rank 1 polls inside `catch_unwind` and must see every panic and every
/// other message exactly once.
pub(crate) fn unwind(c: &Client, st: &State) -> Result<(), String> {
    let e = |e: AmError| e.to_string();
    let panics_wanted = COUNT / PANIC_EVERY;
    if c.rank() == 0 {
        let payload = vec![0x5a; LEN];
        for i in 0..COUNT {
            let panic = u32::from(i % PANIC_EVERY == 0);
            c.am_request_medium(1, PANICKY, &[panic], &payload)
                .map_err(e)?;
        }
        println!("rank 0: unwind: sent {COUNT}");
        return Ok(());
    }
    if c.rank() != 1 {
        return Ok(());
    }
    // The panics are expected: keep them off stderr.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let want = COUNT - panics_wanted;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut panics = 0;
    let mut result = Ok(());
    // Until every message and every panic has been seen (AMs are not ordered: a refused
    // message sent again arrives after later ones, so a panicking one may come last), then
    // 200 ms more, in which anything would be a duplicate.
    let mut linger: Option<Instant> = None;
    while linger.is_none_or(|end| Instant::now() < end) && Instant::now() < deadline {
        match catch_unwind(AssertUnwindSafe(|| c.poll())) {
            Ok(Ok(_)) => {}
            Ok(Err(err)) => {
                result = Err(e(err));
                break;
            }
            Err(_) => panics += 1,
        }
        if linger.is_none() && st.sunk.load(Ordering::Relaxed) >= want && panics >= panics_wanted {
            linger = Some(Instant::now() + Duration::from_millis(200));
        }
    }
    std::panic::set_hook(hook);
    result?;
    let got = st.sunk.load(Ordering::Relaxed);
    if got != want || panics != panics_wanted {
        return Err(format!(
            "{got} of {want} messages handled and {panics} of {panics_wanted} handler panics caught"
        ));
    }
    println!("rank 1: unwind ok: {got} messages, {panics} handler panics caught");
    Ok(())
}
