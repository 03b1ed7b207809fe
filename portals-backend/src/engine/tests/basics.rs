//! Put/get end to end with exact events, every ack mode, counting events, event suppression,
//! handle validation and resource rules.

use super::*;
use crate::error::PtlError;

fn remote(to: usize, pt: u32, bits: u64, off: u64) -> RemoteAddr {
    RemoteAddr {
        target: p(to),
        pt_index: pt,
        match_bits: bits,
        remote_offset: off,
    }
}

#[test]
fn put_with_ack_exact_events_and_bytes() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let eq_t = net.eq(1, 16);
    net.pt(1, 4, PtOptions::empty(), Some(eq_t));
    let target = Region::new(32);
    net.me(
        1,
        4,
        me_spec(&target, 0x55, MeOptions::OP_PUT | MeOptions::OP_GET),
        ListKind::Priority,
        77,
    );
    let link = Event {
        user_ptr: 77,
        pt_index: 4,
        uid: UID,
        ..ev(EventKind::Link)
    };
    assert_eq!(net.events(1, eq_t), vec![link]);

    let eq_i = net.eq(0, 16);
    let src = Region::from_bytes(&[1, 2, 3, 4, 5, 6, 7, 8, 9]);
    let md = net.md(0, &src, MdOptions::empty(), Some(eq_i), None);
    let mut args = put_args(md, 8, AckReq::Ack, p(1), 4, 0x55);
    args.local_offset = 1;
    args.remote.remote_offset = 10;
    net.e[0].put(&args).unwrap();
    let initiator_ev = Event {
        start: 1,
        user_ptr: 0xabc,
        hdr_data: 0x1234,
        match_bits: 0x55,
        rlength: 8,
        mlength: 8,
        remote_offset: 10,
        initiator: p(1),
        uid: UID,
        pt_index: 4,
        ..ev(EventKind::Send)
    };
    assert_eq!(net.events(0, eq_i), vec![initiator_ev], "SEND at call time");
    assert_eq!(net.e[0].pending_ops(), 1);
    assert_eq!(net.run(), 2, "request and ack");

    let mut want = vec![0u8; 32];
    want[10..18].copy_from_slice(&[2, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(target.to_vec(0, 32).unwrap(), want);
    let put_ev = Event {
        start: 10,
        user_ptr: 77,
        hdr_data: 0x1234,
        match_bits: 0x55,
        rlength: 8,
        mlength: 8,
        remote_offset: 10,
        initiator: p(0),
        uid: UID,
        pt_index: 4,
        ..ev(EventKind::Put)
    };
    assert_eq!(net.events(1, eq_t), vec![put_ev]);
    assert_eq!(
        net.events(0, eq_i),
        vec![Event {
            kind: EventKind::Ack,
            ..initiator_ev
        }]
    );
    assert_eq!(net.e[0].pending_ops(), 0);
}

#[test]
fn in_place_md_sends_large_acked_puts_from_its_region() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let eq_t = net.eq(1, 16);
    net.pt(1, 4, PtOptions::empty(), Some(eq_t));
    let len = crate::types::IN_PLACE_MIN as usize + 9;
    let target = Region::new(3 * len);
    net.me(
        1,
        4,
        me_spec(&target, 0x55, MeOptions::OP_PUT),
        ListKind::Priority,
        1,
    );
    let bytes: Vec<u8> = (0..len + 3).map(|i| (i * 31 + 7) as u8).collect();
    let src = Region::from_bytes(&bytes);
    let md = net.md(0, &src, MdOptions::IN_PLACE, None, None);
    let copy_md = net.md(0, &src, MdOptions::empty(), None, None);
    // (MD, length, ack, target offset, whether the message carries an in-place body)
    let cases = [
        (md, len, AckReq::Ack, 0, true),
        (md, len, AckReq::None, len, false),
        (md, len - 10, AckReq::Ack, 2 * len, false),
        (copy_md, len, AckReq::Ack, 0, false),
    ];
    for (md, n, ack, off, in_place) in cases {
        let mut args = put_args(md, n as u64, ack, p(1), 4, 0x55);
        args.local_offset = 3;
        args.remote.remote_offset = off as u64;
        net.e[0].put(&args).unwrap();
        let (to, message) = net.e[0].poll_outgoing().unwrap();
        assert_eq!(to, phys(1));
        let body = message.body().map(|b| b.len());
        assert_eq!(body, in_place.then_some(n), "{n} bytes, {ack:?}");
        net.e[1].handle_message(phys(0), &message.to_bytes());
        assert_eq!(
            target.to_vec(off, n).unwrap(),
            bytes[3..3 + n],
            "{n} bytes, {ack:?}"
        );
        net.run();
    }
}

