//! [`AnyNi`]: an NI of whichever Portals engine the process runs on, `RGASNET_PORTALS`'s
//! choice: the native engine's [`Ni`] or, in a build with the feature `ref-impl`, a Portals 4
//! library's [`LibNi`](crate::refimpl::ni::LibNi). The conduit holds this one type and makes
//! the same calls on either.
//!
//! The calls are the native `Ni`'s. Those of its interface that the AM layer makes (a
//! progress round, the departure handshake, polling settings) are here too, so that a caller
//! never reaches for the native [`Interface`] itself. Over a library:
//!
//! - the library makes progress on its own (its progress thread, its NIC), so a progress
//!   round only says that the event queues may have something ([`HoldingRound`]), and
//!   flushing, polling settings and background progress have nothing to do;
//! - there are no immediate messages ([`AnyNi::has_immediates`] is false: the conduit sends
//!   its Shorts as puts), no list-entry rewind and no prepend (see `LibNi`);
//! - what this process sent is delivered once its acknowledgement came (the conduit counts
//!   those), and the departure handshake is the conduit's own: the transport's
//!   end-of-program messages do not exist, so no peer is ever seen leaving.

#[cfg(feature = "ref-impl")]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(feature = "ref-impl")]
use std::sync::Arc;
use std::time::Duration;

use crate::engine::{
    CtHandle, Engine, EqGet, EqHandle, GetArgs, ImmediateBatch, LeHandle, LeSpec, LostImmediates,
    MdHandle, MdSpec, MeHandle, MeSpec, PutArgs,
};
use crate::error::PtlResult;
use crate::interface::{HoldingRound, Interface, Ni};
use crate::transport::TransportStats;
use crate::types::{CtEvent, ListKind, NiKind, NiLimits, PhysId, ProcessId, PtIndex, PtOptions};

#[cfg(feature = "ref-impl")]
use crate::refimpl::ni::LibNi;

/// An NI of the native engine or of a Portals library (see the module docs). Cloning is
/// cheap and shares the NI.
#[derive(Clone, Debug)]
pub enum AnyNi {
    /// The native engine.
    Native(Ni),
    /// A Portals 4 library (feature `ref-impl`).
    #[cfg(feature = "ref-impl")]
    Library(LibraryNi),
}

/// A library NI with the count its progress rounds report.
#[cfg(feature = "ref-impl")]
#[derive(Clone, Debug)]
pub struct LibraryNi {
    ni: LibNi,
    /// Progress rounds so far: reported as the "events posted" of each round, so that every
    /// round looks at the queues (the library cannot say whether it posted any without
    /// handing one out).
    rounds: Arc<AtomicU64>,
}

/// The calls a wait's check makes, on either engine: the native [`Engine`] (under its
/// interface's lock, inside [`Interface::wait_for`]) or a library's NI.
pub trait EngineView {
    /// Takes the next event without waiting (`PtlEQGet`).
    fn eq_get(&mut self, eq: EqHandle) -> PtlResult<EqGet>;
    /// Reads a counting event (`PtlCTGet`).
    fn ct_get(&mut self, ct: CtHandle) -> PtlResult<CtEvent>;
    /// Releases a memory descriptor (`PtlMDRelease`).
    fn md_release(&mut self, md: MdHandle) -> PtlResult<()>;
    /// How many events the engine has posted to any of its queues so far, where it counts
    /// them (the native engine; a library posts on its own and says `None`). A consumer that
    /// emptied a queue when the count was `n` knows the queue is still empty while it is.
    fn events_posted(&self) -> Option<u64> {
        None
    }
}

impl EngineView for Engine {
    fn eq_get(&mut self, eq: EqHandle) -> PtlResult<EqGet> {
        Engine::eq_get(self, eq)
    }
    fn ct_get(&mut self, ct: CtHandle) -> PtlResult<CtEvent> {
        Engine::ct_get(self, ct)
    }
    fn md_release(&mut self, md: MdHandle) -> PtlResult<()> {
        Engine::md_release(self, md)
    }
    fn events_posted(&self) -> Option<u64> {
        Some(self.stats().events_posted)
    }
}

