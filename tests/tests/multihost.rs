//! Jobs across several hosts (`scripts/netns-hosts.sh`: two network namespaces with their own
//! hostnames, joined by a bridge, MTU 1500), started through ssh and through Slurm with no
//! interface variable set: each rank must bind the interface that reaches the others, and
//! the PSHM supernodes must follow the host boundaries. Needs root; SKIPPED lines otherwise.

use std::path::Path;
use std::process::Command;
use std::sync::MutexGuard;
use std::time::Duration;

use rgasnet_tests::netns::{lab, Lab};
use rgasnet_tests::{launch_conformance, rgasnetrun, run_command, JobOutput};

const AM: &str = env!("CARGO_BIN_EXE_am_conformance");
// Built for launch_conformance, which finds it next to AM.
const _EXT: &str = env!("CARGO_BIN_EXE_ext_conformance");
const LIMIT: Duration = Duration::from_secs(120);

/// `rgasnetrun --spawner ssh --hosts H1,H2 -n 4 program args…` from the lab namespace.
fn ssh_job(l: &Lab, program: &Path, args: &[&str]) -> Command {
    let hosts = l.hosts.join(",");
    let launcher = rgasnetrun().to_string_lossy().into_owned();
    let program = program.to_string_lossy();
    let mut argv = vec!["--spawner", "ssh", "--hosts", &hosts, "-n", "4", &program];
    argv.extend(args);
    let mut c = l.command(&launcher, &argv);
    c.env(
        "GASNET_SSH_OPTIONS",
        format!("{} -o LogLevel=ERROR", l.ssh_options),
    );
    c
}

/// The topology every launcher must report: two hosts of two ranks, one supernode each.
fn assert_two_hosts_of_two(what: &str, out: &JobOutput) {
    out.assert_success();
    let mut lines: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("rank "))
        .collect();
    lines.sort();
    let want = [
        "rank 0/4 host_ranks=[0, 1] supernode=[0, 1]",
        "rank 1/4 host_ranks=[0, 1] supernode=[0, 1]",
        "rank 2/4 host_ranks=[2, 3] supernode=[2, 3]",
        "rank 3/4 host_ranks=[2, 3] supernode=[2, 3]",
    ];
    assert_eq!(lines, want, "{what}:\n{}", out.stderr);
}

/// The namespace hosts with their sshd, and this test's turn; `None` after a SKIPPED line.
fn lab_with_ssh(test: &str) -> Option<(&'static Lab, MutexGuard<'static, ()>)> {
    let (l, turn) = lab(test)?;
    if l.ssh_options.is_empty() {
        let why = "no sshd; fix: apt-get install -y openssh-server openssh-client";
        rgasnet_tests::skip(test, why);
        return None;
    }
    Some((l, turn))
}

#[test]
fn ssh_job_spans_two_namespace_hosts_without_an_interface_variable() {
    let test = "ssh_job_spans_two_namespace_hosts_without_an_interface_variable";
    let Some((l, _turn)) = lab_with_ssh(test) else {
        return;
    };
    let out = run_command(ssh_job(l, Path::new(AM), &["topology"]), LIMIT);
    assert_two_hosts_of_two("ssh", &out);
    let job = |prog: &Path, args: &[&str], env: &[(&str, &str)]| {
        let mut c = ssh_job(l, prog, args);
        c.envs(env.iter().copied());
        c
    };
    launch_conformance("ssh", 4, &job, LIMIT);
}

#[test]
fn loopback_between_hosts_is_a_start_up_error_naming_both() {
    let test = "loopback_between_hosts_is_a_start_up_error_naming_both";
    let Some((l, _turn)) = lab_with_ssh(test) else {
        return;
    };
    let mut c = ssh_job(l, Path::new(AM), &["basic"]);
    c.env("RGASNET_IFACE", "lo");
    let out = run_command(c, Duration::from_secs(30));
    assert!(!out.status.success(), "{}", out.stdout);
    assert!(
        out.stderr.contains("on host nsh1")
            && out.stderr.contains("on host nsh2")
            && out
                .stderr
                .contains("loopback address cannot reach another host"),
        "{}",
        out.stderr
    );
    assert!(out.elapsed < Duration::from_secs(10), "{:?}", out.elapsed);
}

#[test]
fn slurm_job_spans_two_namespace_hosts_without_an_interface_variable() {
    let test = "slurm_job_spans_two_namespace_hosts_without_an_interface_variable";
    let Some((l, _turn)) = lab(test) else {
        return;
    };
    let Some(c) = l.slurm(test) else {
        return;
    };
    let launcher = rgasnetrun().to_string_lossy().into_owned();
    let job = |prog: &Path, args: &[&str], env: &[(&str, &str)]| {
        let prog = prog.to_string_lossy();
        let mut argv = vec!["-Q", "-N", "2", "-n", "4", &launcher];
        argv.extend(["--spawner", "slurm", "-n", "4", &prog]);
        argv.extend(args);
        let mut cmd = c.command("salloc", &argv);
        cmd.envs(env.iter().copied());
        cmd
    };
    let out = run_command(job(Path::new(AM), &["topology"], &[]), LIMIT);
    assert_two_hosts_of_two("--spawner slurm", &out);
    launch_conformance("--spawner slurm", 4, &job, LIMIT);
    // PMI-2 ranks find their address without a bootstrap connection to follow.
    if cfg!(feature = "pmi2") {
        let srun = |prog: &Path, args: &[&str], env: &[(&str, &str)]| {
            let prog = prog.to_string_lossy();
            let mut argv = vec!["--mpi=pmi2", "-Q", "-N", "2", "-n", "4", &prog];
            argv.extend(args);
            let mut cmd = c.command("srun", &argv);
            cmd.envs(env.iter().copied());
            cmd
        };
        let out = run_command(srun(Path::new(AM), &["topology"], &[]), LIMIT);
        assert_two_hosts_of_two("srun --mpi=pmi2", &out);
        launch_conformance("srun --mpi=pmi2", 4, &srun, LIMIT);
    }
}
