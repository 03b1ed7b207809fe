//! `PtOptions::LAZY_ACK` on two stacks wired back to back (no sockets, virtual time): a
//! successful ACK waits for the next message to its initiator and leaves in the same datagram
//! (or, alone before an answer, right behind it in a datagram of its own), or leaves on its
//! own once the lazy delay has passed; a refusal is never held back.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

mod back_to_back;

use std::time::{Duration, Instant};

use back_to_back::{phys, Portal, PutTo, Side};
use rgasnet_portals::engine::EqGet;
use rgasnet_portals::stack::{DEFAULT_LAZY_ACK_DELAY, LAZY_RIDE_MIN};
use rgasnet_portals::types::{AckReq, EventKind, NiFail, PtOptions};

const LAZY_PT: u32 = 0;
const EAGER_PT: u32 = 1;

/// Rank `i` of three, with a lazy and an ordinary portal, each with an entry over the sink.
fn side(i: u32, now: Instant) -> Side {
    let portal = |index, options| Portal {
        index,
        options,
        with_entry: true,
    };
    back_to_back::side(
        i,
        3,
        now,
        &[
            portal(LAZY_PT, PtOptions::LAZY_ACK),
            portal(EAGER_PT, PtOptions::empty()),
        ],
    )
}

fn put(s: &mut Side, to: u32, pt: u32, offset: u64, bytes: &[u8], user_ptr: u64, now: Instant) {
    engine_put(s, to, pt, 0, offset, bytes, user_ptr);
    s.stack.pump(now);
}

/// A put to the lazy portal that answers a message from `to` (as an AM reply does); checks
/// that the stack names `to` as the peer answered.
fn answer(s: &mut Side, to: u32, offset: u64, bytes: &[u8], user_ptr: u64, now: Instant) {
    engine_put(s, to, LAZY_PT, 0, offset, bytes, user_ptr);
    assert_eq!(s.stack.pump_answer(now), Some(phys(to)));
}

/// The engine's part of a put that asks for an ACK (the caller pumps).
fn engine_put(
    s: &mut Side,
    rank: u32,
    pt: u32,
    match_bits: u64,
    offset: u64,
    bytes: &[u8],
    user_ptr: u64,
) {
    let to = PutTo {
        rank,
        pt,
        match_bits,
        offset,
        ack: AckReq::Ack,
        user_ptr,
    };
    back_to_back::engine_put(s, to, bytes);
}

/// Moves every datagram `from` has ready to `to`; returns how many went.
fn carry(from: &mut Side, to: &mut Side, now: Instant) -> usize {
    let mut out = Vec::new();
    let mut n = 0;
    while let Some(dest) = from.stack.poll_transmit(now, &mut out) {
        assert_eq!(dest, to.stack.local());
        to.stack.handle_datagram(now, from.stack.local(), &out);
        n += 1;
    }
    to.stack.pump(now);
    n
}

/// `from` puts `bytes` (at `offset` of the lazy portal) to `to`, for whose put `acked` it
/// holds the only lazy ACK: the ACK rides the put, one datagram carries both, and `to` takes
/// the ACK in first.
fn put_with_riding_ack(
    from: &mut Side,
    to: &mut Side,
    offset: u64,
    bytes: &[u8],
    acked: u64,
    now: Instant,
) {
    let rank = to.stack.local().pid - phys(0).pid;
    put(from, rank, LAZY_PT, offset, bytes, 99, now);
    assert_eq!(from.stack.lazy_held(), 0);
    assert_eq!(carry(from, to, now), 1);
    assert_eq!(
        events(to),
        vec![
            (EventKind::Ack, NiFail::Ok, acked),
            (EventKind::Put, NiFail::Ok, 0)
        ]
    );
}

/// Every event waiting on `s`'s queue, as (kind, ni_fail, user_ptr).
fn events(s: &mut Side) -> Vec<(EventKind, NiFail, u64)> {
    let mut got = Vec::new();
    while let EqGet::Event(ev) = s.stack.engine.eq_get(s.eq).unwrap() {
        got.push((ev.kind, ev.ni_fail, ev.user_ptr));
    }
    got
}

#[test]
fn a_lazy_ack_rides_the_next_message_to_its_initiator() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    put(&mut a, 1, LAZY_PT, 0, b"request", 1, t0);
    assert_eq!(carry(&mut a, &mut b, t0), 1);
    assert_eq!(events(&mut b), vec![(EventKind::Put, NiFail::Ok, 0)]);
    assert_eq!(b.sink.to_vec(0, 7).unwrap(), b"request");
    // The ACK is held: b sends nothing although a is waiting for it.
    assert_eq!(b.stack.lazy_held(), 1);
    let later = t0 + Duration::from_micros(10);
    assert_eq!(carry(&mut b, &mut a, later), 0);
    assert!(events(&mut a).is_empty());
    // b's reply to a takes the ACK along: one datagram carries both.
    put_with_riding_ack(&mut b, &mut a, 64, b"reply", 1, later);
    assert_eq!(a.sink.to_vec(64, 5).unwrap(), b"reply");
}

