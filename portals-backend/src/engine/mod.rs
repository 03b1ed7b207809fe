//! The Portals 4 semantics engine of one physical interface, sans-IO.
//!
//! An [`Engine`] hosts up to four NIs (one per [`NiKind`]) and everything that hangs off them:
//! portal table entries, match/list entries, memory descriptors, event queues and counting
//! events. It has no notion of time or sockets: API calls and incoming messages
//! ([`Engine::handle_message`]) go in, outgoing messages ([`Engine::poll_outgoing`]) and events
//! (in EQs and CTs) come out. The transport below delivers messages reliably, exactly once and
//! in order per pair of interfaces; the driver above owns the engine behind a mutex and drains
//! `poll_outgoing` after every call.
//!
//! Being single-threaded behind that mutex is what makes atomics atomic and what lets
//! `me_unlink`/`md_release` ignore "operation being processed" races: a target operation runs
//! to completion inside one `handle_message` call, so an entry is never half-used when the
//! application unlinks it. `md_release` still returns `IN_USE` while an acknowledged or replied
//! operation on the MD waits for its response, because the response will report on the MD.
//!
//! Module map: [`objects`] (state and argument types), `resources` (PT/EQ/CT/MD/ME/LE calls),
//! `initiator` (put/get/atomics, responses, peer failure), `target` (matching and deposits),
//! `atomic` (arithmetic), `events` (posting events and counting).

mod atomic;
mod events;
pub mod immediate;
mod initiator;
pub mod objects;
mod resources;
mod target;
pub mod triggered;
pub mod unexpected;

#[cfg(test)]
mod tests;

use std::collections::VecDeque;

use hashbrown::HashMap;

use crate::error::{PtlError, PtlResult};
use crate::handle::Slab;
use crate::message::OutMessage;
use crate::proto::{self, Message};
use crate::types::{
    Addressing, Matching, NiKind, NiLimits, PhysId, ProcessId, Rank, SrIndex, Uid, RANK_ANY,
};

pub use objects::{
    AtomicArgs, CtHandle, EngineStats, EqGet, EqHandle, FetchArgs, GetArgs, LeHandle, LeSpec,
    MdHandle, MdSpec, MeHandle, MeSpec, NiHandle, PutArgs, RemoteAddr,
};
use objects::{CtState, EntryState, EqState, MdState, NiState, SR_DROP, SR_OP, SR_PERM};

use initiator::PendingOp;

pub use immediate::{
    ImmediateBatch, ImmediateMsg, LostImmediates, IMMEDIATE_BACKLOG_MAX, IMMEDIATE_OUTSTANDING_MAX,
};

/// Most recycled message buffers an engine keeps.
const SPARE_BUFFERS: usize = 64;

/// The largest limits an NI can be granted; `ni_init` clamps desired limits to these.
pub fn max_limits() -> NiLimits {
    NiLimits {
        max_pt_index: 255,
        max_eqs: 1 << 12,
        max_triggered_ops: 1 << 16,
        max_msg_size: proto::MAX_PAYLOAD,
        ..NiLimits::default()
    }
}

/// Largest event queue `eq_alloc` accepts: bounds the memory one EQ can take.
pub const MAX_EQ_COUNT: usize = 1 << 22;

/// Per-kind slab limit: per-NI limits are enforced by the NI's own counters, the slabs only
/// need room for four NIs' worth.
fn slab_limit(per_ni: u32) -> usize {
    4 * per_ni as usize
}

