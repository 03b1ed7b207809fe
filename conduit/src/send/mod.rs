//! Sending active messages: checks, the send buffers, and the acknowledgements that free them
//! or ask for a resend after the target's flow control refused a message.
//!
//! Every AM is copied once into a send slot that a memory descriptor covers and leaves as one
//! Portals put with a full acknowledgement; the descriptors are `IN_PLACE`, so a large body is
//! sent from the slot itself, not copied again. The slot stays reserved until the ACK says the
//! target took the message; an ACK with `NI_PT_DISABLED` means the target's receive resources
//! ran out, so the same slot is put again after a short backoff (the target drains, re-posts and
//! re-enables meanwhile). The number of slots bounds the AMs in flight; a sender that finds none
//! free keeps polling, so two ranks flooding each other cannot deadlock.

mod acks;

use std::borrow::Cow;
use std::cell::RefCell;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::Arc;

use hashbrown::HashMap;
use std::time::{Duration, Instant};

use rgasnet_portals::engine::{MdHandle, MdSpec, PutArgs, RemoteAddr};
use rgasnet_portals::memory::BULK_COPY_MIN;
use rgasnet_portals::proto::REQUEST_HEADER_LEN;
use rgasnet_portals::transport::DEFAULT_FRAGMENT_SIZE;
use rgasnet_portals::{AckReq, MdOptions, ProcessId, Region, IN_PLACE_MIN};

use crate::client::{Inner, AM_PT, LONG_DATA_PT, MAX_BODY, MAX_LONG, MAX_MEDIUM};
use crate::error::AmError;
use crate::handlers::Category;
use crate::matchbits::{AmHeader, Direction, MatchBits, MsgType, Protocol, MAX_ARGS};
use crate::payload;
use crate::recv::in_handler;
use crate::scratch::{with_scratch, Scratch};
use crate::short::Body;
use crate::stall::StallClock;
use crate::stats::Counters;

/// Bytes of a small slot (Short, small Medium).
const SMALL_SLOT: usize = 512;
/// The send slot classes, smallest first, as (slots, bytes per slot). An AM takes a slot of
/// the smallest class its body fits, or of a larger one when that class has none free.
///
/// The middle class exists for floods of AMs of a few KiB: they used to take the large slots,
/// whose 64 are a window of 64 AMs in flight per rank, and a flood of 1 KiB AMs with replies
/// ran at the pace that slots came back (3.7 us per AM against 1.7 us with 256 slots,
/// `testam` sections E and I). Bodies from 4 KiB up keep to the large slots: with 8 KiB middle
/// slots, floods of 4–8 KiB AMs slowed by 10–15 % (more memory in flight than the caches
/// hold), with 4 KiB ones they run as before. 256 slots of 4 KiB cost 1 MiB.
const SLOT_CLASSES: [(usize, usize); SLOT_CLASS_COUNT] = [
    (1024, SMALL_SLOT),
    (256, 4096),
    // Up to a maximal Medium or packed Long.
    (64, MAX_BODY.next_multiple_of(64)),
];
/// Number of send slot classes.
pub(crate) const SLOT_CLASS_COUNT: usize = 3;
/// Long operations whose data is in flight at once.
const MAX_LONG_DATA: usize = 64;
/// Bytes of Long data in flight at once (one larger payload may go alone). Their staging
/// regions then come back to the region pool, which keeps up to twice this, instead of each
/// being a fresh mapping whose pages fault in as the payload is copied (a third of a Long
/// flood's sending time when it was bounded by operations only).
const MAX_LONG_DATA_BYTES: usize = 16 << 20;
/// Bytes of Long data per put: one datagram's worth with the put's header.
const LONG_CHUNK: usize = DEFAULT_FRAGMENT_SIZE - REQUEST_HEADER_LEN;

