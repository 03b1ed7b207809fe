//! In-process tests of setup and of the node API; "ranks" are threads whose bootstrap
//! barrier is a `std::sync::Barrier`. Multi-process tests are in `tests/`.
use super::*;
use crate::barrier::BarrierName;
use crate::message::Body;
use crate::segment::{job_prefix, SHM_DIR};
use std::sync::atomic::AtomicU64;
use std::sync::Barrier;

fn objects_of(job_key: u64) -> Vec<String> {
    let prefix = job_prefix(job_key);
    let mut v: Vec<String> = std::fs::read_dir(SHM_DIR)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&prefix))
        .collect();
    v.sort();
    v
}

fn no_barrier() -> Result<(), std::io::Error> {
    Ok(())
}

/// Attaches `n` ranks on threads and runs `body(rank, node, receiver, barrier)` on each.
fn with_ranks<T: Send>(
    n: u32,
    seg: usize,
    body: impl Fn(u32, Node, Receiver, &Barrier) -> T + Sync,
) -> Vec<T> {
    with_ranks_config(n, |_, cfg| cfg.segment_len = seg, body)
}

/// [`with_ranks`], each rank's configuration set by `configure(rank, config)`.
fn with_ranks_config<T: Send>(
    n: u32,
    configure: impl Fn(u32, &mut NodeConfig) + Sync,
    body: impl Fn(u32, Node, Receiver, &Barrier) -> T + Sync,
) -> Vec<T> {
    let key: u64 = rand::random();
    let barrier = Barrier::new(n as usize);
    let out = std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|rank| {
                let (barrier, body, configure) = (&barrier, &body, &configure);
                s.spawn(move || {
                    let mut cfg = NodeConfig::new(key, rank, (0..n).collect(), 0);
                    configure(rank, &mut cfg);
                    let (node, rx) = Node::attach(cfg, || {
                        barrier.wait();
                        Ok::<(), std::io::Error>(())
                    })
                    .unwrap();
                    body(rank, node, rx, barrier)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(objects_of(key), Vec::<String>::new());
    out
}

#[test]
fn single_rank_sends_to_itself_and_leaves_nothing_in_dev_shm() {
    let key: u64 = rand::random();
    let cfg = NodeConfig::new(key, 3, vec![3], 10_000);
    let (node, mut rx) = Node::attach(cfg, no_barrier).unwrap();
    assert_eq!(objects_of(key), Vec::<String>::new());
    assert_eq!((node.rank(), node.members()), (3, &[3][..]));
    let seg = node.segment(3).unwrap();
    assert_eq!(seg.len(), 10_000);
    assert!(node.segment(4).is_none());
    seg.write(9_990, b"0123456789").unwrap();
    assert_eq!(seg.to_vec(9_990, 10).unwrap(), b"0123456789");
    assert!(seg.write(9_991, b"0123456789").is_err());

    assert!(!rx.has_pending());
    let m = AmMessage {
        handler: 200,
        args: &[1, 2, 3],
        body: Body::Medium(b"hello"),
    };
    node.try_send_request(3, &m).unwrap();
    node.try_send_reply(
        3,
        &AmMessage {
            handler: 201,
            args: &[],
            body: Body::Short,
        },
    )
    .unwrap();
    assert!(rx.has_pending());
    assert!(rx.wait(Duration::ZERO));
    let got = rx.requests.try_recv().unwrap().unwrap();
    assert_eq!(
        (got.source(), got.handler(), got.args()),
        (3, 200, &[1, 2, 3][..])
    );
    assert_eq!(got.body(), Body::Medium(b"hello"));
    // The reply queue is independent of a request still being handled.
    let rep = rx.replies.try_recv().unwrap().unwrap();
    assert_eq!((rep.handler(), rep.body()), (201, Body::Short));
    drop((got, rep));
    assert!(!rx.has_pending());
    assert!(!rx.wait(Duration::from_millis(1)));
    assert_eq!(
        node.try_send_request(9, &m),
        Err(SendError::NotAPeer { rank: 9 })
    );
    let t = node.barrier_arrive();
    assert!(node.barrier_done(t));
}

#[test]
fn peers_share_segments_and_exchange_requests_and_replies() {
    let results = with_ranks(3, 1 << 16, |rank, node, mut rx, barrier| {
        // Each rank writes its rank into every member's segment at offset 8 * rank.
        for &peer in node.members() {
            let seg = node.segment(peer).unwrap();
            seg.write(8 * rank as usize, &u64::from(rank + 100).to_le_bytes())
                .unwrap();
        }
        let t = node.barrier_arrive();
        assert!(node.barrier_wait(t, Duration::from_secs(60)));
        let own = node.segment(rank).unwrap().to_vec(0, 24).unwrap();
        let expect: Vec<u8> = (0..3u64).flat_map(|r| (r + 100).to_le_bytes()).collect();
        assert_eq!(own, expect);

        // Long: data into the next rank's segment, then the header.
        let next = (rank + 1) % 3;
        let data = vec![rank as u8 + 1; 5000];
        node.segment(next).unwrap().write(1000, &data).unwrap();
        let long = AmMessage {
            handler: 130,
            args: &[rank],
            body: Body::Long {
                offset: 1000,
                len: 5000,
            },
        };
        node.try_send_request(next, &long).unwrap();
        // Serve one request (reply to it), then wait for our reply.
        let prev = (rank + 2) % 3;
        let mut got_reply = None;
        let mut served = false;
        while got_reply.is_none() || !served {
            assert!(rx.wait(Duration::from_secs(60)), "rank {rank} timed out");
            if let Some(m) = rx.requests.try_recv().unwrap() {
                assert_eq!((m.source(), m.args()), (prev, &[prev][..]));
                let Body::Long { offset, len } = m.body() else {
                    panic!("not a Long: {m:?}")
                };
                let bytes = node
                    .segment(rank)
                    .unwrap()
                    .to_vec(offset as usize, len as usize)
                    .unwrap();
                assert_eq!(bytes, vec![prev as u8 + 1; 5000]);
                let reply = AmMessage {
                    handler: 131,
                    args: &[rank, 7],
                    body: Body::Medium(&bytes[..100]),
                };
                node.try_send_reply(m.source(), &reply).unwrap();
                served = true;
            }
            if let Some(m) = rx.replies.try_recv().unwrap() {
                assert_eq!(m.body(), Body::Medium(&[rank as u8 + 1; 100][..]));
                got_reply = Some(m.args().to_vec());
            }
        }
        barrier.wait();
        got_reply.unwrap()
    });
    assert_eq!(results, vec![vec![1, 7], vec![2, 7], vec![0, 7]]);
}

#[test]
fn a_sleeping_receiver_is_woken_by_a_sender() {
    with_ranks(2, 4096, |rank, node, mut rx, barrier| {
        let policy_free = Duration::from_secs(60);
        if rank == 0 {
            // Make sure rank 0 sleeps: no spin, nothing pending.
            barrier.wait();
            assert!(rx.wait(policy_free));
            let m = rx.requests.try_recv().unwrap().unwrap();
            assert_eq!(m.args(), &[99]);
        } else {
            barrier.wait();
            // Give rank 0 a chance to fall asleep; correctness does not depend on it.
            std::thread::sleep(Duration::from_millis(20));
            let m = AmMessage {
                handler: 1,
                args: &[99],
                body: Body::Short,
            };
            node.try_send_request(0, &m).unwrap();
        }
    });
}

#[test]
fn too_little_shared_memory_is_a_clear_error_and_creates_nothing() {
    let key: u64 = rand::random();
    let cfg = NodeConfig::new(key, 0, vec![0], 1 << 50);
    let needed = cfg.object_len().unwrap() as u64;
    let e = Node::attach(cfg, || -> Result<(), std::io::Error> {
        panic!("the barrier must not be reached")
    })
    .unwrap_err();
    let text = e.to_string();
    match e {
        SetupError::NoSpace {
            needed: n,
            available,
            ref object,
            ref path,
        } => {
            assert_eq!(n, needed);
            assert_eq!(object, &segment::object_name(key, 0));
            assert_eq!(path, "/dev/shm");
            assert!(
                text.contains(&format!(
                    "{needed} bytes needed, {available} bytes available in /dev/shm"
                )),
                "{text}"
            );
        }
        other => panic!("unexpected {other}"),
    }
    assert_eq!(objects_of(key), Vec::<String>::new());
}

#[test]
fn bad_configs_are_rejected() {
    let e = Node::attach(NodeConfig::new(1, 2, vec![0, 1], 0), no_barrier).unwrap_err();
    assert_eq!(
        e.to_string(),
        "invalid pshm configuration: rank 2 is not among the supernode members [0, 1]"
    );
    let e = Node::attach(NodeConfig::new(1, 1, vec![1, 0], 0), no_barrier).unwrap_err();
    assert!(e.to_string().contains("not strictly ascending"), "{e}");
    let mut cfg = NodeConfig::new(1, 0, vec![0], 0);
    cfg.queue_cells = 100;
    assert!(matches!(
        Node::attach(cfg, no_barrier),
        Err(SetupError::Config(_))
    ));
    for radix in [0, 1, 9] {
        let mut cfg = NodeConfig::new(1, 0, vec![0], 0);
        cfg.barrier_radix = radix;
        let e = Node::attach(cfg, no_barrier).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "invalid pshm configuration: the dissemination barrier's radix must be 2 to 8, got {radix}"
            )
        );
    }
}

#[test]
fn a_failing_barrier_or_a_bad_peer_object_leaves_nothing_behind() {
    let key: u64 = rand::random();
    let e = Node::attach(NodeConfig::new(key, 0, vec![0, 1], 0), || {
        Err(std::io::Error::other("bootstrap lost"))
    })
    .unwrap_err();
    assert_eq!(
        e.to_string(),
        "bootstrap barrier failed during pshm setup (after creating the objects)"
    );
    assert_eq!(objects_of(key), Vec::<String>::new());

    // A peer object with garbage in it.
    let fake_name = segment::object_name(key, 1);
    let fake = Mapping::create(&fake_name, layout::PAGE).unwrap();
    fake.words()[0].store(0x1234, Ordering::Relaxed);
    let e = Node::attach(NodeConfig::new(key, 0, vec![0, 1], 0), no_barrier).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "shared-memory object {fake_name} is not a valid rgasnet-pshm object: magic 0x0000000000001234"
        )
    );
    // A peer object whose header claims more than it has.
    fake.words()[layout::W_JOB_KEY].store(key, Ordering::Relaxed);
    fake.words()[layout::W_RANK].store(1, Ordering::Relaxed);
    fake.words()[layout::W_QUEUE_CELLS].store(MIN_QUEUE_CELLS as u64, Ordering::Relaxed);
    fake.words()[layout::W_SEGMENT_LEN].store(0, Ordering::Relaxed);
    fake.words()[layout::W_MAGIC].store(layout::MAGIC, Ordering::Relaxed);
    let e = Node::attach(NodeConfig::new(key, 0, vec![0, 1], 0), no_barrier).unwrap_err();
    assert!(
        e.to_string().contains("header says 0 bytes, layout needs"),
        "{e}"
    );
    // A peer object of another job.
    fake.words()[layout::W_JOB_KEY].store(key ^ 1, Ordering::Relaxed);
    let e = Node::attach(NodeConfig::new(key, 0, vec![0, 1], 0), no_barrier).unwrap_err();
    assert!(
        e.to_string()
            .contains(&format!("belongs to job {:#x} rank 1", key ^ 1)),
        "{e}"
    );
    assert_eq!(objects_of(key), vec![fake_name[1..].to_string()]);
    assert_eq!(crate::remove_job_objects(key).unwrap(), vec![fake_name]);
    assert_eq!(objects_of(key), Vec::<String>::new());
}

