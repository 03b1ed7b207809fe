//! An operation's send pass runs on the interface's last clock reading and corrects its
//! timers once the datagram has left (`Interface`'s send clock, `Transport::restamp`): a put
//! issued long after the interface's last call must not find its retransmission timer
//! already expired. So does a spinning wait's lean round that answers what it received.
//! Real UDP sockets on 127.0.0.1; every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

use std::time::{Duration, Instant};

use rgasnet_portals::interface::{InterfaceConfig, Ni};
use rgasnet_portals::transport::TransportConfig;
use rgasnet_portals::types::MeOptions;
use rgasnet_portals::udp::UdpConfig;
use rgasnet_portals::Region;

mod common;
use common::*;

/// The retransmission timeout before any round-trip sample: long enough that the test's
/// own calls (microseconds apart) never reach it on a loaded machine.
const INITIAL_RTO: Duration = Duration::from_millis(200);

/// An interface without background progress: nothing reads its clock between its calls.
fn quiet() -> Ni {
    let cfg = InterfaceConfig {
        transport: TransportConfig {
            initial_rto: INITIAL_RTO,
            ..config(T).transport
        },
        background_progress: None,
        ..config(T)
    };
    open_configured(&UdpConfig::default(), cfg)
}

#[test]
fn a_put_after_a_long_pause_is_retransmitted_one_timeout_after_it_left() {
    let a = quiet();
    // Never called after this: it receives nothing, so it acknowledges nothing.
    let silent = quiet();
    let src = Region::from_bytes(&[4; 64]);
    let smd = md(&a, &src, None);
    // The interface's last clock reading is now older than a whole retransmission timeout.
    std::thread::sleep(INITIAL_RTO + Duration::from_millis(100));
    a.put(&put_args(smd, 8, to(&silent, 0))).unwrap();
    a.interface().progress().unwrap();
    assert_eq!(
        a.interface().transport_stats().rto_expirations,
        0,
        "the put's timer started when it left, not at the reading before the pause"
    );
    assert_retransmitted_one_timeout_later(&a, "the unanswered put");
}

#[test]
fn an_answer_from_a_lean_round_after_a_long_pause_is_retransmitted_one_timeout_after_it_left() {
    let b = quiet();
    // Sends one get and is never called again: it acknowledges nothing, not even the reply.
    let a = quiet();
    let data = Region::from_bytes(&[7; 64]);
    let _eq = target(&b, &data, MeOptions::OP_GET);
    let dst = Region::from_bytes(&[0; 64]);
    let args = get_args(md(&a, &dst, None), 0, 8, to(&b, 0));
    let (go, gate) = std::sync::mpsc::channel::<()>();
    let getter = std::thread::spawn(move || {
        gate.recv().unwrap();
        a.get(&args).unwrap();
        a // kept open, so that the reply lands in a socket
    });
    // The wait looks before its first round (look 1) and at that full round's end (look 2),
    // then spins in lean rounds. At look 2 the get leaves and the wait pauses: the request
    // arrives meanwhile, and a lean round receives and answers it while the last clock
    // reading is older than a whole retransmission timeout.
    let mut looks = 0;
    let answered = b
        .interface()
        .wait_for(Some(T), |e| {
            looks += 1;
            if looks == 2 {
                go.send(()).unwrap();
                std::thread::sleep(INITIAL_RTO + Duration::from_millis(100));
            }
            Ok((e.stats().requests > 0).then_some(looks))
        })
        .unwrap();
    assert_eq!(
        answered,
        Some(3),
        "the request was answered in the first lean round"
    );
    b.interface().progress().unwrap();
    assert_eq!(
        b.interface().transport_stats().rto_expirations,
        0,
        "the reply's timer started when it left, not at the reading before the pause"
    );
    assert_retransmitted_one_timeout_later(&b, "the unacknowledged reply");
    drop(getter.join().unwrap());
}

/// Makes progress on `ni` until its first retransmission timeout expires, which must come
/// about one timeout from now (its only frame in flight left just before).
fn assert_retransmitted_one_timeout_later(ni: &Ni, what: &str) {
    let started = Instant::now();
    while ni.interface().transport_stats().rto_expirations == 0 {
        assert!(started.elapsed() < T, "{what} was never retransmitted");
        std::thread::sleep(Duration::from_millis(5));
        ni.interface().progress().unwrap();
    }
    assert!(started.elapsed() >= INITIAL_RTO - Duration::from_millis(5));
}
