//! The rank side of the TCP bootstrap: one connection to the launcher, one request at a time.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::Mutex;
use std::time::Duration;

use crate::error::BootstrapError;
use crate::proto::{self, ToClient, ToServer};

/// How long a rank waits for the launcher to accept its connection or acknowledge an abort.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long `abort` waits for the launcher before exiting on its own.
const ABORT_TIMEOUT: Duration = Duration::from_secs(2);

/// A connected, authenticated bootstrap session with the launcher.
pub(crate) struct TcpClient {
    /// Requests are serialized so that each reply pairs with its request.
    stream: Mutex<TcpStream>,
    /// This end's address: the interface through which this host reaches the launcher.
    local: Option<std::net::IpAddr>,
    addr: SocketAddr,
    job_key: u64,
    rank: u32,
}

fn resolve(addr: &str) -> Result<SocketAddr, BootstrapError> {
    let err = |e| BootstrapError::Connect {
        addr: addr.to_string(),
        source: e,
    };
    addr.to_socket_addrs()
        .map_err(err)?
        .next()
        .ok_or_else(|| err(std::io::Error::other("the name resolves to no address")))
}

fn send(stream: &mut TcpStream, msg: &ToServer) -> std::io::Result<()> {
    stream.write_all(&proto::encode_to_server(msg))
}

fn recv(stream: &mut TcpStream, op: &'static str) -> Result<ToClient, BootstrapError> {
    let lost = |source| BootstrapError::ConnectionLost { op, source };
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(lost)?;
    let n = proto::frame_len(&len)
        .map_err(|source| BootstrapError::Protocol { op, source })?
        .unwrap_or(0);
    let mut body = vec![0u8; n];
    stream.read_exact(&mut body).map_err(lost)?;
    proto::decode_to_client(&body).map_err(|source| BootstrapError::Protocol { op, source })
}

impl TcpClient {
    /// Connects to the launcher and presents the job key.
    pub(crate) fn connect(
        addr: &str,
        job_key: u64,
        rank: u32,
    ) -> Result<TcpClient, BootstrapError> {
        let sa = resolve(addr)?;
        let mut stream = TcpStream::connect_timeout(&sa, CONNECT_TIMEOUT).map_err(|source| {
            BootstrapError::Connect {
                addr: addr.to_string(),
                source,
            }
        })?;
        // Requests are small and latency-bound; Nagle would only delay them.
        let _ = stream.set_nodelay(true);
        send(&mut stream, &ToServer::HelloRank { job_key, rank }).map_err(|source| {
            BootstrapError::ConnectionLost {
                op: "hello",
                source,
            }
        })?;
        match recv(&mut stream, "hello")? {
            ToClient::Welcome => Ok(TcpClient {
                local: stream.local_addr().ok().map(|a| a.ip()),
                stream: Mutex::new(stream),
                addr: sa,
                job_key,
                rank,
            }),
            ToClient::Refused { reason } => Err(BootstrapError::Refused { reason }),
            other => Err(BootstrapError::UnexpectedReply {
                op: "hello",
                got: other.name(),
            }),
        }
    }

    /// The local address of the connection to the launcher.
    pub(crate) fn local_ip(&self) -> Option<std::net::IpAddr> {
        self.local
    }

    /// Sends one request and, unless it is one-way, waits for its reply.
    pub(crate) fn call(
        &self,
        op: &'static str,
        msg: &ToServer,
        one_way: bool,
    ) -> Result<Option<ToClient>, BootstrapError> {
        // A poisoned lock only means another thread panicked mid-request; the stream may hold
        // a half-read reply, so report the session as lost rather than guess.
        let mut stream = self
            .stream
            .lock()
            .map_err(|_| BootstrapError::ConnectionLost {
                op,
                source: std::io::Error::other("another thread panicked during a bootstrap call"),
            })?;
        send(&mut stream, msg).map_err(|source| BootstrapError::ConnectionLost { op, source })?;
        if one_way {
            return Ok(None);
        }
        let reply = recv(&mut stream, op)?;
        match reply {
            ToClient::Failed { reason } => Err(BootstrapError::Collective { op, reason }),
            other => Ok(Some(other)),
        }
    }

    /// Asks the launcher to end the job with `code`, on a fresh connection so that a thread
    /// blocked in a collective on the main connection cannot delay it. Returns when the
    /// launcher acknowledged, failed, or [`ABORT_TIMEOUT`] passed.
    pub(crate) fn send_abort(&self, code: i32) {
        let Ok(mut s) = TcpStream::connect_timeout(&self.addr, ABORT_TIMEOUT) else {
            return;
        };
        let _ = s.set_read_timeout(Some(ABORT_TIMEOUT));
        let _ = s.set_write_timeout(Some(ABORT_TIMEOUT));
        let msg = ToServer::HelloAbort {
            job_key: self.job_key,
            rank: self.rank,
            code,
        };
        if send(&mut s, &msg).is_ok() {
            let _ = recv(&mut s, "abort");
        }
    }
}