#[test]
fn has_incoming_follows_both_queues_without_consuming() {
    let key: u64 = rand::random();
    let (node, mut rx) = Node::attach(NodeConfig::new(key, 0, vec![0], 4096), no_barrier).unwrap();
    const ARGS: [u32; 3] = [0, 1, 2];
    let short = |handler: u8| AmMessage {
        handler,
        args: &ARGS[usize::from(handler)..=usize::from(handler)],
        body: Body::Short,
    };
    assert!(!node.has_incoming());
    node.try_send_reply(0, &short(1)).unwrap();
    assert!(node.has_incoming());
    // Looking does not take: the message is still there, and still there after a second look.
    assert!(node.has_incoming());
    let m = rx.replies.try_recv().unwrap().unwrap();
    assert_eq!((m.handler(), m.args()), (1, &[1][..]));
    // Released only when dropped: until then the shared head still names the message.
    assert!(node.has_incoming());
    drop(m);
    assert!(!node.has_incoming());
    node.try_send_request(0, &short(2)).unwrap();
    assert!(node.has_incoming());
    drop(rx.requests.try_recv().unwrap().unwrap());
    assert!(!node.has_incoming());
    // Across the end of the ring (pads included), the hint keeps matching `has_pending`.
    let payload = vec![7u8; 1000];
    for i in 0..3 * MIN_QUEUE_CELLS {
        let m = AmMessage {
            handler: 3,
            args: &[i as u32],
            body: Body::Medium(&payload[..i % 1000]),
        };
        node.try_send_request(0, &m).unwrap();
        assert!(node.has_incoming() && rx.has_pending());
        let got = rx.requests.try_recv().unwrap().unwrap();
        assert_eq!((got.args(), got.body()), (&[i as u32][..], m.body));
        drop(got);
        assert!(!node.has_incoming() && !rx.has_pending());
    }
}

