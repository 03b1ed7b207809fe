//! Bringing up the network interface: the native Portals engine on a UDP socket, and the
//! address it binds.
//!
//! **Which address.** `RGASNET_IFACE` (or `PTL_IFACE_NAME`) names it when set. Otherwise a job
//! whose ranks all run on this host binds loopback, and a job on several hosts binds the
//! interface its bootstrap connection to `rgasnetrun` leaves through — the one that reaches
//! the launcher, and with it the other hosts, as GASNet's udp-conduit and MPI launchers choose.
//! Without such a connection (PMI, MPI) it is the address this host's name resolves to (or,
//! when it resolves to none, the first interface that is up and not loopback). After
//! the address exchange, a rank whose address (or a peer's on another host) is loopback fails
//! at start-up with an error naming both hosts, instead of meeting its peers only at the peer
//! timeout.

use std::net::{Ipv4Addr, ToSocketAddrs};
use std::time::Duration;

use rgasnet_launcher::Bootstrap;
use rgasnet_portals::interface::{Interface, InterfaceConfig};
use rgasnet_portals::transport::TransportConfig;
use rgasnet_portals::types::{NiKind, PhysId};
use rgasnet_portals::udp::{UdpConfig, UdpEndpoint};
use rgasnet_portals::AnyNi;

use crate::config::{Config, Polling, PortalsEngine};
use crate::error::InitError;

/// Opens this rank's NIs of kinds `am` and `rma` on the engine the configuration names.
pub(crate) fn open_nis(
    config: &Config,
    boot: &Bootstrap,
    am: NiKind,
    rma: NiKind,
) -> Result<(AnyNi, AnyNi), InitError> {
    match config.portals {
        PortalsEngine::Native => {
            let iface = open_interface(config, boot)?;
            Ok((
                iface.ni_init(am, None)?.into(),
                iface.ni_init(rma, None)?.into(),
            ))
        }
        PortalsEngine::Reference => open_library_nis(config, am, rma),
    }
}

/// The NIs of a Portals library (`RGASNET_PORTALS=ref`). The library picks its interface
/// itself: `PTL_IFACE_NAME` for the reference implementation, which `RGASNET_IFACE` sets
/// when given.
#[cfg(feature = "ref-impl")]
fn open_library_nis(config: &Config, am: NiKind, rma: NiKind) -> Result<(AnyNi, AnyNi), InitError> {
    use rgasnet_portals::refimpl::ni::LibNi;
    if let Some(name) = &config.iface {
        if std::env::var_os("PTL_IFACE_NAME").is_none() {
            std::env::set_var("PTL_IFACE_NAME", name);
        }
    }
    let am = LibNi::init(am)?;
    let rma = LibNi::init(rma)?;
    // The rank map holds one id per rank, exchanged once: both NIs must have it.
    let (a, r) = (am.get_phys_id()?, rma.get_phys_id()?);
    if a != r {
        return Err(InitError::LibraryIds {
            am: format!("{}:{}", a.nid, a.pid),
            rma: format!("{}:{}", r.nid, r.pid),
        });
    }
    Ok((am.into(), rma.into()))
}

/// Portal index of the connection warm-up ([`connect_in_turn`]), free again afterwards.
#[cfg(feature = "ref-impl")]
const WARM_UP_PT: u32 = 10;

/// How long a warm-up put waits for its acknowledgement.
#[cfg(feature = "ref-impl")]
const WARM_UP_WAIT: Duration = Duration::from_secs(30);

/// Over a Portals library, makes every rank connect to every rank (itself included) on each
/// NI, one rank at a time, before anything else is sent. The reference implementation's
/// UDP transport connects to a peer on the first operation to it, and threads of one process
/// that make their first operations to a peer at once wait forever inside `PtlPut` for the
/// connection (`tests/src/bin/ref_connect.rs` reproduces it). One rank's puts at a time,
/// each answered, never overlap.
/// A no-op on the native engine, whose transport needs no connection.
pub(crate) fn connect_in_turn(boot: &Bootstrap, nis: [&AnyNi; 2]) -> Result<(), InitError> {
    #[cfg(feature = "ref-impl")]
    {
        let nis: Vec<&rgasnet_portals::any_ni::LibraryNi> = nis
            .iter()
            .filter_map(|ni| match ni {
                AnyNi::Library(l) => Some(l),
                AnyNi::Native(_) => None,
            })
            .collect();
        if nis.is_empty() {
            return Ok(());
        }
        let targets = nis
            .iter()
            .map(|ni| warm_up_target(ni.ni()))
            .collect::<Result<Vec<_>, _>>()?;
        boot.barrier()?;
        for turn in 0..boot.size() {
            if turn == boot.rank() {
                for ni in &nis {
                    connect_all(ni.ni(), boot.size())?;
                }
            }
            boot.barrier()?;
        }
        for (ni, entry) in nis.iter().zip(targets) {
            match ni.ni().kind().matching {
                rgasnet_portals::Matching::Matching => ni.ni().me_unlink(entry)?,
                rgasnet_portals::Matching::NoMatching => ni.ni().le_unlink(entry)?,
            }
            ni.ni().pt_free(WARM_UP_PT)?;
        }
    }
    #[cfg(not(feature = "ref-impl"))]
    let _ = (boot, nis);
    Ok(())
}

