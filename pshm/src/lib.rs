//! # rgasnet-pshm — the shared-memory fast path between processes on one host
//!
//! Each rank's segment is a shared-memory object cross-mapped by every process of its
//! supernode; puts and gets to a node peer are `memcpy`, active messages travel through
//! lock-free queues in shared memory (`DESIGN.md` §6). All `unsafe` of this crate lives in its
//! segment and queue modules.
