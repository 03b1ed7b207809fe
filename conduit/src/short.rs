//! The network form of an AM Short: an immediate message of the Portals layer
//! (`rgasnet_portals::engine::immediate`), not a put to the AM portal. A Short carries no
//! payload, so it needs no receive block, no event and no send slot; skipping them took the
//! AM Short round trip from 1.39 to 1.15 times the raw UDP round trip on the development
//! machine (see the README's performance section). This module sends
//! them ([`Inner::send_short`], bounded by the engine's limit on unconfirmed messages per
//! peer) and runs the handlers of those a poll's progress round took ([`Inner::run_shorts`]).
//! Shared memory and loopback keep their own paths.
//!
//! A Medium whose arguments and payload fit in an immediate message (512 bytes with 16
//! arguments, 580 with none) travels the same way (flag bit 1, the payload after the
//! arguments): a small Medium then costs what a Short does plus its copy, instead of a put
//! into a receive block with its event (Mediums of 1 to 512 bytes took 1.11 to 1.34 times a
//! Short's round trip; see `benches/perf/am-medium.md`).
//!
//! Layout (at most `MAX_IMMEDIATE` = 584 bytes):
//!
//! ```text
//!  0 handler   1 flags (bit 0: request, bit 1: medium)   2 argc (0..=16)   3 zero
//!  4 args, u32 LE each   then a Medium's payload (the rest of the message)
//! ```

use std::cell::RefCell;

use rgasnet_portals::engine::ImmediateBatch;
use rgasnet_portals::interface::IMMEDIATE_TAKE_MAX;

use rgasnet_portals::proto::MAX_IMMEDIATE;
use rgasnet_portals::ProcessId;

use crate::client::{Attached, Inner};
use crate::error::AmError;
use crate::handlers::Category;
use crate::matchbits::{Direction, MAX_ARGS};
use crate::recv::in_handler;
use crate::stats::Counters;

/// Bytes before the arguments.
const HEAD: usize = 4;
/// Longest encoded Short.
pub(crate) const SHORT_MAX: usize = HEAD + 4 * MAX_ARGS;
const REQUEST: u8 = 1;
const MEDIUM: u8 = 2;
const LONG: u8 = 4;
/// Bytes of a Long's destination offset (after the arguments).
const LONG_OFFSET: usize = 8;

/// What an immediate AM carries besides its handler and arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Body<'a> {
    /// Nothing: a Short.
    Short,
    /// A Medium's payload.
    Medium(&'a [u8]),
    /// A Long's payload and where it goes in the target's segment.
    Long {
        /// Offset in the target's segment.
        offset: u64,
        /// The bytes.
        payload: &'a [u8],
    },
}

impl Body<'_> {
    fn overhead(&self) -> usize {
        match self {
            Body::Long { .. } => LONG_OFFSET,
            _ => 0,
        }
    }
    fn payload(&self) -> &[u8] {
        match self {
            Body::Short => &[],
            Body::Medium(p) | Body::Long { payload: p, .. } => p,
        }
    }
}

/// Whether an AM of `argc` arguments with `body` travels as an immediate message.
pub(crate) fn fits(argc: usize, body: &Body<'_>) -> bool {
    HEAD + 4 * argc + body.overhead() + body.payload().len() <= MAX_IMMEDIATE
}

/// A decoded immediate AM, borrowing its payload from the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Short<'a> {
    pub(crate) handler: u8,
    pub(crate) direction: Direction,
    pub(crate) args: [u32; MAX_ARGS],
    pub(crate) argc: usize,
    pub(crate) body: Body<'a>,
}

/// Why a received Short was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ShortError {
    /// Shorter than its header, or its length disagrees with its argument count.
    #[error("{len} bytes for a Short AM with {argc} arguments")]
    Length {
        /// Bytes received.
        len: usize,
        /// Argument count claimed (or 0 when the header itself is missing).
        argc: usize,
    },
    /// More than 16 arguments.
    #[error("{0} arguments (at most 16)")]
    TooManyArgs(usize),
    /// Unknown flag bits, or a non-zero reserved byte.
    #[error("flags {flags:#04x} and reserved byte {reserved:#04x}")]
    BadHeader {
        /// The flags byte.
        flags: u8,
        /// The reserved byte.
        reserved: u8,
    },
}

