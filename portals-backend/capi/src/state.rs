//! The process's Portals state: the library's init count, the one interface (UDP socket) its
//! NIs share, the NIs, and the tables of their objects.

use std::sync::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use rgasnet_portals::engine::{CtHandle, EqHandle, MdHandle, MeHandle};
use rgasnet_portals::interface::{Interface, InterfaceConfig, Ni};
use rgasnet_portals::transport::TransportConfig;
use rgasnet_portals::types::{MdOptions, NiKind, NiLimits};
use rgasnet_portals::udp::{UdpConfig, UdpEndpoint, UdpError};
use rgasnet_portals::PtlError;

use crate::table::{Table, KIND_CT, KIND_EQ, KIND_LE, KIND_MD, KIND_ME};

/// `RGASNET_PEER_TIMEOUT`: seconds a silent peer is waited for before its operations fail
/// with `PTL_NI_UNDELIVERABLE` (default 30), as for the conduit.
pub const ENV_PEER_TIMEOUT: &str = "RGASNET_PEER_TIMEOUT";
/// `RGASNET_PROGRESS_US`: the background progress period in microseconds (default 1000).
pub const ENV_PROGRESS_US: &str = "RGASNET_PROGRESS_US";
/// `RGASNET_WAIT_POLL_US`: microseconds a wait keeps polling after the last arrival before it
/// sleeps in the kernel (default 1000), as for the conduit.
pub const ENV_WAIT_POLL_US: &str = "RGASNET_WAIT_POLL_US";
/// The job key of processes not started by `rgasnetrun` ("portals4" in ASCII): processes of
/// one job must agree on it, and Portals has no job to take it from.
pub const DEFAULT_JOB_KEY: u64 = 0x706f_7274_616c_7334;
/// How long closing the last NI waits for its messages (acknowledgements of peers'
/// operations among them) to be delivered.
const CLOSE_DRAIN: Duration = Duration::from_secs(2);
/// How long closing the last NI waits for silence from its peers.
const CLOSE_QUIET: Duration = Duration::from_millis(100);

/// Why opening the interface failed.
#[derive(Debug)]
pub enum OpenError {
    /// The port (`pid`) is taken.
    PidInUse(u32),
    /// A variable or the socket layer failed; the message says which.
    Other(String),
}

/// What an MD handle stands for.
#[derive(Debug, Clone, Copy)]
pub enum MdRef {
    /// An engine MD over the caller's memory.
    Bound(MdHandle),
    /// A window over more memory than can be viewed at once (an index into
    /// [`Lib::windows`]).
    Window(usize),
}

/// An MD over a range larger than [`WINDOW_MIN`] (`start` NULL and `length` `PTL_SIZE_MAX`
/// is the usual "all of memory"): each operation binds an engine MD over just the bytes it
/// moves (a piece), released once nothing is pending on it.
#[derive(Debug)]
pub struct Window {
    /// The C address of byte 0.
    pub start: usize,
    /// Its length.
    pub length: u64,
    /// The MD's options.
    pub options: MdOptions,
    /// Its event queue.
    pub eq: Option<EqHandle>,
    /// Its counting event.
    pub ct: Option<CtHandle>,
    /// Engine MDs of operations that may still be pending.
    pub pieces: Vec<MdHandle>,
    /// An empty engine MD with the window's EQ and CT, bound for the window's whole life: it
    /// holds the engine's references on them, as a bound MD's would (freeing them first is
    /// then deferred, not a failure of the next operation).
    pub anchor: MdHandle,
}

/// MDs at least this long are windows ([`Window`]).
pub const WINDOW_MIN: u64 = 1 << 40;

/// One open NI and how many `PtlNIInit`s it answered.
pub struct NiSlot {
    /// The engine's NI.
    pub ni: Ni,
    /// `PtlNIInit` calls not yet matched by `PtlNIFini`.
    pub refs: u32,
}

/// Everything the C API keeps.
pub struct Lib {
    /// `PtlInit` calls not yet matched by `PtlFini`.
    pub init: u32,
    /// The interface the NIs share (open while any NI is).
    pub iface: Option<Interface>,
    /// The NIs, by [`NiKind::index`].
    pub nis: [Option<NiSlot>; 4],
    /// Event queues.
    pub eqs: Table<EqHandle>,
    /// Counting events.
    pub cts: Table<CtHandle>,
    /// Memory descriptors.
    pub mds: Table<MdRef>,
    /// The windows among them.
    pub windows: Vec<Option<Window>>,
    /// Match list entries.
    pub mes: Table<MeHandle>,
    /// List entries.
    pub les: Table<MeHandle>,
    /// Event queues the program freed while a PT or MD still used them (the standard lets it
    /// free them first): freed in the engine when the last user goes.
    pub zombie_eqs: Vec<(usize, EqHandle)>,
    /// Counting events freed while an MD or entry still counted on them (likewise).
    pub zombie_cts: Vec<(usize, CtHandle)>,
}

