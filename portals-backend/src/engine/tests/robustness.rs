//! Peer failure, operations to self, and hostile input: malformed, stray, duplicate and
//! inconsistent messages never panic and never corrupt state.

use proptest::prelude::*;

use super::*;
use crate::proto::{self, ResponseHeader, ResponseKind};

#[test]
fn peer_failure_fails_exactly_its_pending_operations() {
    let mut net = Net::new(3, MATCHING_PHYS);
    let eq = net.eq(0, 16);
    let ct = net.ct(0);
    let r = Region::new(8);
    let opts = MdOptions::EVENT_SEND_DISABLE | MdOptions::EVENT_CT_ACK | MdOptions::EVENT_CT_REPLY;
    let md = net.md(0, &r, opts, Some(eq), Some(ct));
    let mut a = put_args(md, 8, AckReq::Ack, p(1), 0, 0);
    net.e[0].put(&a).unwrap();
    a.user_ptr = 2;
    net.e[0].put(&a).unwrap();
    let g = GetArgs {
        md,
        local_offset: 0,
        length: 8,
        remote: RemoteAddr {
            target: p(1),
            pt_index: 0,
            match_bits: 0,
            remote_offset: 0,
        },
        user_ptr: 3,
    };
    net.e[0].get(&g).unwrap();
    a.remote.target = p(2);
    a.user_ptr = 4;
    net.e[0].put(&a).unwrap();
    assert_eq!(net.e[0].pending_ops(), 4);

    net.e[0].handle_peer_failed(phys(1));
    let got: Vec<(EventKind, u64, NiFail)> = net
        .events(0, eq)
        .iter()
        .map(|e| (e.kind, e.user_ptr, e.ni_fail))
        .collect();
    assert_eq!(
        got,
        vec![
            (EventKind::Ack, 0xabc, NiFail::Undeliverable),
            (EventKind::Ack, 2, NiFail::Undeliverable),
            (EventKind::Reply, 3, NiFail::Undeliverable),
        ]
    );
    assert_eq!(net.e[0].ct_get(ct).unwrap(), ct_value(0, 3));
    assert_eq!(net.e[0].stats().undeliverable, 3);
    assert_eq!(net.e[0].pending_ops(), 1, "the op to engine 2 is untouched");
    // Queued messages to the failed peer are gone; the one to engine 2 remains.
    let (to, _) = net.e[0].poll_outgoing().unwrap();
    assert_eq!(to, phys(2));
    assert!(net.e[0].poll_outgoing().is_none());
    assert!(net.e[0].md_release(md).is_err(), "still one op in flight");
    net.e[0].handle_peer_failed(phys(2));
    net.e[0].md_release(md).unwrap();
}

#[test]
fn operations_to_self() {
    let mut net = Net::new(1, NOMATCH_PHYS);
    net.pt(0, 0, PtOptions::empty(), None);
    let seg = Region::new(32);
    let le = LeSpec {
        region: seg.clone(),
        offset: 0,
        length: 32,
        ct: None,
        uid: UID,
        options: MeOptions::OP_PUT | MeOptions::OP_GET,
    };
    net.e[0]
        .le_append(net.ni[0], 0, le, ListKind::Priority, 0)
        .unwrap();
    let eq = net.eq(0, 8);
    let md = net.md(0, &seg, MdOptions::EVENT_SEND_DISABLE, Some(eq), None);
    seg.write(0, &[1, 2, 3, 4]).unwrap();
    // Put bytes 0..4 of the segment to offset 16 of the same segment, through the engine.
    let mut a = put_args(md, 4, AckReq::Ack, p(0), 0, 0);
    a.remote.remote_offset = 16;
    net.e[0].put(&a).unwrap();
    assert_eq!(net.run(), 2);
    assert_eq!(seg.to_vec(16, 4).unwrap(), vec![1, 2, 3, 4]);
    assert_eq!(net.events(0, eq)[0].ni_fail, NiFail::Ok);
}

