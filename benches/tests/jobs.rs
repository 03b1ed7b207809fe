//! The benchmark binaries run end to end under `rgasnetrun` (loopback only, small sizes and
//! iteration counts, each job bounded by a deadline), and what they print parses back into
//! exactly the figures expected. No timing is asserted: only that every figure is there, in
//! order, positive and finite.

#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

// The launcher's tests' helper: a dev-dependency on the launcher's test code would be a cycle.
#[path = "../../launcher/tests/common/proc_state.rs"]
mod proc_state;
use proc_state::alive;
use rgasnet_bench::compare::runner::{run, Job};
use rgasnet_bench::parse::parse_output;
use rgasnet_bench::record::{Kind, Record};

/// This build's binaries' directory.
fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_testam"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// `path`, built first with `cargo build -q <what>` (in this build's profile) if this test
/// run did not build it.
fn built(path: PathBuf, what: &[&str]) -> PathBuf {
    if !path.exists() {
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-q"]).args(what);
        if bin_dir().ends_with("release") {
            cmd.arg("--release");
        }
        assert!(cmd.status().unwrap().success(), "building {what:?} failed");
    }
    path
}

/// `rgasnetrun` next to this build's binaries.
fn rgasnetrun() -> PathBuf {
    built(
        bin_dir().join("rgasnetrun"),
        &["-p", "rgasnet-launcher", "--bin", "rgasnetrun"],
    )
}

fn job(ranks: u32, exe: &str, args: &[&str], pshm: bool) -> (String, String) {
    let mut a = vec![
        "-n".to_string(),
        ranks.to_string(),
        "--".into(),
        exe.to_string(),
    ];
    a.extend(args.iter().map(|s| s.to_string()));
    let env = if pshm {
        vec![]
    } else {
        vec![("RGASNET_PSHM".to_string(), "0".to_string())]
    };
    let out = run(&Job {
        program: rgasnetrun(),
        args: a,
        env,
        timeout: Duration::from_secs(120),
    })
    .unwrap();
    assert!(
        out.success(),
        "job failed ({:?}, timed out: {})\n--- stdout\n{}\n--- stderr\n{}",
        out.code,
        out.timed_out,
        out.stdout,
        out.stderr
    );
    (out.stdout, out.stderr)
}

const SMALL_RAW: [&str; 4] = ["--raw-iters", "50", "--raw-stream-count", "2"];

fn keys(records: &[Record], kind: Kind) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.kind == kind)
        .map(|r| {
            assert!(r.value.is_finite() && r.value > 0.0, "{r:?}");
            match r.size {
                Some(s) => format!(
                    "{}{} {s}",
                    r.section.map(String::from).unwrap_or_default(),
                    r.figure
                ),
                None => format!(
                    "{}{}",
                    r.section.map(String::from).unwrap_or_default(),
                    r.figure
                ),
            }
        })
        .collect()
}

fn raw_figures(records: &[Record]) -> Vec<String> {
    keys(records, Kind::Raw)
}

#[test]
fn testam_over_the_network_prints_every_section_and_size() {
    let mut args = vec!["-i", "20", "--max-size", "200"];
    args.extend(SMALL_RAW);
    let (out, _) = job(2, env!("CARGO_BIN_EXE_testam"), &args, false);
    let recs = parse_output(&out).unwrap();
    assert_eq!(
        raw_figures(&recs),
        vec![
            "udp pingpong rtt 8",
            "udp pingpong rtt 65000",
            "udp stream 1048576",
            "tcp stream 1048576"
        ]
    );
    let am = keys(&recs, Kind::Am);
    let short: Vec<&str> = am.iter().take(4).map(String::as_str).collect();
    assert_eq!(
        short,
        vec![
            "AAMShort ping-pong roundtrip ReqRep",
            "AAMShort ping-pong roundtrip ReqReq",
            "AAMShort flood one-way Req",
            "AAMShort flood roundtrip ReqRep"
        ]
    );
    let sizes = [0, 1, 2, 4, 8, 16, 32, 64, 128, 200];
    let mut want = Vec::new();
    for (cat, first) in [("AMMedium", b'B'), ("AMLong", b'F')] {
        for (k, test) in [
            "ping-pong roundtrip ReqRep",
            "ping-pong roundtrip ReqReq",
            "flood one-way Req",
            "flood roundtrip ReqRep",
        ]
        .iter()
        .enumerate()
        {
            for s in sizes {
                want.push(format!("{}{cat} {test} {s}", (first + k as u8) as char));
            }
        }
    }
    assert_eq!(&am[4..], &want[..]);
    // 200 is not a power of two: GASNet's marker precedes it, once per sized section.
    assert_eq!(out.lines().filter(|l| *l == " max:").count(), 8);
    let targets: Vec<&str> = out.lines().filter(|l| l.starts_with("target: ")).collect();
    assert_eq!(targets.len(), 2, "{out}");
    assert!(targets[0].starts_with("target: AMShort ping-pong ReqRep rtt us (median) "));
    assert!(targets[0].contains("(target <= 1.1: "), "{}", targets[0]);
    // The maximal Medium was not part of this sweep.
    assert_eq!(
        targets[1],
        "target: AMMedium 65000 byte ping-pong ReqRep rtt us (median): not measured in this run"
    );
}

