//! The datagram codec of the native engine's transport.
//!
//! Every datagram is a fixed header followed by zero or more frames, all integers little-endian:
//!
//! ```text
//! header (29 bytes)
//!   0..4    magic            b"RGN4"
//!   4       version          1
//!   5..13   job key          u64   datagrams of another job are dropped
//!   13..21  src incarnation  u64   random per Transport instance, never 0
//!   21..29  dst incarnation  u64   the receiver's incarnation as the sender knows it, 0 = unknown
//! frames, until the end of the datagram; each starts with a type byte
//!   0x01 DATA  seq u64, total u32, offset u32, len u32, payload[len]     (21 + len bytes)
//!   0x02 ACK   cumulative u64, largest u64, ack_delay_us u32, fence u64, nranges u8,
//!              nranges × (start u64, end u64)                          (30 + 16·n bytes)
//!   0x03 BYE   kind u8: 0 = the sender is leaving, 1 = the sender has nothing
//!              unacknowledged to the receiver, which may leave          (2 bytes)
//!   0x04 WHOLE seq u64, len u16, payload[len]: a DATA frame that carries a whole message
//!              (offset 0, total = len)                                  (11 + len bytes)
//!   0x05 ACK0  cumulative u64 (at least 1), ack_delay_us u32: an ACK without ranges whose
//!              largest is cumulative − 1 and whose fence is 0           (13 bytes)
//! ```
//!
//! The two short forms are what a small message and its acknowledgement usually are, and the
//! encoders below choose them whenever they say the same as the long forms. They matter more
//! than their 27 bytes suggest: Linux sends and receives a UDP datagram of up to 128 bytes
//! faster than a larger one. On rgasnet's development VM the raw loopback round trip is flat
//! from 8 to 128 bytes and about 0.27 µs longer from 132 bytes on (`benches/c/udp_size_rtt.c`),
//! and an 8-byte put with its piggybacked ack is 146 bytes in the long forms, 119 in the short
//! ones (see `benches/perf/libportals.md`).
//!
//! A DATA frame is one fragment of a message: `total` is the message length, `offset` where the
//! fragment goes. Fragments of one message carry consecutive sequence numbers, so the receiver
//! reassembles simply by processing frames in sequence order. An ACK says "every sequence number
//! below `cumulative` arrived", lists further received ranges `[start, end)` (selective acks), and
//! names the `largest` sequence number received with how long the receiver held it before
//! acknowledging, which lets the sender measure the round-trip time without timestamps on DATA.
//! `fence` counts the writer's messages to the reader up to the last one it *fenced* before
//! writing the frame (0: none): a reader that has had that many messages delivered from the
//! writer has heard every fenced message (a refusal, say) the writer queued before
//! acknowledging (see the transport's delivery confirmations).
//! BYE frames are the departure handshake of an interface that stops (see the transport).
//!
//! Decoding validates the whole datagram before anything is acted upon and never panics: every
//! read is bounds-checked and every sum is checked.

/// First four bytes of every datagram.
pub const MAGIC: [u8; 4] = *b"RGN4";
/// The protocol version this codec speaks.
pub const VERSION: u8 = 3;
/// Length of the datagram header.
pub const HEADER_LEN: usize = 29;
/// Length of a DATA frame without its payload.
pub const DATA_FRAME_OVERHEAD: usize = 21;
/// Length of an ACK frame without ranges.
pub const ACK_FRAME_BASE: usize = 30;
/// Length of a WHOLE frame (a DATA frame of a whole message) without its payload.
pub const WHOLE_FRAME_OVERHEAD: usize = 11;
/// Length of an ACK0 frame (an ACK without ranges or fence whose largest is implied).
pub const ACK0_FRAME_LEN: usize = 13;
/// Length of one selective-ack range on the wire.
pub const ACK_RANGE_LEN: usize = 16;
/// Most selective-ack ranges one ACK frame may carry.
pub const MAX_SACK_RANGES: usize = 16;
/// Largest ACK frame.
pub const ACK_FRAME_MAX: usize = ACK_FRAME_BASE + MAX_SACK_RANGES * ACK_RANGE_LEN;

