//! Immediate messages between two interfaces on real UDP sockets: a receiver whose backlog is
//! full stops reading datagrams, and once its owner takes what waits, every message still
//! arrives, in order and exactly once. Every wait is bounded, so a bug fails instead of hanging.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

use std::time::{Duration, Instant};

use rgasnet_portals::engine::{ImmediateBatch, IMMEDIATE_BACKLOG_MAX};
use rgasnet_portals::interface::{Interface, Ni};
use rgasnet_portals::types::{Addressing, Matching, NiKind, ProcessId};
use rgasnet_portals::udp::{UdpConfig, UdpEndpoint};

mod common;
use common::*;

const LOGICAL: NiKind = NiKind {
    matching: Matching::Matching,
    addressing: Addressing::Logical,
};

/// Two interfaces with a logical NI each, ranks 0 and 1.
fn pair() -> (Ni, Ni) {
    let open = || {
        let ep = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
        Interface::new(config(Duration::from_secs(30)), Box::new(ep))
            .unwrap()
            .ni_init(LOGICAL, None)
            .unwrap()
    };
    let (a, b) = (open(), open());
    let map = [a.interface().phys_id(), b.interface().phys_id()];
    a.set_map(&map).unwrap();
    b.set_map(&map).unwrap();
    (a, b)
}

/// One round of the receiver's progress as an AM layer makes it: hold, then flush what the
/// round made due (its acks).
fn round(b: &Ni, take: Option<&mut ImmediateBatch>) {
    let r = b
        .interface()
        .progress_holding(take.map(|out| (b.handle(), out)))
        .unwrap();
    if r.pending_transmit {
        b.interface().flush();
    }
}

fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::yield_now();
    }
}

#[test]
fn a_full_backlog_stops_reading_and_nothing_is_lost() {
    let (a, b) = pair();
    let _sender = Progress::start(a.interface());
    let total = IMMEDIATE_BACKLOG_MAX as u32 + 3000;
    for i in 0..total {
        // Forced: the receiver takes nothing for a while, so confirmations stop coming.
        assert!(a
            .send_immediate(ProcessId::Rank(1), &i.to_le_bytes(), true)
            .unwrap());
    }
    let stats = || b.interface().engine_stats();
    until("the receiver's backlog to fill", || {
        round(&b, None);
        stats().immediates_received >= IMMEDIATE_BACKLOG_MAX as u64
    });
    // Full: further rounds read nothing.
    let datagrams = b.interface().transport_stats().datagrams_in;
    for _ in 0..100 {
        round(&b, None);
    }
    assert_eq!(b.interface().transport_stats().datagrams_in, datagrams);
    let queued = stats().immediates_received;
    assert!(
        queued < u64::from(total),
        "{queued} of {total} already queued"
    );

    // Taking resumes reading; everything arrives in order, once.
    let mut got: Vec<u32> = Vec::new();
    let mut out = ImmediateBatch::default();
    until("every immediate", || {
        round(&b, Some(&mut out));
        for m in out.iter() {
            assert_eq!(m.source, 0);
            got.push(u32::from_le_bytes(m.payload.try_into().unwrap()));
        }
        out.clear();
        got.len() >= total as usize
    });
    assert_eq!(got, (0..total).collect::<Vec<u32>>());
    until("the sender's confirmations", || {
        a.immediates_unconfirmed() == 0
    });
    assert_eq!(stats().immediates_received, u64::from(total));
}
