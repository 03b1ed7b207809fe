//! Error types of the crate, one per operation family.
#![deny(unsafe_code)]

use std::error::Error as StdError;

/// Creating, opening, mapping or unlinking the shared-memory objects of a node.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// A system call failed.
    #[error("{call}({object}) failed: {source}")]
    Os {
        /// The call, e.g. `shm_open`.
        call: &'static str,
        /// The object or path it was called on.
        object: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The shared-memory file system has less free space than the object needs.
    #[error(
        "not enough shared memory for {object}: {needed} bytes needed, {available} bytes \
         available in {path} (enlarge {path} or use a smaller segment)"
    )]
    NoSpace {
        /// The object that was to be created.
        object: String,
        /// The file system that was checked.
        path: String,
        /// Bytes needed.
        needed: u64,
        /// Bytes available to an unprivileged user.
        available: u64,
    },
    /// A peer's object does not have the expected header or size.
    #[error("shared-memory object {object} is not a valid rgasnet-pshm object: {reason}")]
    BadObject {
        /// The object.
        object: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The configuration passed to setup is inconsistent.
    #[error("invalid pshm configuration: {0}")]
    Config(String),
    /// The caller's bootstrap barrier failed.
    #[error("bootstrap barrier failed during pshm setup ({step})")]
    Barrier {
        /// Which barrier of the setup.
        step: &'static str,
        /// The caller's error.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
}

impl SetupError {
    /// Builds [`SetupError::Os`] from a `nix` error.
    pub(crate) fn os(call: &'static str, object: &str, errno: nix::errno::Errno) -> SetupError {
        SetupError::Os {
            call,
            object: object.to_owned(),
            source: std::io::Error::from_raw_os_error(errno as i32),
        }
    }
}

/// Enqueueing an active message for a node peer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendError {
    /// The receiver's queue has no room now; poll and retry (never blocks).
    #[error("the {queue} queue of rank {dest} is full")]
    Full {
        /// Receiver.
        dest: u32,
        /// `"request"` or `"reply"`.
        queue: &'static str,
    },
    /// The receiver ended its program and closed its queues: nothing would take the message.
    #[error("rank {dest} ended its program and closed its {queue} queue")]
    Closed {
        /// Receiver.
        dest: u32,
        /// `"request"` or `"reply"`.
        queue: &'static str,
    },
    /// More than [`crate::MAX_ARGS`] arguments.
    #[error("{argc} arguments exceed the maximum of {max}")]
    TooManyArgs {
        /// Arguments given.
        argc: usize,
        /// The maximum.
        max: usize,
    },
    /// A Medium payload larger than [`crate::MAX_MEDIUM`] bytes, or a Long longer than
    /// `u32::MAX` bytes.
    #[error("payload of {len} bytes exceeds the maximum of {max}")]
    PayloadTooLarge {
        /// Bytes given.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// The destination is not in this rank's supernode.
    #[error("rank {rank} is not a member of this supernode")]
    NotAPeer {
        /// The rank.
        rank: u32,
    },
}

/// Dequeueing from this rank's own queues.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecvError {
    /// A record violates the queue format: a peer process wrote garbage into shared memory.
    /// The queue stays stopped at this record.
    #[error("{queue} queue is corrupt at position {position}: {reason}")]
    Corrupt {
        /// `"request"` or `"reply"`.
        queue: &'static str,
        /// Ring position of the bad record.
        position: u64,
        /// What is wrong.
        reason: String,
    },
}

/// Learning which host this process runs on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HostError {
    /// `gethostname` failed or returned a name that is not UTF-8.
    #[error("gethostname failed: {0}")]
    Hostname(String),
    /// The boot id file could not be read.
    #[error("cannot read {path}: {source}")]
    BootId {
        /// The file.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The boot id file is empty.
    #[error("{path} is empty")]
    EmptyBootId {
        /// The file.
        path: String,
    },
}

/// Running a baseline measurement.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BaselineError {
    /// Mapping memory or forking the partner process failed.
    #[error(transparent)]
    Setup(#[from] SetupError),
    /// The partner process did not answer in time (it died or never ran).
    #[error("the ping-pong partner process did not answer within {0:?}")]
    PartnerTimeout(std::time::Duration),
    /// The ring ping-pong's partner answered a position with another request's payload.
    #[error("the ping-pong partner answered position {position} with payload {payload}")]
    WrongAnswer {
        /// The position of the request.
        position: u64,
        /// The payload word of the answer (the request's position, when right).
        payload: u64,
    },
    /// Nothing to measure (zero runs or iterations).
    #[error("a baseline needs at least one run and one iteration")]
    Empty,
    /// The barrier floor was asked for more processes than it forks.
    #[error("the barrier floor forks at most {max} processes, not {members}")]
    TooManyMembers {
        /// The number asked for.
        members: u32,
        /// [`crate::baseline::MAX_FLOOR_MEMBERS`].
        max: u32,
    },
    /// The ring ping-pong was asked for a ring of no cells or of more than it maps.
    #[error("the ring ping-pong takes 1 to {max} cells per ring, not {cells}")]
    RingCells {
        /// The number asked for.
        cells: usize,
        /// [`crate::baseline::MAX_RING_CELLS`].
        max: usize,
    },
}