/// Events the send EQ holds at least, whatever `GASNET_AM_EVENT_QUEUE_LENGTH` asks for: an
/// acknowledgement for every AM put that can be in flight at once, which a sender that floods
/// without polling receives all together. Those are the send slots, the pieces of the Long
/// data in flight (up to [`MAX_LONG_DATA_BYTES`] of them plus one larger payload alone, one
/// piece per datagram), and replies of handlers that found no free slot (a handler may not
/// wait), of which a poll runs at most a batch between two drains of this queue. A shorter
/// queue dropped acknowledgements, which is fatal (a refused put would never be sent again):
/// with the queue at 64, a flood from three ranks killed its senders.
pub(crate) const SEND_EQ_MIN: usize = SLOT_CLASSES[0].0
    + SLOT_CLASSES[1].0
    + SLOT_CLASSES[2].0
    + (MAX_LONG_DATA_BYTES + crate::client::MAX_LONG).div_ceil(LONG_CHUNK)
    + MAX_LONG_DATA
    + 4 * crate::recv::POLL_BATCH;

/// The send EQ's length: `configured` (`GASNET_AM_EVENT_QUEUE_LENGTH`), raised to
/// [`SEND_EQ_MIN`] and, over a Portals library, to `inflight_cap`
/// (`RGASNET_PORTALS_MAX_INFLIGHT`, up to 65,536) plus the handlers' replies: there a Long's
/// pieces may be as small as `RGASNET_PORTALS_MAX_INFLIGHT_BYTES`, so the cap on puts in
/// flight, not the slots, bounds the acknowledgements. `inflight_cap` is `usize::MAX` on the
/// native engine (no cap).
pub(crate) fn send_eq_len(configured: usize, inflight_cap: usize) -> usize {
    let capped = match inflight_cap {
        usize::MAX => 0,
        cap => cap.saturating_add(4 * crate::recv::POLL_BATCH),
    };
    configured.max(SEND_EQ_MIN).max(capped)
}

/// Tags `0..SLOT_CLASS_COUNT` name a slot class; this one a message with a buffer of its own.
const TAG_ONE_OFF: u64 = SLOT_CLASS_COUNT as u64;

/// First resend delay after a refusal, doubled per further refusal up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_micros(50);
const MAX_BACKOFF: Duration = Duration::from_millis(5);

struct InFlight {
    args: PutArgs,
    attempts: u32,
    /// What the put uses besides a send slot, given back when it completes.
    own: Own,
    dest: u32,
    /// Over a Portals library, when the put was last started (see
    /// [`Inner::check_unacknowledged`]); `None` on the native engine, whose own retransmission
    /// reports a dead target, so that its sends do not read the clock.
    started: Option<Instant>,
}

impl InFlight {
    /// An AM put to `dest` not yet tried; `started` as [`Inner::ack_clock`] gives it.
    fn of(args: PutArgs, own: Own, dest: u32, started: Option<Instant>) -> InFlight {
        InFlight {
            args,
            attempts: 0,
            own,
            dest,
            started,
        }
    }
}

/// Registered memory of a put's own, besides the send slots.
enum Own {
    /// None (the put's bytes are in a send slot).
    Nothing,
    /// A descriptor to release (a one-off reply buffer).
    Md(MdHandle),
    /// A share of a Long payload's staging region, which its data puts (one per datagram)
    /// hold together; the last one to complete gives it back and ends the operation's count
    /// against [`MAX_LONG_DATA`].
    Staging(Arc<Staging>),
}

/// A Long payload's staging region and its descriptor, kept for reuse.
struct Staging {
    region: Region,
    md: MdHandle,
    /// The payload's length (counted against [`MAX_LONG_DATA_BYTES`]).
    len: usize,
}

/// The send side's bookkeeping.
pub(crate) struct SendState {
    /// The free slots of each class.
    free: [Vec<u32>; SLOT_CLASS_COUNT],
    inflight: HashMap<u64, InFlight>,
    resend: BinaryHeap<Reverse<(Instant, u64)>>,
    next_one_off: u64,
    long_data_inflight: usize,
    /// Bytes of the Long operations counted by `long_data_inflight`.
    long_data_bytes: usize,
    next_long_op: u64,
    /// Over a Portals library, the puts started and neither acknowledged nor refused yet, and
    /// their bytes ([`Inner::inflight_cap`], `RGASNET_PORTALS_MAX_INFLIGHT_BYTES`). A put
    /// past them waits in `resend` as a refused one does ([`Inner::launch`]).
    wire: usize,
    wire_bytes: usize,
}