const FRAME_DATA: u8 = 0x01;
const FRAME_ACK: u8 = 0x02;
const FRAME_BYE: u8 = 0x03;
const FRAME_WHOLE: u8 = 0x04;
const FRAME_ACK0: u8 = 0x05;

/// Why a datagram was rejected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WireError {
    /// The datagram ends before a field it must contain.
    #[error("truncated datagram: {what} needs {needed} bytes at offset {at}, datagram has {len}")]
    Truncated {
        /// The field that did not fit.
        what: &'static str,
        /// Its offset.
        at: usize,
        /// Bytes it needs.
        needed: usize,
        /// Length of the datagram.
        len: usize,
    },
    /// The first four bytes are not [`MAGIC`].
    #[error("bad magic {0:02x?}")]
    BadMagic([u8; 4]),
    /// A protocol version this codec does not speak.
    #[error("unsupported protocol version {0} (expected {VERSION})")]
    BadVersion(u8),
    /// The datagram belongs to another job.
    #[error("foreign job key {got:#018x} (expected {expected:#018x})")]
    ForeignJob {
        /// The key in the datagram.
        got: u64,
        /// This job's key.
        expected: u64,
    },
    /// The sender incarnation is 0, which no transport uses.
    #[error("sender incarnation is 0")]
    ZeroIncarnation,
    /// A frame type byte this codec does not know.
    #[error("unknown frame type {kind:#04x} at offset {at}")]
    UnknownFrame {
        /// The type byte.
        kind: u8,
        /// Its offset.
        at: usize,
    },
    /// A DATA frame whose fragment does not lie inside its message.
    #[error("fragment at offset {offset} of {len} bytes exceeds message length {total}")]
    FragmentOutOfBounds {
        /// Fragment offset.
        offset: u32,
        /// Fragment length.
        len: u32,
        /// Message length.
        total: u32,
    },
    /// An ACK frame with more ranges than [`MAX_SACK_RANGES`].
    #[error("ack carries {0} selective ranges (at most {MAX_SACK_RANGES})")]
    TooManyRanges(u8),
    /// A BYE frame of a kind this codec does not know.
    #[error("unknown BYE kind {0}")]
    BadBye(u8),
    /// A selective-ack range that is empty, not above the cumulative ack, or out of order.
    #[error("selective ack range [{start}, {end}) is empty, overlaps or is out of order")]
    BadRange {
        /// Range start.
        start: u64,
        /// Range end (exclusive).
        end: u64,
    },
    /// An ACK0 frame with a cumulative ack of 0, which implies no largest sequence number
    /// (an ack of nothing is sent in the long form).
    #[error("short ack with cumulative 0")]
    ZeroShortAck,
}

/// The fixed datagram header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The job key.
    pub job_key: u64,
    /// The sender transport's incarnation (never 0).
    pub src_incarnation: u64,
    /// The receiver's incarnation as the sender knows it (0 while unknown).
    pub dst_incarnation: u64,
}

/// One fragment of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataFrame<'a> {
    /// Per-(sender, receiver) sequence number.
    pub seq: u64,
    /// Length of the whole message.
    pub total: u32,
    /// Offset of this fragment in the message.
    pub offset: u32,
    /// The fragment's bytes.
    pub payload: &'a [u8],
}

/// A received range of sequence numbers `[start, end)` above the cumulative ack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SackRange {
    /// First sequence number of the range.
    pub start: u64,
    /// One past the last.
    pub end: u64,
}

/// An acknowledgement. Ranges are held inline so that decoding allocates nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckFrame {
    /// Every sequence number below this one was received.
    pub cumulative: u64,
    /// The largest sequence number received.
    pub largest: u64,
    /// Microseconds between receiving `largest` and sending this ack.
    pub ack_delay_us: u32,
    /// The writer's messages to the reader up to its last fenced one when it wrote the ack.
    pub fence: u64,
    ranges: [SackRange; MAX_SACK_RANGES],
    nranges: u8,
}

