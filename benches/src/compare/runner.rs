//! Running one benchmark job as a child process, with a deadline: its output is collected
//! whole, and a job that overruns is stopped (SIGTERM, which `rgasnetrun` forwards to its
//! ranks, then SIGKILL) instead of hanging the comparison.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

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
        .stderr(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().map_err(|source| RunError::Spawn {
        program: job.program.clone(),
        source,
    })?;
    let out = child.stdout.take().map(reader);
    let err = child.stderr.take().map(reader);
    let wait_err = |source| RunError::Wait {
        program: job.program.clone(),
        source,
    };
    let mut timed_out = false;
    let status = loop {
        if let Some(st) = child.try_wait().map_err(wait_err)? {
            break st;
        }
        if start.elapsed() >= job.timeout {
            timed_out = true;
            stop(&mut child);
            break child.wait().map_err(wait_err)?;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
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

/// SIGTERM (the launcher stops its ranks on it), then SIGKILL after a grace period.
fn stop(child: &mut Child) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let pid = i32::try_from(child.id()).ok().map(Pid::from_raw);
    if let Some(pid) = pid {
        let _ = kill(pid, Signal::SIGTERM);
    }
    let grace = Instant::now() + Duration::from_secs(3);
    while Instant::now() < grace {
        if matches!(child.try_wait(), Ok(Some(_))) {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
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
