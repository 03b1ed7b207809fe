//! Receiving active messages: `poll()` takes events from the AM event queue, copies each
//! message out of its receive block, runs its handler, re-posts receive blocks that filled up,
//! pairs Long headers with their data, and recovers from flow control.
//!
//! Flow control (PORTALS4.md): when every receive block is full, or the event queue is about
//! to overflow, the engine disables the AM portal and refuses what arrives with
//! `NI_PT_DISABLED` (the senders resend). The `PT_DISABLED` event tells us; we keep handling
//! the events already queued, re-post the blocks that unlinked, and re-enable the portal once
//! the queue is drained.

use hashbrown::HashMap;
use std::cell::{Cell, RefCell};
use std::sync::atomic::Ordering;
use std::time::Instant;

use rgasnet_portals::engine::{EqGet, MeHandle};
use rgasnet_portals::{Event, EventKind, ListKind, NiFail, ProcessId, Region};

use crate::client::{am_block_spec, Attached, Client, Inner, AM_PT, LONG_DATA_PT};
use crate::error::AmError;
use crate::handlers::Category;
use crate::matchbits::{Direction, MatchBits, MsgType, Protocol};
use crate::payload;
use crate::scratch::{with_scratch, Scratch};
use crate::send::lock;
use crate::short::{put_short_buffer, take_short_buffer};
use crate::stats::Counters;
use crate::token::Token;

/// Events handled per `poll()` call at most.
pub(crate) const POLL_BATCH: usize = 64;
/// Rounds of network receive + drain per `poll()` call at most.
const NET_ROUNDS: usize = 64;
/// A drained receive block that messages have filled this far is rewound to its start
/// ([`rgasnet_portals::interface::Ni::me_rewind`]), so that traffic keeps landing in the same
/// cached memory: a 65,000-byte Medium ping-pong otherwise cycles through a whole 1 MiB block
/// (about 0.5 µs more per deposit). Rarely enough that the rewind's interface lock does not
/// weigh on small messages.
const REWIND_MIN: u64 = 32 << 10;
/// Medium payloads of at least this many bytes reach their handler in place in the receive
/// block ([`Region::with_bytes`]) instead of being copied out first: a copy of a 65,000-byte
/// payload is a microsecond on each side of a round trip.
const LEND_MIN: u64 = rgasnet_portals::memory::BULK_COPY_MIN as u64;
/// How often a rank over a Portals library enables its AM portals without having been told
/// they were disabled ([`Inner::enable_unannounced`]): a refused sender resends within 5 ms, so
/// a portal silently left disabled costs its senders at most this long.
const UNANNOUNCED_ENABLE_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

thread_local! {
    /// Handlers running on this thread (nested only through self-sends, which are queued, so
    /// in practice 0 or 1).
    static HANDLER_DEPTH: Cell<u32> = const { Cell::new(0) };
    static BODY: Scratch = const { RefCell::new(Vec::new()) };
    /// A Long payload read back from the segment for its handler.
    static LONG: Scratch = const { RefCell::new(Vec::new()) };
}

/// Whether the calling thread is inside an AM handler. Layers built on the client use it to
/// refuse blocking calls from handlers.
#[inline]
pub fn in_handler() -> bool {
    HANDLER_DEPTH.with(|d| d.get() > 0)
}

struct HandlerScope;
impl HandlerScope {
    fn enter() -> HandlerScope {
        HANDLER_DEPTH.with(|d| d.set(d.get() + 1));
        HandlerScope
    }
}
impl Drop for HandlerScope {
    fn drop(&mut self) {
        HANDLER_DEPTH.with(|d| d.set(d.get().saturating_sub(1)));
    }
}

