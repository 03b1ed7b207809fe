//! # rgasnet — the conduit's public API
//!
//! This crate is what a PGAS runtime links against. It joins a job started by `rgasnetrun`
//! (or `mpirun`), attaches one segment per process, registers active-message handlers and sends
//! Short, Medium and Long active messages whose headers travel in Portals match bits
//! (see `DESIGN.md` §4). Routing picks self, shared memory (`rgasnet-pshm`) or the Portals
//! network layer (`rgasnet-portals`) per destination rank.
//!
//! The client, segments, the core AM layer and configuration land with the core AM issue;
//! until then the crate only states its layer.
#![forbid(unsafe_code)]

pub mod config;
pub mod matchbits;
