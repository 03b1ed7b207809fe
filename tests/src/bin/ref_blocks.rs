//! A reproducer against a Portals 4 library alone (feature `ref-impl`; no rgasnet conduit):
//! the AM layer's receive pattern without the conduit. Every rank puts `COUNT` messages of
//! `BYTES` to the next rank, each asking for an acknowledgement, at most `WINDOW`
//! unacknowledged at a time, while receiving as many from the previous rank into two
//! locally managed receive blocks of `BLOCK` bytes on a flow-controlled portal. A block that
//! fills unlinks and is appended again; a disabled portal is enabled again once its event
//! queue is drained (and every 20 ms, as the conduit does); a put refused with
//! `PT_DISABLED` is sent again. Prints `ref blocks ok: rank R, COUNT puts in S s`, or fails
//! naming what did not come within `WAIT_SECS`.
//!
//! `ref_blocks COUNT WINDOW BYTES BLOCK [WAIT_SECS]` under `rgasnetrun`. Run by
//! `tests/tests/ref_impl_bugs.rs`.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Result};
use rgasnet_portals::engine::{EqGet, MdSpec, MeSpec, PutArgs, RemoteAddr};
use rgasnet_portals::types::{
    AckReq, EventKind, ListKind, Matching, MdOptions, MeOptions, NiFail, ProcessId, PtOptions,
    UID_ANY,
};
use rgasnet_portals::Region;

const PT: u32 = 3;
const ENABLE_EVERY: Duration = Duration::from_millis(20);

fn main() -> ExitCode {
    rgasnet_tests::library::report("ref_blocks", run())
}

fn run() -> Result<String> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "ref_blocks COUNT WINDOW BYTES BLOCK [WAIT_SECS]";
    let arg = |i, default| rgasnet_tests::library::positional(&args, i, default, usage);
    let count = arg(1, None)?;
    let window = arg(2, None)?.max(1);
    let bytes = arg(3, None)?.max(1);
    let block = arg(4, None)?.max(bytes);
    let wait = Duration::from_secs(arg(5, Some(10))?);
    let (boot, ni, _) = rgasnet_tests::library::join_with_ni(Matching::Matching)?;
    let (rank, size) = (boot.rank(), boot.size());
    let recv_eq = ni.eq_alloc(8192)?;
    let send_eq = ni.eq_alloc(8192)?;
    ni.pt_alloc(PtOptions::FLOWCTRL, Some(recv_eq), PT)?;
    let blocks = [Region::new(block as usize), Region::new(block as usize)];
    let append = |i: usize| {
        ni.me_append(
            PT,
            MeSpec {
                region: blocks[i].clone(),
                offset: 0,
                length: block,
                ct: None,
                uid: UID_ANY,
                options: MeOptions::OP_PUT
                    | MeOptions::MANAGE_LOCAL
                    | MeOptions::EVENT_LINK_DISABLE,
                match_id: ProcessId::ANY_RANK,
                match_bits: 0,
                ignore_bits: 0,
                min_free: bytes,
            },
            ListKind::Priority,
            i as u64,
        )
    };
    append(0)?;
    append(1)?;
    let source = Region::new(bytes as usize);
    source.write(0, &vec![rank as u8; bytes as usize])?;
    let md = ni.md_bind(MdSpec {
        region: source,
        offset: 0,
        length: bytes,
        options: MdOptions::EVENT_SEND_DISABLE,
        eq: Some(send_eq),
        ct: None,
    })?;
    boot.barrier()?;
    let drops_before = rgasnet_tests::library::udp_receive_buffer_drops();

    let next = (rank + 1) % size;
    let put = |n: u64| {
        ni.put(&PutArgs {
            md,
            local_offset: 0,
            length: bytes,
            ack_req: AckReq::Ack,
            remote: RemoteAddr {
                target: ProcessId::Rank(next),
                pt_index: PT,
                match_bits: 0,
                remote_offset: 0,
            },
            user_ptr: n,
            hdr_data: 0,
        })
    };
    let start = Instant::now();
    let (mut sent, mut acked, mut arrived, mut refused) = (0u64, 0u64, 0u64, 0u64);
    let mut disabled = false;
    let mut enabled_at = Instant::now();
    let mut last_progress = Instant::now();
    while acked < count || arrived < count {
        while sent < count && sent - acked < window {
            put(sent)?;
            sent += 1;
        }
        let mut moved = false;
        while let EqGet::Event(ev) = ni.eq_get(send_eq)? {
            if ev.kind != EventKind::Ack {
                continue;
            }
            match ev.ni_fail {
                NiFail::Ok => acked += 1,
                NiFail::PtDisabled => {
                    refused += 1;
                    put(ev.user_ptr)?;
                }
                other => bail!(
                    "rank {rank}: put {} acknowledged with {other:?}",
                    ev.user_ptr
                ),
            }
            moved = true;
        }
        while let EqGet::Event(ev) = ni.eq_get(recv_eq)? {
            match ev.kind {
                EventKind::Put if ev.ni_fail == NiFail::Ok => arrived += 1,
                EventKind::AutoUnlink => {
                    append(ev.user_ptr as usize)?;
                }
                EventKind::PtDisabled => disabled = true,
                _ => {}
            }
            moved = true;
        }
        // The queue is drained: enable the portal again if it was disabled, and every
        // ENABLE_EVERY anyway (a disable the library did not announce).
        if disabled || enabled_at.elapsed() >= ENABLE_EVERY {
            ni.pt_enable(PT)?;
            disabled = false;
            enabled_at = Instant::now();
        }
        if moved {
            last_progress = Instant::now();
        } else if last_progress.elapsed() > wait {
            bail!(
                "rank {rank}: stalled for {wait:?} after {acked} of {count} acknowledgements and {arrived} of {count} arrivals ({refused} refused and sent again, {} s in); {}",
                start.elapsed().as_secs(),
                rgasnet_tests::library::udp_drops_since(drops_before)
            );
        } else {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
    ensure!(
        arrived == count,
        "rank {rank}: {arrived} arrivals of {count}"
    );
    boot.barrier()?;
    Ok(format!(
        "ref blocks ok: rank {rank}, {count} puts in {:.3} s ({refused} refused and sent again)",
        start.elapsed().as_secs_f64()
    ))
}
