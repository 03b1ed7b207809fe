//! Running the plan: one group at a time (a benchmark on every path and peer in one repeat),
//! a machine-state probe between two jobs (see [`super::probe`]), and the jobs of a pair that
//! ran in two states again (see [`super::pairs`]).

use std::path::Path;

use super::paired::JobStates;
use super::pairs;
use super::probe::{AroundJob, MachineState};
use super::{gasnet, runner, write, CompareArgs, CompareError, Planned, Sample};
use crate::parse::parse_output;

/// What the plan's jobs produced.
pub(super) struct Done {
    /// Every figure of the groups' counted runs.
    pub samples: Vec<Sample>,
    /// The machine's state around each counted job.
    pub states: JobStates,
    /// Jobs that failed or printed nothing readable, one message each.
    pub skipped: Vec<String>,
    /// The command of each job of the first repeat.
    pub commands: Vec<String>,
}

/// The latest run of one job of a group: its figures and surroundings, or why it gave none.
type JobRun = Result<(Vec<Sample>, AroundJob), String>;

/// Runs every group of `plan` in order, writing each job's output to `logs`.
///
/// One probe stands between two jobs: the state after a job is the state before the next.
/// When a pair of a group's jobs (rgasnet's path and a peer on the same medium) ran in two
/// states, its job that did not run in the state the machine is in now runs again; the other
/// jobs of the group are not repeated.
pub(super) fn run_all(
    plan: &[Vec<Planned>],
    args: &CompareArgs,
    logs: &Path,
) -> Result<Done, CompareError> {
    let mut done = Done {
        samples: Vec::new(),
        states: JobStates::new(),
        skipped: Vec::new(),
        commands: Vec::new(),
    };
    let total: usize = plan.iter().map(Vec::len).sum();
    let mut first_index = 0;
    let mut now: Option<MachineState> = None;
    for group in plan {
        let roles: Vec<pairs::Role> = group.iter().map(|p| p.role).collect();
        let pairs = pairs::pairs(&roles);
        let mut runs: Vec<Option<JobRun>> = group.iter().map(|_| None).collect();
        let mut to_run: Vec<usize> = (0..group.len()).collect();
        let mut attempt = 0;
        loop {
            for &i in &to_run {
                let (Some(p), Some(slot)) = (group.get(i), runs.get_mut(i)) else {
                    continue;
                };
                let again = if attempt > 0 { ", again" } else { "" };
                eprint!(
                    "[{}/{total}] {} on {} (run {} of {}{again}) ... ",
                    first_index + i + 1,
                    p.bench,
                    p.path,
                    p.run + 1,
                    args.repeats
                );
                let before = now.take().unwrap_or_else(MachineState::measure);
                let (after, figures) = run_one(p, args, logs, before);
                now = after;
                let around = AroundJob {
                    before,
                    after: after.unwrap_or_default(),
                };
                *slot = Some(figures.map(|f| (f, around)));
            }
            let state = now.unwrap_or_else(MachineState::measure);
            now = Some(state);
            let jobs: Vec<Option<&AroundJob>> = runs
                .iter()
                .map(|r| r.as_ref().and_then(|r| r.as_ref().ok()).map(|(_, a)| a))
                .collect();
            let again = pairs::to_run_again(&pairs, &jobs, &state);
            if again.is_empty() || attempt >= args.state_retries {
                if !again.is_empty() {
                    eprintln!(
                        "  a pair of this group ran in two machine states in every try: it gives no ratio in this repeat"
                    );
                }
                for (p, run) in group.iter().zip(runs) {
                    match run {
                        Some(Ok((samples, around))) => {
                            done.samples.extend(samples);
                            done.states
                                .insert((p.path.clone(), p.bench.clone(), p.run), around);
                        }
                        Some(Err(why)) => done.skipped.push(why),
                        None => {}
                    }
                }
                break;
            }
            attempt += 1;
            let names: Vec<&str> = again
                .iter()
                .filter_map(|&i| group.get(i).map(|p| p.path.as_str()))
                .collect();
            eprintln!(
                "  a pair ran in two machine states: running {} again, in the present state ({attempt} of {})",
                names.join(", "),
                args.state_retries
            );
            to_run = again;
        }
        for p in group.iter().filter(|p| p.run == 0) {
            done.commands.push(p.job.display());
        }
        first_index += group.len();
    }
    Ok(done)
}

/// Runs one job and reads its figures; measures the machine's state after it (`None` when the
/// job could not be started). `Err`: why the job gave no figures (reported as skipped).
fn run_one(
    p: &Planned,
    args: &CompareArgs,
    logs: &Path,
    before: MachineState,
) -> (Option<MachineState>, Result<Vec<Sample>, String>) {
    let log = logs.join(format!("{}-{}-{}.txt", p.path, p.bench, p.run + 1));
    let label = format!("{} on {} run {}", p.bench, p.path, p.run + 1);
    let out = match runner::run(&p.job) {
        Ok(out) => out,
        Err(e) => {
            eprintln!("failed: {e}");
            return (None, Err(format!("{label}: {e}")));
        }
    };
    let after = MachineState::measure();
    (
        Some(after),
        read_figures(p, args, &log, &label, before, after, out),
    )
}

/// Writes a finished job's log and reads its figures.
fn read_figures(
    p: &Planned,
    args: &CompareArgs,
    log: &Path,
    label: &str,
    before: MachineState,
    after: MachineState,
    out: runner::JobOutput,
) -> Result<Vec<Sample>, String> {
    let text = format!(
        "$ {}\n--- machine before: {}; after: {}\n--- stdout\n{}--- stderr\n{}--- exit {:?}{} after {:.1} s\n",
        p.job.display(),
        before.describe(),
        after.describe(),
        out.stdout,
        out.stderr,
        out.code,
        if out.timed_out {
            " (stopped at the deadline)"
        } else {
            ""
        },
        out.elapsed.as_secs_f64()
    );
    write(log, text.as_bytes()).map_err(|e| format!("{label}: {e}"))?;
    if !out.success() {
        let why = if out.timed_out {
            format!("did not finish within {}s", args.timeout_secs)
        } else {
            format!("exit status {:?}", out.code)
        };
        eprintln!("failed ({why}); see {}", log.display());
        return Err(format!("{label}: {why} (log: {})", log.display()));
    }
    let records = parse_output(&out.stdout).map_err(|e| {
        eprintln!("unreadable output: {e}");
        format!("{label}: {e}")
    })?;
    eprintln!(
        "{} figures in {:.1} s ({})",
        records.len(),
        out.elapsed.as_secs_f64(),
        after.describe()
    );
    let peer = p.role.peer;
    let samples = records
        .into_iter()
        .map(|mut record| {
            if peer {
                record.figure = gasnet::canonical_figure(&p.bench, &record.figure);
            }
            Sample {
                path: p.path.clone(),
                bench: p.bench.clone(),
                run: p.run,
                record,
            }
        })
        .collect();
    Ok(samples)
}
