//! # rgasnet-launcher — `rgasnetrun` and the bootstrap protocol
//!
//! The launcher starts the processes of a job (locally, over SSH or under MPI) and serves the
//! bootstrap exchange that the conduit uses at start-up: key-value put/fence/get, allgather,
//! broadcast, barrier and abort (`DESIGN.md` §7).
#![forbid(unsafe_code)]
