//! Single-process tests of the ring protocol over heap memory; they also run under Miri
//! (`cargo +nightly miri test -p rgasnet-pshm queue`), which checks the unsafe copies and the
//! data-race freedom of the threaded tests.
use super::*;
use std::sync::Arc;

/// Heap storage for one ring: tail, head (on separate lines), then `cells` cells.
struct TestRing {
    words: Box<[AtomicU64]>,
}

impl TestRing {
    fn new(cells: usize) -> Self {
        TestRing {
            words: (0..16 + cells * CELL_WORDS)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
    fn ring(&self) -> Ring<'_> {
        Ring {
            tail: &self.words[0],
            head: &self.words[8],
            cells: &self.words[16..],
            name: "request",
        }
    }
}

/// Every cell's first word is 0 or a stale marker (see the module docs), given `head == tail`.
fn assert_invariant_2(r: &TestRing, head: u64) {
    assert_eq!(r.ring().tail.load(Ordering::Relaxed), head);
    let cap = r.ring().cap();
    for (i, w) in r.ring().cells.iter().step_by(CELL_WORDS).enumerate() {
        let m = w.load(Ordering::Relaxed);
        assert!(
            m == 0 || ((m - 1) % cap == i as u64 && m <= head),
            "cell {i}: first word {m:#x} at head {head}"
        );
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn medium<'a>(handler: u8, args: &'a [u32], p: &'a [u8]) -> AmMessage<'a> {
    AmMessage {
        handler,
        args,
        body: Body::Medium(p),
    }
}

#[test]
fn every_category_round_trips_field_by_field() {
    let r = TestRing::new(64);
    let cache = AtomicU64::new(0);
    let mut head = 0u64;
    let args: Vec<u32> = (0..16).map(|i| 0xa000_0000 + i).collect();
    let payload = pattern(1, 300);
    let msgs = [
        AmMessage {
            handler: 0,
            args: &[],
            body: Body::Short,
        },
        AmMessage {
            handler: 255,
            args: &args[..3],
            body: Body::Short,
        },
        medium(7, &args[..16], &payload),
        medium(8, &[], &[]),
        AmMessage {
            handler: 9,
            args: &args[..1],
            body: Body::Long {
                offset: 0x1_2345_6789,
                len: 4096,
            },
        },
        AmMessage {
            handler: 10,
            args: &args[..5],
            body: Body::LongCarried {
                offset: 0x2_0000_0008,
                payload: &payload[..77],
            },
        },
        AmMessage {
            handler: 11,
            args: &[],
            body: Body::LongCarried {
                offset: 0,
                payload: &[],
            },
        },
    ];
    for m in &msgs {
        assert!(!r.ring().try_enqueue(&cache, 42, 1, m).unwrap());
    }
    for m in &msgs {
        let got = r.ring().try_dequeue(&mut head).unwrap().unwrap();
        assert_eq!(got.source(), 42);
        assert_eq!(got.handler(), m.handler);
        assert_eq!(got.args(), m.args);
        assert_eq!(got.category(), m.body.category());
        assert_eq!(got.body(), m.body);
    }
    assert!(r.ring().try_dequeue(&mut head).unwrap().is_none());
    // Positions used: 1 + 1 + cells_for(16, 300) + 1 + 1 + cells_for(5, 77) + 1.
    assert_eq!(head, 5 + (cells_for(16, 300) + cells_for(5, 77)) as u64);
    assert_eq!(r.ring().head.load(Ordering::Relaxed), head);
    assert_invariant_2(&r, head);
}

#[test]
fn payload_sizes_around_cell_boundaries_keep_every_byte() {
    let r = TestRing::new(32);
    let cache = AtomicU64::new(0);
    let mut head = 0u64;
    for argc in [0usize, 1, 2, 5, 16] {
        for len in [
            1usize, 7, 8, 9, 23, 24, 25, 31, 32, 33, 63, 64, 65, 127, 200, 500,
        ] {
            let args: Vec<u32> = (0..argc as u32).map(|i| i * 3 + len as u32).collect();
            let p = pattern((argc * 1000 + len) as u64, len);
            r.ring()
                .try_enqueue(&cache, 3, 1, &medium(1, &args, &p))
                .unwrap();
            let got = r.ring().try_dequeue(&mut head).unwrap().unwrap();
            assert_eq!(got.args(), &args[..]);
            assert_eq!(got.body(), Body::Medium(&p[..]), "argc {argc} len {len}");
        }
    }
}

#[test]
fn records_never_wrap_a_pad_fills_the_end() {
    // 8 cells; records of 3 and 2 cells, so starts drift and some records would wrap.
    let r = TestRing::new(8);
    let cache = AtomicU64::new(0);
    let mut head = 0u64;
    let p = pattern(9, 150); // 32 + 150 -> 3 cells
    assert_eq!(cells_for(0, 150), 3);
    for round in 0..10u32 {
        r.ring()
            .try_enqueue(&cache, round, 1, &medium(1, &[], &p))
            .unwrap();
        r.ring()
            .try_enqueue(&cache, round, 1, &medium(2, &[round], &p[..60]))
            .unwrap();
        let a = r.ring().try_dequeue(&mut head).unwrap().unwrap();
        assert_eq!((a.source(), a.body()), (round, Body::Medium(&p[..])));
        drop(a);
        let b = r.ring().try_dequeue(&mut head).unwrap().unwrap();
        assert_eq!(b.args(), &[round]);
        assert_eq!(b.body(), Body::Medium(&p[..60]));
    }
    assert_eq!(cells_for(1, 60), 2);
    // 10 rounds of 5 cells = 50 cells plus the pads that were needed.
    assert!(head > 50, "no pad was ever inserted (head {head})");
    assert_invariant_2(&r, head);
}

#[test]
fn full_is_reported_and_clears_when_the_consumer_releases() {
    let r = TestRing::new(8);
    let cache = AtomicU64::new(0);
    let mut head = 0u64;
    for i in 0..8u32 {
        r.ring().try_enqueue(&cache, 0, 5, &short(i)).unwrap();
    }
    assert_eq!(
        r.ring().try_enqueue(&cache, 0, 5, &short(99)),
        Err(SendError::Full {
            dest: 5,
            queue: "request"
        })
    );
    // A message still borrowed keeps its cell.
    let first = r.ring().try_dequeue(&mut head).unwrap().unwrap();
    assert_eq!(first.args(), &[0]);
    assert!(r.ring().try_enqueue(&cache, 0, 5, &short(99)).is_err());
    drop(first);
    r.ring().try_enqueue(&cache, 0, 5, &short(8)).unwrap();
    for i in 1..9u32 {
        let m = r.ring().try_dequeue(&mut head).unwrap().unwrap();
        assert_eq!(m.args(), &[i]);
    }
    assert!(r.ring().try_dequeue(&mut head).unwrap().is_none());
}

fn short(i: u32) -> AmMessage<'static> {
    // Leak-free: a 'static slice per call is not possible, so use a small table.
    static ARGS: [u32; 10] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 99];
    let k = if i == 99 { 9 } else { i as usize };
    AmMessage {
        handler: 1,
        args: &ARGS[k..k + 1],
        body: Body::Short,
    }
}

#[test]
fn bad_messages_are_rejected_before_anything_is_reserved() {
    let r = TestRing::new(8);
    let cache = AtomicU64::new(0);
    let args = [0u32; 17];
    assert_eq!(
        r.ring().try_enqueue(
            &cache,
            0,
            1,
            &AmMessage {
                handler: 1,
                args: &args,
                body: Body::Short
            }
        ),
        Err(SendError::TooManyArgs { argc: 17, max: 16 })
    );
    let big = vec![0u8; MAX_MEDIUM + 1];
    assert_eq!(
        r.ring().try_enqueue(&cache, 0, 1, &medium(1, &[], &big)),
        Err(SendError::PayloadTooLarge {
            len: MAX_MEDIUM + 1,
            max: MAX_MEDIUM
        })
    );
    assert_eq!(r.ring().tail.load(Ordering::Relaxed), 0);
}

#[test]
fn a_maximal_medium_fits_a_minimal_ring_at_any_position() {
    if cfg!(miri) {
        return; // 4096 cells of byte checks are too slow under Miri; the logic is the same.
    }
    let cells = crate::layout::MIN_QUEUE_CELLS;
    let r = TestRing::new(cells);
    let cache = AtomicU64::new(0);
    let mut head = 0u64;
    let p = pattern(5, MAX_MEDIUM);
    let args = [7u32; 16];
    // Shift the start by a few cells each round so that the pad size varies.
    for round in 0..12u32 {
        for _ in 0..round {
            r.ring().try_enqueue(&cache, 0, 1, &short(1)).unwrap();
            drop(r.ring().try_dequeue(&mut head).unwrap());
        }
        r.ring()
            .try_enqueue(&cache, round, 1, &medium(3, &args, &p))
            .unwrap();
        let m = r.ring().try_dequeue(&mut head).unwrap().unwrap();
        assert_eq!(m.source(), round);
        assert_eq!(m.body(), Body::Medium(&p[..]));
    }
}

fn corrupt_reason(r: &TestRing, head: &mut u64) -> String {
    let at = *head;
    match r.ring().try_dequeue(head) {
        Err(RecvError::Corrupt {
            queue,
            position,
            reason,
        }) => {
            assert_eq!((queue, position), ("request", at));
            reason
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn garbage_in_a_record_is_a_typed_error_not_a_panic() {
    let r = TestRing::new(8);
    let cache = AtomicU64::new(0);
    let mut head = 0u64;
    r.ring().try_enqueue(&cache, 0, 1, &short(1)).unwrap();
    let w = |i: usize| &r.ring().cells[i];
    let good1 = w(1).load(Ordering::Relaxed);
    let good2 = w(2).load(Ordering::Relaxed);

    w(0).store(77, Ordering::Relaxed);
    assert_eq!(corrupt_reason(&r, &mut head), "marker 0x4d, expected 0x1");
    w(0).store(1, Ordering::Relaxed);

    w(1).store(good1 & !0xff | 9, Ordering::Relaxed);
    assert_eq!(corrupt_reason(&r, &mut head), "record kind 9");
    w(1).store(good1 & !0xff00 | 0x0500, Ordering::Relaxed);
    assert_eq!(corrupt_reason(&r, &mut head), "category code 5");
    w(1).store(good1 & !0xff00_0000 | 0x2000_0000, Ordering::Relaxed);
    assert_eq!(corrupt_reason(&r, &mut head), "32 arguments");
    w(1).store(good1, Ordering::Relaxed);

    w(2).store(pack_sizes(9, 0), Ordering::Relaxed);
    assert_eq!(
        corrupt_reason(&r, &mut head),
        "record of 9 cells at cell 0 of 8"
    );
    w(2).store(pack_sizes(0, 0), Ordering::Relaxed);
    assert_eq!(
        corrupt_reason(&r, &mut head),
        "record of 0 cells at cell 0 of 8"
    );
    w(2).store(pack_sizes(2, 0), Ordering::Relaxed);
    assert_eq!(
        corrupt_reason(&r, &mut head),
        "2 cells for 1 arguments and 0 payload bytes"
    );
    w(2).store(pack_sizes(1, 5), Ordering::Relaxed);
    assert_eq!(corrupt_reason(&r, &mut head), "Short with length 5");
    w(1).store(pack_meta(KIND_MESSAGE, 1, 1, 0, 0), Ordering::Relaxed);
    w(2).store(pack_sizes(1, 70_000), Ordering::Relaxed);
    assert_eq!(corrupt_reason(&r, &mut head), "Medium with length 70000");
    // A carried Long (category code 3) is checked as a Medium is.
    w(1).store(pack_meta(KIND_MESSAGE, 3, 1, 0, 0), Ordering::Relaxed);
    assert_eq!(corrupt_reason(&r, &mut head), "Long with length 70000");
    w(2).store(pack_sizes(1, 40), Ordering::Relaxed);
    assert_eq!(
        corrupt_reason(&r, &mut head),
        "1 cells for 0 arguments and 40 payload bytes"
    );
    w(1).store(pack_meta(KIND_PAD, 0, 0, 0, 0), Ordering::Relaxed);
    w(2).store(pack_sizes(3, 0), Ordering::Relaxed);
    assert_eq!(
        corrupt_reason(&r, &mut head),
        "pad of 3 cells does not end the ring"
    );
    // Repaired, the record is delivered.
    w(1).store(good1, Ordering::Relaxed);
    w(2).store(good2, Ordering::Relaxed);
    assert_eq!(
        r.ring().try_dequeue(&mut head).unwrap().unwrap().args(),
        &[1]
    );
}

#[test]
fn producers_on_threads_deliver_everything_once_in_order() {
    let (producers, per) = if cfg!(miri) {
        (3u32, 12u32)
    } else {
        (4, 20_000)
    };
    let r = Arc::new(TestRing::new(64));
    let cache = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for src in 0..producers {
        let (r, cache) = (Arc::clone(&r), Arc::clone(&cache));
        threads.push(std::thread::spawn(move || {
            for seq in 0..per {
                let len = (seq as usize * 37 + src as usize * 11) % 300;
                let p = pattern(u64::from(src) << 32 | u64::from(seq), len);
                let args = [seq, src];
                let m = medium(src as u8, &args[..(seq % 3) as usize], &p);
                while r.ring().try_enqueue(&cache, src, 0, &m).is_err() {
                    std::thread::yield_now();
                }
            }
        }));
    }
    let mut next = vec![0u32; producers as usize];
    let mut head = 0u64;
    let total = producers * per;
    let mut got = 0;
    while got < total {
        let Some(m) = r.ring().try_dequeue(&mut head).unwrap() else {
            std::thread::yield_now();
            continue;
        };
        let src = m.source();
        let seq = next[src as usize];
        let len = (seq as usize * 37 + src as usize * 11) % 300;
        let p = pattern(u64::from(src) << 32 | u64::from(seq), len);
        let args = [seq, src];
        assert_eq!(m.handler(), src as u8);
        assert_eq!(m.args(), &args[..(seq % 3) as usize]);
        assert_eq!(m.body(), Body::Medium(&p[..]));
        next[src as usize] += 1;
        got += 1;
    }
    for t in threads {
        t.join().unwrap();
    }
    assert!(r.ring().try_dequeue(&mut head).unwrap().is_none());
    assert_eq!(next, vec![per; producers as usize]);
}

#[test]
fn futex_wait_times_out_or_sees_a_changed_value() {
    let w = AtomicU32::new(1);
    assert_eq!(
        futex_wait(&w, 2, Duration::from_secs(5)),
        FutexWait::Changed
    );
    assert_eq!(
        futex_wait(&w, 1, Duration::from_millis(1)),
        FutexWait::TimedOut
    );
    futex_wake(&w, 1); // no waiter: a no-op
}

#[test]
fn stale_markers_read_as_empty_other_values_as_corrupt() {
    let r = TestRing::new(8);
    let cache = AtomicU64::new(0);
    let mut head = 0u64;
    // Three laps of one-cell messages: every cell holds a stale marker afterwards.
    for i in 0..24u32 {
        r.ring().try_enqueue(&cache, 0, 1, &short(i % 9)).unwrap();
        drop(r.ring().try_dequeue(&mut head).unwrap().unwrap());
    }
    assert_eq!(head, 24);
    assert_eq!(r.ring().cells[0].load(Ordering::Relaxed), 17); // position 16's marker
    assert!(r.ring().try_dequeue(&mut head).unwrap().is_none());
    assert!(!r.ring().committed_at(head));
    // A value of the wrong residue, or from the future, is not a stale marker.
    r.ring().cells[0].store(18, Ordering::Relaxed);
    assert_eq!(corrupt_reason(&r, &mut head), "marker 0x12, expected 0x19");
    r.ring().cells[0].store(33, Ordering::Relaxed);
    assert_eq!(corrupt_reason(&r, &mut head), "marker 0x21, expected 0x19");
    r.ring().cells[0].store(9, Ordering::Relaxed);
    assert!(r.ring().try_dequeue(&mut head).unwrap().is_none());
    r.ring().try_enqueue(&cache, 0, 1, &short(5)).unwrap();
    assert!(r.ring().committed_at(head));
    assert_eq!(
        r.ring().try_dequeue(&mut head).unwrap().unwrap().args(),
        &[5]
    );
}

#[test]
fn the_sleep_bit_is_seen_by_exactly_one_producer_and_blocks_a_busy_sleep() {
    let r = TestRing::new(8);
    let cache = AtomicU64::new(0);
    let mut head = 0u64;
    assert!(r.ring().announce_sleep(head), "an empty ring is idle");
    assert_eq!(r.ring().tail.load(Ordering::Relaxed), SLEEP_BIT);
    assert!(
        r.ring().try_enqueue(&cache, 0, 1, &short(1)).unwrap(),
        "first must ring"
    );
    assert!(!r.ring().try_enqueue(&cache, 0, 1, &short(2)).unwrap());
    assert_eq!(r.ring().tail.load(Ordering::Relaxed), 2);
    // Records are pending: announcing finds the ring busy.
    assert!(!r.ring().announce_sleep(head));
    r.ring().retract_sleep();
    assert!(!r.ring().try_enqueue(&cache, 0, 1, &short(3)).unwrap());
    for i in 1..4 {
        assert_eq!(
            r.ring().try_dequeue(&mut head).unwrap().unwrap().args(),
            &[i]
        );
    }
    assert!(r.ring().announce_sleep(head));
    r.ring().retract_sleep();
    assert_eq!(r.ring().tail.load(Ordering::Relaxed), 3);
    assert!(!r.ring().try_enqueue(&cache, 0, 1, &short(4)).unwrap());
}

#[test]
fn a_closed_ring_refuses_new_records_and_yields_those_reserved_before() {
    let r = TestRing::new(4);
    let cache = AtomicU64::new(0);
    let mut head = 0u64;
    for i in 1..5 {
        r.ring().try_enqueue(&cache, 0, 1, &short(i)).unwrap();
    }
    assert_eq!(
        r.ring().try_enqueue(&cache, 0, 1, &short(5)),
        Err(SendError::Full {
            dest: 1,
            queue: "request"
        })
    );
    // A receiver that announced it sleeps and then closes: the bit of each stays.
    assert!(!r.ring().announce_sleep(head));
    assert_eq!(
        r.ring().close(),
        4,
        "the close returns the end of the reservations"
    );
    let closed = Err(SendError::Closed {
        dest: 1,
        queue: "request",
    });
    // Refused, full or not, and whatever the sleep bit says.
    assert_eq!(r.ring().try_enqueue(&cache, 0, 1, &short(6)), closed);
    for i in 1..5 {
        assert_eq!(
            r.ring().try_dequeue(&mut head).unwrap().unwrap().args(),
            &[i]
        );
    }
    assert_eq!(head, 4);
    assert!(r.ring().try_dequeue(&mut head).unwrap().is_none());
    r.ring().retract_sleep();
    assert_eq!(r.ring().try_enqueue(&cache, 0, 1, &short(7)), closed);
    // Closing again changes nothing.
    assert_eq!(r.ring().close(), 4);
    assert_eq!(
        r.ring().tail.load(Ordering::Relaxed),
        4 | CLOSED_BIT,
        "refused producers reserved nothing"
    );
}

#[test]
fn a_close_racing_producers_loses_nothing_and_admits_nothing_after() {
    let (producers, before_close) = if cfg!(miri) {
        (2u32, 10u32)
    } else {
        (3, 30_000)
    };
    let r = Arc::new(TestRing::new(16));
    let cache = Arc::new(AtomicU64::new(0));
    let mut threads = Vec::new();
    for src in 0..producers {
        let (r, cache) = (Arc::clone(&r), Arc::clone(&cache));
        threads.push(std::thread::spawn(move || {
            // Sends until refused; returns how many were accepted.
            let mut seq = 0u32;
            loop {
                let args = [seq, src];
                let m = AmMessage {
                    handler: src as u8,
                    args: &args,
                    body: Body::Short,
                };
                match r.ring().try_enqueue(&cache, src, 0, &m) {
                    Ok(_) => seq += 1,
                    Err(SendError::Full { .. }) => std::thread::yield_now(),
                    Err(SendError::Closed { dest: 0, .. }) => return seq,
                    Err(other) => panic!("producer {src}: {other}"),
                }
            }
        }));
    }
    let mut next = vec![0u32; producers as usize];
    let mut head = 0u64;
    let mut closed_at = None;
    let mut got = 0;
    loop {
        if closed_at.is_none() && got >= before_close {
            closed_at = Some(r.ring().close());
        }
        if closed_at.is_some_and(|end| head >= end) {
            break;
        }
        let Some(m) = r.ring().try_dequeue(&mut head).unwrap() else {
            std::thread::yield_now();
            continue;
        };
        let src = m.source() as usize;
        assert_eq!(m.args(), &[next[src], src as u32], "in order, once each");
        next[src] += 1;
        got += 1;
    }
    let accepted: Vec<u32> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(
        next, accepted,
        "every accepted record was taken, nothing else"
    );
    assert_eq!(head, closed_at.unwrap_or(0));
    assert!(r.ring().try_dequeue(&mut head).unwrap().is_none());
}

#[test]
fn poll_lock_is_taken_by_one_holder_at_a_time() {
    let lock = PollLock::new(5u32);
    let mut first = lock.try_lock().expect("a free lock is taken");
    assert!(lock.try_lock().is_none(), "a held lock is refused");
    *first += 1;
    drop(first);
    let again = lock.try_lock().expect("a released lock is taken again");
    assert_eq!(*again, 6);
    assert_eq!(format!("{lock:?}"), "PollLock(<taken>)");
    drop(again);
    assert_eq!(format!("{lock:?}"), "PollLock(6)");
}

#[test]
fn poll_lock_is_released_by_a_holder_that_unwinds() {
    let lock = PollLock::new(Vec::<u32>::new());
    let unwound = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut guard = lock.lock();
        guard.push(1);
        panic!("a handler failed");
    }));
    assert!(unwound.is_err());
    assert_eq!(*lock.try_lock().expect("released as it unwound"), vec![1]);
}

/// Threads that each add under the lock lose no update: the release and the next take order
/// the holders' plain read-modify-writes.
#[test]
fn poll_lock_serializes_its_holders() {
    const THREADS: u64 = 4;
    const ADDS: u64 = if cfg!(miri) { 50 } else { 20_000 };
    let lock = PollLock::new(0u64);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                for _ in 0..ADDS {
                    *lock.lock() += 1;
                }
            });
        }
    });
    assert_eq!(
        *lock.try_lock().expect("free after the threads"),
        THREADS * ADDS
    );
}
