//! The raw TCP stream baseline between ranks 0 and 1: 1 MiB writes over one connection
//! between the two ranks' addresses (those their raw UDP sockets bound). TCP has the
//! kernel's offloads (segmentation on send, coalescing on receive) on every link, so across
//! hosts with a small MTU it is the reference for bulk bandwidth, where UDP pays per packet.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use crate::raw::{RawError, STREAM_MSG};

/// Rank 1's half: a listener on `ip`, whose port the caller publishes before
/// [`serve_stream`].
pub fn listen(ip: Ipv4Addr) -> Result<(TcpListener, u16), RawError> {
    let listener = TcpListener::bind(SocketAddrV4::new(ip, 0)).map_err(tcp("bind"))?;
    let port = listener.local_addr().map_err(tcp("getsockname"))?.port();
    Ok((listener, port))
}

/// Rank 1's half: takes one connection, reads until the sender closes, answers one byte.
/// Gives up after `timeout` without a connection or between two reads.
pub fn serve_stream(listener: TcpListener, timeout: Duration) -> Result<(), RawError> {
    listener.set_nonblocking(true).map_err(tcp("listen"))?;
    let deadline = Instant::now() + timeout;
    let mut conn = loop {
        match listener.accept() {
            Ok((c, _)) => break c,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(tcp("accept")(e)),
        }
    };
    conn.set_nonblocking(false).map_err(tcp("accept"))?;
    conn.set_read_timeout(Some(timeout))
        .map_err(tcp("setsockopt"))?;
    let mut buf = vec![0u8; STREAM_MSG];
    while conn.read(&mut buf).map_err(tcp("read"))? > 0 {}
    conn.write_all(&[1]).map_err(tcp("write"))?;
    Ok(())
}

/// Rank 0's half: writes `count` messages of 1 MiB to `server`, closes its side and waits
/// for the answer; bytes per second from the first write to the answer.
pub fn send_stream(server: SocketAddrV4, count: usize, timeout: Duration) -> Result<f64, RawError> {
    let mut conn = TcpStream::connect_timeout(&server.into(), timeout).map_err(tcp("connect"))?;
    conn.set_nodelay(true).map_err(tcp("setsockopt"))?;
    conn.set_write_timeout(Some(timeout))
        .map_err(tcp("setsockopt"))?;
    conn.set_read_timeout(Some(timeout))
        .map_err(tcp("setsockopt"))?;
    let msg = vec![0x5Au8; STREAM_MSG];
    let start = Instant::now();
    for _ in 0..count {
        conn.write_all(&msg).map_err(tcp("write"))?;
    }
    conn.shutdown(std::net::Shutdown::Write)
        .map_err(tcp("shutdown"))?;
    let mut answer = [0u8; 1];
    conn.read_exact(&mut answer).map_err(tcp("read"))?;
    let secs = start.elapsed().as_secs_f64();
    Ok((count * STREAM_MSG) as f64 / secs.max(1e-9))
}

fn tcp(call: &'static str) -> impl Fn(std::io::Error) -> RawError {
    move |source| RawError::Tcp { call, source }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_over_loopback_is_measured() {
        let (listener, port) = listen(Ipv4Addr::LOCALHOST).unwrap();
        let server = std::thread::spawn(move || serve_stream(listener, Duration::from_secs(10)));
        let bps = send_stream(
            SocketAddrV4::new(Ipv4Addr::LOCALHOST, port),
            8,
            Duration::from_secs(10),
        )
        .unwrap();
        server.join().unwrap().unwrap();
        assert!(bps > 0.0);
    }

    #[test]
    fn no_sender_is_a_timeout_not_a_hang() {
        let (listener, _) = listen(Ipv4Addr::LOCALHOST).unwrap();
        let e = serve_stream(listener, Duration::from_millis(20)).unwrap_err();
        assert!(e.to_string().contains("accept"), "{e}");
    }
}