#[test]
fn testam_to_self_and_csv() {
    let (out, _) = job(
        1,
        env!("CARGO_BIN_EXE_testam"),
        &[
            "-i",
            "10",
            "--max-size",
            "8",
            "--csv",
            "--no-baseline",
            "--sections",
            "AB",
        ],
        true,
    );
    let mut lines = out.lines();
    assert_eq!(lines.next(), Some(Record::CSV_HEADER));
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len(), 4 + 5, "{out}");
    assert!(rows[0].starts_with("am,A,,AMShort ping-pong roundtrip ReqRep,,10,"));
    assert!(rows[8].starts_with("am,B,,AMMedium ping-pong roundtrip ReqRep,8,10,"));
}

#[test]
fn testsmall_testlarge_testbarrier_print_their_figures() {
    // An option given twice counts once, the last: compare passes its own --max-size and
    // --byte-budget before the user's --bench-args.
    let mut args = vec!["-i", "10", "--max-size", "1M", "--max-size", "16"];
    args.extend(SMALL_RAW);
    let (out, _) = job(2, env!("CARGO_BIN_EXE_testsmall"), &args, false);
    let recs = parse_output(&out).unwrap();
    let lat = keys(&recs, Kind::Latency);
    assert_eq!(lat.len(), 5 * 4, "{lat:?}");
    assert_eq!(&lat[..2], &["Aput latency 1", "Aget latency 1"]);
    assert_eq!(&lat[10..12], &["Cput_nb latency 1", "Cget_nb latency 1"]);
    let tp = keys(&recs, Kind::SmallThroughput);
    assert_eq!(tp.len(), 10);
    assert_eq!(tp[9], "Bget throughput 16");
    let small_targets: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("target: 8 byte "))
        .collect();
    assert_eq!(small_targets.len(), 2, "{out}");
    for t in small_targets {
        assert!(t.contains("(target <= 1.1: "), "{t}");
    }

    let mut args = vec!["-i", "4", "--min-size", "4K", "--max-size", "16K"];
    args.extend(SMALL_RAW);
    let (out, _) = job(2, env!("CARGO_BIN_EXE_testlarge"), &args, false);
    let recs = parse_output(&out).unwrap();
    let tp = keys(&recs, Kind::LargeThroughput);
    assert_eq!(tp.len(), 3 * 3 * 2, "{tp:?}");
    assert_eq!(tp[0], "Aput_bulk throughput 4096");
    assert_eq!(tp[7], "Bget_nbi_bulk throughput 4096");
    assert_eq!(tp[9], "Bget_nbi_bulk throughput 8192");
    assert_eq!(tp[17], "Cget_nb_bulk throughput 16384");
    // 1 MiB was not swept: the target says so.
    assert!(
        out.contains("target: put_nbi 1 MiB MB/s: not measured in this run"),
        "{out}"
    );

    let mut args = vec!["-i", "20"];
    args.extend(SMALL_RAW);
    let (out, _) = job(2, env!("CARGO_BIN_EXE_testbarrier"), &args, false);
    let recs = parse_output(&out).unwrap();
    assert_eq!(
        keys(&recs, Kind::Barrier),
        vec!["Named Barrier", "Anon. Barrier"]
    );
    assert!(
        out.starts_with("testbarrier: 2 ranks, rank 0 -> rank 1, 20 iterations\n"),
        "{out}"
    );
    assert!(
        out.contains("target: 2-rank named barrier us (median) "),
        "{out}"
    );
}

