//! Typed errors of the bootstrap library: one enum for the wire codec, one for the bootstrap
//! operations a rank calls, one for the launcher-side server.

use std::io;

/// A frame that cannot be decoded: what the peer sent is not a bootstrap message.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProtoError {
    /// The frame announces more bytes than the protocol allows (a corrupt or foreign stream).
    #[error(
        "frame of {len} bytes exceeds the {max}-byte limit (is the peer an rgasnet bootstrap?)"
    )]
    FrameTooLarge {
        /// Announced length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// The frame ends before a field it must contain.
    #[error("truncated frame: {field} needs {need} more bytes")]
    Truncated {
        /// Which field was being read.
        field: &'static str,
        /// How many bytes were missing.
        need: usize,
    },
    /// The message tag is not one this version knows.
    #[error(
        "unknown message tag {tag:#04x} (launcher and program built from different versions?)"
    )]
    UnknownTag {
        /// The tag byte.
        tag: u8,
    },
    /// A string field is not UTF-8.
    #[error("field {field} is not valid UTF-8")]
    BadUtf8 {
        /// Which field.
        field: &'static str,
    },
    /// A field holds a value outside its domain.
    #[error("field {field} has invalid value {value}")]
    BadValue {
        /// Which field.
        field: &'static str,
        /// The value found.
        value: u64,
    },
    /// Bytes remain after the message was decoded.
    #[error("{extra} unexpected bytes after the message")]
    TrailingBytes {
        /// How many.
        extra: usize,
    },
}

/// A failed bootstrap operation, as seen by a rank.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BootstrapError {
    /// The process was not started by a launcher: no `RGASNET_*` (nor MPI) environment.
    #[error(
        "this process was not started by rgasnetrun ({missing} is not set); start it with \
         `rgasnetrun -n 2 PROGRAM [ARGS...]`{mpi_hint}"
    )]
    NotLaunched {
        /// The first variable that is missing.
        missing: &'static str,
        /// Extra advice about MPI (empty when the `mpi` feature is off).
        mpi_hint: &'static str,
    },
    /// A bootstrap environment variable is set but malformed.
    #[error("environment variable {var}={value:?} is invalid: {reason}; it is set by rgasnetrun, do not set it by hand")]
    BadEnv {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The launcher's bootstrap server cannot be reached.
    #[error("cannot connect to the launcher's bootstrap server at {addr}: {source} (did rgasnetrun exit?)")]
    Connect {
        /// The address tried.
        addr: String,
        /// The socket error.
        #[source]
        source: io::Error,
    },
    /// The launcher refused this process (wrong job key, rank already connected, ...).
    #[error("the launcher refused the bootstrap connection: {reason}")]
    Refused {
        /// The launcher's reason.
        reason: String,
    },
    /// The connection to the launcher broke during an operation: the launcher is gone.
    #[error("{op}: lost the connection to the launcher ({source}); the job is ending")]
    ConnectionLost {
        /// The operation.
        op: &'static str,
        /// The socket error (EOF shows as `UnexpectedEof`).
        #[source]
        source: io::Error,
    },
    /// The launcher sent bytes that are not a valid reply.
    #[error("{op}: malformed reply from the launcher: {source}")]
    Protocol {
        /// The operation.
        op: &'static str,
        /// The decoding error.
        #[source]
        source: ProtoError,
    },
    /// The launcher answered with a reply of the wrong kind.
    #[error("{op}: unexpected reply {got} from the launcher (version mismatch?)")]
    UnexpectedReply {
        /// The operation.
        op: &'static str,
        /// A name for what was received.
        got: &'static str,
    },
    /// `get` of a key that no rank put before the fence.
    #[error("get({key:?}): no rank put this key before the fence")]
    KeyNotFound {
        /// The key.
        key: String,
    },
    /// A collective could not complete (ranks disagree, a rank left, ...).
    #[error("{op} failed: {reason}")]
    Collective {
        /// The operation.
        op: &'static str,
        /// Why, as the coordinator explains it.
        reason: String,
    },
    /// The caller passed arguments the operation cannot accept.
    #[error("{op}: invalid argument: {reason}")]
    InvalidArgument {
        /// The operation.
        op: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// A call of the PMI server's client library (PMIx or PMI-2) failed.
    #[error("{call}: {server} bootstrap failed: {reason}")]
    Pmi {
        /// `PMIx` or `PMI-2`.
        server: &'static str,
        /// The library call (`PMIx_Fence`, `PMI2_KVS_Get`, ...).
        call: &'static str,
        /// The library's error, or what was wrong with its answer.
        reason: String,
    },
    /// An MPI bootstrap operation failed.
    #[error("{op}: MPI bootstrap failed: {reason}")]
    Mpi {
        /// The operation.
        op: &'static str,
        /// What went wrong.
        reason: String,
    },
}

/// A failure of the launcher-side bootstrap server.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServerError {
    /// The listening socket could not be created.
    #[error("cannot listen for bootstrap connections on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The socket error.
        #[source]
        source: io::Error,
    },
    /// A thread could not be started.
    #[error("cannot start the bootstrap server thread: {source}")]
    Thread {
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// An error and its causes on one line, `error: cause: cause`, as `anyhow`'s `{:#}` prints a
/// chain, but without a cause whose text the line already ends with. rgasnet's errors put
/// their cause's text into their own message (so that `to_string` alone says everything) and
/// also return the cause from `source`, so `{:#}` would print it once per layer. For the
/// programs' last word on stderr: `error_chain(err.chain())` of an `anyhow::Error`.
pub fn error_chain<'a>(
    chain: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> String {
    let mut line = String::new();
    for e in chain {
        let text = e.to_string();
        if line.ends_with(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A layer that says its cause in its own message, and returns it as its source.
    #[derive(Debug, thiserror::Error)]
    #[error("{what}: {source}")]
    struct Saying {
        what: &'static str,
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    }

    /// A layer that leaves its cause to `source`.
    #[derive(Debug, thiserror::Error)]
    #[error("{what}")]
    struct Quiet {
        what: &'static str,
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    }

    fn chain<'a>(
        e: &'a (dyn std::error::Error + 'static),
    ) -> Vec<&'a (dyn std::error::Error + 'static)> {
        std::iter::successors(Some(e), |e| e.source()).collect()
    }

    #[test]
    fn each_cause_is_said_once_whether_a_layer_repeats_it_or_not() {
        let root = || ProtoError::Truncated {
            field: "rank",
            need: 4,
        };
        let saying = Saying {
            what: "joining the job",
            source: Box::new(Saying {
                what: "configuration",
                source: Box::new(root()),
            }),
        };
        assert_eq!(
            error_chain(chain(&saying)),
            "joining the job: configuration: truncated frame: rank needs 4 more bytes"
        );
        let quiet = Quiet {
            what: "closing barrier",
            source: Box::new(Saying {
                what: "barrier",
                source: Box::new(root()),
            }),
        };
        assert_eq!(
            error_chain(chain(&quiet)),
            "closing barrier: barrier: truncated frame: rank needs 4 more bytes"
        );
        assert_eq!(error_chain(Vec::new()), "");
    }
}
