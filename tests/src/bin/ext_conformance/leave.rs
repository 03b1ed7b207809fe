//! Mode `leave`: dropping the last extended-API handle right after sending delivers it all.

use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rgasnet::Client;
use rgasnet_extended::{ExtError, Extended};

use crate::SINK;

/// Requests rank 0 sends before it leaves, per burst.
const LEAVE_BURST: u64 = 3000;

/// Rank 0 sends two bursts of requests to rank 1 and returns at once, dropping its extended
/// API (whose handlers hold the client, so only its end can deliver what is still queued);
/// rank 1 counts every request, exactly, then waits a moment for duplicates.
pub(crate) fn leave(client: &Client, ext: Extended, sunk: &AtomicU64) -> ExitCode {
    let me = client.rank();
    if me == 0 {
        for _ in 0..2 * LEAVE_BURST {
            if let Err(e) = client.am_request_short(1, SINK, &[]) {
                eprintln!("ext_conformance: rank 0: leave: {e}");
                return ExitCode::from(1);
            }
        }
        println!("rank 0: leave ok: sent {} and left", 2 * LEAVE_BURST);
        drop(ext);
        return ExitCode::SUCCESS;
    }
    let want = 2 * LEAVE_BURST;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut linger = None;
    loop {
        if let Err(e) = ext.poll() {
            eprintln!("ext_conformance: rank {me}: leave: {e}");
            return ExitCode::from(1);
        }
        let got = sunk.load(Ordering::Relaxed);
        let now = Instant::now();
        if got >= want {
            let until = *linger.get_or_insert(now + Duration::from_millis(200));
            if now >= until {
                break;
            }
        } else if now >= deadline {
            break;
        }
    }
    let got = sunk.load(Ordering::Relaxed);
    if got != want {
        eprintln!("ext_conformance: rank {me}: leave FAILED: {got} of the {want} requests rank 0 sent before leaving arrived");
        return ExitCode::from(1);
    }
    println!("rank {me}: leave ok: {got} requests");
    ExitCode::SUCCESS
}

/// A barrier, so that the ranks have talked; then rank 1 ends its program with
/// `std::process::exit(0)` (its client's end runs at the main thread's end), and rank 0
/// returns `Ok` to go on. `Err` is the exit code of a failed barrier.
fn barrier_then_rank_1_exits(ext: &Extended, mode: &str) -> Result<(), ExitCode> {
    let me = ext.rank();
    if let Err(e) = ext.barrier() {
        eprintln!("ext_conformance: rank {me}: {mode}: first barrier: {e}");
        return Err(ExitCode::from(1));
    }
    if me == 1 {
        println!("rank 1: {mode}: leaving");
        // Flushed: `exit` runs no destructor, and stdout is a pipe.
        let _ = std::io::Write::flush(&mut std::io::stdout());
        std::process::exit(0);
    }
    Ok(())
}

/// Mode `barrier-left`: rank 1 ends its program (`std::process::exit(0)`) instead of calling
/// the next barrier; rank 0's barrier must fail at once, naming rank 1, instead of waiting
/// forever. One barrier first, so that the two have talked.
pub(crate) fn barrier_left(ext: &Extended) -> ExitCode {
    let me = ext.rank();
    if let Err(code) = barrier_then_rank_1_exits(ext, "barrier-left") {
        return code;
    }
    let start = Instant::now();
    match ext.barrier() {
        Err(e @ ExtError::BarrierPeerLeft { rank: 1, .. }) => {
            println!(
                "rank {me}: barrier-left ok after {:.1} s: {e}",
                start.elapsed().as_secs_f64()
            );
            ExitCode::SUCCESS
        }
        other => {
            eprintln!(
                "ext_conformance: rank {me}: barrier-left FAILED: the barrier gave {other:?}"
            );
            ExitCode::from(1)
        }
    }
}

