//! The body of an AM-portal message (`DESIGN.md` §4): `argc * 4` bytes of little-endian 32-bit
//! arguments, then for LONG_PACKED the 64-bit target segment offset, then the payload. The
//! argument count, protocol and payload length travel in the match bits, so decoding checks
//! the body's length against them.

use crate::matchbits::{AmHeader, Protocol};

/// A body that does not agree with its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("AM body of {got} bytes does not match its header ({argc} args, {protocol:?}, payload {payload_len}): expected {expected}")]
pub(crate) struct BodyError {
    /// Bytes received.
    pub(crate) got: u64,
    /// Bytes the header implies.
    pub(crate) expected: u64,
    /// Header argument count.
    pub(crate) argc: u8,
    /// Header protocol.
    pub(crate) protocol: Protocol,
    /// Header payload length.
    pub(crate) payload_len: u64,
}

/// Bytes of the body before the payload.
pub(crate) fn prefix_len(protocol: Protocol, argc: usize) -> usize {
    argc * 4
        + match protocol {
            Protocol::LongPacked | Protocol::Long => 8,
            _ => 0,
        }
}

/// Bytes of the whole body the header describes (for `Long`, the payload travels separately).
pub(crate) fn body_len(h: &AmHeader) -> u64 {
    let carried = match h.protocol {
        Protocol::Short | Protocol::Long => 0,
        Protocol::Medium | Protocol::LongPacked => h.payload_len,
    };
    prefix_len(h.protocol, usize::from(h.argc)) as u64 + carried
}

/// Writes the body into `out` (cleared first).
pub(crate) fn encode(
    out: &mut Vec<u8>,
    protocol: Protocol,
    args: &[u32],
    long_offset: Option<u64>,
    payload: &[u8],
) {
    out.clear();
    for a in args {
        out.extend_from_slice(&a.to_le_bytes());
    }
    if matches!(protocol, Protocol::LongPacked | Protocol::Long) {
        out.extend_from_slice(&long_offset.unwrap_or(0).to_le_bytes());
    }
    if matches!(protocol, Protocol::Medium | Protocol::LongPacked) {
        out.extend_from_slice(payload);
    }
}

/// A decoded body, borrowing the payload.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Body<'a> {
    /// Arguments (at most 16).
    pub(crate) args: [u32; 16],
    /// Number of valid entries of `args`.
    pub(crate) argc: usize,
    /// Target segment offset of a Long payload.
    pub(crate) long_offset: Option<u64>,
    /// The carried payload (Medium, LongPacked), else empty.
    pub(crate) payload: &'a [u8],
}

/// Decodes a body against its header.
pub(crate) fn decode<'a>(h: &AmHeader, body: &'a [u8]) -> Result<Body<'a>, BodyError> {
    decode_within(h, body, body.len() as u64)
}

/// Decodes the arguments (and Long offset) of a body of `body_len` bytes whose payload is
/// left where it is: `prefix` holds exactly the body's first [`prefix_len`] bytes. The
/// returned payload is empty.
pub(crate) fn decode_prefix<'a>(
    h: &AmHeader,
    prefix: &'a [u8],
    body_len: u64,
) -> Result<Body<'a>, BodyError> {
    if prefix.len() != prefix_len(h.protocol, usize::from(h.argc)) {
        return Err(BodyError {
            got: prefix.len() as u64,
            expected: prefix_len(h.protocol, usize::from(h.argc)) as u64,
            argc: h.argc,
            protocol: h.protocol,
            payload_len: h.payload_len,
        });
    }
    decode_within(h, prefix, body_len)
}

