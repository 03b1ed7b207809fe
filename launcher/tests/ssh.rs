//! Multi-process tests of the ssh spawner against a real OpenSSH server that the test starts on
//! 127.0.0.1 with its own config, host key and client key in a temporary directory. Two
//! "hosts" (`127.0.0.1` and `localhost`) × 2 ranks.
// Test code: helpers outside #[test] functions panic on purpose to fail the test.
#![allow(clippy::unwrap_used)]

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;

const SSHD: &str = "/usr/sbin/sshd";
const LIMIT: Duration = Duration::from_secs(60);

/// A running test sshd; stopped (and its directory removed) on drop.
struct Sshd {
    dir: PathBuf,
    port: u16,
    child: std::process::Child,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn keygen(path: &Path) {
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-f"])
        .arg(path)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
}

/// Starts sshd, or returns None (after printing SKIPPED) when OpenSSH is not installed.
fn start_sshd(test: &str) -> Option<Sshd> {
    start_sshd_on(test, &|attempt| free_port_below_ephemeral(test, attempt))
}

/// [`start_sshd`] with the port of each attempt chosen by `port_of`.
fn start_sshd_on(test: &str, port_of: &dyn Fn(u32) -> u16) -> Option<Sshd> {
    let missing: Vec<&str> = [SSHD, "/usr/bin/ssh", "/usr/bin/ssh-keygen"]
        .into_iter()
        .filter(|p| !Path::new(p).exists())
        .collect();
    if !missing.is_empty() {
        skip(
            test,
            &format!(
                "{} not installed; fix: apt-get install -y openssh-server openssh-client",
                missing.join(", ")
            ),
        );
        return None;
    }
    let dir = std::env::temp_dir().join(format!("rgasnet-sshd-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::create_dir_all("/run/sshd").unwrap_or_default();
    keygen(&dir.join("host_key"));
    keygen(&dir.join("client_key"));
    std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).unwrap();
    // Another test's sshd, or a client's source port, may take the port between the check
    // and sshd's bind: sshd then exits, and a new port is tried.
    for attempt in 0..8 {
        let port = port_of(attempt);
        if let Some(child) = spawn_sshd(&dir, port) {
            return Some(Sshd { dir, port, child });
        }
    }
    panic!(
        "sshd found no free port in 8 tries: {}",
        std::fs::read_to_string(dir.join("sshd.log")).unwrap_or_default()
    );
}

/// A port that is free now, below the kernel's ephemeral range (32768 and up by default),
/// so that no outgoing connection of a parallel test is handed it meanwhile. Which one is
/// spread by the process, the test and the attempt, so that parallel tests rarely collide.
fn free_port_below_ephemeral(test: &str, attempt: u32) -> u16 {
    let seed = test.bytes().fold(
        u64::from(std::process::id()) ^ u64::from(attempt).wrapping_mul(0x9e37_79b9),
        |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)),
    );
    (0..2000u64)
        .map(|i| 20_000 + ((seed.wrapping_add(i * 7919)) % 12_000) as u16)
        .find(|&p| TcpListener::bind(("127.0.0.1", p)).is_ok())
        .unwrap()
}

