//! Mode `blocking-threads`: blocking calls from more threads than the extended API has slots
//! for blocking single-operation calls.

use rgasnet_extended::Extended;

use crate::{area, compare, e2s, on_threads, Res, Rng, AREA};

/// Threads per rank of mode `blocking-threads`: more than the extended API's 64 slots of
/// blocking single-operation calls, so that while most of them wait at once a call can find
/// every slot taken and take the explicit-handle path while others complete in slots.
const BLOCKING_THREADS: u64 = 72;

/// Blocking puts and gets from [`BLOCKING_THREADS`] threads per rank at once, to random ranks,
/// each thread in its own part of this rank's area; every get is checked byte by byte against
/// the put before it, and the one-word value forms against their value. Lengths up to 6,000
/// bytes cover the one-operation calls (gets up to 4 KiB) and the gets beyond them.
pub(crate) fn blocking_threads(ext: &Extended, seed: u64) -> Res {
    let n = ext.size();
    let part = AREA / BLOCKING_THREADS;
    let base = area(ext.rank());
    on_threads(BLOCKING_THREADS, |t| -> Res {
        let mut rng = Rng::new(seed ^ ((t + 1) * 0x9e37_79b9));
        let at = base + t * part;
        for round in 0..40 {
            let rank = rng.below(u64::from(n)) as u32;
            let len = 1 + rng.below(6000) as usize;
            let d = rng.bytes(len);
            let what = format!("thread {t} round {round} rank {rank} {len} B");
            ext.put(rank, at, &d).map_err(e2s(&what))?;
            let mut b = vec![0u8; len];
            ext.get(&mut b, rank, at).map_err(e2s(&what))?;
            compare(&what, &b, &d)?;
            let v = rng.next();
            ext.put_val(rank, at + 8192, v, 8).map_err(e2s(&what))?;
            let got = ext.get_val(rank, at + 8192, 8).map_err(e2s(&what))?;
            if got != v {
                return Err(format!("{what}: get_val {got:#x}, put_val {v:#x}"));
            }
        }
        Ok(())
    })?;
    println!("rank {}: blocking-threads ok", ext.rank());
    Ok(())
}
