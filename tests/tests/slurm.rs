//! Cluster launch against a real Slurm (`scripts/slurm-one-host.sh`: munged, slurmctld and
//! slurmd on this host, 8 CPUs, oversubscription allowed): `rgasnetrun --spawner slurm` inside
//! an allocation, and — with the features `pmix` / `pmi2` — ranks that bootstrap through
//! `srun --mpi=pmix`, `srun --mpi=pmi2` and Open MPI's `mpirun` (a PMIx server) without
//! `rgasnetrun`. Each test checks the bootstrap values, AMs, put/get and barriers across the
//! ranks, exit codes and a killed rank. Missing packages give SKIPPED lines.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rgasnet_tests::slurm::{cluster, Cluster};
use rgasnet_tests::{
    bootstrap_check, launch_conformance, rgasnetrun, run_command, JobCommand, JobOutput,
};

const AM: &str = env!("CARGO_BIN_EXE_am_conformance");
// Built for launch_conformance, which finds it next to AM.
const _EXT: &str = env!("CARGO_BIN_EXE_ext_conformance");
const LIMIT: Duration = Duration::from_secs(120);
/// How soon after a rank's failure the whole job must be over.
const FAILURE_TO_EXIT: Duration = Duration::from_secs(5);

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

/// Runs `cmd`; returns its output and the wall-clock time (ms) it ended at.
fn run(cmd: Command) -> (JobOutput, u128) {
    let out = run_command(cmd, LIMIT);
    (out, now_ms())
}

/// `salloc -n N rgasnetrun --spawner slurm -n N program args…` (or `GASNET_SPAWNER=pmi`
/// instead of the option).
fn spawner_job(c: &Cluster, n: u32, program: &Path, args: &[&str], by_env: bool) -> Command {
    let n = n.to_string();
    let launcher = rgasnetrun().to_string_lossy().into_owned();
    let prog = program.to_string_lossy().into_owned();
    let mut argv = vec!["-n", &n, "--quiet", &launcher];
    if !by_env {
        argv.extend(["--spawner", "slurm"]);
    }
    argv.extend(["-n", &n, &prog]);
    argv.extend(args);
    let mut cmd = c.command("salloc", &argv);
    if by_env {
        cmd.env("GASNET_SPAWNER", "pmi");
    }
    cmd
}

/// `srun --mpi=PLUGIN -n N --kill-on-bad-exit=1 program args…`.
fn srun_job(c: &Cluster, plugin: &str, n: u32, program: &Path, args: &[&str]) -> Command {
    let mpi = format!("--mpi={plugin}");
    let n = n.to_string();
    let prog = program.to_string_lossy().into_owned();
    let mut argv = vec![
        mpi.as_str(),
        "-n",
        &n,
        "--kill-on-bad-exit=1",
        "--quiet",
        &prog,
    ];
    argv.extend(args);
    c.command("srun", &argv)
}

/// Asserts `rgasnet-bootstrap-check check` output of `n` ranks on this one host: every rank
/// passed its checks, with every rank as host rank and one job key.
fn assert_bootstrap_values(what: &str, out: &JobOutput, n: u32) {
    out.assert_success();
    let all: Vec<u32> = (0..n).collect();
    let mut keys = Vec::new();
    for r in 0..n {
        let prefix = format!("rank {r}/{n} ok host_ranks={all:?} key=");
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| {
                panic!(
                    "{what}: no line {prefix:?}:\n{}\n{}",
                    out.stdout, out.stderr
                )
            });
        let key = &line[prefix.len()..];
        assert_eq!(key.len(), 16, "{what}: {line}");
        keys.push(key.to_string());
    }
    keys.dedup();
    assert_eq!(
        keys.len(),
        1,
        "{what}: ranks saw different job keys: {keys:?}"
    );
}

/// [`launch_conformance`] with this file's limit.
fn conformance(what: &str, n: u32, job: JobCommand<'_>) {
    launch_conformance(what, n as usize, job, LIMIT);
}

