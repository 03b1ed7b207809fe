//! Flow control (disable, PT_DISABLED, re-enable, retransmit: no loss, no duplicate) and EQ
//! overflow reporting.

use hashbrown::HashMap;

use super::*;

const PAYLOAD: u64 = 16;

fn acks(net: &mut Net, eq: EqHandle) -> Vec<NiFail> {
    net.events(0, eq)
        .iter()
        .map(|e| {
            assert_eq!(e.kind, EventKind::Ack);
            e.ni_fail
        })
        .collect()
}

#[test]
fn no_match_disables_then_enable_and_resend() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let eq_t = net.eq(1, 16);
    net.pt(1, 3, PtOptions::FLOWCTRL, Some(eq_t));
    let eq_i = net.eq(0, 16);
    let src = Region::from_bytes(&[7; 4]);
    let md = net.md(0, &src, MdOptions::EVENT_SEND_DISABLE, Some(eq_i), None);
    let put = put_args(md, 4, AckReq::Ack, p(1), 3, 0);

    net.e[0].put(&put).unwrap();
    net.run();
    assert_eq!(acks(&mut net, eq_i), vec![NiFail::PtDisabled]);
    let disabled = Event {
        hdr_data: 0x1234,
        rlength: 4,
        initiator: p(0),
        uid: UID,
        pt_index: 3,
        ni_fail: NiFail::PtDisabled,
        ..ev(EventKind::PtDisabled)
    };
    assert_eq!(net.events(1, eq_t), vec![disabled]);
    assert!(!net.e[1].pt_is_enabled(net.ni[1], 3).unwrap());

    // While disabled everything is refused, even with an entry, and no second PT_DISABLED.
    let r = Region::new(8);
    net.me(
        1,
        3,
        me_spec(&r, 0, MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE),
        ListKind::Priority,
        0,
    );
    net.e[0].put(&put).unwrap();
    net.run();
    assert_eq!(acks(&mut net, eq_i), vec![NiFail::PtDisabled]);
    assert!(net.events(1, eq_t).is_empty());
    assert_eq!(net.status(1, SrIndex::DropCount), 2);
    assert_eq!(r.to_vec(0, 8).unwrap(), vec![0; 8]);

    net.e[1].pt_enable(net.ni[1], 3).unwrap();
    net.e[0].put(&put).unwrap();
    net.run();
    assert_eq!(acks(&mut net, eq_i), vec![NiFail::Ok]);
    assert_eq!(r.to_vec(0, 8).unwrap(), vec![7, 7, 7, 7, 0, 0, 0, 0]);
}

#[test]
fn disables_before_its_eq_overflows() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let eq_t = net.eq(1, 4);
    net.pt(1, 0, PtOptions::FLOWCTRL, Some(eq_t));
    let r = Region::new(64);
    net.me(
        1,
        0,
        me_spec(&r, 0, MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE),
        ListKind::Priority,
        0,
    );
    let eq_i = net.eq(0, 16);
    let src = Region::new(4);
    let md = net.md(0, &src, MdOptions::EVENT_SEND_DISABLE, Some(eq_i), None);
    for _ in 0..5 {
        net.e[0]
            .put(&put_args(md, 4, AckReq::Ack, p(1), 0, 0))
            .unwrap();
    }
    net.run();
    use NiFail::{Ok as Fine, PtDisabled as Off};
    assert_eq!(acks(&mut net, eq_i), vec![Fine, Fine, Fine, Off, Off]);
    // Three PUTs, then PT_DISABLED in the slot flow control kept free: nothing was dropped.
    let kinds: Vec<EventKind> = net.events(1, eq_t).iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        vec![
            EventKind::Put,
            EventKind::Put,
            EventKind::Put,
            EventKind::PtDisabled
        ]
    );
    assert_eq!(net.e[1].stats().eq_overflows, 0);
}

