//! Codec tests: golden vectors, typed errors, round trips and never-panic properties.

use super::*;
use crate::types::{Addressing, Matching};
use proptest::prelude::*;

const MATCHING_PHYS: NiKind = NiKind {
    matching: Matching::Matching,
    addressing: Addressing::Physical,
};

fn put_header() -> RequestHeader {
    RequestHeader {
        op: OpKind::Put,
        ni_kind: MATCHING_PHYS,
        ack_req: AckReq::Ack,
        atomic: None,
        pt_index: 7,
        uid: 0x0102_0304,
        initiator_rank: crate::types::RANK_ANY,
        match_bits: 0x8000_0000_0000_0001,
        remote_offset: 0x10,
        hdr_data: 0xdead_beef,
        op_id: 42,
        rlength: 3,
    }
}

#[test]
fn golden_put() {
    let bytes = encode_request(&put_header(), &[], &[0xaa, 0xbb, 0xcc]).unwrap();
    let mut expected = vec![1u8, 2, 1, 0xff, 0xff, 0];
    expected.extend_from_slice(&[7, 0, 0, 0]); // pt_index
    expected.extend_from_slice(&[4, 3, 2, 1]); // uid
    expected.extend_from_slice(&[0xff; 4]); // rank any
    expected.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0x80]); // match bits
    expected.extend_from_slice(&[0x10, 0, 0, 0, 0, 0, 0, 0]); // remote offset
    expected.extend_from_slice(&[0xef, 0xbe, 0xad, 0xde, 0, 0, 0, 0]); // hdr_data
    expected.extend_from_slice(&[42, 0, 0, 0, 0, 0, 0, 0]); // op id
    expected.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0]); // rlength
    expected.extend_from_slice(&[0xaa, 0xbb, 0xcc]);
    assert_eq!(bytes, expected);
    let Message::Request(r) = decode(&bytes).unwrap() else {
        panic!("not a request")
    };
    assert_eq!(r.header, put_header());
    assert_eq!(r.data, &[0xaa, 0xbb, 0xcc]);
    assert!(r.operand.is_empty());
}

#[test]
fn golden_swap_and_reply() {
    let h = RequestHeader {
        op: OpKind::Swap,
        ack_req: AckReq::None,
        atomic: Some((AtomicOp::Cswap, AtomicType::Uint16)),
        rlength: 2,
        ni_kind: NiKind::from_index(1).unwrap(),
        ..put_header()
    };
    let bytes = encode_request(&h, &[9, 8], &[5, 6]).unwrap();
    assert_eq!(&bytes[..6], &[5, 1, 0, 11, 3, 2]);
    assert_eq!(&bytes[REQUEST_HEADER_LEN..], &[9, 8, 5, 6]);
    let Message::Request(r) = decode(&bytes).unwrap() else {
        panic!("not a request")
    };
    assert_eq!(
        (r.header, r.operand, r.data),
        (h, &[9u8, 8][..], &[5u8, 6][..])
    );

    let rh = ResponseHeader {
        kind: ResponseKind::Reply,
        ni_fail: NiFail::Segv,
        op_id: 0x0102,
        mlength: 2,
        offset: 5,
    };
    let bytes = encode_response(&rh, &[7, 7]).unwrap();
    let mut expected = vec![0x82u8, 7, 2, 1, 0, 0, 0, 0, 0, 0];
    expected.extend_from_slice(&[2, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0, 7, 7]);
    assert_eq!(bytes, expected);
    assert_eq!(
        decode(&bytes).unwrap(),
        Message::Response(Response {
            header: rh,
            data: &[7, 7]
        })
    );
}

#[test]
fn appended_response_matches_filled_one_and_checks_its_length() {
    let rh = ResponseHeader {
        kind: ResponseKind::Reply,
        ni_fail: NiFail::Ok,
        op_id: 9,
        mlength: 3,
        offset: 4,
    };
    // A recycled buffer with stale bytes: they must not leak into the response.
    let stale = vec![0xee; 64];
    let appended = encode_response_appending_into(stale, &rh, |b| {
        b.extend_from_slice(&[1, 2, 3]);
        Ok(())
    })
    .unwrap();
    assert_eq!(appended, encode_response(&rh, &[1, 2, 3]).unwrap());
    assert_eq!(
        encode_response_appending_into(Vec::new(), &rh, |b| {
            b.extend_from_slice(&[1, 2]);
            Ok(())
        }),
        Err(ProtoError::LengthMismatch {
            announced: 3,
            have: 2
        })
    );
    let oob = OutOfBounds {
        offset: 8,
        len: 3,
        region_len: 10,
    };
    assert_eq!(
        encode_response_appending_into(Vec::new(), &rh, |_| Err(oob)),
        Err(ProtoError::Source(oob))
    );
}