#[test]
fn mapped_segment_is_the_region_s_bytes_one_word_at_a_time() {
    with_ranks(2, 1000, |rank, node, _rx, barrier| {
        let peer = 1 - rank;
        let direct = node.mapped_segment(peer).unwrap();
        let region = node.segment(peer).unwrap();
        assert_eq!(direct.len(), 1000);
        assert!(node.mapped_segment(7).is_none());
        // Each rank writes its own half of the peer's segment, word by word and bytewise.
        let base = 496 * u64::from(rank);
        let word = (0x0102_0304_0506_0708u64 + u64::from(rank)).to_le_bytes();
        assert!(direct.try_write_word(base, &word));
        assert_eq!(region.to_vec(base as usize, 8).unwrap(), word);
        region.write(base as usize + 8, b"abcdefgh").unwrap();
        let mut got = [0u8; 8];
        assert!(direct.try_read_word(base + 8, &mut got));
        assert_eq!(&got, b"abcdefgh");
        // Anything that is not one aligned word in range is refused and leaves the bytes.
        assert!(!direct.try_write_word(base + 4, &word));
        assert!(!direct.try_write_word(base, &word[..4]));
        assert!(!direct.try_write_word(base, &[0u8; 16]));
        assert!(direct.try_write_word(992, &word)); // the last whole word
        assert!(!direct.try_write_word(1000, &word)); // 1000 + 8 > 1000
        assert!(!direct.try_write_word(u64::MAX - 7, &word));
        assert!(!direct.try_read_word(base + 1, &mut got));
        assert!(!direct.try_read_word(base, &mut [0u8; 7]));
        assert!(!direct.try_read_word(1000, &mut got));
        assert_eq!(region.to_vec(base as usize, 8).unwrap(), word);
        barrier.wait();
        // The owner sees both ranks' words in its own segment.
        let own = node.segment(rank).unwrap();
        let other = 496 * u64::from(peer);
        let want = (0x0102_0304_0506_0708u64 + u64::from(peer)).to_le_bytes();
        assert_eq!(own.to_vec(other as usize, 16).unwrap()[..8], want);
        assert_eq!(&own.to_vec(other as usize + 8, 8).unwrap(), b"abcdefgh");
        let mine = node.mapped_segment(rank).unwrap();
        assert!(mine.try_read_word(other, &mut got));
        assert_eq!(got, want);
    });
}

