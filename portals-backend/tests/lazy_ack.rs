//! `PtOptions::LAZY_ACK` on two stacks wired back to back (no sockets, virtual time): a
//! successful ACK waits for the next message to its initiator and leaves in the same datagram
//! (or, alone before an answer, right behind it in a datagram of its own), or leaves on its
//! own once the lazy delay has passed; a refusal is never held back.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

use std::time::{Duration, Instant};

use rgasnet_portals::engine::{
    CtHandle, Engine, EqGet, EqHandle, MdHandle, MdSpec, MeSpec, NiHandle, PutArgs, RemoteAddr,
};
use rgasnet_portals::stack::{Stack, DEFAULT_LAZY_ACK_DELAY, LAZY_RIDE_MIN};
use rgasnet_portals::transport::{Transport, TransportConfig};
use rgasnet_portals::types::{
    AckReq, Addressing, EventKind, ListKind, Matching, MdOptions, MeOptions, NiFail, NiKind,
    PhysId, ProcessId, PtOptions,
};
use rgasnet_portals::Region;

const KIND: NiKind = NiKind {
    matching: Matching::Matching,
    addressing: Addressing::Logical,
};
const LAZY_PT: u32 = 0;
const EAGER_PT: u32 = 1;
const UID: u32 = 7;

struct Side {
    stack: Stack,
    eq: EqHandle,
    md: MdHandle,
    src: Region,
    sink: Region,
}

fn phys(i: u32) -> PhysId {
    PhysId {
        nid: 0x7f00_0001,
        pid: 5000 + i,
    }
}

fn side(i: u32, now: Instant) -> Side {
    let map = [phys(0), phys(1), phys(2)];
    let cfg = TransportConfig {
        job_key: 0x1a2b,
        ..Default::default()
    };
    let transport = Transport::new(cfg, map[i as usize], 0x100 + u64::from(i), now).unwrap();
    let mut e = Engine::new(map[i as usize], UID, 10 + i);
    let (ni, _) = e.ni_init(KIND, None).unwrap();
    e.set_map(ni, &map).unwrap();
    let eq = e.eq_alloc(ni, 256).unwrap();
    e.pt_alloc(ni, PtOptions::LAZY_ACK, Some(eq), LAZY_PT)
        .unwrap();
    e.pt_alloc(ni, PtOptions::empty(), Some(eq), EAGER_PT)
        .unwrap();
    let sink = Region::new(4096);
    for pt in [LAZY_PT, EAGER_PT] {
        append(&mut e, ni, pt, &sink);
    }
    let src = Region::new(4096);
    let md = e
        .md_bind(
            ni,
            MdSpec {
                region: src.clone(),
                offset: 0,
                length: 4096,
                options: MdOptions::EVENT_SEND_DISABLE,
                eq: Some(eq),
                ct: None::<CtHandle>,
            },
        )
        .unwrap();
    Side {
        stack: Stack::new(e, transport),
        eq,
        md,
        src,
        sink,
    }
}

fn append(e: &mut Engine, ni: NiHandle, pt: u32, sink: &Region) {
    let spec = MeSpec {
        region: sink.clone(),
        offset: 0,
        length: sink.len() as u64,
        ct: None,
        uid: UID,
        options: MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE,
        match_id: ProcessId::Rank(rgasnet_portals::types::RANK_ANY),
        match_bits: 0,
        ignore_bits: 0,
        min_free: 0,
    };
    e.me_append(ni, pt, spec, ListKind::Priority, 0).unwrap();
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

/// The engine's part of a put (the caller pumps).
fn engine_put(
    s: &mut Side,
    to: u32,
    pt: u32,
    match_bits: u64,
    offset: u64,
    bytes: &[u8],
    user_ptr: u64,
) {
    s.src.write(0, bytes).unwrap();
    s.stack
        .engine
        .put(&PutArgs {
            md: s.md,
            local_offset: 0,
            length: bytes.len() as u64,
            ack_req: AckReq::Ack,
            remote: RemoteAddr {
                target: ProcessId::Rank(to),
                pt_index: pt,
                match_bits,
                remote_offset: offset,
            },
            user_ptr,
            hdr_data: 0,
        })
        .unwrap();
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