#[test]
fn stray_duplicate_and_inconsistent_responses() {
    let mut net = Net::new(3, MATCHING_PHYS);
    let eq = net.eq(0, 8);
    let r = Region::new(8);
    let md = net.md(0, &r, MdOptions::EVENT_SEND_DISABLE, Some(eq), None);
    let g = GetArgs {
        md,
        local_offset: 0,
        length: 4,
        remote: RemoteAddr {
            target: p(1),
            pt_index: 0,
            match_bits: 0,
            remote_offset: 0,
        },
        user_ptr: 0,
    };
    net.e[0].get(&g).unwrap();
    let (_, req) = net.e[0].poll_outgoing().unwrap();
    let req = req.to_bytes();
    let proto::Message::Request(req) = proto::decode(&req).unwrap() else {
        panic!("request expected")
    };
    let id = req.header.op_id;
    let reply = |mlength: u64, data: &[u8]| {
        let h = ResponseHeader {
            kind: ResponseKind::Reply,
            ni_fail: NiFail::Ok,
            op_id: id,
            mlength,
            offset: 0,
        };
        proto::encode_response(&h, data).unwrap()
    };
    // From the wrong peer: ignored, still pending.
    net.e[0].handle_message(phys(2), &reply(4, &[9; 4]));
    assert_eq!(
        (
            net.e[0].pending_ops(),
            net.e[0].stats().unexpected_responses
        ),
        (1, 1)
    );
    assert_eq!(r.to_vec(0, 8).unwrap(), vec![0; 8]);
    // The right one completes it; a duplicate is ignored.
    net.e[0].handle_message(phys(1), &reply(4, &[9; 4]));
    net.e[0].handle_message(phys(1), &reply(4, &[8; 4]));
    assert_eq!(
        (
            net.e[0].pending_ops(),
            net.e[0].stats().unexpected_responses
        ),
        (0, 2)
    );
    assert_eq!(r.to_vec(0, 8).unwrap(), vec![9, 9, 9, 9, 0, 0, 0, 0]);
    assert_eq!(net.events(0, eq).len(), 1);
    // A reply longer than what was asked fails the operation instead of overrunning the MD.
    net.e[0].get(&g).unwrap();
    let (_, req) = net.e[0].poll_outgoing().unwrap();
    let req = req.to_bytes();
    let proto::Message::Request(req) = proto::decode(&req).unwrap() else {
        panic!("request expected")
    };
    let h = ResponseHeader {
        kind: ResponseKind::Reply,
        ni_fail: NiFail::Ok,
        op_id: req.header.op_id,
        mlength: 8,
        offset: 0,
    };
    net.e[0].handle_message(phys(1), &proto::encode_response(&h, &[7; 8]).unwrap());
    let evs = net.events(0, eq);
    assert_eq!((evs[0].ni_fail, evs[0].mlength), (NiFail::Dropped, 0));
    assert_eq!(r.to_vec(0, 8).unwrap(), vec![9, 9, 9, 9, 0, 0, 0, 0]);
    // Garbage is counted.
    net.e[0].handle_message(phys(1), &[0xde, 0xad]);
    assert_eq!(net.e[0].stats().malformed, 1);
}

#[test]
fn request_for_a_missing_ni_is_refused() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let (nm, _) = net.e[0].ni_init(NOMATCH_PHYS, None).unwrap();
    let eq = net.e[0].eq_alloc(nm, 4).unwrap();
    let r = Region::new(4);
    let md = net.e[0]
        .md_bind(
            nm,
            MdSpec {
                region: r,
                offset: 0,
                length: 4,
                options: MdOptions::EVENT_SEND_DISABLE,
                eq: Some(eq),
                ct: None,
            },
        )
        .unwrap();
    net.e[0]
        .put(&put_args(md, 4, AckReq::Ack, p(1), 0, 0))
        .unwrap();
    net.run();
    assert_eq!(net.e[1].stats().no_ni, 1);
    let EqGet::Event(e) = net.e[0].eq_get(eq).unwrap() else {
        panic!("ack expected")
    };
    assert_eq!(e.ni_fail, NiFail::Dropped);
}