#[test]
fn in_place_reply_entry_answers_large_gets_from_its_region() {
    let mut net = Net::new(2, MATCHING_PHYS);
    net.pt(1, 2, PtOptions::empty(), None);
    let len = crate::types::IN_PLACE_MIN as usize;
    let bytes: Vec<u8> = (0..2 * len + 40).map(|i| (i * 13 + 1) as u8).collect();
    let target = Region::from_bytes(&bytes);
    let mut spec = me_spec(&target, 9, MeOptions::OP_GET | MeOptions::IN_PLACE_REPLY);
    spec.offset = 5; // the entry starts mid-word
    spec.length = (2 * len + 30) as u64;
    net.me(1, 2, spec, ListKind::Priority, 5);
    let dst = Region::new(2 * len);
    let md = net.md(0, &dst, MdOptions::empty(), None, None);
    // (length, whether the reply carries an in-place body)
    for (n, in_place) in [(len + 7, true), (len, true), (len - 1, false), (8, false)] {
        let args = GetArgs {
            md,
            local_offset: 1,
            length: n as u64,
            remote: remote(1, 2, 9, 3),
            user_ptr: 8,
        };
        net.e[0].get(&args).unwrap();
        assert!(net.step(0), "the get request");
        let (to, reply) = net.e[1].poll_outgoing().unwrap();
        assert_eq!(to, phys(0));
        assert_eq!(reply.body().map(|b| b.len()), in_place.then_some(n), "{n}");
        net.e[0].handle_message(phys(1), &reply.to_bytes());
        assert_eq!(dst.to_vec(1, n).unwrap(), bytes[8..8 + n], "{n}-byte get");
        assert_eq!(net.run(), 0);
    }
}

#[test]
fn get_lands_in_md_with_reply_event() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let eq_t = net.eq(1, 16);
    net.pt(1, 2, PtOptions::empty(), Some(eq_t));
    let target = Region::from_bytes(&(0u8..20).collect::<Vec<_>>());
    let mut spec = me_spec(
        &target,
        9,
        MeOptions::OP_GET | MeOptions::EVENT_LINK_DISABLE,
    );
    spec.offset = 4; // the entry starts at byte 4 of its region
    spec.length = 16;
    net.me(1, 2, spec, ListKind::Priority, 5);
    let eq_i = net.eq(0, 16);
    let dst = Region::new(10);
    let md = net.md(0, &dst, MdOptions::empty(), Some(eq_i), None);
    let args = GetArgs {
        md,
        local_offset: 2,
        length: 5,
        remote: remote(1, 2, 9, 3),
        user_ptr: 8,
    };
    net.e[0].get(&args).unwrap();
    assert!(net.events(0, eq_i).is_empty(), "a get has no SEND event");
    net.run();
    assert_eq!(
        dst.to_vec(0, 10).unwrap(),
        vec![0, 0, 7, 8, 9, 10, 11, 0, 0, 0]
    );
    let common = Event {
        match_bits: 9,
        rlength: 5,
        mlength: 5,
        remote_offset: 3,
        uid: UID,
        pt_index: 2,
        ..ev(EventKind::Get)
    };
    assert_eq!(
        net.events(1, eq_t),
        vec![Event {
            start: 7,
            user_ptr: 5,
            initiator: p(0),
            ..common
        }]
    );
    assert_eq!(
        net.events(0, eq_i),
        vec![Event {
            kind: EventKind::Reply,
            start: 2,
            user_ptr: 8,
            initiator: p(1),
            ..common
        }]
    );
}

