//! # rgasnet-tests — multi-process conformance tests
//!
//! The tests in this crate start real jobs through `rgasnetrun` (2–4 ranks, loopback only,
//! each bounded by a timeout) and check every path: shared memory, the native Portals engine
//! over UDP, and mixed (`DESIGN.md` §10). The programs the jobs run are this crate's binaries
//! (`src/bin/`); each checks its results itself and exits non-zero with a message naming what
//! went wrong.
#![forbid(unsafe_code)]

#[cfg(feature = "ref-impl")]
pub mod library;
pub mod lossy;
pub mod netns;
pub mod slurm;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// What a finished job printed and how it ended.
#[derive(Debug)]
pub struct JobOutput {
    /// Exit status of `rgasnetrun`.
    pub status: ExitStatus,
    /// Everything the ranks and the launcher printed on standard output.
    pub stdout: String,
    /// Everything printed on standard error.
    pub stderr: String,
    /// Wall time of the job.
    pub elapsed: Duration,
}

/// What a rank prints when its end ran out of time ([`rgasnet::Client::quiesce`]).
const UNDELIVERED: &str = "leaves the job with messages undelivered";

impl JobOutput {
    /// Whether the job exited 0 and every rank's end delivered what it sent: what
    /// [`JobOutput::assert_success`] checks.
    pub fn succeeded(&self) -> bool {
        self.status.success() && !self.stderr.contains(UNDELIVERED)
    }

    /// Panics with the job's output unless it exited 0 and every rank's end delivered what
    /// it sent (none waited out its peer timeout).
    pub fn assert_success(&self) {
        assert!(
            self.status.success(),
            "job failed with {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.status,
            self.stdout,
            self.stderr
        );
        assert!(
            !self.stderr.contains(UNDELIVERED),
            "a rank's end ran out of time after {:?}\n--- stderr\n{}",
            self.elapsed,
            self.stderr
        );
    }
}

/// The directory holding this build's binaries (`target/<profile>`).
fn bin_dir() -> PathBuf {
    // Test executables live in target/<profile>/deps/.
    let exe = std::env::current_exe().expect("current_exe");
    let deps = exe.parent().expect("deps dir");
    if deps.ends_with("deps") {
        deps.parent().expect("profile dir").to_path_buf()
    } else {
        deps.to_path_buf()
    }
}

/// The `rgasnetrun` binary of this build, building it first if this test run did not.
pub fn rgasnetrun() -> PathBuf {
    build_artifact(
        "rgasnetrun",
        &["-p", "rgasnet-launcher", "--bin", "rgasnetrun"],
        false,
    )
}

/// The C ABI's static library (`librgasnet_capi.a`) of this build, brought up to date first
/// (a test run does not build a dependency's static library by itself). Its header is
/// `capi/include/rgasnet.h`.
pub fn capi_static_lib() -> PathBuf {
    build_artifact("librgasnet_capi.a", &["-p", "rgasnet-capi", "--lib"], true)
}

/// `target/<profile>/name`, built with `cargo build <args>` in this build's profile when it is
/// missing, or every time with `always`.
fn build_artifact(name: &str, args: &[&str], always: bool) -> PathBuf {
    let dir = bin_dir();
    let path = dir.join(name);
    if always || !path.exists() {
        let release = dir.ends_with("release");
        let mut cmd = Command::new(env!("CARGO"));
        cmd.args(["build", "-q"]).args(args);
        if release {
            cmd.arg("--release");
        }
        let st = cmd.status().expect("run cargo build");
        assert!(st.success(), "building {name} failed");
    }
    path
}

/// Runs `rgasnetrun -n ranks program args…` with extra environment, killing it and failing
/// if it does not finish within `timeout`.
pub fn run_job(
    ranks: u32,
    program: &Path,
    args: &[&str],
    env: &[(&str, &str)],
    timeout: Duration,
) -> JobOutput {
    let mut cmd = Command::new(rgasnetrun());
    cmd.arg("-n").arg(ranks.to_string()).arg("--").arg(program);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    run_command(cmd, timeout)
}

