//! Conformance program for the extended API, run by `tests/tests/extended.rs` under
//! `rgasnetrun`.
//!
//! `ext_conformance MODE`: every mode checks its own results byte by byte / variant by variant
//! and exits non-zero with a message naming the first mismatch. Modes: `rma`, `overwrite`,
//! `regions`, `memset`, `barrier`, `errors`, `threads`, `blocking-threads`, `self`.
//!
//! Segment layout: rank `t`'s segment holds one area of [`AREA`] bytes per writer rank `w`
//! (`[w * AREA, (w + 1) * AREA)`); only `w` writes there, so ranks never race, and every writer
//! keeps a shadow copy of what each of its areas must hold.

// A test program: a poisoned lock means a thread already failed the run.
#![allow(clippy::unwrap_used)]

use std::process::ExitCode;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rgasnet::{Category, Client, Handler};
use rgasnet_extended::{BarrierFlags, ExtError, Extended, NbHandle};

/// Bytes of one writer's area in every segment.
const AREA: u64 = 5 << 20;
/// Largest transfer.
const MAX_LEN: u64 = 4 << 20;

type Res = Result<(), String>;

/// xorshift64*: a fixed-seed generator (the tests crate takes no extra dependencies).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// A length from 1 to [`MAX_LEN`], log-uniform so that every scale is covered.
    fn len(&mut self) -> u64 {
        let bits = self.below(23) as u32; // 2^0 .. 2^22 = 4 MiB
        let lo = 1u64 << bits;
        (lo + self.below(lo)).min(MAX_LEN)
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

/// What one writer's areas on every rank must hold.
struct Shadow {
    areas: Vec<Vec<u8>>,
}

impl Shadow {
    fn new(ranks: u32) -> Shadow {
        Shadow {
            areas: (0..ranks).map(|_| vec![0u8; AREA as usize]).collect(),
        }
    }
    fn write(&mut self, rank: u32, at: u64, data: &[u8]) {
        self.areas[rank as usize][at as usize..at as usize + data.len()].copy_from_slice(data);
    }
    fn fill(&mut self, rank: u32, at: u64, byte: u8, len: u64) {
        self.areas[rank as usize][at as usize..(at + len) as usize].fill(byte);
    }
}

/// Offset of `writer`'s area in any segment.
fn area(writer: u32) -> u64 {
    u64::from(writer) * AREA
}

fn compare(what: &str, got: &[u8], want: &[u8]) -> Res {
    if got.len() != want.len() {
        return Err(format!(
            "{what}: {} bytes, expected {}",
            got.len(),
            want.len()
        ));
    }
    match got.iter().zip(want).position(|(a, b)| a != b) {
        None => Ok(()),
        Some(i) => Err(format!(
            "{what}: byte {i} of {} is {:#04x}, expected {:#04x}",
            got.len(),
            got[i],
            want[i]
        )),
    }
}

fn e2s(what: &str) -> impl Fn(ExtError) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Reads back `[at - 32, at + len + 32)` of this rank's area on `rank` (clipped to the area)
/// and checks it against the shadow: the write landed and nothing around it changed.
fn verify(ext: &Extended, sh: &Shadow, rank: u32, at: u64, len: u64, what: &str) -> Res {
    let lo = at.saturating_sub(32);
    let hi = (at + len + 32).min(AREA);
    let mut got = vec![0u8; (hi - lo) as usize];
    ext.get(&mut got, rank, area(ext.rank()) + lo)
        .map_err(e2s(what))?;
    compare(
        &format!("{what} (rank {rank}, area offset {lo}..{hi})"),
        &got,
        &sh.areas[rank as usize][lo as usize..hi as usize],
    )
}

/// Checks buffers read back from `ranges` against the shadow.
fn check_bufs(sh: &Shadow, ranges: &[(u32, u64, u64)], bufs: &[Vec<u8>], what: &str) -> Res {
    for ((rank, len, at), b) in ranges.iter().zip(bufs) {
        let want = &sh.areas[*rank as usize][*at as usize..(*at + *len) as usize];
        compare(&format!("{what} from rank {rank} at {at}"), b, want)?;
    }
    Ok(())
}

/// A random target, length and offset inside this rank's area.
fn pick(rng: &mut Rng, n: u32) -> (u32, u64, u64) {
    let rank = rng.below(u64::from(n)) as u32;
    let len = rng.len();
    let at = rng.below(AREA - len + 1);
    (rank, len, at)
}

/// Picks `k` disjoint ranges in this rank's areas (one per slot of AREA / k bytes).
fn pick_disjoint(rng: &mut Rng, n: u32, k: u64) -> Vec<(u32, u64, u64)> {
    let slot = AREA / k;
    (0..k)
        .map(|i| {
            let rank = rng.below(u64::from(n)) as u32;
            let len = rng.len().min(slot);
            (rank, len, i * slot + rng.below(slot - len + 1))
        })
        .collect()
}

fn rma(ext: &Extended, rng: &mut Rng, sh: &mut Shadow) -> Res {
    let n = ext.size();
    let me = area(ext.rank());
    // Blocking put, then blocking get of the same range; the largest size always included.
    for i in 0..40 {
        let (rank, mut len, mut at) = pick(rng, n);
        if i == 0 {
            (len, at) = (MAX_LEN, AREA - MAX_LEN);
        }
        let data = rng.bytes(len as usize);
        ext.put(rank, me + at, &data).map_err(e2s("put"))?;
        sh.write(rank, at, &data);
        verify(ext, sh, rank, at, len, "blocking put/get")?;
    }
    // Explicit handles: 8 puts in flight, waited together; 8 gets, reaped with wait_some.
    for _ in 0..6 {
        let ranges = pick_disjoint(rng, n, 8);
        let datas: Vec<Vec<u8>> = ranges.iter().map(|r| rng.bytes(r.1 as usize)).collect();
        let mut hs = Vec::new();
        for ((rank, _, at), d) in ranges.iter().zip(&datas) {
            hs.push(ext.put_nb(*rank, me + at, d).map_err(e2s("put_nb"))?);
        }
        ext.wait_all(hs).map_err(e2s("wait_all"))?;
        for ((rank, _, at), d) in ranges.iter().zip(&datas) {
            sh.write(*rank, *at, d);
        }
        let mut bufs: Vec<Vec<u8>> = ranges.iter().map(|r| vec![0u8; r.1 as usize]).collect();
        {
            let mut hs: Vec<NbHandle<'_>> = Vec::new();
            for ((rank, _, at), b) in ranges.iter().zip(bufs.iter_mut()) {
                hs.push(ext.get_nb(b, *rank, me + at).map_err(e2s("get_nb"))?);
            }
            let mut reaped = 0;
            while !hs.is_empty() {
                reaped += ext.wait_some(&mut hs).map_err(e2s("wait_some"))?;
            }
            if reaped != 8 {
                return Err(format!("wait_some reaped {reaped} handles, expected 8"));
            }
        }
        check_bufs(sh, &ranges, &bufs, "get_nb")?;
        // try_wait until done on one more get.
        let (rank, len, at) = ranges[0];
        let mut b = vec![0u8; len as usize];
        let mut h = ext.get_nb(&mut b, rank, me + at).map_err(e2s("get_nb"))?;
        while !h.try_wait().map_err(e2s("try_wait"))? {}
        drop(h);
        check_bufs(sh, &ranges[..1], &[b], "try_wait get")?;
    }
    // A flood of small gets all in flight at once: more than a block of small landing slots
    // (256), so that more are bound while the first are outstanding.
    {
        let ranges: Vec<(u32, u64, u64)> = (0..1500)
            .map(|_| {
                let rank = rng.below(u64::from(n)) as u32;
                let len = 1 + rng.below(64);
                (rank, len, rng.below(AREA - len + 1))
            })
            .collect();
        let mut bufs: Vec<Vec<u8>> = ranges.iter().map(|r| vec![0u8; r.1 as usize]).collect();
        {
            let mut hs = Vec::new();
            for ((rank, _, at), b) in ranges.iter().zip(bufs.iter_mut()) {
                hs.push(ext.get_nb(b, *rank, me + at).map_err(e2s("get_nb flood"))?);
            }
            ext.wait_all(hs)
                .map_err(e2s("wait_all of the get_nb flood"))?;
        }
        check_bufs(sh, &ranges, &bufs, "get_nb flood")?;
    }
    // Implicit handles: 16 puts per sync, then 16 gets per sync.
    for _ in 0..4 {
        let ranges = pick_disjoint(rng, n, 16);
        let mut nbi = ext.nbi();
        for (rank, len, at) in &ranges {
            let d = rng.bytes(*len as usize);
            nbi.put_nbi(*rank, me + at, &d).map_err(e2s("put_nbi"))?;
            sh.write(*rank, *at, &d);
        }
        nbi.sync_nbi_puts().map_err(e2s("sync_nbi_puts"))?;
        let mut bufs: Vec<Vec<u8>> = ranges.iter().map(|r| vec![0u8; r.1 as usize]).collect();
        {
            let mut nbi = ext.nbi();
            for ((rank, _, at), b) in ranges.iter().zip(bufs.iter_mut()) {
                nbi.get_nbi(b, *rank, me + at).map_err(e2s("get_nbi"))?;
            }
            while !nbi.try_sync_nbi_gets().map_err(e2s("try_sync_nbi_gets"))? {}
        }
        check_bufs(sh, &ranges, &bufs, "get_nbi")?;
    }
    // Value forms of every width.
    for nbytes in 1..=8usize {
        let (rank, _, at) = pick(rng, n);
        let at = at.min(AREA - 8);
        let v = rng.next();
        ext.put_val(rank, me + at, v, nbytes)
            .map_err(e2s("put_val"))?;
        sh.write(rank, at, &v.to_le_bytes()[..nbytes]);
        let got = ext.get_val(rank, me + at, nbytes).map_err(e2s("get_val"))?;
        let mask = if nbytes == 8 {
            u64::MAX
        } else {
            (1u64 << (8 * nbytes)) - 1
        };
        if got != v & mask {
            return Err(format!(
                "get_val({nbytes}) = {got:#x}, expected {:#x}",
                v & mask
            ));
        }
        let v2 = rng.next();
        ext.put_nb_val(rank, me + at, v2, nbytes)
            .map_err(e2s("put_nb_val"))?
            .wait()
            .map_err(e2s("put_nb_val wait"))?;
        sh.write(rank, at, &v2.to_le_bytes()[..nbytes]);
        let mut nbi = ext.nbi();
        nbi.put_nbi_val(rank, me + at + 1, v, nbytes.min(7))
            .map_err(e2s("put_nbi_val"))?;
        nbi.sync_nbi_all().map_err(e2s("sync_nbi_all"))?;
        sh.write(rank, at + 1, &v.to_le_bytes()[..nbytes.min(7)]);
        verify(ext, sh, rank, at, 8, "value forms")?;
    }
    // Segment forms: stage data in this rank's own area of its own segment (quarter 0), put
    // it from there, get it back into quarter 1, then put from quarter 1 and get into
    // quarter 2 through an nbi context. On self, the destination is quarter 3.
    let q = AREA / 4;
    for _ in 0..6 {
        let (rank, len, _) = pick(rng, n);
        let len = len.min(q);
        let mine = ext.rank();
        let (stage, back, again) = (rng.below(q - len + 1), q + rng.below(q - len + 1), 2 * q);
        let dst = if rank == mine {
            3 * q + rng.below(q - len + 1)
        } else {
            rng.below(AREA - len + 1)
        };
        let d = rng.bytes(len as usize);
        ext.put(mine, me + stage, &d).map_err(e2s("stage"))?;
        sh.write(mine, stage, &d);
        ext.put_from_segment(rank, me + dst, me + stage, len)
            .map_err(e2s("put_from_segment"))?;
        sh.write(rank, dst, &d);
        verify(ext, sh, rank, dst, len, "put_from_segment")?;
        ext.get_to_segment(me + back, rank, me + dst, len)
            .map_err(e2s("get_to_segment"))?;
        sh.write(mine, back, &d);
        verify(ext, sh, mine, back, len, "get_to_segment")?;
        // New bytes in quarter 1, so that the nbi put (sent from the segment in place) must
        // carry them for the checks below to pass.
        let d = rng.bytes(len as usize);
        ext.put(mine, me + back, &d).map_err(e2s("restage"))?;
        sh.write(mine, back, &d);
        let mut nbi = ext.nbi();
        nbi.put_nbi_from_segment(rank, me + dst, me + back, len)
            .map_err(e2s("put_nbi_from_segment"))?;
        nbi.sync_nbi_puts().map_err(e2s("segment nbi put sync"))?;
        sh.write(rank, dst, &d);
        nbi.get_nbi_to_segment(me + again, rank, me + dst, len)
            .map_err(e2s("get_nbi_to_segment"))?;
        nbi.sync_nbi_all().map_err(e2s("segment nbi sync"))?;
        sh.write(mine, again, &d);
        verify(ext, sh, mine, again, len, "nbi segment forms")?;
        verify(ext, sh, rank, dst, len, "nbi segment forms")?;
    }
    println!("rank {}: rma ok", ext.rank());
    Ok(())
}

/// The source may be overwritten as soon as each put form returns.
fn overwrite(ext: &Extended, rng: &mut Rng, sh: &mut Shadow) -> Res {
    let n = ext.size();
    let me = area(ext.rank());
    for _ in 0..8 {
        let ranges = pick_disjoint(rng, n, 5);
        let mut srcs: Vec<Vec<u8>> = ranges.iter().map(|r| rng.bytes(r.1 as usize)).collect();
        let want = srcs.clone();
        let ((r0, _, a0), (r1, _, a1), (r2, _, a2), (r3, _, a3), (r4, _, a4)) =
            (ranges[0], ranges[1], ranges[2], ranges[3], ranges[4]);
        ext.put(r0, me + a0, &srcs[0]).map_err(e2s("put"))?;
        srcs[0].fill(0xee);
        ext.put_bulk(r1, me + a1, &srcs[1])
            .map_err(e2s("put_bulk"))?;
        srcs[1].fill(0xee);
        let h = ext.put_nb(r2, me + a2, &srcs[2]).map_err(e2s("put_nb"))?;
        srcs[2].fill(0xee);
        h.wait().map_err(e2s("put_nb wait"))?;
        let mut nbi = ext.nbi();
        nbi.put_nbi(r3, me + a3, &srcs[3]).map_err(e2s("put_nbi"))?;
        srcs[3].fill(0xee);
        nbi.sync_nbi_puts().map_err(e2s("sync_nbi_puts"))?;
        let mut reg = ext.begin_access_region();
        reg.put_nbi(r4, me + a4, &srcs[4])
            .map_err(e2s("region put_nbi"))?;
        srcs[4].fill(0xee);
        reg.end().wait().map_err(e2s("region wait"))?;
        for ((rank, _, at), w) in ranges.iter().zip(&want) {
            sh.write(*rank, *at, w);
        }
        for (rank, len, at) in &ranges {
            verify(ext, sh, *rank, *at, *len, "overwrite after return")?;
        }
        // A segment-sourced put reads the segment before returning.
        let (rank, len, _) = pick(rng, n);
        let len = len.min(AREA / 2);
        let stage = rng.below(AREA / 2 - len + 1);
        let dst = AREA / 2 + rng.below(AREA / 2 - len + 1);
        let d = rng.bytes(len as usize);
        let mine = ext.rank();
        ext.put(mine, me + stage, &d).map_err(e2s("stage"))?;
        let h = ext
            .put_nb_from_segment(rank, me + dst, me + stage, len)
            .map_err(e2s("put_nb_from_segment"))?;
        ext.segment()
            .fill((me + stage) as usize, len as usize, 0xee)
            .map_err(|e| e.to_string())?;
        h.wait().map_err(e2s("put_nb_from_segment wait"))?;
        sh.fill(mine, stage, 0xee, len);
        sh.write(rank, dst, &d);
        verify(
            ext,
            sh,
            rank,
            dst,
            len,
            "segment source overwritten after return",
        )?;
        // A bulk one is sent from the segment in place: the source stays unchanged until the
        // handle completes, and then the target holds exactly those bytes.
        let (rank, len, _) = pick(rng, n);
        let len = len.min(AREA / 2);
        let stage = rng.below(AREA / 2 - len + 1);
        let dst = AREA / 2 + rng.below(AREA / 2 - len + 1);
        let d = rng.bytes(len as usize);
        ext.put(mine, me + stage, &d).map_err(e2s("stage"))?;
        ext.put_nb_bulk_from_segment(rank, me + dst, me + stage, len)
            .map_err(e2s("put_nb_bulk_from_segment"))?
            .wait()
            .map_err(e2s("put_nb_bulk_from_segment wait"))?;
        sh.write(mine, stage, &d);
        sh.write(rank, dst, &d);
        verify(ext, sh, rank, dst, len, "bulk segment put")?;
    }
    println!("rank {}: overwrite ok", ext.rank());
    Ok(())
}

/// Access regions with mixed operations, waited in every way.
fn regions(ext: &Extended, rng: &mut Rng, sh: &mut Shadow) -> Res {
    let n = ext.size();
    let me = area(ext.rank());
    for round in 0..6 {
        let ranges = pick_disjoint(rng, n, 12);
        let (puts, rest) = ranges.split_at(6);
        let (sets, _) = rest.split_at(3);
        let mut reg = ext.begin_access_region();
        for (rank, len, at) in puts {
            let d = rng.bytes(*len as usize);
            reg.put_nbi(*rank, me + at, &d).map_err(e2s("region put"))?;
            sh.write(*rank, *at, &d);
        }
        for (rank, len, at) in sets {
            let b = rng.next() as u8;
            reg.memset_nbi(*rank, me + at, b, *len)
                .map_err(e2s("region memset"))?;
            sh.fill(*rank, *at, b, *len);
        }
        let mut h = reg.end();
        match round % 3 {
            0 => h.wait().map_err(e2s("region wait"))?,
            1 => while !h.try_wait().map_err(e2s("region try_wait"))? {},
            _ => {
                let mut hs = vec![h];
                while !hs.is_empty() {
                    ext.wait_some(&mut hs).map_err(e2s("region wait_some"))?;
                }
            }
        }
        // Read everything back through one region of gets.
        let mut bufs: Vec<Vec<u8>> = ranges.iter().map(|r| vec![0u8; r.1 as usize]).collect();
        {
            let mut reg = ext.begin_access_region();
            for ((rank, _, at), b) in ranges.iter().zip(bufs.iter_mut()) {
                reg.get_nbi(b, *rank, me + at).map_err(e2s("region get"))?;
            }
            let h = reg.end();
            ext.wait_all(vec![h]).map_err(e2s("region wait_all"))?;
        }
        check_bufs(sh, &ranges, &bufs, "region get")?;
    }
    println!("rank {}: regions ok", ext.rank());
    Ok(())
}

fn memset(ext: &Extended, rng: &mut Rng, sh: &mut Shadow) -> Res {
    let n = ext.size();
    let me = area(ext.rank());
    for i in 0..24 {
        let (rank, len, at) = pick(rng, n);
        let b = rng.next() as u8;
        match i % 3 {
            0 => ext.memset(rank, me + at, b, len).map_err(e2s("memset"))?,
            1 => ext
                .memset_nb(rank, me + at, b, len)
                .map_err(e2s("memset_nb"))?
                .wait()
                .map_err(e2s("memset_nb wait"))?,
            _ => {
                let mut nbi = ext.nbi();
                nbi.memset_nbi(rank, me + at, b, len)
                    .map_err(e2s("memset_nbi"))?;
                nbi.sync_nbi_puts().map_err(e2s("memset_nbi sync"))?;
            }
        }
        sh.fill(rank, at, b, len);
        verify(ext, sh, rank, at, len, "memset")?;
    }
    let peer = (ext.rank() + 1) % n;
    let seg = ext.segment_size(peer).unwrap();
    match ext.memset(peer, seg - 4, 1, 5) {
        Err(ExtError::OutsideSegment {
            call: "memset",
            rank,
            offset,
            len: 5,
            segment,
        }) if rank == peer && offset == seg - 4 && segment == seg => {}
        other => return Err(format!("memset past the end: {other:?}")),
    }
    println!("rank {}: memset ok", ext.rank());
    Ok(())
}

fn expect_mismatch(r: Result<(), ExtError>, what: &str) -> Res {
    match r {
        Err(ExtError::BarrierMismatch {
            call: "barrier_wait",
        }) => Ok(()),
        other => Err(format!("{what}: expected BarrierMismatch, got {other:?}")),
    }
}

/// The last rank reaches the barrier 2.5 s after the others, which wait (and, with
/// `RGASNET_STALL_WARNING=1`, say so once on stderr; the test checks that).
fn barrier_stall(ext: &Extended) -> Result<(), String> {
    if ext.rank() + 1 == ext.size() {
        std::thread::sleep(Duration::from_millis(2500));
    }
    ext.barrier().map_err(|e| format!("barrier: {e}"))?;
    println!("rank {}: barrier-stall ok", ext.rank());
    Ok(())
}

fn barrier(ext: &Extended) -> Res {
    let me = ext.rank();
    let n = ext.size();
    let named = BarrierFlags::empty();
    let anon = BarrierFlags::ANONYMOUS;
    for i in 0..50u32 {
        ext.barrier_notify(i, named).map_err(e2s("named notify"))?;
        ext.barrier_wait(i, named).map_err(e2s("named wait"))?;
        ext.barrier().map_err(e2s("anonymous barrier"))?;
    }
    // Named on even ranks, anonymous on odd ranks: not a mismatch.
    let f = if me % 2 == 0 { named } else { anon };
    ext.barrier_notify(77, f).map_err(e2s("mixed notify"))?;
    ext.barrier_wait(77, f).map_err(e2s("mixed wait"))?;
    // Split phase with barrier_try.
    ext.barrier_notify(5, named).map_err(e2s("try notify"))?;
    while !ext.barrier_try(5, named).map_err(e2s("barrier_try"))? {}
    // Rank 0 names another barrier: every rank sees the mismatch.
    let id = if me == 0 { 1 } else { 2 };
    ext.barrier_notify(id, named)
        .map_err(e2s("mismatch notify"))?;
    expect_mismatch(ext.barrier_wait(id, named), "different names")?;
    // The last rank raises MISMATCH on an otherwise anonymous barrier.
    let f = if me == n - 1 {
        anon | BarrierFlags::MISMATCH
    } else {
        anon
    };
    ext.barrier_notify(0, f).map_err(e2s("flag notify"))?;
    expect_mismatch(ext.barrier_wait(0, f), "MISMATCH flag")?;
    // Barriers work again after mismatches.
    ext.barrier().map_err(e2s("barrier after mismatch"))?;
    // Misuse is reported locally.
    match ext.barrier_wait(0, anon) {
        Err(ExtError::BarrierNotNotified {
            call: "barrier_wait",
        }) => {}
        other => return Err(format!("wait without notify: {other:?}")),
    }
    ext.barrier_notify(9, named).map_err(e2s("notify"))?;
    match ext.barrier_notify(9, named) {
        Err(ExtError::BarrierAlreadyNotified) => {}
        other => return Err(format!("notify twice: {other:?}")),
    }
    match ext.barrier_wait(10, named) {
        Err(ExtError::BarrierWaitArgs {
            notify_id: 9,
            wait_id: 10,
            ..
        }) => {}
        other => return Err(format!("wait with another id: {other:?}")),
    }
    ext.barrier_wait(9, named)
        .map_err(e2s("wait after misuse"))?;
    println!("rank {me}: barrier ok");
    Ok(())
}

mod blocking;
mod errors;
mod leave;

pub(crate) const SINK: u8 = 130;

/// Runs `f(t)` on threads `t` = 0..`n` at once and returns the first thread's error (a thread
/// that panicked is one).
pub(crate) fn on_threads(n: u64, f: impl Fn(u64) -> Res + Sync) -> Res {
    let f = &f;
    std::thread::scope(|s| {
        let hs: Vec<_> = (0..n).map(|t| s.spawn(move || f(t))).collect();
        hs.into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect::<Vec<Res>>()
    })
    .into_iter()
    .collect()
}

/// Four threads per rank, each with its own nbi context and its own quarter of the area.
fn threads(ext: &Extended, seed: u64) -> Res {
    let n = ext.size();
    let me = area(ext.rank());
    let quarter = AREA / 4;
    on_threads(4, |t| -> Res {
        let mut rng = Rng::new(seed ^ ((t + 1) * 0x1234_5678));
        let base = me + t * quarter;
        for round in 0..12 {
            let mut nbi = ext.nbi();
            let mut ranges = Vec::new();
            let slot = quarter / 8;
            for i in 0..8 {
                let rank = rng.below(u64::from(n)) as u32;
                let len = (rng.len() % slot).max(1);
                let at = base + i * slot + rng.below(slot - len + 1);
                let d = rng.bytes(len as usize);
                nbi.put_nbi(rank, at, &d).map_err(e2s("thread put_nbi"))?;
                ranges.push((rank, at, d));
            }
            if round % 2 == 0 {
                nbi.sync_nbi_puts().map_err(e2s("thread sync_nbi_puts"))?;
            } else {
                while !nbi.try_sync_nbi_all().map_err(e2s("thread try_sync"))? {}
            }
            let mut bufs: Vec<Vec<u8>> = ranges.iter().map(|r| vec![0u8; r.2.len()]).collect();
            {
                let mut g = ext.nbi();
                for ((rank, at, _), b) in ranges.iter().zip(bufs.iter_mut()) {
                    g.get_nbi(b, *rank, *at).map_err(e2s("thread get_nbi"))?;
                }
                g.sync_nbi_gets().map_err(e2s("thread sync_nbi_gets"))?;
            }
            for ((rank, at, d), b) in ranges.iter().zip(&bufs) {
                compare(&format!("thread {t} rank {rank} at {at}"), b, d)?;
            }
            // Explicit handles from threads too.
            let (rank, at, d) = &ranges[0];
            ext.put_nb(*rank, *at, d)
                .map_err(e2s("thread put_nb"))?
                .wait()
                .map_err(e2s("thread put_nb wait"))?;
        }
        Ok(())
    })?;
    println!("rank {}: threads ok", ext.rank());
    Ok(())
}

/// Every form aimed at this rank itself, checked through the segment directly.
fn self_ops(ext: &Extended, rng: &mut Rng) -> Res {
    let me = ext.rank();
    let base = area(me);
    let seg = ext.segment();
    let read = |at: u64, len: usize| seg.to_vec((base + at) as usize, len).unwrap();
    let d = rng.bytes(100_000);
    ext.put(me, base + 10, &d).map_err(e2s("self put"))?;
    compare("self put", &read(10, d.len()), &d)?;
    let mut b = vec![0u8; d.len()];
    ext.get(&mut b, me, base + 10).map_err(e2s("self get"))?;
    compare("self get", &b, &d)?;
    ext.put_nb(me, base + 200_000, &d[..77])
        .map_err(e2s("self put_nb"))?
        .wait()
        .map_err(e2s("self wait"))?;
    compare("self put_nb", &read(200_000, 77), &d[..77])?;
    let mut nbi = ext.nbi();
    nbi.put_nbi(me, base + 300_000, &d[..5000])
        .map_err(e2s("self put_nbi"))?;
    nbi.sync_nbi_puts().map_err(e2s("self sync"))?;
    drop(nbi);
    compare("self put_nbi", &read(300_000, 5000), &d[..5000])?;
    ext.put_val(me, base + 400_000, 0x0102_0304_0506_0708, 8)
        .map_err(e2s("self put_val"))?;
    let v = ext
        .get_val(me, base + 400_000, 8)
        .map_err(e2s("self get_val"))?;
    if v != 0x0102_0304_0506_0708 {
        return Err(format!("self get_val = {v:#x}"));
    }
    ext.memset(me, base + 500_000, 0xab, 3000)
        .map_err(e2s("self memset"))?;
    compare("self memset", &read(500_000, 3000), &[0xab; 3000])?;
    println!("rank {me}: self ok");
    Ok(())
}

fn main() -> ExitCode {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "rma".into());
    let client = match Client::init() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("ext_conformance: init: {e}");
            return ExitCode::from(2);
        }
    };
    let me = client.rank();
    let n = client.size();
    let cell = Arc::new(OnceLock::new());
    let probe = Arc::new(AtomicU32::new(0));
    let sunk = Arc::new(AtomicU64::new(0));
    let mut handlers = errors::probe_handlers(cell.clone(), probe.clone());
    let sink_count = sunk.clone();
    handlers.push(
        Handler::new("sink", Category::Short, move |_, _, _| {
            sink_count.fetch_add(1, Ordering::Relaxed);
        })
        .at(SINK),
    );
    let ext = match Extended::attach(&client, AREA * u64::from(n), handlers) {
        Ok((e, _)) => e,
        Err(e) => {
            eprintln!("ext_conformance: rank {me}: attach: {e}");
            return ExitCode::from(2);
        }
    };
    if mode == "leave" {
        // The handlers hold no extended-API handle here, so returning drops the last one.
        return leave::leave(&client, ext, &sunk);
    }
    if mode == "memset-left" {
        return leave::memset_left(&client, &ext);
    }
    if mode == "rma-left" {
        return leave::rma_left(&ext);
    }
    if mode == "barrier-left" {
        return leave::barrier_left(&ext);
    }
    if mode == "barrier-notify-left" {
        return leave::barrier_notify_left(&ext);
    }
    if mode == "stopped-peer" {
        return leave::stopped_peer(&ext);
    }
    let _ = cell.set(ext.clone());
    let seed = 0x5eed_0000 + u64::from(me);
    let mut rng = Rng::new(seed);
    let mut sh = Shadow::new(n);
    let r = match mode.as_str() {
        "rma" => rma(&ext, &mut rng, &mut sh),
        "overwrite" => overwrite(&ext, &mut rng, &mut sh),
        "regions" => regions(&ext, &mut rng, &mut sh),
        "memset" => memset(&ext, &mut rng, &mut sh),
        "barrier" => barrier(&ext),
        "barrier-stall" => barrier_stall(&ext),
        "errors" => errors::errors(&ext, &probe),
        "threads" => threads(&ext, seed),
        "blocking-threads" => blocking::blocking_threads(&ext, seed),
        "self" => self_ops(&ext, &mut rng),
        other => Err(format!("unknown mode {other}")),
    };
    if let Err(e) = r {
        // The launcher stops the other ranks.
        eprintln!("ext_conformance: rank {me}: mode {mode}: {e}");
        return ExitCode::from(1);
    }
    // Keep serving the other ranks' one-sided operations until everyone is done.
    if let Err(e) = ext.barrier() {
        eprintln!("ext_conformance: rank {me}: final barrier: {e}");
        return ExitCode::from(1);
    }
    ExitCode::SUCCESS
}
