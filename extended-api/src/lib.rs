//! # rgasnet-extended — one-sided communication on top of the rgasnet client
//!
//! Put and get (blocking, explicit-handle `nb`, implicit-handle `nbi`), memset and barriers.
//! Remote memory access runs over a non-matching Portals NI with one list entry per process
//! covering its whole segment, so the target posts nothing per operation (`DESIGN.md` §5).
//! Same-host peers use the shared-memory path.
#![forbid(unsafe_code)]
