//! Ranks started by `rgasnetrun` talking through a Portals 4 library (feature `ref-impl`; CI:
//! Sandia's reference implementation): each rank opens a logical NI of the library, the ranks
//! exchange their physical ids through rgasnet's bootstrap and install them as the NI's rank
//! map, then each puts a block stamped with its rank into its right neighbour's list entry and
//! gets back, from its left neighbour, the block that rank received. The start of the `ref`
//! engine (issue #25): the library's ids travel the way the native engine's do. Run by
//! `tests/tests/ref_impl.rs`; prints `ref ring ok: rank R of N` or exits non-zero with what
//! went wrong.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::{ensure, Context, Result};
use rgasnet_launcher::Bootstrap;
use rgasnet_portals::refimpl::ops::{RefBuffer, RefEq, RefLibrary, RefNi};
use rgasnet_portals::types::{
    AckReq, Addressing, EventKind, Matching, MdOptions, MeOptions, NiFail, NiKind, ProcessId,
    PtOptions,
};

/// Bytes each rank puts.
const BLOCK: usize = 64;
/// How long one event may take (the reference implementation takes milliseconds per
/// operation).
const EVENT_WAIT: Duration = Duration::from_secs(30);

fn main() -> ExitCode {
    rgasnet_tests::library::report("ref_ring", run())
}

/// The block `rank` puts: its rank and position in every byte's bits.
fn stamp(rank: u32) -> Vec<u8> {
    (0..BLOCK)
        .map(|i| (rank as u8).wrapping_mul(31) ^ i as u8)
        .collect()
}

/// Waits until `eq` has delivered one successful event of each of `wanted` (kind and what it
/// stands for, for the error), in any order; other kinds are skipped.
fn expect(eq: &RefEq<'_>, wanted: &[(EventKind, &str)]) -> Result<()> {
    let mut seen = vec![false; wanted.len()];
    while let Some(missing) = seen.iter().position(|s| !s) {
        let (kind, what) = wanted[missing];
        let ev = eq
            .wait(EVENT_WAIT)?
            .with_context(|| format!("no {kind:?} event for {what} within {EVENT_WAIT:?}"))?;
        let Some(i) = wanted.iter().position(|(k, _)| *k == ev.kind) else {
            continue;
        };
        let what = wanted[i].1;
        ensure!(!seen[i], "{what}: a second {:?} event: {ev:?}", ev.kind);
        ensure!(
            ev.ni_fail == NiFail::Ok,
            "{what}: {:?} event failed: {ev:?}",
            ev.kind
        );
        ensure!(
            ev.mlength == BLOCK as u64,
            "{what}: {} bytes, not {BLOCK}",
            ev.mlength
        );
        seen[i] = true;
    }
    Ok(())
}

fn run() -> Result<String> {
    let boot = Bootstrap::from_env().context("joining the job (run under rgasnetrun)")?;
    let (rank, size) = (boot.rank(), boot.size());
    ensure!(size >= 2, "ref_ring needs at least 2 ranks, not {size}");
    let lib = RefLibrary::init()?;
    let kind = NiKind {
        matching: Matching::NoMatching,
        addressing: Addressing::Logical,
    };
    let ni = RefNi::init(&lib, kind)?;
    let me = ni.phys_id()?;
    let map = rgasnet_tests::library::exchange_ids(&boot, me)?;
    ni.set_map(&map)?;

    let eq = ni.eq_alloc(64)?;
    let pt = ni.pt_alloc(PtOptions::empty(), Some(&eq), 0)?;
    let landing = RefBuffer::new(BLOCK * size as usize);
    let _le = ni.le_append(
        pt,
        &landing,
        MeOptions::OP_PUT | MeOptions::OP_GET | MeOptions::EVENT_LINK_DISABLE,
        0,
    )?;
    let out = RefBuffer::new(BLOCK);
    out.write(0, &stamp(rank))?;
    let back = RefBuffer::new(BLOCK);
    let out_md = ni.md_bind(&out, MdOptions::EVENT_SEND_DISABLE, Some(&eq))?;
    let back_md = ni.md_bind(&back, MdOptions::empty(), Some(&eq))?;
    // Every entry is in place before anyone puts.
    boot.barrier()?;

    let right = (rank + 1) % size;
    let left = (rank + size - 1) % size;
    let put_to = format!("the put to rank {right}");
    ni.put(
        &out_md,
        0,
        BLOCK as u64,
        AckReq::Ack,
        ProcessId::Rank(right),
        (pt, 0),
        u64::from(rank) * BLOCK as u64,
        1,
        0,
    )
    .with_context(|| put_to.clone())?;
    let put_from = format!("the put from rank {left}");
    expect(
        &eq,
        &[(EventKind::Ack, &put_to), (EventKind::Put, &put_from)],
    )?;
    let mut got = vec![0u8; BLOCK];
    landing.read(left as usize * BLOCK, &mut got)?;
    ensure!(got == stamp(left), "rank {left}'s block arrived as {got:?}");
    // Every put has landed before anyone reads what its neighbour received.
    boot.barrier()?;

    let from_left = format!("the get from rank {left}");
    let second = (left + size - 1) % size;
    ni.get(
        &back_md,
        0,
        BLOCK as u64,
        ProcessId::Rank(left),
        (pt, 0),
        u64::from(second) * BLOCK as u64,
        2,
    )
    .with_context(|| from_left.clone())?;
    expect(&eq, &[(EventKind::Reply, &from_left)])?;
    back.read(0, &mut got)?;
    ensure!(
        got == stamp(second),
        "rank {left} holds {got:?} for rank {second}"
    );
    boot.barrier()?;
    Ok(format!("ref ring ok: rank {rank} of {size}"))
}
