//! The driver end to end on real UDP sockets on 127.0.0.1: several `Interface`s in this test
//! process, each with its own socket. Every wait is bounded, so a bug fails instead of hanging.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use rgasnet_portals::engine::{
    AtomicArgs, EqGet, EqHandle, FetchArgs, GetArgs, PutArgs, RemoteAddr,
};
use rgasnet_portals::interface::{Interface, InterfaceConfig, Ni};
use rgasnet_portals::proto::{self, OpKind, RequestHeader};
use rgasnet_portals::types::{
    AckReq, AtomicOp, AtomicType, Event, EventKind, MeOptions, NiFail, PhysId, ProcessId, RANK_ANY,
};
use rgasnet_portals::udp::{UdpConfig, UdpEndpoint, UdpError};
use rgasnet_portals::wire::{self, Header};
use rgasnet_portals::Region;

mod common;
use common::*;

#[test]
fn put_get_and_atomics_between_two_interfaces() {
    let (a, b) = (open(), open());
    let _p = Progress::start(b.interface());
    let tmem = Region::new(4096);
    let teq = target(&b, &tmem, MeOptions::OP_PUT | MeOptions::OP_GET);
    let eq = a.eq_alloc(64).unwrap();
    let src = Region::from_bytes(&pattern(1000, 3));
    let smd = md(&a, &src, Some(eq));

    // Put 1000 bytes at offset 100: SEND, then ACK; the target sees PUT.
    a.put(&put_args(smd, 1000, to(&b, 100))).unwrap();
    let common = Event {
        user_ptr: 0x51,
        hdr_data: 0xdada,
        rlength: 1000,
        mlength: 1000,
        remote_offset: 100,
        initiator: phys(&b),
        ..event(EventKind::Send)
    };
    assert_eq!(next(&a, eq), common);
    assert_eq!(
        next(&a, eq),
        Event {
            kind: EventKind::Ack,
            ..common
        }
    );
    let put_ev = Event {
        kind: EventKind::Put,
        start: 100,
        user_ptr: 0x7a,
        initiator: phys(&a),
        ..common
    };
    assert_eq!(next(&b, teq), put_ev);
    let mut want = vec![0u8; 4096];
    want[100..1100].copy_from_slice(&pattern(1000, 3));
    assert_eq!(tmem.to_vec(0, 4096).unwrap(), want);

    // Get 4096 bytes back: REPLY with the target's bytes; the target sees GET.
    let land = Region::new(4096);
    let lmd = md(&a, &land, Some(eq));
    let get = GetArgs {
        md: lmd,
        local_offset: 0,
        length: 4096,
        remote: to(&b, 0),
        user_ptr: 0x52,
    };
    a.get(&get).unwrap();
    let reply = Event {
        kind: EventKind::Reply,
        user_ptr: 0x52,
        rlength: 4096,
        mlength: 4096,
        initiator: phys(&b),
        ..event(EventKind::Reply)
    };
    assert_eq!(next(&a, eq), reply);
    assert_eq!(land.to_vec(0, 4096).unwrap(), want);
    assert_eq!(
        next(&b, teq),
        Event {
            kind: EventKind::Get,
            user_ptr: 0x7a,
            initiator: phys(&a),
            ..reply
        }
    );

    // Atomic SUM of two u32 at offset 0 (which holds 0 and 0): ACK; then fetch-add and swap.
    let operands = Region::from_bytes(&[5, 0, 0, 0, 7, 0, 0, 0]);
    let omd = md(&a, &operands, Some(eq));
    let remote = to(&b, 0);
    let atomic = AtomicArgs {
        md: omd,
        local_offset: 0,
        length: 8,
        ack_req: AckReq::Ack,
        remote,
        user_ptr: 0x53,
        hdr_data: 1,
        op: AtomicOp::Sum,
        datatype: AtomicType::Uint32,
    };
    tmem.write(0, &[0; 8]).unwrap();
    a.atomic(&atomic).unwrap();
    let atomic_ev = Event {
        user_ptr: 0x53,
        hdr_data: 1,
        rlength: 8,
        mlength: 8,
        initiator: phys(&b),
        atomic_op: Some(AtomicOp::Sum),
        atomic_type: Some(AtomicType::Uint32),
        ..event(EventKind::Send)
    };
    assert_eq!(next(&a, eq), atomic_ev);
    assert_eq!(
        next(&a, eq),
        Event {
            kind: EventKind::Ack,
            ..atomic_ev
        }
    );
    assert_eq!(next(&b, teq).kind, EventKind::Atomic);
    assert_eq!(tmem.to_vec(0, 8).unwrap(), vec![5, 0, 0, 0, 7, 0, 0, 0]);

    let fetched = Region::new(8);
    let fmd = md(&a, &fetched, Some(eq));
    let fetch = FetchArgs {
        get_md: fmd,
        get_offset: 0,
        put_md: omd,
        put_offset: 0,
        length: 8,
        remote,
        user_ptr: 0x54,
        hdr_data: 2,
        operand: &[],
        op: AtomicOp::Sum,
        datatype: AtomicType::Uint32,
    };
    a.fetch_atomic(&fetch).unwrap();
    assert_eq!(next(&a, eq).kind, EventKind::Send);
    let r = next(&a, eq);
    assert_eq!(
        (r.kind, r.ni_fail, r.mlength),
        (EventKind::Reply, NiFail::Ok, 8)
    );
    assert_eq!(fetched.to_vec(0, 8).unwrap(), vec![5, 0, 0, 0, 7, 0, 0, 0]);
    assert_eq!(tmem.to_vec(0, 8).unwrap(), vec![10, 0, 0, 0, 14, 0, 0, 0]);
    assert_eq!(next(&b, teq).kind, EventKind::FetchAtomic);

    // Compare-and-swap one u32: 10 == 10, so 5 goes in and 10 comes back.
    let cswap = FetchArgs {
        length: 4,
        operand: &[10, 0, 0, 0],
        op: AtomicOp::Cswap,
        user_ptr: 0x55,
        ..fetch
    };
    a.swap(&cswap).unwrap();
    assert_eq!(next(&a, eq).kind, EventKind::Send);
    let r = next(&a, eq);
    assert_eq!((r.kind, r.user_ptr, r.mlength), (EventKind::Reply, 0x55, 4));
    assert_eq!(fetched.to_vec(0, 4).unwrap(), vec![10, 0, 0, 0]);
    assert_eq!(tmem.to_vec(0, 8).unwrap(), vec![5, 0, 0, 0, 14, 0, 0, 0]);
    let ev = next(&b, teq);
    assert_eq!(
        (ev.kind, ev.atomic_op),
        (EventKind::FetchAtomic, Some(AtomicOp::Cswap))
    );
    assert!(a.ni_eq_empty(eq));
}

