//! A Portals 4 library (feature `ref-impl`) serving rgasnet's own memory: a list entry and an
//! MD over spans of [`Region`]s (`refimpl::memory::LibMemory::Span`), the memory the native
//! engine serves (segments, receive blocks), so that a `ref` engine needs no copy in between.
//! One process on loopback: a put lands at the right place of the entry's span and nowhere
//! else, a get brings the bytes back into the MD's span, and an entry keeps its region alive
//! after the caller dropped its own handle. One test function: the reference implementation
//! cannot be initialized twice in one process.
#![cfg(feature = "ref-impl")]
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

mod ref_events;

use ref_events::{one, take};
use rgasnet_portals::memory::RegionSpan;
use rgasnet_portals::refimpl::ops::{RefLibrary, RefNi};
use rgasnet_portals::types::{
    AckReq, Addressing, EventKind, Matching, MdOptions, MeOptions, NiFail, NiKind, ProcessId,
    PtOptions,
};
use rgasnet_portals::Region;

#[test]
fn the_library_puts_into_and_gets_from_spans_of_regions() {
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

    // The entry covers bytes [64, 192) of a 256-byte region; the MD [16, 80) of another.
    let target = Region::new(256);
    target.fill(0, 256, 0xee).unwrap();
    let entry_span = RegionSpan::new(target.clone(), 64, 128).unwrap();
    let le = ni
        .le_append(
            pt,
            entry_span,
            MeOptions::OP_PUT | MeOptions::OP_GET | MeOptions::EVENT_LINK_DISABLE,
            0x7e,
        )
        .unwrap();
    let source = Region::new(96);
    let bytes: Vec<u8> = (1..=64).collect();
    source.write(16, &bytes).unwrap();
    let md = ni
        .md_bind(
            RegionSpan::new(source.clone(), 16, 64).unwrap(),
            MdOptions::empty(),
            Some(&eq),
        )
        .unwrap();

    // 24 bytes from MD offset 8 to entry offset 40: region bytes [104, 128).
    ni.put(
        &md,
        8,
        24,
        AckReq::Ack,
        ProcessId::Phys(me),
        (pt, 0),
        40,
        0x51,
        0,
    )
    .unwrap();
    let evs = take(&eq, 3);
    let put = one(&evs, EventKind::Put);
    assert_eq!(
        (put.mlength, put.remote_offset, put.user_ptr),
        (24, 40, 0x7e)
    );
    assert_eq!(
        (put.initiator, put.ni_fail),
        (ProcessId::Phys(me), NiFail::Ok)
    );
    assert_eq!(
        (
            one(&evs, EventKind::Ack).mlength,
            one(&evs, EventKind::Ack).ni_fail
        ),
        (24, NiFail::Ok)
    );
    one(&evs, EventKind::Send);
    let got = target.to_vec(0, 256).unwrap();
    for (i, b) in got.iter().enumerate() {
        let want = if (104..128).contains(&i) {
            bytes[i - 104 + 8]
        } else {
            0xee
        };
        assert_eq!(*b, want, "target byte {i}");
    }

    // The caller's own handle goes; the entry still holds the region.
    drop(target);
    // 24 bytes from entry offset 40 back into MD offset 0 (region bytes [16, 40)).
    source.fill(0, 96, 0).unwrap();
    ni.get(&md, 0, 24, ProcessId::Phys(me), (pt, 0), 40, 0x52)
        .unwrap();
    let evs = take(&eq, 2);
    let reply = one(&evs, EventKind::Reply);
    assert_eq!(
        (reply.mlength, reply.user_ptr, reply.ni_fail),
        (24, 0x52, NiFail::Ok)
    );
    one(&evs, EventKind::Get);
    let back = source.to_vec(0, 96).unwrap();
    for (i, b) in back.iter().enumerate() {
        let want = if (16..40).contains(&i) {
            bytes[i - 16 + 8]
        } else {
            0
        };
        assert_eq!(*b, want, "source byte {i}");
    }

    drop(md);
    drop(le);
    ni.pt_free(pt).unwrap();
    drop(eq);
}
