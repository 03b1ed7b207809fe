//! `AckReq::Confirmed` on two stacks wired back to back (no sockets, virtual time, datagrams
//! carried by hand so that one can be lost): a success sends no ACK message and completes at
//! the initiator from its transport's confirmation, with one full ACK event; a refusal comes
//! as an ACK and is never overtaken by a confirmation, even when its datagram is lost and a
//! later datagram acknowledges the put; a put to the interface itself gets a plain ACK.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

mod back_to_back;

use std::time::{Duration, Instant};

use back_to_back::{Portal, PutTo, Side};
use rgasnet_portals::engine::EqGet;
use rgasnet_portals::types::{AckReq, EventKind, NiFail, PhysId, PtOptions};

/// A flow-controlled portal with a list entry over the sink.
const OPEN_PT: u32 = 0;
/// A flow-controlled portal with no list entry: every put to it is refused (`PT_DISABLED`).
const EMPTY_PT: u32 = 1;

/// Rank `i` of two, with both portals.
fn side(i: u32, now: Instant) -> Side {
    let portal = |index, with_entry| Portal {
        index,
        options: PtOptions::FLOWCTRL,
        with_entry,
    };
    back_to_back::side(i, 2, now, &[portal(OPEN_PT, true), portal(EMPTY_PT, false)])
}

/// `s` puts `bytes` to `offset` of portal `pt` at rank `rank`, asking for `ack`, and pumps.
fn put(s: &mut Side, rank: u32, pt: u32, offset: u64, bytes: &[u8], ack: AckReq, now: Instant) {
    let to = PutTo {
        rank,
        pt,
        match_bits: 0,
        offset,
        ack,
        user_ptr: 0xc0 + u64::from(rank),
    };
    back_to_back::engine_put(s, to, bytes);
    s.stack.pump(now);
}

/// The datagrams `from` has ready now. Pumps after the pass, as the UDP driver does: the
/// acks a pass applies at its end may confirm deliveries.
fn transmit(from: &mut Side, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut datagrams = Vec::new();
    while let Some(dest) = from.stack.poll_transmit(now, &mut out) {
        assert_ne!(dest, from.stack.local());
        datagrams.push(out.clone());
    }
    from.stack.pump(now);
    datagrams
}

/// Hands `datagrams` from `from` to `to`, then pumps `to`.
fn deliver(to: &mut Side, from: PhysId, datagrams: &[Vec<u8>], now: Instant) {
    for d in datagrams {
        to.stack.handle_datagram(now, from, d);
    }
    to.stack.pump(now);
}

/// Runs `s`'s timers that are due at `now`.
fn timers(s: &mut Side, now: Instant) {
    if s.stack.poll_timeout().is_some_and(|t| t <= now) {
        s.stack.handle_timeout(now);
    }
}

/// Every event waiting on `s`'s queue, as (kind, ni_fail, mlength, remote_offset).
fn events(s: &mut Side) -> Vec<(EventKind, NiFail, u64, u64)> {
    let mut got = Vec::new();
    while let EqGet::Event(ev) = s.stack.engine.eq_get(s.eq).unwrap() {
        got.push((ev.kind, ev.ni_fail, ev.mlength, ev.remote_offset));
    }
    got
}

/// Carries datagrams both ways, advancing time (so that retransmission timers fire), until
/// neither side has anything unacknowledged or to send.
fn settle_both(a: &mut Side, b: &mut Side, mut now: Instant) -> Instant {
    for _ in 0..500 {
        timers(a, now);
        timers(b, now);
        let ab = transmit(a, now);
        deliver(b, a.stack.local(), &ab, now);
        let ba = transmit(b, now);
        deliver(a, b.stack.local(), &ba, now);
        if ab.is_empty()
            && ba.is_empty()
            && a.stack.all_acknowledged()
            && b.stack.all_acknowledged()
        {
            return now;
        }
        now += Duration::from_millis(10);
    }
    panic!("the two stacks did not go quiet");
}

