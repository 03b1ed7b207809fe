//! Outgoing messages as the engine hands them to the transport, and the payload piece that a
//! gathering send takes from one without copying it.
//!
//! A message is its owned bytes (`head`), optionally followed by a span of a [`Region`]
//! (`body`) that is sent in place: the transport cuts fragments across both and, when the
//! driver can gather, passes a large piece of the body to the kernel straight from the region's
//! memory. That saves the copy of a large put's payload into the message, which was a third of
//! a sending rank's time in a put stream. The engine makes a body only for memory descriptors
//! with [`crate::types::MdOptions::IN_PLACE`], whose owner keeps the bytes unchanged until the
//! operation's acknowledgement.
//!
//! [`Region`]: crate::memory::Region

use crate::memory::{OutOfBounds, Region, RegionSpan};

/// An outgoing message: owned bytes followed by an optional in-place region span.
#[derive(Debug, Clone)]
pub struct OutMessage {
    head: Vec<u8>,
    body: Option<RegionSpan>,
    /// What the transport does for the message besides delivering it, in one word (a message
    /// is moved several times on its way, so it stays small): [`FENCED`], [`CONFIRMED`],
    /// [`AWAITED`] and the confirmation token in the low bits (see
    /// [`OutMessage::confirmed_as`]).
    marks: u64,
}

/// [`OutMessage::marks`]: the message is fenced.
const FENCED: u64 = 1 << 63;
/// [`OutMessage::marks`]: the message is to be confirmed with the token in the low bits.
const CONFIRMED: u64 = 1 << 62;
/// [`OutMessage::marks`]: the sender's program waits on the confirmation
/// ([`OutMessage::awaited`]).
const AWAITED: u64 = 1 << 61;
/// [`OutMessage::marks`]: the token's bits.
const TOKEN: u64 = AWAITED - 1;

impl OutMessage {
    /// The message `head` followed by the bytes of `body`.
    pub fn new(head: Vec<u8>, body: Option<RegionSpan>) -> Self {
        OutMessage {
            head,
            body,
            marks: 0,
        }
    }

    /// Asks the transport to report the message's delivery with `token`
    /// ([`crate::transport::TransportEvent::Confirmed`]). Tokens are below 2^61 (the engine's
    /// are operation counts); higher bits are dropped.
    pub fn confirm_as(&mut self, token: u64) {
        debug_assert!(token <= TOKEN, "confirmation token {token:#x} too large");
        self.marks = (self.marks & (FENCED | AWAITED)) | CONFIRMED | (token & TOKEN);
    }

    /// Marks a confirmed message as one whose confirmation the sender's program waits on (a
    /// put with a confirmed acknowledgement, [`crate::types::AckReq::ConfirmedAck`]): the
    /// transport applies a bare ack that may cover it as it arrives instead of deferring it
    /// past the next transmit (see the transport's `settle`), so that the wait ends on that
    /// datagram.
    pub fn mark_awaited(&mut self) {
        self.marks |= AWAITED;
    }

    /// Whether the sender waits on this message's confirmation ([`OutMessage::mark_awaited`]).
    pub fn is_awaited(&self) -> bool {
        self.marks & (AWAITED | CONFIRMED) == AWAITED | CONFIRMED
    }

    /// [`OutMessage::confirm_as`], by value.
    pub fn confirmed_as(mut self, token: u64) -> Self {
        self.confirm_as(token);
        self
    }

    /// The token of a message whose delivery the sender wants confirmed.
    pub fn confirm(&self) -> Option<u64> {
        (self.marks & CONFIRMED != 0).then_some(self.marks & TOKEN)
    }

    /// The message, fenced: the receiver confirms none of its own messages on an
    /// acknowledgement written after this message was queued until this message has been
    /// delivered to it. For an answer that overrides a confirmation, such as a refusal.
    pub fn fenced(mut self) -> Self {
        self.marks |= FENCED;
        self
    }

    /// Whether the message is fenced ([`OutMessage::fenced`]).
    pub fn is_fence(&self) -> bool {
        self.marks & FENCED != 0
    }

    /// Total length in bytes.
    pub fn len(&self) -> usize {
        self.head.len() + self.body.as_ref().map_or(0, RegionSpan::len)
    }

    /// Whether the message has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The owned bytes at the start of the message.
    pub fn head(&self) -> &[u8] {
        &self.head
    }

    /// The in-place bytes after the head, if any.
    pub fn body(&self) -> Option<&RegionSpan> {
        self.body.as_ref()
    }