thread_local! {
    static ENCODE: Scratch = RefCell::new(Vec::with_capacity(MAX_BODY));
}

impl SendState {
    pub(crate) fn new() -> SendState {
        SendState {
            free: SLOT_CLASSES.map(|(count, _)| (0..count as u32).rev().collect()),
            inflight: HashMap::new(),
            resend: BinaryHeap::new(),
            next_one_off: 0,
            long_data_inflight: 0,
            long_data_bytes: 0,
            next_long_op: 1,
            wire: 0,
            wire_bytes: 0,
        }
    }

    /// Queues the put `user_ptr`, recorded in flight, to be (re)started at `at` by
    /// `process_send_events`, and counts it in `att.resends_queued`.
    fn queue_resend(&mut self, att: &crate::client::Attached, at: Instant, user_ptr: u64) {
        self.resend.push(Reverse((at, user_ptr)));
        // Relaxed: written under the send lock; a poll that reads a stale zero skips the send
        // path for one round only (see `poll_internal`).
        att.resends_queued
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether a put of `len` bytes may start within the bounds on what is on the wire: `cap`
    /// puts and `cap_bytes` bytes, though one larger put may go alone.
    fn wire_room(&self, len: u64, cap: usize, cap_bytes: usize) -> bool {
        self.wire < cap
            && (self.wire == 0 || self.wire_bytes.saturating_add(len as usize) <= cap_bytes)
    }

    /// A put of `len` bytes started (over a Portals library).
    fn on_wire(&mut self, len: u64) {
        self.wire += 1;
        self.wire_bytes = self.wire_bytes.saturating_add(len as usize);
    }

    /// A put of `len` bytes was acknowledged, refused or never started.
    fn off_wire(&mut self, len: u64) {
        self.wire = self.wire.saturating_sub(1);
        self.wire_bytes = self.wire_bytes.saturating_sub(len as usize);
    }

    /// A fresh region for each class of send slots, smallest first.
    pub(crate) fn slot_regions() -> [Region; SLOT_CLASS_COUNT] {
        SLOT_CLASSES.map(|(count, size)| crate::client::buffer_region(count * size))
    }

    /// A Long operation of `len` bytes leaves the bounds on Long data in flight.
    fn end_long_data(&mut self, len: usize) {
        self.long_data_inflight = self.long_data_inflight.saturating_sub(1);
        self.long_data_bytes = self.long_data_bytes.saturating_sub(len);
    }

    /// Operations still waiting for their acknowledgement.
    pub(crate) fn in_flight(&self) -> usize {
        self.inflight.len()
    }
}

fn tag(kind: u64, index: u64) -> u64 {
    (kind << 56) | index
}

/// Where an AM body goes and what it is.
#[derive(Clone, Copy)]
struct Put {
    dest: u32,
    match_bits: u64,
    hdr_data: u64,
    /// An AM reply: it answers a message from `dest`.
    answer: bool,
}

/// How [`Inner::start_put`] starts a put.
enum Start<'a> {
    /// `Ni::put` of the slot's bytes.
    Plain,
    /// `Ni::put_answer` of the slot's bytes (an AM reply).
    Answer,
    /// `Ni::put_staged` of these pieces, not yet in the slot.
    Staged([&'a [u8]; 2]),
}

fn backoff(attempts: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1u32 << attempts.min(10))
        .min(MAX_BACKOFF)
}

impl Inner {
    /// Checks an AM call and sends it (`call` names the API call in errors).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_am(
        &self,
        call: &'static str,
        dest: u32,
        direction: Direction,
        category: Category,
        handler: u8,
        args: &[u32],
        payload: &[u8],
        long_offset: Option<u64>,
    ) -> Result<(), AmError> {
        let att = self.attached(call)?;
        if direction == Direction::Request && in_handler() {
            return Err(AmError::InHandler { call });
        }
        if dest >= self.size {
            return Err(AmError::BadRank {
                call,
                rank: dest,
                size: self.size,
            });
        }
        if args.len() > MAX_ARGS {
            return Err(AmError::TooManyArgs {
                call,
                given: args.len(),
            });
        }
        // A match, not `ok_or`: an eagerly built error is dropped (a call) on every success.
        match att.handlers.get(handler) {
            Some(entry) => {
                if entry.category != category {
                    return Err(AmError::WrongCategory {
                        call,
                        handler,
                        name: entry.name.clone(),
                        registered: entry.category,
                        called: category,
                    });
                }
                if let Some(n) = entry.argc {
                    if usize::from(n) != args.len() {
                        return Err(AmError::WrongArgCount {
                            call,
                            handler,
                            name: entry.name.clone(),
                            expected: n,
                            given: args.len(),
                        });
                    }
                }
            }
            // The open handler's owner checks its own indices (see `AttachSpec::open`).
            None if att.handlers.open().is_some() => {}
            None => return Err(AmError::UnregisteredHandler { call, handler }),
        }
        let max = match category {
            Category::Short => 0,
            Category::Medium => MAX_MEDIUM,
            Category::Long => MAX_LONG,
        };
        if payload.len() > max {
            return Err(AmError::PayloadTooLarge {
                call,
                len: payload.len(),
                max,
            });
        }
        if category == Category::Long {
            let offset = long_offset.unwrap_or(0);
            let segment = att.segment_sizes[dest as usize];
            let len = payload.len() as u64;
            if offset.checked_add(len).is_none_or(|end| end > segment) {
                return Err(AmError::OutsideSegment {
                    call,
                    rank: dest,
                    offset,
                    len,
                    segment,
                });
            }
        }
        if let Some(shm) = self.shm_route(att, dest) {
            return self.send_shm(
                call,
                shm,
                dest,
                direction,
                category,
                handler,
                args,
                payload,
                long_offset,
            );
        }
        let protocol = match category {
            Category::Short => Protocol::Short,
            Category::Medium => Protocol::Medium,
            Category::Long
                if payload::prefix_len(Protocol::LongPacked, args.len()) + payload.len()
                    <= MAX_BODY =>
            {
                Protocol::LongPacked
            }
            Category::Long => Protocol::Long,
        };
        if self.ended_on_network(dest) {
            // Its program ended: nothing would run the handler (and its process may be gone,
            // so the message would be retransmitted until the peer timeout, then be fatal).
            return Err(AmError::PeerLeft { call, rank: dest });
        }
        let body = match category {
            Category::Short => Body::Short,
            Category::Medium => Body::Medium(payload),
            Category::Long => Body::Long {
                offset: long_offset.unwrap_or(0),
                payload,
            },
        };
        if self.am_ni.has_immediates() && crate::short::fits(args.len(), &body) {
            return self.send_short(call, dest, direction, handler, args, body);
        }
        let header = AmHeader {
            msg_type: MsgType::ActiveMessage,
            direction,
            protocol,
            argc: args.len() as u8,
            handler,
            payload_len: payload.len() as u64,
        };
        let bits = MatchBits::pack(&header).map_err(|_| AmError::TooManyArgs {
            call,
            given: args.len(),
        })?;
        let mut hdr_data = 0;
        if protocol == Protocol::Long {
            hdr_data = self.send_long_data(call, dest, payload, long_offset.unwrap_or(0))?;
        }
        let body_len = payload::body_len(&header) as usize;
        // A large carried payload goes from the caller's buffer straight into the send slot
        // (a bulk copy) after the encoded prefix, instead of through the encoding buffer.
        let carried = matches!(protocol, Protocol::Medium | Protocol::LongPacked);
        let tail = if carried && payload.len() >= BULK_COPY_MIN {
            payload
        } else {
            &[]
        };
        let inline = if tail.is_empty() { payload } else { &[] };
        let put = Put {
            dest,
            match_bits: bits.raw(),
            hdr_data,
            answer: direction == Direction::Reply,
        };
        self.send_body(call, put, body_len, tail, |buf| {
            payload::encode(buf, protocol, args, long_offset, inline)
        })
    }

