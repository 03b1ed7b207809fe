//! The thin UDP layer under the transport: one non-blocking IPv4 socket with large buffers,
//! the choice of address from the environment, and the waiting strategy shared by the engine
//! and the raw baselines.
//!
//! **Waiting.** [`UdpEndpoint::recv_wait`] first spins on `recv` for a short budget, then blocks
//! in `ppoll(2)` until the socket is readable or the deadline passes. The default budget,
//! [`DEFAULT_SPIN`] = 20 µs, covers a loopback round trip (≈ 10–20 µs), so a ping-pong answered
//! promptly never pays a sleep/wake-up (several µs each side), while an idle or waiting process
//! gives its core back almost at once — which matters on a 2-core machine where a spinning
//! process steals the core its peer needs to produce the answer.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags};
use nix::sys::time::TimeSpec;
use socket2::{Domain, Protocol, Socket, Type};

use crate::memory::{OutOfBounds, RegionSpan};
use crate::transport::MAX_UDP_PAYLOAD;
use crate::types::PhysId;

/// Environment variable naming the interface (name like `eth0`, or an IPv4 address).
pub const ENV_IFACE: &str = "RGASNET_IFACE";
/// The reference implementation's variable, honoured when [`ENV_IFACE`] is unset.
pub const ENV_PTL_IFACE: &str = "PTL_IFACE_NAME";
/// Environment variable overriding the MTU of the link (bytes of an IP packet), for paths
/// whose MTU is below the interface's (tunnels, overlays) or to try the small-MTU path on
/// loopback.
pub const ENV_MTU: &str = "RGASNET_MTU";
/// Spin budget of the default waiting strategy (see the module docs).
pub const DEFAULT_SPIN: Duration = Duration::from_micros(20);
/// Socket buffer size asked for (the kernel may grant less: `net.core.[rw]mem_max`).
pub const DEFAULT_SOCKET_BUFFER: usize = 8 << 20;

/// Errors of the UDP layer, each naming its cause.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UdpError {
    /// An environment variable or argument names no usable interface.
    #[error("{var}={value:?}: {reason}")]
    BadIface {
        /// The variable (or `"config"` for an explicit argument).
        var: &'static str,
        /// Its value.
        value: String,
        /// What is wrong.
        reason: String,
    },
    /// Listing the interfaces failed.
    #[error("getifaddrs failed while resolving {var}={value:?}: {source}")]
    Ifaddrs {
        /// The variable.
        var: &'static str,
        /// Its value.
        value: String,
        /// The OS error.
        #[source]
        source: nix::Error,
    },
    /// A socket call failed.
    #[error("{call} on {addr}: {source}")]
    Socket {
        /// The call (socket, bind, setsockopt ...).
        call: &'static str,
        /// The local or remote address concerned.
        addr: SocketAddrV4,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A peer id is not a valid IPv4 socket address (pid above 65535).
    #[error("peer {0:?} is not an IPv4 UDP address (pid must be a port number)")]
    BadPeer(PhysId),
    /// A datagram came from a non-IPv4 address.
    #[error("datagram from non-IPv4 address {0}")]
    NotIpv4(SocketAddr),
    /// The socket stayed unwritable (send buffer full) past the send timeout.
    #[error("send to {0}: socket buffer still full after {1:?}")]
    SendTimeout(SocketAddrV4, Duration),
    /// `ppoll` failed.
    #[error("ppoll: {0}")]
    Poll(#[source] nix::Error),
    /// A gathering send named bytes outside the region span it sends from.
    #[error("gathering send from a region span: {0}")]
    SpanOutOfBounds(#[source] OutOfBounds),
}

/// Where and how to bind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpConfig {
    /// Address to bind.
    pub addr: Ipv4Addr,
    /// Port to bind (0: any).
    pub port: u16,
    /// Send and receive buffer size to ask for.
    pub socket_buffer: usize,
    /// The link MTU to assume instead of the bound interface's ([`ENV_MTU`]).
    pub mtu: Option<usize>,
}

impl Default for UdpConfig {
    fn default() -> Self {
        UdpConfig {
            addr: Ipv4Addr::LOCALHOST,
            port: 0,
            socket_buffer: DEFAULT_SOCKET_BUFFER,
            mtu: None,
        }
    }
}

impl UdpConfig {
    /// The configuration from the process environment ([`ENV_IFACE`], then
    /// [`ENV_PTL_IFACE`]; default 127.0.0.1, port 0).
    pub fn from_env() -> Result<Self, UdpError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// Same as [`UdpConfig::from_env`] with variables read through `lookup` (for tests and
    /// for callers that parsed the environment already).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, UdpError> {
        let mut cfg = UdpConfig::default();
        for var in [ENV_IFACE, ENV_PTL_IFACE] {
            if let Some(value) = lookup(var) {
                cfg.addr = resolve_iface(var, &value)?;
                break;
            }
        }
        cfg.mtu = parse_mtu(lookup(ENV_MTU).as_deref())?;
        Ok(cfg)
    }
}

