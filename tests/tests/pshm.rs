//! Shared-memory hygiene of real jobs: no object of a job is left in /dev/shm after its ranks
//! are killed, and a segment larger than /dev/shm is a clear startup error.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const PROG: &str = env!("CARGO_BIN_EXE_am_conformance");

fn shm_objects(prefix: &str) -> Vec<String> {
    std::fs::read_dir("/dev/shm")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn sigkill_of_every_rank_leaves_nothing_in_dev_shm() {
    if !Path::new("/dev/shm").is_dir() {
        eprintln!("SKIPPED: sigkill_of_every_rank_leaves_nothing_in_dev_shm — no /dev/shm");
        return;
    }
    // A small, fixed sequence of delays stands in for "random points after attach".
    let delays_ms = [0u64, 3, 7, 15, 1, 40, 90, 25, 5, 150];
    for (round, delay) in delays_ms.iter().enumerate() {
        let mut child = Command::new(rgasnet_tests::rgasnetrun())
            .args(["-n", "4", "--", PROG, "attach-and-wait"])
            .env("AMC_SEGMENT", "1048576")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start job");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut pids = Vec::new();
        let mut key = String::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while pids.len() < 4 {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = rx.recv_timeout(left).unwrap_or_else(|_| {
                let _ = child.kill();
                panic!("round {round}: ranks did not all attach in time")
            });
            // "attached rank R pid P key K"
            let w: Vec<&str> = line.split_whitespace().collect();
            if w.len() == 7 && w[0] == "attached" {
                pids.push(w[4].to_string());
                key = w[6].to_string();
            }
        }
        std::thread::sleep(Duration::from_millis(*delay));
        for pid in &pids {
            let _ = Command::new("kill").args(["-KILL", pid]).status();
        }
        let _ = child.wait();
        let prefix = format!("rgasnet-{key}-");
        let left = shm_objects(&prefix);
        assert!(left.is_empty(), "round {round}: left in /dev/shm: {left:?}");
    }
}

#[test]
fn segment_larger_than_dev_shm_is_a_clear_error() {
    let avail =
        nix::sys::statvfs::statvfs("/dev/shm").map(|s| s.blocks_available() * s.fragment_size());
    let Ok(avail) = avail else {
        eprintln!("SKIPPED: segment_larger_than_dev_shm_is_a_clear_error — no /dev/shm");
        return;
    };
    let huge = (avail + (1 << 30)).to_string();
    let out = rgasnet_tests::run_job(
        2,
        Path::new(PROG),
        &["basic"],
        &[("AMC_SEGMENT", &huge), ("GASNET_MAX_SEGSIZE", "1T")],
        Duration::from_secs(60),
    );
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("not enough shared memory") && out.stderr.contains("bytes needed"),
        "{}",
        out.stderr
    );
}