impl AckFrame {
    /// An ack without selective ranges (and `fence` 0: see [`AckFrame::with_fence`]).
    pub fn new(cumulative: u64, largest: u64, ack_delay_us: u32) -> Self {
        AckFrame {
            cumulative,
            largest,
            ack_delay_us,
            fence: 0,
            ranges: [SackRange::default(); MAX_SACK_RANGES],
            nranges: 0,
        }
    }

    /// The ack with its `fence` set.
    pub fn with_fence(mut self, fence: u64) -> Self {
        self.fence = fence;
        self
    }

    /// Adds a selective range; returns `false` (and adds nothing) when the frame is full.
    pub fn push_range(&mut self, range: SackRange) -> bool {
        let n = usize::from(self.nranges);
        match self.ranges.get_mut(n) {
            Some(slot) => {
                *slot = range;
                self.nranges += 1;
                true
            }
            None => false,
        }
    }

    /// The selective ranges, ascending.
    pub fn ranges(&self) -> &[SackRange] {
        self.ranges.get(..usize::from(self.nranges)).unwrap_or(&[])
    }

    /// Encoded length of this frame ([`write_ack`] may choose the short form).
    pub fn encoded_len(&self) -> usize {
        if self.nranges == 0 && ack0_says(self.cumulative, self.largest, self.fence) {
            return ACK0_FRAME_LEN;
        }
        ACK_FRAME_BASE + usize::from(self.nranges) * ACK_RANGE_LEN
    }
}

/// A decoded acknowledgement that borrows its selective ranges from the datagram: a few
/// words, where an [`AckFrame`] carries room for every range (copying that per received
/// datagram showed up as a fifth of the engine's round-trip time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckView<'a> {
    /// Every sequence number below this one was received.
    pub cumulative: u64,
    /// The largest sequence number received.
    pub largest: u64,
    /// Microseconds between receiving `largest` and sending this ack.
    pub ack_delay_us: u32,
    /// The writer's messages to the reader up to its last fenced one when it wrote the ack.
    pub fence: u64,
    /// The encoded ranges, `ACK_RANGE_LEN` bytes each, validated by the decoder.
    ranges: &'a [u8],
}

impl<'a> AckView<'a> {
    /// An ack without selective ranges.
    pub fn new(cumulative: u64, largest: u64, ack_delay_us: u32, fence: u64) -> Self {
        AckView {
            cumulative,
            largest,
            ack_delay_us,
            fence,
            ranges: &[],
        }
    }

    /// Whether the ack carries selective ranges.
    pub fn has_ranges(&self) -> bool {
        !self.ranges.is_empty()
    }

    /// The selective ranges, ascending.
    pub fn ranges(&self) -> impl Iterator<Item = SackRange> + Clone + 'a {
        self.ranges.chunks_exact(ACK_RANGE_LEN).map(|c| {
            let word = |at: usize| {
                c.get(at..at + 8)
                    .and_then(|b| <[u8; 8]>::try_from(b).ok())
                    .map_or(0, u64::from_le_bytes)
            };
            SackRange {
                start: word(0),
                end: word(8),
            }
        })
    }

    /// The owned form.
    pub fn to_frame(&self) -> AckFrame {
        let mut ack =
            AckFrame::new(self.cumulative, self.largest, self.ack_delay_us).with_fence(self.fence);
        for r in self.ranges() {
            ack.push_range(r);
        }
        ack
    }
}

/// What a BYE frame says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bye {
    /// The sender is leaving: everything it sent was acknowledged, and it waits for the
    /// receiver's [`Bye::Clear`] before it goes.
    Leaving,
    /// The sender has nothing unacknowledged to the receiver, which may leave.
    Clear,
    /// The program on the sender has ended: it makes no more calls, but still answers and
    /// runs the handlers of what is on its way to it. Its [`Bye::Leaving`] follows once
    /// everything it sent was acknowledged. A hint that lets the receiver refuse new sends
    /// early; losing it only delays that until the `Leaving`.
    Ended,
}

impl Bye {
    fn code(self) -> u8 {
        match self {
            Bye::Leaving => 0,
            Bye::Clear => 1,
            Bye::Ended => 2,
        }
    }

