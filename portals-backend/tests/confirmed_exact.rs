//! `AckReq::ConfirmedAck` and `ConfirmedCtAck`, the C library's `PTL_ACK_REQ` and
//! `PTL_CT_ACK_REQ`, on two stacks wired back to back (no sockets, virtual time): a success
//! that landed where asked sends no ACK message and completes from the transport's
//! confirmation, with the events and counts of a plain ACK; a deposit into a locally managed
//! entry (elsewhere than asked) is answered with an ACK message that reports the true offset.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

mod back_to_back;

use std::time::{Duration, Instant};

use back_to_back::{Portal, PutTo, Side};
use rgasnet_portals::engine::{EqGet, MdSpec, MeSpec, PutArgs, RemoteAddr};
use rgasnet_portals::types::{
    AckReq, CtEvent, EventKind, ListKind, MdOptions, MeOptions, NiFail, ProcessId, PtOptions,
    RANK_ANY,
};

const PLAIN_PT: u32 = 0;
const MANAGED_PT: u32 = 1;

fn side(i: u32, now: Instant) -> Side {
    let plain = Portal {
        index: PLAIN_PT,
        options: PtOptions::empty(),
        with_entry: true,
    };
    let managed = Portal {
        index: MANAGED_PT,
        options: PtOptions::empty(),
        with_entry: false,
    };
    let mut s = back_to_back::side(i, 2, now, &[plain, managed]);
    let spec = MeSpec {
        region: s.sink.clone(),
        offset: 0,
        length: s.sink.len() as u64,
        ct: None,
        uid: 7,
        options: MeOptions::OP_PUT | MeOptions::MANAGE_LOCAL | MeOptions::EVENT_LINK_DISABLE,
        match_id: ProcessId::Rank(RANK_ANY),
        match_bits: 0,
        ignore_bits: 0,
        min_free: 0,
    };
    s.stack
        .engine
        .me_append(s.ni, MANAGED_PT, spec, ListKind::Priority, 0)
        .unwrap();
    s
}

fn transmit(from: &mut Side, now: Instant) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut datagrams = Vec::new();
    while from.stack.poll_transmit(now, &mut out).is_some() {
        datagrams.push(out.clone());
    }
    from.stack.pump(now);
    datagrams
}

fn settle(a: &mut Side, b: &mut Side, mut now: Instant) {
    for _ in 0..500 {
        for s in [&mut *a, &mut *b] {
            if s.stack.poll_timeout().is_some_and(|t| t <= now) {
                s.stack.handle_timeout(now);
            }
        }
        let ab = transmit(a, now);
        for d in &ab {
            b.stack.handle_datagram(now, a.stack.local(), d);
        }
        b.stack.pump(now);
        let ba = transmit(b, now);
        for d in &ba {
            a.stack.handle_datagram(now, b.stack.local(), d);
        }
        a.stack.pump(now);
        if ab.is_empty()
            && ba.is_empty()
            && a.stack.all_acknowledged()
            && b.stack.all_acknowledged()
        {
            return;
        }
        now += Duration::from_millis(10);
    }
    panic!("the two stacks did not go quiet");
}

fn acks(s: &mut Side) -> Vec<(EventKind, NiFail, u64, u64)> {
    let mut got = Vec::new();
    while let EqGet::Event(ev) = s.stack.engine.eq_get(s.eq).unwrap() {
        if ev.kind == EventKind::Ack {
            got.push((ev.kind, ev.ni_fail, ev.mlength, ev.remote_offset));
        }
    }
    got
}

fn put(s: &mut Side, pt: u32, offset: u64, bytes: &[u8], ack: AckReq, now: Instant) {
    let to = PutTo {
        rank: 1,
        pt,
        match_bits: 0,
        offset,
        ack,
        user_ptr: 1,
    };
    back_to_back::engine_put(s, to, bytes);
    s.stack.pump(now);
}