/// The counter a handler's run is counted in, and how it is bumped.
#[derive(Clone, Copy)]
pub(crate) enum Tally<'a> {
    /// A counter that any thread may bump ([`Counters::bump`]).
    Shared(&'a std::sync::atomic::AtomicU64),
    /// A counter bumped only under the shared-memory receiver's lock
    /// ([`Counters::bump_held`]).
    Held(&'a std::sync::atomic::AtomicU64),
}

/// Bumps its counter when dropped (after a handler ran, even if it unwound).
struct CountOnDrop<'a>(Tally<'a>);
impl Drop for CountOnDrop<'_> {
    fn drop(&mut self) {
        match self.0 {
            Tally::Shared(c) => Counters::bump(c),
            Tally::Held(c) => Counters::bump_held(c),
        }
    }
}

struct Block {
    region: Region,
    me: Option<MeHandle>,
    /// Messages of this block that handlers are reading in place. The block is not posted
    /// again (where new deposits would overwrite them) until they are all back.
    lent: u32,
    /// How far into the block the messages taken since it was posted (or rewound) reach.
    used: u64,
}

/// A lent message, given back to its block by [`GiveBack::give`] or, if its handler unwinds,
/// when dropped: a panicking handler does not keep its block from ever being posted again.
struct GiveBack<'a> {
    inner: &'a Inner,
    att: &'a Attached,
    block: usize,
    given: bool,
}

impl<'a> GiveBack<'a> {
    /// Gives the message back; returns the receive state, still locked, for what follows.
    fn give(mut self) -> std::sync::MutexGuard<'a, RecvState> {
        self.given = true;
        let mut rs = lock(&self.att.recv);
        rs.give_back(self.block);
        rs
    }
}

impl Drop for GiveBack<'_> {
    fn drop(&mut self) {
        if !self.given {
            let mut rs = lock(&self.att.recv);
            rs.give_back(self.block);
            // Posted again now if it unlinked meanwhile, as `give`'s caller does. Should that
            // fail, the flow-control recovery posts it when the other blocks fill.
            if let Err(e) = self.inner.repost(&mut rs, self.att, self.block) {
                tracing::debug!(error = %e, "re-posting a block after a handler unwound");
            }
        }
    }
}

/// A Medium payload left in its receive block for its handler.
struct Lent {
    block: usize,
    region: Region,
    at: usize,
    len: usize,
}

/// A Long AM whose header and data have not all arrived: the data comes as one or more puts
/// (the sender cuts it into one-datagram pieces), the header as another.
#[derive(Default)]
struct LongParts {
    /// Data bytes arrived so far.
    got: u64,
    header: Option<Pending>,
}

/// A handler call waiting to run.
struct Pending {
    source: u32,
    direction: Direction,
    protocol: Protocol,
    handler: u8,
    args: [u32; 16],
    argc: usize,
    long: Option<(u64, u64)>,
    /// A payload that stays in its receive block (large Mediums).
    lent: Option<Lent>,
}

impl Pending {
    /// The handler call a decoded AM asks for (a Long's payload place and a lent payload are
    /// filled in by the caller).
    fn of(source: u32, header: &crate::matchbits::AmHeader, body: &payload::Body<'_>) -> Self {
        Pending {
            source,
            direction: header.direction,
            protocol: header.protocol,
            handler: header.handler,
            args: body.args,
            argc: body.argc,
            long: None,
            lent: None,
        }
    }
}

/// The receive side's bookkeeping.
pub(crate) struct RecvState {
    blocks: Vec<Block>,
    long_halves: HashMap<(u32, u64), LongParts>,
    disabled: [bool; 2],
    /// Over a Portals library, when the AM portals were last enabled without a
    /// `PtDisabled` event (see [`Inner::enable_unannounced`]).
    enabled_at: Option<Instant>,
}

impl RecvState {
    pub(crate) fn new(blocks: usize) -> RecvState {
        RecvState {
            blocks: Vec::with_capacity(blocks),
            long_halves: HashMap::new(),
            disabled: [false; 2],
            enabled_at: None,
        }
    }