    /// The owned bytes and the in-place span.
    pub fn into_parts(self) -> (Vec<u8>, Option<RegionSpan>) {
        (self.head, self.body)
    }

    /// The whole message in one new buffer (for a test).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len());
        self.append_all(&mut out);
        out
    }

    /// Appends the whole message to `out` (for a receiver in the same process).
    pub fn append_all(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.head);
        if let Some(body) = &self.body {
            // Cannot fail: the whole span is in bounds by construction.
            let _ = body.append_to(0, body.len(), out);
        }
    }

    /// Appends message bytes `[start, start + len)` to `out`.
    pub fn append_range(
        &self,
        start: usize,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), OutOfBounds> {
        let (from_head, from_body) = self.split(start, len)?;
        if let Some((a, b)) = from_head {
            out.extend_from_slice(&self.head[a..b]);
        }
        if let (Some((from, n)), Some(body)) = (from_body, &self.body) {
            body.append_to(from, n, out)?;
        }
        Ok(())
    }

    /// The piece of `[start, start + len)` that lies in the head (as a head range) and the
    /// piece that lies in the body (as body offset and length).
    #[allow(clippy::type_complexity)]
    pub fn split(
        &self,
        start: usize,
        len: usize,
    ) -> Result<(Option<(usize, usize)>, Option<(usize, usize)>), OutOfBounds> {
        OutOfBounds::check(start as u64, len as u64, self.len() as u64)?;
        // In range (checked just above), so the sum cannot overflow.
        let end = start + len;
        let h = self.head.len();
        let in_head = (start < h && len > 0).then(|| (start, end.min(h)));
        let in_body = (end > h).then(|| (start.max(h) - h, end - start.max(h)));
        Ok((in_head, in_body))
    }
}

impl From<Vec<u8>> for OutMessage {
    fn from(head: Vec<u8>) -> Self {
        OutMessage {
            head,
            body: None,
            marks: 0,
        }
    }
}

/// The last piece of a datagram that a gathering send takes from a queued message instead of
/// from the datagram buffer.
#[derive(Debug, Clone, Copy)]
pub enum Tail<'a> {
    /// Owned message bytes (empty: no tail).
    Bytes(&'a [u8]),
    /// `len` bytes of an in-place span, from byte `from` of it.
    Span {
        /// The span.
        span: &'a RegionSpan,
        /// First byte, relative to the span.
        from: usize,
        /// Number of bytes.
        len: usize,
    },
    /// Two borrowed pieces, sent one after the other: the bytes that stand in for an in-place
    /// span whose region is not written yet (`Ni::put_staged`).
    Pair(&'a [u8], &'a [u8]),
}

impl Tail<'_> {
    /// No tail.
    pub const NONE: Tail<'static> = Tail::Bytes(&[]);

    /// Length in bytes.
    pub fn len(&self) -> usize {
        match self {
            Tail::Bytes(b) => b.len(),
            Tail::Span { len, .. } => *len,
            Tail::Pair(a, b) => a.len() + b.len(),
        }
    }

    /// Whether the tail has no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends the tail's bytes to `out` (for a link that cannot gather).
    pub fn append_to(&self, out: &mut Vec<u8>) {
        match self {
            Tail::Bytes(b) => out.extend_from_slice(b),
            Tail::Pair(a, b) => {
                out.extend_from_slice(a);
                out.extend_from_slice(b);
            }
            Tail::Span { span, from, len } => {
                // Cannot fail: the transport names only ranges inside the span.
                let _ = span.append_to(*from, *len, out);
            }
        }
    }
}

/// The bytes that an in-place span stands for before its region holds them: two borrowed
/// pieces, one after the other (`Ni::put_staged`). While the call that staged them transmits,
/// a fragment taken from that span is sent from the pieces instead.
#[derive(Debug, Clone, Copy)]
pub struct Staged<'a> {
    /// The region the span lies in.
    pub region: &'a Region,
    /// First byte of the span in the region.
    pub offset: usize,
    /// The span's bytes.
    pub parts: [&'a [u8]; 2],
}

