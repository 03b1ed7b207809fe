use super::*;
use proptest::prelude::*;

const KEY: u64 = 0x0102_0304_0506_0708;

fn header() -> Header {
    Header {
        job_key: KEY,
        src_incarnation: 0x1122_3344_5566_7788,
        dst_incarnation: 9,
    }
}

fn sample() -> Vec<u8> {
    let mut out = Vec::new();
    write_header(&mut out, &header());
    let mut ack = AckFrame::new(3, 7, 100).with_fence(6);
    assert!(ack.push_range(SackRange { start: 5, end: 8 }));
    write_ack(&mut out, &ack);
    write_data(&mut out, 2, 10, 4, b"hello");
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The encoded `header()`: magic, version, job key, src incarnation, dst incarnation.
macro_rules! header_hex {
    () => {
        concat!(
            "52474e34",
            "03",
            "0807060504030201",
            "8877665544332211",
            "0900000000000000"
        )
    };
}

#[test]
fn golden_vector_is_pinned() {
    let expected = concat!(
        header_hex!(),
        // ACK: type, cumulative 3, largest 7, delay 100 us, fence 6, 1 range [5, 8)
        "02",
        "0300000000000000",
        "0700000000000000",
        "64000000",
        "0600000000000000",
        "01",
        "0500000000000000",
        "0800000000000000",
        // DATA: type, seq 2, total 10, offset 4, len 5, "hello"
        "01",
        "0200000000000000",
        "0a000000",
        "04000000",
        "05000000",
        "68656c6c6f",
    );
    assert_eq!(hex(&sample()), expected);
}

/// A small message and the ack riding with it: both in their short forms (ACK0, WHOLE).
fn short_sample() -> Vec<u8> {
    let mut out = Vec::new();
    write_header(&mut out, &header());
    write_ack(&mut out, &AckFrame::new(12, 11, 40));
    write_data(&mut out, 7, 3, 0, b"abc");
    out
}

#[test]
fn short_forms_are_pinned() {
    let expected = concat!(
        header_hex!(),
        // ACK0: type, cumulative 12 (largest 11 implied, fence 0), delay 40 us
        "05",
        "0c00000000000000",
        "28000000",
        // WHOLE: type, seq 7, len 3, "abc"
        "04",
        "0700000000000000",
        "0300",
        "616263",
    );
    let bytes = short_sample();
    assert_eq!(hex(&bytes), expected);
    assert_eq!(
        bytes.len(),
        HEADER_LEN + ACK0_FRAME_LEN + WHOLE_FRAME_OVERHEAD + 3
    );
    assert_eq!(AckFrame::new(12, 11, 40).encoded_len(), ACK0_FRAME_LEN);
}

#[test]
fn short_forms_decode_as_the_long_forms_they_stand_for() {
    let bytes = short_sample();
    let dg = Datagram::parse(&bytes, KEY).unwrap();
    let frames: Vec<Frame<'_>> = dg.frames().map(|f| f.unwrap()).collect();
    assert_eq!(
        frames,
        vec![
            Frame::Ack(AckView::new(12, 11, 40, 0)),
            Frame::Data(DataFrame {
                seq: 7,
                total: 3,
                offset: 0,
                payload: b"abc",
            }),
        ]
    );
}

#[test]
fn long_forms_stay_where_the_short_ones_cannot_say_it() {
    // A fence, a largest other than cumulative - 1, a range, or nothing received yet: the
    // long ACK frame.
    for ack in [
        AckFrame::new(12, 11, 40).with_fence(1),
        AckFrame::new(12, 20, 40),
        AckFrame::new(0, 0, 0),
    ] {
        let mut out = Vec::new();
        write_ack(&mut out, &ack);
        assert_eq!((out[0], out.len()), (FRAME_ACK, ACK_FRAME_BASE), "{ack:?}");
        assert_eq!(ack.encoded_len(), ACK_FRAME_BASE);
    }
    // A fragment of a larger message, or a whole one past 64 KiB: the long DATA frame.
    for (total, offset, len) in [(10u32, 0u32, 5u32), (10, 5, 5), (70_000, 0, 70_000)] {
        let mut out = Vec::new();
        write_data_header(&mut out, 1, total, offset, len);
        assert_eq!((out[0], out.len()), (FRAME_DATA, DATA_FRAME_OVERHEAD));
    }
}

#[test]
fn a_short_ack_of_nothing_is_refused() {
    let mut bytes = Vec::new();
    write_header(&mut bytes, &header());
    bytes.push(FRAME_ACK0);
    bytes.extend_from_slice(&0u64.to_le_bytes());
    bytes.extend_from_slice(&5u32.to_le_bytes());
    assert_eq!(
        Datagram::parse(&bytes, KEY).unwrap_err(),
        WireError::ZeroShortAck
    );
    // Truncated short frames are reported like any other.
    for (kind, keep) in [(FRAME_ACK0, 10), (FRAME_WHOLE, 9), (FRAME_WHOLE, 12)] {
        let mut b = Vec::new();
        write_header(&mut b, &header());
        b.push(kind);
        b.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 4, 0, 0, 0][..keep]);
        assert!(
            matches!(Datagram::parse(&b, KEY), Err(WireError::Truncated { .. })),
            "{kind:#x} {keep}"
        );
    }
}

