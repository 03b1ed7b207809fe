//! Transports driven over the simulated network with fixed seeds.

use super::*;
use crate::message::Tail;
use crate::sim::{run_until_quiescent, RunLimits, SimConfig, SimNetwork, SimNode};

const KEY: u64 = 0xC0FFEE;

/// A peer on 127.0.0.1 (shared by the transport's test modules).
pub(super) fn id(pid: u32) -> PhysId {
    PhysId {
        nid: 0x7f00_0001,
        pid,
    }
}

/// Deterministic, position- and source-dependent bytes, so a misplaced or foreign byte shows.
fn payload(src: u32, idx: usize, len: usize) -> Vec<u8> {
    let mut x = (u64::from(src) << 32 | idx as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Collect,
    /// Send every delivered message back to its sender.
    Echo,
    /// Ping `target` until `left` reaches 0; a ping is sent when the previous pong arrives.
    Pinger {
        target: PhysId,
        left: u32,
    },
}

struct Node {
    t: Transport,
    got: Vec<(PhysId, Vec<u8>)>,
    failed: Vec<PhysId>,
    /// Delivery confirmations, as (peer, token).
    confirmed: Vec<(PhysId, u64)>,
    mode: Mode,
}

impl Node {
    fn new(cfg: &TransportConfig, pid: u32, t0: Instant) -> Self {
        Node {
            t: Transport::new(cfg.clone(), id(pid), u64::from(pid) * 1000 + 1, t0).unwrap(),
            got: Vec::new(),
            failed: Vec::new(),
            confirmed: Vec::new(),
            mode: Mode::Collect,
        }
    }
}

impl SimNode for Node {
    fn id(&self) -> PhysId {
        self.t.local()
    }
    fn handle_datagram(&mut self, now: Instant, from: PhysId, bytes: &[u8]) {
        self.t.handle_datagram(now, from, bytes);
    }
    fn after_input(&mut self, now: Instant) {
        while let Some(ev) = self.t.poll_event() {
            match ev {
                TransportEvent::Delivered { from, message } => {
                    match &mut self.mode {
                        Mode::Collect => {}
                        Mode::Echo => self.t.send(now, from, message.clone()).unwrap(),
                        Mode::Pinger { target, left } => {
                            if *left > 0 {
                                *left -= 1;
                                self.t.send(now, *target, vec![7u8; 8]).unwrap();
                            }
                        }
                    }
                    self.got.push((from, message));
                }
                TransportEvent::PeerFailed { peer } => self.failed.push(peer),
                TransportEvent::Confirmed { peer, token } => self.confirmed.push((peer, token)),
            }
        }
    }
    fn poll_transmit(&mut self, now: Instant, out: &mut Vec<u8>) -> Option<PhysId> {
        self.t.poll_transmit(now, out)
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.t.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.t.handle_timeout(now);
    }
}

fn cfg() -> TransportConfig {
    TransportConfig {
        job_key: KEY,
        ..TransportConfig::default()
    }
}

fn limits(t0: Instant) -> RunLimits {
    RunLimits {
        max_steps: 5_000_000,
        deadline: t0 + Duration::from_secs(3600),
    }
}

/// Every node sends `sizes` (in order) to every other node; checks exactly-once, in-order,
/// byte-exact delivery. Returns the nodes for further assertions.
fn all_to_all(
    seed: u64,
    net_cfg: SimConfig,
    cfg: &TransportConfig,
    n: u32,
    sizes: &[usize],
) -> Vec<Node> {
    all_to_all_with(seed, net_cfg, cfg, n, sizes, false)
}

/// `bytes` as a message whose first bytes (a different number for each `idx`) are owned and
/// whose rest is an in-place span of a region (at an odd offset, so spans start mid-word).
fn in_place_message(bytes: Vec<u8>, idx: usize) -> OutMessage {
    let head_len = (idx * 37 + 5) % (bytes.len() + 1);
    let region = crate::memory::Region::new(bytes.len() + 11);
    region.write(3, &bytes[head_len..]).unwrap();
    let span = crate::memory::RegionSpan::new(region, 3, bytes.len() - head_len).unwrap();
    OutMessage::new(bytes[..head_len].to_vec(), Some(span))
}

/// [`all_to_all`], sending every message with an in-place body when `in_place`.
fn all_to_all_with(
    seed: u64,
    net_cfg: SimConfig,
    cfg: &TransportConfig,
    n: u32,
    sizes: &[usize],
    in_place: bool,
) -> Vec<Node> {
    let t0 = Instant::now();
    let mut now = t0;
    let mut net = SimNetwork::new(seed, net_cfg);
    let mut nodes: Vec<Node> = (1..=n).map(|p| Node::new(cfg, p, t0)).collect();
    for node in &mut nodes {
        let me = node.t.local().pid;
        for dst in (1..=n).filter(|&d| d != me) {
            for (i, &len) in sizes.iter().enumerate() {
                let bytes = payload(me * 100 + dst, i, len);
                let message = if in_place {
                    in_place_message(bytes, i)
                } else {
                    bytes.into()
                };
                node.t.send(now, id(dst), message).unwrap();
            }
        }
    }
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits(t0)).unwrap();
    for node in &nodes {
        let me = node.t.local().pid;
        assert!(
            node.failed.is_empty(),
            "node {me} saw failures {:?}",
            node.failed
        );
        for src in (1..=n).filter(|&s| s != me) {
            let from_src: Vec<&Vec<u8>> = node
                .got
                .iter()
                .filter(|(f, _)| *f == id(src))
                .map(|(_, m)| m)
                .collect();
            assert_eq!(from_src.len(), sizes.len(), "node {me} from {src}: count");
            for (i, (m, &len)) in from_src.iter().zip(sizes).enumerate() {
                assert!(
                    **m == payload(src * 100 + me, i, len),
                    "node {me} from {src}: message {i} ({len} bytes) differs"
                );
            }
        }
        assert_eq!(
            node.t.stats().messages_delivered,
            u64::from(n - 1) * sizes.len() as u64
        );
    }
    nodes
}