/// Decodes the start of a body of `total` bytes; `body` holds at least its prefix.
fn decode_within<'a>(h: &AmHeader, body: &'a [u8], total: u64) -> Result<Body<'a>, BodyError> {
    let expected = body_len(h);
    let err = BodyError {
        got: total,
        expected,
        argc: h.argc,
        protocol: h.protocol,
        payload_len: h.payload_len,
    };
    if total != expected
        || usize::from(h.argc) > 16
        || body.len() < prefix_len(h.protocol, usize::from(h.argc))
    {
        return Err(err);
    }
    let argc = usize::from(h.argc);
    let mut args = [0u32; 16];
    for (i, chunk) in body[..argc * 4].chunks_exact(4).enumerate() {
        args[i] = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
    let mut pos = argc * 4;
    let long_offset = if matches!(h.protocol, Protocol::LongPacked | Protocol::Long) {
        let mut b = [0u8; 8];
        b.copy_from_slice(&body[pos..pos + 8]);
        pos += 8;
        Some(u64::from_le_bytes(b))
    } else {
        None
    };
    Ok(Body {
        args,
        argc,
        long_offset,
        payload: &body[pos..],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::matchbits::{Direction, MsgType};

    fn hdr(protocol: Protocol, argc: u8, len: u64) -> AmHeader {
        AmHeader {
            msg_type: MsgType::ActiveMessage,
            direction: Direction::Request,
            protocol,
            argc,
            handler: 200,
            payload_len: len,
        }
    }

    #[test]
    fn round_trips() {
        let mut buf = Vec::new();
        encode(
            &mut buf,
            Protocol::Medium,
            &[1, 2, 0xdead_beef],
            None,
            b"hello",
        );
        assert_eq!(&buf[..4], &[1, 0, 0, 0]);
        let b = decode(&hdr(Protocol::Medium, 3, 5), &buf).unwrap();
        assert_eq!(&b.args[..b.argc], &[1, 2, 0xdead_beef]);
        assert_eq!(b.payload, b"hello");
        assert_eq!(b.long_offset, None);

        encode(&mut buf, Protocol::LongPacked, &[7], Some(4096), b"xyz");
        let b = decode(&hdr(Protocol::LongPacked, 1, 3), &buf).unwrap();
        assert_eq!(b.long_offset, Some(4096));
        assert_eq!(b.payload, b"xyz");

        encode(&mut buf, Protocol::Long, &[], Some(64), b"ignored");
        assert_eq!(buf.len(), 8);
        let b = decode(&hdr(Protocol::Long, 0, 1 << 20), &buf).unwrap();
        assert_eq!(b.long_offset, Some(64));
        assert!(b.payload.is_empty());

        encode(&mut buf, Protocol::Short, &[9; 16], None, &[]);
        let b = decode(&hdr(Protocol::Short, 16, 0), &buf).unwrap();
        assert_eq!(&b.args[..b.argc], &[9; 16]);
    }

    #[test]
    fn prefix_decodes_like_the_whole_body() {
        let mut buf = Vec::new();
        encode(&mut buf, Protocol::Medium, &[5, 6], None, &[7u8; 100]);
        let h = hdr(Protocol::Medium, 2, 100);
        let b = decode_prefix(&h, &buf[..8], 108).unwrap();
        assert_eq!((&b.args[..b.argc], b.payload), (&[5u32, 6][..], &[][..]));
        // A wrong total or a prefix of the wrong length is refused, as decode refuses.
        assert_eq!(decode_prefix(&h, &buf[..8], 107).unwrap_err().got, 107);
        assert_eq!(decode_prefix(&h, &buf[..4], 108).unwrap_err().expected, 8);
        // More than 16 arguments never decode (the caller sizes the prefix from argc).
        let wide = hdr(Protocol::Medium, 17, 0);
        assert!(decode_prefix(&wide, &[0u8; 68], 68).is_err());
    }

    #[test]
    fn length_mismatch_is_an_error() {
        let e = decode(&hdr(Protocol::Medium, 2, 10), &[0u8; 17]).unwrap_err();
        assert_eq!(e.expected, 18);
        assert_eq!(e.got, 17);
        assert!(decode(&hdr(Protocol::Short, 1, 0), &[0u8; 0]).is_err());
    }
}