#[test]
fn every_ack_mode() {
    let mut net = Net::new(2, NOMATCH_PHYS);
    net.pt(1, 0, PtOptions::empty(), None);
    let target = Region::new(64);
    let le = LeSpec {
        region: target.clone(),
        offset: 0,
        length: 64,
        ct: None,
        uid: crate::types::UID_ANY,
        options: MeOptions::OP_PUT,
    };
    net.e[1]
        .le_append(net.ni[1], 0, le, ListKind::Priority, 0)
        .unwrap();
    let eq = net.eq(0, 16);
    let ct = net.ct(0);
    let src = Region::from_bytes(&[0xee; 8]);
    let opts = MdOptions::EVENT_CT_ACK | MdOptions::EVENT_SEND_DISABLE;
    let md = net.md(0, &src, opts, Some(eq), Some(ct));

    // None: the request is the only message; nothing comes back, nothing is pending.
    net.e[0]
        .put(&put_args(md, 8, AckReq::None, p(1), 0, 0))
        .unwrap();
    assert_eq!(net.e[0].pending_ops(), 0);
    assert_eq!(net.run(), 1);
    assert!(net.events(0, eq).is_empty());
    assert_eq!(net.e[0].ct_get(ct).unwrap(), ct_value(0, 0));

    // Ack: full ACK event and a count.
    net.e[0]
        .put(&put_args(md, 8, AckReq::Ack, p(1), 0, 0))
        .unwrap();
    assert_eq!(net.run(), 2);
    let acks = net.events(0, eq);
    assert_eq!(acks.len(), 1);
    assert_eq!(
        (acks[0].kind, acks[0].mlength, acks[0].ni_fail),
        (EventKind::Ack, 8, NiFail::Ok)
    );
    assert_eq!(net.e[0].ct_get(ct).unwrap(), ct_value(1, 0));

    // CtAck and OcAck: counted, no event.
    for mode in [AckReq::CtAck, AckReq::OcAck] {
        net.e[0].put(&put_args(md, 8, mode, p(1), 0, 0)).unwrap();
        assert_eq!(net.run(), 2, "{mode:?}");
        assert!(net.events(0, eq).is_empty(), "{mode:?}");
    }
    assert_eq!(net.e[0].ct_get(ct).unwrap(), ct_value(3, 0));

    // A CtAck failure counts a failure, still without an event.
    net.e[0]
        .put(&put_args(md, 8, AckReq::CtAck, p(1), 9, 0))
        .unwrap();
    net.run();
    assert!(net.events(0, eq).is_empty());
    assert_eq!(net.e[0].ct_get(ct).unwrap(), ct_value(3, 1));
    assert_eq!(target.to_vec(0, 8).unwrap(), vec![0xee; 8]);
}

