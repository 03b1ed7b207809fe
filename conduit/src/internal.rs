//! rgasnet's own handlers (indices 0–127). The core AM layer needs none of its own; layers
//! built on the client (extended API) register theirs through
//! [`crate::Client::attach_with_internal`].

use crate::handlers::HandlerTable;

/// Registers the core layer's reserved handlers (none at present).
pub(crate) fn register(_table: &mut HandlerTable) {}
