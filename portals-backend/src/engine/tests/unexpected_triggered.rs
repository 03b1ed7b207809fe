//! The unexpected list (searches), triggered operations and the past-the-end option: the
//! semantics the C library's programs rely on.

use super::*;
use crate::engine::triggered::TriggeredOp;
use crate::engine::unexpected::{SearchOp, SearchSpec};

fn search_spec(bits: u64, options: MeOptions, ct: Option<CtHandle>) -> SearchSpec {
    SearchSpec {
        ct,
        uid: crate::types::UID_ANY,
        options,
        match_id: ProcessId::ANY_PHYS,
        match_bits: bits,
        ignore_bits: 0,
    }
}

/// Three puts into an overflow entry of node 1 (match bits 1, 2, 1); returns node 1's EQ and
/// the overflow region.
fn three_unexpected(net: &mut Net) -> (EqHandle, Region) {
    let eq_t = net.eq(1, 64);
    net.pt(1, 0, PtOptions::empty(), Some(eq_t));
    let over = Region::new(64);
    let mut spec = me_spec(&over, 0, MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE);
    spec.ignore_bits = u64::MAX;
    net.me(1, 0, spec, ListKind::Overflow, 7);
    let src = Region::from_bytes(&[9; 8]);
    let md = net.md(0, &src, MdOptions::empty(), None, None);
    for (i, bits) in [1u64, 2, 1].into_iter().enumerate() {
        let mut a = put_args(md, 8, AckReq::None, p(1), 0, bits);
        a.remote.remote_offset = 8 * i as u64;
        net.e[0].put(&a).unwrap();
        net.run();
    }
    let arrivals: Vec<(EventKind, ListKind)> = net
        .events(1, eq_t)
        .iter()
        .map(|e| (e.kind, e.list))
        .collect();
    assert_eq!(arrivals, vec![(EventKind::Put, ListKind::Overflow); 3]);
    (eq_t, over)
}

#[test]
fn search_only_reports_and_keeps_search_delete_takes() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let (eq_t, _over) = three_unexpected(&mut net);
    let ct = net.ct(1);
    let counted = MeOptions::OP_PUT | MeOptions::EVENT_CT_OVERFLOW;
    // Persistent search-only for bits 1: two SEARCH events (oldest first), 2 successes and
    // the failure that ends a persistent search.
    net.e[1]
        .search(
            net.ni[1],
            0,
            search_spec(1, counted, Some(ct)),
            SearchOp::Only,
            5,
        )
        .unwrap();
    let found: Vec<(EventKind, u64, u64, NiFail)> = net
        .events(1, eq_t)
        .iter()
        .map(|e| (e.kind, e.user_ptr, e.remote_offset, e.ni_fail))
        .collect();
    assert_eq!(
        found,
        vec![
            (EventKind::Search, 5, 0, NiFail::Ok),
            (EventKind::Search, 5, 16, NiFail::Ok)
        ]
    );
    assert_eq!(net.e[1].ct_get(ct).unwrap(), ct_value(2, 1));
    // Use-once search-delete for bits 2: one PUT_OVERFLOW, one success, no failure.
    net.e[1].ct_set(ct, ct_value(0, 0)).unwrap();
    let once = counted | MeOptions::USE_ONCE;
    net.e[1]
        .search(
            net.ni[1],
            0,
            search_spec(2, once, Some(ct)),
            SearchOp::Delete,
            6,
        )
        .unwrap();
    let taken: Vec<(EventKind, u64)> = net
        .events(1, eq_t)
        .iter()
        .map(|e| (e.kind, e.remote_offset))
        .collect();
    assert_eq!(taken, vec![(EventKind::PutOverflow, 8)]);
    assert_eq!(net.e[1].ct_get(ct).unwrap(), ct_value(1, 0));
    // Gone: the same search finds nothing, says so with a NO_MATCH SEARCH and a failure.
    net.e[1].ct_set(ct, ct_value(0, 0)).unwrap();
    net.e[1]
        .search(
            net.ni[1],
            0,
            search_spec(2, once, Some(ct)),
            SearchOp::Delete,
            6,
        )
        .unwrap();
    let none: Vec<(EventKind, NiFail)> = net
        .events(1, eq_t)
        .iter()
        .map(|e| (e.kind, e.ni_fail))
        .collect();
    assert_eq!(none, vec![(EventKind::Search, NiFail::NoMatch)]);
    assert_eq!(net.e[1].ct_get(ct).unwrap(), ct_value(0, 1));
    assert_eq!(net.e[1].unexpected_len(net.ni[1], 0).unwrap(), 2);
}