/// The Portals semantics of one physical interface. See the module docs.
pub struct Engine {
    local: PhysId,
    uid: Uid,
    nis: Slab<NiState>,
    by_kind: [Option<NiHandle>; 4],
    eqs: Slab<EqState>,
    cts: Slab<CtState>,
    mds: Slab<MdState>,
    entries: Slab<EntryState>,
    /// Operations waiting for an ack or reply, by operation id.
    pending: HashMap<u64, PendingOp>,
    next_op_id: u64,
    outgoing: VecDeque<(PhysId, OutMessage)>,
    /// Emptied buffers to build messages in (see [`Engine::stock_buffers`]).
    spare: Vec<Vec<u8>>,
    /// Successful ACKs of puts to [`crate::types::PtOptions::LAZY_ACK`] portals, which may wait for company.
    lazy_outgoing: VecDeque<(PhysId, Vec<u8>)>,
    /// Peers whose ACK refused an operation (`NI_PT_DISABLED`), one entry per refusal, until
    /// [`Engine::take_refusals`]: the user will send those operations again.
    refusals: Vec<PhysId>,
    /// Peers whose [`crate::types::AckReq::ConfirmedAck`] requests succeeded silently since the last
    /// [`Engine::take_silent_confirmations`]: their initiators wait on the transport's ack.
    silent_confirmations: Vec<PhysId>,
    /// Received immediate messages, oldest first (see [`immediate`]).
    immediates: VecDeque<immediate::Queued>,
    /// Their bytes, back to back in the same order.
    immediate_bytes: VecDeque<u8>,
    /// Unconfirmed immediates per peer.
    immediates_outstanding: HashMap<PhysId, u32>,
    /// Immediates lost with failed peers, until [`Engine::take_lost_immediates`].
    lost_immediates: Vec<LostImmediates>,
    /// CTs whose triggered operations are to be looked at ([`triggered`]).
    trigger_work: Vec<CtHandle>,
    /// Set while [`Engine::ct_changed`] works through `trigger_work`.
    triggering: bool,
    stats: EngineStats,
}

fn kind_name(kind: NiKind) -> &'static str {
    match (kind.matching, kind.addressing) {
        (Matching::Matching, Addressing::Logical) => "matching-logical",
        (Matching::NoMatching, Addressing::Logical) => "non-matching-logical",
        (Matching::Matching, Addressing::Physical) => "matching-physical",
        (Matching::NoMatching, Addressing::Physical) => "non-matching-physical",
    }
}

fn negotiate(desired: Option<NiLimits>) -> NiLimits {
    let cap = max_limits();
    let Some(d) = desired else {
        return NiLimits::default();
    };
    NiLimits {
        max_entries: d.max_entries.min(cap.max_entries),
        max_unexpected_headers: d.max_unexpected_headers.min(cap.max_unexpected_headers),
        max_mds: d.max_mds.min(cap.max_mds),
        max_cts: d.max_cts.min(cap.max_cts),
        max_eqs: d.max_eqs.min(cap.max_eqs),
        max_pt_index: d.max_pt_index.min(cap.max_pt_index),
        max_iovecs: 0,
        max_list_size: d.max_list_size.min(cap.max_list_size),
        max_triggered_ops: d.max_triggered_ops.min(cap.max_triggered_ops),
        max_msg_size: d.max_msg_size.min(cap.max_msg_size),
        max_atomic_size: d.max_atomic_size.min(cap.max_atomic_size),
        max_fetch_atomic_size: d.max_fetch_atomic_size.min(cap.max_fetch_atomic_size),
        max_waw_ordered_size: d.max_waw_ordered_size.min(cap.max_waw_ordered_size),
        max_war_ordered_size: d.max_war_ordered_size.min(cap.max_war_ordered_size),
        max_volatile_size: d.max_volatile_size.min(cap.max_volatile_size),
    }
}

impl Engine {
    /// An engine for the interface `local`, whose processes act as `uid`. `interface_id` is
    /// stamped into every handle so that handles of another engine are refused.
    pub fn new(local: PhysId, uid: Uid, interface_id: u32) -> Self {
        let cap = max_limits();
        Engine {
            local,
            uid,
            nis: Slab::new(interface_id, "NI", 4),
            by_kind: [None; 4],
            eqs: Slab::new(interface_id, "EQ", slab_limit(cap.max_eqs)),
            cts: Slab::new(interface_id, "CT", slab_limit(cap.max_cts)),
            mds: Slab::new(interface_id, "MD", slab_limit(cap.max_mds)),
            entries: Slab::new(interface_id, "ME/LE", slab_limit(cap.max_entries)),
            pending: HashMap::new(),
            next_op_id: 1,
            outgoing: VecDeque::new(),
            spare: Vec::new(),
            lazy_outgoing: VecDeque::new(),
            refusals: Vec::new(),
            silent_confirmations: Vec::new(),
            immediates: VecDeque::new(),
            immediate_bytes: VecDeque::new(),
            immediates_outstanding: HashMap::new(),
            lost_immediates: Vec::new(),
            trigger_work: Vec::new(),
            triggering: false,
            stats: EngineStats::default(),
        }
    }

