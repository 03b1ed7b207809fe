//! Portals operation messages: what one engine sends another through the transport.
//!
//! A message is either a **request** (put, get, atomic, fetch-atomic, swap) travelling from an
//! initiator to a target, or a **response** (ack, reply) travelling back. The transport below
//! delivers messages reliably, exactly once and in order, so a message carries no sequence
//! numbers of its own: only what the target needs to match and deposit, and the initiator's
//! operation id that pairs a response with its request.
//!
//! All integers are little-endian. Request layout (58-byte header):
//!
//! ```text
//!  0 tag (1 put, 2 get, 3 atomic, 4 fetch-atomic, 5 swap)   1 target NI kind index (0..=3)
//!  2 ack_req (0 none, 1 ack, 2 ct-ack, 3 oc-ack, 4 confirmed, 5 confirmed-exact)            3 atomic op (0xff: none)
//!  4 atomic datatype (0xff: none)                           5 operand length
//!  6 pt_index u32   10 initiator uid u32   14 initiator rank u32 (RANK_ANY on physical NIs)
//! 18 match_bits u64 26 remote_offset u64  34 hdr_data u64  42 op_id u64  50 rlength u64
//! 58 operand bytes, then the data (exactly rlength bytes for put/atomic/fetch-atomic/swap)
//! ```
//!
//! Response layout (26-byte header):
//!
//! ```text
//!  0 tag (0x81 ack, 0x82 reply)  1 ni_fail  2 op_id u64  10 mlength u64  18 offset u64
//! 26 data (reply only: exactly mlength bytes)
//! ```
//!
//! An **immediate** message (an rgasnet extension, see [`immediate`]) carries a few bytes from
//! one NI to its peer outside the Portals semantics.
//!
//! Decoding is total: every byte string yields a message or a [`ProtoError`]; lengths are checked
//! before any slice is taken, and decoded messages borrow their payload from the input so a large
//! put is never copied by the decoder.

pub mod immediate;

pub use immediate::{encode_immediate_into, Immediate, IMMEDIATE_HEADER_LEN, MAX_IMMEDIATE};

use crate::memory::OutOfBounds;
use crate::types::{AckReq, AtomicOp, AtomicType, MatchBits, NiFail, NiKind, PtIndex, Rank, Uid};

/// Largest payload a message may carry (1 GiB); anything larger is refused by the codec.
pub const MAX_PAYLOAD: u64 = 1 << 30;
/// Size of a request header in bytes.
pub const REQUEST_HEADER_LEN: usize = 58;
/// Size of a response header in bytes.
pub const RESPONSE_HEADER_LEN: usize = 26;
/// Largest swap operand (one element of the widest datatype).
pub const MAX_OPERAND: usize = 8;

const TAG_PUT: u8 = 1;
const TAG_GET: u8 = 2;
const TAG_ATOMIC: u8 = 3;
const TAG_FETCH: u8 = 4;
const TAG_SWAP: u8 = 5;
const TAG_ACK: u8 = 0x81;
const TAG_REPLY: u8 = 0x82;
const NONE_BYTE: u8 = 0xff;