/// Helper trait: whether an EQ has nothing more (after one round of progress).
trait EqEmpty {
    fn ni_eq_empty(&self, eq: EqHandle) -> bool;
}
impl EqEmpty for Ni {
    fn ni_eq_empty(&self, eq: EqHandle) -> bool {
        self.eq_get(eq).unwrap() == EqGet::Empty
    }
}

/// A put to `b`, which nobody calls into after its setup: answered only if something makes
/// progress for it. Returns `a`'s event queue and the source pattern.
fn put_to_idle(a: &Ni, b: &Ni, tmem: &Region) -> (EqHandle, Vec<u8>) {
    let _teq = target(b, tmem, MeOptions::OP_PUT);
    let eq = a.eq_alloc(16).unwrap();
    let bytes = pattern(3000, 5);
    let src = Region::from_bytes(&bytes);
    let smd = md(a, &src, Some(eq));
    a.put(&put_args(smd, 3000, to(b, 64))).unwrap();
    assert_eq!(next(a, eq).kind, EventKind::Send);
    (eq, bytes)
}

#[test]
fn an_idle_target_is_answered_by_background_progress() {
    let (a, b) = (open(), open());
    let tmem = Region::new(4096);
    let (eq, bytes) = put_to_idle(&a, &b, &tmem);
    let ack = next(&a, eq);
    assert_eq!(
        (ack.kind, ack.ni_fail, ack.mlength),
        (EventKind::Ack, NiFail::Ok, 3000)
    );
    assert_eq!(tmem.to_vec(64, 3000).unwrap(), bytes);
}