    /// Hands `f` the peer of each refusal (an ACK with `NI_PT_DISABLED`) since the last call.
    /// A layer above that resends refused operations holds its departure handshake on them
    /// (see [`crate::stack::Stack::handle_datagram`]).
    pub fn take_refusals(&mut self, mut f: impl FnMut(PhysId)) {
        for peer in self.refusals.drain(..) {
            f(peer);
        }
    }

    /// Hands `f` the peer of each [`crate::types::AckReq::ConfirmedAck`] request that succeeded without an
    /// ACK message since the last call (one call per request): its initiator completes the
    /// operation on the transport's ack, which the layer above should then not hold back
    /// for long (see [`crate::stack::Stack::handle_datagram`]).
    pub fn take_silent_confirmations(&mut self, mut f: impl FnMut(PhysId)) {
        for peer in self.silent_confirmations.drain(..) {
            f(peer);
        }
    }

    /// Opens the NI of `kind` with `desired` limits (defaults when `None`, each clamped to
    /// [`max_limits`]); returns its handle and the limits actually granted.
    pub fn ni_init(
        &mut self,
        kind: NiKind,
        desired: Option<NiLimits>,
    ) -> PtlResult<(NiHandle, NiLimits)> {
        let k = kind.index() as usize;
        if self.by_kind[k].is_some() {
            return Err(PtlError::NiKindInUse(kind_name(kind)));
        }
        let limits = negotiate(desired);
        let pts = (0..=limits.max_pt_index).map(|_| None).collect();
        let ni = self.nis.insert(
            "ni_init",
            NiState {
                kind,
                limits,
                map: None,
                my_rank: None,
                pts,
                status: [0; 3],
                n_entries: 0,
                n_mds: 0,
                n_cts: 0,
                n_eqs: 0,
                n_triggered: 0,
            },
        )?;
        self.by_kind[k] = Some(ni);
        Ok((ni, limits))
    }

    /// Closes an NI and releases everything attached to it (entries, MDs, EQs, CTs, pending
    /// operations — those complete silently: their MDs and EQs are gone too). Its handles and
    /// those of its objects become stale.
    pub fn ni_fini(&mut self, ni: NiHandle) -> PtlResult<()> {
        let state = self.nis.remove("ni_fini", ni)?;
        self.by_kind[state.kind.index() as usize] = None;
        let ops: Vec<u64> = self
            .pending
            .iter()
            .filter(|(_, op)| op.ni == ni)
            .map(|(id, _)| *id)
            .collect();
        for id in ops {
            self.pending.remove(&id);
        }
        macro_rules! purge {
            ($slab:expr) => {{
                let dead: Vec<_> = $slab
                    .iter()
                    .filter(|(_, o)| o.ni == ni)
                    .map(|(h, _)| h)
                    .collect();
                for h in dead {
                    let _ = $slab.remove("ni_fini", h);
                }
            }};
        }
        purge!(self.entries);
        purge!(self.mds);
        purge!(self.eqs);
        purge!(self.cts);
        Ok(())
    }

    /// Sets the rank map of a logical NI: rank `r` is `map[r]`. This interface's own rank is
    /// the position of its physical id in the map (if present).
    pub fn set_map(&mut self, ni: NiHandle, map: &[PhysId]) -> PtlResult<()> {
        let local = self.local;
        let state = self.nis.get_mut("set_map", ni)?;
        if state.kind.addressing != Addressing::Logical {
            return Err(PtlError::arg("set_map", "the NI uses physical addressing"));
        }
        if map.is_empty() || map.len() >= RANK_ANY as usize {
            return Err(PtlError::arg(
                "set_map",
                format!("a map needs 1..{} entries, got {}", RANK_ANY, map.len()),
            ));
        }
        state.my_rank = map.iter().position(|p| *p == local).map(|r| r as Rank);
        state.map = Some(map.to_vec());
        Ok(())
    }

    /// The rank map of a logical NI.
    pub fn get_map(&self, ni: NiHandle) -> PtlResult<&[PhysId]> {
        let state = self.nis.get("get_map", ni)?;
        state
            .map
            .as_deref()
            .ok_or_else(|| PtlError::arg("get_map", "no rank map has been set"))
    }

