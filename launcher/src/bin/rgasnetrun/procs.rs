//! Child processes: starting ranks through the exec shim, watching them exit, signalling them,
//! and forwarding their output line by line. Used by the local spawner and the ssh agent.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nix::sys::signal::{kill, killpg, Signal};
use nix::sys::wait::{waitid, waitpid, Id, WaitPidFlag, WaitStatus};
use nix::unistd::Pid;
use rgasnet_launcher::env;
use rgasnet_launcher::proto::RankEnd;

/// Where forwarded lines go.
#[derive(Clone, Copy)]
pub(crate) enum Sink {
    Stdout,
    Stderr,
}

/// Lines held back until released (ssh's own messages before the agent is up), so that a
/// failure can be reported in one line that quotes them.
#[derive(Default)]
pub(crate) struct Hold {
    released: bool,
    /// The stream reached its end (every line the process wrote is in `lines`).
    closed: bool,
    lines: Vec<String>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Hold {
    /// Prints what was held and lets later lines through.
    pub(crate) fn release(hold: &Mutex<Hold>, sink: Sink) {
        let mut h = lock(hold);
        h.released = true;
        for l in h.lines.drain(..) {
            write_line(sink, l.as_bytes());
        }
    }
    /// The held lines, joined (for an error message). The process has exited when this is
    /// asked, but the thread forwarding its output may still be reading the last lines: wait
    /// (briefly, bounded) for the end of the stream so that the message quotes them.
    pub(crate) fn text(hold: &Mutex<Hold>) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        loop {
            let h = lock(hold);
            if h.closed || std::time::Instant::now() >= deadline {
                return h.lines.join(" / ");
            }
            drop(h);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }
}

fn write_line(sink: Sink, line: &[u8]) {
    // One write per line under the stream's lock: lines of different ranks never interleave.
    let _ = match sink {
        Sink::Stdout => std::io::stdout().lock().write_all(line),
        Sink::Stderr => std::io::stderr().lock().write_all(line),
    };
}

/// Tracks forwarding threads so the launcher can wait for the last lines before exiting.
pub(crate) struct Outputs {
    tx: Sender<()>,
    rx: Receiver<()>,
    running: usize,
}

impl Outputs {
    pub(crate) fn new() -> Outputs {
        let (tx, rx) = mpsc::channel();
        Outputs { tx, rx, running: 0 }
    }

    /// Forwards `reader` line by line to `sink`, each line prefixed with `prefix`.
    pub(crate) fn forward(
        &mut self,
        reader: impl Read + Send + 'static,
        sink: Sink,
        prefix: Option<String>,
        hold: Option<Arc<Mutex<Hold>>>,
    ) {
        let done = self.tx.clone();
        let spawned = thread::Builder::new().name("output".into()).spawn(move || {
            let mut r = BufReader::new(reader);
            let mut buf = Vec::with_capacity(256);
            loop {
                buf.clear();
                if let Some(p) = &prefix {
                    buf.extend_from_slice(p.as_bytes());
                }
                let start = buf.len();
                match r.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if buf.last() != Some(&b'\n') {
                    buf.push(b'\n');
                }
                if let Some(h) = &hold {
                    let mut h = lock(h);
                    if !h.released {
                        let text = String::from_utf8_lossy(&buf[start..])
                            .trim_end()
                            .to_string();
                        h.lines.push(text);
                        continue;
                    }
                }
                write_line(sink, &buf);
            }
            if let Some(h) = &hold {
                lock(h).closed = true;
            }
            let _ = done.send(());
        });
        if spawned.is_ok() {
            self.running += 1;
        }
    }

    /// Waits for the forwarding threads to see end of file, at most until `deadline` (a rank's
    /// orphaned grandchild could hold a pipe open forever).
    pub(crate) fn drain(&mut self, deadline: Instant) {
        while self.running > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            if self.rx.recv_timeout(left).is_err() {
                return;
            }
            self.running -= 1;
        }
    }
}

/// A rank process as the waiter saw it end.
pub(crate) fn end_of(status: WaitStatus) -> Option<RankEnd> {
    match status {
        WaitStatus::Exited(_, code) => Some(RankEnd::Code(code)),
        WaitStatus::Signaled(_, sig, _) => Some(RankEnd::Signal(sig as i32)),
        _ => None,
    }
}

/// The children of this process that are ranks (or ssh sessions), by pid.
#[derive(Clone, Default)]
pub(crate) struct Children {
    /// pid → still running. A child is marked finished before it is reaped, so that a kill
    /// can never hit a recycled pid.
    live: Arc<Mutex<HashMap<i32, bool>>>,
}

