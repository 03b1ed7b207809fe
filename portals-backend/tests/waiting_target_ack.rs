//! A put target waiting in `Interface::wait_for`: the ack its initiator waits on (a confirmed
//! acknowledgement's silent success) leaves before the waiter's own check when the put is one
//! the waiter cannot see (a list entry without events or a counter: nobody here will answer
//! it), and is still held for the waiter's answer when the put posted an event. Real UDP
//! sockets on 127.0.0.1, no background progress (nothing but the calls below moves either
//! interface); every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

use std::time::{Duration, Instant};

use rgasnet_portals::engine::{EqGet, EqHandle};
use rgasnet_portals::interface::{InterfaceConfig, Ni};
use rgasnet_portals::types::{AckReq, EventKind, MeOptions, PtOptions};
use rgasnet_portals::udp::UdpConfig;
use rgasnet_portals::Region;

mod common;
use common::*;

/// How long the target's check waits for the ack to reach the initiator. The datagram is
/// on loopback, so it is there within microseconds once sent; a held one never arrives while
/// the target's check runs.
const ACK_WINDOW: Duration = Duration::from_millis(200);

fn quiet() -> Ni {
    let cfg = InterfaceConfig {
        background_progress: None,
        ..config(T)
    };
    open_configured(&UdpConfig::default(), cfg)
}

/// Whether the initiator got its put's ACK event within `window` (making progress on it).
fn ack_arrives(initiator: &Ni, eq: EqHandle, window: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < window {
        match initiator.eq_get(eq).unwrap() {
            EqGet::Event(ev) => {
                assert_eq!(ev.kind, EventKind::Ack, "{ev:?}");
                return true;
            }
            EqGet::Dropped(ev) => panic!("dropped events before {ev:?}"),
            EqGet::Empty => std::thread::yield_now(),
        }
    }
    false
}

/// Puts 8 bytes with a confirmed acknowledgement from a fresh initiator to a fresh target
/// whose list entry has `options` (and a counter when `counted`); the target waits in `wait_for` until the bytes landed and
/// then, still inside its check, watches for the initiator's ACK. Returns whether the ACK
/// reached the initiator before the target's check returned.
fn ack_before_the_targets_check(options: MeOptions, counted: bool) -> bool {
    let target_ni = quiet();
    let initiator = quiet();
    let sink = Region::new(64);
    let ct = counted.then(|| target_ni.ct_alloc().unwrap());
    target_counted(&target_ni, &sink, options, PtOptions::empty(), ct);
    let src = Region::from_bytes(&[0x5a; 8]);
    let eq = initiator.eq_alloc(8).unwrap();
    let smd = md(&initiator, &src, Some(eq));
    // The SEND event comes first; the ACK is what the test watches for.
    let args = rgasnet_portals::engine::PutArgs {
        ack_req: AckReq::ConfirmedAck,
        ..put_args(smd, 8, to(&target_ni, 0))
    };
    initiator.put(&args).unwrap();
    match initiator.eq_get(eq).unwrap() {
        EqGet::Event(ev) => assert_eq!(ev.kind, EventKind::Send, "{ev:?}"),
        other => panic!("expected the SEND event, got {other:?}"),
    }
    let seen = target_ni
        .interface()
        .wait_for(Some(T), |_| {
            let mut landed = [0u8; 8];
            sink.read(0, &mut landed).unwrap();
            if landed != [0x5a; 8] {
                return Ok(None);
            }
            Ok(Some(ack_arrives(&initiator, eq, ACK_WINDOW)))
        })
        .unwrap()
        .expect("the put never landed");
    // Whatever the target held leaves at its next round: the initiator completes either way.
    target_ni.interface().progress().unwrap();
    assert!(
        seen || ack_arrives(&initiator, eq, T),
        "the put never completed"
    );
    seen
}

#[test]
fn a_put_the_waiter_cannot_see_is_acknowledged_before_its_check() {
    // No event and no counter at the target: the ack leaves with the round's transmit.
    assert!(ack_before_the_targets_check(
        MeOptions::OP_PUT | MeOptions::EVENT_SUCCESS_DISABLE,
        false
    ));
}

#[test]
fn a_put_that_posts_an_event_keeps_its_ack_for_the_waiters_answer() {
    // The waiter may answer what it sees; the ack then rides that answer (the ping-pong's
    // saving), so it has not left while the check runs.
    assert!(!ack_before_the_targets_check(MeOptions::OP_PUT, false));
}

#[test]
fn a_counted_put_keeps_its_ack_for_the_waiters_answer() {
    // A counter the waiter may be waiting on (the C ping-pong's `PtlCTWait`) counts as seen.
    assert!(!ack_before_the_targets_check(
        MeOptions::OP_PUT | MeOptions::EVENT_SUCCESS_DISABLE | MeOptions::EVENT_CT_COMM,
        true
    ));
}
