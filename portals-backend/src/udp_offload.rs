//! UDP segmentation offload and the link MTU: how the UDP layer moves bulk data over links
//! whose MTU is far below the 64 KiB datagrams loopback carries.
//!
//! On loopback (MTU 65 536) a 65 000-byte datagram crosses the stack whole. On Ethernet (MTU
//! 1 500) the same datagram leaves as 45 IP fragments, and losing one loses all 45; sending
//! MTU-sized datagrams instead costs a system call and a pass through the stack for every
//! 1 472 bytes. Linux offers both halves of a way out:
//! - **GSO** (`UDP_SEGMENT`, Linux 4.18): one `sendmsg` hands the kernel a buffer of equal
//!   segments (the last may be shorter), which leave as separate MTU-sized datagrams, cut as
//!   late as the device allows (by the NIC itself where it can).
//! - **GRO** (`UDP_GRO`, Linux 5.0): the receiving socket takes such a train of datagrams in
//!   one `recvmsg`, with the segment size in a control message.
//!
//! Between two network namespaces joined by veth (MTU 1 500) a raw UDP stream moved 311 MB/s
//! in 1 472-byte datagrams, 562 MB/s in fragmented 65 000-byte ones, and 5.5 GB/s with GSO and
//! GRO (`benches/perf/mtu.md`).
//!
//! Every segment is a complete datagram of the transport (its own header), so a receiver
//! without GRO, or a kernel without GSO, still works: it just sees one datagram per segment.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::os::fd::RawFd;

use nix::errno::Errno;
use nix::sys::socket::{
    recvmsg, sendmsg, setsockopt, sockopt, ControlMessage, ControlMessageOwned, MsgFlags,
    SockaddrIn,
};

/// IPv4 and UDP headers: what an MTU-sized IP packet leaves for the datagram.
pub const IPV4_UDP_HEADERS: usize = 28;
/// Most segments one GSO send may carry (the kernel's `UDP_MAX_SEGMENTS` since 4.18).
pub const MAX_SEGMENTS: usize = 64;
/// Largest GSO buffer: the UDP length field bounds the whole train.
pub const MAX_TRAIN: usize = 65_507;

/// The MTU of the interface that owns `addr`, from `/sys/class/net/NAME/mtu`. For the
/// unspecified address (a socket bound to every interface) the smallest MTU of the interfaces
/// that are up, so that no datagram is fragmented whichever way it leaves. `None` when it
/// cannot be told (no such interface, no sysfs).
pub fn interface_mtu(addr: Ipv4Addr) -> Option<usize> {
    use nix::net::if_::InterfaceFlags;
    let names: Vec<String> = nix::ifaddrs::getifaddrs()
        .ok()?
        .filter(|i| {
            let ip = i
                .address
                .as_ref()
                .and_then(|a| a.as_sockaddr_in())
                .map(|s| s.ip());
            if addr.is_unspecified() {
                i.flags.contains(InterfaceFlags::IFF_UP) && ip.is_some()
            } else {
                ip == Some(addr)
            }
        })
        .map(|i| i.interface_name)
        .collect();
    names
        .iter()
        .filter_map(|name| {
            std::fs::read_to_string(format!("/sys/class/net/{name}/mtu"))
                .ok()?
                .trim()
                .parse::<usize>()
                .ok()
        })
        .min()
}

/// The largest datagram that crosses a link of `mtu` unfragmented (at most the UDP limit).
pub fn datagram_for_mtu(mtu: usize) -> usize {
    mtu.saturating_sub(IPV4_UDP_HEADERS).min(MAX_TRAIN)
}

/// Asks the kernel to coalesce arriving datagrams (`UDP_GRO`); `false` where it cannot (an
/// older kernel), and datagrams then arrive one by one as before.
pub(crate) fn enable_gro(fd: std::os::fd::BorrowedFd<'_>) -> bool {
    setsockopt(&fd, sockopt::UdpGroSegment, &true).is_ok()
}