/// Two flow-controlled PTs posting to one EQ (as the conduit's AM and Long-data portals do):
/// when the EQ runs out of room, each PT still finds a slot for its own PT_DISABLED. With one
/// slot kept for the whole EQ, the first PT to disable took it and the second's event was
/// dropped (`EqGet::Dropped`, fatal for the conduit), which a one-rank flood of 128 KiB Long
/// AMs to itself hit.
#[test]
fn two_flow_controlled_pts_of_one_eq_both_report_their_disable() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let eq_t = net.eq(1, 5);
    let r = Region::new(64);
    for pt in [0, 1] {
        net.pt(1, pt, PtOptions::FLOWCTRL, Some(eq_t));
        net.me(
            1,
            pt,
            me_spec(&r, 0, MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE),
            ListKind::Priority,
            0,
        );
    }
    let eq_i = net.eq(0, 16);
    let src = Region::new(4);
    let md = net.md(0, &src, MdOptions::EVENT_SEND_DISABLE, Some(eq_i), None);
    for pt in [0, 0, 0, 0, 1, 1] {
        net.e[0]
            .put(&put_args(md, 4, AckReq::Ack, p(1), pt, 0))
            .unwrap();
    }
    net.run();
    use NiFail::{Ok as Fine, PtDisabled as Off};
    // Five slots, two kept for the two PTs' PT_DISABLED: three PUTs fit.
    assert_eq!(acks(&mut net, eq_i), vec![Fine, Fine, Fine, Off, Off, Off]);
    let got: Vec<(EventKind, u32)> = net
        .events(1, eq_t)
        .iter()
        .map(|e| (e.kind, e.pt_index))
        .collect();
    assert_eq!(
        got,
        vec![
            (EventKind::Put, 0),
            (EventKind::Put, 0),
            (EventKind::Put, 0),
            (EventKind::PtDisabled, 0),
            (EventKind::PtDisabled, 1),
        ]
    );
    assert_eq!(net.e[1].stats().eq_overflows, 0);
    assert!(!net.e[1].pt_is_enabled(net.ni[1], 0).unwrap());
    assert!(!net.e[1].pt_is_enabled(net.ni[1], 1).unwrap());

    // Re-enabled, each PT counts in the reserve again: the drained EQ takes three more PUTs
    // before flow control refuses, whichever PT they go to.
    net.e[1].pt_enable(net.ni[1], 0).unwrap();
    net.e[1].pt_enable(net.ni[1], 1).unwrap();
    for pt in [1, 0, 1, 0] {
        net.e[0]
            .put(&put_args(md, 4, AckReq::Ack, p(1), pt, 0))
            .unwrap();
    }
    net.run();
    assert_eq!(acks(&mut net, eq_i), vec![Fine, Fine, Fine, Off]);
    assert_eq!(net.e[1].stats().eq_overflows, 0);
}

/// Rank 1 with an EQ of `capacity` events on PT 0 (no flow control) and one put entry over
/// `r`; rank 0 with an MD that puts 4 bytes there.
fn eq_target(net: &mut Net, capacity: usize, r: &Region) -> (EqHandle, MdHandle) {
    let eq_t = net.eq(1, capacity);
    net.pt(1, 0, PtOptions::empty(), Some(eq_t));
    net.me(
        1,
        0,
        me_spec(r, 0, MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE),
        ListKind::Priority,
        0,
    );
    let src = Region::new(4);
    let md = net.md(0, &src, MdOptions::empty(), None, None);
    (eq_t, md)
}

/// Puts 4 bytes from `md` to rank 1 once per `hdr_data` value in `hdr`, then delivers them.
fn puts(net: &mut Net, md: MdHandle, hdr: std::ops::Range<u64>) {
    for h in hdr {
        let mut a = put_args(md, 4, AckReq::None, p(1), 0, 0);
        a.hdr_data = h;
        net.e[0].put(&a).unwrap();
    }
    net.run();
}

#[test]
fn eq_overflow_without_flowctrl_is_reported() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let r = Region::new(64);
    let (eq_t, md) = eq_target(&mut net, 2, &r);
    puts(&mut net, md, 0..3);
    let EqGet::Dropped(first) = net.e[1].eq_get(eq_t).unwrap() else {
        panic!("the loss must be reported")
    };
    assert_eq!((first.kind, first.hdr_data), (EventKind::Put, 0));
    let EqGet::Event(second) = net.e[1].eq_get(eq_t).unwrap() else {
        panic!("second event kept")
    };
    assert_eq!(second.hdr_data, 1);
    assert_eq!(net.e[1].eq_get(eq_t).unwrap(), EqGet::Empty);
    assert_eq!(net.e[1].stats().eq_overflows, 1);
    assert_eq!(
        r.to_vec(8, 4).unwrap(),
        vec![0; 4],
        "deposits still happened (offset 0 each)"
    );
}

/// The `hdr_data` of every event waiting on `eq`, in order, each marked when it reports a loss.
fn taken(net: &mut Net, eq: EqHandle) -> Vec<(u64, bool)> {
    let mut got = Vec::new();
    loop {
        match net.e[1].eq_get(eq).unwrap() {
            EqGet::Empty => return got,
            EqGet::Event(e) => got.push((e.hdr_data, false)),
            EqGet::Dropped(e) => got.push((e.hdr_data, true)),
        }
    }
}