/// The entry the warm-up puts land on (no bytes, no events).
#[cfg(feature = "ref-impl")]
fn warm_up_target(
    ni: &rgasnet_portals::refimpl::ni::LibNi,
) -> Result<rgasnet_portals::engine::MeHandle, InitError> {
    use rgasnet_portals::engine::{LeSpec, MeSpec};
    use rgasnet_portals::{ListKind, Matching, MeOptions, ProcessId, PtOptions, Region, UID_ANY};
    ni.pt_alloc(PtOptions::empty(), None, WARM_UP_PT)?;
    let options = MeOptions::OP_PUT
        | MeOptions::EVENT_COMM_DISABLE
        | MeOptions::EVENT_LINK_DISABLE
        | MeOptions::EVENT_UNLINK_DISABLE;
    let region = Region::new(0);
    let entry = match ni.kind().matching {
        Matching::Matching => ni.me_append(
            WARM_UP_PT,
            MeSpec {
                region,
                offset: 0,
                length: 0,
                ct: None,
                uid: UID_ANY,
                options,
                match_id: ProcessId::ANY_RANK,
                match_bits: 0,
                ignore_bits: u64::MAX,
                min_free: 0,
            },
            ListKind::Priority,
            0,
        )?,
        Matching::NoMatching => ni.le_append(
            WARM_UP_PT,
            LeSpec {
                region,
                offset: 0,
                length: 0,
                ct: None,
                uid: UID_ANY,
                options,
            },
            ListKind::Priority,
            0,
        )?,
    };
    Ok(entry)
}

/// This rank's warm-up turn: an empty put to every rank, each acknowledged before the next.
#[cfg(feature = "ref-impl")]
fn connect_all(ni: &rgasnet_portals::refimpl::ni::LibNi, size: u32) -> Result<(), InitError> {
    use rgasnet_portals::engine::{EqGet, MdSpec, PutArgs, RemoteAddr};
    use rgasnet_portals::{AckReq, EventKind, MdOptions, NiFail, ProcessId, Region};
    let eq = ni.eq_alloc(16)?;
    let md = ni.md_bind(MdSpec {
        region: Region::new(0),
        offset: 0,
        length: 0,
        options: MdOptions::EVENT_SEND_DISABLE,
        eq: Some(eq),
        ct: None,
    })?;
    for peer in 0..size {
        ni.put(&PutArgs {
            md,
            local_offset: 0,
            length: 0,
            ack_req: AckReq::Ack,
            remote: RemoteAddr {
                target: ProcessId::Rank(peer),
                pt_index: WARM_UP_PT,
                match_bits: 0,
                remote_offset: 0,
            },
            user_ptr: u64::from(peer),
            hdr_data: 0,
        })?;
        let failed = |why: String| InitError::LibraryConnect { peer, why };
        match ni.eq_wait(eq, Some(WARM_UP_WAIT)) {
            Ok(EqGet::Event(ev)) if ev.kind == EventKind::Ack && ev.ni_fail == NiFail::Ok => {}
            Ok(other) => return Err(failed(format!("it answered {other:?}"))),
            Err(rgasnet_portals::PtlError::EqEmpty) => {
                return Err(failed(format!(
                    "no acknowledgement within {} s",
                    WARM_UP_WAIT.as_secs()
                )))
            }
            Err(e) => return Err(failed(e.to_string())),
        }
    }
    ni.md_release(md)?;
    ni.eq_free(eq)?;
    Ok(())
}

#[cfg(not(feature = "ref-impl"))]
fn open_library_nis(_: &Config, _: NiKind, _: NiKind) -> Result<(AnyNi, AnyNi), InitError> {
    Err(InitError::NoReferenceEngine)
}

/// Opens this rank's interface of the native engine.
fn open_interface(config: &Config, boot: &Bootstrap) -> Result<Interface, InitError> {
    let bind_err = |e: rgasnet_portals::udp::UdpError| {
        rgasnet_portals::PtlError::arg("udp bind", e.to_string())
    };
    let mut udp = match &config.iface {
        Some(_) => UdpConfig::from_lookup(|name| match name {
            crate::config::IFACE => config.iface.clone(),
            _ => None,
        })
        .map_err(bind_err)?,
        None => UdpConfig {
            addr: default_addr(
                boot.host_ranks().len() < boot.size() as usize,
                boot.local_ip(),
                host_addr,
            )?,
            ..UdpConfig::default()
        },
    };
    udp.mtu = config.mtu.0;
    let endpoint = UdpEndpoint::bind(&udp).map_err(bind_err)?;
    let transport = TransportConfig {
        job_key: boot.job_key(),
        peer_timeout: Duration::from_secs(config.peer_timeout_secs),
        ..TransportConfig::for_datagram(endpoint.max_datagram())
    };
    let iface = Interface::new(
        InterfaceConfig {
            transport,
            uid: 0,
            spin: rgasnet_portals::udp::DEFAULT_SPIN,
            // Started by `Client::init` once it knows whether any peer is remote.
            background_progress: None,
        },
        Box::new(endpoint),
    )?;
    Ok(iface)
}