static LIB: RwLock<Lib> = RwLock::new(Lib {
    init: 0,
    iface: None,
    nis: [None, None, None, None],
    eqs: Table::new(KIND_EQ),
    cts: Table::new(KIND_CT),
    mds: Table::new(KIND_MD),
    windows: Vec::new(),
    mes: Table::new(KIND_ME),
    les: Table::new(KIND_LE),
    zombie_eqs: Vec::new(),
    zombie_cts: Vec::new(),
});

/// The state, for reading (object lookups, operations).
pub fn read() -> RwLockReadGuard<'static, Lib> {
    LIB.read().unwrap_or_else(|p| p.into_inner())
}

/// The state, for changing (objects made and freed).
pub fn write() -> RwLockWriteGuard<'static, Lib> {
    LIB.write().unwrap_or_else(|p| p.into_inner())
}

impl Lib {
    /// The NI at `index`, if open.
    pub fn ni(&self, index: usize) -> Option<&Ni> {
        self.nis.get(index)?.as_ref().map(|s| &s.ni)
    }

    /// Stores a window; its index.
    pub fn add_window(&mut self, w: Window) -> usize {
        match self.windows.iter().position(Option::is_none) {
            Some(i) => {
                self.windows[i] = Some(w);
                i
            }
            None => {
                self.windows.push(Some(w));
                self.windows.len() - 1
            }
        }
    }

    /// Frees the zombie event queues nothing uses any more.
    pub fn reap(&mut self) {
        let nis: Vec<Option<Ni>> = (0..4).map(|i| self.ni(i).cloned()).collect();
        self.zombie_eqs.retain(|(ni, eq)| match &nis[*ni] {
            Some(n) => n.eq_free(*eq).is_err(),
            None => false,
        });
        self.zombie_cts.retain(|(ni, ct)| match &nis[*ni] {
            Some(n) => n.ct_free(*ct).is_err(),
            None => false,
        });
    }

    /// Opens (or counts one more use of) the NI of `kind`; returns its limits.
    pub fn ni_init(
        &mut self,
        kind: NiKind,
        pid: Option<u32>,
        desired: Option<NiLimits>,
    ) -> Result<NiLimits, OpenError> {
        let index = usize::from(kind.index());
        if let Some(slot) = self.nis[index].as_mut() {
            slot.refs += 1;
            return Ok(slot.ni.limits());
        }
        let iface = match &self.iface {
            Some(i) => {
                if let Some(p) = pid {
                    if i.phys_id().pid != p {
                        return Err(OpenError::PidInUse(p));
                    }
                }
                i.clone()
            }
            None => {
                let i = open_interface(pid)?;
                self.iface = Some(i.clone());
                i
            }
        };
        let ni = iface
            .ni_init(kind, desired)
            .map_err(|e| OpenError::Other(e.to_string()))?;
        let limits = ni.limits();
        self.nis[index] = Some(NiSlot { ni, refs: 1 });
        Ok(limits)
    }

    /// Drops one use of NI `index`; the last one frees its objects and closes it, and the
    /// last NI drains and closes the interface. `false` if the NI is not open.
    pub fn ni_fini(&mut self, index: usize) -> bool {
        let Some(slot) = self.nis.get_mut(index).and_then(Option::as_mut) else {
            return false;
        };
        slot.refs -= 1;
        if slot.refs > 0 {
            return true;
        }
        // The last NI: serve what peers still send (their operations on this NI among it)
        // before anything closes, while the program's memory is still valid.
        if self.nis.iter().flatten().count() == 1 {
            if let Some(iface) = &self.iface {
                drain(iface);
            }
        }
        let Some(slot) = self.nis[index].take() else {
            return false;
        };
        // The tables' entries of this NI go with it (the engine frees the objects).
        self.zombie_eqs.retain(|(ni, _)| *ni != index);
        self.zombie_cts.retain(|(ni, _)| *ni != index);
        self.eqs.sweep(|o| o.ni == index);
        self.cts.sweep(|o| o.ni == index);
        let windows = &mut self.windows;
        self.mds.sweep(|o| {
            let gone = o.ni == index;
            if let (true, MdRef::Window(w)) = (gone, o.h) {
                if let Some(slot) = windows.get_mut(w) {
                    *slot = None;
                }
            }
            gone
        });
        self.mes.sweep(|o| o.ni == index);
        self.les.sweep(|o| o.ni == index);
        // Errors closing an NI are its objects' (already gone); nothing to report.
        let _ = slot.ni.fini();
        if self.nis.iter().all(Option::is_none) {
            if let Some(iface) = self.iface.take() {
                // What closing the NI made due (acknowledgements) goes out before the socket.
                iface.flush_acknowledgements();
                let _ = iface.progress();
            }
        }
        true
    }

