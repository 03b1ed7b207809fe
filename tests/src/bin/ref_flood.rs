//! A reproducer against a Portals 4 library alone (feature `ref-impl`; no rgasnet conduit):
//! every rank puts `COUNT` small messages to the next rank, each asking for an
//! acknowledgement, at most `WINDOW` unacknowledged at a time, while receiving as many from
//! the previous rank; with `NIS` = 2 each process also opens a second (non-matching) NI, as
//! the conduit does for put/get, which sends nothing. Prints `ref flood ok: rank R, COUNT
//! puts in S s`, or fails naming what did not come within its bound.
//!
//! With `THREADS` above 1, that many threads make the puts (each takes the next message
//! number, within the one shared window) while the main thread takes the events: the calls
//! into the library come from several threads at once, as the conduit's do when a program's
//! threads send.
//!
//! With `get` after `THREADS`, every operation is a get of `BYTES` from the next rank's
//! region instead (counted by its REPLY, and the target's GET event), landing in one buffer.
//!
//! `ref_flood NIS COUNT WINDOW [WAIT_SECS [BYTES [next|self [THREADS [put|get]]]]]`. Run by `tests/tests/ref_impl.rs` over Sandia's
//! reference implementation, where a process with two NIs stalls (its UDP transport shares
//! one socket between the NIs' progress threads), and over rgasnet's own libportals.

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use rgasnet_portals::engine::{
    EqGet, EqHandle, GetArgs, LeSpec, MdSpec, MeSpec, PutArgs, RemoteAddr,
};
use rgasnet_portals::refimpl::ni::LibNi;
use rgasnet_portals::types::{
    AckReq, Addressing, EventKind, ListKind, Matching, MdOptions, MeOptions, NiFail, NiKind,
    ProcessId, PtOptions, UID_ANY,
};
use rgasnet_portals::Region;

const PT: u32 = 3;

fn main() -> ExitCode {
    rgasnet_tests::library::report("ref_flood", run())
}

fn arg(args: &[String], i: usize, default: Option<u64>) -> Result<u64> {
    let usage = "ref_flood NIS COUNT WINDOW [WAIT_SECS [BYTES [next|self [THREADS [put|get]]]]]";
    rgasnet_tests::library::positional(args, i, default, usage)
}