#[test]
fn a_persistent_priority_entry_takes_every_matching_header() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let (eq_t, over) = three_unexpected(&mut net);
    let late = Region::new(8);
    net.me(
        1,
        0,
        me_spec(&late, 1, MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE),
        ListKind::Priority,
        3,
    );
    let evs = net.events(1, eq_t);
    let got: Vec<(EventKind, u64, u64)> =
        evs.iter().map(|e| (e.kind, e.user_ptr, e.start)).collect();
    // Each reports where its data lies in the overflow entry (region origin 0).
    assert_eq!(
        got,
        vec![
            (EventKind::PutOverflow, 3, 0),
            (EventKind::PutOverflow, 3, 16)
        ]
    );
    assert_eq!(over.to_vec(16, 8).unwrap(), vec![9; 8]);
    assert_eq!(net.e[1].unexpected_len(net.ni[1], 0).unwrap(), 1);
}

#[test]
fn triggered_operations_wait_for_their_threshold_in_order() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let eq_t = net.eq(1, 64);
    net.pt(1, 0, PtOptions::empty(), Some(eq_t));
    let target = Region::new(8);
    net.me(
        1,
        0,
        me_spec(&target, 0, MeOptions::OP_PUT),
        ListKind::Priority,
        0,
    );
    let _ = net.events(1, eq_t);
    let trig = net.ct(0);
    let chained = net.ct(0);
    let src = Region::from_bytes(&[4; 8]);
    let md = net.md(0, &src, MdOptions::empty(), None, None);
    let mut first = put_args(md, 8, AckReq::None, p(1), 0, 0);
    first.hdr_data = 1;
    let mut second = first;
    second.hdr_data = 2;
    net.e[0].trigger(trig, 2, TriggeredOp::Put(second)).unwrap();
    net.e[0].trigger(trig, 1, TriggeredOp::Put(first)).unwrap();
    // A chain: reaching 2 also adds 5 to another CT.
    net.e[0]
        .trigger(trig, 2, TriggeredOp::CtInc(chained, ct_value(5, 0)))
        .unwrap();
    net.run();
    assert!(
        net.events(1, eq_t).is_empty(),
        "nothing before the threshold"
    );
    net.e[0].ct_inc(trig, ct_value(1, 0)).unwrap();
    net.run();
    let hdr = |evs: Vec<Event>| evs.iter().map(|e| e.hdr_data).collect::<Vec<u64>>();
    assert_eq!(hdr(net.events(1, eq_t)), vec![1]);
    assert_eq!(net.e[0].ct_get(chained).unwrap(), ct_value(0, 0));
    net.e[0].ct_inc(trig, ct_value(1, 0)).unwrap();
    net.run();
    assert_eq!(hdr(net.events(1, eq_t)), vec![2]);
    assert_eq!(net.e[0].ct_get(chained).unwrap(), ct_value(5, 0));
    assert_eq!(target.to_vec(0, 8).unwrap(), vec![4; 8]);
    // A threshold already reached starts at once; a cancelled one never.
    net.e[0]
        .trigger(trig, 1, TriggeredOp::CtInc(chained, ct_value(1, 0)))
        .unwrap();
    assert_eq!(net.e[0].ct_get(chained).unwrap(), ct_value(6, 0));
    net.e[0]
        .trigger(trig, 9, TriggeredOp::CtInc(chained, ct_value(1, 0)))
        .unwrap();
    net.e[0].ct_cancel_triggered(trig).unwrap();
    net.e[0].ct_set(trig, ct_value(10, 0)).unwrap();
    assert_eq!(net.e[0].ct_get(chained).unwrap(), ct_value(6, 0));
}

