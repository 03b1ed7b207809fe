//! A reproducer against a Portals 4 library alone (feature `ref-impl`; no rgasnet conduit):
//! every rank puts `COUNT` small messages to the next rank, each asking for an
//! acknowledgement, at most `WINDOW` unacknowledged at a time, while receiving as many from
//! the previous rank; with `NIS` = 2 each process also opens a second (non-matching) NI, as
//! the conduit does for put/get, which sends nothing. Prints `ref flood ok: rank R, COUNT
//! puts in S s`, or fails naming what did not come within its bound.
//!
//! `ref_flood NIS COUNT WINDOW [WAIT_SECS]`. Run by `tests/tests/ref_impl.rs` over Sandia's
//! reference implementation, where a process with two NIs stalls (its UDP transport shares
//! one socket between the NIs' progress threads), and over rgasnet's own libportals.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use rgasnet_launcher::Bootstrap;
use rgasnet_portals::engine::{EqGet, LeSpec, MdSpec, MeSpec, PutArgs, RemoteAddr};
use rgasnet_portals::refimpl::ni::LibNi;
use rgasnet_portals::types::{
    AckReq, Addressing, EventKind, ListKind, Matching, MdOptions, MeOptions, NiFail, NiKind,
    ProcessId, PtOptions, UID_ANY,
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
            eprintln!("ref_flood: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn arg(args: &[String], i: usize, default: Option<u64>) -> Result<u64> {
    let usage = "ref_flood NIS COUNT WINDOW [WAIT_SECS [BYTES [next|self]]]";
    rgasnet_tests::library::positional(args, i, default, usage)
}

fn run() -> Result<String> {
    let args: Vec<String> = std::env::args().collect();
    let nis = arg(&args, 1, None)?;
    let count = arg(&args, 2, None)?;
    let window = arg(&args, 3, None)?.max(1);
    let wait = Duration::from_secs(arg(&args, 4, Some(60))?);
    let message = arg(&args, 5, Some(32))?.max(1);
    let to_self = args.get(6).is_some_and(|t| t == "self");
    let boot = Bootstrap::from_env().context("joining the job (run under rgasnetrun)")?;
    let (rank, size) = (boot.rank(), boot.size());
    let kind = |matching| NiKind {
        matching,
        addressing: Addressing::Logical,
    };
    let ni = LibNi::init(kind(Matching::Matching))?;
    let idle = (nis >= 2)
        .then(|| LibNi::init(kind(Matching::NoMatching)))
        .transpose()?;
    let me = ni.get_phys_id()?;
    let map = rgasnet_tests::library::exchange_ids(&boot, me)?;
    ni.set_map(&map)?;
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
            options: MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE,
            match_id: ProcessId::ANY_RANK,
            match_bits: 0,
            ignore_bits: 0,
            min_free: 0,
        },
        ListKind::Priority,
        0,
    )?;
    let source = Region::new(message as usize);
    source.write(0, &vec![rank as u8; message as usize])?;
    let md = ni.md_bind(MdSpec {
        region: source,
        offset: 0,
        length: message,
        options: MdOptions::EVENT_SEND_DISABLE,
        eq: Some(send_eq),
        ct: None,
    })?;
    boot.barrier()?;

    let next = if to_self { rank } else { (rank + 1) % size };
    let start = Instant::now();
    let (mut sent, mut acked, mut arrived) = (0u64, 0u64, 0u64);
    let mut last_progress = Instant::now();
    while acked < count || arrived < count {
        while sent < count && sent - acked < window {
            ni.put(&PutArgs {
                md,
                local_offset: 0,
                length: message,
                ack_req: AckReq::Ack,
                remote: RemoteAddr {
                    target: ProcessId::Rank(next),
                    pt_index: PT,
                    match_bits: 0,
                    remote_offset: sent * message,
                },
                user_ptr: sent,
                hdr_data: 0,
            })?;
            sent += 1;
        }
        let mut moved = false;
        for (eq, kind, n) in [
            (send_eq, EventKind::Ack, &mut acked),
            (recv_eq, EventKind::Put, &mut arrived),
        ] {
            while let EqGet::Event(ev) = ni.eq_get(eq)? {
                ensure!(ev.ni_fail == NiFail::Ok, "a failed event: {ev:?}");
                if ev.kind == kind {
                    *n += 1;
                    moved = true;
                }
            }
        }
        if moved {
            last_progress = Instant::now();
        } else if last_progress.elapsed() > wait {
            bail!(
                "rank {rank}: stalled for {wait:?} after {acked} of {count} acknowledgements and {arrived} of {count} arrivals ({} s in, {nis} NIs, window {window})",
                start.elapsed().as_secs()
            );
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    let took = start.elapsed();
    let mut got = vec![0u8; message as usize];
    let prev = if to_self {
        rank
    } else {
        (rank + size - 1) % size
    };
    for i in [0, count.saturating_sub(1)] {
        landing.read((i * message) as usize, &mut got)?;
        ensure!(
            got.iter().all(|&b| b == prev as u8),
            "message {i}: {:?}",
            &got[..got.len().min(16)]
        );
    }
    boot.barrier()?;
    Ok(format!(
        "ref flood ok: rank {rank}, {count} puts in {:.3} s",
        took.as_secs_f64()
    ))
}
