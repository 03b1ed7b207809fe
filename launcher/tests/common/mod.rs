//! Helpers of the multi-process tests: paths of the binaries, running a command with a hard
//! timeout (the whole process group is killed and the test fails if it is exceeded).
#![allow(dead_code, unreachable_pub)]

mod proc_state;
// Not every test program that includes `common` calls it (`dead_code` does not cover imports).
#[allow(unused_imports)]
pub use proc_state::alive;

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The launcher under test.
pub fn rgasnetrun() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rgasnetrun"))
}

/// The bootstrap test program (`src/bin/bootstrap_check.rs`).
pub fn check_prog() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rgasnet-bootstrap-check"))
}

/// What a finished command did.
pub struct Run {
    pub status: ExitStatus,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub ended_at_ms: u128,
}

pub fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// Runs `cmd` in its own process group; kills the group and panics after `limit`.
pub fn run(mut cmd: Command, limit: Duration) -> Run {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd.spawn().expect("spawn");
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let t_err = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > limit {
            let pgid = nix::unistd::Pid::from_raw(child.id() as i32);
            let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let ended_at_ms = now_ms();
    let elapsed = start.elapsed();
    Run {
        code: status.code(),
        status,
        stdout: t_out.join().unwrap(),
        stderr: t_err.join().unwrap(),
        elapsed,
        ended_at_ms,
    }
}

/// `rgasnetrun ARGS...` with a clean GASNET_* environment.
pub fn launcher(args: &[&str]) -> Command {
    let mut c = Command::new(rgasnetrun());
    for (k, _) in std::env::vars() {
        if k.starts_with("GASNET_") || k.starts_with("RGASNET_") || k == "MPIRUN_CMD" {
            c.env_remove(k);
        }
    }
    c.args(args);
    c
}

/// Asserts the `check` mode output: one `ok` line per rank with the expected host ranks and
/// one job key shared by all.
pub fn assert_check_output(r: &Run, n: u32, host_ranks: &dyn Fn(u32) -> Vec<u32>) {
    assert_eq!(
        r.code,
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        r.stdout,
        r.stderr
    );
    let mut keys = Vec::new();
    for rank in 0..n {
        let prefix = format!("rank {rank}/{n} ok host_ranks={:?} key=", host_ranks(rank));
        let line = r
            .stdout
            .lines()
            .find(|l| l.starts_with(&prefix))
            .unwrap_or_else(|| panic!("no line {prefix:?} in:\n{}\n{}", r.stdout, r.stderr));
        let key = &line[prefix.len()..];
        assert_eq!(key.len(), 16, "{line}");
        keys.push(key.to_string());
    }
    keys.dedup();
    assert_eq!(keys.len(), 1, "ranks saw different job keys: {keys:?}");
    assert_eq!(r.stdout.lines().count(), n as usize, "{}", r.stdout);
}

/// Time from a rank's recorded exit (`EXITING_AT_MS=` line) to the launcher's exit.
pub fn failure_to_exit_ms(r: &Run) -> u128 {
    let at: u128 = r
        .stdout
        .lines()
        .find_map(|l| l.split("EXITING_AT_MS=").nth(1))
        .unwrap_or_else(|| panic!("no EXITING_AT_MS line:\n{}", r.stdout))
        .trim()
        .parse()
        .unwrap();
    r.ended_at_ms.saturating_sub(at)
}

/// Prints the skip line, and appends it to `$RGASNET_SKIP_LOG` when set (scripts/test.sh
/// collects that file into its summary, since cargo captures test output).
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
