//! # rgasnet-tests — multi-process conformance tests
//!
//! The tests in this crate start real jobs through `rgasnetrun` (2–4 ranks, loopback only,
//! each bounded by a timeout) and check every path: shared memory, the native Portals engine
//! over UDP, and mixed (`DESIGN.md` §10).
#![forbid(unsafe_code)]