/// The smallest MTU [`ENV_MTU`] accepts: IPv4's minimum.
pub const MIN_MTU: usize = 576;

/// Parses a value of [`ENV_MTU`] (`None`: unset).
pub fn parse_mtu(value: Option<&str>) -> Result<Option<usize>, UdpError> {
    let Some(value) = value else {
        return Ok(None);
    };
    let max = 65_536;
    match value.trim().parse::<usize>() {
        Ok(mtu) if (MIN_MTU..=max).contains(&mtu) => Ok(Some(mtu)),
        _ => Err(UdpError::BadIface {
            var: ENV_MTU,
            value: value.to_string(),
            reason: format!("expected a link MTU in bytes, {MIN_MTU} to {max}"),
        }),
    }
}

/// Resolves an interface name (via getifaddrs) or a dotted IPv4 address to an address.
/// `var` names the variable the value came from, for the error.
pub fn resolve_iface(var: &'static str, value: &str) -> Result<Ipv4Addr, UdpError> {
    let bad = |reason: String| UdpError::BadIface {
        var,
        value: value.to_string(),
        reason,
    };
    let trimmed = value.trim();
    if trimmed.is_empty() {
        return Err(bad(
            "empty value: expected an interface name or an IPv4 address".into(),
        ));
    }
    if let Ok(ip) = trimmed.parse::<Ipv4Addr>() {
        return Ok(ip);
    }
    if trimmed.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(bad("not a valid IPv4 address".into()));
    }
    let addrs = nix::ifaddrs::getifaddrs().map_err(|source| UdpError::Ifaddrs {
        var,
        value: value.to_string(),
        source,
    })?;
    let mut seen = false;
    for ifa in addrs.filter(|i| i.interface_name == trimmed) {
        seen = true;
        if let Some(sin) = ifa.address.as_ref().and_then(|a| a.as_sockaddr_in()) {
            return Ok(sin.ip());
        }
    }
    Err(bad(if seen {
        "interface has no IPv4 address".into()
    } else {
        "no such network interface".into()
    }))
}

/// The IPv4 address of the first interface that is up and not loopback (in the order the
/// kernel lists them), for a process that must pick an address that other hosts reach and
/// has nothing better to go by.
pub fn first_external_ipv4() -> Option<Ipv4Addr> {
    use nix::net::if_::InterfaceFlags;
    nix::ifaddrs::getifaddrs()
        .ok()?
        .filter(|i| {
            i.flags.contains(InterfaceFlags::IFF_UP)
                && !i.flags.contains(InterfaceFlags::IFF_LOOPBACK)
        })
        .filter_map(|i| {
            i.address
                .as_ref()
                .and_then(|a| a.as_sockaddr_in())
                .map(|s| s.ip())
        })
        .find(|ip| !ip.is_loopback() && !ip.is_unspecified())
}

/// One bound, non-blocking UDP socket.
#[derive(Debug)]
pub struct UdpEndpoint {
    sock: UdpSocket,
    local: PhysId,
    local_addr: SocketAddrV4,
    /// The largest datagram that leaves unfragmented (see [`UdpEndpoint::max_datagram`]).
    max_datagram: usize,
    /// Whether arriving datagrams may come coalesced (`UDP_GRO` is on).
    gro: bool,
    /// Whether sends may hand the kernel trains of segments (`UDP_SEGMENT`); cleared at the
    /// first refusal. Relaxed: a hint, read and cleared with no data depending on it.
    gso: std::sync::atomic::AtomicBool,
}

