//! # rgasnet-extended — one-sided communication on top of the rgasnet client
//!
//! Put and get (blocking, explicit-handle `nb`, implicit-handle `nbi` and access regions),
//! value forms, memset and barriers, with GASNet's semantics (`DESIGN.md` §5).
//!
//! Remote memory access runs over the client's non-matching Portals NI: one list entry per
//! process covers its whole segment on [`rgasnet::RMA_PT`], so the target posts nothing per
//! operation and sees no event unless something fails. A remote address is a (rank, segment
//! offset) pair, checked at the initiator against the target's segment size (typed error,
//! nothing sent) and again by the target's list entry (`NI_SEGV`, reported as
//! [`ExtError::Remote`]).
//!
//! - Explicit operations ([`Extended::put`], [`Extended::get_nb`], ...) complete through one
//!   event queue of `GASNET_EXTENDED_EVENT_QUEUE_LENGTH` entries, which bounds the network
//!   operations in flight; past it the caller makes progress until room frees up. A blocking
//!   put or get that is one network operation waits in one of 64 slots (`blocking`): no
//!   handle, and none of the locks of the explicit operations' slab.
//! - Implicit operations ([`Nbi`], [`AccessRegion`]) complete through counting events.
//! - Memset and the barrier use active messages on reserved handler indices 16–18; the
//!   barrier is a dissemination barrier (`ceil(log2 n)` rounds).
//! - Every wait runs the AM layer's `poll()` while it waits, and fails with
//!   [`ExtError::InHandler`] inside an AM handler.
//! - Operations on this rank's own segment are direct copies; [`Extended`] keeps that entry
//!   point (`local_segment`) for a node-local shared-memory path.
//!
//! ```no_run
//! use rgasnet::Client;
//! use rgasnet_extended::{BarrierFlags, Extended};
//! let client = Client::init()?;
//! let (ext, _) = Extended::attach(&client, 1 << 20, vec![])?;
//! let peer = (ext.rank() + 1) % ext.size();
//! ext.put(peer, 0, b"hello")?;
//! let mut buf = [0u8; 5];
//! ext.get(&mut buf, peer, 0)?;
//! let mut nbi = ext.nbi();
//! nbi.put_nbi(peer, 64, &[1, 2, 3])?;
//! nbi.sync_nbi_puts()?;
//! ext.barrier_notify(7, BarrierFlags::empty())?;
//! ext.barrier_wait(7, BarrierFlags::empty())?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

mod barrier;
mod blocking;
mod error;
mod explicit;
mod ext;
mod handle;
mod memset;
mod nbi;
mod ops;
mod small;

pub use barrier::BarrierFlags;
pub use error::{ExtAttachError, ExtError};
pub use explicit::NbHandle;
pub use ext::{Extended, PendingExtended, NB_WINDOW_BYTES};
pub use nbi::{AccessRegion, Nbi, NBI_WINDOW, NBI_WINDOW_BYTES};
pub use rgasnet_portals::NiFail;
