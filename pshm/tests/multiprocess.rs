//! Multi-process tests: the test binary re-executes itself (the ignored `child_process` test)
//! once per rank. Ranks talk to the parent over their stdin/stdout: a child prints
//! `PSHM:<event>` lines, and the bootstrap barrier is "print `PSHM:barrier`, read a line".
//! Every wait of the parent is bounded, and children are killed when a test fails.
// Test code: a failed unwrap is a failed test (clippy.toml allows it only inside #[test] fns).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rgasnet_pshm::{AmMessage, Body, Node, NodeConfig, MAX_ARGS};

const ROLE: &str = "RGASNET_PSHM_TEST_ROLE";
/// Bound on every wait of a test (a bug fails the test instead of hanging it).
const TIMEOUT: Duration = Duration::from_secs(120);
const PER_PRODUCER: u32 = 25_000;
const SEGMENT: usize = 1 << 16;
const LONG_SLOT: usize = 4096;

struct Job {
    children: Vec<Child>,
    stdins: Vec<ChildStdin>,
    events: mpsc::Receiver<(usize, String)>,
}

impl Job {
    fn spawn(n: usize, role: &str, key: u64) -> Job {
        let exe = std::env::current_exe().unwrap();
        let (tx, events) = mpsc::channel();
        let mut children = Vec::new();
        let mut stdins = Vec::new();
        for rank in 0..n {
            let mut child = Command::new(&exe)
                .args([
                    "--exact",
                    "child_process",
                    "--include-ignored",
                    "--nocapture",
                ])
                .args(["--test-threads=1", "-q"])
                .env(ROLE, role)
                .env("PSHM_RANK", rank.to_string())
                .env("PSHM_SIZE", n.to_string())
                .env("PSHM_KEY", key.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            stdins.push(child.stdin.take().unwrap());
            let out = BufReader::new(child.stdout.take().unwrap());
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in out.lines().map_while(Result::ok) {
                    if let Some(ev) = line.strip_prefix("PSHM:") {
                        let _ = tx.send((rank, ev.to_owned()));
                    }
                }
                let _ = tx.send((rank, "eof".to_owned()));
            });
            children.push(child);
        }
        Job {
            children,
            stdins,
            events,
        }
    }

    /// One event per rank; panics on timeout or if a rank's output ends first.
    fn collect(&self, what: &str) -> Vec<String> {
        let deadline = Instant::now() + TIMEOUT;
        let mut got: Vec<Option<String>> = vec![None; self.children.len()];
        while got.iter().any(Option::is_none) {
            let left = deadline.saturating_duration_since(Instant::now());
            let (rank, ev) = self
                .events
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("timed out waiting for {what}: {got:?}"));
            if ev == "eof" && got[rank].is_some() {
                continue; // exited after reporting
            }
            assert_ne!(ev, "eof", "rank {rank} exited while waiting for {what}");
            assert!(
                ev.starts_with(what),
                "rank {rank}: expected {what}, got {ev}"
            );
            got[rank] = Some(ev);
        }
        got.into_iter().flatten().collect()
    }

    fn barrier(&mut self) {
        self.collect("barrier");
        for s in &mut self.stdins {
            s.write_all(b"go\n").unwrap();
            s.flush().unwrap();
        }
    }

    fn wait_success(&mut self) {
        let deadline = Instant::now() + TIMEOUT;
        for (rank, c) in self.children.iter_mut().enumerate() {
            loop {
                if let Some(status) = c.try_wait().unwrap() {
                    assert!(status.success(), "rank {rank} failed: {status}");
                    break;
                }
                assert!(Instant::now() < deadline, "rank {rank} did not exit");
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    }
}

impl Drop for Job {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn objects_of(key: u64) -> Vec<String> {
    let prefix = rgasnet_pshm::job_prefix(key);
    std::fs::read_dir(rgasnet_pshm::SHM_DIR)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

/// Deterministic pseudo-random stream for message contents.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn bytes(seed: u64, len: usize) -> Vec<u8> {
    (0..len.div_ceil(8))
        .flat_map(|i| mix(seed ^ (i as u64) << 40).to_le_bytes())
        .take(len)
        .collect()
}

/// What producer `src` sends as its message number `seq`: (handler, args, kind, payload),
/// kind 0 = Short, 1 = Medium, 2 = Long. Mostly small, some up to 65,000 bytes.
fn message(src: u32, seq: u32) -> (u8, Vec<u32>, u8, Vec<u8>) {
    let h = mix(u64::from(src) << 32 | u64::from(seq));
    let argc = (h % (MAX_ARGS as u64 + 1)) as usize;
    let args = (0..argc).map(|i| mix(h + i as u64) as u32).collect();
    let pick = (h >> 8) % 100;
    let (kind, len) = if seq % 100 == 99 {
        (2, 1 + (h >> 20) as usize % LONG_SLOT)
    } else if pick < 10 {
        (0, 0)
    } else if pick < 85 {
        (1, (h >> 20) as usize % 49)
    } else if pick < 98 {
        (1, (h >> 20) as usize % 2000)
    } else {
        (1, (h >> 20) as usize % 65_001)
    };
    (h as u8, args, kind, bytes(h, len))
}

#[test]
fn four_producers_one_consumer_move_100k_messages_byte_exact() {
    let key: u64 = rand::random();
    let mut job = Job::spawn(5, "stress", key);
    job.barrier();
    job.barrier();
    assert_eq!(job.collect("attached").len(), 5);
    assert_eq!(objects_of(key), Vec::<String>::new());
    let done = job.collect("done");
    assert_eq!(done[0], format!("done received {}", 4 * PER_PRODUCER));
    for d in &done[1..] {
        assert_eq!(d, &format!("done sent {PER_PRODUCER}"));
    }
    job.wait_success();
}

#[test]
fn sigkill_after_attach_leaves_nothing_in_dev_shm() {
    use rand::Rng;
    let mut rng = rand::rng();
    for _ in 0..10 {
        let key: u64 = rand::random();
        let mut job = Job::spawn(4, "traffic", key);
        job.barrier();
        job.barrier();
        job.collect("attached");
        assert_eq!(objects_of(key), Vec::<String>::new());
        // Kill each rank at a random point of its AM traffic.
        let mut order: Vec<usize> = (0..4).collect();
        for i in 0..4 {
            order.swap(i, rng.random_range(i..4));
        }
        for rank in order {
            std::thread::sleep(Duration::from_micros(rng.random_range(0..20_000)));
            job.children[rank].kill().unwrap();
        }
        for c in &mut job.children {
            let status = c.wait().unwrap();
            assert!(!status.success());
        }
        assert_eq!(objects_of(key), Vec::<String>::new());
    }
}

#[test]
fn a_rank_killed_during_setup_leaves_an_object_that_remove_job_objects_clears() {
    let key: u64 = rand::random();
    let mut job = Job::spawn(2, "traffic", key);
    // Both ranks created their objects and wait in the first barrier; kill them there.
    job.collect("barrier");
    for c in &mut job.children {
        c.kill().unwrap();
        c.wait().unwrap();
    }
    let mut left = objects_of(key);
    left.sort();
    let expect: Vec<String> = (0..2)
        .map(|r| rgasnet_pshm::object_name(key, r)[1..].to_owned())
        .collect();
    assert_eq!(left, expect);
    let removed = rgasnet_pshm::remove_job_objects(key).unwrap();
    assert_eq!(
        removed,
        vec![
            rgasnet_pshm::object_name(key, 0),
            rgasnet_pshm::object_name(key, 1)
        ]
    );
    assert_eq!(objects_of(key), Vec::<String>::new());
}

// ---- the child side ----

fn env_num(name: &str) -> u64 {
    std::env::var(name).unwrap().parse().unwrap()
}

fn event(ev: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "PSHM:{ev}").unwrap();
    out.flush().unwrap();
}

fn bootstrap_barrier() -> Result<(), std::io::Error> {
    event("barrier");
    let mut line = String::new();
    if std::io::stdin().read_line(&mut line)? == 0 {
        return Err(std::io::Error::other("parent closed stdin"));
    }
    Ok(())
}

#[test]
#[ignore = "entry point of the child processes of the other tests"]
fn child_process() {
    let role = std::env::var(ROLE).expect("run by the multi-process tests only");
    let rank = env_num("PSHM_RANK") as u32;
    let size = env_num("PSHM_SIZE") as u32;
    let key = env_num("PSHM_KEY");
    let cfg = NodeConfig::new(key, rank, (0..size).collect(), SEGMENT);
    let (node, mut rx) = Node::attach(cfg, bootstrap_barrier).unwrap();
    event("attached");
    match role.as_str() {
        "stress" if rank == 0 => {
            let deadline = Instant::now() + TIMEOUT;
            let mut next = vec![0u32; size as usize];
            let mut total = 0;
            while total < (size - 1) * PER_PRODUCER {
                assert!(Instant::now() < deadline, "consumer timed out at {total}");
                rx.wait(Duration::from_secs(1));
                while let Some(m) = rx.requests.try_recv().unwrap() {
                    let src = m.source();
                    let seq = next[src as usize];
                    let (handler, args, kind, payload) = message(src, seq);
                    assert_eq!((m.handler(), m.args()), (handler, &args[..]), "{src}/{seq}");
                    match (kind, m.body()) {
                        (0, Body::Short) => {}
                        (1, Body::Medium(p)) => assert!(p == &payload[..], "{src}/{seq}"),
                        (2, Body::Long { offset, len }) => {
                            assert_eq!(
                                (offset, len as usize),
                                (src as u64 * LONG_SLOT as u64, payload.len())
                            );
                            let seg = node.segment(0).unwrap();
                            assert!(seg.to_vec(offset as usize, len as usize).unwrap() == payload);
                            let ack = AmMessage {
                                handler: 1,
                                args: &[seq],
                                body: Body::Short,
                            };
                            while node.try_send_reply(src, &ack).is_err() {
                                std::thread::yield_now();
                            }
                        }
                        (k, b) => panic!("{src}/{seq}: expected kind {k}, got {b:?}"),
                    }
                    next[src as usize] += 1;
                    total += 1;
                }
            }
            assert!(rx.requests.try_recv().unwrap().is_none());
            event(&format!("done received {total}"));
        }
        "stress" => {
            let deadline = Instant::now() + TIMEOUT;
            for seq in 0..PER_PRODUCER {
                let (handler, args, kind, payload) = message(rank, seq);
                let body = match kind {
                    0 => Body::Short,
                    1 => Body::Medium(&payload),
                    _ => {
                        let offset = rank as usize * LONG_SLOT;
                        node.segment(0).unwrap().write(offset, &payload).unwrap();
                        Body::Long {
                            offset: offset as u64,
                            len: payload.len() as u32,
                        }
                    }
                };
                let m = AmMessage {
                    handler,
                    args: &args,
                    body,
                };
                while let Err(e) = node.try_send_request(0, &m) {
                    assert!(
                        matches!(
                            e,
                            rgasnet_pshm::SendError::Full {
                                dest: 0,
                                queue: "request"
                            }
                        ),
                        "{e}"
                    );
                    assert!(Instant::now() < deadline, "producer {rank} stuck at {seq}");
                    std::thread::yield_now();
                }
                if kind == 2 {
                    // The slot is reused by the next Long: wait for the consumer's ack.
                    loop {
                        assert!(Instant::now() < deadline, "no ack for {seq}");
                        rx.wait(Duration::from_secs(1));
                        if let Some(a) = rx.replies.try_recv().unwrap() {
                            assert_eq!((a.source(), a.args()), (0, &[seq][..]));
                            break;
                        }
                    }
                }
            }
            event(&format!("done sent {PER_PRODUCER}"));
        }
        "traffic" => {
            // Endless request/reply traffic around the ring of ranks, until killed.
            let to = (rank + 1) % size;
            let payload = vec![rank as u8; 3000];
            let m = AmMessage {
                handler: 2,
                args: &[rank],
                body: Body::Medium(&payload),
            };
            loop {
                let _ = node.try_send_request(to, &m);
                rx.wait(Duration::from_millis(10));
                while let Some(r) = rx.requests.try_recv().unwrap() {
                    let reply = AmMessage {
                        handler: 3,
                        args: r.args(),
                        body: Body::Short,
                    };
                    let _ = node.try_send_reply(r.source(), &reply);
                }
                while rx.replies.try_recv().unwrap().is_some() {}
            }
        }
        other => panic!("unknown role {other}"),
    }
}
