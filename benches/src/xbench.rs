//! What the extended-API benchmarks (`testsmall`, `testlarge`, `testbarrier`) share: joining
//! the job, attaching the segment, the raw baselines, who measures against whom, and the
//! records they print.
//!
//! Rank 0 initiates against rank 1 (against itself in a one-rank job); the other ranks only
//! make progress. A target must keep polling for the engine to answer puts and gets, so
//! every test ends in the extended API's barrier, which polls while it waits.

use std::time::{Duration, Instant};

use rgasnet::Client;
use rgasnet_extended::{ExtError, Extended};

use crate::opts::{CommonOpts, Out};
use crate::raw::{self, RawFigures};
use crate::record::{Kind, Record, Unit};

/// A benchmark that could not set up or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum XbenchError {
    /// Joining the job failed.
    #[error("joining the job (start it with rgasnetrun -n 2): {0}")]
    Init(#[from] rgasnet::InitError),
    /// Attaching failed.
    #[error("attach: {0}")]
    Attach(#[from] rgasnet_extended::ExtAttachError),
    /// An extended-API call failed.
    #[error("{what}: {source}")]
    Op {
        /// What the benchmark was doing.
        what: String,
        /// The error.
        #[source]
        source: ExtError,
    },
}

/// Wraps an [`ExtError`] with what was being done.
pub fn op<T>(what: impl Fn() -> String, r: Result<T, ExtError>) -> Result<T, XbenchError> {
    r.map_err(|source| XbenchError::Op {
        what: what(),
        source,
    })
}

/// Times `iters` calls of `f` as one loop (GASNet's figure: no per-operation clock reads, two
/// of which would double a shared-memory put's cost and add a tenth to a shared-memory
/// barrier). With `per_op`, a second loop times each operation for the median that the
/// network targets use. Returns the loop's total and the per-operation times (empty without
/// `per_op`).
pub fn timed(
    iters: u64,
    per_op: bool,
    what: impl Fn() -> String,
    mut f: impl FnMut() -> Result<(), ExtError>,
) -> Result<(Duration, Vec<Duration>), XbenchError> {
    let start = Instant::now();
    for _ in 0..iters {
        op(&what, f())?;
    }
    let total = start.elapsed();
    let mut times = Vec::new();
    if per_op {
        times.reserve(iters as usize);
        for _ in 0..iters {
            let t = Instant::now();
            op(&what, f())?;
            times.push(t.elapsed());
        }
    }
    Ok((total, times))
}

/// The shared state of one benchmark run.
pub struct Xbench {
    /// The extended API (and through it the client).
    pub ext: Extended,
    /// Output (prints on rank 0 only).
    pub out: Out,
    /// This rank initiates the measurements (rank 0).
    pub sender: bool,
    /// The rank the measurements target (1, or 0 in a one-rank job).
    pub peer: u32,
    /// The raw baselines of this run.
    pub raw: RawFigures,
    /// Rank 0 reaches its peer through shared memory (PSHM), so the PSHM targets apply.
    pub on_pshm: bool,
}

impl Xbench {
    /// Joins the job, attaches a segment of `segment_size` bytes and measures the raw
    /// baselines (unless `--no-baseline`). `name` is the program's name for the banner.
    pub fn setup(name: &str, opts: &CommonOpts, segment_size: u64) -> Result<Xbench, XbenchError> {
        let client = Client::init()?;
        let (ext, _) = Extended::attach(&client, segment_size.max(4096), vec![])?;
        let (rank, size) = (client.rank(), client.size());
        let mut out = Out::new(opts.csv, rank == 0);
        let peer = if rank == 0 && size > 1 { 1 } else { 0 };
        out.text(&format!(
            "{name}: {size} ranks, rank 0 -> rank {peer}, {} iterations",
            opts.iters
        ));
        let raw = raw::measure_and_print(&client, opts, &mut out);
        let on_pshm = peer != rank && client.supernode().contains(&peer);
        Ok(Xbench {
            ext,
            out,
            sender: rank == 0,
            peer,
            raw,
            on_pshm,
        })
    }

    /// The blocking barrier every test ends with.
    pub fn barrier(&self) -> Result<(), XbenchError> {
        op(|| "barrier".into(), self.ext.barrier())
    }

    /// Prints a testsmall latency line (`A:  0 -  8 byte : N iters, latency ...`).
    pub fn latency(&mut self, sec: char, figure: &str, size: usize, iters: u64, total: Duration) {
        let total_us = total.as_secs_f64() * 1e6;
        self.out.record(&Record {
            kind: Kind::Latency,
            section: Some(sec),
            rank: Some(0),
            figure: figure.to_string(),
            size: Some(size as u64),
            iters: Some(iters),
            total_us: Some(total_us),
            value: total_us / iters.max(1) as f64,
            unit: Unit::Us,
            bandwidth_mbs: None,
        });
    }

    /// Prints a throughput line (KB/sec = 1000 bytes per second), testsmall's or testlarge's
    /// shape by `kind`.
    pub fn throughput(
        &mut self,
        kind: Kind,
        sec: char,
        figure: &str,
        size: usize,
        iters: u64,
        total: Duration,
    ) {
        let secs = total.as_secs_f64().max(1e-12);
        self.out.record(&Record {
            kind,
            section: Some(sec),
            rank: Some(0),
            figure: figure.to_string(),
            size: Some(size as u64),
            iters: Some(iters),
            total_us: Some(secs * 1e6),
            value: size as f64 * iters as f64 / 1000.0 / secs,
            unit: Unit::KBps,
            bandwidth_mbs: None,
        });
    }
}