#[test]
fn a_success_where_asked_needs_no_ack_message() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    put(&mut a, PLAIN_PT, 24, b"exactly!", AckReq::ConfirmedAck, t0);
    settle(&mut a, &mut b, t0);
    assert_eq!(b.sink.to_vec(24, 8).unwrap(), b"exactly!");
    assert_eq!(b.stack.transport.stats().messages_sent, 0, "no ACK message");
    assert_eq!(acks(&mut a), vec![(EventKind::Ack, NiFail::Ok, 8, 24)]);
    assert_eq!(a.stack.engine.stats().confirmed, 1);
}

#[test]
fn a_locally_managed_deposit_is_answered_with_its_true_offset() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    put(&mut a, MANAGED_PT, 100, b"first", AckReq::ConfirmedAck, t0);
    put(&mut a, MANAGED_PT, 100, b"second", AckReq::ConfirmedAck, t0);
    settle(&mut a, &mut b, t0);
    assert_eq!(b.sink.to_vec(0, 11).unwrap(), b"firstsecond");
    assert_eq!(
        b.stack.transport.stats().messages_sent,
        2,
        "one ACK per put"
    );
    assert_eq!(
        acks(&mut a),
        vec![
            (EventKind::Ack, NiFail::Ok, 5, 0),
            (EventKind::Ack, NiFail::Ok, 6, 5)
        ],
        "where the data landed, not the offset asked for"
    );
    // The plain `Confirmed` of rgasnet's active messages stays silent there.
    put(&mut a, MANAGED_PT, 100, b"third", AckReq::Confirmed, t0);
    settle(&mut a, &mut b, t0);
    assert_eq!(b.stack.transport.stats().messages_sent, 2);
    assert_eq!(acks(&mut a), vec![(EventKind::Ack, NiFail::Ok, 5, 100)]);
}

#[test]
fn a_counting_ack_counts_and_posts_no_event() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    let ct = a.stack.engine.ct_alloc(a.ni).unwrap();
    let md = a
        .stack
        .engine
        .md_bind(
            a.ni,
            MdSpec {
                region: a.src.clone(),
                offset: 0,
                length: 64,
                options: MdOptions::EVENT_SEND_DISABLE | MdOptions::EVENT_CT_ACK,
                eq: Some(a.eq),
                ct: Some(ct),
            },
        )
        .unwrap();
    for i in 0..3u64 {
        a.stack
            .engine
            .put(&PutArgs {
                md,
                local_offset: 0,
                length: 8,
                ack_req: AckReq::ConfirmedCtAck,
                remote: RemoteAddr {
                    target: ProcessId::Rank(1),
                    pt_index: PLAIN_PT,
                    match_bits: 0,
                    remote_offset: 8 * i,
                },
                user_ptr: 0,
                hdr_data: 0,
            })
            .unwrap();
    }
    a.stack.pump(t0);
    settle(&mut a, &mut b, t0);
    assert_eq!(
        a.stack.engine.ct_get(ct).unwrap(),
        CtEvent {
            success: 3,
            failure: 0
        }
    );
    assert_eq!(acks(&mut a), vec![], "counted, no full event");
    assert_eq!(b.stack.transport.stats().messages_sent, 0);
}

/// Hands every datagram `from` has to send to `to`; returns how many there were.
fn deliver(from: &mut Side, to: &mut Side, now: Instant) -> usize {
    let datagrams = transmit(from, now);
    for d in &datagrams {
        to.stack.handle_datagram(now, from.stack.local(), d);
    }
    to.stack.pump(now);
    datagrams.len()
}

#[test]
fn the_ack_a_sender_waits_on_leaves_when_the_target_goes_idle() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    put(&mut a, PLAIN_PT, 0, b"waiting!", AckReq::ConfirmedAck, t0);
    assert_eq!(deliver(&mut a, &mut b, t0), 1);
    assert_eq!(b.sink.to_vec(0, 8).unwrap(), b"waiting!");
    // Held for data to ride on, as any ack ...
    assert!(b.stack.has_soon_acks());
    assert_eq!(deliver(&mut b, &mut a, t0), 0);
    // ... until the target goes idle: then it leaves at once, not after the ack delay.
    b.stack.release_soon_acks(t0);
    assert!(!b.stack.has_soon_acks());
    assert_eq!(deliver(&mut b, &mut a, t0), 1);
    assert_eq!(b.stack.transport.stats().standalone_acks, 1);
    // The initiator applies an ack it waits on as it arrives (not at its next timer round,
    // as acks that may wait are): the ACK event is there once the datagram was handled.
    assert_eq!(acks(&mut a), vec![(EventKind::Ack, NiFail::Ok, 8, 0)]);
}