#[test]
fn counting_events_send_ack_reply_bytes_and_thresholds() {
    let mut net = Net::new(2, MATCHING_PHYS);
    net.pt(1, 1, PtOptions::empty(), None);
    let target = Region::new(100);
    let tct = net.ct(1);
    let mut spec = me_spec(
        &target,
        0,
        MeOptions::OP_PUT
            | MeOptions::OP_GET
            | MeOptions::EVENT_CT_COMM
            | MeOptions::EVENT_CT_BYTES,
    );
    spec.ct = Some(tct);
    net.me(1, 1, spec, ListKind::Priority, 0);

    let ct = net.ct(0);
    let src = Region::new(50);
    let opts = MdOptions::EVENT_CT_SEND | MdOptions::EVENT_CT_ACK | MdOptions::EVENT_CT_BYTES;
    let md = net.md(0, &src, opts, None, Some(ct));
    net.e[0]
        .put(&put_args(md, 30, AckReq::Ack, p(1), 1, 0))
        .unwrap();
    assert_eq!(
        net.e[0].ct_get(ct).unwrap(),
        ct_value(30, 0),
        "SEND counted in bytes"
    );
    assert!(!net.e[0].ct_reached(ct, 60).unwrap());
    net.run();
    assert_eq!(
        net.e[0].ct_get(ct).unwrap(),
        ct_value(60, 0),
        "ACK counted in bytes"
    );
    assert!(net.e[0].ct_reached(ct, 60).unwrap());
    assert!(!net.e[0].ct_reached(ct, 61).unwrap());
    assert_eq!(
        net.e[1].ct_get(tct).unwrap(),
        ct_value(30, 0),
        "target counts bytes"
    );

    // Reply counting in events (no BYTES) on a separate MD and CT.
    let rct = net.ct(0);
    let rmd = net.md(0, &src, MdOptions::EVENT_CT_REPLY, None, Some(rct));
    for _ in 0..3 {
        let g = GetArgs {
            md: rmd,
            local_offset: 0,
            length: 10,
            remote: remote(1, 1, 0, 0),
            user_ptr: 0,
        };
        net.e[0].get(&g).unwrap();
    }
    net.run();
    assert_eq!(net.e[0].ct_get(rct).unwrap(), ct_value(3, 0));
    assert_eq!(net.e[1].ct_get(tct).unwrap(), ct_value(60, 0));

    // A failure makes any wait return, whatever the threshold.
    let g = GetArgs {
        md: rmd,
        local_offset: 0,
        length: 10,
        remote: remote(1, 33, 0, 0),
        user_ptr: 0,
    };
    net.e[0].get(&g).unwrap();
    net.run();
    assert_eq!(net.e[0].ct_get(rct).unwrap(), ct_value(3, 1));
    assert!(net.e[0].ct_reached(rct, 1000).unwrap());

    net.e[0].ct_set(rct, ct_value(5, 0)).unwrap();
    net.e[0].ct_inc(rct, ct_value(2, 1)).unwrap();
    assert_eq!(net.e[0].ct_get(rct).unwrap(), ct_value(7, 1));
}

#[test]
fn event_suppression_options() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let eq_t = net.eq(1, 64);
    net.pt(1, 0, PtOptions::empty(), Some(eq_t));
    let target = Region::new(64);
    let tct = net.ct(1);
    let base = MeOptions::OP_PUT | MeOptions::EVENT_CT_COMM | MeOptions::EVENT_CT_OVERFLOW;
    // bits 1: no LINK, no COMM event but counted. bits 2: no success events.
    // bits 3: USE_ONCE without AUTO_UNLINK event. bits 4 (overflow): an arrival in an
    // overflow entry is a communication event too (counted with CT_COMM).
    let cases = [
        (
            1,
            MeOptions::EVENT_LINK_DISABLE | MeOptions::EVENT_COMM_DISABLE,
            ListKind::Priority,
        ),
        (
            2,
            MeOptions::EVENT_LINK_DISABLE | MeOptions::EVENT_SUCCESS_DISABLE,
            ListKind::Priority,
        ),
        (
            3,
            MeOptions::EVENT_LINK_DISABLE | MeOptions::USE_ONCE | MeOptions::EVENT_UNLINK_DISABLE,
            ListKind::Priority,
        ),
        (
            4,
            MeOptions::EVENT_LINK_DISABLE
                | MeOptions::EVENT_COMM_DISABLE
                | MeOptions::EVENT_OVER_DISABLE,
            ListKind::Overflow,
        ),
    ];
    for (bits, o, list) in cases {
        let mut spec = me_spec(&target, bits, base | o);
        spec.ct = Some(tct);
        net.me(1, 0, spec, list, bits);
    }
    assert!(net.events(1, eq_t).is_empty(), "LINK events disabled");

    let eq = net.eq(0, 64);
    let src = Region::from_bytes(&[1; 4]);
    let quiet_send = net.md(0, &src, MdOptions::EVENT_SEND_DISABLE, Some(eq), None);
    let quiet_all = net.md(0, &src, MdOptions::EVENT_SUCCESS_DISABLE, Some(eq), None);
    for bits in 1..=4 {
        net.e[0]
            .put(&put_args(quiet_send, 4, AckReq::Ack, p(1), 0, bits))
            .unwrap();
    }
    net.run();
    // Only entry 3's PUT remains: its AUTO_UNLINK is disabled, every other event suppressed.
    let left: Vec<(EventKind, u64)> = net
        .events(1, eq_t)
        .iter()
        .map(|e| (e.kind, e.user_ptr))
        .collect();
    assert_eq!(left, vec![(EventKind::Put, 3)]);
    assert_eq!(
        net.e[1].ct_get(tct).unwrap(),
        ct_value(4, 0),
        "but every op counted"
    );
    let kinds: Vec<EventKind> = net.events(0, eq).iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![EventKind::Ack; 4], "no SEND, every ACK");

    // Success events off: nothing on success, but a failure is still reported.
    net.e[0]
        .put(&put_args(quiet_all, 4, AckReq::Ack, p(1), 0, 1))
        .unwrap();
    net.e[0]
        .put(&put_args(quiet_all, 4, AckReq::Ack, p(1), 0, 3))
        .unwrap(); // unlinked: no match
    net.run();
    let evs = net.events(0, eq);
    assert_eq!(evs.len(), 1);
    assert_eq!(
        (evs[0].kind, evs[0].ni_fail, evs[0].mlength),
        (EventKind::Ack, NiFail::NoMatch, 0)
    );
}