    /// A message lent from block `i` is back.
    fn give_back(&mut self, i: usize) {
        if let Some(b) = self.blocks.get_mut(i) {
            b.lent = b.lent.saturating_sub(1);
        }
    }

    pub(crate) fn add_block(&mut self, region: Region, me: MeHandle) {
        self.blocks.push(Block {
            region,
            me: Some(me),
            lent: 0,
            used: 0,
        });
    }
}

/// What one event asks of the poller once the receive lock is released.
enum Work {
    Nothing,
    Run(Pending),
}

impl Client {
    /// Handles up to a bounded batch of incoming active messages and acknowledgements; returns
    /// how many handlers ran. Call it often: progress happens only in calls into rgasnet. A
    /// loop that spins on it needs no spin-wait hint of its own: a poll that found nothing
    /// ends with one when every peer is on shared memory, and is a system call otherwise.
    pub fn poll(&self) -> Result<usize, AmError> {
        if in_handler() {
            return Err(AmError::InHandler { call: "poll" });
        }
        self.inner.poll_internal("poll")
    }
}

fn source_rank(ev: &Event) -> u32 {
    match ev.initiator {
        ProcessId::Rank(r) => r,
        ProcessId::Phys(_) => u32::MAX,
    }
}

impl Inner {
    pub(crate) fn poll_internal(&self, call: &'static str) -> Result<usize, AmError> {
        let att = self.attached(call)?;
        self.flush_deferred_replies(att);
        let ran = self.poll_shm(att);
        if !self.net_peers {
            if ran == 0 {
                // An idle poll on shared memory only is a few loads of the queue heads, and
                // the caller is usually spinning on it: a spin-wait hint (as in GASNet's
                // GASNET_BLOCKUNTIL) keeps the spin from filling the pipeline with loads of
                // those lines, each of which the core must throw away when a node peer
                // writes one. Measured: the AM Short round trip on shared memory 0.42 ->
                // 0.39 us. Network polls are system calls and need none.
                std::hint::spin_loop();
            }
            return Ok(ran);
        }
        // One round of network progress, then drain what it produced. The acknowledgements it
        // makes due are held back until the handlers have run, so that a reply and the
        // acknowledgement of its request leave in one datagram.
        // A round stops receiving as soon as a message made an event, so a handler (and the
        // reply it sends) runs before the next receive system call, which is usually empty.
        let iface = &self.am_ni;
        let mut ran = ran;
        let mut result = Ok(());
        let mut flush = false;
        let mut shorts = take_short_buffer();
        for _ in 0..NET_ROUNDS {
            let round = match iface.progress_holding(Some(&mut shorts)) {
                Ok(r) => r,
                Err(source) => {
                    result = Err(AmError::Portals { call, source });
                    flush = true;
                    break;
                }
            };
            // Network Shorts come as immediate messages, taken by the round itself.
            let shorts_ran = self.run_shorts(att, &mut shorts, round.immediates_lost);
            ran += shorts_ran;
            // Nothing for the queues (the common case while a rank waits for a reply, and
            // after a Short's handler): no event was posted since the queues were last
            // emptied, nothing is held back for transmission and no refused AM waits for its
            // resend, so the queue looks and the flush (an interface lock each) would find
            // nothing. Spinning rounds stay short, and a reply is noticed sooner.
            // Relaxed: the count is read and written under the interface lock's ordering of
            // the events themselves; a stale value only causes one needless look.
            let queues_idle = !round.pending_transmit
                && round.events_posted == att.drained_events.load(Ordering::Relaxed)
                && att.resends_queued.load(Ordering::Relaxed) == 0;
            if queues_idle && (!round.received || shorts_ran > 0) {
                break;
            }
            // Only what the round held back needs the flush (another interface lock): every
            // call the handlers and the draining make (replies, re-posts) transmits itself.
            flush |= round.pending_transmit;
            let (handled, emptied) = match self.drain_network(call, att) {
                Ok(n) => n,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            };
            if emptied {
                // Every event counted so far has been taken (events posted meanwhile raise
                // the count past this value, so they are not skipped). A plain load and
                // store, not `fetch_max`: a locked instruction costs as much as the rest of
                // an idle poll's user-space part. Racing threads may leave a smaller count
                // than the largest stored, which only makes a later idle poll look at the
                // queues once more; a count is stored only by a poll that emptied them after
                // it was read, so it is never ahead of what was taken.
                let drained = &att.drained_events;
                if round.events_posted > drained.load(Ordering::Relaxed) {
                    drained.store(round.events_posted, Ordering::Relaxed);
                }
            }
            ran += handled;
            // Once handlers ran, return: the caller is usually waiting for exactly that (a
            // reply), and another round would cost it a receive system call first.
            if !round.received || handled > 0 || shorts_ran > 0 || ran >= POLL_BATCH {
                break;
            }
        }
        put_short_buffer(shorts);
        if flush {
            iface.flush();
        }
        result.map(|()| ran)
    }