impl UdpEndpoint {
    /// Binds a socket as `cfg` says, non-blocking, with large buffers.
    pub fn bind(cfg: &UdpConfig) -> Result<Self, UdpError> {
        let want = SocketAddrV4::new(cfg.addr, cfg.port);
        let err = |call: &'static str| {
            move |source| UdpError::Socket {
                call,
                addr: want,
                source,
            }
        };
        let sock =
            Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP)).map_err(err("socket"))?;
        // The kernel clamps to its maximum instead of failing; a smaller buffer only costs
        // throughput (the transport's window and retransmissions cope with drops).
        sock.set_send_buffer_size(cfg.socket_buffer)
            .map_err(err("setsockopt(SO_SNDBUF)"))?;
        sock.set_recv_buffer_size(cfg.socket_buffer)
            .map_err(err("setsockopt(SO_RCVBUF)"))?;
        sock.set_nonblocking(true).map_err(err("set_nonblocking"))?;
        sock.bind(&SocketAddr::V4(want).into())
            .map_err(err("bind"))?;
        let sock: UdpSocket = sock.into();
        let local_addr = match sock.local_addr().map_err(err("getsockname"))? {
            SocketAddr::V4(a) => a,
            other => return Err(UdpError::NotIpv4(other)),
        };
        let mtu = cfg
            .mtu
            .or_else(|| crate::udp_offload::interface_mtu(*local_addr.ip()));
        let max_datagram = mtu.map_or(MAX_UDP_PAYLOAD, crate::udp_offload::datagram_for_mtu);
        // Offload only where datagrams are smaller than the UDP limit: on loopback a datagram
        // already carries 64 KiB, and a plain `recvfrom` costs less than `recvmsg`.
        let small = max_datagram < MAX_UDP_PAYLOAD;
        let gro = small && crate::udp_offload::enable_gro(sock.as_fd());
        Ok(UdpEndpoint {
            sock,
            local: PhysId::from_socket_addr(local_addr),
            local_addr,
            max_datagram,
            gro,
            gso: std::sync::atomic::AtomicBool::new(small),
        })
    }

    /// This endpoint's id (address and port actually bound).
    pub fn local_id(&self) -> PhysId {
        self.local
    }

    /// The largest datagram (UDP payload) that crosses the bound interface's link without IP
    /// fragmentation: its MTU (or [`UdpConfig::mtu`]) less the IPv4 and UDP headers, at most
    /// the UDP limit. The transport's `max_datagram` should not exceed it.
    pub fn max_datagram(&self) -> usize {
        self.max_datagram
    }

    /// Whether sending trains of datagrams ([`UdpEndpoint::send_train`]) saves system calls
    /// here: the link's datagrams are smaller than the UDP limit and the kernel has not
    /// refused segmentation offload.
    pub fn sends_trains(&self) -> bool {
        self.gso.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Sends `train`, datagrams of `seg` bytes each (the last may be shorter), to `dest`: in
    /// one system call with UDP segmentation offload, else one datagram at a time. Waits out
    /// a full send buffer like [`UdpEndpoint::send_to`].
    pub fn send_train(&self, train: &[u8], seg: usize, dest: PhysId) -> Result<(), UdpError> {
        use std::sync::atomic::Ordering::Relaxed;
        if seg == 0 || train.len() <= seg {
            return self.send_to(train, dest);
        }
        use crate::udp_offload::{MAX_SEGMENTS, MAX_TRAIN};
        // One system call carries at most MAX_SEGMENTS datagrams and MAX_TRAIN bytes.
        let per_call = (MAX_TRAIN / seg).clamp(1, MAX_SEGMENTS) * seg;
        let mut rest = train;
        if self.gso.load(Relaxed) {
            let addr = dest.socket_addr().ok_or(UdpError::BadPeer(dest))?;
            let fd = self.sock.as_raw_fd();
            while !rest.is_empty() {
                let (part, after) = rest.split_at(rest.len().min(per_call));
                match self.send_retrying("sendmsg(UDP_SEGMENT)", addr, || {
                    crate::udp_offload::send_train(fd, part, seg, addr)
                }) {
                    Ok(()) => rest = after,
                    Err(UdpError::Socket { source, .. })
                        if source.kind() == io::ErrorKind::Unsupported =>
                    {
                        tracing::debug!(%addr, "UDP segmentation offload refused: sending datagrams one by one");
                        self.gso.store(false, Relaxed);
                        break;
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        rest.chunks(seg)
            .try_for_each(|datagram| self.send_to(datagram, dest))
    }

    /// Receives one datagram, or a train of datagrams the kernel coalesced (GRO), if any is
    /// waiting: `(bytes, sender, bytes per datagram)`; `Ok(None)` when none is.
    pub fn recv_train(&self, buf: &mut [u8]) -> Result<Option<(usize, PhysId, usize)>, UdpError> {
        if !self.gro {
            return Ok(self.recv(buf)?.map(|(n, from)| (n, from, n)));
        }
        match crate::udp_offload::recv_train(self.sock.as_raw_fd(), buf) {
            Ok(got) => Ok(got.map(|t| (t.len, PhysId::from_socket_addr(t.from), t.seg))),
            Err(e) => Err(UdpError::Socket {
                call: "recvmsg",
                addr: self.local_addr,
                source: io::Error::from(e),
            }),
        }
    }

    /// Sends one datagram. A full send buffer is waited out (bounded by one second), since
    /// dropping would only cost a retransmission timeout later.
    pub fn send_to(&self, buf: &[u8], dest: PhysId) -> Result<(), UdpError> {
        let addr = dest.socket_addr().ok_or(UdpError::BadPeer(dest))?;
        let to = nix::sys::socket::SockaddrIn::from(addr);
        self.send_retrying("sendto", addr, || {
            raw_sendto(self.sock.as_raw_fd(), buf, &to)
        })
    }

    /// Sends one datagram made of `head` followed by `tail` (`sendmsg` with two I/O vectors),
    /// so that a large payload goes to the kernel without first being copied behind its
    /// header. Waits out a full send buffer like [`UdpEndpoint::send_to`].
    pub fn send_gather(&self, head: &[u8], tail: &[u8], dest: PhysId) -> Result<(), UdpError> {
        if tail.is_empty() {
            return self.send_to(head, dest);
        }
        self.send_gather_parts([head, tail], dest)
    }

    /// Sends one datagram made of `parts`, one after the other, like
    /// [`UdpEndpoint::send_gather`].
    pub fn send_gather_parts<const N: usize>(
        &self,
        parts: [&[u8]; N],
        dest: PhysId,
    ) -> Result<(), UdpError> {
        let addr = dest.socket_addr().ok_or(UdpError::BadPeer(dest))?;
        let sa = nix::sys::socket::SockaddrIn::from(addr);
        let iov = parts.map(io::IoSlice::new);
        self.send_retrying("sendmsg", addr, || {
            nix::sys::socket::sendmsg(
                self.sock.as_raw_fd(),
                &iov,
                &[],
                nix::sys::socket::MsgFlags::empty(),
                Some(&sa),
            )
            .map(|_| ())
            .map_err(io::Error::from)
        })
    }

    /// Sends one datagram made of `head` followed by `len` bytes of `span` from byte `from`,
    /// passing the span's memory to the kernel in place: the payload of a large put is not
    /// copied in user space at all. Falls back to a joined copy where a region's bytes cannot
    /// be handed over raw (big-endian hosts). Waits out a full send buffer like
    /// [`UdpEndpoint::send_to`].
    pub fn send_gather_span(
        &self,
        head: &[u8],
        span: &RegionSpan,
        from: usize,
        len: usize,
        dest: PhysId,
    ) -> Result<(), UdpError> {
        let Some(ptr) = span.raw_bytes(from, len) else {
            let mut joined = Vec::with_capacity(head.len() + len);
            joined.extend_from_slice(head);
            span.append_to(from, len, &mut joined)
                .map_err(UdpError::SpanOutOfBounds)?;
            return self.send_to(&joined, dest);
        };
        let addr = dest.socket_addr().ok_or(UdpError::BadPeer(dest))?;
        use nix::sys::socket::SockaddrLike;
        let sa = nix::sys::socket::SockaddrIn::from(addr);
        let mut iov = [
            libc::iovec {
                iov_base: head.as_ptr() as *mut libc::c_void,
                iov_len: head.len(),
            },
            libc::iovec {
                iov_base: ptr as *mut libc::c_void,
                iov_len: len,
            },
        ];
        // SAFETY: `msghdr` is plain data; every field not set below is valid as zero (no
        // control data, no flags).
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_name = SockaddrLike::as_ptr(&sa) as *mut libc::c_void;
        msg.msg_namelen = SockaddrLike::len(&sa);
        msg.msg_iov = iov.as_mut_ptr();
        msg.msg_iovlen = iov.len() as _;
        self.send_retrying("sendmsg", addr, || {
            // SAFETY: the address and both I/O vectors point at memory that stays valid for
            // the call: `sa` and `iov` are locals of the enclosing function, `head` is
            // borrowed, and the second vector is `len` bytes of `span`'s region (checked by
            // `raw_bytes`), which the borrowed span keeps alive. The kernel only reads through
            // them. The region's bytes may be written concurrently by other threads (they are
            // atomics); the kernel copies whatever it finds, as a NIC reading host memory
            // would, and no Rust reference to them is formed.
            let r = unsafe { libc::sendmsg(self.sock.as_raw_fd(), &msg, 0) };
            if r >= 0 {
                Ok(())
            } else {
                Err(io::Error::last_os_error())
            }
        })
    }

    /// Runs the send system call `attempt` until it succeeds: again at once when a signal
    /// interrupted it, and after waiting for room (bounded by one second in all) while the
    /// socket buffer is full. Any other failure is a typed error naming `call` and `addr`.
    #[inline(always)]
    fn send_retrying(
        &self,
        call: &'static str,
        addr: SocketAddrV4,
        mut attempt: impl FnMut() -> io::Result<()>,
    ) -> Result<(), UdpError> {
        let limit = Duration::from_secs(1);
        let mut waited: Option<Instant> = None;
        loop {
            match attempt() {
                Ok(()) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let since = *waited.get_or_insert_with(Instant::now);
                    let spent = since.elapsed();
                    if spent >= limit {
                        return Err(UdpError::SendTimeout(addr, limit));
                    }
                    self.poll(PollFlags::POLLOUT, Some(limit - spent))?;
                }
                Err(source) => return Err(UdpError::Socket { call, addr, source }),
            }
        }
    }

    /// Receives one datagram if one is waiting: `Ok(None)` when none is.
    pub fn recv(&self, buf: &mut [u8]) -> Result<Option<(usize, PhysId)>, UdpError> {
        loop {
            match raw_recvfrom(self.sock.as_raw_fd(), buf) {
                Ok((n, Some(from))) => return Ok(Some((n, PhysId::from_socket_addr(from)))),
                Ok((_, None)) => {
                    return Err(UdpError::Socket {
                        call: "recvfrom",
                        addr: self.local_addr,
                        source: io::Error::new(
                            io::ErrorKind::InvalidData,
                            "a datagram came from an address that is not IPv4",
                        ),
                    })
                }
                Err(libc::EAGAIN) => return Ok(None),
                // An ICMP error from an earlier send (peer port closed), where the kernel
                // reports one (a connected socket, or IP_RECVERR; this unconnected one gets
                // none), comes on a later call and concerns no datagram waiting here. Peer
                // death is the transport's business (peer timeout), so skip it.
                Err(libc::EINTR | libc::ECONNREFUSED) => continue,
                Err(errno) => {
                    return Err(UdpError::Socket {
                        call: "recvfrom",
                        addr: self.local_addr,
                        source: io::Error::from_raw_os_error(errno),
                    })
                }
            }
        }
    }

    /// Receives one datagram, waiting until `deadline` (forever if `None`): spins for `spin`,
    /// then blocks in `ppoll`. `Ok(None)` when the deadline passed first.
    pub fn recv_wait(
        &self,
        buf: &mut [u8],
        deadline: Option<Instant>,
        spin: Duration,
    ) -> Result<Option<(usize, PhysId)>, UdpError> {
        let start = Instant::now();
        loop {
            if let Some(got) = self.recv(buf)? {
                return Ok(Some(got));
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(None);
            }
            if now.duration_since(start) < spin {
                std::hint::spin_loop();
                continue;
            }
            let timeout = deadline.map(|d| d.saturating_duration_since(now));
            self.poll(PollFlags::POLLIN, timeout)?;
        }
    }

    /// Blocks until the socket is readable or `timeout` passes, without spinning.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> Result<bool, UdpError> {
        self.poll(PollFlags::POLLIN, timeout)
    }

    fn poll(&self, flags: PollFlags, timeout: Option<Duration>) -> Result<bool, UdpError> {
        let mut fds = [PollFd::new(self.sock.as_fd(), flags)];
        let ts = timeout.map(TimeSpec::from_duration);
        match nix::poll::ppoll(&mut fds, ts, None) {
            Ok(n) => Ok(n > 0),
            Err(nix::Error::EINTR) => Ok(false),
            Err(e) => Err(UdpError::Poll(e)),
        }
    }
}

/// `sendto` as the system call itself (`syscall(SYS_sendto)`), for the reason
/// [`raw_recvfrom`] gives: through std's `UdpSocket::send_to` (which converts the address
/// on every call) and the C library's wrapper (a cancellation point), a small datagram's send
/// ran about 110 instructions in user space, on the way out of every hop of a round trip.
/// A UDP send takes the whole datagram or fails, so only the failure is reported.
fn raw_sendto(
    fd: std::os::fd::RawFd,
    buf: &[u8],
    to: &nix::sys::socket::SockaddrIn,
) -> io::Result<()> {
    use nix::sys::socket::SockaddrLike;
    // SAFETY: the buffer pointer and length describe `buf`, and the address pointer and
    // length describe `to` (nix's `sockaddr_in`); both are borrowed for the call, the kernel
    // only reads through them, and no pointer outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_sendto,
            fd,
            buf.as_ptr(),
            buf.len(),
            0,
            SockaddrLike::as_ptr(to),
            // Widened: a variadic argument fills a whole register.
            libc::c_long::from(SockaddrLike::len(to)),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// `recvfrom` on a non-blocking socket as the system call itself (`syscall(SYS_recvfrom)`):
/// the bytes received and the sender (`None` if it is not IPv4). Through the C library's
/// wrapper (a cancellation point: it enables and disables asynchronous cancellation around
/// the call, which Rust never uses) and nix's, an empty poll ran about 110 instructions of
/// wrappers around the kernel's `EAGAIN`; every idle round of a wait makes one, and an
/// arrival waits half a round on average to be noticed (`benches/perf/network-turnaround.md`).
/// A failure is the raw `errno`, compared as a number: nix's `Errno::last` turns it into its
/// enum through a match over every code, on every empty poll.
fn raw_recvfrom(
    fd: std::os::fd::RawFd,
    buf: &mut [u8],
) -> Result<(usize, Option<SocketAddrV4>), i32> {
    // SAFETY: `sockaddr_in` is plain data, valid as zero.
    let mut from: libc::sockaddr_in = unsafe { std::mem::zeroed() };
    let mut from_len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
    // SAFETY: the buffer pointer and length describe `buf`, which is exclusively borrowed for
    // the call; the address pointer and its length describe `from`, a local, and the kernel
    // writes at most `from_len` bytes there (it truncates a longer address and reports its
    // full length, which is checked below). No pointer outlives the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_recvfrom,
            fd,
            buf.as_mut_ptr(),
            buf.len(),
            0,
            std::ptr::addr_of_mut!(from),
            std::ptr::addr_of_mut!(from_len),
        )
    };
    if r < 0 {
        return Err(nix::errno::Errno::last_raw());
    }
    let ipv4 = from.sin_family == libc::AF_INET as libc::sa_family_t
        && from_len as usize == std::mem::size_of::<libc::sockaddr_in>();
    let sender = ipv4.then(|| {
        SocketAddrV4::new(
            Ipv4Addr::from(u32::from_be(from.sin_addr.s_addr)),
            u16::from_be(from.sin_port),
        )
    });
    Ok((r as usize, sender))
}

#[cfg(test)]
mod tests;
