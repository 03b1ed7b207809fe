//! Matching, list order, MANAGE_LOCAL, USE_ONCE, truncation, permissions, bounds, drops and
//! logical addressing.

use super::*;
use crate::types::{NID_ANY, PID_ANY, RANK_ANY};

/// Engine 1 gets PT 0 with an EQ of 64; engine 0 an MD over `src` with an EQ. Returns
/// (target EQ, initiator EQ, initiator MD).
fn setup(net: &mut Net, src: &Region, pt_opts: PtOptions) -> (EqHandle, EqHandle, MdHandle) {
    let eq_t = net.eq(1, 64);
    net.pt(1, 0, pt_opts, Some(eq_t));
    let eq_i = net.eq(0, 64);
    let md = net.md(0, src, MdOptions::EVENT_SEND_DISABLE, Some(eq_i), None);
    (eq_t, eq_i, md)
}

fn quiet(o: MeOptions) -> MeOptions {
    o | MeOptions::EVENT_LINK_DISABLE
}

/// Sends a put with an ack and returns the initiator's ACK event.
fn put_acked(net: &mut Net, md: MdHandle, eq_i: EqHandle, len: u64, bits: u64, off: u64) -> Event {
    let mut a = put_args(md, len, AckReq::Ack, p(1), 0, bits);
    a.remote.remote_offset = off;
    net.e[0].put(&a).unwrap();
    net.run();
    let evs = net.events(0, eq_i);
    assert_eq!(evs.len(), 1, "{evs:?}");
    assert_eq!(evs[0].kind, EventKind::Ack);
    evs[0]
}

#[test]
fn match_and_ignore_bits_first_match_wins() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let src = Region::from_bytes(&[0xaa; 4]);
    let (eq_t, eq_i, md) = setup(&mut net, &src, PtOptions::empty());
    let (a, b) = (Region::new(4), Region::new(4));
    let mut wide = me_spec(&a, 0x10, quiet(MeOptions::OP_PUT));
    wide.ignore_bits = 0x0f;
    net.me(1, 0, wide, ListKind::Priority, 1);
    net.me(
        1,
        0,
        me_spec(&b, 0x13, quiet(MeOptions::OP_PUT)),
        ListKind::Priority,
        2,
    );

    // 0x13 fits both; the first appended wins.
    assert_eq!(
        put_acked(&mut net, md, eq_i, 4, 0x13, 0).ni_fail,
        NiFail::Ok
    );
    assert_eq!(
        (a.to_vec(0, 4).unwrap(), b.to_vec(0, 4).unwrap()),
        (vec![0xaa; 4], vec![0; 4])
    );
    assert_eq!(net.events(1, eq_t)[0].user_ptr, 1);
    // A bit outside the ignore mask differs: no match, dropped and counted.
    let ack = put_acked(&mut net, md, eq_i, 4, 0x23, 0);
    assert_eq!((ack.ni_fail, ack.mlength), (NiFail::NoMatch, 0));
    assert_eq!(net.status(1, SrIndex::DropCount), 1);
    assert!(net.events(1, eq_t).is_empty());
    // Without an ack a drop is only counted at the target.
    net.e[0]
        .put(&put_args(md, 4, AckReq::None, p(1), 0, 0x99))
        .unwrap();
    assert_eq!(net.run(), 1);
    assert_eq!(net.status(1, SrIndex::DropCount), 2);
    assert!(net.events(0, eq_i).is_empty());
}