#[test]
fn typed_errors() {
    assert_eq!(decode(&[]), Err(ProtoError::Truncated { need: 1, have: 0 }));
    assert_eq!(decode(&[0x33]), Err(ProtoError::UnknownTag(0x33)));
    let good = encode_request(&put_header(), &[], &[1, 2, 3]).unwrap();
    let mut b = good.clone();
    b[1] = 4;
    assert_eq!(decode(&b), Err(ProtoError::BadNiKind(4)));
    let mut b = good.clone();
    b[2] = 9;
    assert_eq!(decode(&b), Err(ProtoError::BadAckReq(9)));
    let mut b = good.clone();
    b.pop();
    assert_eq!(
        decode(&b),
        Err(ProtoError::LengthMismatch {
            announced: 3,
            have: 2
        })
    );
    let mut b = good.clone();
    b[3] = 2;
    b[4] = 7;
    assert_eq!(
        decode(&b),
        Err(ProtoError::AtomicFields {
            present: true,
            required: false
        })
    );
    let mut b = good.clone();
    b[3] = 40;
    assert_eq!(decode(&b), Err(ProtoError::BadAtomicOp(40)));
    let mut b = good.clone();
    b[50..58].copy_from_slice(&(MAX_PAYLOAD + 1).to_le_bytes());
    assert_eq!(decode(&b), Err(ProtoError::TooLarge(MAX_PAYLOAD + 1)));
    let mut b = good;
    b[0] = TAG_GET;
    assert_eq!(decode(&b), Err(ProtoError::AckNotAllowed(AckReq::Ack)));
    let ack = ResponseHeader {
        kind: ResponseKind::Ack,
        ni_fail: NiFail::Ok,
        op_id: 1,
        mlength: 10,
        offset: 0,
    };
    let mut b = encode_response(&ack, &[]).unwrap();
    b.push(0);
    assert_eq!(
        decode(&b),
        Err(ProtoError::LengthMismatch {
            announced: 0,
            have: 1
        })
    );
    b.pop();
    b[1] = 8;
    assert_eq!(decode(&b), Err(ProtoError::BadNiFail(8)));
    // The encoder refuses what the decoder would refuse.
    let mut h = put_header();
    h.op = OpKind::Get;
    assert_eq!(
        encode_request(&h, &[], &[]),
        Err(ProtoError::AckNotAllowed(AckReq::Ack))
    );
}

fn arb_header() -> impl Strategy<Value = RequestHeader> {
    (
        0usize..5,
        0u8..4,
        0u8..4,
        0usize..18,
        0usize..10,
        any::<(u32, u32, u32)>(),
        any::<(u64, u64, u64, u64)>(),
        0u64..64,
    )
        .prop_map(
            |(op, kind, ack, aop, adt, (pt, uid, rank), (mb, ro, hd, id), len)| {
                let op = [
                    OpKind::Put,
                    OpKind::Get,
                    OpKind::Atomic,
                    OpKind::FetchAtomic,
                    OpKind::Swap,
                ][op];
                RequestHeader {
                    op,
                    ni_kind: NiKind::from_index(kind).unwrap(),
                    ack_req: if op.has_reply() {
                        AckReq::None
                    } else {
                        ack_from(ack).unwrap()
                    },
                    atomic: op.is_atomic().then_some((AtomicOp::ALL[aop], TYPES[adt])),
                    pt_index: pt,
                    uid,
                    initiator_rank: rank,
                    match_bits: mb,
                    remote_offset: ro,
                    hdr_data: hd,
                    op_id: id,
                    rlength: len,
                }
            },
        )
}

#[test]
fn golden_immediate() {
    let logical = NiKind {
        matching: Matching::Matching,
        addressing: Addressing::Logical,
    };
    let bytes = encode_immediate_into(vec![9, 9], logical, 0x0102_0304, &[0xaa, 0xbb]).unwrap();
    assert_eq!(
        bytes,
        [0x90, logical.index(), 0x04, 0x03, 0x02, 0x01, 0xaa, 0xbb]
    );
    assert_eq!(
        decode(&bytes).unwrap(),
        Message::Immediate(Immediate {
            ni_kind: logical,
            initiator_rank: 0x0102_0304,
            payload: &[0xaa, 0xbb],
        })
    );
}