#[cfg(feature = "ref-impl")]
impl EngineView for &LibNi {
    fn eq_get(&mut self, eq: EqHandle) -> PtlResult<EqGet> {
        LibNi::eq_get(self, eq)
    }
    fn ct_get(&mut self, ct: CtHandle) -> PtlResult<CtEvent> {
        LibNi::ct_get(self, ct)
    }
    fn md_release(&mut self, md: MdHandle) -> PtlResult<()> {
        LibNi::md_release(self, md)
    }
}

/// The same call on either engine.
macro_rules! on_either {
    ($self:ident, $ni:ident => $call:expr) => {
        match $self {
            AnyNi::Native($ni) => $call,
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(LibraryNi { ni: $ni, .. }) => $call,
        }
    };
}

impl From<Ni> for AnyNi {
    fn from(ni: Ni) -> AnyNi {
        AnyNi::Native(ni)
    }
}

#[cfg(feature = "ref-impl")]
impl LibraryNi {
    /// The library's NI.
    pub fn ni(&self) -> &LibNi {
        &self.ni
    }
}

#[cfg(feature = "ref-impl")]
impl From<LibNi> for AnyNi {
    fn from(ni: LibNi) -> AnyNi {
        AnyNi::Library(LibraryNi {
            ni,
            rounds: Arc::new(AtomicU64::new(0)),
        })
    }
}

impl AnyNi {
    /// The native NI, if this is one (for layers not yet ported to a library).
    pub fn native(&self) -> Option<&Ni> {
        match self {
            AnyNi::Native(ni) => Some(ni),
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(_) => None,
        }
    }

    /// The library's NI, if this is one.
    #[cfg(feature = "ref-impl")]
    pub fn library(&self) -> Option<&LibNi> {
        match self {
            AnyNi::Native(_) => None,
            AnyNi::Library(l) => Some(&l.ni),
        }
    }

    /// Runs `check` with a view of a library's NI ([`EngineView`]); `None` on the native
    /// engine, whose view exists only under its interface's lock
    /// ([`Interface::wait_for`]).
    pub fn with_library_view<T>(&self, check: impl FnOnce(&mut dyn EngineView) -> T) -> Option<T> {
        match self {
            AnyNi::Native(_) => {
                let _ = check;
                None
            }
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(l) => Some(check(&mut &l.ni)),
        }
    }

    /// The native interface under a native NI.
    pub fn native_interface(&self) -> Option<&Interface> {
        self.native().map(Ni::interface)
    }

