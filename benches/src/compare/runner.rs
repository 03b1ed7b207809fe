//! Running one benchmark job as a child process, with a deadline: its output is collected
//! whole, and a job that overruns is stopped (SIGTERM to its process group, which
//! `rgasnetrun` forwards to its ranks, then SIGKILL) instead of hanging the comparison. A
//! comparison stopped by a signal stops its running job the same way
//! ([`forward_termination`]), so that no benchmark outlives it and loads the machine.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, SigSet, Signal};
use nix::unistd::Pid;

/// How long a job has between SIGTERM and SIGKILL.
const GRACE: Duration = Duration::from_secs(3);

/// The job this process runs now, shared with the thread that [`forward_termination`]
/// starts. One lock covers spawning a job and recording its group, so a signal that arrives
/// while a job starts waits for its group instead of missing it; and once a signal has come,
/// no job starts.
struct JobSlot {
    state: Mutex<SlotState>,
}

#[derive(Debug)]
struct SlotState {
    /// The running job's process group (its leader's pid); 0 when none runs.
    group: i32,
    /// A terminating signal came: no job may start any more.
    stopping: bool,
}

impl JobSlot {
    const fn new() -> Self {
        JobSlot {
            state: Mutex::new(SlotState {
                group: 0,
                stopping: false,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SlotState> {
        // The state is two plain fields, valid whatever a panicking holder did.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Spawns `cmd` (which starts a process group of its own) and records its group, unless
    /// a signal is stopping this process.
    fn spawn(&self, cmd: &mut Command, program: &Path) -> Result<Child, RunError> {
        let mut state = self.lock();
        if state.stopping {
            return Err(RunError::Stopping {
                program: program.to_path_buf(),
            });
        }
        let child = cmd.spawn().map_err(|source| RunError::Spawn {
            program: program.to_path_buf(),
            source,
        })?;
        state.group = i32::try_from(child.id()).unwrap_or(0);
        Ok(child)
    }

    /// The job was reaped: its group id is free and must not be signalled.
    fn clear(&self) {
        self.lock().group = 0;
    }

    /// A signal came: no job starts from now on; the running job's group, if one runs.
    fn begin_stop(&self) -> Option<i32> {
        let mut state = self.lock();
        state.stopping = true;
        (state.group > 0).then_some(state.group)
    }

    /// Whether `group` still runs (it is cleared once reaped).
    fn runs(&self, group: i32) -> bool {
        self.lock().group == group
    }
}

/// The job this process runs now.
static RUNNING: JobSlot = JobSlot::new();

/// Makes SIGINT, SIGTERM and SIGHUP to this process stop the job running now (SIGTERM to
/// its process group, SIGKILL after [`GRACE`]), then end this process with status 128 + the
/// signal's number, as the signal would have. Call it once, before this process starts any
/// thread: the signals are blocked in the calling thread, which every later thread
/// inherits, and one thread of its own waits for them. Jobs start with no signal blocked
/// (the standard library resets the mask of a child).
pub fn forward_termination() -> Result<(), nix::Error> {
    let mut set = SigSet::empty();
    for sig in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(sig);
    }
    set.thread_block()?;
    std::thread::spawn(move || {
        let Ok(sig) = set.wait() else {
            return;
        };
        if let Some(group) = RUNNING.begin_stop() {
            eprintln!("{sig}: stopping the running job (process group {group})");
            let _ = killpg(Pid::from_raw(group), Signal::SIGTERM);
            let deadline = Instant::now() + GRACE;
            while RUNNING.runs(group) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
        }
        std::process::exit(128 + sig as i32);
    });
    Ok(())
}

/// A job to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Job {
    /// The program (`rgasnetrun`, or a GASNet test program that spawns itself).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment variables added to this process's environment.
    pub env: Vec<(String, String)>,
    /// Longest the job may run.
    pub timeout: Duration,
}

impl Job {
    /// The command line as a shell would show it (for logs and reports).
    pub fn display(&self) -> String {
        let mut s = String::new();
        for (k, v) in &self.env {
            s.push_str(&format!("{k}={v} "));
        }
        s.push_str(&self.program.display().to_string());
        for a in &self.args {
            s.push(' ');
            s.push_str(a);
        }
        s
    }
}

/// What a job printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobOutput {
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Exit code (`None` when killed by a signal).
    pub code: Option<i32>,
    /// Wall time.
    pub elapsed: Duration,
    /// Whether the deadline stopped it.
    pub timed_out: bool,
}

impl JobOutput {
    /// Exited 0 in time.
    pub fn success(&self) -> bool {
        self.code == Some(0) && !self.timed_out
    }
}

/// A job that could not be started or waited for.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RunError {
    /// The program could not be started.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A terminating signal is stopping this process, so no job starts.
    #[error("not starting {program}: a signal is stopping this comparison")]
    Stopping {
        /// The program.
        program: PathBuf,
    },
    /// Waiting for it failed.
    #[error("waiting for {program}: {source}")]
    Wait {
        /// The program.
        program: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

fn reader(mut r: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        // A read error ends the capture; what was read so far is kept.
        let _ = r.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Runs `job` to completion or to its deadline.
pub fn run(job: &Job) -> Result<JobOutput, RunError> {
    let mut cmd = Command::new(&job.program);
    cmd.args(&job.args)
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A group of its own, so that stopping it reaches whatever it started (GASNet's udp
        // and smp programs fork their ranks themselves).
        .process_group(0);
    let start = Instant::now();
    let mut child = RUNNING.spawn(&mut cmd, &job.program)?;
    let out = child.stdout.take().map(reader);
    let err = child.stderr.take().map(reader);
    let status = wait_or_stop(&mut child, job.timeout, start);
    RUNNING.clear();
    let (status, timed_out) = status.map_err(|source| RunError::Wait {
        program: job.program.clone(),
        source,
    })?;
    let elapsed = start.elapsed();
    let stdout = out.and_then(|h| h.join().ok()).unwrap_or_default();
    let stderr = err.and_then(|h| h.join().ok()).unwrap_or_default();
    Ok(JobOutput {
        stdout,
        stderr,
        code: status.code(),
        elapsed,
        timed_out,
    })
}

/// Waits for `child` until `timeout` after `start`, then stops it; whether it was stopped.
fn wait_or_stop(
    child: &mut Child,
    timeout: Duration,
    start: Instant,
) -> std::io::Result<(std::process::ExitStatus, bool)> {
    loop {
        if let Some(st) = child.try_wait()? {
            return Ok((st, false));
        }
        if start.elapsed() >= timeout {
            stop(child);
            return Ok((child.wait()?, true));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGTERM to the job's process group (the launcher stops its ranks on it), then SIGKILL
/// to the group after [`GRACE`] if the job has not ended.
fn stop(child: &mut Child) {
    let Ok(group) = i32::try_from(child.id()).map(Pid::from_raw) else {
        let _ = child.kill();
        return;
    };
    let _ = killpg(group, Signal::SIGTERM);
    let deadline = Instant::now() + GRACE;
    while Instant::now() < deadline {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = killpg(group, Signal::SIGKILL);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout: Duration) -> Job {
        Job {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), script.into()],
            env: vec![("RGB_TEST_VAR".into(), "x y".into())],
            timeout,
        }
    }

    #[test]
    fn collects_output_and_status() {
        let o = run(&sh(
            "echo out $RGB_TEST_VAR; echo err >&2; exit 3",
            Duration::from_secs(20),
        ))
        .unwrap();
        assert_eq!(o.stdout, "out x y\n");
        assert_eq!(o.stderr, "err\n");
        assert_eq!(o.code, Some(3));
        assert!(!o.timed_out && !o.success());
    }

    #[test]
    fn deadline_stops_the_job() {
        let o = run(&sh(
            "echo started; exec sleep 30",
            Duration::from_millis(200),
        ))
        .unwrap();
        assert!(o.timed_out);
        assert_eq!(o.stdout, "started\n");
        assert_eq!(o.code, None, "killed by a signal");
    }

    #[test]
    fn a_signal_waits_for_the_group_of_a_job_being_spawned_and_stops_later_jobs() {
        let slot = JobSlot::new();
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", "exec sleep 30"]).process_group(0);
        let mut child = slot.spawn(&mut cmd, Path::new("/bin/sh")).unwrap();
        let group = child.id() as i32;
        // The signal thread sees the group recorded with the spawn, never a window without it.
        assert_eq!(slot.begin_stop(), Some(group));
        assert!(slot.runs(group));
        let _ = killpg(Pid::from_raw(group), Signal::SIGKILL);
        child.wait().unwrap();
        slot.clear();
        assert!(!slot.runs(group));
        assert_eq!(slot.begin_stop(), None);
        // After the signal, the next job is refused, not started and orphaned.
        let mut next = Command::new("/bin/true");
        assert!(matches!(
            slot.spawn(&mut next, Path::new("/bin/true")),
            Err(RunError::Stopping { .. })
        ));
    }

    #[test]
    fn missing_program_is_a_typed_error() {
        let j = Job {
            program: "/nonexistent/rgasnetrun".into(),
            args: vec![],
            env: vec![],
            timeout: Duration::from_secs(1),
        };
        assert!(matches!(run(&j), Err(RunError::Spawn { .. })));
        assert_eq!(
            sh("true", Duration::from_secs(1)).display(),
            "RGB_TEST_VAR=x y /bin/sh -c true"
        );
    }
}
