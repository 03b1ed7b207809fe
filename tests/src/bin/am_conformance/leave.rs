//! Mode `leave`: a rank that returns from `main` right after sending still delivers it all.

use std::time::{Duration, Instant};

use rgasnet::{AmError, Client};

use crate::{poll_until, State, BIG_REPLY_REQ, SHORT_REQ, SINK, SINK_MEDIUM};
use std::sync::atomic::Ordering;

/// Requests rank 0 sends before it leaves, per part: far more than the transport's window, so
/// most are still queued or unacknowledged when its `main` returns.
const LEAVE_BURST: u64 = 3000;

/// Rank 0 sends a burst of requests to rank 1 and finds `quiesce` with no time refusing with
/// the count still unacknowledged (on the network); then it sends another burst and returns from `main` at
/// once, leaving the delivery to the client's end. Rank 1 counts both bursts, exactly.
pub(crate) fn leave(c: Client, st: &State) -> Result<(), String> {
    let e = |e: AmError| e.to_string();
    if c.rank() == 0 {
        for i in 0..LEAVE_BURST {
            c.am_request_short(1, SINK, &[]).map_err(e)?;
            if i == 0 {
                // The first one needs the peer's address resolved; nothing else waits.
                c.poll().map_err(e)?;
            }
        }
        // Over shared memory a sent message is already in the target's queue. Over a Portals
        // library (`RGASNET_PORTALS=ref`) a send waits while RGASNET_PORTALS_MAX_INFLIGHT are
        // unacknowledged, so the last few of the burst may all have been answered already.
        let bounded = c.am_ni().native().is_none();
        match (c.quiesce(Duration::ZERO), c.has_remote_peers()) {
            (Err(AmError::Unacknowledged { in_flight, .. }), true) if in_flight > 0 => {}
            (Ok(()), false) => {}
            (Ok(()), true) if bounded => {}
            (other, _) => return Err(format!("quiesce(0) with a burst in flight gave {other:?}")),
        }
        for _ in 0..LEAVE_BURST {
            c.am_request_short(1, SINK, &[]).map_err(e)?;
        }
        println!("rank 0: leave: sent {} and left", 2 * LEAVE_BURST);
        drop(c);
        return Ok(());
    }
    let want = 2 * LEAVE_BURST;
    let all = poll_until(&c, 60, || st.sunk.load(Ordering::Relaxed) >= want).map_err(e)?;
    // Anything more would be a duplicate; give it a moment to show up.
    let linger = Instant::now() + Duration::from_millis(200);
    while Instant::now() < linger {
        c.poll().map_err(e)?;
    }
    let got = st.sunk.load(Ordering::Relaxed);
    if !all || got != want {
        return Err(format!(
            "{got} of the {want} requests rank 0 sent before leaving arrived"
        ));
    }
    println!("rank 1: leave ok: {got} requests");
    Ok(())
}

