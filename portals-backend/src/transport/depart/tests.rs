//! The departure handshake between transports driven by hand: every datagram is handed over
//! (or dropped) explicitly, and time only moves when a test moves it.

use std::time::{Duration, Instant};

use crate::transport::{Transport, TransportConfig, TransportEvent};
use crate::types::PhysId;
use crate::wire::{Bye, Datagram, Frame};

const KEY: u64 = 0xB1E;

fn id(pid: u32) -> PhysId {
    PhysId {
        nid: 0x7f00_0001,
        pid,
    }
}

fn transport(pid: u32, t0: Instant) -> Transport {
    let cfg = TransportConfig {
        job_key: KEY,
        ..TransportConfig::default()
    };
    Transport::new(cfg, id(pid), u64::from(pid) * 1000 + 1, t0).expect("valid config")
}

/// Every datagram `t` has to send now, with its destination, after what is due (as a driver
/// does: acknowledgements received are applied by the timeout pass).
fn drain(t: &mut Transport, now: Instant) -> Vec<(PhysId, Vec<u8>)> {
    if t.poll_timeout().is_some_and(|d| d <= now) {
        t.handle_timeout(now);
    }
    let mut out = Vec::new();
    let mut dg = Vec::new();
    while let Some(to) = t.poll_transmit(now, &mut dg) {
        out.push((to, dg.clone()));
    }
    out
}