/// No process of `program` is left on this host.
fn assert_nothing_left(what: &str, program: &Path) {
    let needle = program.to_string_lossy().into_owned();
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        let left: Vec<String> = std::fs::read_dir("/proc")
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .filter(|c| c.starts_with(&needle))
            .collect();
        if left.is_empty() {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: processes left running: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The rank's recorded exit (`EXITING_AT_MS=`) to `ended_ms`, within [`FAILURE_TO_EXIT`].
fn assert_prompt_end(what: &str, out: &JobOutput, ended_ms: u128) {
    let at: u128 = out
        .stdout
        .lines()
        .find_map(|l| l.split("EXITING_AT_MS=").nth(1))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("{what}: no EXITING_AT_MS line:\n{}", out.stdout));
    let took = Duration::from_millis(ended_ms.saturating_sub(at) as u64);
    assert!(
        took < FAILURE_TO_EXIT,
        "{what}: the job ended {took:?} after the rank failed"
    );
}

#[test]
fn spawner_slurm_bootstraps_two_and_four_ranks() {
    let Some((c, _turn)) = cluster("spawner_slurm_bootstraps_two_and_four_ranks") else {
        return;
    };
    let check = bootstrap_check();
    for (n, by_env) in [(2, false), (4, false), (2, true)] {
        let (out, _) = run(spawner_job(c, n, &check, &["check"], by_env));
        assert_bootstrap_values(&format!("--spawner slurm, {n} ranks"), &out, n);
        assert!(!out.stderr.contains("rgasnetrun:"), "{}", out.stderr);
    }
    // The ranks know who started them.
    let (out, _) = run(spawner_job(c, 2, &check, &["env"], false));
    out.assert_success();
    assert_eq!(
        out.stdout.matches("RGASNET_SPAWNER=slurm").count(),
        2,
        "{}",
        out.stdout
    );
}

#[test]
fn spawner_slurm_runs_am_and_extended_conformance() {
    let Some((c, _turn)) = cluster("spawner_slurm_runs_am_and_extended_conformance") else {
        return;
    };
    for n in [2, 4] {
        conformance("--spawner slurm", n, &|prog, args, env| {
            let mut cmd = spawner_job(c, n, prog, args, false);
            cmd.envs(env.iter().copied());
            cmd
        });
    }
}

#[test]
fn spawner_slurm_failures_end_the_job_with_the_rank_code() {
    let Some((c, _turn)) = cluster("spawner_slurm_failures_end_the_job_with_the_rank_code") else {
        return;
    };
    let check = bootstrap_check();
    for (args, code, timed) in [
        (&["exit-in-barrier", "1", "7"][..], 7, true),
        (&["abort", "2", "5"][..], 5, false),
        (&["signal", "1"][..], 128 + 9, false),
    ] {
        let what = format!("--spawner slurm {args:?}");
        let (out, ended) = run(spawner_job(c, 4, &check, args, false));
        assert_eq!(
            out.status.code(),
            Some(code),
            "{what}:\n{}\n{}",
            out.stdout,
            out.stderr
        );
        assert!(
            out.stderr.contains("stopping the job"),
            "{what}: {}",
            out.stderr
        );
        if timed {
            assert_prompt_end(&what, &out, ended);
        }
        assert_nothing_left(&what, &check);
    }
    // A program that does not exist on the nodes: 127 and the reason.
    let (out, _) = run(spawner_job(
        c,
        2,
        Path::new("/nonexistent/program"),
        &[],
        false,
    ));
    assert_eq!(out.status.code(), Some(127), "{}", out.stderr);
    assert!(
        out.stderr.contains("/nonexistent/program"),
        "{}",
        out.stderr
    );
}

#[test]
fn spawner_slurm_outside_an_allocation_says_how_to_get_one() {
    let mut cmd = Command::new(rgasnetrun());
    for (k, _) in std::env::vars() {
        if k.starts_with("SLURM_") || k.starts_with("GASNET_") || k.starts_with("RGASNET_") {
            cmd.env_remove(k);
        }
    }
    cmd.args(["--spawner", "slurm", "-n", "2", "/bin/true"]);
    let out = run_command(cmd, Duration::from_secs(10));
    assert_eq!(out.status.code(), Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains("needs a Slurm allocation") && out.stderr.contains("salloc"),
        "{}",
        out.stderr
    );
}

/// The Slurm MPI plugins whose client library this build has.
fn plugins() -> Vec<&'static str> {
    let mut v = Vec::new();
    if cfg!(feature = "pmix") {
        v.push("pmix");
    }
    if cfg!(feature = "pmi2") {
        v.push("pmi2");
    }
    v
}