/// Mode `send-left`: rank 1 computes for a while without polling, while rank 0 floods it
/// with requests (filling its shared-memory queue, or the network's flow control), then ends
/// its program by dropping its client. From then on rank 0's requests must fail with
/// [`AmError::PeerLeft`] naming rank 1, instead of waiting forever for room or being accepted
/// and never handled; and every request accepted before must have been handled by rank 1's
/// end, exactly once. Both ranks print their counts; the test compares them. With
/// `AMC_SEND_LEFT_BYTES` set, the requests are Mediums of that many bytes, which fill rank 1's
/// receive blocks: over the network rank 1 then refuses some, which rank 0 resends while
/// rank 1 is ending.
pub(crate) fn send_left(c: Client, st: &State) -> Result<(), String> {
    let e = |e: AmError| e.to_string();
    c.bootstrap().barrier().map_err(|e| e.to_string())?;
    if c.rank() == 1 {
        std::thread::sleep(Duration::from_millis(300));
        println!("rank 1: send-left: leaving without having polled");
        // The client's end: it takes in what was sent before, then says it has left.
        drop(c);
        println!(
            "rank 1: send-left: handled {}",
            st.sunk.load(Ordering::Relaxed)
        );
        return Ok(());
    }
    let bytes = match std::env::var("AMC_SEND_LEFT_BYTES") {
        Ok(v) => Some(
            v.parse::<usize>()
                .map_err(|err| format!("AMC_SEND_LEFT_BYTES={v:?} is not a byte count: {err}"))?,
        ),
        Err(_) => None,
    };
    let payload = vec![0x5a; bytes.unwrap_or(0)];
    for sent in 0..10_000_000u64 {
        let r = match bytes {
            Some(_) => c.am_request_medium(1, SINK_MEDIUM, &[], &payload),
            None => c.am_request_short(1, SINK, &[]),
        };
        match r {
            Ok(()) => {}
            Err(AmError::PeerLeft { rank: 1, .. }) => {
                println!(
                    "rank 0: send-left ok: refused after {sent} requests, rank 1 has left ({} resent after a refusal)",
                    c.stats().resends
                );
                return Ok(());
            }
            Err(other) => return Err(e(other)),
        }
    }
    Err("ten million requests to a rank that left all went through".into())
}

/// Mode `undrained` (shared memory, run with a short `RGASNET_PEER_TIMEOUT`): rank 1 queues
/// requests whose handlers answer with large replies, then stops polling for 3 s; rank 0 ends
/// its program without having polled. Its end runs the handlers, whose replies fill rank 1's
/// reply queue and wait for room that never comes in time: the end must say so (a warning),
/// and still mark rank 0 as left, so that rank 1, polling again, sees it gone.
pub(crate) fn undrained(c: Client, st: &State) -> Result<(), String> {
    const REQUESTS: u64 = 300;
    let e = |e: AmError| e.to_string();
    let boot = |e: rgasnet_launcher::BootstrapError| e.to_string();
    c.bootstrap().barrier().map_err(boot)?;
    if c.rank() == 0 {
        c.bootstrap().barrier().map_err(boot)?;
        println!("rank 0: undrained: leaving");
        drop(c);
        return Ok(());
    }
    for _ in 0..REQUESTS {
        c.am_request_short(0, BIG_REPLY_REQ, &[]).map_err(e)?;
    }
    c.bootstrap().barrier().map_err(boot)?;
    std::thread::sleep(Duration::from_secs(3));
    let left = poll_until(&c, 20, || c.has_left(0)).map_err(e)?;
    // Whatever got into the queue before rank 0 gave up.
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        c.poll().map_err(e)?;
    }
    let got = st.replies.load(Ordering::Relaxed);
    if !left || got >= REQUESTS {
        return Err(format!(
            "rank 0 left: {left}; {got} of {REQUESTS} replies (some should not have fit)"
        ));
    }
    println!("rank 1: undrained ok: rank 0 has left, {got} of {REQUESTS} replies came");
    Ok(())
}

/// Rank 1 stops (SIGSTOP: its threads, a Portals library's included, no longer run); rank 0's
/// requests then go unacknowledged, and the conduit must end the job naming rank 1 within
/// RGASNET_PEER_TIMEOUT instead of waiting forever. Returns only if it did not.
pub(crate) fn stopped_peer(c: &Client) -> Result<(), String> {
    let me = c.rank();
    if me == 1 {
        println!("rank 1: stopping");
        let _ = std::io::Write::flush(&mut std::io::stdout());
        nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP)
            .map_err(|e| format!("SIGSTOP: {e}"))?;
    } else if me == 0 {
        for _ in 0..1000 {
            c.am_request_short(1, SHORT_REQ, &[])
                .map_err(|e| e.to_string())?;
        }
        let _ = poll_until(c, 120, || false);
    }
    Err("the stopped rank was never reported".into())
}