    fn from_code(code: u8) -> Result<Bye, WireError> {
        match code {
            0 => Ok(Bye::Leaving),
            1 => Ok(Bye::Clear),
            2 => Ok(Bye::Ended),
            other => Err(WireError::BadBye(other)),
        }
    }
}

/// A decoded frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frame<'a> {
    /// A message fragment.
    Data(DataFrame<'a>),
    /// An acknowledgement.
    Ack(AckView<'a>),
    /// A step of the departure handshake.
    Bye(Bye),
}

/// A datagram whose header and every frame have been validated.
#[derive(Debug, Clone, Copy)]
pub struct Datagram<'a> {
    /// The header.
    pub header: Header,
    frames: &'a [u8],
}

impl<'a> Datagram<'a> {
    /// Validates `bytes` as a datagram of job `job_key`. Nothing in the datagram is trusted
    /// until this returns `Ok`.
    pub fn parse(bytes: &'a [u8], job_key: u64) -> Result<Self, WireError> {
        let mut r = Reader { buf: bytes, pos: 0 };
        let magic = r.array::<4>("magic")?;
        if magic != MAGIC {
            return Err(WireError::BadMagic(magic));
        }
        let version = r.u8("version")?;
        if version != VERSION {
            return Err(WireError::BadVersion(version));
        }
        let got = r.u64("job key")?;
        if got != job_key {
            return Err(WireError::ForeignJob {
                got,
                expected: job_key,
            });
        }
        let src_incarnation = r.u64("source incarnation")?;
        if src_incarnation == 0 {
            return Err(WireError::ZeroIncarnation);
        }
        let dst_incarnation = r.u64("destination incarnation")?;
        let frames = bytes.get(HEADER_LEN..).unwrap_or(&[]);
        let dg = Datagram {
            header: Header {
                job_key: got,
                src_incarnation,
                dst_incarnation,
            },
            frames,
        };
        // Validate every frame now so that a datagram is either acted upon whole or not at all
        // (checked in place: building each frame twice cost as much as the rest of receiving).
        let mut walk = dg.frames();
        while walk.r.remaining() > 0 {
            walk.check_frame()?;
        }
        Ok(dg)
    }

    /// The frames, in order. After a successful [`Datagram::parse`] every item is `Ok`.
    pub fn frames(&self) -> Frames<'a> {
        Frames {
            r: Reader {
                buf: self.frames,
                pos: 0,
            },
            base: HEADER_LEN,
            failed: false,
        }
    }
}

/// Iterator over the frames of a [`Datagram`]; stops after the first error.
#[derive(Debug, Clone)]
pub struct Frames<'a> {
    r: Reader<'a>,
    base: usize,
    failed: bool,
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>, WireError>;

    // Always inlined, for the reason `decode_frame` is: a frame returned through memory is
    // re-read at once with wider loads (a store-forwarding stall per frame).
    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.r.remaining() == 0 {
            return None;
        }
        let item = self.decode_frame();
        if item.is_err() {
            self.failed = true;
        }
        Some(item)
    }
}

