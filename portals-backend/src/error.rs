//! Errors of the Portals API: the C API's return codes as one typed enum.

/// A failed Portals call. Each variant is a `PTL_*` return code; the ones that can have
/// several causes carry the call that failed and why.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PtlError {
    /// `PTL_ARG_INVALID`: an argument is out of range or inconsistent.
    #[error("{call}: invalid argument: {reason}")]
    ArgInvalid {
        /// The API call.
        call: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A handle that is stale (freed), of another NI or interface, or never issued.
    #[error("{call}: invalid {kind} handle (freed, foreign or never issued)")]
    InvalidHandle {
        /// The API call.
        call: &'static str,
        /// Which kind of handle.
        kind: &'static str,
    },
    /// `PTL_CT_NONE_REACHED`: a counting-event wait timed out.
    #[error("counting-event wait timed out before the threshold was reached")]
    CtNoneReached,
    /// `PTL_EQ_EMPTY`: no event was available.
    #[error("event queue is empty")]
    EqEmpty,
    /// `PTL_FAIL`: generic failure.
    #[error("{call} failed: {reason}")]
    Fail {
        /// The API call.
        call: &'static str,
        /// What went wrong.
        reason: String,
    },
    /// `PTL_IN_USE`: the object is still in use (entries on a PT, operations in flight, ...).
    #[error("{call}: {what} is still in use")]
    InUse {
        /// The API call.
        call: &'static str,
        /// What is in use.
        what: &'static str,
    },
    /// `PTL_LIST_TOO_LONG`: the PT list is at its size limit.
    #[error("list is at its size limit of {limit} entries")]
    ListTooLong {
        /// The limit that was reached.
        limit: u32,
    },
    /// `PTL_NO_SPACE`: a resource limit (entries, MDs, CTs, EQs) is exhausted.
    #[error("{call}: no space: {what} limit of {limit} reached")]
    NoSpace {
        /// The API call.
        call: &'static str,
        /// Which resource.
        what: &'static str,
        /// The limit.
        limit: u64,
    },
    /// `PTL_PT_FULL`: no free portal table index.
    #[error("no free portal table index")]
    PtFull,
    /// `PTL_PT_IN_USE`: the requested PT index is already allocated.
    #[error("portal table index {0} is already allocated")]
    PtInUse(u32),
    /// `PTL_PT_EQ_NEEDED`: flow control was asked for without an event queue.
    #[error("a flow-controlled portal table entry needs an event queue")]
    PtEqNeeded,
    /// `PTL_PID_IN_USE`: an NI of this kind already exists on the interface.
    #[error("an NI of kind {0} already exists on this interface")]
    NiKindInUse(&'static str),
    /// A blocking wait ran out of time.
    #[error("{call} timed out after {millis} ms")]
    Timeout {
        /// The API call.
        call: &'static str,
        /// How long it waited.
        millis: u64,
    },
    /// `PTL_ABORTED`: the interface was shut down during the call.
    #[error("interface was shut down")]
    Aborted,
    /// An I/O error of the transport (socket setup, ...).
    #[error("{call}: {source}")]
    Io {
        /// The API call.
        call: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl PtlError {
    /// Shorthand for [`PtlError::ArgInvalid`].
    pub fn arg(call: &'static str, reason: impl Into<String>) -> Self {
        PtlError::ArgInvalid {
            call,
            reason: reason.into(),
        }
    }
}

/// Result of a Portals call.
pub type PtlResult<T> = Result<T, PtlError>;
