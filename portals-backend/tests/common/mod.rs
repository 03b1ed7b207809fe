//! Helpers shared by the driver's end-to-end tests on real UDP sockets.

#![allow(dead_code)] // each test crate uses its own subset
#![allow(clippy::unwrap_used, clippy::expect_used)] // test code: a failed call is a failed test

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rgasnet_portals::engine::{
    CtHandle, EqGet, EqHandle, GetArgs, MdSpec, MeSpec, PutArgs, RemoteAddr,
};
use rgasnet_portals::interface::{Interface, InterfaceConfig, Ni};
use rgasnet_portals::transport::TransportConfig;
use rgasnet_portals::types::{
    AckReq, Addressing, Event, EventKind, ListKind, Matching, MdOptions, MeOptions, NiFail, NiKind,
    ProcessId, PtOptions,
};
use rgasnet_portals::udp::{UdpConfig, UdpEndpoint, DEFAULT_SPIN};
use rgasnet_portals::Region;

/// Bound on every wait: generous, since the machine is shared; a hang becomes a failure.
pub(crate) const T: Duration = Duration::from_secs(30);
pub(crate) const JOB: u64 = 0x7e57_0000_0000_0002;
pub(crate) const UID: u32 = 77;
pub(crate) const KIND: NiKind = NiKind {
    matching: Matching::Matching,
    addressing: Addressing::Physical,
};
pub(crate) const BITS: u64 = 0x00c0_ffee;

pub(crate) fn config(peer_timeout: Duration) -> InterfaceConfig {
    InterfaceConfig {
        transport: TransportConfig {
            job_key: JOB,
            peer_timeout,
            ..TransportConfig::default()
        },
        uid: UID,
        spin: DEFAULT_SPIN,
        background_progress: Some(rgasnet_portals::interface::DEFAULT_BACKGROUND_PROGRESS),
    }
}

pub(crate) fn open_with(udp: &UdpConfig, peer_timeout: Duration) -> Ni {
    open_configured(udp, config(peer_timeout))
}

/// An NI of [`KIND`] on a new interface with `cfg`, bound as `udp` says.
pub(crate) fn open_configured(udp: &UdpConfig, cfg: InterfaceConfig) -> Ni {
    let ep = UdpEndpoint::bind(udp).unwrap();
    let iface = Interface::new(cfg, Box::new(ep)).unwrap();
    iface.ni_init(KIND, None).unwrap()
}

pub(crate) fn open() -> Ni {
    open_with(&UdpConfig::default(), Duration::from_secs(30))
}

/// Makes progress on an interface from a background thread until dropped (a target whose
/// application is busy elsewhere still answers).
pub(crate) struct Progress {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Progress {
    pub(crate) fn start(iface: &Interface) -> Progress {
        let stop = Arc::new(AtomicBool::new(false));
        let (s, i) = (stop.clone(), iface.clone());
        let thread = std::thread::spawn(move || {
            i.wait_for(None, |_| Ok(s.load(Ordering::Relaxed).then_some(())))
                .unwrap();
        });
        Progress {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let r = t.join();
            if !std::thread::panicking() {
                r.expect("progress thread");
            }
        }
    }
}

/// A target: an EQ, portal 0 with one ME over `region` for puts and gets matching `BITS`.
pub(crate) fn target(ni: &Ni, region: &Region, options: MeOptions) -> EqHandle {
    target_on(ni, region, options, PtOptions::empty())
}

/// [`target`] on a portal allocated with `pt_options`.
pub(crate) fn target_on(
    ni: &Ni,
    region: &Region,
    options: MeOptions,
    pt_options: PtOptions,
) -> EqHandle {
    target_counted(ni, region, options, pt_options, None)
}

/// [`target_on`] whose entry counts on `ct`.
pub(crate) fn target_counted(
    ni: &Ni,
    region: &Region,
    options: MeOptions,
    pt_options: PtOptions,
    ct: Option<CtHandle>,
) -> EqHandle {
    let eq = ni.eq_alloc(64).unwrap();
    assert_eq!(ni.pt_alloc(pt_options, Some(eq), 0).unwrap(), 0);
    let spec = MeSpec {
        region: region.clone(),
        offset: 0,
        length: region.len() as u64,
        ct,
        uid: UID,
        options: options | MeOptions::EVENT_LINK_DISABLE,
        match_id: ProcessId::ANY_PHYS,
        match_bits: BITS,
        ignore_bits: 0,
        min_free: 0,
    };
    ni.me_append(0, spec, ListKind::Priority, 0x7a).unwrap();
    eq
}

pub(crate) fn md(
    ni: &Ni,
    region: &Region,
    eq: Option<EqHandle>,
) -> rgasnet_portals::engine::MdHandle {
    ni.md_bind(MdSpec {
        region: region.clone(),
        offset: 0,
        length: region.len() as u64,
        options: MdOptions::empty(),
        eq,
        ct: None,
    })
    .unwrap()
}

/// An `IN_PLACE` MD over all of `region` (puts of 4 KiB and more leave from the region itself),
/// reporting ACKs (not SENDs) to `eq`.
pub(crate) fn in_place_md(
    ni: &Ni,
    region: &Region,
    eq: EqHandle,
) -> rgasnet_portals::engine::MdHandle {
    ni.md_bind(MdSpec {
        region: region.clone(),
        offset: 0,
        length: region.len() as u64,
        options: MdOptions::IN_PLACE | MdOptions::EVENT_SEND_DISABLE,
        eq: Some(eq),
        ct: None,
    })
    .unwrap()
}

pub(crate) fn next(ni: &Ni, eq: EqHandle) -> Event {
    match ni.eq_wait(eq, Some(T)).expect("an event within the bound") {
        EqGet::Event(ev) => ev,
        other => panic!("expected an event, got {other:?}"),
    }
}

pub(crate) fn to(ni: &Ni, offset: u64) -> RemoteAddr {
    RemoteAddr {
        target: ProcessId::Phys(ni.interface().phys_id()),
        pt_index: 0,
        match_bits: BITS,
        remote_offset: offset,
    }
}

/// An event of `kind` with every field neutral, to be filled per test.
pub(crate) fn event(kind: EventKind) -> Event {
    Event {
        kind,
        start: 0,
        user_ptr: 0,
        hdr_data: 0,
        match_bits: BITS,
        rlength: 0,
        mlength: 0,
        remote_offset: 0,
        initiator: ProcessId::ANY_PHYS,
        uid: UID,
        pt_index: 0,
        list: ListKind::Priority,
        ni_fail: NiFail::Ok,
        atomic_op: None,
        atomic_type: None,
    }
}

pub(crate) fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 11) as u8)
        .collect()
}

pub(crate) fn phys(ni: &Ni) -> ProcessId {
    ProcessId::Phys(ni.interface().phys_id())
}

/// A get of `len` bytes from `remote` into byte `local_offset` of `md` (user pointer 1).
pub(crate) fn get_args(
    md: rgasnet_portals::engine::MdHandle,
    local_offset: u64,
    len: u64,
    remote: RemoteAddr,
) -> GetArgs {
    GetArgs {
        md,
        local_offset,
        length: len,
        remote,
        user_ptr: 1,
    }
}

pub(crate) fn put_args(
    md: rgasnet_portals::engine::MdHandle,
    len: u64,
    remote: RemoteAddr,
) -> PutArgs {
    PutArgs {
        md,
        local_offset: 0,
        length: len,
        ack_req: AckReq::Ack,
        remote,
        user_ptr: 0x51,
        hdr_data: 0xdada,
    }
}