#[test]
fn without_background_progress_an_idle_target_answers_only_when_called() {
    let a = open();
    let quiet = InterfaceConfig {
        background_progress: None,
        ..config(Duration::from_secs(30))
    };
    let b = Interface::new(
        quiet,
        Box::new(UdpEndpoint::bind(&UdpConfig::default()).unwrap()),
    )
    .unwrap()
    .ni_init(KIND, None)
    .unwrap();
    let tmem = Region::new(4096);
    let (eq, bytes) = put_to_idle(&a, &b, &tmem);
    assert!(matches!(
        a.eq_wait(eq, Some(Duration::from_millis(300))),
        Err(rgasnet_portals::PtlError::EqEmpty)
    ));
    b.interface().progress().unwrap();
    let ack = next(&a, eq);
    assert_eq!((ack.kind, ack.ni_fail), (EventKind::Ack, NiFail::Ok));
    assert_eq!(tmem.to_vec(64, 3000).unwrap(), bytes);
}

#[test]
fn operations_to_self() {
    let a = open();
    let tmem = Region::new(256);
    let teq = target(&a, &tmem, MeOptions::OP_PUT | MeOptions::OP_GET);
    let eq = a.eq_alloc(16).unwrap();
    let src = Region::from_bytes(&pattern(200, 9));
    let smd = md(&a, &src, Some(eq));
    a.put(&put_args(smd, 200, to(&a, 56))).unwrap();
    assert_eq!(next(&a, eq).kind, EventKind::Send);
    let ack = next(&a, eq);
    assert_eq!(
        (ack.kind, ack.ni_fail, ack.mlength),
        (EventKind::Ack, NiFail::Ok, 200)
    );
    let put = next(&a, teq);
    assert_eq!(
        (put.kind, put.start, put.initiator),
        (EventKind::Put, 56, phys(&a))
    );
    assert_eq!(tmem.to_vec(56, 200).unwrap(), pattern(200, 9));
    let land = Region::new(256);
    let lmd = md(&a, &land, Some(eq));
    let get = get_args(lmd, 0, 256, to(&a, 0));
    a.get(&get).unwrap();
    assert_eq!(next(&a, eq).kind, EventKind::Reply);
    assert_eq!(land.to_vec(0, 256).unwrap(), tmem.to_vec(0, 256).unwrap());
    assert_eq!(next(&a, teq).kind, EventKind::Get);
    assert_eq!(
        a.interface().transport_stats().datagrams_out,
        0,
        "nothing went on the wire"
    );
}

#[test]
fn eq_take_more_says_whether_events_remain() {
    let a = open();
    let eq = a.eq_alloc(16).unwrap();
    let src = Region::new(8);
    let smd = md(&a, &src, Some(eq));
    let tmem = Region::new(8);
    target(&a, &tmem, MeOptions::OP_PUT);
    // A put to self posts SEND then ACK on `eq` before it returns.
    a.put(&put_args(smd, 8, to(&a, 0))).unwrap();
    let kinds = |(got, more): (EqGet, bool)| match got {
        EqGet::Event(ev) => (Some(ev.kind), more),
        EqGet::Empty => (None, more),
        EqGet::Dropped(ev) => panic!("dropped before {ev:?}"),
    };
    assert_eq!(
        kinds(a.eq_take_more(eq).unwrap()),
        (Some(EventKind::Send), true)
    );
    assert_eq!(
        kinds(a.eq_take_more(eq).unwrap()),
        (Some(EventKind::Ack), false)
    );
    assert_eq!(kinds(a.eq_take_more(eq).unwrap()), (None, false));
}