#[test]
fn match_id_wildcards_physical() {
    let mut net = Net::new(3, MATCHING_PHYS);
    let eq_t = net.eq(1, 64);
    net.pt(1, 0, PtOptions::empty(), Some(eq_t));
    let r = Region::new(8);
    let entry = |id: ProcessId| {
        let mut s = me_spec(&r, 0, quiet(MeOptions::OP_PUT));
        s.match_id = id;
        s
    };
    let node = phys(0).nid;
    // Only engine 2; then another node (never); then this node, any pid; then anyone.
    net.me(1, 0, entry(p(2)), ListKind::Priority, 2);
    net.me(
        1,
        0,
        entry(ProcessId::Phys(PhysId {
            nid: 0x0a00_0001,
            pid: PID_ANY,
        })),
        ListKind::Priority,
        9,
    );
    net.me(
        1,
        0,
        entry(ProcessId::Phys(PhysId {
            nid: node,
            pid: PID_ANY,
        })),
        ListKind::Priority,
        5,
    );
    net.me(1, 0, entry(ProcessId::ANY_PHYS), ListKind::Priority, 7);
    for i in [0, 2] {
        let src = Region::new(1);
        let md = net.md(i, &src, MdOptions::empty(), None, None);
        net.e[i]
            .put(&put_args(md, 1, AckReq::None, p(1), 0, 0))
            .unwrap();
    }
    net.run();
    let got: Vec<(u64, ProcessId)> = net
        .events(1, eq_t)
        .iter()
        .map(|e| (e.user_ptr, e.initiator))
        .collect();
    assert_eq!(got, vec![(5, p(0)), (2, p(2))]);
    // The wildcard rules themselves, including a node this router cannot host.
    use super::super::target::id_matches;
    let far = PhysId {
        nid: 0x0a00_0001,
        pid: 3,
    };
    assert!(id_matches(ProcessId::ANY_PHYS, far, None));
    assert!(id_matches(
        ProcessId::Phys(PhysId {
            nid: NID_ANY,
            pid: 3
        }),
        far,
        None
    ));
    assert!(!id_matches(
        ProcessId::Phys(PhysId {
            nid: NID_ANY,
            pid: 4
        }),
        far,
        None
    ));
    assert!(!id_matches(
        ProcessId::Phys(PhysId {
            nid: node,
            pid: PID_ANY
        }),
        far,
        None
    ));
    assert!(id_matches(ProcessId::Rank(RANK_ANY), far, None));
    assert!(
        !id_matches(ProcessId::Rank(0), far, None),
        "a rank never matches without one"
    );
    assert!(id_matches(ProcessId::Rank(4), far, Some(4)));
}

#[test]
fn logical_ni_ranks_and_rank_wildcards() {
    let mut net = Net::new(3, MATCHING_LOGICAL);
    assert_eq!(net.e[2].get_id(net.ni[2]).unwrap(), ProcessId::Rank(2));
    assert_eq!(
        net.e[2].get_map(net.ni[2]).unwrap(),
        &[phys(0), phys(1), phys(2)]
    );
    let eq_t = net.eq(1, 64);
    net.pt(1, 0, PtOptions::empty(), Some(eq_t));
    let r = Region::new(8);
    let mut only2 = me_spec(&r, 0, quiet(MeOptions::OP_PUT));
    only2.match_id = ProcessId::Rank(2);
    let mut any = me_spec(&r, 0, quiet(MeOptions::OP_PUT));
    any.match_id = ProcessId::Rank(RANK_ANY);
    net.me(1, 0, only2, ListKind::Priority, 2);
    net.me(1, 0, any, ListKind::Priority, 100);
    for i in [0, 2] {
        let src = Region::new(1);
        let md = net.md(i, &src, MdOptions::empty(), None, None);
        net.e[i]
            .put(&put_args(md, 1, AckReq::None, ProcessId::Rank(1), 0, 0))
            .unwrap();
    }
    net.run();
    let got: Vec<(u64, ProcessId)> = net
        .events(1, eq_t)
        .iter()
        .map(|e| (e.user_ptr, e.initiator))
        .collect();
    assert_eq!(
        got,
        vec![(100, ProcessId::Rank(0)), (2, ProcessId::Rank(2))]
    );

    // A request whose carried rank disagrees with the map is refused and counted.
    let src = Region::new(1);
    let md = net.md(0, &src, MdOptions::empty(), None, None);
    net.e[0]
        .put(&put_args(md, 1, AckReq::None, ProcessId::Rank(1), 0, 0))
        .unwrap();
    let (to, bytes) = net.e[0].poll_outgoing().unwrap();
    let mut bytes = bytes.to_bytes();
    assert_eq!(to, phys(1));
    bytes[14..18].copy_from_slice(&2u32.to_le_bytes()); // claim to be rank 2
    net.e[1].handle_message(phys(0), &bytes);
    assert_eq!(net.e[1].stats().bad_initiator, 1);
    assert_eq!(net.status(1, SrIndex::DropCount), 1);
    assert!(net.events(1, eq_t).is_empty());
}