    /// Closes every NI (`PtlFini`).
    pub fn close_all(&mut self) {
        for i in 0..4 {
            while self.ni_fini(i) {}
        }
    }
}

/// Makes progress, as a NIC would before it is switched off, until everything the interface
/// sent has been acknowledged and no datagram arrived for [`CLOSE_QUIET`] (peers' operations
/// still on their way get answered instead of waiting out their peer timeout), for at most
/// [`CLOSE_DRAIN`].
fn drain(iface: &Interface) {
    let start = Instant::now();
    let mut seen = iface.transport_stats().datagrams_in;
    let mut quiet_since = start;
    iface.flush_acknowledgements();
    while start.elapsed() < CLOSE_DRAIN {
        if iface.progress().is_err() {
            return;
        }
        let now_seen = iface.transport_stats().datagrams_in;
        if now_seen != seen {
            seen = now_seen;
            quiet_since = Instant::now();
        } else if iface.all_acknowledged() && quiet_since.elapsed() >= CLOSE_QUIET {
            break;
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    iface.flush_acknowledgements();
}

/// Reads a number from the environment, with `default` when unset.
fn env_number(var: &str, default: u64, min: u64, max: u64) -> Result<u64, OpenError> {
    match std::env::var(var) {
        Err(_) => Ok(default),
        Ok(v) => match v.trim().parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(OpenError::Other(format!(
                "{var}={v:?}: expected a whole number from {min} to {max}"
            ))),
        },
    }
}

/// The job key: `rgasnetrun`'s, else [`DEFAULT_JOB_KEY`].
fn job_key() -> Result<u64, OpenError> {
    match std::env::var(rgasnet_launcher::env::JOB_KEY) {
        Err(_) => Ok(DEFAULT_JOB_KEY),
        Ok(v) => rgasnet_launcher::env::parse_job_key(&v).map_err(|e| {
            OpenError::Other(format!("{}={v:?}: {e}", rgasnet_launcher::env::JOB_KEY))
        }),
    }
}

/// Binds the process's UDP socket and starts its interface.
fn open_interface(pid: Option<u32>) -> Result<Interface, OpenError> {
    let mut udp = UdpConfig::from_env().map_err(|e| OpenError::Other(e.to_string()))?;
    if let Some(p) = pid {
        udp.port = u16::try_from(p).map_err(|_| OpenError::PidInUse(p))?;
    }
    let endpoint = UdpEndpoint::bind(&udp).map_err(|e| match e {
        UdpError::Socket { ref source, .. }
            if source.kind() == std::io::ErrorKind::AddrInUse && pid.is_some() =>
        {
            OpenError::PidInUse(pid.unwrap_or(0))
        }
        e => OpenError::Other(e.to_string()),
    })?;
    let peer_timeout = env_number(ENV_PEER_TIMEOUT, 30, 1, 86_400)?;
    let progress_us = env_number(ENV_PROGRESS_US, 1000, 10, 10_000_000)?;
    let poll_us = env_number(ENV_WAIT_POLL_US, 1000, 0, 10_000_000)?;
    let transport = TransportConfig {
        job_key: job_key()?,
        peer_timeout: Duration::from_secs(peer_timeout),
        ..TransportConfig::for_datagram(endpoint.max_datagram())
    };
    let iface = Interface::new(
        InterfaceConfig {
            transport,
            uid: nix::unistd::getuid().as_raw(),
            spin: rgasnet_portals::udp::DEFAULT_SPIN,
            background_progress: Some(Duration::from_micros(progress_us)),
        },
        Box::new(endpoint),
    )
    .map_err(|e: PtlError| OpenError::Other(e.to_string()))?;
    // A wait spins for its first microseconds (a loopback round trip), then polls on,
    // yielding the CPU between rounds, for the budget, and only then sleeps in the kernel:
    // waking a sleeping process costs tens of microseconds on a virtual machine.
    let budget = Duration::from_micros(poll_us);
    iface.set_polling(budget.min(rgasnet_portals::udp::DEFAULT_SPIN), budget);
    Ok(iface)
}