fn mixed_sizes(frag: usize) -> Vec<usize> {
    vec![
        0,
        1,
        8,
        100,
        frag - 1,
        frag,
        frag + 1,
        3 * frag + 17,
        200_000,
        0,
        5,
    ]
}

#[test]
fn default_fragment_size_is_the_default_configurations() {
    assert_eq!(
        TransportConfig::default().fragment_size(),
        DEFAULT_FRAGMENT_SIZE
    );
}

#[test]
fn perfect_network_pair_delivers_everything_in_order() {
    let c = cfg();
    let nodes = all_to_all(
        1,
        SimConfig::default(),
        &c,
        2,
        &mixed_sizes(c.fragment_size()),
    );
    let s = nodes[0].t.stats();
    assert_eq!(s.retransmits, 0);
    assert_eq!(s.duplicates, 0);
}

#[test]
fn lossy_pair_sizes_up_to_8_mib() {
    let c = cfg();
    let mut sizes = mixed_sizes(c.fragment_size());
    sizes.extend([1 << 20, 8 << 20, 3]);
    for (seed, loss) in [(11, 0.10), (12, 0.20), (13, 0.30)] {
        let nodes = all_to_all(seed, SimConfig::lossy(loss), &c, 2, &sizes);
        let s = nodes[0].t.stats();
        assert!(s.retransmits > 0, "loss {loss}: no retransmission");
    }
}

/// Datagrams of 1400 bytes on a lossy network of that MTU, a window of 8 frames, and 40
/// messages of up to 9 kB: heavy fragmentation and queueing.
fn small_datagrams() -> (TransportConfig, SimConfig, Vec<usize>) {
    let c = TransportConfig {
        max_datagram: 1400,
        window: 8,
        ..cfg()
    };
    let net = SimConfig {
        mtu: 1400,
        ..SimConfig::lossy(0.2)
    };
    (c, net, (0..40).map(|i| (i * 977) % 9000).collect())
}

#[test]
fn lossy_group_of_four_small_datagrams_and_small_window() {
    let (c, net, sizes) = small_datagrams();
    let nodes = all_to_all(21, net, &c, 4, &sizes);
    for n in &nodes {
        assert!(n.t.stats().max_in_window <= 8);
        assert!(n.t.stats().duplicates > 0 || n.t.stats().retransmits > 0);
    }
}