#[test]
fn in_place_operations_to_self() {
    // A message to the interface itself with an in-place body is joined and handled locally,
    // twice, so the kept joining buffer is reused.
    let a = open();
    const LEN: usize = 3 * 4096;
    let tmem = Region::new(2 * LEN);
    target(
        &a,
        &tmem,
        MeOptions::OP_PUT | MeOptions::OP_GET | MeOptions::IN_PLACE_REPLY,
    );
    let eq = a.eq_alloc(16).unwrap();
    let data = pattern(LEN, 3);
    let src = Region::from_bytes(&data);
    let smd = in_place_md(&a, &src, eq);
    let land = Region::new(LEN);
    let lmd = md(&a, &land, Some(eq));
    for at in [0, LEN] {
        a.put(&put_args(smd, LEN as u64, to(&a, at as u64)))
            .unwrap();
        assert_eq!(next(&a, eq).kind, EventKind::Ack);
        assert!(tmem.to_vec(at, LEN).unwrap() == data, "put to self at {at}");
        let get = get_args(lmd, 0, LEN as u64, to(&a, at as u64));
        a.get(&get).unwrap();
        assert_eq!(next(&a, eq).kind, EventKind::Reply);
        assert!(
            land.to_vec(0, LEN).unwrap() == data,
            "get from self at {at}"
        );
    }
    assert_eq!(a.interface().transport_stats().datagrams_out, 0);
}

#[test]
fn put_and_get_of_64_mib_byte_for_byte() {
    const LEN: usize = 64 << 20;
    let (a, b) = (open(), open());
    assert!(a.limits().max_msg_size >= LEN as u64);
    let _p = Progress::start(b.interface());
    let tmem = Region::new(LEN);
    let teq = target(&b, &tmem, MeOptions::OP_PUT | MeOptions::OP_GET);
    let data = pattern(LEN, 1);
    let src = Region::from_bytes(&data);
    let eq = a.eq_alloc(16).unwrap();
    let smd = md(&a, &src, Some(eq));
    a.put(&put_args(smd, LEN as u64, to(&b, 0))).unwrap();
    assert_eq!(next(&a, eq).kind, EventKind::Send);
    let ack = next(&a, eq);
    assert_eq!(
        (ack.kind, ack.ni_fail, ack.mlength),
        (EventKind::Ack, NiFail::Ok, LEN as u64)
    );
    let put = next(&b, teq);
    assert_eq!(
        (put.kind, put.mlength, put.rlength),
        (EventKind::Put, LEN as u64, LEN as u64)
    );
    assert!(tmem.to_vec(0, LEN).unwrap() == data, "target bytes differ");
    drop(src);

    // Back again, into a fresh region, after changing the first and last target bytes.
    tmem.write(0, &[0xee]).unwrap();
    tmem.write(LEN - 1, &[0xdd]).unwrap();
    let land = Region::new(LEN);
    let lmd = md(&a, &land, Some(eq));
    let get = GetArgs {
        md: lmd,
        local_offset: 0,
        length: LEN as u64,
        remote: to(&b, 0),
        user_ptr: 2,
    };
    a.get(&get).unwrap();
    let reply = next(&a, eq);
    assert_eq!(
        (reply.kind, reply.ni_fail, reply.mlength),
        (EventKind::Reply, NiFail::Ok, LEN as u64)
    );
    let got = land.to_vec(0, LEN).unwrap();
    assert_eq!((got[0], got[LEN - 1]), (0xee, 0xdd));
    assert!(got[1..LEN - 1] == data[1..LEN - 1], "landed bytes differ");
    assert_eq!(next(&b, teq).kind, EventKind::Get);
}

