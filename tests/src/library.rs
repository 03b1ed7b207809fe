//! Helpers of the programs that talk through a Portals 4 library directly (feature
//! `ref-impl`: `ref_ring`, `ref_flood`, `ref_connect`, `ref_blocks`).

use anyhow::{bail, ensure, Context, Result};
use rgasnet_launcher::Bootstrap;
use rgasnet_portals::refimpl::ni::LibNi;
use rgasnet_portals::types::{Addressing, Matching, NiKind, PhysId};

/// The start of a reproducer: joins the job (it runs under `rgasnetrun`) and opens a logical
/// NI of the `matching` kind on the library, whose rank map (also returned, for further NIs)
/// holds every rank's process id.
pub fn join_with_ni(matching: Matching) -> Result<(Bootstrap, LibNi, Vec<PhysId>)> {
    let boot = Bootstrap::from_env().context("joining the job (run under rgasnetrun)")?;
    let ni = LibNi::init(NiKind {
        matching,
        addressing: Addressing::Logical,
    })?;
    let map = exchange_ids(&boot, ni.get_phys_id()?)?;
    ni.set_map(&map)?;
    Ok((boot, ni, map))
}

/// Every rank's library process id, by rank, gathered through rgasnet's bootstrap: the rank
/// map of a logical NI. `me` is this rank's.
pub fn exchange_ids(boot: &Bootstrap, me: PhysId) -> Result<Vec<PhysId>> {
    let mut mine = [0u8; 8];
    mine[..4].copy_from_slice(&me.nid.to_le_bytes());
    mine[4..].copy_from_slice(&me.pid.to_le_bytes());
    let map = boot
        .allgather(&mine)?
        .iter()
        .enumerate()
        .map(|(rank, b)| {
            let id = <[u8; 8]>::try_from(b.as_slice())
                .with_context(|| format!("rank {rank} sent a {}-byte id, not 8", b.len()))?;
            Ok(PhysId {
                nid: u32::from_le_bytes([id[0], id[1], id[2], id[3]]),
                pid: u32::from_le_bytes([id[4], id[5], id[6], id[7]]),
            })
        })
        .collect::<Result<Vec<PhysId>>>()?;
    ensure!(
        map.len() == boot.size() as usize && map.get(boot.rank() as usize) == Some(&me),
        "the exchange gave {map:?}: {} ids with {me:?} at rank {} expected",
        boot.size(),
        boot.rank()
    );
    Ok(map)
}

/// The number at `args[i]`, else `default`; without either, an error showing `usage`.
pub fn positional(args: &[String], i: usize, default: Option<u64>, usage: &str) -> Result<u64> {
    match (args.get(i), default) {
        (Some(v), _) => v.parse().with_context(|| format!("argument {i}: {v:?}")),
        (None, Some(d)) => Ok(d),
        (None, None) => bail!("usage: {usage}"),
    }
}

/// Whether the library under test is Sandia's reference implementation: what
/// `scripts/test.sh` says in `RGASNET_TEST_PORTALS_LIBRARY` (`reference`, the default, or
/// `rgasnet` for rgasnet's own libportals).
pub fn testing_reference_implementation() -> bool {
    std::env::var("RGASNET_TEST_PORTALS_LIBRARY").map_or(true, |l| l != "rgasnet")
}

/// UDP datagrams this host's kernel has dropped because the receiving socket's buffer was
/// full (`RcvbufErrors` in `/proc/net/snmp`, all sockets of the host); `None` where the file
/// is missing or unreadable. Sandia's reference implementation never sends a datagram again,
/// so each such drop there loses a put or an acknowledgement.
pub fn udp_receive_buffer_drops() -> Option<u64> {
    let snmp = std::fs::read_to_string("/proc/net/snmp").ok()?;
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let column = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(column)?.parse().ok()
}

/// What a reproducer's message says when the kernel dropped UDP datagrams during its run.
pub const DROPPED: &str = "the kernel dropped UDP datagrams for full socket receive buffers";

/// What [`udp_receive_buffer_drops`] counted since `before`, for a reproducer's message.
pub fn udp_drops_since(before: Option<u64>) -> String {
    match (before, udp_receive_buffer_drops()) {
        (Some(a), Some(b)) if b > a => {
            format!("{DROPPED} meanwhile: {} (RcvbufErrors, this host)", b - a)
        }
        (Some(_), Some(_)) => "the kernel dropped no UDP datagram meanwhile".to_string(),
        _ => "no count of the kernel's dropped UDP datagrams here (/proc/net/snmp)".to_string(),
    }
}

/// The end of a reproducer's `main`: prints what `result` holds, its line on standard output
/// (exit status 0) or `NAME: ERROR` with the error's causes on standard error (status 1).
pub fn report(name: &str, result: Result<String>) -> std::process::ExitCode {
    match result {
        Ok(line) => {
            println!("{line}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{name}: {}", rgasnet_launcher::error_chain(e.chain()));
            std::process::ExitCode::FAILURE
        }
    }
}