#[test]
fn lossy_in_place_messages_deliver_the_same_bytes() {
    // Fragments straddle the owned head and the in-place body at every kind of boundary, and
    // retransmissions read the body from its region again.
    let c = cfg();
    let mut sizes = mixed_sizes(c.fragment_size());
    sizes.extend([1 << 20, 3]);
    for (seed, loss) in [(31, 0.0), (32, 0.15), (33, 0.3)] {
        let nodes = all_to_all_with(seed, SimConfig::lossy(loss), &c, 2, &sizes, true);
        if loss > 0.0 {
            assert!(nodes[0].t.stats().retransmits > 0, "loss {loss}");
        }
    }
    let (small, net, sizes) = small_datagrams();
    all_to_all_with(34, net, &small, 3, &sizes, true);
}

#[test]
fn same_seed_same_statistics() {
    let c = cfg();
    let sizes = mixed_sizes(c.fragment_size());
    let a = all_to_all(5, SimConfig::lossy(0.25), &c, 3, &sizes);
    let b = all_to_all(5, SimConfig::lossy(0.25), &c, 3, &sizes);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(x.t.stats(), y.t.stats());
    }
}

#[test]
fn ping_pong_costs_one_datagram_each_way() {
    let c = cfg();
    let t0 = Instant::now();
    let mut now = t0;
    let mut net = SimNetwork::new(3, SimConfig::default());
    let mut nodes = vec![Node::new(&c, 1, t0), Node::new(&c, 2, t0)];
    nodes[1].mode = Mode::Echo;
    let rounds = 50;
    nodes[0].mode = Mode::Pinger {
        target: id(2),
        left: rounds - 1,
    };
    nodes[0].t.send(now, id(2), vec![7u8; 8]).unwrap();
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits(t0)).unwrap();
    assert_eq!(nodes[0].got.len(), rounds as usize);
    assert!(nodes[0]
        .got
        .iter()
        .all(|(f, m)| *f == id(2) && *m == vec![7u8; 8]));
    // Every ping carries the ack of the previous pong; only the last pong's ack is alone.
    assert_eq!(nodes[0].t.stats().datagrams_out, u64::from(rounds) + 1);
    assert_eq!(nodes[0].t.stats().standalone_acks, 1);
    assert_eq!(nodes[1].t.stats().datagrams_out, u64::from(rounds));
    assert_eq!(nodes[1].t.stats().standalone_acks, 0);
    assert!(nodes[0].t.srtt(id(2)).is_some());
}

#[test]
fn ack_now_sends_a_held_ack_and_all_acknowledged_follows_it() {
    let c = cfg();
    let t0 = Instant::now();
    let mut a = Transport::new(c.clone(), id(1), 1001, t0).unwrap();
    let mut b = Transport::new(c, id(2), 2001, t0).unwrap();
    assert!(a.all_acknowledged());
    a.send(t0, id(2), vec![5u8; 16]).unwrap();
    assert!(!a.all_acknowledged(), "queued");
    let mut dg = Vec::new();
    assert_eq!(a.poll_transmit(t0, &mut dg), Some(id(2)));
    assert!(!a.all_acknowledged(), "in flight");
    b.handle_datagram(t0, id(1), &dg);
    assert!(matches!(
        b.poll_event(),
        Some(TransportEvent::Delivered { .. })
    ));
    // The ack waits for data to ride on (up to `ack_delay`): nothing to send yet.
    let mut ack = Vec::new();
    assert_eq!(b.poll_transmit(t0, &mut ack), None);
    b.ack_now(t0);
    assert_eq!(b.poll_transmit(t0, &mut ack), Some(id(1)));
    assert_eq!(b.stats().standalone_acks, 1);
    assert!(b.all_acknowledged(), "b sent nothing of its own");
    a.handle_datagram(t0, id(2), &ack);
    // An ack that arrives with the window open is applied after the transmit pass.
    while a.poll_transmit(t0, &mut dg).is_some() {}
    assert!(a.all_acknowledged());
    // Nothing held any more: a second call sends nothing.
    b.ack_now(t0);
    assert_eq!(b.poll_transmit(t0, &mut ack), None);
}

#[test]
fn streaming_acks_are_batched() {
    let c = cfg();
    let t0 = Instant::now();
    let mut now = t0;
    let mut net = SimNetwork::new(4, SimConfig::default());
    let mut nodes = vec![Node::new(&c, 1, t0), Node::new(&c, 2, t0)];
    for i in 0..8 {
        nodes[0].t.send(now, id(2), payload(1, i, 1 << 20)).unwrap();
    }
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits(t0)).unwrap();
    assert_eq!(nodes[1].got.len(), 8);
    let frames = nodes[0].t.stats().data_frames_sent;
    let acks = nodes[1].t.stats().standalone_acks;
    // One ack per `ack_every` frames or per completed message, never one per frame.
    let bound = frames / u64::from(c.ack_every) + 8 + 1;
    assert!(
        acks <= bound,
        "{acks} acks for {frames} frames (bound {bound})"
    );
    assert_eq!(nodes[0].t.stats().retransmits, 0);
}