#[test]
fn in_place_puts_arrive_byte_for_byte() {
    // Sizes around the in-place threshold and the fragment size, at odd offsets, from an
    // IN_PLACE MD: sent from the source region over real sockets, without a copy.
    let (a, b) = (open(), open());
    let _p = Progress::start(b.interface());
    const LEN: usize = 3 << 20;
    let tmem = Region::new(LEN);
    let teq = target(&b, &tmem, MeOptions::OP_PUT);
    let data = pattern(LEN, 9);
    let src = Region::from_bytes(&data);
    let eq = a.eq_alloc(16).unwrap();
    let smd = in_place_md(&a, &src, eq);
    let frag = rgasnet_portals::transport::DEFAULT_FRAGMENT_SIZE;
    let mut at = 0usize;
    for (i, len) in [4096, 4095, 5000, frag - 58, frag, 2 * frag + 1, 1 << 20]
        .into_iter()
        .enumerate()
    {
        let local = 3 * i + 1;
        let mut args = put_args(smd, len as u64, to(&b, at as u64));
        args.local_offset = local as u64;
        a.put(&args).unwrap();
        let ack = next(&a, eq);
        assert_eq!(
            (ack.kind, ack.ni_fail, ack.mlength),
            (EventKind::Ack, NiFail::Ok, len as u64)
        );
        assert_eq!(next(&b, teq).mlength, len as u64);
        assert!(
            tmem.to_vec(at, len).unwrap() == data[local..local + len],
            "{len}-byte put: target bytes differ"
        );
        at += len;
    }
}

#[test]
fn in_place_replies_arrive_byte_for_byte() {
    // Gets from an IN_PLACE_REPLY entry, answered from the target region over real sockets.
    let (a, b) = (open(), open());
    let _p = Progress::start(b.interface());
    const LEN: usize = 3 << 20;
    let data = pattern(LEN, 5);
    let tmem = Region::from_bytes(&data);
    target(&b, &tmem, MeOptions::OP_GET | MeOptions::IN_PLACE_REPLY);
    let land = Region::new(LEN);
    let eq = a.eq_alloc(16).unwrap();
    let lmd = md(&a, &land, Some(eq));
    let frag = rgasnet_portals::transport::DEFAULT_FRAGMENT_SIZE;
    for len in [4096, 4095, frag - 26, frag, 2 * frag + 1, 1 << 20] {
        let at = (len * 7) % (LEN - len);
        let get = get_args(lmd, 3, len as u64, to(&b, at as u64));
        a.get(&get).unwrap();
        let reply = next(&a, eq);
        assert_eq!(
            (reply.kind, reply.ni_fail, reply.mlength),
            (EventKind::Reply, NiFail::Ok, len as u64)
        );
        assert!(
            land.to_vec(3, len).unwrap() == data[at..at + len],
            "{len}-byte get: landed bytes differ"
        );
    }
}