#[test]
fn a_rank_that_marks_itself_left_is_seen_left_with_what_it_sent_before() {
    with_ranks(2, 4096, |rank, node, mut rx, barrier| {
        assert!(
            !node.has_left(0) && !node.has_left(1),
            "nobody has left yet"
        );
        barrier.wait();
        if rank == 1 {
            node.try_send_request(
                0,
                &AmMessage {
                    handler: 150,
                    args: &[7],
                    body: Body::Short,
                },
            )
            .unwrap();
            node.mark_left();
            assert!(node.has_left(1), "a rank sees its own mark");
        } else {
            while !node.has_left(1) {
                std::hint::spin_loop();
            }
            // The request enqueued before the mark is there once the mark is seen.
            let got = rx.requests.try_recv().unwrap().unwrap();
            assert_eq!(
                (got.source(), got.handler(), got.args()),
                (1, 150, &[7][..])
            );
            assert!(!node.has_left(0));
            assert!(
                !node.has_left(5),
                "a rank outside the supernode is never seen left"
            );
        }
        barrier.wait();
    });
}

#[test]
fn one_word_puts_and_gets_are_refused_once_the_segment_s_owner_left() {
    with_ranks(2, 4096, |rank, node, _rx, barrier| {
        let word = 0x1122_3344_5566_7788u64.to_le_bytes();
        let mut got = [0u8; 8];
        if rank == 0 {
            let direct = node.mapped_segment(1).unwrap();
            assert!(!direct.owner_left());
            assert!(direct.try_write_word(64, &word));
            barrier.wait(); // rank 1 marks itself left
            barrier.wait();
            assert!(direct.owner_left() && node.has_left(1));
            // Refused, and nothing written: the general path reports the peer's end.
            assert!(!direct.try_write_word(64, &[0u8; 8]));
            assert!(!direct.try_read_word(64, &mut got));
            assert_eq!(got, [0u8; 8]);
            assert_eq!(node.segment(1).unwrap().to_vec(64, 8).unwrap(), word);
            // Rank 0's own segment is unaffected by its peer's end.
            let own = node.mapped_segment(0).unwrap();
            assert!(!own.owner_left() && own.try_write_word(0, &word));
        } else {
            barrier.wait();
            node.mark_left();
            barrier.wait();
        }
    });
}