impl<'a> Frames<'a> {
    // Always inlined: a decoded frame returned through memory was re-read at once with wider
    // loads, a store-forwarding stall that cost half of handling a datagram.
    #[inline(always)]
    fn decode_frame(&mut self) -> Result<Frame<'a>, WireError> {
        let at = self.base.saturating_add(self.r.pos);
        let kind = self.r.u8("frame type").map_err(|e| self.rebase(e))?;
        match kind {
            FRAME_WHOLE => self.decode_whole().map(Frame::Data),
            FRAME_ACK0 => self.decode_ack0().map(Frame::Ack),
            FRAME_DATA => self.decode_data().map(Frame::Data),
            FRAME_ACK => self.decode_ack().map(Frame::Ack),
            FRAME_BYE => self.decode_bye().map(Frame::Bye),
            _ => Err(WireError::UnknownFrame { kind, at }),
        }
    }

    #[inline]
    fn decode_data(&mut self) -> Result<DataFrame<'a>, WireError> {
        let seq = self.r.u64("data seq").map_err(|e| self.rebase(e))?;
        let total = self.r.u32("data total").map_err(|e| self.rebase(e))?;
        let offset = self.r.u32("data offset").map_err(|e| self.rebase(e))?;
        let len = self.r.u32("data length").map_err(|e| self.rebase(e))?;
        let fits = offset.checked_add(len).is_some_and(|end| end <= total);
        if !fits {
            return Err(WireError::FragmentOutOfBounds { offset, len, total });
        }
        let payload = self
            .r
            .bytes("data payload", len as usize)
            .map_err(|e| self.rebase(e))?;
        Ok(DataFrame {
            seq,
            total,
            offset,
            payload,
        })
    }

    /// A WHOLE frame, as the DATA frame it stands for.
    #[inline(always)]
    fn decode_whole(&mut self) -> Result<DataFrame<'a>, WireError> {
        let seq = self.r.u64("data seq").map_err(|e| self.rebase(e))?;
        let len = self.r.u16("data length").map_err(|e| self.rebase(e))?;
        let payload = self
            .r
            .bytes("data payload", usize::from(len))
            .map_err(|e| self.rebase(e))?;
        Ok(DataFrame {
            seq,
            total: u32::from(len),
            offset: 0,
            payload,
        })
    }

    /// An ACK0 frame, as the ACK frame it stands for.
    #[inline(always)]
    fn decode_ack0(&mut self) -> Result<AckView<'a>, WireError> {
        let cumulative = self.r.u64("ack cumulative").map_err(|e| self.rebase(e))?;
        let delay = self.r.u32("ack delay").map_err(|e| self.rebase(e))?;
        let largest = cumulative.checked_sub(1).ok_or(WireError::ZeroShortAck)?;
        Ok(AckView::new(cumulative, largest, delay, 0))
    }

    /// Checks the next frame exactly as [`Frames::decode_frame`] would, without building it.
    fn check_frame(&mut self) -> Result<(), WireError> {
        let at = self.base.saturating_add(self.r.pos);
        let kind = self.r.u8("frame type").map_err(|e| self.rebase(e))?;
        match kind {
            FRAME_WHOLE => self.decode_whole().map(|_| ()),
            FRAME_ACK0 => self.decode_ack0().map(|_| ()),
            FRAME_DATA => self.decode_data().map(|_| ()),
            FRAME_ACK => {
                let (cumulative, _, _, _, n) = self.ack_header()?;
                self.ack_ranges(cumulative, n, |_| {})
            }
            FRAME_BYE => self.decode_bye().map(|_| ()),
            _ => Err(WireError::UnknownFrame { kind, at }),
        }
    }

    fn decode_bye(&mut self) -> Result<Bye, WireError> {
        let code = self.r.u8("bye kind").map_err(|e| self.rebase(e))?;
        Bye::from_code(code)
    }

    #[inline]
    fn decode_ack(&mut self) -> Result<AckView<'a>, WireError> {
        let (cumulative, largest, ack_delay_us, fence, n) = self.ack_header()?;
        let (buf, first) = (self.r.buf, self.r.pos);
        self.ack_ranges(cumulative, n, |_| {})?;
        Ok(AckView {
            cumulative,
            largest,
            ack_delay_us,
            fence,
            ranges: buf.get(first..self.r.pos).unwrap_or_default(),
        })
    }

    /// An ACK frame's fixed fields: cumulative ack, largest, delay, fence and range
    /// count.
    #[inline]
    fn ack_header(&mut self) -> Result<(u64, u64, u32, u64, u8), WireError> {
        let cumulative = self.r.u64("ack cumulative").map_err(|e| self.rebase(e))?;
        let largest = self.r.u64("ack largest").map_err(|e| self.rebase(e))?;
        let delay = self.r.u32("ack delay").map_err(|e| self.rebase(e))?;
        let fence = self.r.u64("ack fence").map_err(|e| self.rebase(e))?;
        let n = self.r.u8("ack range count").map_err(|e| self.rebase(e))?;
        if usize::from(n) > MAX_SACK_RANGES {
            return Err(WireError::TooManyRanges(n));
        }
        Ok((cumulative, largest, delay, fence, n))
    }

    /// Reads `n` ranges, handing each to `push`. Ranges must be non-empty, strictly above the
    /// cumulative ack and strictly ascending with a gap between them (adjacent ranges would
    /// have been merged by any sender).
    #[inline]
    fn ack_ranges(
        &mut self,
        cumulative: u64,
        n: u8,
        mut push: impl FnMut(SackRange),
    ) -> Result<(), WireError> {
        let mut floor = cumulative;
        for _ in 0..n {
            let start = self.r.u64("ack range start").map_err(|e| self.rebase(e))?;
            let end = self.r.u64("ack range end").map_err(|e| self.rebase(e))?;
            if start <= floor || end <= start {
                return Err(WireError::BadRange { start, end });
            }
            floor = end;
            push(SackRange { start, end });
        }
        Ok(())
    }

    /// Reports truncation against the whole datagram rather than the frame area.
    fn rebase(&self, e: WireError) -> WireError {
        match e {
            WireError::Truncated {
                what, at, needed, ..
            } => WireError::Truncated {
                what,
                at: at.saturating_add(self.base),
                needed,
                len: self.r.buf.len().saturating_add(self.base),
            },
            other => other,
        }
    }
}

