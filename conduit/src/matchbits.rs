//! The active-message header packed into Portals match bits (`DESIGN.md` §4).
//!
//! ```text
//!  63   62        61-60     59-55   54-47     46-0
//!  type req/rep   protocol  argc    handler   payload length
//! ```
//! The layout is a wire format shared by every rank of a job: it must not drift. The golden
//! vectors in the tests pin it.

/// Largest number of 32-bit arguments an active message carries.
pub const MAX_ARGS: usize = 16;
/// Largest payload length the header can describe (47 bits).
pub const MAX_PAYLOAD_LEN: u64 = (1 << 47) - 1;

const TYPE_SHIFT: u32 = 63;
const REQ_SHIFT: u32 = 62;
const PROTO_SHIFT: u32 = 60;
const ARGC_SHIFT: u32 = 55;
const HANDLER_SHIFT: u32 = 47;

/// What a Portals message on the AM portal carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MsgType {
    /// The data half of a Long AM, put straight into the target segment (bit 63 = 0).
    LongData,
    /// An active message header, possibly with its payload (bit 63 = 1).
    ActiveMessage,
}

/// Request or reply (bit 62; always 0 for [`MsgType::LongData`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// A reply, sent from a request handler through its token (bit 62 = 0).
    Reply,
    /// A request (bit 62 = 1).
    Request,
}

/// The AM category as carried on the wire (bits 61–60).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// Arguments only.
    Short = 0,
    /// Arguments and a payload delivered into a temporary buffer.
    Medium = 1,
    /// Arguments, then a payload that a separate LONG_DATA put placed in the target segment.
    Long = 2,
    /// Arguments, the 64-bit target offset and the payload in one message (a Long AM that fits).
    LongPacked = 3,
}

impl Protocol {
    fn from_bits(bits: u64) -> Protocol {
        match bits & 3 {
            0 => Protocol::Short,
            1 => Protocol::Medium,
            2 => Protocol::Long,
            _ => Protocol::LongPacked,
        }
    }
}

/// A header that cannot be packed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatchBitsError {
    /// More than [`MAX_ARGS`] arguments.
    #[error("{argc} arguments exceed the maximum of {MAX_ARGS}")]
    TooManyArgs {
        /// The argument count asked for.
        argc: usize,
    },
    /// A payload longer than the 47-bit length field.
    #[error("payload of {len} bytes exceeds the header's maximum of {MAX_PAYLOAD_LEN}")]
    PayloadTooLong {
        /// The length asked for.
        len: u64,
    },
    /// LONG_DATA carries no AM fields: direction must be Reply(0), protocol Short(0), argc 0 and
    /// handler 0.
    #[error("a LONG_DATA header carries only a length")]
    LongDataFields,
}

/// The unpacked fields of an AM header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AmHeader {
    /// Message type.
    pub msg_type: MsgType,
    /// Request or reply.
    pub direction: Direction,
    /// AM category on the wire.
    pub protocol: Protocol,
    /// Number of 32-bit arguments (0..=16).
    pub argc: u8,
    /// Handler index (0..=255).
    pub handler: u8,
    /// Payload length in bytes.
    pub payload_len: u64,
}

/// Packed match bits of an AM-portal message. Constructed only through [`MatchBits::pack`] (which
/// checks every field) or [`MatchBits::from_raw`] + [`MatchBits::unpack`] (which validates).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MatchBits(u64);

impl MatchBits {
    /// The match bits of an AM receive entry: matches headers (bit 63 set) and ignores the rest.
    pub const AM_RECEIVE_BITS: u64 = 1 << TYPE_SHIFT;
    /// Ignore bits of an AM receive entry.
    pub const AM_RECEIVE_IGNORE: u64 = !(1 << TYPE_SHIFT);

    /// Packs a header, checking every field.
    pub fn pack(h: &AmHeader) -> Result<MatchBits, MatchBitsError> {
        if usize::from(h.argc) > MAX_ARGS {
            return Err(MatchBitsError::TooManyArgs {
                argc: usize::from(h.argc),
            });
        }
        if h.payload_len > MAX_PAYLOAD_LEN {
            return Err(MatchBitsError::PayloadTooLong { len: h.payload_len });
        }
        if h.msg_type == MsgType::LongData
            && (h.direction != Direction::Reply
                || h.protocol != Protocol::Short
                || h.argc != 0
                || h.handler != 0)
        {
            return Err(MatchBitsError::LongDataFields);
        }
        let t = match h.msg_type {
            MsgType::LongData => 0,
            MsgType::ActiveMessage => 1,
        };
        let d = match h.direction {
            Direction::Reply => 0,
            Direction::Request => 1,
        };
        Ok(MatchBits(
            (t << TYPE_SHIFT)
                | (d << REQ_SHIFT)
                | ((h.protocol as u64) << PROTO_SHIFT)
                | (u64::from(h.argc) << ARGC_SHIFT)
                | (u64::from(h.handler) << HANDLER_SHIFT)
                | h.payload_len,
        ))
    }

    /// The header of a LONG_DATA put of `len` bytes.
    pub fn long_data(len: u64) -> Result<MatchBits, MatchBitsError> {
        MatchBits::pack(&AmHeader {
            msg_type: MsgType::LongData,
            direction: Direction::Reply,
            protocol: Protocol::Short,
            argc: 0,
            handler: 0,
            payload_len: len,
        })
    }