fn run() -> Result<String> {
    let args: Vec<String> = std::env::args().collect();
    let nis = arg(&args, 1, None)?;
    let count = arg(&args, 2, None)?;
    let window = arg(&args, 3, None)?.max(1);
    let wait = Duration::from_secs(arg(&args, 4, Some(60))?);
    let message = arg(&args, 5, Some(32))?.max(1);
    let to_self = match args.get(6).map(String::as_str) {
        None | Some("next") => false,
        Some("self") => true,
        Some(other) => bail!("argument 6: {other:?} is neither `next` nor `self`"),
    };
    let threads = arg(&args, 7, Some(1))?.max(1);
    let gets = match args.get(8).map(String::as_str) {
        None | Some("put") => false,
        Some("get") => true,
        Some(other) => bail!("argument 8: {other:?} is neither `put` nor `get`"),
    };
    let (boot, ni, map) = rgasnet_tests::library::join_with_ni(Matching::Matching)?;
    let (rank, size) = (boot.rank(), boot.size());
    let idle = (nis >= 2)
        .then(|| {
            LibNi::init(NiKind {
                matching: Matching::NoMatching,
                addressing: Addressing::Logical,
            })
        })
        .transpose()?;
    if let Some(idle) = &idle {
        idle.set_map(&map)?;
        let pt = idle.pt_alloc(PtOptions::empty(), None, PT)?;
        idle.le_append(
            pt,
            LeSpec {
                region: Region::new(64),
                offset: 0,
                length: 64,
                ct: None,
                uid: UID_ANY,
                options: MeOptions::OP_PUT,
            },
            ListKind::Priority,
            0,
        )?;
    }

    let recv_eq = ni.eq_alloc(4096)?;
    let send_eq = ni.eq_alloc(4096)?;
    ni.pt_alloc(PtOptions::empty(), Some(recv_eq), PT)?;
    let landing = Region::new((message * count.max(1)) as usize);
    ni.me_append(
        PT,
        MeSpec {
            region: landing.clone(),
            offset: 0,
            length: landing.len() as u64,
            ct: None,
            uid: UID_ANY,
            options: MeOptions::OP_PUT | MeOptions::OP_GET | MeOptions::EVENT_LINK_DISABLE,
            match_id: ProcessId::ANY_RANK,
            match_bits: 0,
            ignore_bits: 0,
            min_free: 0,
        },
        ListKind::Priority,
        0,
    )?;
    if gets {
        // What the previous rank's gets fetch.
        let bytes: Vec<u8> = (0..landing.len() as u64)
            .map(|j| pattern(rank, j % message))
            .collect();
        landing.write(0, &bytes)?;
    }
    let source = Region::new(message as usize);
    let bytes: Vec<u8> = (0..message).map(|j| pattern(rank, j)).collect();
    source.write(0, &bytes)?;
    let fetched = source.clone();
    let md = ni.md_bind(MdSpec {
        region: source,
        offset: 0,
        length: message,
        options: MdOptions::EVENT_SEND_DISABLE,
        eq: Some(send_eq),
        ct: None,
    })?;
    boot.barrier()?;
    let drops_before = rgasnet_tests::library::udp_receive_buffer_drops();

    let next = if to_self { rank } else { (rank + 1) % size };
    let put = |i: u64| {
        let remote = RemoteAddr {
            target: ProcessId::Rank(next),
            pt_index: PT,
            match_bits: 0,
            remote_offset: i * message,
        };
        if gets {
            return ni.get(&GetArgs {
                md,
                local_offset: 0,
                length: message,
                remote,
                user_ptr: i,
            });
        }
        ni.put(&PutArgs {
            md,
            local_offset: 0,
            length: message,
            ack_req: AckReq::Ack,
            remote,
            user_ptr: i,
            hdr_data: 0,
        })
    };
    // Acknowledgements so far, counted by the main thread; `stop` ends the sender threads
    // when it gives up; the next message number to put. Every access is Relaxed: they are a
    // count, a flag and a ticket, and no memory is handed over through them (the messages
    // are the library's; the threads' end is ordered by the scope's join).
    let acked = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let next_message = AtomicU64::new(0);
    if threads > 1 {
        // Message 0 goes alone, and the threads start once it is acknowledged: the first put
        // to a peer connects to it, and threads that connect at once hang in the library
        // (`ref_connect`), which is another bug.
        put(0)?;
        next_message.store(1, Ordering::Relaxed);
    }
    let start = Instant::now();
    let took = std::thread::scope(|scope| -> Result<Duration> {
        let senders: Vec<_> = (0..if threads > 1 { threads } else { 0 })
            .map(|_| {
                scope.spawn(|| -> Result<()> {
                    while acked.load(Ordering::Relaxed) == 0 {
                        if stop.load(Ordering::Relaxed) {
                            return Ok(());
                        }
                        std::thread::yield_now();
                    }
                    loop {
                        let i = next_message.fetch_add(1, Ordering::Relaxed);
                        if i >= count {
                            return Ok(());
                        }
                        while i.saturating_sub(acked.load(Ordering::Relaxed)) >= window {
                            if stop.load(Ordering::Relaxed) {
                                return Ok(());
                            }
                            std::thread::yield_now();
                        }
                        put(i)?;
                    }
                })
            })
            .collect();
        // One thread: the main thread puts too, between its polls.
        let send_here = |mut sent: u64| -> Result<u64> {
            while threads <= 1 && sent < count && sent - acked.load(Ordering::Relaxed) < window {
                put(sent)?;
                sent += 1;
            }
            Ok(sent)
        };
        let stalled = |acked, arrived| {
            anyhow::anyhow!(
                "rank {rank}: stalled for {wait:?} after {acked} of {count} acknowledgements and {arrived} of {count} arrivals ({} s in, {nis} NIs, window {window}, {threads} threads); {}",
                start.elapsed().as_secs(),
                rgasnet_tests::library::udp_drops_since(drops_before)
            )
        };
        let kinds = if gets {
            [EventKind::Reply, EventKind::Get]
        } else {
            [EventKind::Ack, EventKind::Put]
        };
        let polled = poll_events(
            &ni,
            [(send_eq, kinds[0]), (recv_eq, kinds[1])],
            send_here,
            &acked,
            count,
            wait,
            stalled,
        );
        stop.store(true, Ordering::Relaxed);
        for s in senders {
            s.join()
                .map_err(|_| anyhow::anyhow!("a sender thread panicked"))??;
        }
        polled?;
        Ok(start.elapsed())
    })?;
    let mut got = vec![0u8; message as usize];
    let prev = if to_self {
        rank
    } else {
        (rank + size - 1) % size
    };
    if gets {
        // Every get fetched a message's worth of the next rank's bytes into the one buffer.
        fetched.read(0, &mut got)?;
        check(&got, next).map_err(|e| anyhow::anyhow!("fetched: {e}"))?;
    }
    for i in (0..count).filter(|_| !gets) {
        landing.read((i * message) as usize, &mut got)?;
        check(&got, prev).map_err(|e| anyhow::anyhow!("message {i}: {e}"))?;
    }
    boot.barrier()?;
    Ok(format!(
        "ref flood ok: rank {rank}, {count} {}s in {:.3} s",
        if gets { "get" } else { "put" },
        took.as_secs_f64()
    ))
}

