//! # rgasnet-portals — the Portals 4 network layer of rgasnet
//!
//! This crate is one Rust API for the part of the Portals 4 specification that rgasnet uses
//! (see `PORTALS4.md`): network interfaces (matching and non-matching, logical and physical),
//! portal table entries with flow control, match and list entries, memory descriptors, event
//! queues, counting events, and put / get / atomic / fetch-atomic / swap.
//!
//! Behind the API sits the **native engine**, a pure-Rust Portals 4 implementation layered as:
//!
//! - [`wire`]: the datagram codec (magic, version, job key; never panics on any input);
//! - [`transport`]: sans-IO reliable, exactly-once message delivery between interfaces
//!   (sequence numbers, acknowledgements, RTT-derived retransmission, fragmentation);
//! - [`engine`]: sans-IO Portals semantics (matching, deposits, events, counters, atomics, flow
//!   control) operating on messages;
//! - [`udp`] and [`sim`]: the I/O layers, real UDP sockets and a deterministic simulated network;
//! - [`interface`]: the thin driver that ties them together and offers the blocking API that
//!   applications call, with progress made in the caller's `poll`/`wait`.
//!
//! Memory that remote peers access is a [`Region`]: shared, fixed-size bytes that are sound to
//! access concurrently from the engine and the application.
//!
//! Large puts from an `IN_PLACE` memory descriptor and large gets from an `IN_PLACE_REPLY`
//! entry (rgasnet extensions, [`MdOptions::IN_PLACE`], [`MeOptions::IN_PLACE_REPLY`]) are sent
//! from their region itself: the engine's [`message::OutMessage`] carries a [`RegionSpan`]
//! instead of a copy, and the UDP layer gives its address to `sendmsg`. Two more rgasnet
//! extensions serve an active-message layer: [`interface::Ni::put_staged`] sends a put's first
//! datagram from the caller's bytes and copies them into the descriptor's region only after
//! it left, and [`interface::Ni::me_prepend`] puts a match entry first on its list (a receive
//! buffer that comes back is filled again while it is still in cache).
//! [`Region::with_bytes`] lends a byte view of a region whose storage allows it.
//!
//! **Over a Portals library** (feature `ref-impl`): [`refimpl::ni::LibNi`] offers the same
//! calls, handle types and memory ([`Region`]s) over any `libportals` through `portals4-sys`,
//! and [`AnyNi`] is an NI of either engine, so that the conduit holds one type and
//! `RGASNET_PORTALS` chooses at run time (see [`any_ni`] for what a library lacks).
//!
//! The engine also keeps what Portals programs in C rely on (the C library
//! `rgasnet-libportals` exports `portals4.h` over it): an unexpected list per portal table
//! entry, which priority appends and searches take headers from
//! ([`engine::unexpected`]), triggered operations held on counting events
//! ([`engine::triggered`]), acknowledgements with the exact semantics of Portals ACKs that
//! ride on the transport ([`AckReq::ConfirmedAck`], [`AckReq::ConfirmedCtAck`]), and the
//! reference implementation's bounds for accesses past an entry's end
//! ([`PtOptions::PAST_END_EMPTY`]).
//!
//! The datagram link under an interface is the [`link::Link`] trait.
// Unsafe code is allowed in two places only: the UDP layer's gathering send from a region's
// memory (`udp::UdpEndpoint::send_gather_span`; DESIGN.md §9 admits it for the socket layer),
// and the FFI module of the Portals library path (`refimpl`, feature `ref-impl`).
#![deny(unsafe_code)]

pub mod any_ni;
pub mod baseline;
pub mod engine;
pub mod error;
pub mod handle;
pub mod interface;
pub mod link;
pub mod memory;
pub mod message;
pub mod pool;
pub mod proto;
#[cfg(feature = "ref-impl")]
#[allow(unsafe_code)]
pub mod refimpl;
pub mod sim;
pub mod stack;
pub mod transport;
pub mod types;
#[allow(unsafe_code)]
pub mod udp;
pub mod udp_offload;
pub mod wire;

pub use any_ni::{AnyNi, EngineView};
pub use error::{PtlError, PtlResult};
pub use memory::{OutOfBounds, Region, RegionSpan};
pub use message::{OutMessage, Tail};
pub use types::*;