/// A malformed message, or an inconsistent one given to the encoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProtoError {
    /// Fewer bytes than the fixed header needs.
    #[error("message of {have} bytes is shorter than its {need}-byte header")]
    Truncated {
        /// Bytes needed.
        need: usize,
        /// Bytes present.
        have: usize,
    },
    /// The first byte names no known message.
    #[error("unknown message tag {0:#04x}")]
    UnknownTag(u8),
    /// An immediate message's payload is over [`MAX_IMMEDIATE`] bytes.
    #[error("immediate message payload of {0} bytes (at most {MAX_IMMEDIATE})")]
    ImmediateTooLarge(usize),
    /// The target NI kind index is above 3.
    #[error("invalid NI kind index {0}")]
    BadNiKind(u8),
    /// The ack request code is unknown.
    #[error("invalid ack request code {0}")]
    BadAckReq(u8),
    /// An ack was requested on an operation that gets a reply instead (get, fetch, swap).
    #[error("ack request {0:?} on an operation answered by a reply")]
    AckNotAllowed(AckReq),
    /// The atomic operation code is unknown.
    #[error("invalid atomic operation code {0}")]
    BadAtomicOp(u8),
    /// The atomic datatype code is unknown.
    #[error("invalid atomic datatype code {0}")]
    BadAtomicType(u8),
    /// An atomic request without an operation and datatype, or a put/get with one.
    #[error("atomic fields present: {present}, required: {required}")]
    AtomicFields {
        /// Whether the message carries them.
        present: bool,
        /// Whether its kind requires them.
        required: bool,
    },
    /// The swap operand is not exactly one element (or present on a non-swap request).
    #[error("operand of {len} bytes where {expected} were expected")]
    BadOperandLen {
        /// Length carried.
        len: usize,
        /// Length required.
        expected: usize,
    },
    /// The payload length disagrees with the length field.
    #[error("payload of {have} bytes where the header announces {announced}")]
    LengthMismatch {
        /// Length from the header.
        announced: u64,
        /// Bytes actually present.
        have: u64,
    },
    /// A length above [`MAX_PAYLOAD`].
    #[error("length {0} exceeds the 1 GiB message limit")]
    TooLarge(u64),
    /// The failure code of a response is unknown.
    #[error("invalid ni_fail code {0}")]
    BadNiFail(u8),
    /// Encoding only: the data source (a memory region) refused the read.
    #[error("reading the payload failed: {0}")]
    Source(#[from] OutOfBounds),
}

/// The kind of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpKind {
    /// `PtlPut`.
    Put,
    /// `PtlGet`.
    Get,
    /// `PtlAtomic`.
    Atomic,
    /// `PtlFetchAtomic`.
    FetchAtomic,
    /// `PtlSwap`.
    Swap,
}

impl OpKind {
    /// Whether the target answers with a reply carrying data (rather than an optional ack).
    pub fn has_reply(&self) -> bool {
        matches!(self, OpKind::Get | OpKind::FetchAtomic | OpKind::Swap)
    }
    /// Whether the request carries data of `rlength` bytes.
    pub fn carries_data(&self) -> bool {
        !matches!(self, OpKind::Get)
    }
    /// Whether the request carries an atomic operation and datatype.
    pub fn is_atomic(&self) -> bool {
        matches!(self, OpKind::Atomic | OpKind::FetchAtomic | OpKind::Swap)
    }
    fn tag(&self) -> u8 {
        match self {
            OpKind::Put => TAG_PUT,
            OpKind::Get => TAG_GET,
            OpKind::Atomic => TAG_ATOMIC,
            OpKind::FetchAtomic => TAG_FETCH,
            OpKind::Swap => TAG_SWAP,
        }
    }
}

/// The fixed fields of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RequestHeader {
    /// Which operation.
    pub op: OpKind,
    /// Kind of the target NI (the same kind as the initiator's NI).
    pub ni_kind: NiKind,
    /// Acknowledgement requested (always `None` for operations with a reply).
    pub ack_req: AckReq,
    /// Atomic operation and datatype (atomic kinds only).
    pub atomic: Option<(AtomicOp, AtomicType)>,
    /// Portal table index at the target.
    pub pt_index: PtIndex,
    /// User id of the initiator.
    pub uid: Uid,
    /// Rank of the initiator in its own map (logical NIs), [`crate::RANK_ANY`] otherwise.
    pub initiator_rank: Rank,
    /// Match bits.
    pub match_bits: MatchBits,
    /// Offset requested in the target entry.
    pub remote_offset: u64,
    /// Header data (put and atomics).
    pub hdr_data: u64,
    /// Initiator's id of the operation, echoed in the response.
    pub op_id: u64,
    /// Requested length in bytes.
    pub rlength: u64,
}

/// A decoded request; operand and data borrow from the message bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    /// Fixed fields.
    pub header: RequestHeader,
    /// Swap operand (compare value or mask): one element for swaps, empty otherwise.
    pub operand: &'a [u8],
    /// Payload (`rlength` bytes, empty for a get).
    pub data: &'a [u8],
}

/// The kind of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResponseKind {
    /// Acknowledges a put or atomic.
    Ack,
    /// Answers a get, fetch-atomic or swap, with data.
    Reply,
}

/// The fixed fields of a response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseHeader {
    /// Ack or reply.
    pub kind: ResponseKind,
    /// Outcome at the target.
    pub ni_fail: NiFail,
    /// The initiator's operation id from the request.
    pub op_id: u64,
    /// Bytes that actually moved.
    pub mlength: u64,
    /// Offset actually used in the target entry.
    pub offset: u64,
}

