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
use rgasnet_portals::types::PhysId;
use rgasnet_portals::udp::{UdpConfig, UdpEndpoint};

use crate::config::{Config, Polling};
use crate::error::InitError;

/// Opens this rank's interface.
pub(crate) fn open_interface(config: &Config, boot: &Bootstrap) -> Result<Interface, InitError> {
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
