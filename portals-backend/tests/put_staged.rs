//! `Ni::put_staged` end to end on real UDP sockets: the bytes arrive exactly as staged, the
//! MD's region holds them once the call returns, a retransmission (the first datagram dropped
//! on purpose) carries the staged bytes from the region, and a put to the interface itself or
//! one that needs several datagrams takes the region's bytes, written first.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

mod common;
use common::*;

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rgasnet_portals::interface::{Interface, Link, Ni};
use rgasnet_portals::types::{EventKind, MeOptions, NiFail, PhysId};
use rgasnet_portals::udp::{UdpConfig, UdpEndpoint};
use rgasnet_portals::{Region, Tail};

/// Sizes around the in-place and gathering thresholds and one datagram's worth, and one of
/// several datagrams.
fn sizes() -> [usize; 7] {
    let frag = rgasnet_portals::transport::DEFAULT_FRAGMENT_SIZE;
    [100, 4095, 4096, 5000, frag - 200, frag + 1, 1 << 20]
}

/// Puts `data`, staged in two pieces split at `split`, from byte `local` of a zeroed in-place
/// MD on `a` to byte `at` of `tmem` on `b`; checks the ACK, the target's bytes and the
/// source region's bytes.
fn staged_put(
    a: &Ni,
    b: &Ni,
    tmem: &Region,
    (teq, at): (rgasnet_portals::engine::EqHandle, usize),
    data: &[u8],
    split: usize,
    local: usize,
) {
    let src = Region::new(local + data.len());
    let eq = a.eq_alloc(16).unwrap();
    let smd = in_place_md(a, &src, eq);
    let mut args = put_args(smd, data.len() as u64, to(b, at as u64));
    args.local_offset = local as u64;
    let (first, second) = data.split_at(split);
    a.put_staged(&args, [first, second]).unwrap();
    assert!(
        src.to_vec(local, data.len()).unwrap() == data,
        "{}-byte put: the source region holds the staged bytes on return",
        data.len()
    );
    let ack = next(a, eq);
    assert_eq!(
        (ack.kind, ack.ni_fail, ack.mlength),
        (EventKind::Ack, NiFail::Ok, data.len() as u64)
    );
    let put = next(b, teq);
    assert_eq!((put.kind, put.mlength), (EventKind::Put, data.len() as u64));
    assert!(
        tmem.to_vec(at, data.len()).unwrap() == data,
        "{}-byte put split at {split}: target bytes differ",
        data.len()
    );
    a.md_release(smd).unwrap();
    a.eq_free(eq).unwrap();
}

#[test]
fn staged_puts_arrive_byte_for_byte() {
    let ((a, _, from_pieces), b) = (open_test_link(0), open());
    let _p = Progress::start(b.interface());
    let tmem = Region::new(3 << 20);
    let teq = target(&b, &tmem, MeOptions::OP_PUT);
    let mut at = 0;
    for (i, len) in sizes().into_iter().enumerate() {
        let data = pattern(len, i as u8);
        for split in [0, 7.min(len), len / 2, len] {
            staged_put(&a, &b, &tmem, (teq, at), &data, split, 3 * i + 1);
        }
        at += len;
    }
    // Relaxed: the puts' ACKs, waited for above, came after their sends. Of the sizes, 4096,
    // 5000 and a fragment less 200 bytes leave in one datagram from an in-place MD, so their
    // 4 splits each are sent from the pieces; 100 and 4095 bytes are copied into the message,
    // and the two larger puts need several datagrams, which read the region.
    assert_eq!(from_pieces.load(Ordering::Relaxed), 3 * 4);
}

#[test]
fn staged_puts_to_self_take_the_region() {
    let a = open();
    let tmem = Region::new(2 << 20);
    let teq = target(&a, &tmem, MeOptions::OP_PUT);
    for (i, len) in [100, 5000, 70_000].into_iter().enumerate() {
        let data = pattern(len, 40 + i as u8);
        staged_put(&a, &a, &tmem, (teq, 0), &data, len / 3, i);
    }
    assert_eq!(a.interface().transport_stats().datagrams_out, 0);
}