#[test]
fn a_success_sends_no_ack_message_and_completes_from_the_confirmation() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    put(&mut a, 1, OPEN_PT, 16, b"confirm!", AckReq::Confirmed, t0);
    let now = settle_both(&mut a, &mut b, t0);

    assert_eq!(b.sink.to_vec(16, 8).unwrap(), b"confirm!");
    assert_eq!(
        events(&mut b),
        vec![(EventKind::Put, NiFail::Ok, 8, 16)],
        "the target runs the put as usual"
    );
    assert_eq!(
        b.stack.transport.stats().messages_sent,
        0,
        "the target sent no ACK message"
    );
    assert_eq!(
        events(&mut a),
        vec![(EventKind::Ack, NiFail::Ok, 8, 16)],
        "one full ACK event, with the length and offset asked for"
    );
    assert_eq!(a.stack.engine.stats().confirmed, 1);
    assert_eq!(a.stack.engine.pending_ops(), 0);

    // Nothing more comes, however long the stacks keep running.
    settle_both(&mut a, &mut b, now + Duration::from_secs(1));
    assert_eq!(events(&mut a), vec![]);
}

#[test]
fn a_refusal_is_not_overtaken_by_a_confirmation_when_its_datagram_is_lost() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    put(&mut a, 1, EMPTY_PT, 0, b"refused!", AckReq::Confirmed, t0);
    let ab = transmit(&mut a, t0);
    deliver(&mut b, a.stack.local(), &ab, t0);
    assert_eq!(
        events(&mut b),
        vec![(EventKind::PtDisabled, NiFail::PtDisabled, 0, 0)],
        "no entry: flow control disables the portal"
    );
    // The refusal's datagram (which also acknowledges the put) is lost.
    let lost = transmit(&mut b, t0);
    assert_eq!(lost.len(), 1);
    // The initiator sends on; the target's next message acknowledges that and, with it, the
    // refused put, but does not carry the refusal: the initiator must not take the
    // acknowledgement for the put's success.
    put(&mut a, 1, OPEN_PT, 0, b"second", AckReq::None, t0);
    let ab = transmit(&mut a, t0);
    deliver(&mut b, a.stack.local(), &ab, t0);
    assert_eq!(events(&mut b), vec![(EventKind::Put, NiFail::Ok, 6, 0)]);
    put(&mut b, 0, OPEN_PT, 0, b"later", AckReq::None, t0);
    let later = transmit(&mut b, t0);
    assert_eq!(later.len(), 1);
    deliver(&mut a, b.stack.local(), &later, t0);
    let ab = transmit(&mut a, t0);
    deliver(&mut b, a.stack.local(), &ab, t0);
    assert_eq!(
        events(&mut a),
        vec![],
        "neither the refusal nor a success yet"
    );
    assert_eq!(a.stack.engine.pending_ops(), 1);

    // The target retransmits the refusal; the initiator learns of it, and only of it.
    settle_both(&mut a, &mut b, t0 + Duration::from_millis(1));
    assert_eq!(
        events(&mut a),
        vec![
            (EventKind::Ack, NiFail::PtDisabled, 0, 0),
            (EventKind::Put, NiFail::Ok, 5, 0),
        ]
    );
    assert_eq!(a.stack.engine.stats().confirmed, 0);
    assert_eq!(a.stack.engine.pending_ops(), 0);
    assert_eq!(a.sink.to_vec(0, 5).unwrap(), b"later");
}

#[test]
fn a_put_to_the_interface_itself_gets_a_plain_ack() {
    let t0 = Instant::now();
    let mut a = side(0, t0);
    put(&mut a, 0, OPEN_PT, 32, b"self", AckReq::Confirmed, t0);
    let mut got = events(&mut a);
    got.sort_by_key(|e| e.0 != EventKind::Put);
    assert_eq!(
        got,
        vec![
            (EventKind::Put, NiFail::Ok, 4, 32),
            (EventKind::Ack, NiFail::Ok, 4, 32),
        ]
    );
    assert_eq!(a.sink.to_vec(32, 4).unwrap(), b"self");
    assert_eq!(a.stack.engine.stats().confirmed, 0, "no transport involved");
    assert_eq!(a.stack.engine.pending_ops(), 0);
}