#[test]
fn the_ack_a_sender_waits_on_still_rides_on_an_answer() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    put(&mut a, PLAIN_PT, 0, b"ping", AckReq::ConfirmedAck, t0);
    assert_eq!(deliver(&mut a, &mut b, t0), 1);
    let back = PutTo {
        rank: 0,
        pt: PLAIN_PT,
        match_bits: 0,
        offset: 0,
        ack: AckReq::None,
        user_ptr: 2,
    };
    back_to_back::engine_put(&mut b, back, b"pong");
    b.stack.pump(t0);
    // One datagram: the answer, carrying the ack; going idle afterwards sends nothing more.
    assert_eq!(deliver(&mut b, &mut a, t0), 1);
    b.stack.release_soon_acks(t0);
    assert_eq!(deliver(&mut b, &mut a, t0), 0);
    let stats = b.stack.transport.stats();
    assert_eq!((stats.standalone_acks, stats.piggybacked_acks), (0, 1));
    assert_eq!(a.sink.to_vec(0, 4).unwrap(), b"pong");
    // An ack that came with data is applied off the round trip's path (the initiator's next
    // transmit or timer round): the data is what a ping-pong waits for.
    assert_eq!(acks(&mut a), vec![]);
    a.stack.handle_timeout(t0);
    assert_eq!(acks(&mut a), vec![(EventKind::Ack, NiFail::Ok, 4, 0)]);
}

#[test]
fn an_ack_nobody_waits_on_is_applied_off_the_round_trip() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    // A put whose ACK is a message of its own: the transport's ack of it may wait for the
    // next timer round (its confirmation ends no wait).
    put(&mut a, PLAIN_PT, 0, b"plain", AckReq::Ack, t0);
    assert_eq!(deliver(&mut a, &mut b, t0), 1);
    assert_eq!(deliver(&mut b, &mut a, t0), 1);
    assert_eq!(acks(&mut a), vec![(EventKind::Ack, NiFail::Ok, 5, 0)]);
    assert!(!a.stack.transport.all_acknowledged(), "the ack is deferred");
    a.stack.handle_timeout(t0);
    assert!(a.stack.transport.all_acknowledged());
    // A confirmed ACK in the same state: its ack is applied as it arrives.
    put(&mut a, PLAIN_PT, 8, b"waited", AckReq::ConfirmedAck, t0);
    assert_eq!(deliver(&mut a, &mut b, t0), 1);
    b.stack.release_soon_acks(t0);
    assert_eq!(deliver(&mut b, &mut a, t0), 1);
    assert!(a.stack.transport.all_acknowledged());
    assert_eq!(acks(&mut a), vec![(EventKind::Ack, NiFail::Ok, 6, 8)]);
}

#[test]
fn only_a_confirmed_ack_is_waited_on() {
    let t0 = Instant::now();
    let (mut a, mut b) = (side(0, t0), side(1, t0));
    // rgasnet's own `Confirmed` (active messages, answered by a reply) and a plain ACK (sent
    // as a message of its own) leave the transport's ack to its usual delay.
    put(&mut a, PLAIN_PT, 0, b"am", AckReq::Confirmed, t0);
    put(&mut a, PLAIN_PT, 8, b"plain", AckReq::Ack, t0);
    assert!(deliver(&mut a, &mut b, t0) >= 1);
    assert_eq!(b.sink.to_vec(0, 2).unwrap(), b"am");
    assert_eq!(b.sink.to_vec(8, 5).unwrap(), b"plain");
    assert!(!b.stack.has_soon_acks());
}