#[test]
fn staged_pieces_must_match_the_length() {
    let (a, b) = (open(), open());
    let src = Region::new(8192);
    let eq = a.eq_alloc(16).unwrap();
    let smd = in_place_md(&a, &src, eq);
    let args = put_args(smd, 5000, to(&b, 0));
    let e = a.put_staged(&args, [&[1; 100], &[2; 4899]]).unwrap_err();
    assert!(
        e.to_string()
            .contains("100 + 4899 bytes staged for a put of 5000"),
        "{e}"
    );
    assert_eq!(
        src.to_vec(0, 8192).unwrap(),
        vec![0; 8192],
        "nothing written"
    );
    assert_eq!(a.interface().transport_stats().datagrams_out, 0);
}

/// A UDP link that counts the datagrams sent from staged pieces ([`Tail::Pair`]) and drops
/// the first `to_drop` datagrams larger than 4 KiB, so that their puts arrive only by
/// retransmission.
struct TestLink {
    inner: UdpEndpoint,
    to_drop: AtomicU64,
    dropped: Arc<AtomicU64>,
    from_pieces: Arc<AtomicU64>,
}

/// An NI on a [`TestLink`], with its drop and piece counters.
fn open_test_link(to_drop: u64) -> (Ni, Arc<AtomicU64>, Arc<AtomicU64>) {
    let (dropped, from_pieces) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let link = TestLink {
        inner: UdpEndpoint::bind(&UdpConfig::default()).unwrap(),
        to_drop: AtomicU64::new(to_drop),
        dropped: dropped.clone(),
        from_pieces: from_pieces.clone(),
    };
    let ni = Interface::new(config(Duration::from_secs(30)), Box::new(link))
        .unwrap()
        .ni_init(KIND, None)
        .unwrap();
    (ni, dropped, from_pieces)
}

impl Link for TestLink {
    fn local_id(&self) -> PhysId {
        Link::local_id(&self.inner)
    }
    fn send_to(&self, datagram: &[u8], to: PhysId) -> io::Result<()> {
        Link::send_to(&self.inner, datagram, to)
    }
    fn recv(&self, buf: &mut [u8]) -> io::Result<Option<(usize, PhysId)>> {
        Link::recv(&self.inner, buf)
    }
    fn wait_readable(&self, timeout: Duration) -> io::Result<()> {
        Link::wait_readable(&self.inner, timeout)
    }
    fn send_gather(&self, head: &[u8], tail: Tail<'_>, to: PhysId) -> io::Result<()> {
        if matches!(tail, Tail::Pair(..)) {
            // Relaxed: counts read after the test's waits, which order them.
            self.from_pieces.fetch_add(1, Ordering::Relaxed);
        }
        let large = head.len() + tail.len() > 4096;
        if large
            && self
                .to_drop
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
                .is_ok()
        {
            // Relaxed: a count read after the test's waits, which order it.
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        Link::send_gather(&self.inner, head, tail, to)
    }
}

#[test]
fn a_lost_staged_datagram_is_resent_from_the_region() {
    let ((a, dropped, from_pieces), b) = (open_test_link(2), open());
    let _p = Progress::start(b.interface());
    let tmem = Region::new(1 << 20);
    let teq = target(&b, &tmem, MeOptions::OP_PUT);
    for (i, len) in [5000, 60_000].into_iter().enumerate() {
        let data = pattern(len, 90 + i as u8);
        staged_put(&a, &b, &tmem, (teq, 0), &data, 13, 5);
    }
    // Relaxed: the puts' ACK events, waited for above, came after the drops.
    assert_eq!(
        (
            dropped.load(Ordering::Relaxed),
            from_pieces.load(Ordering::Relaxed)
        ),
        (2, 2),
        "both first sends, from the pieces, were dropped"
    );
    assert!(a.interface().transport_stats().retransmits >= 2);
}