#[test]
fn bad_immediates_are_typed_errors() {
    assert_eq!(
        decode(&[0x90, 0, 1]),
        Err(ProtoError::Truncated { need: 6, have: 3 })
    );
    assert_eq!(
        decode(&[0x90, 9, 0, 0, 0, 0]),
        Err(ProtoError::BadNiKind(9))
    );
    let mut long = vec![0x90, 0, 0, 0, 0, 0];
    long.extend_from_slice(&[0; MAX_IMMEDIATE + 1]);
    assert_eq!(
        decode(&long),
        Err(ProtoError::ImmediateTooLarge(MAX_IMMEDIATE + 1))
    );
    assert_eq!(
        encode_immediate_into(Vec::new(), MATCHING_PHYS, 0, &[0; MAX_IMMEDIATE + 1]),
        Err(ProtoError::ImmediateTooLarge(MAX_IMMEDIATE + 1))
    );
}

proptest! {
    #[test]
    fn request_round_trip(h in arb_header(), seed in any::<u8>()) {
        let operand: Vec<u8> = match (h.op, h.atomic) {
            (OpKind::Swap, Some((_, dt))) => vec![seed; dt.size()],
            _ => vec![],
        };
        let data: Vec<u8> = if h.op.carries_data() {
            (0..h.rlength).map(|i| (i as u8).wrapping_add(seed)).collect()
        } else {
            vec![]
        };
        let bytes = encode_request(&h, &operand, &data).unwrap();
        let Message::Request(r) = decode(&bytes).unwrap() else {
            panic!("not a request")
        };
        prop_assert_eq!(r.header, h);
        prop_assert_eq!(r.operand, &operand[..]);
        prop_assert_eq!(r.data, &data[..]);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&bytes);
    }

    #[test]
    fn mutated_messages_never_panic(
        h in arb_header(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
    ) {
        let operand = match (h.op, h.atomic) {
            (OpKind::Swap, Some((_, dt))) => vec![1u8; dt.size()],
            _ => vec![],
        };
        let data = if h.op.carries_data() { vec![3u8; h.rlength as usize] } else { vec![] };
        let mut bytes = encode_request(&h, &operand, &data).unwrap();
        for (at, v) in edits {
            let n = bytes.len();
            bytes[at % n] = v;
        }
        bytes.truncate(cut % (bytes.len() + 1));
        if let Ok(Message::Request(r)) = decode(&bytes) {
            // Whatever decodes is self-consistent.
            prop_assert_eq!(r.data.len() as u64, if r.header.op.carries_data() { r.header.rlength } else { 0 });
        }
    }

    #[test]
    fn response_round_trip(id in any::<u64>(), off in any::<u64>(), fail in 0usize..8, len in 0u64..64, reply in any::<bool>()) {
        let kind = if reply { ResponseKind::Reply } else { ResponseKind::Ack };
        let h = ResponseHeader { kind, ni_fail: NiFail::ALL[fail], op_id: id, mlength: len, offset: off };
        let data = if reply { vec![0x5a; len as usize] } else { vec![] };
        let bytes = encode_response(&h, &data).unwrap();
        prop_assert_eq!(decode(&bytes).unwrap(), Message::Response(Response { header: h, data: &data }));
    }

    #[test]
    fn immediate_round_trip(kind in 0u8..4, rank in any::<u32>(), payload in proptest::collection::vec(any::<u8>(), 0..=MAX_IMMEDIATE)) {
        let ni_kind = NiKind::from_index(kind).unwrap();
        let bytes = encode_immediate_into(Vec::new(), ni_kind, rank, &payload).unwrap();
        prop_assert_eq!(bytes.len(), IMMEDIATE_HEADER_LEN + payload.len());
        prop_assert_eq!(
            decode(&bytes).unwrap(),
            Message::Immediate(Immediate { ni_kind, initiator_rank: rank, payload: &payload })
        );
    }
}

#[test]
fn appending_encoder_equals_slice_encoder_and_checks_the_length() {
    let h = put_header();
    let region = crate::Region::from_bytes(&[0x11, 0xaa, 0xbb, 0xcc]);
    let appended = encode_request_appending(&h, &[], 3, |out| region.append_to(1, 3, out));
    assert_eq!(
        appended.unwrap(),
        encode_request(&h, &[], &[0xaa, 0xbb, 0xcc]).unwrap()
    );
    let short = encode_request_appending(&h, &[], 3, |out| region.append_to(1, 2, out));
    assert_eq!(
        short,
        Err(ProtoError::LengthMismatch {
            announced: 3,
            have: 2
        })
    );
    let out_of_bounds = encode_request_appending(&h, &[], 3, |out| region.append_to(2, 3, out));
    assert!(matches!(out_of_bounds, Err(ProtoError::Source(_))));
}