#[test]
fn priority_before_overflow_and_use_once() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let src = Region::from_bytes(&[5; 4]);
    let (eq_t, eq_i, md) = setup(&mut net, &src, PtOptions::empty());
    let (over, prio) = (Region::new(4), Region::new(4));
    // Overflow appended first; priority still wins while it lasts.
    net.me(
        1,
        0,
        me_spec(&over, 0, MeOptions::OP_PUT),
        ListKind::Overflow,
        1,
    );
    net.me(
        1,
        0,
        me_spec(&prio, 0, MeOptions::OP_PUT | MeOptions::USE_ONCE),
        ListKind::Priority,
        2,
    );
    let links: Vec<ListKind> = net.events(1, eq_t).iter().map(|e| e.list).collect();
    assert_eq!(links, vec![ListKind::Overflow, ListKind::Priority]);

    put_acked(&mut net, md, eq_i, 4, 0, 0);
    let evs = net.events(1, eq_t);
    let kinds: Vec<(EventKind, u64, ListKind)> =
        evs.iter().map(|e| (e.kind, e.user_ptr, e.list)).collect();
    assert_eq!(
        kinds,
        vec![
            (EventKind::Put, 2, ListKind::Priority),
            (EventKind::AutoUnlink, 2, ListKind::Priority)
        ]
    );
    assert_eq!(prio.to_vec(0, 4).unwrap(), vec![5; 4]);
    // USE_ONCE is gone: the overflow entry takes the next one, reported as a PUT on the
    // overflow list; its header waits on the unexpected list.
    src.write(0, &[6; 4]).unwrap();
    put_acked(&mut net, md, eq_i, 4, 0, 0);
    let evs = net.events(1, eq_t);
    assert_eq!(evs.len(), 1);
    assert_eq!(
        (evs[0].kind, evs[0].list, evs[0].user_ptr),
        (EventKind::Put, ListKind::Overflow, 1)
    );
    assert_eq!(
        (over.to_vec(0, 4).unwrap(), prio.to_vec(0, 4).unwrap()),
        (vec![6; 4], vec![5; 4])
    );
    // A use-once priority entry appended now matches that header: LINK, PUT_OVERFLOW (the
    // data where it landed, in the overflow entry) and AUTO_UNLINK, in that order.
    let late = Region::new(4);
    net.me(
        1,
        0,
        me_spec(&late, 0, MeOptions::OP_PUT | MeOptions::USE_ONCE),
        ListKind::Priority,
        3,
    );
    let evs = net.events(1, eq_t);
    let kinds: Vec<(EventKind, u64, ListKind)> =
        evs.iter().map(|e| (e.kind, e.user_ptr, e.list)).collect();
    assert_eq!(
        kinds,
        vec![
            (EventKind::Link, 3, ListKind::Priority),
            (EventKind::PutOverflow, 3, ListKind::Overflow),
            (EventKind::AutoUnlink, 3, ListKind::Priority),
        ]
    );
    assert_eq!((evs[1].start, evs[1].mlength, evs[1].rlength), (0, 4, 4));
    assert_eq!(
        late.to_vec(0, 4).unwrap(),
        vec![0; 4],
        "the data stays where it landed"
    );
    // The header is gone: another entry matches nothing.
    net.me(
        1,
        0,
        me_spec(&late, 0, MeOptions::OP_PUT | MeOptions::USE_ONCE),
        ListKind::Priority,
        4,
    );
    let kinds: Vec<EventKind> = net.events(1, eq_t).iter().map(|e| e.kind).collect();
    assert_eq!(kinds, vec![EventKind::Link]);
}

#[test]
fn manage_local_packs_and_auto_unlinks_on_min_free() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let src = Region::from_bytes(&(1u8..=20).collect::<Vec<_>>());
    let (eq_t, eq_i, md) = setup(&mut net, &src, PtOptions::empty());
    let block = Region::new(100);
    let mut spec = me_spec(
        &block,
        0,
        quiet(MeOptions::OP_PUT | MeOptions::MANAGE_LOCAL | MeOptions::MAY_ALIGN),
    );
    spec.min_free = 30;
    net.me(1, 0, spec, ListKind::Priority, 42);
    let mut starts = Vec::new();
    for i in 0..4u64 {
        // The remote offset is ignored by a MANAGE_LOCAL entry.
        let ack = put_acked(&mut net, md, eq_i, 20, 0, 77);
        assert_eq!(
            (ack.ni_fail, ack.mlength, ack.remote_offset),
            (NiFail::Ok, 20, 20 * i)
        );
        let evs = net.events(1, eq_t);
        starts.push(evs[0].start);
        assert_eq!(evs[0].remote_offset, 20 * i);
        if i < 3 {
            assert_eq!(
                evs.len(),
                1,
                "{i}: 100 - {} >= 30 stays linked",
                20 * (i + 1)
            );
        } else {
            assert_eq!(evs.len(), 2, "80 bytes used, 20 < 30 remain: auto-unlink");
            let unlink = Event {
                user_ptr: 42,
                uid: UID,
                initiator: p(0),
                ..ev(EventKind::AutoUnlink)
            };
            assert_eq!(evs[1], unlink);
        }
    }
    assert_eq!(starts, vec![0, 20, 40, 60]);
    let data: Vec<u8> = (1u8..=20).collect();
    let mut want = Vec::new();
    for _ in 0..4 {
        want.extend_from_slice(&data);
    }
    want.extend_from_slice(&[0; 20]);
    assert_eq!(block.to_vec(0, 100).unwrap(), want, "packed back to back");
    assert_eq!(
        put_acked(&mut net, md, eq_i, 20, 0, 0).ni_fail,
        NiFail::NoMatch
    );
}