/// An EQ that empties starts again at the first slot of its ring: emptied and refilled many
/// times over, partly drained in between, it keeps its events in order and its capacity (a
/// put beyond it is still lost and reported on the next event taken).
#[test]
fn eq_emptied_and_refilled_keeps_order_and_capacity() {
    let mut net = Net::new(2, MATCHING_PHYS);
    let r = Region::new(64);
    let (eq_t, md) = eq_target(&mut net, 4, &r);
    for round in 0..10u64 {
        let base = round * 3;
        puts(&mut net, md, base..base + 3);
        assert_eq!(
            taken(&mut net, eq_t),
            vec![(base, false), (base + 1, false), (base + 2, false)],
            "round {round}"
        );
    }
    // Partly drained, then refilled past the wrap of the ring.
    puts(&mut net, md, 100..103);
    let EqGet::Event(first) = net.e[1].eq_get(eq_t).unwrap() else {
        panic!("an event waits")
    };
    assert_eq!(first.hdr_data, 100);
    puts(&mut net, md, 103..105);
    assert_eq!(
        taken(&mut net, eq_t),
        vec![(101, false), (102, false), (103, false), (104, false)]
    );
    // Five into four: the fifth is lost, and the first taken says so.
    puts(&mut net, md, 200..205);
    assert_eq!(
        taken(&mut net, eq_t),
        vec![(200, true), (201, false), (202, false), (203, false)]
    );
    assert_eq!(net.e[1].stats().eq_overflows, 1);
    puts(&mut net, md, 300..301);
    assert_eq!(taken(&mut net, eq_t), vec![(300, false)]);
}

/// The recovery protocol rgasnet relies on: AM-style MANAGE_LOCAL blocks on a FLOWCTRL PT, an
/// initiator that resends whatever came back PT_DISABLED, a target that drains, re-posts and
/// re-enables. Every payload must land exactly once.
#[test]
fn flow_control_recovery_every_payload_exactly_once() {
    const N: u64 = 40;
    let mut net = Net::new(2, MATCHING_PHYS);
    let eq_t = net.eq(1, 8);
    net.pt(1, 0, PtOptions::FLOWCTRL, Some(eq_t));
    let block_opts = MeOptions::OP_PUT | MeOptions::MANAGE_LOCAL | MeOptions::EVENT_LINK_DISABLE;
    let mut blocks: HashMap<u64, Region> = HashMap::new();
    let mut next_block = 0u64;
    let mut post_block = |net: &mut Net, blocks: &mut HashMap<u64, Region>| {
        let r = Region::new(64);
        let mut spec = me_spec(&r, 0, block_opts);
        spec.min_free = PAYLOAD; // 4 payloads per block
        net.me(1, 0, spec, ListKind::Priority, next_block);
        blocks.insert(next_block, r);
        next_block += 1;
    };
    post_block(&mut net, &mut blocks);
    let mut live_blocks = 1;

    let eq_i = net.eq(0, 4 * N as usize);
    let src = Region::new((N * PAYLOAD) as usize);
    for i in 0..N {
        src.fill((i * PAYLOAD) as usize, PAYLOAD as usize, i as u8 + 1)
            .unwrap();
    }
    let md = net.md(0, &src, MdOptions::EVENT_SEND_DISABLE, Some(eq_i), None);
    let send = |net: &mut Net, i: u64| {
        let mut a = put_args(md, PAYLOAD, AckReq::Ack, p(1), 0, 0);
        a.local_offset = i * PAYLOAD;
        a.user_ptr = i;
        a.hdr_data = i;
        net.e[0].put(&a).unwrap();
    };
    for i in 0..N {
        send(&mut net, i);
    }

    let mut landed: HashMap<u64, u32> = HashMap::new();
    let mut acked: HashMap<u64, u32> = HashMap::new();
    let (mut disables, mut resends) = (0, 0);
    for _round in 0..1000 {
        net.run();
        // Target application: consume deposits, re-post exhausted blocks, re-enable.
        for e in net.events(1, eq_t) {
            match e.kind {
                EventKind::Put => {
                    let bytes = blocks[&e.user_ptr]
                        .to_vec(e.start as usize, PAYLOAD as usize)
                        .unwrap();
                    assert_eq!(
                        bytes,
                        vec![e.hdr_data as u8 + 1; PAYLOAD as usize],
                        "payload intact"
                    );
                    *landed.entry(e.hdr_data).or_default() += 1;
                }
                EventKind::AutoUnlink => live_blocks -= 1,
                EventKind::PtDisabled => disables += 1,
                k => panic!("unexpected target event {k:?}"),
            }
        }
        if live_blocks == 0 {
            post_block(&mut net, &mut blocks);
            live_blocks = 1;
        }
        if !net.e[1].pt_is_enabled(net.ni[1], 0).unwrap() {
            net.e[1].pt_enable(net.ni[1], 0).unwrap();
        }
        // Initiator: count completions, resend refusals.
        for e in net.events(0, eq_i) {
            match e.ni_fail {
                NiFail::Ok => *acked.entry(e.user_ptr).or_default() += 1,
                NiFail::PtDisabled => {
                    resends += 1;
                    send(&mut net, e.user_ptr);
                }
                f => panic!("unexpected failure {f:?}"),
            }
        }
        if acked.len() as u64 == N && net.e[0].pending_ops() == 0 {
            break;
        }
    }
    assert!(disables >= 1 && resends >= 1, "the cycle was exercised");
    for i in 0..N {
        assert_eq!(landed.get(&i), Some(&1), "payload {i} landed exactly once");
        assert_eq!(
            acked.get(&i),
            Some(&1),
            "payload {i} acknowledged exactly once"
        );
    }
    assert_eq!(net.e[1].stats().eq_overflows, 0);
}