/// Encodes an AM with `body` into `out`; returns its length. `args` has at most [`MAX_ARGS`]
/// entries and the body fits ([`fits`]), both checked by the caller (a payload that does not
/// fit is cut).
pub(crate) fn encode(
    out: &mut [u8; MAX_IMMEDIATE],
    handler: u8,
    direction: Direction,
    args: &[u32],
    body: Body<'_>,
) -> usize {
    let argc = args.len().min(MAX_ARGS);
    let mut at = HEAD + 4 * argc;
    out[0] = handler;
    out[1] = if direction == Direction::Request {
        REQUEST
    } else {
        0
    } | match body {
        Body::Short => 0,
        Body::Medium(_) => MEDIUM,
        Body::Long { .. } => LONG,
    };
    // At most MAX_ARGS (16).
    out[2] = argc as u8;
    out[3] = 0;
    for (chunk, a) in out[HEAD..].chunks_exact_mut(4).zip(&args[..argc]) {
        chunk.copy_from_slice(&a.to_le_bytes());
    }
    if let Body::Long { offset, .. } = body {
        out[at..at + LONG_OFFSET].copy_from_slice(&offset.to_le_bytes());
        at += LONG_OFFSET;
    }
    let p = body.payload();
    let p = &p[..p.len().min(MAX_IMMEDIATE - at)];
    out[at..at + p.len()].copy_from_slice(p);
    at + p.len()
}

/// Decodes a received immediate AM.
pub(crate) fn decode(b: &[u8]) -> Result<Short<'_>, ShortError> {
    let [handler, flags, argc, reserved] = match b.get(..HEAD) {
        Some(&[h, f, a, r]) => [h, f, a, r],
        _ => {
            return Err(ShortError::Length {
                len: b.len(),
                argc: 0,
            })
        }
    };
    let kind = flags & !REQUEST;
    if !matches!(kind, 0 | MEDIUM | LONG) || reserved != 0 {
        return Err(ShortError::BadHeader { flags, reserved });
    }
    let argc = usize::from(argc);
    if argc > MAX_ARGS {
        return Err(ShortError::TooManyArgs(argc));
    }
    let at = HEAD + 4 * argc;
    // A Short ends with its arguments; a Medium's payload is whatever follows them, a Long's
    // whatever follows them and its offset.
    let need = at + if kind == LONG { LONG_OFFSET } else { 0 };
    if b.len() < need || (kind == 0 && b.len() != at) {
        return Err(ShortError::Length { len: b.len(), argc });
    }
    let mut args = [0u32; MAX_ARGS];
    for (a, chunk) in args.iter_mut().zip(b[HEAD..].chunks_exact(4)) {
        *a = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
    }
    Ok(Short {
        handler,
        direction: if flags & REQUEST != 0 {
            Direction::Request
        } else {
            Direction::Reply
        },
        args,
        argc,
        body: match kind {
            MEDIUM => Body::Medium(&b[at..]),
            LONG => {
                let mut o = [0u8; LONG_OFFSET];
                o.copy_from_slice(&b[at..need]);
                Body::Long {
                    offset: u64::from_le_bytes(o),
                    payload: &b[need..],
                }
            }
            _ => Body::Short,
        },
    })
}

thread_local! {
    /// The buffer a poll takes received Shorts into (kept, so a poll allocates nothing).
    static SHORTS: RefCell<ImmediateBatch> =
        RefCell::new(ImmediateBatch::with_capacity(IMMEDIATE_TAKE_MAX));
}

/// This thread's buffer for received Shorts, empty. Taken out of its cell for the poll, so a
/// nested poll (which the AM layer never makes, handlers cannot poll) would get a new one.
pub(crate) fn take_short_buffer() -> ImmediateBatch {
    SHORTS
        .try_with(|c| std::mem::take(&mut *c.borrow_mut()))
        .unwrap_or_default()
}

/// Gives the buffer back for the next poll.
pub(crate) fn put_short_buffer(mut buf: ImmediateBatch) {
    buf.clear();
    let _ = SHORTS.try_with(|c| *c.borrow_mut() = buf);
}

