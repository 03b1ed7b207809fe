//! `rgasnetrun`: starts an rgasnet job (locally, over ssh, through srun or under mpirun), serves its
//! bootstrap and supervises it: the ranks live and die together.
//!
//! The same executable has two internal modes, chosen by the first argument: the exec shim
//! (`__rgasnet_exec`, runs in each child before the program) and the ssh agent
//! (`__rgasnet_agent`, started on each remote host by ssh or srun).
#![forbid(unsafe_code)]

mod agent;
mod cli;
mod hostlist;
mod job;
mod local;
mod mpirun;
mod plan;
mod procs;
mod slurm;
mod ssh;

use std::ffi::OsString;

use clap::Parser;
use rgasnet_launcher::env;

/// First argument that selects the exec shim.
pub(crate) const SHIM_ARG: &str = "__rgasnet_exec";
/// First argument that selects the ssh agent.
pub(crate) const AGENT_ARG: &str = "__rgasnet_agent";

/// The `RGASNET_*` variables of one rank.
pub(crate) fn rank_env(
    rank: u32,
    size: u32,
    job_key: u64,
    bootstrap: &str,
    host_ranks: &[u32],
    host: &str,
    spawner: &str,
) -> Vec<(String, String)> {
    vec![
        (env::RANK.into(), rank.to_string()),
        (env::SIZE.into(), size.to_string()),
        (env::JOB_KEY.into(), env::format_job_key(job_key)),
        (env::BOOTSTRAP.into(), bootstrap.to_string()),
        (env::HOST_RANKS.into(), env::format_rank_list(host_ranks)),
        (env::HOST.into(), host.to_string()),
        (env::SPAWNER.into(), spawner.to_string()),
    ]
}

fn main() {
    let args: Vec<OsString> = std::env::args_os().collect();
    match args.get(1).and_then(|a| a.to_str()) {
        Some(SHIM_ARG) => std::process::exit(procs::exec_shim(&args[2..])),
        Some(AGENT_ARG) => std::process::exit(agent::main(&args[2..])),
        _ => {}
    }
    let cli = cli::Cli::parse();
    let code = match cli::resolve(cli).and_then(run) {
        Ok(code) => code,
        Err(e) => {
            let said = rgasnet_launcher::error_chain(e.chain());
            eprintln!("rgasnetrun: {said}");
            let not_runnable = said.contains("program ");
            if not_runnable {
                127
            } else {
                2
            }
        }
    };
    std::process::exit(code);
}

fn run(job: cli::Job) -> anyhow::Result<i32> {
    job::trace(job.verbose, || {
        format!(
            "spawner {}, {} rank(s), host(s) {}",
            job.spawner.name(),
            job.ranks,
            if job.hosts.is_empty() {
                "(from mpirun)".into()
            } else {
                job.hosts.join(",")
            }
        )
    });
    match job.spawner {
        plan::Spawner::Local => local::run(&job),
        plan::Spawner::Ssh => ssh::run(&job),
        plan::Spawner::Slurm => slurm::run(&job),
        plan::Spawner::Mpi => mpirun::run(&job),
    }
}