#[test]
fn a_closed_receiver_refuses_senders_and_is_drained_once_it_took_what_came_before() {
    let msg = |arg: &'static [u32]| AmMessage {
        handler: 151,
        args: arg,
        body: Body::Short,
    };
    with_ranks(2, 4096, |rank, node, mut rx, barrier| {
        assert!(!rx.drained(), "an open receiver is never drained");
        if rank == 1 {
            node.try_send_request(0, &msg(&[1])).unwrap();
            node.try_send_reply(0, &msg(&[2])).unwrap();
        }
        barrier.wait();
        if rank == 0 {
            rx.close();
            assert!(!rx.drained(), "two messages came before the close");
        }
        barrier.wait();
        if rank == 1 {
            let closed = |queue| Err(SendError::Closed { dest: 0, queue });
            assert_eq!(node.try_send_request(0, &msg(&[3])), closed("request"));
            assert_eq!(node.try_send_reply(0, &msg(&[4])), closed("reply"));
        } else {
            assert_eq!(rx.requests.try_recv().unwrap().unwrap().args(), &[1]);
            assert!(!rx.drained());
            assert_eq!(rx.replies.try_recv().unwrap().unwrap().args(), &[2]);
            assert!(rx.drained());
            assert!(rx.requests.try_recv().unwrap().is_none());
            assert!(rx.replies.try_recv().unwrap().is_none());
            // The closed rank can still send to its peers (its handlers' replies).
            node.try_send_request(1, &msg(&[5])).unwrap();
        }
        barrier.wait();
        if rank == 1 {
            assert_eq!(rx.requests.try_recv().unwrap().unwrap().args(), &[5]);
        }
    });
}