impl<'a> Staged<'a> {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.parts[0].len() + self.parts[1].len()
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The staged stand-in for `len` bytes from byte `from` of `span`, if `span` is exactly
    /// the staged one and the range lies inside it.
    pub fn stand_in(&self, span: &RegionSpan, from: usize, len: usize) -> Option<Tail<'a>> {
        if !span.region().same_as(self.region)
            || span.offset() != self.offset
            || span.len() != self.len()
        {
            return None;
        }
        let end = from.checked_add(len).filter(|&e| e <= self.len())?;
        let [a, b] = self.parts;
        let first = a.get(from.min(a.len())..end.min(a.len()))?;
        let second = b.get(from.saturating_sub(a.len())..end.saturating_sub(a.len()))?;
        Some(Tail::Pair(first, second))
    }

    /// Writes the pieces into the region, where the span's later readers (retransmissions)
    /// find them.
    pub fn write(&self) -> Result<(), OutOfBounds> {
        self.region.write(self.offset, self.parts[0])?;
        self.region
            .write(self.offset + self.parts[0].len(), self.parts[1])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::Region;

    fn message() -> (OutMessage, Vec<u8>) {
        let all: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
        let region = Region::new(300);
        region.write(50, &all[40..]).unwrap();
        let span = RegionSpan::new(region, 50, 160).unwrap();
        (OutMessage::new(all[..40].to_vec(), Some(span)), all)
    }

    #[test]
    fn staged_pieces_stand_in_for_exactly_their_span() {
        let region = Region::new(300);
        let all: Vec<u8> = (0..160u8).collect();
        let staged = Staged {
            region: &region,
            offset: 50,
            parts: [&all[..30], &all[30..]],
        };
        let span = RegionSpan::new(region.clone(), 50, 160).unwrap();
        for (from, len) in [(0, 160), (0, 30), (10, 40), (30, 130), (159, 1), (160, 0)] {
            let mut out = Vec::new();
            staged
                .stand_in(&span, from, len)
                .unwrap()
                .append_to(&mut out);
            assert_eq!(out, &all[from..from + len], "from {from} len {len}");
        }
        assert!(staged.stand_in(&span, 150, 11).is_none(), "past the end");
        let shifted = RegionSpan::new(region.clone(), 51, 160).unwrap();
        let shorter = RegionSpan::new(region.clone(), 50, 159).unwrap();
        let elsewhere = RegionSpan::new(Region::new(300), 50, 160).unwrap();
        for other in [shifted, shorter, elsewhere] {
            assert!(staged.stand_in(&other, 0, 10).is_none(), "{other:?}");
        }
        assert_eq!(region.to_vec(50, 160).unwrap(), vec![0; 160]);
        staged.write().unwrap();
        assert_eq!(region.to_vec(50, 160).unwrap(), all);
    }

    #[test]
    fn ranges_across_head_and_body_match_the_flat_bytes() {
        let (m, all) = message();
        assert_eq!(m.len(), 200);
        assert_eq!(m.to_bytes(), all);
        for start in [0usize, 1, 39, 40, 41, 100, 199, 200] {
            for len in [0usize, 1, 2, 39, 40, 41, 160, 200] {
                let mut out = vec![9];
                let r = m.append_range(start, len, &mut out);
                if start + len > 200 {
                    assert_eq!(
                        r,
                        Err(OutOfBounds {
                            offset: start as u64,
                            len: len as u64,
                            region_len: 200
                        })
                    );
                    assert_eq!(out, vec![9], "nothing appended on a refused range");
                } else {
                    r.unwrap();
                    assert_eq!(&out[1..], &all[start..start + len], "{start}+{len}");
                }
            }
        }
    }

    #[test]
    fn split_names_the_pieces() {
        let (m, _) = message();
        assert_eq!(m.split(0, 40).unwrap(), (Some((0, 40)), None));
        assert_eq!(m.split(30, 20).unwrap(), (Some((30, 40)), Some((0, 10))));
        assert_eq!(m.split(40, 160).unwrap(), (None, Some((0, 160))));
        assert_eq!(m.split(10, 0).unwrap(), (None, None));
    }

    #[test]
    fn tails_copy_their_bytes() {
        let (m, all) = message();
        let span = m.body().unwrap();
        let mut out = Vec::new();
        Tail::Span {
            span,
            from: 10,
            len: 20,
        }
        .append_to(&mut out);
        Tail::Bytes(&[1, 2]).append_to(&mut out);
        assert_eq!(&out[..20], &all[50..70]);
        assert_eq!(&out[20..], &[1, 2]);
        assert!(Tail::NONE.is_empty());
    }

    #[test]
    fn raw_bytes_point_at_the_region_bytes_in_order() {
        let (m, _) = message();
        let span = m.body().unwrap();
        assert!(span.raw_bytes(150, 11).is_none(), "past the span");
        if cfg!(target_endian = "little") {
            let a = span.raw_bytes(0, 160).unwrap() as usize;
            let b = span.raw_bytes(8, 1).unwrap() as usize;
            assert_eq!(b - a, 8);
        }
    }
}