/// Mode `barrier-notify-left`: rank 1 notifies the next barrier and ends its program without
/// waiting for it (an erroneous program). The others' barrier must end, not hang: complete
/// (rank 1 did all its part before it ended: with the shared counter its arrival is all of it)
/// or fail naming a rank that ended its program (with the dissemination barrier rank 1 also
/// forwards the others' arrivals in its later rounds): rank 1, or a rank whose own barrier
/// failed on rank 1 and which ended its program before this one noticed rank 1 (a CI run saw
/// rank 2 name rank 0 so). The test checks that some rank named rank 1 or completed.
pub(crate) fn barrier_notify_left(ext: &Extended) -> ExitCode {
    let me = ext.rank();
    if let Err(e) = ext.barrier() {
        eprintln!("ext_conformance: rank {me}: barrier-notify-left: first barrier: {e}");
        return ExitCode::from(1);
    }
    if me == 1 {
        if let Err(e) = ext.barrier_notify(0, rgasnet_extended::BarrierFlags::ANONYMOUS) {
            eprintln!("ext_conformance: rank 1: barrier-notify-left: notify: {e}");
            return ExitCode::from(1);
        }
        println!("rank 1: barrier-notify-left: leaving after notify");
        let _ = std::io::Write::flush(&mut std::io::stdout());
        std::process::exit(0);
    }
    match ext.barrier() {
        Ok(()) => {
            println!("rank {me}: barrier-notify-left ok: completed");
            ExitCode::SUCCESS
        }
        Err(e @ ExtError::BarrierPeerLeft { rank, .. }) if rank != me => {
            println!("rank {me}: barrier-notify-left ok: {e}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ext_conformance: rank {me}: barrier-notify-left FAILED: {e}");
            ExitCode::from(1)
        }
    }
}

/// Mode `rma-left`: rank 1 ends its program after a barrier; every other rank keeps putting to
/// and getting from an area of rank 1's segment of its own, checking each get returns what it
/// put, until the calls fail with `ExtError::PeerLeft` naming rank 1 (nothing sent), as they
/// must once rank 1's end has said so. Before, over the network, an access to a rank that had
/// exited was retransmitted until the peer timeout. Then every one-word form fails the same
/// way: between node peers those are a single store or load, which used to go into the left
/// rank's segment unchecked. With 4 ranks and supernodes of 2, rank 0 reaches rank 1 through
/// shared memory and ranks 2 and 3 over the network, in one job.
pub(crate) fn rma_left(ext: &Extended) -> ExitCode {
    if let Err(code) = barrier_then_rank_1_exits(ext, "rma-left") {
        return code;
    }
    let me = ext.rank();
    let area = u64::from(me) * 128;
    let start = Instant::now();
    let mut back = [0u8; 64];
    for i in 0..u64::MAX {
        if start.elapsed() > Duration::from_secs(20) {
            break;
        }
        let data = [((i + u64::from(me)) % 251) as u8; 64];
        let r = ext
            .put(1, area, &data)
            .and_then(|()| ext.get(&mut back, 1, area));
        match r {
            Ok(()) if back == data => {}
            Ok(()) => {
                eprintln!(
                    "ext_conformance: rank {me}: rma-left FAILED: get {i} read back other bytes"
                );
                return ExitCode::from(1);
            }
            Err(e @ ExtError::PeerLeft { rank: 1, .. }) => {
                if let Err(why) = one_word_forms_fail(ext, area + 64) {
                    eprintln!("ext_conformance: rank {me}: rma-left FAILED: {why}");
                    return ExitCode::from(1);
                }
                println!("rank {me}: rma-left ok after {i} rounds, one-word forms too: {e}");
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("ext_conformance: rank {me}: rma-left FAILED: {e}");
                return ExitCode::from(1);
            }
        }
    }
    eprintln!("ext_conformance: rank {me}: rma-left FAILED: still accepted 20 s after rank 1 left");
    ExitCode::from(1)
}

/// After rank 1 left: an aligned one-word put and get at `offset` (a single store or load
/// between node peers) and their value forms fail with `PeerLeft` naming rank 1.
fn one_word_forms_fail(ext: &Extended, offset: u64) -> Result<(), String> {
    let mut word = [0u8; 8];
    let outcomes = [
        ("8-byte put", ext.put(1, offset, &[7u8; 8])),
        ("8-byte get", ext.get(&mut word, 1, offset)),
        ("put_val", ext.put_val(1, offset, 7, 8)),
        ("get_val", ext.get_val(1, offset, 8).map(|_| ())),
    ];
    for (what, outcome) in outcomes {
        match outcome {
            Err(ExtError::PeerLeft { rank: 1, .. }) => {}
            other => return Err(format!("{what} to rank 1 after it left gave {other:?}")),
        }
    }
    Ok(())
}