    /// This process's id on `ni`: its rank on a logical NI, its physical id otherwise.
    pub fn get_id(&self, ni: NiHandle) -> PtlResult<ProcessId> {
        let state = self.nis.get("get_id", ni)?;
        match state.kind.addressing {
            Addressing::Physical => Ok(ProcessId::Phys(self.local)),
            Addressing::Logical => match (&state.map, state.my_rank) {
                (None, _) => Err(PtlError::arg("get_id", "no rank map has been set")),
                (Some(_), None) => Err(PtlError::Fail {
                    call: "get_id",
                    reason: format!("this interface ({}) is not in the rank map", self.local),
                }),
                (Some(_), Some(r)) => Ok(ProcessId::Rank(r)),
            },
        }
    }

    /// This interface's physical id.
    pub fn get_phys_id(&self, ni: NiHandle) -> PtlResult<PhysId> {
        self.nis.get("get_phys_id", ni)?;
        Ok(self.local)
    }

    /// The user id operations of this process carry.
    pub fn get_uid(&self, ni: NiHandle) -> PtlResult<Uid> {
        self.nis.get("get_uid", ni)?;
        Ok(self.uid)
    }

    /// The limits granted to `ni`.
    pub fn ni_limits(&self, ni: NiHandle) -> PtlResult<NiLimits> {
        Ok(self.nis.get("ni_limits", ni)?.limits)
    }

    /// A status register of `ni` (`PtlNIStatus`).
    pub fn ni_status(&self, ni: NiHandle, sr: SrIndex) -> PtlResult<u64> {
        let state = self.nis.get("ni_status", ni)?;
        Ok(state.status[match sr {
            SrIndex::DropCount => SR_DROP,
            SrIndex::PermissionViolations => SR_PERM,
            SrIndex::OperationViolations => SR_OP,
        }])
    }

    /// The next message to hand to the transport: destination interface and the message (whose
    /// body, for a put from an [`crate::types::MdOptions::IN_PLACE`] MD, is a span of the MD's
    /// region).
    pub fn poll_outgoing(&mut self) -> Option<(PhysId, OutMessage)> {
        self.outgoing.pop_front()
    }

    /// Whether [`Engine::poll_outgoing`] or [`Engine::poll_lazy_outgoing`] has anything.
    pub fn has_outgoing(&self) -> bool {
        !self.outgoing.is_empty() || !self.lazy_outgoing.is_empty()
    }

    /// The next message that may be held back before it goes to the transport: a successful
    /// ACK of a put to a [`crate::types::PtOptions::LAZY_ACK`] portal. Whoever drives the engine decides how
    /// long (the [`crate::stack::Stack`] waits for other traffic to the same peer, bounded).
    pub fn poll_lazy_outgoing(&mut self) -> Option<(PhysId, Vec<u8>)> {
        self.lazy_outgoing.pop_front()
    }

    /// Processes a message from interface `from`. A message that does not decode is counted
    /// ([`EngineStats::malformed`]) and ignored; nothing a peer sends can make this panic.
    pub fn handle_message(&mut self, from: PhysId, message: &[u8]) {
        match proto::decode(message) {
            Ok(Message::Request(req)) => {
                self.stats.requests += 1;
                self.handle_request(from, &req);
            }
            Ok(Message::Response(resp)) => {
                self.stats.responses += 1;
                self.handle_response(from, &resp);
            }
            Ok(Message::Immediate(m)) => self.handle_immediate(from, &m),
            Err(e) => {
                self.stats.malformed += 1;
                tracing::debug!(%from, error = %e, "dropping malformed Portals message");
            }
        }
    }

    /// Takes emptied message buffers from `from` (a transport's acknowledged messages) to
    /// build the next messages in, so that a steady exchange of small messages allocates
    /// nothing. Keeps a bounded number; the rest stay in `from`.
    pub fn stock_buffers(&mut self, from: &mut Vec<Vec<u8>>) {
        while self.spare.len() < SPARE_BUFFERS {
            match from.pop() {
                Some(b) => self.spare.push(b),
                None => break,
            }
        }
    }

    /// A buffer to build a message in: a recycled one when there is one.
    fn message_buffer(&mut self) -> Vec<u8> {
        self.spare.pop().unwrap_or_default()
    }

    /// Diagnostic counters.
    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// Number of operations waiting for an ack or reply.
    pub fn pending_ops(&self) -> usize {
        self.pending.len()
    }

    fn ni(&self, call: &'static str, ni: NiHandle) -> PtlResult<&NiState> {
        self.nis.get(call, ni)
    }

    fn ni_mut(&mut self, call: &'static str, ni: NiHandle) -> PtlResult<&mut NiState> {
        self.nis.get_mut(call, ni)
    }
}