    /// Puts the Long payload straight into the target segment; returns the operation number
    /// that pairs it with its header at the target.
    fn send_long_data(
        &self,
        call: &'static str,
        dest: u32,
        payload: &[u8],
        offset: u64,
    ) -> Result<u64, AmError> {
        let att = self.attached(call)?;
        // Checked before anything is reserved, so that an error leaves nothing behind.
        let bits =
            MatchBits::long_data(payload.len() as u64).map_err(|_| AmError::PayloadTooLarge {
                call,
                len: payload.len(),
                max: MAX_LONG,
            })?;
        // Bound Long data in flight; wait (polling) for room.
        let mut watch = self.stall_clock();
        let op = loop {
            {
                let mut s = lock(&att.send);
                // A reply from inside a handler cannot wait (it may not poll): it may exceed
                // the bound, which only limits memory, by the replies in progress.
                let room = s.long_data_inflight < MAX_LONG_DATA
                    && (s.long_data_bytes == 0
                        || s.long_data_bytes + payload.len() <= MAX_LONG_DATA_BYTES);
                if room || in_handler() {
                    s.long_data_inflight += 1;
                    s.long_data_bytes += payload.len();
                    let op = s.next_long_op;
                    s.next_long_op += 1;
                    break op;
                }
            }
            self.waited(&mut watch, call, dest);
            self.wait_for_send_resources(call)?;
        };
        // The payload is copied once, into a staging region that stays until the target took
        // it: a refused put is sent again from there.
        let staged = att.staging.take_or_make(payload.len(), |cap| {
            let region = crate::client::buffer_region(cap);
            let md = self.am_ni.md_bind(MdSpec {
                region: region.clone(),
                offset: 0,
                length: region.len() as u64,
                options: MdOptions::EVENT_SEND_DISABLE | MdOptions::IN_PLACE,
                eq: Some(att.send_eq),
                ct: None,
            })?;
            Ok((region, md))
        });
        let (region, md) = match staged {
            Ok(staged) => staged,
            Err(source) => {
                // Nothing was issued: the operation leaves the bound again.
                lock(&att.send).end_long_data(payload.len());
                return Err(AmError::Portals { call, source });
            }
        };
        // One put per datagram: the target deposits each straight from its receive buffer
        // (a message of several datagrams is first reassembled, another copy of the whole
        // payload), and each piece is written into the staging region only after it left.
        // The target counts the bytes of operation `op` until the header's length is there.
        // The last piece takes the original share, so that no share outlives the pieces here.
        // The pieces' puts take their bytes from here (a queued piece is written in first).
        let staging_region = region.clone();
        let mut shared = Some(Arc::new(Staging {
            region,
            md,
            len: payload.len(),
        }));
        // Over a Portals library no piece is larger than the bytes it may have in flight.
        let chunk = if self.over_library() {
            LONG_CHUNK.min(self.config.portals_max_inflight_bytes.max(1))
        } else {
            LONG_CHUNK
        };
        let pieces = payload.len().div_ceil(chunk).max(1) as u64;
        let first_tag = {
            let mut s = lock(&att.send);
            s.next_one_off += pieces;
            s.next_one_off - pieces + 1
        };
        for (i, piece) in payload.chunks(chunk).enumerate() {
            if let Err(e) = self.wait_inflight_room(call, att, dest, piece.len(), &mut watch) {
                // As for a failed start below.
                if let Some(share) = shared.take() {
                    self.give_back(att, Own::Staging(share));
                }
                return Err(e);
            }
            let at = (i * chunk) as u64;
            let user_ptr = tag(TAG_ONE_OFF, first_tag + i as u64);
            let args = PutArgs {
                md,
                local_offset: at,
                length: piece.len() as u64,
                ack_req: AckReq::Confirmed,
                remote: RemoteAddr {
                    target: ProcessId::Rank(dest),
                    pt_index: LONG_DATA_PT,
                    // Cannot fail: a piece is no longer than the whole, checked above.
                    match_bits: MatchBits::long_data(piece.len() as u64)
                        .unwrap_or(bits)
                        .raw(),
                    remote_offset: offset + at,
                },
                user_ptr,
                hdr_data: op,
            };
            let share = if i as u64 + 1 == pieces {
                shared.take()
            } else {
                shared.clone()
            };
            let Some(share) = share else { break };
            lock(&att.send).inflight.insert(
                user_ptr,
                InFlight::of(args, Own::Staging(share), dest, self.ack_clock()),
            );
            let staged = Start::Staged([piece, &[]]);
            if let Err(e) = self.launch(call, att, &args, staged, &staging_region) {
                // The pieces already issued complete on their own, and the last of them (or
                // this) gives the staging region back. The header is never sent, so no
                // handler runs.
                if let Some(share) = shared.take() {
                    self.give_back(att, Own::Staging(share));
                }
                return Err(e);
            }
        }
        if let Some(share) = shared.take() {
            // No piece was issued (an empty payload): nothing holds the region.
            self.give_back(att, Own::Staging(share));
        }
        Ok(op)
    }

