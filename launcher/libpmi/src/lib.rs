//! # rgasnet-libpmi — PMI-1 over rgasnet's bootstrap
//!
//! PMI-1 is the process-manager interface of MPICH's launchers that many C programs start
//! through: the Portals 4 test suites, Sandia OpenSHMEM, older MPI libraries. This crate is a
//! `libpmi` (`-lpmi`, header `include/pmi.h`) whose calls go to the job's bootstrap
//! ([`rgasnet_launcher::Bootstrap`]), so that such programs run under `rgasnetrun -n N`
//! unchanged:
//!
//! - `PMI_Get_rank` / `PMI_Get_size` are the rank and size `rgasnetrun` gave the process;
//! - `PMI_KVS_Put` stores a key in the job's key-value space, `PMI_Barrier` is the bootstrap's
//!   fence (every put before it is visible to every rank after it), `PMI_KVS_Get` reads;
//! - `PMI_Abort` ends the whole job through the launcher with the given code.
//!
//! A process started without `rgasnetrun` is a singleton (rank 0 of 1, a private key-value
//! space), as PMI-1 allows. Layers: [`kvs`] (the state, safe) and `ffi` (the `extern "C"`
//! functions, where this crate's `unsafe` lives).
#![deny(unsafe_code)]

#[allow(unsafe_code)]
mod ffi;
pub mod kvs;

pub use ffi::*;