    /// Runs the handlers of what arrived and takes the send events. Returns how many handlers
    /// ran and whether the AM queue was emptied.
    fn drain_network(&self, call: &'static str, att: &Attached) -> Result<(usize, bool), AmError> {
        let mut ran = 0;
        let mut emptied = false;
        for _ in 0..POLL_BATCH {
            let (work, more) = self.next_work(call, att)?;
            if let Work::Run(p) = work {
                let result = self.run(att, p, call);
                ran += 1;
                result?;
            }
            if !more {
                emptied = true;
                break;
            }
        }
        // Acknowledgements only free send buffers: after the handlers, which someone waits for.
        // When handlers ran, the caller usually waits for exactly them (a reply) and sends
        // next, so the acknowledgements wait for the next call instead: a caller polling for
        // a reply takes them while the reply is on its way. Never twice in a row, so that a
        // poller whose every call runs handlers (a flood) still frees its send slots.
        // Relaxed: a per-client hint; which call takes the acknowledgements does not matter.
        // A load and a store, not a swap: a locked instruction here sits between a
        // requester's reply handler and its next request, and racing threads at worst defer
        // once more or once less.
        let deferred = att.send_events_deferred.load(Ordering::Relaxed);
        if ran > 0 && !deferred {
            att.send_events_deferred.store(true, Ordering::Relaxed);
            // Not emptied as far as the idle check goes: the deferred events keep the next
            // poll from skipping the queues.
            return Ok((ran, false));
        }
        if deferred {
            att.send_events_deferred.store(false, Ordering::Relaxed);
        }
        self.process_send_events(call)?;
        Ok((ran, emptied))
    }