/// Runs `cmd` (a job) to its end, collecting its output, killing it and failing if it does
/// not finish within `timeout`.
pub fn run_command(mut cmd: Command, timeout: Duration) -> JobOutput {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    // The job as a shell line with the environment it sets, for the timeout's message.
    let job = format!("{cmd:?}");
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn the job");
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    // Bytes, not `read_to_string`: one byte that is not UTF-8 would drop all of it.
    let out_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = out.read_to_end(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    });
    let err_t = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = err.read_to_end(&mut b);
        String::from_utf8_lossy(&b).into_owned()
    });
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        if start.elapsed() > timeout {
            let stacks = stacks_of_tree(child.id());
            let _ = child.kill();
            let _ = child.wait();
            let stdout = out_t.join().unwrap_or_default();
            let stderr = err_t.join().unwrap_or_default();
            panic!(
                "job timed out after {timeout:?}: {job}\n--- stdout\n{stdout}\n--- stderr\n{stderr}\n--- stacks\n{stacks}"
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    JobOutput {
        status,
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
        elapsed: start.elapsed(),
    }
}

/// The threads' stacks of `root` and every process below it, as `gdb` prints them (the
/// frames only), so that a job that hangs in CI says where; a note instead where `gdb` is
/// missing or cannot attach. Each attach is bounded by `timeout 30`.
fn stacks_of_tree(root: u32) -> String {
    let mut tree = vec![root];
    let mut i = 0;
    while let Some(&pid) = tree.get(i) {
        tree.extend(children_of(pid));
        i += 1;
    }
    let mut text = String::new();
    for pid in tree {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        text.push_str(&format!("== pid {pid}: {}\n", cmdline.trim()));
        let out = Command::new("timeout")
            .args(["30", "gdb", "-batch", "-p", &pid.to_string()])
            .args(["-ex", "thread apply all bt"])
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(o) if o.status.success() => {
                for line in String::from_utf8_lossy(&o.stdout).lines() {
                    if line.starts_with('#') || line.starts_with("Thread ") {
                        text.push_str(line);
                        text.push('\n');
                    }
                }
            }
            Ok(o) => text.push_str(&format!("(gdb could not attach: {})\n", o.status)),
            Err(e) => text.push_str(&format!("(no gdb: {e})\n")),
        }
    }
    text
}

/// The pids whose parent is `pid` (from `/proc/PID/task/*/children`; empty if unreadable).
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
        .flat_map(|c| {
            c.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Two AM receive blocks of 128 KiB (`GASNET_AM_NUM_ENTRIES`, `GASNET_AM_BUFFER_SIZE`): small
/// enough that a flood fills them, so that the network's flow control refuses messages and
/// recovers, followed by `extra`.
pub fn small_receive_blocks(
    extra: &[(&'static str, &'static str)],
) -> Vec<(&'static str, &'static str)> {
    let mut env = vec![
        ("GASNET_AM_NUM_ENTRIES", "2"),
        ("GASNET_AM_BUFFER_SIZE", "131072"),
    ];
    env.extend_from_slice(extra);
    env
}

/// The communication paths a job of `ranks` ranks on this host can take, with the environment
/// that selects each: every rank in one shared-memory supernode; PSHM off (native Portals over
/// UDP); and, for 4 or more ranks, supernodes of two that talk over Portals (mixed).
pub fn paths(ranks: u32) -> Vec<(&'static str, &'static [(&'static str, &'static str)])> {
    let mut v: Vec<(&'static str, &'static [(&'static str, &'static str)])> =
        vec![("pshm", &[]), ("portals", &[("RGASNET_PSHM", "0")])];
    if ranks >= 4 {
        v.push(("mixed", &[("GASNET_SUPERNODE_MAXSIZE", "2")]));
    }
    v
}

/// Runs `program mode` on `ranks` ranks over every path of [`paths`], asserting that each job
/// succeeds and that every rank printed `ok_line`.
pub fn check_every_path(program: &Path, ranks: u32, mode: &str, ok_line: &str, timeout: Duration) {
    for (path, env) in paths(ranks) {
        let out = run_job(ranks, program, &[mode], env, timeout);
        assert!(
            out.status.success(),
            "{mode} over {path} failed: {:?}\n{}\n{}",
            out.status,
            out.stdout,
            out.stderr
        );
        out.assert_success();
        assert_eq!(
            out.stdout.matches(ok_line).count(),
            ranks as usize,
            "{mode} over {path}: every rank must report `{ok_line}`:\n{}\n{}",
            out.stdout,
            out.stderr
        );
    }
}

/// Checks the output of am_conformance's `send-left` mode: rank 0 had some requests accepted
/// before rank 1 left, then was refused; rank 1 handled exactly as many. Panics naming
/// `what` and showing the output otherwise.
pub fn assert_send_left_counts(what: &str, out: &JobOutput) {
    let count = |prefix: &str| {
        out.stdout.lines().find_map(|l| {
            l.strip_prefix(prefix)?
                .split_whitespace()
                .next()?
                .parse::<u64>()
                .ok()
        })
    };
    let accepted = count("rank 0: send-left ok: refused after ");
    let handled = count("rank 1: send-left: handled ");
    assert!(
        accepted.is_some() && accepted == handled && accepted > Some(0),
        "{what}: rank 0 had {accepted:?} requests accepted, rank 1 handled {handled:?}\n{}\n{}",
        out.stdout,
        out.stderr
    );
}

/// Prints `SKIPPED: test — why` and appends it to `$RGASNET_SKIP_LOG` when set (scripts/test.sh
/// lists that file's lines in its summary, since cargo captures test output).
pub fn skip(test: &str, why: &str) {
    let line = format!("SKIPPED: {test} — {why}");
    println!("{line}");
    if let Some(path) = std::env::var_os("RGASNET_SKIP_LOG") {
        use std::io::Write;
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = writeln!(f, "{line}");
        }
    }
}

/// The launcher's bootstrap test program (`rgasnet-bootstrap-check`), built for this run with
/// the PMI features this crate was built with (`pmix`, `pmi2`).
pub fn bootstrap_check() -> PathBuf {
    let mut features = Vec::new();
    if cfg!(feature = "pmix") {
        features.push("pmix");
    }
    if cfg!(feature = "pmi2") {
        features.push("pmi2");
    }
    let joined = features.join(",");
    let mut args = vec!["-p", "rgasnet-launcher", "--bin", "rgasnet-bootstrap-check"];
    if !features.is_empty() {
        args.extend(["--features", joined.as_str()]);
    }
    build_artifact("rgasnet-bootstrap-check", &args, true)
}

/// Runs one of the project's set-up scripts (`scripts/NAME ARGS…`) to its end with extra
/// environment: its standard output when it succeeds, `Err(why)` when it exits 3 (something
/// this machine lacks: the caller skips); panics on any other failure.
pub fn setup_script(
    name: &str,
    args: &[&std::ffi::OsStr],
    env: &[(&str, &std::ffi::OsStr)],
) -> Result<String, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts")
        .join(name);
    let out = Command::new(&script)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    match out.status.code() {
        Some(0) => Ok(String::from_utf8_lossy(&out.stdout).into_owned()),
        Some(3) => Err(stderr),
        _ => panic!("{} {args:?} failed: {stderr}", script.display()),
    }
}

