//! Bringing up the network interface: the native Portals engine on a UDP socket bound to the
//! configured interface.

use std::time::Duration;

use rgasnet_launcher::Bootstrap;
use rgasnet_portals::interface::{Interface, InterfaceConfig};
use rgasnet_portals::transport::TransportConfig;
use rgasnet_portals::udp::{UdpConfig, UdpEndpoint};

use crate::config::Config;
use crate::error::InitError;

/// Opens this rank's interface.
pub(crate) fn open_interface(config: &Config, boot: &Bootstrap) -> Result<Interface, InitError> {
    let udp = UdpConfig::from_lookup(|name| match name {
        crate::config::IFACE => config.iface.clone(),
        _ => None,
    })
    .map_err(|e| rgasnet_portals::PtlError::arg("udp bind", e.to_string()))?;
    let endpoint = UdpEndpoint::bind(&udp)
        .map_err(|e| rgasnet_portals::PtlError::arg("udp bind", e.to_string()))?;
    let transport = TransportConfig {
        job_key: boot.job_key(),
        peer_timeout: Duration::from_secs(config.peer_timeout_secs),
        ..TransportConfig::default()
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