/// How this rank's waits poll ([`crate::config::WaitPoll`]): the ranks sharing its host are
/// those with its host id (`hosts`, by rank), its CPUs those it may run on.
pub(crate) fn wait_polling(config: &Config, rank: u32, hosts: &[String]) -> Polling {
    let mine = hosts.get(rank as usize);
    let host_ranks = hosts.iter().filter(|h| Some(*h) == mine).count();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    config.wait_poll.polling(host_ranks, cpus)
}

/// The address to bind without `RGASNET_IFACE` (see the module docs): loopback for a job on
/// one host; else the bootstrap connection's local address; else `host_addr()`.
pub(crate) fn default_addr(
    several_hosts: bool,
    bootstrap_ip: Option<Ipv4Addr>,
    host_addr: impl FnOnce() -> Option<Ipv4Addr>,
) -> Result<Ipv4Addr, InitError> {
    if !several_hosts {
        return Ok(Ipv4Addr::LOCALHOST);
    }
    if let Some(ip) = bootstrap_ip {
        return Ok(ip);
    }
    host_addr().ok_or_else(|| InitError::NoNetworkAddress { host: host_name() })
}

/// This host's name (the first part of its host id).
pub(crate) fn host_name() -> String {
    rgasnet_pshm::host_id()
        .ok()
        .and_then(|id| id.split('/').next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

/// The first non-loopback IPv4 address this host's name resolves to; else that of the first
/// interface that is up and not loopback.
fn host_addr() -> Option<Ipv4Addr> {
    let by_name = (host_name().as_str(), 0)
        .to_socket_addrs()
        .ok()
        .into_iter()
        .flatten()
        .find_map(|a| match a.ip() {
            std::net::IpAddr::V4(v4) if !v4.is_loopback() && !v4.is_unspecified() => Some(v4),
            _ => None,
        });
    by_name.or_else(rgasnet_portals::udp::first_external_ipv4)
}

/// Checks that `me` can reach every peer and be reached: ranks on different hosts (`hosts`,
/// one id per rank, `name/boot-id`) must not use loopback addresses.
pub(crate) fn check_reachable(
    me: u32,
    peers: &[PhysId],
    hosts: &[String],
) -> Result<(), InitError> {
    let ip = |p: &PhysId| Ipv4Addr::from(p.nid);
    let name = |h: &String| h.split('/').next().unwrap_or_default().to_string();
    let (Some(mine), Some(my_host)) = (peers.get(me as usize), hosts.get(me as usize)) else {
        return Ok(());
    };
    for (rank, (peer, host)) in peers.iter().zip(hosts).enumerate() {
        if host == my_host || !(ip(mine).is_loopback() || ip(peer).is_loopback()) {
            continue;
        }
        return Err(InitError::UnreachablePeer {
            rank: me,
            host: name(my_host),
            addr: format!("{}:{}", ip(mine), mine.pid),
            peer: rank as u32,
            peer_host: name(host),
            peer_addr: format!("{}:{}", ip(peer), peer.pid),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_host_binds_loopback_several_follow_the_bootstrap() {
        let lan = Ipv4Addr::new(10, 77, 0, 11);
        let never = || panic!("the host name is asked only without a bootstrap address");
        assert_eq!(
            default_addr(false, Some(lan), never).unwrap(),
            Ipv4Addr::LOCALHOST
        );
        assert_eq!(default_addr(true, Some(lan), never).unwrap(), lan);
        assert_eq!(default_addr(true, None, || Some(lan)).unwrap(), lan);
        let e = default_addr(true, None, || None).unwrap_err().to_string();
        assert!(e.contains("RGASNET_IFACE"), "{e}");
    }

    #[test]
    fn loopback_across_hosts_is_an_error_naming_both() {
        let at = |a: [u8; 4], pid| PhysId {
            nid: u32::from(Ipv4Addr::from(a)),
            pid,
        };
        let hosts: Vec<String> = ["h1/b", "h1/b", "h2/b"].map(String::from).to_vec();
        let lan = [
            at([10, 0, 0, 1], 5),
            at([10, 0, 0, 1], 6),
            at([10, 0, 0, 2], 7),
        ];
        assert!(check_reachable(0, &lan, &hosts).is_ok());
        // Loopback between ranks of one host is fine.
        let same = [
            at([127, 0, 0, 1], 5),
            at([127, 0, 0, 1], 6),
            at([10, 0, 0, 2], 7),
        ];
        let e = check_reachable(2, &same, &hosts).unwrap_err().to_string();
        assert!(
            e.contains("h1") && e.contains("h2") && e.contains("127.0.0.1:5"),
            "{e}"
        );
        assert!(e.contains("RGASNET_IFACE"), "{e}");
        let e = check_reachable(0, &same, &hosts).unwrap_err().to_string();
        assert!(e.contains("rank 0 on host h1"), "{e}");
    }
}
