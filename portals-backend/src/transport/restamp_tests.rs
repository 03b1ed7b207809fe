//! `Transport::restamp`: a send pass run on an old clock reading (as an interface's operations
//! run theirs, see `interface::State::clock`) and corrected afterwards starts its timers at the
//! corrected time: no retransmission and no peer failure comes early by the reading's age.
//! Each test has a control that leaves the pass uncorrected and sees the early timer, so that
//! the test shows what the correction changes.

use super::tests::id;
use super::*;

const KEY: u64 = 0x2e57;

fn sender(t0: Instant, peer_timeout: Duration) -> Transport {
    let c = TransportConfig {
        job_key: KEY,
        peer_timeout,
        ..TransportConfig::default()
    };
    Transport::new(c, id(1), 7, t0).unwrap()
}

/// Sends one 8-byte message to a peer that never answers in a pass run at `stale`; with
/// `fresh`, corrects the pass to it. Returns the transport with the message in flight.
fn one_put(
    t0: Instant,
    peer_timeout: Duration,
    stale: Instant,
    fresh: Option<Instant>,
) -> Transport {
    let mut t = sender(t0, peer_timeout);
    let mut out = Vec::new();
    t.send(stale, id(2), vec![5u8; 8]).unwrap();
    assert_eq!(
        t.poll_transmit(stale, &mut out),
        Some(id(2)),
        "the put left"
    );
    assert_eq!(t.poll_transmit(stale, &mut out), None);
    if let Some(fresh) = fresh {
        t.restamp(stale, fresh);
    }
    t
}

/// Runs the timers at `at`; how many datagrams that sent.
fn datagrams_at(t: &mut Transport, at: Instant) -> usize {
    t.handle_timeout(at);
    let mut out = Vec::new();
    let mut n = 0;
    while t.poll_transmit(at, &mut out).is_some() {
        n += 1;
    }
    n
}

#[test]
fn a_corrected_pass_retransmits_one_timeout_after_the_fresh_reading() {
    let t0 = Instant::now();
    let stale = t0 + Duration::from_secs(1);
    let fresh = stale + Duration::from_millis(50);
    let rto = TransportConfig::default().initial_rto;
    let long = Duration::from_secs(3600);

    let mut control = one_put(t0, long, stale, None);
    assert_eq!(
        datagrams_at(&mut control, stale + rto + Duration::from_millis(1)),
        1,
        "uncorrected, the frame is retransmitted one timeout after the stale reading"
    );

    let mut t = one_put(t0, long, stale, Some(fresh));
    assert_eq!(
        datagrams_at(&mut t, stale + rto + Duration::from_millis(1)),
        0
    );
    assert_eq!(
        datagrams_at(&mut t, fresh + rto - Duration::from_millis(1)),
        0
    );
    assert_eq!(t.stats().rto_expirations, 0);
    assert_eq!(
        datagrams_at(&mut t, fresh + rto + Duration::from_millis(1)),
        1,
        "retransmitted one timeout after the fresh reading"
    );
    assert_eq!(t.stats().rto_expirations, 1);
}

/// Runs every timer from `from` on, in the order they fall due, until the peer fails; when.
fn failure_time(t: &mut Transport, from: Instant) -> Instant {
    let mut out = Vec::new();
    let mut now = from;
    for _ in 0..10_000 {
        now = t
            .poll_timeout()
            .expect("a timer while the put is unanswered")
            .max(now);
        t.handle_timeout(now);
        while t.poll_transmit(now, &mut out).is_some() {}
        while let Some(ev) = t.poll_event() {
            if ev == (TransportEvent::PeerFailed { peer: id(2) }) {
                return now;
            }
        }
    }
    panic!("the silent peer never failed");
}

#[test]
fn a_corrected_pass_declares_a_silent_peer_failed_one_timeout_after_the_fresh_reading() {
    let t0 = Instant::now();
    let peer_timeout = Duration::from_millis(300);
    let stale = t0 + Duration::from_secs(1);
    let fresh = stale + Duration::from_millis(200);

    let mut control = one_put(t0, peer_timeout, stale, None);
    let failed = failure_time(&mut control, stale);
    assert!(
        failed < fresh + peer_timeout,
        "uncorrected, the peer fails one timeout after the stale reading ({:?})",
        failed - stale
    );

    let mut t = one_put(t0, peer_timeout, stale, Some(fresh));
    let failed = failure_time(&mut t, stale);
    assert!(
        failed >= fresh + peer_timeout,
        "failed {:?} after the fresh reading",
        failed - fresh
    );
    assert!(t.is_failed(id(2)));
}
