//! Running the plan: one group at a time (a benchmark on every path and peer in one repeat),
//! each job between two machine-state probes, and a group again when its probes show the
//! machine changed state during it (see [`super::probe`]).

use std::path::Path;

use super::paired::{self, JobStates};
use super::probe::{self, AroundJob, MachineState};
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

/// Runs every group of `plan` in order, writing each job's output to `logs`.
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
    for group in plan {
        let mut attempt = 0;
        loop {
            let mut samples = Vec::new();
            let mut states = Vec::new();
            let mut skipped = Vec::new();
            for (i, p) in group.iter().enumerate() {
                let index = first_index + i + 1;
                let again = if attempt > 0 { ", again" } else { "" };
                eprint!(
                    "[{index}/{total}] {} on {} (run {} of {}{again}) ... ",
                    p.bench,
                    p.path,
                    p.run + 1,
                    args.repeats
                );
                let before = MachineState::measure();
                let outcome = run_one(p, args, logs, before);
                match outcome {
                    Ok((figures, after)) => {
                        samples.extend(figures);
                        states.push((p, AroundJob { before, after }));
                    }
                    Err(why) => skipped.push(why),
                }
            }
            let spread = probe::spread(states.iter().flat_map(|(_, a)| [&a.before, &a.after]));
            if spread <= probe::STATE_TOLERANCE || attempt >= args.state_retries {
                if spread > probe::STATE_TOLERANCE {
                    eprintln!(
                        "  the machine changed state during this group in every try ({spread:.2} x between probes): its pairs in different states give no ratio"
                    );
                }
                done.samples.extend(samples);
                done.skipped.extend(skipped);
                for (p, around) in states {
                    done.states
                        .insert((p.path.clone(), p.bench.clone(), p.run), around);
                }
                break;
            }
            attempt += 1;
            eprintln!(
                "  the machine changed state during this group ({spread:.2} x between probes): running it again ({attempt} of {})",
                args.state_retries
            );
        }
        for p in group.iter().filter(|p| p.run == 0) {
            done.commands.push(p.job.display());
        }
        first_index += group.len();
    }
    Ok(done)
}

/// Runs one job and reads its figures; measures the machine's state after it. `Err`: why the
/// job gave no figures (reported as skipped).
fn run_one(
    p: &Planned,
    args: &CompareArgs,
    logs: &Path,
    before: MachineState,
) -> Result<(Vec<Sample>, MachineState), String> {
    let log = logs.join(format!("{}-{}-{}.txt", p.path, p.bench, p.run + 1));
    let label = format!("{} on {} run {}", p.bench, p.path, p.run + 1);
    let out = runner::run(&p.job).map_err(|e| {
        eprintln!("failed: {e}");
        format!("{label}: {e}")
    })?;
    let after = MachineState::measure();
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
    write(&log, text.as_bytes()).map_err(|e| format!("{label}: {e}"))?;
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
    let peer = paired::is_peer(&p.path);
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
    Ok((samples, after))
}