/// A bounds-checked little-endian cursor.
#[derive(Debug, Clone)]
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    // Every read is inlined and builds its error only on failure: a datagram's dozen field
    // reads otherwise cost as much as the rest of receiving a small message.
    #[inline]
    fn bytes(&mut self, what: &'static str, n: usize) -> Result<&'a [u8], WireError> {
        match self
            .pos
            .checked_add(n)
            .and_then(|end| self.buf.get(self.pos..end))
        {
            Some(slice) => {
                self.pos += n;
                Ok(slice)
            }
            None => Err(self.truncated(what, n)),
        }
    }

    #[cold]
    fn truncated(&self, what: &'static str, needed: usize) -> WireError {
        WireError::Truncated {
            what,
            at: self.pos,
            needed,
            len: self.buf.len(),
        }
    }

    #[inline]
    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], WireError> {
        let end = self.pos.wrapping_add(N);
        match self.buf.get(self.pos..end).map(<[u8; N]>::try_from) {
            Some(Ok(a)) => {
                self.pos = end;
                Ok(a)
            }
            _ => Err(self.truncated(what, N)),
        }
    }

    #[inline]
    fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(self.truncated(what, 1)),
        }
    }

    #[inline]
    fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        self.array(what).map(u16::from_le_bytes)
    }

    #[inline]
    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        self.array(what).map(u32::from_le_bytes)
    }

    #[inline]
    fn u64(&mut self, what: &'static str) -> Result<u64, WireError> {
        self.array(what).map(u64::from_le_bytes)
    }
}

/// Appends a datagram header to `out`.
pub fn write_header(out: &mut Vec<u8>, header: &Header) {
    // Laid out on the stack and appended once: one capacity check instead of five (this is
    // on every datagram's path).
    let mut b = [0u8; HEADER_LEN];
    b[..4].copy_from_slice(&MAGIC);
    b[4] = VERSION;
    b[5..13].copy_from_slice(&header.job_key.to_le_bytes());
    b[13..21].copy_from_slice(&header.src_incarnation.to_le_bytes());
    b[21..29].copy_from_slice(&header.dst_incarnation.to_le_bytes());
    out.extend_from_slice(&b);
}

/// Appends a DATA frame. The caller guarantees `offset + payload.len() <= total` (the
/// transport fragments messages no larger than `u32::MAX`); the encoder does not re-check.
pub fn write_data(out: &mut Vec<u8>, seq: u64, total: u32, offset: u32, payload: &[u8]) {
    // Payloads are fragments of at most one datagram; the cast cannot truncate for them.
    write_data_header(out, seq, total, offset, payload.len() as u32);
    out.extend_from_slice(payload);
}