/// A target with entries of every flavour, fed arbitrary and mutated messages.
fn fuzz_target() -> (Engine, Region) {
    let mut e = Engine::new(phys(1), UID, 1);
    let (ni, _) = e.ni_init(MATCHING_PHYS, None).unwrap();
    let (nl, _) = e.ni_init(NOMATCH_PHYS, None).unwrap();
    let eq = e.eq_alloc(ni, 4).unwrap();
    let r = Region::new(64);
    e.pt_alloc(ni, PtOptions::FLOWCTRL, Some(eq), 0).unwrap();
    e.pt_alloc(ni, PtOptions::empty(), None, 1).unwrap();
    e.pt_alloc(nl, PtOptions::empty(), None, 0).unwrap();
    let all = MeOptions::OP_PUT | MeOptions::OP_GET;
    let mut managed = me_spec(&r, 0, all | MeOptions::MANAGE_LOCAL);
    managed.min_free = 8;
    e.me_append(ni, 0, managed, ListKind::Priority, 0).unwrap();
    e.me_append(
        ni,
        1,
        me_spec(&r, 0, all | MeOptions::USE_ONCE),
        ListKind::Overflow,
        0,
    )
    .unwrap();
    let le = LeSpec {
        region: r.clone(),
        offset: 8,
        length: 40,
        ct: None,
        uid: UID,
        options: all,
    };
    e.le_append(nl, 0, le, ListKind::Priority, 0).unwrap();
    (e, r)
}

fn valid_request(op: u8, kind: u8, len: u8) -> Vec<u8> {
    use crate::proto::{OpKind, RequestHeader};
    use crate::types::{AtomicOp, AtomicType};
    let op = [
        OpKind::Put,
        OpKind::Get,
        OpKind::Atomic,
        OpKind::FetchAtomic,
        OpKind::Swap,
    ][op as usize % 5];
    let len = u64::from(len % 80);
    let h = RequestHeader {
        op,
        ni_kind: NiKind::from_index(kind % 4).unwrap(),
        ack_req: if op.has_reply() {
            AckReq::None
        } else {
            AckReq::Ack
        },
        atomic: match op {
            OpKind::Swap => Some((AtomicOp::Cswap, AtomicType::Uint8)),
            OpKind::Atomic | OpKind::FetchAtomic => Some((AtomicOp::Sum, AtomicType::Uint8)),
            _ => None,
        },
        pt_index: u32::from(kind / 4 % 3),
        uid: UID,
        initiator_rank: crate::types::RANK_ANY,
        match_bits: 0,
        remote_offset: u64::from(len as u8 / 2),
        hdr_data: 0,
        op_id: 1,
        rlength: len,
    };
    let operand = if op == OpKind::Swap {
        vec![0u8]
    } else {
        vec![]
    };
    let data = if op.carries_data() {
        vec![1u8; len as usize]
    } else {
        vec![]
    };
    proto::encode_request(&h, &operand, &data).unwrap()
}

proptest! {
    #[test]
    fn arbitrary_messages_never_panic(msgs in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..120), 1..20)) {
        let (mut e, r) = fuzz_target();
        for m in &msgs {
            e.handle_message(phys(0), m);
        }
        prop_assert_eq!(r.len(), 64);
        while e.poll_outgoing().is_some() {}
    }

    #[test]
    fn mutated_requests_never_panic(
        reqs in proptest::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), any::<usize>(), any::<u8>()), 1..30)
    ) {
        let (mut e, _r) = fuzz_target();
        let mut answered = 0usize;
        for (op, kind, len, at, v) in reqs {
            let mut m = valid_request(op, kind, len);
            let n = m.len();
            // Half the requests are valid, half get one byte changed.
            if at % 2 == 1 {
                m[at % n] = v;
            }
            e.handle_message(phys(0), &m);
            while let Some((to, bytes)) = e.poll_outgoing() {
                prop_assert_eq!(to, phys(0));
                prop_assert!(proto::decode(&bytes.to_bytes()).is_ok(), "every response decodes");
                answered += 1;
            }
        }
        prop_assert!(answered as u64 <= e.stats().requests);
    }
}