/// [`with_ranks`] with the node barrier and wait policy `kinds(rank)` (the leader's choice
/// of barrier counts).
fn with_ranks_barrier<T: Send>(
    n: u32,
    kinds: impl Fn(u32) -> (BarrierKind, WaitPolicy) + Sync,
    body: impl Fn(u32, Node) -> T + Sync,
) -> Vec<T> {
    with_ranks_barrier_radix(n, crate::dissemination::DEFAULT_RADIX, kinds, body)
}

/// [`with_ranks_barrier`] with the dissemination barrier's radix `radix`.
fn with_ranks_barrier_radix<T: Send>(
    n: u32,
    radix: u32,
    kinds: impl Fn(u32) -> (BarrierKind, WaitPolicy) + Sync,
    body: impl Fn(u32, Node) -> T + Sync,
) -> Vec<T> {
    with_ranks_config(
        n,
        |rank, cfg| {
            cfg.segment_len = 4096;
            cfg.barrier_radix = radix;
            (cfg.barrier, cfg.wait) = kinds(rank);
        },
        |rank, node, _rx, _barrier| body(rank, node),
    )
}

/// What rank `rank` of `n` brings to barrier `i`, and what the barrier must agree on
/// (`None`: a mismatch, whatever the name).
fn barrier_case(i: u32, rank: u32, n: u32) -> (BarrierName, Option<Option<u32>>) {
    let named = |name| BarrierName {
        name: Some(name),
        mismatch: false,
    };
    match i % 5 {
        0 => (BarrierName::default(), Some(None)),
        // One rank brings another name (with one rank, nobody differs).
        1 if rank == i % n => (named(1000 + i), (n == 1).then_some(Some(1000 + i))),
        1 => (named(i), None),
        // Anonymous and named arrivals: the name.
        2 if rank == 0 => (BarrierName::default(), Some((n > 1).then_some(i))),
        2 => (named(i), Some(Some(i))),
        // One rank flags a mismatch of its own.
        3 if rank == i % n => (
            BarrierName {
                name: Some(i),
                mismatch: true,
            },
            None,
        ),
        3 => (named(i), None),
        _ => (named(i), Some(Some(i))),
    }
}

#[test]
fn both_node_barriers_agree_on_names_values_and_never_let_a_rank_pass_early() {
    let kinds = [
        (BarrierKind::Counter, 2),
        (BarrierKind::Dissemination, 2),
        (BarrierKind::Dissemination, 3),
        (BarrierKind::Dissemination, 4),
        (BarrierKind::Dissemination, 8),
    ];
    for (kind, radix) in kinds {
        // 9: two rounds at radix 8, three slots in the second round at radix 4 (4 and 8
        // members back), a partial last round at radix 2 and 3.
        for n in [1u32, 2, 3, 5, 8, 9] {
            let arrivals = AtomicU64::new(0);
            with_ranks_barrier_radix(
                n,
                radix,
                |_| (kind, WaitPolicy::default()),
                |rank, node| {
                    assert_eq!(
                        node.barrier_disseminates(),
                        kind == BarrierKind::Dissemination
                    );
                    // Fewer barriers where the threads outnumber the CPUs of a small machine
                    // many times over (each spinning waiter holds one until its slice ends):
                    // every case of `barrier_case` still comes a dozen times.
                    let barriers = if n > 5 { 60 } else { 300 };
                    for i in 0..barriers {
                        let (name, want) = barrier_case(i, rank, n);
                        arrivals.fetch_add(1, Ordering::SeqCst);
                        let t = node.barrier_arrive_with(name, u64::from(i) << 8 | u64::from(rank));
                        if i % 2 == 0 {
                            assert!(node.barrier_wait(t, Duration::from_secs(60)));
                        } else {
                            while !node.barrier_done(t) {
                                std::hint::spin_loop();
                            }
                        }
                        assert!(
                            arrivals.load(Ordering::SeqCst) >= u64::from((i + 1) * n),
                            "{kind:?} radix {radix}, {n} ranks: rank {rank} passed barrier {i} early"
                        );
                        let got = node.barrier_name(t);
                        match want {
                            None => {
                                assert!(got.mismatch, "{kind:?} radix {radix} n={n} i={i}: {got:?}")
                            }
                            Some(name) => assert_eq!(
                                got,
                                BarrierName {
                                    name,
                                    mismatch: false
                                },
                                "{kind:?} radix {radix} n={n} i={i} rank {rank}"
                            ),
                        }
                        for j in 0..n as usize {
                            assert_eq!(
                                node.barrier_value(t, j),
                                Some(u64::from(i) << 8 | j as u64)
                            );
                        }
                    }
                },
            );
        }
    }
}

