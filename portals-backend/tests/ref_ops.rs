//! Put and get through a Portals 4 library (feature `ref-impl`; CI: the reference
//! implementation built by `scripts/portals4-ref.sh`, and any library `PORTALS4_DIR` names,
//! rgasnet's own libportals among them) with the `refimpl::ops` objects: one process putting
//! to and getting from its own list entry on loopback, data checked byte by byte and every
//! field of the events that matter; then, on a logical matching NI with a rank map, match
//! bits choosing between two match entries and counting events for the ACK and the arrival. One test function: the reference implementation cannot
//! be initialized twice in one process.
#![cfg(feature = "ref-impl")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

mod ref_events;

use std::time::Duration;

use ref_events::{one, take};
use rgasnet_portals::refimpl::ops::{RefBuffer, RefLibrary, RefNi};
use rgasnet_portals::types::{
    AckReq, Addressing, EventKind, Matching, MdOptions, MeOptions, NiFail, NiKind, ProcessId,
    PtOptions,
};

#[test]
fn put_and_get_to_itself_through_the_library() {
    std::env::set_var("PTL_IFACE_NAME", "lo");
    let lib = RefLibrary::init().unwrap();
    let kind = NiKind {
        matching: Matching::NoMatching,
        addressing: Addressing::Physical,
    };
    let ni = RefNi::init(&lib, kind).unwrap();
    let me = ni.phys_id().unwrap();
    let eq = ni.eq_alloc(64).unwrap();
    let pt = ni.pt_alloc(PtOptions::empty(), Some(&eq), 0).unwrap();
    assert_eq!(pt, 0);
    let target = RefBuffer::new(64);
    let source = RefBuffer::new(64);
    let bytes: Vec<u8> = (1..=64).collect();
    source.write(0, &bytes).unwrap();
    let le = ni
        .le_append(
            pt,
            &target,
            MeOptions::OP_PUT | MeOptions::OP_GET | MeOptions::EVENT_LINK_DISABLE,
            0x7e,
        )
        .unwrap();
    let md = ni.md_bind(&source, MdOptions::empty(), Some(&eq)).unwrap();

    ni.put(
        &md,
        4,
        16,
        AckReq::Ack,
        ProcessId::Phys(me),
        (pt, 0),
        8,
        0x51,
        0xabcd,
    )
    .unwrap();
    let evs = take(&eq, 3);
    let put = one(&evs, EventKind::Put);
    assert_eq!(
        (
            put.start,
            put.mlength,
            put.rlength,
            put.remote_offset,
            put.hdr_data,
            put.user_ptr
        ),
        (target.addr() + 8, 16, 16, 8, 0xabcd, 0x7e)
    );
    assert_eq!(
        (put.initiator, put.ni_fail),
        (ProcessId::Phys(me), NiFail::Ok)
    );
    let ack = one(&evs, EventKind::Ack);
    assert_eq!(
        (ack.mlength, ack.user_ptr, ack.ni_fail),
        (16, 0x51, NiFail::Ok)
    );
    one(&evs, EventKind::Send);
    let mut got = [0u8; 64];
    target.read(0, &mut got).unwrap();
    for (i, b) in got.iter().enumerate() {
        let want = if (8..24).contains(&i) {
            bytes[i - 4]
        } else {
            0
        };
        assert_eq!(*b, want, "target byte {i}");
    }

    ni.get(&md, 40, 16, ProcessId::Phys(me), (pt, 0), 8, 0x52)
        .unwrap();
    let evs = take(&eq, 2);
    let reply = one(&evs, EventKind::Reply);
    // `start` is defined for target events only (the reference implementation leaves it 0
    // in a REPLY, rgasnet's libportals reports where the data landed).
    assert_eq!(
        (reply.mlength, reply.user_ptr, reply.ni_fail),
        (16, 0x52, NiFail::Ok)
    );
    one(&evs, EventKind::Get);
    let mut back = [0u8; 16];
    source.read(40, &mut back).unwrap();
    assert_eq!(&back[..], &bytes[4..20]);

    drop(md);
    drop(le);
    ni.pt_free(pt).unwrap();
    drop(eq);

    // A logical matching NI whose map holds this process alone: match bits select the entry,
    // a counting ACK counts on the MD's CT and the arrival on the entry's.
    let kind = NiKind {
        matching: Matching::Matching,
        addressing: Addressing::Logical,
    };
    let lni = RefNi::init(&lib, kind).unwrap();
    let my_phys = lni.phys_id().unwrap();
    lni.set_map(&[my_phys]).unwrap();
    assert_eq!(lni.id().unwrap(), ProcessId::Rank(0));
    let leq = lni.eq_alloc(64).unwrap();
    let lpt = lni.pt_alloc(PtOptions::empty(), Some(&leq), 5).unwrap();
    let (hit, miss) = (RefBuffer::new(32), RefBuffer::new(32));
    let arrivals = lni.ct_alloc().unwrap();
    let acked = lni.ct_alloc().unwrap();
    let quiet =
        MeOptions::OP_PUT | MeOptions::EVENT_LINK_DISABLE | MeOptions::EVENT_SUCCESS_DISABLE;
    let _m1 = lni
        .me_append(lpt, &miss, quiet, 0x1111, 0, None, 1)
        .unwrap();
    let _m2 = lni
        .me_append(
            lpt,
            &hit,
            quiet | MeOptions::EVENT_CT_COMM,
            0x2200,
            0xff,
            Some(&arrivals),
            2,
        )
        .unwrap();
    let lmd = lni
        .md_bind_counted(&source, MdOptions::EVENT_CT_ACK, None, Some(&acked))
        .unwrap();
    lni.put(
        &lmd,
        0,
        8,
        AckReq::CtAck,
        ProcessId::Rank(0),
        (lpt, 0x22ab),
        4,
        0,
        0,
    )
    .unwrap();
    let got = acked
        .wait(1, Duration::from_secs(10))
        .unwrap()
        .expect("the counting ACK");
    assert_eq!((got.success, got.failure), (1, 0));
    let got = arrivals
        .wait(1, Duration::from_secs(10))
        .unwrap()
        .expect("the arrival");
    assert_eq!((got.success, got.failure), (1, 0));
    let (mut h, mut m) = ([0u8; 32], [0u8; 32]);
    hit.read(0, &mut h).unwrap();
    miss.read(0, &mut m).unwrap();
    assert_eq!(&h[4..12], &bytes[..8]);
    assert!(h[..4].iter().chain(&h[12..]).all(|b| *b == 0));
    assert!(
        m.iter().all(|b| *b == 0),
        "the entry whose bits differ got nothing"
    );
    assert!(
        leq.wait(Duration::from_millis(100)).unwrap().is_none(),
        "events disabled"
    );
}