#[test]
fn an_answer_leaves_ahead_of_a_lone_lazy_ack_which_follows_in_a_datagram_of_its_own() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    put(&mut a, 1, LAZY_PT, 0, b"request", 1, t0);
    assert_eq!(carry(&mut a, &mut b, t0), 1);
    assert_eq!(events(&mut b), vec![(EventKind::Put, NiFail::Ok, 0)]);
    assert_eq!(b.stack.lazy_held(), 1);
    // The answer leaves alone: a takes it in without the ACK in front of it...
    answer(&mut b, 0, 64, b"reply", 2, t0);
    assert_eq!(b.stack.lazy_held(), 1);
    assert_eq!(carry(&mut b, &mut a, t0), 1);
    assert_eq!(events(&mut a), vec![(EventKind::Put, NiFail::Ok, 0)]);
    assert_eq!(a.sink.to_vec(64, 5).unwrap(), b"reply");
    // ...and the ACK follows in a datagram of its own once the answer went.
    assert!(b.stack.release_after_send(t0, phys(0)));
    assert_eq!(b.stack.lazy_held(), 0);
    assert_eq!(carry(&mut b, &mut a, t0), 1);
    assert_eq!(events(&mut a), vec![(EventKind::Ack, NiFail::Ok, 1)]);
    // Nothing held: nothing more to send.
    assert!(!b.stack.release_after_send(t0, phys(0)));
    assert_eq!(carry(&mut b, &mut a, t0), 0);
}

#[test]
fn only_the_answered_peer_s_lazy_ack_follows_an_answer() {
    let t0 = Instant::now();
    let (mut a, mut b, mut c) = (side(0, t0), side(1, t0), side(2, t0));
    put(&mut a, 1, LAZY_PT, 0, b"from a", 1, t0);
    put(&mut c, 1, LAZY_PT, 8, b"from c", 3, t0);
    carry(&mut a, &mut b, t0);
    carry(&mut c, &mut b, t0);
    assert_eq!(b.stack.lazy_held(), 2);
    answer(&mut b, 0, 64, b"reply", 2, t0);
    assert_eq!(carry(&mut b, &mut a, t0), 1);
    // a's ACK follows the answer to a; c's stays held for c's next message (or its delay),
    // since c may be waiting for something else and an ACK datagram would cost it a receive.
    assert!(b.stack.release_after_send(t0, phys(0)));
    assert_eq!(b.stack.lazy_held(), 1);
    assert_eq!(carry(&mut b, &mut a, t0), 1);
    assert_eq!(
        events(&mut a),
        vec![
            (EventKind::Put, NiFail::Ok, 0),
            (EventKind::Ack, NiFail::Ok, 1)
        ]
    );
    assert_eq!(carry(&mut b, &mut c, t0), 0);
    assert!(events(&mut c).is_empty());
    // A plain message to c takes c's ACK along.
    put_with_riding_ack(&mut b, &mut c, 0, b"to c", 3, t0);
}

#[test]
fn several_lazy_acks_ride_even_an_answer() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    let held = LAZY_RIDE_MIN as u64;
    for i in 0..held {
        put(&mut a, 1, LAZY_PT, 8 * i, b"request", 10 + i, t0);
    }
    carry(&mut a, &mut b, t0);
    assert_eq!(b.stack.lazy_held(), LAZY_RIDE_MIN);
    // One datagram carries the ACKs, oldest first, and then the answer.
    answer(&mut b, 0, 64, b"reply", 2, t0);
    assert_eq!(b.stack.lazy_held(), 0);
    assert!(!b.stack.release_after_send(t0, phys(0)));
    assert_eq!(carry(&mut b, &mut a, t0), 1);
    let mut want: Vec<_> = (0..held)
        .map(|i| (EventKind::Ack, NiFail::Ok, 10 + i))
        .collect();
    want.push((EventKind::Put, NiFail::Ok, 0));
    assert_eq!(events(&mut a), want);
    assert_eq!(a.sink.to_vec(64, 5).unwrap(), b"reply");
}

#[test]
fn a_lazy_ack_leaves_alone_when_its_delay_runs_out() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    put(&mut a, 1, LAZY_PT, 0, b"x", 9, t0);
    carry(&mut a, &mut b, t0);
    assert_eq!(b.stack.lazy_held(), 1);
    // The transport's deferred bookkeeping comes due at once, the held ACK at its delay.
    let mut deadline = b.stack.poll_timeout().expect("something is due");
    for _ in 0..2 {
        assert!(deadline <= t0 + DEFAULT_LAZY_ACK_DELAY);
        b.stack.handle_timeout(deadline);
        if b.stack.lazy_held() == 0 {
            break;
        }
        deadline = b.stack.poll_timeout().expect("the held ACK has a deadline");
    }
    assert_eq!(b.stack.lazy_held(), 0);
    assert_eq!(carry(&mut b, &mut a, deadline), 1);
    assert_eq!(events(&mut a), vec![(EventKind::Ack, NiFail::Ok, 9)]);
}

#[test]
fn acks_of_an_ordinary_portal_and_refusals_are_not_held() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    put(&mut a, 1, EAGER_PT, 0, b"eager", 3, t0);
    carry(&mut a, &mut b, t0);
    assert_eq!(b.stack.lazy_held(), 0);
    assert_eq!(carry(&mut b, &mut a, t0), 1);
    assert_eq!(events(&mut a), vec![(EventKind::Ack, NiFail::Ok, 3)]);
    // No entry matches: refused, and the refusal leaves at once even on the lazy portal.
    engine_put(&mut a, 1, LAZY_PT, 0xbad, 0, b"unmatched", 4);
    a.stack.pump(t0);
    carry(&mut a, &mut b, t0);
    assert_eq!(b.stack.lazy_held(), 0);
    assert_eq!(carry(&mut b, &mut a, t0), 1);
    assert_eq!(events(&mut a), vec![(EventKind::Ack, NiFail::NoMatch, 4)]);
}

#[test]
fn zero_delay_sends_lazy_acks_at_once() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    b.stack.set_lazy_ack_delay(Duration::ZERO);
    put(&mut a, 1, LAZY_PT, 0, b"now", 5, t0);
    carry(&mut a, &mut b, t0);
    assert_eq!(b.stack.lazy_held(), 0);
    assert_eq!(carry(&mut b, &mut a, t0), 1);
    assert_eq!(events(&mut a), vec![(EventKind::Ack, NiFail::Ok, 5)]);
}