impl Inner {
    /// Sends a checked AM Short, or a Medium or Long with `body` (which fits: [`fits`]), over
    /// the network as an immediate message ([`crate::short`]), waiting (polling) while too
    /// many to `dest` are unconfirmed.
    pub(crate) fn send_short(
        &self,
        call: &'static str,
        dest: u32,
        direction: Direction,
        handler: u8,
        args: &[u32],
        body: Body<'_>,
    ) -> Result<(), AmError> {
        const _: () = assert!(SHORT_MAX <= MAX_IMMEDIATE);
        let mut bytes = [0u8; MAX_IMMEDIATE];
        let len = encode(&mut bytes, handler, direction, args, body);
        let mut watch = self.stall_clock();
        loop {
            // A reply from inside a handler cannot wait (it may not poll): it may exceed the
            // bound on unconfirmed messages, which only limits memory, by the replies of one
            // poll's handlers.
            let sent = self
                .am_ni
                .send_immediate(ProcessId::Rank(dest), &bytes[..len], in_handler())
                .map_err(|source| AmError::Portals { call, source })?;
            if sent {
                Counters::bump(&self.stats.sent);
                return Ok(());
            }
            if self.ended_on_network(dest) {
                // It said its program ended while this waited for room: nothing would run
                // the handler, and the room may never come.
                return Err(AmError::PeerLeft { call, rank: dest });
            }
            self.waited(&mut watch, call, dest);
            self.wait_for_send_resources(call)?;
        }
    }

    /// Runs the handlers of the Shorts a progress round took (emptying `shorts`); returns how
    /// many ran. `lost` is the interface's count of immediate messages lost with failed peers:
    /// any is fatal, as an AM put to a failed peer is.
    pub(crate) fn run_shorts(
        &self,
        att: &Attached,
        shorts: &mut ImmediateBatch,
        lost: u64,
    ) -> usize {
        if lost > 0 {
            self.report_lost_shorts();
        }
        let ran = shorts.len();
        for m in shorts.iter() {
            let s = match decode(m.payload) {
                Ok(s) => s,
                Err(e) => self.fatal(&format!("rank {} sent a malformed Short AM: {e}", m.source)),
            };
            let (category, long, carried) = match s.body {
                Body::Short => (Category::Short, None, None),
                Body::Medium(p) => (Category::Medium, None, Some(p)),
                Body::Long { offset, payload } => {
                    // The payload is in the segment before the handler runs, as for a Long
                    // through the AM portal.
                    self.land_long(att, m.source, offset, payload);
                    (
                        Category::Long,
                        Some((offset, payload.len() as u64)),
                        Some(payload),
                    )
                }
            };
            self.dispatch(
                att,
                crate::recv::Tally::Shared(&self.stats.handled),
                m.source,
                s.direction,
                category,
                s.handler,
                &s.args[..s.argc],
                long,
                carried,
            );
        }
        shorts.clear();
        ran
    }