#[test]
fn prepended_entry_is_matched_first() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let src = Region::from_bytes(&[3; 8]);
    let (eq_t, eq_i, md) = setup(&mut net, &src, PtOptions::empty());
    let blocks: Vec<Region> = (0..3).map(|_| Region::new(64)).collect();
    let spec = |r: &Region| {
        let mut s = me_spec(r, 0, quiet(MeOptions::OP_PUT | MeOptions::MANAGE_LOCAL));
        s.min_free = 8;
        s
    };
    net.me(1, 0, spec(&blocks[0]), ListKind::Priority, 0);
    net.me(1, 0, spec(&blocks[1]), ListKind::Priority, 1);
    let (ni1, b2) = (net.ni[1], spec(&blocks[2]));
    net.e[1]
        .me_prepend(ni1, 0, b2, ListKind::Priority, 2)
        .unwrap();
    // List: 2, 0, 1. Eight 8-byte puts fill block 2 (it unlinks once fewer than min_free
    // bytes remain), then the next lands in block 0.
    let mut landed = Vec::new();
    for _ in 0..9 {
        assert_eq!(put_acked(&mut net, md, eq_i, 8, 0, 0).ni_fail, NiFail::Ok);
        landed.extend(
            net.events(1, eq_t)
                .iter()
                .filter(|e| e.kind == EventKind::Put)
                .map(|e| e.user_ptr),
        );
    }
    assert_eq!(landed, vec![2, 2, 2, 2, 2, 2, 2, 2, 0]);
    assert_eq!(blocks[2].to_vec(0, 64).unwrap(), vec![3; 64]);
    assert_eq!(
        blocks[0].to_vec(0, 16).unwrap(),
        [vec![3; 8], vec![0; 8]].concat()
    );
    assert_eq!(
        blocks[1].to_vec(0, 64).unwrap(),
        vec![0; 64],
        "never reached"
    );
    // Prepending follows the append rules: match entries only on a matching NI.
    let mut other = Net::new(1, NOMATCH_PHYS);
    let region = Region::new(8);
    let (ni, spec0) = (other.ni[0], me_spec(&region, 0, MeOptions::OP_PUT));
    let e = other.e[0]
        .me_prepend(ni, 0, spec0, ListKind::Priority, 0)
        .unwrap_err();
    assert!(e.to_string().contains("me_prepend"), "{e}");
}

#[test]
fn a_drained_manage_local_entry_rewinds_to_its_start() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let src = Region::from_bytes(&[4; 8]);
    let (eq_t, eq_i, md) = setup(&mut net, &src, PtOptions::empty());
    let block = Region::new(64);
    let mut spec = me_spec(
        &block,
        0,
        quiet(MeOptions::OP_PUT | MeOptions::MANAGE_LOCAL),
    );
    spec.min_free = 8;
    let me = net.me(1, 0, spec, ListKind::Priority, 5);
    let starts =
        |net: &mut Net| -> Vec<u64> { net.events(1, eq_t).iter().map(|e| e.start).collect() };
    for _ in 0..2 {
        assert_eq!(put_acked(&mut net, md, eq_i, 8, 0, 0).ni_fail, NiFail::Ok);
    }
    // Two events wait: no rewind.
    assert!(!net.e[1].me_rewind(me, eq_t).unwrap());
    assert_eq!(starts(&mut net), vec![0, 8]);
    // Drained: the next message lands at the start again.
    assert!(net.e[1].me_rewind(me, eq_t).unwrap());
    put_acked(&mut net, md, eq_i, 8, 0, 0);
    assert_eq!(starts(&mut net), vec![0]);
    // Only a locally managed entry has an offset to rewind.
    let plain = Region::new(8);
    let other = net.me(
        1,
        0,
        me_spec(&plain, 9, quiet(MeOptions::OP_PUT)),
        ListKind::Priority,
        6,
    );
    let e = net.e[1].me_rewind(other, eq_t).unwrap_err();
    assert!(e.to_string().contains("MANAGE_LOCAL"), "{e}");
}