    /// Takes one event and turns it into work. Returns whether the queue may hold more.
    fn next_work(&self, call: &'static str, att: &Attached) -> Result<(Work, bool), AmError> {
        let portals = |source| AmError::Portals { call, source };
        let mut rs = lock(&att.recv);
        let (got, more) = self.am_ni.eq_take_more(att.am_eq).map_err(portals)?;
        let ev = match got {
            EqGet::Event(ev) => ev,
            EqGet::Dropped(_) => self.fatal(
                "incoming active messages were lost (AM event queue overflow); raise GASNET_AM_EVENT_QUEUE_LENGTH",
            ),
            EqGet::Empty => {
                self.recover_flow_control(&mut rs, att).map_err(portals)?;
                return Ok((Work::Nothing, false));
            }
        };
        if ev.ni_fail != NiFail::Ok && ev.kind != EventKind::PtDisabled {
            // Target-side failures are reported to the initiator, which acts on them.
            if !more {
                self.recover_flow_control(&mut rs, att).map_err(portals)?;
            }
            return Ok((Work::Nothing, more));
        }
        let work = match (ev.kind, ev.pt_index) {
            (EventKind::Put, AM_PT) => {
                if let Some(b) = rs.blocks.get_mut(ev.user_ptr as usize) {
                    b.used = b.used.max(ev.start.saturating_add(ev.mlength));
                }
                let work = self.take_header(&mut rs, att, &ev);
                if !more {
                    self.rewind_if_drained(&mut rs, att, ev.user_ptr as usize)
                        .map_err(portals)?;
                }
                work
            }
            (EventKind::Put, LONG_DATA_PT) => {
                let key = (source_rank(&ev), ev.hdr_data);
                rs.long_halves.entry(key).or_default().got += ev.mlength;
                self.long_complete(&mut rs, key)
            }
            (EventKind::AutoUnlink, AM_PT) => {
                let i = ev.user_ptr as usize;
                if let Some(b) = rs.blocks.get_mut(i) {
                    b.me = None;
                }
                // Every message of the block was copied out when its event was taken (events
                // come in order, the unlink last), or is lent to a handler, in which case the
                // last handler to give its message back posts the block.
                self.repost(&mut rs, att, i).map_err(portals)?;
                Work::Nothing
            }
            (EventKind::PtDisabled, pt) => {
                if pt == AM_PT {
                    rs.disabled[0] = true;
                } else if pt == LONG_DATA_PT {
                    rs.disabled[1] = true;
                }
                Work::Nothing
            }
            _ => Work::Nothing,
        };
        if !more {
            // The queue is drained (as when it is found empty): time to recover.
            self.recover_flow_control(&mut rs, att).map_err(portals)?;
        }
        Ok((work, more))
    }

    fn repost(
        &self,
        rs: &mut RecvState,
        _att: &Attached,
        i: usize,
    ) -> Result<(), rgasnet_portals::PtlError> {
        let Some(b) = rs.blocks.get_mut(i) else {
            return Ok(());
        };
        if b.me.is_none() && b.lent == 0 {
            // At the head of the list: the block just emptied is still in cache, and taking
            // the next messages there keeps the receive path inside one block's worth of
            // memory instead of cycling through all of them (a 65,000-byte Medium ping-pong
            // would otherwise stream through every block, 16 MiB by default).
            let me = self.am_ni.me_prepend(
                AM_PT,
                am_block_spec(&b.region),
                ListKind::Priority,
                i as u64,
            )?;
            b.me = Some(me);
            b.used = 0;
            Counters::bump(&self.stats.blocks_reposted);
        }
        Ok(())
    }

    /// Rewinds block `i` to its start if it is posted, has taken at least [`REWIND_MIN`]
    /// bytes, and lends no message to a handler; the engine rewinds only if no event waits,
    /// i.e. every message deposited in the block has been taken (copied out, or lent).
    fn rewind_if_drained(
        &self,
        rs: &mut RecvState,
        att: &Attached,
        i: usize,
    ) -> Result<(), rgasnet_portals::PtlError> {
        let Some(b) = rs.blocks.get_mut(i) else {
            return Ok(());
        };
        let Some(me) = b.me else {
            return Ok(());
        };
        if b.lent == 0 && b.used >= REWIND_MIN && self.am_ni.me_rewind(me, att.am_eq)? {
            b.used = 0;
            Counters::bump(&self.stats.blocks_rewound);
        }
        Ok(())
    }

    /// With the event queue drained, re-posts any block still unlinked and re-enables the
    /// portals that flow control disabled.
    fn recover_flow_control(
        &self,
        rs: &mut RecvState,
        att: &Attached,
    ) -> Result<(), rgasnet_portals::PtlError> {
        if !rs.disabled.iter().any(|d| *d) {
            return self.enable_unannounced(rs);
        }
        for i in 0..rs.blocks.len() {
            self.repost(rs, att, i)?;
        }
        for (k, pt) in [AM_PT, LONG_DATA_PT].into_iter().enumerate() {
            if rs.disabled[k] {
                self.am_ni.pt_enable(pt)?;
                rs.disabled[k] = false;
                Counters::bump(&self.stats.recoveries);
            }
        }
        Ok(())
    }

