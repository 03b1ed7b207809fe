//! # rgasnet-bench — microbenchmarks and their comparison tooling
//!
//! Benchmark binaries in the style of GASNet's `testsmall`, `testlarge`, `testam` and
//! `testbarrier`, printing GASNet's line format (see `BENCH-FORMAT.md`) next to raw baselines
//! of the same machine measured in the same run, and `rgasnet-bench compare`, which runs them
//! over every path, repeats, summarises and plots.
//!
//! Module map: [`record`] (one measurement and its line shapes), [`parse`] (reading lines
//! back, rgasnet's or GASNet's), [`stats`] (medians, size sweeps), [`opts`] (options common to
//! the binaries, output sink), [`raw`] (raw baselines between two ranks), [`amsync`] (polling
//! waits and a barrier over the AM layer), [`xbench`] (setup shared by the extended-API
//! benchmarks), [`compare`] (the comparison tool).
#![forbid(unsafe_code)]

pub mod amsync;
pub mod compare;
pub mod opts;
pub mod parse;
pub mod raw;
pub mod raw_tcp;
pub mod record;
pub mod stats;
pub mod xbench;
