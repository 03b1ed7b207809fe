//! Multi-process tests of the local spawner: real jobs through `rgasnetrun`.
// Test code: helpers outside #[test] functions panic on purpose to fail the test.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(60);

fn check_job(n: u32) {
    let prog = check_prog();
    let r = run(
        launcher(&["-n", &n.to_string(), prog.to_str().unwrap(), "check"]),
        LIMIT,
    );
    assert_check_output(&r, n, &|_| (0..n).collect());
}

#[test]
fn local_one_rank_bootstrap_values() {
    check_job(1);
}

#[test]
fn local_two_ranks_bootstrap_values() {
    check_job(2);
}

#[test]
fn local_four_ranks_bootstrap_values() {
    check_job(4);
}

#[test]
fn rank_exit_code_3_in_barrier_ends_job_with_3_under_2s() {
    let prog = check_prog();
    let r = run(
        launcher(&[
            "-n",
            "4",
            prog.to_str().unwrap(),
            "exit-in-barrier",
            "2",
            "3",
        ]),
        LIMIT,
    );
    assert_eq!(r.code, Some(3), "{}\n{}", r.stdout, r.stderr);
    let lines: Vec<&str> = r
        .stderr
        .lines()
        .filter(|l| l.starts_with("rgasnetrun:"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", r.stderr);
    assert!(
        lines[0].starts_with("rgasnetrun: rank 2 (host localhost, pid ")
            && lines[0].contains("exited with code 3"),
        "{}",
        lines[0]
    );
    let ms = failure_to_exit_ms(&r);
    println!("local failure-to-exit: {ms} ms");
    assert!(ms < 2000, "took {ms} ms");
}

#[test]
fn rank_abort_ends_job_with_its_code() {
    let prog = check_prog();
    let r = run(
        launcher(&["-n", "3", prog.to_str().unwrap(), "abort", "1", "5"]),
        LIMIT,
    );
    assert_eq!(r.code, Some(5), "{}", r.stderr);
    assert!(
        r.stderr.contains("rank 1 (host localhost, pid ") && r.stderr.contains("called abort(5)"),
        "{}",
        r.stderr
    );
}

#[test]
fn abort_zero_ends_every_rank_with_zero() {
    let prog = check_prog();
    let r = run(
        launcher(&["-n", "2", prog.to_str().unwrap(), "abort", "0", "0"]),
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    // The normal end of a GASNet program (`gasnet_exit(0)`): nothing to report.
    assert!(!r.stderr.contains("abort"), "{}", r.stderr);
}

#[test]
fn rank_killed_by_signal_gives_128_plus_signal() {
    let prog = check_prog();
    let r = run(
        launcher(&["-n", "2", prog.to_str().unwrap(), "signal", "1"]),
        LIMIT,
    );
    assert_eq!(r.code, Some(137), "{}", r.stderr);
    assert!(
        r.stderr.contains("rank 1 (host localhost, pid ")
            && r.stderr.contains("killed by signal 9 (SIGKILL)"),
        "{}",
        r.stderr
    );
}

#[test]
fn allgather_size_mismatch_is_a_typed_error_on_every_rank() {
    let prog = check_prog();
    let r = run(
        launcher(&["-n", "2", prog.to_str().unwrap(), "size-mismatch"]),
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    for rank in 0..2 {
        assert!(
            r.stdout.contains(&format!(
                "rank {rank} got: allgather failed: ranks disagree"
            )),
            "{}",
            r.stdout
        );
    }
}

#[test]
fn tag_output_prefixes_every_line() {
    let prog = check_prog();
    let r = run(
        launcher(&["-n", "2", "--tag-output", prog.to_str().unwrap(), "check"]),
        LIMIT,
    );
    assert_eq!(r.code, Some(0));
    let mut lines: Vec<&str> = r.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines.len(), 2);
    assert!(lines[0].starts_with("[0] rank 0/2 ok"), "{}", lines[0]);
    assert!(lines[1].starts_with("[1] rank 1/2 ok"), "{}", lines[1]);
}

#[test]
fn programs_that_never_bootstrap_are_supervised() {
    let r = run(
        launcher(&[
            "-n",
            "3",
            "/bin/sh",
            "-c",
            "echo rank=$RGASNET_RANK size=$RGASNET_SIZE; exit 0",
        ]),
        LIMIT,
    );
    assert_eq!(r.code, Some(0));
    let mut lines: Vec<&str> = r.stdout.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        vec!["rank=0 size=3", "rank=1 size=3", "rank=2 size=3"]
    );
    let r = run(
        launcher(&[
            "-n",
            "2",
            "/bin/sh",
            "-c",
            "[ $RGASNET_RANK = 1 ] && exit 7; sleep 30",
        ]),
        LIMIT,
    );
    assert_eq!(r.code, Some(7), "{}", r.stderr);
    assert!(r.elapsed < Duration::from_secs(10), "{:?}", r.elapsed);
}

#[test]
fn ranks_start_with_no_signal_blocked() {
    // The launcher blocks the signals it waits for; a rank must not inherit that mask, or it
    // could neither be stopped with SIGTERM nor die of a SIGINT it raises.
    let r = run(
        launcher(&["-n", "2", "/bin/grep", "SigBlk", "/proc/self/status"]),
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let masks: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(masks, vec!["SigBlk:\t0000000000000000"; 2], "{}", r.stdout);
}

#[test]
fn rank_environment_is_documented_and_complete() {
    let prog = check_prog();
    let r = run(
        launcher(&["-n", "2", "--tag-output", prog.to_str().unwrap(), "env"]),
        LIMIT,
    );
    assert_eq!(r.code, Some(0));
    for rank in 0..2 {
        let p = format!("[{rank}] ");
        let get = |k: &str| {
            r.stdout
                .lines()
                .find_map(|l| {
                    l.strip_prefix(&p)
                        .and_then(|l| l.strip_prefix(&format!("{k}=")))
                })
                .unwrap_or_else(|| panic!("no {k} for rank {rank}:\n{}", r.stdout))
                .to_string()
        };
        assert_eq!(get("RGASNET_RANK"), rank.to_string());
        assert_eq!(get("RGASNET_SIZE"), "2");
        assert_eq!(get("RGASNET_HOST_RANKS"), "0-1");
        assert_eq!(get("RGASNET_SPAWNER"), "local");
        assert_eq!(get("RGASNET_JOB_KEY").len(), 16);
        assert!(get("RGASNET_BOOTSTRAP").starts_with("127.0.0.1:"));
    }
}

#[test]
fn dry_run_prints_and_starts_nothing() {
    let prog = check_prog();
    let r = run(
        launcher(&[
            "-n",
            "2",
            "--dry-run",
            prog.to_str().unwrap(),
            "check",
            "x y",
        ]),
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "spawner: local, 2 rank(s) on this host");
    for rank in 0..2 {
        let l = lines[rank + 1];
        assert!(
            l.starts_with(&format!(
                "rank {rank} on localhost: RGASNET_RANK={rank} RGASNET_SIZE=2 RGASNET_JOB_KEY="
            )),
            "{l}"
        );
        assert!(
            l.contains("RGASNET_HOST_RANKS=0-1")
                && l.ends_with(&format!("{} check x y", prog.display())),
            "{l}"
        );
    }
    assert_eq!(lines.len(), 3);
}

/// Arguments, extra environment, expected exit code, text the error must contain.
type BadCase = (
    Vec<String>,
    Vec<(&'static str, &'static str)>,
    i32,
    &'static str,
);

#[test]
fn bad_input_is_one_line_fast_and_nonzero() {
    let dir = std::env::temp_dir().join(format!("rgasnet-badinput-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let hf = dir.join("hosts");
    std::fs::write(&hf, "node1\nnode2 slots=2 extra\n").unwrap();
    let plain = dir.join("plain");
    std::fs::write(&plain, "x").unwrap();
    let cases: Vec<BadCase> = vec![
        (
            vec!["-n".into(), "0".into(), "true".into()],
            vec![],
            2,
            "-n 0",
        ),
        (
            vec!["-n".into(), "2".into(), "/no/such/program".into()],
            vec![],
            127,
            "does not exist",
        ),
        (
            vec!["-n".into(), "2".into(), "no-such-program-xyz".into()],
            vec![],
            127,
            "not found in PATH",
        ),
        (
            vec!["-n".into(), "2".into(), plain.to_string_lossy().into()],
            vec![],
            127,
            "not executable",
        ),
        (
            vec![
                "-n".into(),
                "2".into(),
                "--spawner".into(),
                "ssh".into(),
                "--hostfile".into(),
                hf.to_string_lossy().into(),
                "true".into(),
            ],
            vec![],
            2,
            "line 2",
        ),
        (
            vec![
                "-n".into(),
                "4".into(),
                "-N".into(),
                "3".into(),
                "--spawner".into(),
                "ssh".into(),
                "--hosts".into(),
                "a,b".into(),
                "true".into(),
            ],
            vec![],
            2,
            "only 2 host",
        ),
        (
            vec![
                "-n".into(),
                "2".into(),
                "--spawner".into(),
                "ssh".into(),
                "true".into(),
            ],
            vec![],
            2,
            "needs hosts",
        ),
        (
            vec!["-n".into(), "2".into(), "true".into()],
            vec![("GASNET_SPAWNFN", "Q")],
            2,
            "GASNET_SPAWNFN",
        ),
        (
            vec![
                "-n".into(),
                "2".into(),
                "--spawner".into(),
                "mpi".into(),
                "true".into(),
            ],
            vec![("MPIRUN_CMD", "mpirun -np %N %X %C")],
            2,
            "%X",
        ),
        (
            vec![
                "-n".into(),
                "2".into(),
                "--spawner".into(),
                "mpi".into(),
                "true".into(),
            ],
            vec![("MPIRUN_CMD", "/no/mpirun -np %N %C")],
            127,
            "apt-get install openmpi-bin",
        ),
        (
            vec![
                "-n".into(),
                "2".into(),
                "--spawner".into(),
                "ssh".into(),
                "--hosts".into(),
                "host.invalid".into(),
                "true".into(),
            ],
            vec![],
            2,
            "does not resolve",
        ),
        (
            vec!["-n".into(), "2".into(), "true".into()],
            vec![("RGASNET_KILL_GRACE", "soon")],
            2,
            "RGASNET_KILL_GRACE",
        ),
    ];
    for (args, envs, code, needle) in cases {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut cmd = launcher(&argv);
        for (k, v) in &envs {
            cmd.env(k, v);
        }
        let r = run(cmd, Duration::from_secs(20));
        assert_eq!(r.code, Some(code), "{args:?} {envs:?}: {}", r.stderr);
        assert_eq!(r.stderr.lines().count(), 1, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(needle), "{args:?}: {}", r.stderr);
        assert!(
            r.elapsed < Duration::from_secs(10),
            "{args:?}: {:?}",
            r.elapsed
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn not_launched_program_says_how_to_launch() {
    let mut c = std::process::Command::new(check_prog());
    c.arg("check").env_remove("RGASNET_RANK");
    let r = run(c, LIMIT);
    assert_eq!(r.code, Some(3));
    assert!(r.stderr.contains("rgasnetrun -n 2 PROGRAM"), "{}", r.stderr);
}

#[test]
fn sigterm_to_launcher_stops_every_rank_no_orphans() {
    let prog = check_prog();
    let mut cmd = launcher(&["-n", "3", prog.to_str().unwrap(), "sleep"]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(out));
    let mut pids = Vec::new();
    let t0 = std::time::Instant::now();
    while pids.len() < 3 {
        assert!(t0.elapsed() < LIMIT, "ranks did not start");
        let l = lines.next().unwrap().unwrap();
        pids.push(l.split_whitespace().nth(3).unwrap().parse::<i32>().unwrap());
    }
    assert!(pids.iter().all(|p| alive(*p)));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t0.elapsed() > LIMIT {
            let _ = child.kill();
            panic!("launcher did not exit after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    assert_eq!(status.code(), Some(128 + 15));
    for p in pids {
        assert!(!alive(p), "rank pid {p} survived the launcher");
    }
}

#[test]
fn sigkill_to_launcher_leaves_no_orphans() {
    let prog = check_prog();
    let mut cmd = launcher(&["-n", "2", prog.to_str().unwrap(), "sleep"]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(out));
    let pids: Vec<i32> = (0..2)
        .map(|_| {
            lines
                .next()
                .unwrap()
                .unwrap()
                .split_whitespace()
                .nth(3)
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    child.kill().unwrap();
    child.wait().unwrap();
    let t0 = std::time::Instant::now();
    // PR_SET_PDEATHSIG delivers SIGKILL when the launcher dies; allow the kernel to finish.
    while pids.iter().any(|p| alive(*p)) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "ranks {pids:?} outlived a killed launcher"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn help_explains_options_with_an_example() {
    let r = run(launcher(&["--help"]), LIMIT);
    assert_eq!(r.code, Some(0));
    for needle in [
        "--spawner",
        "--hosts",
        "--hostfile",
        "--export",
        "--tag-output",
        "--dry-run",
        "Examples:",
        "rgasnetrun -n 4",
    ] {
        assert!(r.stdout.contains(needle), "--help lacks {needle}");
    }
}