    /// Which engine: `"native"` or `"ref"` (a Portals library), as `RGASNET_PORTALS` names it.
    pub fn engine_name(&self) -> &'static str {
        match self {
            AnyNi::Native(_) => "native",
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(_) => "ref",
        }
    }

    /// Whether the engine has immediate messages ([`AnyNi::send_immediate`]).
    pub fn has_immediates(&self) -> bool {
        matches!(self, AnyNi::Native(_))
    }

    /// Matching/non-matching, logical/physical.
    pub fn kind(&self) -> NiKind {
        on_either!(self, ni => ni.kind())
    }
    /// The limits granted at init.
    pub fn limits(&self) -> NiLimits {
        on_either!(self, ni => ni.limits())
    }
    /// The physical id (`PtlGetPhysId`).
    pub fn get_phys_id(&self) -> PtlResult<PhysId> {
        on_either!(self, ni => ni.get_phys_id())
    }
    /// Sets the rank map of a logical NI (`PtlSetMap`).
    pub fn set_map(&self, map: &[PhysId]) -> PtlResult<()> {
        on_either!(self, ni => ni.set_map(map))
    }
    /// Allocates a portal table entry (`PtlPTAlloc`).
    pub fn pt_alloc(
        &self,
        options: PtOptions,
        eq: Option<EqHandle>,
        index: PtIndex,
    ) -> PtlResult<PtIndex> {
        on_either!(self, ni => ni.pt_alloc(options, eq, index))
    }
    /// Enables a portal table entry (`PtlPTEnable`).
    pub fn pt_enable(&self, index: PtIndex) -> PtlResult<()> {
        on_either!(self, ni => ni.pt_enable(index))
    }
    /// Disables a portal table entry (`PtlPTDisable`).
    pub fn pt_disable(&self, index: PtIndex) -> PtlResult<()> {
        on_either!(self, ni => ni.pt_disable(index))
    }
    /// Allocates an event queue (`PtlEQAlloc`).
    pub fn eq_alloc(&self, count: usize) -> PtlResult<EqHandle> {
        on_either!(self, ni => ni.eq_alloc(count))
    }
    /// Frees an event queue (`PtlEQFree`).
    pub fn eq_free(&self, eq: EqHandle) -> PtlResult<()> {
        on_either!(self, ni => ni.eq_free(eq))
    }
    /// Takes the next event without waiting (`PtlEQGet`).
    pub fn eq_get(&self, eq: EqHandle) -> PtlResult<EqGet> {
        on_either!(self, ni => ni.eq_get(eq))
    }
    /// Takes the next event without making progress first, and whether more may wait.
    pub fn eq_take_more(&self, eq: EqHandle) -> PtlResult<(EqGet, bool)> {
        on_either!(self, ni => ni.eq_take_more(eq))
    }
    /// Waits for the next event (`PtlEQWait`), or `EqGet::Empty` / `EqEmpty` after
    /// `timeout`.
    pub fn eq_wait(&self, eq: EqHandle, timeout: Option<Duration>) -> PtlResult<EqGet> {
        on_either!(self, ni => ni.eq_wait(eq, timeout))
    }
    /// Allocates a counting event (`PtlCTAlloc`).
    pub fn ct_alloc(&self) -> PtlResult<CtHandle> {
        on_either!(self, ni => ni.ct_alloc())
    }
    /// Frees a counting event (`PtlCTFree`).
    pub fn ct_free(&self, ct: CtHandle) -> PtlResult<()> {
        on_either!(self, ni => ni.ct_free(ct))
    }
    /// Reads a counting event (`PtlCTGet`).
    pub fn ct_get(&self, ct: CtHandle) -> PtlResult<CtEvent> {
        on_either!(self, ni => ni.ct_get(ct))
    }
    /// Sets a counting event (`PtlCTSet`).
    pub fn ct_set(&self, ct: CtHandle, value: CtEvent) -> PtlResult<()> {
        on_either!(self, ni => ni.ct_set(ct, value))
    }
    /// Waits until `success >= threshold` or `failure > 0` (`PtlCTWait`).
    pub fn ct_wait(
        &self,
        ct: CtHandle,
        threshold: u64,
        timeout: Option<Duration>,
    ) -> PtlResult<CtEvent> {
        on_either!(self, ni => ni.ct_wait(ct, threshold, timeout))
    }
    /// Binds a memory descriptor (`PtlMDBind`).
    pub fn md_bind(&self, spec: MdSpec) -> PtlResult<MdHandle> {
        on_either!(self, ni => ni.md_bind(spec))
    }
    /// Releases a memory descriptor (`PtlMDRelease`).
    pub fn md_release(&self, md: MdHandle) -> PtlResult<()> {
        on_either!(self, ni => ni.md_release(md))
    }
    /// Appends a match entry (`PtlMEAppend`).
    pub fn me_append(
        &self,
        pt_index: PtIndex,
        spec: MeSpec,
        list: ListKind,
        user_ptr: u64,
    ) -> PtlResult<MeHandle> {
        on_either!(self, ni => ni.me_append(pt_index, spec, list, user_ptr))
    }
    /// Puts a match entry at the head of its list (an rgasnet extension; a library appends).
    pub fn me_prepend(
        &self,
        pt_index: PtIndex,
        spec: MeSpec,
        list: ListKind,
        user_ptr: u64,
    ) -> PtlResult<MeHandle> {
        on_either!(self, ni => ni.me_prepend(pt_index, spec, list, user_ptr))
    }
    /// Rewinds a drained locally managed entry (an rgasnet extension; a library never does).
    pub fn me_rewind(&self, me: MeHandle, eq: EqHandle) -> PtlResult<bool> {
        on_either!(self, ni => ni.me_rewind(me, eq))
    }
    /// Unlinks a match entry (`PtlMEUnlink`).
    pub fn me_unlink(&self, me: MeHandle) -> PtlResult<()> {
        on_either!(self, ni => ni.me_unlink(me))
    }
    /// Appends a list entry (`PtlLEAppend`).
    pub fn le_append(
        &self,
        pt_index: PtIndex,
        spec: LeSpec,
        list: ListKind,
        user_ptr: u64,
    ) -> PtlResult<LeHandle> {
        on_either!(self, ni => ni.le_append(pt_index, spec, list, user_ptr))
    }
    /// Unlinks a list entry (`PtlLEUnlink`).
    pub fn le_unlink(&self, le: LeHandle) -> PtlResult<()> {
        on_either!(self, ni => ni.le_unlink(le))
    }
    /// `PtlPut`.
    pub fn put(&self, args: &PutArgs) -> PtlResult<()> {
        on_either!(self, ni => ni.put(args))
    }
    /// `PtlPut` of an answer ([`Ni::put_answer`]; a plain put over a library).
    pub fn put_answer(&self, args: &PutArgs) -> PtlResult<()> {
        match self {
            AnyNi::Native(ni) => ni.put_answer(args),
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(l) => l.ni.put(args),
        }
    }
    /// `PtlPut` of bytes written into the MD as the put starts ([`Ni::put_staged`]).
    pub fn put_staged(&self, args: &PutArgs, parts: [&[u8]; 2]) -> PtlResult<()> {
        on_either!(self, ni => ni.put_staged(args, parts))
    }
    /// `PtlPut` of `data` instead of the MD's bytes ([`Ni::put_from`]).
    pub fn put_from(&self, args: &PutArgs, data: &[u8]) -> PtlResult<()> {
        on_either!(self, ni => ni.put_from(args, data))
    }
    /// `PtlGet`.
    pub fn get(&self, args: &GetArgs) -> PtlResult<()> {
        on_either!(self, ni => ni.get(args))
    }

    /// Sends an immediate message ([`Ni::send_immediate`]); over a library, an error: check
    /// [`AnyNi::has_immediates`] first.
    pub fn send_immediate(
        &self,
        target: ProcessId,
        payload: &[u8],
        force: bool,
    ) -> PtlResult<bool> {
        match self {
            AnyNi::Native(ni) => ni.send_immediate(target, payload, force),
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(_) => Err(crate::error::PtlError::arg(
                "send_immediate",
                "a Portals library has no immediate messages (send a put)",
            )),
        }
    }
    /// Immediate messages sent and not yet confirmed (none over a library).
    pub fn immediates_unconfirmed(&self) -> u64 {
        match self {
            AnyNi::Native(ni) => ni.immediates_unconfirmed(),
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(_) => 0,
        }
    }
    /// The immediate messages lost with failed peers since the last call.
    pub fn take_lost_immediates(&self) -> PtlResult<Vec<LostImmediates>> {
        match self {
            AnyNi::Native(ni) => ni.take_lost_immediates(),
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(_) => Ok(Vec::new()),
        }
    }

    /// One round of progress that holds acknowledgements back
    /// ([`Interface::progress_holding`]), taking this NI's immediate messages into
    /// `immediates`. Over a library: nothing to do but say the queues may have events.
    pub fn progress_holding(
        &self,
        immediates: Option<&mut ImmediateBatch>,
    ) -> PtlResult<HoldingRound> {
        match self {
            AnyNi::Native(ni) => ni
                .interface()
                .progress_holding(immediates.map(|batch| (ni.handle(), batch))),
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(l) => Ok(HoldingRound {
                received: false,
                // Relaxed: a counter only this value reads.
                events_posted: l.rounds.fetch_add(1, Ordering::Relaxed) + 1,
                pending_transmit: false,
                immediates_lost: 0,
            }),
        }
    }
    /// Transmits what a holding round held back ([`Interface::flush`]).
    pub fn flush(&self) {
        if let Some(iface) = self.native_interface() {
            iface.flush();
        }
    }
    /// Sends every held acknowledgement now ([`Interface::flush_acknowledgements`]).
    pub fn flush_acknowledgements(&self) {
        if let Some(iface) = self.native_interface() {
            iface.flush_acknowledgements();
        }
    }
    /// Whether everything sent has been delivered ([`Interface::all_acknowledged`]); over a
    /// library, the caller's own count of unacknowledged operations says it.
    pub fn all_acknowledged(&self) -> bool {
        match self {
            AnyNi::Native(ni) => ni.interface().all_acknowledged(),
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(_) => true,
        }
    }
    /// Tells the peers that this process is leaving ([`Interface::leave`]).
    pub fn leave(&self) {
        if let Some(iface) = self.native_interface() {
            iface.leave();
        }
    }
    /// Tells the peers that the program ended ([`Interface::announce_end`]).
    pub fn announce_end(&self) {
        if let Some(iface) = self.native_interface() {
            iface.announce_end();
        }
    }
    /// Whether every peer is done with this process ([`Interface::left`]); over a library
    /// there is no such handshake.
    pub fn left(&self) -> bool {
        match self {
            AnyNi::Native(ni) => ni.interface().left(),
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(_) => true,
        }
    }
    /// A refused operation to `peer` was sent again ([`Interface::refusal_resent`]).
    pub fn refusal_resent(&self, peer: PhysId) {
        if let Some(iface) = self.native_interface() {
            iface.refusal_resent(peer);
        }
    }
    /// How many peers said they ended or are leaving ([`Interface::departures`]).
    pub fn departures(&self) -> u64 {
        match self {
            AnyNi::Native(ni) => ni.interface().departures(),
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(_) => 0,
        }
    }
    /// Whether `peer` said it is leaving ([`Interface::peer_left`]).
    pub fn peer_left(&self, peer: PhysId) -> bool {
        match self {
            AnyNi::Native(ni) => ni.interface().peer_left(peer),
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(_) => false,
        }
    }
    /// Whether `peer` said its program ended ([`Interface::peer_ended`]).
    pub fn peer_ended(&self, peer: PhysId) -> bool {
        match self {
            AnyNi::Native(ni) => ni.interface().peer_ended(peer),
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(_) => false,
        }
    }
    /// The transport's counters (all zero over a library, which keeps its own).
    pub fn transport_stats(&self) -> TransportStats {
        match self {
            AnyNi::Native(ni) => ni.interface().transport_stats(),
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(_) => TransportStats::default(),
        }
    }
    /// How waits poll ([`Interface::set_polling`]).
    pub fn set_polling(&self, spin: Duration, budget: Duration) {
        if let Some(iface) = self.native_interface() {
            iface.set_polling(spin, budget);
        }
    }
    /// Starts background progress ([`Interface::start_background_progress`]).
    pub fn start_background_progress(&self, period: Duration) -> PtlResult<()> {
        match self {
            AnyNi::Native(ni) => ni.interface().start_background_progress(period),
            #[cfg(feature = "ref-impl")]
            AnyNi::Library(_) => Ok(()),
        }
    }
}
