//! The mpi spawner and the MPI bootstrap (feature `mpi`), with Open MPI on this machine.
#![cfg(feature = "mpi")]
// Test code: helpers outside #[test] functions panic on purpose to fail the test.
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::*;

const LIMIT: Duration = Duration::from_secs(90);

fn mpirun_path() -> Option<String> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("mpirun"))
        .find(|p| p.is_file())
        .map(|p| p.to_string_lossy().into_owned())
}

fn have_mpirun(test: &str) -> bool {
    if mpirun_path().is_none() {
        skip(
            test,
            "mpirun not found; fix: apt-get install -y openmpi-bin libopenmpi-dev",
        );
        return false;
    }
    true
}

#[test]
fn mpi_spawner_bootstrap_values() {
    if !have_mpirun("mpi_spawner_bootstrap_values") {
        return;
    }
    let prog = check_prog();
    for n in [1u32, 2, 4] {
        let r = run(
            launcher(&[
                "--spawner",
                "mpi",
                "-n",
                &n.to_string(),
                prog.to_str().unwrap(),
                "check",
            ]),
            LIMIT,
        );
        assert_check_output(&r, n, &|_| (0..n).collect());
    }
}

#[test]
fn bare_mpirun_bootstraps_through_mpi() {
    let Some(mpirun) = mpirun_path() else {
        skip(
            "bare_mpirun_bootstraps_through_mpi",
            "mpirun not found; fix: apt-get install -y openmpi-bin libopenmpi-dev",
        );
        return;
    };
    let prog = check_prog();
    let mut c = Command::new(mpirun);
    c.args(["--oversubscribe", "-np", "2"])
        .arg(&prog)
        .arg("check");
    if nix::unistd::Uid::effective().is_root() {
        c.arg("--allow-run-as-root");
        c.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    }
    let r = run(c, LIMIT);
    assert_check_output(&r, 2, &|_| vec![0, 1]);
}

#[test]
fn mpi_abort_and_exit_codes_reach_the_launcher() {
    if !have_mpirun("mpi_abort_and_exit_codes_reach_the_launcher") {
        return;
    }
    let prog = check_prog();
    let p = prog.to_str().unwrap();
    let r = run(
        launcher(&["--spawner", "mpi", "-n", "3", p, "abort", "1", "5"]),
        LIMIT,
    );
    assert_eq!(r.code, Some(5), "{}", r.stderr);
    assert!(
        r.stderr.contains("rgasnetrun: mpirun (pid ") && r.stderr.contains("exited with code 5"),
        "{}",
        r.stderr
    );
    let r = run(
        launcher(&[
            "--spawner",
            "mpi",
            "-n",
            "3",
            p,
            "exit-in-barrier",
            "2",
            "3",
        ]),
        LIMIT,
    );
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    let r = run(
        launcher(&["--spawner", "mpi", "-n", "2", p, "size-mismatch"]),
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(
        r.stdout
            .contains("rank 0 got: allgather failed: ranks disagree"),
        "{}",
        r.stdout
    );
}

#[test]
fn mpi_dry_run_shows_the_mpirun_command() {
    if !have_mpirun("mpi_dry_run_shows_the_mpirun_command") {
        return;
    }
    let r = run(
        launcher(&["--spawner", "mpi", "-n", "2", "--dry-run", "/bin/true", "a"]),
        LIMIT,
    );
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let l: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(l[0], "spawner: mpi, 2 rank(s)");
    assert!(
        l[1].contains("mpirun ")
            && l[1].contains(" --oversubscribe ")
            && l[1].ends_with("-np 2 /bin/true a"),
        "{}",
        l[1]
    );
    assert!(Path::new(l[1].split_whitespace().next().unwrap()).is_file());
}
