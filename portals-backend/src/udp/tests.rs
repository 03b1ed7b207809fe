//! Tests of the UDP endpoint: real sockets on loopback.

use super::*;

fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| {
        pairs
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn env_resolution() {
    assert_eq!(
        UdpConfig::from_lookup(env(&[])).unwrap().addr,
        Ipv4Addr::LOCALHOST
    );
    assert_eq!(
        UdpConfig::from_lookup(env(&[(ENV_IFACE, "lo")]))
            .unwrap()
            .addr,
        Ipv4Addr::LOCALHOST
    );
    assert_eq!(
        UdpConfig::from_lookup(env(&[(ENV_PTL_IFACE, "127.0.0.1")]))
            .unwrap()
            .addr,
        Ipv4Addr::LOCALHOST
    );
    // RGASNET_IFACE wins over PTL_IFACE_NAME.
    assert_eq!(
        UdpConfig::from_lookup(env(&[(ENV_IFACE, "127.0.0.2"), (ENV_PTL_IFACE, "lo")]))
            .unwrap()
            .addr,
        Ipv4Addr::new(127, 0, 0, 2)
    );
}

#[test]
fn bad_env_values_name_the_variable() {
    for (var, value, reason) in [
        (ENV_IFACE, "nosuchif0", "no such network interface"),
        (
            ENV_IFACE,
            "",
            "empty value: expected an interface name or an IPv4 address",
        ),
        (ENV_PTL_IFACE, "300.1.1.1", "not a valid IPv4 address"),
    ] {
        match UdpConfig::from_lookup(env(&[(var, value)])) {
            Err(UdpError::BadIface {
                var: v,
                value: got,
                reason: r,
            }) => {
                assert_eq!((v, got.as_str(), r.as_str()), (var, value, reason));
            }
            other => panic!("{var}={value:?}: expected BadIface, got {other:?}"),
        }
    }
    let msg = UdpConfig::from_lookup(env(&[(ENV_IFACE, "nosuchif0")]))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("RGASNET_IFACE") && msg.contains("nosuchif0"),
        "{msg}"
    );
}

#[test]
fn loopback_send_and_receive() {
    let a = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
    let b = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
    assert_eq!(a.local_id().nid, u32::from(Ipv4Addr::LOCALHOST));
    assert_ne!(a.local_id().pid, 0);
    let mut buf = vec![0u8; 65_536];
    assert!(b.recv(&mut buf).unwrap().is_none(), "nothing waiting yet");
    let payload: Vec<u8> = (0..60_000u32).map(|i| (i % 251) as u8).collect();
    a.send_to(&payload, b.local_id()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let (n, from) = b
        .recv_wait(&mut buf, Some(deadline), DEFAULT_SPIN)
        .unwrap()
        .expect("datagram within the timeout");
    assert_eq!(from, a.local_id());
    assert_eq!(&buf[..n], &payload[..]);
}

#[test]
fn gathering_send_from_a_region_span_delivers_its_bytes() {
    let a = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
    let b = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
    let bytes: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 253) as u8).collect();
    let region = crate::memory::Region::from_bytes(&bytes);
    // Starts mid-word, so the pointer arithmetic is exercised off an 8-byte boundary.
    let span = RegionSpan::new(region, 5, 40_000).unwrap();
    let head = b"header bytes";
    a.send_gather_span(head, &span, 3, 30_000, b.local_id())
        .unwrap();
    let mut buf = vec![0u8; 65_536];
    let deadline = Instant::now() + Duration::from_secs(10);
    let (n, _) = b
        .recv_wait(&mut buf, Some(deadline), DEFAULT_SPIN)
        .unwrap()
        .expect("datagram within the timeout");
    assert_eq!(n, head.len() + 30_000);
    assert_eq!(&buf[..head.len()], head);
    assert_eq!(&buf[head.len()..n], &bytes[8..30_008]);
    // A range outside the span is refused before anything is sent.
    let err = a
        .send_gather_span(head, &span, 39_999, 2, b.local_id())
        .unwrap_err();
    assert!(matches!(err, UdpError::SpanOutOfBounds(_)), "{err}");
    let quiet = Instant::now() + Duration::from_millis(50);
    assert!(
        b.recv_wait(&mut buf, Some(quiet), DEFAULT_SPIN)
            .unwrap()
            .is_none(),
        "nothing was sent"
    );
}

#[test]
fn recv_wait_returns_none_at_the_deadline() {
    let a = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
    let mut buf = [0u8; 16];
    let deadline = Instant::now() + Duration::from_millis(5);
    assert_eq!(
        a.recv_wait(&mut buf, Some(deadline), DEFAULT_SPIN).unwrap(),
        None
    );
    assert!(Instant::now() >= deadline);
}

#[test]
fn bad_peer_is_typed() {
    let a = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
    let bad = PhysId {
        nid: u32::from(Ipv4Addr::LOCALHOST),
        pid: 70_000,
    };
    assert!(matches!(a.send_to(b"x", bad), Err(UdpError::BadPeer(p)) if p == bad));
}

