//! # rgasnet — the conduit's public API
//!
//! This crate is what a PGAS runtime links against. It joins a job started by `rgasnetrun`
//! (or `mpirun`), attaches one segment per process, registers active-message handlers and sends
//! Short, Medium and Long active messages whose headers travel in Portals match bits
//! (`DESIGN.md` §4), over the Portals network layer (`rgasnet-portals`). Over the network a
//! Short travels as an immediate message of that layer instead (`short`): it has no payload
//! for Portals to place, and skipping the placement takes about a fifth off its round trip.
//!
//! ```no_run
//! use rgasnet::{Category, Client, Handler};
//! let client = Client::init()?;
//! let ids = client.attach(1 << 20, vec![
//!     Handler::new("ping", Category::Short, |token, args, _| {
//!         token.reply_short(129, args).expect("reply");
//!     }).at(128),
//!     Handler::new("pong", Category::Short, |_, _, _| {}).at(129),
//! ])?;
//! client.am_request_short((client.rank() + 1) % client.size(), ids[0], &[42])?;
//! client.poll()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Module map: [`config`] (every environment variable), [`matchbits`] (the AM header in match
//! bits), `payload` (the AM body), [`handlers`] (the handler table), `client` (init, attach),
//! `send` and `recv` (the AM protocol over Portals), `short` (network Shorts), [`Token`]
//! (what a handler gets).
#![forbid(unsafe_code)]

mod am;
mod client;
pub mod config;
pub mod error;
mod finish;
pub mod handlers;
mod internal;
pub mod matchbits;
mod net;
mod node_barrier;
mod payload;
mod recv;
mod scratch;
mod send;
mod shm;
mod short;
mod stall;
mod stats;
mod token;

pub use client::{
    buffer_region, AttachSpec, Client, Limits, OpenHandlerFn, SegmentSpec, AM_PT, LONG_DATA_PT,
    MAX_LONG, MAX_MEDIUM, RMA_PT,
};
pub use error::{AmError, AttachError, InitError};
pub use finish::LINGER_QUIET;
pub use handlers::{Category, Handler, RegisterError};
pub use node_barrier::NodeBarrierTicket;
pub use recv::in_handler;
pub use rgasnet_pshm::{BarrierName, BarrierWaiting, MappedSegment};
pub use stall::StallClock;
pub use stats::AmStats;
pub use token::Token;