#[test]
fn srun_pmi_plugins_start_jobs_without_rgasnetrun() {
    if plugins().is_empty() {
        // scripts/test.sh runs this file again with the features (or says why it cannot).
        println!("not built with the pmix or pmi2 feature: nothing to test");
        return;
    }
    let Some((c, _turn)) = cluster("srun_pmi_plugins_start_jobs_without_rgasnetrun") else {
        return;
    };
    let check = bootstrap_check();
    for plugin in plugins() {
        for n in [2, 4] {
            let (out, _) = run(srun_job(c, plugin, n, &check, &["check"]));
            assert_bootstrap_values(&format!("srun --mpi={plugin}, {n} ranks"), &out, n);
        }
        conformance(&format!("srun --mpi={plugin}"), 4, &|prog, args, env| {
            let mut cmd = srun_job(c, plugin, 4, prog, args);
            cmd.envs(env.iter().copied());
            cmd
        });
        // A failing or killed rank ends the step (srun's own exit code), promptly.
        for args in [&["exit-in-barrier", "1", "7"][..], &["signal", "2"][..]] {
            let what = format!("srun --mpi={plugin} {args:?}");
            let (out, ended) = run(srun_job(c, plugin, 3, &check, args));
            assert!(
                !out.status.success(),
                "{what}: the step must fail:\n{}",
                out.stderr
            );
            if args[0] == "exit-in-barrier" {
                assert_prompt_end(&what, &out, ended);
            }
            assert_nothing_left(&what, &check);
        }
    }
}

#[test]
fn mpirun_is_a_pmix_server_for_programs_without_mpi() {
    if !cfg!(feature = "pmix") {
        // scripts/test.sh runs this file again with the feature (or says why it cannot).
        println!("not built with the pmix feature: nothing to test");
        return;
    }
    if Command::new("mpirun").arg("--version").output().is_err() {
        rgasnet_tests::skip(
            "mpirun_is_a_pmix_server_for_programs_without_mpi",
            "mpirun not found; fix: apt-get install -y openmpi-bin",
        );
        return;
    }
    let mpirun = |n: u32, prog: &Path, args: &[&str], env: &[(&str, &str)]| {
        let mut cmd = Command::new("mpirun");
        cmd.args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-n",
            &n.to_string(),
        ])
        .arg(prog)
        .args(args)
        .envs(env.iter().copied());
        for (k, _) in std::env::vars() {
            if k.starts_with("GASNET_") || k.starts_with("RGASNET_") {
                cmd.env_remove(k);
            }
        }
        cmd
    };
    let check = bootstrap_check();
    for n in [2, 4] {
        let (out, _) = run(mpirun(n, &check, &["check"], &[]));
        assert_bootstrap_values(&format!("mpirun, {n} ranks"), &out, n);
    }
    conformance("mpirun", 4, &|prog, args, env| mpirun(4, prog, args, env));
    // A rank that ends the job (gasnet_exit(7)): PMIx_Abort carries the code to mpirun.
    let am = Path::new(AM);
    let (out, ended) = run(mpirun(3, am, &["exit", "1", "7"], &[]));
    assert_eq!(out.status.code(), Some(7), "{}", out.stderr);
    assert_prompt_end("mpirun exit 1 7", &out, ended);
    assert_nothing_left("mpirun exit 1 7", am);
    // A rank that just dies: the job fails at once (the code is whichever rank mpirun saw
    // fail first: the dead one, or one whose fence failed because of it).
    let (out, ended) = run(mpirun(3, &check, &["exit-in-barrier", "1", "7"], &[]));
    assert!(!out.status.success(), "{}", out.stderr);
    assert_prompt_end("mpirun exit-in-barrier", &out, ended);
    assert_nothing_left("mpirun exit-in-barrier", &check);
}