/// A decoded response; data borrows from the message bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Response<'a> {
    /// Fixed fields.
    pub header: ResponseHeader,
    /// Reply data (`mlength` bytes; empty for an ack).
    pub data: &'a [u8],
}

/// Any decoded message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message<'a> {
    /// Initiator to target.
    Request(Request<'a>),
    /// Target to initiator.
    Response(Response<'a>),
    /// An immediate message (outside Portals).
    Immediate(Immediate<'a>),
}

fn ack_code(a: AckReq) -> u8 {
    match a {
        AckReq::None => 0,
        AckReq::Ack => 1,
        AckReq::CtAck => 2,
        AckReq::OcAck => 3,
        AckReq::Confirmed => 4,
        // The counting form is the initiator's business; the target sees a `ConfirmedAck`.
        AckReq::ConfirmedAck | AckReq::ConfirmedCtAck => 5,
    }
}

fn ack_from(code: u8) -> Result<AckReq, ProtoError> {
    Ok(match code {
        0 => AckReq::None,
        1 => AckReq::Ack,
        2 => AckReq::CtAck,
        3 => AckReq::OcAck,
        4 => AckReq::Confirmed,
        5 => AckReq::ConfirmedAck,
        c => return Err(ProtoError::BadAckReq(c)),
    })
}

const TYPES: [AtomicType; 10] = [
    AtomicType::Int8,
    AtomicType::Uint8,
    AtomicType::Int16,
    AtomicType::Uint16,
    AtomicType::Int32,
    AtomicType::Uint32,
    AtomicType::Int64,
    AtomicType::Uint64,
    AtomicType::Float,
    AtomicType::Double,
];

fn code_of<T: PartialEq>(table: &[T], v: &T) -> u8 {
    // The tables list every variant, so the position always exists; NONE_BYTE is unreachable.
    table
        .iter()
        .position(|x| x == v)
        .map_or(NONE_BYTE, |p| p as u8)
}

/// Whether `op` is a swap-family operation (only valid in a swap request).
pub fn is_swap_op(op: AtomicOp) -> bool {
    matches!(
        op,
        AtomicOp::Swap
            | AtomicOp::Cswap
            | AtomicOp::CswapNe
            | AtomicOp::CswapLe
            | AtomicOp::CswapLt
            | AtomicOp::CswapGe
            | AtomicOp::CswapGt
            | AtomicOp::Mswap
    )
}

/// Checks the invariants that decoding enforces; the encoder uses it so that everything it
/// produces decodes.
fn check_request(h: &RequestHeader, operand_len: usize, data_len: u64) -> Result<(), ProtoError> {
    if h.rlength > MAX_PAYLOAD {
        return Err(ProtoError::TooLarge(h.rlength));
    }
    if h.op.has_reply() && h.ack_req != AckReq::None {
        return Err(ProtoError::AckNotAllowed(h.ack_req));
    }
    if h.op.is_atomic() != h.atomic.is_some() {
        return Err(ProtoError::AtomicFields {
            present: h.atomic.is_some(),
            required: h.op.is_atomic(),
        });
    }
    let expected_operand = match (h.op, h.atomic) {
        (OpKind::Swap, Some((_, dt))) => dt.size(),
        _ => 0,
    };
    if operand_len != expected_operand {
        return Err(ProtoError::BadOperandLen {
            len: operand_len,
            expected: expected_operand,
        });
    }
    let expected_data = if h.op.carries_data() { h.rlength } else { 0 };
    if data_len != expected_data {
        return Err(ProtoError::LengthMismatch {
            announced: expected_data,
            have: data_len,
        });
    }
    Ok(())
}

/// Encodes a request whose payload is written by `fill` straight into the message buffer.
/// `fill` receives exactly `data_len` (zeroed) bytes.
pub fn encode_request_with(
    h: &RequestHeader,
    operand: &[u8],
    data_len: u64,
    fill: impl FnOnce(&mut [u8]) -> Result<(), OutOfBounds>,
) -> Result<Vec<u8>, ProtoError> {
    let (mut out, total) = request_header(Vec::new(), h, operand, data_len, true)?;
    let start = out.len();
    out.resize(total, 0);
    fill(&mut out[start..])?;
    Ok(out)
}

/// Encodes a request whose payload `append` adds to the end of the message buffer: exactly
/// `data_len` bytes, or the call fails with [`ProtoError::LengthMismatch`]. This is how a put
/// copies its data out of the MD's region exactly once, without zeroing the room first
/// ([`crate::Region::append_to`]).
#[inline(always)]
pub fn encode_request_appending(
    h: &RequestHeader,
    operand: &[u8],
    data_len: u64,
    append: impl FnOnce(&mut Vec<u8>) -> Result<(), OutOfBounds>,
) -> Result<Vec<u8>, ProtoError> {
    encode_request_appending_into(Vec::new(), h, operand, data_len, append)
}

/// [`encode_request_appending`] into `buf` (emptied first; its capacity is reused, so a
/// recycled buffer saves the allocation).
#[inline(always)]
pub fn encode_request_appending_into(
    buf: Vec<u8>,
    h: &RequestHeader,
    operand: &[u8],
    data_len: u64,
    append: impl FnOnce(&mut Vec<u8>) -> Result<(), OutOfBounds>,
) -> Result<Vec<u8>, ProtoError> {
    let (mut out, total) = request_header(buf, h, operand, data_len, true)?;
    append(&mut out)?;
    if out.len() != total {
        return Err(ProtoError::LengthMismatch {
            announced: data_len,
            have: (out.len() - (total - data_len as usize)) as u64,
        });
    }
    Ok(out)
}

/// A buffer with room for the whole request, holding its header and operand; and the total
/// message length.
// Always inlined, as the encoders below: a `Result` holding a buffer returned through memory
// was re-read at once with wider loads (a store-forwarding stall per message).
#[inline(always)]
fn request_header(
    mut out: Vec<u8>,
    h: &RequestHeader,
    operand: &[u8],
    data_len: u64,
    room_for_data: bool,
) -> Result<(Vec<u8>, usize), ProtoError> {
    check_request(h, operand.len(), data_len)?;
    // check_request bounded data_len by MAX_PAYLOAD, so it fits a usize.
    let data_len = usize::try_from(data_len).map_err(|_| ProtoError::TooLarge(data_len))?;
    let total = REQUEST_HEADER_LEN + operand.len() + data_len;
    // The fixed part is laid out in a stack array and appended once: byte-wise pushes into
    // the vector would check its capacity for every field.
    let mut head = [0u8; REQUEST_HEADER_LEN];
    let (op_code, type_code) = match h.atomic {
        Some((op, dt)) => (code_of(&AtomicOp::ALL, &op), code_of(&TYPES, &dt)),
        None => (NONE_BYTE, NONE_BYTE),
    };
    head[..6].copy_from_slice(&[
        h.op.tag(),
        h.ni_kind.index(),
        ack_code(h.ack_req),
        op_code,
        type_code,
        operand.len() as u8,
    ]);
    head[6..10].copy_from_slice(&h.pt_index.to_le_bytes());
    head[10..14].copy_from_slice(&h.uid.to_le_bytes());
    head[14..18].copy_from_slice(&h.initiator_rank.to_le_bytes());
    let words = [
        h.match_bits,
        h.remote_offset,
        h.hdr_data,
        h.op_id,
        h.rlength,
    ];
    for (slot, v) in head[18..].chunks_exact_mut(8).zip(words) {
        slot.copy_from_slice(&v.to_le_bytes());
    }
    out.clear();
    out.reserve_exact(if room_for_data {
        total
    } else {
        total - data_len
    });
    out.extend_from_slice(&head);
    out.extend_from_slice(operand);
    Ok((out, total))
}

/// Encodes into `buf` (emptied first) only the header and operand of a request announcing
/// `data_len` payload bytes, which the sender appends by other means: the in-place body of an
/// [`crate::message::OutMessage`], sent from its region without a copy.
#[inline(always)]
pub fn encode_request_head_into(
    buf: Vec<u8>,
    h: &RequestHeader,
    operand: &[u8],
    data_len: u64,
) -> Result<Vec<u8>, ProtoError> {
    request_header(buf, h, operand, data_len, false).map(|(out, _)| out)
}

/// Encodes a request whose payload is in a slice.
pub fn encode_request(
    h: &RequestHeader,
    operand: &[u8],
    data: &[u8],
) -> Result<Vec<u8>, ProtoError> {
    encode_request_with(h, operand, data.len() as u64, |buf| {
        buf.copy_from_slice(data);
        Ok(())
    })
}

/// Encodes a response whose data (`mlength` bytes for a reply, none for an ack) is written by
/// `fill` straight into the message buffer.
#[inline]
pub fn encode_response_with(
    h: &ResponseHeader,
    fill: impl FnOnce(&mut [u8]) -> Result<(), OutOfBounds>,
) -> Result<Vec<u8>, ProtoError> {
    encode_response_with_into(Vec::new(), h, fill)
}

/// [`encode_response_with`] into `buf` (emptied first; its capacity is reused).
#[inline]
pub fn encode_response_with_into(
    buf: Vec<u8>,
    h: &ResponseHeader,
    fill: impl FnOnce(&mut [u8]) -> Result<(), OutOfBounds>,
) -> Result<Vec<u8>, ProtoError> {
    let (mut out, total) = response_header(buf, h, true)?;
    out.resize(total, 0);
    fill(&mut out[RESPONSE_HEADER_LEN..])?;
    Ok(out)
}

/// Encodes a response into `buf` (emptied first) whose data `append` adds to the end of the
/// buffer: exactly the reply's `mlength` bytes, or the call fails with
/// [`ProtoError::LengthMismatch`]. A get's reply is copied out of the region this way, without
/// first zeroing room for it (a memset pass over every byte a large get moves).
#[inline]
pub fn encode_response_appending_into(
    buf: Vec<u8>,
    h: &ResponseHeader,
    append: impl FnOnce(&mut Vec<u8>) -> Result<(), OutOfBounds>,
) -> Result<Vec<u8>, ProtoError> {
    let (mut out, total) = response_header(buf, h, true)?;
    append(&mut out)?;
    if out.len() != total {
        return Err(ProtoError::LengthMismatch {
            announced: (total - RESPONSE_HEADER_LEN) as u64,
            have: out.len().saturating_sub(RESPONSE_HEADER_LEN) as u64,
        });
    }
    Ok(out)
}

/// Encodes into `buf` (emptied first) only the header of a response whose data the sender
/// appends by other means: the in-place body of an [`crate::message::OutMessage`], a get's
/// reply sent from the target's region without a copy.
#[inline]
pub fn encode_response_head_into(buf: Vec<u8>, h: &ResponseHeader) -> Result<Vec<u8>, ProtoError> {
    response_header(buf, h, false).map(|(out, _)| out)
}

/// `buf`, emptied, with room for the whole response (or only its header) and holding its
/// header; and the total response length.
#[inline]
fn response_header(
    mut out: Vec<u8>,
    h: &ResponseHeader,
    room_for_data: bool,
) -> Result<(Vec<u8>, usize), ProtoError> {
    let data_len = match h.kind {
        ResponseKind::Ack => 0,
        ResponseKind::Reply => h.mlength,
    };
    if data_len > MAX_PAYLOAD {
        return Err(ProtoError::TooLarge(data_len));
    }
    let data_len = usize::try_from(data_len).map_err(|_| ProtoError::TooLarge(data_len))?;
    let total = RESPONSE_HEADER_LEN + data_len;
    out.clear();
    out.reserve_exact(if room_for_data {
        total
    } else {
        RESPONSE_HEADER_LEN
    });
    // Laid out in a stack array and appended once, as `request_header` does: a push per field
    // checks the vector's capacity every time.
    let mut head = [0u8; RESPONSE_HEADER_LEN];
    head[0] = match h.kind {
        ResponseKind::Ack => TAG_ACK,
        ResponseKind::Reply => TAG_REPLY,
    };
    head[1] = code_of(&NiFail::ALL, &h.ni_fail);
    for (slot, v) in head[2..]
        .chunks_exact_mut(8)
        .zip([h.op_id, h.mlength, h.offset])
    {
        slot.copy_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&head);
    Ok((out, total))
}

/// Encodes a response whose data is in a slice (`data.len()` must equal `mlength` for a reply).
#[inline]
pub fn encode_response(h: &ResponseHeader, data: &[u8]) -> Result<Vec<u8>, ProtoError> {
    let expected = match h.kind {
        ResponseKind::Ack => 0,
        ResponseKind::Reply => h.mlength,
    };
    if data.len() as u64 != expected {
        return Err(ProtoError::LengthMismatch {
            announced: expected,
            have: data.len() as u64,
        });
    }
    encode_response_with(h, |buf| {
        buf.copy_from_slice(data);
        Ok(())
    })
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Decodes a message. Total: never panics, borrows payloads from `bytes`.
#[inline]
pub fn decode(bytes: &[u8]) -> Result<Message<'_>, ProtoError> {
    let tag = *bytes
        .first()
        .ok_or(ProtoError::Truncated { need: 1, have: 0 })?;
    match tag {
        TAG_PUT | TAG_GET | TAG_ATOMIC | TAG_FETCH | TAG_SWAP => {
            decode_request(tag, bytes).map(Message::Request)
        }
        TAG_ACK | TAG_REPLY => decode_response(tag, bytes).map(Message::Response),
        immediate::TAG_IMMEDIATE => immediate::decode_immediate(bytes).map(Message::Immediate),
        t => Err(ProtoError::UnknownTag(t)),
    }
}

#[inline]
fn decode_request(tag: u8, b: &[u8]) -> Result<Request<'_>, ProtoError> {
    if b.len() < REQUEST_HEADER_LEN {
        return Err(ProtoError::Truncated {
            need: REQUEST_HEADER_LEN,
            have: b.len(),
        });
    }
    let op = match tag {
        TAG_PUT => OpKind::Put,
        TAG_GET => OpKind::Get,
        TAG_ATOMIC => OpKind::Atomic,
        TAG_FETCH => OpKind::FetchAtomic,
        _ => OpKind::Swap,
    };
    let ni_kind = NiKind::from_index(b[1]).ok_or(ProtoError::BadNiKind(b[1]))?;
    let ack_req = ack_from(b[2])?;
    let atomic = match (b[3], b[4]) {
        (NONE_BYTE, NONE_BYTE) => None,
        (o, t) => {
            let op = *AtomicOp::ALL
                .get(o as usize)
                .ok_or(ProtoError::BadAtomicOp(o))?;
            let dt = *TYPES.get(t as usize).ok_or(ProtoError::BadAtomicType(t))?;
            Some((op, dt))
        }
    };
    let operand_len = b[5] as usize;
    let header = RequestHeader {
        op,
        ni_kind,
        ack_req,
        atomic,
        pt_index: u32_at(b, 6),
        uid: u32_at(b, 10),
        initiator_rank: u32_at(b, 14),
        match_bits: u64_at(b, 18),
        remote_offset: u64_at(b, 26),
        hdr_data: u64_at(b, 34),
        op_id: u64_at(b, 42),
        rlength: u64_at(b, 50),
    };
    let rest = &b[REQUEST_HEADER_LEN..];
    if rest.len() < operand_len {
        return Err(ProtoError::Truncated {
            need: REQUEST_HEADER_LEN + operand_len,
            have: b.len(),
        });
    }
    let (operand, data) = rest.split_at(operand_len);
    check_request(&header, operand.len(), data.len() as u64)?;
    Ok(Request {
        header,
        operand,
        data,
    })
}

#[inline]
fn decode_response(tag: u8, b: &[u8]) -> Result<Response<'_>, ProtoError> {
    if b.len() < RESPONSE_HEADER_LEN {
        return Err(ProtoError::Truncated {
            need: RESPONSE_HEADER_LEN,
            have: b.len(),
        });
    }
    let kind = if tag == TAG_ACK {
        ResponseKind::Ack
    } else {
        ResponseKind::Reply
    };
    let ni_fail = *NiFail::ALL
        .get(b[1] as usize)
        .ok_or(ProtoError::BadNiFail(b[1]))?;
    let header = ResponseHeader {
        kind,
        ni_fail,
        op_id: u64_at(b, 2),
        mlength: u64_at(b, 10),
        offset: u64_at(b, 18),
    };
    if header.mlength > MAX_PAYLOAD {
        return Err(ProtoError::TooLarge(header.mlength));
    }
    let data = &b[RESPONSE_HEADER_LEN..];
    let expected = match kind {
        ResponseKind::Ack => 0,
        ResponseKind::Reply => header.mlength,
    };
    if data.len() as u64 != expected {
        return Err(ProtoError::LengthMismatch {
            announced: expected,
            have: data.len() as u64,
        });
    }
    Ok(Response { header, data })
}

#[cfg(test)]
mod tests;