#[test]
fn truncation_and_no_truncate() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let src = Region::from_bytes(&[9; 16]);
    let (eq_t, eq_i, md) = setup(&mut net, &src, PtOptions::empty());
    let strict = Region::new(10);
    let lax = Region::new(10);
    net.me(
        1,
        0,
        me_spec(
            &strict,
            0,
            quiet(MeOptions::OP_PUT | MeOptions::NO_TRUNCATE),
        ),
        ListKind::Priority,
        1,
    );
    net.me(
        1,
        0,
        me_spec(&lax, 0, quiet(MeOptions::OP_PUT)),
        ListKind::Priority,
        2,
    );
    // 16 bytes at offset 4 do not fit 10: NO_TRUNCATE skips, the next entry truncates to 6.
    let ack = put_acked(&mut net, md, eq_i, 16, 0, 4);
    assert_eq!(
        (ack.ni_fail, ack.rlength, ack.mlength, ack.remote_offset),
        (NiFail::Ok, 16, 6, 4)
    );
    let evs = net.events(1, eq_t);
    assert_eq!(
        (evs[0].user_ptr, evs[0].rlength, evs[0].mlength),
        (2, 16, 6)
    );
    assert_eq!(strict.to_vec(0, 10).unwrap(), vec![0; 10]);
    assert_eq!(
        lax.to_vec(0, 10).unwrap(),
        vec![0, 0, 0, 0, 9, 9, 9, 9, 9, 9]
    );
    // A fitting put goes to the strict entry.
    let ack = put_acked(&mut net, md, eq_i, 10, 0, 0);
    assert_eq!(ack.mlength, 10);
    assert_eq!(strict.to_vec(0, 10).unwrap(), vec![9; 10]);
}

#[test]
fn permission_and_bounds_failures_reach_the_initiator() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let src = Region::from_bytes(&[1; 8]);
    let (eq_t, eq_i, md) = setup(&mut net, &src, PtOptions::empty());
    let r = Region::new(8);
    net.me(
        1,
        0,
        me_spec(&r, 1, quiet(MeOptions::OP_GET)),
        ListKind::Priority,
        0,
    );
    let mut other_uid = me_spec(&r, 2, quiet(MeOptions::OP_PUT));
    other_uid.uid = UID + 1;
    net.me(1, 0, other_uid, ListKind::Priority, 0);
    net.me(
        1,
        0,
        me_spec(&r, 3, quiet(MeOptions::OP_PUT)),
        ListKind::Priority,
        0,
    );

    assert_eq!(
        put_acked(&mut net, md, eq_i, 8, 1, 0).ni_fail,
        NiFail::PermViolation
    );
    assert_eq!(
        put_acked(&mut net, md, eq_i, 8, 2, 0).ni_fail,
        NiFail::PermViolation
    );
    assert_eq!(net.status(1, SrIndex::PermissionViolations), 2);
    // Starting past the end of the entry: SEGV, memory untouched.
    assert_eq!(put_acked(&mut net, md, eq_i, 1, 3, 9).ni_fail, NiFail::Segv);
    assert_eq!(net.status(1, SrIndex::OperationViolations), 1);
    // A get on a put-only entry, reported on the REPLY.
    let g = GetArgs {
        md,
        local_offset: 0,
        length: 8,
        remote: RemoteAddr {
            target: p(1),
            pt_index: 0,
            match_bits: 3,
            remote_offset: 0,
        },
        user_ptr: 0,
    };
    net.e[0].get(&g).unwrap();
    net.run();
    let evs = net.events(0, eq_i);
    assert_eq!(
        (evs[0].kind, evs[0].ni_fail, evs[0].mlength),
        (EventKind::Reply, NiFail::PermViolation, 0)
    );
    assert_eq!(
        src.to_vec(0, 8).unwrap(),
        vec![1; 8],
        "failed reply writes nothing"
    );
    assert_eq!(r.to_vec(0, 8).unwrap(), vec![0; 8]);
    assert!(net.events(1, eq_t).is_empty());
    assert_eq!(net.status(1, SrIndex::DropCount), 0);
}
