//! Supervising a running job: one event loop that learns of rank exits, aborts, signals and
//! ssh sessions ending, decides the job's fate, stops the rest (SIGTERM, then SIGKILL after a
//! grace period) and yields the launcher's exit code.

use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, Signal};
use rgasnet_launcher::coord::Report;
use rgasnet_launcher::proto::RankEnd;

use crate::procs::{describe_end, exit_code_of};

/// How long the rank reports of a cleanly ended ssh session may lag behind its exit.
const SSH_REPORT_GRACE: Duration = Duration::from_secs(2);
/// How long an unclean ssh end waits for the agent's own account of what went wrong.
const SSH_REASON_GRACE: Duration = Duration::from_millis(500);

/// Everything the supervisor reacts to.
pub(crate) enum Event {
    /// A rank process ended.
    Exited { rank: u32, pid: u32, end: RankEnd },
    /// A remote rank was started (ssh).
    Started { rank: u32, pid: u32 },
    /// A rank could not be started on a remote host.
    SpawnFailed { rank: u32, reason: String },
    /// The bootstrap server reports something.
    Server(Report),
    /// The launcher received a terminating signal.
    Signal(Signal),
    /// The ssh session of a host ended; `detail` holds ssh's own messages if any.
    SshEnded {
        host: usize,
        end: RankEnd,
        detail: String,
    },
    /// Not every agent connected in time.
    StartupTimeout { missing: Vec<usize> },
}

/// How the job's processes are stopped.
pub(crate) trait Fleet {
    /// Polite stop (SIGTERM to ranks, or `Kill` to agents).
    fn terminate(&mut self);
    /// Forceful stop (SIGKILL).
    fn kill(&mut self);
    /// True when no process of ours is left running.
    fn all_gone(&self) -> bool;
}

/// Blocks the terminating signals in the calling thread (and threads started later) and turns
/// them into events. Call first thing in `main`; children get a clean mask from `std`.
pub(crate) fn catch_signals(tx: Sender<Event>) {
    let mut set = SigSet::empty();
    for s in [Signal::SIGINT, Signal::SIGTERM, Signal::SIGHUP] {
        set.add(s);
    }
    if set.thread_block().is_err() {
        return;
    }
    let _ = thread::Builder::new()
        .name("signals".into())
        .spawn(move || loop {
            match set.wait() {
                Ok(sig) => {
                    if tx.send(Event::Signal(sig)).is_err() {
                        return;
                    }
                }
                Err(_) => return,
            }
        });
}

pub(crate) fn trace(verbose: bool, msg: impl FnOnce() -> String) {
    if verbose {
        eprintln!("rgasnetrun: {}", msg());
    }
}

/// What carries the agents of a multi-host job, for the messages about its end.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sessions {
    /// One `ssh` per host (also the default of single-process spawners, which send no
    /// session events).
    Ssh,
    /// One `srun` step for every host.
    Srun,
}

/// The supervisor's view of the ranks.
pub(crate) struct Supervisor {
    pub(crate) rx: Receiver<Event>,
    pub(crate) host_names: Vec<String>,
    pub(crate) rank_host: Vec<usize>,
    pub(crate) pids: Vec<Option<u32>>,
    pub(crate) grace: Duration,
    pub(crate) verbose: bool,
    /// Names the single supervised process when it is not a rank (`mpirun`).
    pub(crate) label: Option<&'static str>,
    /// What [`Event::SshEnded`] reports the end of.
    pub(crate) sessions: Sessions,
}

impl Supervisor {
    fn where_(&self, rank: u32) -> String {
        if let Some(l) = self.label {
            let pid = self.pids.first().copied().flatten().unwrap_or(0);
            return format!("{l} (pid {pid})");
        }
        let host = self
            .rank_host
            .get(rank as usize)
            .and_then(|h| self.host_names.get(*h))
            .map_or("?", String::as_str);
        match self.pids.get(rank as usize).copied().flatten() {
            Some(pid) => format!("rank {rank} (host {host}, pid {pid})"),
            None => format!("rank {rank} (host {host})"),
        }
    }

