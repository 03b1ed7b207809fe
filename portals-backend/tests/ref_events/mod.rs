//! Event helpers shared by the tests of the Portals library path (`ref_ops`, `ref_regions`;
//! feature `ref-impl`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

use std::time::Duration;

use rgasnet_portals::refimpl::ops::RefEq;
use rgasnet_portals::types::{Event, EventKind};

/// Events from `eq` until `n` have come (each within 10 s: the reference implementation
/// takes milliseconds per operation).
pub(crate) fn take(eq: &RefEq<'_>, n: usize) -> Vec<Event> {
    (0..n)
        .map(|i| {
            eq.wait(Duration::from_secs(10))
                .unwrap()
                .unwrap_or_else(|| panic!("event {i} of {n} did not come"))
        })
        .collect()
}

/// The one event of `kind` among `evs` (fails unless there is exactly one).
pub(crate) fn one(evs: &[Event], kind: EventKind) -> Event {
    let found: Vec<&Event> = evs.iter().filter(|e| e.kind == kind).collect();
    assert_eq!(found.len(), 1, "one {kind:?} among {evs:?}");
    *found[0]
}