#[test]
fn triggered_operations_are_limited_per_ni() {
    let limits = crate::types::NiLimits {
        max_triggered_ops: 2,
        ..Default::default()
    };
    let mut e = Engine::new(phys(0), UID, 1);
    let (ni, _) = e.ni_init(MATCHING_PHYS, Some(limits)).unwrap();
    let ct = e.ct_alloc(ni).unwrap();
    let other = e.ct_alloc(ni).unwrap();
    for _ in 0..2 {
        e.trigger(ct, 1, TriggeredOp::CtInc(other, ct_value(1, 0)))
            .unwrap();
    }
    assert!(matches!(
        e.trigger(ct, 1, TriggeredOp::CtInc(other, ct_value(1, 0))),
        Err(PtlError::NoSpace { .. })
    ));
    e.ct_inc(ct, ct_value(1, 0)).unwrap();
    assert_eq!(e.ct_get(other).unwrap(), ct_value(2, 0));
    e.trigger(ct, 5, TriggeredOp::CtInc(other, ct_value(1, 0)))
        .unwrap();
}

#[test]
fn past_the_end_moves_nothing_only_where_the_pt_asks() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let eq_t = net.eq(1, 64);
    net.pt(1, 0, PtOptions::PAST_END_EMPTY, Some(eq_t));
    net.pt(1, 1, PtOptions::empty(), Some(eq_t));
    let r = Region::new(4);
    for pt in [0, 1] {
        net.me(
            1,
            pt,
            me_spec(&r, 0, MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE),
            ListKind::Priority,
            0,
        );
    }
    let src = Region::from_bytes(&[3; 4]);
    let eq_i = net.eq(0, 8);
    let md = net.md(0, &src, MdOptions::EVENT_SEND_DISABLE, Some(eq_i), None);
    for (pt, want) in [(0, (NiFail::Ok, 0)), (1, (NiFail::Segv, 0))] {
        let mut a = put_args(md, 4, AckReq::Ack, p(1), pt, 0);
        a.remote.remote_offset = 9;
        net.e[0].put(&a).unwrap();
        net.run();
        let evs = net.events(0, eq_i);
        assert_eq!((evs[0].ni_fail, evs[0].mlength), want);
    }
    assert_eq!(r.to_vec(0, 4).unwrap(), vec![0; 4]);
}

#[test]
fn a_full_unexpected_list_disables_a_flow_controlled_pt() {
    let limits = crate::types::NiLimits {
        max_unexpected_headers: 2,
        ..Default::default()
    };
    let mut net = Net::new(2, MATCHING_PHYS);
    // Node 1 again, with room for two headers.
    let mut e = Engine::new(phys(1), UID, 99);
    let (ni, _) = e.ni_init(MATCHING_PHYS, Some(limits)).unwrap();
    net.e[1] = e;
    net.ni[1] = ni;
    let eq_t = net.eq(1, 64);
    net.pt(1, 0, PtOptions::FLOWCTRL, Some(eq_t));
    let over = Region::new(64);
    let mut spec = me_spec(&over, 0, MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE);
    spec.ignore_bits = u64::MAX;
    net.me(1, 0, spec, ListKind::Overflow, 0);
    let src = Region::from_bytes(&[1; 4]);
    let eq_i = net.eq(0, 8);
    let md = net.md(0, &src, MdOptions::EVENT_SEND_DISABLE, Some(eq_i), None);
    let mut fails = Vec::new();
    for _ in 0..3 {
        net.e[0]
            .put(&put_args(md, 4, AckReq::Ack, p(1), 0, 0))
            .unwrap();
        net.run();
        fails.extend(net.events(0, eq_i).iter().map(|e| e.ni_fail));
    }
    assert_eq!(fails, vec![NiFail::Ok, NiFail::Ok, NiFail::PtDisabled]);
    let kinds: Vec<EventKind> = net.events(1, eq_t).iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![EventKind::Put, EventKind::Put, EventKind::PtDisabled]
    );
    assert_eq!(net.e[1].unexpected_len(ni, 0).unwrap(), 2);
}