    /// Over a Portals library, enables both AM portals again every [`UNANNOUNCED_ENABLE_EVERY`]
    /// while every receive block is posted. Sandia's reference implementation at times
    /// disables a portal (refusing every message with `PTL_NI_PT_DISABLED`) without posting
    /// `PTL_EVENT_PT_DISABLED`, which would leave the senders resending their refused
    /// messages forever; enabling an enabled portal changes nothing. Nothing on the native
    /// engine, which announces every disable.
    fn enable_unannounced(&self, rs: &mut RecvState) -> Result<(), rgasnet_portals::PtlError> {
        if !self.over_library() {
            return Ok(());
        }
        let now = Instant::now();
        if rs
            .enabled_at
            .is_some_and(|t| now.duration_since(t) < UNANNOUNCED_ENABLE_EVERY)
            || rs.blocks.iter().any(|b| b.me.is_none())
        {
            return Ok(());
        }
        for pt in [AM_PT, LONG_DATA_PT] {
            self.am_ni.pt_enable(pt)?;
        }
        rs.enabled_at = Some(now);
        Ok(())
    }

    /// Copies an AM header's body out of its receive block and decides what runs.
    fn take_header(&self, rs: &mut RecvState, att: &Attached, ev: &Event) -> Work {
        let source = source_rank(ev);
        let header = match MatchBits::from_raw(ev.match_bits).unpack() {
            Ok(h) if h.msg_type == MsgType::ActiveMessage => h,
            _ => self.fatal(&format!(
                "rank {source} sent an AM header with invalid match bits {:#018x}",
                ev.match_bits
            )),
        };
        let Some(block) = rs.blocks.get(ev.user_ptr as usize) else {
            self.fatal("an AM arrived in an unknown receive block")
        };
        if header.protocol == Protocol::Medium && header.payload_len >= LEND_MIN {
            let region = block.region.clone();
            return self.take_lent(rs, ev, source, &header, region);
        }
        // Borrowed, not cloned: a clone is two atomic read-modify-writes per message.
        let region = &block.region;
        /// What a header decoded into: work, or a Long header to pair with its data (which
        /// needs the whole receive state, borrowed here for the block).
        enum Decoded {
            Work(Work),
            LongHeader(Pending),
        }
        let decoded = with_scratch(&BODY, |buf| {
            let mut buf = buf.borrow_mut();
            // Appended, not zeroed and then overwritten: one pass over a large Medium.
            buf.clear();
            if region
                .append_to(ev.start as usize, ev.mlength as usize, &mut buf)
                .is_err()
            {
                self.fatal("an AM event points outside its receive block");
            }
            let body = match payload::decode(&header, &buf) {
                Ok(b) => b,
                Err(e) => self.fatal(&format!("rank {source} sent a malformed AM: {e}")),
            };
            let mut pending = Pending::of(source, &header, &body);
            match header.protocol {
                Protocol::Short | Protocol::Medium => {
                    // The payload stays in BODY until the handler has run (run() reads it).
                    Decoded::Work(Work::Run(pending))
                }
                Protocol::LongPacked => {
                    let offset = body.long_offset.unwrap_or(0);
                    self.land_long(att, source, offset, body.payload);
                    pending.long = Some((offset, body.payload.len() as u64));
                    Decoded::Work(Work::Run(pending))
                }
                Protocol::Long => {
                    let offset = body.long_offset.unwrap_or(0);
                    pending.long = Some((offset, header.payload_len));
                    Decoded::LongHeader(pending)
                }
            }
        });
        let pending = match decoded {
            Decoded::Work(work) => return work,
            Decoded::LongHeader(pending) => pending,
        };
        let key = (source, ev.hdr_data);
        let parts = rs.long_halves.entry(key).or_default();
        if parts.header.is_some() {
            self.fatal(&format!(
                "rank {source} sent a Long header twice for operation {}",
                ev.hdr_data
            ));
        }
        parts.header = Some(pending);
        self.long_complete(rs, key)
    }

