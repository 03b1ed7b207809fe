//! Modes that fill a receiver: `flood` (flow control from three senders), `stall` (a send
//! that waits long for room), `reqrep-flood`/`reply-storm` (request/reply floods both ways)
//! and `rewind` (receive blocks reused in place).

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rgasnet::{AmError, Client};

use crate::*;

pub(crate) fn flood(c: &Client, st: &State, per_sender: usize) -> Result<(), String> {
    let me = c.rank();
    let n = c.size();
    let e = |e: AmError| e.to_string();
    *st.seen.lock().unwrap() = vec![vec![false; per_sender]; n as usize];
    c.bootstrap().barrier().map_err(|x| x.to_string())?;
    if me == 0 {
        // Let the senders fill every receive block before draining anything.
        std::thread::sleep(Duration::from_millis(500));
        let want = per_sender as u64 * (n as u64 - 1);
        let ok = poll_until(c, 120, || st.requests.load(Ordering::Relaxed) >= want).map_err(e)?;
        if !ok {
            return Err(format!(
                "rank 0 received {} of {want} flood messages",
                st.requests.load(Ordering::Relaxed)
            ));
        }
    } else {
        for seq in 0..per_sender {
            if seq % FLOOD_LONG_EVERY == 0 {
                // Into this sender's area of rank 0's segment; every Long carries the same
                // bytes, so overlapping deposits cannot corrupt what a handler checks.
                c.am_request_long(
                    0,
                    FLOOD_LONG,
                    &[seq as u32],
                    &pattern(me, FLOOD_LONG_LEN),
                    area(me, false),
                )
                .map_err(e)?;
            } else {
                c.am_request_medium(0, FLOOD, &[seq as u32], &pattern(me, 8000))
                    .map_err(e)?;
            }
        }
    }
    // Let senders finish their resends (they need acknowledgements).
    let deadline = Instant::now() + Duration::from_secs(60);
    while c.stats().sent > 0 && Instant::now() < deadline {
        c.poll().map_err(e)?;
        if c.in_flight() == 0 {
            break;
        }
    }
    let stats = c.stats();
    let blob = [stats.flow_control_recoveries, stats.resends, stats.handled]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect::<Vec<u8>>();
    let all = c.bootstrap().allgather(&blob).map_err(|x| x.to_string())?;
    let get = |r: usize, k: usize| {
        u64::from_le_bytes(all[r][k * 8..k * 8 + 8].try_into().unwrap_or([0; 8]))
    };
    let recoveries = get(0, 0);
    let resends: u64 = (1..n as usize).map(|r| get(r, 1)).sum();
    if me == 0 {
        if recoveries == 0 || resends == 0 {
            return Err(format!(
                "flow control never engaged: {recoveries} recoveries at rank 0, {resends} resends"
            ));
        }
        let seen = st.seen.lock().unwrap();
        for (src, v) in seen.iter().enumerate().skip(1) {
            if let Some(seq) = v.iter().position(|s| !s) {
                return Err(format!("flood message {seq} from {src} never arrived"));
            }
        }
        println!(
            "rank 0: flood ok: {} messages exactly once, {recoveries} flow-control recoveries, {resends} resends",
            st.requests.load(Ordering::Relaxed)
        );
    }
    Ok(())
}

/// Rank 0 sends `count` flood Mediums to rank 1, which does not poll for `quiet` first: rank
/// 0's sends run out of room and wait (the stall warning is checked by the test, on stderr);
/// then rank 1 drains and every message must arrive exactly once.
pub(crate) fn stall(c: &Client, st: &State, count: usize, quiet: Duration) -> Result<(), String> {
    let me = c.rank();
    let e = |e: AmError| e.to_string();
    *st.seen.lock().unwrap() = vec![vec![false; count]; c.size() as usize];
    c.bootstrap().barrier().map_err(|x| x.to_string())?;
    match me {
        0 => {
            for seq in 0..count {
                c.am_request_medium(1, FLOOD, &[seq as u32], &pattern(me, 8000))
                    .map_err(e)?;
            }
            let ok = poll_until(c, 60, || c.in_flight() == 0).map_err(e)?;
            if !ok {
                return Err(format!("{} sends never acknowledged", c.in_flight()));
            }
        }
        1 => {
            std::thread::sleep(quiet);
            let want = count as u64;
            let ok =
                poll_until(c, 60, || st.requests.load(Ordering::Relaxed) >= want).map_err(e)?;
            if !ok {
                return Err(format!(
                    "rank 1 received {} of {want} messages",
                    st.requests.load(Ordering::Relaxed)
                ));
            }
            let seen = st.seen.lock().unwrap();
            if let Some(seq) = seen[0].iter().position(|s| !s) {
                return Err(format!("message {seq} from rank 0 never arrived"));
            }
        }
        _ => {}
    }
    println!("rank {me}: stall ok");
    Ok(())
}

/// Both ranks send `count` Short requests to handler `handler` of the other and poll until
/// they handled as many requests and received as many replies; `what` names the mode.
pub(crate) fn request_flood(
    c: &Client,
    st: &State,
    count: u64,
    handler: u8,
    what: &str,
) -> Result<(), String> {
    let me = c.rank();
    let peer = (me + 1) % c.size();
    let e = |e: AmError| e.to_string();
    for i in 0..count {
        c.am_request_short(peer, handler, &args_for(me, (i % 17) as usize))
            .map_err(e)?;
    }
    let ok = poll_until(c, 120, || {
        st.replies.load(Ordering::Relaxed) >= count && st.requests.load(Ordering::Relaxed) >= count
    })
    .map_err(e)?;
    if !ok {
        return Err(format!(
            "{what} stalled: {} replies, {} requests of {count}",
            st.replies.load(Ordering::Relaxed),
            st.requests.load(Ordering::Relaxed)
        ));
    }
    println!("rank {me}: {what} ok: {count} requests and replies each way");
    Ok(())
}

/// Rank 0 sends rank 1 large Mediums one at a time, each answered by a large Medium: every
/// message is read in place and given back with nothing else waiting, so each receive block
/// is rewound to its start (network path) instead of being filled further. Checks the bytes
/// (in the handlers) and that both ranks rewound.
pub(crate) fn rewind(c: &Client, st: &State) -> Result<(), String> {
    const ROUNDS: u64 = 8;
    let e = |e: AmError| e.to_string();
    if c.rank() == 0 {
        for round in 1..=ROUNDS {
            c.am_request_medium(1, MED_REQ, &args_for(0, 1), &pattern(0, 60_000))
                .map_err(e)?;
            if !poll_until(c, 60, || st.replies.load(Ordering::Relaxed) >= round).map_err(e)? {
                return Err(format!("reply {round} never arrived"));
            }
        }
    } else if !poll_until(c, 60, || st.requests.load(Ordering::Relaxed) >= ROUNDS).map_err(e)? {
        return Err("not every request arrived".into());
    }
    c.bootstrap().barrier().map_err(|x| x.to_string())?;
    let rewound = c.stats().blocks_rewound;
    // Each round leaves a rank's block drained after a 60,000-byte message; allow for a
    // round whose check met an event still waiting.
    if rewound < ROUNDS / 2 {
        return Err(format!(
            "only {rewound} receive-block rewinds in {ROUNDS} rounds"
        ));
    }
    println!("rank {}: rewind ok: {rewound} rewinds", c.rank());
    Ok(())
}