    /// Waits (polling) while a put of `len` bytes would pass the bounds on what is in flight
    /// over a Portals library ([`Inner::may_send`]); at once on the native engine, and inside
    /// a handler, which cannot wait.
    fn wait_inflight_room(
        &self,
        call: &'static str,
        att: &crate::client::Attached,
        dest: u32,
        len: usize,
        watch: &mut StallClock,
    ) -> Result<(), AmError> {
        if !self.over_library() || in_handler() {
            return Ok(());
        }
        while !self.may_send(&lock(&att.send), len) {
            self.waited(watch, call, dest);
            self.wait_for_send_resources(call)?;
        }
        Ok(())
    }

    /// Over a Portals library, whether a put of `len` bytes may start now within
    /// `RGASNET_PORTALS_MAX_INFLIGHT` and `RGASNET_PORTALS_MAX_INFLIGHT_BYTES` on the wire.
    fn wire_room(&self, s: &SendState, len: u64) -> bool {
        s.wire_room(
            len,
            self.inflight_cap,
            self.config.portals_max_inflight_bytes,
        )
    }

    /// Over a Portals library, whether a new put of `len` bytes may take its place in flight
    /// now: fewer than `RGASNET_PORTALS_MAX_INFLIGHT` recorded (refused and queued ones
    /// included), none waiting to be (re)started ahead of it, and its bytes within
    /// `RGASNET_PORTALS_MAX_INFLIGHT_BYTES` (or nothing on the wire).
    fn may_send(&self, s: &SendState, len: usize) -> bool {
        s.inflight.len() < self.inflight_cap
            && s.resend.is_empty()
            && s.wire_room(
                len as u64,
                usize::MAX,
                self.config.portals_max_inflight_bytes,
            )
    }