/// Builds the command of a job from a program, its arguments and extra environment.
pub type JobCommand<'a> = &'a dyn Fn(&Path, &[&str], &[(&str, &str)]) -> Command;

/// The conformance programs of this crate (AM `basic`, extended `rma` and `barrier`) on
/// `ranks` ranks, with shared memory on and off (`RGASNET_PSHM=0`), each started by `job` and
/// bounded by `timeout`; asserts that every rank passed every one. For launchers other than
/// `rgasnetrun -n` (srun, mpirun, several hosts).
pub fn launch_conformance(what: &str, ranks: usize, job: JobCommand<'_>, timeout: Duration) {
    let dir = bin_dir();
    let (am, ext) = (dir.join("am_conformance"), dir.join("ext_conformance"));
    for env in [&[][..], &[("RGASNET_PSHM", "0")][..]] {
        for (prog, mode, ok) in [
            (&am, "basic", "basic ok".to_string()),
            (&ext, "rma", ": rma ok".to_string()),
            (&ext, "barrier", ": barrier ok".to_string()),
        ] {
            let out = run_command(job(prog, &[mode], env), timeout);
            out.assert_success();
            assert_eq!(
                out.stdout.matches(&ok).count(),
                ranks,
                "{what}, {ranks} ranks, {mode} {env:?}: every rank must print {ok:?}:\n{}\n{}",
                out.stdout,
                out.stderr
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_past_its_limit_is_killed_and_shows_its_processes() {
        // The job's own child, found through /proc, must be listed too.
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "echo started; sleep 3 & wait"]);
        let run =
            std::panic::AssertUnwindSafe(move || run_command(cmd, Duration::from_millis(500)));
        let got = std::panic::catch_unwind(run);
        let Err(panic) = got else {
            panic!("a job of 3 s finished within 0.5 s");
        };
        let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("job timed out after 500ms"), "{msg}");
        assert!(msg.contains("\"sh\" \"-c\""), "the job's command: {msg}");
        assert!(msg.contains("--- stdout\nstarted\n"), "its output: {msg}");
        assert!(msg.contains(": sleep 3\n"), "its child process: {msg}");
    }
}