#[test]
fn a_refused_send_is_a_typed_error_naming_the_call_and_the_cause() {
    let a = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
    let b = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
    // Larger than any UDP datagram: the kernel refuses it (EMSGSIZE), nothing is sent.
    let too_big = vec![7u8; 70_000];
    match a.send_to(&too_big, b.local_id()) {
        Err(UdpError::Socket { call, addr, source }) => {
            assert_eq!(call, "sendto");
            assert_eq!(Some(addr), b.local_id().socket_addr());
            assert_eq!(source.raw_os_error(), Some(libc::EMSGSIZE), "{source}");
        }
        other => panic!("expected a sendto error, got {other:?}"),
    }
    let mut buf = vec![0u8; 65_536];
    let quiet = Instant::now() + Duration::from_millis(50);
    assert!(b
        .recv_wait(&mut buf, Some(quiet), DEFAULT_SPIN)
        .unwrap()
        .is_none());
}

#[test]
fn a_send_to_a_closed_port_leaves_receiving_as_it_was() {
    let a = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
    let b = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
    let gone = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
    let gone_id = gone.local_id();
    drop(gone);
    // The kernel answers with ICMP port unreachable. An unconnected socket does not report
    // it (Linux queues ECONNREFUSED only on connected sockets or with IP_RECVERR, and
    // `recv` would skip it): the send succeeds, the next receive finds nothing and no error.
    a.send_to(b"to nobody", gone_id).unwrap();
    let mut buf = vec![0u8; 65_536];
    std::thread::sleep(Duration::from_millis(20));
    assert!(a.recv(&mut buf).unwrap().is_none());
    // A datagram behind it is received whole.
    b.send_to(b"still here", a.local_id()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let (n, from) = a
        .recv_wait(&mut buf, Some(deadline), DEFAULT_SPIN)
        .unwrap()
        .expect("datagram within the timeout");
    assert_eq!((from, &buf[..n]), (b.local_id(), &b"still here"[..]));
}

#[test]
fn mtu_setting_is_parsed_and_sizes_datagrams() {
    assert_eq!(parse_mtu(None).unwrap(), None);
    assert_eq!(parse_mtu(Some(" 1500 ")).unwrap(), Some(1500));
    for bad in ["575", "65537", "jumbo", ""] {
        let e = parse_mtu(Some(bad)).unwrap_err().to_string();
        assert!(e.contains(ENV_MTU) && e.contains("576 to 65536"), "{e}");
    }
    let cfg = UdpConfig::from_lookup(env(&[(ENV_MTU, "9000")])).unwrap();
    assert_eq!(cfg.mtu, Some(9000));
    assert!(UdpConfig::from_lookup(env(&[(ENV_MTU, "9")])).is_err());
    // Loopback's own MTU is 64 KiB: datagrams up to the UDP limit, no trains.
    let lo = UdpEndpoint::bind(&UdpConfig::default()).unwrap();
    assert_eq!(lo.max_datagram(), MAX_UDP_PAYLOAD);
    assert!(!lo.sends_trains());
    let eth = UdpEndpoint::bind(&UdpConfig {
        mtu: Some(1500),
        ..UdpConfig::default()
    })
    .unwrap();
    assert_eq!(eth.max_datagram(), 1472);
}

#[test]
fn trains_arrive_as_their_datagrams_byte_for_byte() {
    // A link of MTU 1500 on loopback: the sender hands the kernel trains, the receiver
    // takes them in coalesced (or one by one where the kernel does not coalesce).
    let small = UdpConfig {
        mtu: Some(1500),
        ..UdpConfig::default()
    };
    let a = UdpEndpoint::bind(&small).unwrap();
    let b = UdpEndpoint::bind(&small).unwrap();
    let seg = a.max_datagram();
    // Three trains: 10 full datagrams and a short one; one datagram; 64 full ones.
    let mut sent: Vec<Vec<u8>> = Vec::new();
    for (n, tail) in [(10usize, 100usize), (0, 7), (64, 0)] {
        let mut train = Vec::new();
        for _ in 0..n {
            let d: Vec<u8> = (0..seg).map(|i| (i + sent.len() * 31) as u8).collect();
            train.extend_from_slice(&d);
            sent.push(d);
        }
        if tail > 0 {
            let d = vec![sent.len() as u8; tail];
            train.extend_from_slice(&d);
            sent.push(d);
        }
        a.send_train(&train, seg, b.local_id()).unwrap();
    }
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut buf = vec![0u8; 65_536];
    let deadline = Instant::now() + Duration::from_secs(5);
    while got.len() < sent.len() && Instant::now() < deadline {
        match b.recv_train(&mut buf).unwrap() {
            Some((len, from, each)) => {
                assert_eq!(from, a.local_id());
                assert!(each >= 1 && each <= len, "{each} of {len}");
                got.extend(buf[..len].chunks(each).map(<[u8]>::to_vec));
            }
            None => std::thread::sleep(Duration::from_micros(50)),
        }
    }
    assert_eq!(got.len(), sent.len());
    assert!(got == sent, "datagrams differ");
}