#[test]
fn handles_and_resource_rules() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let (ni, e0) = (net.ni[0], 0);
    assert!(matches!(
        net.e[e0].ni_init(MATCHING_PHYS, None),
        Err(PtlError::NiKindInUse(_))
    ));
    // Foreign handle: engine 1's EQ on engine 0.
    let foreign = net.eq(1, 4);
    assert!(matches!(
        net.e[0].eq_get(foreign),
        Err(PtlError::InvalidHandle { .. })
    ));
    // Stale handle after free.
    let eq = net.eq(0, 4);
    net.e[0].eq_free(eq).unwrap();
    assert!(matches!(
        net.e[0].eq_get(eq),
        Err(PtlError::InvalidHandle { .. })
    ));
    // FLOWCTRL needs an EQ; indices are checked.
    assert!(matches!(
        net.e[0].pt_alloc(ni, PtOptions::FLOWCTRL, None, 3),
        Err(PtlError::PtEqNeeded)
    ));
    let eq = net.eq(0, 4);
    assert_eq!(
        net.e[0]
            .pt_alloc(ni, PtOptions::empty(), Some(eq), crate::types::PT_ANY)
            .unwrap(),
        0
    );
    assert!(matches!(
        net.e[0].pt_alloc(ni, PtOptions::empty(), None, 0),
        Err(PtlError::PtInUse(0))
    ));
    assert!(matches!(
        net.e[0].pt_alloc(ni, PtOptions::empty(), None, 64),
        Err(PtlError::ArgInvalid { .. })
    ));
    assert!(
        matches!(net.e[0].eq_free(eq), Err(PtlError::InUse { .. })),
        "PT uses it"
    );
    // Entries: range checked, PT must exist, pt_free refused while attached.
    let r = Region::new(8);
    let mut bad = me_spec(&r, 0, MeOptions::OP_PUT);
    bad.length = 9;
    assert!(matches!(
        net.e[0].me_append(ni, 0, bad, ListKind::Priority, 0),
        Err(PtlError::ArgInvalid { .. })
    ));
    assert!(matches!(
        net.e[0].me_append(
            ni,
            5,
            me_spec(&r, 0, MeOptions::OP_PUT),
            ListKind::Priority,
            0
        ),
        Err(PtlError::ArgInvalid { .. })
    ));
    let me = net.me(
        0,
        0,
        me_spec(&r, 0, MeOptions::OP_PUT),
        ListKind::Priority,
        0,
    );
    assert!(matches!(
        net.e[0].pt_free(ni, 0),
        Err(PtlError::InUse { .. })
    ));
    net.e[0].me_unlink(me).unwrap();
    assert!(net.e[0].me_unlink(me).is_err(), "stale after unlink");
    net.e[0].pt_free(ni, 0).unwrap();
    net.e[0].eq_free(eq).unwrap();
    // LE rules: not on a matching NI; ME-only options refused on a non-matching NI.
    let le = LeSpec {
        region: r.clone(),
        offset: 0,
        length: 8,
        ct: None,
        uid: UID,
        options: MeOptions::OP_PUT,
    };
    assert!(net.e[0]
        .le_append(ni, 0, le.clone(), ListKind::Priority, 0)
        .is_err());
    let (nm, _) = net.e[0].ni_init(NOMATCH_PHYS, None).unwrap();
    net.e[0].pt_alloc(nm, PtOptions::empty(), None, 0).unwrap();
    let mut managed = le.clone();
    managed.options |= MeOptions::MANAGE_LOCAL;
    assert!(matches!(
        net.e[0].le_append(nm, 0, managed, ListKind::Priority, 0),
        Err(PtlError::ArgInvalid { .. })
    ));
    assert!(net.e[0]
        .me_append(
            nm,
            0,
            me_spec(&r, 0, MeOptions::OP_PUT),
            ListKind::Priority,
            0
        )
        .is_err());
    // An MD with a get in flight cannot be released; afterwards it can, then it is stale.
    let md = net.md(0, &r, MdOptions::empty(), None, None);
    let g = GetArgs {
        md,
        local_offset: 0,
        length: 8,
        remote: remote(1, 0, 0, 0),
        user_ptr: 0,
    };
    net.e[0].get(&g).unwrap();
    assert!(matches!(
        net.e[0].md_release(md),
        Err(PtlError::InUse { .. })
    ));
    net.run(); // engine 1 has no PT 0: answered with a failure, the op completes
    net.e[0].md_release(md).unwrap();
    assert!(net.e[0].get(&g).is_err());
    // Out-of-range and unmappable operations are refused before anything is sent.
    let md = net.md(0, &r, MdOptions::empty(), None, None);
    assert!(net.e[0]
        .put(&put_args(md, 9, AckReq::None, p(1), 0, 0))
        .is_err());
    assert!(net.e[0]
        .put(&put_args(md, 8, AckReq::None, ProcessId::Rank(1), 0, 0))
        .is_err());
    assert!(net.e[0]
        .put(&put_args(md, 8, AckReq::None, ProcessId::ANY_PHYS, 0, 0))
        .is_err());
    assert!(net.e[0].poll_outgoing().is_none());
    // ni_fini releases everything: old handles are stale, the kind can be reopened.
    net.e[0].ni_fini(ni).unwrap();
    assert!(net.e[0].md_release(md).is_err());
    assert!(net.e[0].get_id(ni).is_err());
    net.e[0].ni_init(MATCHING_PHYS, None).unwrap();
}