#[test]
fn sample_round_trips() {
    let bytes = sample();
    let dg = Datagram::parse(&bytes, KEY).unwrap();
    assert_eq!(dg.header, header());
    let frames: Vec<Frame<'_>> = dg.frames().map(|f| f.unwrap()).collect();
    assert_eq!(frames.len(), 2);
    match frames[0] {
        Frame::Ack(a) => {
            assert_eq!(
                (a.cumulative, a.largest, a.ack_delay_us, a.fence),
                (3, 7, 100, 6)
            );
            assert_eq!(a.to_frame().ranges(), &[SackRange { start: 5, end: 8 }]);
        }
        other => panic!("expected ack, got {other:?}"),
    }
    assert_eq!(
        frames[1],
        Frame::Data(DataFrame {
            seq: 2,
            total: 10,
            offset: 4,
            payload: b"hello"
        })
    );
}

#[test]
fn header_only_datagram_has_no_frames() {
    let mut out = Vec::new();
    write_header(&mut out, &header());
    assert_eq!(out.len(), HEADER_LEN);
    let dg = Datagram::parse(&out, KEY).unwrap();
    assert_eq!(dg.frames().count(), 0);
}

#[test]
fn rejections_are_typed() {
    let good = sample();

    let mut bad = good.clone();
    bad[0] = b'X';
    assert_eq!(
        Datagram::parse(&bad, KEY).unwrap_err(),
        WireError::BadMagic(*b"XGN4")
    );

    let mut bad = good.clone();
    bad[4] = 7;
    assert_eq!(
        Datagram::parse(&bad, KEY).unwrap_err(),
        WireError::BadVersion(7)
    );

    assert_eq!(
        Datagram::parse(&good, 5).unwrap_err(),
        WireError::ForeignJob {
            got: KEY,
            expected: 5
        }
    );

    let mut bad = good.clone();
    bad[13..21].fill(0);
    assert_eq!(
        Datagram::parse(&bad, KEY).unwrap_err(),
        WireError::ZeroIncarnation
    );

    assert_eq!(
        Datagram::parse(&good[..10], KEY).unwrap_err(),
        WireError::Truncated {
            what: "job key",
            at: 5,
            needed: 8,
            len: 10
        }
    );

    // Payload cut short: the last DATA frame claims 5 bytes, only 2 remain.
    let cut = good.len() - 3;
    assert_eq!(
        Datagram::parse(&good[..cut], KEY).unwrap_err(),
        WireError::Truncated {
            what: "data payload",
            at: cut - 2,
            needed: 5,
            len: cut
        }
    );

    let mut bad = good.clone();
    bad.push(0x7f);
    assert_eq!(
        Datagram::parse(&bad, KEY).unwrap_err(),
        WireError::UnknownFrame {
            kind: 0x7f,
            at: good.len()
        }
    );
}

#[test]
fn fragment_outside_message_is_rejected() {
    let mut out = Vec::new();
    write_header(&mut out, &header());
    write_data(&mut out, 0, 3, 2, b"ab");
    assert_eq!(
        Datagram::parse(&out, KEY).unwrap_err(),
        WireError::FragmentOutOfBounds {
            offset: 2,
            len: 2,
            total: 3
        }
    );
    // offset + len overflowing u32 is the same error, not a panic.
    let mut out = Vec::new();
    write_header(&mut out, &header());
    out.push(0x01);
    out.extend_from_slice(&0u64.to_le_bytes());
    out.extend_from_slice(&u32::MAX.to_le_bytes());
    out.extend_from_slice(&u32::MAX.to_le_bytes());
    out.extend_from_slice(&2u32.to_le_bytes());
    assert_eq!(
        Datagram::parse(&out, KEY).unwrap_err(),
        WireError::FragmentOutOfBounds {
            offset: u32::MAX,
            len: 2,
            total: u32::MAX
        }
    );
}