impl Children {
    /// Starts `program args` through the exec shim (which sets the parent-death signal), in its
    /// own process group, with `env` added, stdin closed and stdout/stderr forwarded with
    /// `prefix`. `on_exit` runs on a waiter thread when the process ends. Must be called on a
    /// thread that outlives the child (the parent-death signal follows the spawning thread).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn spawn(
        &self,
        program: &Path,
        args: &[OsString],
        envs: &[(String, String)],
        prefix: Option<String>,
        outputs: &mut Outputs,
        hold: Option<Arc<Mutex<Hold>>>,
        stdin: Stdio,
        on_exit: impl FnOnce(u32, RankEnd) + Send + 'static,
    ) -> Result<(u32, Option<std::process::ChildStdin>)> {
        let shim = std::env::current_exe()
            .context("cannot find the rgasnetrun executable for the exec shim")?;
        let mut cmd = Command::new(shim);
        cmd.arg(crate::SHIM_ARG)
            .arg(program)
            .args(args)
            .envs(envs.iter().map(|(k, v)| (k, v)))
            .env(env::SHIM_PARENT, std::process::id().to_string())
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start {}", program.display()))?;
        let pid = child.id();
        let ipid = pid as i32;
        lock(&self.live).insert(ipid, true);
        if let Some(out) = child.stdout.take() {
            outputs.forward(out, Sink::Stdout, prefix.clone(), None);
        }
        if let Some(err) = child.stderr.take() {
            outputs.forward(err, Sink::Stderr, prefix, hold);
        }
        let stdin = child.stdin.take();
        // `Child` is dropped without waiting: the waiter below owns the reaping.
        drop(child);
        let live = Arc::clone(&self.live);
        let waiter = move || {
            let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
            let end = loop {
                match waitid(Id::Pid(Pid::from_raw(ipid)), flags) {
                    Ok(st) => match end_of(st) {
                        Some(e) => break e,
                        None => continue,
                    },
                    Err(nix::errno::Errno::EINTR) => continue,
                    Err(_) => break RankEnd::Code(-1),
                }
            };
            // Mark first, reap second: `signal_all` checks the mark under the same lock.
            lock(&live).insert(ipid, false);
            let _ = waitpid(Pid::from_raw(ipid), None);
            on_exit(pid, end);
        };
        thread::Builder::new()
            .name(format!("wait-{pid}"))
            .spawn(waiter)
            .context("cannot start a waiter thread")?;
        Ok((pid, stdin))
    }

    /// Sends `sig` to every child that has not ended (its whole process group).
    pub(crate) fn signal_all(&self, sig: Signal) {
        let live = lock(&self.live);
        for (&pid, &running) in live.iter() {
            if running && killpg(Pid::from_raw(pid), sig).is_err() {
                let _ = kill(Pid::from_raw(pid), sig);
            }
        }
    }

    /// Number of children still running.
    pub(crate) fn running(&self) -> usize {
        lock(&self.live).values().filter(|r| **r).count()
    }
}

/// The exec shim: runs in the child, makes it die with its parent, then becomes the program.
/// `std`'s `exec` resets the signal mask and SIGPIPE, so the program starts clean.
pub(crate) fn exec_shim(args: &[OsString]) -> i32 {
    let Some((program, rest)) = args.split_first() else {
        eprintln!("rgasnetrun: internal exec shim called without a program");
        return 127;
    };
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
    // The parent may have died before the death signal was armed: then nobody supervises us.
    let expected = std::env::var(env::SHIM_PARENT)
        .ok()
        .and_then(|p| p.parse::<i32>().ok());
    if let Some(p) = expected {
        if nix::unistd::getppid().as_raw() != p {
            return 137;
        }
    }
    // The launcher blocks the signals it waits for (SIGINT, SIGTERM, SIGHUP), and a mask
    // survives exec: without this, a rank could not be stopped politely, and a program that
    // raises SIGINT (GASNet's testexit 4) would hang instead of dying.
    let _ = nix::sys::signal::sigprocmask(
        nix::sys::signal::SigmaskHow::SIG_SETMASK,
        Some(&nix::sys::signal::SigSet::empty()),
        None,
    );
    let err = Command::new(program)
        .args(rest)
        .env_remove(env::SHIM_PARENT)
        .exec();
    eprintln!(
        "rgasnetrun: cannot execute {}: {err}",
        Path::new(program).display()
    );
    if err.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    }
}

/// Describes how a rank ended, for the one-line failure message.
pub(crate) fn describe_end(end: RankEnd) -> String {
    match end {
        RankEnd::Code(c) => format!("exited with code {c}"),
        RankEnd::Signal(s) => match Signal::try_from(s) {
            Ok(sig) => format!("was killed by signal {s} ({})", sig.as_str()),
            Err(_) => format!("was killed by signal {s}"),
        },
    }
}

/// The launcher's exit code for a rank's end (128 + signal, as shells do).
pub(crate) fn exit_code_of(end: RankEnd) -> i32 {
    match end {
        RankEnd::Code(c) => c,
        RankEnd::Signal(s) => 128 + s,
    }
}

/// How long ranks get between SIGTERM and SIGKILL (`RGASNET_KILL_GRACE` seconds, default 1).
pub(crate) fn kill_grace() -> Result<Duration> {
    match std::env::var(env::KILL_GRACE) {
        Err(_) => Ok(Duration::from_secs(1)),
        Ok(v) => v
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| s.is_finite() && *s >= 0.0 && *s <= 600.0)
            .map(Duration::from_secs_f64)
            .with_context(|| {
                format!(
                    "{}={v:?} is not a number of seconds between 0 and 600",
                    env::KILL_GRACE
                )
            }),
    }
}