#[test]
fn limits_are_negotiated_and_enforced() {
    let mut e = Engine::new(phys(0), UID, 1);
    let desired = NiLimits {
        max_eqs: 2,
        max_pt_index: 1000,
        max_msg_size: u64::MAX,
        ..NiLimits::default()
    };
    let (ni, got) = e.ni_init(MATCHING_PHYS, Some(desired)).unwrap();
    assert_eq!(got.max_eqs, 2);
    assert_eq!(got.max_pt_index, max_limits().max_pt_index);
    assert_eq!(got.max_msg_size, crate::proto::MAX_PAYLOAD);
    assert_eq!(e.ni_limits(ni).unwrap(), got);
    e.eq_alloc(ni, 1).unwrap();
    e.eq_alloc(ni, 1).unwrap();
    assert!(matches!(
        e.eq_alloc(ni, 1),
        Err(PtlError::NoSpace { limit: 2, .. })
    ));
    assert!(e.eq_alloc(ni, 0).is_err());
    assert_eq!(e.get_id(ni).unwrap(), p(0));
    assert_eq!(e.get_phys_id(ni).unwrap(), phys(0));
    assert_eq!(e.get_uid(ni).unwrap(), UID);
    assert!(
        e.set_map(ni, &[phys(0)]).is_err(),
        "physical NIs have no map"
    );
}