    /// The Long AM `key` if its header and all its data have arrived (then forgotten).
    fn long_complete(&self, rs: &mut RecvState, key: (u32, u64)) -> Work {
        let Some(parts) = rs.long_halves.get(&key) else {
            return Work::Nothing;
        };
        let Some(need) = parts
            .header
            .as_ref()
            .map(|p| p.long.map_or(0, |(_, len)| len))
        else {
            return Work::Nothing;
        };
        if parts.got > need {
            self.fatal(&format!(
                "rank {} sent {} bytes of Long data for operation {}, whose header announces {need}",
                key.0, parts.got, key.1
            ));
        }
        if parts.got < need {
            return Work::Nothing;
        }
        match rs.long_halves.remove(&key).and_then(|p| p.header) {
            Some(p) => Work::Run(p),
            None => Work::Nothing,
        }
    }

    /// Decodes a large Medium's arguments and leaves its payload in the receive block, lent
    /// to the handler ([`Inner::run`] gives it back).
    fn take_lent(
        &self,
        rs: &mut RecvState,
        ev: &Event,
        source: u32,
        header: &crate::matchbits::AmHeader,
        region: Region,
    ) -> Work {
        // Sized for the largest argument count; a header claiming more fails decoding.
        let mut prefix = [0u8; 16 * 4];
        let prefix_len = payload::prefix_len(Protocol::Medium, usize::from(header.argc).min(16));
        let start = ev.start as usize;
        if region.read(start, &mut prefix[..prefix_len]).is_err() {
            self.fatal("an AM event points outside its receive block");
        }
        let body = match payload::decode_prefix(header, &prefix[..prefix_len], ev.mlength) {
            Ok(b) => b,
            Err(e) => self.fatal(&format!("rank {source} sent a malformed AM: {e}")),
        };
        let block = ev.user_ptr as usize;
        if let Some(b) = rs.blocks.get_mut(block) {
            b.lent += 1;
        }
        Work::Run(Pending {
            lent: Some(Lent {
                block,
                region,
                at: start + prefix_len,
                len: header.payload_len as usize,
            }),
            ..Pending::of(source, header, &body)
        })
    }

    /// Runs a handler (outside the receive lock).
    fn run(&self, att: &Attached, mut p: Pending, call: &'static str) -> Result<(), AmError> {
        if let Some(lent) = p.lent.take() {
            let loan = GiveBack {
                inner: self,
                att,
                block: lent.block,
                given: false,
            };
            let args = &p.args[..p.argc];
            let seen = with_scratch(&BODY, |buf| {
                let mut buf = buf.borrow_mut();
                lent.region
                    .with_bytes(lent.at, lent.len, &mut buf, |payload| {
                        self.dispatch(
                            att,
                            Tally::Shared(&self.stats.handled),
                            p.source,
                            p.direction,
                            Category::Medium,
                            p.handler,
                            args,
                            None,
                            Some(payload),
                        )
                    })
            });
            if seen.is_err() {
                self.fatal("an AM event points outside its receive block");
            }
            // Given back, and the block posted again if it unlinked meanwhile, or rewound if
            // it is drained.
            let mut rs = loan.give();
            return self
                .repost(&mut rs, att, lent.block)
                .and_then(|()| self.rewind_if_drained(&mut rs, att, lent.block))
                .map_err(|source| AmError::Portals { call, source });
        }
        self.run_copied(att, p);
        Ok(())
    }

