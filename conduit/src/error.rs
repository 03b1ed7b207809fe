//! The conduit's errors, one enum per operation family.

use crate::handlers::{Category, RegisterError};

/// [`crate::Client::init`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InitError {
    /// The process was not started by `rgasnetrun` (or `mpirun` with the `mpi` feature).
    #[error("{0}")]
    Bootstrap(#[from] rgasnet_launcher::BootstrapError),
    /// An environment variable has a value rgasnet cannot use.
    #[error("configuration: {0}")]
    Config(#[from] crate::config::ConfigError),
    /// The Portals layer could not be set up.
    #[error("Portals network layer: {0}")]
    Portals(#[from] rgasnet_portals::PtlError),
    /// The `ref` Portals engine (the conduit over a Portals 4 library) was asked for in a
    /// build without it.
    #[error("RGASNET_PORTALS=ref: this build of rgasnet has no Portals library path; rebuild with `--features rgasnet/ref-impl` and PORTALS4_DIR set to the library's prefix (scripts/portals4-ref.sh builds Sandia's reference implementation), or unset RGASNET_PORTALS")]
    NoReferenceEngine,
    /// Over a Portals library, the connection warm-up put to `peer` failed.
    #[error("RGASNET_PORTALS=ref: connecting to rank {peer} through the Portals library failed: {why}; is rank {peer} running, and does the library reach it (PTL_IFACE_NAME)?")]
    LibraryConnect {
        /// The rank.
        peer: u32,
        /// What happened.
        why: String,
    },
    /// The Portals library gave this process's two NIs different process ids; the rank map
    /// holds one per rank.
    #[error("RGASNET_PORTALS=ref: the Portals library gave the AM NI the id {am} and the put/get NI the id {rma}; rgasnet needs one id per process (a library that assigns process ids per NI is not supported)")]
    LibraryIds {
        /// The AM NI's id (nid:pid).
        am: String,
        /// The put/get NI's id (nid:pid).
        rma: String,
    },
    /// This host's identity (hostname, boot id) could not be read.
    #[error("reading this host's identity for shared memory: {0}")]
    Host(#[from] rgasnet_pshm::HostError),
    /// The job spans several hosts and this one has no address for them: no bootstrap
    /// connection to follow and no non-loopback address for its name.
    #[error("the job runs on several hosts, but host {host} has no network address for them (its name resolves to no other address than loopback, and no other interface is up); set RGASNET_IFACE to the interface or address that reaches the other hosts")]
    NoNetworkAddress {
        /// This host's name.
        host: String,
    },
    /// Two ranks on different hosts would talk over loopback, which cannot reach across
    /// hosts.
    #[error("rank {rank} on host {host} uses {addr} and rank {peer} on host {peer_host} uses {peer_addr}: a loopback address cannot reach another host; set RGASNET_IFACE (an interface name or IPv4 address) on both to the network that joins them")]
    UnreachablePeer {
        /// This rank.
        rank: u32,
        /// This rank's host name.
        host: String,
        /// This rank's address.
        addr: String,
        /// The peer.
        peer: u32,
        /// The peer's host name.
        peer_host: String,
        /// The peer's address.
        peer_addr: String,
    },
    /// A peer published an address this rank cannot use.
    #[error("rank {rank} published a malformed network address during bootstrap ({len} bytes)")]
    BadPeerAddress {
        /// The peer.
        rank: u32,
        /// Bytes received.
        len: usize,
    },
}

/// [`crate::Client::attach`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttachError {
    /// attach was called twice.
    #[error("attach was already called on this client")]
    AlreadyAttached,
    /// The segment asked for is larger than `GASNET_MAX_SEGSIZE` allows.
    #[error("segment of {requested} bytes exceeds GASNET_MAX_SEGSIZE ({limit} bytes); ask for less or raise GASNET_MAX_SEGSIZE")]
    SegmentTooLarge {
        /// Bytes asked for.
        requested: u64,
        /// The cap.
        limit: u64,
    },
    /// The memory for the segment could not be allocated.
    #[error("cannot allocate a segment of {requested} bytes in this process; ask for less (GASNET_MAX_SEGSIZE caps it)")]
    SegmentAlloc {
        /// Bytes asked for.
        requested: u64,
    },
    /// A handler registration was refused.
    #[error("handler registration: {0}")]
    Handler(#[from] RegisterError),
    /// The bootstrap exchange failed (a peer died, the launcher went away).
    #[error("bootstrap exchange during attach: {0}")]
    Bootstrap(#[from] rgasnet_launcher::BootstrapError),
    /// Setting up Portals resources failed.
    #[error("Portals resources during attach: {0}")]
    Portals(#[from] rgasnet_portals::PtlError),
    /// Setting up shared memory with the supernode failed.
    #[error("shared memory: {0}")]
    Pshm(#[from] rgasnet_pshm::SetupError),
    /// An internal invariant failed (a bug in rgasnet).
    #[error("internal error during attach: {0}")]
    Internal(&'static str),
    /// `bind_segment` before attach.
    #[error("bind_segment: the client is not attached; attach with SegmentSpec::Later first")]
    NotAttached,
    /// `bind_segment` on a client that already has its segment.
    #[error("bind_segment: this client already serves a segment (attach allocated one, or bind_segment ran before)")]
    SegmentAlreadyBound,
    /// A peer published a malformed segment description.
    #[error("rank {rank} published a malformed segment description during attach")]
    BadPeerSegment {
        /// The peer.
        rank: u32,
    },
}

/// An active-message call failed; nothing was sent.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AmError {
    /// The client has not attached yet.
    #[error("{call}: the client is not attached; call attach() first")]
    NotAttached {
        /// The call.
        call: &'static str,
    },
    /// The destination ended its program (see [`crate::Client::has_ended`]): no handler would
    /// run for the message, so nothing was sent. Everything sent to it before it said so is
    /// handled (a leaving rank first runs the handlers of what is already on its way). A
    /// handler's reply gets it when the requester ended without waiting for the answer.
    #[error("{call}: rank {rank} ended its program; nothing more can be sent to it")]
    PeerLeft {
        /// The call.
        call: &'static str,
        /// The rank that left.
        rank: u32,
    },
    /// Destination rank out of range.
    #[error("{call}: rank {rank} is not in this job of {size} ranks")]
    BadRank {
        /// The call.
        call: &'static str,
        /// Rank asked for.
        rank: u32,
        /// Job size.
        size: u32,
    },
    /// No handler is registered at the index.
    #[error("{call}: no handler is registered at index {handler}")]
    UnregisteredHandler {
        /// The call.
        call: &'static str,
        /// The index.
        handler: u8,
    },
    /// The handler was registered for another category.
    #[error("{call}: handler {handler} (`{name}`) is a {registered} handler, called as {called}")]
    WrongCategory {
        /// The call.
        call: &'static str,
        /// The index.
        handler: u8,
        /// Its name.
        name: String,
        /// Registered category.
        registered: Category,
        /// Category of the call.
        called: Category,
    },
    /// The handler was registered with another argument count.
    #[error(
        "{call}: handler {handler} (`{name}`) takes {expected} arguments, called with {given}"
    )]
    WrongArgCount {
        /// The call.
        call: &'static str,
        /// The index.
        handler: u8,
        /// Its name.
        name: String,
        /// Registered count.
        expected: u8,
        /// Count given.
        given: usize,
    },
    /// More than 16 arguments.
    #[error("{call}: {given} arguments exceed the maximum of 16")]
    TooManyArgs {
        /// The call.
        call: &'static str,
        /// Count given.
        given: usize,
    },
    /// Payload over the category's limit.
    #[error("{call}: payload of {len} bytes exceeds the maximum of {max} bytes")]
    PayloadTooLarge {
        /// The call.
        call: &'static str,
        /// Bytes given.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// A Long payload would not fit in the target's segment.
    #[error("{call}: {len} bytes at offset {offset} fall outside rank {rank}'s segment of {segment} bytes")]
    OutsideSegment {
        /// The call.
        call: &'static str,
        /// Target rank.
        rank: u32,
        /// Offset asked for.
        offset: u64,
        /// Payload length.
        len: u64,
        /// Target segment size.
        segment: u64,
    },
    /// A request handler replied twice.
    #[error("a request handler may reply at most once")]
    AlreadyReplied,
    /// A reply handler tried to reply.
    #[error("a reply handler cannot send")]
    ReplyFromReply,
    /// A request, poll or blocking call from inside a handler.
    #[error("{call} cannot be called from inside an AM handler")]
    InHandler {
        /// The call.
        call: &'static str,
    },
    /// The Portals layer failed.
    #[error("{call}: Portals: {source}")]
    Portals {
        /// The call.
        call: &'static str,
        /// The cause.
        #[source]
        source: rgasnet_portals::PtlError,
    },
    /// The shared-memory path failed.
    #[error("{call}: shared memory: {source}")]
    Shm {
        /// The call.
        call: &'static str,
        /// The cause.
        #[source]
        source: rgasnet_pshm::SendError,
    },
    /// [`crate::Client::quiesce`] (or the client's end) ran out of time with sent messages
    /// not yet acknowledged.
    #[error("{call}: {in_flight} active messages (and any unacknowledged puts) not delivered after {waited:?}; a peer stopped polling or has died")]
    Unacknowledged {
        /// The call.
        call: &'static str,
        /// Active messages still waiting for their acknowledgement.
        in_flight: usize,
        /// How long it waited.
        waited: std::time::Duration,
    },
    /// The rank is leaving, everything it sent was delivered, but some peer did not confirm
    /// in time that it has nothing unacknowledged to it (the peer computes without polling,
    /// keeps sending to this rank, or died).
    #[error("{call}: peers did not confirm within {waited:?} that they have nothing unacknowledged to this rank; a peer keeps sending to it, stopped polling or has died")]
    Unconfirmed {
        /// The call.
        call: &'static str,
        /// How long it waited.
        waited: std::time::Duration,
    },
    /// A leaving rank could not hand over everything on shared memory in time: replies its
    /// handlers made still wait for room in a node peer's queue (that peer does not poll), or
    /// a node peer began a message to this rank and never finished it (it died mid-send).
    #[error("{call}: within {waited:?}, {replies} replies did not get into node peers' queues (a node peer stopped polling) or a message to this rank was never finished (a node peer died while sending)")]
    Undrained {
        /// The call.
        call: &'static str,
        /// Replies still waiting for room.
        replies: usize,
        /// How long it waited.
        waited: std::time::Duration,
    },
    /// The target became unreachable.
    #[error("{call}: rank {rank} is unreachable (no answer within RGASNET_PEER_TIMEOUT)")]
    Unreachable {
        /// The call.
        call: &'static str,
        /// The peer.
        rank: u32,
    },
}
