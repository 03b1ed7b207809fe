//! Atomics end to end: concurrent SUMs from several initiators, fetch-atomic and swap replies,
//! operation violations.

use super::*;
use crate::types::{AtomicOp, AtomicType};

fn me_all(net: &mut Net, i: usize, r: &Region, eq: Option<EqHandle>) {
    net.pt(i, 0, PtOptions::empty(), eq);
    let o = MeOptions::OP_PUT | MeOptions::OP_GET | MeOptions::EVENT_LINK_DISABLE;
    net.me(i, 0, me_spec(r, 0, o), ListKind::Priority, 0);
}

fn to(i: usize, off: u64) -> RemoteAddr {
    RemoteAddr {
        target: p(i),
        pt_index: 0,
        match_bits: 0,
        remote_offset: off,
    }
}

#[test]
fn concurrent_sums_from_three_initiators_add_up_exactly() {
    const OPS: u64 = 1000;
    let mut net = Net::new(4, MATCHING_PHYS);
    let target = Region::new(16);
    me_all(&mut net, 0, &target, None);
    let mut cts = Vec::new();
    let mut expected = 0u64;
    for i in 1..4 {
        let ct = net.ct(i);
        // Each op adds its own operand: k * i + 1, from a distinct slot of the MD.
        let src = Region::new((OPS * 8) as usize);
        for k in 0..OPS {
            let v = k * i as u64 + 1;
            expected = expected.wrapping_add(v);
            src.write((k * 8) as usize, &v.to_le_bytes()).unwrap();
        }
        let md = net.md(i, &src, MdOptions::EVENT_CT_ACK, None, Some(ct));
        for k in 0..OPS {
            let a = AtomicArgs {
                md,
                local_offset: k * 8,
                length: 8,
                ack_req: AckReq::CtAck,
                remote: to(0, 8),
                user_ptr: k,
                hdr_data: 0,
                op: AtomicOp::Sum,
                datatype: AtomicType::Uint64,
            };
            net.e[i].atomic(&a).unwrap();
        }
        cts.push((i, ct));
    }
    // The router takes one message per engine per turn: the three streams interleave.
    net.run();
    for (i, ct) in cts {
        assert_eq!(net.e[i].ct_get(ct).unwrap(), ct_value(OPS, 0));
    }
    let mut got = [0u8; 8];
    target.read(8, &mut got).unwrap();
    assert_eq!(u64::from_le_bytes(got), expected);
    assert_eq!(
        target.to_vec(0, 8).unwrap(),
        vec![0; 8],
        "neighbouring bytes untouched"
    );
}

#[test]
fn fetch_atomic_returns_previous_values() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let eq_t = net.eq(1, 8);
    let target = Region::new(12);
    target.write(4, &[10, 0, 0, 0, 20, 0, 0, 0]).unwrap();
    me_all(&mut net, 1, &target, Some(eq_t));
    let eq = net.eq(0, 8);
    let put_src = Region::from_bytes(&[1, 0, 0, 0, 2, 0, 0, 0]);
    let fetched = Region::new(8);
    let put_md = net.md(0, &put_src, MdOptions::empty(), Some(eq), None);
    let get_md = net.md(0, &fetched, MdOptions::empty(), Some(eq), None);
    let a = FetchArgs {
        get_md,
        get_offset: 0,
        put_md,
        put_offset: 0,
        length: 8,
        remote: to(1, 4),
        user_ptr: 3,
        hdr_data: 4,
        operand: &[],
        op: AtomicOp::Sum,
        datatype: AtomicType::Uint32,
    };
    net.e[0].fetch_atomic(&a).unwrap();
    net.run();
    assert_eq!(
        fetched.to_vec(0, 8).unwrap(),
        vec![10, 0, 0, 0, 20, 0, 0, 0]
    );
    assert_eq!(target.to_vec(4, 8).unwrap(), vec![11, 0, 0, 0, 22, 0, 0, 0]);
    let common = Event {
        user_ptr: 3,
        hdr_data: 4,
        rlength: 8,
        mlength: 8,
        remote_offset: 4,
        initiator: p(1),
        uid: UID,
        atomic_op: Some(AtomicOp::Sum),
        atomic_type: Some(AtomicType::Uint32),
        ..ev(EventKind::Send)
    };
    assert_eq!(
        net.events(0, eq),
        vec![
            common,
            Event {
                kind: EventKind::Reply,
                ..common
            }
        ]
    );
    let t = net.events(1, eq_t);
    assert_eq!(
        t,
        vec![Event {
            kind: EventKind::FetchAtomic,
            start: 4,
            user_ptr: 0,
            initiator: p(0),
            ..common
        }]
    );
}