/// Sends `train`, segments of `seg` bytes (the last may be shorter), to `to` in one `sendmsg`
/// with `UDP_SEGMENT`. An error of kind [`io::ErrorKind::Unsupported`] means the kernel or
/// the device refuses segmentation offload: the caller sends the segments one by one.
pub(crate) fn send_train(fd: RawFd, train: &[u8], seg: usize, to: SocketAddrV4) -> io::Result<()> {
    let seg16 = u16::try_from(seg).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    let addr = SockaddrIn::from(to);
    let iov = [IoSlice::new(train)];
    let cmsg = [ControlMessage::UdpGsoSegments(&seg16)];
    match sendmsg(fd, &iov, &cmsg, MsgFlags::empty(), Some(&addr)) {
        Ok(_) => Ok(()),
        // EIO: the route's device cannot segment (no checksum offload); EINVAL/ENOPROTOOPT/
        // EOPNOTSUPP: a kernel without UDP GSO.
        Err(Errno::EIO | Errno::EINVAL | Errno::ENOPROTOOPT | Errno::EOPNOTSUPP) => {
            Err(io::Error::from(io::ErrorKind::Unsupported))
        }
        Err(e) => Err(io::Error::from(e)),
    }
}

/// What one `recvmsg` on a socket with GRO took in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Train {
    /// Bytes received.
    pub len: usize,
    /// The sender.
    pub from: SocketAddrV4,
    /// Bytes per datagram: `len` for a single one.
    pub seg: usize,
}

/// Receives a datagram, or a train of coalesced ones, without blocking: `Ok(None)` when
/// nothing waits. A train cut short by `buf` (it cannot be, with a 64 KiB buffer) is an
/// error, since its tail would be lost silently.
pub(crate) fn recv_train(fd: RawFd, buf: &mut [u8]) -> Result<Option<Train>, Errno> {
    thread_local! {
        /// Room for the GRO control message, kept so that a poll allocates nothing.
        static CMSG: std::cell::RefCell<Vec<u8>> = std::cell::RefCell::new(nix::cmsg_space!(i32));
    }
    // A thread that is exiting (a drop that polls once more) or a signal handler receiving on
    // this thread finds the buffer gone or taken: it gets a fresh one.
    CMSG.try_with(|cell| {
        cell.try_borrow_mut()
            .ok()
            .map(|mut cmsg| recv_train_with(fd, buf, &mut cmsg))
    })
    .ok()
    .flatten()
    .unwrap_or_else(|| recv_train_with(fd, buf, &mut nix::cmsg_space!(i32)))
}

fn recv_train_with(fd: RawFd, buf: &mut [u8], cmsg: &mut Vec<u8>) -> Result<Option<Train>, Errno> {
    let mut iov = [IoSliceMut::new(buf)];
    loop {
        let msg = match recvmsg::<SockaddrIn>(fd, &mut iov, Some(&mut *cmsg), MsgFlags::empty()) {
            Ok(m) => m,
            Err(Errno::EAGAIN) => return Ok(None),
            // As in `UdpEndpoint::recv`: an ICMP error of an earlier send concerns no
            // datagram waiting here.
            Err(Errno::EINTR | Errno::ECONNREFUSED) => continue,
            Err(e) => return Err(e),
        };
        if msg.flags.contains(MsgFlags::MSG_TRUNC) {
            return Err(Errno::EMSGSIZE);
        }
        let Some(from) = msg.address else {
            return Err(Errno::EAFNOSUPPORT);
        };
        let mut seg = msg.bytes;
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::UdpGroSegments(s) = c {
                    seg = usize::try_from(s).unwrap_or(0).clamp(1, msg.bytes.max(1));
                }
            }
        }
        return Ok(Some(Train {
            len: msg.bytes,
            from: SocketAddrV4::new(from.ip(), from.port()),
            seg,
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_mtu_and_datagram_sizes() {
        // Loopback's MTU is 65 536 on Linux unless someone changed it; any value will do as
        // long as it is read.
        let lo = interface_mtu(Ipv4Addr::LOCALHOST).expect("loopback has an MTU");
        assert!(lo >= 1280, "{lo}");
        assert_eq!(interface_mtu(Ipv4Addr::new(192, 0, 2, 77)), None);
        assert_eq!(datagram_for_mtu(1500), 1472);
        assert_eq!(datagram_for_mtu(65_536), MAX_TRAIN);
        assert_eq!(datagram_for_mtu(9000), 8972);
    }
}