/// The BYE frames of `datagrams`, in order.
fn byes(datagrams: &[(PhysId, Vec<u8>)]) -> Vec<(PhysId, Bye)> {
    datagrams
        .iter()
        .flat_map(|(to, dg)| {
            let parsed = Datagram::parse(dg, KEY).expect("a well-formed datagram");
            parsed
                .frames()
                .filter_map(|f| match f {
                    Ok(Frame::Bye(b)) => Some((*to, b)),
                    _ => None,
                })
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Hands `datagrams` (all from `from`) to `to`, then lets it settle what they made due.
fn deliver(to: &mut Transport, from: PhysId, datagrams: &[(PhysId, Vec<u8>)], now: Instant) {
    for (dest, dg) in datagrams {
        assert_eq!(*dest, to.local(), "a datagram for someone else");
        to.handle_datagram(now, from, dg);
    }
}

/// `a` sends one message to `b`, which receives it and acknowledges it; `a` applies the ack.
fn exchange_one_message(a: &mut Transport, b: &mut Transport, now: Instant) {
    a.send(now, b.local(), vec![7u8; 32]).expect("send");
    let data = drain(a, now);
    deliver(b, a.local(), &data, now);
    assert!(matches!(
        b.poll_event(),
        Some(TransportEvent::Delivered { .. })
    ));
    b.ack_now(now);
    let ack = drain(b, now);
    deliver(a, b.local(), &ack, now);
    drain(a, now);
    assert!(a.all_acknowledged());
}

#[test]
fn a_leaving_transport_has_left_once_its_peer_clears_it() {
    let t0 = Instant::now();
    let (mut a, mut b) = (transport(1, t0), transport(2, t0));
    exchange_one_message(&mut a, &mut b, t0);
    assert!(!a.left(), "b has not answered yet");
    a.leave(t0);
    let ask = drain(&mut a, t0);
    assert_eq!(byes(&ask), vec![(id(2), Bye::Leaving)]);
    // Asked again only after `min_rto`.
    a.leave(t0 + Duration::from_millis(1));
    assert!(drain(&mut a, t0).is_empty());
    assert!(!b.peer_left(id(1)));
    deliver(&mut b, id(1), &ask, t0);
    assert!(b.peer_left(id(1)), "b knows a's program has ended");
    assert!(!b.peer_left(id(3)), "nor any unknown peer");
    let answer = drain(&mut b, t0);
    assert_eq!(byes(&answer), vec![(id(1), Bye::Clear)]);
    // For `b`, whose only peer is leaving, that peer is done with it too.
    assert!(b.left(), "a peer that is leaving itself is done");
    deliver(&mut a, id(2), &answer, t0);
    assert!(a.left());
    // Nothing more to ask.
    a.leave(t0 + Duration::from_secs(1));
    assert!(drain(&mut a, t0 + Duration::from_secs(1)).is_empty());
}

#[test]
fn a_lost_leaving_is_asked_again_after_min_rto() {
    let t0 = Instant::now();
    let (mut a, mut b) = (transport(1, t0), transport(2, t0));
    exchange_one_message(&mut a, &mut b, t0);
    a.leave(t0);
    let lost = drain(&mut a, t0);
    assert_eq!(byes(&lost).len(), 1);
    let retry_at = t0 + TransportConfig::default().min_rto;
    a.leave(retry_at);
    let again = drain(&mut a, retry_at);
    assert_eq!(byes(&again), vec![(id(2), Bye::Leaving)]);
    deliver(&mut b, id(1), &again, retry_at);
    let answer = drain(&mut b, retry_at);
    deliver(&mut a, id(2), &answer, retry_at);
    assert!(a.left());
}

#[test]
fn a_peer_clears_a_leaving_transport_only_once_its_own_data_is_acknowledged() {
    let t0 = Instant::now();
    let (mut a, mut b) = (transport(1, t0), transport(2, t0));
    exchange_one_message(&mut a, &mut b, t0);
    // `b` sends to `a`; `a` gets it, but its ack is lost.
    b.send(t0, id(1), vec![9u8; 64]).expect("send");
    let data = drain(&mut b, t0);
    deliver(&mut a, id(2), &data, t0);
    assert!(matches!(
        a.poll_event(),
        Some(TransportEvent::Delivered { .. })
    ));
    a.ack_now(t0);
    let lost_ack = drain(&mut a, t0);
    assert!(!lost_ack.is_empty());
    // `a` has everything of its own acknowledged, and leaves.
    a.leave(t0);
    let ask = drain(&mut a, t0);
    deliver(&mut b, id(1), &ask, t0);
    let answer = drain(&mut b, t0);
    assert!(byes(&answer).is_empty(), "b still waits for an ack from a");
    assert!(!a.left());
    // `b` retransmits at its timer; `a` acknowledges the duplicate; `b` applies that.
    let later = t0 + Duration::from_millis(50);
    b.handle_timeout(later);
    let resent = drain(&mut b, later);
    assert!(!resent.is_empty(), "b retransmits");
    deliver(&mut a, id(2), &resent, later);
    a.ack_now(later);
    let ack = drain(&mut a, later);
    deliver(&mut b, id(1), &ack, later);
    drain(&mut b, later);
    assert!(b.all_acknowledged());
    // Now asked again, `b` clears `a`.
    a.leave(later);
    let ask = drain(&mut a, later);
    assert_eq!(byes(&ask), vec![(id(2), Bye::Leaving)]);
    deliver(&mut b, id(1), &ask, later);
    let answer = drain(&mut b, later);
    assert_eq!(byes(&answer), vec![(id(1), Bye::Clear)]);
    deliver(&mut a, id(2), &answer, later);
    assert!(a.left());
}

#[test]
fn two_transports_leaving_together_are_done_with_each_other() {
    let t0 = Instant::now();
    let (mut a, mut b) = (transport(1, t0), transport(2, t0));
    exchange_one_message(&mut a, &mut b, t0);
    a.leave(t0);
    b.leave(t0);
    let from_a = drain(&mut a, t0);
    let from_b = drain(&mut b, t0);
    // Only `a`'s announcement arrives; it is enough for `b`, and `b`'s answer for `a`.
    deliver(&mut b, id(1), &from_a, t0);
    assert!(b.left());
    let answer = drain(&mut b, t0);
    assert_eq!(byes(&answer), vec![(id(1), Bye::Clear)]);
    deliver(&mut a, id(2), &answer, t0);
    assert!(a.left());
    assert_eq!(byes(&from_b), vec![(id(1), Bye::Leaving)]);
}

#[test]
fn a_transport_without_peers_has_left_at_once() {
    let t0 = Instant::now();
    let mut a = transport(1, t0);
    assert!(a.left());
    a.leave(t0);
    assert!(drain(&mut a, t0).is_empty());
}

#[test]
fn a_peer_asked_while_busy_answers_clear_when_it_leaves_itself() {
    let t0 = Instant::now();
    let (mut a, mut b) = (transport(1, t0), transport(2, t0));
    exchange_one_message(&mut a, &mut b, t0);
    // `b` has a message to `a` in flight when `a` says it is leaving: no answer yet.
    b.send(t0, id(1), vec![3u8; 16]).expect("send");
    let data = drain(&mut b, t0);
    a.leave(t0);
    let ask = drain(&mut a, t0);
    deliver(&mut b, id(1), &ask, t0);
    assert!(
        byes(&drain(&mut b, t0)).is_empty(),
        "b waits for its ack first"
    );
    // `a` acknowledges the message; `b` applies that and then leaves too. It counts `a` as
    // done (a is leaving), but still owes `a` an answer: it sends `Clear`, not `Leaving`.
    deliver(&mut a, id(2), &data, t0);
    a.ack_now(t0);
    let ack = drain(&mut a, t0);
    deliver(&mut b, id(1), &ack, t0);
    drain(&mut b, t0);
    assert!(b.all_acknowledged());
    assert!(b.left());
    b.leave(t0);
    let answer = drain(&mut b, t0);
    assert_eq!(byes(&answer), vec![(id(1), Bye::Clear)]);
    deliver(&mut a, id(2), &answer, t0);
    assert!(a.left());
}

#[test]
fn an_ended_program_is_told_a_few_times_before_leaving_and_counted_once() {
    let t0 = Instant::now();
    let (mut a, mut b) = (transport(1, t0), transport(2, t0));
    exchange_one_message(&mut a, &mut b, t0);
    // `a` has a message unacknowledged: it cannot say `Leaving` yet, only `Ended`.
    a.send(t0, id(2), vec![1u8; 16]).expect("send");
    let data = drain(&mut a, t0);
    a.announce_end(t0);
    let told = drain(&mut a, t0);
    assert_eq!(byes(&told), vec![(id(2), Bye::Ended)]);
    assert!(!a.left(), "an ended transport has not left");
    // Repeated only after `min_rto`, and three times in all.
    a.announce_end(t0 + Duration::from_millis(1));
    assert!(byes(&drain(&mut a, t0 + Duration::from_millis(1))).is_empty());
    let mut repeats = 0;
    for ms in [6u64, 12, 18, 24] {
        let now = t0 + Duration::from_millis(ms);
        a.announce_end(now);
        repeats += byes(&drain(&mut a, now))
            .iter()
            .filter(|(_, b)| *b == Bye::Ended)
            .count();
    }
    assert_eq!(repeats, 2, "told three times in all");
    assert!(!b.peer_ended(id(1)));
    deliver(&mut b, id(1), &told, t0);
    assert!(b.peer_ended(id(1)), "b knows a's program ended");
    assert!(
        !b.peer_left(id(1)),
        "but not that everything a sent has arrived: a is not leaving yet"
    );
    assert_eq!(b.stats().peers_leaving, 1);
    // The data still arrives, and `b` owes no `Clear` for an `Ended`.
    deliver(&mut b, id(1), &data, t0);
    assert!(byes(&drain(&mut b, t0))
        .iter()
        .all(|(_, b)| *b != Bye::Clear));
    // Once its data is acknowledged, the `Leaving` that follows is the same departure:
    // counted once (as a repeated `Ended` is).
    deliver(&mut b, id(1), &told, t0);
    b.ack_now(t0);
    let ack = drain(&mut b, t0);
    deliver(&mut a, id(2), &ack, t0);
    drain(&mut a, t0);
    assert!(a.all_acknowledged());
    a.leave(t0);
    let ask = drain(&mut a, t0);
    assert_eq!(byes(&ask), vec![(id(2), Bye::Leaving)]);
    deliver(&mut b, id(1), &ask, t0);
    assert!(b.peer_left(id(1)) && b.peer_ended(id(1)));
    assert_eq!(b.stats().peers_leaving, 1);
}

#[test]
fn a_held_message_keeps_a_leaving_peer_waiting_until_released() {
    let t0 = Instant::now();
    let (mut a, mut b) = (transport(1, t0), transport(2, t0));
    exchange_one_message(&mut a, &mut b, t0);
    // `b` refused something of `a`'s, which `a`'s user will send again: not in the transport.
    a.hold(id(2));
    a.hold(id(2));
    b.leave(t0);
    let ask = drain(&mut b, t0);
    assert_eq!(byes(&ask), vec![(id(1), Bye::Leaving)]);
    deliver(&mut a, id(2), &ask, t0);
    assert!(
        byes(&drain(&mut a, t0)).is_empty(),
        "no Clear while a message to b is held"
    );
    // Nor from `a`'s own `leave`, which answers a leaving peer.
    a.leave(t0);
    assert!(byes(&drain(&mut a, t0)).is_empty());
    a.release(id(2));
    deliver(&mut a, id(2), &ask, t0);
    assert!(byes(&drain(&mut a, t0)).is_empty(), "one hold is left");
    a.release(id(2));
    let later = t0 + Duration::from_millis(6);
    b.leave(later);
    let again = drain(&mut b, later);
    deliver(&mut a, id(2), &again, later);
    assert_eq!(byes(&drain(&mut a, later)), vec![(id(2), Bye::Clear)]);
    // An extra release (or one for an unknown peer) changes nothing.
    a.release(id(2));
    a.release(id(9));
}

#[test]
fn a_peer_sent_something_after_its_leaving_must_clear_again() {
    let t0 = Instant::now();
    let (mut a, mut b) = (transport(1, t0), transport(2, t0));
    exchange_one_message(&mut a, &mut b, t0);
    b.leave(t0);
    let ask = drain(&mut b, t0);
    deliver(&mut a, id(2), &ask, t0);
    drain(&mut a, t0); // a's `Clear`, lost
    assert!(
        a.left(),
        "b is leaving with nothing of its own unacknowledged"
    );
    // a sends b something after b's `Leaving` (a resend that b had refused): b answers it,
    // so a may not go on b's old `Leaving`.
    exchange_one_message(&mut a, &mut b, t0);
    assert!(!a.left(), "b's answer may still be unacknowledged");
    a.leave(t0);
    let again = drain(&mut a, t0);
    assert_eq!(
        byes(&again),
        vec![(id(2), Bye::Leaving)],
        "asked again, not told Clear"
    );
    deliver(&mut b, id(1), &again, t0);
    let answer = drain(&mut b, t0);
    assert_eq!(byes(&answer), vec![(id(1), Bye::Clear)]);
    deliver(&mut a, id(2), &answer, t0);
    assert!(a.left());
}