#[test]
fn swap_cswap_and_mswap() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let target = Region::from_bytes(&5u64.to_le_bytes());
    me_all(&mut net, 1, &target, None);
    let eq = net.eq(0, 16);
    let put_src = Region::from_bytes(&9u64.to_le_bytes());
    let fetched = Region::new(8);
    let put_md = net.md(0, &put_src, MdOptions::EVENT_SEND_DISABLE, None, None);
    let get_md = net.md(0, &fetched, MdOptions::empty(), Some(eq), None);
    let swap = |net: &mut Net, op: AtomicOp, operand: u64, dt: AtomicType, len: u64| {
        let operand = operand.to_le_bytes();
        let a = FetchArgs {
            get_md,
            get_offset: 0,
            put_md,
            put_offset: 0,
            length: len,
            remote: to(1, 0),
            user_ptr: 0,
            hdr_data: 0,
            operand: &operand[..dt.size()],
            op,
            datatype: dt,
        };
        net.e[0].swap(&a).unwrap();
        net.run();
        let evs = net.events(0, eq);
        assert_eq!((evs.len(), evs[0].ni_fail), (1, NiFail::Ok));
        let mut b = [0u8; 8];
        fetched.read(0, &mut b).unwrap();
        u64::from_le_bytes(b)
    };
    let now = |t: &Region| u64::from_le_bytes(t.to_vec(0, 8).unwrap().try_into().unwrap());
    // Compare fails: unchanged, old value returned.
    assert_eq!(swap(&mut net, AtomicOp::Cswap, 4, AtomicType::Uint64, 8), 5);
    assert_eq!(now(&target), 5);
    assert_eq!(swap(&mut net, AtomicOp::Cswap, 5, AtomicType::Uint64, 8), 5);
    assert_eq!(now(&target), 9);
    // MSWAP: bits of the mask come from the data (9 = 0b1001), others stay (9 now).
    put_src.write(0, &0xf0u64.to_le_bytes()).unwrap();
    assert_eq!(
        swap(&mut net, AtomicOp::Mswap, 0x30, AtomicType::Uint64, 8),
        9
    );
    assert_eq!(now(&target), 0x39);
    assert_eq!(
        swap(&mut net, AtomicOp::Swap, 0, AtomicType::Uint64, 8),
        0x39
    );
    assert_eq!(now(&target), 0xf0);

    // Initiator-side refusals: family, element count, operand length.
    let bad = FetchArgs {
        get_md,
        get_offset: 0,
        put_md,
        put_offset: 0,
        length: 8,
        remote: to(1, 0),
        user_ptr: 0,
        hdr_data: 0,
        operand: &[0; 4],
        op: AtomicOp::Cswap,
        datatype: AtomicType::Uint64,
    };
    assert!(net.e[0].swap(&bad).is_err(), "operand of 4 bytes for u64");
    assert!(net.e[0]
        .swap(&FetchArgs {
            op: AtomicOp::Sum,
            ..bad
        })
        .is_err());
    assert!(net.e[0]
        .fetch_atomic(&FetchArgs {
            op: AtomicOp::Swap,
            ..bad
        })
        .is_err());
    assert!(net.e[0]
        .swap(&FetchArgs {
            length: 8,
            datatype: AtomicType::Uint32,
            ..bad
        })
        .is_err());
    assert!(net.e[0].poll_outgoing().is_none());
}

#[test]
fn op_violations_are_reported_and_leave_memory_untouched() {
    let mut net = Net::new(2, MATCHING_PHYS);
    // The target grants atomics of at most 8 bytes.
    net.e[1].ni_fini(net.ni[1]).unwrap();
    let small = NiLimits {
        max_atomic_size: 8,
        ..NiLimits::default()
    };
    net.ni[1] = net.e[1].ni_init(MATCHING_PHYS, Some(small)).unwrap().0;
    let target = Region::from_bytes(&[1; 16]);
    me_all(&mut net, 1, &target, None);
    let eq = net.eq(0, 8);
    let src = Region::from_bytes(&[2; 16]);
    let md = net.md(0, &src, MdOptions::EVENT_SEND_DISABLE, Some(eq), None);
    let base = AtomicArgs {
        md,
        local_offset: 0,
        length: 8,
        ack_req: AckReq::Ack,
        remote: to(1, 0),
        user_ptr: 0,
        hdr_data: 0,
        op: AtomicOp::Bor,
        datatype: AtomicType::Double,
    };
    let cases = [
        base, // bitwise on double
        AtomicArgs {
            op: AtomicOp::Lxor,
            datatype: AtomicType::Float,
            ..base
        }, // logical on float
        AtomicArgs {
            op: AtomicOp::Sum,
            datatype: AtomicType::Int8,
            length: 16,
            ..base
        }, // > 8 bytes
        AtomicArgs {
            op: AtomicOp::Sum,
            datatype: AtomicType::Int8,
            remote: to(1, 12),
            ..base
        }, // past the end
    ];
    for a in cases {
        net.e[0].atomic(&a).unwrap();
    }
    net.run();
    let fails: Vec<NiFail> = net.events(0, eq).iter().map(|e| e.ni_fail).collect();
    assert_eq!(
        fails,
        vec![
            NiFail::OpViolation,
            NiFail::OpViolation,
            NiFail::OpViolation,
            NiFail::Segv
        ]
    );
    assert_eq!(net.status(1, SrIndex::OperationViolations), 4);
    assert_eq!(target.to_vec(0, 16).unwrap(), vec![1; 16]);
    // And a valid one on the same entry works.
    net.e[0]
        .atomic(&AtomicArgs {
            op: AtomicOp::Max,
            datatype: AtomicType::Int8,
            ..base
        })
        .unwrap();
    net.run();
    assert_eq!(net.events(0, eq)[0].ni_fail, NiFail::Ok);
    assert_eq!(
        target.to_vec(0, 16).unwrap(),
        [vec![2; 8], vec![1; 8]].concat()
    );
}