/// `am_conformance topology` lines (rank, size, host ranks, supernode), sorted.
fn topology(what: &str, out: &JobOutput) -> Vec<String> {
    out.assert_success();
    let mut lines: Vec<String> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("rank ") && l.contains(" supernode="))
        .map(str::to_string)
        .collect();
    lines.sort();
    assert_eq!(lines.len(), 4, "{what}:\n{}\n{}", out.stdout, out.stderr);
    lines
}

#[test]
fn every_launcher_gives_the_same_ranks_and_supernodes() {
    let Some((c, _turn)) = cluster("every_launcher_gives_the_same_ranks_and_supernodes") else {
        return;
    };
    let am = Path::new(AM);
    let mut local = c.command(rgasnetrun(), &["-n", "4", AM, "topology"]);
    local.env_remove("SLURM_CONF");
    let (out, _) = run(local);
    let want = topology("rgasnetrun", &out);
    assert!(want[0].ends_with("supernode=[0, 1, 2, 3]"), "{want:?}");
    let mut launchers: Vec<(String, Command)> = vec![(
        "rgasnetrun --spawner slurm".into(),
        spawner_job(c, 4, am, &["topology"], false),
    )];
    for plugin in plugins() {
        launchers.push((
            format!("srun --mpi={plugin}"),
            srun_job(c, plugin, 4, am, &["topology"]),
        ));
    }
    if cfg!(feature = "pmix") {
        let mut m = Command::new("mpirun");
        m.args([
            "--allow-run-as-root",
            "--oversubscribe",
            "-n",
            "4",
            AM,
            "topology",
        ]);
        launchers.push(("mpirun".into(), m));
    }
    for (what, cmd) in launchers {
        let (out, _) = run(cmd);
        assert_eq!(
            topology(&what, &out),
            want,
            "{what} differs from rgasnetrun"
        );
    }
}

#[test]
fn srun_rank_exit_code_ends_the_job_with_that_code() {
    if !cfg!(feature = "pmix") {
        println!("not built with the pmix feature: nothing to test");
        return;
    }
    let Some((c, _turn)) = cluster("srun_rank_exit_code_ends_the_job_with_that_code") else {
        return;
    };
    let am = Path::new(AM);
    // Rank 2 ends the job with code 3 (gasnet_exit(3)): PMIx_Abort carries the code to srun.
    let (out, ended) = run(srun_job(c, "pmix", 4, am, &["exit", "2", "3"]));
    assert_eq!(out.status.code(), Some(3), "{}\n{}", out.stdout, out.stderr);
    assert_prompt_end("srun --mpi=pmix exit 2 3", &out, ended);
    assert_nothing_left("srun --mpi=pmix exit 2 3", am);
    let steps = c
        .command("squeue", &["-h", "-s"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned());
    assert!(
        steps.as_deref().is_ok_and(|s| s.trim().is_empty()),
        "steps left: {steps:?}"
    );
    if cfg!(feature = "pmi2") {
        // PMI-2 cannot carry the code (PMI2_Abort exits 1 and the step is killed): the job
        // still ends at once, failed.
        let (out, ended) = run(srun_job(c, "pmi2", 4, am, &["exit", "2", "3"]));
        assert!(!out.status.success(), "{}", out.stderr);
        assert_prompt_end("srun --mpi=pmi2 exit 2 3", &out, ended);
        assert_nothing_left("srun --mpi=pmi2 exit 2 3", am);
    }
}

#[test]
fn a_rank_started_by_hand_names_the_ways_to_launch() {
    let mut cmd = Command::new(AM);
    for (k, _) in std::env::vars() {
        if k.starts_with("RGASNET_") || k.starts_with("PMI") || k.starts_with("OMPI_") {
            cmd.env_remove(k);
        }
    }
    cmd.arg("basic");
    let out = run_command(cmd, Duration::from_secs(10));
    assert!(!out.status.success());
    let lines: Vec<&str> = out.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "one line: {:?}", out.stderr);
    for way in ["rgasnetrun -n 2", "--spawner slurm"] {
        assert!(lines[0].contains(way), "{way} missing: {}", lines[0]);
    }
    if cfg!(feature = "pmix") {
        assert!(lines[0].contains("srun --mpi=pmix"), "{}", lines[0]);
    }
}