#[test]
fn window_bound_is_respected() {
    let c = TransportConfig { window: 4, ..cfg() };
    let t0 = Instant::now();
    let mut t = Transport::new(c.clone(), id(1), 1, t0).unwrap();
    for i in 0..10 {
        t.send(t0, id(2), payload(1, i, 3 * c.fragment_size()))
            .unwrap();
    }
    let mut out = Vec::new();
    let mut frames = 0;
    while t.poll_transmit(t0, &mut out).is_some() {
        let dg = Datagram::parse(&out, KEY).unwrap();
        frames += dg
            .frames()
            .filter(|f| matches!(f, Ok(Frame::Data(_))))
            .count();
    }
    // Nothing acknowledged: exactly `window` frames went out, the rest waits in the queue.
    assert_eq!(frames, 4);
    assert_eq!(t.stats().max_in_window, 4);
    assert_eq!(t.queued_bytes(id(2)), 10 * 3 * c.fragment_size());
}

#[test]
fn bad_datagrams_are_counted_and_dropped() {
    let c = cfg();
    let t0 = Instant::now();
    let mut t = Transport::new(c.clone(), id(1), 1, t0).unwrap();
    // A valid datagram from a peer, to have something to mutate.
    let mut peer = Transport::new(c.clone(), id(2), 2, t0).unwrap();
    peer.send(t0, id(1), b"hello".to_vec()).unwrap();
    let mut good = Vec::new();
    assert_eq!(peer.poll_transmit(t0, &mut good), Some(id(1)));

    let mut bad_magic = good.clone();
    bad_magic[0] ^= 0xff;
    let mut bad_version = good.clone();
    bad_version[4] = 99;
    let mut foreign = good.clone();
    foreign[5] ^= 1;
    let truncated = good[..good.len() - 1].to_vec();
    for d in [
        &bad_magic,
        &bad_version,
        &foreign,
        &truncated,
        &vec![],
        &vec![0xAB; 3000],
    ] {
        t.handle_datagram(t0, id(2), d);
    }
    let s = t.stats().clone();
    assert_eq!(s.datagrams_in, 6);
    assert_eq!(s.dropped_bad_magic, 2);
    assert_eq!(s.dropped_bad_version, 1);
    assert_eq!(s.dropped_foreign_job, 1);
    assert_eq!(s.dropped_malformed, 2);
    assert_eq!(t.poll_event(), None);
    let mut out = Vec::new();
    assert_eq!(t.poll_transmit(t0, &mut out), None, "nothing to ack");
    // The transport still works.
    t.handle_datagram(t0, id(2), &good);
    assert_eq!(
        t.poll_event(),
        Some(TransportEvent::Delivered {
            from: id(2),
            message: b"hello".to_vec()
        })
    );
    // The same datagram again is a suppressed duplicate.
    t.handle_datagram(t0, id(2), &good);
    assert_eq!(t.poll_event(), None);
    assert_eq!(t.stats().duplicates, 1);
}

#[test]
fn peer_failure_after_timeout_in_virtual_time() {
    let c = TransportConfig {
        peer_timeout: Duration::from_secs(5),
        ..cfg()
    };
    let t0 = Instant::now();
    let mut now = t0;
    let mut net = SimNetwork::new(9, SimConfig::default());
    let mut nodes = vec![Node::new(&c, 1, t0), Node::new(&c, 2, t0)];
    nodes[0].t.send(now, id(2), b"first".to_vec()).unwrap();
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits(t0)).unwrap();
    assert_eq!(nodes[1].got.len(), 1);
    net.partition(id(2));
    let cut = now;
    for i in 0..3 {
        nodes[0].t.send(now, id(2), payload(1, i, 100_000)).unwrap();
    }
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits(t0)).unwrap();
    assert_eq!(nodes[0].failed, vec![id(2)]);
    let waited = now - cut;
    assert!(waited >= Duration::from_secs(5), "failed after {waited:?}");
    assert!(
        waited < Duration::from_secs(5) + c.max_rto,
        "failed after {waited:?}"
    );
    assert!(nodes[0].t.is_failed(id(2)));
    assert_eq!(nodes[0].t.queued_bytes(id(2)), 0);
    assert_eq!(
        nodes[0].t.send(now, id(2), vec![1]),
        Err(TransportError::PeerFailed { peer: id(2) })
    );
    assert_eq!(nodes[0].t.stats().peers_failed, 1);
    assert!(nodes[0].t.stats().rto_expirations > 0);
    // Reported once: nothing more happens afterwards.
    net.heal(id(2));
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits(t0)).unwrap();
    assert_eq!(nodes[0].failed, vec![id(2)]);
    assert_eq!(
        nodes[1].got.len(),
        1,
        "nothing sent after the cut was delivered"
    );
}

