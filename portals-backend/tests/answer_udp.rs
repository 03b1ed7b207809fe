//! `Ni::put_answer` on real UDP sockets on 127.0.0.1: on a `LAZY_ACK` portal, the answer to a
//! put reaches its target ahead of the put's ACK (which follows in a datagram of its own),
//! whereas a plain put carries the ACK in front of it. Every wait is bounded.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

use rgasnet_portals::engine::EqHandle;
use rgasnet_portals::interface::Ni;
use rgasnet_portals::types::{EventKind, MeOptions, NiFail, PtOptions};
use rgasnet_portals::Region;

mod common;
use common::*;

/// Portal 0 with `LAZY_ACK` and one ME over `region` for puts matching `BITS`; one EQ for the
/// portal and for the MD over `src`. Returns the EQ and the MD.
fn lazy_side(
    ni: &Ni,
    region: &Region,
    src: &Region,
) -> (EqHandle, rgasnet_portals::engine::MdHandle) {
    let eq = target_on(ni, region, MeOptions::OP_PUT, PtOptions::LAZY_ACK);
    (eq, md(ni, src, Some(eq)))
}

/// The kinds, failures and user pointers of the next `n` events on `eq`.
fn kinds(ni: &Ni, eq: EqHandle, n: usize) -> Vec<(EventKind, NiFail, u64)> {
    (0..n)
        .map(|_| {
            let ev = next(ni, eq);
            (ev.kind, ev.ni_fail, ev.user_ptr)
        })
        .collect()
}

/// `a` puts a request to `b`; `b` answers it with `answer` (`put_answer` or `put`); returns
/// the events `a` then sees, in order.
fn exchange(answer: bool) -> Vec<(EventKind, NiFail, u64)> {
    let (a, b) = (open(), open());
    let (a_mem, b_mem) = (Region::new(256), Region::new(256));
    let (a_src, b_src) = (Region::from_bytes(b"request"), Region::from_bytes(b"reply"));
    let (a_eq, a_md) = lazy_side(&a, &a_mem, &a_src);
    let (b_eq, b_md) = lazy_side(&b, &b_mem, &b_src);
    a.put(&put_args(a_md, 7, to(&b, 0))).unwrap();
    assert_eq!(
        kinds(&a, a_eq, 1),
        vec![(EventKind::Send, NiFail::Ok, 0x51)]
    );
    assert_eq!(kinds(&b, b_eq, 1), vec![(EventKind::Put, NiFail::Ok, 0x7a)]);
    assert_eq!(b_mem.to_vec(0, 7).unwrap(), b"request");
    let reply = put_args(b_md, 5, to(&a, 64));
    if answer {
        b.put_answer(&reply).unwrap();
    } else {
        b.put(&reply).unwrap();
    }
    let seen = kinds(&a, a_eq, 2);
    assert_eq!(a_mem.to_vec(64, 5).unwrap(), b"reply");
    seen
}

#[test]
fn an_answer_arrives_ahead_of_the_ack_of_what_it_answers() {
    assert_eq!(
        exchange(true),
        vec![
            (EventKind::Put, NiFail::Ok, 0x7a),
            (EventKind::Ack, NiFail::Ok, 0x51)
        ]
    );
}

#[test]
fn a_plain_put_carries_the_held_ack_in_front_of_it() {
    assert_eq!(
        exchange(false),
        vec![
            (EventKind::Ack, NiFail::Ok, 0x51),
            (EventKind::Put, NiFail::Ok, 0x7a)
        ]
    );
}