    /// Whether `dest`, reached over the network, said its program ended (the transport's
    /// departure handshake; what it sent may still be on its way). Costs one relaxed load
    /// while no peer has said so.
    #[inline]
    pub(crate) fn ended_on_network(&self, dest: u32) -> bool {
        let iface = &self.am_ni;
        iface.departures() > 0
            && self
                .peers
                .get(dest as usize)
                .is_some_and(|&p| iface.peer_ended(p))
    }

    /// Reserves a send slot for a body of `body_len` bytes (polling while none is free), has
    /// `encode` write the body up to `tail`, copies both into the slot and puts it to
    /// `dest`'s AM portal.
    fn send_body(
        &self,
        call: &'static str,
        put: Put,
        body_len: usize,
        tail: &[u8],
        encode: impl FnOnce(&mut Vec<u8>),
    ) -> Result<(), AmError> {
        let Put {
            dest,
            match_bits,
            hdr_data,
            answer,
        } = put;
        let att = self.attached(call)?;
        let small = body_len <= SMALL_SLOT;
        // The smallest slot class the body fits (the largest fits every body).
        let fit = SLOT_CLASSES
            .iter()
            .position(|&(_, size)| body_len <= size)
            .unwrap_or(SLOT_CLASS_COUNT - 1);
        let mut watch = self.stall_clock();
        let remote = RemoteAddr {
            target: ProcessId::Rank(dest),
            pt_index: AM_PT,
            match_bits,
            remote_offset: 0,
        };
        let args_at = |md, local_offset, user_ptr| PutArgs {
            md,
            local_offset,
            length: body_len as u64,
            // The target answers only a refusal (the flow control's resend needs it); a
            // success is confirmed by the transport, which spares the target an ACK message
            // and usually a datagram per AM.
            ack_req: AckReq::Confirmed,
            remote,
            user_ptr,
            hdr_data,
        };
        let (region, args) = loop {
            {
                let mut s = lock(&att.send);
                // A reply from a handler does not wait for the bounds (it cannot; it is queued
                // if need be, see `launch`).
                let capped = self.over_library() && !in_handler() && !self.may_send(&s, body_len);
                let slot = (fit..SLOT_CLASS_COUNT)
                    .filter(|_| !capped)
                    .find_map(|class| s.free.get_mut(class)?.pop().map(|i| (class, i)));
                if let Some((class, i)) = slot {
                    let (region, md) = &att.send_slots[class];
                    let size = SLOT_CLASSES[class].1;
                    let args =
                        args_at(*md, i as u64 * size as u64, tag(class as u64, u64::from(i)));
                    // Recorded under the same lock that handed out the slot.
                    s.inflight.insert(
                        args.user_ptr,
                        InFlight::of(args, Own::Nothing, dest, self.ack_clock()),
                    );
                    break (Cow::Borrowed(region), args);
                }
                if in_handler() {
                    // A reply from inside a handler cannot wait (it may not poll): give it a
                    // buffer of its own.
                    s.next_one_off += 1;
                    let user_ptr = tag(TAG_ONE_OFF, s.next_one_off);
                    drop(s);
                    let region = Region::new(body_len);
                    let md = self
                        .am_ni
                        .md_bind(MdSpec {
                            region: region.clone(),
                            offset: 0,
                            length: body_len as u64,
                            options: MdOptions::EVENT_SEND_DISABLE | MdOptions::IN_PLACE,
                            eq: Some(att.send_eq),
                            ct: None,
                        })
                        .map_err(|source| AmError::Portals { call, source })?;
                    let args = args_at(md, 0, user_ptr);
                    lock(&att.send).inflight.insert(
                        user_ptr,
                        InFlight::of(args, Own::Md(md), dest, self.ack_clock()),
                    );
                    break (Cow::Owned(region), args);
                }
            }
            self.waited(&mut watch, call, dest);
            self.wait_for_send_resources(call)?;
        };
        let offset = args.local_offset;
        // The slot is ours until its ACK. Encoding happens only now, after any polling above,
        // because a handler run by that polling may itself send (and use the buffer).
        with_scratch(&ENCODE, |buf| {
            let mut buf = buf.borrow_mut();
            encode(&mut buf);
            debug_assert_eq!(buf.len() + tail.len(), body_len);
            if body_len as u64 >= IN_PLACE_MIN {
                // Written into the slot by the put itself, after its datagram left: the
                // target need not wait for a copy of a large payload.
                return self.launch(call, att, &args, Start::Staged([&buf, tail]), &region);
            }
            if region.write(offset as usize, &buf).is_err()
                || region.write(offset as usize + buf.len(), tail).is_err()
            {
                self.fatal("send slot outside its buffer");
            }
            // A reply of a small slot leaves ahead of the ACK of its request (see
            // `Ni::put_answer`); a large one is dominated by its copy, and leaves as before.
            let how = if answer && small {
                Start::Answer
            } else {
                Start::Plain
            };
            self.launch(call, att, &args, how, &region)
        })
    }