#[test]
fn pshm_jobs_print_shared_memory_baselines() {
    let (out, _) = job(
        2,
        env!("CARGO_BIN_EXE_testlarge"),
        &[
            "-i",
            "2",
            "--min-size",
            "1M",
            "--max-size",
            "1M",
            "--sections",
            "B",
            "--raw-iters",
            "20",
            "--raw-stream-count",
            "2",
        ],
        true,
    );
    let recs = parse_output(&out).unwrap();
    assert_eq!(
        raw_figures(&recs),
        vec![
            "udp pingpong rtt 8",
            "udp pingpong rtt 65000",
            "udp stream 1048576",
            "tcp stream 1048576",
            "shm flag pingpong rtt",
            "shm two-line pingpong rtt",
            "memcpy 1048576"
        ]
    );
    assert!(out.contains("/ raw memcpy 1 MiB MB/s "), "{out}");
}

#[test]
fn testam_on_shared_memory_prints_its_target_and_the_queue_floor() {
    let (out, _) = job(
        2,
        env!("CARGO_BIN_EXE_testam"),
        &[
            "--sections",
            "A",
            "-i",
            "200",
            "--raw-iters",
            "20",
            "--raw-stream-count",
            "2",
        ],
        true,
    );
    assert!(
        out.contains("target: AMShort ping-pong ReqRep rtt us (median of 10-trip averages) "),
        "{out}"
    );
    assert!(
        out.contains("floor: raw shm two-line pingpong rtt us "),
        "{out}"
    );
    // Issue 26's shared-memory target: AM Short against the two-line floor, at most 1.15x.
    assert!(
        out.lines()
            .any(|l| l.starts_with("target: AMShort ping-pong ReqRep rtt us")
                && l.contains(" / raw shm two-line pingpong rtt us ")
                && l.contains("(target <= 1.15: ")),
        "{out}"
    );
}

/// The `am_short_profile` example of this build.
fn am_short_profile() -> PathBuf {
    built(
        bin_dir().join("examples").join("am_short_profile"),
        &["-p", "rgasnet-bench", "--example", "am_short_profile"],
    )
}