#[test]
fn idle_peer_never_fails() {
    let c = TransportConfig {
        peer_timeout: Duration::from_millis(100),
        ..cfg()
    };
    let t0 = Instant::now();
    let mut now = t0;
    let mut net = SimNetwork::new(9, SimConfig::default());
    let mut nodes = vec![Node::new(&c, 1, t0), Node::new(&c, 2, t0)];
    nodes[0].t.send(now, id(2), b"a".to_vec()).unwrap();
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits(t0)).unwrap();
    assert_eq!(
        nodes[0].t.poll_timeout(),
        None,
        "no timer while nothing is outstanding"
    );
    // Long silence with nothing outstanding, then a new message: still fine.
    now += Duration::from_secs(10);
    nodes[0].t.send(now, id(2), b"b".to_vec()).unwrap();
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits(t0)).unwrap();
    assert!(nodes[0].failed.is_empty());
    assert_eq!(nodes[1].got.len(), 2);
}

#[test]
fn reassembly_memory_stays_bounded() {
    let max_message = 300_000;
    let c = TransportConfig {
        max_message,
        max_reassembly_bytes: 2 * max_message,
        ..cfg()
    };
    let t0 = Instant::now();
    let mut now = t0;
    let mut net = SimNetwork::new(31, SimConfig::lossy(0.2));
    let mut nodes: Vec<Node> = (1..=5).map(|p| Node::new(&c, p, t0)).collect();
    for src in 2..=5u32 {
        for i in 0..6 {
            let m = payload(src, i, max_message - (i * 1000));
            nodes[src as usize - 1].t.send(now, id(1), m).unwrap();
        }
    }
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits(t0)).unwrap();
    let rx = &nodes[0];
    assert_eq!(rx.got.len(), 24);
    for src in 2..=5u32 {
        let msgs: Vec<_> = rx.got.iter().filter(|(f, _)| *f == id(src)).collect();
        for (i, (_, m)) in msgs.iter().enumerate() {
            assert!(*m == payload(src, i, max_message - (i * 1000)));
        }
    }
    let s = rx.t.stats();
    assert!(
        s.reassembly_high_water <= 2 * max_message,
        "{}",
        s.reassembly_high_water
    );
    assert!(
        s.dropped_no_memory > 0,
        "the bound was never reached: {s:?}"
    );
}

#[test]
fn restarted_peer_is_detected_not_confused() {
    let c = cfg();
    let t0 = Instant::now();
    let mut now = t0;
    let mut net = SimNetwork::new(2, SimConfig::default());
    let mut nodes = vec![Node::new(&c, 1, t0), Node::new(&c, 2, t0)];
    nodes[0].t.send(now, id(2), b"to old".to_vec()).unwrap();
    nodes[1].t.send(now, id(1), b"from old".to_vec()).unwrap();
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits(t0)).unwrap();
    // Node 2 restarts at the same address with a new incarnation and sends first.
    nodes[1] = Node {
        t: Transport::new(c.clone(), id(2), 0xBEEF, now).unwrap(),
        ..Node::new(&c, 2, now)
    };
    nodes[1].t.send(now, id(1), b"from new".to_vec()).unwrap();
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits(t0)).unwrap();
    assert_eq!(nodes[0].failed, vec![id(2)]);
    assert_eq!(nodes[0].got, vec![(id(2), b"from old".to_vec())]);
    assert_eq!(nodes[0].t.stats().peer_restarts, 1);
}