    /// Starts the put of `args`, already recorded in flight, as [`Inner::start_put`] does; over
    /// a Portals library only within the bounds on what is on the wire. Past them (a reply
    /// from a handler, which did not wait, or a sender that lost a race for the room), its
    /// bytes are written into `region`, where its descriptor takes them from, and it joins
    /// the puts waiting to be sent again after a refusal, due at once: `process_send_events`
    /// starts it when acknowledgements make room.
    fn launch(
        &self,
        call: &'static str,
        att: &crate::client::Attached,
        args: &PutArgs,
        how: Start<'_>,
        region: &Region,
    ) -> Result<(), AmError> {
        if !self.over_library() {
            return self.start_put(call, att, args, how);
        }
        {
            let mut s = lock(&att.send);
            if !s.resend.is_empty() || !self.wire_room(&s, args.length) {
                if let Start::Staged(parts) = how {
                    let at = args.local_offset as usize;
                    if region.write(at, parts[0]).is_err()
                        || region.write(at + parts[0].len(), parts[1]).is_err()
                    {
                        self.fatal("send slot outside its buffer");
                    }
                }
                if let Some(fl) = s.inflight.get_mut(&args.user_ptr) {
                    // Not timed until it starts (see `check_unacknowledged`).
                    fl.started = None;
                }
                s.queue_resend(att, Instant::now(), args.user_ptr);
                return Ok(());
            }
            s.on_wire(args.length);
        }
        let started = self.start_put(call, att, args, how);
        if started.is_err() {
            lock(&att.send).off_wire(args.length);
        }
        started
    }