#[test]
fn a_vanished_peer_fails_pending_operations_as_undeliverable() {
    let a = open_with(&UdpConfig::default(), Duration::from_millis(300));
    let b = open();
    let tmem = Region::new(64);
    let _teq = target(&b, &tmem, MeOptions::OP_PUT | MeOptions::OP_GET);
    let eq = a.eq_alloc(16).unwrap();
    let src = Region::from_bytes(&[4; 64]);
    let smd = md(&a, &src, Some(eq));
    let remote = to(&b, 0);
    {
        let _p = Progress::start(b.interface());
        a.put(&put_args(smd, 8, remote)).unwrap();
        assert_eq!(next(&a, eq).kind, EventKind::Send);
        assert_eq!(
            next(&a, eq).ni_fail,
            NiFail::Ok,
            "the peer is alive at first"
        );
    }
    drop(b); // Its socket closes with the last handle.

    let started = Instant::now();
    a.put(&put_args(smd, 8, remote)).unwrap();
    let get = GetArgs {
        md: smd,
        local_offset: 0,
        length: 8,
        remote,
        user_ptr: 9,
    };
    a.get(&get).unwrap();
    assert_eq!(next(&a, eq).kind, EventKind::Send);
    let ack = next(&a, eq);
    assert_eq!(
        (ack.kind, ack.ni_fail, ack.mlength),
        (EventKind::Ack, NiFail::Undeliverable, 0)
    );
    let reply = next(&a, eq);
    assert_eq!(
        (reply.kind, reply.ni_fail, reply.user_ptr),
        (EventKind::Reply, NiFail::Undeliverable, 9)
    );
    assert!(started.elapsed() < T);
    // Later operations to the failed peer fail at once, with the same failure.
    a.put(&put_args(smd, 8, remote)).unwrap();
    assert_eq!(next(&a, eq).kind, EventKind::Send);
    assert_eq!(next(&a, eq).ni_fail, NiFail::Undeliverable);
    let stats = a.interface().transport_stats();
    assert_eq!(stats.peers_failed, 1);
    assert_eq!(a.interface().engine_stats().undeliverable, 3);
}

/// A datagram carrying one put of `[1, 2, 3, 4]` with `hdr_data` 9, as a peer would send it,
/// under `job_key`.
fn crafted_put(job_key: u64) -> Vec<u8> {
    let h = RequestHeader {
        op: OpKind::Put,
        ni_kind: KIND,
        ack_req: AckReq::None,
        atomic: None,
        pt_index: 0,
        uid: UID,
        initiator_rank: RANK_ANY,
        match_bits: BITS,
        remote_offset: 0,
        hdr_data: 9,
        op_id: 1,
        rlength: 4,
    };
    let msg = proto::encode_request(&h, &[], &[1, 2, 3, 4]).unwrap();
    let mut dg = Vec::new();
    wire::write_header(
        &mut dg,
        &Header {
            job_key,
            src_incarnation: 0x1234,
            dst_incarnation: 0,
        },
    );
    wire::write_data(&mut dg, 0, msg.len() as u32, 0, &msg);
    dg
}