#[test]
fn datagram_for_old_incarnation_triggers_reset() {
    let c = cfg();
    let t0 = Instant::now();
    let mut now = t0;
    let mut net = SimNetwork::new(2, SimConfig::default());
    let mut nodes = vec![Node::new(&c, 1, t0), Node::new(&c, 2, t0)];
    nodes[0].t.send(now, id(2), b"one".to_vec()).unwrap();
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits(t0)).unwrap();
    nodes[1] = Node {
        t: Transport::new(c.clone(), id(2), 0xBEEF, now).unwrap(),
        ..Node::new(&c, 2, now)
    };
    // Node 1 still addresses the old incarnation; the new one answers with its identity.
    nodes[0].t.send(now, id(2), b"two".to_vec()).unwrap();
    run_until_quiescent(&mut net, &mut nodes, &mut now, limits(t0)).unwrap();
    assert_eq!(nodes[0].failed, vec![id(2)]);
    assert!(nodes[1].got.is_empty());
    assert_eq!(nodes[1].t.stats().dropped_stale, 1);
    assert!(
        now - t0 < c.peer_timeout,
        "detected by the reset, not the timeout"
    );
}

#[test]
fn api_errors_are_typed() {
    let t0 = Instant::now();
    let c = TransportConfig {
        max_message: 1000,
        ..cfg()
    };
    let mut t = Transport::new(c, id(1), 1, t0).unwrap();
    assert_eq!(
        t.send(t0, id(2), vec![0; 1001]),
        Err(TransportError::TooLarge {
            len: 1001,
            max: 1000
        })
    );
    assert!(t.send(t0, id(2), vec![0; 1000]).is_ok());
    assert!(matches!(
        Transport::new(TransportConfig { window: 0, ..cfg() }, id(1), 1, t0),
        Err(TransportError::InvalidConfig {
            field: "window",
            ..
        })
    ));
    assert!(matches!(
        Transport::new(
            TransportConfig {
                max_datagram: 100,
                ..cfg()
            },
            id(1),
            1,
            t0
        ),
        Err(TransportError::InvalidConfig {
            field: "max_datagram",
            ..
        })
    ));
    assert!(matches!(
        Transport::new(
            TransportConfig {
                max_reassembly_bytes: 10,
                ..cfg()
            },
            id(1),
            1,
            t0
        ),
        Err(TransportError::InvalidConfig {
            field: "max_reassembly_bytes",
            ..
        })
    ));
    assert_eq!(
        Transport::new(cfg(), id(1), 0, t0).err(),
        Some(TransportError::ZeroIncarnation)
    );
}

#[test]
fn bogus_acks_are_ignored() {
    let c = cfg();
    let t0 = Instant::now();
    let mut t = Transport::new(c, id(1), 1, t0).unwrap();
    t.send(t0, id(2), b"x".to_vec()).unwrap();
    let mut out = Vec::new();
    t.poll_transmit(t0, &mut out).unwrap();
    // An ack for 1000 frames when one was sent.
    let mut dg = Vec::new();
    wire::write_header(
        &mut dg,
        &Header {
            job_key: KEY,
            src_incarnation: 2,
            dst_incarnation: 1,
        },
    );
    wire::write_ack(&mut dg, &wire::AckFrame::new(1000, 999, 0));
    t.handle_datagram(t0, id(2), &dg);
    // The ack is applied once the transport settles, after the driver's transmit pass.
    assert!(t.poll_transmit(t0, &mut out).is_none());
    assert_eq!(t.stats().bogus_acks, 1);
    assert_eq!(
        t.queued_bytes(id(2)),
        1,
        "the message is still unacknowledged"
    );
}