/// Takes the events of `eqs` (the initiator's acknowledgements or replies, the target's
/// arrivals; each queue with the kind it counts) until `count` of each came (the first into
/// `acked`); `send` is called before each round with the puts made so far
/// by the main thread and returns the new number. After `wait` without an event, fails with
/// what `stalled` makes of the acknowledgements and arrivals so far.
fn poll_events(
    ni: &LibNi,
    eqs: [(EqHandle, EventKind); 2],
    mut send: impl FnMut(u64) -> Result<u64>,
    acked: &AtomicU64,
    count: u64,
    wait: Duration,
    stalled: impl Fn(u64, u64) -> anyhow::Error,
) -> Result<()> {
    let (mut sent, mut arrived) = (0u64, 0u64);
    let mut last_progress = Instant::now();
    while acked.load(Ordering::Relaxed) < count || arrived < count {
        sent = send(sent)?;
        let mut moved = false;
        for (i, (eq, kind)) in eqs.into_iter().enumerate() {
            while let EqGet::Event(ev) = ni.eq_get(eq)? {
                ensure!(ev.ni_fail == NiFail::Ok, "a failed event: {ev:?}");
                if ev.kind != kind {
                    continue;
                }
                if i == 0 {
                    acked.fetch_add(1, Ordering::Relaxed);
                } else {
                    arrived += 1;
                }
                moved = true;
            }
        }
        if moved {
            last_progress = Instant::now();
        } else if last_progress.elapsed() > wait {
            return Err(stalled(acked.load(Ordering::Relaxed), arrived));
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    Ok(())
}

/// Byte `j` of every message that rank `from` sends (or serves to gets): a pattern, so that
/// bytes of another message, of another offset or of a header do not pass for it.
fn pattern(from: u32, j: u64) -> u8 {
    ((j % 251) as u8) ^ (from as u8).wrapping_mul(0x5b)
}

/// Checks that `got` is a message of rank `from`; else names the first wrong byte.
fn check(got: &[u8], from: u32) -> Result<(), String> {
    match (0..got.len()).find(|&j| got[j] != pattern(from, j as u64)) {
        None => Ok(()),
        Some(j) => Err(format!(
            "byte {j} of {} is {:#04x}, expected {:#04x} (from byte {j}: {:?})",
            got.len(),
            got[j],
            pattern(from, j as u64),
            &got[j..got.len().min(j + 16)]
        )),
    }
}