    /// Runs a handler whose payload, if any, was copied to `BODY` or lies in the segment.
    fn run_copied(&self, att: &Attached, p: Pending) {
        let category = match p.protocol {
            Protocol::Short => Category::Short,
            Protocol::Medium => Category::Medium,
            Protocol::Long | Protocol::LongPacked => Category::Long,
        };
        let args = &p.args[..p.argc];
        // Medium and LONG_PACKED payloads are still in BODY (the message was copied there
        // just before); a LONG payload is only in the segment.
        let prefix = match p.protocol {
            Protocol::Medium => Some(args.len() * 4),
            Protocol::LongPacked => Some(args.len() * 4 + 8),
            Protocol::Short | Protocol::Long => None,
        };
        match prefix {
            Some(at) => with_scratch(&BODY, |buf| {
                let buf = buf.borrow();
                let payload = buf.get(at..).unwrap_or(&[]);
                self.dispatch(
                    att,
                    Tally::Shared(&self.stats.handled),
                    p.source,
                    p.direction,
                    category,
                    p.handler,
                    args,
                    p.long,
                    Some(payload),
                )
            }),
            None => self.dispatch(
                att,
                Tally::Shared(&self.stats.handled),
                p.source,
                p.direction,
                category,
                p.handler,
                args,
                p.long,
                None,
            ),
        }
    }

    /// Checks the handler and calls it. `carried` is the payload when the caller has it in
    /// hand (Medium, LONG_PACKED, shared-memory Medium); otherwise a Long payload is read from
    /// the segment at `long = (offset, len)`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn dispatch(
        &self,
        att: &Attached,
        tally: Tally<'_>,
        source: u32,
        direction: Direction,
        category: Category,
        handler: u8,
        args: &[u32],
        long: Option<(u64, u64)>,
        carried: Option<&[u8]>,
    ) {
        // Borrowed, not cloned: the table lives as long as `att`, and an `Arc` clone would be
        // two atomic read-modify-writes per message on the shared-memory fast path.
        let open_call;
        let func: &HandlerBody<'_> = match att.handlers.get(handler) {
            Some(entry) => {
                if entry.category != category {
                    self.fatal(&format!(
                        "rank {source} sent a {category} AM to handler {handler} (`{}`), registered as {}",
                        entry.name, entry.category
                    ));
                }
                &*entry.func
            }
            None => match att.handlers.open() {
                Some(open) => {
                    open_call = move |t: &Token<'_>, a: &[u32], p: &[u8]| open(t, category, a, p);
                    &open_call
                }
                None => self.fatal(&format!(
                    "rank {source} sent a {category} {} to handler {handler}, which is not registered on this rank",
                    if direction == Direction::Request {
                        "request"
                    } else {
                        "reply"
                    },
                )),
            },
        };
        let token = Token {
            client: self,
            source,
            direction,
            long_offset: long.map(|(o, _)| o),
            handler,
            replied: Default::default(),
        };
        let _scope = HandlerScope::enter();
        // Counted after the handler: the counter's atomic add would otherwise delay the
        // handler's reply (it waits for earlier stores), and nothing reads it in between.
        let _count = CountOnDrop(tally);
        match category {
            Category::Short => func(&token, args, &[]),
            Category::Medium => func(&token, args, carried.unwrap_or(&[])),
            Category::Long if carried.is_some() => func(&token, args, carried.unwrap_or(&[])),
            Category::Long => {
                let (offset, len) = long.unwrap_or((0, 0));
                // The payload is in the segment: the handler reads it there when the segment
                // can lend a view (GASNet hands Long handlers a pointer into the segment),
                // else a copy (a reused buffer: a handler cannot poll, so this cannot be
                // re-entered).
                let ran = with_scratch(&LONG, |buf| {
                    let mut buf = buf.borrow_mut();
                    att.segment
                        .with_bytes(offset as usize, len as usize, &mut buf, |payload| {
                            func(&token, args, payload)
                        })
                });
                if ran.is_err() {
                    self.fatal(&format!(
                        "rank {source} sent a Long AM of {len} bytes at offset {offset}, outside this rank's segment"
                    ));
                }
            }
        }
    }
}

/// What a handler runs: a registered handler's function, or the open handler bound to the
/// message's category.
type HandlerBody<'a> = dyn Fn(&Token<'_>, &[u32], &[u8]) + 'a;