/// Appends the header of a DATA frame whose `len` payload bytes the caller sends right after
/// it (a gathering send: the payload goes from the message to the socket without being copied
/// into the datagram buffer). The frame must be the datagram's last. A fragment that is a
/// whole message of up to 64 KiB gets the short form (a WHOLE frame).
#[inline]
pub fn write_data_header(out: &mut Vec<u8>, seq: u64, total: u32, offset: u32, len: u32) {
    if let (0, true, Ok(short)) = (offset, len == total, u16::try_from(len)) {
        let mut b = [0u8; WHOLE_FRAME_OVERHEAD];
        b[0] = FRAME_WHOLE;
        b[1..9].copy_from_slice(&seq.to_le_bytes());
        b[9..11].copy_from_slice(&short.to_le_bytes());
        out.extend_from_slice(&b);
        return;
    }
    // On the stack, appended once (as `write_header`).
    let mut b = [0u8; DATA_FRAME_OVERHEAD];
    b[0] = FRAME_DATA;
    b[1..9].copy_from_slice(&seq.to_le_bytes());
    b[9..13].copy_from_slice(&total.to_le_bytes());
    b[13..17].copy_from_slice(&offset.to_le_bytes());
    b[17..21].copy_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&b);
}

/// Appends a BYE frame.
pub fn write_bye(out: &mut Vec<u8>, bye: Bye) {
    out.push(FRAME_BYE);
    out.push(bye.code());
}

/// Appends an ACK frame.
pub fn write_ack(out: &mut Vec<u8>, ack: &AckFrame) {
    write_ack_from(
        out,
        ack.cumulative,
        ack.largest,
        ack.ack_delay_us,
        ack.fence,
        ack.ranges().iter().copied(),
    );
}

/// Whether an ACK0 frame says the same as an ACK without ranges of these fields: its largest
/// is implied (`cumulative - 1`, so `cumulative` is at least 1) and its fence is 0.
fn ack0_says(cumulative: u64, largest: u64, fence: u64) -> bool {
    fence == 0 && cumulative.checked_sub(1) == Some(largest)
}

/// Appends an ACK frame made of its fields and the first [`MAX_SACK_RANGES`] of `ranges`
/// (lowest first), without building an [`AckFrame`] (which is mostly its range array). An ack
/// without ranges or fence whose largest is `cumulative - 1` (every ack of a peer that lost
/// nothing) gets the short form (an ACK0 frame).
pub fn write_ack_from(
    out: &mut Vec<u8>,
    cumulative: u64,
    largest: u64,
    ack_delay_us: u32,
    fence: u64,
    ranges: impl IntoIterator<Item = SackRange>,
) {
    let mut ranges = ranges.into_iter().peekable();
    if ranges.peek().is_none() && ack0_says(cumulative, largest, fence) {
        let mut b = [0u8; ACK0_FRAME_LEN];
        b[0] = FRAME_ACK0;
        b[1..9].copy_from_slice(&cumulative.to_le_bytes());
        b[9..13].copy_from_slice(&ack_delay_us.to_le_bytes());
        out.extend_from_slice(&b);
        return;
    }
    // The fixed part on the stack, appended once (as `write_header`); the range count, its
    // last byte, is filled in after the ranges.
    let mut b = [0u8; ACK_FRAME_BASE];
    b[0] = FRAME_ACK;
    b[1..9].copy_from_slice(&cumulative.to_le_bytes());
    b[9..17].copy_from_slice(&largest.to_le_bytes());
    b[17..21].copy_from_slice(&ack_delay_us.to_le_bytes());
    b[21..29].copy_from_slice(&fence.to_le_bytes());
    let count_at = out.len() + ACK_FRAME_BASE - 1;
    out.extend_from_slice(&b);
    let mut n: u8 = 0;
    for r in ranges.take(MAX_SACK_RANGES) {
        out.extend_from_slice(&r.start.to_le_bytes());
        out.extend_from_slice(&r.end.to_le_bytes());
        n += 1;
    }
    if let Some(count) = out.get_mut(count_at) {
        *count = n;
    }
}

#[cfg(test)]
mod tests;