#[test]
fn foreign_and_garbage_datagrams_are_dropped_and_counted() {
    let b = open();
    let tmem = Region::new(8);
    let teq = target(&b, &tmem, MeOptions::OP_PUT);
    let raw = UdpSocket::bind("127.0.0.1:0").unwrap();
    let dest = b.interface().phys_id().socket_addr().unwrap();
    let foreign = crafted_put(JOB ^ 1);
    let mut bad_version = crafted_put(JOB);
    bad_version[4] = wire::VERSION + 1;
    for dg in [
        &foreign[..],
        b"not a portals datagram",
        &bad_version[..],
        &foreign[..10],
    ] {
        raw.send_to(dg, dest).unwrap();
    }
    let deadline = Instant::now() + T;
    while b.interface().transport_stats().datagrams_in < 4 {
        assert!(Instant::now() < deadline, "datagrams did not arrive");
        b.interface().progress().unwrap();
    }
    let s = b.interface().transport_stats();
    assert_eq!(
        (
            s.dropped_foreign_job,
            s.dropped_bad_magic,
            s.dropped_bad_version,
            s.dropped_malformed
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(b.interface().engine_stats().requests, 0);
    assert_eq!(
        tmem.to_vec(0, 8).unwrap(),
        vec![0; 8],
        "nothing was deposited"
    );
    assert!(b.ni_eq_empty(teq));

    // The same bytes under this job's key are a valid put: the drop was the key's doing.
    raw.send_to(&crafted_put(JOB), dest).unwrap();
    let ev = next(&b, teq);
    assert_eq!((ev.kind, ev.hdr_data, ev.mlength), (EventKind::Put, 9, 4));
    assert_eq!(tmem.to_vec(0, 8).unwrap(), vec![1, 2, 3, 4, 0, 0, 0, 0]);
    assert_eq!(b.interface().engine_stats().requests, 1);
}

#[test]
fn interface_binds_where_the_environment_says() {
    let lookup = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    };
    for pairs in [
        &[("RGASNET_IFACE", "127.0.0.1")][..],
        &[("PTL_IFACE_NAME", "lo")][..],
        &[("RGASNET_IFACE", "lo"), ("PTL_IFACE_NAME", "192.0.2.1")][..],
    ] {
        let udp = UdpConfig::from_lookup(lookup(pairs)).unwrap();
        let ni = open_with(&udp, Duration::from_secs(30));
        let id = ni.interface().phys_id();
        assert_eq!(
            id.nid,
            u32::from(std::net::Ipv4Addr::LOCALHOST),
            "{pairs:?}"
        );
        assert_eq!(ni.get_phys_id().unwrap(), id);
        // And it works: a put to itself.
        let tmem = Region::new(8);
        let teq = target(&ni, &tmem, MeOptions::OP_PUT);
        let src = Region::from_bytes(&[6; 8]);
        let smd = md(&ni, &src, None);
        ni.put(&put_args(smd, 8, to(&ni, 0))).unwrap();
        assert_eq!(next(&ni, teq).kind, EventKind::Put);
        assert_eq!(tmem.to_vec(0, 8).unwrap(), vec![6; 8]);
    }
    let bad = UdpConfig::from_lookup(lookup(&[("RGASNET_IFACE", "no-such-if9")]));
    assert!(
        matches!(
            bad,
            Err(UdpError::BadIface {
                var: "RGASNET_IFACE",
                ..
            })
        ),
        "{bad:?}"
    );
}

#[test]
fn four_threads_share_one_interface() {
    const THREADS: usize = 4;
    const ROUNDS: usize = 100;
    const LEN: usize = 300;
    let (a, b) = (open(), open());
    let _p = Progress::start(b.interface());
    let tmem = Region::new(THREADS * ROUNDS * LEN);
    let _teq = target(&b, &tmem, MeOptions::OP_PUT);
    let b_id: PhysId = b.interface().phys_id();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let a = a.clone();
            std::thread::spawn(move || {
                let eq = a.eq_alloc(8).unwrap();
                let src = Region::new(LEN);
                let smd = md(&a, &src, Some(eq));
                for k in 0..ROUNDS {
                    src.write(0, &pattern(LEN, (t * ROUNDS + k) as u8)).unwrap();
                    let off = ((t * ROUNDS + k) * LEN) as u64;
                    let remote = RemoteAddr {
                        target: ProcessId::Phys(b_id),
                        pt_index: 0,
                        match_bits: BITS,
                        remote_offset: off,
                    };
                    let mut args = put_args(smd, LEN as u64, remote);
                    args.user_ptr = k as u64;
                    a.put(&args).unwrap();
                    assert_eq!(next(&a, eq).kind, EventKind::Send);
                    let ack = next(&a, eq);
                    assert_eq!(
                        (ack.kind, ack.ni_fail, ack.user_ptr, ack.remote_offset),
                        (EventKind::Ack, NiFail::Ok, k as u64, off)
                    );
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("worker");
    }
    let mut want = Vec::new();
    for i in 0..THREADS * ROUNDS {
        want.extend(pattern(LEN, i as u8));
    }
    assert!(tmem.to_vec(0, want.len()).unwrap() == want);
}

#[test]
fn polling_is_clamped_and_a_polling_wait_still_ends_at_its_deadline() {
    use rgasnet_portals::interface::MAX_POLL_BUDGET;
    use rgasnet_portals::udp::DEFAULT_SPIN;
    let (a, b) = (open(), open());
    let iface = a.interface();
    assert_eq!(
        iface.polling(),
        (DEFAULT_SPIN, DEFAULT_SPIN),
        "by default the budget is the spin"
    );
    iface.set_polling(DEFAULT_SPIN, Duration::ZERO);
    assert_eq!(
        iface.polling(),
        (DEFAULT_SPIN, DEFAULT_SPIN),
        "never below the spin"
    );
    iface.set_polling(Duration::ZERO, Duration::from_secs(3600));
    assert_eq!(
        iface.polling(),
        (Duration::ZERO, MAX_POLL_BUDGET),
        "cut to the maximum"
    );

    // A wait that polls (budget far beyond its timeout) returns at its deadline.
    let t = Instant::now();
    let r = iface
        .wait_for(Some(Duration::from_millis(30)), |_| Ok(None::<()>))
        .unwrap();
    assert_eq!(r, None);
    let took = t.elapsed();
    assert!(
        took >= Duration::from_millis(30) && took < Duration::from_secs(10),
        "{took:?}"
    );

    // Traffic still flows while the initiator polls instead of sleeping: a put and its ACK.
    iface.set_polling(Duration::ZERO, Duration::from_millis(1));
    let _p = Progress::start(b.interface());
    let tmem = Region::new(64);
    let _teq = target(&b, &tmem, MeOptions::OP_PUT);
    let eq = a.eq_alloc(16).unwrap();
    let src = Region::from_bytes(&pattern(64, 9));
    let smd = md(&a, &src, Some(eq));
    a.put(&put_args(smd, 64, to(&b, 0))).unwrap();
    assert_eq!(next(&a, eq).kind, EventKind::Send);
    assert_eq!(next(&a, eq).kind, EventKind::Ack);
    let mut got = vec![0u8; 64];
    tmem.read(0, &mut got).unwrap();
    assert_eq!(got, pattern(64, 9));
}

/// An interface whose transport holds an ack for data to ride on far longer than any wait
/// below, and never retransmits within it: an ack that arrives was sent on purpose.
fn open_patient() -> Ni {
    let patient = InterfaceConfig {
        transport: rgasnet_portals::transport::TransportConfig {
            ack_delay: Duration::from_secs(600),
            initial_rto: Duration::from_secs(600),
            min_rto: Duration::from_secs(600),
            max_rto: Duration::from_secs(600),
            peer_timeout: Duration::from_secs(1200),
            ..config(T).transport
        },
        ..config(T)
    };
    Interface::new(
        patient,
        Box::new(UdpEndpoint::bind(&UdpConfig::default()).unwrap()),
    )
    .unwrap()
    .ni_init(KIND, None)
    .unwrap()
}

#[test]
fn a_confirmed_ack_to_a_waiting_target_does_not_wait_for_the_ack_delay() {
    let (a, b) = (open_patient(), open_patient());
    // The target's application waits on something else; its wait takes the put in.
    let _p = Progress::start(b.interface());
    let tmem = Region::new(4096);
    let _teq = target(&b, &tmem, MeOptions::OP_PUT);
    let eq = a.eq_alloc(16).unwrap();
    let src = Region::from_bytes(&pattern(100, 9));
    let smd = md(&a, &src, Some(eq));
    for i in 0..3u64 {
        let args = PutArgs {
            ack_req: AckReq::ConfirmedAck,
            user_ptr: i,
            ..put_args(smd, 100, to(&b, 100 * i))
        };
        a.put(&args).unwrap();
        assert_eq!(next(&a, eq).kind, EventKind::Send);
        let ack = next(&a, eq);
        assert_eq!(
            (
                ack.kind,
                ack.ni_fail,
                ack.mlength,
                ack.remote_offset,
                ack.user_ptr
            ),
            (EventKind::Ack, NiFail::Ok, 100, 100 * i, i)
        );
    }
    for i in 0..3 {
        assert_eq!(tmem.to_vec(100 * i, 100).unwrap(), pattern(100, 9));
    }
    let stats = a.interface().transport_stats();
    assert_eq!(
        stats.retransmits, 0,
        "the acks came without a retransmission"
    );
}