/// Mode `memset-left`: rank 0 issues a memset to rank 1's segment, drops the handle without
/// waiting and returns from `main`; rank 1 polls only after rank 0 has said its program ended.
/// Rank 1's handler then cannot answer (rank 0 waits for nothing); the memset must still be
/// done, and the job must end normally rather than stop on a failed answer. (Between node
/// peers a memset is a direct `memset` of the mapped segment, so only the network path has a
/// handler that answers.)
pub(crate) fn memset_left(client: &Client, ext: &Extended) -> ExitCode {
    const LEN: usize = 4096;
    let me = client.rank();
    if let Err(e) = ext.barrier() {
        eprintln!("ext_conformance: rank {me}: barrier: {e}");
        return ExitCode::from(1);
    }
    if me == 0 {
        // Rank 1 is out of its barrier by then, and polls no more until rank 0 has ended.
        std::thread::sleep(Duration::from_millis(200));
        match ext.memset_nb(1, 0, 0xAB, LEN as u64) {
            Ok(handle) => drop(handle),
            Err(e) => {
                eprintln!("ext_conformance: rank 0: memset-left FAILED: {e}");
                return ExitCode::from(1);
            }
        }
        println!("rank 0: memset-left: issued, leaving");
        return ExitCode::SUCCESS;
    }
    let start = Instant::now();
    while !client.has_ended(0) {
        if start.elapsed() > Duration::from_secs(20) {
            eprintln!("ext_conformance: rank 1: memset-left FAILED: rank 0 never said it ended");
            return ExitCode::from(1);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let mut got = vec![0u8; LEN];
    while start.elapsed() < Duration::from_secs(20) {
        if let Err(e) = client.poll() {
            eprintln!("ext_conformance: rank 1: memset-left FAILED: poll: {e}");
            return ExitCode::from(1);
        }
        if let Err(e) = ext.get(&mut got, 1, 0) {
            eprintln!("ext_conformance: rank 1: memset-left FAILED: get: {e}");
            return ExitCode::from(1);
        }
        if got.iter().all(|&b| b == 0xAB) {
            println!("rank 1: memset-left ok: the memset of rank 0, which left, is done");
            return ExitCode::SUCCESS;
        }
    }
    eprintln!("ext_conformance: rank 1: memset-left FAILED: the memset never landed");
    ExitCode::from(1)
}

/// Rank 1 stops (SIGSTOP: its threads, a Portals library's included, no longer run) after a
/// barrier; rank 0's blocking put to it must fail within RGASNET_PEER_TIMEOUT with
/// `Remote { rank: 1, fail: Undeliverable }` (the native engine's retransmission gives up, a
/// library's wait is bounded), then rank 0 ends the job, rank 1 with it.
pub(crate) fn stopped_peer(ext: &Extended) -> ExitCode {
    let me = ext.rank();
    if let Err(e) = ext.barrier() {
        eprintln!("ext_conformance: rank {me}: barrier: {e}");
        return ExitCode::from(1);
    }
    if me == 1 {
        // The transport holds an acknowledgement up to its ack delay (200 us) for data to ride
        // on. Had rank 0's barrier message come last, its acknowledgement would still be held
        // here, and a rank stopped now would leave that message unacknowledged: the AM
        // layer's peer timeout would then end the job before the put below fails, which is
        // not what this test is about. So rank 1 polls for a while (all held acks leave)
        // before it stops.
        let settle = Instant::now();
        while settle.elapsed() < Duration::from_millis(20) {
            if let Err(e) = ext.poll() {
                eprintln!("ext_conformance: rank 1: poll: {e}");
                return ExitCode::from(1);
            }
        }
        println!("rank 1: stopping");
        let _ = std::io::Write::flush(&mut std::io::stdout());
        if let Err(e) = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP) {
            eprintln!("ext_conformance: rank 1: SIGSTOP: {e}");
            return ExitCode::from(1);
        }
    }
    if me != 0 {
        // Not reached by a stopped rank 1: rank 0 ends the job.
        std::thread::sleep(Duration::from_secs(120));
        return ExitCode::from(1);
    }
    // Give rank 1 the moment it needs to stop.
    std::thread::sleep(Duration::from_millis(200));
    let start = Instant::now();
    let r = ext.put(1, 0, &[7; 64]);
    let waited = start.elapsed().as_secs_f64();
    match r {
        Err(ExtError::Remote {
            call: "put",
            rank: 1,
            fail: rgasnet_extended::NiFail::Undeliverable,
        }) => {
            println!("rank 0: stopped-peer ok: the put to rank 1 failed after {waited:.1} s");
            let _ = std::io::Write::flush(&mut std::io::stdout());
            ext.client().exit(0)
        }
        other => {
            eprintln!("ext_conformance: rank 0: stopped-peer: the put to a stopped rank 1 gave {other:?} after {waited:.1} s");
            ext.client().exit(1)
        }
    }
}
