//! The TCP bootstrap in one process: a real `BootstrapServer`, ranks as threads using
//! `Bootstrap::connect`, and fake launchers that misbehave.
// Test code: helpers outside #[test] functions panic on purpose to fail the test.
#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use rgasnet_launcher::coord::Report;
use rgasnet_launcher::env::RankEnv;
use rgasnet_launcher::proto::{self, ToClient};
use rgasnet_launcher::server::BootstrapServer;
use rgasnet_launcher::{Bootstrap, BootstrapError};

const KEY: u64 = 0x1234_5678_9abc_def0;

fn rank_env(rank: u32, size: u32, key: u64, addr: SocketAddr) -> RankEnv {
    RankEnv {
        rank,
        size,
        job_key: key,
        bootstrap: addr.to_string(),
        host_ranks: (0..size).collect(),
    }
}

fn server(size: u32) -> (BootstrapServer, mpsc::Receiver<Report>) {
    let (tx, rx) = mpsc::channel();
    let tx = std::sync::Mutex::new(tx);
    let s = BootstrapServer::start(
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
        size,
        0,
        KEY,
        move |r| {
            let _ = tx.lock().unwrap().send(r);
        },
    )
    .unwrap();
    (s, rx)
}

#[test]
fn threads_as_ranks_exchange_values() {
    let (s, _rx) = server(3);
    let addr = s.local_addr();
    let handles: Vec<_> = (0..3)
        .map(|r| {
            thread::spawn(move || {
                let b = Bootstrap::connect(rank_env(r, 3, KEY, addr)).unwrap();
                b.put(&format!("k{r}"), &[r as u8; 3]).unwrap();
                b.fence().unwrap();
                let all: Vec<Vec<u8>> = (0..3).map(|p| b.get(&format!("k{p}")).unwrap()).collect();
                let g = b.allgather(&[r as u8, 0xee]).unwrap();
                let bc = b.broadcast(2, (r == 2).then_some(&b"root2"[..])).unwrap();
                b.barrier().unwrap();
                (all, g, bc)
            })
        })
        .collect();
    for h in handles {
        let (all, g, bc) = h.join().unwrap();
        assert_eq!(all, vec![vec![0; 3], vec![1; 3], vec![2; 3]]);
        assert_eq!(g, vec![vec![0, 0xee], vec![1, 0xee], vec![2, 0xee]]);
        assert_eq!(bc, b"root2");
    }
}

#[test]
fn wrong_job_key_is_refused() {
    let (s, _rx) = server(2);
    match Bootstrap::connect(rank_env(0, 2, KEY ^ 0xff, s.local_addr())) {
        Err(BootstrapError::Refused { reason }) => assert_eq!(reason, "wrong job key"),
        other => panic!("expected Refused, got {other:?}"),
    }
    // The refused attempt does not take the rank's slot.
    let _first = Bootstrap::connect(rank_env(0, 2, KEY, s.local_addr())).unwrap();
    match Bootstrap::connect(rank_env(0, 2, KEY, s.local_addr())) {
        Err(BootstrapError::Refused { reason }) => {
            assert!(reason.contains("already connected"), "{reason}")
        }
        other => panic!("expected Refused, got {other:?}"),
    }
}

#[test]
fn garbage_on_the_socket_is_reported_and_dropped() {
    let (s, rx) = server(1);
    let mut c = std::net::TcpStream::connect(s.local_addr()).unwrap();
    c.write_all(&[0xff, 0xff, 0xff, 0xff, 1, 2, 3]).unwrap();
    let mut buf = [0u8; 16];
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    assert_eq!(c.read(&mut buf).unwrap(), 0, "connection should be closed");
    match rx.recv_timeout(Duration::from_secs(10)).unwrap() {
        Report::Misbehaved { what } => assert!(what.contains("exceeds"), "{what}"),
        other => panic!("{other:?}"),
    }
}

/// A fake launcher that welcomes one rank and then closes: the barrier must fail, not hang.
#[test]
fn launcher_gone_mid_barrier_is_an_error_not_a_hang() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut hello = [0u8; 17];
        s.read_exact(&mut hello).unwrap();
        s.write_all(&proto::encode_to_client(&ToClient::Welcome))
            .unwrap();
        let mut req = [0u8; 5];
        s.read_exact(&mut req).unwrap();
        // Dropping the socket is what a crashed launcher looks like.
    });
    let b = Bootstrap::connect(rank_env(0, 2, KEY, addr)).unwrap();
    match b.barrier() {
        Err(BootstrapError::ConnectionLost { op: "barrier", .. }) => {}
        other => panic!("expected ConnectionLost, got {other:?}"),
    }
    t.join().unwrap();
}

#[test]
fn no_launcher_at_all_is_a_connect_error() {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    match Bootstrap::connect(rank_env(
        0,
        1,
        KEY,
        SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
    )) {
        Err(BootstrapError::Connect { addr, .. }) => assert_eq!(addr, format!("127.0.0.1:{port}")),
        other => panic!("expected Connect, got {other:?}"),
    }
}

#[test]
fn broadcast_arguments_are_checked_locally() {
    let (s, _rx) = server(1);
    let b = Bootstrap::connect(rank_env(0, 1, KEY, s.local_addr())).unwrap();
    assert!(matches!(
        b.broadcast(1, None),
        Err(BootstrapError::InvalidArgument {
            op: "broadcast",
            ..
        })
    ));
    assert!(matches!(
        b.broadcast(0, None),
        Err(BootstrapError::InvalidArgument {
            op: "broadcast",
            ..
        })
    ));
    assert_eq!(b.broadcast(0, Some(b"x")).unwrap(), b"x");
    assert!(matches!(
        b.get("none"),
        Err(BootstrapError::KeyNotFound { .. })
    ));
}
