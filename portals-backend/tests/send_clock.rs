//! An operation's send pass runs on the interface's last clock reading and corrects its
//! timers once the datagram has left (`Interface`'s send clock, `Transport::restamp`): a put
//! issued long after the interface's last call must not find its retransmission timer
//! already expired. Real UDP sockets on 127.0.0.1; every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

use std::time::{Duration, Instant};

use rgasnet_portals::interface::{InterfaceConfig, Ni};
use rgasnet_portals::transport::TransportConfig;
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
    // The timer does run, one timeout later.
    let started = Instant::now();
    while a.interface().transport_stats().rto_expirations == 0 {
        assert!(
            started.elapsed() < T,
            "the unanswered put was never retransmitted"
        );
        std::thread::sleep(Duration::from_millis(5));
        a.interface().progress().unwrap();
    }
    assert!(started.elapsed() >= INITIAL_RTO - Duration::from_millis(5));
}