#[test]
fn am_short_profile_runs_its_round_trips_and_refuses_a_bad_count() {
    let exe = am_short_profile();
    for pshm in [false, true] {
        let (out, _) = job(2, exe.to_str().unwrap(), &["300"], pshm);
        let line = out
            .lines()
            .find(|l| l.starts_with("AM Short ping-pong: 300 round trips, median "))
            .unwrap_or_else(|| panic!("no summary line (pshm {pshm}):\n{out}"));
        let us: f64 = line
            .trim_end_matches(" us")
            .rsplit(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!(us.is_finite() && us > 0.0, "{line}");
    }
    let out = run(&Job {
        program: rgasnetrun(),
        args: vec![
            "-n".into(),
            "2".into(),
            "--".into(),
            exe.to_str().unwrap().into(),
            "many".into(),
        ],
        env: vec![],
        timeout: Duration::from_secs(60),
    })
    .unwrap();
    assert!(!out.success());
    assert!(
        out.stderr
            .contains("ROUND_TRIPS must be a positive integer, not \"many\""),
        "{}",
        out.stderr
    );
}

#[test]
fn queue_floor_measures_the_queues_next_to_the_floors_and_refuses_a_bad_count() {
    let exe = built(
        bin_dir().join("examples").join("queue_floor"),
        &["-p", "rgasnet-bench", "--example", "queue_floor"],
    );
    let job = |args: &[&str]| {
        run(&Job {
            program: exe.clone(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: vec![],
            timeout: Duration::from_secs(120),
        })
        .unwrap()
    };
    // A ring of 16 cells, as asked for on the command line.
    let out = job(&["1", "16"]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    let ring_prefix = "ring ping-pong (16 cells per ring): ";
    // Every figure is a positive time, and the ratio is the queue's over the two-line one.
    let ns = |prefix: &str| -> f64 {
        let line = line_of(&out.stdout, prefix);
        let v: f64 = line[prefix.len()..]
            .split(" ns")
            .next()
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(v.is_finite() && v > 0.0, "{line}");
        v
    };
    ns("flag ping-pong: ");
    let two = ns("two-line ping-pong: ");
    let ring = ns(ring_prefix);
    let queue = ns("queue ping-pong (Short, 1 argument): ");
    // The `n`th ratio of a line (`... ns = R x two-line = Q x ring`).
    let ratio = |prefix: &str, n: usize| -> f64 {
        line_of(&out.stdout, prefix)
            .split(" = ")
            .nth(n)
            .and_then(|r| r.split(' ').next())
            .unwrap()
            .parse()
            .unwrap()
    };
    // One round: each ratio is that round's, i.e. the quotient of the printed figures.
    assert!(
        (ratio(ring_prefix, 1) - ring / two).abs() < 0.01,
        "{}",
        out.stdout
    );
    assert!(
        (ratio("queue ping-pong", 1) - queue / two).abs() < 0.01,
        "{}",
        out.stdout
    );
    assert!(
        (ratio("queue ping-pong", 2) - queue / ring).abs() < 0.01,
        "{}",
        out.stdout
    );
    // Without CELLS, the ring has as many cells as a queue.
    let default = job(&["1"]);
    assert!(default.success(), "{}\n{}", default.stdout, default.stderr);
    line_of(
        &default.stdout,
        &format!(
            "ring ping-pong ({} cells per ring): ",
            rgasnet_pshm::MIN_QUEUE_CELLS
        ),
    );
    for (args, error) in [
        (&["0"][..], "RUNS must be a positive integer, not \"0\""),
        (
            &["1", "0"][..],
            "CELLS must be a positive integer, not \"0\"",
        ),
        (
            &["1", "65537"][..],
            "the ring ping-pong takes 1 to 65536 cells per ring, not 65537",
        ),
    ] {
        let bad = job(args);
        assert!(!bad.success(), "{args:?}: {}", bad.stdout);
        assert_has(&bad.stderr, error);
    }
}

#[test]
fn barrier_floor_prints_a_positive_time_per_barrier_and_refuses_bad_counts() {
    let exe = built(
        bin_dir().join("examples").join("barrier_floor"),
        &["-p", "rgasnet-bench", "--example", "barrier_floor"],
    );
    let job = |args: &[&str]| {
        run(&Job {
            program: exe.clone(),
            args: args.iter().map(|a| a.to_string()).collect(),
            env: vec![],
            timeout: Duration::from_secs(120),
        })
        .unwrap()
    };
    // Three ranks: more than this 2-CPU machine has, so the members yield. The figure is
    // only checked to be a positive time: no threshold on timing.
    let out = job(&["3", "500", "1"]);
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    let line = line_of(&out.stdout, "counter-barrier floor, 3 ranks on ");
    let us: f64 = line
        .rsplit(": ")
        .next()
        .and_then(|v| v.strip_suffix(" us"))
        .unwrap()
        .parse()
        .unwrap();
    assert!(us.is_finite() && us > 0.0, "{line}");
    let bad = job(&["0"]);
    assert!(!bad.success());
    assert_has(&bad.stderr, "RANKS must be a positive integer, not \"0\"");
    let many = job(&["2000"]);
    assert!(!many.success());
    assert_has(
        &many.stderr,
        "the barrier floor forks at most 1024 processes, not 2000",
    );
    let missing = job(&[]);
    assert!(!missing.success());
    assert_has(
        &missing.stderr,
        "usage: barrier_floor RANKS [ITERATIONS] [RUNS]",
    );
}

#[test]
fn bad_arguments_are_reported_not_run() {
    let out = Command::new(env!("CARGO_BIN_EXE_testam"))
        .args(["--min-size", "2M", "--max-size", "1M"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--min-size 2097152 is larger than --max-size 1048576"),
        "{err}"
    );
    // Started without the launcher: the error says how to start it.
    let out = Command::new(env!("CARGO_BIN_EXE_testam")).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("rgasnetrun"));
}

/// The text of `name` in compare's output folder `out`.
fn read(out: &std::path::Path, name: &str) -> String {
    std::fs::read_to_string(out.join(name)).unwrap()
}

/// Asserts that `text` contains `part`, showing `text` when it does not.
fn assert_has(text: &str, part: &str) {
    assert!(text.contains(part), "no {part:?} in:\n{text}");
}

/// The first line of `text` that contains `part` (the test fails without one).
fn line_of<'a>(text: &'a str, part: &str) -> &'a str {
    text.lines()
        .find(|l| l.contains(part))
        .unwrap_or_else(|| panic!("no line with {part:?} in:\n{text}"))
}

/// A fresh scratch directory for a compare test (removed first if a run before left it).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rgasnet-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Writes an executable shell script at `path` (a stand-in for one of GASNet's programs).
fn fake_program(path: &std::path::Path, script: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, script).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Runs `rgasnet-bench compare` with `args`, the benchmarks next to `bench` and GASNet's in
/// `gasnet`, writing to `out`; asserts it succeeded and returns its standard error.
fn compare_with(
    bench: &str,
    gasnet: &std::path::Path,
    out: &std::path::Path,
    args: &[&str],
) -> String {
    rgasnetrun();
    let bin_dir = PathBuf::from(bench).parent().unwrap().to_path_buf();
    let o = Command::new(env!("CARGO_BIN_EXE_rgasnet-bench"))
        .arg("compare")
        .args(args)
        .args(["--no-plots", "--out"])
        .arg(out)
        .arg("--bin-dir")
        .arg(&bin_dir)
        .arg("--gasnet")
        .arg(gasnet)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    stderr
}

#[test]
fn compare_runs_rgasnet_and_a_gasnet_peer_and_reports_what_is_missing() {
    let dir = scratch("compare-e2e");
    let gasnet = dir.join("gasnet");
    // A stand-in for GASNet's udp testam: insists on being launched the way GASNet launches
    // udp jobs (GASNET_SPAWNFN=L, node count first, then iters (AM_ITERS_SCALE x `-i`) and
    // maxsz) and prints GASNet's line shapes.
    fake_program(
        &gasnet.join("testam-udp"),
        "#!/bin/sh\n\
         [ \"$GASNET_SPAWNFN\" = L ] && [ \"$1\" = 2 ] && [ \"$2\" = 25 ] && [ \"$3\" = 8 ] || { echo \"bad launch: $*\" >&2; exit 1; }\n\
         echo '   Msg Sz  Description                             Total time   Avg. time   Bandwidth'\n\
         echo 'A:         AMShort     ping-pong roundtrip ReqRep:  0.000 sec   40.000 us'\n\
         echo 'B:       8 AMMedium    ping-pong roundtrip ReqRep:  0.000 sec   50.000 us    0.001 MB/s'\n",
    );
    let out = dir.join("out");
    let stderr = compare_with(
        env!("CARGO_BIN_EXE_testam"),
        &gasnet,
        &out,
        &[
            "--paths",
            "loopback",
            "--benches",
            "testam,testbarrier",
            "--repeats",
            "1",
            "-i",
            "5",
            "--max-size",
            "8",
            "--bench-args",
            "--no-baseline",
        ],
    );
    // Progress names every job; each benchmark runs on every path and peer back to back.
    assert!(
        stderr.contains("[1/3] testam on loopback (run 1 of 1) ... "),
        "{stderr}"
    );
    assert!(
        stderr.contains("[2/3] testam on gasnet-udp (run 1 of 1) ... 2 figures"),
        "{stderr}"
    );
    assert!(
        stderr.contains("[3/3] testbarrier on loopback (run 1 of 1) ... "),
        "{stderr}"
    );
    let md = read(&out, "results.md");
    assert_has(&md, "| vs gasnet-udp |");
    assert_has(
        &md,
        "| AMShort ping-pong roundtrip ReqRep |  | gasnet-udp | 40.0 | 40.0–40.0 | us |",
    );
    // The partial peer: testbarrier was asked for but GASNet's is missing.
    assert_has(&md, "- gasnet-udp: testbarrier not found in");
    let csv = read(&out, "results.csv");
    assert_has(
        &csv,
        "\ngasnet-udp,testam,am,AMMedium ping-pong roundtrip ReqRep,8,us,50,50,50,1,",
    );
    let json = read(&out, "results.json");
    assert_has(&json, "\"skipped\": [\"gasnet-udp: testbarrier not found");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compare_reads_gasnet_ex_labels_and_rotates_the_order_of_each_repeat() {
    let dir = scratch("compare-ex");
    // A build tree (`<conduit>-conduit/<test>`) whose udp testsmall prints GASNet-EX's labels
    // and insists on `-i` iterations.
    fake_program(
        &dir.join("gasnet").join("udp-conduit").join("testsmall"),
        "#!/bin/sh\n\
         [ \"$2\" = 5 ] && [ \"$3\" = 8 ] || { echo \"bad launch: $*\" >&2; exit 1; }\n\
         echo 'A:  0 -          8 byte :       5 iters, latency        100 us total,    20.000 us ave. (PutBlocking latency)'\n\
         echo 'A:  0 -          8 byte :       5 iters, latency        110 us total,    22.000 us ave. (GetBlocking latency)'\n",
    );
    let out = dir.join("out");
    let stderr = compare_with(
        env!("CARGO_BIN_EXE_testsmall"),
        &dir.join("gasnet"),
        &out,
        &[
            "--paths",
            "native",
            "--benches",
            "testsmall",
            "--repeats",
            "2",
            "-i",
            "5",
            "--max-size",
            "8",
            "--bench-args",
            "--no-baseline",
        ],
    );
    // Each repeat runs the path and the peer on its medium back to back; the second starts
    // with the peer.
    for line in [
        "[1/4] testsmall on native (run 1 of 2)",
        "[2/4] testsmall on gasnet-udp (run 1 of 2)",
        "[3/4] testsmall on gasnet-udp (run 2 of 2)",
        "[4/4] testsmall on native (run 2 of 2)",
    ] {
        assert!(stderr.contains(line), "{line}: {stderr}");
    }
    // GASNet-EX's labels land on rgasnet's rows, so the peer column fills.
    let md = read(&out, "results.md");
    assert_has(&md, "| put latency | 8 | gasnet-udp | 20.0 |");
    assert_has(&md, "| get latency | 8 | gasnet-udp | 22.0 |");
    let ours = line_of(&md, "| put latency | 8 | native |");
    assert!(
        !ours.trim_end().ends_with("| – |"),
        "no ratio to the peer: {ours}"
    );
    // And the ratio taken within each repeat, over both repeats, is written for them.
    let paired = read(&out, "peer_ratios.csv");
    let put = line_of(&paired, "native,gasnet-udp,latency,put latency,8,us,");
    // Both repeats paired; or, where the probes saw this machine change state between the
    // two jobs of a repeat in every try, that one left out; or both counted, and said so,
    // when neither repeat had its jobs in one state.
    let mut tail = put.rsplit(',');
    let (left_out, runs) = (tail.next().unwrap(), tail.next().unwrap());
    assert!(
        matches!((runs, left_out), ("2", "0") | ("1", "1") | ("2", "all")),
        "two repeats paired: {put}"
    );
    // The probes ran around every job, and its log says what they found.
    for log in ["native-testsmall-1.txt", "gasnet-udp-testsmall-2.txt"] {
        let text = read(&out.join("logs"), log);
        let probes = line_of(&text, "--- machine before: shm flag ");
        assert!(probes.contains(" us; after: shm flag "), "{probes}");
    }
    // rgasnet's testsmall ran the same iterations as GASNet's, every size up to 1 GiB moved.
    let ours = read(&out.join("logs"), "native-testsmall-1.txt");
    let command = line_of(&ours, "$ ");
    assert!(
        command.contains(" -i 5 --max-size 8 --byte-budget 1073741824 --no-baseline"),
        "{command}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_job_stopped_at_its_deadline_takes_what_it_started_along() {
    // The job's own child (as GASNet's udp programs fork their ranks) goes with it.
    let job = Job {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), "sleep 30 & echo $!; wait".into()],
        env: vec![],
        timeout: Duration::from_millis(300),
    };
    let o = run(&job).unwrap();
    assert!(o.timed_out);
    let pid: i32 = o.stdout.trim().parse().unwrap();
    let gone = std::time::Instant::now() + Duration::from_secs(10);
    while alive(pid) {
        assert!(
            std::time::Instant::now() < gone,
            "the job's child {pid} survived"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn compare_stopped_by_sigterm_stops_its_running_job() {
    let dir = scratch("compare-term");
    let pidfile = dir.join("peer.pid");
    // A peer that never finishes: it says where it is and sleeps.
    fake_program(
        &dir.join("gasnet").join("udp-conduit").join("testsmall"),
        &format!(
            "#!/bin/sh\necho $$ > '{}'\nexec sleep 120\n",
            pidfile.display()
        ),
    );
    rgasnetrun();
    let bin_dir = PathBuf::from(env!("CARGO_BIN_EXE_testsmall"))
        .parent()
        .unwrap()
        .to_path_buf();
    let mut compare = Command::new(env!("CARGO_BIN_EXE_rgasnet-bench"))
        .args(["compare", "--paths", "loopback", "--benches", "testsmall"])
        .args(["--repeats", "1", "-i", "5", "--max-size", "8", "--no-plots"])
        .args(["--bench-args", "--no-baseline", "--out"])
        .arg(dir.join("out"))
        .arg("--bin-dir")
        .arg(&bin_dir)
        .arg("--gasnet")
        .arg(dir.join("gasnet"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    let peer: i32 = loop {
        if let Some(pid) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok())
        {
            break pid;
        }
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = compare.kill();
            panic!("the peer job never started");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let pid = |p: i32| nix::unistd::Pid::from_raw(p);
    nix::sys::signal::kill(pid(compare.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let t1 = std::time::Instant::now();
    let status = loop {
        if let Some(st) = compare.try_wait().unwrap() {
            break st;
        }
        if t1.elapsed() > Duration::from_secs(20) {
            let _ = compare.kill();
            panic!("compare did not exit after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(143), "128 + SIGTERM");
    while alive(peer) {
        assert!(
            t1.elapsed() < Duration::from_secs(20),
            "the running job {peer} outlived compare"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn compare_runs_barriers_ten_times_the_iterations_for_rgasnet_and_gasnet_alike() {
    let dir = scratch("compare-bar");
    let gasnet = dir.join("gasnet");
    // GASNet's udp testbarrier stand-in refuses any iteration count but 10 x `-i`.
    fake_program(
        &gasnet.join("testbarrier-udp"),
        "#!/bin/sh\n\
         [ \"$1\" = 2 ] && [ \"$2\" = 50 ] && [ $# = 2 ] || { echo \"bad launch: $*\" >&2; exit 1; }\n\
         echo 'Total time:    0.001 sec  Avg Named Barrier latency:   13.601 us'\n",
    );
    let out = dir.join("out");
    compare_with(
        env!("CARGO_BIN_EXE_testbarrier"),
        &gasnet,
        &out,
        &[
            "--paths",
            "loopback",
            "--benches",
            "testbarrier",
            "--repeats",
            "1",
            "-i",
            "5",
        ],
    );
    let md = read(&out, "results.md");
    // The peer's figure is there, so it ran (with 50 iterations: it refuses any other count).
    assert_has(&md, "| Named Barrier |  | gasnet-udp | 13.6 |");
    assert_has(
        &md,
        "Iterations: 5 per measurement, 25 per AM and 50 per barrier benchmark; rgasnet's \
         benchmarks move at most 1024 MiB per size.",
    );
    // rgasnet's testbarrier got the same count.
    let ours = line_of(&md, "testbarrier -i ");
    assert!(ours.contains("testbarrier -i 50 "), "{ours}");
    std::fs::remove_dir_all(&dir).unwrap();
}