#[test]
fn a_late_rank_wakes_the_ranks_asleep_in_either_node_barrier() {
    // Radix 4 with 3 ranks: one round of two slots (a sleeper waits on whichever is not
    // written yet); radix 3 with 5: two rounds, the second of two slots.
    let cases = [
        (BarrierKind::Counter, 2, 3u32),
        (BarrierKind::Dissemination, 2, 3),
        (BarrierKind::Dissemination, 4, 3),
        (BarrierKind::Dissemination, 3, 5),
    ];
    for (kind, radix, n) in cases {
        let quick = WaitPolicy::roomy(Duration::from_micros(1), Duration::ZERO);
        with_ranks_barrier_radix(
            n,
            radix,
            |_| (kind, quick),
            |rank, node| {
                for i in 0..n + 1 {
                    if rank == i % n {
                        // The others have long stopped spinning: they sleep on the barrier.
                        std::thread::sleep(Duration::from_millis(30));
                    }
                    let t = node.barrier_arrive();
                    assert!(
                        node.barrier_wait(t, Duration::from_secs(60)),
                        "{kind:?} radix {radix}: barrier {i} never completed for rank {rank}"
                    );
                }
            },
        );
    }
}

#[test]
fn the_leader_chooses_the_node_barrier_for_everyone() {
    // Rank 0 asks for the counter, the others for dissemination: all run the counter.
    let kinds = |rank: u32| {
        let kind = if rank == 0 {
            BarrierKind::Counter
        } else {
            BarrierKind::Dissemination
        };
        (kind, WaitPolicy::default())
    };
    let used = with_ranks_barrier(3, kinds, |_, node| {
        let t = node.barrier_arrive();
        assert!(node.barrier_wait(t, Duration::from_secs(60)));
        node.barrier_disseminates()
    });
    assert_eq!(used, vec![false; 3]);
    // `Auto`: dissemination, unless the host is crowded (waits yield the CPU).
    let crowded = |_| {
        (
            BarrierKind::Auto,
            WaitPolicy::crowded(Duration::from_micros(50)),
        )
    };
    assert_eq!(
        with_ranks_barrier(2, crowded, |_, n| n.barrier_disseminates()),
        vec![false; 2]
    );
    let roomy = |_| (BarrierKind::Auto, WaitPolicy::default());
    assert_eq!(
        with_ranks_barrier(2, roomy, |_, n| n.barrier_disseminates()),
        vec![true; 2]
    );
}

#[test]
fn barrier_kinds_parse_from_their_names() {
    assert_eq!(BarrierKind::parse("auto"), Some(BarrierKind::Auto));
    assert_eq!(BarrierKind::parse(" Counter "), Some(BarrierKind::Counter));
    assert_eq!(
        BarrierKind::parse("dissemination"),
        Some(BarrierKind::Dissemination)
    );
    assert_eq!(BarrierKind::parse("tree"), None);
    for k in [
        BarrierKind::Auto,
        BarrierKind::Counter,
        BarrierKind::Dissemination,
    ] {
        assert_eq!(BarrierKind::parse(&k.to_string()), Some(k));
    }
}