/// Starts sshd on `port` and waits until its log says it listens there; None when it could
/// not bind the port (taken since it was checked). Panics, sshd killed, on any other failure.
///
/// Readiness is read from sshd's own log, not from a successful connect: a connect to a
/// port that nothing listens on can succeed by itself (the kernel picks the same port as the
/// source, a TCP self-connect) or reach another test's sshd.
fn spawn_sshd(dir: &Path, port: u16) -> Option<std::process::Child> {
    let log = dir.join("sshd.log");
    let _ = std::fs::remove_file(&log);
    let config = format!(
        "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nPidFile {d}/sshd.pid\n\
         AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin yes\nStrictModes no\nUsePAM no\n\
         PasswordAuthentication no\nKbdInteractiveAuthentication no\n",
        d = dir.display()
    );
    std::fs::write(dir.join("sshd_config"), config).unwrap();
    let mut child = Command::new(SSHD)
        .args(["-D", "-f"])
        .arg(dir.join("sshd_config"))
        .arg("-E")
        .arg(&log)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let listening = format!("Server listening on 127.0.0.1 port {port}.");
    let t0 = Instant::now();
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains(&listening) {
            return Some(child);
        }
        if child.try_wait().unwrap().is_some() {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            assert!(
                text.contains("Address already in use"),
                "sshd exited at start: {text}"
            );
            return None;
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("sshd did not start listening in 10 s: {text}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

impl Sshd {
    fn options(&self) -> String {
        format!(
            "-p {} -i {d}/client_key -o UserKnownHostsFile={d}/known_hosts -o StrictHostKeyChecking=no",
            self.port,
            d = self.dir.display()
        )
    }
    fn launcher(&self, args: &[&str]) -> Command {
        let mut c = launcher(&["--spawner", "ssh", "--hosts", "127.0.0.1,localhost"]);
        c.args(args).env("GASNET_SSH_OPTIONS", self.options());
        c
    }
}

#[test]
fn sshd_whose_port_is_taken_is_started_again_on_another() {
    let test = "sshd_whose_port_is_taken_is_started_again_on_another";
    // Whoever holds the first port listens on it, as a parallel test's sshd would.
    let holder = TcpListener::bind(("127.0.0.1", free_port_below_ephemeral(test, 99))).unwrap();
    let taken = holder.local_addr().unwrap().port();
    let tried = std::sync::Mutex::new(Vec::new());
    let Some(sshd) = start_sshd_on(test, &|attempt| {
        let port = if attempt == 0 {
            taken
        } else {
            free_port_below_ephemeral(test, attempt)
        };
        tried.lock().unwrap().push(port);
        port
    }) else {
        return;
    };
    let tried = tried.into_inner().unwrap();
    assert_eq!(
        tried.len(),
        2,
        "one refused start, then one on a free port: {tried:?}"
    );
    assert_eq!(tried[0], taken);
    assert_eq!(sshd.port, tried[1]);
    assert_ne!(sshd.port, taken);
    // The sshd that reported ready is the one that serves the job, not the port's holder.
    let prog = check_prog();
    let r = run(
        sshd.launcher(&["-n", "2", prog.to_str().unwrap(), "check"]),
        LIMIT,
    );
    assert_check_output(&r, 2, &|rank| vec![rank]);
    drop(holder);
}

#[test]
fn ssh_two_hosts_two_ranks_bootstrap_values() {
    let Some(sshd) = start_sshd("ssh_two_hosts_two_ranks_bootstrap_values") else {
        return;
    };
    let prog = check_prog();
    let r = run(
        sshd.launcher(&["-n", "4", prog.to_str().unwrap(), "check"]),
        LIMIT,
    );
    assert_check_output(&r, 4, &|rank| {
        if rank < 2 {
            vec![0, 1]
        } else {
            vec![2, 3]
        }
    });
}

#[test]
fn ssh_forwards_named_and_gasnet_variables() {
    let Some(sshd) = start_sshd("ssh_forwards_named_and_gasnet_variables") else {
        return;
    };
    let prog = check_prog();
    let mut c = sshd.launcher(&[
        "-n",
        "2",
        "-N",
        "2",
        "-E",
        "RGASNET_TEST_EXPORT_PLAIN",
        "--tag-output",
        prog.to_str().unwrap(),
        "env",
    ]);
    c.env("RGASNET_TEST_EXPORT_PLAIN", "it's here");
    let r = run(c, LIMIT);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    assert!(r.stdout.contains("[0] EXPORTED=it's here"), "{}", r.stdout);
    assert!(r.stdout.contains("[1] EXPORTED=it's here"), "{}", r.stdout);
    assert!(
        r.stdout.contains("[0] RGASNET_HOST=127.0.0.1"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("[1] RGASNET_HOST=localhost"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("[1] RGASNET_SPAWNER=ssh"), "{}", r.stdout);
}

#[test]
fn ssh_rank_exit_3_ends_job_with_3_under_2s() {
    let Some(sshd) = start_sshd("ssh_rank_exit_3_ends_job_with_3_under_2s") else {
        return;
    };
    let prog = check_prog();
    let r = run(
        sshd.launcher(&[
            "-n",
            "4",
            prog.to_str().unwrap(),
            "exit-in-barrier",
            "2",
            "3",
        ]),
        LIMIT,
    );
    assert_eq!(r.code, Some(3), "{}", r.stderr);
    // From where rgasnetrun's message starts: a remote login shell may print without a
    // final newline (pyenv's "cannot rehash" when two sessions start at once did), so the
    // message can follow other output on its line.
    let lines: Vec<&str> = r
        .stderr
        .lines()
        .filter_map(|l| l.find("rgasnetrun:").map(|i| &l[i..]))
        .collect();
    assert_eq!(lines.len(), 1, "{}", r.stderr);
    assert!(
        lines[0].starts_with("rgasnetrun: rank 2 (host localhost, pid ")
            && lines[0].contains("exited with code 3"),
        "{}",
        lines[0]
    );
    let ms = failure_to_exit_ms(&r);
    println!("ssh failure-to-exit: {ms} ms");
    assert!(ms < 2000, "took {ms} ms");
}

#[test]
fn ssh_sigterm_to_launcher_stops_remote_ranks() {
    let Some(sshd) = start_sshd("ssh_sigterm_to_launcher_stops_remote_ranks") else {
        return;
    };
    let prog = check_prog();
    let mut c = sshd.launcher(&["-n", "4", prog.to_str().unwrap(), "sleep"]);
    c.stdout(Stdio::piped()).stderr(Stdio::null());
    let mut child = c.spawn().unwrap();
    let out = child.stdout.take().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(out));
    let pids: Vec<i32> = (0..4)
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
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let t0 = Instant::now();
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
    assert_eq!(status.code(), Some(143));
    while pids.iter().any(|p| alive(*p)) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "remote ranks {pids:?} survived"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn ssh_refusals_are_one_line_errors_within_10s() {
    let Some(sshd) = start_sshd("ssh_refusals_are_one_line_errors_within_10s") else {
        return;
    };
    let prog = check_prog();
    let p = prog.to_str().unwrap();
    // Wrong port: connection refused.
    let mut c = launcher(&[
        "--spawner",
        "ssh",
        "--hosts",
        "127.0.0.1",
        "-n",
        "2",
        p,
        "check",
    ]);
    c.env(
        "GASNET_SSH_OPTIONS",
        format!("-p 1 -o UserKnownHostsFile={}/kh", sshd.dir.display()),
    );
    let r = run(c, Duration::from_secs(20));
    assert_eq!(r.code, Some(255), "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(
        r.stderr.contains("Connection refused") && r.stderr.contains("ssh to 127.0.0.1"),
        "{}",
        r.stderr
    );
    assert!(r.elapsed < Duration::from_secs(10));
    // No key: ssh refuses (BatchMode, no prompt).
    let mut c = launcher(&[
        "--spawner",
        "ssh",
        "--hosts",
        "127.0.0.1",
        "-n",
        "2",
        p,
        "check",
    ]);
    c.env("GASNET_SSH_OPTIONS", format!("-p {} -o IdentitiesOnly=yes -o IdentityFile=/nonexistent -o UserKnownHostsFile={}/kh -o StrictHostKeyChecking=no", sshd.port, sshd.dir.display()));
    let r = run(c, Duration::from_secs(20));
    assert_eq!(r.code, Some(255), "{}", r.stderr);
    assert_eq!(r.stderr.lines().count(), 1, "{}", r.stderr);
    assert!(r.stderr.contains("Permission denied"), "{}", r.stderr);
    assert!(r.elapsed < Duration::from_secs(10));
    // Program missing on the remote host.
    let r = run(
        sshd.launcher(&["-n", "2", "/no/such/prog"]),
        Duration::from_secs(20),
    );
    assert_eq!(r.code, Some(127), "{}", r.stderr);
    assert!(
        r.stderr.contains("/no/such/prog") && r.stderr.contains("does not exist"),
        "{}",
        r.stderr
    );
    assert!(r.elapsed < Duration::from_secs(10));
}

#[test]
fn ssh_dry_run_shows_ssh_commands() {
    let prog = check_prog();
    let mut c = launcher(&[
        "--spawner",
        "ssh",
        "--hosts",
        "127.0.0.1,localhost",
        "-n",
        "3",
        "--dry-run",
        prog.to_str().unwrap(),
        "check",
    ]);
    c.env("GASNET_SSH_OPTIONS", "-p 2222");
    if !Path::new("/usr/bin/ssh").exists() {
        skip(
            "ssh_dry_run_shows_ssh_commands",
            "ssh not installed; fix: apt-get install -y openssh-client",
        );
        return;
    }
    let r = run(c, LIMIT);
    assert_eq!(r.code, Some(0), "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines[0], "spawner: ssh, 3 rank(s) on 2 host(s)");
    assert!(
        lines[1].starts_with("host 127.0.0.1: ranks 0-1: ")
            && lines[1].contains("-o BatchMode=yes")
            && lines[1].contains("-p 2222 127.0.0.1 env"),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].contains("--first 0 --count 2 --size 3"),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].starts_with("host localhost: ranks 2: ")
            && lines[2].contains("--first 2 --count 1 --size 3"),
        "{}",
        lines[2]
    );
}
