//! The status codes every C entry point returns, and the typed error behind each one.

use rgasnet::{AmError, AttachError, InitError};
use rgasnet_extended::{ExtAttachError, ExtError};

/// The call succeeded.
pub const RGASNET_OK: i32 = 0;
/// A NULL pointer, a bad length, a token or handle that is not valid, a reserved handler index.
pub const RGASNET_ERR_BAD_ARG: i32 = 1;
/// Called before `rgasnet_init`, `rgasnet_am_attach` or `rgasnet_segment_bind`, as the call needs.
pub const RGASNET_ERR_NOT_INIT: i32 = 2;
/// Out of memory or of network resources.
pub const RGASNET_ERR_RESOURCE: i32 = 3;
/// A rank outside the job.
pub const RGASNET_ERR_BAD_RANK: i32 = 4;
/// A handler index the AM layer refuses.
pub const RGASNET_ERR_BAD_HANDLER: i32 = 5;
/// A payload above the AM limits, or more than 16 arguments.
pub const RGASNET_ERR_TOO_LARGE: i32 = 6;
/// A remote range outside the target's bound segment.
pub const RGASNET_ERR_OUT_OF_SEGMENT: i32 = 7;
/// The peer has left the job or failed.
pub const RGASNET_ERR_PEER: i32 = 8;
/// A call that a handler may not make.
pub const RGASNET_ERR_IN_HANDLER: i32 = 9;
/// `rgasnet_test` / `rgasnet_try_sync_nbi`: not complete yet (not an error).
pub const RGASNET_ERR_NOT_READY: i32 = 10;
/// The job bootstrap failed (launcher gone, mismatched collective, not started by a launcher).
pub const RGASNET_ERR_BOOTSTRAP: i32 = 11;
/// A bug inside rgasnet (a caught panic); the message says where.
pub const RGASNET_ERR_INTERNAL: i32 = 12;

/// A failed call: its status code and the message `rgasnet_last_error` returns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CError {
    /// One of the `RGASNET_ERR_*` codes.
    pub code: i32,
    /// What went wrong and, where it helps, what to do.
    pub message: String,
}

impl CError {
    /// An error with `code` and `message`.
    pub fn new(code: i32, message: impl Into<String>) -> CError {
        CError {
            code,
            message: message.into(),
        }
    }
}

impl From<InitError> for CError {
    fn from(e: InitError) -> CError {
        let code = match e {
            InitError::Bootstrap(_) => RGASNET_ERR_BOOTSTRAP,
            InitError::Config(_) => RGASNET_ERR_BAD_ARG,
            _ => RGASNET_ERR_RESOURCE,
        };
        CError::new(code, format!("rgasnet_init: {e}"))
    }
}

impl From<AttachError> for CError {
    fn from(e: AttachError) -> CError {
        let code = match e {
            AttachError::Bootstrap(_) => RGASNET_ERR_BOOTSTRAP,
            AttachError::Handler(_) => RGASNET_ERR_BAD_HANDLER,
            AttachError::SegmentTooLarge { .. } => RGASNET_ERR_TOO_LARGE,
            AttachError::NotAttached => RGASNET_ERR_NOT_INIT,
            AttachError::AlreadyAttached | AttachError::SegmentAlreadyBound => RGASNET_ERR_BAD_ARG,
            _ => RGASNET_ERR_RESOURCE,
        };
        CError::new(code, e.to_string())
    }
}

impl From<ExtAttachError> for CError {
    fn from(e: ExtAttachError) -> CError {
        match e {
            ExtAttachError::Attach(a) => a.into(),
            other => CError::new(RGASNET_ERR_RESOURCE, other.to_string()),
        }
    }
}

impl From<AmError> for CError {
    fn from(e: AmError) -> CError {
        let code = match e {
            AmError::NotAttached { .. } => RGASNET_ERR_NOT_INIT,
            AmError::PeerLeft { .. } | AmError::Unreachable { .. } => RGASNET_ERR_PEER,
            AmError::BadRank { .. } => RGASNET_ERR_BAD_RANK,
            AmError::UnregisteredHandler { .. }
            | AmError::WrongCategory { .. }
            | AmError::WrongArgCount { .. } => RGASNET_ERR_BAD_HANDLER,
            AmError::TooManyArgs { .. } | AmError::PayloadTooLarge { .. } => RGASNET_ERR_TOO_LARGE,
            AmError::OutsideSegment { .. } => RGASNET_ERR_OUT_OF_SEGMENT,
            AmError::AlreadyReplied | AmError::ReplyFromReply => RGASNET_ERR_BAD_ARG,
            AmError::InHandler { .. } => RGASNET_ERR_IN_HANDLER,
            _ => RGASNET_ERR_RESOURCE,
        };
        CError::new(code, e.to_string())
    }
}

impl From<ExtError> for CError {
    fn from(e: ExtError) -> CError {
        let code = match e {
            ExtError::BadRank { .. } => RGASNET_ERR_BAD_RANK,
            ExtError::PeerLeft { .. } | ExtError::BarrierPeerLeft { .. } => RGASNET_ERR_PEER,
            ExtError::OutsideSegment { .. } | ExtError::OutsideLocalSegment { .. } => {
                RGASNET_ERR_OUT_OF_SEGMENT
            }
            ExtError::InHandler { .. } => RGASNET_ERR_IN_HANDLER,
            ExtError::Am { .. } => RGASNET_ERR_PEER,
            ExtError::BadValueSize { .. } => RGASNET_ERR_BAD_ARG,
            _ => RGASNET_ERR_RESOURCE,
        };
        CError::new(code, e.to_string())
    }
}

impl From<rgasnet_launcher::BootstrapError> for CError {
    fn from(e: rgasnet_launcher::BootstrapError) -> CError {
        CError::new(RGASNET_ERR_BOOTSTRAP, format!("bootstrap: {e}"))
    }
}