    /// Wraps raw bits received from the network; [`MatchBits::unpack`] validates them.
    pub fn from_raw(bits: u64) -> MatchBits {
        MatchBits(bits)
    }

    /// The raw 64 bits.
    pub fn raw(&self) -> u64 {
        self.0
    }

    /// Unpacks and validates (argc ≤ 16; LONG_DATA with no AM fields).
    pub fn unpack(&self) -> Result<AmHeader, MatchBitsError> {
        let b = self.0;
        let msg_type = if b >> TYPE_SHIFT & 1 == 1 {
            MsgType::ActiveMessage
        } else {
            MsgType::LongData
        };
        let h = AmHeader {
            msg_type,
            direction: if b >> REQ_SHIFT & 1 == 1 {
                Direction::Request
            } else {
                Direction::Reply
            },
            protocol: Protocol::from_bits(b >> PROTO_SHIFT),
            argc: (b >> ARGC_SHIFT & 0x1f) as u8,
            handler: (b >> HANDLER_SHIFT & 0xff) as u8,
            payload_len: b & MAX_PAYLOAD_LEN,
        };
        // Re-packing applies every check.
        MatchBits::pack(&h).map(|_| h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn am(d: Direction, p: Protocol, argc: u8, handler: u8, len: u64) -> AmHeader {
        AmHeader {
            msg_type: MsgType::ActiveMessage,
            direction: d,
            protocol: p,
            argc,
            handler,
            payload_len: len,
        }
    }

    #[test]
    fn golden_vectors() {
        let cases: &[(AmHeader, u64)] = &[
            (
                am(Direction::Request, Protocol::Short, 0, 0, 0),
                0xC000_0000_0000_0000,
            ),
            (
                am(Direction::Reply, Protocol::Short, 0, 0, 0),
                0x8000_0000_0000_0000,
            ),
            (
                am(Direction::Request, Protocol::Medium, 16, 255, 65_000),
                0xD87F_8000_0000_FDE8,
            ),
            (
                am(Direction::Reply, Protocol::Long, 1, 128, 1),
                0xA0C0_0000_0000_0001,
            ),
            (
                am(
                    Direction::Request,
                    Protocol::LongPacked,
                    3,
                    7,
                    MAX_PAYLOAD_LEN,
                ),
                0xF183_FFFF_FFFF_FFFF,
            ),
        ];
        for (h, raw) in cases {
            let mb = MatchBits::pack(h).unwrap();
            assert_eq!(mb.raw(), *raw, "{h:?} packed to {:#018x}", mb.raw());
            assert_eq!(MatchBits::from_raw(*raw).unpack().unwrap(), *h);
        }
        assert_eq!(
            MatchBits::long_data(4096).unwrap().raw(),
            0x0000_0000_0000_1000
        );
    }

    #[test]
    fn invalid_fields_are_errors() {
        assert_eq!(
            MatchBits::pack(&am(Direction::Request, Protocol::Short, 17, 0, 0)),
            Err(MatchBitsError::TooManyArgs { argc: 17 })
        );
        assert_eq!(
            MatchBits::pack(&am(Direction::Request, Protocol::Medium, 0, 0, 1 << 47)),
            Err(MatchBitsError::PayloadTooLong { len: 1 << 47 })
        );
        // argc 31 on the wire.
        assert_eq!(
            MatchBits::from_raw(0x8000_0000_0000_0000 | (31 << 55)).unpack(),
            Err(MatchBitsError::TooManyArgs { argc: 31 })
        );
        // LONG_DATA with a handler set.
        assert_eq!(
            MatchBits::from_raw(5 << 47).unpack(),
            Err(MatchBitsError::LongDataFields)
        );
    }

    #[test]
    fn receive_entry_matches_headers_only() {
        let hdr = MatchBits::pack(&am(Direction::Request, Protocol::Medium, 2, 200, 10)).unwrap();
        let data = MatchBits::long_data(10).unwrap();
        let matches =
            |m: u64| (m ^ MatchBits::AM_RECEIVE_BITS) & !MatchBits::AM_RECEIVE_IGNORE == 0;
        assert!(matches(hdr.raw()));
        assert!(!matches(data.raw()));
    }

    fn any_header() -> impl Strategy<Value = AmHeader> {
        (
            any::<bool>(),
            0u8..4,
            0u8..=16,
            any::<u8>(),
            0..=MAX_PAYLOAD_LEN,
        )
            .prop_map(|(req, p, argc, handler, len)| {
                am(
                    if req {
                        Direction::Request
                    } else {
                        Direction::Reply
                    },
                    Protocol::from_bits(u64::from(p)),
                    argc,
                    handler,
                    len,
                )
            })
    }

    proptest! {
        #[test]
        fn round_trip(h in any_header()) {
            let mb = MatchBits::pack(&h).unwrap();
            prop_assert_eq!(MatchBits::from_raw(mb.raw()).unpack().unwrap(), h);
        }

        #[test]
        fn unpack_never_panics(raw in any::<u64>()) {
            if let Ok(h) = MatchBits::from_raw(raw).unpack() {
                prop_assert_eq!(MatchBits::pack(&h).unwrap().raw(), raw);
            }
        }
    }
}