    /// Ends the job: Shorts to a failed peer were never delivered.
    #[cold]
    fn report_lost_shorts(&self) -> ! {
        let lost = self.am_ni.take_lost_immediates().unwrap_or_default();
        let who: Vec<String> = lost
            .iter()
            .map(|l| {
                let rank = self.peers.iter().position(|p| *p == l.peer);
                match rank {
                    Some(r) => format!("rank {r} ({} Short AMs)", l.count),
                    None => format!("{} ({} Short AMs)", l.peer, l.count),
                }
            })
            .collect();
        self.fatal(&format!(
            "{} unreachable: no answer within RGASNET_PEER_TIMEOUT ({} s); it has probably died",
            if who.is_empty() {
                "a peer is".to_string()
            } else {
                format!("{} is", who.join(", "))
            },
            self.config.peer_timeout_secs
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_vector() {
        let mut out = [0u8; MAX_IMMEDIATE];
        let n = encode(
            &mut out,
            200,
            Direction::Request,
            &[1, 0x0403_0201],
            Body::Short,
        );
        assert_eq!(&out[..n], &[200, 1, 2, 0, 1, 0, 0, 0, 1, 2, 3, 4]);
        let n = encode(&mut out, 201, Direction::Reply, &[], Body::Short);
        assert_eq!(&out[..n], &[201, 0, 0, 0]);
        let n = encode(
            &mut out,
            202,
            Direction::Request,
            &[7],
            Body::Medium(&[9, 8, 7]),
        );
        assert_eq!(&out[..n], &[202, 3, 1, 0, 7, 0, 0, 0, 9, 8, 7]);
        let s = decode(&out[..n]).unwrap();
        assert_eq!(s.body, Body::Medium(&[9, 8, 7]));
        // A Medium with no payload is still a Medium.
        let n = encode(&mut out, 203, Direction::Reply, &[], Body::Medium(&[]));
        assert_eq!(&out[..n], &[203, 2, 0, 0]);
        assert_eq!(decode(&out[..n]).unwrap().body, Body::Medium(&[]));
        let long = Body::Long {
            offset: 0x0102,
            payload: &[5, 6],
        };
        let n = encode(&mut out, 204, Direction::Reply, &[3], long);
        assert_eq!(
            &out[..n],
            &[204, 4, 1, 0, 3, 0, 0, 0, 2, 1, 0, 0, 0, 0, 0, 0, 5, 6]
        );
        assert_eq!(decode(&out[..n]).unwrap().body, long);
        let medium = |n: usize| Body::Medium(&[0; 600][..n]);
        assert!(fits(16, &medium(512)) && !fits(16, &medium(517)) && fits(0, &medium(580)));
        assert!(!fits(0, &medium(581)));
        let long = |n: usize| Body::Long {
            offset: 0,
            payload: &[0; 600][..n],
        };
        assert!(fits(16, &long(508)) && !fits(16, &long(509)));
    }

    #[test]
    fn malformed_shorts_are_refused_with_their_cause() {
        assert_eq!(decode(&[1, 1]), Err(ShortError::Length { len: 2, argc: 0 }));
        assert_eq!(
            decode(&[1, 8, 0, 0]),
            Err(ShortError::BadHeader {
                flags: 8,
                reserved: 0
            })
        );
        // A Medium has at least its arguments, a Long its offset too.
        assert_eq!(
            decode(&[1, 2, 1, 0, 5]),
            Err(ShortError::Length { len: 5, argc: 1 })
        );
        assert_eq!(
            decode(&[1, 4, 0, 0, 5, 0, 0, 0, 0, 0, 0]),
            Err(ShortError::Length { len: 11, argc: 0 })
        );
        // Medium and Long at once.
        assert_eq!(
            decode(&[1, 6, 0, 0]),
            Err(ShortError::BadHeader {
                flags: 6,
                reserved: 0
            })
        );
        assert_eq!(
            decode(&[1, 0, 0, 9]),
            Err(ShortError::BadHeader {
                flags: 0,
                reserved: 9
            })
        );
        assert_eq!(decode(&[1, 0, 17, 0]), Err(ShortError::TooManyArgs(17)));
        assert_eq!(
            decode(&[1, 0, 1, 0, 5, 0, 0]),
            Err(ShortError::Length { len: 7, argc: 1 })
        );
        assert_eq!(
            decode(&[1, 0, 0, 0, 5]),
            Err(ShortError::Length { len: 5, argc: 0 })
        );
    }

    proptest! {
        #[test]
        fn round_trip(
            handler: u8,
            request: bool,
            args in proptest::collection::vec(any::<u32>(), 0..=16),
            kind in 0u8..3,
            offset: u64,
            payload in proptest::collection::vec(any::<u8>(), 0..=580),
        ) {
            let direction = if request { Direction::Request } else { Direction::Reply };
            let body = match kind {
                0 => Body::Short,
                1 => Body::Medium(&payload),
                _ => Body::Long { offset, payload: &payload },
            };
            prop_assume!(fits(args.len(), &body));
            let mut out = [0u8; MAX_IMMEDIATE];
            let n = encode(&mut out, handler, direction, &args, body);
            let s = decode(&out[..n]).unwrap();
            prop_assert_eq!(s.handler, handler);
            prop_assert_eq!(s.direction, direction);
            prop_assert_eq!(&s.args[..s.argc], &args[..]);
            prop_assert_eq!(s.body, body);
        }

        #[test]
        fn decoding_any_bytes_never_panics(b in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = decode(&b);
        }
    }
}