    /// Starts the put of `args`, already recorded in flight, as `how` says ([`Start`]). A
    /// refused put is forgotten again and its memory given back.
    fn start_put(
        &self,
        call: &'static str,
        att: &crate::client::Attached,
        args: &PutArgs,
        how: Start<'_>,
    ) -> Result<(), AmError> {
        let put = match how {
            Start::Staged(parts) => self.am_ni.put_staged(args, parts),
            Start::Answer => self.am_ni.put_answer(args),
            Start::Plain => self.am_ni.put(args),
        };
        if let Err(source) = put {
            self.forget_unstarted(att, args.user_ptr);
            return Err(AmError::Portals { call, source });
        }
        Counters::bump(&self.stats.sent);
        Ok(())
    }

    /// Forgets the put `user_ptr`, which the interface refused before it started: its record
    /// in flight, its send slot, and what it held besides (nothing uses its memory).
    fn forget_unstarted(&self, att: &crate::client::Attached, user_ptr: u64) {
        let mut s = lock(&att.send);
        let fl = s.inflight.remove(&user_ptr);
        release_slot(&mut s, user_ptr);
        drop(s);
        if let Some(fl) = fl {
            self.give_back(att, fl.own);
        }
    }

    /// Gives back what a completed (or never started) put used besides its send slot: a
    /// staging region goes back to the pool, a descriptor the pool does not keep is released.
    fn give_back(&self, att: &crate::client::Attached, own: Own) {
        let md = match own {
            Own::Nothing => return,
            Own::Md(md) => md,
            Own::Staging(shared) => {
                // Exactly one of the pieces' shares gets the staging region back.
                let Some(Staging { region, md, len }) = Arc::into_inner(shared) else {
                    return;
                };
                lock(&att.send).end_long_data(len);
                match att.staging.give(region, md) {
                    None => return,
                    Some((_, md)) => md,
                }
            }
        };
        let _ = self.am_ni.md_release(md);
    }

    /// Waits for a send slot to free up: processes acknowledgements and resends, and polls
    /// incoming AMs so that a peer waiting on us can proceed.
    pub(crate) fn wait_for_send_resources(&self, call: &'static str) -> Result<(), AmError> {
        if in_handler() {
            return Err(AmError::InHandler { call });
        }
        self.poll_internal(call)?;
        Ok(())
    }
}

fn release_slot(s: &mut SendState, user_ptr: u64) {
    let index = (user_ptr & ((1 << 56) - 1)) as u32;
    if let Some(free) = s.free.get_mut((user_ptr >> 56) as usize) {
        free.push(index);
    }
}

pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A handler that panicked while the lock was held leaves consistent bookkeeping behind
    // (every update is a single step), so keep going rather than poison the client.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::{send_eq_len, SEND_EQ_MIN};

    #[test]
    fn the_send_eq_holds_what_may_be_in_flight() {
        // Native engine: the configured length, never below the slots' and pieces' bound.
        assert_eq!(send_eq_len(8192, usize::MAX), 8192);
        assert_eq!(send_eq_len(64, usize::MAX), SEND_EQ_MIN);
        // Over a library: a cap above both wins, with room for the handlers' replies.
        assert_eq!(send_eq_len(64, 8), SEND_EQ_MIN);
        assert_eq!(send_eq_len(64, 65_536), 65_536 + 256);
    }
}