#[test]
fn in_place_bodies_are_gathered_from_their_region_when_sent() {
    let c = cfg();
    let t0 = Instant::now();
    let mut a = Transport::new(c.clone(), id(1), 11, t0).unwrap();
    let mut b = Transport::new(c.clone(), id(2), 22, t0).unwrap();
    let mut want = payload(1, 0, 2 * c.fragment_size() + 100);
    let head_len = 79;
    let region = crate::memory::Region::new(want.len() + 1);
    region.write(1, &want[head_len..]).unwrap();
    let span = crate::memory::RegionSpan::new(region.clone(), 1, want.len() - head_len).unwrap();
    let message = OutMessage::new(want[..head_len].to_vec(), Some(span));
    a.send(t0, id(2), message).unwrap();
    // Changed after `send`, before any datagram left: an in-place body is read when its
    // fragments are sent, so the new bytes arrive (no copy was taken at `send`).
    let at = head_len + c.fragment_size() + 10;
    want[at..at + 16].copy_from_slice(&[0xa5; 16]);
    region.write(1 + at - head_len, &[0xa5; 16]).unwrap();
    let (mut out, mut spans) = (Vec::new(), 0);
    while let Some((to, tail)) = a.poll_transmit_gather(t0, &mut out) {
        assert_eq!(to, id(2));
        if let Tail::Span { from, len, .. } = tail {
            assert!(from + len <= want.len() - head_len);
            spans += 1;
        }
        let mut datagram = out.clone();
        tail.append_to(&mut datagram);
        b.handle_datagram(t0, id(1), &datagram);
    }
    // The third fragment's 100 bytes are below the gathering threshold and were copied.
    assert_eq!(
        spans, 2,
        "the full fragments' body bytes left from the region"
    );
    let mut got = Vec::new();
    while let Some(ev) = b.poll_event() {
        if let TransportEvent::Delivered { message, .. } = ev {
            got.push(message);
        }
    }
    assert_eq!(got, vec![want]);
}

#[test]
fn gathered_datagrams_deliver_the_same_messages() {
    let c = cfg();
    let t0 = Instant::now();
    let mut a = Transport::new(c.clone(), id(1), 11, t0).unwrap();
    let mut b = Transport::new(c.clone(), id(2), 22, t0).unwrap();
    let big = payload(1, 0, 3 * c.fragment_size() + 5000);
    let small = payload(1, 1, 10);
    a.send(t0, id(2), big.clone()).unwrap();
    a.send(t0, id(2), small.clone()).unwrap();
    let (mut out, mut gathered, mut bytes) = (Vec::new(), 0, 0);
    while let Some((to, tail)) = a.poll_transmit_gather(t0, &mut out) {
        assert_eq!(to, id(2));
        assert!(out.len() + tail.len() <= c.max_datagram);
        gathered += usize::from(!tail.is_empty());
        let mut datagram = out.clone();
        tail.append_to(&mut datagram);
        bytes += datagram.len() as u64;
        b.handle_datagram(t0, id(1), &datagram);
    }
    // Four fragments of the big message went out with their payload left in place.
    assert_eq!(gathered, 4);
    assert_eq!(a.stats().bytes_out, bytes);
    let mut got = Vec::new();
    while let Some(ev) = b.poll_event() {
        match ev {
            TransportEvent::Delivered { from, message } => got.push((from, message)),
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(got, vec![(id(1), big), (id(1), small)]);
    assert_eq!(b.stats().dropped_malformed, 0);
}

#[test]
fn a_confirmation_follows_the_fenced_answer_that_arrived_with_it() {
    let c = cfg();
    let t0 = Instant::now();
    let mut a = Transport::new(c.clone(), id(1), 1001, t0).unwrap();
    let mut b = Transport::new(c, id(2), 2001, t0).unwrap();
    a.send(t0, id(2), OutMessage::from(vec![1u8; 8]).confirmed_as(7))
        .unwrap();
    let mut dg = Vec::new();
    assert_eq!(a.poll_transmit(t0, &mut dg), Some(id(2)));
    b.handle_datagram(t0, id(1), &dg);
    assert!(matches!(
        b.poll_event(),
        Some(TransportEvent::Delivered { .. })
    ));
    // a has another message queued, so b's ack is applied as it arrives, not deferred.
    a.send(t0, id(2), vec![3u8; 8]).unwrap();
    // b answers with a fenced message; its datagram also acknowledges a's message.
    b.send(t0, id(1), OutMessage::from(vec![2u8; 8]).fenced())
        .unwrap();
    assert_eq!(b.poll_transmit(t0, &mut dg), Some(id(1)));
    a.handle_datagram(t0, id(2), &dg);
    while a.poll_transmit(t0, &mut dg).is_some() {}
    if a.poll_timeout().is_some_and(|d| d <= t0) {
        a.handle_timeout(t0);
    }
    // The answer first, then the confirmation: a layer above that handles events in order
    // sees a refusal before the success it overrides.
    assert!(matches!(
        a.poll_event(),
        Some(TransportEvent::Delivered { message, .. }) if message == vec![2u8; 8]
    ));
    assert_eq!(
        a.poll_event(),
        Some(TransportEvent::Confirmed {
            peer: id(2),
            token: 7
        })
    );
    assert_eq!(a.poll_event(), None);
}
