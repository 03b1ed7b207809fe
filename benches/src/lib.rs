//! # rgasnet-bench — microbenchmarks and their comparison tooling
//!
//! Benchmark binaries in the style of GASNet's `testsmall`, `testlarge`, `testam` and
//! `testbarrier`, printing GASNet's line format (see `BENCH-FORMAT.md`) next to raw baselines
//! of the same machine measured in the same run.
#![forbid(unsafe_code)]