#[test]
fn bad_ack_ranges_are_rejected() {
    let ack_with = |cum: u64, ranges: &[(u64, u64)], count: u8| {
        let mut out = Vec::new();
        write_header(&mut out, &header());
        out.push(0x02);
        out.extend_from_slice(&cum.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.push(count);
        for (s, e) in ranges {
            out.extend_from_slice(&s.to_le_bytes());
            out.extend_from_slice(&e.to_le_bytes());
        }
        out
    };
    assert_eq!(
        Datagram::parse(&ack_with(4, &[(4, 6)], 1), KEY).unwrap_err(),
        WireError::BadRange { start: 4, end: 6 }
    );
    assert_eq!(
        Datagram::parse(&ack_with(0, &[(3, 3)], 1), KEY).unwrap_err(),
        WireError::BadRange { start: 3, end: 3 }
    );
    assert_eq!(
        Datagram::parse(&ack_with(0, &[(3, 6), (6, 8)], 2), KEY).unwrap_err(),
        WireError::BadRange { start: 6, end: 8 }
    );
    assert_eq!(
        Datagram::parse(&ack_with(0, &[], 17), KEY).unwrap_err(),
        WireError::TooManyRanges(17)
    );
    // A count that promises more ranges than the datagram holds is truncation.
    assert!(matches!(
        Datagram::parse(&ack_with(0, &[(3, 6)], 2), KEY).unwrap_err(),
        WireError::Truncated {
            what: "ack range start",
            ..
        }
    ));
}

#[test]
fn ack_frame_capacity_is_bounded() {
    let mut ack = AckFrame::new(0, 0, 0);
    for i in 0..MAX_SACK_RANGES as u64 {
        assert!(ack.push_range(SackRange {
            start: 2 * i + 1,
            end: 2 * i + 2
        }));
    }
    assert!(!ack.push_range(SackRange {
        start: 1000,
        end: 1001
    }));
    assert_eq!(ack.encoded_len(), ACK_FRAME_MAX);
    let mut out = Vec::new();
    write_ack(&mut out, &ack);
    assert_eq!(out.len(), ACK_FRAME_MAX);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(dg) = Datagram::parse(&bytes, KEY) {
            for f in dg.frames() {
                prop_assert!(f.is_ok());
            }
        }
    }

    #[test]
    fn random_frames_after_valid_header_never_panic(
        tail in proptest::collection::vec(any::<u8>(), 0..300)
    ) {
        let mut bytes = Vec::new();
        write_header(&mut bytes, &header());
        bytes.extend_from_slice(&tail);
        if let Ok(dg) = Datagram::parse(&bytes, KEY) {
            for f in dg.frames() {
                prop_assert!(f.is_ok());
            }
        }
    }

    #[test]
    fn mutated_valid_datagrams_never_panic(
        edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8),
        cut in any::<usize>(),
    ) {
        let mut bytes = sample();
        for (pos, val) in edits {
            let i = pos % bytes.len();
            bytes[i] = val;
        }
        let len = bytes.len();
        bytes.truncate(cut % (len + 1));
        if let Ok(dg) = Datagram::parse(&bytes, KEY) {
            for f in dg.frames() {
                prop_assert!(f.is_ok());
            }
        }
    }

    #[test]
    fn encode_decode_round_trip(
        seq in any::<u64>(),
        payload in proptest::collection::vec(any::<u8>(), 0..100),
        extra in 0u32..1000,
        cum in 0u64..1_000_000,
        gaps in proptest::collection::vec((1u64..50, 1u64..50), 0..MAX_SACK_RANGES),
        delay in any::<u32>(),
    ) {
        let total = payload.len() as u32 + extra;
        let offset = extra / 2;
        let mut ack = AckFrame::new(cum, cum + 7, delay);
        let mut at = cum;
        for (gap, len) in gaps {
            at += gap;
            let pushed = ack.push_range(SackRange { start: at, end: at + len });
            prop_assert!(pushed);
            at += len;
        }
        let mut bytes = Vec::new();
        write_header(&mut bytes, &header());
        write_ack(&mut bytes, &ack);
        write_data(&mut bytes, seq, total, offset, &payload);
        let dg = Datagram::parse(&bytes, KEY).unwrap();
        let frames: Vec<_> = dg.frames().map(|f| f.unwrap()).collect();
        prop_assert_eq!(frames.len(), 2);
        let Frame::Ack(got) = frames[0] else {
            panic!("expected an ack, got {:?}", frames[0]);
        };
        prop_assert_eq!(got.to_frame(), ack);
        prop_assert_eq!(
            frames[1],
            Frame::Data(DataFrame { seq, total, offset, payload: &payload })
        );
    }
}

#[test]
fn bye_frames_round_trip_and_are_pinned() {
    for (bye, code) in [(Bye::Leaving, 0u8), (Bye::Clear, 1u8), (Bye::Ended, 2u8)] {
        let mut dg = Vec::new();
        write_header(&mut dg, &header());
        let at = dg.len();
        write_bye(&mut dg, bye);
        assert_eq!(dg.get(at..), Some(&[0x03, code][..]));
        let parsed = Datagram::parse(&dg, KEY).unwrap();
        let frames: Vec<_> = parsed.frames().collect();
        assert_eq!(frames, vec![Ok(Frame::Bye(bye))]);
    }
}

#[test]
fn a_bye_of_unknown_kind_or_cut_short_is_rejected() {
    let mut dg = Vec::new();
    write_header(&mut dg, &header());
    let mut bad = dg.clone();
    bad.extend_from_slice(&[0x03, 3]);
    assert_eq!(
        Datagram::parse(&bad, KEY).unwrap_err(),
        WireError::BadBye(3)
    );
    let mut cut = dg.clone();
    cut.push(0x03);
    assert_eq!(
        Datagram::parse(&cut, KEY).unwrap_err(),
        WireError::Truncated {
            what: "bye kind",
            at: HEADER_LEN + 1,
            needed: 1,
            len: HEADER_LEN + 1
        }
    );
}
