//! # rgasnet-libportals — the Portals 4 C API over rgasnet's native engine
//!
//! A `libportals` (`-lportals`; `libportals.so.4` and `libportals.a`) that exports the
//! functions of the standard `portals4.h` over [`rgasnet_portals`]' native engine: Portals 4
//! programs written in C (the reference implementation's test suites, OpenSHMEM, MPI's
//! Portals modules) run on it unchanged, reliably over UDP, with no other Portals stack.
//!
//! The types and constants are the standard header's (through `portals4-sys` with its
//! `header-only` feature: bindgen over `portals4.h`, linking nothing), so the ABI is the
//! standard one.
//!
//! What a process gets:
//! - one UDP socket per process (the physical id: `nid` = its IPv4 address, `pid` = its port),
//!   shared by the up to four NIs (matching or not, logical or physical) it opens; the address
//!   is loopback unless `RGASNET_IFACE` (or `PTL_IFACE_NAME`) names an interface or address;
//!   a `pid` other than `PTL_PID_ANY` is the port to bind;
//! - reliable, exactly-once delivery between processes (the engine's transport), with a
//!   silent peer's operations failing as `PTL_NI_UNDELIVERABLE` after `RGASNET_PEER_TIMEOUT`
//!   seconds (default 30);
//! - progress in every call that waits or polls, and a background thread that makes progress
//!   while the program is away (as a NIC would), every `RGASNET_PROGRESS_US` microseconds
//!   (default 1000);
//! - processes started by `rgasnetrun` use its job key on the wire; others a fixed key.
//!
//! Layers: [`table`] (32-bit C handles, validated on every use), [`state`] (the process's
//! Portals state), [`convert`] (C values to the engine's types and back) and `ffi` (the
//! `extern "C"` functions, where this crate's `unsafe` lives).
#![deny(unsafe_code)]

pub mod convert;
#[allow(unsafe_code)]
mod ffi;
pub mod state;
pub mod table;

pub use ffi::*;
