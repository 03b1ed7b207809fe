//! A reproducer against a Portals 4 library alone (feature `ref-impl`; no rgasnet conduit):
//! `THREADS` threads of every rank each make the rank's first put to the next rank at the
//! same moment, each asking for an acknowledgement. Prints `ref connect ok: rank R, T puts`
//! once every put was acknowledged, or fails after `WAIT_SECS` naming how many threads are
//! still inside `PtlPut`.
//!
//! `ref_connect THREADS [WAIT_SECS]`. Run by `tests/tests/ref_impl_bugs.rs`: over Sandia's
//! reference implementation, threads that start connecting to the same peer at once wait
//! forever inside `PtlPut` for the connection (which is why the conduit connects every pair
//! of ranks in turn at start-up over a library); over rgasnet's libportals every put returns.

use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use rgasnet_portals::engine::{EqGet, MdSpec, MeSpec, PutArgs, RemoteAddr};
use rgasnet_portals::types::{
    AckReq, EventKind, ListKind, Matching, MdOptions, MeOptions, NiFail, ProcessId, PtOptions,
    UID_ANY,
};
use rgasnet_portals::Region;

const PT: u32 = 3;

fn main() -> ExitCode {
    match run() {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ref_connect: {}", rgasnet_launcher::error_chain(e.chain()));
            // A thread stuck inside the library can hold an ordinary exit up (the library's
            // exit handlers wait for it): end without them.
            std::process::abort()
        }
    }
}

fn run() -> Result<String> {
    let args: Vec<String> = std::env::args().collect();
    let parse = |i, default| {
        rgasnet_tests::library::positional(&args, i, default, "ref_connect THREADS [WAIT_SECS]")
    };
    let threads = parse(1, None)?.max(1) as usize;
    let wait = Duration::from_secs(parse(2, Some(20))?);
    let (boot, ni, _) = rgasnet_tests::library::join_with_ni(Matching::Matching)?;
    let (rank, size) = (boot.rank(), boot.size());
    let eq = ni.eq_alloc(1024)?;
    ni.pt_alloc(PtOptions::empty(), None, PT)?;
    ni.me_append(
        PT,
        MeSpec {
            region: Region::new(8 * threads),
            offset: 0,
            length: 8 * threads as u64,
            ct: None,
            uid: UID_ANY,
            options: MeOptions::OP_PUT | MeOptions::EVENT_COMM_DISABLE,
            match_id: ProcessId::ANY_RANK,
            match_bits: 0,
            ignore_bits: 0,
            min_free: 0,
        },
        ListKind::Priority,
        0,
    )?;
    let md = ni.md_bind(MdSpec {
        region: Region::new(8),
        offset: 0,
        length: 8,
        options: MdOptions::EVENT_SEND_DISABLE,
        eq: Some(eq),
        ct: None,
    })?;
    boot.barrier()?;

    let next = (rank + 1) % size;
    let returned = Arc::new(AtomicUsize::new(0));
    let start = Arc::new(Barrier::new(threads));
    for t in 0..threads {
        let (ni, returned, start) = (ni.clone(), returned.clone(), start.clone());
        // Detached: a thread stuck in the library cannot be joined; the process exits.
        std::thread::spawn(move || {
            start.wait();
            let put = ni.put(&PutArgs {
                md,
                local_offset: 0,
                length: 8,
                ack_req: AckReq::Ack,
                remote: RemoteAddr {
                    target: ProcessId::Rank(next),
                    pt_index: PT,
                    match_bits: 0,
                    remote_offset: 8 * t as u64,
                },
                user_ptr: t as u64,
                hdr_data: 0,
            });
            if let Err(e) = put {
                eprintln!("ref_connect: thread {t}: {e}");
            }
            // Relaxed: a count the main thread polls; nothing else is published by it.
            returned.fetch_add(1, Ordering::Relaxed);
        });
    }
    // The watch makes no library call: one could wait on a lock the stuck threads hold.
    let began = Instant::now();
    // Relaxed (both loads): the count alone is read; the threads publish nothing else.
    while returned.load(Ordering::Relaxed) < threads {
        if began.elapsed() > wait {
            let inside = threads - returned.load(Ordering::Relaxed);
            bail!(
                "rank {rank}: after {wait:?}, {inside} of {threads} threads are still inside PtlPut to rank {next}"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for acked in 0..threads {
        match ni.eq_wait(eq, Some(wait)) {
            Ok(EqGet::Event(ev)) if ev.kind == EventKind::Ack => {
                ensure!(ev.ni_fail == NiFail::Ok, "a failed put: {ev:?}");
            }
            Ok(other) => bail!("rank {rank}: {other:?} instead of an acknowledgement"),
            Err(rgasnet_portals::PtlError::EqEmpty) => {
                bail!("rank {rank}: {acked} of {threads} puts acknowledged within {wait:?}")
            }
            Err(e) => return Err(e.into()),
        }
    }
    boot.barrier()?;
    // Not closed: the reference implementation's PtlNIFini can hang after such a start
    // (the process ends anyway).
    std::mem::forget(ni);
    Ok(format!("ref connect ok: rank {rank}, {threads} puts"))
}