    /// Runs until every rank has ended; returns the launcher's exit code.
    pub(crate) fn run(mut self, fleet: &mut dyn Fleet) -> i32 {
        let n = self.rank_host.len();
        let mut exited = vec![false; n];
        let mut left = n;
        let mut code: Option<i32> = None;
        let mut kill_at: Option<Instant> = None;
        let mut give_up_at: Option<Instant> = None;
        // Ranks whose bootstrap connection closed before their exit was seen. When a rank fails
        // because a peer left a collective, the peer is the cause: its exit may reach us a
        // moment later than the failure it caused, so blame waits for it (bounded).
        let mut left_seq: Vec<Option<u64>> = vec![None; n];
        let mut next_seq = 0u64;
        let mut candidate: Option<(String, i32, u64)> = None;
        let mut decide_at: Option<Instant> = None;
        // ssh sessions that ended cleanly while some of their ranks' exits were not reported
        // yet: the agent's reports travel on another connection and may arrive a moment after
        // ssh's own exit, so the verdict waits for them (bounded).
        let mut ssh_pending: Vec<(usize, Instant, RankEnd, String)> = Vec::new();
        loop {
            if left == 0 && fleet.all_gone() {
                break;
            }
            let ssh_deadline = ssh_pending.iter().map(|p| p.1).min();
            let deadline = [give_up_at, kill_at, decide_at, ssh_deadline]
                .into_iter()
                .flatten()
                .min();
            let ev = match deadline {
                None => self.rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
                Some(d) => self
                    .rx
                    .recv_timeout(d.saturating_duration_since(Instant::now())),
            };
            let ev = match ev {
                Ok(ev) => ev,
                Err(RecvTimeoutError::Timeout) => {
                    let now = Instant::now();
                    if let Some(i) = ssh_pending.iter().position(|p| p.1 <= now) {
                        let (host, _, end, detail) = ssh_pending.remove(i);
                        let lost = self.mark_lost(host, &mut exited, &mut left);
                        if let (Some((msg, c)), None) =
                            (self.ssh_failure(host, end, &detail, &lost), code)
                        {
                            eprintln!("rgasnetrun: {msg}");
                            code = Some(c);
                            fleet.terminate();
                            kill_at = Some(Instant::now() + self.grace);
                        }
                        continue;
                    }
                    if decide_at.is_some_and(|d| d <= now) {
                        decide_at = None;
                        if let (Some((msg, c, _)), None) = (candidate.take(), code) {
                            eprintln!("rgasnetrun: {msg}");
                            code = Some(c);
                            fleet.terminate();
                            kill_at = Some(Instant::now() + self.grace);
                        }
                        continue;
                    }
                    if give_up_at.is_some_and(|d| d <= now) {
                        eprintln!(
                            "rgasnetrun: some processes did not end after SIGKILL; exiting anyway"
                        );
                        break;
                    }
                    if kill_at.is_some_and(|d| d <= now) {
                        trace(self.verbose, || "grace period over, sending SIGKILL".into());
                        fleet.kill();
                        kill_at = None;
                        give_up_at = Some(now + Duration::from_secs(5));
                    }
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            };
            let mut failure: Option<(String, i32)> = None;
            match ev {
                Event::Exited { rank, pid, end } => {
                    if let Some(p) = self.pids.get_mut(rank as usize) {
                        *p = Some(pid);
                    }
                    if let Some(e) = exited.get_mut(rank as usize) {
                        if !*e {
                            *e = true;
                            left -= 1;
                        }
                    }
                    trace(self.verbose, || {
                        format!("{} {}", self.where_(rank), describe_end(end))
                    });
                    let key = left_seq[rank as usize].unwrap_or(u64::MAX);
                    let this = (end != RankEnd::Code(0)).then(|| {
                        (
                            format!(
                                "{} {}; stopping the job",
                                self.where_(rank),
                                describe_end(end)
                            ),
                            exit_code_of(end),
                            key,
                        )
                    });
                    // The best culprit so far: the failing rank that left the bootstrap first.
                    let best = match (candidate.take(), this) {
                        (Some(c), Some(t)) => Some(if t.2 < c.2 { t } else { c }),
                        (c, t) => c.or(t),
                    };
                    if let Some(b) = best {
                        let earlier_pending =
                            (0..n).any(|r| !exited[r] && left_seq[r].is_some_and(|s| s < b.2));
                        if earlier_pending && code.is_none() {
                            decide_at.get_or_insert(Instant::now() + Duration::from_millis(500));
                            candidate = Some(b);
                        } else {
                            decide_at = None;
                            failure = Some((b.0, b.1));
                        }
                    }
                }
                Event::Started { rank, pid } => {
                    if let Some(p) = self.pids.get_mut(rank as usize) {
                        *p = Some(pid);
                    }
                    trace(self.verbose, || format!("started {}", self.where_(rank)));
                }
                Event::SpawnFailed { rank, reason } => {
                    failure = Some((format!("cannot start {}: {reason}", self.where_(rank)), 127));
                }
                Event::Server(Report::Abort { rank, code: 0 }) => {
                    // A rank that ends the whole job with 0 (GASNet's `gasnet_exit(0)`, how
                    // every GASNet program ends) is a normal end, not a failure to report.
                    trace(self.verbose, || {
                        format!("{} ended the job with code 0", self.where_(rank))
                    });
                    if code.is_none() {
                        code = Some(0);
                        fleet.terminate();
                        kill_at = Some(Instant::now() + self.grace);
                    }
                }
                Event::Server(Report::Abort { rank, code: c }) => {
                    failure = Some((
                        format!("{} called abort({c}); stopping the job", self.where_(rank)),
                        c,
                    ));
                }
                Event::Server(r) => {
                    if let Report::RankLeft { rank } = r {
                        if let Some(l) = left_seq.get_mut(rank as usize) {
                            *l = Some(next_seq);
                            next_seq += 1;
                        }
                    }
                    self.trace_report(&r)
                }
                Event::Signal(sig) => {
                    if code.is_some() {
                        fleet.kill();
                    }
                    failure = Some((
                        format!("received {}; stopping every rank", sig.as_str()),
                        128 + sig as i32,
                    ));
                }
                Event::SshEnded { host, end, detail } => {
                    let name = self.host_names.get(host).cloned().unwrap_or_default();
                    trace(self.verbose, || {
                        format!("{} {}", self.session_name(&name), describe_end(end))
                    });
                    let unreported = self
                        .rank_host
                        .iter()
                        .enumerate()
                        .any(|(r, h)| *h == host && !exited[r]);
                    if unreported {
                        // A clean end means the agent is reporting its ranks' exits; an
                        // unclean one may still be followed by the agent's own reason (a rank
                        // that could not start), which says more than ssh's exit code.
                        let grace = if end == RankEnd::Code(0) {
                            SSH_REPORT_GRACE
                        } else {
                            SSH_REASON_GRACE
                        };
                        ssh_pending.push((host, Instant::now() + grace, end, detail));
                    } else {
                        let lost = self.mark_lost(host, &mut exited, &mut left);
                        failure = self.ssh_failure(host, end, &detail, &lost);
                    }
                }
                Event::StartupTimeout { missing } => {
                    let names: Vec<&str> = missing
                        .iter()
                        .filter_map(|h| self.host_names.get(*h).map(String::as_str))
                        .collect();
                    failure = Some((
                        format!(
                            "the agent on {} did not connect back to the launcher in time; check \
                             that the hosts can reach this machine (RGASNET_BOOTSTRAP_HOST)",
                            names.join(", ")
                        ),
                        1,
                    ));
                }
            }
            if let (Some((msg, c)), None) = (failure, code) {
                eprintln!("rgasnetrun: {msg}");
                code = Some(c);
                fleet.terminate();
                kill_at = Some(Instant::now() + self.grace);
            }
        }
        code.unwrap_or(0)
    }

    /// Marks every rank of `host` not yet seen exiting as gone; returns them.
    fn mark_lost(&self, host: usize, exited: &mut [bool], left: &mut usize) -> Vec<usize> {
        let mut lost = Vec::new();
        for (r, h) in self.rank_host.iter().enumerate() {
            if *h == host && !exited[r] {
                exited[r] = true;
                *left -= 1;
                lost.push(r);
            }
        }
        lost
    }

    /// The failure an ended ssh session means when ranks of its host were `lost`.
    fn ssh_failure(
        &self,
        host: usize,
        end: RankEnd,
        detail: &str,
        lost: &[usize],
    ) -> Option<(String, i32)> {
        if lost.is_empty() {
            return None;
        }
        let name = self.host_names.get(host).cloned().unwrap_or_default();
        let detail = if detail.is_empty() {
            String::new()
        } else {
            format!(": {detail}")
        };
        let hint = match self.sessions {
            Sessions::Ssh => format!(
                "check that `ssh {name}` works without a password prompt (BatchMode) and that \
                 rgasnetrun exists there (GASNET_SSH_REMOTE_PATH)"
            ),
            Sessions::Srun => "check that `srun hostname` works in this allocation and that \
                 rgasnetrun exists at the same path on every node (GASNET_SSH_REMOTE_PATH)"
                .to_string(),
        };
        Some((
            format!(
                "{} {} before its ranks finished{detail}; {hint}",
                self.session_name(&name),
                describe_end(end)
            ),
            match end {
                RankEnd::Code(0) => 1,
                e => exit_code_of(e),
            },
        ))
    }

    fn session_name(&self, host: &str) -> String {
        match self.sessions {
            Sessions::Ssh => format!("ssh to {host}"),
            Sessions::Srun => format!("srun (the step with the agent on {host})"),
        }
    }

    fn trace_report(&self, r: &Report) {
        match r {
            Report::Misbehaved { what } => eprintln!("rgasnetrun: bootstrap: {what}"),
            Report::CollectiveFailed { reason } => trace(self.verbose, || {
                format!("bootstrap collective failed: {reason}")
            }),
            other => trace(self.verbose, || format!("bootstrap: {other:?}")),
        }
    }
}
